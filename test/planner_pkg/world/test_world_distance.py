"""Signed distance, collision and culling of planner_pkg.world.World against independent
closest-point references and analytic values."""
import math

import numpy as np
import pytest

from planner_pkg.world import FAR_DISTANCE_M, Box, Cylinder, Sphere, World

LOW, HIGH = (-10.0, -10.0, 0.0), (10.0, 10.0, 6.0)


def open_world(obstacles, **kwargs):
    """A world whose only solids are ``obstacles`` (no ground) unless kwargs say otherwise."""
    kwargs.setdefault("ground", False)
    return World(LOW, HIGH, obstacles, **kwargs)


# --- scalar references: closest point by clamping, independent of the vectorised formulas ------
def ref_box(p, box):
    c, s = math.cos(box.yaw), math.sin(box.yaw)
    d = np.subtract(p, box.center)
    local = np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1], d[2]])
    half = 0.5 * np.array(box.size)
    if np.all(np.abs(local) <= half):
        return -float(np.min(half - np.abs(local)))
    return float(np.linalg.norm(local - np.clip(local, -half, half)))


def ref_cylinder(p, cyl):
    radial = math.hypot(p[0] - cyl.center[0], p[1] - cyl.center[1])
    z = p[2]
    if radial <= cyl.radius and 0.0 <= z <= cyl.height:
        return -min(cyl.radius - radial, z, cyl.height - z)
    closest_r = min(radial, cyl.radius)
    closest_z = min(max(z, 0.0), cyl.height)
    return math.hypot(radial - closest_r, z - closest_z)


def ref_sphere(p, sph):
    return float(np.linalg.norm(np.subtract(p, sph.center))) - sph.radius


REFERENCE = {Box: ref_box, Cylinder: ref_cylinder, Sphere: ref_sphere}


def random_obstacles(rng, n):
    out = []
    for _ in range(n):
        kind = rng.integers(3)
        if kind == 0:
            out.append(Cylinder(tuple(rng.uniform(-5, 5, 2)), rng.uniform(0.2, 1.5),
                                rng.uniform(0.5, 4.0)))
        elif kind == 1:
            out.append(Box(tuple(rng.uniform(-5, 5, 3)), tuple(rng.uniform(0.2, 3.0, 3)),
                           rng.uniform(-4, 4)))
        else:
            out.append(Sphere(tuple(rng.uniform(-5, 5, 3)), rng.uniform(0.2, 1.5)))
    return out


# --- analytic values ---------------------------------------------------------------------------
@pytest.mark.parametrize("point, expected", [
    ((3.0, 0.0, 1.0), 2.0),        # beside the side, at mid height
    ((0.0, 0.0, 3.0), 1.0),        # above the top cap
    ((3.0, 4.0, 3.0), math.hypot(4.0, 1.0)),  # beyond the top rim: distance to the rim circle
    ((0.0, 0.0, 1.0), -1.0),       # on the axis, 1 m below the top, radius 1: nearest is side/top
    ((0.5, 0.0, 0.2), -0.2),       # inside, closest to the bottom cap
    ((1.0, 0.0, 1.0), 0.0),        # on the side surface
    ((0.0, 0.0, -1.0), 1.0),       # under the bottom cap (ground disabled)
])
def test_cylinder_analytic(point, expected):
    world = open_world([Cylinder((0.0, 0.0), 1.0, 2.0)])
    assert world.signed_distance(point) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("point, expected", [
    ((3.0, 0.0, 0.0), 2.0), ((0.0, 0.0, 0.0), -1.0), ((0.5, 0.0, 0.0), -0.5),
    ((1.0, 0.0, 0.0), 0.0), ((2.0, 2.0, 1.0), 3.0 - 1.0),
])
def test_sphere_analytic(point, expected):
    world = open_world([Sphere((0.0, 0.0, 0.0), 1.0)])
    assert world.signed_distance(point) == pytest.approx(expected, abs=1e-12)


def test_yawed_box_corners_faces_and_inside():
    yaw = 0.7
    box = Box((1.0, -2.0, 3.0), (2.0, 4.0, 1.0), yaw)
    world = open_world([box])
    c, s = math.cos(yaw), math.sin(yaw)

    def world_point(local):
        x, y, z = local
        return (1.0 + c * x - s * y, -2.0 + s * x + c * y, 3.0 + z)

    # Every corner is on the surface; a point pushed out diagonally from a corner is at the
    # diagonal distance; the centre is as deep as the smallest half size.
    for corner in np.array(np.meshgrid([-1, 1], [-2, 2], [-0.5, 0.5])).reshape(3, -1).T:
        assert world.signed_distance(world_point(corner)) == pytest.approx(0.0, abs=1e-12)
        pushed = corner + 0.3 * np.sign(corner)
        assert world.signed_distance(world_point(pushed)) == pytest.approx(0.3 * math.sqrt(3),
                                                                           abs=1e-12)
    assert world.signed_distance(box.center) == pytest.approx(-0.5, abs=1e-12)
    assert world.signed_distance(world_point((0.0, 1.9, 0.0))) == pytest.approx(-0.1, abs=1e-12)
    assert world.signed_distance(world_point((1.5, 0.0, 0.0))) == pytest.approx(0.5, abs=1e-12)


def test_vectorised_distance_matches_closest_point_reference():
    rng = np.random.default_rng(4)
    obstacles = random_obstacles(rng, 40)
    world = open_world(obstacles)
    points = rng.uniform(-7, 7, (400, 3))
    expected = np.array([min(REFERENCE[type(o)](p, o) for o in obstacles) for p in points])
    np.testing.assert_allclose(world.signed_distance(points), expected, atol=1e-12)
    per_obstacle = world.obstacle_distances(points[:20])
    for k, obstacle in enumerate(obstacles):
        ref = [REFERENCE[type(obstacle)](p, obstacle) for p in points[:20]]
        np.testing.assert_allclose(per_obstacle[:, k], ref, atol=1e-12)


def test_distance_matches_dense_surface_sampling():
    # Outside a shape, the distance is the minimum over its surface: check it by brute force.
    box = Box((0.0, 0.0, 2.0), (2.0, 1.0, 1.5), 0.4)
    cyl = Cylinder((4.0, 0.0), 0.8, 2.5)
    u = np.linspace(-0.5, 0.5, 81)
    a, b = np.meshgrid(u, u)
    faces = []
    for axis in range(3):
        for sign in (-0.5, 0.5):
            local = np.zeros((a.size, 3))
            others = [i for i in range(3) if i != axis]
            local[:, axis] = sign
            local[:, others[0]] = a.ravel()
            local[:, others[1]] = b.ravel()
            faces.append(local * np.array(box.size))
    local = np.concatenate(faces)
    c, s = math.cos(box.yaw), math.sin(box.yaw)
    box_surface = np.stack([c * local[:, 0] - s * local[:, 1], s * local[:, 0] + c * local[:, 1],
                            local[:, 2]], axis=1) + box.center
    theta, height = np.meshgrid(np.linspace(0, 2 * np.pi, 361), np.linspace(0, 2.5, 101))
    side = np.stack([4.0 + 0.8 * np.cos(theta.ravel()), 0.8 * np.sin(theta.ravel()),
                     height.ravel()], axis=1)
    rho, phi = np.meshgrid(np.linspace(0, 0.8, 41), np.linspace(0, 2 * np.pi, 181))
    caps = [np.stack([4.0 + rho.ravel() * np.cos(phi.ravel()), rho.ravel() * np.sin(phi.ravel()),
                      np.full(rho.size, z)], axis=1) for z in (0.0, 2.5)]
    for obstacle, surface in ((box, box_surface), (cyl, np.concatenate([side] + caps))):
        world = open_world([obstacle])
        rng = np.random.default_rng(1)
        points = rng.uniform(-3, 7, (200, 3))
        sd = world.signed_distance(points)
        outside = sd > 0
        brute = np.min(np.linalg.norm(points[outside, None, :] - surface[None], axis=2), axis=1)
        # Sampled surface spacing bounds the brute-force error from above.
        assert np.all(brute >= sd[outside] - 1e-9)
        assert np.all(brute - sd[outside] < 0.02)


def test_ground_ceiling_and_empty_world():
    assert World(LOW, HIGH).signed_distance((0, 0, 2.5)) == 2.5
    assert World(LOW, HIGH, ceiling=4.0).signed_distance((0, 0, 3.5)) == 0.5
    assert World(LOW, HIGH, ceiling=4.0).signed_distance((0, 0, 5.0)) == -1.0
    assert World(LOW, HIGH).signed_distance((0, 0, -0.5)) == -0.5
    empty = World(LOW, HIGH, ground=False).signed_distance(np.zeros((4, 3)))
    np.testing.assert_array_equal(empty, np.full(4, FAR_DISTANCE_M))
    far = World(LOW, HIGH).signed_distance([[0, 0, 1e5]])
    assert np.all(np.isfinite(far))


def test_shapes_and_types():
    world = World(LOW, HIGH, [Sphere((0, 0, 1), 0.5)])
    single = world.signed_distance((0, 0, 3))
    assert isinstance(single, float)
    batch = world.signed_distance(np.zeros((0, 3)))
    assert batch.shape == (0,) and batch.dtype == np.float64
    assert world.signed_distance([[0, 0, 3]]).shape == (1,)
    with pytest.raises(ValueError, match="shape"):
        world.signed_distance(np.zeros((4, 2)))
    assert world.collides((0, 0, 1.6), 0.2) is True
    assert world.collides((0, 0, 3.0), 0.2) is False
    np.testing.assert_array_equal(world.collides([[0, 0, 1.6], [0, 0, 1.4], [0, 0, 3]], 0.2),
                                  [True, True, False])


def test_chunking_gives_the_same_answer_as_one_point_at_a_time():
    rng = np.random.default_rng(8)
    world = World(LOW, HIGH, random_obstacles(rng, 300))
    points = rng.uniform(-8, 8, (1000, 3))   # 1000 x 300 spans several chunks
    batch = world.signed_distance(points)
    singles = np.array([world.signed_distance(p) for p in points[::97]])
    np.testing.assert_array_equal(batch[::97], singles)


def test_cull_keeps_everything_that_matters_inside_the_ball():
    rng = np.random.default_rng(2)
    obstacles = random_obstacles(rng, 200)
    world = World(LOW, HIGH, obstacles, ceiling=5.0)
    centre, radius = np.array([1.0, -1.0, 1.5]), 3.0
    culled = world.cull(centre, radius)
    assert 0 < len(culled.obstacles) < len(obstacles)
    assert culled.ground and culled.ceiling == 5.0
    assert np.array_equal(culled.bounds_min, world.bounds_min)
    kept = [o for o, d in zip(obstacles, world.obstacle_distances(centre)) if d <= radius]
    assert list(culled.obstacles) == kept   # order preserved
    direction = rng.normal(size=(500, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    points = centre + direction * rng.uniform(0, radius, (500, 1))
    slack = radius - np.linalg.norm(points - centre, axis=1)
    full, part = world.signed_distance(points), culled.signed_distance(points)
    np.testing.assert_array_equal(np.minimum(full, slack), np.minimum(part, slack))
    # A sensor at the centre sees the same thing out to the cull radius.
    np.testing.assert_array_equal(world.raycast(centre, direction, radius),
                                  culled.raycast(centre, direction, radius))
    # Queries on the culled world are self-consistent (packed arrays re-indexed correctly).
    np.testing.assert_allclose(culled.obstacle_distances(points[:10]),
                               World(LOW, HIGH, culled.obstacles).obstacle_distances(points[:10]))
    assert len(world.cull(centre, 0.0).obstacles) <= len(culled.obstacles)
    with pytest.raises(ValueError, match="radius"):
        world.cull(centre, -1.0)
