"""Swarm benchmark: EGO-Swarm (one EGO planner per drone, coordinated only by broadcast
trajectories) in the embedded multi-vehicle simulator.

Scenarios (seed k gives the same world and the same drones for every speed):
- ``circle``: 8 drones on a circle of radius 9 m at 1 m height swap to the antipodal point,
  through a sparse forest (a 26 x 26 m forest generator world, 0.02 trunks/m^2, radius
  0.25-0.4 m, with every trunk within 1.5 m of a start or goal, horizontally, removed);
- ``forest``: 10 drones cross a 40 x 24 m forest (0.06 trunks/m^2, radius 0.25-0.5 m): five start
  on the west edge and five on the east edge, each heading for the far side at the mirrored
  lateral position (the paths cross in the middle), trunks within 1.5 m of a start or goal removed.

Each drone: rigid-body quadrotor, SE(3) controller, its own 64x48 depth camera at 30 Hz that also
sees the other drones; its planner never sees the world or the other drones' states, only its
own camera and the others' broadcast B-splines (10 Hz, 1 s timeout).

Printed per scenario and speed:
- success: every drone reached its goal (0.5 m) with no drone-drone contact (centres closer
  than 2 x 0.19 m) and no drone-obstacle contact;
- min sep: the smallest centre distance between two drones over the whole run (median and min
  over scenarios);
- time ratio: mean over drones of (its swarm flight time / the same drone's flight time alone in
  the same world, same planner), with ``--solo K`` (K of the drones, evenly spread over the ids,
  are flown alone; all of them doubles the cost);
- replan p50 / p95: wall time of the EGO plan attempts (all drones, all scenarios); solo p50:
  the same for the solo flights (same machine, same load: what the swarm adds); cpu p50: the
  planning ticks' CPU time (thread time: what the plan costs without the other processes' load);
- trk / trk max: each drone's distance from its position reference over the control ticks (its
  p95, averaged over the drones of every scenario / the largest over all of them), m;
- wall: seconds of wall time per scenario.

Never pass/fail on time. ``--time-scale K`` widens EGO's wall-clock safety nets (the simulated
clock waits for the planners, as in a lockstep simulation), so on a loaded machine the
deterministic budgets decide the plans; the replan times are still measured as flown.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/swarm.py --scenario circle \
        --seeds 100-119 --max-vel 2 --plot swarm_circle.png
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from planner_pkg import safe_yaml  # noqa: E402
from planner_pkg.app.swarm import build_swarm, fly_swarm, plot_swarm, swarm_summary  # noqa: E402
from planner_pkg.world import World, generate_world  # noqa: E402

CLEAR_M = 1.5


def _cleared(world, points, clear_m: float = CLEAR_M):
    """The world without the obstacles whose footprint comes within ``clear_m`` of any point."""
    pts = np.asarray(points)[:, :2]
    keep = []
    for ob in world.obstacles:
        c = np.asarray(ob.center[:2] if len(ob.center) >= 2 else ob.center, dtype=float)
        r = float(getattr(ob, "radius", 0.0) or 0.5 * max(getattr(ob, "size", (0.0, 0.0))[:2]))
        if (np.hypot(*(pts - c).T) - r >= clear_m).all():
            keep.append(ob)
    return World(world.bounds_min, world.bounds_max, keep, ground=world.ground, ceiling=world.ceiling)


def circle_scenario(seed: int, n: int = 8, radius: float = 9.0, z: float = 1.0):
    ang = 2.0 * math.pi * np.arange(n) / n
    starts = np.stack([radius * np.cos(ang), radius * np.sin(ang), np.full(n, z)], axis=1)
    goals = -starts
    goals[:, 2] = z
    world = generate_world("forest", seed, size_x=26.0, size_y=26.0, density=0.02, radius_min=0.25, radius_max=0.4,
                           start=(0.0, 0.0, 1.0), goal=(0.0, 0.0, 1.0), clear_radius=0.0)
    return _cleared(world, np.vstack([starts, goals])), starts, goals


def forest_scenario(seed: int, n: int = 10, z: float = 1.0):
    half = n // 2
    ys = np.linspace(-8.0, 8.0, half)
    west = np.stack([np.full(half, -17.0), ys, np.full(half, z)], axis=1)
    east = np.stack([np.full(n - half, 17.0), ys[: n - half] + 1.0, np.full(n - half, z)], axis=1)
    starts = np.vstack([west, east])
    goals = np.vstack([np.stack([np.full(half, 17.0), -ys, np.full(half, z)], axis=1),
                       np.stack([np.full(n - half, -17.0), -(ys[: n - half] + 1.0), np.full(n - half, z)], axis=1)])
    world = generate_world("forest", seed, size_x=40.0, size_y=24.0, density=0.06, start=(0.0, 0.0, 1.0),
                           goal=(0.0, 0.0, 1.0), clear_radius=0.0)
    return _cleared(world, np.vstack([starts, goals])), starts, goals


SCENARIOS = {"circle": circle_scenario, "forest": forest_scenario}


def _seeds(text: str):
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b) + 1)) if b else [int(a)]
    return out


def run(scenario: str, seeds, max_vel: float, time_scale: float, solo: int, plot, verbose: bool,
        ego_overrides=None):
    rows = []
    replans, solo_replans, cpu = [], [], []
    for seed in seeds:
        world, starts, goals = SCENARIOS[scenario](seed)
        dist = np.linalg.norm(goals - starts, axis=1)
        timeout = 3.0 * float(dist.max()) / max_vel + 20.0
        w0 = time.perf_counter()
        res, agents, bus = fly_swarm(world, starts, goals, max_vel=max_vel, timeout_s=timeout, seed_value=seed,
                                     time_scale=time_scale, ego_overrides=ego_overrides)
        s = swarm_summary(res, agents, bus, f"{scenario}-{seed}", max_vel)
        wall = time.perf_counter() - w0
        for a in agents:
            replans += a.stats.replan_ms
            cpu += a.plan_cpu_ms
        ratio = None
        if solo:
            ratios = []
            n = starts.shape[0]
            for k in sorted({int(round(j * n / solo)) % n for j in range(solo)}):
                one, one_agents, _ = fly_swarm(world, starts[k:k + 1], goals[k:k + 1], max_vel=max_vel, timeout_s=timeout,
                                               seed_value=seed + k, time_scale=time_scale, ego_overrides=ego_overrides)
                solo_replans += one_agents[0].stats.replan_ms
                t_solo = one.vehicles[0].reach_time_s
                t_swarm = res.vehicles[k].reach_time_s
                if t_solo and t_swarm:
                    ratios.append(t_swarm / t_solo)
            ratio = float(np.mean(ratios)) if ratios else None
        rows.append((seed, s, ratio, wall))
        if verbose:
            bad = [f"{d['drone']}:{d['reason']}" for d in s["drones"] if not d["reached"] or d["collided"]]
            print(f"  {scenario} v={max_vel:g} seed={seed}: {'ok  ' if s['success'] else 'FAIL'} "
                  f"min sep {s['min_inter_drone_distance_m']:.2f} m, flight {s['flight_time_s'] or float('nan'):.1f} s"
                  f"{'' if ratio is None else f', x{ratio:.2f} solo'}, replan p50 {s['replan_ms_median'] or 0:.1f} ms, "
                  f"wall {wall:.0f} s {' '.join(bad)}", flush=True)
        if plot and seed == seeds[0]:
            base, ext = os.path.splitext(plot)
            path = f"{base}_v{max_vel:g}{ext or '.png'}"
            plot_swarm(path, world, res.logs, starts, goals,
                       f"{scenario} seed {seed}, {starts.shape[0]} drones, {max_vel:g} m/s: "
                       f"{'success' if s['success'] else 'failure'}, min sep {s['min_inter_drone_distance_m']:.2f} m",
                       res.drone_collisions)
            print(f"  wrote {path}")
    return rows, replans, solo_replans, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    ap.add_argument("--seeds", default="100-119", help="e.g. 100-119 or 1,5,7 (default 100-119)")
    ap.add_argument("--max-vel", type=float, action="append", help="m/s (repeatable; default 2)")
    ap.add_argument("--time-scale", type=float, default=4.0)
    ap.add_argument("--solo", type=int, default=0, metavar="K",
                    help="also fly K of the drones (evenly spread over the ids) alone: flight-time ratio (0: no)")
    ap.add_argument("--plot", help="PNG of the first seed's paths (per scenario and speed)")
    ap.add_argument("--ego", action="append", default=[], metavar="KEY=VALUE",
                    help="an EgoConfig override for every drone (dotted key, YAML value; repeatable), "
                         "e.g. map.inflation_shape=cylinder")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    try:
        ego_overrides = safe_yaml.key_values(args.ego)
    except ValueError as exc:
        ap.error(f"--ego {exc}")
    if ego_overrides:
        from planner_pkg.config_schema import ConfigError
        from planner_pkg.planning.ego_planner import EgoConfig

        try:
            EgoConfig().with_overrides(ego_overrides)  # a bad key or value stops here, before any flight
        except ConfigError as exc:
            ap.error(f"--ego: {exc}")
        print(f"EGO overrides: {ego_overrides}")
    seeds = _seeds(args.seeds)
    table = []
    for scenario in args.scenario or ["circle", "forest"]:
        for v in args.max_vel or [2.0]:
            plot = None
            if args.plot:
                base, ext = os.path.splitext(args.plot)
                plot = f"{base}_{scenario}{ext}"
            rows, replans, solo_replans, cpu = run(scenario, seeds, v, args.time_scale, args.solo, plot, not args.quiet,
                                                   ego_overrides)
            ok = sum(1 for _, s, _, _ in rows if s["success"])
            seps = [s["min_inter_drone_distance_m"] for _, s, _, _ in rows if s["min_inter_drone_distance_m"]]
            ratios = [r for _, _, r, _ in rows if r is not None]
            trk = [d["tracking_error_p95_m"] for _, s, _, _ in rows for d in s["drones"]
                   if d["tracking_error_p95_m"] is not None]
            trk_max = [d["tracking_error_max_m"] for _, s, _, _ in rows for d in s["drones"]
                       if d["tracking_error_max_m"] is not None]
            table.append((scenario, v, len(rows), ok, np.median(seps), min(seps),
                          np.mean(ratios) if ratios else float("nan"),
                          np.percentile(replans, 50) if replans else float("nan"),
                          np.percentile(replans, 95) if replans else float("nan"),
                          np.percentile(solo_replans, 50) if solo_replans else float("nan"),
                          np.percentile(cpu, 50) if cpu else float("nan"),
                          np.mean(trk) if trk else float("nan"), max(trk_max) if trk_max else float("nan"),
                          np.mean([w for *_, w in rows])))
    print()
    print(f"{'scenario':8s} {'v m/s':>5s} {'runs':>4s} {'success':>8s} {'sep p50':>8s} {'sep min':>8s} "
          f"{'t/solo':>7s} {'replan p50':>10s} {'p95 ms':>7s} {'solo p50':>8s} {'cpu p50':>7s} {'trk':>6s} {'trk max':>7s} "
          f"{'wall s':>7s}")
    for sc, v, n, ok, sep50, sepmin, ratio, r50, r95, s50, c50, trk, trk_max, wall in table:
        print(f"{sc:8s} {v:5.1f} {n:4d} {100.0 * ok / n:7.1f}% {sep50:8.2f} {sepmin:8.2f} {ratio:7.2f} "
              f"{r50:10.1f} {r95:7.1f} {s50:8.1f} {c50:7.1f} {trk:6.3f} {trk_max:7.3f} {wall:7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
