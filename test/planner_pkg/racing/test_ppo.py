"""PPO pieces against independent truth: GAE by hand, the Gaussian log-density against torch,
the clipped objective's gradient against torch, observation statistics against NumPy, the
exported model against the NumPy policy, and a seeded run's determinism."""
import math

import numpy as np
import pytest

from planner_pkg.racing.config import config_from_dict
from planner_pkg.racing.env import ACTION_DIM, obs_dim
from planner_pkg.racing.network import ActorCritic, ObsNormalizer, gaussian_log_prob, numpy_params
from planner_pkg.racing.rollout import compute_gae


def test_gae_matches_the_definition():
    rng = np.random.default_rng(0)
    T, N, gamma, lam = 7, 3, 0.9, 0.8
    r, v = rng.normal(size=(T, N)), rng.normal(size=(T, N))
    d = np.zeros((T, N))
    d[3, 1] = 1.0
    last = rng.normal(size=N)
    adv, ret = compute_gae(r, v, d, last, gamma, lam)
    for n in range(N):
        for t in range(T):
            # A_t = sum_l (gamma lam)^l delta_{t+l}, stopping after an episode end
            total, coef = 0.0, 1.0
            for k in range(t, T):
                nv = last[n] if k == T - 1 else v[k + 1, n]
                delta = r[k, n] + gamma * nv * (1 - d[k, n]) - v[k, n]
                total += coef * delta
                if d[k, n]:
                    break
                coef *= gamma * lam
            assert adv[t, n] == pytest.approx(total, abs=1e-12)
    np.testing.assert_allclose(ret, adv + v)
    # lambda = 1: returns are the discounted reward sums bootstrapped with the last value
    adv1, ret1 = compute_gae(r[:, :1], v[:, :1], np.zeros((T, 1)), last[:1], gamma, 1.0)
    want = sum(gamma ** k * r[k, 0] for k in range(T)) + gamma ** T * last[0]
    assert ret1[0, 0] == pytest.approx(want, abs=1e-12)


def test_log_prob_and_ppo_gradient_match_torch():
    torch = pytest.importorskip("torch")
    import autograd_core as ag
    from planner_pkg.racing.ppo import ppo_update

    cfg = config_from_dict({"network": {"actor_hidden": [8], "critic_hidden": [8]},
                            "ppo": {"epochs": 1, "minibatches": 1, "lr": 1e-3, "max_grad_norm": 1e9,
                                    "entropy_coef": 0.01, "target_kl": 0.0}})
    ag.manual_seed(0)
    net = ActorCritic(5, ACTION_DIM, cfg.network)
    rng = np.random.default_rng(1)
    B = 32
    obs = rng.normal(size=(B, 5))
    act = rng.normal(size=(B, ACTION_DIM))
    p = numpy_params(net, ObsNormalizer(5))
    w = [(torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)) for a, b in p["actor"]]
    wc = [(torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)) for a, b in p["critic"]]
    log_std = torch.tensor(p["log_std"], requires_grad=True)
    x = torch.tensor(obs)
    mean = torch.tanh(x @ w[0][0].T + w[0][1]) @ w[1][0].T + w[1][1]
    value = (torch.tanh(x @ wc[0][0].T + wc[0][1]) @ wc[1][0].T + wc[1][1]).reshape(-1)
    dist = torch.distributions.Normal(mean, log_std.exp())
    logp = dist.log_prob(torch.tensor(act)).sum(-1)
    np.testing.assert_allclose(gaussian_log_prob(act, mean.detach().numpy(), p["log_std"]),
                               logp.detach().numpy(), rtol=1e-10)
    old_logp = logp.detach().numpy() + rng.normal(scale=0.3, size=B)  # ratios away from 1: the clip acts
    adv = rng.normal(size=B)
    ret = rng.normal(size=B)
    adv_n = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = torch.exp(logp - torch.tensor(old_logp))
    at = torch.tensor(adv_n)
    surr = torch.minimum(ratio * at, torch.clamp(ratio, 0.8, 1.2) * at)
    loss = -surr.mean() + 0.5 * ((value - torch.tensor(ret)) ** 2).mean() - 0.01 * dist.entropy().sum(-1).mean()
    loss.backward()
    # one Adam step from zero state moves every weight by -lr * sign(grad) (to ~1e-5 relative)
    before = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    opt = ag.optim.Adam(net.parameters(), lr=1e-3)
    batch = {"actions": act, "logp": old_logp, "advantages": adv, "returns": ret}
    ppo_update(net, opt, batch, obs, cfg.ppo, np.random.default_rng(0))
    after = {k: v.detach().numpy() for k, v in net.state_dict().items()}
    grads = {"actor.0.weight": w[0][0].grad, "actor.2.bias": w[1][1].grad, "critic.0.weight": wc[0][0].grad,
             "log_std": log_std.grad}
    for name, g in grads.items():
        g = g.numpy()
        big = np.abs(g) > 1e-4 * np.abs(g).max()
        step = (after[name] - before[name])[big]
        np.testing.assert_allclose(step, -1e-3 * np.sign(g[big]), rtol=2e-2)


def test_observation_statistics_match_numpy():
    rng = np.random.default_rng(2)
    norm = ObsNormalizer(4)
    chunks = [rng.normal(loc=3.0, scale=2.0, size=(n, 4)) for n in (10, 37, 5)]
    for c in chunks:
        norm.update(c)
    allx = np.concatenate(chunks)
    np.testing.assert_allclose(norm.mean, allx.mean(0), rtol=1e-5)
    np.testing.assert_allclose(norm.var, allx.var(0), rtol=1e-4)
    with pytest.raises(ValueError, match="do not fit"):
        norm.load({"mean": np.zeros(3), "var": np.ones(3), "count": np.ones(1)})


def _tiny_cfg(**train):
    return config_from_dict({"network": {"actor_hidden": [16], "critic_hidden": [16]},
                             "train": {"iterations": 2, "envs_per_worker": 8, "steps": 16, "eval_every": 0,
                                       "checkpoint_every": 1, **train}})


def test_training_is_deterministic_given_the_seed_and_the_export_matches_the_numpy_policy(tmp_path):
    import autograd_core as ag
    from planner_pkg.racing.export import RacerModelError, load_racer
    from planner_pkg.racing.trainer import load_checkpoint, mean_policy, train

    cfg = _tiny_cfg()
    r1 = train(cfg, tmp_path / "a.agm", progress=False)
    r2 = train(cfg, tmp_path / "b.agm", progress=False)
    c1, c2 = load_checkpoint(r1.paths["checkpoint"]), load_checkpoint(r2.paths["checkpoint"])
    for k, v in c1["model"].items():
        np.testing.assert_array_equal(v.numpy(), c2["model"][k].numpy())
    r3 = train(_tiny_cfg(seed=1), tmp_path / "c.agm", progress=False)
    c3 = load_checkpoint(r3.paths["checkpoint"])
    assert any(not np.array_equal(v.numpy(), c3["model"][k].numpy()) for k, v in c1["model"].items())

    racer = load_racer(r1.paths["model"])
    net = ActorCritic(obs_dim(cfg.env), ACTION_DIM, cfg.network)
    net.load_state_dict(c1["model"])
    norm = ObsNormalizer(obs_dim(cfg.env))
    norm.load({k: v.numpy() for k, v in c1["normalizer"].items()})
    obs = np.random.default_rng(0).normal(scale=3.0, size=(5, obs_dim(cfg.env)))
    np.testing.assert_allclose(racer.act(obs), mean_policy(numpy_params(net, norm))(obs), atol=1e-5)
    # the file is data only, and a policy model is not a racing model
    (tmp_path / "x.agm").write_bytes(b"\x00" * 20)
    with pytest.raises(RacerModelError):
        load_racer(tmp_path / "x.agm")
    from planner_pkg.policy.export import default_model_path
    if default_model_path() is not None:
        with pytest.raises(RacerModelError, match="not a racing model"):
            load_racer(default_model_path())


def test_resume_continues_the_history(tmp_path):
    from planner_pkg.racing.trainer import CheckpointError, load_checkpoint, train

    cfg = _tiny_cfg(iterations=3)
    r = train(cfg, tmp_path / "m.agm", progress=False, stop_after=1)
    assert r.iteration == 1 and load_checkpoint(r.paths["checkpoint"])["iteration"] == 1
    r = train(cfg, tmp_path / "m.agm", progress=False, resume=r.paths["checkpoint"])
    assert r.iterations_run == 2 and [h["iteration"] for h in r.history] == [1, 2, 3]
    lines = r.paths["csv"].read_text().splitlines()
    assert lines[0].startswith("iteration,env_steps,") and len(lines) == 4
    with pytest.raises(ValueError, match="nothing to do"):
        train(cfg, tmp_path / "m.agm", progress=False, resume=r.paths["checkpoint"])
    other = config_from_dict({"network": {"actor_hidden": [8], "critic_hidden": [16]},
                              "train": {"iterations": 5, "envs_per_worker": 8, "steps": 16, "eval_every": 0}})
    with pytest.raises(CheckpointError, match="same network"):
        train(other, tmp_path / "m.agm", progress=False, resume=r.paths["checkpoint"])
    # another reward is a fine-tune: allowed, the history continues
    tuned = config_from_dict(dict(cfg.to_dict(), env={"reward": {"crash": 20.0}},
                                  train=dict(cfg.to_dict()["train"], iterations=4)))
    r = train(tuned, tmp_path / "m.agm", progress=False, resume=r.paths["checkpoint"])
    assert [h["iteration"] for h in r.history] == [1, 2, 3, 4]
    assert load_checkpoint(r.paths["checkpoint"])["config"].env.reward.crash == 20.0
    (tmp_path / "bad.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "bad.ckpt")
