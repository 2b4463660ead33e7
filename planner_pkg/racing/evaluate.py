"""Fly racing policies on tracks: laps, gates in order, lap times, crash; flight logs.

A policy here is any ``act(obs (N, D)) -> actions (N, 4)`` callable (the exported model's
:meth:`~planner_pkg.racing.export.LoadedRacer.act`, or the trainer's NumPy mean policy). The
vehicle starts hovering at the track's start facing the first gate; it must pass every gate in
order for ``laps`` laps. Lap k's time runs from the end of lap k-1 (the start, for lap 1) to the
pass of the lap's last gate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

import numpy as np

from planner_pkg.racing.env import CRASH_NAMES, RaceEnv
from planner_pkg.racing.track import Track, random_track

__all__ = ["FlightResult", "fly_tracks", "eval_tracks", "EVAL_SEED_OFFSET", "summarize"]

#: Evaluation tracks come from generator seeds [EVAL_SEED_OFFSET, k]; training draws tracks from
#: [seed, worker, 0] streams, so evaluation tracks are unseen.
EVAL_SEED_OFFSET = 1_000_000_007


@dataclass
class FlightResult:
    track: Track
    laps: int
    gates_passed: int = 0
    lap_times_s: List[float] = field(default_factory=list)
    crash: Optional[str] = None
    time_s: float = 0.0
    path_length_m: float = 0.0
    log: Optional[np.ndarray] = None  # (T, 7) t, x, y, z, vx, vy, vz

    @property
    def success(self) -> bool:
        return self.crash is None and self.gates_passed >= self.laps * len(self.track)

    @property
    def mean_speed_mps(self) -> float:
        return self.path_length_m / self.time_s if self.time_s > 0 else 0.0

    def summary(self) -> dict:
        return {"success": self.success, "gates_passed": self.gates_passed, "gates_total": self.laps * len(self.track),
                "laps_completed": len(self.lap_times_s), "laps": self.laps,
                "lap_times_s": [round(t, 3) for t in self.lap_times_s], "crash": self.crash is not None,
                "crash_reason": self.crash, "time_s": round(self.time_s, 3),
                "path_length_m": round(self.path_length_m, 3), "mean_speed_mps": round(self.mean_speed_mps, 3)}


def eval_tracks(count: int, track_cfg, first: int = 0) -> List[Track]:
    """``count`` unseen random tracks (seeds [EVAL_SEED_OFFSET, first + k])."""
    return [random_track(np.random.default_rng([EVAL_SEED_OFFSET, first + k]), track_cfg) for k in range(count)]


def fly_tracks(act: Callable[[np.ndarray], np.ndarray], tracks: Sequence[Track], env_cfg, laps: int = 2,
               timeout_s: Optional[float] = None, log: bool = False) -> List[FlightResult]:
    """Fly every track at once (one vehicle each) until all finished, crashed or timed out.

    timeout_s: default 12 s per lap plus 5 s.
    """
    n = len(tracks)
    timeout_s = timeout_s if timeout_s is not None else 12.0 * laps + 5.0
    env = RaceEnv(env_cfg, n, np.random.default_rng(0), tracks=list(tracks), train=False, laps=laps,
                  episode_s=timeout_s)
    results = [FlightResult(track=t, laps=laps) for t in tracks]
    dt = env_cfg.quad.dt_s
    obs = env.observe()
    last_lap_end = np.zeros(n)
    rows: List[np.ndarray] = []
    if log:
        rows.append(np.concatenate([np.zeros((n, 1)), env.state.pos, env.state.vel], axis=1))
    step = 0
    while not env.done.all():
        active = ~env.done
        p_before = env.state.pos.copy()
        obs, _, term, trunc, info = env.step(act(obs))
        step += 1
        t = step * dt
        for i in np.flatnonzero(active):
            r = results[i]
            r.path_length_m += float(np.linalg.norm(env.state.pos[i] - p_before[i]))
            r.time_s = t
            if info["passed_gate"][i]:
                r.gates_passed = int(env.passed[i])
                if r.gates_passed % len(r.track) == 0:
                    r.lap_times_s.append(float(t - last_lap_end[i]))
                    last_lap_end[i] = t
            if info["crash"][i]:
                r.crash = CRASH_NAMES[int(info["crash"][i])]
            elif trunc[i]:
                r.crash = None
        if log:
            rows.append(np.concatenate([np.full((n, 1), t), env.state.pos, env.state.vel], axis=1))
    if log:
        stack = np.stack(rows, axis=1)  # (n, T, 7)
        for i, r in enumerate(results):
            steps_i = int(round(r.time_s / dt)) + 1
            r.log = stack[i, :steps_i]
    return results


def summarize(results: Sequence[FlightResult]) -> dict:
    """Success rate, mean speed (successful flights), mean lap time, crash counts."""
    ok = [r for r in results if r.success]
    laps = [t for r in ok for t in r.lap_times_s]
    crashes = {}
    for r in results:
        if r.crash:
            crashes[r.crash] = crashes.get(r.crash, 0) + 1
    return {"tracks": len(results), "success_rate": len(ok) / max(len(results), 1),
            "mean_speed_mps": float(np.mean([r.mean_speed_mps for r in ok])) if ok else 0.0,
            "mean_speed_all_mps": float(np.mean([r.mean_speed_mps for r in results])) if results else 0.0,
            "mean_lap_s": float(np.mean(laps)) if laps else float("nan"),
            "gates_frac": float(np.mean([min(r.gates_passed / (r.laps * len(r.track)), 1.0) for r in results])),
            "crashes": crashes}
