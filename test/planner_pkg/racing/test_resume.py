"""Bit-identical resume of ``race train``: k iterations, checkpoint, resume to N gives the weights,
optimiser state, observation statistics and rollout worker states of N iterations straight."""
import logging
import shutil

import numpy as np
import pytest

import autograd_core as ag
from planner_pkg.racing.config import config_from_dict

#: Columns that hold wall-clock times (they differ between any two runs); the rest must match.
TIMING = {"wall_s", "iter_s", "collect_s", "env_s", "policy_s", "update_s", "steps_per_s"}


def _cfg(iterations=3):
    return config_from_dict({"network": {"actor_hidden": [16], "critic_hidden": [16]},
                             "train": {"iterations": iterations, "envs_per_worker": 6, "steps": 24, "eval_every": 0,
                                       "checkpoint_every": 1}})


def _flat(obj, prefix=""):
    """Every leaf of a loaded checkpoint as {path: value} (tensors as arrays)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out.update(_flat(v, f"{prefix}/{k}"))
        return out
    if isinstance(obj, (list, tuple)):
        out = {}
        for i, v in enumerate(obj):
            out.update(_flat(v, f"{prefix}/{i}"))
        return out
    if isinstance(obj, ag.Tensor):
        return {prefix: obj.detach().numpy()}
    return {prefix: obj}


def _assert_same(a, b, what):
    fa, fb = _flat(a), _flat(b)
    assert fa.keys() == fb.keys(), what
    for k, va in fa.items():
        vb = fb[k]
        if isinstance(va, np.ndarray):
            assert va.dtype == vb.dtype and va.shape == vb.shape, f"{what}{k}"
            assert va.tobytes() == vb.tobytes(), f"{what}{k} differs"  # bit for bit (NaN included)
        else:
            assert va == vb, f"{what}{k}: {va!r} != {vb!r}"


def test_stop_and_resume_gives_the_straight_run_bit_for_bit(tmp_path, caplog):
    from planner_pkg.racing.trainer import HISTORY_COLUMNS, CheckpointError, load_checkpoint, train

    cfg = _cfg(3)
    straight = train(cfg, tmp_path / "a" / "m.agm", workers=2, progress=False, in_process=True)
    first = train(cfg, tmp_path / "b" / "m.agm", workers=2, progress=False, in_process=True, stop_after=1)
    assert first.iteration == 1
    ck1 = load_checkpoint(first.paths["checkpoint"])
    at1 = tmp_path / "at1.ckpt"
    shutil.copy(first.paths["checkpoint"], at1)  # the resumed run rewrites its checkpoint
    resumed = train(cfg, tmp_path / "b" / "m.agm", workers=2, progress=False, in_process=True,
                    resume=first.paths["checkpoint"])
    assert resumed.iterations_run == 2
    a, b = load_checkpoint(straight.paths["checkpoint"]), load_checkpoint(resumed.paths["checkpoint"])
    for key in ("model", "optimizer", "normalizer", "autograd_rng", "rollout"):
        _assert_same(a[key], b[key], key)
    assert a["iteration"] == b["iteration"] == 3
    cols = [c for c in HISTORY_COLUMNS if c not in TIMING]
    hist = [np.array([[float(r.get(c, np.nan)) for c in cols] for r in h]) for h in (straight.history, resumed.history)]
    assert hist[0].shape == (3, len(cols)) and hist[0].tobytes() == hist[1].tobytes()  # returns, losses, KL, ...
    # the test can fail: the state after iteration 1 is not the state after 3
    assert ck1["model"]["log_std"].numpy().tobytes() != a["model"]["log_std"].numpy().tobytes()

    # another worker count cannot continue the episodes: a warned fresh start, not an error
    with caplog.at_level(logging.WARNING, logger="planner_pkg.racing.trainer"):
        other = train(cfg, tmp_path / "c" / "m.agm", workers=1, progress=False, resume=at1, stop_after=1)
    assert other.iteration == 2 and "fresh episodes" in caplog.text and "2 worker(s)" in caplog.text

    # a damaged worker state is a clear error naming the checkpoint, not a crash mid-run
    ck1["config"] = cfg.to_dict()
    ck1["rollout"]["states"][1]["obs"] = ag.zeros(3, 3)
    bad = tmp_path / "bad.ckpt"
    ag.save(ck1, str(bad))
    with pytest.raises(CheckpointError, match="rollout worker states do not fit.*obs"):
        train(cfg, tmp_path / "d" / "m.agm", workers=2, progress=False, in_process=True, resume=bad)
