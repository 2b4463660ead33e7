"""Closed-loop evaluation of a policy model in the embedded simulator, in unseen worlds.

Each episode flies :class:`~planner_pkg.policy.planner.PolicyPlanner` through the simulator's
closed loop (depth camera 30 Hz, policy 15 Hz, SE(3) controller in acceleration mode on the
rigid-body quadrotor by default; ``vehicle="point_mass"`` is faster and cruder) from the
generator's start to its goal, in the world of odd seed ``eval_world_seed(first + i)``: never a
training world. Success = the goal reached without a collision within the time limit.
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

__all__ = ["EvalResult", "evaluate_policy", "format_results"]


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
    def min_clearance_m(self) -> float:
        """Mean over episodes of each episode's minimum clearance, m."""
        vals = [e["min_clearance_m"] for e in self.episodes if e["min_clearance_m"] is not None]
        return float(np.mean(vals)) if vals else math.nan

    def to_dict(self) -> Dict:
        return {
            "speed_mps": self.speed_mps, "vehicle": self.vehicle, "episodes": len(self.episodes),
            "success_rate": self.success_rate, "collision_rate": self.collision_rate,
            "timeout_rate": self.timeout_rate, "mean_speed_mps": self.mean_speed_mps,
            "mean_min_clearance_m": self.min_clearance_m, "wall_s": self.wall_s,
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
        summary = runner.run(start, goal, start_yaw=yaw).summary.to_dict()
        result.episodes.append(summary)
        if progress is not None:
            progress(i, summary)
    result.wall_s = time.perf_counter() - wall0
    return result


def format_results(results: List[EvalResult]) -> str:
    """A plain-text table, one row per speed."""
    lines = [f"{'speed m/s':>9} {'episodes':>8} {'success':>8} {'collision':>9} {'timeout':>8} "
             f"{'mean speed':>10} {'min clear m':>11} {'wall s':>7}"]
    for r in results:
        lines.append(f"{r.speed_mps:9.1f} {len(r.episodes):8d} {100 * r.success_rate:7.1f}% "
                     f"{100 * r.collision_rate:8.1f}% {100 * r.timeout_rate:7.1f}% {r.mean_speed_mps:10.2f} "
                     f"{r.min_clearance_m:11.3f} {r.wall_s:7.1f}")
    return "\n".join(lines)
