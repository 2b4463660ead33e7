"""Occupancy grid map: marking and clearing from synthetic clouds and depth images, inflation,
the moving window, unknown-space policy, bad input."""
import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from planner_pkg.config_schema import ConfigError
from planner_pkg.planning.grid_map import (GridMapConfig, InflationShape, OccupancyGridMap, UnknownPolicy, dilate,
                                           dilate_cylinder, nearest_depth_around)
from planner_pkg.types import CameraIntrinsics

ORIGIN = np.array([0.0, 0.0, 1.0])


def wall(x, y=(-1.0, 1.0), z=(0.6, 1.4), step=0.04):
    """Points (N, 3) on the plane x = const."""
    ys, zs = np.meshgrid(np.arange(y[0], y[1], step), np.arange(z[0], z[1], step))
    return np.stack([np.full(ys.size, x), ys.ravel(), zs.ravel()], axis=1)


def new_map(**kw):
    cfg = dict(size_m=(12.0, 12.0, 4.0), floor_m=0.0, ceiling_m=3.0, inflation_m=0.2)
    cfg.update(kw)
    return OccupancyGridMap(GridMapConfig(**cfg), center=ORIGIN)


def test_hits_mark_after_three_frames_and_misses_clear_the_ray():
    m = new_map()
    cloud = wall(3.05)
    target = np.array([[3.05, 0.02, 1.02]])
    m.insert_point_cloud(ORIGIN, cloud)
    assert m.probability(target)[0] == pytest.approx(0.65, abs=1e-4)  # one hit from the 0.5 prior
    assert not m.is_occupied(target)[0]
    m.insert_point_cloud(ORIGIN, cloud)
    m.insert_point_cloud(ORIGIN, cloud)
    assert m.is_occupied(target)[0]  # logit: 3 x 0.619 = 1.857 >= logit(0.8) = 1.386
    assert m.probability(target)[0] <= 0.90 + 1e-6  # clamped
    # space between the sensor and the wall: observed free; behind the wall: unknown
    between = np.array([[x, 0.02, 1.02] for x in (0.55, 1.05, 2.05, 2.75)])
    assert m.is_known(between).all() and (m.probability(between) < 0.5).all()
    assert not m.is_occupied(between).any()
    behind = np.array([[4.0, 0.02, 1.02]])
    assert not m.is_known(behind)[0] and np.isnan(m.probability(behind)[0])


def test_a_moved_obstacle_is_cleared_by_rays_through_it():
    m = new_map()
    for _ in range(5):
        m.insert_point_cloud(ORIGIN, wall(3.05))
    old = np.array([[3.05, 0.02, 1.02]])
    assert m.is_occupied(old)[0] and m.is_blocked(old)[0]
    for _ in range(3):  # the wall is now 2 m farther: its rays pass through the old wall
        m.insert_point_cloud(ORIGIN, wall(5.05))
    assert not m.is_occupied(old)[0]
    assert not m.is_blocked(old)[0]  # the inflation follows
    assert m.is_occupied(np.array([[5.05, 0.02, 1.02]]))[0]


def test_inflation_is_a_cube_of_the_configured_radius():
    m = new_map(inflation_m=0.2)  # 2 voxels
    pt = np.array([[3.05, 0.05, 1.05]])
    for _ in range(3):
        m.insert_point_cloud(ORIGIN, pt)
    assert m.is_occupied(pt)[0]
    offsets = np.array([[dx, dy, dz] for dx in range(-3, 4) for dy in range(-3, 4) for dz in range(-3, 4)]) * 0.1
    blocked = m.is_blocked(pt + offsets)
    inside = (np.abs(offsets) <= 0.2 + 1e-9).all(axis=1)
    np.testing.assert_array_equal(blocked, inside)


def test_inflation_can_be_a_vertical_cylinder_of_the_configured_radius():
    """``inflation_shape: cylinder``: a voxel (dx, dy, dz) from an occupied one is blocked iff
    dx^2 + dy^2 <= r^2 and |dz| <= r (r = 3 voxels here); the cube blocks the corners too."""
    pt = np.array([[3.05, 0.05, 1.05]])
    offsets = np.array([[dx, dy, dz] for dx in range(-4, 5) for dy in range(-4, 5) for dz in range(-4, 5)])
    got = {}
    for shape in ("cylinder", "cube"):
        m = new_map(inflation_m=0.3, inflation_shape=shape)
        for _ in range(3):
            m.insert_point_cloud(ORIGIN, pt)
        got[shape] = m.is_blocked(pt + offsets * 0.1)
    disk = (offsets[:, 0] ** 2 + offsets[:, 1] ** 2 <= 9) & (np.abs(offsets[:, 2]) <= 3)
    np.testing.assert_array_equal(got["cylinder"], disk)
    np.testing.assert_array_equal(got["cube"], (np.abs(offsets) <= 3).all(axis=1))
    # a round vehicle fits the diagonal the cube closes: (3, 2) and (2, 3) voxels off
    assert got["cube"][(offsets == [3, 2, 0]).all(axis=1)][0] and not got["cylinder"][(offsets == [3, 2, 0]).all(axis=1)][0]


def _brute_dilation(a, r, round_: bool):
    """Every voxel within (dx, dy, dz) of a set one, |dz| <= r and |dx|, |dy| <= r (the cube) or
    dx^2 + dy^2 <= r^2 (round_: the cylinder), clipped to the array."""
    want = np.zeros_like(a)
    for x, y, z in zip(*np.nonzero(a)):
        for dx in range(-r, r + 1):
            for dy in range(-r, r + 1):
                if (not round_ or dx * dx + dy * dy <= r * r) and 0 <= x + dx < a.shape[0] and 0 <= y + dy < a.shape[1]:
                    want[x + dx, y + dy, max(z - r, 0):z + r + 1] = True
    return want


def test_cylinder_dilation_matches_a_brute_force_one():
    rng = np.random.default_rng(4)
    for r in range(0, 5):
        a = rng.random((13, 11, 9)) < 0.02
        np.testing.assert_array_equal(dilate_cylinder(a, r), _brute_dilation(a, r, round_=True))
        assert (dilate_cylinder(a, r) <= dilate(a, r)).all()  # inside the cube


def test_cube_dilation_matches_a_brute_force_one():
    """Also where the radius exceeds an axis (3 layers in z, r up to 4)."""
    rng = np.random.default_rng(5)
    for r in range(0, 5):
        a = rng.random((13, 11, 3)) < 0.03
        np.testing.assert_array_equal(dilate(a, r), _brute_dilation(a, r, round_=False))


def test_inflation_shape_is_validated():
    assert GridMapConfig().inflation_shape is InflationShape.CUBE  # EGO's, the default
    assert GridMapConfig(inflation_shape="cylinder").inflation_shape is InflationShape.CYLINDER
    with pytest.raises(ConfigError, match="inflation_shape"):
        GridMapConfig(inflation_shape="sphere")


def test_depth_image_marks_the_surface_and_no_return_pixels_clear():
    intr = CameraIntrinsics.from_fov(32, 24, math.radians(90.0), 0.2, 10.0)
    # optical frame (z forward, x right, y down) -> world: looking along +x from ORIGIN
    r = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    quat = Rotation.from_matrix(r).as_quat()
    depth = np.full((24, 32), 4.05, dtype=np.float32)
    depth[:, :8] = np.inf  # no return on the left quarter (world +y side)
    depth[0, 0] = np.nan
    m = new_map(clear_ray_stride=1)
    for _ in range(3):
        m.insert_depth(depth, intr, ORIGIN, quat)
    centre_hit = ORIGIN + r @ intr.deproject(depth)[12, 16]
    assert m.is_occupied(centre_hit[None])[0]
    occupied_x = m.index_to_position(np.argwhere(m.occupied))[:, 0]
    assert occupied_x.size > 100 and np.allclose(occupied_x, 4.05, atol=0.051)
    # along a no-return pixel's ray: observed free, where a cloud could say nothing
    ray = r @ intr.rays()[12, 2]
    far = ORIGIN + 5.0 * ray / np.linalg.norm(ray)
    assert m.is_known(far[None])[0] and not m.is_occupied(far[None])[0]


def test_no_return_pixels_clear_only_as_far_as_the_camera_sees():
    # a 4 m camera (max_ray_m is 8 m): a no-return pixel says "nothing within 4 m of z-depth",
    # not "free to 8 m": the space beyond stays never observed (the planner must not count it free)
    intr = CameraIntrinsics.from_fov(32, 24, math.radians(90.0), 0.2, 4.0)
    r = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    quat = Rotation.from_matrix(r).as_quat()
    m = new_map(clear_ray_stride=1)
    m.insert_depth(np.full((24, 32), np.inf, dtype=np.float32), intr, ORIGIN, quat)
    for pixel in ((12, 16), (12, 2)):  # near the optical axis, and 40 deg off it
        ray = intr.rays()[pixel]
        along = np.linalg.norm(ray)  # metres of ray per metre of z-depth
        u = r @ (ray / along)
        at_z = lambda z: (ORIGIN + z * along * u)[None]  # noqa: E731 - the ray's point at z-depth z
        assert m.is_known(at_z(3.7))[0] and not m.is_occupied(at_z(3.7))[0], pixel
        for z in (4.3, 5.0, 6.0):
            assert not m.is_known(at_z(z))[0], (pixel, z)


def test_empty_and_nan_clouds_are_no_ops_and_bad_origins_raise():
    m = new_map()
    before = m.log_odds.copy()
    assert m.insert_point_cloud(ORIGIN, np.zeros((0, 3))) == 0
    assert m.insert_point_cloud(ORIGIN, None) == 0
    assert m.insert_point_cloud(ORIGIN, np.full((10, 3), np.nan)) == 0
    assert m.insert_point_cloud(ORIGIN, ORIGIN[None] + 1e-4) == 0  # shorter than min_ray_m
    np.testing.assert_array_equal(m.log_odds, before)
    mixed = np.vstack([wall(3.05)[:5], np.full((3, 3), np.nan), [[np.inf, 0, 1]]])
    assert m.insert_point_cloud(ORIGIN, mixed) == 5
    with pytest.raises(ValueError, match="origin"):
        m.insert_point_cloud([np.nan, 0, 1], wall(3.05))


def test_window_follows_the_vehicle_and_keeps_what_it_saw():
    m = new_map(recentre_distance_m=1.0)
    target = np.array([[3.05, 0.02, 1.02]])
    for _ in range(3):
        m.insert_point_cloud(ORIGIN, wall(3.05))
    assert m.is_blocked(target)[0]
    assert not m.follow(ORIGIN + [0.5, 0.0, 0.0])  # within the recentre distance
    assert m.follow(ORIGIN + [3.0, 1.0, 0.0])
    np.testing.assert_allclose(m.center, ORIGIN + [3.0, 1.0, 0.0], atol=0.1)
    assert m.is_occupied(target)[0] and m.is_blocked(target)[0]
    # far enough to drop it: the wall left the window and the new space is unknown
    m.follow(ORIGIN + [20.0, 0.0, 0.0])
    assert not m.is_occupied(target)[0] and not m.is_known(target)[0]


def test_unknown_policy_and_virtual_floor_and_ceiling():
    free_map = new_map(floor_m=0.5, ceiling_m=2.5)
    unseen = np.array([[-3.0, 2.0, 1.0]])
    assert not free_map.is_blocked(unseen)[0]
    assert free_map.is_blocked(np.array([[0.0, 0.0, 0.3], [0.0, 0.0, 2.7]])).all()
    assert free_map.is_blocked(np.array([[100.0, 0.0, 1.0]])).tolist() == [False]  # outside: unknown = free
    cautious = new_map(unknown=UnknownPolicy.OCCUPIED)
    assert cautious.is_blocked(unseen)[0]
    assert cautious.is_blocked(np.array([[100.0, 0.0, 1.0]]))[0]
    for _ in range(3):
        cautious.insert_point_cloud(ORIGIN, wall(3.05))
    seen_free = np.array([[1.5, 0.02, 1.02]])
    assert not cautious.is_blocked(seen_free)[0]
    assert GridMapConfig(unknown="occupied").unknown is UnknownPolicy.OCCUPIED


def test_nearest_free_point():
    m = new_map()
    for _ in range(3):
        m.insert_point_cloud(ORIGIN, wall(3.05))
    inside = np.array([3.05, 0.02, 1.02])
    free = m.nearest_free(inside, 1.0)
    assert free is not None and not m.is_blocked(free[None])[0]
    assert np.linalg.norm(free - inside) <= 0.5
    assert m.nearest_free(inside, 0.05) is None
    np.testing.assert_array_equal(m.nearest_free(ORIGIN, 1.0), ORIGIN)


def test_occupied_distances_match_a_brute_force_search_within_their_reach():
    m = new_map()
    for _ in range(3):
        m.insert_point_cloud(ORIGIN, wall(3.05))
    points = np.array([[2.5, 0.0, 1.0], [2.2, 0.3, 1.2], [1.0, 0.0, 1.0], [3.05, 2.5, 1.0]])
    near = m.occupied_distances(points, 1.0)
    centres = m.index_to_position(np.argwhere(m.occupied))
    brute = np.sqrt(((points[:, None, :] - centres[None]) ** 2).sum(axis=2)).min(axis=1)
    assert brute[0] < brute[1] < 1.0 < brute[2]
    np.testing.assert_allclose(near[:2], brute[:2], atol=1e-12)
    assert np.isinf(near[2])  # 2 m from the wall: beyond the reach
    np.testing.assert_allclose(m.occupied_distances(points, 1.0, 3.0)[2], brute[2], atol=1e-12)
    # the box reaches only reach_m beyond the points: a wall 2 m away is not searched at all
    assert np.isinf(m.occupied_distances(points[2:3], 1.0, 5.0)).all()
    assert np.isinf(new_map().occupied_distances(points, 1.0)).all()  # an empty map


@pytest.mark.parametrize("kwargs, key", [
    (dict(resolution_m=0.0), "resolution_m"),
    (dict(resolution_m=-0.1), "resolution_m"),
    (dict(prob_hit=0.4), "prob_miss < 0.5 < prob_hit"),
    (dict(prob_occupied=0.95), "prob_occupied"),
    (dict(max_ray_m=0.05), "min_ray_m"),
    (dict(inflation_m=-0.1), "inflation_m"),
    (dict(size_m=(0.2, 10.0, 4.0)), "size_m"),
    (dict(floor_m=3.0, ceiling_m=1.0), "floor_m"),
    (dict(unknown="maybe"), "unknown"),
    (dict(clear_ray_stride=0), "clear_ray_stride"),
])
def test_bad_config_names_the_key(kwargs, key):
    with pytest.raises(ValueError, match=key):
        GridMapConfig(**kwargs)


def test_from_dict_rejects_unknown_keys():
    with pytest.raises(ValueError, match="resolution"):
        GridMapConfig.from_dict({"resolution": 0.1})
    assert GridMapConfig.from_dict({"resolution_m": 0.2}).resolution_m == 0.2


def test_a_known_occupancy_replaces_the_window_and_its_inflation():
    """set_known: every voxel observed, occupied exactly where given, blocked where a fused cloud
    of the same voxels would block (the inflation recomputed at once, the floor and ceiling kept);
    a wrong shape or dtype is refused and leaves the map as it was."""
    given = new_map(inflation_m=0.3, inflation_shape="cylinder")
    sensed = new_map(inflation_m=0.3, inflation_shape="cylinder")
    sensed.insert_point_cloud(ORIGIN, wall(5.0))  # something the known occupancy overwrites
    occ = np.zeros(tuple(given.dims), dtype=bool)
    pts = np.array([[2.05, 0.05, 1.05], [2.05, 0.15, 1.05], [-3.05, 2.05, 1.45]])
    idx = given.local_index(pts)
    occ[idx[:, 0], idx[:, 1], idx[:, 2]] = True
    for m in (given, sensed):
        m.set_known(occ)
    cloud = new_map(inflation_m=0.3, inflation_shape="cylinder")
    for _ in range(3):
        cloud.insert_point_cloud(ORIGIN, pts)
    rng = np.random.default_rng(3)
    probe = np.vstack([rng.uniform(given.window_min, given.window_max, (4000, 3)),
                       (pts[:, None, :] + rng.uniform(-0.45, 0.45, (3, 400, 3))).reshape(-1, 3)])
    for m in (given, sensed):
        assert m.is_known(probe).all()
        np.testing.assert_array_equal(m.occupied, occ)
        np.testing.assert_array_equal(m.is_occupied(probe), cloud.is_occupied(probe))
        np.testing.assert_array_equal(m.is_blocked(probe), cloud.is_blocked(probe))
    assert given.is_blocked(probe).sum() > given.is_occupied(probe).sum() > 0
    before = given.log_odds.copy()
    for bad in (occ[:-1], occ.astype(np.uint8), occ.tolist()[0]):
        with pytest.raises(ValueError, match="set_known"):
            given.set_known(bad)
    np.testing.assert_array_equal(given.log_odds, before)


def _post_image(intr, rot, cam, post, radius, back_x):
    """Analytic z-depth image (H, W) of a vertical post (disc ``radius`` at ``post`` (x, y)) in
    front of a wall x = ``back_x``, for a camera at ``cam`` with optical-to-world rotation ``rot``
    looking along +x (z-depth is then the distance along x)."""
    rays = intr.rays() @ rot.T
    dx, dy = rays[..., 0], rays[..., 1]
    ox, oy = cam[0] - post[0], cam[1] - post[1]
    a = dx * dx + dy * dy
    b = 2.0 * (ox * dx + oy * dy)
    c = ox * ox + oy * oy - radius ** 2
    disc = b * b - 4.0 * a * c
    t = np.where(disc >= 0.0, (-b - np.sqrt(np.maximum(disc, 0.0))) / (2.0 * a), np.inf)
    return np.minimum(t, (back_x - cam[0]) / dx).astype(np.float32)


@pytest.mark.parametrize("erosion_px", [0, 1])
def test_free_space_erosion_keeps_a_posts_edge_from_being_seen_free(erosion_px):
    # approaching a thin post: the rays of the pixels beside its edge pass through the voxels
    # the post partly fills. Counted as free evidence (EGO's fusion) they carve some of the
    # post's own voxels free; with free_space_erosion_px a ray clears only up to the nearest
    # depth around its pixel, so no voxel of the post is ever observed free.
    intr = CameraIntrinsics.from_fov(64, 48, math.radians(90.0), 0.2, 10.0)
    r = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    quat = Rotation.from_matrix(r).as_quat()
    seen_free = hit = 0
    for post_y in np.linspace(-0.6, 0.6, 7):
        for radius in (0.1, 0.2):
            post = (4.0, post_y)
            m = new_map(free_space_erosion_px=erosion_px)
            for k in range(12):  # 30 Hz frames flying at 6 m/s toward it
                cam = np.array([0.2 * k, 0.0, 1.0])
                m.insert_depth(_post_image(intr, r, cam, post, radius, 7.0), intr, cam, quat)
            xs, ys = np.meshgrid(np.arange(3.5, 4.5, 0.1) + 0.05, np.arange(-1.0, 1.0, 0.1) + 0.05)
            cells = np.stack([xs.ravel(), ys.ravel(), np.full(xs.size, 1.05)], axis=1)
            inside = cells[np.hypot(cells[:, 0] - post[0], cells[:, 1] - post[1]) <= radius + 0.05]
            known = m.is_known(inside)
            seen_free += int(np.sum(known & ~m.is_occupied(inside) & (m.probability(inside) < 0.5)))
            hit += int(np.sum(m.is_occupied(inside)))
    assert hit >= 14  # every post is found (its facing voxels occupied) either way
    if erosion_px:
        assert seen_free == 0
    else:
        assert seen_free >= 10  # the failure the option removes (41 of 368 voxels in a finer sweep)


def test_nearest_depth_around_takes_the_nearest_valid_return():
    d = np.full((4, 5), 5.0)
    d[1, 3] = 2.0
    d[3, 0] = np.nan  # invalid: ignored
    d[0, 0] = np.inf  # no return: ignored
    d[3, 4] = -1.0
    out = nearest_depth_around(d, 1)
    expect = np.full((4, 5), 5.0)
    expect[0:3, 2:5] = 2.0
    np.testing.assert_array_equal(out, expect)
    np.testing.assert_array_equal(nearest_depth_around(d, 3)[0], [2.0] * 5)
    assert np.isposinf(nearest_depth_around(np.full((2, 2), np.nan), 1)).all()
    np.testing.assert_array_equal(nearest_depth_around(np.array([[5.0, np.nan, 2.0]]), 4), [[2.0, 2.0, 2.0]])  # window > image
    with pytest.raises(ConfigError, match="free_space_erosion_px"):
        GridMapConfig(free_space_erosion_px=-1)
