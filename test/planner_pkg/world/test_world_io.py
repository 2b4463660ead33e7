"""World files: exact YAML/JSON round trips and every validation error path."""
import json
import math

import numpy as np
import pytest
import yaml

from planner_pkg.world import (Box, Cylinder, Sphere, World, WorldFormatError, generate_world,
                               load_world, save_world, world_from_dict)


def valid():
    return {
        "bounds": {"min": [-5, -5, 0], "max": [5, 5, 4]},
        "obstacles": [
            {"type": "cylinder", "center": [1, 2], "radius": 0.5, "height": 3},
            {"type": "box", "center": [0, 0, 1], "size": [1, 2, 2], "yaw": 0.25},
            {"type": "sphere", "center": [-2, 1, 2], "radius": 0.75},
            {"type": "box", "center": [3, -3, 0.5], "size": [1, 1, 1]},
        ],
    }


def test_valid_dict_builds_the_expected_world():
    world = world_from_dict(valid())
    assert world.obstacles == (Cylinder((1, 2), 0.5, 3), Box((0, 0, 1), (1, 2, 2), 0.25),
                               Sphere((-2, 1, 2), 0.75), Box((3, -3, 0.5), (1, 1, 1), 0.0))
    assert world.bounds_min.dtype == np.float64 and world.bounds_min.shape == (3,)
    assert world.bounds_min.tolist() == [-5, -5, 0] and world.bounds_max.tolist() == [5, 5, 4]
    assert world.ground is True and world.ceiling is None
    assert world_from_dict({"bounds": {"min": [0, 0, 0], "max": [1, 1, 1]}}).obstacles == ()
    assert world_from_dict({"bounds": {"min": [0, 0, 0], "max": [1, 1, 1]}, "obstacles": None,
                            "ground": False, "ceiling": 3}).ceiling == 3.0


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_round_trip_is_exact(tmp_path, suffix):
    rng = np.random.default_rng(0)
    awkward = [Sphere(tuple(rng.normal(size=3) * 1e-7), 1e-5 + rng.random()),
               Box((1 / 3, 2 / 3, 1e16), (1e-9, 0.1 + 0.2, 7.0), -math.pi),
               Cylinder((-0.0, 123456.789), 0.30000000000000004, 1e-300)]
    for world in (World((-5.5, -1e-3, 0), (5, 2, 1e3), awkward, ground=False, ceiling=12.5),
                  generate_world("cluttered", 3, ceiling=True), generate_world("gates", 1)):
        path = tmp_path / f"world{suffix}"
        save_world(world, path)
        again = load_world(path)
        assert again == world
        assert again.to_dict() == world.to_dict()
        first_text = path.read_text()
        save_world(again, str(path))           # str paths work too
        assert path.read_text() == first_text and load_world(str(path)) == world


def test_saved_files_are_the_documented_format(tmp_path):
    world = world_from_dict(valid())
    save_world(world, tmp_path / "w.yaml")
    save_world(world, tmp_path / "w.json")
    from_yaml = yaml.safe_load((tmp_path / "w.yaml").read_text())
    from_json = json.loads((tmp_path / "w.json").read_text())
    assert from_yaml == from_json
    assert from_yaml["bounds"] == {"min": [-5.0, -5.0, 0.0], "max": [5.0, 5.0, 4.0]}
    assert from_yaml["obstacles"][0] == {"type": "cylinder", "center": [1.0, 2.0], "radius": 0.5,
                                         "height": 3.0}
    assert from_yaml["obstacles"][3]["yaw"] == 0.0
    assert from_yaml["ground"] is True and from_yaml["ceiling"] is None


def edit(path, value):
    """A valid dict with the entry at ``path`` (a tuple of keys/indices) set or deleted."""
    data = valid()
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


DELETE = object()


@pytest.mark.parametrize("path, value, index, key, message", [
    (("obstacles", 1, "size"), [1, -2, 3], 1, "size",
     "obstacle 1 (box): key 'size' must be 3 positive finite numbers, got [1, -2, 3]"),
    (("obstacles", 1, "size"), [1, 2], 1, "size", "obstacle 1 (box): key 'size' must be 3"),
    (("obstacles", 1, "size"), [1, float("nan"), 2], 1, "size", "finite"),
    (("obstacles", 1, "size"), [1, float("inf"), 2], 1, "size", "finite"),
    (("obstacles", 1, "size"), [1, 0, 2], 1, "size", "positive"),
    (("obstacles", 1, "size"), "1 2 3", 1, "size", "got '1 2 3'"),
    (("obstacles", 1, "size"), [1, True, 2], 1, "size", "must be 3"),
    (("obstacles", 1, "yaw"), float("nan"), 1, "yaw", "obstacle 1 (box): key 'yaw' must be a"),
    (("obstacles", 1, "yaw"), "0.1", 1, "yaw", "key 'yaw'"),
    (("obstacles", 1, "center"), [0, 0], 1, "center", "key 'center' must be 3 finite"),
    (("obstacles", 0, "center"), [0, 0, 0], 0, "center",
     "obstacle 0 (cylinder): key 'center' must be 2 finite numbers"),
    (("obstacles", 0, "radius"), -1, 0, "radius", "key 'radius' must be a positive"),
    (("obstacles", 0, "radius"), 0, 0, "radius", "positive"),
    (("obstacles", 0, "height"), float("inf"), 0, "height", "key 'height'"),
    (("obstacles", 0, "height"), None, 0, "height", "got None"),
    (("obstacles", 2, "radius"), [1], 2, "radius", "obstacle 2 (sphere): key 'radius'"),
    (("obstacles", 2, "center"), [0, 0, float("nan")], 2, "center", "finite"),
    (("obstacles", 0, "height"), DELETE, 0, "height",
     "obstacle 0 (cylinder): missing key 'height'"),
    (("obstacles", 1, "center"), DELETE, 1, "center", "obstacle 1 (box): missing key 'center'"),
    (("obstacles", 2, "radius"), DELETE, 2, "radius", "missing key 'radius'"),
    (("obstacles", 1, "type"), DELETE, 1, "type", "obstacle 1: missing key 'type'"),
    (("obstacles", 3, "type"), "cone", 3, "type", "obstacle 3: unknown type 'cone'"),
    (("obstacles", 3, "type"), 7, 3, "type", "unknown type 7"),
    (("obstacles", 2, "colour"), "red", 2, "colour", "obstacle 2 (sphere): unknown key 'colour'"),
    (("obstacles", 0, "yaw"), 0.0, 0, "yaw", "obstacle 0 (cylinder): unknown key 'yaw'"),
    (("obstacles", 1), [1, 2, 3], 1, None, "obstacle 1: must be a mapping"),
    (("obstacles",), {"type": "box"}, None, "obstacles", "key 'obstacles' must be a list"),
    (("bounds",), DELETE, None, "bounds", "missing key 'bounds'"),
    (("bounds",), [0, 0, 0], None, "bounds", "key 'bounds' must be a mapping"),
    (("bounds", "min"), DELETE, None, "min", "bounds: missing key 'min'"),
    (("bounds", "max"), [1, 1], None, "max", "bounds: key 'max' must be 3 finite numbers"),
    (("bounds", "max"), [1, 1, float("inf")], None, "max", "finite"),
    (("bounds", "max"), [5, -6, 4], None, "bounds", "'min' must be < 'max'"),
    (("bounds", "centre"), [0, 0, 0], None, "centre", "bounds: unknown key 'centre'"),
    (("ground",), "yes", None, "ground", "key 'ground' must be true or false"),
    (("ground",), 1, None, "ground", "key 'ground' must be true or false"),
    (("ceiling",), -2.0, None, "ceiling", "key 'ceiling' must be null or a positive"),
    (("ceiling",), float("nan"), None, "ceiling", "key 'ceiling'"),
    (("ceiling",), True, None, "ceiling", "key 'ceiling'"),
    (("gravity",), 9.81, None, "gravity", "unknown key 'gravity'"),
])
def test_validation_errors_name_the_obstacle_and_key(path, value, index, key, message):
    with pytest.raises(WorldFormatError) as info:
        world_from_dict(edit(path, value))
    assert message in str(info.value)
    assert info.value.index == index
    assert info.value.key == key
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("data", [[1, 2], "bounds", None, 3.0])
def test_non_mapping_top_level(data):
    with pytest.raises(WorldFormatError, match="must be a mapping"):
        world_from_dict(data)


@pytest.mark.parametrize("name, text, message", [
    ("bad.yaml", "bounds: {min: [0, 0, 0], max: [1, 1, 1]\nobstacles: [", "malformed YAML"),
    ("bad.json", '{"bounds": {"min": [0, 0, 0], "max": [1, 1, 1]}, ', "malformed JSON"),
    ("list.yaml", "- 1\n- 2\n", "must be a mapping"),
    ("empty.yaml", "", "must be a mapping"),
    ("nan.json", '{"bounds": {"min": [0, 0, 0], "max": [1, 1, NaN]}}', "finite"),
    ("code.yaml", "!!python/object/apply:os.system ['echo pwned']\n", "malformed YAML"),
    ("box.yaml", "bounds: {min: [0, 0, 0], max: [9, 9, 9]}\nobstacles:\n"
                 "  - {type: box, center: [1, 1, 1], size: [1, -2, 3]}\n",
     "box.yaml: obstacle 0 (box): key 'size' must be 3 positive finite numbers, got [1, -2, 3]"),
])
def test_malformed_files(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(WorldFormatError) as info:
        load_world(path)
    assert message in str(info.value)


def test_file_extension_and_missing_file(tmp_path):
    world = world_from_dict(valid())
    with pytest.raises(WorldFormatError, match="extension"):
        save_world(world, tmp_path / "world.txt")
    (tmp_path / "world.toml").write_text("x = 1")
    with pytest.raises(WorldFormatError, match="extension"):
        load_world(tmp_path / "world.toml")
    with pytest.raises(FileNotFoundError):
        load_world(tmp_path / "absent.yaml")


def test_world_constructor_rejects_bad_arguments():
    with pytest.raises(ValueError, match="bounds_min must be < bounds_max"):
        World((0, 0, 0), (1, 0, 1))
    with pytest.raises(ValueError, match="ceiling"):
        World((0, 0, 0), (1, 1, 1), ceiling=0.0)
    with pytest.raises(ValueError, match="ground"):
        World((0, 0, 0), (1, 1, 1), ground=None)
    with pytest.raises(TypeError, match="obstacle 0"):
        World((0, 0, 0), (1, 1, 1), [{"type": "sphere"}])
    with pytest.raises(ValueError, match="key 'radius'"):
        Sphere((0, 0, 0), -1.0)
    with pytest.raises(ValueError, match="key 'center' must be 2"):
        Cylinder((0, 0, 0), 1.0, 1.0)


def test_a_world_file_that_is_not_utf8_raises_world_format_error(tmp_path):
    """Issue 20 item 4: a Latin-1 or binary file was a bare UnicodeDecodeError."""
    for name, data in (("latin1.yaml", "bounds: {min: [0, 0, 0], max: [1, 1, 1]}  # caf\xe9\n".encode("latin-1")),
                       ("binary.json", bytes(range(256)))):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(WorldFormatError, match=f"{name}: not UTF-8 text"):
            load_world(path)


# -- issue 20 item 3: size caps (memory) -------------------------------------------------------
def test_world_files_above_the_size_caps_are_refused(tmp_path, monkeypatch):
    from planner_pkg.world import io as world_io
    from planner_pkg.world.world import MAX_EXTENT_M, MAX_OBSTACLES

    far = dict(valid(), bounds={"min": [-5, -5, 0], "max": [5, 2e5, 4]})
    with pytest.raises(WorldFormatError, match=r"bounds: coordinates must lie within \+-100000 m"):
        world_from_dict(far)
    edge = dict(valid(), bounds={"min": [-MAX_EXTENT_M, -5, 0], "max": [MAX_EXTENT_M, 5, 4]})
    assert world_from_dict(edge).bounds_max[0] == MAX_EXTENT_M  # the bound itself is allowed

    cylinder = {"type": "cylinder", "center": [1, 2], "radius": 0.5, "height": 3}
    many = dict(valid(), obstacles=[cylinder] * (MAX_OBSTACLES + 1))  # one list, shared items: cheap
    with pytest.raises(WorldFormatError, match=f"{MAX_OBSTACLES + 1} obstacles, more than the {MAX_OBSTACLES}"):
        world_from_dict(many)
    assert len(world_from_dict(dict(valid(), obstacles=[cylinder] * 1000)).obstacles) == 1000

    path = tmp_path / "w.json"
    save_world(world_from_dict(valid()), path)
    size = path.stat().st_size
    monkeypatch.setattr(world_io, "MAX_WORLD_FILE_BYTES", size)
    assert len(load_world(path).obstacles) == 4  # exactly at the cap: read
    monkeypatch.setattr(world_io, "MAX_WORLD_FILE_BYTES", size - 1)
    with pytest.raises(WorldFormatError, match=f"w.json: {size} bytes, more than the {size - 1}"):
        load_world(path)
