"""Speed-up of ``policy eval`` on the worker pool: the same episodes on 1 worker (in-process) and
on N Ray actors (planner_pkg.pool), in one process, with the outcomes checked equal.

Ray is started once before the timed runs (its start-up, printed separately, is not part of any
ratio); each configuration runs ``--repeat`` times and the best wall time counts. Prints the
load average before and after: on a shared machine the speed-up measures the cores left free.
``overlap`` is the episodes' own wall times summed over the call's wall time: about 1 in-process,
up to N when N workers really run at once (less load-sensitive than the speed-up between runs,
which the other processes' demand changes from minute to minute).

    python benchmarks/eval_pool.py --episodes 6 --speed 3 --workers 1 2
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WALL_CLOCK = {"wall_time_s", "real_time_factor", "replan_ms_median", "replan_ms_p95"}


def _outcomes(results):
    return [[{k: v for k, v in e.items() if k not in WALL_CLOCK} for e in r.episodes] for r in results]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--speed", type=float, nargs="+", default=[3.0])
    ap.add_argument("--vehicle", choices=("quadrotor", "point_mass"), default="quadrotor")
    ap.add_argument("--first-world", type=int, default=10)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--model", default=None, help="policy model (default: the shipped one)")
    args = ap.parse_args(argv)
    if args.episodes < 1 or args.repeat < 1 or min(args.workers) < 1:
        ap.error("--episodes, --repeat and --workers must be >= 1")

    from planner_pkg.policy.evaluate import evaluate_speeds
    from planner_pkg.policy.export import default_model_path, load_policy
    from planner_pkg.pool import _init_local, ray_available

    policy = load_policy(args.model or default_model_path())
    print(f"policy eval on the worker pool: {args.episodes} episodes x speeds {args.speed}, {args.vehicle}, "
          f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}", flush=True)
    started = None
    if max(args.workers) > 1 and ray_available():
        import ray

        t0 = time.perf_counter()
        _init_local(ray, {"num_cpus": max(args.workers), "include_dashboard": False, "log_to_driver": False})
        started = time.perf_counter() - t0
        print(f"local Ray instance started in {started:.1f} s (not counted below)", flush=True)
    rows, reference, ref_out = [], None, None
    try:
        for w in args.workers:
            best = None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                res = evaluate_speeds(policy, args.speed, episodes=args.episodes, vehicle=args.vehicle,
                                      first_world=args.first_world, workers=w)
                wall = time.perf_counter() - t0
                if best is None or wall < best:
                    best, overlap = wall, sum(r.wall_s for r in res) / wall
            out = _outcomes(res)
            if ref_out is None:
                ref_out = out
            if reference is None:
                reference = best
            rows.append((w, best, overlap, out == ref_out))
    finally:
        if started is not None:
            import ray

            ray.shutdown()
    n = args.episodes * len(args.speed)
    print(f"\n{'workers':>7} {'wall s':>8} {'episodes/s':>10} {'speed-up':>8} {'per worker':>10} {'overlap':>7} "
          f"{'same outcomes':>13}")
    for w, wall, overlap, same in rows:
        print(f"{w:7d} {wall:8.1f} {n / wall:10.3f} {reference / wall:8.2f} {reference / wall / w:10.2f} "
              f"{overlap:7.2f} {'yes' if same else 'NO':>13}")
    print(f"(load average after: {os.getloadavg()[0]:.1f}; speed-up vs the first row, same process)")
    return 0 if all(same for *_, same in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
