"""Wall-clock safety nets of the EGO planner (issue 6): counted and logged when they fire, and
widened together (``EgoConfig.with_time_limits_scaled``) where the clock stands still."""
import logging
from dataclasses import replace

import numpy as np
import pytest

from planner_pkg.planning.astar import AStarConfig
from planner_pkg.planning.ego_planner import EgoConfig, EgoPlanner
from planner_pkg.planning.grid_map import GridMapConfig, OccupancyGridMap
from planner_pkg.planning.planner_manager import PlanManager
from planner_pkg.planning.rebound import OptimizerConfig
from planner_pkg.sim import RunnerConfig, run_episode
from planner_pkg.world import Cylinder, World

SMALL_MAP = EgoConfig().map.with_overrides({"size_m": (16.0, 16.0, 4.0)})


def _world():
    trees = [Cylinder((4.0, 0.1), 0.4, 4.0), Cylinder((7.5, -0.9), 0.35, 4.0), Cylinder((7.0, 1.4), 0.3, 4.0)]
    return World([-2.0, -6.0, 0.0], [14.0, 6.0, 5.0], trees)


def test_with_time_limits_scaled_widens_exactly_the_wall_clock_limits():
    base = EgoConfig()
    wide = base.with_time_limits_scaled(10.0)
    assert wide.retry_budget_s == pytest.approx(10 * base.retry_budget_s)
    assert wide.optimizer.max_time_s == pytest.approx(10 * base.optimizer.max_time_s)
    assert wide.optimizer.astar.max_time_s == pytest.approx(10 * base.optimizer.astar.max_time_s)
    assert wide.stall.astar.max_time_s == pytest.approx(10 * base.stall.astar.max_time_s)
    # the deterministic budgets and everything else are untouched
    assert wide.optimizer.max_total_iterations == base.optimizer.max_total_iterations
    assert wide.optimizer.astar.max_expansions == base.optimizer.astar.max_expansions
    assert wide.stall.astar.max_expansions == base.stall.astar.max_expansions
    assert replace(wide, retry_budget_s=base.retry_budget_s, optimizer=base.optimizer, stall=base.stall) == base
    assert base.with_time_limits_scaled(1.0) is base
    for bad in (0.5, 0.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="time limit scale"):
            base.with_time_limits_scaled(bad)


def test_generous_limits_leave_the_flight_to_the_deterministic_budgets():
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP).with_time_limits_scaled(20.0))
    result = run_episode(_world(), planner, (0.0, 0.0, 1.0), (11.0, 0.0, 1.0), RunnerConfig(timeout_s=14.0, seed=1))
    assert result.summary.reached and not result.summary.collided
    assert planner.stats.safety_net_hits == {} and planner.stats.safety_net_total == 0


def _walled_map():
    """A 10 x 10 x 2 m map around (0, 0, 1) with a wall at x = 0 from y = -4 to 4 m."""
    m = OccupancyGridMap(GridMapConfig(size_m=(10.0, 10.0, 2.0), floor_m=0.0, ceiling_m=2.0, inflation_m=0.0),
                         center=(0.0, 0.0, 1.0))
    a = m.local_index(np.array([[0.0, -4.0, 0.0]]))[0]
    b = m.local_index(np.array([[0.09, 3.99, 1.99]]))[0]
    m.occupied[a[0]:b[0] + 1, a[1]:b[1] + 1, a[2]:b[2] + 1] = True
    m.log_odds[a[0]:b[0] + 1, a[1]:b[1] + 1, a[2]:b[2] + 1] = m.l_max
    m._mark_dirty(a, b)
    return m


def test_an_astar_time_limit_is_reported_by_the_plan():
    slow = AStarConfig(step_voxels=1, clearance_voxels=0, max_time_s=1e-9, max_expansions=10**6)
    manager = PlanManager(_walled_map(), OptimizerConfig(astar=slow), knot_dt=0.24)
    out = manager.plan(np.array([-2.05, 0.05, 1.05]), np.zeros(3), np.zeros(3), np.array([2.05, 0.05, 1.05]),
                       np.zeros(3), 0.0, 0.0, guided=True)
    assert not out.success and out.guide_time_limited and "ran out of time" in out.message
    assert out.safety_net_hits() == {"astar_time": 1}
    # the node budget is deterministic: running out of it is no safety net
    budget = AStarConfig(step_voxels=1, clearance_voxels=0, max_time_s=60.0, max_expansions=50)
    out = PlanManager(_walled_map(), OptimizerConfig(astar=budget), knot_dt=0.24).plan(
        np.array([-2.05, 0.05, 1.05]), np.zeros(3), np.zeros(3), np.array([2.05, 0.05, 1.05]), np.zeros(3), 0.0, 0.0,
        guided=True)
    assert not out.success and not out.guide_time_limited and out.safety_net_hits() == {}


def test_safety_net_hits_are_counted_and_logged(caplog):
    planner = EgoPlanner(EgoConfig(map=SMALL_MAP))
    planner.reset(np.zeros(3) + [0.0, 0.0, 1.0], np.array([8.0, 0.0, 1.0]))
    with caplog.at_level(logging.WARNING, logger="planner_pkg.planning.ego_planner"):
        planner._safety_nets(1.0, {"astar_time": 2}, success=False)
        planner._safety_nets(1.1, {"retry_time": 1, "optimizer_time": 1}, success=True)
    assert planner.stats.safety_net_hits == {"astar_time": 2, "retry_time": 1, "optimizer_time": 1}
    assert planner.stats.safety_net_total == 4
    lines = [r.getMessage() for r in caplog.records if "safety net fired" in r.getMessage()]
    assert len(lines) == 1 and "astar_time" in lines[0]  # the first few, then every 20th and "depends on this machine" in lines[0]
