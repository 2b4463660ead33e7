"""Observation: inverse-depth transform values, pooling, state vector frames, camera geometry and the
batched training renderer against the world's exact ray casting and the simulator's camera."""
import math

import numpy as np
import pytest

from planner_pkg.policy.config import ObservationConfig
from planner_pkg.policy.observation import (attitude_from_thrust_batch, camera_rotation_batch, depth_observation,
                                            inverse_depth, max_pool, optical_rays, state_vector)
from planner_pkg.policy.render import pack_scenes, render_depth
from planner_pkg.sim.camera import DepthCamera
from planner_pkg.sim.params import CameraParams
from planner_pkg.sim.point_mass import attitude_from_thrust
from planner_pkg.types import VehicleState, quaternion_to_matrix
from planner_pkg.world import Box, Cylinder, Sphere, World, generate_world

CFG = ObservationConfig()


def test_inverse_depth_values():
    d = np.array([3.0, 1.0, 0.1, 100.0, np.inf, -np.inf, np.nan, 24.0, 0.3], dtype=np.float32)
    got = inverse_depth(d, CFG)
    far = 3.0 / 24.0 - 0.6
    near = 3.0 / 0.3 - 0.6
    expected = [0.4, 2.4, near, far, far, near, far, far, near]
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert got.dtype == np.float32


def test_max_pool_keeps_the_nearest_obstacle_per_cell():
    depth = np.full((48, 64), np.inf, dtype=np.float32)
    depth[5, 9] = 2.0  # cell (1, 2) of the 12 x 16 grid
    depth[40, 60] = 0.5  # cell (10, 15)
    obs = depth_observation(depth, CFG)
    assert obs.shape == (12, 16)
    assert obs[1, 2] == pytest.approx(3.0 / 2.0 - 0.6)
    assert obs[10, 15] == pytest.approx(3.0 / 0.5 - 0.6)
    assert np.count_nonzero(obs > -0.4) == 2
    with pytest.raises(ValueError, match="integer multiple"):
        max_pool(np.zeros((50, 64)), (12, 16))


def test_state_vector_is_in_the_yaw_frame():
    # heading +y (yaw 90 deg): a world velocity along +y is "forward" (+x in the yaw frame)
    s = state_vector([[0.0, 2.0, 0.5]], [[-1.0, 0.0, 0.0]], [[0.0, 0.0, 1.0]], math.pi / 2, 0.2)
    np.testing.assert_allclose(s[0], [2.0, 0.0, 0.5, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.2], atol=1e-6)
    assert s.dtype == np.float32 and s.shape == (1, 10)


def test_attitude_from_thrust_matches_the_simulators_point_mass():
    rng = np.random.default_rng(0)
    thrust = np.c_[rng.normal(0, 4, (20, 2)), rng.uniform(5, 15, 20)]
    yaw = rng.uniform(-math.pi, math.pi, 20)
    ours = attitude_from_thrust_batch(thrust, yaw)
    for i in range(20):
        np.testing.assert_allclose(ours[i], quaternion_to_matrix(attitude_from_thrust(thrust[i], yaw[i])), atol=1e-12)


def test_camera_rotation_and_rays_match_the_simulator_camera():
    params = CameraParams(mount_pitch_deg=7.0)
    cam = DepthCamera(params)
    rng = np.random.default_rng(1)
    thrust = np.array([[1.0, -2.0, 9.0]])
    yaw = np.array([0.7])
    body = attitude_from_thrust_batch(thrust, yaw)
    state = VehicleState(0.0, [1.0, 2.0, 3.0], np.zeros(3), attitude_from_thrust(thrust[0], yaw[0]), np.zeros(3))
    _, r_sim = cam.pose(state)
    r_ours = camera_rotation_batch(body, np.radians([7.0]))[0]
    np.testing.assert_allclose(r_ours, r_sim, atol=1e-12)
    rays = optical_rays(np.radians([params.hfov_deg]), (params.height_px, params.width_px))[0]
    np.testing.assert_allclose(rays, cam.intrinsics.rays().reshape(-1, 3), atol=1e-12)
    assert rng is not None


def _mixed_world():
    obstacles = [Sphere((4.0, 0.5, 1.5), 0.6), Cylinder((6.0, -1.5), 0.4, 2.5), Box((8.0, 1.0, 1.0), (1.0, 2.0, 1.5), 0.6),
                 Sphere((3.0, -2.0, 3.0), 0.3), Cylinder((2.5, 2.0), 0.2, 4.0), Box((5.0, -3.0, 2.5), (0.5, 0.5, 3.0), -1.0)]
    return World((-10, -10, 0), (10, 10, 5), obstacles, ceiling=4.5)


def _random_cameras(rng, b):
    origins = rng.uniform([-2, -2, 0.5], [2, 2, 3.5], (b, 3))
    yaw = rng.uniform(-0.8, 0.8, b)
    thrust = np.c_[rng.normal(0, 3, (b, 2)), np.full(b, 9.81)]
    rot = camera_rotation_batch(attitude_from_thrust_batch(thrust, yaw), rng.uniform(-0.3, 0.3, b))
    hfov = rng.uniform(1.3, 1.8, b)
    return origins, rot, hfov


@pytest.mark.parametrize("hw", [(12, 16), (24, 32)])
def test_renderer_matches_world_raycast_exactly(hw):
    world = _mixed_world()
    scene = pack_scenes([world])
    rng = np.random.default_rng(2)
    b = 12
    origins, rot, hfov = _random_cameras(rng, b)
    z = render_depth(scene, np.zeros(b, dtype=int), origins, rot, hfov, hw, 9.0).reshape(b, -1)
    rays = optical_rays(hfov, hw)
    dirs = np.einsum("bij,brj->bri", rot, rays)
    cos = 1.0 / np.linalg.norm(rays, axis=2)
    dirs *= cos[..., None]
    for i in range(b):
        # distinct origins force World.raycast's exact brute-force path
        origin = origins[i] + np.arange(dirs.shape[1])[:, None] * 1e-13
        ref = world.raycast(origin, dirs[i], 100.0) * cos[i]
        ref[ref > 9.0] = np.inf
        assert np.array_equal(np.isfinite(z[i]), np.isfinite(ref))
        hit = np.isfinite(ref)
        np.testing.assert_allclose(z[i][hit], ref[hit], rtol=0, atol=1e-7)
    assert 0.2 < np.isfinite(z).mean() < 1.0  # the scene is neither empty nor a wall


def test_fat_rays_are_nearer_and_cover_thin_obstacles():
    world = World((-10, -10, 0), (10, 10, 5), [Cylinder((6.0, 0.0), 0.1, 4.0)], ground=False)
    scene = pack_scenes([world])
    origins = np.array([[0.0, 0.0, 2.0]])
    rot = camera_rotation_batch(attitude_from_thrust_batch(np.array([[0.0, 0.0, 9.81]]), np.zeros(1)), np.zeros(1))
    hfov = np.radians([90.0])
    thin = render_depth(scene, np.zeros(1, int), origins, rot, hfov, (12, 16), 10.0)
    fat = render_depth(scene, np.zeros(1, int), origins, rot, hfov, (12, 16), 10.0, cone_rad=0.5 * hfov[0] / 16)
    fine = render_depth(scene, np.zeros(1, int), origins, rot, hfov, (48, 64), 10.0)
    pooled = depth_observation(fine, CFG)
    assert not np.isfinite(thin).any()  # a 20 cm trunk between two ray columns
    assert np.isfinite(fine).any() and np.isfinite(fat).any()
    assert (depth_observation(fat, CFG) >= pooled - 1e-6).all()  # never farther than the pooled truth
    seen = pooled > -0.4
    np.testing.assert_array_equal(depth_observation(fat, CFG)[seen] > -0.4, True)


def test_training_view_agrees_with_the_simulator_camera():
    world = generate_world("cluttered", 11)
    scene = pack_scenes([world])
    cam = DepthCamera(CameraParams())
    rng = np.random.default_rng(3)
    agree = []
    for _ in range(6):
        p = rng.uniform([-12, -6, 1], [12, 6, 3])
        thrust, yaw = np.array([rng.normal(0, 2), rng.normal(0, 2), 9.81]), rng.uniform(-math.pi, math.pi)
        state = VehicleState(0.0, p, np.zeros(3), attitude_from_thrust(thrust, yaw), np.zeros(3))
        sim = depth_observation(cam.render_depth(world, state)[0], CFG)
        rot = camera_rotation_batch(attitude_from_thrust_batch(thrust[None], np.array([yaw])), np.zeros(1))
        hfov = np.radians([90.0])
        ours = depth_observation(render_depth(scene, np.zeros(1, int), p[None], rot, hfov, (12, 16), 10.0,
                                              cone_rad=0.5 * hfov[0] / 16), CFG)[0]
        agree.append(np.mean(np.abs(ours - sim) < 0.15))
    assert np.mean(agree) > 0.9
