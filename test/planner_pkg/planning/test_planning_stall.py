"""Stall detection and the A* route out (planning/stall.py, EgoConfig.stall): the progress monitor,
the route and its local targets on known maps, and closed-loop flights that need it."""
import math

import numpy as np
import pytest

from planner_pkg.planning.astar import AStarStatus
from planner_pkg.planning.ego_planner import EgoConfig, EgoPlanner
from planner_pkg.planning.grid_map import OccupancyGridMap
from planner_pkg.planning.stall import ProgressMonitor, StallConfig, find_route
from planner_pkg.sim import RunnerConfig, run_episode
from planner_pkg.types import VehicleState
from planner_pkg.world import Box, World

MAP = EgoConfig().map  # the planner's own map: 0.1 m voxels, 0.3 m cylinder inflation, 24 x 24 x 4 m window
START = np.array([0.0, 0.0, 1.0])
GOAL = np.array([10.5, 0.0, 1.0])
# a wall across the start-goal line at x = 6 m from far below the window to y = 8 m: the only way
# round is 8 m to the side of the line, beyond the A*-guided guess's widened search box (6 m)
WALL = Box((6.0, -11.0, 2.5), (0.4, 38.0, 5.0))


def box_occupancy(grid_map, boxes) -> np.ndarray:
    """The window's voxels whose centre lies in an axis-aligned box grown by half a voxel."""
    res, o, d = grid_map.res, grid_map.origin, grid_map.dims
    axes = [(np.arange(d[k]) + o[k] + 0.5) * res for k in range(3)]
    occ = np.zeros(tuple(int(n) for n in d), dtype=bool)
    for b in boxes:
        assert b.yaw == 0.0
        inside = [(abs(axes[k] - b.center[k]) <= 0.5 * b.size[k] + 0.5 * res) for k in range(3)]
        occ |= inside[0][:, None, None] & inside[1][None, :, None] & inside[2][None, None, :]
    return occ


def known_map(boxes, center=START) -> OccupancyGridMap:
    m = OccupancyGridMap(MAP, center=center)
    m.set_known(box_occupancy(m, boxes))
    return m


# -- the progress monitor ---------------------------------------------------------------------------
def test_progress_monitor_reports_a_stall_after_its_time_and_progress_after_it():
    mon = ProgressMonitor(StallConfig(enabled=True, time_s=6.0, progress_m=2.0))
    mon.reset(GOAL, 0.0, START)
    # creeping toward the goal by less than 2 m in 6 s, and wandering sideways: no progress
    for k in range(60):
        t = 0.1 * k
        p = START + [0.03 * k, 2.0 * math.sin(0.3 * k), 0.0]
        assert mon.update(t, p) is None, t
    assert mon.update(6.0, START + [1.9, 0.0, 0.0]) == "stalled"
    assert mon.stalled and mon.stalls == 1
    assert mon.update(6.1, START + [1.9, 0.0, 0.0]) is None
    assert mon.update(12.0, START + [1.9, 0.0, 0.0]) == "stalled"  # another time_s: reported again
    assert mon.stalls == 2
    # the distance to the goal 2 m below where it stood at the start: progress, the stall is over
    assert mon.update(12.5, START + [2.0, 0.0, 0.0]) == "progress"
    assert not mon.stalled
    # progress keeps the timer from running out: 1.9 m closer every 5 s is not 2 m, 2.1 m is
    mon.reset(GOAL, 0.0, START)
    for k in range(1, 6):
        assert mon.update(5.0 * k, START + [2.1 * k, 0.0, 0.0]) is None
    assert not mon.stalled


def test_progress_monitor_counts_no_progress_from_a_moved_goal_and_a_forced_stall():
    mon = ProgressMonitor(StallConfig(time_s=6.0, progress_m=2.0))
    mon.reset(GOAL, 0.0, START)
    # the goal moved 3 m closer (snapped out of an obstacle): that is not the vehicle's progress
    mon.set_goal(GOAL - [3.0, 0.0, 0.0])
    assert mon.update(1.0, START) is None
    assert mon.update(6.0, START) == "stalled"
    mon.reset(GOAL, 0.0, START)
    mon.force_stall(2.0)
    assert mon.stalled and mon.stalls == 1
    assert mon.update(3.0, START + [2.0, 0.0, 0.0]) == "progress"


def test_stall_config_is_validated_and_on_by_default():
    assert EgoConfig().stall.enabled is True and EgoConfig().stall.time_s == 10.0
    cfg = EgoConfig().with_overrides({"stall.enabled": False, "stall.time_s": 4.0})
    assert not cfg.stall.enabled and cfg.stall.time_s == 4.0
    with pytest.raises(ValueError, match="stall"):
        EgoConfig().with_overrides({"stall.time_s": 0.0})
    with pytest.raises(ValueError, match="progress_m"):
        StallConfig(progress_m=float("nan"))


# -- the route --------------------------------------------------------------------------------------
def test_route_leads_round_the_wall_and_its_target_is_the_horizon_along_it():
    m = known_map([WALL])
    route, search = find_route(m, START, GOAL, StallConfig().astar)
    assert route is not None, search.message
    assert route.ends_at_goal  # the goal is inside the window
    path = route.path
    np.testing.assert_allclose(path[0], START)
    np.testing.assert_allclose(path[-1], GOAL, atol=1e-9)
    assert not m.is_blocked(path).any()
    # it crosses the wall's line only beyond the wall's end (y = 8 m), clear of the inflation
    cross = np.nonzero(np.diff(np.sign(path[:, 0] - 6.0)))[0]
    assert cross.size and (path[cross, 1] > 8.0 + 0.3).all() and (path[cross + 1, 1] > 8.0 + 0.3).all()
    rt = route.target(START, 7.5)
    seg = np.linalg.norm(np.diff(path, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    k = int(np.searchsorted(s, 7.5))
    # on the route, 7.5 m of path from the start: between the vertices either side of that length
    assert np.linalg.norm(rt.target - path[k - 1]) <= seg[k - 1] + 1e-9
    assert np.linalg.norm(rt.target - path[k]) <= seg[k - 1] + 1e-9
    assert np.linalg.norm(rt.target - START) <= 7.5 + 1e-9
    assert rt.target[1] > 4.0  # well off the line toward the way round, not at (7.5, 0)
    assert not rt.is_goal and not m.is_blocked(rt.target[None])[0]
    assert rt.direction @ rt.direction == pytest.approx(1.0)
    assert rt.direction[1] > 0.3  # the route still climbs toward the wall's end there
    # from a point farther along, the target moves along with it; a long horizon ends at the goal
    later = route.target(path[len(path) // 2], 7.5)
    assert np.linalg.norm(later.target - GOAL) < np.linalg.norm(rt.target - GOAL)
    end = route.target(START, 100.0)
    assert end.is_goal and np.allclose(end.target, GOAL) and not end.direction.any()


def test_route_to_a_goal_beyond_the_window_ends_at_its_edge_and_a_boxed_in_goal_has_none():
    m = known_map([WALL])
    far_goal = np.array([60.0, 0.0, 1.0])
    route, search = find_route(m, START, far_goal, StallConfig().astar)
    assert route is not None, search.message
    assert not route.ends_at_goal
    end = route.path[-1]
    assert end[0] == pytest.approx(m.window_max[0] - 0.5, abs=0.2) and abs(end[1]) < 0.2
    assert not route.target(START, 1000.0).is_goal
    # a room round the goal: no route, and the search says so (no exception)
    room = [Box((8.5, 0.0, 2.5), (0.4, 4.4, 5.0)), Box((12.5, 0.0, 2.5), (0.4, 4.4, 5.0)),
            Box((10.5, 2.0, 2.5), (4.4, 0.4, 5.0)), Box((10.5, -2.0, 2.5), (4.4, 0.4, 5.0))]
    route, search = find_route(known_map(room), START, GOAL, StallConfig().astar)
    assert route is None and search.status is AStarStatus.NO_PATH and "no path" in search.message


def test_route_keeps_to_its_corridor_round_the_mission_line():
    # the way round the wall's end (y = 8 m) lies outside a 6 m corridor round the start-goal
    # segment: no route there; a 10 m one has it, and the route stays inside
    m = known_map([WALL])
    astar = StallConfig().astar
    route, search = find_route(m, START, GOAL, astar, mission_start=START, corridor_m=6.0)
    assert route is None and search.status is AStarStatus.NO_PATH
    route, search = find_route(m, START, GOAL, astar, mission_start=START, corridor_m=10.0)
    assert route is not None, search.message
    assert np.abs(route.path[:, 1]).max() <= 10.0 and route.path[:, 1].max() > 8.3
    # a vehicle already farther off than the corridor may still leave from where it is
    off = np.array([2.0, 9.5, 1.0])
    route, search = find_route(m, off, GOAL, astar, mission_start=START, corridor_m=6.0)
    assert route is not None, search.message
    assert np.abs(route.path[:, 1]).max() <= 10.0 + 1e-9


# -- in the planner ---------------------------------------------------------------------------------
class KnownWallPlanner(EgoPlanner):
    """An EgoPlanner whose map knows the boxes wherever its window is (a surveyed map); the
    camera's frames are fused on top."""

    def __init__(self, config, boxes):
        super().__init__(config)
        self.boxes = boxes
        self._origin = None

    def reset(self, start, goal):
        super().reset(start, goal)
        self._origin = None
        self._refresh()

    def _refresh(self):
        if self._origin is None or (self.map.origin != self._origin).any():
            self.map.set_known(box_occupancy(self.map, self.boxes))
            self._origin = self.map.origin.copy()

    def update(self, state, sensors):
        out = super().update(state, sensors)
        self._refresh()
        return out


def _hover(planner, p, t0, t1, dt=0.1):
    out = None
    for k in range(int(round((t1 - t0) / dt))):
        out = planner.update(VehicleState.at_rest(p, t=t0 + dt * k), None) or out
    return out


def test_a_stalled_planner_takes_its_targets_from_the_route_and_goes_back_to_the_line_after_progress():
    # the vehicle does not move whatever it is told (held in the tests' hands): after time_s the
    # planner counts a stall, says so and plans toward targets on the route round the wall; once
    # the distance to the goal has come down by progress_m it aims along the line again
    cfg = EgoConfig(max_consecutive_failures=1000).with_overrides(
        {"stall.enabled": True, "stall.time_s": 3.0, "stall.corridor_m": 12.0}).with_time_limits_scaled(1000.0)
    planner = KnownWallPlanner(cfg, [WALL])
    planner.reset(START, GOAL)
    _hover(planner, START, 0.0, 2.9)
    assert planner.stats.stalls == 0 and planner.stats.route_plans == 0
    _hover(planner, START, 2.9, 4.5)
    assert planner.stats.stalls == 1 and planner.stats.route_plans > 0, planner.events
    assert any("no progress toward the goal for 3 s" in e for e in planner.events), planner.events
    # a new plan from here aims at the route's target: 7.5 m along the route, toward y = 8 m
    p = np.array([0.5, 2.0, 1.0])
    out = planner.update(VehicleState.at_rest(p, t=5.0), None)
    for k in range(1, 30):
        if out is not None and hasattr(out, "t_end"):
            break
        out = planner.update(VehicleState.at_rest(p, t=5.0 + 0.1 * k), None)
    assert out is not None and hasattr(out, "t_end"), planner.events
    end = out.state(out.t_end)[0]
    assert end[1] > 4.0 and end[0] < 6.0, end  # on the wall's near side, toward its end
    # progress: 2.5 m closer to the goal than where the stall began -> back to the line
    n = planner.stats.route_plans
    q = np.array([9.0, 3.0, 1.0])  # past the wall: 3.4 m from the goal against 10.5 m
    planner.update(VehicleState.at_rest(q, t=9.0), None)
    assert any("back on the start-goal line" in e for e in planner.events), planner.events
    _hover(planner, q, 9.1, 11.0)
    assert planner.stats.route_plans == n


def test_with_the_stall_off_the_planner_never_routes():
    cfg = EgoConfig(max_consecutive_failures=1000).with_overrides({"stall.enabled": False})
    planner = KnownWallPlanner(cfg.with_time_limits_scaled(1000.0), [WALL])
    planner.reset(START, GOAL)
    _hover(planner, START, 0.0, 12.0)
    assert planner.stats.stalls == 0 and planner.stats.route_plans == 0
    assert not any("progress" in e for e in planner.events)


@pytest.mark.parametrize("enabled", [False, True])
def test_a_wall_longer_than_the_guided_search_is_flown_round_only_with_the_route(enabled):
    # closed loop, the map knowing the wall: the plans toward the line's local target behind the
    # wall search for a way within 6 m of the line and fail; EGO then gives the goal up after
    # max_consecutive_failures. With the stall route, the failures make it route first: it flies
    # round the wall's end 8 m to the side and reaches the goal without contact.
    world = World([-3.0, -13.0, 0.0], [15.0, 13.0, 5.0], [WALL])
    cfg = EgoConfig().with_overrides({"stall.enabled": enabled, "stall.corridor_m": 12.0}).with_time_limits_scaled(1000.0)
    planner = KnownWallPlanner(cfg, [WALL])
    result = run_episode(world, planner, START, GOAL, RunnerConfig(timeout_s=40.0, seed=1))
    s = result.summary
    if enabled:
        assert s.reached and not s.collided, (s.reason, s.message, planner.events)
        assert planner.stats.stalls >= 1 and planner.stats.route_plans > 0
        assert s.min_clearance_m > 0.1
        log = result.log.as_array()
        assert log[:, 2].max() > 8.0  # it went round the wall's end
    else:
        assert not s.reached and not s.collided, (s.reason, s.message)
        assert any("giving the goal up" in e for e in planner.events), planner.events
        assert planner.stats.stalls == 0
