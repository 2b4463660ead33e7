"""Seeded world generators: determinism, clear start/goal zones, bounds, parameter checks."""
import math

import numpy as np
import pytest

from planner_pkg.world import (GENERATOR_PARAMS, Box, Cylinder, World, generate_world)

KINDS = ("forest", "cluttered", "walls", "gates")


def aabb_union(world):
    boxes = [o.aabb() for o in world.obstacles]
    return np.min([b[0] for b in boxes], axis=0), np.max([b[1] for b in boxes], axis=0)


def obstacles_only(world):
    return World(world.bounds_min, world.bounds_max, world.obstacles, ground=False)


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_world_different_seed_different_world(kind):
    a, b, c = generate_world(kind, 7), generate_world(kind, 7), generate_world(kind, 8)
    assert a == b and a.to_dict() == b.to_dict()
    assert a != c
    assert len(a.obstacles) > 0


@pytest.mark.parametrize("kind, params", [
    ("forest", {}), ("forest", {"count": 30, "size_z": 8.0, "height_max": 8.0}),
    ("cluttered", {}), ("cluttered", {"ceiling": True, "count": 40}),
    ("walls", {}), ("walls", {"windows_per_wall": 3, "num_walls": 2}),
    ("gates", {}), ("gates", {"legs": False, "num_gates": 4}),
])
def test_bounds_contain_every_obstacle(kind, params):
    for seed in range(3):
        world = generate_world(kind, seed, **params)
        low, high = aabb_union(world)
        assert np.all(world.bounds_min <= low) and np.all(high <= world.bounds_max)
        assert world.bounds_min[2] == 0.0


@pytest.mark.parametrize("kind", ["forest", "cluttered", "walls"])
def test_start_and_goal_zones_are_clear(kind):
    defaults = GENERATOR_PARAMS[kind]()
    for seed in range(5):
        world = obstacles_only(generate_world(kind, seed, clear_radius=2.5))
        for p in (defaults.start, defaults.goal):
            assert world.signed_distance(p) >= 2.5 - 1e-9
        # Points a hair inside the clear radius are free too (the zone is a ball, or a column).
        assert not world.collides(np.array([defaults.start]), 2.5 - 1e-6)[0]


def test_forest_clear_zone_is_a_vertical_column_and_density_sets_count():
    world = generate_world("forest", 3, density=0.05, clear_radius=3.0)
    assert len(world.obstacles) == round(0.05 * 50 * 20)
    assert all(isinstance(o, Cylinder) for o in world.obstacles)
    for x in (-20.0, 20.0):
        for o in world.obstacles:
            assert math.hypot(o.center[0] - x, o.center[1]) - o.radius >= 3.0
    radii = [o.radius for o in world.obstacles]
    heights = [o.height for o in world.obstacles]
    assert 0.25 <= min(radii) and max(radii) <= 0.5
    assert 4.0 <= min(heights) and max(heights) <= 5.0
    assert len(generate_world("forest", 3, count=17).obstacles) == 17


def test_cluttered_mixes_shapes_and_optional_ceiling():
    world = generate_world("cluttered", 2, count=90)
    kinds = {type(o).__name__ for o in world.obstacles}
    assert kinds == {"Sphere", "Box", "Cylinder"}
    assert world.ceiling is None
    room = generate_world("cluttered", 2, ceiling=True, size_z=4.0, box_size_max=2.0)
    assert room.ceiling == 4.0 == room.bounds_max[2]
    only_spheres = generate_world("cluttered", 2, box_weight=0, cylinder_weight=0)
    assert {type(o).__name__ for o in only_spheres.obstacles} == {"Sphere"}


def test_walls_block_everything_but_the_windows():
    world = generate_world("walls", 4, num_walls=3, windows_per_wall=2)
    start = np.array(GENERATOR_PARAMS["walls"]().start)
    xs = sorted({o.center[0] for o in world.obstacles})
    assert len(xs) == 3
    # A straight line at the start's height hits the first wall unless a window happens to be
    # there; a dense sweep across the wall finds exactly the window openings.
    ys = np.linspace(-4.99, 4.99, 2000)
    zs = np.linspace(0.01, 3.99, 400)
    grid = np.stack(np.meshgrid(ys, zs), axis=-1).reshape(-1, 2)
    points = np.column_stack([np.full(len(grid), xs[0]), grid])
    free = ~obstacles_only(world).collides(points, 1e-9)
    free_fraction = free.mean()
    assert 2 * 1.5 * 1.5 / (10 * 4) * 0.9 < free_fraction < 2 * 1.5 * 1.5 / (10 * 4) * 1.1
    assert world.signed_distance(start) > 0


def test_gates_form_a_loop_of_square_frames():
    params = GENERATOR_PARAMS["gates"]()
    world = generate_world("gates", 5)
    assert len(world.obstacles) == 4 * params.num_gates
    assert all(isinstance(o, Box) for o in world.obstacles)
    start = (params.track_radius_x, 0.0, params.gate_height)
    assert obstacles_only(world).signed_distance(start) >= params.clear_radius
    free = obstacles_only(world)
    for g in range(params.num_gates):
        left, right, top, bottom = world.obstacles[4 * g: 4 * g + 4]
        centre = 0.5 * (np.array(top.center) + np.array(bottom.center))
        # Opening centre is free with at least half the opening of clearance (minus rounding).
        assert free.signed_distance(centre) >= 0.5 * params.gate_opening - 2e-3
        assert left.size[2] == pytest.approx(left.center[2] * 2)     # legs reach the ground
        assert top.yaw == bottom.yaw == left.yaw == right.yaw
        # Gate heading follows the counter-clockwise track within the yaw jitter.
        angle = 2 * math.pi * (g + 0.5) / params.num_gates
        heading = math.atan2(params.track_radius_y * math.cos(angle),
                             -params.track_radius_x * math.sin(angle))
        gap = (top.yaw - heading + math.pi) % (2 * math.pi) - math.pi
        assert abs(gap) <= params.yaw_jitter + 1e-3
    # Flying through each gate's centre along its heading hits nothing within the frame depth.
    for g in range(params.num_gates):
        top, bottom = world.obstacles[4 * g + 2: 4 * g + 4]
        centre = 0.5 * (np.array(top.center) + np.array(bottom.center))
        heading = np.array([math.cos(top.yaw), math.sin(top.yaw), 0.0])
        assert free.raycast(centre - 0.5 * heading, heading, 1.0) == np.inf


@pytest.mark.parametrize("kind, params, name", [
    ("forest", {"size_x": -1.0}, "size_x"),
    ("forest", {"density": -0.1}, "density"),
    ("forest", {"count": 2.5}, "count"),
    ("forest", {"radius_min": 0.6, "radius_max": 0.5}, "radius_min"),
    ("forest", {"height_max": 9.0}, "height_max"),
    ("forest", {"start": (100.0, 0.0, 1.0)}, "start"),
    ("forest", {"goal": (0.0, 0.0)}, "goal"),
    ("forest", {"clear_radius": float("nan")}, "clear_radius"),
    ("forest", {"count": 5, "clear_radius": 40.0}, "count"),
    ("cluttered", {"count": -1}, "count"),
    ("cluttered", {"sphere_weight": 0, "box_weight": 0, "cylinder_weight": 0}, "sphere_weight"),
    ("cluttered", {"box_size_max": 7.0}, "box_size_max"),
    ("cluttered", {"sphere_radius_min": 0.0}, "sphere_radius_min"),
    ("cluttered", {"ceiling": 3.0}, "ceiling"),
    ("cluttered", {"cylinder_height_max": 0.5}, "cylinder_height_min"),
    ("walls", {"windows_per_wall": 0}, "windows_per_wall"),
    ("walls", {"windows_per_wall": 8}, "windows_per_wall"),
    ("walls", {"window_height": 5.0}, "window_height"),
    ("walls", {"sill_min": 2.0, "sill_max": 1.0}, "sill_min"),
    ("walls", {"num_walls": 200}, "goal"),
    ("walls", {"thickness": True}, "thickness"),
    ("gates", {"num_gates": 0}, "num_gates"),
    ("gates", {"num_gates": 40}, "num_gates"),
    ("gates", {"gate_height": 0.5}, "gate_height"),
    ("gates", {"yaw_jitter": 2.0}, "yaw_jitter"),
    ("gates", {"clear_radius": 6.0}, "clear_radius"),
    ("gates", {"legs": "yes"}, "legs"),
    ("gates", {"wings": 2}, "wings"),
])
def test_bad_parameters_raise_value_error_naming_them(kind, params, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        generate_world(kind, 0, **params)


@pytest.mark.parametrize("seed", [-1, 1.5, None, True, "3"])
def test_bad_seed(seed):
    with pytest.raises(ValueError, match="seed"):
        generate_world("forest", seed)


def test_unknown_kind():
    with pytest.raises(ValueError, match="unknown world kind 'city'"):
        generate_world("city", 0)


# -- issue 20 item 3: bounded generator parameters --------------------------------------------
@pytest.mark.parametrize("kind,params,words", [
    ("forest", {"count": 100_000_000}, "'count'"),
    ("forest", {"density": 1e300, "size_x": 1e5, "size_y": 1e5}, "'density'"),
    ("forest", {"size_x": 1e300}, "'size_x'"),
    ("cluttered", {"count": 10**9}, "'count'"),
    ("walls", {"num_walls": 10**6, "thickness": 1e-6}, "'num_walls'"),
    ("walls", {"windows_per_wall": 10**6, "size_y": 1e5, "window_width": 0.01}, "'windows_per_wall'"),
    ("gates", {"num_gates": 10**9}, "'num_gates'"),
    ("gates", {"track_radius_x": 1e300}, "'track_radius_x'"),
])
def test_unbounded_parameters_are_refused_before_generating(kind, params, words):
    from planner_pkg.world.world import MAX_OBSTACLES

    with pytest.raises(ValueError, match=words) as info:
        generate_world(kind, 0, **params)
    assert str(MAX_OBSTACLES) in str(info.value) or "<=" in str(info.value)


def test_the_obstacle_cap_itself_is_allowed():
    from planner_pkg.world.world import MAX_OBSTACLES

    world = generate_world("forest", 1, count=MAX_OBSTACLES, size_x=2000.0, size_y=2000.0)
    assert len(world.obstacles) == MAX_OBSTACLES


def test_a_cluttered_world_that_cannot_fit_gives_up_early(monkeypatch):
    """Clear zones covering the whole map: every candidate is rejected; the generator stops at the
    first round's acceptance rate instead of building 200 rounds of candidates."""
    from planner_pkg.world import gen_scatter

    built = []
    real = gen_scatter._random_obstacle

    def counting(*args):
        built.append(1)
        return real(*args)

    monkeypatch.setattr(gen_scatter, "_random_obstacle", counting)
    with pytest.raises(ValueError, match="placed only 0 of 2000"):
        generate_world("cluttered", 0, count=2000, clear_radius=30.0)
    assert len(built) <= 2 * 2000  # at most two rounds, not 200
