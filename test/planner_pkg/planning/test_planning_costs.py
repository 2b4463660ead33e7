"""EGO cost terms: gradcheck of every fused Function and the total, finite differences, branches."""
import numpy as np
import pytest
from scipy.optimize import check_grad

import autograd_core as ac
from autograd_core.autograd import gradcheck
from planner_pkg.planning.costs import (CollisionCost, CostProblem, CostWeights, FeasibilityCost, FitnessCost,
                                        FreeObjective, SmoothnessCost, TotalCost, collision_kernel, distance_kernel,
                                        feasibility_kernel, fitness_kernel, smoothness_kernel,
                                        smoothness_preconditioner, total_kernel, value_and_grad)

N = 14


def make(seed=0, with_reference=True):
    rng = np.random.default_rng(seed)
    q = np.cumsum(rng.normal(0.0, 0.2, (N, 3)) + [0.5, 0.0, 0.0], axis=0)  # ~2.5 m/s at dt 0.2: infeasible
    idx = np.array([3, 4, 5, 6, 7, 8, 9, 9])
    v = rng.normal(size=(idx.shape[0], 3))
    v /= np.linalg.norm(v, axis=1)[:, None]
    # clearances d = (Q - p) . v chosen in every branch: > s_f, in (0, s_f), < 0 (deep)
    d = np.array([0.8, 0.3, 0.1, -0.2, -0.7, 0.45, -1.2, 0.05])
    p = q[idx] - d[:, None] * v
    ref = (q[:-2] + 4 * q[1:-1] + q[2:]) / 6 + rng.normal(0.0, 0.1, (N - 2, 3))
    tan = rng.normal(size=(N - 2, 3))
    tan /= np.linalg.norm(tan, axis=1)[:, None]
    problem = CostProblem(N, 0.2, 2.0, 3.0, CostWeights(), idx, p, v,
                          ref_points=ref if with_reference else None, ref_tangents=tan if with_reference else None)
    return q, problem


def leaf(q):
    t = ac.from_numpy(q.copy())
    t.requires_grad_(True)
    return t


@pytest.mark.parametrize("fn", [SmoothnessCost, CollisionCost, FeasibilityCost, FitnessCost, TotalCost])
@pytest.mark.parametrize("seed", [0, 1])
def test_gradcheck_every_term_and_the_total(fn, seed):
    q, problem = make(seed)
    assert gradcheck(lambda x: fn.apply(x, problem), (leaf(q),))


@pytest.mark.parametrize("kernel", [smoothness_kernel, collision_kernel, feasibility_kernel, fitness_kernel,
                                    total_kernel])
def test_kernels_against_scipy_finite_differences(kernel):
    q, problem = make(2)

    def f(x):
        return kernel(x.reshape(N, 3), problem)[0]

    def g(x):
        return kernel(x.reshape(N, 3), problem)[1].ravel()

    err = check_grad(f, g, q.ravel(), epsilon=1e-7)
    scale = max(1.0, float(np.linalg.norm(g(q.ravel()))))
    assert err / scale < 1e-5


def test_total_is_the_weighted_sum_and_value_and_grad_agrees():
    q, problem = make(3)
    w = problem.weights
    parts = [smoothness_kernel, collision_kernel, feasibility_kernel, fitness_kernel]
    weights = [w.smoothness, w.collision, w.feasibility, w.fitness]
    f = sum(wi * k(q, problem)[0] for wi, k in zip(weights, parts))
    g = sum(wi * k(q, problem)[1] for wi, k in zip(weights, parts))
    ft, gt = total_kernel(q, problem)
    assert ft == pytest.approx(f)
    np.testing.assert_allclose(gt, g, atol=1e-12)
    fa, ga = value_and_grad(q, problem)
    assert fa == pytest.approx(ft)
    np.testing.assert_allclose(ga, gt, atol=1e-12)


def test_collision_penalty_branches_match_ego():
    sf = 0.5
    q = np.zeros((N, 3))
    c = np.array([-0.2, 0.0, 0.2, 0.5, 0.9])  # c = s_f - d
    idx = np.full(c.shape[0], 5)
    v = np.tile([1.0, 0.0, 0.0], (c.shape[0], 1))
    p = -(sf - c)[:, None] * v  # so that d = (0 - p) . v = s_f - c
    problem = CostProblem(N, 0.2, 2.0, 3.0, CostWeights(clearance_m=sf), idx, p, v)
    expected = sum(0.0 if ci <= 0 else ci**3 if ci <= sf else 3 * sf * ci**2 - 3 * sf**2 * ci + sf**3 for ci in c)
    assert collision_kernel(q, problem)[0] == pytest.approx(expected)


def test_no_pairs_and_feasible_curves_cost_nothing_in_those_terms():
    q = np.stack([np.arange(N) * 0.2, np.zeros(N), np.ones(N)], axis=1)  # 1 m/s, straight
    problem = CostProblem(N, 0.2, 2.0, 3.0)
    assert collision_kernel(q, problem)[0] == 0.0
    assert feasibility_kernel(q, problem)[0] == 0.0
    assert smoothness_kernel(q, problem)[0] == pytest.approx(0.0, abs=1e-20)
    assert fitness_kernel(q, problem)[0] == 0.0


def test_backward_scales_with_the_incoming_gradient():
    q, problem = make(4)
    t = leaf(q)
    (TotalCost.apply(t, problem) * 3.0).backward()
    np.testing.assert_allclose(t.grad.numpy(), 3.0 * total_kernel(q, problem)[1], rtol=1e-12)


@pytest.mark.parametrize("kwargs", [dict(smoothness=-1.0), dict(collision=float("nan")), dict(clearance_m=0.0),
                                    dict(fitness_across2=-1.0)])
def test_bad_weights_are_rejected(kwargs):
    with pytest.raises(ValueError, match=list(kwargs)[0]):
        CostWeights(**kwargs)


@pytest.mark.parametrize("kwargs", [dict(n=3), dict(dt=0.0), dict(max_vel=-2.0), dict(max_acc=0.0)])
def test_bad_problems_are_rejected(kwargs):
    args = dict(n=N, dt=0.2, max_vel=2.0, max_acc=3.0)
    args.update(kwargs)
    with pytest.raises(ValueError):
        CostProblem(**args)


def full_problem(seed, weights=CostWeights(), max_jerk=None):
    """``make``'s pairs and reference plus obstacle points near the curve (every term active)."""
    q, base = make(seed)
    rng = np.random.default_rng(100 + seed)
    # obstacle points 0.1-0.4 m off random curve points: inside the 0.5 m safe distance
    knots = (q[:-2] + 4 * q[1:-1] + q[2:]) / 6
    obstacles = knots[rng.integers(0, N - 2, 30)] + rng.normal(size=(30, 3)) * 0.2
    problem = CostProblem(N, 0.2, 2.0, 3.0, weights, base.pair_index, base.pair_p, base.pair_v,
                          ref_points=base.ref_points, ref_tangents=base.ref_tangents, obstacle_points=obstacles,
                          safe_distance_m=0.5, max_jerk=max_jerk)
    return q, problem


@pytest.mark.parametrize("weights, max_jerk", [(CostWeights(), None), (CostWeights(), 4.0),
                                               (CostWeights(smoothness=0.0, collision=0.0), None),
                                               (CostWeights(distance=0.0, fitness=0.0, feasibility=0.0), None)])
@pytest.mark.parametrize("lo, hi", [(3, N - 3), (0, N), (5, 6)])
def test_free_objective_equals_the_total_kernel_on_the_free_points(weights, max_jerk, lo, hi):
    q, problem = full_problem(5, weights, max_jerk)
    assert problem.pair_index.shape[0] > 0 and problem.ref_points is not None and distance_kernel(q, problem)[0] > 0
    objective = FreeObjective(problem, q, lo, hi)
    rng = np.random.default_rng(6)
    for _ in range(3):  # the fixed points stay as given; the free ones move
        x = (q[lo:hi] + rng.normal(scale=0.1, size=(hi - lo, 3))).ravel()
        moved = q.copy()
        moved[lo:hi] = x.reshape(-1, 3)
        f_ref, g_ref = total_kernel(moved, problem)
        f, g = objective(x)
        assert f == pytest.approx(f_ref, rel=1e-12, abs=1e-12)
        assert g.shape == ((hi - lo) * 3,)
        np.testing.assert_allclose(g, g_ref[lo:hi].ravel(), rtol=1e-10, atol=1e-10 * max(1.0, np.abs(g_ref).max()))


def test_free_objective_equals_the_total_kernel_when_no_pair_is_deeper_than_s_f():
    """The collision term's usual case, every pair point within s_f of its obstacle side (the
    cubic part only: FreeObjective's short path), against the total kernel."""
    q, base = make(3)
    sf = CostWeights().clearance_m
    idx = base.pair_index
    d = np.linspace(0.02, 0.9, idx.shape[0])  # c = s_f - d: inside (0, s_f) or zero (d >= s_f)
    p = q[idx] - d[:, None] * base.pair_v
    problem = CostProblem(N, 0.2, 2.0, 3.0, CostWeights(), idx, p, base.pair_v,
                          ref_points=base.ref_points, ref_tangents=base.ref_tangents)
    objective = FreeObjective(problem, q, 3, N - 3)
    rng = np.random.default_rng(4)
    for scale in (0.0, 0.01, 0.01):
        x = (q[3:N - 3] + rng.normal(scale=scale, size=(N - 6, 3))).ravel()
        moved = q.copy()
        moved[3:N - 3] = x.reshape(-1, 3)
        c = sf - (np.einsum("ij,ij->i", moved[idx], base.pair_v) - np.einsum("ij,ij->i", p, base.pair_v))
        assert c.max() <= sf and (c > 0).sum() >= 4  # the short path, with the cubic active
        f_ref, g_ref = total_kernel(moved, problem)
        f, g = objective(x)
        assert f == pytest.approx(f_ref, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(g, g_ref[3:N - 3].ravel(), rtol=1e-10, atol=1e-10 * max(1.0, np.abs(g_ref).max()))


def test_free_objective_gradient_against_finite_differences():
    q, problem = full_problem(7, max_jerk=4.0)
    objective = FreeObjective(problem, q, 3, N - 3)
    x = q[3:N - 3].ravel()
    err = check_grad(lambda v: objective(v)[0], lambda v: objective(v)[1], x, epsilon=1e-7)
    assert err / max(1.0, float(np.linalg.norm(objective(x)[1]))) < 1e-5


@pytest.mark.parametrize("lo, hi", [(3, N - 3), (0, N)])
def test_free_objective_in_a_basis_is_the_total_kernel_of_the_mapped_points(lo, hi):
    """With a basis M the variables z stand for the free points q[lo:hi] + M z: the value is the
    total kernel there and the gradient is M^T times its free rows (the chain rule)."""
    q, problem = full_problem(5, max_jerk=4.0)
    rng = np.random.default_rng(11)
    basis = rng.normal(size=(hi - lo, hi - lo)) * 0.3 + np.eye(hi - lo)
    objective = FreeObjective(problem, q, lo, hi, basis)
    assert np.array_equal(objective.start(), np.zeros((hi - lo) * 3))
    np.testing.assert_array_equal(objective.points(objective.start()), q[lo:hi])
    for _ in range(3):
        z = rng.normal(scale=0.1, size=(hi - lo) * 3)
        moved = q.copy()
        moved[lo:hi] = q[lo:hi] + basis @ z.reshape(-1, 3)
        np.testing.assert_allclose(objective.points(z), moved[lo:hi], rtol=0, atol=1e-14)
        f_ref, g_ref = total_kernel(moved, problem)
        f, g = objective(z)
        assert f == pytest.approx(f_ref, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(g, (basis.T @ g_ref[lo:hi]).ravel(), rtol=1e-10,
                                   atol=1e-10 * max(1.0, np.abs(g_ref).max()))
    err = check_grad(lambda v: objective(v)[0], lambda v: objective(v)[1], np.zeros((hi - lo) * 3), epsilon=1e-7)
    assert err / max(1.0, float(np.linalg.norm(objective(np.zeros((hi - lo) * 3))[1]))) < 1e-5


def test_smoothness_preconditioner_whitens_the_smoothness_curvature():
    """M^T H M = I for H = 2 w_s D^T D + damping I over the free columns: in the new coordinates
    the smoothness term (plus the damping) has unit curvature in every direction."""
    q, problem = full_problem(3, CostWeights(smoothness=2.5))
    lo, hi = 3, N - 3
    basis = smoothness_preconditioner(problem, lo, hi, 0.1)
    d = problem.jerk_operator[:, lo:hi]
    h = 2.0 * 2.5 * d.T @ d + 0.1 * np.eye(hi - lo)
    np.testing.assert_allclose(basis.T @ h @ basis, np.eye(hi - lo), atol=1e-9)
    assert np.linalg.cond(h) > 1e3  # what it undoes: the jerk term's bends and wiggles differ a lot
    # the smoothness kernel's own Hessian, measured through the objective: identity less the damping's share
    only = CostProblem(N, 0.2, 2.0, 3.0, CostWeights(smoothness=2.5, collision=0.0, feasibility=0.0, fitness=0.0,
                                                      distance=0.0))
    objective = FreeObjective(only, q, lo, hi, basis)
    z0 = np.zeros((hi - lo) * 3)
    g0 = objective(z0)[1]
    e = np.zeros_like(z0)
    e[4] = 1e-3
    hz = (objective(z0 + e)[1] - g0) / 1e-3
    expected = np.zeros_like(z0)
    expected[1::3] = (basis.T @ (2.0 * 2.5 * d.T @ d) @ basis)[:, 1]  # z[4]: point 1, y
    np.testing.assert_allclose(hz, expected, atol=1e-6)
    with pytest.raises(ValueError, match="damping"):
        smoothness_preconditioner(problem, lo, hi, 0.0)


def test_free_objective_rejects_a_bad_basis():
    q, problem = make(0)
    with pytest.raises(ValueError, match="basis"):
        FreeObjective(problem, q, 3, N - 3, np.eye(N - 5))
    bad = np.eye(N - 6)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="basis"):
        FreeObjective(problem, q, 3, N - 3, bad)


def test_free_objective_rejects_a_bad_range():
    q, problem = make(0)
    for lo, hi in ((3, 3), (-1, 4), (2, N + 1)):
        with pytest.raises(ValueError, match="FreeObjective"):
            FreeObjective(problem, q, lo, hi)
