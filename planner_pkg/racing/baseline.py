"""A time-optimal-ish reference lap: the periodic minimum-snap trajectory through the gate centres,
time-scaled to the vehicle's thrust limit (with its drag).

Through waypoints w_0..w_{n-1} (the gate centres, closed into a loop) with segment durations
T_i, the minimum-snap trajectory is the periodic degree-7 spline with C6 continuity (the Euler-
Lagrange condition of  min int |d^4 p / dt^4|^2 dt): 8 coefficients per segment and axis, fixed by
the 2 position and 6 continuity conditions per waypoint, one linear solve per axis.

Timing: scaling every duration by k scales accelerations by 1/k^2, and velocities by 1/k, so the smallest k
at which the collective thrust |a + g e3 + D v| stays within ``[min_thrust, max_thrust]`` is found by bisection; the
split of the lap between segments starts proportional to distance and is refined by coordinate
search (each trial re-solved and re-scaled), keeping the fastest feasible lap. The baseline
ignores body-rate limits, gate normals and the frames (it flies through the centres in any
direction): a fast reference, not a flyable plan, for the policy's lap-time ratio. It is not a
lower bound: the waypoints are the centres (a racer cuts through the openings off-centre) and
the time split is only locally optimal; the shipped policy's lap 2 is 0.97 x it (median over 100
tracks, docs/racing.md). Moving the waypoints inside the openings by the same search was tried:
4x the run time, and the search then sometimes ended in a slower local minimum.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Tuple

import numpy as np

__all__ = ["BaselineError", "BaselineLap", "min_snap_loop", "baseline_lap_time"]

_DEG = 7
_NC = _DEG + 1
_FACT = np.array([[math.factorial(j) / math.factorial(j - k) if j >= k else 0.0 for j in range(_NC)]
                  for k in range(_NC)])


class BaselineError(ValueError):
    """The baseline cannot be computed for this track (too few distinct gates)."""


@dataclass
class BaselineLap:
    lap_time_s: float
    length_m: float
    durations_s: np.ndarray
    coeffs: np.ndarray  # (n, 8, 3), local time s in [0, 1]

    @property
    def mean_speed_mps(self) -> float:
        return self.length_m / self.lap_time_s


def _row(k: int, s: float, T: float) -> np.ndarray:
    """Coefficients' weights of the k-th time derivative at local time s of a segment of length T."""
    powers = np.array([s ** (j - k) if j >= k else 0.0 for j in range(_NC)])
    return _FACT[k] * powers / T ** k


def min_snap_loop(waypoints: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """(n, 8, 3) coefficients of the periodic minimum-snap spline through ``waypoints`` (n, 3)."""
    n = len(waypoints)
    a = np.zeros((_NC * n, _NC * n))
    b = np.zeros((_NC * n, 3))
    r = 0
    for i in range(n):
        j = (i + 1) % n
        a[r, _NC * i:_NC * (i + 1)] = _row(0, 0.0, durations[i]); b[r] = waypoints[i]; r += 1
        a[r, _NC * i:_NC * (i + 1)] = _row(0, 1.0, durations[i]); b[r] = waypoints[j]; r += 1
        for k in range(1, _DEG):
            a[r, _NC * i:_NC * (i + 1)] += _row(k, 1.0, durations[i])
            a[r, _NC * j:_NC * (j + 1)] -= _row(k, 0.0, durations[j])
            r += 1
    try:
        c = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise BaselineError("the minimum-snap system is singular (repeated gates?)") from None
    return c.reshape(n, _NC, 3)


def _sample(coeffs, durations, k: int, m: int = 60) -> np.ndarray:
    s = np.linspace(0.0, 1.0, m)
    out = []
    for i in range(len(durations)):
        w = np.stack([_row(k, si, durations[i]) for si in s])  # (m, 8)
        out.append(w @ coeffs[i])
    return np.concatenate(out)


def _time_scale(coeffs, durations, quad) -> float:
    """Smallest k with min_thrust <= |a / k^2 + g e3 + D v / k| <= max_thrust along the trajectory
    (D: the vehicle's linear drag, its body x/y value horizontally and z value vertically)."""
    acc = _sample(coeffs, durations, 2)
    drag = np.array([quad.drag_per_s[0], quad.drag_per_s[1], quad.drag_per_s[2]]) * _sample(coeffs, durations, 1)
    g = np.array([0.0, 0.0, quad.gravity_mps2])

    def ok(k):
        f = np.linalg.norm(acc / k ** 2 + drag / k + g, axis=1)
        return f.max() <= quad.max_thrust_mps2 and f.min() >= quad.min_thrust_mps2

    lo, hi = 1e-3, 1.0
    while not ok(hi):
        hi *= 2.0
        if hi > 1e6:
            raise BaselineError("no time scaling keeps the thrust within its limits")
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def _length(coeffs, durations) -> float:
    p = _sample(coeffs, durations, 0, 200)
    return float(np.sum(np.linalg.norm(np.diff(p, axis=0), axis=1)))


def _lap(waypoints, durations, quad) -> Tuple[float, np.ndarray, np.ndarray]:
    c = min_snap_loop(waypoints, durations)
    k = _time_scale(c, durations, quad)
    d = durations * k
    return float(d.sum()), d, min_snap_loop(waypoints, d)


def baseline_lap_time(track, quad, rounds: int = 6) -> BaselineLap:
    """The baseline lap of ``track`` for the vehicle ``quad`` (QuadConfig); module docstring."""
    w = np.array([g.center for g in track.gates], dtype=np.float64)
    if len(w) < 2:
        raise BaselineError("a lap needs at least 2 gates for the minimum-snap baseline")
    dist = np.linalg.norm(np.roll(w, -1, axis=0) - w, axis=1)
    if dist.min() < 1e-6:
        raise BaselineError("two consecutive gates share a centre")
    best_t, best_d, best_c = _lap(w, dist / dist.sum(), quad)
    step = 0.2
    for _ in range(rounds):
        improved = False
        for i in range(len(w)):
            for f in (1.0 + step, 1.0 - step):
                d = best_d.copy()
                d[i] *= f
                t, dd, c = _lap(w, d / d.sum(), quad)
                if t < best_t - 1e-9:
                    best_t, best_d, best_c, improved = t, dd, c, True
        if not improved:
            step *= 0.5
    return BaselineLap(lap_time_s=best_t, length_m=_length(best_c, best_d), durations_s=best_d, coeffs=best_c)
