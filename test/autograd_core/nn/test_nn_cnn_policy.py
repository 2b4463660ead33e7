"""The DiffPhysDrone-style policy network (benchmarks/nn.py `policy_net_builders`) end to end
against torch: same weights, same outputs and gradients at batch 64 and batch 1, and a few Adam
training steps that track torch's."""
import importlib.util
import os

import numpy as np
import pytest

import autograd_core as ac

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("_bench_nn_for_cnn_test", os.path.join(ROOT, "benchmarks", "nn.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_policy_net_matches_torch(bench):
    ours, theirs = bench.policy_net_builders(0)
    n_params = sum(p.numel() for p in ours.parameters())
    assert n_params == sum(p.numel() for p in theirs.parameters())
    assert 500_000 < n_params < 530_000  # "~514 k parameters"
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for batch in (64, 1):
        x, v, hx = bench.policy_inputs(batch, seed=batch)
        ours.zero_grad()
        theirs.zero_grad()
        act, h = ours(ac.tensor(x), ac.tensor(v), ac.tensor(hx))
        tact, th = theirs(torch.tensor(x), torch.tensor(v), torch.tensor(hx))
        np.testing.assert_allclose(act._data, tact.detach().numpy(), rtol=0, atol=1e-5)
        np.testing.assert_allclose(h._data, th.detach().numpy(), rtol=0, atol=1e-5)
        ((act * act).mean() + (h * h).mean()).backward()
        ((tact * tact).mean() + (th * th).mean()).backward()
        for (n, p), (_, pt) in zip(ours.named_parameters(), theirs.named_parameters()):
            scale = max(1.0, float(pt.grad.abs().max()))
            np.testing.assert_allclose(p.grad._data, pt.grad.numpy(), rtol=0, atol=1e-5 * scale, err_msg=n)


def test_policy_net_adam_steps_track_torch(bench):
    from autograd_core.optim import Adam
    ours, theirs = bench.policy_net_builders(1)
    opt = Adam(ours.parameters(), lr=1e-3)
    tparams = list(theirs.parameters())
    state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in tparams]

    def torch_adam_step(t, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
        # Adam written out (torch.optim's first step imports torch._dynamo: seconds, not the point here)
        with torch.no_grad():
            for p, (m, v) in zip(tparams, state):
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                denom = (v / (1 - b2 ** t)).sqrt_().add_(eps)
                p.addcdiv_(m, denom, value=-lr / (1 - b1 ** t))
    x, v, hx = bench.policy_inputs(16, seed=3)
    target = np.random.default_rng(4).standard_normal((16, 6)).astype(np.float32)
    losses, tlosses = [], []
    for step in range(1, 6):
        opt.zero_grad()
        theirs.zero_grad()
        act, _ = ours(ac.tensor(x), ac.tensor(v), ac.tensor(hx))
        loss = ((act - ac.tensor(target)) ** 2).mean()
        loss.backward()
        opt.step()
        tact, _ = theirs(torch.tensor(x), torch.tensor(v), torch.tensor(hx))
        tloss = ((tact - torch.tensor(target)) ** 2).mean()
        tloss.backward()
        torch_adam_step(step)
        losses.append(loss.item())
        tlosses.append(tloss.item())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-4)
    assert losses[-1] < losses[0]


def test_policy_net_batch1_inference_under_no_grad(bench):
    ours, theirs = bench.policy_net_builders(0)
    x, v, hx = bench.policy_inputs(1)
    with ac.no_grad():
        act, h = ours(ac.tensor(x), ac.tensor(v), ac.tensor(hx))
    assert act.grad_fn is None and act.shape == (1, 6) and h.shape == (1, 192)
    with torch.no_grad():
        tact, th = theirs(torch.tensor(x), torch.tensor(v), torch.tensor(hx))
    np.testing.assert_allclose(act._data, tact.numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(h._data, th.numpy(), rtol=0, atol=1e-5)
