"""Depth camera and point cloud against analytic scenes."""
import math

import numpy as np
import pytest

from planner_pkg.sim.camera import DepthCamera, depth_to_world_points
from planner_pkg.sim.params import CameraParams
from planner_pkg.types import VehicleState, quaternion_to_matrix
from planner_pkg.world import Box, Sphere, World

BOUNDS = ([-20, -20, 0], [20, 20, 10])


def no_ground(*obstacles):
    return World(*BOUNDS, obstacles, ground=False)


def test_wall_ahead_gives_constant_z_depth_not_ray_length():
    # a wall whose near face is the plane x = 4 fills the view; z-depth is 4 m in every pixel
    world = no_ground(Box((4.5, 0.0, 2.0), (1.0, 30.0, 30.0)))
    cam = DepthCamera(CameraParams(max_range_m=20.0))
    frame = cam.render(world, VehicleState.at_rest([0.0, 0.0, 2.0]))
    assert frame.depth.shape == (48, 64)
    np.testing.assert_allclose(frame.depth, 4.0, atol=1e-6)  # float32 storage
    depth64, _, _ = cam.render_depth(world, VehicleState.at_rest([0.0, 0.0, 2.0]))
    np.testing.assert_allclose(depth64, 4.0, atol=1e-12)


def test_sphere_straight_ahead_matches_analytic_ray_intersection():
    centre, radius = np.array([5.0, 0.3, 2.2]), 1.0
    world = no_ground(Sphere(tuple(centre), radius))
    params = CameraParams(width_px=65, height_px=49, hfov_deg=70.0)  # odd sizes: a centre pixel
    cam = DepthCamera(params)
    origin = np.array([0.0, 0.3, 2.2])
    depth, position, R = cam.render_depth(world, VehicleState.at_rest(origin))
    # centre pixel looks along the optical axis: z-depth = distance - radius
    assert depth[24, 32] == pytest.approx(5.0 - radius, abs=1e-12)
    # every pixel: intersect its ray with the sphere analytically, compare z-depths
    rays = cam.intrinsics.rays().reshape(-1, 3)
    d = rays @ R.T
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    oc = origin - centre
    b = d @ oc
    disc = b * b - (oc @ oc - radius**2)
    t = np.where(disc >= 0, -b - np.sqrt(np.maximum(disc, 0)), np.inf)
    expected = (t / np.linalg.norm(rays, axis=1)).reshape(depth.shape)
    hit = np.isfinite(expected)
    assert hit.sum() > 100
    np.testing.assert_allclose(depth[hit], expected[hit], atol=1e-9)
    assert np.all(np.isposinf(depth[~hit]))


def test_point_cloud_lies_on_the_surfaces():
    world = World(
        *BOUNDS,
        [Sphere((4.0, -1.0, 1.5), 0.8), Box((6.0, 1.5, 1.0), (1.0, 2.0, 2.0), yaw=0.4)],
        ground=True,
    )
    cam = DepthCamera(CameraParams(mount_pitch_deg=15.0))
    state = VehicleState.at_rest([0.0, 0.0, 1.5], yaw=0.1)
    depth, position, R = cam.render_depth(world, state)
    points = depth_to_world_points(depth, cam.intrinsics, position, R)
    assert len(points) > 1000  # obstacles and ground in view
    assert np.abs(world.signed_distance(points)).max() < 1e-6
    # the float32 frame keeps them on the surfaces to float32 rounding (coordinates < 16 m)
    frame = cam.render(world, state)
    assert np.abs(world.signed_distance(frame.points.astype(np.float64))).max() < 1e-5
    # the frame's pose + intrinsics reproduce the cloud (the documented contract for planners)
    opt = cam.intrinsics.deproject(frame.depth)
    valid = np.isfinite(frame.depth)
    rebuilt = opt[valid] @ quaternion_to_matrix(frame.camera_orientation).T + frame.camera_position
    np.testing.assert_allclose(rebuilt, frame.points, atol=1e-4)


def test_mount_pitch_down_sees_the_ground_at_the_analytic_depth():
    h, pitch = 2.0, 30.0
    cam = DepthCamera(CameraParams(width_px=33, height_px=25, mount_pitch_deg=pitch, max_range_m=20.0))
    depth, _, _ = cam.render_depth(World(*BOUNDS, []), VehicleState.at_rest([0.0, 0.0, h]))
    # optical axis hits z = 0 after h / sin(pitch); the centre pixel is on the axis
    assert depth[12, 16] == pytest.approx(h / math.sin(math.radians(pitch)), abs=1e-9)
    # image rows grow downwards: the bottom row sees the ground nearer than the top
    assert depth[-1, 16] < depth[12, 16] < depth[0, 16]


def test_range_limits_follow_rep_118():
    world = no_ground(Box((0.6, 0.0, 2.0), (0.2, 30.0, 30.0)), Sphere((0.0, 0.0, 50.0), 1.0))
    cam = DepthCamera(CameraParams(min_range_m=1.0, max_range_m=5.0))
    depth, _, _ = cam.render_depth(world, VehicleState.at_rest([0.0, 0.0, 2.0]))
    assert np.all(np.isneginf(depth))  # wall at 0.5 m: too close
    depth, _, _ = cam.render_depth(world, VehicleState.at_rest([0.0, 0.0, 2.0], yaw=math.pi))
    assert np.all(np.isposinf(depth))  # nothing within range behind
    frame = cam.render(world, VehicleState.at_rest([0.0, 0.0, 2.0], yaw=math.pi))
    assert frame.points.shape == (0, 3)


def test_noise_is_seeded_and_has_the_configured_spread():
    world = no_ground(Box((4.5, 0.0, 2.0), (1.0, 30.0, 30.0)))
    params = CameraParams(noise_std_m=0.05, max_range_m=20.0)
    st = VehicleState.at_rest([0.0, 0.0, 2.0])
    a = DepthCamera(params, np.random.default_rng(7)).render(world, st).depth
    b = DepthCamera(params, np.random.default_rng(7)).render(world, st).depth
    c = DepthCamera(params, np.random.default_rng(8)).render(world, st).depth
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.std(a - 4.0) == pytest.approx(0.05, rel=0.1)
    with pytest.raises(ValueError, match="seeded rng"):
        DepthCamera(params)


def test_camera_params_are_validated():
    with pytest.raises(ValueError, match="width_px"):
        CameraParams(width_px=0)
    with pytest.raises(ValueError, match="hfov_deg"):
        CameraParams(hfov_deg=200.0)
