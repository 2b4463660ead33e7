"""The emergency stop: braking straight or steering away, judged on a real voxel map against
clearances measured independently (brute force over every occupied voxel centre)."""
import math

import numpy as np
import pytest

from planner_pkg.planning.ego_config import EgoConfig
from planner_pkg.planning.ego_planner import EgoPlanner
from planner_pkg.planning.emergency import choose_emergency_stop
from planner_pkg.planning.grid_map import GridMapConfig, OccupancyGridMap
from planner_pkg.planning.trajectory import BrakingTrajectory
from planner_pkg.types import VehicleState

EYE = np.array([0.0, 0.0, 1.0])
V0 = np.array([5.0, 0.0, 0.0])  # at 10 m/s^2 a straight stop 1.25 m ahead
DECEL = 10.0
ANGLES = (math.radians(25.0), math.radians(45.0))


def trunk_cloud(cy=0.2, cx=1.5, r=0.15, fan_deg=100.0):
    """What a sensor at EYE sees: a trunk (r m, centre (cx, cy)) and, through the free space
    around it, a wall of hits 6 m away over +-fan_deg."""
    th = np.radians(np.linspace(-fan_deg, fan_deg, int(4 * fan_deg) + 1))
    z = np.arange(0.3, 2.5, 0.05)
    wall = np.array([[6.0 * math.cos(a), 6.0 * math.sin(a), zz] for a in th for zz in z])
    ring = np.radians(np.arange(0.0, 360.0, 3.0))
    trunk = np.array([[cx + r * math.cos(a), cy + r * math.sin(a), zz] for a in ring for zz in z])
    facing = ((EYE[:2] - trunk[:, :2]) * (trunk[:, :2] - [cx, cy])).sum(axis=1) > 0
    return np.vstack([wall, trunk[facing]])


def fill(grid_map, cloud):
    for _ in range(3):
        grid_map.insert_point_cloud(EYE, cloud)
    return grid_map


def trunk_map(**kwargs):
    m = OccupancyGridMap(GridMapConfig(size_m=(16.0, 16.0, 3.0), inflation_m=0.3, floor_m=0.3, ceiling_m=2.5),
                         center=(0.0, 0.0, 1.0))
    return fill(m, trunk_cloud(**kwargs))


def clearance(grid_map, stop, step_s=0.002):
    """Smallest distance of the stop's path to any occupied voxel centre, brute force."""
    occupied = grid_map.index_to_position(np.argwhere(grid_map.occupied))  # local indices
    path = stop.positions(np.arange(stop.t_start, stop.t_end + step_s, step_s))
    return float(np.sqrt(((path[:, None, :] - occupied[None, :, :]) ** 2).sum(axis=2)).min())


def test_a_trunk_ahead_is_avoided_by_steering_with_more_clearance():
    m = trunk_map()  # 0.15 m radius, 1.5 m ahead, 0.2 m left: a straight stop ends beside it
    straight = BrakingTrajectory(EYE, V0, 2.0, DECEL)
    stop, choice = choose_emergency_stop(m, None, EYE, V0, 2.0, DECEL, 0.3, ANGLES)
    assert choice.steer_rad != 0.0 and stop.steer_rad == choice.steer_rad and stop.yaw == 0.3
    assert clearance(m, straight) < 0.2  # braking straight ends next to the trunk
    assert clearance(m, stop) > clearance(m, straight) + 0.2
    assert choice.clearance_m == pytest.approx(clearance(m, stop), abs=0.02)
    assert choice.straight_clearance_m == pytest.approx(clearance(m, straight), abs=0.02)
    assert np.linalg.norm(stop.sample(2.1).acceleration) == pytest.approx(DECEL)
    assert "steering" in choice.describe()


@pytest.mark.parametrize("cy, side", [(0.25, -1.0), (-0.25, 1.0)])
def test_it_steers_away_from_the_side_the_trunk_is_on(cy, side):
    m = trunk_map(cy=cy)
    stop, choice = choose_emergency_stop(m, None, EYE, V0, 0.0, DECEL, steer_angles_rad=ANGLES)
    assert math.copysign(1.0, choice.steer_rad) == side
    assert stop.stop_position[1] * side > 0.3


def test_unobserved_space_beside_keeps_the_stop_straight():
    m = trunk_map(fan_deg=6.0)  # only a narrow wedge ahead was ever observed
    stop, choice = choose_emergency_stop(m, None, EYE, V0, 0.0, DECEL, steer_angles_rad=ANGLES)
    assert choice.steer_rad == 0.0 and stop.steer_rad == 0.0 and choice.unobserved >= 1
    np.testing.assert_allclose(stop.stop_position, EYE + [1.25, 0.0, 0.0])
    assert "braking straight" in choice.describe()
    # ... unless braking straight would touch the trunk (closer than blind_below_m to it)
    assert choice.straight_clearance_m < 0.2
    stop, choice = choose_emergency_stop(m, None, EYE, V0, 0.0, DECEL, steer_angles_rad=ANGLES, blind_below_m=0.2)
    assert choice.blind and stop.steer_rad < 0.0 and clearance(m, stop) > clearance(m, BrakingTrajectory(EYE, V0, 0.0, DECEL)) + 0.1
    assert "never-observed" in choice.describe()
    stop, choice = choose_emergency_stop(m, None, EYE, V0, 0.0, DECEL, steer_angles_rad=ANGLES,
                                         blind_below_m=choice.straight_clearance_m)
    assert stop.steer_rad == 0.0 and not choice.blind


def test_without_angles_or_obstacles_it_brakes_straight():
    m = trunk_map()
    for angles in ((), (0.0,)):
        stop, choice = choose_emergency_stop(m, None, EYE, V0, 0.0, DECEL, steer_angles_rad=angles)
        assert stop.steer_rad == 0.0 and choice.steered_candidates == 0
    empty = OccupancyGridMap(GridMapConfig(size_m=(16.0, 16.0, 3.0)), center=(0.0, 0.0, 1.0))
    stop, choice = choose_emergency_stop(empty, None, EYE, V0, 0.0, DECEL, steer_angles_rad=ANGLES)
    assert stop.steer_rad == 0.0 and choice.clearance_m == math.inf
    stop, choice = choose_emergency_stop(m, None, EYE, np.zeros(3), 0.0, DECEL, steer_angles_rad=ANGLES)
    assert stop.duration == 0.0 and stop.steer_rad == 0.0  # at rest already


class CrowdedSwarm:
    """A stand-in EGO-Swarm view whose other drone is in the way of every steered stop."""

    def __init__(self):
        self.asked = []

    def collision_time(self, trajectory, t_from, horizon_s):
        self.asked.append(trajectory)
        return None if trajectory.steer_rad == 0.0 else (t_from + 0.2, 7, 0.4)


@pytest.mark.parametrize("angles, swarm, steered", [((25.0, 45.0), None, True), ((), None, False),
                                                    ((25.0, 45.0), CrowdedSwarm(), False)])
def test_the_planner_steers_its_emergency_stop_and_says_so(angles, swarm, steered):
    from planner_pkg.planning.planner_manager import PlanOutcome

    config = EgoConfig(map=GridMapConfig(size_m=(16.0, 16.0, 3.0), inflation_m=0.3, floor_m=0.3, ceiling_m=2.5),
                       emergency_decel_mps2=DECEL, emergency_steer_deg=angles)
    planner = EgoPlanner(config)
    planner.reset(EYE, np.array([10.0, 0.0, 1.0]))
    planner.swarm = swarm  # (attach_swarm would also hand it to the plan manager, replaced here)
    fill(planner.map, trunk_cloud())
    planner.manager.plan = lambda *args, **kwargs: PlanOutcome(None, "failed on purpose")
    state = VehicleState(4.0, EYE, V0, [0, 0, 0, 1], np.zeros(3))
    planner._collision_time = 4.3  # the committed trajectory is blocked 0.3 s ahead
    done, stop = planner._replan(state)
    assert done and isinstance(stop, BrakingTrajectory) and planner.trajectory is stop
    assert (stop.steer_rad != 0.0) == steered
    assert planner.stats.emergency_stops == 1 and planner.stats.emergency_steered == int(steered)
    assert ("steering" if steered else "braking straight") in planner.events[-1]
    if swarm is not None:
        assert swarm.asked and "another drone" in planner.events[-1]
    assert clearance(planner.map, stop) > (0.3 if steered else 0.0)


def test_a_steered_stop_the_caller_refuses_is_not_taken():
    m = trunk_map()
    seen = []

    def refuse(stop):
        seen.append(stop.steer_rad)
        return False

    stop, choice = choose_emergency_stop(m, None, EYE, V0, 0.0, DECEL, steer_angles_rad=ANGLES, accept=refuse)
    assert stop.steer_rad == 0.0 and choice.vetoed == len(seen) >= 1 and all(s != 0.0 for s in seen)
    assert "another drone" in choice.describe()


def test_the_emergency_stop_starts_where_the_vehicle_is_not_where_the_reference_is():
    """The controller leads or lags its reference: the stop must start from the vehicle's own
    position and velocity, else it ends short of where the vehicle can stop."""
    from planner_pkg.planning.planner_manager import PlanOutcome

    planner = EgoPlanner(EgoConfig(map=GridMapConfig(size_m=(16.0, 16.0, 3.0)), emergency_steer_deg=()))
    planner.reset(EYE, np.array([10.0, 0.0, 1.0]))
    planner.manager.plan = lambda *args, **kwargs: PlanOutcome(None, "failed on purpose")
    planner.trajectory = BrakingTrajectory(EYE - [0.3, 0.0, 0.0], 0.8 * V0, 4.0, 1.0, yaw=0.2)  # behind, slower
    state = VehicleState(4.0, EYE, V0, [0, 0, 0, 1], np.zeros(3))
    assert np.linalg.norm(planner.trajectory.state(4.0)[0] - EYE) > 0.15  # a lag the planner accepts
    planner._collision_time = 4.3
    _, stop = planner._replan(state)
    np.testing.assert_array_equal(stop.p0, EYE)
    np.testing.assert_array_equal(stop.v0, V0)


@pytest.mark.parametrize("ramp", [0.0, 0.1])
def test_the_emergency_stop_turns_from_the_acceleration_the_vehicle_was_flying(ramp):
    """With ``emergency_ramp_s`` the stop starts at the acceleration the vehicle was commanded
    (the reference's) and turns to the braking over that time: a vehicle accelerating forward
    stops farther along than one that brakes at once (traced in the forest at 6 m/s: the vehicle
    ended 0.35-1.28 m past the instant stop's reference)."""
    from planner_pkg.planning.planner_manager import PlanOutcome

    class Accelerating:  # the committed reference: accelerating forward at 5 m/s^2 at t = 4 s
        def state(self, t):
            return EYE.copy(), V0.copy(), np.array([5.0, 0.0, 0.0])

    planner = EgoPlanner(EgoConfig(map=GridMapConfig(size_m=(16.0, 16.0, 3.0)), emergency_steer_deg=(),
                                   emergency_decel_mps2=DECEL, emergency_ramp_s=ramp))
    planner.reset(EYE, np.array([10.0, 0.0, 1.0]))
    planner.manager.plan = lambda *args, **kwargs: PlanOutcome(None, "failed on purpose")
    planner.trajectory = Accelerating()
    planner._collision_time = 4.3
    _, stop = planner._replan(VehicleState(4.0, EYE, V0, [0, 0, 0, 1], np.zeros(3)))
    instant = BrakingTrajectory(EYE, V0, 4.0, DECEL)
    if ramp == 0.0:
        np.testing.assert_allclose(stop.state(4.0)[2], [-DECEL, 0.0, 0.0])
        np.testing.assert_allclose(stop.stop_position, instant.stop_position)
    else:
        np.testing.assert_allclose(stop.state(4.0)[2], [5.0, 0.0, 0.0])
        assert stop.ramp_s == ramp
        # over 0.1 s from +5 to -10 m/s^2 (jerk -150): 5 (0.1) + 5 (0.1)^2 / 2 - 150 (0.1)^3 / 6 = 0.5 m
        # flown, 4.75 m/s left, then 4.75^2 / (2 x 10) m of braking: 1.628 m against 1.25
        assert stop.stop_position[0] == pytest.approx(0.5 + 4.75 ** 2 / 20.0)
        assert instant.stop_position[0] == pytest.approx(1.25)


def straight_trajectory(t_start=4.0, y=0.02, z_end=1.0, length=6.0):
    """The committed reference: along +x at y m, 5 m/s (V0), from EYE to height z_end m."""
    from planner_pkg.planning.bspline import fit_cubic
    from planner_pkg.planning.trajectory import BsplineTrajectory

    dt = 0.1
    xs = np.arange(0.0, length + 1e-9, 5.0 * dt)
    pts = np.stack([xs, np.full_like(xs, y), np.linspace(EYE[2], z_end, xs.size)], axis=1)
    return BsplineTrajectory(fit_cubic(pts, dt, V0, V0, np.zeros(3), np.zeros(3)), t_start, start_yaw=0.0)


@pytest.mark.parametrize("trunk_y, in_map, z, stops", [(0.38, True, 1.0, False), (0.15, True, 1.0, True),
                                                       (0.38, False, 1.0, True), (None, True, -0.2, True)])
def test_a_block_by_the_inflation_alone_is_flown_on_with_an_emergency_clearance(trunk_y, in_map, z, stops):
    """emergency_clearance_m: a failed replan with the trajectory blocked 0.3 s ahead stops the
    vehicle only when the trajectory comes closer than that to an occupied voxel's centre. A
    trunk's surface 0.38 m beside the path (its voxel centre 0.33 m from it) blocks the path
    through the 0.3 m inflation alone: flown on. At 0.15 m (0.13 m) it is a real collision ahead:
    the emergency stop. A block by another drone's trajectory (not in the map): always a stop. A
    path descending below the map's 0.5 m floor, with no voxel near it: a stop (not the
    inflation's block)."""
    from planner_pkg.planning.planner_manager import PlanOutcome

    config = EgoConfig(map=EgoConfig().map.with_overrides({"size_m": (16.0, 16.0, 3.0)}), emergency_steer_deg=(),
                       emergency_decel_mps2=DECEL, emergency_clearance_m=0.25)
    planner = EgoPlanner(config)
    planner.reset(EYE, np.array([10.0, 0.0, 1.0]))
    if trunk_y is not None:
        zs = np.arange(0.3, 2.5, 0.05)
        fill(planner.map, np.stack([np.full_like(zs, 1.5), np.full_like(zs, trunk_y), zs], axis=1))
    committed = straight_trajectory(z_end=z)
    planner.trajectory = committed
    hit = planner.manager.trajectory_collision_time(committed, 4.0, 1.0, 0.05)
    assert hit is not None and hit - 4.0 < config.emergency_time_s  # blocked in the inflated map
    voxels = planner.map.occupied_points([-1.0, -1.0, 0.0], [7.0, 1.0, 3.0])
    gap = float(np.sqrt(((committed.positions(np.linspace(4.0, 5.0, 200))[:, None, :] - voxels[None]) ** 2)
                        .sum(axis=2)).min()) if voxels.shape[0] else math.inf
    assert (gap < 0.25) == (trunk_y is not None and trunk_y < 0.3)  # an independent measure of what is in the way
    planner.manager.plan = lambda *args, **kwargs: PlanOutcome(None, "failed on purpose")
    planner._collision_time, planner._collision_in_map = hit, in_map
    done, out = planner._replan(VehicleState(4.0, EYE, V0, [0, 0, 0, 1], np.zeros(3)))
    assert done
    if stops:
        assert isinstance(out, BrakingTrajectory) and planner.stats.emergency_stops == 1
        assert planner.stats.inflation_only_blocks == 0
    else:
        assert out is None and planner.trajectory is committed and planner.stats.emergency_stops == 0
        assert planner.stats.inflation_only_blocks == 1 and "by the inflation only" in planner.events[-1]
    # without the option every blocked point is an emergency (EGO)
    planner.config = EgoConfig(map=config.map, emergency_steer_deg=(), emergency_decel_mps2=DECEL,
                               emergency_clearance_m=None)
    planner.trajectory = committed
    _, again = planner._replan(VehicleState(4.0, EYE, V0, [0, 0, 0, 1], np.zeros(3)))
    assert isinstance(again, BrakingTrajectory)


@pytest.mark.parametrize("trunk_x, room", [(4.0, True), (1.5, False)])
def test_with_inflation_block_braking_the_vehicle_brakes_on_its_curve_before_the_block(trunk_x, room):
    """inflation_block_braking: the failed replan with the trajectory blocked by the inflation alone
    (a trunk 0.38 m beside the path) re-times the committed trajectory to stop 0.3 m
    (``unknown_space.margin_m``) short of the blocked point instead of flying on at 5 m/s: with room
    (the block ~0.7 s ahead) at the stop limit's 0.7 x 7 m/s^2; with none (~0.2 s) from now toward
    the full 7 m/s^2, said in the event. The planner flies the re-timed trajectory and keeps
    replanning; without a jerk-limited onset the option is refused."""
    from planner_pkg.config_schema import ConfigError
    from planner_pkg.planning.frontier import StopLimitedTrajectory
    from planner_pkg.planning.planner_manager import PlanOutcome

    config = EgoConfig(map=EgoConfig().map.with_overrides({"size_m": (16.0, 16.0, 3.0)}), emergency_steer_deg=(),
                       emergency_decel_mps2=DECEL, emergency_clearance_m=0.25, max_vel_mps=6.0, max_acc_mps2=7.0,
                       inflation_block_braking=True)
    planner = EgoPlanner(config)
    planner.reset(EYE, np.array([10.0, 0.0, 1.0]))
    zs = np.arange(0.3, 2.5, 0.05)
    fill(planner.map, np.stack([np.full_like(zs, trunk_x), np.full_like(zs, 0.38), zs], axis=1))
    committed = straight_trajectory()
    planner.trajectory = committed
    hit = planner.manager.trajectory_collision_time(committed, 4.0, 1.0, 0.05)
    assert hit is not None and hit - 4.0 < config.emergency_time_s
    planner.manager.plan = lambda *args, **kwargs: PlanOutcome(None, "failed on purpose")
    planner._collision_time, planner._collision_in_map = hit, True
    done, out = planner._replan(VehicleState(4.0, EYE, V0, [0, 0, 0, 1], np.zeros(3)))
    assert done and isinstance(out, StopLimitedTrajectory) and planner.trajectory is out and out.base is committed
    assert planner.stats.inflation_only_blocks == 1 and planner.stats.inflation_block_brakes == 1
    assert planner.stats.emergency_stops == 0 and "braking on its curve" in planner.events[-1]
    x_block = committed.state(hit)[0][0]
    if room:
        assert out.stop_position[0] <= x_block - 0.3 + 1e-6 and out.stop_position[0] > x_block - 0.45
        assert "full acceleration" not in planner.events[-1]
    else:
        assert out.stop_position[0] > x_block - 0.3 and "full acceleration" in planner.events[-1]
        assert out.t_warp - 4.0 < 0.03
    # flown: the vehicle's reference slows along the committed line
    p, v, _ = out.state(out.t_end)
    assert np.linalg.norm(v) == 0.0 and abs(p[1] - 0.02) < 1e-6
    with pytest.raises(ConfigError, match="inflation_block_braking"):
        EgoConfig(inflation_block_braking=True, unknown_space=EgoConfig().unknown_space.with_overrides(
            {"braking_jerk_time_s": 0.0}))
