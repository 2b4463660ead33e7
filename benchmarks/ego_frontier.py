"""Where EGO's stop-before-unknown check stops its plans in the forest (issue 16: what caps 6 m/s).

Flies the forest benchmark's episodes (``benchmarks/forest.py``: same worlds, start, goal,
acceleration rule) and, for every plan the check re-timed (:func:`planner_pkg.planning.frontier.
limit_to_known_space`), takes the first point that was not known free: a path sample or one of the
six probes around it at the vehicle radius (the body). Printed:

- how far ahead the known free space ended (p10 / p50 / p90, m) and how many plans had less than
  the room a stop from max_vel needs (``v^2 / (2 decel) + v latency + margin``);
- of the unobserved points of those short plans: how many were a body probe beside the path (across
  the travel direction) or ahead of it, with the path sample itself seen free; how many lie in the
  shadow of an obstacle as seen from the camera of the newest frame (a ray from the camera to the
  point hits a surface first), outside its horizontal or vertical field of view, or behind it.

Usage: ``OMP_NUM_THREADS=1 python benchmarks/ego_frontier.py --speed 6 --episodes 4``.
The instrumentation wraps the check's private sampling function (``frontier._known_free``) for
the duration of the run and asks its probe test (``frontier._observed``) which probe failed; it
changes no result.
"""
from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402

import forest  # noqa: E402
from planner_pkg.planning import frontier  # noqa: E402
from planner_pkg.planning import planner_manager  # noqa: E402
from planner_pkg.sim import RunnerConfig, run_episode  # noqa: E402


class _Recorder:
    """Wraps ``frontier._known_free`` and ``planner_manager.limit_to_known_space`` to keep, per
    re-timed plan, the first point that was not known free and the camera pose it was judged
    from."""

    def __init__(self):
        self.rows = []
        self.planner = None
        self.world = None
        self._last = None
        self._known_free = frontier._known_free
        self._limit = planner_manager.limit_to_known_space

    def __enter__(self):
        frontier._known_free = self._wrap_known_free
        planner_manager.limit_to_known_space = self._wrap_limit
        return self

    def __exit__(self, *exc):
        frontier._known_free = self._known_free
        planner_manager.limit_to_known_space = self._limit

    def _wrap_known_free(self, grid_map, history, points, start, limit, n_path):
        i, cause = self._known_free(grid_map, history, points, start, limit, n_path)
        self._last = None
        if i < points.shape[0] and cause == "unknown":
            probes = points[i] + limit.probe_m * frontier._PROBES
            known = frontier.observed(grid_map, history, probes, start, limit.start_radius_m)
            k = int(np.argmin(known))  # the first unobserved one (0: the path sample itself)
            tangent = points[min(i + 1, points.shape[0] - 1)] - points[max(i - 1, 0)]
            self._last = (probes[k], k, tangent)
        return i, cause

    def _wrap_limit(self, trajectory, grid_map, limit, history=None):
        out = self._limit(trajectory, grid_map, limit, history)
        report = out[1]
        frame = getattr(self.planner, "_last_frame", None)
        if report.limited and report.cause == "unknown" and self._last is not None and frame is not None:
            point, k, tangent = self._last
            self.rows.append(self._geometry(report.known_free_m, point, k, tangent, frame))
        return out

    def _geometry(self, known_free_m, point, k, tangent, frame):
        eye = np.asarray(frame.camera_position, dtype=np.float64)
        rot = Rotation.from_quat(frame.camera_orientation).as_matrix()  # optical -> world
        d = rot.T @ (point - eye)  # optical frame: x right, y down, z forward
        dist = float(np.linalg.norm(point - eye))
        hit = float(self.world.raycast(eye, (point - eye) / max(dist, 1e-9), max(dist, 1e-6)))
        intr = frame.intrinsics
        half_h = math.atan2(0.5 * intr.width, intr.fx)
        half_v = math.atan2(0.5 * intr.height, intr.fy)
        offset = frontier._PROBES[k]
        t = tangent / max(float(np.linalg.norm(tangent)), 1e-9)
        across = k > 0 and abs(float(offset @ t)) < 0.5
        return {"known_free_m": known_free_m, "probe": k, "across": across, "ahead": k > 0 and not across,
                "occluded": hit < dist - 0.02, "behind": d[2] <= 0.0,
                "outside_h": d[2] > 0.0 and abs(math.atan2(d[0], d[2])) > half_h,
                "outside_v": d[2] > 0.0 and abs(math.atan2(d[1], d[2])) > half_v}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speed", type=float, default=6.0, help="max_vel, m/s")
    ap.add_argument("--episodes", type=int, default=4, help="forests (seeds first..first+N-1)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--density", type=float, default=forest.DENSITY, help="trunks per m^2")
    args = ap.parse_args(argv)
    v, acc = args.speed, forest.default_max_acc(args.speed)
    with _Recorder() as rec:
        for seed in range(args.first_seed, args.first_seed + args.episodes):
            rec.world = forest.forest_world(seed, args.density)
            rec.planner = forest.make_planner("ego", v, acc, time_scale=1000.0)
            res = run_episode(rec.world, rec.planner, forest.START, forest.GOAL,
                              RunnerConfig(timeout_s=forest.episode_timeout_s(v), seed=seed))
            s = res.summary
            print(f"seed {seed}: {s.reason}, {s.time_s:.1f} s, mean {s.mean_speed_mps:.2f} m/s", flush=True)
        limit = rec.planner._stop_limit
    rows = rec.rows
    if not rows:
        print("no plan was re-timed for never-observed space")
        return 0
    need = v * v / (2.0 * limit.decel_mps2) + v * limit.latency_s + limit.margin_m
    free = np.array([r["known_free_m"] for r in rows])
    short = [r for r in rows if r["known_free_m"] < need]
    print(f"\n{len(rows)} plans re-timed for never-observed space at {v:g} m/s; known free ahead p10 / p50 / p90 "
          f"{np.percentile(free, 10):.2f} / {np.percentile(free, 50):.2f} / {np.percentile(free, 90):.2f} m; "
          f"{len(short)} had less than the {need:.2f} m a stop from {v:g} m/s needs")
    if short:
        n = len(short)
        count = {key: sum(bool(r[key]) for r in short) for key in
                 ("across", "ahead", "occluded", "outside_h", "outside_v", "behind")}
        sample = sum(r["probe"] == 0 for r in short)
        print(f"their first unobserved point: a body probe across the path {count['across']}, ahead/behind along it "
              f"{count['ahead']}, the path sample itself {sample} (of {n})")
        print(f"  seen from the newest frame: in an obstacle's shadow {count['occluded']}, outside the horizontal field "
              f"of view {count['outside_h']}, outside the vertical one {count['outside_v']}, behind the camera "
              f"{count['behind']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
