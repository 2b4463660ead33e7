"""Cost of one value + gradient of the EGO B-spline cost (~30 control points).

Prints, per implementation, the median wall time of one evaluation of
smoothness + collision + feasibility (the rebound stage's cost) with 30 control points and 20
{p, v} pairs, with some pairs in each branch of the collision penalty and the feasibility term
active:
- the NumPy kernel alone (the floor),
- autograd_core: one fused ``TotalCost`` node (what the optimiser calls),
- autograd_core: the three term Functions added by the engine (three nodes + two adds),
- torch eager, the same cost written with torch ops (if torch is importable).
The values and gradients are checked to agree before timing. Never pass/fail on time.
Run on one core for comparable numbers: ``OMP_NUM_THREADS=1 python benchmarks/ego_cost.py``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import autograd_core as ac  # noqa: E402
from planner_pkg.planning.costs import (CollisionCost, CostProblem, FeasibilityCost, SmoothnessCost,  # noqa: E402
                                        TotalCost, total_kernel)


def make_problem(n: int = 30, n_pairs: int = 20, seed: int = 0):
    rng = np.random.default_rng(seed)
    dt = 0.24
    q = np.cumsum(rng.normal(0.0, 0.15, (n, 3)) + [0.55, 0.0, 0.0], axis=0)  # ~2.3 m/s: feasibility active
    idx = rng.choice(np.arange(3, n - 3), n_pairs)
    v = rng.normal(size=(n_pairs, 3))
    v /= np.linalg.norm(v, axis=1)[:, None]
    depth = rng.uniform(-0.6, 0.7, n_pairs)  # d in every branch: free, cubic, quadratic
    p = q[idx] - (depth[:, None]) * v
    problem = CostProblem(n, dt, 2.0, 3.0, pair_index=idx, pair_p=p, pair_v=v)
    return q, problem


def torch_cost(torch, q, problem):
    """The same cost with torch ops (smoothness + collision + feasibility)."""
    w = problem.weights
    jerk = q[3:] - 3 * q[2:-1] + 3 * q[1:-2] - q[:-3]
    smooth = (jerk * jerk).sum()
    idx = torch.as_tensor(problem.pair_index)
    pv = torch.as_tensor(problem.pair_v)
    d = ((q[idx] - torch.as_tensor(problem.pair_p)) * pv).sum(dim=1)
    sf = w.clearance_m
    c = torch.clamp(sf - d, min=0.0)
    m = torch.clamp(c, max=sf)
    e = c - m
    coll = (m ** 3 + (3 * sf * sf + 3 * sf * e) * e).sum()
    ts = problem.dt
    vel = (q[1:] - q[:-1]) / ts
    acc = (q[2:] - 2 * q[1:-1] + q[:-2]) / (ts * ts)
    ev = torch.clamp(torch.sqrt((vel * vel).sum(dim=1)) - problem.max_vel, min=0.0)
    ea = torch.clamp(torch.sqrt((acc * acc).sum(dim=1)) - problem.max_acc, min=0.0)
    feas = (ev * ev).sum() / (ts * ts) + (ea * ea).sum()
    return w.smoothness * smooth + w.collision * coll + w.feasibility * feas


def timeit(fn, repeat: int) -> float:
    for _ in range(max(10, repeat // 10)):
        fn()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        times.append((time.perf_counter() - t0) / repeat)
    return float(np.median(times))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=30, help="control points")
    ap.add_argument("--repeat", type=int, default=2000)
    args = ap.parse_args(argv)
    q, problem = make_problem(args.points)
    f_ref, g_ref = total_kernel(q, problem)

    def fused():
        t = ac.from_numpy(q)
        t.requires_grad_(True)
        out = TotalCost.apply(t, problem)
        out.backward()
        return float(out._data), t.grad._data

    def terms():
        t = ac.from_numpy(q)
        t.requires_grad_(True)
        w = problem.weights
        out = (w.smoothness * SmoothnessCost.apply(t, problem) + w.collision * CollisionCost.apply(t, problem)
               + w.feasibility * FeasibilityCost.apply(t, problem))
        out.backward()
        return float(out._data), t.grad._data

    rows = [("numpy kernel (no autograd)", lambda: total_kernel(q, problem)),
            ("autograd_core, fused TotalCost", fused),
            ("autograd_core, 3 term nodes + adds", terms)]
    for name, fn in rows[1:]:
        f, g = fn()
        assert abs(f - f_ref) <= 1e-9 * max(1.0, abs(f_ref)) and np.allclose(g, g_ref, atol=1e-9), name
    try:
        import torch
    except ImportError:
        torch = None
        print("torch is not importable: skipping the torch eager row")
    if torch is not None:
        torch.set_num_threads(1)

        def eager():
            t = torch.tensor(q, requires_grad=True)
            out = torch_cost(torch, t, problem)
            out.backward()
            return float(out.detach()), t.grad.numpy()

        f, g = eager()
        assert abs(f - f_ref) <= 1e-9 * max(1.0, abs(f_ref)) and np.allclose(g, g_ref, atol=1e-9), "torch"
        rows.append((f"torch {torch.__version__} eager", eager))
    print(f"EGO cost value + gradient: {args.points} control points, {len(problem.pair_index)} pairs "
          f"(median of 5 x {args.repeat})")
    for name, fn in rows:
        print(f"  {name:40s} {1e6 * timeit(fn, args.repeat):8.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
