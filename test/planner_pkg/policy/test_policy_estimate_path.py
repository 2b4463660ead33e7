"""LossConfig.velocity_estimate_steers: the auxiliary velocity-estimate loss trains the weights but,
when off, cannot steer the flown trajectory."""
from pathlib import Path

import numpy as np

import autograd_core as ag

from planner_pkg.policy.config import load_config
from planner_pkg.policy.env import sample_episode
from planner_pkg.policy.network import PolicyNet
from planner_pkg.policy.rollout import run_rollout

SMOKE = Path(__file__).resolve().parents[3] / "config" / "policy" / "smoke.yaml"


def _net(cfg):
    ag.manual_seed(3)
    net = PolicyNet(cfg.network, cfg.observation)
    with ag.no_grad():  # a non-trivial command head, so the command depends on the weights
        net.fc.weight.mul_(10.0)
    return net


def test_forward_training_equals_forward():
    cfg = load_config(SMOKE)
    net = _net(cfg)
    rng = np.random.default_rng(0)
    rows, cols = cfg.observation.image_hw
    image = ag.tensor(rng.random((3, 1, rows, cols)).astype(np.float32))
    state = ag.tensor(rng.normal(size=(3, 10)).astype(np.float32))
    hidden = ag.tensor(rng.normal(size=(3, cfg.network.hidden)).astype(np.float32))
    out, h = net(image, state, hidden)
    out2, h2, h_const = net.forward_training(image, state, state, hidden, hidden)
    np.testing.assert_array_equal(out.detach().numpy(), out2.detach().numpy())
    np.testing.assert_array_equal(h.detach().numpy(), h2.detach().numpy())
    np.testing.assert_array_equal(h.detach().numpy(), h_const.detach().numpy())


def _estimate_grads(steers: bool):
    cfg = load_config(SMOKE).replace(loss={"velocity_estimate_steers": steers}, train={"steps": 8})
    net = _net(cfg)
    rng = np.random.default_rng(11)
    episode = sample_episode(cfg, 4, rng)
    result = run_rollout(net, episode, cfg, rng, cfg.train.steps)
    result.terms["velocity_estimate"].backward()
    return {k: float(t.item()) for k, t in result.terms.items()}, net.fc.weight.grad.numpy().copy()


def test_estimate_loss_reaches_the_command_head_only_when_it_steers():
    """The command rows of the output layer act on the estimate loss only through the flown
    trajectory (the estimate reads the velocity the command produced): zero gradient there when
    the estimate's pass has a constant state input; the estimate rows train either way."""
    terms_on, g_on = _estimate_grads(True)
    terms_off, g_off = _estimate_grads(False)
    assert terms_on == terms_off  # same rollout, same losses
    assert np.abs(g_on[:3]).max() > 0
    assert np.abs(g_off[:3]).max() == 0.0
    # the estimate rows' gradient is the direct one (their inputs have the same values) either way
    np.testing.assert_allclose(g_off[3:], g_on[3:], rtol=1e-5, atol=1e-9)
    assert np.abs(g_off[3:]).max() > 0
