"""Training scenarios (planner_pkg.policy.env): the per-world obstacle count factor."""
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
