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
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional

import numpy as np

from planner_pkg.policy.env import eval_world_seed
from planner_pkg.policy.export import LoadedPolicy
from planner_pkg.policy.planner import PolicyPlanner, PolicyPlannerConfig

__all__ = ["EvalResult", "evaluate_policy", "format_results", "cruise_speed", "plot_results"]

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
) -> EvalResult:
    """Fly ``episodes`` closed-loop episodes at ``speed_mps``; see the module docstring.

    world_params: generator overrides (e.g. ``count``); ``start``/``goal`` come from them or the
    generator's defaults. timeout_s: per episode; default 3 x the straight-line time + 10 s.
    progress: called with (episode index, summary dict) after each episode.
    """
    from planner_pkg.sim.runner import ClosedLoopRunner, RunnerConfig
    from planner_pkg.world import GENERATOR_PARAMS, generate_world

    params = dict(world_params or {})
    defaults = GENERATOR_PARAMS[world_kind](**params)
    start = np.asarray(defaults.start, dtype=np.float64)
    goal = np.asarray(defaults.goal, dtype=np.float64)
    distance = float(np.linalg.norm(goal - start))
    limit = timeout_s if timeout_s is not None else 3.0 * distance / speed_mps + 10.0
    heading = goal - start
    yaw = math.atan2(heading[1], heading[0])
    result = EvalResult(speed_mps=float(speed_mps), vehicle=vehicle)
    wall0 = time.perf_counter()
    planner = PolicyPlanner(policy, PolicyPlannerConfig(speed_mps=speed_mps))
    for i in range(episodes):
        seed = eval_world_seed(first_world + i)
        world = generate_world(world_kind, seed, **params)
        config = RunnerConfig(timeout_s=limit, seed=seed, vehicle=vehicle, point_cloud=False)
        runner = ClosedLoopRunner(world, planner, config, planner_name="policy", world_name=f"{world_kind}:{seed}")
        episode = runner.run(start, goal, start_yaw=yaw)
        summary = episode.summary.to_dict()
        summary["cruise_speed_mps"] = cruise_speed(episode.log.as_array())
        result.episodes.append(summary)
        if progress is not None:
            progress(i, summary)
    result.wall_s = time.perf_counter() - wall0
    return result


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
