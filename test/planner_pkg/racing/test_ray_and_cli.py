"""Ray scale-out (2 rollout actors on a local Ray cluster) and the race commands end to end."""
import csv
import json

import numpy as np
import pytest

from planner_pkg.racing.config import config_from_dict

TINY = {"network": {"actor_hidden": [16], "critic_hidden": [16]},
        "train": {"iterations": 2, "envs_per_worker": 8, "steps": 16, "eval_every": 2, "eval_tracks": 2,
                  "checkpoint_every": 1}}


def test_two_ray_workers_train_and_match_the_in_process_run(tmp_path):
    pytest.importorskip("ray")
    from planner_pkg.racing.trainer import load_checkpoint, train

    cfg = config_from_dict(TINY)
    r_ray = train(cfg, tmp_path / "ray.agm", workers=2, ray_address="local", progress=False)
    assert r_ray.mode == "ray"
    assert r_ray.history[-1]["env_steps"] == 2 * 2 * 8 * 16  # iterations x workers x envs x steps
    r_local = train(cfg, tmp_path / "local.agm", workers=2, progress=False, in_process=True)
    assert r_local.mode == "in-process"
    a, b = load_checkpoint(r_ray.paths["checkpoint"]), load_checkpoint(r_local.paths["checkpoint"])
    for k, v in a["model"].items():  # the same batches in worker order: the same weights
        np.testing.assert_array_equal(v.numpy(), b["model"][k].numpy())
    # the actors' checkpointed worker states (what an exact resume restores) equal the in-process ones
    ra, rb = a["rollout"]["states"], b["rollout"]["states"]
    assert len(ra) == len(rb) == 2
    for sa, sb in zip(ra, rb):
        assert sa["env"]["rng"] == sb["env"]["rng"] and sa["action_rng"] == sb["action_rng"]
        assert sa["env"]["tracks"] == sb["env"]["tracks"]
        np.testing.assert_array_equal(sa["obs"].numpy(), sb["obs"].numpy())
        np.testing.assert_array_equal(sa["env"]["state.pos"].numpy(), sb["env"]["state.pos"].numpy())
    import ray
    assert not ray.is_initialized()  # the pool shut the instance it started down


def test_bad_ray_address_is_a_usage_error(tmp_path, capsys):
    from planner_pkg.cli import main

    cfgp = tmp_path / "c.yaml"
    cfgp.write_text("train: {iterations: 1}\n")
    assert main(["race", "train", "--config", str(cfgp), "--workers", "2", "--ray-address", "nowhere",
                 "--out", str(tmp_path / "m.agm")]) == 2
    assert "--ray-address must be" in capsys.readouterr().err


def test_race_train_then_fly_a_track_it_never_saw(tmp_path, capsys):
    import yaml
    from planner_pkg.cli import main
    from planner_pkg.racing.track import random_track, save_track

    cfgp = tmp_path / "tiny.yaml"
    cfgp.write_text(yaml.safe_dump(TINY))
    model = tmp_path / "m.agm"
    assert main(["race", "train", "--config", str(cfgp), "--out", str(model), "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["iteration"] == 2 and model.is_file() and (tmp_path / "m.csv").is_file()
    track = save_track(random_track(np.random.default_rng(12345)), tmp_path / "t.json")
    log, summ = tmp_path / "f.csv", tmp_path / "s.json"
    assert main(["race", "fly", "--track", str(track), "--laps", "2", "--log", str(log), "--summary", str(summ),
                 "--model", str(model)]) == 0
    rows = list(csv.reader(log.open()))
    assert rows[0] == ["t", "x", "y", "z", "vx", "vy", "vz"] and len(rows) > 2
    s = json.loads(summ.read_text())
    for key in ("gates_passed", "lap_times_s", "crash", "crash_reason", "success", "mean_speed_mps",
                "baseline_lap_s", "lap_time_ratio"):
        assert key in s
    assert s["baseline_lap_s"] > 0
    # the log's last time is the flight's time
    assert float(rows[-1][0]) == pytest.approx(s["time_s"], abs=1e-3)


def test_fly_rejects_bad_inputs(tmp_path, capsys):
    from planner_pkg.cli import main

    bad = tmp_path / "t.json"
    bad.write_text('{"gates": [{"center": [0, 0, 2], "yaw": 0}]}')
    args = ["--laps", "1", "--log", str(tmp_path / "l.csv"), "--summary", str(tmp_path / "s.json")]
    assert main(["race", "fly", "--track", str(bad), *args]) == 2
    assert "missing ['size']" in capsys.readouterr().err
    good = tmp_path / "g.json"
    good.write_text('{"gates": [{"center": [0, 0, 2], "yaw": 0, "size": 1.5}]}')
    (tmp_path / "m.agm").write_bytes(b"junk")
    assert main(["race", "fly", "--track", str(good), "--model", str(tmp_path / "m.agm"), *args]) == 2
    assert "not a racing model" in capsys.readouterr().err
