"""Simulator performance: real-time factor of the closed loop and the cost of one depth frame.

Prints two tables; never asserts on time (machines differ). Run on one core for comparable
numbers, e.g. ``OMP_NUM_THREADS=1 python benchmarks/sim.py``.

1. Closed loop in a ~200-tree forest (a 50 x 20 m forest of 230 trunks with a corridor cleared
   along the start-goal line, so ``direct`` survives the course): rigid-body dynamics at 500 Hz, SE(3) controller at
   250 Hz, 64x48 depth camera + point cloud at 30 Hz, the ``direct`` planner at 10 Hz;
   also the point-mass model and camera-less runs, to show where the time goes.
2. One 64x48 depth frame (cull + raycast + point cloud) against worlds of 50, 200 and 1000
   obstacles, camera at the start of the course looking down the forest.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from planner_pkg.planning.direct import DirectPlanner  # noqa: E402
from planner_pkg.sim import DepthCamera, RunnerConfig, run_episode  # noqa: E402
from planner_pkg.types import VehicleState  # noqa: E402
from planner_pkg.world import World, generate_world  # noqa: E402

START = (-24.0, 0.0, 1.5)
GOAL = (24.0, 0.0, 1.5)


def forest(count: int, seed: int = 1):
    """A 50 x 20 m forest of ``count`` trunks with the benchmark's start/goal kept clear."""
    return generate_world("forest", seed, count=count, start=START, goal=GOAL, clear_radius=1.5)


def corridor_forest(count: int):
    """``forest(count)`` with the trunks within 1.2 m of the straight start-goal line removed,
    so the ``direct`` planner flies the whole course while the camera sees the forest."""
    world = forest(count)
    kept = [o for o in world.obstacles if abs(o.center[1]) > 1.2 + o.radius]
    return World(world.bounds_min, world.bounds_max, kept, ground=world.ground, ceiling=world.ceiling)


def closed_loop_rows(sim_seconds: float):
    world = corridor_forest(230)
    rows = [len(world.obstacles)]
    cases = [
        ("quadrotor + depth 30 Hz + cloud", RunnerConfig(timeout_s=sim_seconds)),
        ("quadrotor, no camera", RunnerConfig(timeout_s=sim_seconds, depth_rate_hz=0.0)),
        ("point mass + depth 30 Hz + cloud", RunnerConfig(timeout_s=sim_seconds, vehicle="point_mass")),
        ("point mass, no camera", RunnerConfig(timeout_s=sim_seconds, vehicle="point_mass", depth_rate_hz=0.0)),
    ]
    for label, cfg in cases:
        best = None
        for _ in range(3):
            cpu0 = time.process_time()
            res = run_episode(world, DirectPlanner(), START, GOAL, cfg)
            cpu = time.process_time() - cpu0
            s = res.summary
            if best is None or s.wall_time_s < best[0].wall_time_s:
                best = (s, cpu)
        s, cpu = best
        rows.append((label, s.time_s, s.wall_time_s, cpu, s.time_s / s.wall_time_s, s.depth_frames, s.reason))
    return rows


def depth_frame_rows(repeats: int):
    rows = []
    camera = DepthCamera()
    state = VehicleState.at_rest(START, yaw=0.0)
    for count in (50, 200, 1000):
        world = forest(count)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            frame = camera.render(world, state)
            times.append(time.perf_counter() - t0)
        valid = int(np.isfinite(frame.depth).sum())
        culled = len(world.cull(np.array(START), camera._max_ray_length).obstacles)
        rows.append((count, culled, 1e3 * float(np.median(times)), 1e3 * float(np.min(times)), valid))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim-seconds", type=float, default=10.0, help="simulated time per closed-loop run")
    parser.add_argument("--repeats", type=int, default=30, help="depth frames timed per world")
    args = parser.parse_args(argv)

    n_trees, *rows = closed_loop_rows(args.sim_seconds)
    print(f"Closed loop, {n_trees}-tree forest (50 x 20 m, corridor along the line), "
          f"{args.sim_seconds:g} s simulated, best of 3")
    print(f"{'case':<36} {'sim s':>7} {'wall s':>7} {'cpu s':>7} {'x real time':>12} {'frames':>7}  end")
    for label, sim_s, wall_s, cpu_s, rtf, frames, reason in rows:
        print(f"{label:<36} {sim_s:7.2f} {wall_s:7.3f} {cpu_s:7.3f} {rtf:12.1f} {frames:7d}  {reason}")
    print()
    print("One 64x48 depth frame + point cloud vs obstacle count (camera at the forest edge)")
    print(f"{'obstacles':>9} {'in range':>9} {'median ms':>10} {'min ms':>8} {'valid px':>9}")
    for count, culled, med, best, valid in depth_frame_rows(args.repeats):
        print(f"{count:9d} {culled:9d} {med:10.2f} {best:8.2f} {valid:9d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
