"""Stop before never-observed space: the re-timed trajectory, the depth-frame memory, the planner
at take-off in front of a wall it cannot see yet, and the unchanged plan in observed free space."""
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from planner_pkg.planning.bspline import UniformBSpline
from planner_pkg.planning.ego_planner import EgoConfig, EgoPlanner
from planner_pkg.planning.frontier import (StopLimit, StopLimitedTrajectory, UnknownSpaceConfig, _ramp_stop_distance,
                                          brake_before,
                                          limit_to_known_space)
from planner_pkg.planning.grid_map import OccupancyGridMap
from planner_pkg.planning.initial_path import initial_spline
from planner_pkg.planning.trajectory import BsplineTrajectory
from planner_pkg.planning.visibility import DepthHistory
from planner_pkg.sim import RunnerConfig, run_episode
from planner_pkg.types import CameraIntrinsics, SensorFrame, Setpoint, VehicleState
from planner_pkg.world import World

SMALL_MAP = EgoConfig().map.with_overrides({"size_m": (16.0, 16.0, 4.0)})
START = np.array([0.0, 0.0, 1.0])
# optical frame (z forward, x right, y down) -> world ENU, looking along +x
LOOK_X = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
LOOK_X_QUAT = Rotation.from_matrix(LOOK_X).as_quat()


def open_frame(range_m, t=0.0, eye=START, yaw=0.0):
    """A 64 x 48 depth frame (90 deg wide) with no return anywhere (open space), looking along
    +x turned by ``yaw`` rad."""
    intr = CameraIntrinsics.from_fov(64, 48, math.radians(90.0), 0.2, range_m)
    quat = (Rotation.from_euler("z", yaw) * Rotation.from_matrix(LOOK_X)).as_quat()
    return SensorFrame(t, np.full((48, 64), np.inf, np.float32), None, np.asarray(eye, float), quat, intr)


def dense(traj, t0, n=3000):
    """(times, positions, velocities, accelerations, arc lengths) sampled on [t0, t_end]."""
    ts = np.linspace(t0, traj.t_end, n)
    states = [traj.state(t) for t in ts]
    p = np.array([s[0] for s in states])
    v = np.array([s[1] for s in states])
    a = np.array([s[2] for s in states])
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))])
    return ts, p, v, a, s


# -- the planner -------------------------------------------------------------------------------
def test_in_observed_free_space_the_plan_is_unchanged():
    # open space seen to 10 m from x = 0 and x = 1.5 m: the take-off plan toward a far goal (local
    # target 7.5 m ahead, reached at cruise speed) can stop inside it from every point
    frames = [open_frame(10.0, 0.0, START), open_frame(10.0, 0.4, START + [1.5, 0.0, 0.0])]
    plans = []
    for stop in (True, False):
        cfg = EgoConfig(unknown_space=UnknownSpaceConfig(stop_before_unknown=stop))
        planner = EgoPlanner(cfg)
        planner.reset(START, np.array([30.0, 0.0, 1.0]))
        for f in frames:
            planner.observe(f)
        traj = planner.update(VehicleState.at_rest(START, yaw=0.0, t=0.5), None)
        assert isinstance(traj, BsplineTrajectory), (type(traj), planner.events)
        assert planner.stats.stop_limited == 0
        plans.append(traj)
    on, off = plans
    assert on.t_end == pytest.approx(off.t_end, abs=1e-12)
    for t in np.linspace(0.5, on.t_end, 200):
        for x, y in zip(on.state(t), off.state(t)):
            np.testing.assert_allclose(x, y, atol=1e-9)
    assert np.linalg.norm(on.state(on.t_end - 1e-6)[1]) > 1.5  # still at cruise speed at its end


def test_open_world_flights_are_the_same_with_and_without_the_limit():
    # closed loop in an empty world with the default 10 m camera, goal straight ahead and above:
    # every plan can stop inside what the camera saw, so the limit never binds and the flight is
    # EGO's, sample for sample (the same seed gives the same log)
    world = World([-2.0, -14.0, 0.0], [24.0, 14.0, 5.0], [])
    for goal in ((20.0, 0.0, 1.0), (12.0, 0.0, 2.0)):
        logs = []
        for stop in (True, False):
            cfg = EgoConfig(map=SMALL_MAP, unknown_space=UnknownSpaceConfig(stop_before_unknown=stop))
            planner = EgoPlanner(cfg.with_time_limits_scaled(1000.0))
            result = run_episode(world, planner, START, goal, RunnerConfig(timeout_s=15.0, seed=1))
            assert result.summary.reached and planner.stats.stop_limited == 0, (goal, planner.events)
            assert planner.stats.safety_net_hits == {}
            logs.append(result.log.as_array())
        on, off = logs
        assert on.shape == off.shape
        np.testing.assert_array_equal(on, off)


def seen(range_m):
    """(map, depth history) after one open-space frame from START looking along +x."""
    m = OccupancyGridMap(SMALL_MAP, center=START)
    f = open_frame(range_m)
    m.insert_depth(f.depth, f.intrinsics, f.camera_position, f.camera_orientation)
    history = DepthHistory(4, 0.25, 0.1)
    history.add(0.0, f.depth, f.intrinsics, f.camera_position, f.camera_orientation)
    return m, history


def test_a_plan_ending_at_rest_inside_observed_space_is_unchanged():
    # the final approach to a goal 5 m ahead, seen free to 10 m: the plan brakes to rest at the
    # goal harder than decel_fraction x max_acc, but it is its own stop inside observed space
    spline = initial_spline(START, np.zeros(3), np.zeros(3), [5.0, 0.0, 1.0], np.zeros(3), 2.0, 3.0, 0.24)
    base = BsplineTrajectory(spline, 0.0, 0.0)
    limit = StopLimit(2.1, 3.0, 0.3, 0.15, 0.5, 0.2, 0.1)
    # (its braking is harder than the limit's: a braking cap from the goal would bind)
    ts = np.linspace(0.0, base.t_end, 400)
    along = np.array([base.state(t)[2][0] for t in ts])
    assert along.min() < -limit.decel_mps2
    m, history = seen(10.0)
    traj, report = limit_to_known_space(base, m, limit, history)
    assert traj is base and not report.limited and report.cause == ""
    # seen only to 4 m, the same plan is stopped short of the frontier
    m, history = seen(4.0)
    traj2, report2 = limit_to_known_space(base, m, limit, history)
    assert report2.limited and report2.cause == "unknown" and report2.known_free_m < 4.0
    assert traj2.stop_position[0] - START[0] <= report2.known_free_m - limit.margin_m + 1e-6
    assert np.linalg.norm(traj2.state(traj2.t_end)[1]) == 0.0


def test_a_take_off_off_the_camera_axis_turns_to_look_instead_of_a_detour():
    # at rest, the goal 34 deg off the camera's axis in open space seen to 10 m: the straight plan
    # leaves the 90 deg view at once (the vehicle's side within 0.74 m), so it is refused and the
    # vehicle turns toward it on the spot instead of flying a detour another guess found; facing
    # it, the camera sees the way and the plan is EGO's unchanged
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP).with_time_limits_scaled(1000.0))
    goal = np.array([12.0, 8.0, 1.0])
    planner.reset(START, goal)
    planner.observe(open_frame(10.0, 0.0))
    out = planner.update(VehicleState.at_rest(START, yaw=0.0, t=0.0), None)
    assert isinstance(out, Setpoint), planner.fsm.history
    heading = math.atan2(goal[1] - START[1], goal[0] - START[0])
    assert abs(out.yaw - heading) < 0.15 and np.allclose(out.position, START)
    assert planner.fsm.history[-1].reason.startswith("turning")
    planner.observe(open_frame(10.0, 0.1, yaw=out.yaw))
    traj = planner.update(VehicleState.at_rest(START, yaw=out.yaw, t=0.1), None)
    assert isinstance(traj, BsplineTrajectory), planner.fsm.history
    assert planner.fsm.state.name == "EXEC_TRAJ"


def test_cloud_only_frames_leave_the_limit_off_and_say_so():
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP))
    planner.reset(START, np.array([12.0, 0.0, 1.0]))
    cloud = np.array([[9.0, y, z] for y in np.arange(-1.0, 1.0, 0.1) for z in np.arange(0.6, 1.6, 0.1)])
    planner.observe(SensorFrame(0.0, None, cloud, START, LOOK_X_QUAT))
    assert any("no depth image" in e and "off" in e for e in planner.events), planner.events
    traj = planner.update(VehicleState.at_rest(START, t=0.1), None)
    assert isinstance(traj, BsplineTrajectory)


# -- the re-timed trajectory ---------------------------------------------------------------------
def limited_case():
    """A take-off plan toward (7.5, 1, 1) m at 2 m/s over a map seen by a 4 m camera."""
    m = OccupancyGridMap(SMALL_MAP, center=START)
    f = open_frame(4.0)
    m.insert_depth(f.depth, f.intrinsics, f.camera_position, f.camera_orientation)
    history = DepthHistory(4, 0.25, 0.1)
    history.add(0.0, f.depth, f.intrinsics, f.camera_position, f.camera_orientation)
    spline = initial_spline(START, np.zeros(3), np.zeros(3), [7.5, 1.0, 1.0], [2.0, 0.0, 0.0], 2.0, 3.0, 0.24)
    base = BsplineTrajectory(spline, 5.0, 0.0)
    limit = StopLimit(decel_mps2=2.1, max_decel_mps2=3.0, margin_m=0.3, latency_s=0.15, start_radius_m=0.5,
                      probe_m=0.2, step_m=0.1)
    traj, report = limit_to_known_space(base, m, limit, history)
    return base, traj, report, limit


def test_the_limited_trajectory_flies_the_planned_path_and_brakes_to_rest_before_the_frontier():
    base, traj, report, limit = limited_case()
    assert isinstance(traj, StopLimitedTrajectory) and report.limited and report.cause == "unknown"
    # the camera saw 4 m of z-depth ahead: the known free distance is about that (probes 0.2 m ahead)
    assert 3.3 < report.known_free_m < 4.0
    ts, p, v, a, s = dense(traj, 5.0)
    speed = np.linalg.norm(v, axis=1)
    # identical to the plan until the braking starts
    assert traj.t_warp > 5.5
    for t in np.linspace(5.0, traj.t_warp, 30):
        for x, y in zip(traj.state(t), base.state(t)):
            np.testing.assert_allclose(x, y, atol=1e-12)
    # on the planned path (dense samples of the base curve)
    curve = base.spline.evaluate(np.linspace(0.0, base.spline.duration, 20000))
    gap, _ = cKDTree(curve).query(p)
    assert gap.max() < 1e-3
    # ends at rest, and from every point the vehicle could stop (with latency and margin) before
    # the first point not known free
    assert speed[-1] == 0.0 and np.allclose(traj.state(traj.t_end + 1.0)[1], 0.0)
    need = s + speed * limit.latency_s + speed ** 2 / (2.0 * limit.decel_mps2) + limit.margin_m
    assert need.max() <= report.known_free_m + 1e-6
    # kinematically consistent: v = dp/dt, a = dv/dt (away from the braking onset, where the
    # acceleration steps, and the stop), and the braking stays within its deceleration
    dt = ts[1] - ts[0]
    np.testing.assert_allclose(np.gradient(p, dt, axis=0)[2:-2], v[2:-2], atol=2e-3)
    smooth = (np.abs(ts - traj.t_warp) > 0.1) & (ts < traj.t_end - 3 * dt)
    smooth[:2] = False
    np.testing.assert_allclose(np.gradient(v, dt, axis=0)[smooth], a[smooth], atol=2e-2)
    tangential = (a * v).sum(axis=1) / np.maximum(speed, 1e-9)
    assert tangential[ts > traj.t_warp].min() >= -limit.decel_mps2 - 1e-6
    # the heading and the collision check follow the new timing
    assert math.isfinite(traj.yaw_at(traj.t_end)[0])
    assert traj.sample(traj.t_end).velocity.tolist() == [0.0, 0.0, 0.0]
    # the jerk feed-forward: the plan's own before the braking; on the braking the derivative of
    # its acceleration (central differences of the sampled acceleration, away from the onset)
    for t in np.linspace(5.0, traj.t_warp, 7):
        np.testing.assert_array_equal(traj.sample(t).jerk, base.sample(t).jerk)
    for t in np.linspace(traj.t_warp + 0.05, traj.t_end - 0.05, 9):
        fd = (traj.sample(t + 0.002).acceleration - traj.sample(t - 0.002).acceleration) / 0.004
        np.testing.assert_allclose(traj.sample(t).jerk, fd, atol=0.05 * max(1.0, np.abs(fd).max()))
    np.testing.assert_array_equal(traj.sample(traj.t_end + 0.1).jerk, np.zeros(3))


@pytest.mark.parametrize("range_m", [1.5, 2.0])
def test_the_latency_is_flown_at_the_profiles_own_peak_not_the_cruise_speed(range_m):
    """A take-off at 4 m/s toward a frontier 1-2 m ahead never reaches cruise speed: its stop is
    latency x (its own peak speed) short of the room, later than latency x 4 m/s, and from every
    point it can still stop (latency, braking, margin) before the first point not known free."""
    m = OccupancyGridMap(SMALL_MAP, center=START)
    f = open_frame(range_m)
    m.insert_depth(f.depth, f.intrinsics, f.camera_position, f.camera_orientation)
    spline = initial_spline(START, np.zeros(3), np.zeros(3), [7.5, 0.0, 1.0], [4.0, 0.0, 0.0], 4.0, 6.0, 0.12)
    base = BsplineTrajectory(spline, 0.0, 0.0)
    profile = StopLimit(4.2, 6.0, 0.3, 0.15, 0.5, 0.2, 0.1)
    top = replace(profile, latency_at_top_speed=True)
    (traj, report), (traj_top, report_top) = (limit_to_known_space(base, m, lim) for lim in (profile, top))
    assert report.limited and report_top.limited and not report.cannot_stop
    assert report.known_free_m == report_top.known_free_m
    v_top = float(np.linalg.norm(np.array([base.state(t)[1] for t in np.linspace(0, base.t_end, 2000)]), axis=1).max())
    room = report.known_free_m - 0.3
    assert report_top.stop_m == pytest.approx(room - 0.15 * v_top, abs=1e-3)
    _, _, v, _, s = dense(traj, 0.0)
    speed = np.linalg.norm(v, axis=1)
    assert speed.max() < 0.9 * v_top  # the profile never reaches the cruise speed
    # the stop: room less the latency at the profile's own peak (to the bisection's and the
    # sampling's resolution), well beyond the top-speed rule's
    assert report.stop_m == pytest.approx(room - 0.15 * speed.max(), abs=0.02)
    assert report.stop_m > report_top.stop_m + 0.1
    need = s + speed * 0.15 + speed ** 2 / (2.0 * 4.2) + 0.3
    assert need.max() <= report.known_free_m + 2e-3


def test_collision_check_of_a_limited_trajectory_reports_its_own_time():
    base, traj, _, _ = limited_case()
    m = OccupancyGridMap(SMALL_MAP, center=START)
    t_hit = traj.t_warp + 0.5 * (traj.t_end - traj.t_warp)
    blocker = traj.state(t_hit)[0]
    cloud = blocker + np.array([[0.0, dy, dz] for dy in np.arange(-0.3, 0.31, 0.05) for dz in np.arange(-0.3, 0.31, 0.05)])
    for _ in range(3):
        m.insert_point_cloud(START, cloud)
    hit = traj.collision_time(m, 5.0, 100.0, 0.05)
    assert hit is not None and t_hit - 0.6 < hit < t_hit  # reached, inflated, before the centre
    assert np.linalg.norm(traj.state(hit)[0] - blocker) < 0.45
    assert traj.collision_time(m, 5.0, traj.t_warp - 5.0, 0.05) is None  # not within a shorter horizon


def too_fast_case(limit):
    """A straight plan from START along +x at 3.33 m/s under a frame that saw 2 m ahead, limited by
    ``limit``: (base, trajectory, report)."""
    m = OccupancyGridMap(SMALL_MAP, center=START)
    f = open_frame(2.0)
    m.insert_depth(f.depth, f.intrinsics, f.camera_position, f.camera_orientation)
    q = START + np.outer(np.arange(-1, 14) * 0.8, [1.0, 0.0, 0.0])
    base = BsplineTrajectory(UniformBSpline(q, 0.24), 0.0, 0.0)
    return (base,) + limit_to_known_space(base, m, limit)


def test_a_start_too_fast_for_the_known_space_brakes_at_the_full_limit_and_says_so():
    base, traj, report = too_fast_case(StopLimit(2.1, 3.0, 0.3, 0.15, 0.5, 0.2, 0.1))
    assert report.limited and report.cannot_stop and "full acceleration limit" in report.describe()
    v0 = np.linalg.norm(base.state(0.0)[1])
    assert report.stop_m == pytest.approx(v0 ** 2 / (2 * 3.0), rel=1e-6)
    np.testing.assert_allclose(traj.state(0.0)[1], base.state(0.0)[1], atol=1e-12)  # continuous start
    assert traj.stop_position[0] - START[0] == pytest.approx(report.stop_m, abs=1e-3)
    _, p, v, _, s = dense(traj, 0.0)
    assert s[-1] == pytest.approx(report.stop_m, abs=1e-3) and np.linalg.norm(v[-1]) == 0.0


# -- the depth-frame memory ----------------------------------------------------------------------
def test_depth_history_answers_from_the_frames_not_the_voxel_rays():
    intr = CameraIntrinsics.from_fov(64, 48, math.radians(90.0), 0.2, 10.0)
    depth = np.full((48, 64), np.inf, np.float32)
    depth[:, 32:] = 3.0  # a surface 3 m ahead on the right half (world -y)
    h = DepthHistory(3, 0.25, 0.1)
    h.add(0.0, depth, intr, START, LOOK_X_QUAT)
    pts = START + np.array([[2.5, -1.0, 0.0], [3.5, -1.0, 0.0], [9.5, 1.0, 0.0], [10.5, 1.0, 0.0],
                            [5.0, 6.0, 0.0], [-1.0, 0.0, 0.0], [2.95, -1.0, 0.0]])
    np.testing.assert_array_equal(h.observed_free(pts), [True, False, True, False, False, False, False])
    # frames 0.1 s apart replace the newest; older ones are kept at least period_s apart
    for k in range(1, 30):
        h.add(0.1 * k, depth, intr, START + [0.1 * k, 0.0, 0.0], LOOK_X_QUAT)
    assert len(h) == 3
    with pytest.raises(ValueError, match="depth image"):
        h.add(5.0, depth[:10], intr, START, LOOK_X_QUAT)
    with pytest.raises(ValueError, match="finite"):
        h.add(5.0, depth, intr, [np.nan, 0.0, 1.0], LOOK_X_QUAT)


# -- configuration -------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, key", [
    (dict(decel_fraction=0.0), "unknown_space.decel_fraction"),
    (dict(decel_fraction=1.5), "unknown_space.decel_fraction"),
    (dict(margin_m=-0.1), "unknown_space.margin_m"),
    (dict(latency_s=math.nan), "unknown_space.latency_s"),
    (dict(start_radius_m=math.inf), "unknown_space.start_radius_m"),
    (dict(history_frames=0), "unknown_space.history_frames"),
    (dict(stop_before_unknown="yes"), "unknown_space.stop_before_unknown"),
    (dict(braking_jerk_time_s=-0.1), "unknown_space.braking_jerk_time_s"),
    (dict(braking_jerk_time_s=0.1, turn_braking=True), "unknown_space.braking_jerk_time_s"),
    (dict(turn_braking=True), "unknown_space.braking_jerk_time_s"),  # the default onset ramp is on
])
def test_bad_unknown_space_config_names_the_key(kwargs, key):
    with pytest.raises(ValueError, match=key):
        UnknownSpaceConfig(**kwargs)


def test_unknown_space_config_from_dict():
    cfg = EgoConfig.from_dict({"unknown_space": {"margin_m": 0.5, "stop_before_unknown": False}})
    assert cfg.unknown_space.margin_m == 0.5 and not cfg.unknown_space.stop_before_unknown
    with pytest.raises(ValueError, match="margin"):
        EgoConfig.from_dict({"unknown_space": {"margin": 0.5}})
    with pytest.raises(ValueError, match="unknown_space"):
        EgoConfig(unknown_space={"margin_m": 0.5})
    assert replace(cfg, unknown_space=UnknownSpaceConfig()).unknown_space.stop_before_unknown


@pytest.mark.parametrize("turn_braking", [True, False])
def test_braking_in_a_turn_shares_the_deceleration_with_the_turn(turn_braking):
    """A 4 m/s left turn of radius 6 m (normal acceleration 2.7 m/s^2) toward a frontier ~3.5 m
    ahead, braking at 4.2 m/s^2: with ``turn_braking`` the reference's *total* acceleration stays
    within the 4.2 (the tangential part gives way to the turn), without it braking and turning add
    up to ~5 m/s^2; both stop before the frontier from every point."""
    m = OccupancyGridMap(SMALL_MAP, center=START)
    f = open_frame(4.0)
    m.insert_depth(f.depth, f.intrinsics, f.camera_position, f.camera_orientation)
    history = DepthHistory(4, 0.25, 0.1)
    history.add(0.0, f.depth, f.intrinsics, f.camera_position, f.camera_orientation)
    ang = (np.arange(-1, 24) * 0.4) / 6.0
    q = START + np.column_stack([6.0 * np.sin(ang), 6.0 * (1.0 - np.cos(ang)), np.zeros_like(ang)])
    base = BsplineTrajectory(UniformBSpline(q, 0.1), 0.0, 0.0)
    limit = StopLimit(4.2, 6.0, 0.3, 0.15, 0.5, 0.2, 0.1, turn_braking=turn_braking)
    config = UnknownSpaceConfig(turn_braking=turn_braking, braking_jerk_time_s=0.0 if turn_braking else 0.1)
    assert StopLimit.from_config(config, 6.0, 0.2, 0.1).turn_braking is turn_braking
    traj, report = limit_to_known_space(base, m, limit, history)
    assert isinstance(traj, StopLimitedTrajectory) and report.limited and not report.cannot_stop
    assert report.known_free_m > 3.0
    ts, p, v, a, s = dense(traj, 0.0, 6000)
    speed = np.linalg.norm(v, axis=1)
    braking = (ts > traj.t_warp + 0.02) & (ts < traj.t_end - 0.02)
    total = np.linalg.norm(a, axis=1)[braking]
    if turn_braking:
        assert total.max() <= 4.2 * 1.03
    else:
        assert total.max() > 4.2 * 1.1
    # safe either way: from every point a stop (latency, the planned deceleration, margin) before the
    # first point not known free
    need = s + speed * limit.latency_s + speed ** 2 / (2.0 * limit.decel_mps2) + limit.margin_m
    assert need.max() <= report.known_free_m + 1e-3
    assert speed[-1] == 0.0


# -- the jerk-limited braking onset --------------------------------------------------------------
def fast_case(range_m=5.0, v_max=6.0, acc=7.0):
    """A take-off toward (14, 1, 1) m at 6 m/s (a_max 7) under a frame that saw ``range_m`` ahead:
    the plan still accelerates (~6.5 m/s^2 along the path) where the braking must begin."""
    m = OccupancyGridMap(SMALL_MAP.with_overrides({"size_m": (30.0, 16.0, 4.0)}), center=START)
    f = open_frame(range_m)
    m.insert_depth(f.depth, f.intrinsics, f.camera_position, f.camera_orientation)
    history = DepthHistory(4, 0.25, 0.1)
    history.add(0.0, f.depth, f.intrinsics, f.camera_position, f.camera_orientation)
    spline = initial_spline(START, np.zeros(3), np.zeros(3), [14.0, 1.0, 1.0], [v_max, 0.0, 0.0], v_max, acc, 0.1)
    return BsplineTrajectory(spline, 5.0, 0.0), m, history


def test_the_ramp_stop_distance_matches_an_integration_of_the_ramp():
    """The closed-form distance to rest (the acceleration ramps from a0 to -decel at the jerk limit,
    then holds) against a fine numerical integration of the same motion: from cruise, while still
    accelerating, while slow enough to stop inside the ramp, and while already braking harder."""
    decel, jerk = 4.9, 70.0
    cases = [(6.0, 0.0), (5.5, 6.5), (0.3, 2.0), (0.05, -1.0), (3.0, -7.0), (0.0, 3.0)]
    v = np.array([c[0] for c in cases])
    a0 = np.array([c[1] for c in cases])
    got = _ramp_stop_distance(v, a0, decel, jerk)
    dt = 1e-5
    for (vi, ai), d in zip(cases, got):
        x, vel, acc = 0.0, vi, max(ai, -decel)
        while True:
            acc_next = max(acc - jerk * dt, -decel)
            vel_next = vel + 0.5 * (acc + acc_next) * dt
            if vel_next <= 0.0:
                x += 0.5 * vel * dt
                break
            x += 0.5 * (vel + vel_next) * dt
            vel, acc = vel_next, acc_next
        assert d == pytest.approx(x, abs=2e-4), (vi, ai)
    # the ramp only ever lengthens the stop
    assert (got >= v * v / (2 * decel) - 1e-12).all()


def test_a_jerk_limited_onset_ramps_the_acceleration_and_still_stops_before_the_frontier():
    """At 6 m/s (a_max 7) the braking begins while the plan accelerates: without the jerk limit the
    reference's acceleration steps by ~11 m/s^2 within one sample; with it (70 m/s^3) it ramps
    (steps of jerk x 10 ms), the braking starts earlier, and from every point the vehicle can still
    stop (latency, the planned deceleration, margin) before the first point not known free."""
    base, m, history = fast_case()
    limit = StopLimit(4.9, 7.0, 0.3, 0.15, 0.5, 0.2, 0.1)
    jerk = replace(limit, jerk_mps3=70.0)
    assert StopLimit.from_config(UnknownSpaceConfig(braking_jerk_time_s=0.1), 7.0, 0.2, 0.1).jerk_mps3 == pytest.approx(70.0)
    # on by default (stop 45); 0 turns it off
    assert StopLimit.from_config(UnknownSpaceConfig(), 7.0, 0.2, 0.1).jerk_mps3 == pytest.approx(70.0)
    assert StopLimit.from_config(UnknownSpaceConfig(braking_jerk_time_s=0.0), 7.0, 0.2, 0.1).jerk_mps3 == 0.0
    (step, rep_step), (ramp, rep_ramp) = (limit_to_known_space(base, m, lim, history) for lim in (limit, jerk))
    assert isinstance(ramp, StopLimitedTrajectory) and rep_ramp.limited and not rep_ramp.cannot_stop
    assert rep_ramp.known_free_m == rep_step.known_free_m > 4.0
    # the plan accelerates where the braking begins
    _, v_w, a_w = base.state(ramp.t_warp)
    assert a_w @ v_w / np.linalg.norm(v_w) > 5.0
    results = {}
    for name, traj in (("step", step), ("ramp", ramp)):
        ts, p, v, a, s = dense(traj, 5.0, 20000)
        speed = np.linalg.norm(v, axis=1)
        moving = ts < traj.t_end - 0.02
        da = np.linalg.norm(np.diff(a, axis=0), axis=1)[moving[1:]]
        w = int(round(0.05 / (ts[1] - ts[0])))
        window = (np.linalg.norm(a[w:] - a[:-w], axis=1) / (ts[w] - ts[0]))[moving[w:] & (ts[w:] > traj.t_warp)]
        need = s + speed * 0.15 + speed ** 2 / (2.0 * 4.9) + 0.3
        results[name] = (da.max(), window.max(), need.max(), speed, s)
    step_da, step_jerk, step_need, _, _ = results["step"]
    ramp_da, ramp_jerk, ramp_need, speed, s = results["ramp"]
    assert step_da > 5.0 and step_jerk > 100.0
    assert ramp_da < 1.0 and ramp_jerk < 70.0 * 1.2
    assert ramp_need <= rep_ramp.known_free_m + 1e-3
    assert speed[-1] == 0.0 and s[-1] == pytest.approx(rep_ramp.stop_m, abs=1e-3)
    # it brakes earlier and stops a little shorter (at most one path sample short of its stop point)
    assert ramp.t_warp < step.t_warp - 0.03
    assert rep_step.stop_m - 0.3 < rep_ramp.stop_m <= rep_step.stop_m
    # the plan itself up to the onset, on the planned path after it
    for t in np.linspace(5.0, ramp.t_warp, 20):
        for x, y in zip(ramp.state(t), base.state(t)):
            np.testing.assert_allclose(x, y, atol=1e-12)
    curve = base.spline.evaluate(np.linspace(0.0, base.spline.duration, 20000))
    gap, _ = cKDTree(curve).query(dense(ramp, ramp.t_warp, 2000)[1])
    assert gap.max() < 1e-3


def test_a_start_too_fast_for_a_jerk_limited_stop_ramps_toward_the_full_limit_and_says_so():
    base, traj, report = too_fast_case(StopLimit(2.1, 3.0, 0.3, 0.15, 0.5, 0.2, 0.1, jerk_mps3=30.0))
    assert report.limited and report.cannot_stop
    v0 = float(np.linalg.norm(base.state(0.0)[1]))
    # a ramp from cruise (no acceleration) to -3 m/s^2 in 0.1 s, then -3 m/s^2 to rest
    t1 = 3.0 / 30.0
    v1 = v0 - 0.5 * 30.0 * t1 * t1
    assert report.stop_m == pytest.approx(v0 * t1 - 30.0 * t1 ** 3 / 6.0 + v1 * v1 / 6.0, abs=1e-6)
    for x, y in zip(traj.state(0.0), base.state(0.0)):
        np.testing.assert_allclose(x, y, atol=1e-9)  # continuous start
    ts, p, v, a, s = dense(traj, 0.0, 20000)
    assert s[-1] == pytest.approx(report.stop_m, abs=1e-3) and np.linalg.norm(v[-1]) == 0.0
    tangential = (a * v).sum(axis=1) / np.maximum(np.linalg.norm(v, axis=1), 1e-9)
    assert tangential[ts < traj.t_end - 0.01].min() == pytest.approx(-3.0, abs=1e-3)
    assert np.linalg.norm(np.diff(a, axis=0), axis=1)[ts[1:] < traj.t_end - 0.01].max() < 0.5


# -- braking before a block on the committed trajectory (EgoConfig.inflation_block_braking) ------
BLOCK_LIMIT = StopLimit(4.9, 7.0, 0.3, 0.15, 0.5, 0.2, 0.1, jerk_mps3=70.0)


def cruise_case():
    """A committed reference at ~6 m/s from t = 5 s along a gentle S-curve (30 m), no acceleration
    along it at the start."""
    from planner_pkg.planning.bspline import fit_cubic

    dt = 0.1
    xs = np.arange(0.0, 30.0 + 1e-9, 6.0 * dt)
    pts = np.stack([xs, 0.5 * np.sin(xs / 5.0), np.ones_like(xs)], axis=1)
    v = np.array([6.0, 0.6, 0.0])
    return BsplineTrajectory(fit_cubic(pts, dt, v, v, np.zeros(3), np.zeros(3)), 5.0, start_yaw=0.0)


def arc_length_at(traj, t0, t1, n=20000):
    """Arc length of ``traj`` flown from t0 to t1, m (dense polyline)."""
    p = traj.positions(np.linspace(t0, t1, n))
    return float(np.linalg.norm(np.diff(p, axis=0), axis=1).sum())


def test_braking_before_a_block_stops_on_the_curve_a_margin_short_of_it():
    """Cruising at 6 m/s with the trajectory blocked 1.2 s ahead (7.2 m: room to brake at 4.9
    m/s^2): the re-timed trajectory flies the plan until the latest point from which the
    jerk-limited braking (70 m/s^3) still stops by the margin (0.3 m) before the block, keeps to the
    planned curve, never brakes harder than 4.9 m/s^2 and stops at rest, at most one path sample
    (0.1 m) short of that point."""
    base = cruise_case()
    t_now = 6.0
    assert np.linalg.norm(base.state(t_now)[1]) == pytest.approx(6.0, abs=0.1)  # cruising
    t_block = t_now + 1.2
    traj, report = brake_before(base, t_now, t_block, BLOCK_LIMIT)
    assert isinstance(traj, StopLimitedTrajectory) and report.limited and not report.cannot_stop
    s_block = arc_length_at(base, base.t_start, t_block)
    assert report.known_free_m == pytest.approx(s_block, abs=0.01)
    assert s_block - 0.3 - 0.1 - 0.01 <= report.stop_m <= s_block - 0.3 + 0.01
    assert t_now <= traj.t_warp < t_block
    for t in np.linspace(t_now, traj.t_warp, 10):  # the plan itself up to the onset
        for x, y in zip(traj.state(t), base.state(t)):
            np.testing.assert_allclose(x, y, atol=1e-12)
    ts, p, v, a, s = dense(traj, t_now, 20000)
    speed = np.linalg.norm(v, axis=1)
    assert speed[-1] == 0.0 and arc_length_at(traj, base.t_start, traj.t_end) == pytest.approx(report.stop_m, abs=2e-3)
    tangential = (a * v).sum(axis=1) / np.maximum(speed, 1e-9)
    braking = (ts > traj.t_warp) & (ts < traj.t_end - 0.01)
    assert tangential[braking].min() >= -4.9 - 1e-6 and tangential[braking].min() < -4.8
    assert np.linalg.norm(np.diff(a, axis=0), axis=1)[(ts[1:] > t_now) & (ts[1:] < traj.t_end - 0.01)].max() < 1.0
    curve = base.spline.evaluate(np.linspace(0.0, base.spline.duration, 20000))
    gap, _ = cKDTree(curve).query(p)
    assert gap.max() < 1e-3
    # the latest onset: braking one path sample later would no longer stop before the margin
    v_w = float(np.linalg.norm(base.state(traj.t_warp)[1]))
    later = _ramp_stop_distance(np.array([v_w]), np.zeros(1), 4.9, 70.0)[0]
    s_warp = arc_length_at(base, base.t_start, traj.t_warp)
    assert s_warp + later <= s_block - 0.3 + 1e-3 < s_warp + 0.1 + later + 0.05


def test_braking_before_a_block_too_close_brakes_from_now_toward_the_full_limit():
    """Blocked 0.4 s ahead at 6 m/s (2.4 m; a stop at 4.9 m/s^2 needs ~3.9 m): the braking starts
    at the first path sample from now, ramps toward the full 7 m/s^2 and stops where that allows
    (past the block: the planner says so with ``cannot_stop``)."""
    base = cruise_case()
    t_now = 6.0
    traj, report = brake_before(base, t_now, t_now + 0.4, BLOCK_LIMIT)
    assert report.cannot_stop and report.stop_m > report.known_free_m - 0.3
    assert t_now <= traj.t_warp <= t_now + 0.1 / 6.0 + 1e-9
    v0 = float(np.linalg.norm(base.state(traj.t_warp)[1]))
    need = _ramp_stop_distance(np.array([v0]), np.zeros(1), 7.0, 70.0)[0]
    s_warp = arc_length_at(base, base.t_start, traj.t_warp)
    assert report.stop_m == pytest.approx(s_warp + need, abs=0.02)
    ts, p, v, a, s = dense(traj, traj.t_warp, 20000)
    tangential = (a * v).sum(axis=1) / np.maximum(np.linalg.norm(v, axis=1), 1e-9)
    assert tangential[ts < traj.t_end - 0.01].min() == pytest.approx(-7.0, abs=1e-3)


def test_braking_before_a_block_leaves_what_it_cannot_or_need_not_re_time():
    """None for a stop-limited trajectory already braking and for an emergency stop; a stop-limited
    one not braking yet is re-timed on its base to stop before the block, earlier than its own stop
    before unknown space; a limit without a jerk-limited onset is refused."""
    from planner_pkg.planning.trajectory import BrakingTrajectory

    base, m, history = fast_case()
    limited, report = limit_to_known_space(base, m, BLOCK_LIMIT, history)
    assert isinstance(limited, StopLimitedTrajectory)
    assert brake_before(limited, limited.t_warp + 0.01, limited.t_end, BLOCK_LIMIT) == (None, None)
    # a block before its own stop: re-timed on its base, stopping earlier
    again, rep = brake_before(limited, 5.0, limited.t_warp, BLOCK_LIMIT)
    assert isinstance(again, StopLimitedTrajectory) and again.base is base and again.s_stop < limited.s_stop
    assert not rep.cannot_stop and again.t_warp < limited.t_warp
    assert again.s_stop <= rep.known_free_m - 0.3 + 1e-6
    stop = BrakingTrajectory(START, [5.0, 0.0, 0.0], 5.0, 7.0)
    assert brake_before(stop, 5.0, 5.5, BLOCK_LIMIT) == (None, None)
    with pytest.raises(ValueError, match="jerk"):
        brake_before(base, 6.0, 7.0, replace(BLOCK_LIMIT, jerk_mps3=0.0))
