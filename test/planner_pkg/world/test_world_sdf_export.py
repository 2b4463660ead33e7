"""Gazebo SDF export: well-formed XML whose geometry and poses match the World exactly."""
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from planner_pkg.world import Box, Cylinder, Sphere, World, generate_world, to_sdf


def numbers(text):
    return [float(v) for v in text.split()]


def shape(element):
    """Tags and texts of an element's subtree, ignoring indentation."""
    return [(e.tag, (e.text or "").strip()) for e in element.iter()]


def parse(world, **kwargs):
    root = ET.fromstring(to_sdf(world, **kwargs))
    assert root.tag == "sdf" and root.get("version") == "1.9"
    (element,) = root.findall("world")
    return element


def test_geometry_and_poses_match_the_world():
    world = World((-5, -5, 0), (5, 5, 4), [
        Cylinder((1.5, -2.0), 0.4, 3.2),
        Box((0.0, 1.0, 0.75), (1.0, 2.0, 1.5), 0.6),
        Sphere((-2.0, 2.0, 1.5), 0.7),
    ])
    element = parse(world, name="test_world")
    assert element.get("name") == "test_world"
    (sun,) = element.findall("light")
    assert sun.get("type") == "directional" and sun.get("name") == "sun"
    models = {m.get("name"): m for m in element.findall("model")}
    assert set(models) == {"ground_plane", "obstacle_0", "obstacle_1", "obstacle_2"}
    assert numbers(models["ground_plane"].find("link/collision/geometry/plane/normal").text) \
        == [0, 0, 1]
    for i, obstacle in enumerate(world.obstacles):
        model = models[f"obstacle_{i}"]
        assert model.find("static").text == "true"
        pose = numbers(model.find("pose").text)
        collision = model.find("link/collision/geometry")
        visual = model.find("link/visual/geometry")
        assert shape(collision) == shape(visual)
        if isinstance(obstacle, Cylinder):
            assert pose == [*obstacle.center, obstacle.height / 2, 0, 0, 0]
            assert float(collision.find("cylinder/radius").text) == obstacle.radius
            assert float(collision.find("cylinder/length").text) == obstacle.height
        elif isinstance(obstacle, Box):
            assert pose == [*obstacle.center, 0, 0, obstacle.yaw]
            assert numbers(collision.find("box/size").text) == list(obstacle.size)
        else:
            assert pose == [*obstacle.center, 0, 0, 0]
            assert float(collision.find("sphere/radius").text) == obstacle.radius


def test_exported_shapes_occupy_the_same_space():
    # Rebuild the World from the SDF alone and compare distances at random points.
    world = generate_world("cluttered", 4, count=30)
    rebuilt = []
    for model in parse(world).findall("model"):
        if not model.get("name").startswith("obstacle_"):
            continue
        x, y, z, roll, pitch, yaw = numbers(model.find("pose").text)
        assert roll == pitch == 0.0
        geometry = model.find("link/collision/geometry")
        if geometry.find("cylinder") is not None:
            height = float(geometry.find("cylinder/length").text)
            assert z == height / 2
            rebuilt.append(Cylinder((x, y), float(geometry.find("cylinder/radius").text), height))
        elif geometry.find("box") is not None:
            rebuilt.append(Box((x, y, z), numbers(geometry.find("box/size").text), yaw))
        else:
            rebuilt.append(Sphere((x, y, z), float(geometry.find("sphere/radius").text)))
    copy = World(world.bounds_min, world.bounds_max, rebuilt)
    points = np.random.default_rng(0).uniform(world.bounds_min, world.bounds_max, (500, 3))
    np.testing.assert_array_equal(copy.signed_distance(points), world.signed_distance(points))


def test_ceiling_and_no_ground():
    world = World((-2, -3, 0), (2, 3, 2.5), [], ground=False, ceiling=2.5)
    models = {m.get("name"): m for m in parse(world).findall("model")}
    assert "ground_plane" not in models
    slab = models["ceiling"]
    pose = numbers(slab.find("pose").text)
    size = numbers(slab.find("link/collision/geometry/box/size").text)
    assert pose[2] - size[2] / 2 == pytest.approx(2.5)
    assert size[0] >= 4 and size[1] >= 6


def test_names_are_escaped_and_checked():
    world = generate_world("walls", 0, num_walls=1)
    assert parse(world, name='a "quoted" <world>').get("name") == 'a "quoted" <world>'
    with pytest.raises(ValueError, match="name"):
        to_sdf(world, name="")
    text = to_sdf(world)
    assert text.startswith('<?xml version="1.0" ?>\n<sdf version="1.9">')
    assert text.count("<model ") == len(world.obstacles) + 1   # + ground plane
