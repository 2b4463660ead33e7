"""Ray casting of planner_pkg.world.World: analytic hits, a sphere-tracing reference, a
containment-marching reference, and agreement between the culled and brute-force drivers."""
import math

import numpy as np
import pytest

from planner_pkg.world import Box, Cylinder, Sphere, World
from planner_pkg.world.raycast import cast_brute, cast_single_origin

LOW, HIGH = (-10.0, -10.0, 0.0), (10.0, 10.0, 6.0)


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def random_obstacles(rng, n, spread=6.0):
    out = []
    for _ in range(n):
        kind = rng.integers(3)
        if kind == 0:
            out.append(Cylinder(tuple(rng.uniform(-spread, spread, 2)), rng.uniform(0.2, 1.2),
                                rng.uniform(0.5, 4.0)))
        elif kind == 1:
            out.append(Box(tuple(rng.uniform(-spread, spread, 3)), tuple(rng.uniform(0.2, 2.5, 3)),
                           rng.uniform(-4, 4)))
        else:
            out.append(Sphere(tuple(rng.uniform(-spread, spread, 3)), rng.uniform(0.2, 1.2)))
    return out


def contains(obstacles, points):
    """(N,) bool: point inside (or on) any obstacle, by direct membership tests."""
    inside = np.zeros(points.shape[0], dtype=bool)
    x, y, z = points.T
    for o in obstacles:
        if isinstance(o, Cylinder):
            inside |= (np.hypot(x - o.center[0], y - o.center[1]) <= o.radius) & (z >= 0) \
                & (z <= o.height)
        elif isinstance(o, Sphere):
            inside |= np.linalg.norm(points - o.center, axis=1) <= o.radius
        else:
            c, s = math.cos(o.yaw), math.sin(o.yaw)
            dx, dy, dz = (points - o.center).T
            lx, ly = c * dx + s * dy, -s * dx + c * dy
            hx, hy, hz = (0.5 * v for v in o.size)
            inside |= (np.abs(lx) <= hx) & (np.abs(ly) <= hy) & (np.abs(dz) <= hz)
    return inside


@pytest.mark.parametrize("obstacle, origin, direction, expected", [
    (Sphere((5, 0, 2), 1.0), (0, 0, 2), (1, 0, 0), 4.0),
    (Sphere((5, 0, 2), 1.0), (0, 0, 2), (-1, 0, 0), math.inf),
    (Sphere((5, 0, 2), 1.0), (0, 1, 2), (1, 0, 0), 5.0),                  # tangent
    (Cylinder((5, 0), 1.0, 3.0), (0, 0, 1), (1, 0, 0), 4.0),              # side
    (Cylinder((5, 0), 1.0, 3.0), (5, 0, 5), (0, 0, -1), 2.0),             # top cap, vertical ray
    (Cylinder((5, 0), 1.0, 3.0), (5.5, 0, 5), (0, 0, -1), 2.0),           # top cap off axis
    (Cylinder((5, 0), 1.0, 3.0), (0, 0, 5), unit((5, 0, -2)), math.hypot(5, 2)),  # top rim
    (Cylinder((5, 0), 1.0, 3.0), (0, 0, 4), (1, 0, 0), math.inf),         # passes over
    (Box((5, 0, 1), (2, 2, 2), 0.0), (0, 0, 1), (1, 0, 0), 4.0),
    (Box((5, 0, 1), (2, 2, 2), math.pi / 4), (0, 0, 1), (1, 0, 0), 5.0 - math.sqrt(2)),  # edge
    (Box((5, 0, 1), (2, 2, 2), 0.0), (5, 0, 4), (0, 0, -1), 2.0),         # top, vertical ray
    (Box((5, 0, 1), (2, 2, 2), 0.0), (0, 1, 1), (1, 0, 0), 4.0),          # grazes a face
    (Box((5, 0, 1), (2, 2, 2), 0.3), (5, 0, 1), (0, 1, 0), 0.0),          # origin inside
    (Sphere((5, 0, 2), 1.0), (5, 0, 2), (0, 0, 1), 0.0),                  # origin inside
])
def test_analytic_hits(obstacle, origin, direction, expected):
    world = World(LOW, HIGH, [obstacle], ground=False)
    got = world.raycast(origin, direction, 50.0)
    assert isinstance(got, float)
    assert got == pytest.approx(expected, abs=1e-12)


def test_ground_ceiling_and_range():
    world = World(LOW, HIGH, ceiling=4.0)
    dirs = unit([[0, 0, -1], [0, 0, 1], [1, 0, -1], [1, 0, 0], [1, 0, 1]])
    got = world.raycast((0, 0, 1), dirs, 100.0)
    np.testing.assert_allclose(got, [1.0, 3.0, math.sqrt(2), math.inf, 3 * math.sqrt(2)])
    np.testing.assert_allclose(world.raycast((0, 0, 1), dirs, 2.0),
                               [1.0, np.inf, math.sqrt(2), np.inf, np.inf], rtol=1e-15)
    assert world.raycast((0, 0, -1), (1, 0, 0), 10.0) == 0.0     # below ground: inside
    assert World(LOW, HIGH, ground=False).raycast((0, 0, 1), (0, 0, -1), 10.0) == math.inf
    # max_range inf is allowed; a hit exactly at max_range counts.
    assert world.raycast((0, 0, 1), (0, 0, -1), math.inf) == 1.0
    assert world.raycast((0, 0, 1), (0, 0, -1), 1.0) == 1.0


def test_directions_are_normalised_and_inputs_checked():
    world = World(LOW, HIGH, [Sphere((5, 0, 2), 1.0)])
    assert world.raycast((0, 0, 2), (7, 0, 0), 20.0) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="non-zero"):
        world.raycast((0, 0, 2), [[0, 0, 0]], 20.0)
    with pytest.raises(ValueError, match="max_range"):
        world.raycast((0, 0, 2), (1, 0, 0), 0.0)
    with pytest.raises(ValueError, match="max_range"):
        world.raycast((0, 0, 2), (1, 0, 0), float("nan"))
    with pytest.raises(ValueError, match="origins"):
        world.raycast(np.zeros((2, 3)), np.ones((3, 3)), 5.0)
    with pytest.raises(ValueError, match="directions"):
        world.raycast((0, 0, 2), np.ones((3, 2)), 5.0)
    with pytest.raises(ValueError, match="origins must be finite"):
        world.raycast((0, np.nan, 2), (1, 0, 0), 5.0)
    assert world.raycast((0, 0, 2), np.zeros((0, 3)), 5.0).shape == (0,)
    assert world.raycast(np.zeros((0, 3)), np.zeros((0, 3)), 5.0).shape == (0,)
    np.testing.assert_array_equal(world.raycast([[0, 0, 2]], [[1, 0, 0], [0, 0, -1]], 5.0),
                                  [4.0, 2.0])


def sphere_trace(world, origins, directions, max_range, iterations=3000, eps=1e-10):
    """Reference hit distance by sphere tracing the signed distance; NaN where not converged."""
    t = np.zeros(len(directions))
    result = np.full(len(directions), np.nan)
    active = np.ones(len(directions), dtype=bool)
    for _ in range(iterations):
        idx = np.flatnonzero(active)
        if not idx.size:
            break
        d = world.signed_distance(origins[idx] + t[idx, None] * directions[idx])
        hit = d < eps
        result[idx[hit]] = t[idx[hit]]
        t[idx] += np.maximum(d, 0.0)
        gone = t[idx] > max_range
        result[idx[gone & ~hit]] = np.inf
        active[idx[hit | gone]] = False
    return result


@pytest.mark.parametrize("shared_origin", [True, False])
def test_random_rays_match_sphere_tracing_and_marching(shared_origin):
    rng = np.random.default_rng(11)
    obstacles = random_obstacles(rng, 25)
    world = World(LOW, HIGH, obstacles, ceiling=5.5)
    n = 600
    if shared_origin:
        candidates = rng.uniform(-3, 3, (50, 3)) + [0, 0, 2.5]
        origin = candidates[np.argmax(world.signed_distance(candidates) > 0.1)]
        assert world.signed_distance(origin) > 0.1
        origins = np.tile(origin, (n, 1))
    else:
        origins = rng.uniform(-8, 8, (4 * n, 3)) * [1, 1, 0.3] + [0, 0, 2.5]
        origins = origins[world.signed_distance(origins) > 0.1][:n]
    directions = unit(rng.normal(size=(len(origins), 3)))
    max_range = 15.0
    got = world.raycast(origin if shared_origin else origins, directions, max_range)

    ref = sphere_trace(world, origins, directions, max_range)
    converged = ~np.isnan(ref)
    assert converged.mean() > 0.97     # only near-grazing rays converge too slowly
    hits = converged & np.isfinite(ref)
    assert hits.sum() > 100
    np.testing.assert_allclose(got[hits], ref[hits], atol=1e-7)
    np.testing.assert_array_equal(np.isinf(got[converged]), np.isinf(ref[converged]))

    # Consistency: every reported hit point lies on a surface.
    finite = np.isfinite(got)
    surface = world.signed_distance(origins[finite] + got[finite, None] * directions[finite])
    np.testing.assert_allclose(surface, 0.0, atol=1e-9)

    # Marching with direct membership tests: no sample before the reported hit is inside a
    # solid, and the first solid sample follows the hit within one step (unless the ray only
    # clips a sliver thinner than a step).
    step = 0.01
    steps = np.arange(0.0, max_range, step)
    agree = []
    for i in range(0, len(directions), 5):
        samples = origins[i] + steps[:, None] * directions[i]
        solid = contains(obstacles, samples) | (samples[:, 2] <= 0) | (samples[:, 2] >= 5.5)
        first = steps[np.argmax(solid)] if solid.any() else np.inf
        assert got[i] <= first + 1e-9
        agree.append(first == got[i] == np.inf or first - got[i] <= step + 1e-9)
    assert np.mean(agree) > 0.97


def test_culled_driver_equals_brute_force_exactly():
    rng = np.random.default_rng(5)
    world = World((-30, -30, 0), (30, 30, 8), random_obstacles(rng, 300, spread=25.0))
    blocks = world._blocks
    downward = unit(np.column_stack([rng.uniform(-0.3, 0.3, (1000, 2)), -np.ones(1000)]))
    for trial in range(6):
        origin = rng.uniform(-5, 5, 3) + [0, 0, 3]
        if trial >= 4:   # looking straight down from above an obstacle (az is degenerate)
            top = world.obstacles[trial]
            origin = np.array([*top.center[:2], 9.0])
            directions = downward.copy()
            directions[0] = [0, 0, -1]
        elif trial == 0:   # a camera-like fan
            az, el = np.meshgrid(np.linspace(-0.8, 0.8, 64), np.linspace(-0.6, 0.6, 48))
            directions = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)],
                                  axis=-1).reshape(-1, 3)
        else:
            directions = unit(rng.normal(size=(2000, 3)))
        if trial == 3:   # include exactly axis-parallel and vertical rays
            directions[:6] = [[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]]
        culled = cast_single_origin(blocks, origin, directions, np.inf)
        brute = cast_brute(blocks, origin[None], directions)
        np.testing.assert_array_equal(culled, brute)
        assert np.isfinite(brute).sum() > 50
        limited = cast_single_origin(blocks, origin, directions, 8.0)
        np.testing.assert_array_equal(np.where(limited <= 8.0, limited, np.inf),
                                      np.where(brute <= 8.0, brute, np.inf))


def test_axis_parallel_rays_on_face_planes():
    # Rays lying exactly in a face plane, or along an edge, exercise the 0 * inf slab cases.
    world = World(LOW, HIGH, [Box((5, 0, 1), (2, 2, 2), 0.0)], ground=False)
    origins = np.array([[0, 1, 1], [0, -1, 1], [0, 0, 2], [0, 1, 2], [0, 1.5, 1], [0, 0, 1]])
    got = world.raycast(origins, np.tile([1.0, 0, 0], (6, 1)), 20.0)
    np.testing.assert_array_equal(got, [4.0, 4.0, 4.0, 4.0, np.inf, 4.0])
    vertical = world.raycast(np.array([[5, 0, 5], [6, 0, 5], [6.5, 0, 5]]),
                             np.tile([0, 0, -1.0], (3, 1)), 20.0)
    np.testing.assert_array_equal(vertical, [3.0, 3.0, np.inf])


def test_many_rays_one_origin_use_the_same_answer_as_per_origin_rows():
    rng = np.random.default_rng(9)
    world = World(LOW, HIGH, random_obstacles(rng, 60))
    origin = np.array([0.0, 0.0, 1.0])
    directions = unit(rng.normal(size=(300, 3)))
    shared = world.raycast(origin, directions, 12.0)
    repeated = world.raycast(np.tile(origin, (300, 1)), directions, 12.0)
    one_by_one = np.array([world.raycast(origin, d, 12.0) for d in directions[:30]])
    np.testing.assert_array_equal(shared, repeated)
    np.testing.assert_allclose(shared[:30], one_by_one, atol=1e-12)
