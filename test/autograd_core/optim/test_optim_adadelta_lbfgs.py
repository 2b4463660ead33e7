"""Adadelta and LBFGS against torch.optim in float64: parameter trajectories, losses, closure call
counts and state, for the options real programs use."""
import numpy as np
import pytest

import autograd_core as ac

torch = pytest.importorskip("torch")


def _problem(mod):
    """A Rosenbrock valley plus a small matrix factorisation: curved, coupled, non-quadratic."""
    x = mod.tensor(np.array([-1.5, 2.0, 0.5, -0.7]), requires_grad=True)
    W = mod.tensor(np.array([[1.0, 0.3], [0.2, -0.5]]), requires_grad=True)

    def loss():
        return (((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()
                + ((W @ W.t() - mod.eye(2, dtype=mod.float64)) ** 2).sum())
    return [x, W], loss


def _run(mod, cls, kw, steps):
    params, f = _problem(mod)
    opt = getattr(mod.optim, cls)(params, **kw)
    calls = [0]

    def closure():
        opt.zero_grad()
        v = f()
        v.backward()
        calls[0] += 1
        return v
    losses = []
    for _ in range(steps):
        if cls == "LBFGS":
            losses.append(float(opt.step(closure)))
        else:
            losses.append(float(closure()))
            opt.step()
    return np.array(losses), [p.detach().numpy().copy() for p in params], calls[0], opt


@pytest.mark.parametrize("kw", [dict(), dict(lr=0.5, rho=0.8), dict(weight_decay=0.1), dict(maximize=True, lr=0.1),
                                dict(eps=1e-3)])
def test_adadelta_matches_torch(kw):
    la, pa, _, oa = _run(ac, "Adadelta", kw, 40)
    lt, pt, _, ot = _run(torch, "Adadelta", kw, 40)
    np.testing.assert_allclose(la, lt, rtol=1e-12, atol=1e-12)
    for a, t in zip(pa, pt):
        np.testing.assert_allclose(a, t, rtol=1e-12, atol=1e-14)
    sa, st = oa.state_dict()["state"][0], ot.state_dict()["state"][0]
    assert set(sa) == set(st) == {"step", "square_avg", "acc_delta"}
    np.testing.assert_allclose(sa["acc_delta"].numpy(), st["acc_delta"].numpy(), rtol=1e-12, atol=1e-16)


def test_adadelta_state_dict_round_trip_continues_identically():
    _, _, _, oa = _run(ac, "Adadelta", dict(lr=0.7), 5)
    pa = oa.param_groups[0]["params"]
    pb = [p.detach().clone().requires_grad_() for p in pa]
    ob = ac.optim.Adadelta(pb, lr=0.7)
    ob.load_state_dict(oa.state_dict())
    for _ in range(3):
        for o, ps in ((oa, pa), (ob, pb)):
            o.zero_grad()
            _problem_loss(ps).backward()
            o.step()
    for a, b in zip(pa, pb):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    with pytest.raises(ValueError, match="rho"):
        ac.optim.Adadelta(pb, rho=1.5)


def _problem_loss(params):
    x, W = params
    return (((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()
            + ((W @ W.t() - ac.eye(2, dtype=ac.float64)) ** 2).sum())


@pytest.mark.parametrize("kw,steps", [(dict(line_search_fn="strong_wolfe"), 6), (dict(lr=0.1), 4),
                                      (dict(lr=0.5, history_size=3, max_iter=5, line_search_fn="strong_wolfe"), 8),
                                      (dict(lr=1, max_iter=7, max_eval=9), 5),
                                      (dict(tolerance_grad=1e-3, tolerance_change=1e-6, line_search_fn="strong_wolfe"),
                                       10)])
def test_lbfgs_matches_torch(kw, steps):
    la, pa, ca, oa = _run(ac, "LBFGS", kw, steps)
    lt, pt, ct, ot = _run(torch, "LBFGS", kw, steps)
    assert ca == ct
    np.testing.assert_allclose(la, lt, rtol=1e-9, atol=1e-12)
    for a, t in zip(pa, pt):
        np.testing.assert_allclose(a, t, rtol=1e-8, atol=1e-10)
    sa = oa.state[oa.param_groups[0]["params"][0]]
    st = ot.state[ot.param_groups[0]["params"][0]]
    assert (sa["func_evals"], sa["n_iter"]) == (st["func_evals"], st["n_iter"])
    assert len(sa["old_dirs"]) == len(st["old_dirs"]) <= kw.get("history_size", 100)


def test_lbfgs_converges_on_a_quadratic_and_checks_its_arguments():
    A = np.array([[3.0, 1.0], [1.0, 2.0]])
    b = np.array([1.0, -1.0])
    x = ac.zeros(2, dtype=ac.float64, requires_grad=True)
    opt = ac.optim.LBFGS([x], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        v = 0.5 * (x @ ac.tensor(A) @ x) - ac.tensor(b) @ x
        v.backward()
        return v
    opt.step(closure)
    np.testing.assert_allclose(x.detach().numpy(), np.linalg.solve(A, b), atol=1e-6)  # tolerance_grad=1e-7
    with pytest.raises(RuntimeError, match="strong_wolfe"):
        ac.optim.LBFGS([x], line_search_fn="armijo")
    with pytest.raises(ValueError, match="parameter groups"):
        ac.optim.LBFGS([{"params": [x]}, {"params": [ac.zeros(1, requires_grad=True)]}])
    with pytest.raises(RuntimeError, match="closure"):
        opt.step()
