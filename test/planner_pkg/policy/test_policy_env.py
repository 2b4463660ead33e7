"""Training scenarios and rollouts (planner_pkg.policy.env, rollout): the per-world obstacle count
factor, and the acceleration term beyond the drag feed-forward."""
import numpy as np
import pytest

from planner_pkg.policy.config import ConfigError, config_from_dict
from planner_pkg.policy.env import sample_episode


def _config(**env):
    return config_from_dict({"env": {"world_kind": "forest", "worlds_per_batch": 8,
                                     "world_params": {"size_x": 50.0, "count": 40}, **env}})


def test_default_count_scale_keeps_every_world_and_the_random_stream():
    plain = _config()
    ones = _config(count_scale=[1.0, 1.0])
    a = sample_episode(plain, 8, np.random.default_rng(5))
    b = sample_episode(ones, 8, np.random.default_rng(5))
    assert [len(w.obstacles) for w in a.worlds] == [40] * 8
    # nothing extra is drawn: the same worlds, starts and speeds as a config without the field
    assert [len(w.obstacles) for w in b.worlds] == [40] * 8
    np.testing.assert_array_equal(a.start, b.start)
    np.testing.assert_array_equal(a.speed, b.speed)


def test_count_scale_draws_sparser_and_open_worlds_within_its_range():
    cfg = _config(count_scale=[0.0, 0.5])
    counts = [len(w.obstacles) for k in range(6)
              for w in sample_episode(cfg, 8, np.random.default_rng(k)).worlds]
    assert all(0 <= c <= 20 for c in counts)
    assert len(set(counts)) > 5  # drawn per world, not once per run
    assert min(counts) < 5


def test_count_scale_without_a_count_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"env\.count_scale.*world_params\.count"):
        config_from_dict({"env": {"world_kind": "forest", "count_scale": [0.2, 1.0]}})
    with pytest.raises(ConfigError, match=r"env\.count_scale"):
        config_from_dict({"env": {"count_scale": [1.0, 0.5], "world_params": {"count": 10}}})


def _rollout_terms(**loss):
    from planner_pkg.policy.rollout import run_rollout
    from planner_pkg.policy.trainer import build_network

    cfg = config_from_dict({"network": {"channels": [4, 8, 8], "hidden": 16, "velocity_prior_gain_per_s": 2.0,
                                        "velocity_prior_drag_per_s": 0.375},
                            "env": {"world_kind": "forest", "worlds_per_batch": 2,
                                    "world_params": {"size_x": 50.0, "count": 0}, "speed_mps": [4.0, 6.0]},
                            "loss": loss})
    net = build_network(cfg)
    rng = np.random.default_rng(3)
    ep = sample_episode(cfg, 4, rng)
    res = run_rollout(net, ep, cfg, rng, 30)
    return {k: float(v.detach().numpy()) for k, v in res.terms.items()}, res


def test_acceleration_beyond_drag_charges_only_the_command_above_the_drag_feed_forward():
    whole, _ = _rollout_terms()
    beyond, res = _rollout_terms(acceleration_beyond_drag=True)
    # the same flight (the term does not change the forward pass) ...
    for name in ("velocity", "velocity_estimate", "jerk", "altitude"):
        assert beyond[name] == whole[name], name
    # ... with the thrust that holds the speed against drag no longer charged (about 30 % of the
    # term over these 2 s of take-off towards 4-6 m/s in open space)
    assert beyond["acceleration"] < 0.8 * whole["acceleration"]
    # and its gradient still reaches the network
    res.terms["acceleration"].backward()

