"""Local targets, initial guesses (quintic, reused, A*-guided) and the re-timing speed profile."""
import numpy as np
import pytest

from planner_pkg.planning.bspline import UniformBSpline, fit_cubic
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


def arc_trajectory(speed, radius=5.0, length=8.0, dt=0.2, t_start=10.0):
    """A level arc (radius m, centre at (0, radius, 1)) flown at a constant ``speed`` m/s."""
    th = np.arange(0.0, length / radius + 1e-9, speed * dt / radius)
    pts = np.stack([radius * np.sin(th), radius * (1.0 - np.cos(th)), np.ones_like(th)], axis=1)
    tangent = lambda a: np.array([np.cos(a), np.sin(a), 0.0])
    normal = lambda a: np.array([-np.sin(a), np.cos(a), 0.0])
    sp = fit_cubic(pts, dt, speed * tangent(0.0), speed * tangent(th[-1]), speed ** 2 / radius * normal(0.0),
                   speed ** 2 / radius * normal(th[-1]))
    return BsplineTrajectory(sp, t_start=t_start, start_yaw=0.0)


def arc_length_of(points, radius=5.0):
    """Arc length along the test arc of points near it (their angle about its centre), m."""
    return radius * np.arctan2(points[:, 0], radius - points[:, 1])


@pytest.mark.parametrize("old_speed, acc, expected", [
    (1.0, 2.0, 1.0 * 1.0 + 0.5 * 2.0 * 1.0 ** 2),  # speeds up from 1 m/s at 2 m/s^2: 2 m in the first second
    (1.0, 0.0, 1.0),  # EGO: the old timing, 1 m in the first second
    (3.0, 0.5, 3.0 + 0.5 * 0.5),  # from the speed it has
])
def test_a_reused_path_is_retimed_to_speed_up_and_keeps_its_shape(old_speed, acc, expected):
    prev = arc_trajectory(old_speed)
    t_now = 10.4
    p0, v0, a0 = prev.state(t_now)
    s0 = arc_length_of(p0[None])[0]
    target = np.array([12.0, 5.0, 1.0])
    guess = initial_spline(p0, v0, a0, target, np.array([4.0, 0.0, 0.0]), 4.0, 6.0, 0.12, previous=prev, t_now=t_now,
                           reuse_acc_mps2=acc)
    p, v, a = guess.evaluate_derivatives(0.0, 2)
    np.testing.assert_allclose([p, v, a], [p0, v0, a0], atol=1e-9)  # continuity with the reference
    # along the old arc, and as far along it after 1 s as the new timing says
    on_arc = guess.evaluate(np.linspace(0.0, 1.0, 40))
    assert np.abs(np.hypot(on_arc[:, 0], on_arc[:, 1] - 5.0) - 5.0).max() < 0.02
    assert arc_length_of(guess.evaluate(np.array([1.0])))[0] - s0 == pytest.approx(expected, abs=0.06)


def test_a_reused_path_that_speeds_up_faster_keeps_its_own_timing():
    # a take-off from rest at up to 6 m/s^2: re-timed at 0.5 m/s^2 it is never slower than that
    start, target = np.array([0.0, 0.0, 1.0]), np.array([8.0, 0.0, 1.0])
    prev = BsplineTrajectory(initial_spline(start, np.zeros(3), np.zeros(3), target, np.array([4.0, 0.0, 0.0]), 4.0, 6.0,
                                            0.12), t_start=10.0, start_yaw=0.0)
    p0, v0, a0 = prev.state(10.3)
    assert 0.3 < np.linalg.norm(v0) < 3.0 and np.linalg.norm(a0) > 1.0
    guess = initial_spline(p0, v0, a0, target + [4.0, 0.0, 0.0], np.array([4.0, 0.0, 0.0]), 4.0, 6.0, 0.12,
                           previous=prev, t_now=10.3, reuse_acc_mps2=0.5)
    for dt in (0.24, 0.48):
        np.testing.assert_allclose(guess.evaluate(np.array([dt]))[0], prev.state(10.3 + dt)[0], atol=0.05)


def test_the_final_approach_keeps_the_old_timing():
    # toward the goal (the target is passed at rest) the reused path is not re-timed
    prev = arc_trajectory(1.0)
    p0, v0, a0 = prev.state(10.4)
    goal = np.array([6.0, 4.0, 1.0])
    kept = initial_spline(p0, v0, a0, goal, np.zeros(3), 4.0, 6.0, 0.12, previous=prev, t_now=10.4)
    same = initial_spline(p0, v0, a0, goal, np.zeros(3), 4.0, 6.0, 0.12, previous=prev, t_now=10.4, reuse_acc_mps2=3.0)
    np.testing.assert_array_equal(kept.control_points, same.control_points)


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


def test_a_slowing_guided_guess_brakes_from_the_start_speed_along_the_path():
    """slow_down: a start at 6 m/s on a guide path cruising at 2 m/s slows at 0.7 x 7 m/s^2 along
    it (the guess's speed at each point ~ sqrt(36 - 2 x 4.9 s), until 2 m/s after 3.3 m); without
    it the samples are spaced for 2 m/s from the start and the fit alone holds the 6 m/s start."""
    path = np.array([[0.0, 0.0, 1.0], [12.0, 0.0, 1.0]])
    v0 = np.array([6.0, 0.0, 0.0])
    slow = guided_spline(path, v0, np.zeros(3), np.array([2.0, 0.0, 0.0]), 2.0, 7.0, 0.1, slow_down=True)
    plain = guided_spline(path, v0, np.zeros(3), np.array([2.0, 0.0, 0.0]), 2.0, 7.0, 0.1)
    for sp in (slow, plain):
        np.testing.assert_allclose(sp.evaluate_derivatives(0.0, 1)[1], v0, atol=1e-9)
        np.testing.assert_allclose(sp.evaluate(sp.duration), path[-1], atol=1e-9)
    ts = np.linspace(0.0, slow.duration, 2001)
    x = slow.evaluate(ts)[:, 0]
    v = slow.derivative().evaluate(ts)[:, 0]
    expect = np.sqrt(np.maximum(36.0 - 2.0 * 4.9 * x, 4.0))
    mid = (x > 0.5) & (x < 11.0)  # away from the fitted ends
    np.testing.assert_allclose(v[mid], expect[mid], atol=0.25)
    # the plain guess reaches the first metre at ~2 m/s spacing: it takes ~3x longer to get there
    t_slow = ts[np.argmax(x >= 1.0)]
    ts_p = np.linspace(0.0, plain.duration, 2001)
    t_plain = ts_p[np.argmax(plain.evaluate(ts_p)[:, 0] >= 1.0)]
    assert t_slow < 0.25 and t_plain > 0.35
    assert slow.duration < plain.duration - 0.3
    # from rest nothing changes (the crawl from a hover)
    a = guided_spline(path, np.zeros(3), np.zeros(3), np.zeros(3), 2.0, 7.0, 0.1, slow_down=True)
    b = guided_spline(path, np.zeros(3), np.zeros(3), np.zeros(3), 2.0, 7.0, 0.1)
    np.testing.assert_array_equal(a.control_points, b.control_points)


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
