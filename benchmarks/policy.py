"""Learned-policy performance: rollout+backward speed, training throughput, inference, success table.

    python benchmarks/policy.py [--repeat N] [--quick] [--model FILE] [--episodes N] [--skip-eval]
    python benchmarks/policy.py --speed-diagnostics [--model FILE] [--config FILE]   # (e) only
    python benchmarks/policy.py --braking-diagnostics [--model FILE] [--episodes N]  # (f) only

(a) Batched point-mass rollout + backward (ANCHORS.md: torch eager ~26 ms, hand NumPy adjoint
    1-5 ms): B = 64 agents, T = 150 steps of the training dynamics (thrust lag, drag, wind,
    gravity, gradient decay), a command per step as the leaf, loss = mean squared velocity error
    + final position error. Columns: torch eager (the step written in tensor ops), autograd_core
    with the same tensor ops, autograd_core with the fused ``PointMassStep`` node (what training
    uses), and a hand-written NumPy adjoint. Target: fused <= 0.5x torch eager.
(b) Training throughput, agent-steps per second: the full training iteration (rendering, network,
    dynamics, losses, backward, AdamW) of config/policy/default.yaml, and its differentiable core
    (network + dynamics + losses + backward on pre-rendered images) in autograd_core vs the same
    core in torch eager, in this process.
(c) Batch-1 inference of the exported network through ``autograd_core.runtime`` (target
    <= 1 ms, inside the 66 ms budget of 15 Hz), and a whole ``PolicyPlanner.step`` (observation
    transform of a 64 x 48 depth image + network + clamps).
(d) Success-rate / speed table of the shipped (or ``--model``) policy in the full-quadrotor
    simulator at 3, 5, 7 and 10 m/s over ``--episodes`` unseen worlds (first world 500, as issue
    16 measures), forest and cluttered (slow: ~1 s per episode), against issue 16's targets:
    >= 97 % at 3 m/s; >= 90 % at 5 m/s with mean >= 4.5 m/s; >= 80 % at 7 m/s with mean
    >= 6.0 m/s; >= 60 % at 10 m/s (mean = path / time, take-off and approach included; cruise =
    median speed over the middle 60 % of the path). Reported as met / missed, never asserted.
(e) Speed diagnostics (issue 16; no flights, seconds): the velocity prior alone (zero head) in the
    training dynamics against its analytic steady state, for the model's prior; the model's
    open-space equilibrium (where its x-acceleration, on the empty-world image, equals the drag
    0.35 v) per commanded speed; the training config's target-speed distribution (an ideal
    tracker of the target over its episodes: share of steps in the approach, by speed); and the
    ceiling of ``policy eval``'s mean speed on the 40 m forest course for the model's approach
    profile (ideal tracker, 8 m/s^2).

(f) Braking diagnostics (issue 16; flights, ~1 s per episode): the policy in the full-quadrotor
    forest eval (first world 500) at 5, 7 and 10 m/s, instrumented at every policy step where the
    target speed is the command (not in the approach): flown speed / command; the along-track
    acceleration, the velocity prior's alone and the network's correction to it (pre-squash); the
    share of braking steps (along-track < -1 m/s^2); by the free distance ahead along the velocity
    (a tube of the vehicle radius + 0.1 m, to 12 m) against the stopping distance 0.2 v + v^2 / 16;
    the share of steps whose clearance (distance - radius - 0.2 m margin) is inside the model's
    avoidance range; the planner's clamp activity; the velocity-estimate head against the truth.

Times are medians over interleaved repeats; the machine's 2 cores are shared, so read ratios,
not absolute numbers. Never asserts on time.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import autograd_core as ag  # noqa: E402

from planner_pkg.policy.dynamics import point_mass_step, step_coefficients  # noqa: E402

try:
    import torch
except ImportError:  # our columns still print
    torch = None

B, T, G = 64, 150, 9.81
DECAY = 0.4


def _median_ms(fn, repeat, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


# ---------------------------------------------------------------------------------------------
# (a) rollout + backward
# ---------------------------------------------------------------------------------------------
def _rollout_data(seed=0):
    rng = np.random.default_rng(seed)
    dt = 1 / 15 * (1 + rng.uniform(-0.1, 0.1, (T, B, 1)))
    coeffs = [step_coefficients(dt[t], rng.uniform(10, 14, (B, 1)), np.full((B, 3), 0.35),
                                rng.normal(0, 0.3, (B, 3)), rng.normal(0, 0.2, (B, 3)), G, DECAY) for t in range(T)]
    u = rng.normal(0, 1.0, (T, B, 3))
    target = np.tile([3.0, 0.0, 0.0], (B, 1))
    return coeffs, u, target


def _tensor_ops_rollout(lib, coeffs, u0, target, dtype):
    """The step as elementary tensor ops (the code a user would write in torch), + backward.
    The gradient decay is the paper's ``x = d * x + (1 - d) * x.detach()`` per state."""
    def const(a):
        return lib.tensor(np.ascontiguousarray(a), dtype=dtype)

    cs = [tuple(const(getattr(c, n)) for n in ("alpha", "gamma", "beta", "eta", "half_dt", "forcing", "decay"))
          for c in coeffs]
    g3 = const(np.array([0.0, 0.0, G]))
    tgt = const(target)

    def run():
        u = lib.tensor(u0, dtype=dtype, requires_grad=True)
        p = lib.zeros(B, 3, dtype=dtype)
        v = lib.zeros(B, 3, dtype=dtype)
        f = lib.zeros(B, 3, dtype=dtype) + g3
        loss = 0.0
        for t in range(T):
            alpha, gamma, beta, eta, hdt, forcing, decay = cs[t]
            p = decay * p + (1 - decay) * p.detach()
            v = decay * v + (1 - decay) * v.detach()
            f = decay * f + (1 - decay) * f.detach()
            uf = u[t] + g3
            df = f - uf
            f_new = uf + df * alpha
            fbar = uf + df * gamma + forcing
            v_new = beta * v + eta * fbar
            p = p + hdt * (v + v_new)
            v, f = v_new, f_new
            e = v - tgt
            loss = loss + (e * e).mean()
        loss = loss / T + ((p - tgt * 10.0) ** 2).mean()
        loss.backward()
        return u.grad
    return run


def _fused_rollout(coeffs, u0, target):
    tgt = ag.tensor(target)

    def run():
        u = ag.tensor(u0, requires_grad=True)
        p = ag.zeros(B, 3, dtype=ag.float64)
        v = ag.zeros(B, 3, dtype=ag.float64)
        f = ag.tensor(np.tile([0.0, 0.0, G], (B, 1)))
        vs = []
        for t in range(T):
            p, v, f = point_mass_step(p, v, f, u[t], coeffs[t])
            vs.append(v)
        e = ag.stack(vs) - tgt
        loss = (e * e).mean(dim=(1, 2)).sum() / T + ((p - tgt * 10.0) ** 2).mean()
        loss.backward()
        return u.grad
    return run


def _numpy_adjoint(coeffs, u0, target):
    """Forward storing nothing but the states, then the reverse sweep by hand."""
    def run():
        p = np.zeros((B, 3))
        v = np.zeros((B, 3))
        f = np.tile([0.0, 0.0, G], (B, 1))
        vs = np.empty((T, B, 3))
        for t in range(T):
            c = coeffs[t]
            uf = u0[t].copy()
            uf[:, 2] += G
            df = f - uf
            f_new = uf + df * c.alpha
            fbar = uf + df * c.gamma + c.forcing
            v_new = c.beta * v + c.eta * fbar
            p = p + c.half_dt * (v + v_new)
            v, f = v_new, f_new
            vs[t] = v
        gp = 2.0 * (p - target * 10.0) / (B * 3)
        gv = np.zeros((B, 3))
        gf = np.zeros((B, 3))
        gu = np.empty((T, B, 3))
        scale = 2.0 / (B * 3 * T)
        for t in range(T - 1, -1, -1):
            c = coeffs[t]
            gv = gv + scale * (vs[t] - target)
            gvt = gv + c.half_dt * gp
            gfbar = c.eta * gvt
            gu[t] = (1 - c.alpha) * gf + (1 - c.gamma) * gfbar
            gv_prev = (c.half_dt * gp + c.beta * gvt) * c.decay
            gf = (c.alpha * gf + c.gamma * gfbar) * c.decay
            gp = gp * c.decay
            gv = gv_prev
        return gu
    return run


def bench_rollout(repeat):
    coeffs, u0, target = _rollout_data()
    cells = {"autograd_core fused": _fused_rollout(coeffs, u0, target),
             "autograd_core ops": _tensor_ops_rollout(ag, coeffs, u0, target, ag.float64),
             "hand NumPy adjoint": _numpy_adjoint(coeffs, u0, target)}
    if torch is not None:
        torch.set_num_threads(1)
        cells["torch eager ops"] = _tensor_ops_rollout(torch, coeffs, u0, target, torch.float64)
    grads = {}
    for name, fn in cells.items():
        g = fn()
        grads[name] = g.numpy() if hasattr(g, "numpy") and not isinstance(g, np.ndarray) else g
        if hasattr(grads[name], "detach"):
            grads[name] = grads[name].detach().numpy()
    ref = grads["hand NumPy adjoint"]
    times = {name: _median_ms(fn, repeat) for name, fn in cells.items()}
    base = times.get("torch eager ops")
    print(f"\n(a) point-mass rollout + backward, B={B}, T={T} (anchor: torch eager ~26 ms, NumPy 1-5 ms)")
    print(f"{'implementation':<22} {'ms':>8} {'x torch':>8} {'max |grad - adjoint|':>22}")
    for name in cells:
        ratio = f"{times[name] / base:8.2f}" if base else "       -"
        err = float(np.max(np.abs(np.asarray(grads[name]) - ref)))
        print(f"{name:<22} {times[name]:8.2f} {ratio} {err:22.2e}")
    return times


# ---------------------------------------------------------------------------------------------
# (b) training throughput
# ---------------------------------------------------------------------------------------------
def bench_training(repeat, cfg_path):
    from autograd_core.optim import AdamW

    from planner_pkg.policy.config import load_config
    from planner_pkg.policy.env import sample_episode
    from planner_pkg.policy.network import PolicyNet
    from planner_pkg.policy.rollout import run_rollout

    cfg = load_config(cfg_path)
    tc = cfg.train
    ag.set_num_threads(1)
    ag.manual_seed(0)
    net = PolicyNet(cfg.network, cfg.observation)
    opt = AdamW(net.parameters(), lr=1e-4)
    state = {"it": 0}

    def iteration():
        rng = np.random.default_rng(state["it"])
        state["it"] += 1
        ep = sample_episode(cfg, tc.batch_size, rng)
        r = run_rollout(net, ep, cfg, rng, tc.steps)
        opt.zero_grad()
        r.total.backward()
        opt.step()

    ms = _median_ms(iteration, max(2, repeat // 3), warmup=1)
    agent_steps = tc.batch_size * tc.steps
    print(f"\n(b) training throughput, {cfg_path} (batch {tc.batch_size}, {tc.steps} steps, network "
          f"{list(cfg.network.channels)}/{cfg.network.hidden})")
    print(f"full iteration (render + network + dynamics + losses + backward + AdamW): {ms / 1e3:.2f} s "
          f"= {agent_steps / (ms / 1e3):,.0f} agent-steps/s")
    _bench_core(cfg, repeat)


def _core_fn(lib, cfg, images, states, fused):
    """Network + dynamics + velocity/effort losses + backward on fixed inputs, in ``lib``."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from nn import _policy_class  # the benchmark network, written once for both libraries

    lib.manual_seed(0)
    net = _policy_class(lib)(state_dim=10, hidden=cfg.network.hidden, actions=6)
    if cfg.network.channels != (32, 64, 128):  # the benchmark class is the paper's; rebuild smaller
        nn = lib.nn
        c1, c2, c3 = cfg.network.channels
        net.stem = nn.Sequential(nn.Conv2d(1, c1, 2, 2, bias=False), nn.LeakyReLU(0.05),
                                 nn.Conv2d(c1, c2, 3, bias=False), nn.LeakyReLU(0.05),
                                 nn.Conv2d(c2, c3, 3, bias=False), nn.LeakyReLU(0.05), nn.Flatten(),
                                 nn.Linear(c3 * 8, cfg.network.hidden, bias=False))
    coeffs, _, target = _rollout_data()
    b = images.shape[1]
    dtype = lib.float64
    cs = [tuple(lib.tensor(np.ascontiguousarray(getattr(c, n)[:b]), dtype=dtype)
                for n in ("alpha", "gamma", "beta", "eta", "half_dt", "forcing", "decay")) for c in coeffs]
    g3 = lib.tensor(np.array([0.0, 0.0, G]), dtype=dtype)
    tgt = lib.tensor(target[:b], dtype=dtype)
    imgs = [lib.tensor(images[t]) for t in range(images.shape[0])]
    sts = [lib.tensor(states[t]) for t in range(states.shape[0])]

    def run():
        for prm in net.parameters():
            prm.grad = None
        h = lib.zeros(b, cfg.network.hidden)
        p = lib.zeros(b, 3, dtype=dtype)
        v = lib.zeros(b, 3, dtype=dtype)
        f = lib.zeros(b, 3, dtype=dtype) + g3
        loss = 0.0
        for t in range(len(imgs)):
            out, h = net(imgs[t], sts[t], h)
            u = out[:, 0:3].double()
            if fused:
                p, v, f = point_mass_step(p, v, f, u, coeffs[t] if b == B else _slice(coeffs[t], b))
            else:
                alpha, gamma, beta, eta, hdt, forcing, decay = cs[t]
                p = decay * p + (1 - decay) * p.detach()
                v = decay * v + (1 - decay) * v.detach()
                f = decay * f + (1 - decay) * f.detach()
                uf = u + g3
                df = f - uf
                f_new = uf + df * alpha
                fbar = uf + df * gamma + forcing
                v_new = beta * v + eta * fbar
                p = p + hdt * (v + v_new)
                v, f = v_new, f_new
            e = v - tgt
            loss = loss + (e * e).mean() + 0.01 * (u * u).mean()
        loss.backward()
    return run


def _slice(c, b):
    from planner_pkg.policy.dynamics import StepCoefficients

    return StepCoefficients(*(getattr(c, n)[:b] for n in ("alpha", "gamma", "beta", "eta", "half_dt", "forcing",
                                                          "decay")), c.gravity)


def _bench_core(cfg, repeat):
    rng = np.random.default_rng(0)
    b, steps = cfg.train.batch_size, cfg.train.steps
    rows, cols = cfg.observation.image_hw
    images = rng.uniform(-0.5, 3.0, (steps, b, 1, rows, cols)).astype(np.float32)
    states = rng.normal(0, 1, (steps, b, 10)).astype(np.float32)
    cells = {"autograd_core (fused step)": _core_fn(ag, cfg, images, states, True)}
    if torch is not None:
        torch.set_num_threads(1)
        cells["torch eager"] = _core_fn(torch, cfg, images, states, False)
    times = {n: _median_ms(fn, max(2, repeat // 3), warmup=1) for n, fn in cells.items()}
    base = times.get("torch eager")
    print(f"differentiable core (network + dynamics + losses + backward, {b} x {steps}, pre-rendered images):")
    for name, ms in times.items():
        ratio = f"{ms / base:.2f}x torch" if base else ""
        print(f"  {name:<28} {ms:8.1f} ms  {b * steps / (ms / 1e3):>10,.0f} agent-steps/s  {ratio}")


# ---------------------------------------------------------------------------------------------
# (c) inference
# ---------------------------------------------------------------------------------------------
def bench_inference(repeat, model_path):
    from planner_pkg.policy.config import PolicyConfig, load_config
    from planner_pkg.policy.export import export_policy, load_policy
    from planner_pkg.policy.network import PolicyNet
    from planner_pkg.policy.planner import PolicyPlanner
    from planner_pkg.types import VehicleState

    import tempfile

    ag.set_num_threads(1)
    print("\n(c) batch-1 inference through autograd_core.runtime (target <= 1 ms)")
    candidates = [("config/policy/default.yaml", load_config(os.path.join(os.path.dirname(__file__), "..", "config",
                                                                            "policy", "default.yaml"))),
                  ("paper network (514 k)", PolicyConfig())]
    with tempfile.TemporaryDirectory() as tmp:
        for label, cfg in candidates:
            ag.manual_seed(0)
            path = export_policy(PolicyNet(cfg.network, cfg.observation), cfg, os.path.join(tmp, "m.agm"))
            pol = load_policy(path)
            x = (np.zeros((1, 1) + cfg.observation.image_hw, np.float32), np.zeros((1, 10), np.float32),
                 np.zeros((1, cfg.network.hidden), np.float32))
            n = 200
            us = _median_ms(lambda: [pol.model(*x) for _ in range(n)], max(3, repeat)) * 1e3 / n
            planner = PolicyPlanner(pol)
            planner.reset(np.zeros(3), np.array([30.0, 0.0, 1.5]))
            depth = np.random.default_rng(0).uniform(0.5, 12.0, (48, 64)).astype(np.float32)
            st = VehicleState.at_rest([0.0, 0.0, 1.5])
            step_us = _median_ms(lambda: [planner.step(st, depth, 0.0) for _ in range(n)], max(3, repeat)) * 1e3 / n
            print(f"  {label:<28} network {us:7.1f} us   PolicyPlanner.step (64x48 depth) {step_us:7.1f} us")


# ---------------------------------------------------------------------------------------------
# (d) success table
# ---------------------------------------------------------------------------------------------
#: Issue 16's targets: commanded speed -> (minimum success rate, minimum mean speed m/s or None).
TARGETS = {3.0: (0.97, None), 5.0: (0.90, 4.5), 7.0: (0.80, 6.0), 10.0: (0.60, None)}


def bench_success(model_path, episodes, world_kinds=("forest", "cluttered"), first_world=500):
    from planner_pkg.policy.export import default_model_path
    from planner_pkg.policy.evaluate import evaluate_policy, format_results
    from planner_pkg.policy.export import load_policy

    path = model_path or default_model_path()
    print(f"\n(d) success and speed, full quadrotor, {episodes} unseen worlds per speed (from world {first_world}): "
          f"{path}")
    if path is None:
        print("  no model: pass --model FILE (no shipped model in this installation)")
        return
    pol = load_policy(path)
    for kind in world_kinds:
        results = [evaluate_policy(pol, episodes=episodes, speed_mps=s, world_kind=kind, first_world=first_world)
                   for s in TARGETS]
        print(f"  {kind} worlds:")
        print("\n".join("  " + line for line in format_results(results).splitlines()))
        for r in results:
            need_rate, need_mean = TARGETS[r.speed_mps]
            ok = r.success_rate >= need_rate and (need_mean is None or r.mean_speed_mps >= need_mean)
            want = f">= {100 * need_rate:.0f} %" + (f", mean >= {need_mean:g} m/s" if need_mean else "")
            print(f"  target at {r.speed_mps:g} m/s ({want}): {'met' if ok else 'MISSED'} "
                  f"({100 * r.success_rate:.0f} %, mean {r.mean_speed_mps:.2f} m/s)")


# ---------------------------------------------------------------------------------------------
# (e) speed diagnostics
# ---------------------------------------------------------------------------------------------
SPEEDS = (3.0, 5.0, 7.0, 10.0)


def _prior_steady_speed(net_cfg, speed, drag, steps=150, batch=1):
    """Speed reached by the prior alone (zero head, the network's squash) in the training point
    mass with drag ``drag`` (no wind, noise, jitter or delay)."""
    from planner_pkg.policy.config import DynamicsConfig
    from planner_pkg.policy.dynamics import EpisodeDynamics, PointMassBatch

    dyn = DynamicsConfig(dt_jitter=0.0, wind_std_mps=0.0, ou_sigma_mps2=0.0)
    ep = EpisodeDynamics(np.full((batch, 1), 12.0), np.tile([drag, drag, 0.1], (batch, 1)), np.zeros((batch, 3)),
                         np.zeros(batch, int))
    sim = PointMassBatch(dyn, ep, np.zeros((batch, 3)), np.random.default_rng(0))
    m = np.array([net_cfg.max_accel_xy_mps2, net_cfg.max_accel_xy_mps2, net_cfg.max_accel_z_mps2])
    ff = np.array([net_cfg.velocity_prior_drag_per_s, net_cfg.velocity_prior_drag_per_s, 0.0])
    target = np.array([speed, 0.0, 0.0])
    with ag.no_grad():
        for _ in range(steps):
            v = sim.velocity.numpy()
            raw = net_cfg.velocity_prior_gain_per_s * (target - v) + ff * target
            sim.step(ag.tensor(m * np.tanh(raw / m)))
    return float(sim.velocity.numpy()[0, 0])


def _equilibrium(pol, speed, drag=0.35):
    """Open-space cruise of a model: the v where its x-acceleration on the empty-world image
    (level, 1 m up, GRU warmed 30 steps per v) equals ``drag * v``; nan if none below 1.3 V."""
    from planner_pkg.policy.observation import depth_observation, state_vector
    from planner_pkg.sim.camera import DepthCamera
    from planner_pkg.types import VehicleState
    from planner_pkg.world import generate_world

    cfg = pol.config
    depth = DepthCamera().render_depth(generate_world("forest", 1, count=0), VehicleState.at_rest([0.0, 0.0, 1.0]))[0]
    img = depth_observation(depth, cfg.observation)[None, None]
    margin = 0.5 * sum(cfg.loss.margin_m)

    def excess(v):
        h = np.zeros((1, cfg.network.hidden), np.float32)
        s = state_vector(np.array([[v, 0, 0]]), np.array([[speed, 0, 0]]), np.array([[0, 0, 1.0]]), 0.0, margin)
        for _ in range(30):
            out, h = pol.model(img, s, h)
        return float(out[0, 0]) - drag * v

    vs = np.linspace(0.0, 1.3 * speed, 53)
    f = np.array([excess(v) for v in vs])
    k = np.nonzero(np.diff(np.sign(f)))[0]
    if not k.size:
        return math.nan
    i = k[0]
    return float(vs[i] - f[i] * (vs[i + 1] - vs[i]) / (f[i + 1] - f[i]))


def _ideal_mean_speed(speed, gain, decel, length=40.0, accel=8.0, tol=0.5, dt=2e-3):
    """Path / time of an ideal vehicle that tracks the target profile from rest with |a| <= accel."""
    from planner_pkg.policy.observation import target_velocity

    x = v = t = 0.0
    goal = np.array([[length, 0.0, 0.0]])
    while length - x > tol:
        vt = float(target_velocity(np.array([[x, 0.0, 0.0]]), goal, np.array([speed]), gain, decel)[0, 0])
        v = min(vt, v + accel * dt) if vt > v else max(vt, v - accel * dt)
        x += v * dt
        t += dt
    return length / t


def _target_distribution(cfg, episodes=4, batch=32):
    from planner_pkg.policy.env import sample_episode
    from planner_pkg.policy.observation import target_velocity

    rng = np.random.default_rng(1)
    speeds, approach = [], []
    for _ in range(episodes):
        ep = sample_episode(cfg, batch, rng)
        p = ep.start.copy()
        for _ in range(cfg.train.steps):
            tv = target_velocity(p, ep.goal, ep.speed, cfg.env.approach_gain_per_s, cfg.env.approach_decel_mps2)
            s = np.linalg.norm(tv, axis=1)
            speeds.append(s)
            approach.append(s < ep.speed - 1e-6)
            p = p + tv * cfg.dynamics.dt_s
    return np.concatenate(speeds), np.concatenate(approach)


def bench_speed(model_path, cfg_path):
    from planner_pkg.policy.export import default_model_path
    from planner_pkg.policy.config import load_config
    from planner_pkg.policy.export import load_policy

    path = model_path or default_model_path()
    print(f"\n(e) speed diagnostics: model {path}, training config {cfg_path}")
    if path is not None:
        pol = load_policy(path)
        net = pol.config.network
        env = pol.config.env
        print(f"  model prior: gain {net.velocity_prior_gain_per_s:g} 1/s, drag feed-forward "
              f"{net.velocity_prior_drag_per_s:g} 1/s; approach gain {env.approach_gain_per_s:g} 1/s, braking "
              f"{env.approach_decel_mps2:g} m/s^2")
        print(f"  {'V m/s':>6} {'prior alone':>12} {'model cruise':>13} {'mean-speed ceiling':>19}")
        for v in SPEEDS:
            prior = _prior_steady_speed(net, v, 0.35) if net.velocity_prior_gain_per_s > 0 else math.nan
            eq = _equilibrium(pol, v)
            ceil = _ideal_mean_speed(v, env.approach_gain_per_s, env.approach_decel_mps2)
            print(f"  {v:6.1f} {prior:7.2f} ({prior / v:.2f}V) {eq:7.2f} ({eq / v:.2f}V) "
                  f"{ceil:12.2f} ({ceil / v:.2f}V)")
        print("  (prior alone: zero head, training dynamics, drag 0.35; model cruise: open-space equilibrium;\n"
              "   ceiling: ideal tracker of the approach profile on the 40 m forest course, 8 m/s^2)")
    cfg = load_config(cfg_path)
    speeds, approach = _target_distribution(cfg)
    edges = [0, 1, 3, 5, 7, 10, 1e9]
    hist, _ = np.histogram(speeds, edges)
    share = ", ".join((f"{a:g}-{b:g}" if b < 1e9 else f">{a:g}") + f": {100 * c / speeds.size:.0f}%"
                      for a, b, c in zip(edges, edges[1:], hist))
    print(f"  training targets ({cfg_path}): {100 * approach.mean():.0f} % of agent-steps in the approach; "
          f"by target speed (m/s) {share}")


def _braking_episode(planner, pol, world, start, goal, speed, rows):
    """Fly one instrumented episode (section (f)); appends per-step dicts to ``rows``."""
    from planner_pkg.sim.runner import ClosedLoopRunner, RunnerConfig

    pc = pol.config
    gain, drag = pc.network.velocity_prior_gain_per_s, pc.network.velocity_prior_drag_per_s
    mxy, mz = pc.network.max_accel_xy_mps2, pc.network.max_accel_z_mps2
    radius = pc.env.vehicle_radius_m
    seen = {}
    model, clamp, step = pol.model, planner._clamp, planner.step

    def model_spy(img, s, h):
        a, hh = model(img, s, h)
        seen["s"], seen["a"] = s[0].copy(), a[0].copy()
        return a, hh

    def clamp_spy(a):
        pre = a.copy()
        out = clamp(a)
        seen["clamped"] = bool(np.linalg.norm(pre - out) > 1e-6)
        return out

    def step_spy(state, depth_m=None, stamp=None):
        seen.clear()
        sp = step(state, depth_m, stamp)
        if planner.last_status != "ok" or "s" not in seen:
            return sp
        v, p = np.asarray(state.velocity, float), np.asarray(state.position, float)
        s, a = seen["s"], seen["a"]
        vt, vb, speed_now = s[3:6].astype(float), s[0:3].astype(float), float(np.linalg.norm(v))
        target = float(np.linalg.norm(vt))
        prior = gain * (vt - vb)
        prior[:2] += drag * vt[:2]
        head = np.array([mxy, mxy, mz]) * np.arctanh(np.clip(a[:3] / np.array([mxy, mxy, mz]), -0.999999, 0.999999))
        u = vb / speed_now if speed_now > 0.3 else vt / max(target, 1e-6)
        direction = v / speed_now if speed_now > 0.3 else (goal - p) / np.linalg.norm(goal - p)
        ahead = np.arange(0.0, 12.01, 0.1)
        sd = np.asarray(world.signed_distance(p[None] + ahead[:, None] * direction[None]))
        hit = np.nonzero(sd < radius + 0.1)[0]
        rows.append({"speed": speed_now, "target": target, "a_along": float(a[:3] @ u),
                     "prior_along": float(mxy * np.tanh(prior @ u / mxy)), "corr_along": float((head - prior) @ u),
                     "free": float(ahead[hit[0]]) if hit.size else 12.0, "near": float(sd[0] - radius),
                     "est_x": float(a[3]), "vbx": float(vb[0]), "clamped": seen.get("clamped", False)})
        return sp

    pol.model, planner._clamp, planner.step = model_spy, clamp_spy, step_spy
    try:
        run = ClosedLoopRunner(world, planner, RunnerConfig(timeout_s=3 * 40 / speed + 10, seed=0, point_cloud=False))
        return run.run(start, goal).summary
    finally:
        pol.model, planner._clamp, planner.step = model, clamp, step


def bench_braking(model_path, episodes, speeds=(5.0, 7.0, 10.0), first_world=500):
    """(f): where and why the policy brakes in the forest eval (module docstring)."""
    from planner_pkg.policy.export import default_model_path
    from planner_pkg.policy.env import eval_world_seed
    from planner_pkg.policy.export import load_policy
    from planner_pkg.policy.planner import PolicyPlanner, PolicyPlannerConfig
    from planner_pkg.world import GENERATOR_PARAMS, generate_world

    path = model_path or default_model_path()
    pol = load_policy(path)
    rng_m = pol.config.loss.avoidance_range_m
    d = GENERATOR_PARAMS["forest"]()
    start, goal = np.array(d.start, float), np.array(d.goal, float)
    print(f"\n(f) braking diagnostics: {path}, forest, {episodes} worlds per speed (first {first_world}), quadrotor;"
          f" steps with the target at the command")
    for speed in speeds:
        planner = PolicyPlanner(pol, PolicyPlannerConfig(speed_mps=speed))
        per_ep, reached = [], 0
        for i in range(episodes):
            seed = eval_world_seed(first_world + i)
            world = generate_world("forest", seed)
            rows = []
            summary = _braking_episode(planner, pol, world, start, goal, speed, rows)
            if summary.reached:
                reached += 1
                per_ep.extend(rows)
        if not per_ep:
            print(f"  {speed:g} m/s: no successful episode")
            continue
        A = {k: np.array([r[k] for r in per_ep]) for k in per_ep[0]}
        cruise = A["target"] >= 0.98 * speed
        brake = cruise & (A["a_along"] < -1.0)
        stop = 0.2 * A["speed"] + A["speed"] ** 2 / 16.0
        inside = (A["near"] - 0.2) < rng_m
        print(f"  {speed:g} m/s: {reached}/{episodes} reached; flown {A['speed'][cruise].mean():.2f} m/s = "
              f"{A['speed'][cruise].mean() / speed:.2f} x command; along-track accel {A['a_along'][cruise].mean():+.2f} "
              f"(prior alone {A['prior_along'][cruise].mean():+.2f}, network correction {A['corr_along'][cruise].mean():+.2f})"
              f" m/s^2; braking {100 * brake.sum() / max(cruise.sum(), 1):.1f} % of steps")
        print(f"    clearance inside the avoidance range ({rng_m:g} m) on {100 * inside[cruise].mean():.0f} % of steps"
              f" (median clearance {np.median(A['near'][cruise] - 0.2):.2f} m); clamp active "
              f"{100 * A['clamped'].mean():.1f} %; velocity estimate {A['est_x'][cruise].mean():.2f} vs true "
              f"{A['vbx'][cruise].mean():.2f} m/s")
        print(f"    {'free ahead m':>12} {'steps %':>8} {'speed':>6} {'net corr':>9} {'braking %':>9} {'stop dist m':>11}")
        for lo, hi in ((0, 2), (2, 4), (4, 6), (6, 8), (8, 10), (10, 12.1)):
            sel = cruise & (A["free"] >= lo) & (A["free"] < hi)
            if sel.any():
                print(f"    {f'{lo}-{min(hi, 12):g}':>12} {100 * sel.sum() / cruise.sum():8.1f} {A['speed'][sel].mean():6.2f} "
                      f"{A['corr_along'][sel].mean():+9.2f} {100 * (sel & brake).sum() / sel.sum():9.0f} "
                      f"{stop[sel].mean():11.2f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="fewer repeats and 10 episodes per speed")
    ap.add_argument("--model", help="policy model for the success table (default: the shipped one)")
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--skip-eval", action="store_true", help="skip the (slow) success table")
    ap.add_argument("--speed-diagnostics", action="store_true", help="only (e): what sets the flown speed")
    ap.add_argument("--braking-diagnostics", action="store_true", help="only (f): where and why the policy brakes")
    ap.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "config",
                                                     "policy", "default.yaml"))
    args = ap.parse_args(argv)
    repeat = 5 if args.quick else args.repeat
    episodes = 10 if args.quick else args.episodes
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else 'absent'}, {os.cpu_count()} CPUs")
    if args.speed_diagnostics:
        bench_speed(args.model, os.path.normpath(args.config))
        return
    if args.braking_diagnostics:
        bench_braking(args.model, episodes if args.quick or args.episodes != 100 else 10)
        return
    bench_rollout(repeat)
    bench_training(repeat, os.path.normpath(args.config))
    bench_inference(repeat, args.model)
    if not args.skip_eval:
        bench_success(args.model, episodes)
    bench_speed(args.model, os.path.normpath(args.config))


if __name__ == "__main__":
    main()
