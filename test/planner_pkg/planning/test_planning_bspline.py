"""Uniform B-splines: basis, evaluation, derivatives vs finite differences, fitting, feasibility."""
import numpy as np
import pytest

from planner_pkg.planning.bspline import UniformBSpline, basis_matrix, fit_cubic


def random_spline(n=12, dt=0.3, degree=3, seed=0):
    rng = np.random.default_rng(seed)
    return UniformBSpline(rng.normal(size=(n, 3)), dt, degree)


@pytest.mark.parametrize("degree", [1, 2, 3, 4, 5])
def test_basis_is_a_partition_of_unity(degree):
    m = basis_matrix(degree)
    s = np.linspace(0.0, 1.0, 7)
    w = (s[:, None] ** np.arange(degree + 1)) @ m
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
    assert (w >= -1e-12).all()


def test_cubic_basis_matches_the_textbook_matrix():
    expected = np.array([[1, 4, 1, 0], [-3, 0, 3, 0], [3, -6, 3, 0], [-1, 3, -3, 1]]) / 6.0
    np.testing.assert_allclose(basis_matrix(3), expected, atol=1e-15)


def test_knot_values_of_a_cubic():
    sp = random_spline()
    q, dt = sp.control_points, sp.dt
    k = 4
    p, v, a = sp.evaluate_derivatives(k * dt, 2)
    np.testing.assert_allclose(p, (q[k] + 4 * q[k + 1] + q[k + 2]) / 6, atol=1e-12)
    np.testing.assert_allclose(v, (q[k + 2] - q[k]) / (2 * dt), atol=1e-12)
    np.testing.assert_allclose(a, (q[k] - 2 * q[k + 1] + q[k + 2]) / dt**2, atol=1e-10)


@pytest.mark.parametrize("degree", [3, 4])
def test_derivatives_match_finite_differences(degree):
    sp = random_spline(degree=degree, seed=degree)
    # times away from the knots, where the highest derivative has kinks (central differences
    # across a kink are only first-order accurate)
    t = (np.arange(sp.num_segments)[:, None] + np.array([0.21, 0.5, 0.83])).ravel() * sp.dt
    h = 1e-5
    values = sp.evaluate_derivatives(t, degree - 1)
    for order in range(1, degree):
        lower = UniformBSpline(sp.control_points, sp.dt, sp.degree)
        for _ in range(order - 1):
            lower = lower.derivative()
        fd = (lower.evaluate(t + h) - lower.evaluate(t - h)) / (2 * h)
        np.testing.assert_allclose(values[order], fd, rtol=1e-6, atol=1e-6)


def test_derivative_control_points_are_scaled_differences():
    sp = random_spline()
    np.testing.assert_allclose(sp.derivative().control_points, np.diff(sp.control_points, axis=0) / sp.dt)
    np.testing.assert_allclose(sp.derivative_control_points(2), sp.derivative().derivative().control_points)
    assert sp.derivative().duration == pytest.approx(sp.duration)


def test_evaluate_clamps_to_the_domain_and_keeps_shapes():
    sp = random_spline()
    assert sp.evaluate(0.5).shape == (3,)
    assert sp.evaluate(np.array([0.1, 0.2])).shape == (2, 3)
    np.testing.assert_allclose(sp.evaluate(-1.0), sp.evaluate(0.0))
    np.testing.assert_allclose(sp.evaluate(sp.duration + 5.0), sp.evaluate(sp.duration))


@pytest.mark.parametrize("n", [6, 7, 12, 30])
def test_fitting_round_trip_reproduces_the_control_points(n):
    sp = random_spline(n=n, dt=0.24, seed=n)
    t = np.arange(n - 2) * sp.dt
    p, v, a = sp.evaluate_derivatives(t, 2)
    fitted = fit_cubic(p, sp.dt, v[0], v[-1], a[0], a[-1])
    np.testing.assert_allclose(fitted.control_points, sp.control_points, atol=1e-9)


def test_fit_meets_the_boundary_states_exactly_on_inconsistent_data():
    rng = np.random.default_rng(3)
    pts = np.cumsum(rng.normal(size=(9, 3)), axis=0)
    v0, v1, a0, a1 = rng.normal(size=(4, 3))
    sp = fit_cubic(pts, 0.2, v0, v1, a0, a1)
    p, v, a = sp.evaluate_derivatives(np.array([0.0, sp.duration]), 2)
    np.testing.assert_allclose(p, pts[[0, -1]], atol=1e-12)
    np.testing.assert_allclose(v, [v0, v1], atol=1e-12)
    np.testing.assert_allclose(a, [a0, a1], atol=1e-10)


def test_feasibility_ratio_and_time_lengthening():
    q = np.stack([np.arange(10) * 0.5, np.zeros(10), np.ones(10)], axis=1)  # 0.5 m per 0.1 s = 5 m/s
    sp = UniformBSpline(q, 0.1)
    assert sp.max_derivative_norm(1) == pytest.approx(5.0)
    ratio = sp.feasibility_ratio(2.0, 3.0)
    assert ratio == pytest.approx(2.5)
    assert not sp.is_feasible(2.0, 3.0)
    slow = sp.lengthened(ratio)
    assert slow.is_feasible(2.0, 3.0)
    assert slow.duration == pytest.approx(sp.duration * ratio)
    np.testing.assert_allclose(slow.evaluate(slow.duration), sp.evaluate(sp.duration))


@pytest.mark.parametrize("bad", [
    lambda: UniformBSpline(np.zeros((3, 3)), 0.1),  # too few points for a cubic
    lambda: UniformBSpline(np.zeros((5, 3)), 0.0),
    lambda: UniformBSpline(np.zeros((5, 3)), -1.0),
    lambda: UniformBSpline(np.full((5, 3), np.nan), 0.1),
    lambda: fit_cubic(np.zeros((3, 3)), 0.1, *np.zeros((4, 3))),
    lambda: fit_cubic(np.zeros((6, 3)), 0.1, [np.nan, 0, 0], *np.zeros((3, 3))),
    lambda: random_spline().feasibility_ratio(0.0, 3.0),
    lambda: random_spline().lengthened(-2.0),
])
def test_bad_inputs_raise_value_error(bad):
    with pytest.raises(ValueError):
        bad()
