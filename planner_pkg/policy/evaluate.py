"""Closed-loop evaluation of a policy model in the embedded simulator, in unseen worlds.

Each episode flies :class:`~planner_pkg.policy.planner.PolicyPlanner` through the simulator's
closed loop (depth camera 30 Hz, policy 15 Hz, SE(3) controller in acceleration mode on the
rigid-body quadrotor by default; ``vehicle="point_mass"`` is faster and cruder) from the
generator's start to its goal, in the world of odd seed ``eval_world_seed(first + i)``: never a
training world. Success = the goal reached without a collision within the time limit.

Two speeds per episode: ``mean_speed_mps`` (path length / flight time, take-off from rest and
the approach to the goal included: the runner's summary) and ``cruise_speed_mps``, the median
speed over the middle of the path (from 20 % to 80 % of the path length flown), which is what
"flies at the commanded speed" means. :func:`plot_results` draws success and both speeds
against the commanded speed (``policy eval --plot FILE``).

The episodes can run on several workers (``policy eval --workers N --ray-address ...``: Ray
actors of :mod:`planner_pkg.pool`); each depends only on its world seed, speed and policy, so
the results are the in-process run's.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from planner_pkg.policy.env import eval_world_seed
from planner_pkg.policy.export import LoadedPolicy, load_policy_bytes
from planner_pkg.policy.planner import PolicyPlanner, PolicyPlannerConfig

__all__ = ["EvalResult", "evaluate_policy", "evaluate_speeds", "format_results", "cruise_speed", "plot_results"]

#: The part of the path length (fractions) over which ``cruise_speed_mps`` is the median speed.
CRUISE_PATH_FRACTION = (0.2, 0.8)


@dataclass
class EvalResult:
    """Outcome of :func:`evaluate_policy` at one speed; ``episodes`` are summary dicts."""

    speed_mps: float
    vehicle: str
    episodes: List[Dict] = field(default_factory=list)
    wall_s: float = 0.0

    def _rate(self, key: str, value) -> float:
        return float(np.mean([e[key] == value for e in self.episodes])) if self.episodes else math.nan

    @property
    def success_rate(self) -> float:
        return self._rate("reached", True)

    @property
    def collision_rate(self) -> float:
        return self._rate("collided", True)

    @property
    def timeout_rate(self) -> float:
        return self._rate("reason", "timeout")

    @property
    def mean_speed_mps(self) -> float:
        done = [e["mean_speed_mps"] for e in self.episodes if e["reached"]]
        return float(np.mean(done)) if done else math.nan

    @property
    def cruise_speed_mps(self) -> float:
        """Mean over the successful episodes of each one's cruise speed (module docstring), m/s."""
        done = [e["cruise_speed_mps"] for e in self.episodes if e["reached"] and e.get("cruise_speed_mps") is not None]
        return float(np.mean(done)) if done else math.nan

    @property
    def min_clearance_m(self) -> float:
        """Mean over episodes of each episode's minimum clearance, m."""
        vals = [e["min_clearance_m"] for e in self.episodes if e["min_clearance_m"] is not None]
        return float(np.mean(vals)) if vals else math.nan

    def to_dict(self) -> Dict:
        return {
            "speed_mps": self.speed_mps, "vehicle": self.vehicle, "episodes": len(self.episodes),
            "success_rate": self.success_rate, "collision_rate": self.collision_rate,
            "timeout_rate": self.timeout_rate, "mean_speed_mps": self.mean_speed_mps,
            "cruise_speed_mps": self.cruise_speed_mps, "mean_min_clearance_m": self.min_clearance_m,
            "wall_s": self.wall_s,
        }


def evaluate_policy(
    policy: LoadedPolicy,
    episodes: int = 100,
    speed_mps: float = 3.0,
    vehicle: str = "quadrotor",
    world_kind: str = "cluttered",
    world_params: Optional[Mapping] = None,
    first_world: int = 0,
    timeout_s: Optional[float] = None,
    progress: Optional[Callable[[int, Dict], None]] = None,
    **pool,
) -> EvalResult:
    """Fly ``episodes`` closed-loop episodes at ``speed_mps``; see the module docstring.

    world_params: generator overrides (e.g. ``count``); ``start``/``goal`` come from them or the
    generator's defaults. timeout_s: per episode; default 3 x the straight-line time + 10 s.
    progress: called with (episode index, summary dict) after each episode, in episode order.
    pool: ``workers``, ``ray_address``, ``ray_init_kwargs``, ``in_process`` (:func:`evaluate_speeds`).
    """
    cb = None if progress is None else (lambda speed, i, summary: progress(i, summary))
    (result,) = evaluate_speeds(policy, [speed_mps], episodes, vehicle, world_kind, world_params, first_world,
                                timeout_s, cb, **pool)
    return result


def evaluate_speeds(
    policy: LoadedPolicy,
    speeds: Sequence[float],
    episodes: int = 100,
    vehicle: str = "quadrotor",
    world_kind: str = "cluttered",
    world_params: Optional[Mapping] = None,
    first_world: int = 0,
    timeout_s: Optional[float] = None,
    progress: Optional[Callable[[float, int, Dict], None]] = None,
    workers: int = 1,
    ray_address: str = "local",
    ray_init_kwargs: Optional[dict] = None,
    in_process: bool = False,
    calibrated: bool = True,
) -> List[EvalResult]:
    """:func:`evaluate_policy` at every speed of ``speeds``, the episodes of all speeds spread over
    ``workers`` workers of :func:`planner_pkg.pool.map_items` (Ray actors for ``workers > 1``
    when ray is installed, at ``ray_address``; in-process otherwise). Each episode depends only
    on its world seed, the speed and the policy, so the results are those of the in-process run
    whatever the worker count. ``EvalResult.wall_s`` is the sum of the episodes' own wall times
    (they overlap with several workers). progress: (speed, episode index, summary), in order.
    calibrated: apply the model's speed calibration (``PolicyPlannerConfig.speed_calibration``).
    """
    from planner_pkg.pool import map_items

    params = dict(world_params or {})
    items = [(k, i) for k in range(len(speeds)) for i in range(episodes)]
    remote = int(workers) > 1 and not in_process
    if remote:  # the workers load the model file's bytes (a runtime Model does not survive pickling)
        try:
            shipped = {"policy_bytes": Path(policy.path).read_bytes(), "policy_path": policy.path}
        except OSError as exc:
            raise ValueError(f"policy {policy.path!r} has no readable model file to send to the workers ({exc}); "
                             "export it, or evaluate it with workers=1") from None
    else:
        shipped = {"policy": policy}
    shared = {**shipped, "speeds": [float(v) for v in speeds], "vehicle": vehicle, "world_kind": world_kind,
              "world_params": params, "first_world": int(first_world), "timeout_s": timeout_s,
              "calibrated": bool(calibrated)}
    on_result = None
    if progress is not None:
        def on_result(n, out):
            k, i = items[n]
            progress(float(speeds[k]), i, out[0])

    out = map_items(_run_episode, items, workers, setup=_episode_context, shared=shared, ray_address=ray_address,
                    ray_init_kwargs=ray_init_kwargs, in_process=in_process, on_result=on_result)
    results = [EvalResult(speed_mps=float(v), vehicle=vehicle) for v in speeds]
    for (k, _), (summary, wall) in zip(items, out["results"]):
        results[k].episodes.append(summary)
        results[k].wall_s += wall
    return results


def _episode_context(shared: Dict) -> Dict:
    """What every episode of one worker shares: the start, goal, time limit, one planner per speed."""
    from planner_pkg.world import GENERATOR_PARAMS

    defaults = GENERATOR_PARAMS[shared["world_kind"]](**shared["world_params"])
    start = np.asarray(defaults.start, dtype=np.float64)
    goal = np.asarray(defaults.goal, dtype=np.float64)
    distance = float(np.linalg.norm(goal - start))
    heading = goal - start
    ctx = dict(shared, start=start, goal=goal, distance=distance, yaw=math.atan2(heading[1], heading[0]))
    policy = shared.get("policy")
    if policy is None:
        policy = load_policy_bytes(shared["policy_bytes"], shared["policy_path"])
    ctx["planners"] = [PolicyPlanner(policy, PolicyPlannerConfig(speed_mps=v, speed_calibration=shared["calibrated"]))
                       for v in shared["speeds"]]
    return ctx


def _run_episode(ctx: Dict, item) -> tuple:
    """One episode (speed index k, episode i): (its summary dict, its wall time s)."""
    from planner_pkg.sim.runner import ClosedLoopRunner, RunnerConfig
    from planner_pkg.world import generate_world

    t0 = time.perf_counter()
    k, i = item
    speed = ctx["speeds"][k]
    limit = ctx["timeout_s"] if ctx["timeout_s"] is not None else 3.0 * ctx["distance"] / speed + 10.0
    seed = eval_world_seed(ctx["first_world"] + i)
    world = generate_world(ctx["world_kind"], seed, **ctx["world_params"])
    config = RunnerConfig(timeout_s=limit, seed=seed, vehicle=ctx["vehicle"], point_cloud=False)
    runner = ClosedLoopRunner(world, ctx["planners"][k], config, planner_name="policy",
                              world_name=f"{ctx['world_kind']}:{seed}")
    episode = runner.run(ctx["start"], ctx["goal"], start_yaw=ctx["yaw"])
    summary = episode.summary.to_dict()
    summary["cruise_speed_mps"] = cruise_speed(episode.log.as_array())
    return summary, time.perf_counter() - t0


def cruise_speed(log: np.ndarray) -> Optional[float]:
    """Median speed (m/s) of a flight log (N, 7: t, x, y, z, vx, vy, vz) over the samples between
    ``CRUISE_PATH_FRACTION`` of its path length; None for a log of under two samples or no path."""
    log = np.asarray(log, dtype=np.float64)
    if log.ndim != 2 or log.shape[0] < 2 or log.shape[1] < 7:
        return None
    step = np.linalg.norm(np.diff(log[:, 1:4], axis=0), axis=1)
    travelled = np.concatenate([[0.0], np.cumsum(step)])
    total = travelled[-1]
    if not (math.isfinite(total) and total > 0):
        return None
    lo, hi = CRUISE_PATH_FRACTION
    inside = (travelled >= lo * total) & (travelled <= hi * total)
    if not inside.any():
        return None
    return float(np.median(np.linalg.norm(log[inside, 4:7], axis=1)))


def format_results(results: List[EvalResult]) -> str:
    """A plain-text table, one row per speed (speeds over the successful episodes)."""
    lines = [f"{'speed m/s':>9} {'episodes':>8} {'success':>8} {'collision':>9} {'timeout':>8} "
             f"{'mean speed':>10} {'cruise':>7} {'min clear m':>11} {'wall s':>7}"]
    for r in results:
        lines.append(f"{r.speed_mps:9.1f} {len(r.episodes):8d} {100 * r.success_rate:7.1f}% "
                     f"{100 * r.collision_rate:8.1f}% {100 * r.timeout_rate:7.1f}% {r.mean_speed_mps:10.2f} "
                     f"{r.cruise_speed_mps:7.2f} {r.min_clearance_m:11.3f} {r.wall_s:7.1f}")
    return "\n".join(lines)


def plot_results(results: List[EvalResult], path, title: str = "") -> None:
    """Write a PNG: success rate (left axis) and mean / cruise speed (right axis, with the
    commanded speed as a reference line) against the commanded speed. Needs matplotlib
    (imported here only); raises RuntimeError naming the package when it is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("the speed-success plot needs matplotlib (pip install matplotlib)") from None
    from pathlib import Path

    rs = sorted(results, key=lambda r: r.speed_mps)
    cmd = np.array([r.speed_mps for r in rs])
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    ax.plot(cmd, [100 * r.success_rate for r in rs], "o-", color="tab:green", label="success %")
    ax.plot(cmd, [100 * r.collision_rate for r in rs], "x--", color="tab:red", label="collision %")
    ax.set_xlabel("commanded speed, m/s")
    ax.set_ylabel("episodes, %")
    ax.set_ylim(0, 105)
    ax2 = ax.twinx()
    ax2.plot(cmd, [r.mean_speed_mps for r in rs], "s-", color="tab:blue", label="mean speed (path / time)")
    ax2.plot(cmd, [r.cruise_speed_mps for r in rs], "^-", color="tab:purple", label="cruise speed (median, mid-path)")
    ax2.plot(cmd, cmd, ":", color="gray", label="commanded")
    ax2.set_ylabel("flown speed, m/s")
    ax2.set_ylim(0, 1.1 * max(float(cmd.max()), 1.0))
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="lower left")
    n = {len(r.episodes) for r in rs}
    ax.set_title(title or f"policy: {rs[0].vehicle if rs else ''}, {'/'.join(map(str, sorted(n)))} episodes per speed",
                 fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
