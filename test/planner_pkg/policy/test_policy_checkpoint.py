"""Malformed training inputs are refused with a clear error (CLI: exit 2 naming the file, no
traceback): checkpoints with the right tag but missing or bad fields, wrong shapes or non-finite
weights; training configs that are not UTF-8, not YAML, or ask for absurd sizes; policy models
with non-finite weights."""
import json
import math
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import autograd_core as ag
from autograd_core.runtime import _format

from planner_pkg.policy.checkpoint import CheckpointError, load_checkpoint, network_from_checkpoint
from planner_pkg.policy.config import (MAX_PARAMETERS, ConfigError, PolicyConfig, config_from_dict, load_config,
                                       parameter_count, training_bytes_estimate)
from planner_pkg.policy.export import PolicyModelError, export_policy, load_policy
from planner_pkg.policy.network import PolicyNet
from planner_pkg.policy.trainer import train

REPO = Path(__file__).resolve().parents[3]
SMOKE = REPO / "config" / "policy" / "smoke.yaml"


def _quiet(_msg):
    pass


def _cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "planner_pkg", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _assert_exit_2(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    for needle in needles:
        assert needle in r.stderr, (needle, r.stderr)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """A 1-iteration smoke run: (config, checkpoint path, the checkpoint as loaded)."""
    out = tmp_path_factory.mktemp("run") / "m.agm"
    cfg = load_config(SMOKE)
    train(cfg, out, stop_after=1, progress=False, log=_quiet)
    path = out.with_suffix(".ckpt")
    return cfg, path, ag.load(path)


def _variant(smoke_run, tmp_path, edit, name="bad.ckpt"):
    ckpt = ag.load(smoke_run[1])  # a fresh copy to edit
    edit(ckpt)
    path = tmp_path / name
    ag.save(ckpt, path)
    return path


def _set_weight(name, value):
    def edit(ckpt):
        ckpt["model"][name] = value(ckpt["model"][name])
    return edit


BAD_CHECKPOINTS = {
    "missing config": (lambda c: c.pop("config"), r"missing \['config'\]"),
    "config not a mapping": (lambda c: c.update(config=[1, 2]), "configuration is invalid"),
    "bad config value": (lambda c: c["config"]["train"].update(lr=-1.0), r"train\.lr"),
    "absurd image size": (lambda c: c["config"]["observation"].update(image_hw=[100000, 100000]),
                          r"observation\.image_hw\[0\]: must be in 10\.\.1024"),
    "iteration a string": (lambda c: c.update(iteration="3"), "iteration must be an integer"),
    "iteration past the run": (lambda c: c.update(iteration=10 ** 9), "iteration must be an integer in 0..3"),
    "model not a mapping": (lambda c: c.update(model=None), "'model' must be the network's state_dict"),
    "wrong weight shape": (_set_weight("fc.weight", lambda t: ag.zeros(7, 16)),
                           "do not fit the network of its configuration.*size mismatch for fc.weight"),
    "missing weight": (lambda c: c["model"].pop("gru.weight_hh"), "Missing key.*gru.weight_hh"),
    "all-NaN weight": (_set_weight("fc.weight", lambda t: ag.full(t.shape, math.nan)),
                       r"weight 'fc.weight' holds 96 non-finite value\(s\)"),
    "one infinite weight": (_set_weight("gru.bias_ih", lambda t: ag.cat([t[:-1], ag.tensor([math.inf])])),
                            r"weight 'gru.bias_ih' holds 1 non-finite"),
    "history of wrong shape": (lambda c: c.update(history=ag.zeros(5, 2, dtype=ag.float64)), "'history' must be"),
    "history columns": (lambda c: c.update(history_columns=["iteration"]), "'history_columns' must list"),
    "optimizer not a mapping": (lambda c: c.update(optimizer="adam"), "'optimizer' must be a state_dict"),
}
RESUME_ONLY = {
    "optimizer lr a string": (lambda c: c["optimizer"]["param_groups"][0].update(lr="fast"),
                              r"optimizer param_groups\[0\]\['lr'\] must be like"),
    "optimizer state NaN": (lambda c: c["optimizer"]["state"][0].update(exp_avg=ag.full(
        c["optimizer"]["state"][0]["exp_avg"].shape, math.nan)), r"optimizer state \[0\]\['exp_avg'\] holds non-finite"),
    "optimizer state wrong shape": (lambda c: c["optimizer"]["state"][0].update(exp_avg=ag.zeros(3)),
                                    "optimizer state does not fit the network"),
    "optimizer state for no parameter": (lambda c: c["optimizer"]["state"].update({99: {}}),
                                         "does not name one of the"),
    "scheduler T_max a string": (lambda c: c["scheduler"].update(T_max="x"), r"scheduler\['T_max'\] must be like"),
    "scheduler extra entry": (lambda c: c["scheduler"].update(optimizer=1), "scheduler has unexpected entries"),
}


@pytest.mark.parametrize("case", sorted(BAD_CHECKPOINTS))
def test_malformed_checkpoints_are_refused_naming_the_file(smoke_run, tmp_path, case):
    edit, match = BAD_CHECKPOINTS[case]
    path = _variant(smoke_run, tmp_path, edit)
    with pytest.raises(CheckpointError, match=match) as info:
        network_from_checkpoint(load_checkpoint(path), path)
    assert str(path) in str(info.value)
    # and resuming from it fails the same way, before any training
    cfg = smoke_run[0]
    with pytest.raises(CheckpointError, match=match):
        train(cfg, tmp_path / "resumed.agm", resume=path, progress=False, log=_quiet)


@pytest.mark.parametrize("case", sorted(RESUME_ONLY))
def test_malformed_training_state_is_refused_on_resume(smoke_run, tmp_path, case):
    edit, match = RESUME_ONLY[case]
    path = _variant(smoke_run, tmp_path, edit)
    with pytest.raises(CheckpointError, match=match) as info:
        train(smoke_run[0], tmp_path / "resumed.agm", resume=path, progress=False, log=_quiet)
    assert str(path) in str(info.value)
    assert not (tmp_path / "resumed.ckpt").exists()  # refused before writing anything


def test_valid_checkpoint_still_exports_and_resumes(smoke_run, tmp_path):
    cfg, path, _ = smoke_run
    got_cfg, net = network_from_checkpoint(load_checkpoint(path), path)
    assert got_cfg == cfg and isinstance(net, PolicyNet)
    r = train(cfg, tmp_path / "m.agm", resume=path, progress=False, log=_quiet)
    assert r.iteration == 3 and r.iterations_run == 2
    with pytest.raises(CheckpointError, match="beyond the 1 iterations"):
        train(cfg.replace(train={"iterations": 1}), tmp_path / "n.agm", resume=tmp_path / "m.ckpt", progress=False,
              log=_quiet)


def test_cli_export_and_resume_exit_2_on_malformed_checkpoints(smoke_run, tmp_path):
    no_config = _variant(smoke_run, tmp_path, lambda c: c.pop("config"), "no_config.ckpt")
    r = _cli("policy", "export", "--checkpoint", no_config, "--out", tmp_path / "x.agm", cwd=tmp_path)
    _assert_exit_2(r, str(no_config), "missing ['config']")
    wrong = _variant(smoke_run, tmp_path, _set_weight("fc.weight", lambda t: ag.zeros(7, 16)), "wrong.ckpt")
    r = _cli("policy", "export", "--checkpoint", wrong, "--out", tmp_path / "x.agm", cwd=tmp_path)
    _assert_exit_2(r, str(wrong), "size mismatch for fc.weight")
    r = _cli("policy", "train", "--config", SMOKE, "--out", tmp_path / "y.agm", "--resume", wrong, "--no-progress",
             cwd=tmp_path)
    _assert_exit_2(r, str(wrong), "size mismatch for fc.weight")
    assert not (tmp_path / "x.agm").exists() and not (tmp_path / "y.ckpt").exists()


# -- training configs -----------------------------------------------------------------------------
@pytest.mark.parametrize("content, match", [
    (b"train:\n  iterations: 3\n\xff\xfe\n", "is not UTF-8 text"),
    (b"train: {iterations: [1\n", "is not valid YAML"),
    (b"train:\n\titerations: 3\n", "is not valid YAML"),
    (b"train:\n  iterations: 5\n  iterations: 6\n", "duplicate key 'iterations'"),
    (b"train: !!python/object/apply:os.system ['echo hi']\n", "is not valid YAML"),
    (b"observation: {image_hw: [100000, 100000]}\n", r"observation\.image_hw\[0\]: must be in 10\.\.1024, got 100000"),
])
def test_bad_config_files_are_config_errors(tmp_path, content, match):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=match):
        load_config(path)


def test_cli_train_exits_2_on_bad_config_files(tmp_path):
    for name, content, needle in (("latin1.yaml", "network: {hidden: 16}  # caf\xe9\n".encode("latin-1"), "UTF-8"),
                                  ("broken.yaml", b"train: [\n", "not valid YAML"),
                                  ("huge.yaml", b"observation: {image_hw: [100000, 100000]}\n", "image_hw")):
        path = tmp_path / name
        path.write_bytes(content)
        r = _cli("policy", "train", "--config", path, "--out", tmp_path / "m.agm", "--no-progress", cwd=tmp_path)
        _assert_exit_2(r, str(path), needle)


def test_a_learning_rate_in_exponent_form_is_a_number(tmp_path):
    # "3e-4" is a string to PyYAML's own safe loader (YAML 1.1 wants "3.0e-4"), and was refused
    path = tmp_path / "lr.yaml"
    path.write_text("train:\n  lr: 3e-4\n  lr_min: 1e-5\n")
    cfg = load_config(path)
    assert cfg.train.lr == 3e-4 and cfg.train.lr_min == 1e-5


def test_yaml_merge_keys_still_work(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("train:\n  <<: {iterations: 3, batch_size: 2}\n  iterations: 1\n")
    cfg = load_config(path)
    assert cfg.train.iterations == 1 and cfg.train.batch_size == 2


@pytest.mark.parametrize("overrides", [
    {},
    {"network": {"channels": [3, 5, 7], "hidden": 9}, "observation": {"image_hw": [10, 13]}},
    {"observation": {"image_hw": [24, 40]}},
    {"network": {"fine_branch": True}, "observation": {"image_hw": [24, 32]}},
    {"network": {"channels": [3, 5, 7], "hidden": 9, "fine_branch": True}, "observation": {"image_hw": [20, 26]}},
])
def test_parameter_count_is_the_networks(overrides):
    cfg = config_from_dict(overrides)
    net = PolicyNet(cfg.network, cfg.observation)
    assert parameter_count(cfg.network, cfg.observation) == sum(p.numel() for p in net.parameters())


def test_sizes_that_cannot_fit_are_refused_at_config_load():
    with pytest.raises(ConfigError, match=f"weights for a 1024 x 1024 image.*above the limit of {MAX_PARAMETERS:,}"):
        config_from_dict({"observation": {"image_hw": [1024, 1024]}})
    with pytest.raises(ConfigError, match=r"train: a training iteration would need about .* GiB"):
        config_from_dict({"train": {"batch_size": 65536, "steps": 100000}})
    with pytest.raises(ConfigError, match=r"observation\.render_scale"):
        config_from_dict({"observation": {"render_scale": 1000}})
    with pytest.raises(ConfigError, match=r"dynamics\.action_delay_steps\[1\]"):
        config_from_dict({"dynamics": {"action_delay_steps": [0, 10 ** 12]}})
    with pytest.raises(ConfigError, match=r"observation\.image_hw\[0\]: must be in 10"):
        config_from_dict({"observation": {"image_hw": [9, 16]}})  # too small for the CNN


@pytest.mark.parametrize("overrides", [
    {"train": {"batch_size": 4, "steps": 6}},
    {"train": {"batch_size": 2, "steps": 4}, "observation": {"image_hw": [24, 32], "render_scale": 2},
     "network": {"channels": [8, 8, 8], "hidden": 32}},
    {"train": {"batch_size": 2, "steps": 4}, "observation": {"image_hw": [24, 32]},
     "network": {"channels": [8, 8, 8], "hidden": 32, "fine_branch": True}},
])
def test_training_memory_estimate_is_not_below_the_real_peak(overrides):
    """The config-load check uses an upper estimate: one real iteration stays under it."""
    from planner_pkg.policy.env import sample_episode
    from planner_pkg.policy.rollout import run_rollout
    from planner_pkg.policy.trainer import build_network

    cfg = load_config(SMOKE).replace(**overrides)
    net = build_network(cfg)
    rng = np.random.default_rng(0)
    episode = sample_episode(cfg, cfg.train.batch_size, rng)
    tracemalloc.start()
    try:
        run_rollout(net, episode, cfg, rng, cfg.train.steps).total.backward()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= training_bytes_estimate(cfg), (peak, training_bytes_estimate(cfg))


# -- policy models with non-finite weights --------------------------------------------------------
SMALL = PolicyConfig().replace(network={"channels": [4, 8, 8], "hidden": 16})


def _nan_model(tmp_path):
    ag.manual_seed(0)
    good = export_policy(PolicyNet(SMALL.network, SMALL.observation), SMALL, tmp_path / "good.agm")
    raw = good.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    meta = json.loads(raw[8:8 + n])["__metadata__"]
    _, tensors = _format.loads(raw)
    tensors = {k: np.full_like(v, np.nan) if v.dtype.kind == "f" and v.ndim else v for k, v in tensors.items()}
    path = tmp_path / "nan.agm"
    path.write_bytes(_format.dumps(tensors, meta))
    return path


def test_policy_model_with_nan_weights_is_refused(tmp_path):
    path = _nan_model(tmp_path)
    with pytest.raises(PolicyModelError, match=r"nan\.agm: constant '.*' \[.*\] holds \d+ non-finite value"):
        load_policy(path)
    r = _cli("policy", "eval", "--model", path, "--episodes", "1", "--vehicle", "point_mass", cwd=tmp_path)
    _assert_exit_2(r, str(path), "non-finite")


def test_checkpoint_from_before_the_ray_clearance_term_resumes(smoke_run, tmp_path):
    """A checkpoint written before ``loss.ray_clearance`` existed has no column for it (and its
    config no such key: the default, off, applies): it still resumes, and the CSV keeps the column,
    empty, as the term is off."""
    def drop_column(ckpt):
        cols = list(ckpt["history_columns"])
        k = cols.index("ray_clearance")
        table = ckpt["history"].numpy()
        ckpt["history_columns"] = cols[:k] + cols[k + 1:]
        ckpt["history"] = ag.tensor(np.delete(table, k, axis=1))
        for key in ("ray_clearance", "ray_clearance_range_m", "ray_clearance_probes_m"):
            ckpt["config"]["loss"].pop(key)

    path = _variant(smoke_run, tmp_path, drop_column, "old.ckpt")
    r = train(smoke_run[0], tmp_path / "m.agm", resume=path, progress=False, log=_quiet)
    assert r.iteration == 3 and r.iterations_run == 2
    rows = [row.split(",") for row in (tmp_path / "m.csv").read_text().splitlines()]
    k = rows[0].index("ray_clearance")
    assert len(rows) == 4 and [row[k] for row in rows[1:]] == ["", "", ""]
    assert all(row[rows[0].index("velocity")] != "" for row in rows[1:])
