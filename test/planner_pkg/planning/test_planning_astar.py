"""A* guide-path search: known shortest paths, clean failures, snapping, budgets."""
import math
from dataclasses import replace

import numpy as np
import pytest

from planner_pkg.planning.astar import AStarConfig, AStarStatus, astar_search
from planner_pkg.planning.grid_map import GridMapConfig, OccupancyGridMap

# exact 0.1 m search on the map voxels, optimal heuristic weight, no extra clearance
EXACT = AStarConfig(step_voxels=1, tie_breaker=1.0, clearance_voxels=0, max_time_s=5.0, margin_z_m=0.0)


def grid(blocked_boxes=(), inflation_m=0.0):
    """A 10 x 10 x 2 m map around (0, 0, 1) with the given world boxes ((lo), (hi)) occupied."""
    m = OccupancyGridMap(GridMapConfig(size_m=(10.0, 10.0, 2.0), floor_m=0.0, ceiling_m=2.0,
                                       inflation_m=inflation_m), center=(0.0, 0.0, 1.0))
    for lo, hi in blocked_boxes:
        a = m.local_index(np.array([lo]))[0]
        b = m.local_index(np.array([hi]))[0]
        m.occupied[a[0]:b[0] + 1, a[1]:b[1] + 1, a[2]:b[2] + 1] = True
        m.log_odds[a[0]:b[0] + 1, a[1]:b[1] + 1, a[2]:b[2] + 1] = m.l_max
        m._mark_dirty(a, b)
    return m


def length(path):
    return float(np.linalg.norm(np.diff(path, axis=0), axis=1).sum())


def test_a_scaled_config_multiplies_the_budgets_only():
    c = AStarConfig(max_expansions=1000, max_time_s=0.05, margin_m=3.0, tie_breaker=2.0)
    assert c.scaled(1.0) is c
    s = c.scaled(2.5)
    assert s.max_expansions == 2500 and s.max_time_s == pytest.approx(0.125)
    assert replace(s, max_expansions=1000, max_time_s=0.05) == c  # nothing else changed
    assert c.scaled(2.5) is s  # cached: the planner asks for the same ones every replan


def test_straight_and_diagonal_paths_in_free_space_are_shortest():
    m = grid()
    start, goal = np.array([-2.05, 0.05, 1.05]), np.array([2.05, 0.05, 1.05])
    r = astar_search(m, start, goal, EXACT)
    assert r.success and r.status is AStarStatus.SUCCESS
    np.testing.assert_allclose(r.path[0], start)
    np.testing.assert_allclose(r.path[-1], goal)
    assert length(r.path) == pytest.approx(4.1, abs=1e-9)
    goal2 = np.array([1.05, 3.05, 1.05])  # 31 x 30 voxels: 30 diagonal + 1 straight steps
    r2 = astar_search(m, start, goal2, EXACT)
    assert length(r2.path) == pytest.approx(0.1 * (30 * math.sqrt(2) + 1), abs=1e-9)


def test_path_around_a_wall_has_the_known_length_and_stays_free():
    # a wall x in [0, 0.1], y in [-2, 2] (all heights): the shortest way passes its end
    m = grid([((0.0, -2.0, 0.0), (0.09, 1.99, 1.99))])
    start, goal = np.array([-1.05, 0.05, 1.05]), np.array([1.15, 0.05, 1.05])
    r = astar_search(m, start, goal, EXACT)
    assert r.success
    assert not m.is_blocked(r.path).any()
    # voxel (-11, 0) -> around the wall's end at (0, 20) -> (11, 0): two octile legs of
    # (11, 20) voxels each = 11 diagonal + 9 straight steps (the search box is one layer thick)
    assert length(r.path) == pytest.approx(0.1 * 2 * (11 * math.sqrt(2) + 9), abs=1e-9)
    assert length(r.path) > np.linalg.norm(goal - start)


def test_boxed_in_start_fails_cleanly_with_no_path():
    # a closed shell around the start (walls 0.1 m thick), within the map's z range
    shell = [((-1.0, -1.0, 0.0), (1.0, -0.91, 1.99)), ((-1.0, 0.91, 0.0), (1.0, 1.0, 1.99)),
             ((-1.0, -1.0, 0.0), (-0.91, 1.0, 1.99)), ((0.91, -1.0, 0.0), (1.0, 1.0, 1.99))]
    m = grid(shell)
    r = astar_search(m, [0.05, 0.05, 1.05], [3.05, 0.05, 1.05], EXACT)
    assert not r.success
    assert r.status is AStarStatus.NO_PATH
    assert "no path" in r.message and r.path.shape == (0, 3)
    assert r.expansions > 0


def test_a_goal_cut_off_from_the_start_ends_at_the_connectivity_check_with_the_same_answer():
    # a closed shell around the goal; the start is outside in ~6000 open cells of the search box
    shell = [((1.0, -1.0, 0.0), (3.0, -0.91, 1.99)), ((1.0, 0.91, 0.0), (3.0, 1.0, 1.99)),
             ((1.0, -1.0, 0.0), (1.09, 1.0, 1.99)), ((2.91, -1.0, 0.0), (3.0, 1.0, 1.99))]
    m = grid(shell)
    start, goal = [-3.05, 0.05, 1.05], [2.05, 0.05, 1.05]
    flood = astar_search(m, start, goal, replace(EXACT, connectivity_check_after=0, max_expansions=50000))
    checked = astar_search(m, start, goal, replace(EXACT, connectivity_check_after=300, max_expansions=50000))
    assert flood.status is checked.status is AStarStatus.NO_PATH
    assert flood.expansions > 3000 and checked.expansions == 300
    # a connected goal far away: the check passes and the search goes on to the same path
    wall = [((0.0, -2.5, 0.0), (0.09, 2.49, 1.99))]
    m = grid(wall)
    far = [1.15, 0.05, 1.05]
    plain = astar_search(m, [-1.05, 0.05, 1.05], far, replace(EXACT, connectivity_check_after=0))
    with_check = astar_search(m, [-1.05, 0.05, 1.05], far, replace(EXACT, connectivity_check_after=100))
    assert plain.success and with_check.success and plain.expansions > 100
    np.testing.assert_array_equal(plain.path, with_check.path)
    assert plain.expansions == with_check.expansions


def test_budget_and_time_limits_end_the_search():
    m = grid([((0.0, -4.0, 0.0), (0.09, 3.99, 1.99))])
    r = astar_search(m, [-2.05, 0.05, 1.05], [2.05, 0.05, 1.05],
                     AStarConfig(step_voxels=1, max_expansions=50, clearance_voxels=0))
    assert r.status is AStarStatus.NODE_BUDGET and "budget" in r.message
    r = astar_search(m, [-2.05, 0.05, 1.05], [2.05, 0.05, 1.05],
                     AStarConfig(step_voxels=1, max_time_s=1e-9, clearance_voxels=0))
    assert r.status in (AStarStatus.TIME_LIMIT, AStarStatus.NO_PATH, AStarStatus.SUCCESS)


def test_blocked_start_is_snapped_and_outside_points_fail():
    m = grid([((-0.2, -0.2, 0.0), (0.19, 0.19, 1.99))])
    r = astar_search(m, [0.05, 0.05, 1.05], [2.05, 0.05, 1.05], AStarConfig(snap_m=0.5))
    assert r.success
    np.testing.assert_allclose(r.path[0], [0.05, 0.05, 1.05])  # starts where asked
    assert not m.is_blocked(r.path[1:]).any()  # then leaves the obstacle
    r = astar_search(m, [0.05, 0.05, 1.05], [2.05, 0.05, 1.05], AStarConfig(snap_m=0.1))
    assert r.status is AStarStatus.START_BLOCKED and "inside" in r.message
    r = astar_search(m, [2.05, 0.05, 1.05], [0.05, 0.05, 1.05], AStarConfig(snap_m=0.0))
    assert r.status is AStarStatus.GOAL_BLOCKED
    r = astar_search(m, [2.05, 0.05, 1.05], [50.0, 0.0, 1.0])
    assert r.status is AStarStatus.OUTSIDE_MAP and "outside" in r.message
    r = astar_search(m, [np.nan, 0.0, 1.0], [1.0, 0.0, 1.0])
    assert r.status is AStarStatus.OUTSIDE_MAP


def test_default_coarse_search_finds_a_free_path_with_clearance():
    m = grid([((0.0, -2.0, 0.0), (0.09, 1.99, 1.99))], inflation_m=0.2)
    # the default search, with its wall-clock safety net widened (a loaded machine tripped it:
    # the node budget, not the clock, is what this test is about)
    r = astar_search(m, [-1.05, 0.05, 1.05], [1.15, 0.05, 1.05], AStarConfig(max_time_s=60.0))
    assert r.success and not m.is_blocked(r.path).any()


@pytest.mark.parametrize("kwargs", [dict(max_expansions=0), dict(max_time_s=0.0), dict(tie_breaker=0.5),
                                    dict(step_voxels=0), dict(margin_m=-1.0), dict(clearance_voxels=-1)])
def test_bad_config(kwargs):
    with pytest.raises(ValueError, match=list(kwargs)[0]):
        AStarConfig(**kwargs)


@pytest.mark.parametrize("grow,step", [(0, 1), (1, 1), (0, 2), (1, 2), (2, 2), (1, 3)])
def test_search_cells_are_the_dilated_voxels_cut_into_cells(grow, step):
    """Independent truth: scipy's binary dilation by the cube (inside the box: nothing beyond its
    sides counts), then a cell per step^3 voxels, blocked when any voxel in it is; checked cell by
    cell with a loop."""
    from scipy import ndimage

    from planner_pkg.planning.astar import search_cells

    rng = np.random.default_rng(grow * 10 + step)
    voxels = np.zeros((8 * step, 6 * step, 3 * step), bool)
    voxels[tuple(rng.integers(0, voxels.shape, size=(3, 3)).T)] = True  # three blocked voxels
    voxels[0, 0, 0] = voxels[-1, -1, -1] = True  # and the corners: the dilation stops at the sides
    grown = ndimage.binary_dilation(voxels, np.ones((2 * grow + 1,) * 3, bool)) if grow else voxels
    expected = np.zeros((8, 6, 3), bool)
    for i, j, k in np.ndindex(*expected.shape):
        expected[i, j, k] = grown[i * step:(i + 1) * step, j * step:(j + 1) * step, k * step:(k + 1) * step].any()
    assert expected.any() and not expected.all()
    np.testing.assert_array_equal(search_cells(voxels, grow, step), expected)


@pytest.mark.parametrize("wide_margin", [0.0, 6.0])
def test_a_guided_guess_cut_off_in_its_box_searches_a_wider_box(wide_margin):
    """A wall across the way whose ends lie outside the 3 m box around start and target: the
    guided guess's A* finds no path in the box (NO_PATH); with ``guided_wide_margin_m`` it searches
    once more in the wider box (clipped to the map window) and the plan goes round the wall's
    end; without it the plan fails for want of a guide path."""
    from planner_pkg.planning.planner_manager import PlanManager
    from planner_pkg.planning.rebound import OptimizerConfig

    m = grid([((0.0, -4.0, 0.0), (0.29, 3.99, 1.99))])
    start, target = np.array([-1.5, 0.05, 1.05]), np.array([1.5, 0.05, 1.05])
    boxed = astar_search(m, start, target, AStarConfig(max_time_s=5.0))
    assert boxed.status is AStarStatus.NO_PATH
    cfg = OptimizerConfig(max_vel_mps=2.0, max_acc_mps2=3.0, max_time_s=10.0, guided_wide_margin_m=wide_margin,
                          astar=AStarConfig(max_time_s=5.0))
    out = PlanManager(m, cfg, knot_dt=0.24).plan(start, np.zeros(3), np.zeros(3), target, np.zeros(3), 0.0, 0.0,
                                                 guided=True)
    if not wide_margin:
        assert not out.success and out.message.startswith("no guide path to the target: no path")
        return
    assert out.success, out.message
    spline = out.trajectory.spline
    pts = spline.evaluate(np.linspace(0.0, spline.duration, 400))
    assert np.abs(pts[:, 1]).max() > 4.0  # round the wall's end
    assert not m.is_blocked(pts).any()
    np.testing.assert_allclose(pts[-1], target, atol=1e-9)


def test_a_guided_guess_at_a_crawl_is_slower_with_closer_control_points():
    """guided_speed_fraction f: the guided guess cruises at f x the speed limit and reaches the
    target at f x target_vel, so its control points lie about f times as far apart along the path
    (the optimiser's smoothing then moves its speed up to ~1.4 f x the limit on a free path)."""
    from planner_pkg.planning.planner_manager import PlanManager
    from planner_pkg.planning.rebound import OptimizerConfig

    m = grid()
    cfg = OptimizerConfig(max_vel_mps=2.0, max_acc_mps2=3.0, max_time_s=10.0, astar=AStarConfig(max_time_s=5.0))
    start, target = np.array([-3.0, 0.05, 1.05]), np.array([3.0, 0.05, 1.05])
    end_vel = np.array([2.0, 0.0, 0.0])
    plans = {f: PlanManager(m, cfg, knot_dt=0.24).plan(start, np.zeros(3), np.zeros(3), target, end_vel, 0.0, 0.0,
                                                        guided=True, guided_speed_fraction=f) for f in (1.0, 0.3)}
    peak, spacing = {}, {}
    for f, out in plans.items():
        assert out.success, out.message
        spline = out.trajectory.spline
        peak[f] = max(float(np.linalg.norm(spline.evaluate_derivatives(t, 1)[1]))
                      for t in np.linspace(0.0, spline.duration, 200))
        spacing[f] = float(np.linalg.norm(np.diff(spline.control_points, axis=0), axis=1).max())
    assert peak[1.0] == pytest.approx(2.0, rel=0.01) and peak[0.3] < 0.5 * 2.0
    np.testing.assert_allclose(plans[0.3].trajectory.spline.evaluate_derivatives(plans[0.3].trajectory.spline.duration,
                                                                                  1)[1], 0.3 * end_vel, atol=1e-9)
    assert plans[0.3].trajectory.spline.duration > 2.5 * plans[1.0].trajectory.spline.duration
    assert spacing[0.3] < 0.5 * spacing[1.0]
    with pytest.raises(ValueError, match="guided_speed_fraction"):
        PlanManager(m, cfg, knot_dt=0.24).plan(start, np.zeros(3), np.zeros(3), target, end_vel, 0.0, 0.0,
                                               guided=True, guided_speed_fraction=0.0)


def test_a_slower_guided_guess_slows_from_the_start_speed(monkeypatch):
    """A guided guess below the full speed (the crawl from rest, the in-flight braking guess) is
    built to slow from the start speed along the guide path; the usual one is not."""
    from planner_pkg.planning import planner_manager
    from planner_pkg.planning.planner_manager import PlanManager
    from planner_pkg.planning.rebound import OptimizerConfig

    seen = []
    real = planner_manager.guided_spline

    def recording(*args, **kwargs):
        seen.append(kwargs.get("slow_down", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(planner_manager, "guided_spline", recording)
    m = grid()
    cfg = OptimizerConfig(max_vel_mps=2.0, max_acc_mps2=3.0, max_time_s=10.0, astar=AStarConfig(max_time_s=5.0))
    start, target = np.array([-3.0, 0.05, 1.05]), np.array([3.0, 0.05, 1.05])
    v0 = np.array([2.0, 0.0, 0.0])
    for f in (1.0, 0.4):
        out = PlanManager(m, cfg, knot_dt=0.24).plan(start, v0, np.zeros(3), target, v0, 0.0, 0.0, guided=True,
                                                     guided_speed_fraction=f)
        assert out.success, out.message
    assert seen == [False, True]


def test_guided_guesses_of_one_plan_share_their_guide_search(monkeypatch):
    """Two guided guesses of one plan (the same obstacle set: the map has not changed) from the
    same start to the same target, e.g. the crawl guess and the usual one, run A* once and get the
    same guide path; a new obstacle set (the next plan, after the map was updated), another start,
    target or time scale searches again."""
    from planner_pkg.planning import planner_manager
    from planner_pkg.planning.planner_manager import PlanManager
    from planner_pkg.planning.rebound import OptimizerConfig

    m = grid([((0.0, -1.0, 0.0), (0.29, 0.99, 1.99))])
    calls = []

    def counting_search(*args, **kwargs):
        result = astar_search(*args, **kwargs)
        calls.append(result)
        return result

    monkeypatch.setattr(planner_manager, "astar_search", counting_search)
    cfg = OptimizerConfig(max_vel_mps=2.0, max_acc_mps2=3.0, max_time_s=10.0, astar=AStarConfig(max_time_s=5.0))
    manager = PlanManager(m, cfg, knot_dt=0.24)
    start, target = np.array([-2.0, 0.05, 1.05]), np.array([2.0, 0.05, 1.05])

    def plan(obstacles, p0=start, goal=target, fraction=1.0, scale=1.0):
        return manager.plan(p0, np.zeros(3), np.zeros(3), goal, np.zeros(3), 0.0, 0.0, guided=True,
                            obstacles=obstacles, guided_speed_fraction=fraction, time_scale=scale)

    first = manager.optimizer.obstacle_set()
    crawl, usual = plan(first, fraction=0.3), plan(first)
    assert crawl.success and usual.success, (crawl.message, usual.message)
    assert len(calls) == 1
    # the same guide path: the usual guess equals a manager's that searched afresh
    fresh = PlanManager(m, cfg, knot_dt=0.24).plan(start, np.zeros(3), np.zeros(3), target, np.zeros(3), 0.0, 0.0,
                                                   guided=True)
    np.testing.assert_array_equal(usual.trajectory.spline.control_points, fresh.trajectory.spline.control_points)
    assert len(calls) == 2
    plan(manager.optimizer.obstacle_set())  # the next plan: the map may have changed
    assert len(calls) == 3
    second = manager.optimizer.obstacle_set()
    plan(second)
    plan(second, goal=target + np.array([0.0, 0.2, 0.0]))
    plan(second, p0=start + np.array([0.0, 0.2, 0.0]), goal=target + np.array([0.0, 0.2, 0.0]))
    plan(second, p0=start + np.array([0.0, 0.2, 0.0]), goal=target + np.array([0.0, 0.2, 0.0]), scale=2.0)
    assert len(calls) == 7  # (another time scale: other A* budgets)
    plan(None)
    plan(None)  # without an obstacle set nothing says the map stayed the same
    assert len(calls) == 9
