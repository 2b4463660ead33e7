"""End to end: an MLP learns a known function with a hand-written update; gradient utilities."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import autograd_core as ag  # noqa: E402
import autograd_core.nn as nn  # noqa: E402
import autograd_core.nn.functional as F  # noqa: E402
from autograd_core.nn.utils import (clip_grad_norm_, clip_grad_value_, parameters_to_vector,  # noqa: E402
                                    vector_to_parameters)


def _mlp(lib):
    return lib.Sequential(lib.Linear(1, 32), lib.Tanh(), lib.Linear(32, 32), lib.Tanh(), lib.Linear(32, 1))


def test_mlp_regresses_sin_below_stated_loss():
    """y = sin(2x) on [-2, 2], 128 points, full batch, heavy-ball momentum 0.9, lr 0.05:
    MSE < 1e-3 within 600 steps (the first step starts near 0.5)."""
    ag.manual_seed(0)
    net = _mlp(nn)
    x = ag.linspace(-2, 2, 128).reshape(-1, 1)
    y = ag.sin(2 * x)
    vel = [ag.zeros_like(p) for p in net.parameters()]
    first = None
    for _ in range(600):
        loss = F.mse_loss(net(x), y)
        first = loss.item() if first is None else first
        net.zero_grad()
        loss.backward()
        with ag.no_grad():
            for p, v in zip(net.parameters(), vel):
                v.mul_(0.9).add_(p.grad)
                p.sub_(0.05 * v)
    assert first > 0.1
    assert loss.item() < 1e-3


def test_training_trajectory_equals_torch_in_float64():
    """Same weights, same data, same manual SGD: 30 steps of losses and final weights agree."""
    theirs = _mlp(torch.nn).double()
    ours = _mlp(nn).double()
    ours.load_state_dict({k: ag.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    xs = np.linspace(-2, 2, 64).reshape(-1, 1)
    xo, xt = ag.tensor(xs), torch.tensor(xs)
    yo, yt = ag.sin(2 * xo), torch.sin(2 * xt)
    for _ in range(30):
        lo = F.smooth_l1_loss(ours(xo), yo, beta=0.5)
        lt = torch.nn.functional.smooth_l1_loss(theirs(xt), yt, beta=0.5)
        assert lo.item() == pytest.approx(lt.item(), rel=1e-10, abs=1e-12)
        ours.zero_grad()
        theirs.zero_grad()
        lo.backward()
        lt.backward()
        clip_grad_norm_(ours.parameters(), 0.5)
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.5)
        with ag.no_grad(), torch.no_grad():
            for p, q in zip(ours.parameters(), theirs.parameters()):
                p.sub_(0.1 * p.grad)
                q.sub_(0.1 * q.grad)
    for (n, p), (m, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == m
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.1, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    po = [ag.tensor(a, requires_grad=True) for a in arrays]
    pt = [torch.tensor(a, requires_grad=True) for a in arrays]
    for p, q, a in zip(po, pt, arrays):
        (p * ag.tensor(a)).sum().backward()
        (q * torch.tensor(a)).sum().backward()
    no = clip_grad_norm_(po, max_norm, norm_type)
    nt = torch.nn.utils.clip_grad_norm_(pt, max_norm, norm_type)
    assert no.item() == pytest.approx(nt.item(), rel=1e-12)
    for p, q in zip(po, pt):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


def test_clip_grad_edge_cases():
    p = ag.zeros(3, requires_grad=True)
    assert clip_grad_norm_([p], 1.0).item() == 0.0  # no gradients at all
    p.grad = ag.tensor([float("nan"), 1.0, 2.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    p.grad = ag.tensor([-3.0, 0.5, 2.0])
    clip_grad_value_(p, 1.0)
    np.testing.assert_array_equal(p.grad.numpy(), [-1.0, 0.5, 1.0])
    gen = (q for q in [p])  # a generator is consumed once: the norm and the scaling must both see it
    p.grad = ag.tensor([3.0, 4.0, 0.0])
    assert clip_grad_norm_(gen, 1.0).item() == pytest.approx(5.0)
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8, 0.0], rtol=1e-5)


def test_parameters_to_vector_round_trip_matches_torch():
    net, tnet = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    net.load_state_dict({k: ag.tensor(v.detach().numpy()) for k, v in tnet.state_dict().items()})
    vec = parameters_to_vector(net.parameters())
    np.testing.assert_array_equal(vec.detach().numpy(),
                                  torch.nn.utils.parameters_to_vector(tnet.parameters()).detach().numpy())
    vector_to_parameters(ag.arange(8, dtype=ag.float32), net.parameters())
    np.testing.assert_array_equal(net.weight.detach().numpy(), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(net.bias.detach().numpy(), [6, 7])
    with pytest.raises(ValueError):
        vector_to_parameters(ag.zeros(5), net.parameters())
