"""EgoPlanner: closed-loop flights in small worlds, the FSM, goals, and bad input."""
import logging
import math

import numpy as np
import pytest

from planner_pkg.planning import EGO_MAX_ACC_MPS2, EGO_MAX_VEL_MPS
from planner_pkg.planning.ego_config import TRACKABLE_MAX_ACC_MPS2, speed_scaled_max_acc
from planner_pkg.planning.ego_planner import EgoConfig, EgoPlanner
from planner_pkg.planning.replan_fsm import FsmState
from planner_pkg.planning.rebound import OptimizerConfig
from planner_pkg.sim import CameraParams, DepthCamera, RunnerConfig, run_episode
from planner_pkg.types import SensorFrame, VehicleState
from planner_pkg.world import Box, Cylinder, World

SMALL_MAP = EgoConfig().map.with_overrides({"size_m": (16.0, 16.0, 4.0)})


def small_world(extra=()):
    trees = [Cylinder((4.0, 0.1), 0.4, 4.0), Cylinder((7.5, -0.9), 0.35, 4.0), Cylinder((7.0, 1.4), 0.3, 4.0)]
    return World([-2.0, -6.0, 0.0], [14.0, 6.0, 5.0], trees + list(extra))


def fly(world, start, goal, timeout_s=14.0, **config):
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, **config))
    result = run_episode(world, planner, start, goal, RunnerConfig(timeout_s=timeout_s, seed=1))
    return planner, result


def test_flies_through_a_small_forest_without_contact():
    planner, result = fly(small_world(), (0.0, 0.0, 1.0), (11.0, 0.0, 1.0))
    s = result.summary
    assert s.reached and not s.collided, (s.reason, s.message, planner.events)
    assert s.min_clearance_m > 0.05
    assert s.mean_speed_mps > 1.0
    assert planner.stats.replan_ms and all(planner.stats.replan_ok[-3:])
    states = {h.target for h in planner.fsm.history}
    assert {FsmState.WAIT_TARGET, FsmState.GEN_NEW_TRAJ, FsmState.EXEC_TRAJ} <= states


def test_start_inside_an_inflated_obstacle_plans_a_way_out():
    # the trunk surface is 0.22 m from the start: inside its 0.2 m inflation plus a voxel, but the
    # 0.19 m vehicle is not touching it. The map knows the trunk before the first plan.
    start, goal = np.array([0.0, 0.0, 1.0]), np.array([8.0, 2.0, 1.0])
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP))
    planner.reset(start, goal)
    for k in range(3):
        planner.observe(frame_with(cylinder_points(0.62, 0.0, 0.4), t=0.03 * k))
    assert planner.map.is_blocked(start[None])[0]
    traj = planner.update(VehicleState.at_rest(start, t=0.1), None)
    assert any("inside an inflated obstacle" in e for e in planner.events), planner.events
    if traj is not None and traj.__class__.__name__ == "Setpoint":
        # the way out is off to the side: it first turns the camera there, on the spot
        assert planner.fsm.history[-1].reason.startswith("turning")
        np.testing.assert_allclose(traj.position, start)
        traj = planner.update(VehicleState.at_rest(start, yaw=traj.yaw, t=0.2), None)
    assert traj is not None and hasattr(traj, "sample"), planner.events
    ts = np.linspace(0.1, traj.t_end, 200)
    path = np.array([traj.sample(t).position for t in ts])
    blocked = planner.map.is_blocked(path)
    first_free = int(np.argmin(blocked))
    assert not blocked[first_free:].any()  # leaves the inflated region and stays out
    # and in closed loop, with a goal on the far side of the start (the first plan, made before
    # the trunk is mapped, must not swing into it)
    world = World([-10.0, -6.0, 0.0], [3.0, 6.0, 5.0], [Cylinder((0.62, 0.0), 0.4, 4.0)])
    planner, result = fly(world, start, (-7.0, 2.0, 1.0))
    assert result.summary.reached and not result.summary.collided, (result.summary.message, planner.events)


# Wall-clock safety nets out of reach: the plans are decided by the deterministic budgets alone
# (L-BFGS iterations, A* expansions), so these flights are the same under any CPU load.
UNHURRIED = 1000.0


def room_walls(cx, cy=0.0, half=2.0, height=4.0):
    """A closed square room around (cx, cy): 0.2 m walls taller than the planning band (3 m)."""
    w = 2 * half + 0.2
    return [Box((cx - half, cy, height / 2), (0.2, w, height)), Box((cx + half, cy, height / 2), (0.2, w, height)),
            Box((cx, cy + half, height / 2), (w, 0.2, height)), Box((cx, cy - half, height / 2), (w, 0.2, height))]


def room_cloud(cx, cy=0.0, half=2.0, height=4.0, step=0.05):
    """Points on the four walls' centre planes, every ``step`` m."""
    a, z = np.meshgrid(np.arange(-half, half + 1e-9, step), np.arange(0.0, height + 1e-9, step))
    a, z = a.ravel(), z.ravel()
    one = np.ones_like(a)
    return np.vstack([np.column_stack([(cx - half) * one, cy + a, z]), np.column_stack([(cx + half) * one, cy + a, z]),
                      np.column_stack([cx + a, (cy + half) * one, z]), np.column_stack([cx + a, (cy - half) * one, z])])


def assert_within_budgets(planner):
    # every optimiser run stayed within its deterministic budget (L-BFGS iterations, a hard
    # cap, x max_time_scale when hovering or after failures), and no wall-clock safety net
    # decided anything
    o = planner.config.optimizer
    assert planner.stats.optimizer_iterations
    assert max(planner.stats.optimizer_iterations) <= o.max_total_iterations * planner.config.max_time_scale
    assert planner.stats.safety_net_hits == {}


def test_unreachable_goal_ends_in_reported_failures_not_a_crash_or_a_hang():
    # The goal sits in a closed room (walls taller than the planning band) whose walls the planner
    # knows all round before it starts (a prior map: a point cloud of all four walls, fused three
    # times from the room's centre): no path leads to the goal in its map, so every plan must
    # fail, say why, and after max_consecutive_failures the goal is given up; the vehicle hovers
    # where it is.
    cx = 5.0
    cloud = room_cloud(cx)

    class PriorMap(EgoPlanner):
        def reset(self, start, goal):
            super().reset(start, goal)
            for k in range(3):
                self.observe(SensorFrame(t=-0.1 + 0.01 * k, depth=None, points=cloud, camera_position=(cx, 0.0, 1.0),
                                         camera_orientation=(0, 0, 0, 1)))

    world = World([-2.0, -6.0, 0.0], [cx + 4.0, 6.0, 5.0], room_walls(cx))
    config = EgoConfig(map=SMALL_MAP, max_consecutive_failures=8).with_time_limits_scaled(UNHURRIED)
    planner = PriorMap(config)
    result = run_episode(world, planner, (0.0, 0.0, 1.0), (cx, 0.0, 1.0), RunnerConfig(timeout_s=4.0, seed=1))
    s = result.summary
    assert not s.reached and not s.collided and s.reason == "timeout", (s.reason, s.message)
    assert planner.stats.replan_ok and not any(planner.stats.replan_ok)
    failures = [h.reason for h in planner.fsm.history if "failed" in h.reason or "giving the goal up" in h.reason]
    assert len(failures) == 8 and all(len(r) > 40 for r in failures)  # each says why
    assert "giving the goal up" in failures[-1] and planner.fsm.state is FsmState.WAIT_TARGET
    assert any("giving the goal up" in e for e in planner.events)
    log = result.log.as_array()
    assert np.abs(log[:, 1:4] - [0.0, 0.0, 1.0]).max() < 0.1  # it never left
    assert_within_budgets(planner)


def test_goal_in_a_closed_room_seen_from_outside_is_sought_without_contact():
    # The same kind of room seen only as the flight goes: the upper parts of the walls near the
    # vehicle are outside the camera's view, never observed, and unknown space counts as free to
    # the optimiser, so a way in seems to exist through them. The planner keeps looking (plans
    # that succeed in its map), never flies into unobserved space faster than it can stop, never
    # touches a wall, and never gets in; nothing crashes or hangs.
    room = room_walls(11.0)
    world = World([-2.0, -6.0, 0.0], [15.0, 6.0, 5.0], room)
    config = EgoConfig(map=SMALL_MAP, max_consecutive_failures=8).with_time_limits_scaled(UNHURRIED)
    planner = EgoPlanner(config)
    result = run_episode(world, planner, (0.0, 0.0, 1.0), (11.0, 0.0, 1.0), RunnerConfig(timeout_s=12.0, seed=1))
    s = result.summary
    assert not s.reached and not s.collided and s.reason == "timeout", (s.reason, s.message)
    assert s.min_clearance_m > 0.05
    log = result.log.as_array()
    assert np.abs(log[:, 1:3] - [11.0, 0.0]).max(axis=1).min() > 2.0  # never inside the room's walls
    assert log[:, 1].max() > 9.5  # it went round it looking for the way in
    assert planner.stats.stop_limited > 0 and planner.stats.emergency_stops == 0, planner.events
    failed = [h.reason for h in planner.fsm.history if "failed" in h.reason]
    assert all(len(r) > 40 for r in failed)  # a failed plan (if any) says why
    assert_within_budgets(planner)


def frame_with(points, t=0.0, eye=(0.0, 0.0, 1.0)):
    return SensorFrame(t=t, depth=None, points=points, camera_position=eye, camera_orientation=(0, 0, 0, 1))


def cylinder_points(cx, cy, r, eye=(0.0, 0.0, 1.0)):
    th = np.linspace(0.0, 2 * np.pi, 120, endpoint=False)
    z = np.arange(0.2, 2.8, 0.05)
    T, Z = np.meshgrid(th, z)
    n = np.stack([np.cos(T).ravel(), np.sin(T).ravel()], axis=1)
    pts = np.column_stack([np.array([cx, cy]) + r * n, Z.ravel()])
    visible = ((np.array(eye[:2]) - pts[:, :2]) * n).sum(axis=1) > 0
    return pts[visible]


def test_goal_inside_an_obstacle_is_moved_or_refused():
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, goal_search_radius_m=1.0))
    planner.reset(np.array([0.0, 0.0, 1.0]), np.array([5.0, 0.0, 1.0]))
    for k in range(3):
        planner.observe(frame_with(cylinder_points(5.0, 0.0, 0.25), t=0.03 * k))
    planner.update(VehicleState.at_rest((0.0, 0.0, 1.0), t=0.1), None)
    assert any("moved to the nearest free point" in e for e in planner.events), planner.events
    assert not planner.map.is_blocked(planner.goal[None])[0]
    # a goal deep inside a large obstacle (no free point within the search radius) is refused
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, goal_search_radius_m=0.3))
    planner.reset(np.array([0.0, 0.0, 1.0]), np.array([5.0, 0.0, 1.0]))
    wall = np.array([[4.55, y, z] for y in np.arange(-2.0, 2.0, 0.05) for z in np.arange(0.2, 2.8, 0.05)])
    solid = np.vstack([wall + [dx, 0.0, 0.0] for dx in np.arange(0.0, 1.0, 0.1)])  # a 1 m thick block
    for k in range(3):
        planner.observe(frame_with(solid, t=0.03 * k))
    out = planner.update(VehicleState.at_rest((0.0, 0.0, 1.0), t=0.1), None)
    assert planner.fsm.state is FsmState.WAIT_TARGET
    assert any("refusing" in e for e in planner.events), planner.events
    assert out is not None and out.has_position  # holds where it is


def test_goal_above_the_ceiling_is_moved_into_the_band(caplog):
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP))
    with caplog.at_level(logging.INFO):
        planner.reset(np.array([0.0, 0.0, 1.0]), np.array([5.0, 0.0, 9.0]))
    assert planner.goal[2] <= SMALL_MAP.ceiling_m
    assert any("outside the planning band" in e for e in planner.events)
    assert any("WAIT_TARGET -> GEN_NEW_TRAJ" in r.getMessage() for r in caplog.records)  # logged transitions


def test_empty_and_nan_frames_and_bad_states_do_not_crash():
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP))
    with pytest.raises(RuntimeError, match="reset"):
        planner.update(VehicleState.at_rest((0.0, 0.0, 1.0)), None)
    planner.reset(np.array([0.0, 0.0, 1.0]), np.array([6.0, 0.0, 1.0]))
    planner.observe(frame_with(np.zeros((0, 3))))
    planner.observe(frame_with(np.full((50, 3), np.nan)))
    planner.observe(frame_with(np.full((50, 3), np.nan), eye=(np.nan, 0.0, 1.0)))  # bad pose: skipped
    assert planner.stats.bad_frames == 1 and any("skipped" in e for e in planner.events)
    out = planner.update(VehicleState.at_rest((0.0, 0.0, 1.0), t=0.1), frame_with(np.full((5, 3), np.nan)))
    assert out is not None and hasattr(out, "sample")  # planned in the (empty) map
    bad = VehicleState(0.2, [np.nan, 0.0, 1.0], np.zeros(3), [0, 0, 0, 1], np.zeros(3))
    with pytest.raises(ValueError, match="finite"):
        planner.update(bad, None)
    with pytest.raises(ValueError, match="finite"):
        planner.reset(np.array([np.nan, 0.0, 1.0]), np.array([1.0, 0.0, 1.0]))


@pytest.mark.parametrize("kwargs, key", [
    (dict(max_vel_mps=0.0), "max_vel_mps"),
    (dict(max_vel_mps=-2.0), "max_vel_mps"),
    (dict(max_acc_mps2=0.0), "max_acc_mps2"),
    (dict(planning_horizon_m=-1.0), "planning_horizon_m"),
    (dict(rate_hz=0.0), "rate_hz"),
    (dict(emergency_decel_mps2=-1.0), "emergency_decel_mps2"),
    (dict(emergency_ramp_s=2.0), "emergency_ramp_s"),
    (dict(reuse_retime_acc_fraction=-0.5), "reuse_retime_acc_fraction"),
    (dict(emergency_clearance_m=-0.1), "emergency_clearance_m"),
    (dict(max_consecutive_failures=0), "max_consecutive_failures"),
    (dict(retry_offset_m=(2.0, 1.0)), "retry_offset_m"),
    (dict(max_vel_mps=math.inf), "max_vel_mps"),
])
def test_bad_config_names_the_key(kwargs, key):
    with pytest.raises(ValueError, match=key):
        EgoConfig(**kwargs)


def test_config_from_dict():
    cfg = EgoConfig.from_dict({"max_vel_mps": 3.0, "map": {"resolution_m": 0.2}, "optimizer": {"max_rebounds": 5}})
    assert cfg.max_vel_mps == 3.0 and cfg.map.resolution_m == 0.2 and cfg.optimizer.max_rebounds == 5
    with pytest.raises(ValueError, match="max_vel"):
        EgoConfig.from_dict({"max_vel": 3.0})
    with pytest.raises(ValueError, match="max_rebound"):
        EgoConfig.from_dict({"optimizer": {"max_rebound": 5}})
    with pytest.raises(ValueError, match="max_acc_mps2"):
        EgoConfig.from_dict({"optimizer": {"max_acc_mps2": -1.0}})
    # the planner's limits override the optimiser's (the speed less the headroom left for tracking)
    planner = EgoPlanner(EgoConfig(max_vel_mps=3.0, optimizer=OptimizerConfig(max_vel_mps=1.0)))
    assert planner._optimizer_config.max_vel_mps == pytest.approx(3.0 * (1.0 - planner.config.speed_headroom))
    planner = EgoPlanner(EgoConfig(max_vel_mps=3.0, speed_headroom=0.0, optimizer=OptimizerConfig(max_vel_mps=1.0)))
    assert planner._optimizer_config.max_vel_mps == 3.0
    with pytest.raises(ValueError, match="speed_headroom"):
        EgoConfig(speed_headroom=0.6)


def test_the_planner_factory_builds_it():
    from planner_pkg.app.planners import PlannerOptions, make_planner

    planner = make_planner("ego", PlannerOptions(max_vel_mps=3.0, seed=2))
    assert isinstance(planner, EgoPlanner) and planner.name == "ego"
    assert planner.config.max_vel_mps == 3.0 and planner.config.seed == 2 and planner.rate_hz > 0
    # a speed limit brings the acceleration limit for that speed (fly --max-vel V)
    assert planner.config.max_acc_mps2 == 4.5
    assert make_planner("ego", PlannerOptions(max_vel_mps=6.0)).config.max_acc_mps2 == TRACKABLE_MAX_ACC_MPS2
    default = make_planner("ego").config
    assert default.max_vel_mps == EgoConfig().max_vel_mps and default.max_acc_mps2 == EgoConfig().max_acc_mps2
    # the optimiser limits the jerk: the acceleration turns by at most its limit in 0.15 s
    assert default.optimizer.jerk_time_s == 0.15
    fast = make_planner("ego", PlannerOptions(max_vel_mps=6.0))
    fast.reset(np.zeros(3), np.array([10.0, 0.0, 1.0]))
    assert fast.manager.optimizer.max_jerk_mps3 == pytest.approx(TRACKABLE_MAX_ACC_MPS2 / 0.15)
    retiming = EgoPlanner(EgoConfig(max_acc_mps2=4.0, reuse_retime_acc_fraction=0.5))
    retiming.reset(np.zeros(3), np.array([10.0, 0.0, 1.0]))
    assert retiming.manager.reuse_acc_mps2 == 2.0


def test_speed_scaled_acceleration_limit():
    # EGO's pair at its default speed, 1.5 x the speed above it, capped at what a 45 deg tilt tracks
    assert speed_scaled_max_acc(EGO_MAX_VEL_MPS) == EGO_MAX_ACC_MPS2
    assert speed_scaled_max_acc(0.5) == EGO_MAX_ACC_MPS2
    assert speed_scaled_max_acc(4.0) == 6.0
    assert speed_scaled_max_acc(6.0) == speed_scaled_max_acc(10.0) == TRACKABLE_MAX_ACC_MPS2
    assert TRACKABLE_MAX_ACC_MPS2 < 9.81 * math.tan(math.radians(45.0))
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="max_vel_mps"):
            speed_scaled_max_acc(bad)


def test_a_speed_limit_given_alone_brings_its_acceleration_limit():
    base = EgoConfig(max_acc_mps2=2.0, seed=5, planning_horizon_m=9.0)
    fast = base.at_speed(6.0)
    assert (fast.max_vel_mps, fast.max_acc_mps2) == (6.0, TRACKABLE_MAX_ACC_MPS2)
    assert (fast.seed, fast.planning_horizon_m) == (5, 9.0)  # everything else is kept
    assert base.at_speed(EGO_MAX_VEL_MPS).max_acc_mps2 == EGO_MAX_ACC_MPS2
    with pytest.raises(ValueError, match="max_vel_mps"):
        base.at_speed(float("nan"))


# a short-range depth camera (6 m) and a wall 0.5 m beyond its range, across the whole band
CAMERA = CameraParams(max_range_m=6.0)
WALL_X = 6.5
START = np.array([0.0, 0.0, 1.0])


def wall_world(half_width=12.0):
    return World([-2.0, -12.0, 0.0], [16.0, 12.0, 5.0], [Box((WALL_X + 0.1, 0.0, 2.5), (0.2, 2 * half_width, 5.0))])


def dense(traj, t0, n=3000):
    """(times, positions, velocities, arc lengths) sampled on [t0, t_end]."""
    ts = np.linspace(t0, traj.t_end, n)
    states = [traj.state(t) for t in ts]
    p = np.array([s[0] for s in states])
    v = np.array([s[1] for s in states])
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))])
    return ts, p, v, s


def test_takeoff_plan_can_stop_before_the_edge_of_what_the_camera_saw():
    # At rest at x = 0 looking along +x with a 6 m camera: nothing beyond x = 6 m has been
    # observed (the wall at 6.5 m gives no return). Whatever the plan, braking at the vehicle's
    # acceleration limit from any point of it must stop short of x = 6 m. (EGO treats unknown as
    # free: its first plan runs to the local target 7.5 m ahead at 2 m/s, through the wall.)
    config = EgoConfig(map=SMALL_MAP)
    planner = EgoPlanner(config)
    planner.reset(START, np.array([12.0, 0.0, 1.0]))
    state = VehicleState.at_rest(START, yaw=0.0, t=0.0)
    traj = planner.update(state, DepthCamera(CAMERA).render(wall_world(), state))
    assert traj is not None and hasattr(traj, "state"), planner.events
    ts, p, v, s = dense(traj, 0.0)
    speed = np.linalg.norm(v, axis=1)
    assert speed.max() > 1.0  # it does fly (not a stand-still plan)
    # where the path (continued straight on along its end velocity) leaves what was seen
    end_dir = v[-1] / speed[-1] if speed[-1] > 1e-6 else np.zeros(3)
    if (p[:, 0] > 6.0).any():
        s_exit = s[int(np.argmax(p[:, 0] > 6.0))]
    elif end_dir[0] > 1e-9:
        s_exit = s[-1] + (6.0 - p[-1, 0]) / end_dir[0]
    else:
        s_exit = math.inf
    stop = s + speed ** 2 / (2.0 * config.max_acc_mps2)
    worst = int(np.argmax(stop - s_exit))
    assert stop[worst] <= s_exit, (f"at x = {p[worst, 0]:.2f} m, {speed[worst]:.2f} m/s: stops {stop[worst]:.2f} m "
                                   f"along the path, but it leaves the observed space at {s_exit:.2f} m")
    assert p[:, 0].max() < 6.0


def test_takeoff_towards_an_unseen_wall_in_closed_loop_stops_without_contact():
    # (the wall spans the world: every replan after the first plan fails, whether a wall-clock
    # safety net cuts it short or not, so the flight is the first plan's; that one takes a few ms
    # of its 400 ms net, and under any plausible load the same)
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP))
    result = run_episode(wall_world(), planner, START, (12.0, 0.0, 1.0), RunnerConfig(timeout_s=5.0, seed=1),
                         camera=CAMERA)
    s = result.summary
    assert not s.collided and s.reason == "timeout", (s.reason, s.message, planner.events)
    assert s.min_clearance_m > 0.1
    log = result.log.as_array()  # t, x, y, z, vx, vy, vz
    # it got going, and at every logged instant it could still stop short of the wall
    assert log[:, 4].max() > 1.0
    reach = log[:, 1] + np.maximum(log[:, 4], 0.0) ** 2 / (2.0 * planner.config.max_acc_mps2)
    assert reach.max() < WALL_X - 0.19
    # and it never had to brake hard: its committed trajectory never led where the camera had
    # not looked (EGO's emergency stop catches the wall only once it is seen 6 m ahead)
    assert planner.stats.emergency_stops == 0, planner.events
    assert planner.stats.stop_limited > 0


def test_replans_in_flight_stay_within_their_iteration_budget():
    # every replan while flying spends at most 2 x replan_iterations L-BFGS iterations over all
    # its guesses (the rebound stages share the budget, a refit gets what was left before it;
    # also after failed plans: flight_failure_time_scale_step is 0); plans from a hover have each
    # guess's own budgets; the flight still gets through. Unbudgeted, this flight's replans take
    # up to ~30 iterations.
    budget = 12
    planner, result = fly(small_world(), (0.0, 0.0, 1.0), (11.0, 0.0, 1.0), replan_iterations=budget)
    s, st = result.summary, planner.stats
    assert s.reached and not s.collided, (s.reason, s.message, planner.events)
    assert len(st.plan_iterations) == len(st.plan_in_flight) == len(st.replan_ms) == len(st.replan_ok)
    after_success = [n for k, (n, flying) in enumerate(zip(st.plan_iterations, st.plan_in_flight))
                     if flying and (k == 0 or st.replan_ok[k - 1])]
    assert len(after_success) >= 5
    assert budget <= max(after_success) <= 2 * budget  # it binds
    in_flight = [n for n, flying in zip(st.plan_iterations, st.plan_in_flight) if flying]
    assert planner.config.flight_failure_time_scale_step == 0.0 and max(in_flight) <= 2 * budget
    from_hover = [n for n, flying in zip(st.plan_iterations, st.plan_in_flight) if not flying]
    assert from_hover and max(from_hover) > 0


@pytest.mark.parametrize("step", [0.0, 0.5])
def test_the_time_scale_after_failed_plans_grows_in_flight_only_with_its_step(step):
    """What a replan asks the plan manager for after k failed plans in a row: in flight the time
    scale 1 + k x flight_failure_time_scale_step (capped at max_time_scale) and the iteration
    budget replan_iterations x that; nearly at rest 1 + k / 2 and (rest_plan_iterations 0) each
    guess's own budgets."""
    from planner_pkg.planning.planner_manager import PlanOutcome

    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, flight_failure_time_scale_step=step, replan_iterations=80,
                                   rest_plan_iterations=0))
    planner.reset(np.array([0.0, 0.0, 1.0]), np.array([11.0, 0.0, 1.0]))
    asked = []

    def failing_plan(*args, time_scale=1.0, max_iterations=None, **kwargs):
        asked.append((time_scale, max_iterations))
        return PlanOutcome(None, "failed on purpose")

    planner.manager.plan = failing_plan
    for failures in (1, 3, 20):
        for speed, flying in ((3.0, True), (0.1, False)):
            asked.clear()
            planner._failures = failures
            state = VehicleState(1.0, [0.0, 0.0, 1.0], [speed, 0.0, 0.0], [0, 0, 0, 1], np.zeros(3))
            out = planner._plan(state, reuse=True)
            assert not out.success and asked
            expected = min(1.0 + (step if flying else 0.5) * failures, planner.config.max_time_scale)
            assert all(a[0] == pytest.approx(expected) for a in asked)
            if flying:
                assert asked[0][1] == int(round(80 * expected))
            else:
                assert {a[1] for a in asked} == {None}


@pytest.mark.parametrize("rest_budget", [0, 100])
def test_a_plan_from_rest_shares_rest_plan_iterations_over_its_guesses(rest_budget):
    """From a hover (and nearly at rest) with rest_plan_iterations R > 0 the guesses share R
    L-BFGS iterations (not scaled), the next guess getting what the previous ones left; with 0
    every guess has its own budgets (max_iterations None) and all of them are tried."""
    from planner_pkg.planning.planner_manager import PlanOutcome
    from planner_pkg.planning.rebound import OptimStatus, ReboundResult

    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, rest_plan_iterations=rest_budget))
    planner.reset(np.array([0.0, 0.0, 1.0]), np.array([11.0, 0.0, 1.0]))
    asked = []

    def failing_plan(*args, time_scale=1.0, max_iterations=None, **kwargs):
        asked.append((time_scale, max_iterations))
        return PlanOutcome(None, "failed on purpose", ReboundResult(OptimStatus.COLLISION, None, budget_used=60.0))

    planner.manager.plan = failing_plan
    for reuse, speed in ((False, 0.0), (True, 0.1)):  # a hover (GEN_NEW_TRAJ); a replan nearly at rest
        asked.clear()
        planner._failures = 1
        state = VehicleState(1.0, [0.0, 0.0, 1.0], [speed, 0.0, 0.0], [0, 0, 0, 1], np.zeros(3))
        out = planner._plan(state, reuse=reuse)
        assert not out.success
        if rest_budget:
            assert [a[1] for a in asked] == [100, 40]
        else:
            assert len(asked) >= 3 and {a[1] for a in asked} == {None}
        scale = planner.config.max_time_scale if not reuse else 1.5
        assert all(a[0] == pytest.approx(scale) for a in asked)


@pytest.mark.parametrize("rotation", [False, True])
def test_a_plan_from_rest_starts_from_the_guided_guess_after_failures(rotation):
    """After k failed plans a replan in flight starts from its k-th guess in turn. A plan from rest
    after failures in flight starts from the A*-guided guess (rest_guess_rotation False, the
    default) or rotates on the same count as in flight (True); after failed plans from rest the
    next one starts from the next guess in turn either way, so every guess gets its tick."""
    from planner_pkg.planning.planner_manager import PlanOutcome

    # (the crawl guess that follows failed plans from rest and the slowing guess that follows
    # failed replans in flight have their own tests)
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, rest_guess_rotation=rotation, rest_plan_iterations=0,
                                   crawl_after_rest_failures=0, flight_brake_after_failures=0))
    planner.reset(np.array([0.0, 0.0, 1.0]), np.array([11.0, 0.0, 1.0]))
    asked = []

    def kind(kwargs):
        return "guided" if kwargs.get("guided") else "via" if kwargs.get("via") is not None else "other"

    def failing_plan(*args, **kwargs):
        asked.append(kind(kwargs))
        return PlanOutcome(None, "failed on purpose")

    planner.manager.plan = failing_plan

    def first_guess(speed, reuse):
        asked.clear()
        state = VehicleState(1.0, [0.0, 0.0, 1.0], [speed, 0.0, 0.0], [0, 0, 0, 1], np.zeros(3))
        assert not planner._plan(state, reuse=reuse).success
        assert asked.count("guided") == 1 and asked.count("via") == 2, asked
        if asked[0] == "guided":
            assert asked[1:] == ["via", "via"]
        return asked[0]

    firsts = {}
    for failures in (1, 2, 3, 4):
        for speed, reuse in ((0.0, False), (0.1, True), (3.0, True)):
            planner._failures = failures
            planner._rest_failures = 0  # the failures were in flight
            firsts[(failures, speed)] = first_guess(speed, reuse)
    at_rest = [firsts[(f, v)] for f in (1, 2, 3, 4) for v in (0.0, 0.1)]
    if rotation:
        assert "via" in at_rest
    else:
        assert set(at_rest) == {"guided"}
    # in flight the rotation stays either way (no trajectory to reuse here: guided, via, via)
    assert [firsts[(f, 3.0)] for f in (1, 2, 3, 4)] == ["via", "via", "guided", "via"]
    # failed plans from rest in a row: each tick starts from the next guess in turn
    planner._failures = planner._rest_failures = 0
    row = [first_guess(0.0, False) for _ in range(6)]
    assert planner._rest_failures == 6
    if not rotation:
        assert row == ["guided", "via", "via", "guided", "via", "via"]
    # a plan in flight ends the row: the next plan from rest starts from the guided guess again
    first_guess(3.0, True)
    assert planner._rest_failures == 0
    if not rotation:
        assert first_guess(0.0, False) == "guided"


def test_a_plan_from_rest_keeps_its_detours_in_order_and_a_turn_ends_the_rest_failures():
    """From rest the guesses follow the guided one in the order they were built (the two
    detours' order does not depend on how many plans failed in flight before); a plan refused for
    never-observed space turns the camera, and the plan after the turn starts from the guided
    guess again (looking is progress, as for the failures in flight)."""
    from planner_pkg.planning.planner_manager import PlanOutcome

    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, rest_plan_iterations=0))
    planner.reset(np.array([0.0, 0.0, 1.0]), np.array([11.0, 0.0, 1.0]))
    built, asked = [], []
    via_points = planner._via_points

    def recording_via_points(p, target):
        points = via_points(p, target)
        built.append([tuple(v) for v in points])
        return points

    class Sideways:  # a refused plan leading off to the left (+y) of the camera's heading (+x)
        t_start, t_end = 0.0, 2.0

        def state(self, t):
            return (np.array([0.0, 2.0 * t, 1.0]),)

    refuse = [False]

    def failing_plan(*args, **kwargs):
        asked.append("guided" if kwargs.get("guided") else tuple(kwargs["via"]) if kwargs.get("via") is not None else "other")
        return PlanOutcome(None, "failed on purpose", unobserved=Sideways() if refuse[0] else None)

    planner._via_points = recording_via_points
    planner.manager.plan = failing_plan
    rest = VehicleState(1.0, [0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0, 0, 0, 1], np.zeros(3))
    for failures in (1, 2, 3, 4):
        built.clear(), asked.clear()
        planner._failures, planner._rest_failures = failures, 0
        assert not planner._plan(rest, reuse=False).success
        assert asked == ["guided"] + built[0], (failures, asked)
    # two failed plans from rest, then one refused for unobserved space: the camera turns
    planner._failures, planner._rest_failures = 0, 2
    refuse[0] = True
    kind, setpoint = planner._generate(rest)
    assert planner._turn_heading is not None and setpoint.yaw == pytest.approx(math.pi / 2)
    assert planner._failures == 0 and planner._rest_failures == 0
    refuse[0] = False
    asked.clear()
    assert not planner._plan(rest, reuse=False).success
    assert asked[0] == "guided"


@pytest.mark.parametrize("spent, second_budget", [(49.6, None), (48.6, 1), (30.0, 20)])
def test_the_next_guess_of_a_replan_gets_the_whole_iterations_left(spent, second_budget):
    """A guess's charged budget can be fractional (guide-path expansions count as fractions of an
    iteration): the next guess runs only with at least one whole iteration left, and gets them."""
    from planner_pkg.planning.planner_manager import PlanOutcome
    from planner_pkg.planning.rebound import OptimStatus, ReboundResult

    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, replan_iterations=50))
    planner.reset(np.array([0.0, 0.0, 1.0]), np.array([11.0, 0.0, 1.0]))
    asked = []

    def failing_plan(*args, time_scale=1.0, max_iterations=None, **kwargs):
        asked.append(max_iterations)
        return PlanOutcome(None, "failed on purpose", ReboundResult(OptimStatus.TIME_LIMIT, None, budget_used=spent))

    planner.manager.plan = failing_plan
    planner._failures = 1  # after a failure a replan in flight tries its guesses in turn
    state = VehicleState(1.0, [0.0, 0.0, 1.0], [3.0, 0.0, 0.0], [0, 0, 0, 1], np.zeros(3))
    out = planner._plan(state, reuse=True)
    assert not out.success
    assert asked[0] == 50
    assert asked[1:2] == ([] if second_budget is None else [second_budget])


def _turn_hold(planner, yaw, t):
    """One tick at rest at the origin facing ``yaw``: the hold setpoint of a turn on the spot."""
    sp = planner.update(VehicleState.at_rest(np.array([0.0, 0.0, 1.0]), yaw=yaw, t=t), None)
    assert sp is not None and sp.__class__.__name__ == "Setpoint", (sp, planner.events)
    assert planner.fsm.history[-1].reason.startswith("turning"), planner.fsm.history[-1]
    np.testing.assert_allclose(sp.position, [0.0, 0.0, 1.0])
    return sp


@pytest.mark.parametrize("period", [0.0, 0.45])
def test_a_turn_on_the_spot_plans_again_once_facing_the_heading_or_after_its_period(period):
    """The camera faces away from the goal: the first plan turns the vehicle on the spot toward
    its heading. With turn_replan_period_s 0 every tick of the turn is a full plan from rest;
    with a period the ticks only hold the heading until the period is over, or until the camera
    is within 0.2 rad of the heading (then it plans at once)."""
    start, goal = np.array([0.0, 0.0, 1.0]), np.array([8.0, 0.0, 1.0])
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, turn_replan_period_s=period))
    planner.reset(start, goal)
    heading = _turn_hold(planner, math.pi, 0.1).yaw
    assert abs(math.remainder(heading, 2.0 * math.pi)) < 0.3  # toward the goal, +x
    plans = len(planner.stats.replan_ms)
    for k in range(1, 4):  # still far from the heading, within the period
        sp = _turn_hold(planner, math.pi - 0.2 * k, 0.1 + 0.1 * k)
        assert sp.yaw == pytest.approx(heading, abs=0.3)
    assert len(planner.stats.replan_ms) == plans + (3 if period == 0.0 else 0)
    _turn_hold(planner, math.pi - 0.8, 0.6)  # the period is over: a new plan
    assert len(planner.stats.replan_ms) == plans + (4 if period == 0.0 else 1)
    # facing the heading (within 0.2 rad) before the period is over: it plans at once, and flies
    before = len(planner.stats.replan_ms)
    out = planner.update(VehicleState.at_rest(start, yaw=heading + 0.1, t=0.7), None)
    assert len(planner.stats.replan_ms) == before + 1
    assert planner.fsm.history[-1].target is FsmState.EXEC_TRAJ and hasattr(out, "sample"), planner.fsm.history[-1]


def _failing_guesses(planner):
    """Reset ``planner`` toward +x and make every guess it tries fail; returns the list that
    records each guess as (guided, guided_speed_fraction)."""
    from planner_pkg.planning.planner_manager import PlanOutcome

    planner.reset(np.array([0.0, 0.0, 1.0]), np.array([11.0, 0.0, 1.0]))
    asked = []

    def failing_plan(*args, **kwargs):
        asked.append((bool(kwargs.get("guided")), kwargs.get("guided_speed_fraction", 1.0)))
        return PlanOutcome(None, "failed on purpose")

    planner.manager.plan = failing_plan
    return asked


@pytest.mark.parametrize("after", [0, 3])
def test_after_failed_plans_from_rest_the_guided_guess_is_tried_first_at_a_crawl(after):
    """crawl_after_rest_failures k: after k failed plans from rest in a row every other plan from
    rest tries the A*-guided guess at crawl_speed_fraction first (then its usual guesses; the plans
    between try the usual guesses alone, so a crawl that spends the budget cannot starve them);
    never in flight, never with k = 0 (the slowing guess in flight has its own test)."""
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, crawl_after_rest_failures=after, crawl_speed_fraction=0.25,
                                   rest_plan_iterations=0, flight_brake_after_failures=0))
    asked = _failing_guesses(planner)
    crawls = []
    for _ in range(7):
        asked.clear()
        assert not planner._plan(VehicleState.at_rest(np.array([0.0, 0.0, 1.0]), t=1.0), reuse=False).success
        crawls.append(asked[0] == (True, 0.25))
        assert sum(fraction < 1.0 for _, fraction in asked) <= 1
        assert len([a for a in asked if a == (True, 1.0)]) == 1  # the usual guided guess is still tried
    assert crawls == ([False] * 7 if not after else [False, False, False, True, False, True, False])
    # in flight: never
    planner._failures = 4
    asked.clear()
    state = VehicleState(1.0, [0.0, 0.0, 1.0], [3.0, 0.0, 0.0], [0, 0, 0, 1], np.zeros(3))
    planner._rest_failures = 5
    planner._plan(state, reuse=True)
    assert all(fraction == 1.0 for _, fraction in asked)


@pytest.mark.parametrize("after", [0, 2])
def test_after_failed_replans_in_flight_a_slowing_guided_guess_is_tried_first(after):
    """flight_brake_after_failures k: in flight, after k failed replans in a row every other
    replan first tries the A*-guided guess slowing to flight_brake_speed_fraction x the limit
    (then its usual guesses); never with k = 0, never from rest (that is the crawl's rule)."""
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, flight_brake_after_failures=after, flight_brake_speed_fraction=0.4,
                                   crawl_after_rest_failures=0))
    asked = _failing_guesses(planner)
    state = VehicleState(1.0, [0.0, 0.0, 1.0], [3.0, 0.0, 0.0], [0, 0, 0, 1], np.zeros(3))
    firsts = []
    for failures in range(7):
        planner._failures = failures
        asked.clear()
        assert not planner._plan(state, reuse=True).success
        firsts.append(asked[0] == (True, 0.4))
        assert sum(fraction < 1.0 for _, fraction in asked) <= 1
    assert firsts == ([False] * 7 if not after else [False, False, True, False, True, False, True])
    # from rest: never
    planner._failures = planner._rest_failures = 4
    asked.clear()
    planner._plan(VehicleState.at_rest(np.array([0.0, 0.0, 1.0]), t=1.0), reuse=False)
    assert all(fraction == 1.0 for _, fraction in asked)


def _drifting(position, yaw, t, velocity=(0.3, 0.1, 0.0)):
    from planner_pkg.sim.rotation import quaternion_from_yaw

    return VehicleState(t, position, velocity, quaternion_from_yaw(yaw), np.zeros(3))


@pytest.mark.parametrize("latch", [True, False])
def test_a_hold_stays_where_it_began_while_the_vehicle_drifts(latch):
    """The goal behind the camera: the first plan turns the vehicle on the spot (a hold). On the
    next ticks of the turn the vehicle has drifted on with the speed it had left; the hold stays
    where it began, so the controller pulls the vehicle back, until a trajectory is flown again.
    latch_hold False: the hold is re-read from the vehicle's position every tick (the position
    error never builds up)."""
    start, goal = np.array([0.0, 0.0, 1.0]), np.array([11.0, 0.0, 1.0])
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP, latch_hold=latch))
    planner.reset(start, goal)
    first = planner.update(VehicleState.at_rest(start, yaw=math.pi, t=0.1), None)
    assert first.__class__.__name__ == "Setpoint", planner.events
    assert planner.fsm.history[-1].reason.startswith("turning")
    np.testing.assert_allclose(first.position, start)
    for k, drift in enumerate(([0.05, 0.02, 0.0], [0.12, 0.04, 0.0], [0.2, 0.07, 0.0])):
        here = start + np.array(drift)
        hold = planner.update(_drifting(here, math.pi - 0.3 * (k + 1), 0.13 + 0.03 * k), None)
        assert hold.__class__.__name__ == "Setpoint"
        np.testing.assert_allclose(hold.position, start if latch else here)
    # facing the goal: a trajectory is flown, which ends the hold; the next one is latched anew
    traj = planner.update(VehicleState.at_rest(here, yaw=0.0, t=0.3), None)
    assert hasattr(traj, "sample"), planner.events
    elsewhere = here + np.array([0.3, -0.1, 0.0])
    hold = planner._hold(_drifting(elsewhere, 0.0, 0.4), 0.0)
    np.testing.assert_allclose(hold.position, elsewhere)
