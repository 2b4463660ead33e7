"""The rebound optimiser's minimisations, as flown: the shipped L-BFGS against scipy's L-BFGS-B.

Flies ``--seeds`` forests of benchmarks/forest.py with the EGO planner at ``--speed`` m/s
(time scale 1000: deterministic) and records every minimisation the rebound optimiser runs
(rebound and refit stages: control points, cost problem, iteration budget). Then solves each
recorded problem again, in this process, alternately with:

- ``shipped``: ``ReboundOptimizer._minimize`` (planning/lbfgs.py's ``minimize_lbfgs`` on the
  fused ``FreeObjective``, in the smoothness-whitened coordinates of costs.smoothness_preconditioner);
- ``unpreconditioned``: the same with ``OptimizerConfig.preconditioner_damping = 0`` (plain
  L-BFGS on the control points, as EGO);
- ``scipy L-BFGS-B``: ``scipy.optimize.minimize(method="L-BFGS-B", jac=True)`` on
  ``total_kernel`` with the same memory, tolerances and budget (the implementation before; the
  reference of the ratio columns).

Printed: iterations and evaluations over all problems, the time per problem set and per
iteration, the ratio to the reference, and how the final costs compare (the ratio shipped /
reference per problem: both stop at the same loose tolerances, so neither is "the" minimum).
Also the cost evaluation alone (``FreeObjective`` against ``total_kernel`` plus the slicing the
scipy path needs). Never pass/fail on time. Run on one core for comparable numbers:
``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/ego_optimizer.py``.
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from dataclasses import replace
from functools import lru_cache

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

from forest import GOAL, START, default_max_acc, episode_timeout_s, forest_world, make_planner  # noqa: E402
from planner_pkg.planning import rebound  # noqa: E402
from planner_pkg.planning.costs import FreeObjective, total_kernel  # noqa: E402
from planner_pkg.sim import RunnerConfig, run_episode  # noqa: E402


def record_problems(seeds, speed: float):
    """Every (q, problem, budget, config) the rebound optimiser minimised in these flights."""
    recorded = []
    original = rebound.ReboundOptimizer._minimize

    def recording(self, q, problem, max_iterations=None):
        recorded.append((q.copy(), copy.copy(problem), max_iterations, self.config))
        return original(self, q, problem, max_iterations)

    rebound.ReboundOptimizer._minimize = recording
    try:
        for seed in seeds:
            world = forest_world(seed)
            planner = make_planner("ego", speed, default_max_acc(speed), 1000.0)
            run_episode(world, planner, START, GOAL, RunnerConfig(timeout_s=episode_timeout_s(speed), seed=seed))
    finally:
        rebound.ReboundOptimizer._minimize = original
    return recorded


def solve_shipped(q, problem, budget, config):
    optimizer = rebound.ReboundOptimizer.__new__(rebound.ReboundOptimizer)
    optimizer.config = config
    return rebound.ReboundOptimizer._minimize(optimizer, q, problem, budget)


@lru_cache(maxsize=None)
def _unpreconditioned(config):
    # built once per recorded config: a validated replace() costs ~90 us, 2 % of the row's time
    return replace(config, preconditioner_damping=0.0)


def solve_plain(q, problem, budget, config):
    """The shipped solver with the preconditioner off (plain L-BFGS on the control points)."""
    return solve_shipped(q, problem, budget, _unpreconditioned(config))


def solve_scipy(q, problem, budget, config):
    lo, hi = rebound.free_range(problem)
    work = q.copy()

    def fun(x):
        work[lo:hi] = x.reshape(-1, 3)
        f, g = total_kernel(work, problem)
        return f, g[lo:hi].ravel()

    maxiter = config.max_iterations if budget is None else max(1, min(config.max_iterations, budget))
    res = minimize(fun, work[lo:hi].ravel(), jac=True, method="L-BFGS-B",
                   options={"maxcor": config.lbfgs_memory, "maxiter": maxiter, "gtol": config.gtol,
                            "ftol": config.ftol})
    work[lo:hi] = res.x.reshape(-1, 3)
    return work, int(res.nit), int(res.nfev)


def run_solver(solver, problems):
    t0 = time.perf_counter()
    iterations = evaluations = 0
    costs = []
    for q, problem, budget, config in problems:
        out, nit, nfev = solver(q, problem, budget, config)
        iterations += nit
        evaluations += nfev
        costs.append(total_kernel(out, problem)[0])
    return time.perf_counter() - t0, iterations, evaluations, np.array(costs)


def time_evaluations(problems, repeat: int):
    """Seconds per evaluation: FreeObjective(x) and the scipy path's (write x, total_kernel, slice)."""
    fused, plain = 0.0, 0.0
    for q, problem, _, _ in problems:
        lo, hi = rebound.free_range(problem)
        objective = FreeObjective(problem, q, lo, hi)
        x = q[lo:hi].ravel().copy()
        work = q.copy()
        t0 = time.perf_counter()
        for _ in range(repeat):
            objective(x)
        fused += time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(repeat):
            work[lo:hi] = x.reshape(-1, 3)
            _, g = total_kernel(work, problem)
            g[lo:hi].ravel()
        plain += time.perf_counter() - t0
    n = len(problems) * repeat
    return fused / n, plain / n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", type=float, default=6.0, help="max_vel of the recorded flights, m/s")
    ap.add_argument("--seeds", default="0-5", help="forest seeds a-b (inclusive)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating timing rounds per solver")
    ap.add_argument("--repeat", type=int, default=10, help="evaluations per problem for the cost timing")
    args = ap.parse_args(argv)
    a, b = (int(s) for s in args.seeds.split("-"))
    problems = record_problems(range(a, b + 1), args.speed)
    print(f"{len(problems)} minimisations recorded in {b - a + 1} forests at {args.speed:g} m/s "
          f"(control points p50 {np.median([p.n for _, p, _, _ in problems]):.0f})")
    solvers = [("scipy L-BFGS-B + total_kernel (reference)", solve_scipy),
               ("shipped lbfgs + FreeObjective, unpreconditioned", solve_plain),
               ("shipped lbfgs + FreeObjective (preconditioned)", solve_shipped)]
    best = {}
    with rebound.single_threaded_blas():
        for _ in range(args.rounds):  # alternate, so that a change in the machine's load hits both
            for name, solver in solvers:
                dt, nit, nfev, costs = run_solver(solver, problems)
                if name not in best or dt < best[name][0]:
                    best[name] = (dt, nit, nfev, costs)
        t_fused, t_plain = time_evaluations(problems, args.repeat)
    ref_time, ref_nit = best[solvers[0][0]][0], best[solvers[0][0]][1]
    print(f"{'solver':50s} {'iterations':>10s} {'evals':>7s} {'total ms':>9s} {'x ref':>6s} {'us / it':>8s} "
          f"{'x ref / it':>10s}")
    for name, _ in solvers:
        dt, nit, nfev, _ = best[name]
        print(f"{name:50s} {nit:10d} {nfev:7d} {dt * 1e3:9.0f} {dt / ref_time:6.2f} {dt / max(nit, 1) * 1e6:8.1f} "
              f"{(dt / max(nit, 1)) / (ref_time / ref_nit):10.2f}")
    for name, _ in solvers[1:]:
        ratio = best[name][3] / np.maximum(best[solvers[0][0]][3], 1e-12)
        print(f"final cost / reference, {name}: p10 {np.percentile(ratio, 10):.3f}, p50 {np.median(ratio):.3f}, "
              f"p90 {np.percentile(ratio, 90):.3f}; lower in {(ratio < 1).sum()} of {len(ratio)} problems")
    print(f"one cost evaluation: FreeObjective {t_fused * 1e6:.1f} us, total_kernel + slicing {t_plain * 1e6:.1f} us "
          f"(x {t_fused / t_plain:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
