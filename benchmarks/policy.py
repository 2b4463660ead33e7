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
(e) Speed diagnostics and (f) braking diagnostics (issue 16): ``benchmarks/policy_diagnostics.py``
    (described there), run through the two flags above; (e) also ends the full run.

Times are medians over interleaved repeats; the machine's 2 cores are shared, so read ratios,
not absolute numbers. Never asserts on time.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import autograd_core as ag  # noqa: E402

from planner_pkg.policy.dynamics import point_mass_step, step_coefficients  # noqa: E402
# (this folder, beside this script)
from policy_diagnostics import (bench_brake_geometry, bench_braking, bench_loss_pull, bench_speed,  # noqa: E402
                                bench_time_split)

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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="fewer repeats and 10 episodes per speed")
    ap.add_argument("--model", help="policy model for the success table (default: the shipped one)")
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--skip-eval", action="store_true", help="skip the (slow) success table")
    ap.add_argument("--speed-diagnostics", action="store_true", help="only (e): what sets the flown speed")
    ap.add_argument("--braking-diagnostics", action="store_true", help="only (f): where and why the policy brakes")
    ap.add_argument("--loss-pull", action="store_true", help="only (g): how each loss term pulls the flown speed")
    ap.add_argument("--time-split", action="store_true", help="only (h): where the eval flights' mean speed goes")
    ap.add_argument("--brake-geometry", action="store_true", help="only (i): what is ahead when the policy brakes")
    ap.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "config",
                                                     "policy", "default.yaml"))
    args = ap.parse_args(argv)
    repeat = 5 if args.quick else args.repeat
    episodes = 10 if args.quick else args.episodes
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else 'absent'}, {os.cpu_count()} CPUs")
    if args.speed_diagnostics:
        bench_speed(args.model, os.path.normpath(args.config))
        return
    if args.loss_pull:
        bench_loss_pull(args.model, os.path.normpath(args.config))
        return
    if args.time_split:
        bench_time_split(args.model, episodes if args.quick or args.episodes != 100 else 30)
        return
    if args.brake_geometry:
        bench_brake_geometry(args.model, episodes if args.quick or args.episodes != 100 else 30)
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
