"""Local targets, initial guesses (quintic, reused, A*-guided) and the re-timing speed profile."""
import numpy as np
import pytest

from planner_pkg.planning.bspline import UniformBSpline
from planner_pkg.planning.grid_map import GridMapConfig, OccupancyGridMap
from planner_pkg.planning.initial_path import (guided_spline, initial_spline, local_target, quintic_samples,
                                               shortcut, trapezoid_time)
from planner_pkg.planning.retiming import retime, speed_profile
from planner_pkg.planning.trajectory import BsplineTrajectory


def test_local_target_on_the_mission_line_at_the_horizon():
    start, goal = np.array([0.0, 0.0, 1.0]), np.array([40.0, 0.0, 1.0])
    target, is_goal = local_target([5.0, 1.0, 1.0], start, goal, 7.5)
    assert not is_goal
    assert target[1] == pytest.approx(0.0) and np.linalg.norm(target - [5.0, 1.0, 1.0]) == pytest.approx(7.5)
    assert target[0] > 5.0
    target, is_goal = local_target([35.0, 0.0, 1.0], start, goal, 7.5)
    assert is_goal and np.allclose(target, goal)
    # far off the line: never farther than the horizon
    target, _ = local_target([10.0, 20.0, 1.0], start, goal, 7.5)
    assert np.linalg.norm(target - [10.0, 20.0, 1.0]) <= 7.5 + 1e-9


def test_quintic_meets_its_boundary_states():
    p0, v0, a0 = np.zeros(3), np.array([1.0, 0.5, 0.0]), np.array([0.0, 1.0, 0.0])
    p1, v1, a1 = np.array([5.0, 2.0, 1.0]), np.array([2.0, 0.0, 0.0]), np.zeros(3)
    T, h = 3.0, 1e-5
    pts = quintic_samples(p0, v0, a0, p1, v1, a1, T, np.array([0.0, h, 2 * h, T - 2 * h, T - h, T]))
    np.testing.assert_allclose(pts[0], p0, atol=1e-12)
    np.testing.assert_allclose(pts[-1], p1, atol=1e-9)
    np.testing.assert_allclose((pts[1] - pts[0]) / h, v0, atol=1e-4)
    np.testing.assert_allclose((pts[-1] - pts[-2]) / h, v1, atol=1e-4)
    assert trapezoid_time(8.0, 2.0, 2.0) == pytest.approx(5.0)  # 4 s cruise + 1 s of ramps
    assert trapezoid_time(1.0, 2.0, 2.0) == pytest.approx(2.0 * np.sqrt(0.5))


def test_initial_spline_starts_with_the_given_state_and_reuses_the_previous_one():
    p0, v0, a0 = np.array([0.0, 0.0, 1.0]), np.array([1.5, 0.3, 0.0]), np.array([0.2, -0.4, 0.0])
    target, tvel = np.array([7.0, 1.0, 1.0]), np.array([2.0, 0.0, 0.0])
    sp = initial_spline(p0, v0, a0, target, tvel, 2.0, 3.0, 0.24)
    p, v, a = sp.evaluate_derivatives(0.0, 2)
    np.testing.assert_allclose([p, v, a], [p0, v0, a0], atol=1e-9)
    np.testing.assert_allclose(sp.evaluate(sp.duration), target, atol=1e-9)
    prev = BsplineTrajectory(sp, t_start=10.0, start_yaw=0.0)
    p1, v1, a1 = prev.state(11.0)
    reused = initial_spline(p1, v1, a1, target + [2.0, 0.0, 0.0], tvel, 2.0, 3.0, 0.24, previous=prev, t_now=11.0)
    np.testing.assert_allclose(reused.evaluate(1.0), prev.state(12.0)[0], atol=0.05)  # follows the old curve
    assert initial_spline(p0, np.zeros(3), np.zeros(3), p0, np.zeros(3), 2.0, 3.0, 0.24) is None


def test_shortcut_and_guided_spline_follow_free_space():
    m = OccupancyGridMap(GridMapConfig(size_m=(12.0, 12.0, 3.0), inflation_m=0.0, floor_m=0.0), center=(0, 0, 1))
    a, b = m.local_index(np.array([[2.0, -3.0, 0.0], [2.09, 0.5, 2.9]]))
    m.occupied[a[0]:b[0] + 1, a[1]:b[1] + 1, a[2]:b[2] + 1] = True
    m._mark_dirty(a, b)
    path = np.array([[0.0, 0.0, 1.0]] + [[x, 1.0, 1.0] for x in np.arange(0.0, 4.01, 0.2)] + [[4.0, 0.0, 1.0]])
    short = shortcut(m, path)
    assert 2 <= short.shape[0] < path.shape[0]
    np.testing.assert_allclose(short[[0, -1]], path[[0, -1]])
    sp = guided_spline(short, np.zeros(3), np.zeros(3), np.zeros(3), 2.0, 3.0, 0.24)
    np.testing.assert_allclose(sp.evaluate(0.0), path[0], atol=1e-9)
    np.testing.assert_allclose(sp.evaluate(sp.duration), path[-1], atol=1e-9)
    # an initial guess only: its corners are smoothed by the fit, the limits are the refine step's job
    assert sp.duration >= np.linalg.norm(np.diff(short, axis=0), axis=1).sum() / 2.0


def test_speed_profile_respects_the_limits_and_retime_keeps_the_start():
    s = np.linspace(0.0, 10.0, 201)
    kappa = np.where((s > 4.0) & (s < 5.0), 1.0, 0.0)  # a tight turn in the middle
    v = speed_profile(s, kappa, 0.0, 0.0, 3.0, 2.0, 2.0)
    assert v[0] == 0.0 and v[-1] == 0.0 and v.max() <= 3.0 + 1e-12
    assert v[(s > 4.0) & (s < 5.0)].max() <= np.sqrt(2.0) + 1e-9
    dv2 = np.diff(v ** 2) / (2.0 * np.diff(s))
    assert np.abs(dv2).max() <= 2.0 + 1e-9  # |dv/dt| = |d(v^2)/ds| / 2 <= a_max
    q = np.stack([np.arange(12) * 0.8, np.zeros(12), np.ones(12)], axis=1)
    fast = UniformBSpline(q, 0.2)  # 4 m/s
    slow, knots, tangents = retime(fast, 2.0, 3.0, 0.2)
    for x, y in zip(fast.evaluate_derivatives(0.0, 2), slow.evaluate_derivatives(0.0, 2)):
        np.testing.assert_allclose(x, y, atol=1e-9)
    assert slow.duration > fast.duration
    np.testing.assert_allclose(np.linalg.norm(tangents, axis=1), 1.0)
