"""Local target selection and the initial B-spline the rebound optimiser starts from.

EGO-Planner plans toward a *local target* at most ``planning_horizon`` ahead on the global path
(here the straight line from the mission start to the goal). The initial guess is either
- a minimum-jerk quintic from the start state to the target (first plan, or after a failure), or
- the previous trajectory from now on, extended by a straight line to the new target (keeps the
  side chosen around each obstacle, which stops the planner from oscillating between sides);
sampled every knot interval and fitted to a cubic B-spline with the boundary derivatives.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from planner_pkg.planning.bspline import UniformBSpline, fit_cubic

__all__ = ["trapezoid_time", "quintic_samples", "local_target", "initial_spline", "shortcut", "guided_spline"]

MIN_SAMPLES = 7  # EGO keeps at least 7 sample points (10 control points with the fixed ends)
_RETIME_SAMPLES = 120  # samples of a reused path to re-time it (every ~0.06 m of a 7.5 m plan)


def trapezoid_time(distance_m: float, max_vel: float, max_acc: float) -> float:
    """Rest-to-rest time, s, over ``distance_m`` with a trapezoidal speed profile."""
    if distance_m <= 0:
        return 0.0
    if max_vel * max_vel / max_acc > distance_m:
        return 2.0 * math.sqrt(distance_m / max_acc)
    return distance_m / max_vel + max_vel / max_acc


def quintic_samples(p0, v0, a0, p1, v1, a1, duration: float, times: np.ndarray) -> np.ndarray:
    """Positions (T, 3) at ``times`` (s) of the per-axis quintic matching position, velocity and
    acceleration at both ends (the minimum-jerk interpolant)."""
    T = float(duration)
    p0, v0, a0, p1, v1, a1 = (np.asarray(x, dtype=np.float64) for x in (p0, v0, a0, p1, v1, a1))
    # c0..c2 from the start state; c3..c5 solve the end conditions
    c0, c1, c2 = p0, v0, 0.5 * a0
    m = np.array([[T ** 3, T ** 4, T ** 5], [3 * T ** 2, 4 * T ** 3, 5 * T ** 4], [6 * T, 12 * T ** 2, 20 * T ** 3]])
    rhs = np.stack([p1 - (c0 + c1 * T + c2 * T * T), v1 - (c1 + 2 * c2 * T), a1 - 2 * c2])
    c3, c4, c5 = np.linalg.solve(m, rhs)
    t = np.asarray(times, dtype=np.float64)[:, None]
    return c0 + t * (c1 + t * (c2 + t * (c3 + t * (c4 + t * c5))))


def local_target(position, mission_start, goal, horizon_m: float) -> Tuple[np.ndarray, bool]:
    """(target (3,), is_goal): the goal if within ``horizon_m`` of ``position``, else the point of
    the segment mission_start -> goal farthest along it that is ``horizon_m`` from ``position``
    (or the segment's closest point pushed ``horizon_m`` toward the goal when the vehicle is
    farther than the horizon from the segment)."""
    p = np.asarray(position, dtype=np.float64)
    a = np.asarray(mission_start, dtype=np.float64)
    g = np.asarray(goal, dtype=np.float64)
    if np.linalg.norm(g - p) <= horizon_m:
        return g.copy(), True
    d = g - a
    length = float(np.linalg.norm(d))
    if length < 1e-9:
        return g.copy(), True
    u = d / length
    # solve |a + s u - p| = horizon for the larger s
    w = a - p
    b = float(w @ u)
    disc = b * b - (float(w @ w) - horizon_m * horizon_m)
    if disc >= 0:
        s = -b + math.sqrt(disc)
    else:
        s = -b + horizon_m  # off the segment by more than the horizon: aim along it
    s = min(max(s, 0.0), length)
    target = a + s * u
    if np.linalg.norm(target - p) > horizon_m * 1.001:
        # clamp the chord to the horizon so the initial path never exceeds it
        target = p + (target - p) * (horizon_m / float(np.linalg.norm(target - p)))
    return target, bool(s >= length - 1e-9)


def _segment_time(distance: float, v_in: float, v_out: float, max_vel: float, max_acc: float) -> float:
    """Time, s, to cover ``distance`` m cruising at ``max_vel`` plus what speeding up from
    ``v_in`` and slowing to ``v_out`` (m/s) costs (the trapezoid's time when both are 0)."""
    loss = (max(0.0, max_vel - v_in) + max(0.0, max_vel - v_out)) / (2.0 * max_acc)
    return max(distance / max_vel + loss, 1e-2)


def _retimed_path(previous, t_now: float, speed0: float, max_vel: float, acc: float, knot_dt: float):
    """Points (K, 3) every ``knot_dt`` along the path of ``previous`` from ``t_now`` to its end,
    flown with a new timing: at each point the faster of the old timing and a speed-up from
    ``speed0`` at ``acc`` m/s^2 to ``max(max_vel, speed0)``; and the path's end point. None when
    the rest of the path is too short to re-time."""
    ts = np.linspace(t_now, previous.t_end, _RETIME_SAMPLES)
    pts = previous.positions(ts)
    seg = np.sqrt((np.diff(pts, axis=0) ** 2).sum(axis=1))
    s = np.concatenate([[0.0], np.cumsum(seg)])
    if s[-1] < 1e-3:
        return None
    old = np.concatenate([[speed0], seg / np.maximum(np.diff(ts), 1e-12)])
    speed = np.maximum(old, np.minimum(max(max_vel, speed0), np.sqrt(speed0 * speed0 + 2.0 * acc * s)))
    t = np.concatenate([[0.0], np.cumsum(2.0 * seg / np.maximum(speed[1:] + speed[:-1], 1e-9))])
    at = np.interp(np.arange(int(math.floor(t[-1] / knot_dt)) + 1) * knot_dt, t, s)
    return np.stack([np.interp(at, s, pts[:, i]) for i in range(3)], axis=1), pts[-1]


def initial_spline(p0, v0, a0, target, target_vel, max_vel: float, max_acc: float, knot_dt: float,
                   previous=None, t_now: float = 0.0, via=None,
                   reuse_acc_mps2: float = 0.0) -> Optional[UniformBSpline]:
    """The initial cubic B-spline from the start state to ``target`` (3,) m with ``target_vel``.

    previous: a trajectory with ``state(t)``, ``positions(ts)``, ``t_end`` (absolute time) to
        reuse from ``t_now``, or None for a quintic. Returns None when the target is
        (numerically) at the start and the vehicle is at rest: there is nothing to plan.
    via: (3,) m, an intermediate point for the quintic guess (EGO's random-waypoint retry: a
        different initial guess leads the optimiser into a different local minimum); it is
        passed at cruise speed toward the target. Ignored when ``previous`` is reused.
    reuse_acc_mps2: > 0: the reused path of ``previous`` is re-timed to speed up at this
        acceleration toward ``max_vel`` (never slower than its own timing) when the target is
        passed moving (``target_vel`` not zero). EGO (0) keeps the previous timing, so a plan
        slowed by the refine step for one swerve hands that slower timing on to every replan
        that reuses it, and only the new part toward the target comes at cruise speed.
    """
    p0, v0, a0 = (np.asarray(x, dtype=np.float64) for x in (p0, v0, a0))
    target = np.asarray(target, dtype=np.float64)
    target_vel = np.asarray(target_vel, dtype=np.float64)
    dist = float(np.linalg.norm(target - p0))
    speed0 = float(np.linalg.norm(v0))
    if dist < 1e-3 and speed0 < 1e-3:
        return None
    end_acc = np.zeros(3)
    if previous is not None and previous.t_end - t_now > 2 * knot_dt:
        dt = knot_dt
        cruise = max(float(np.linalg.norm(target_vel)), 0.5 * max_vel)
        retimed = (_retimed_path(previous, t_now, speed0, max_vel, reuse_acc_mps2, dt)
                   if reuse_acc_mps2 > 0 and float(np.linalg.norm(target_vel)) > 0 else None)
        if retimed is not None:
            # the re-timed samples, then the rest of the path (less than one interval) and the
            # straight line to the target, at cruise spacing
            reused, tail = retimed
            chain = np.vstack([reused[-1:], tail[None], target[None]])
            chain_s = np.concatenate([[0.0], np.cumsum(np.sqrt((np.diff(chain, axis=0) ** 2).sum(axis=1)))])
            n_extra = max(int(math.ceil(chain_s[-1] / (cruise * dt))), 1)
            at = chain_s[-1] * np.arange(1, n_extra + 1) / n_extra
            extra = np.stack([np.interp(at, chain_s, chain[:, i]) for i in range(3)], axis=1)
            points = np.vstack([reused, extra])
        else:
            ts = np.arange(t_now, previous.t_end, dt)
            pts = [previous.state(t)[0] for t in ts]
            tail = previous.state(previous.t_end)[0]
            gap = float(np.linalg.norm(target - tail))
            n_extra = int(math.ceil(gap / (cruise * dt))) if gap > 1e-3 else 0
            if n_extra:
                s = np.arange(1, n_extra + 1) / n_extra
                pts.extend(tail + s[:, None] * (target - tail))
            else:
                pts.append(target)
            points = np.asarray(pts)
        points[-1] = target
        if points.shape[0] >= MIN_SAMPLES:
            return fit_cubic(points, dt, v0, target_vel, a0, end_acc)
    # quintic pieces through the waypoints, timed by _segment_time
    end_speed = float(np.linalg.norm(target_vel))
    if via is None:
        knots = [(p0, v0, a0), (target, target_vel, end_acc)]
    else:
        via = np.asarray(via, dtype=np.float64)
        u = target - p0
        u = u / max(float(np.linalg.norm(u)), 1e-9)
        knots = [(p0, v0, a0), (via, u * max_vel, np.zeros(3)), (target, target_vel, end_acc)]
    durations = []
    for i in range(len(knots) - 1):
        d = float(np.linalg.norm(knots[i + 1][0] - knots[i][0]))
        v_in = speed0 if i == 0 else max_vel
        v_out = end_speed if i == len(knots) - 2 else max_vel
        durations.append(max(_segment_time(d, v_in, v_out, max_vel, max_acc), speed0 / max_acc if i == 0 else 0.0))
    total = float(sum(durations))
    k = max(MIN_SAMPLES, int(math.ceil(total / knot_dt)) + 1)
    dt = total / (k - 1)
    times = np.arange(k) * dt
    points = np.empty((k, 3))
    t_begin = 0.0
    for i, dur in enumerate(durations):
        last = i == len(durations) - 1
        sel = (times >= t_begin - 1e-12) & ((times <= t_begin + dur + 1e-9) if last else (times < t_begin + dur))
        (pa, va, aa), (pb, vb, ab) = knots[i], knots[i + 1]
        points[sel] = quintic_samples(pa, va, aa, pb, vb, ab, dur, times[sel] - t_begin)
        t_begin += dur
    points[-1] = target
    return fit_cubic(points, dt, v0, target_vel, a0, end_acc)


def shortcut(grid_map, path: np.ndarray, step_m: float = 0.05) -> np.ndarray:
    """String-pull a guide path (K, 3) m: keep a vertex only where the straight line from the
    previous kept vertex to the next one would hit a blocked voxel. Vectorised per kept vertex
    (all candidate chords are tested at once); at most K rounds."""
    path = np.asarray(path, dtype=np.float64)
    k = path.shape[0]
    if k <= 2:
        return path.copy()
    kept = [0]
    i = 0
    while i < k - 1:
        cand = np.arange(i + 1, k)
        chord = path[cand] - path[i]
        length = np.sqrt((chord * chord).sum(axis=1))
        m = max(2, int(np.ceil(float(length.max()) / step_m)) + 1)
        s = np.linspace(0.0, 1.0, m)
        pts = path[i] + chord[:, None, :] * s[None, :, None]
        free = ~grid_map.is_blocked(pts.reshape(-1, 3)).reshape(cand.shape[0], m).any(axis=1)
        free[0] = True  # consecutive guide-path vertices are connected by construction
        j = int(cand[np.nonzero(free)[0].max()])
        kept.append(j)
        i = j
    return path[kept]


def guided_spline(path: np.ndarray, v0, a0, target_vel, max_vel: float, max_acc: float,
                  knot_dt: float, slow_down: bool = False) -> Optional[UniformBSpline]:
    """An initial guess along a (shortcut) guide path (K, 3) m from the start state to the
    target: cruise speed ``max_vel`` reached from ``|v0|`` at 0.7 ``max_acc``, slowing to
    ``|target_vel|``, sampled every (about) ``knot_dt`` s and fitted with the exact boundary
    states. None when the path has no length. slow_down: a start faster than ``max_vel`` slows
    to it at 0.7 ``max_acc`` along the path (otherwise the samples are spaced for ``max_vel``
    from the start, and only the fitted end conditions keep ``v0``)."""
    path = np.asarray(path, dtype=np.float64)
    seg = np.sqrt((np.diff(path, axis=0) ** 2).sum(axis=1))
    length = float(seg.sum())
    if length < 1e-3:
        return None
    s_vertex = np.concatenate([[0.0], np.cumsum(seg)])
    s = np.linspace(0.0, length, max(int(np.ceil(length / 0.05)) + 1, 8))
    v0 = np.asarray(v0, dtype=np.float64)
    target_vel = np.asarray(target_vel, dtype=np.float64)
    a = 0.7 * max_acc
    cruise = np.maximum(max_vel, np.sqrt(np.maximum(float(v0 @ v0) - 2.0 * a * s, 0.0))) if slow_down else max_vel
    speed = np.minimum(cruise, np.sqrt(float(v0 @ v0) + 2.0 * a * s))
    speed = np.minimum(speed, np.sqrt(float(target_vel @ target_vel) + 2.0 * a * (length - s)))
    speed = np.maximum(speed, 1e-3)
    t = np.concatenate([[0.0], np.cumsum(2.0 * np.diff(s) / (speed[1:] + speed[:-1]))])
    total = float(t[-1])
    k = max(MIN_SAMPLES, int(round(total / knot_dt)) + 1)
    dt = total / (k - 1)
    s_k = np.interp(np.arange(k) * dt, t, s)
    pts = np.stack([np.interp(s_k, s_vertex, path[:, i]) for i in range(3)], axis=1)
    pts[0], pts[-1] = path[0], path[-1]
    return fit_cubic(pts, dt, v0, target_vel, a0, np.zeros(3))
