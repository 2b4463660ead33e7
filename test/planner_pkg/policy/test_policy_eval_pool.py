"""``policy eval`` and ``benchmarks/forest.py`` on the worker pool: episodes spread over 2 local
Ray actors give the outcomes of the in-process run for the same seeds."""
import os

import pytest
from benchmark_scripts import load_benchmark

#: Summary fields measured on the wall clock (they differ between any two runs); the rest must match.
WALL_CLOCK = {"wall_time_s", "real_time_factor", "replan_ms_median", "replan_ms_p95"}


def _outcome(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in WALL_CLOCK}


def _pid(_context, item):
    return item, os.getpid()


def _forest_module():
    return load_benchmark("forest", "_bench_forest_for_pool_test")


def test_two_ray_workers_give_the_in_process_episodes():
    ray = pytest.importorskip("ray")
    from planner_pkg.policy.evaluate import evaluate_speeds
    from planner_pkg.policy.export import default_model_path, load_policy
    from planner_pkg.pool import _init_local, map_items

    model = default_model_path()
    assert model is not None, "the package ships a policy model"
    policy = load_policy(model)
    forest = _forest_module()
    cases = [{"name": "direct", "max_vel": 2.0, "max_acc": 3.0, "density": 0.2, "time_scale": 1.0, "model": None}]
    eval_args = dict(episodes=2, vehicle="point_mass", timeout_s=4.0, first_world=3)
    local_eval = evaluate_speeds(policy, [2.0, 3.0], **eval_args)
    local_forest = forest.run_cases(cases, [0, 1])

    _init_local(ray, {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False})
    try:
        # the items really run in the actors (other processes), and come back in item order
        out = map_items(_pid, range(4), workers=2)
        assert out["mode"] == "ray" and [i for i, _ in out["results"]] == [0, 1, 2, 3]
        assert os.getpid() not in {p for _, p in out["results"]}
        seen = []
        ray_eval = evaluate_speeds(policy, [2.0, 3.0], workers=2, progress=lambda v, i, s: seen.append((v, i)),
                                   **eval_args)
        ray_forest = forest.run_cases(cases, [0, 1], workers=2)  # a script's function, shipped by value
        assert ray.is_initialized()  # an instance the pool did not start is left running
    finally:
        ray.shutdown()
    assert seen == [(2.0, 0), (2.0, 1), (3.0, 0), (3.0, 1)]
    for a, b in zip(local_eval, ray_eval):
        assert a.speed_mps == b.speed_mps and len(a.episodes) == len(b.episodes) == 2
        assert [_outcome(e) for e in a.episodes] == [_outcome(e) for e in b.episodes]
    assert [e["seed"] for e in ray_eval[0].episodes] == [7, 9]  # eval worlds 3, 4: odd seeds 2k + 1
    assert [_outcome(e) for e in local_forest[0]["per_episode"]] == [_outcome(e) for e in ray_forest[0]["per_episode"]]
    assert local_forest[0]["peak_cmd"] == ray_forest[0]["peak_cmd"]
    assert local_forest[0]["episodes"] == 2


def test_policy_eval_rejects_a_bad_ray_address(capsys):
    from planner_pkg.cli import main

    assert main(["policy", "eval", "--episodes", "1", "--workers", "2", "--ray-address", "nowhere"]) == 2
    assert "--ray-address must be" in capsys.readouterr().err


def test_a_loaded_policy_refuses_pickling_rather_than_fly_differently():
    """A pickled runtime Model used to load and run, with its kernels cut off from its buffers (the
    copy flew other paths: found shipping the policy to Ray actors); the workers get the file's bytes."""
    import copy
    import pickle

    from planner_pkg.policy.export import default_model_path, load_policy, load_policy_bytes

    policy = load_policy(default_model_path())
    for clone in (pickle.dumps, copy.deepcopy):
        with pytest.raises(TypeError, match="cannot be pickled"):
            clone(policy)
    with open(default_model_path(), "rb") as f:
        again = load_policy_bytes(f.read(), "shipped")
    assert again.path == "shipped" and again.config == policy.config
