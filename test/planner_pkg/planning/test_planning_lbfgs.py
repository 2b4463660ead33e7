"""The planner's L-BFGS (planning/lbfgs.py): the compact-form direction against the textbook
two-loop recursion, convergence to analytic minimisers, L-BFGS-B's stopping rules, hard budgets,
non-finite values, and the rebound problems it is used on against scipy's L-BFGS-B."""
import math

import numpy as np
import pytest
from scipy.optimize import minimize, rosen, rosen_der

from autograd_core.optim.lbfgs import strong_wolfe
from planner_pkg.planning.lbfgs import LbfgsStatus, _History, minimize_lbfgs


def two_loop(g, s, y, gamma):
    """Nocedal & Wright, Algorithm 7.4: -H g with H0 = gamma I (pairs oldest first)."""
    q = g.copy()
    alpha = []
    for si, yi in zip(s[::-1], y[::-1]):
        a = (si @ q) / (yi @ si)
        alpha.append(a)
        q -= a * yi
    r = gamma * q
    for (si, yi), a in zip(zip(s, y), alpha[::-1]):
        b = (yi @ r) / (yi @ si)
        r += si * (a - b)
    return -r


def spd(n, seed, cond=100.0):
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (u * np.geomspace(1.0, cond, n)) @ u.T


@pytest.mark.parametrize("pairs, memory", [(1, 5), (4, 5), (5, 5), (12, 5), (30, 16)])
def test_incremental_compact_direction_equals_the_two_loop_recursion(pairs, memory):
    n = 20
    rng = np.random.default_rng(pairs)
    a = spd(n, pairs)
    history = _History(memory, n)
    s_all, y_all = [], []
    for _ in range(pairs):
        s = rng.normal(size=n)
        y = a @ s + 0.01 * rng.normal(size=n)  # curvature pairs of a nearly quadratic function
        assert s @ y > 0
        history.add(s, y, float(s @ y), float(y @ y))
        s_all.append(s)
        y_all.append(y)
    s_kept, y_kept = np.array(s_all[-memory:]), np.array(y_all[-memory:])
    gamma = float(s_kept[-1] @ y_kept[-1] / (y_kept[-1] @ y_kept[-1]))
    assert history.k == min(pairs, memory) and history.gamma == pytest.approx(gamma)
    g = rng.normal(size=n)
    ref = two_loop(g, s_kept, y_kept, gamma)
    np.testing.assert_allclose(history.direction(g), ref, rtol=1e-9, atol=1e-12 * np.abs(ref).max())
    history.clear()
    np.testing.assert_array_equal(history.direction(g), -g)


def test_quadratic_reaches_the_analytic_minimiser():
    n = 40
    a = spd(n, 1, cond=1e3)
    b = np.random.default_rng(2).normal(size=n)
    x0 = np.zeros(n)
    res = minimize_lbfgs(lambda x: (0.5 * x @ a @ x - b @ x, a @ x - b), x0, memory=10, max_iterations=500,
                         gtol=1e-6, ftol=1e-16)
    assert res.status is LbfgsStatus.GRADIENT and res.converged
    # |x - x*| <= |g|_2 / lambda_min (1 here) <= sqrt(40) 1e-6
    np.testing.assert_allclose(res.x, np.linalg.solve(a, b), atol=1e-5)
    assert np.abs(res.grad).max() <= 1e-6
    assert np.array_equal(x0, np.zeros(n))  # the start is not modified


@pytest.mark.parametrize("n", [2, 10])
def test_rosenbrock_converges_like_scipy(n):
    x0 = np.full(n, -1.2)
    x0[1::2] = 1.0
    res = minimize_lbfgs(lambda x: (rosen(x), rosen_der(x)), x0, memory=10, max_iterations=1000, gtol=1e-8,
                         ftol=1e-15)
    np.testing.assert_allclose(res.x, np.ones(n), atol=1e-5)
    ref = minimize(lambda x: (rosen(x), rosen_der(x)), x0, jac=True, method="L-BFGS-B",
                   options=dict(maxcor=10, maxiter=1000, gtol=1e-8, ftol=1e-15))
    # the same algorithm up to the line search: a comparable number of iterations
    assert res.iterations <= 2 * ref.nit + 10
    assert res.evaluations <= 2 * ref.nfev + 10


def test_relative_decrease_rule_is_l_bfgs_b_s():
    res = minimize_lbfgs(lambda x: (rosen(x), rosen_der(x)), np.array([-1.2, 1.0]), max_iterations=1000,
                         gtol=1e-12, ftol=1e-3)
    assert res.status is LbfgsStatus.DECREASE
    assert res.iterations < 1000


def test_iteration_budget_is_hard_and_evaluations_bounded():
    for budget in (1, 3, 7):
        res = minimize_lbfgs(lambda x: (rosen(x), rosen_der(x)), np.full(6, -1.0), max_iterations=budget,
                             gtol=1e-12, ftol=1e-16, max_line_search=5)
        assert res.iterations == budget and res.status is LbfgsStatus.MAX_ITERATIONS
        # at most max_line_search evaluations per iteration (and a steepest-descent retry each), plus the start
        assert res.evaluations <= 1 + 2 * 5 * budget
        assert res.f < rosen(np.full(6, -1.0))  # every accepted step decreased f


def test_each_step_decreases_the_value():
    seen = []

    def fun(x):
        f = rosen(x)
        seen.append((f, x.copy()))
        return f, rosen_der(x)

    res = minimize_lbfgs(fun, np.full(4, 0.3), max_iterations=50, gtol=1e-10, ftol=1e-16)
    assert res.f == pytest.approx(rosen(res.x))
    assert res.f <= min(f for f, _ in seen)


def test_non_finite_values_away_from_the_minimum_make_the_search_back_off():
    # f is a bowl inside |x| < 1.5 and NaN outside; the first trial steps overshoot into the NaN region
    c = np.array([1.0, -1.0, 0.5])

    def fun(x):
        if np.abs(x).max() >= 1.5:
            return math.nan, np.full(3, math.nan)
        return 50.0 * float((x - c) @ (x - c)), 100.0 * (x - c)

    res = minimize_lbfgs(fun, np.zeros(3), max_iterations=100, gtol=1e-8, ftol=1e-16)
    np.testing.assert_allclose(res.x, c, atol=1e-6)
    assert np.isfinite(res.x).all()


def test_non_finite_start_is_reported_and_the_start_returned():
    res = minimize_lbfgs(lambda x: (math.inf, np.zeros(2)), np.array([1.0, 2.0]))
    assert res.status is LbfgsStatus.NOT_FINITE and res.iterations == 0
    np.testing.assert_array_equal(res.x, [1.0, 2.0])


def test_a_function_it_cannot_decrease_stops_with_line_search_status():
    # a wrong gradient: every "descent" direction goes uphill
    res = minimize_lbfgs(lambda x: (float(x @ x), -2.0 * x), np.array([1.0, -1.0]), max_iterations=20, gtol=1e-12)
    assert res.status is LbfgsStatus.LINE_SEARCH and res.iterations == 0
    np.testing.assert_array_equal(res.x, [1.0, -1.0])


def test_empty_problem_and_zero_gradient_stop_at_once():
    res = minimize_lbfgs(lambda x: (0.0, x * 0.0), np.zeros(0))
    assert res.status is LbfgsStatus.GRADIENT and res.evaluations == 1
    res = minimize_lbfgs(lambda x: (1.0, np.zeros(3)), np.ones(3))
    assert res.status is LbfgsStatus.GRADIENT and res.iterations == 0


@pytest.mark.parametrize("kwargs", [dict(memory=0), dict(max_iterations=0), dict(max_line_search=0),
                                    dict(c1=0.9, c2=0.5), dict(c1=0.0)])
def test_bad_settings_are_rejected(kwargs):
    with pytest.raises(ValueError):
        minimize_lbfgs(lambda x: (float(x @ x), 2 * x), np.ones(2), **kwargs)


def test_strong_wolfe_reuses_a_first_evaluation_it_is_given():
    calls = []

    def evaluate(x, t, d):
        z = x + t * d
        calls.append(t)
        return float(z @ z) ** 2, 4.0 * float(z @ z) * z  # f = |z|^4

    x = np.array([1.0, -2.0])
    g = 4.0 * float(x @ x) * x
    d = -g
    gtd = float(g @ d)
    t0 = 1.0  # far too long: the search must bracket and zoom
    f_a, g_a, t_a, n_a = strong_wolfe(evaluate, x, t0, d, float(x @ x) ** 2, g, gtd)
    first_calls = list(calls)
    calls.clear()
    f_b, g_b, t_b, n_b = strong_wolfe(evaluate, x, t0, d, float(x @ x) ** 2, g, gtd, first=evaluate(x, t0, d))
    assert (f_a, t_a) == (f_b, t_b) and np.array_equal(g_a, g_b)
    assert n_b == n_a - 1 and calls == first_calls  # the given evaluation replaces the search's first one
    assert f_a < float(x @ x) ** 2 and abs(float(g_a @ d)) <= 0.9 * abs(gtd)
