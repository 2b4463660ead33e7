"""The privileged guide of the velocity loss (planner_pkg.policy.guidance, loss.velocity_guidance).

Truth: the analytic shortest path around a disc (tangent, arc, tangent) and its tangent direction;
the straight-line target in open space; unchanged loss values where there is nothing to avoid.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import autograd_core as ag
from planner_pkg.policy.config import ConfigError, PolicyConfig, load_config
from planner_pkg.policy.env import sample_episode
from planner_pkg.policy.guidance import guidance_grid, guide_directions
from planner_pkg.policy.network import PolicyNet
from planner_pkg.policy.rollout import guided_target, run_rollout
from planner_pkg.world.primitives import Cylinder
from planner_pkg.world.world import World

R_OBS, R_VEH = 1.0, 0.2
GOAL = np.array([10.0, 0.0, 1.5])


def _one_trunk(cost=0.0, clearance=0.3, cell=0.1):
    world = World([-20, -10, 0], [20, 10, 5], [Cylinder(center=(0.0, 0.0), radius=R_OBS, height=5.0)])
    return guidance_grid(world, GOAL[None], cell, R_VEH, clearance, cost, (1.0, 2.5))


def _directions(grid, points, lookahead=8.0):
    points = np.atleast_2d(np.asarray(points, dtype=float))
    n = points.shape[0]
    return guide_directions(grid, np.zeros(n, dtype=int), points, np.repeat(GOAL[None], n, axis=0), lookahead)


def test_the_way_round_a_trunk_is_the_analytic_shortest_path():
    grid = _one_trunk()
    r = R_OBS + R_VEH  # the blocked disc of the vehicle's centre
    a = 10.0
    exact = 2.0 * math.sqrt(a * a - r * r) + r * (math.pi - 2.0 * math.acos(r / a))
    i = int(round((-10.0 - grid.origin[0]) / grid.cell_m))
    j = int(round((0.0 - grid.origin[1]) / grid.cell_m))
    # grid paths (16 moves, cell-centred blocking) are a little longer than the Euclidean one
    assert exact <= grid.distance[0, i, j] <= 1.04 * exact
    # and a cell whose straight way is free is at about its Euclidean distance
    j5 = int(round((5.0 - grid.origin[1]) / grid.cell_m))
    assert grid.distance[0, i, j5] == pytest.approx(math.hypot(20.0, 5.0), rel=0.04)


def test_guide_is_the_straight_line_in_open_space_and_turns_for_a_trunk_ahead():
    grid = _one_trunk()
    # beside the trunk's shadow, or past it: exactly the straight direction to the goal
    pts = np.array([[-10.0, 5.0, 1.5], [3.0, 0.0, 1.5], [-3.0, 4.0, 1.5]])
    d, valid = _directions(grid, pts)
    straight = (GOAL[:2] - pts[:, :2]) / np.linalg.norm(GOAL[:2] - pts[:, :2], axis=1)[:, None]
    assert valid.all()
    np.testing.assert_allclose(d, straight, atol=1e-12)
    # 5 m in front of the trunk, on and just beside its axis: aims past its edge, on the side it is on
    d, valid = _directions(grid, [[-5.0, 0.02, 1.5], [-5.0, 0.3, 1.5], [-5.0, -0.3, 1.5]])
    assert valid.all()
    turn = np.degrees(np.arctan2(d[:, 1], d[:, 0]))
    lo = math.degrees(math.atan2(R_OBS + R_VEH, math.sqrt(25.0 - (R_OBS + R_VEH) ** 2)))  # the hard disc's tangent
    assert lo - 3.0 <= abs(turn[0]) <= lo + 8.0
    assert lo - 3.0 <= turn[1] <= lo + 8.0 and -lo - 8.0 <= turn[2] <= -lo + 3.0
    # with an 8 m look-ahead the trunk 10 m ahead does not turn it yet; with 12 m it does
    d, _ = _directions(grid, [[-10.0, 0.3, 1.5]], lookahead=8.0)
    np.testing.assert_allclose(d[0], np.array([20.0, -0.3]) / math.hypot(20.0, 0.3), atol=1e-12)
    d, _ = _directions(grid, [[-10.0, 0.3, 1.5]], lookahead=12.0)
    assert math.degrees(math.atan2(d[0, 1], d[0, 0])) > 4.0


def test_clearance_cost_takes_the_wide_way_round_a_narrow_gap():
    # two trunks 0.9 m apart (surface to surface) straight ahead: the vehicle (0.4 m) fits through
    world = World([-20, -10, 0], [20, 10, 5], [Cylinder(center=(0.0, 0.95), radius=0.5, height=5.0),
                                               Cylinder(center=(0.0, -0.95), radius=0.5, height=5.0)])
    point = [[-4.0, 0.0, 1.5]]
    tight = guidance_grid(world, GOAL[None], 0.1, R_VEH, 0.4, 0.0, (1.0, 2.5))
    costly = guidance_grid(world, GOAL[None], 0.1, R_VEH, 0.4, 200.0, (1.0, 2.5))
    d_tight, _ = _directions(tight, point)
    d_costly, _ = _directions(costly, point)
    assert abs(d_tight[0, 1]) < 0.05  # through the gap
    assert abs(d_costly[0, 1]) > 0.25  # round the pair, keeping the clearance


def test_no_guide_inside_a_footprint_and_the_target_keeps_its_speed():
    grid = _one_trunk()
    _, valid = _directions(grid, [[0.0, 0.0, 1.5], [0.0, 1.1, 1.5], [-5.0, 0.0, 1.5]])
    assert valid.tolist() == [False, False, True]

    class _Ep:  # the two Episode fields guided_target reads, one world
        guidance = [grid]
        agent_world = np.zeros(2, dtype=int)
        guidance_index = np.zeros(2, dtype=int)
        goal = np.repeat(GOAL[None], 2, axis=0)

    pos = np.array([[0.0, 0.0, 1.5], [-5.0, 0.3, 1.0]])
    target = np.array([[7.0, 0.0, 0.0], [6.0, -0.5, 0.7]])
    out = guided_target(_Ep, target, pos, 8.0)
    np.testing.assert_array_equal(out[0], target[0])  # no guide: the straight target
    assert out[1, 2] == target[1, 2]
    assert math.hypot(*out[1, :2]) == pytest.approx(math.hypot(*target[1, :2]))
    assert out[1, 1] > 0.5  # turned to the side it is on


def _rollout_terms(cfg, seed=3):
    ep = sample_episode(cfg, cfg.train.batch_size, np.random.default_rng(seed))
    ag.manual_seed(0)
    net = PolicyNet(cfg.network, cfg.observation)
    res = run_rollout(net, ep, cfg, np.random.default_rng(seed), cfg.train.steps)
    return ep, {k: float(v.item()) for k, v in res.terms.items()}


@pytest.mark.parametrize("count_scale", [[0.0, 0.0], [1.5, 1.5]])
def test_rollout_velocity_target_follows_the_guide_only_where_there_is_something_to_avoid(count_scale):
    base = load_config("config/policy/smoke.yaml").replace(
        env={"count_scale": count_scale, "world_params": {"size_x": 30.0, "count": 120}, "speed_mps": [6.0, 8.0],
             "start_x_frac": [0.8, 0.9]},
        train={"batch_size": 8, "steps": 40})
    ep_plain, plain = _rollout_terms(base)
    ep_guided, guided = _rollout_terms(base.replace(loss={"velocity_guidance": True}))
    assert ep_plain.guidance is None and len(ep_guided.guidance) == base.env.worlds_per_batch
    for name in plain:  # the guide changes the velocity target only
        if name != "velocity":
            assert guided[name] == plain[name], name
    if count_scale[1] == 0.0:  # empty worlds: the guide is the straight line
        assert guided["velocity"] == plain["velocity"]
    else:
        assert guided["velocity"] != pytest.approx(plain["velocity"], rel=1e-3)


def test_guided_rollout_needs_a_guided_episode_and_settings_are_validated():
    cfg = load_config("config/policy/smoke.yaml")
    ep = sample_episode(cfg, cfg.train.batch_size, np.random.default_rng(0))
    net = PolicyNet(cfg.network, cfg.observation)
    with pytest.raises(ValueError, match="velocity_guidance needs an episode"):
        run_rollout(net, ep, cfg.replace(loss={"velocity_guidance": True}), np.random.default_rng(0), 3)
    with pytest.raises(ConfigError, match="guidance_cell_m"):
        PolicyConfig().replace(loss={"guidance_cell_m": 0.0})
    with pytest.raises(ConfigError, match="guidance_lookahead_m"):
        PolicyConfig().replace(loss={"guidance_lookahead_m": -1.0})
