"""Training: a 3-iteration smoke run, resume == uninterrupted, config validation, and the CLI
(policy train / policy eval / fly --planner policy) end to end on tiny settings."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import autograd_core as ag

from planner_pkg.policy.config import ConfigError, PolicyConfig, config_from_dict, load_config
from planner_pkg.policy.export import load_policy
from planner_pkg.policy.trainer import HISTORY_COLUMNS, load_checkpoint, train

REPO = Path(__file__).resolve().parents[3]
SMOKE = REPO / "config" / "policy" / "smoke.yaml"
DEFAULT = REPO / "config" / "policy" / "default.yaml"


def _quiet(_msg):
    pass


def test_shipped_configs_load():
    for path in (SMOKE, DEFAULT, REPO / "config" / "policy" / "paper.yaml", REPO / "config" / "policy" / "fast.yaml"):
        cfg = load_config(path)
        assert isinstance(cfg, PolicyConfig)
        assert config_from_dict(cfg.to_dict()) == cfg


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"loss\.collision: must be >= 0"):
        config_from_dict({"loss": {"collision": -1}})
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['train\.iteratons'\]"):
        config_from_dict({"train": {"iteratons": 5}})
    with pytest.raises(ConfigError, match="unknown key"):
        config_from_dict({"trainer": {}})
    with pytest.raises(ConfigError, match=r"dynamics\.lag_rate_per_s: low 14"):
        config_from_dict({"dynamics": {"lag_rate_per_s": [14, 10]}})
    bad = tmp_path / "bad.yaml"
    bad.write_text("observation: {image_hw: [12]}\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: observation\.image_hw"):
        load_config(bad)


def _state(path):
    ckpt = load_checkpoint(path)
    return ckpt, {k: v.numpy() for k, v in ckpt["model"].items()}


def test_smoke_training_and_resume_equals_uninterrupted(tmp_path):
    cfg = load_config(SMOKE)
    full = train(cfg, tmp_path / "full" / "m.agm", progress=False, log=_quiet)
    assert full.iteration == 3 and len(full.history) == 3
    assert (tmp_path / "full" / "m.agm").is_file() and (tmp_path / "full" / "m.png").is_file()
    assert all(np.isfinite(r["total"]) for r in full.history)

    part = train(cfg, tmp_path / "part" / "m.agm", stop_after=2, progress=False, log=_quiet)
    assert part.iteration == 2 and not (tmp_path / "part" / "m.agm").exists()
    resumed = train(cfg, tmp_path / "part" / "m.agm", resume=tmp_path / "part" / "m.ckpt", progress=False, log=_quiet)
    assert resumed.iterations_run == 1 and resumed.iteration == 3

    ck_full, w_full = _state(tmp_path / "full" / "m.ckpt")
    ck_res, w_res = _state(tmp_path / "part" / "m.ckpt")
    assert list(w_full) == list(w_res)
    for name in w_full:
        np.testing.assert_array_equal(w_full[name], w_res[name], err_msg=name)
    timing = {HISTORY_COLUMNS.index(c) for c in ("wall_s", "iter_s")}
    keep = [i for i in range(len(HISTORY_COLUMNS)) if i not in timing]
    np.testing.assert_array_equal(ck_full["history"].numpy()[:, keep], ck_res["history"].numpy()[:, keep])
    # the exported models are the same network
    a, b = load_policy(tmp_path / "full" / "m.agm"), load_policy(tmp_path / "part" / "m.agm")
    x = (np.ones((1, 1, 12, 16), np.float32), np.ones((1, 10), np.float32), np.zeros((1, 16), np.float32))
    np.testing.assert_array_equal(a.model(*x)[0], b.model(*x)[0])
    rows = (tmp_path / "full" / "m.csv").read_text().splitlines()
    assert rows[0].split(",") == list(HISTORY_COLUMNS) and len(rows) == 4


def test_resume_refuses_a_different_config(tmp_path):
    cfg = load_config(SMOKE)
    train(cfg, tmp_path / "m.agm", stop_after=1, progress=False, log=_quiet)
    other = cfg.replace(loss={"collision": 1.0})
    with pytest.raises(ValueError, match="different configuration"):
        train(other, tmp_path / "m.agm", resume=tmp_path / "m.ckpt", progress=False, log=_quiet)


def test_training_reduces_the_loss_on_a_fixed_episode():
    """Gradients through the point mass improve the policy: a few AdamW steps on one episode."""
    from autograd_core.optim import AdamW
    from planner_pkg.policy.env import sample_episode
    from planner_pkg.policy.network import PolicyNet
    from planner_pkg.policy.rollout import run_rollout

    cfg = load_config(SMOKE).replace(train={"steps": 30}, env={"speed_mps": [3.0, 3.0]},
                                     network={"velocity_prior_gain_per_s": 1.0})
    ag.manual_seed(0)
    net = PolicyNet(cfg.network, cfg.observation)
    opt = AdamW(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(10):
        rng = np.random.default_rng(7)
        episode = sample_episode(cfg, 4, rng)
        result = run_rollout(net, episode, cfg, rng, cfg.train.steps)
        opt.zero_grad()
        result.total.backward()
        opt.step()
        losses.append(result.total.item())
    assert losses[-1] < 0.75 * losses[0]


def _cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "planner_pkg", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_train_eval_and_fly(tmp_path):
    model = tmp_path / "smoke.agm"
    r = _cli("policy", "train", "--config", SMOKE, "--out", model, "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["iteration"] == 3 and model.is_file()
    r = _cli("policy", "export", "--checkpoint", tmp_path / "smoke.ckpt", "--out", tmp_path / "again.agm", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "again.agm").read_bytes() == model.read_bytes()

    r = _cli("policy", "eval", "--model", model, "--episodes", "2", "--speed", "3", "--vehicle", "point_mass",
             "--json", tmp_path / "eval.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "success" in r.stdout
    res = json.loads((tmp_path / "eval.json").read_text())["results"][0]
    assert res["episodes"] == 2 and 0.0 <= res["success_rate"] <= 1.0

    world = tmp_path / "w.yaml"
    r = _cli("world", "generate", "--kind", "forest", "--seed", "3", "-o", world, "--param", "size_x=16",
             "--param", "size_y=8", "--param", "count=8", "--param", "start=[-6, 0, 1]", "--param", "goal=[6, 0, 1]",
             "--param", "clear_radius=1.0", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = _cli("fly", "--world", world, "--start", "-6,0,1", "--goal", "6,0,1", "--planner", "policy", "--model", model,
             "--max-vel", "2", "--timeout", "3", "--log", tmp_path / "f.csv", "--summary", tmp_path / "s.json",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["planner"] == "policy" and summary["planner_calls"] >= 40 and summary["bad_setpoints"] == 0

    r = _cli("policy", "train", "--config", tmp_path / "nope.yaml", "--out", model, cwd=tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = _cli("policy", "eval", "--model", world, "--episodes", "1", cwd=tmp_path)
    assert r.returncode == 2 and "not a policy model" in r.stderr


def test_rollout_ray_clearance_term_is_the_hinge_at_probes_ahead():
    """With ``loss.ray_clearance`` on, the rollout carries the term and its gradient reaches the
    network; the other terms are the same as with it off (where the term is absent). The term's
    value and gradient are checked against hand geometry in test_policy_losses."""
    from planner_pkg.policy.env import sample_episode
    from planner_pkg.policy.network import PolicyNet
    from planner_pkg.policy.rollout import run_rollout

    base = load_config(SMOKE).replace(train={"steps": 12}, env={"speed_mps": [4.0, 4.0]})
    cfg = base.replace(loss={"ray_clearance": 1.0, "ray_clearance_range_m": 3.0})
    ag.manual_seed(0)
    net = PolicyNet(cfg.network, cfg.observation)
    results = {}
    for name, c in (("off", base), ("on", cfg)):
        rng = np.random.default_rng(3)
        episode = sample_episode(c, 4, rng)
        results[name] = (episode, run_rollout(net, episode, c, rng, c.train.steps))
    off, on = results["off"][1], results["on"][1]
    assert "ray_clearance" not in off.terms
    for name in off.terms:
        assert on.terms[name].item() == pytest.approx(off.terms[name].item(), rel=1e-12)
    assert on.terms["ray_clearance"].item() > 0  # 3 m of range: the ground 1-2.5 m below the probes
    assert on.total.item() == pytest.approx(off.total.item() + on.terms["ray_clearance"].item(), rel=1e-9)
    net.zero_grad()
    on.terms["ray_clearance"].backward()
    assert sum(float(np.abs(p.grad.numpy()).sum()) for p in net.parameters() if p.grad is not None) > 0


def test_rollout_passes_the_ray_probes_lookahead_times(monkeypatch):
    """``loss.ray_clearance_lookahead_s`` reaches the probes (the default (0, 0): fixed distances)."""
    from planner_pkg.policy import losses
    from planner_pkg.policy.env import sample_episode
    from planner_pkg.policy.network import PolicyNet
    from planner_pkg.policy.rollout import run_rollout

    seen = []
    real = losses.ray_probes

    def spy(*args, **kwargs):
        seen.append(kwargs.get("lookahead_s"))
        return real(*args, **kwargs)

    monkeypatch.setattr(losses, "ray_probes", spy)
    base = load_config(SMOKE).replace(train={"steps": 3}, env={"speed_mps": [4.0, 4.0]}, loss={"ray_clearance": 1.0})
    ag.manual_seed(0)
    net = PolicyNet(base.network, base.observation)
    for cfg, want in ((base, None), (base.replace(loss={"ray_clearance_lookahead_s": [0.25, 0.5]}), (0.25, 0.5))):
        seen.clear()
        rng = np.random.default_rng(3)
        run_rollout(net, sample_episode(cfg, 2, rng), cfg, rng, cfg.train.steps)
        assert len(seen) == 3 and all((s if s is None else tuple(s)) == want for s in seen)


def test_lateral_distances_have_the_field_gradient_without_its_along_track_part():
    """``rollout._distances_with_lateral``: both outputs are the world distance; the first's gradient
    is the distance field's (as ``world_distance``, central differences of the world), the second's
    is that gradient less its part along the horizontal velocity direction (a trunk dead ahead:
    no gradient left at all; at 0.25 m/s half the fade's weight squared: 0.75 of it kept)."""
    from planner_pkg.policy.distance import world_distance
    from planner_pkg.policy.env import Episode
    from planner_pkg.policy.rollout import _distances_with_lateral
    from planner_pkg.world.primitives import Cylinder
    from planner_pkg.world.world import World

    world = World((-10.0, -10.0, 0.0), (10.0, 10.0, 5.0), [Cylinder((3.0, 0.0), 0.3, 4.0)], ground=False)
    ep = Episode.__new__(Episode)
    ep.worlds, ep.agent_world = [world], np.zeros(4, dtype=np.int64)
    p = np.array([[0.0, 0.0, 1.0], [0.0, 0.5, 1.0], [1.0, -1.0, 1.0], [0.0, 0.5, 1.0]])
    v = np.array([[6.0, 0.0, 0.5], [6.0, 0.0, 0.0], [0.0, 5.0, 0.0], [0.25, 0.0, 0.0]])
    pos, vel = ag.tensor(p, requires_grad=True), ag.tensor(v)
    full, lateral = _distances_with_lateral(pos, vel, ep)
    ref = world_distance(ag.tensor(p, requires_grad=True), ep.worlds, ep.agent_world)
    np.testing.assert_allclose(full.detach().numpy(), ref.detach().numpy(), rtol=0, atol=0)
    np.testing.assert_allclose(lateral.detach().numpy(), ref.detach().numpy(), rtol=0, atol=0)
    field = np.stack([(world.signed_distance(p + 1e-6 * e) - world.signed_distance(p - 1e-6 * e)) / 2e-6
                      for e in np.eye(3)], axis=1)
    full.sum().backward()
    np.testing.assert_allclose(pos.grad.numpy(), field, atol=1e-6)
    pos.grad = None
    lateral.sum().backward()
    g = pos.grad.numpy()
    np.testing.assert_allclose(g[0], 0.0, atol=1e-6)  # dead ahead: the field points straight back
    u = np.array([1.0, 0.0, 0.0])
    want = field[1] - (field[1] @ u) * u  # beside the path: the sideways part only
    assert abs(field[1] @ u) > 0.5 and np.linalg.norm(want) > 0.1
    np.testing.assert_allclose(g[1], want, atol=1e-6)
    u = np.array([0.0, 1.0, 0.0])
    np.testing.assert_allclose(g[2], field[2] - (field[2] @ u) * u, atol=1e-6)
    u = np.array([1.0, 0.0, 0.0])
    np.testing.assert_allclose(g[3], field[3] - 0.25 * (field[3] @ u) * u, atol=1e-6)  # (0.25 / 0.5)^2


def test_rollout_avoidance_without_its_along_track_gradient_has_the_same_values():
    """``loss.avoidance_along_track_gradient: false`` changes the avoidance term's gradient only:
    every term's value is the same as with the default, and the avoidance gradient on the
    network's weights differs."""
    from planner_pkg.policy.env import sample_episode
    from planner_pkg.policy.network import PolicyNet
    from planner_pkg.policy.rollout import run_rollout

    base = load_config(SMOKE).replace(train={"steps": 12}, env={"speed_mps": [4.0, 4.0]},
                                      loss={"avoidance_range_m": 3.0})
    cfg = base.replace(loss={"avoidance_along_track_gradient": False})
    ag.manual_seed(0)
    net = PolicyNet(cfg.network, cfg.observation)
    grads, terms = {}, {}
    for name, c in (("full", base), ("lateral", cfg)):
        rng = np.random.default_rng(3)
        out = run_rollout(net, sample_episode(c, 4, rng), c, rng, c.train.steps)
        terms[name] = {k: v.item() for k, v in out.terms.items()}
        net.zero_grad()
        out.terms["avoidance"].backward()
        grads[name] = np.concatenate([p.grad.numpy().ravel() for p in net.parameters() if p.grad is not None])
    assert terms["full"]["avoidance"] > 0
    for k, value in terms["full"].items():
        assert terms["lateral"][k] == pytest.approx(value, rel=1e-6), k
    assert np.abs(grads["lateral"]).sum() > 0
    assert not np.allclose(grads["lateral"], grads["full"], rtol=1e-3, atol=0)
