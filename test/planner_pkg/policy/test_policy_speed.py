"""Issue 16: what lets the policy fly at the commanded speed, checked against independent truth.

* the target-speed profile (linear approach, braking curve) against its closed form;
* the velocity prior with drag feed-forward: with a zero head the network's acceleration is the
  closed-form prior, and the training dynamics then settle at the target speed (without the
  feed-forward: at gain / (gain + drag) of it, the analytic steady state);
* the planner feeds the network the same profile (read back through the zero-head prior);
* warm starts from an exported model; the cruise-speed statistic and the speed-success plot.
"""
import math

import numpy as np
import pytest

import autograd_core as ag

from planner_pkg.policy.config import DynamicsConfig, PolicyConfig
from planner_pkg.policy.dynamics import EpisodeDynamics, PointMassBatch
from planner_pkg.policy.evaluate import EvalResult, cruise_speed, plot_results
from planner_pkg.policy.export import PolicyModelError, export_policy, load_policy, load_weights_from_model
from planner_pkg.policy.network import PolicyNet
from planner_pkg.policy.observation import state_vector, target_velocity
from planner_pkg.policy.planner import PolicyPlanner, PolicyPlannerConfig
from planner_pkg.types import VehicleState

GAIN, DRAG = 2.0, 0.375
SMALL = {"channels": [4, 8, 8], "hidden": 16, "velocity_prior_gain_per_s": GAIN}


def _zero_head(net):
    """The head's weights zeroed: the acceleration is the velocity prior alone."""
    with ag.no_grad():
        net.fc.weight.mul_(0.0)
    return net


def _cfg(drag=DRAG, **env):
    return PolicyConfig().replace(network={**SMALL, "velocity_prior_drag_per_s": drag}, env=env)


# -- target speed profile ------------------------------------------------------------------------
@pytest.mark.parametrize("d", [0.05, 0.5, 1.0, 2.0, 3.0, 4.5, 6.0, 12.0, 40.0])
def test_target_speed_profile_closed_form(d):
    pos = np.array([[1.0, 2.0, 1.5]])
    direction = np.array([0.6, -0.8, 0.0])
    goal = pos + d * direction
    v = target_velocity(pos, goal, np.array([7.0]), 2.0, 4.0)[0]
    want = min(7.0, 2.0 * d, math.sqrt(2.0 * 4.0 * d))
    np.testing.assert_allclose(v, want * direction, rtol=1e-12, atol=1e-12)
    # without the braking curve: the linear approach alone (the old profile)
    v_lin = target_velocity(pos, goal, np.array([7.0]), 1.0)[0]
    np.testing.assert_allclose(v_lin, min(7.0, d) * direction, rtol=1e-12, atol=1e-12)


def test_target_speed_at_the_goal_is_zero_and_batches_are_independent():
    pos = np.zeros((3, 3))
    goal = np.array([[0.0, 0.0, 0.0], [30.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    v = target_velocity(pos, goal, np.array([5.0, 5.0, 5.0]), 2.0, 4.0)
    np.testing.assert_allclose(v[0], 0.0)
    np.testing.assert_allclose(v[1], [5.0, 0.0, 0.0])
    np.testing.assert_allclose(v[2], [0.0, min(2.0, math.sqrt(8.0)), 0.0])


# -- velocity prior with drag feed-forward ---------------------------------------------------------
def test_zero_head_output_is_the_prior_with_drag_feedforward():
    cfg = _cfg()
    ag.manual_seed(0)
    net = _zero_head(PolicyNet(cfg.network, cfg.observation))
    rows, cols = cfg.observation.image_hw
    image = ag.tensor(np.random.default_rng(0).normal(0, 1, (1, 1, rows, cols)).astype(np.float32))
    v, vt = np.array([[1.0, -0.5, 0.2]]), np.array([[6.0, 1.0, -0.4]])
    state = state_vector(v, vt, np.array([[0.0, 0.0, 1.0]]), 0.0, 0.2)
    out, _ = net(image, ag.tensor(state), net.initial_hidden(1))
    raw = GAIN * (vt[0] - v[0]) + np.array([DRAG, DRAG, 0.0]) * vt[0]  # no vertical feed-forward
    m = np.array([8.0, 8.0, 5.0])
    np.testing.assert_allclose(out.detach().numpy()[0, :3], m * np.tanh(raw / m), rtol=1e-5)


def _steady_speed(drag_ff, speed=7.0, drag=DRAG, steps=150):
    """Fly the training point mass (fixed drag, no wind/noise/delay) with the zero-head prior."""
    cfg = _cfg(drag_ff)
    ag.manual_seed(0)
    net = _zero_head(PolicyNet(cfg.network, cfg.observation))
    dyn = DynamicsConfig(dt_jitter=0.0, wind_std_mps=0.0, ou_sigma_mps2=0.0)
    ep = EpisodeDynamics(np.full((1, 1), 12.0), np.array([[drag, drag, 0.1]]), np.zeros((1, 3)), np.zeros(1, int))
    sim = PointMassBatch(dyn, ep, np.zeros((1, 3)), np.random.default_rng(0))
    rows, cols = cfg.observation.image_hw
    image = ag.zeros(1, 1, rows, cols)
    hidden = net.initial_hidden(1)
    with ag.no_grad():
        for _ in range(steps):
            v = sim.velocity.numpy()
            s = state_vector(v, np.array([[speed, 0.0, 0.0]]), np.array([[0.0, 0.0, 1.0]]), 0.0, 0.2)
            out, hidden = net(image, ag.tensor(s), hidden)
            sim.step(out[:, 0:3].double())
    return float(sim.velocity.numpy()[0, 0])


def _analytic_steady_speed(speed, drag_ff, drag, m=8.0):
    """Root of m tanh((GAIN (V - v) + drag_ff V) / m) = drag v (the squashed prior against drag), by bisection."""
    lo, hi = 0.0, 2.0 * speed
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if m * math.tanh((GAIN * (speed - mid) + drag_ff * speed) / m) > drag * mid:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def test_prior_without_feedforward_settles_at_the_analytic_fraction():
    # steady state of v' = gain (V - v) - D v (squashed): about V gain / (gain + D) = 0.84 V
    want = _analytic_steady_speed(7.0, 0.0, DRAG)
    assert want == pytest.approx(7.0 * GAIN / (GAIN + DRAG), rel=0.01)
    assert _steady_speed(0.0) == pytest.approx(want, rel=1e-3)


def test_prior_with_drag_feedforward_holds_the_target_speed():
    want = _analytic_steady_speed(7.0, DRAG, DRAG)
    assert want == pytest.approx(7.0, rel=0.01)  # the squash costs < 1 %
    assert _steady_speed(DRAG) == pytest.approx(want, rel=1e-3)
    # against another drag it settles where the squashed prior balances that drag
    assert _steady_speed(DRAG, drag=0.45) == pytest.approx(_analytic_steady_speed(7.0, DRAG, 0.45), rel=1e-3)


def test_models_without_the_new_fields_keep_the_old_behaviour():
    cfg = PolicyConfig()
    assert cfg.network.velocity_prior_drag_per_s == 0.0 and cfg.env.approach_decel_mps2 == 0.0
    net = PolicyNet(PolicyConfig().replace(network=SMALL).network, cfg.observation)
    assert "drag_feedforward" not in dict(net.named_buffers())


# -- the planner feeds the network the same profile -------------------------------------------
@pytest.mark.parametrize("d", [1.5, 2.5, 4.0, 20.0])
def test_planner_target_follows_the_models_braking_profile(tmp_path, d):
    cfg = _cfg(0.0, approach_gain_per_s=2.0, approach_decel_mps2=4.0)
    ag.manual_seed(0)
    net = _zero_head(PolicyNet(cfg.network, cfg.observation))
    path = export_policy(net, cfg, tmp_path / "p.agm")
    planner = PolicyPlanner(path, PolicyPlannerConfig(speed_mps=5.0, max_accel_mps2=50.0, max_tilt_deg=89.0))
    planner.set_goal([d, 0.0, 1.5])
    at_rest = VehicleState(0.0, [0.0, 0.0, 1.5], np.zeros(3), [0.0, 0.0, 0.0, 1.0], np.zeros(3))
    sp = planner.step(at_rest, np.full((48, 64), np.inf, dtype=np.float32), 0.0)
    # zero head at rest: a_x = 8 tanh(gain * target / 8), so the target speed reads back exactly
    target = 8.0 * math.atanh(sp.acceleration[0] / 8.0) / GAIN
    assert target == pytest.approx(min(5.0, 2.0 * d, math.sqrt(8.0 * d)), rel=1e-4)


# -- warm start --------------------------------------------------------------------------------
def test_load_weights_from_model_reproduces_the_network(tmp_path):
    cfg = _cfg()
    ag.manual_seed(1)
    a = PolicyNet(cfg.network, cfg.observation)
    path = export_policy(a, cfg, tmp_path / "a.agm")
    ag.manual_seed(2)
    b = PolicyNet(cfg.network, cfg.observation)
    assert load_weights_from_model(b, path) == len(dict(b.named_parameters()))
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(pa.detach().numpy(), pb.detach().numpy(), err_msg=name)
    # and the exported runtime model of the copy gives the same actions
    rows, cols = cfg.observation.image_hw
    img = np.random.default_rng(3).normal(0, 1, (1, 1, rows, cols)).astype(np.float32)
    st = np.random.default_rng(4).normal(0, 1, (1, 10)).astype(np.float32)
    h = np.zeros((1, 16), np.float32)
    out_a = load_policy(path).model(img, st, h)[0]
    out_b = load_policy(export_policy(b, cfg, tmp_path / "b.agm")).model(img, st, h)[0]
    np.testing.assert_array_equal(out_a, out_b)


def _randomised(net, seed):
    """Give every parameter (biases included) non-trivial values, so no weight is zero by chance."""
    rng = np.random.default_rng(seed)
    with ag.no_grad():
        for _, p in net.named_parameters():
            p.copy_(ag.tensor(rng.normal(0.0, 0.4, tuple(p.shape)).astype(np.float32)))
    return net


def test_widened_network_starts_with_the_narrow_models_outputs(tmp_path):
    """--init-from --widen: every layer wider (conv channels 4/8/8 -> 6/12/10, hidden 16 -> 24); over a
    recurrent sequence the wide network gives the narrow model's outputs and carries its GRU state in
    its first 16 units, while the weights that let the new units in get gradient."""
    narrow = _cfg()
    wide = narrow.replace(network={"channels": [6, 12, 10], "hidden": 24})
    a = _randomised(PolicyNet(narrow.network, narrow.observation), 1)
    path = export_policy(a, narrow, tmp_path / "narrow.agm")
    b = _randomised(PolicyNet(wide.network, wide.observation), 2)
    assert load_weights_from_model(b, path, widen=True) == len(dict(b.named_parameters()))
    rows, cols = narrow.observation.image_hw
    rng = np.random.default_rng(5)
    ha, hb = a.initial_hidden(2), b.initial_hidden(2)
    loss = 0.0
    for _ in range(6):
        img = ag.tensor(rng.uniform(0.0, 1.0, (2, 1, rows, cols)).astype(np.float32))
        st = ag.tensor(rng.normal(0.0, 1.0, (2, 10)).astype(np.float32))
        with ag.no_grad():
            out_a, ha = a(img, st, ha)
        out_b, hb = b(img, st, hb)
        np.testing.assert_allclose(out_b.detach().numpy(), out_a.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(hb.detach().numpy()[:, :16], ha.numpy(), rtol=1e-5, atol=1e-5)
        loss = loss + (out_b * out_b).sum()
    assert np.abs(hb.detach().numpy()[:, 16:]).max() > 0.05  # the new units do run
    loss.backward()
    # their way into the output (zero at the start) gets gradient, so training can bring them in
    assert np.abs(b.fc.weight.grad.numpy()[:, 16:]).max() > 1e-4
    assert np.abs(b.gru.weight_hh.grad.numpy()[:16, 16:]).max() > 1e-4
    # and the exported wide model runs the same on the no-autograd runtime
    wide_model = load_policy(export_policy(b, wide, tmp_path / "wide.agm")).model
    img = rng.uniform(0.0, 1.0, (1, 1, rows, cols)).astype(np.float32)
    st = rng.normal(0.0, 1.0, (1, 10)).astype(np.float32)
    np.testing.assert_allclose(wide_model(img, st, np.zeros((1, 24), np.float32))[0],
                               load_policy(path).model(img, st, np.zeros((1, 16), np.float32))[0], rtol=1e-5, atol=1e-5)


def test_widening_refuses_a_narrower_network_or_another_image(tmp_path):
    from planner_pkg.policy.trainer import train

    cfg = _cfg()
    path = export_policy(PolicyNet(cfg.network, cfg.observation), cfg, tmp_path / "a.agm")
    narrower = cfg.replace(network={"channels": [4, 8, 8], "hidden": 12})
    with pytest.raises(PolicyModelError, match=r"stem.7.weight. is \(16, 64\) and cannot widen to \(12, 64\)"):
        load_weights_from_model(PolicyNet(narrower.network, narrower.observation), path, widen=True)
    other_image = cfg.replace(network={"hidden": 20}, observation={"image_hw": [14, 18]})
    with pytest.raises(PolicyModelError, match="same observation.image_hw"):
        load_weights_from_model(PolicyNet(other_image.network, other_image.observation), path, widen=True)
    with pytest.raises(ValueError, match="widen needs a model"):
        train(cfg, tmp_path / "out.agm", widen=True, progress=False, log=lambda s: None)


def test_fine_branch_starts_with_the_coarse_models_outputs(tmp_path):
    """--init-from into network.fine_branch: a 12 x 16 model becomes the coarse CNN of a 24 x 32
    network; over a recurrent sequence it gives the model's outputs on the 2 x 2 max-pooled image
    (in training and on the exported runtime), and the fine CNN's zero last layer gets gradient,
    after which the full image changes the outputs."""
    from planner_pkg.policy.observation import max_pool

    coarse = _cfg()
    fine = coarse.replace(network={"fine_branch": True}, observation={"image_hw": [24, 32]})
    a = _randomised(PolicyNet(coarse.network, coarse.observation), 1)
    path = export_policy(a, coarse, tmp_path / "coarse.agm")
    b = _randomised(PolicyNet(fine.network, fine.observation), 2)
    n_fine = len([k for k, _ in b.named_parameters() if k.startswith("fine_stem.")])
    assert n_fine == 4  # three convolutions and the linear layer
    assert load_weights_from_model(b, path) == len(dict(b.named_parameters())) - n_fine
    with ag.no_grad():
        b.fine_stem[7].weight.zero_()  # what a fresh network starts with (randomised above)
    assert not np.any(PolicyNet(fine.network, fine.observation).fine_stem[7].weight.detach().numpy())
    rng = np.random.default_rng(5)
    ha, hb = a.initial_hidden(2), b.initial_hidden(2)
    loss = 0.0
    for _ in range(5):
        img = rng.uniform(-0.5, 2.0, (2, 1, 24, 32)).astype(np.float32)
        st = ag.tensor(rng.normal(0.0, 1.0, (2, 10)).astype(np.float32))
        with ag.no_grad():
            out_a, ha = a(ag.tensor(max_pool(img, (12, 16))), st, ha)
        out_b, hb = b(ag.tensor(img), st, hb)
        np.testing.assert_allclose(out_b.detach().numpy(), out_a.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(hb.detach().numpy(), ha.numpy(), rtol=1e-5, atol=1e-5)
        loss = loss + (out_b * out_b).sum()
    loss.backward()
    assert np.abs(b.fine_stem[7].weight.grad.numpy()).max() > 1e-4
    img = rng.uniform(-0.5, 2.0, (1, 1, 24, 32)).astype(np.float32)
    st = rng.normal(0.0, 1.0, (1, 10)).astype(np.float32)
    h0 = np.zeros((1, 16), np.float32)
    model_a = load_policy(path).model
    np.testing.assert_allclose(load_policy(export_policy(b, fine, tmp_path / "fine.agm")).model(img, st, h0)[0],
                               model_a(max_pool(img, (12, 16)), st, h0)[0], rtol=1e-5, atol=1e-5)
    with ag.no_grad():  # once the fine CNN's last layer moves, the full image matters
        b.fine_stem[7].weight.copy_(ag.tensor(rng.normal(0.0, 0.4, tuple(b.fine_stem[7].weight.shape))
                                              .astype(np.float32)))
    moved = load_policy(export_policy(b, fine, tmp_path / "moved.agm")).model(img, st, h0)[0]
    assert np.abs(moved - model_a(max_pool(img, (12, 16)), st, h0)[0]).max() > 1e-3


def test_fine_branch_planner_flies_the_shipped_model_unchanged(tmp_path):
    """The shipped 12 x 16 model warm-started into a 24 x 32 fine-branch network (as
    config/policy/fast_fine.yaml starts) gives the same setpoints through PolicyPlanner: the
    simulator's 48 x 64 camera pooled by 2 and then by 2 again is the shipped model's pooling by 4."""
    from planner_pkg.policy.export import default_model_path

    shipped_path = default_model_path()
    if shipped_path is None:
        pytest.skip("no shipped model in this installation")
    shipped = load_policy(shipped_path)
    cfg = shipped.config.replace(network={"fine_branch": True}, observation={"image_hw": [24, 32]})
    net = PolicyNet(cfg.network, cfg.observation)
    load_weights_from_model(net, shipped_path)
    fine_path = export_policy(net, cfg, tmp_path / "fine.agm")
    rng = np.random.default_rng(7)
    planners = [PolicyPlanner(p, PolicyPlannerConfig(speed_mps=5.0, speed_calibration=False))
                for p in (shipped_path, fine_path)]
    for p in planners:
        p.set_goal([30.0, 2.0, 1.5])
    for k in range(4):
        depth = rng.uniform(0.5, 12.0, (48, 64)).astype(np.float32)
        depth[rng.uniform(size=depth.shape) < 0.1] = np.inf
        state = VehicleState(0.1 * k, [0.3 * k, 0.0, 1.5], [2.0, 0.1 * k, 0.0], [0.0, 0.0, 0.0, 1.0], np.zeros(3))
        a, b = (p.step(state, depth, 0.1 * k).acceleration for p in planners)
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
        assert np.linalg.norm(a) > 0.1


def test_fine_branch_needs_an_even_image():
    from planner_pkg.config_schema import ConfigError

    for hw in ([24, 33], [25, 32], [18, 32]):
        with pytest.raises(ConfigError, match=r"network.fine_branch.*even and at least 20 x 20"):
            PolicyConfig().replace(network={"fine_branch": True}, observation={"image_hw": hw})


def test_load_weights_refuses_another_network_shape(tmp_path):
    cfg = _cfg()
    path = export_policy(PolicyNet(cfg.network, cfg.observation), cfg, tmp_path / "a.agm")
    other = PolicyConfig().replace(network={**SMALL, "hidden": 24})
    with pytest.raises(PolicyModelError, match=r"stem.7.weight. is \(16, 64\).*needs \(24, 64\)"):
        load_weights_from_model(PolicyNet(other.network, other.observation), path)
    junk = tmp_path / "junk.agm"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(PolicyModelError, match="not a policy model"):
        load_weights_from_model(PolicyNet(cfg.network, cfg.observation), junk)


# -- cruise speed and the plot -----------------------------------------------------------------
def test_cruise_speed_is_the_mid_path_median():
    # accelerate 0 -> 6 m/s over 3 s, cruise 6 m/s for 5 s, brake to 0 over 3 s; 0.01 s samples
    t = np.arange(0.0, 11.0 + 1e-9, 0.01)
    v = np.interp(t, [0.0, 3.0, 8.0, 11.0], [0.0, 6.0, 6.0, 0.0])
    x = np.concatenate([[0.0], np.cumsum(0.5 * (v[1:] + v[:-1]) * np.diff(t))])
    log = np.column_stack([t, x, np.zeros_like(t), np.ones_like(t), v, np.zeros_like(t), np.zeros_like(t)])
    # path 9 + 30 + 9 = 48 m; 20..80 % is 9.6..38.4 m: all inside the 6 m/s cruise
    assert cruise_speed(log) == pytest.approx(6.0, abs=1e-9)
    assert x[-1] / t[-1] < 4.5  # the mean (path / time) is far below it
    assert cruise_speed(log[:1]) is None and cruise_speed(np.zeros((5, 7))) is None


def test_plot_results_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    results = []
    for speed, ok in ((3.0, True), (5.0, False)):
        e = {"reached": ok, "collided": not ok, "reason": "goal_reached" if ok else "collision",
             "mean_speed_mps": 0.8 * speed, "cruise_speed_mps": 0.9 * speed, "min_clearance_m": 0.3}
        results.append(EvalResult(speed_mps=speed, vehicle="point_mass", episodes=[e]))
    assert results[0].cruise_speed_mps == pytest.approx(2.7) and math.isnan(results[1].cruise_speed_mps)
    out = tmp_path / "plot" / "speed.png"
    plot_results(results, out)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert not list(out.parent.glob("*.tmp.png"))


# -- mixed training worlds -----------------------------------------------------------------------
def test_mixed_world_kinds_alternate_over_the_batch():
    from planner_pkg.policy.config import ConfigError
    from planner_pkg.policy.env import sample_episode
    from planner_pkg.world import Cylinder

    cfg = PolicyConfig().replace(env={"world_kind": "forest+cluttered", "world_params": {"count": 30},
                                      "worlds_per_batch": 4})
    assert cfg.env.world_kinds == ("forest", "cluttered")
    ep = sample_episode(cfg, 8, np.random.default_rng(0))
    kinds = []
    for world in ep.worlds:
        obstacles = list(world.obstacles)
        assert len(obstacles) == 30
        kinds.append("forest" if all(isinstance(o, Cylinder) and o.height >= 4.0 for o in obstacles) else "cluttered")
    assert kinds == ["forest", "cluttered", "forest", "cluttered"]
    # the same draw from a single-kind config gives the forest worlds in the even slots
    single = sample_episode(cfg.replace(env={"world_kind": "forest"}), 8, np.random.default_rng(0))
    assert [list(w.obstacles) for w in single.worlds[::2]] == [list(w.obstacles) for w in ep.worlds[::2]]
    with pytest.raises(ConfigError, match="env.world_kind"):
        PolicyConfig().replace(env={"world_kind": "forest+moon"})


def test_init_from_and_resume_exclude_each_other(tmp_path):
    from planner_pkg.policy.trainer import train

    cfg = _cfg()
    path = export_policy(PolicyNet(cfg.network, cfg.observation), cfg, tmp_path / "a.agm")
    with pytest.raises(ValueError, match="not both"):
        train(cfg, tmp_path / "out.agm", resume=tmp_path / "x.ckpt", init_from=path, progress=False, log=lambda s: None)
    assert not (tmp_path / "out.ckpt").exists()


# -- the brake-geometry diagnostic (benchmarks/policy_diagnostics.py, section (i)) --------------
def test_brake_events_and_geometry_on_a_synthetic_flight():
    """A 40 m flight along x at 7 m/s that brakes to 1 m/s between x = 18 and 22 m: one brake, its
    onset the last speed peak before it, its lowest speed and its time below 3.5 m/s; slow stretches
    within 5 m of either end are take-off and approach, not brakes. Geometry: a trunk of radius
    0.3 m at (25, 0.2) with a 0.19 m vehicle blocks the tube about 9.55 m ahead of x = 15, and the
    smallest sideways shift that clears it with 0.1 m to spare goes away from the trunk's side."""
    from benchmark_scripts import load_benchmark
    from planner_pkg.world.primitives import Cylinder
    from planner_pkg.world.world import World

    diag = load_benchmark("policy_diagnostics", "policy_diagnostics_under_test")
    x = np.arange(0.0, 40.0 + 1e-9, 0.01)
    v = np.interp(x, [0.0, 4.0, 15.0, 18.0, 22.0, 25.0, 36.0, 40.0], [0.5, 7.0, 7.0, 1.0, 1.0, 7.0, 7.0, 0.5])
    t = np.concatenate([[0.0], np.cumsum(np.diff(x) * 2.0 / (v[1:] + v[:-1]))])
    zeros = np.zeros_like(x)
    log = np.column_stack([t, x, zeros, zeros + 1.0, v, zeros, zeros])
    events = diag._brake_events(log, 7.0)
    assert len(events) == 1
    onset, low, below = events[0]
    assert x[onset] == pytest.approx(15.0, abs=0.011)  # the end of the cruise: the last speed peak
    assert low == pytest.approx(1.0, abs=1e-9)
    slow = (v < 3.5) & (x > 5.0) & (x < 35.0)
    assert below == pytest.approx(t[slow][-1] - t[slow][0], abs=1e-9)
    assert diag._brake_events(log[x < 14.0], 7.0) == []  # slow only at the ends

    world = World((-5.0, -10.0, 0.0), (50.0, 10.0, 5.0), [Cylinder((25.0, 0.2), 0.3, 4.0)], ground=False)
    ahead, shift = diag._brake_geometry(world, np.array([15.0, 0.0, 1.0]), np.array([7.0, 0.0, 0.0]), 0.19)
    # the tube's centre line meets the radius-0.19 band of the trunk at x = 25 - sqrt(0.49^2 - 0.2^2),
    # 10 m less that from x = 15 (sampled every 0.05 m)
    assert ahead == pytest.approx(10.0 - np.sqrt(0.49 ** 2 - 0.2 ** 2), abs=0.06)
    # to the right (-y), past the trunk: the line must pass 0.3 + 0.19 + 0.1 from its axis at y = 0.2,
    # shift 0.39 -> 0.40 on the 0.05 m grid (to the left it would take 0.79)
    assert shift == pytest.approx(0.40, abs=1e-6)
    assert diag._brake_geometry(world, np.array([15.0, 3.0, 1.0]), np.array([7.0, 0.0, 0.0]), 0.19) == (np.inf, np.inf)
