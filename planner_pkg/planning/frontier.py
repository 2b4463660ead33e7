"""Stop before never-observed space: the committed trajectory is re-timed so the vehicle can always
stop inside space its sensors have seen to be free.

EGO-Planner plans through unknown space as if it were free and counts on seeing an obstacle in
time. Beyond the camera's range, outside its field of view and in the shadow behind an obstacle
that is a bet on the next frames; a wall just past the range at take-off is met at full speed.
Fast-Planner / RAPTOR-style planners keep the committed trajectory in known free space instead.
Here the optimiser is left alone (unknown space stays free for it, so it still plans long and
smooth paths); the *timing* of its result is limited afterwards:

1. The path is sampled every ``step_m``. A path that ends moving (at its local target, at
   cruise speed; after the end the vehicle brakes along that line) is continued straight on
   along its end velocity for as far as a stop from its top speed ``v_top`` needs
   (``v_top^2 / (2 a_b) + v_top t_l + margin``); a path that ends at rest (the goal) is its own
   stop and is continued by the margin only.
2. ``s_f`` is the arc length of the last sample before the first one that is not *known free*:
   blocked in the map (inflated obstacle, floor, ceiling), or never observed at the sample or at
   one of six probes ``inflation_m`` away along the axes (the vehicle's body). Observed means:
   a voxel some ray passed through, or a point a recent depth frame saw as free
   (:class:`~planner_pkg.planning.visibility.DepthHistory`: the rays of a small image leave
   gaps). Two exemptions: never-observed space within ``start_radius_m`` of the start (the
   vehicle is there; its camera cannot see beside or below itself) and a blocked stretch
   the path starts in (a start inside an inflated obstacle: that stretch is the way out).
3. The vehicle must be able to stop short of ``s_f`` from every point, braking at ``a_b`` after
   a latency ``t_l``, with a margin: ``v t_l + v^2 / (2 a_b) + margin <= s_f - s``. The speed
   profile ``min(v_plan(s), sqrt(2 a_b (s_stop - s)))`` with
   ``s_stop = s_f - margin - v_l t_l`` satisfies it when ``v_l`` is at least the highest speed
   of that profile (the plan's top speed ``v_top`` always is; the smallest such ``v_l`` is found
   by bisection, see :func:`_stop_point`: a vehicle creeping up to a frontier then stops
   ``t_l x its own speed`` short of it, not ``t_l x the cruise speed``) and is itself a braking
   curve: the trajectory follows its path at the planned speed until the cap binds, brakes at
   ``a_b`` and ends at rest at ``s_stop``. Where the start speed cannot stop
   that early (``v0^2 / (2 a_b) > s_stop``) it brakes at the full ``max_acc`` instead, stops as
   soon as that allows, and says so. With ``turn_braking`` (off by default) the braking along a
   curved path shares the deceleration with the turn: the cap is integrated backward from the stop with
   the tangential deceleration ``sqrt(a_b^2 - (v^2 kappa)^2)`` (at least ``a_b / 2``), so the
   re-timed reference's *total* acceleration stays within ``a_b`` where the path allows it;
   without it, braking at 8 m/s^2 in a turn asks for up to 9.9 m/s^2 in all (the controller is
   tilt-limited to ~9.8 m/s^2). Measured in the forest it cost speed and bought no clearance,
   hence off (see the option's description).
4. With ``braking_jerk_time_s`` (default 0.1 s) the braking's onset is jerk-limited: where the
   cap binds the plan's tangential acceleration (up to +max_acc while it speeds up) would step to
   ``-a_b`` within one sample, a step the vehicle's attitude cannot follow (it lags the
   reference). The braking instead begins at the last path sample from which a stop whose
   acceleration ramps from the plan's to ``-a_b`` at ``max_acc / braking_jerk_time_s`` still ends
   by ``s_stop`` (:func:`_ramp_stop_distance`, closed form), and the profile is ``min(v_plan, that
   ramp then a_b to rest)``: it stops at most one sample short of ``s_stop`` and stays under the cap.

When everything checked in 1. is known free the cap cannot bind (``s_stop - s >= v_top^2 /
(2 a_b)`` on the whole path) and the trajectory is returned unchanged, the same object: in
observed free space the plan is EGO's, to the bit. Otherwise, where the cap binds,
:class:`StopLimitedTrajectory` keeps the path exactly (no refit: the collision-checked curve is
the one flown) and replaces the timing after ``t_warp``, before which it is identical to the
plan; a path ending at rest is never stopped beyond its end.

A map fed only point clouds cannot tell free space from never-observed space (a cloud has no
rays to nothing); :class:`~planner_pkg.planning.ego_planner.EgoPlanner` applies the cap only once
it has fused a depth image, whose no-return pixels clear space out to the camera's range.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from planner_pkg.config_schema import Config, Schema, setting
from planner_pkg.planning.collision_pairs import curve_collision_time
from planner_pkg.planning.trajectory import BsplineTrajectory, HeadingProfile
from planner_pkg.types import Setpoint

__all__ = ["UnknownSpaceConfig", "StopLimit", "FrontierReport", "StopLimitedTrajectory", "limit_to_known_space",
           "brake_before", "observed"]

_SCHEMA = Schema(sep=" ")
_SPEED_TOL = 1e-9  # m/s: the plan's speed may touch the cap
_REST_MPS = 1e-3  # m/s: a plan ending slower than this ends at rest (the goal)
_BISECTIONS = 14  # the latency speed to v_top / 16000
_JERK_STEP_S = 0.005  # central-difference step of the braking's jerk (StopLimitedTrajectory.sample), s


@dataclass(frozen=True)
class UnknownSpaceConfig(Config, schema=_SCHEMA, prefix="EgoConfig.unknown_space."):
    """How the EGO planner treats space its sensors never observed (see :mod:`.frontier`)."""

    stop_before_unknown: bool = setting(True, description=(
        "re-time the committed trajectory so the vehicle can always stop before never-observed or blocked "
        "space (needs depth images; with point clouds only the map cannot tell free from unobserved and the "
        "planner flies with unknown = free, EGO's behaviour, and says so)"))
    decel_fraction: float = setting(0.7, range=(0.0, 1.0), low_open=True, description=(
        "the planned braking before unknown space uses this fraction of max_acc_mps2 (the rest is left for "
        "tracking and turning)"))
    margin_m: float = setting(0.3, range=(0.0, 10.0), description=(
        "the planned stop is this far short of the first unobserved or blocked point, m"))
    latency_s: float = setting(0.15, range=(0.0, 2.0), description=(
        "time from a new depth frame to the vehicle following a new plan (frame period, planner tick, "
        "tracking lag); the stop moves top speed x this closer, s"))
    start_radius_m: float = setting(0.5, range=(0.0, 5.0), description=(
        "never-observed space this close to the plan's start counts as free (the vehicle is there; its "
        "camera cannot see beside or below itself), m"))
    latency_speed: str = setting("profile", choices=("profile", "top"), description=(
        "the speed the latency distance is flown at: 'profile' (the highest speed the capped profile "
        "reaches, found by bisection) or 'top' (the plan's top speed: stops up to latency x (top speed "
        "- flown speed) earlier than needed)"))
    turn_braking: bool = setting(False, description=(
        "the braking before unknown space shares the deceleration with the turn: along a curved path the "
        "tangential deceleration is at most sqrt(decel^2 - (v^2 kappa)^2) (at least half of decel), so the "
        "total acceleration of the re-timed reference stays within its limit (off: tangential decel alone, "
        "measured up to 9.9 m/s^2 in all with an 8 m/s^2 limit at 6 m/s). Off by default: in the forest "
        "benchmark (time-scale 1000, same seeds, distance weight 4) it brakes earlier in every turn, 10 % "
        "slower at 6 m/s (3.27 vs 3.64 m/s mean), and it did not add clearance or success (4 m/s: 14/16 "
        "with it, 15/15 without)"))
    braking_jerk_time_s: float = setting(0.1, range=(0.0, 10.0), description=(
        "the braking before unknown space is jerk-limited: the path's acceleration turns from the plan's to "
        "the braking deceleration at max_acc_mps2 / this (m/s^3) at most, and the braking starts that much "
        "earlier so it still stops where it must, s (0: the acceleration steps to the braking at once, as "
        "before stop 45; 0 is needed for turn_braking). Without it the re-timed reference's acceleration "
        "jumped by up to 12 m/s^2 within 0.08 s, which the vehicle's attitude cannot follow. Measured in the "
        "forest benchmark (time-scale 1000, paired with 0, stop 44's defaults otherwise): the vehicle's "
        "horizontal tracking error over 20 flights at 6 m/s p95 0.087 m against 0.193, p99 0.120 against "
        "0.271 (reference jerk p99 93 against 284 m/s^3; at 4 m/s p99 0.079 against 0.146 m); over seeds "
        "0-399 at 4 and 6 m/s 798 of 800 reached against 796, 1 collision against 1, 12 flights under 0.1 m "
        "beyond the radius against 14, 60 under 0.15 m against 75, mean speed -1.4 % at 6 m/s and +0.2 % at "
        "4 m/s; 2 m/s (seeds 0-99) 100 against 99 reached, peak 1.01x"))
    history_frames: int = setting(12, range=(1, 100), description=(
        "recent depth frames kept to answer 'was this point seen free?' where the voxel map's rays leave gaps"))
    history_period_s: float = setting(0.25, range=(0.0, 10.0), description=(
        "older kept depth frames are at least this far apart, s (the newest is always kept)"))

    def _check(self) -> None:
        if self.braking_jerk_time_s > 0.0 and self.turn_braking:
            raise self._error("braking_jerk_time_s", "a jerk-limited braking onset is not available with turn_braking: "
                              "set braking_jerk_time_s: 0 to use turn_braking")


@dataclass(frozen=True)
class StopLimit:
    """The resolved parameters of one planner (config x vehicle limits x map)."""

    decel_mps2: float
    max_decel_mps2: float  # when the start speed cannot stop in time at decel_mps2
    margin_m: float
    latency_s: float
    start_radius_m: float
    probe_m: float  # the vehicle's half-width: the map's inflation, m
    step_m: float  # sampling step along the path, m
    latency_at_top_speed: bool = False  # see UnknownSpaceConfig.latency_speed
    turn_braking: bool = False  # see UnknownSpaceConfig.turn_braking
    jerk_mps3: float = 0.0  # the braking onset's jerk limit (0: none), see UnknownSpaceConfig.braking_jerk_time_s

    @classmethod
    def from_config(cls, config: UnknownSpaceConfig, max_acc_mps2: float, inflation_m: float,
                    step_m: float) -> "StopLimit":
        t_j = config.braking_jerk_time_s
        return cls(config.decel_fraction * max_acc_mps2, max_acc_mps2, config.margin_m, config.latency_s,
                   config.start_radius_m, inflation_m, step_m, config.latency_speed == "top", config.turn_braking,
                   max_acc_mps2 / t_j if t_j > 0.0 else 0.0)


@dataclass(frozen=True)
class FrontierReport:
    """What :func:`limit_to_known_space` found.

    known_free_m: known free distance along the path (and its straight continuation) from the
        start, m; the whole checked length when nothing unknown or blocked was met.
    cause: "unknown", "blocked" or "" (nothing met).
    limited: the timing was changed; stop_m: arc length of the planned stop, m (None if not limited).
    cannot_stop: the start speed needs more room than the known free space leaves.
    """

    known_free_m: float
    cause: str
    limited: bool
    stop_m: Optional[float] = None
    cannot_stop: bool = False

    def describe(self) -> str:
        if not self.limited:
            return ""
        what = "never-observed space" if self.cause == "unknown" else "a blocked voxel" if self.cause else "the checked end"
        text = f"stops {self.stop_m:.2f} m along the path, before {what} {self.known_free_m:.2f} m ahead"
        return text + (" (the start speed needs more room: braking at the full acceleration limit)"
                       if self.cannot_stop else "")


_PROBES = np.array([[0, 0, 0], [1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=np.float64)


def observed(grid_map, history, probes: np.ndarray, start: np.ndarray, start_radius_m: float) -> np.ndarray:
    """(K,) bool: each point of ``probes`` (K, 3) was observed (a voxel some ray passed through, or
    seen free in a recent frame of ``history``) or lies within ``start_radius_m`` of ``start``."""
    d2 = ((probes - start) ** 2).sum(axis=1)
    known = grid_map.is_known(probes) | (d2 <= start_radius_m ** 2)
    if history is not None and not known.all():
        # the voxel map misses the voxels between diverging rays; the frames themselves do not
        todo = np.nonzero(~known)[0]
        known[todo] = history.observed_free(probes[todo])
    return known


def _known_free(grid_map, history, points: np.ndarray, start: np.ndarray, limit: StopLimit,
                n_path: int) -> Tuple[int, str]:
    """(index of the first sample of ``points`` (M, 3) that is not known free, or M; its cause)."""
    m = points.shape[0]
    probes = (points[:, None, :] + limit.probe_m * _PROBES[None]).reshape(-1, 3)
    known = observed(grid_map, history, probes, start, limit.start_radius_m)
    known = known.reshape(m, _PROBES.shape[0]).all(axis=1)
    blocked = grid_map.is_blocked(points)
    if blocked[0]:
        # the start is inside an inflated obstacle: the leading blocked stretch is the way out
        free = np.nonzero(~blocked[:n_path])[0]
        blocked[: free[0] if free.shape[0] else n_path] = False
    bad = ~known | blocked
    if not bad.any():
        return m, ""
    i = int(np.argmax(bad))
    return i, "blocked" if blocked[i] else "unknown"


def _stop_point(room_m: float, latency_s: float, v_latency: Optional[float], s: np.ndarray, speed: np.ndarray,
                decel: float, rest_end_m: Optional[float], v_end: float) -> float:
    """Arc length of the planned stop, m: ``room_m`` (the known free distance less the margin)
    less the distance flown during the latency at the highest speed the capped profile reaches.

    v_latency: that speed given (the plan's top speed: the simple, conservative rule); None: the
    smallest speed v for which the profile ``min(speed, sqrt(2 decel (s_stop(v) - s)))`` with
    ``s_stop(v) = room_m - v latency_s`` never exceeds v (bisection; the profile's peak falls as v
    grows, so every v above it is safe). A vehicle creeping toward a frontier it is about to see
    past then stops ``latency x its own speed`` short of it, not ``latency x the cruise speed``
    (0.9 m at 6 m/s). rest_end_m: the path's length when it ends at rest (never stopped past it).
    """
    def stop(v):
        x = room_m - v * latency_s
        return max(min(x, rest_end_m) if rest_end_m is not None else x, 0.0)

    if v_latency is not None:
        return stop(v_latency)

    def peak(x):
        cap = np.sqrt(2.0 * decel * np.maximum(x - s, 0.0))
        p = float(np.minimum(speed, cap).max())
        if rest_end_m is None and x > s[-1]:  # braking on along the straight continuation
            p = max(p, min(v_end, math.sqrt(2.0 * decel * (x - s[-1]))))
        return p

    lo, hi = 0.0, float(speed.max())
    if peak(stop(lo)) <= lo:
        return stop(lo)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if peak(stop(mid)) <= mid:
            hi = mid
        else:
            lo = mid
    return stop(hi)


def _path_samples(spline, step_m: float):
    """(tau, positions, velocities, speeds, arc lengths) of ``spline`` at about every ``step_m`` of
    its path (20 to 4000 samples, uniform in its time ``tau``)."""
    duration = spline.duration
    vbound = max(spline.max_derivative_norm(1), 1e-3)
    n = int(min(max(math.ceil(duration * vbound / step_m) + 1, 20), 4000))
    tau = np.linspace(0.0, duration, n)
    pts = spline.evaluate(tau)
    d1 = spline.derivative().evaluate(tau)
    speed = np.sqrt((d1 * d1).sum(axis=1))
    s = np.concatenate([[0.0], np.cumsum(np.sqrt((np.diff(pts, axis=0) ** 2).sum(axis=1)))])
    return tau, pts, d1, speed, s


def _end_direction(pts: np.ndarray, d1: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """Unit direction the sampled path ends along: its end velocity's, else (ending at rest) its
    last chord's, else zero."""
    v_end = float(speed[-1])
    chord = pts[-1] - pts[-2]
    c = float(np.sqrt(chord @ chord))
    return d1[-1] / v_end if v_end > 1e-6 else chord / c if c > 1e-9 else np.zeros(3)


def brake_before(trajectory, t_now: float, t_block: float, limit: StopLimit):
    """``trajectory`` re-timed to stop on its own path ``limit.margin_m`` short of the point it
    reaches at ``t_block`` (absolute, s), braking no earlier than ``t_now``: a
    :class:`StopLimitedTrajectory` whose braking onset is jerk-limited as in
    :func:`limit_to_known_space` (``limit.jerk_mps3`` > 0 needed), or None where there is nothing to
    re-time: ``trajectory`` is a stop-limited one already braking at ``t_now`` (or one whose own stop
    comes first), or neither kind (an emergency stop). Where the speed at ``t_now`` needs more room the
    braking goes to the full ``max_decel_mps2`` and stops where that allows (``report.cannot_stop``).
    For a trajectory blocked ahead in the map (by the inflation only) whose replan failed: the
    vehicle keeps to the collision-checked curve and slows down before the block instead of flying
    into it at full speed, while the planner keeps replanning."""
    if limit.jerk_mps3 <= 0.0:
        raise ValueError("brake_before needs a jerk-limited braking onset (StopLimit.jerk_mps3 > 0)")
    if isinstance(trajectory, StopLimitedTrajectory):
        if t_now >= trajectory.t_warp:
            return None, None
        base, tau_block = trajectory.base, trajectory.base_time(t_block) - trajectory.t_start
        old_stop = trajectory.s_stop
    elif isinstance(trajectory, BsplineTrajectory):
        base, tau_block, old_stop = trajectory, t_block - trajectory.t_start, math.inf
    else:
        return None, None
    spline = base.spline
    tau, pts, d1, speed, s = _path_samples(spline, limit.step_m)
    s_block = float(np.interp(tau_block, tau, s))
    s_stop = max(s_block - limit.margin_m, 0.0)
    if s_stop >= old_stop:
        return None, None  # its braking for unknown space stops first
    i0 = min(int(np.searchsorted(tau, t_now - base.t_start, side="left")), tau.shape[0] - 1)
    d2 = spline.derivative().derivative().evaluate(tau)
    acc_t = (d1 * d2).sum(axis=1) / np.maximum(speed, 1e-9)
    direction = _end_direction(pts, d1, speed)
    out, report = _jerk_limited_stop(base, tau, s, speed, acc_t, direction, s_stop, s_block, "blocked", limit,
                                     first_sample=i0)
    if out is base:
        return None, None  # stops by then anyway (the plan ends at rest first)
    return out, report


def limit_to_known_space(trajectory: BsplineTrajectory, grid_map, limit: StopLimit, history=None):
    """``(trajectory or a StopLimitedTrajectory, FrontierReport)``: ``trajectory`` itself when it
    can stop inside known free space from every point (see the module docstring).

    history: a :class:`~planner_pkg.planning.visibility.DepthHistory` (or None): space its frames
    saw free counts as known even where the voxel map's rays left gaps."""
    spline = trajectory.spline
    a_b = limit.decel_mps2
    step = limit.step_m
    tau, pts, d1, speed, s = _path_samples(spline, step)
    n = tau.shape[0]
    length = float(s[-1])
    v_top = float(speed.max())
    v0, v_end = float(speed[0]), float(speed[-1])
    # the straight continuation past the path's end. A plan that ends moving (at its local
    # target, at cruise speed) is continued along its end velocity for a stop from its *top*
    # speed, the latency and the margin: when all of that is known free, the cap
    # sqrt(2 a_b (s_stop - s)) >= v_top everywhere on the path and cannot bind, so the plan is
    # returned unchanged. A plan that ends at rest (the final approach to the goal) is its own
    # stop: it needs only the margin beyond its end.
    rest_end = v_end <= _REST_MPS
    direction = _end_direction(pts, d1, speed)
    if rest_end:
        ext_len = limit.margin_m + step
    else:
        ext_len = v_top * v_top / (2.0 * a_b) + v_top * limit.latency_s + limit.margin_m + step
    k_ext = int(math.ceil(ext_len / step)) if direction.any() else 0
    s_ext = length + step * np.arange(1, k_ext + 1)
    all_pts = np.vstack([pts, pts[-1] + (s_ext - length)[:, None] * direction]) if k_ext else pts
    all_s = np.concatenate([s, s_ext])
    first_bad, cause = _known_free(grid_map, history, all_pts, pts[0], limit, n)
    if first_bad == all_pts.shape[0]:
        # known free (or exempt) to a full stop from every point: unchanged, the same object
        return trajectory, FrontierReport(float(all_s[-1]), "", False)
    known_free = float(all_s[first_bad - 1]) if first_bad > 0 else 0.0
    s_stop = _stop_point(known_free - limit.margin_m, limit.latency_s, v_top if limit.latency_at_top_speed else None,
                         s, speed, a_b, length if rest_end else None, v_end)
    s_stop = max(s_stop, 0.0)
    if limit.jerk_mps3 > 0.0:
        d2 = spline.derivative().derivative().evaluate(tau)
        acc_t = (d1 * d2).sum(axis=1) / np.maximum(speed, 1e-9)  # the plan's tangential acceleration
        return _jerk_limited_stop(trajectory, tau, s, speed, acc_t, direction, s_stop, known_free, cause, limit)
    brake = v0 * v0 / (2.0 * a_b)
    cannot_stop = brake > s_stop + 1e-9
    if cannot_stop:
        # already too fast for the room the plan was allowed: brake at the full limit instead
        a_b = max(limit.max_decel_mps2, a_b)
        s_stop = max(s_stop, v0 * v0 / (2.0 * a_b))
    cap = np.sqrt(2.0 * a_b * np.maximum(s_stop - s, 0.0))
    if limit.turn_braking:
        d2 = spline.derivative().derivative().evaluate(tau)
        turn_cap = _turn_braking_cap(s, speed, _curvature(d1, d2, speed), s_stop, a_b, length)
        if turn_cap[0] >= v0 - _SPEED_TOL:  # else already too fast for it: the straight cap brakes hardest
            cap = turn_cap
    over = speed > cap + _SPEED_TOL
    if not over.any():
        return trajectory, FrontierReport(known_free, cause, False)
    report = FrontierReport(known_free, cause, True, s_stop, cannot_stop)
    return StopLimitedTrajectory(trajectory, tau, s, speed, direction, s_stop, a_b, int(np.argmax(over)), step,
                                 cap), report


def _ramp(v, a0, jerk: float, t):
    """(distance m, speed m/s) ``t`` s into a ramp from speed ``v`` and acceleration ``a0`` whose
    acceleration falls at ``jerk`` m/s^3 (arrays broadcast)."""
    return v * t + 0.5 * a0 * t * t - jerk * t ** 3 / 6.0, v + a0 * t - 0.5 * jerk * t * t


def _ramp_rest_time(v, a0, jerk: float):
    """When the ramp of :func:`_ramp` from ``v`` >= 0 and ``a0`` reaches rest, s."""
    return (a0 + np.sqrt(a0 * a0 + 2.0 * jerk * np.maximum(v, 0.0))) / jerk


def _ramp_stop_distance(v: np.ndarray, a0: np.ndarray, decel: float, jerk: float) -> np.ndarray:
    """Distance to rest, m, from speeds ``v`` (K,) m/s and tangential accelerations ``a0`` (K,)
    m/s^2 when the acceleration ramps down at ``jerk`` m/s^3 to ``-decel`` and holds it (an ``a0``
    below ``-decel`` counts as ``-decel``); the speed may reach zero during the ramp."""
    a0 = np.maximum(a0, -decel)
    s1, v1 = _ramp(v, a0, jerk, (a0 + decel) / jerk)
    full = s1 + np.maximum(v1, 0.0) ** 2 / (2.0 * decel)
    early = _ramp(v, a0, jerk, _ramp_rest_time(v, a0, jerk))[0]  # rest within the ramp
    return np.where(v1 > 0.0, full, early)


def _first_late(s: np.ndarray, speed: np.ndarray, acc_t: np.ndarray, s_stop: float, decel: float,
                jerk: float) -> Optional[int]:
    """Index of the first path sample from which the jerk-limited braking no longer stops by
    ``s_stop``, or None."""
    late = s + _ramp_stop_distance(speed, acc_t, decel, jerk) > s_stop + 1e-9
    return int(np.argmax(late)) if late.any() else None


def _jerk_limited_stop(trajectory: BsplineTrajectory, tau: np.ndarray, s: np.ndarray, speed: np.ndarray,
                       acc_t: np.ndarray, direction: np.ndarray, s_stop: float, known_free: float, cause: str,
                       limit: StopLimit, first_sample: int = 0):
    """:func:`limit_to_known_space` with a jerk-limited braking onset (``limit.jerk_mps3``): the
    plan is flown to the last path sample from which the braking still stops by ``s_stop`` when
    its acceleration ramps from the plan's tangential one to ``-decel`` at the jerk limit; from
    there the speed is ``min(plan, ramp-then-constant braking)`` and ends at rest at most one
    sample short of ``s_stop``. A start that cannot stop so brakes toward the full ``max_acc``
    (and stops where that allows, ``cannot_stop``). ``first_sample``: the braking starts at this
    path sample or later (it is the start: the samples before it are flown already)."""
    jerk, decel = limit.jerk_mps3, limit.decel_mps2
    i0 = first_sample

    def late_from(x):
        k = _first_late(s[i0:], speed[i0:], acc_t[i0:], x, decel, jerk)
        return None if k is None else k + i0

    first = late_from(s_stop)
    if first is None:
        return trajectory, FrontierReport(known_free, cause, False)
    cannot_stop = first == i0
    if cannot_stop:
        decel = max(limit.max_decel_mps2, decel)
        s_stop = max(s_stop, float(s[i0] + _ramp_stop_distance(speed[i0:i0 + 1], acc_t[i0:i0 + 1], decel, jerk)[0]))
        first = late_from(s_stop)
        if first is None:
            return trajectory, FrontierReport(known_free, cause, False)
    j0 = max(first - 1, i0)
    s0, v0, a0 = float(s[j0]), float(speed[j0]), max(float(acc_t[j0]), -decel)
    # the ramp, sampled in time (the profile's pieces of constant acceleration differ by jerk x 10 ms)
    t_ramp = min((a0 + decel) / jerk, float(_ramp_rest_time(v0, a0, jerk)))
    tr = np.linspace(0.0, t_ramp, max(int(math.ceil(t_ramp / 0.01)), 1) + 1)
    ramp_s, ramp_v = _ramp(v0, a0, jerk, tr)
    ramp_s, ramp_v = s0 + ramp_s, np.maximum(ramp_v, 0.0)
    s1, v1 = float(ramp_s[-1]), float(ramp_v[-1])
    s_end = s1 + v1 * v1 / (2.0 * decel)
    # then constant braking over the later path samples and the straight continuation past its end
    length = float(s[-1])
    later = s[(s > s1 + 1e-9) & (s < s_end - 1e-9)]
    if s_end > length:
        k = int(math.ceil((s_end - max(length, s1)) / limit.step_m))
        later = np.concatenate([later, max(length, s1) + (s_end - max(length, s1)) * np.arange(1, k + 1) / k])
    brake_v = np.sqrt(np.maximum(v1 * v1 - 2.0 * decel * (later - s1), 0.0))
    ps = np.concatenate([ramp_s, later])
    pv = np.minimum(np.concatenate([ramp_v, brake_v]), np.interp(ps, s, speed))
    pv[0] = float(speed[j0])  # continuity with the base at t_warp
    report = FrontierReport(known_free, cause, True, s_end, cannot_stop)
    return StopLimitedTrajectory(trajectory, tau, s, speed, direction, s_end, decel, j0 + 1, limit.step_m,
                                 profile=(ps, pv)), report


def _curvature(d1: np.ndarray, d2: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """(K,) curvature of the path, 1/m, from its first and second time derivatives (K, 3); 0
    where it stands still."""
    cross = np.cross(d1, d2)
    num = np.sqrt((cross * cross).sum(axis=1))
    return np.where(speed > 1e-6, num / np.maximum(speed, 1e-6) ** 3, 0.0)


def _turn_braking_cap(s: np.ndarray, speed: np.ndarray, kappa: np.ndarray, s_stop: float, decel: float,
                      length: float) -> np.ndarray:
    """(K,) speed cap, m/s, at the path samples ``s`` (K,) for a stop at ``s_stop`` whose braking
    shares ``decel`` with the turn: integrated backward from the stop, the tangential deceleration
    over each step is ``sqrt(decel^2 - (v^2 kappa)^2)`` (at least decel / 2) with v the profile's
    speed ``min(speed, cap)`` at the step's far end. Past the path's end the continuation is
    straight (full decel). Never above the straight cap ``sqrt(2 decel (s_stop - s))``."""
    k = s.shape[0]
    cap = np.zeros(k)
    if s_stop > length:
        v_next, s_next = math.sqrt(2.0 * decel * (s_stop - length)), length
    else:
        v_next, s_next = 0.0, s_stop
    floor = 0.25 * decel * decel
    d2 = decel * decel
    for i in range(k - 1, -1, -1):
        if s[i] >= s_next:
            cap[i] = v_next if s[i] <= s_next + 1e-12 else 0.0
            continue
        a_n = v_next * v_next * kappa[i]
        a_t = math.sqrt(max(d2 - a_n * a_n, floor))
        c = math.sqrt(v_next * v_next + 2.0 * a_t * (s_next - s[i]))
        cap[i] = c
        v_next, s_next = min(c, float(speed[i])), float(s[i])
    return np.minimum(cap, np.sqrt(2.0 * decel * np.maximum(s_stop - s, 0.0)))


class StopLimitedTrajectory:
    """The path of ``base`` (a :class:`BsplineTrajectory`) with a speed profile capped by a braking
    curve that ends at rest ``s_stop`` m along the path (beyond the path's end: on its straight
    continuation along ``direction``).

    Up to ``t_warp`` (absolute, s) it is ``base`` itself; after it, speed and arc length follow the
    profile ``min(base speed, cap)``, ``cap`` the braking curve ``sqrt(2 decel (s_stop - s))`` or the
    caller's (K,) cap at the samples ``s`` (see ``turn_braking``), with constant tangential acceleration
    between the samples ``s`` (K,) m of the base at its times ``tau`` (K,) s (and every
    ``step_m`` on the continuation); or the caller's ``profile`` (arc lengths, speeds) from the
    sample ``first_over - 1`` on (the jerk-limited onset). Position, velocity
    and acceleration are the base path's at the arc length reached (the tangent, and the normal
    acceleration ``v^2 kappa``), so the curve is exactly the planned one.
    """

    def __init__(self, base: BsplineTrajectory, tau: np.ndarray, s: np.ndarray, speed: np.ndarray,
                 direction: np.ndarray, s_stop: float, decel_mps2: float, first_over: int, step_m: float,
                 cap: Optional[np.ndarray] = None, profile: Optional[Tuple[np.ndarray, np.ndarray]] = None):
        self.base = base
        self.spline = base.spline  # the path's geometry (markers); its time is the base's
        self.t_start = base.t_start
        self.yaw_config = base.yaw_config
        self.s_stop = float(s_stop)
        self.decel = float(decel_mps2)
        self._tau_table, self._s_table = tau, s
        # Hermite slopes dtau/ds: exact where the path moves, clipped to 3x the neighbouring
        # secants (keeps tau(s) monotone; at a standstill, e.g. a start from rest, the secant)
        ds_tab, dtau_tab = np.diff(s), np.diff(tau)
        secant = np.where(ds_tab > 1e-12, dtau_tab / np.maximum(ds_tab, 1e-12), 0.0)
        lim = 3.0 * np.minimum(np.concatenate([secant[:1], secant]), np.concatenate([secant, secant[-1:]]))
        exact = np.where(speed > 1e-6, 1.0 / np.maximum(speed, 1e-6), np.inf)
        self._dtau_ds = np.minimum(exact, lim)
        self._length = float(s[-1])
        self._direction = np.asarray(direction, dtype=np.float64)
        self._end_point = base.spline.evaluate(base.spline.duration)
        j0 = max(first_over - 1, 0)
        if profile is not None:  # the caller's (arc length, speed) from the sample j0 on
            prof_s, prof_v = list(profile[0]), list(profile[1])
        else:
            if cap is None:  # the straight braking curve (else the caller's, at the samples s)
                cap = np.sqrt(2.0 * self.decel * np.maximum(self.s_stop - s, 0.0))
            prof_s, prof_v = list(s[j0:]), list(np.minimum(speed[j0:], cap[j0:]))
            prof_v[0] = float(speed[j0])  # continuity with the base at t_warp
        v_end = float(speed[-1])
        if profile is None and self.s_stop > self._length:
            # brake on along the straight continuation (checked known free) to the stop
            k = int(math.ceil((self.s_stop - self._length) / step_m))
            for x in self._length + (self.s_stop - self._length) * np.arange(1, k + 1) / k:
                prof_s.append(float(x))
                prof_v.append(min(v_end, math.sqrt(2.0 * self.decel * max(self.s_stop - x, 0.0))))
        ps, pv = np.asarray(prof_s), np.asarray(prof_v)
        keep = ps < self.s_stop - 1e-9
        keep[0] = True
        ps, pv = ps[keep], pv[keep]
        if self.s_stop > ps[0] + 1e-9:
            ps, pv = np.append(ps, self.s_stop), np.append(pv, 0.0)
        ds = np.diff(ps)
        vsum = pv[1:] + pv[:-1]
        dt = np.where(vsum > 1e-12, 2.0 * ds / np.maximum(vsum, 1e-12), 0.0)
        self._acc = np.where(ds > 0, (pv[1:] ** 2 - pv[:-1] ** 2) / (2.0 * np.maximum(ds, 1e-12)), 0.0)
        self.t_warp = self.t_start + float(tau[j0])
        self._t = self.t_warp + np.concatenate([[0.0], np.cumsum(dt)])
        self._s, self._v = ps, pv
        self.duration = float(self._t[-1] - self.t_start)
        self.stop_position = self._point(np.array([self.s_stop]))[0]
        self.heading = HeadingProfile(lambda x: self.positions(self.t_start + x), self.duration, base.heading.at(0.0)[0],
                                      self.yaw_config)
        self.end_yaw = self.heading.end_yaw

    @property
    def t_end(self) -> float:
        return self.t_start + self.duration

    # -- arc length <-> time ---------------------------------------------------------------------
    def _tau_of(self, s: np.ndarray) -> np.ndarray:
        """The base's spline time (T,) s at arc lengths ``s`` (T,) m: cubic Hermite through the
        samples with the exact slopes ``dtau/ds = 1 / |P'(tau)|`` (so the position's speed along
        the path is the profile's to ~1e-5; linear interpolation was off by ~2 %)."""
        st, tt, m = self._s_table, self._tau_table, self._dtau_ds
        i = np.clip(np.searchsorted(st, s, side="right") - 1, 0, st.shape[0] - 2)
        h = st[i + 1] - st[i]
        x = np.where(h > 0, (s - st[i]) / np.where(h > 0, h, 1.0), 0.0)
        x = np.clip(x, 0.0, 1.0)
        x2, x3 = x * x, x * x * x
        return ((2 * x3 - 3 * x2 + 1) * tt[i] + (x3 - 2 * x2 + x) * h * m[i] + (-2 * x3 + 3 * x2) * tt[i + 1]
                + (x3 - x2) * h * m[i + 1])

    def _profile(self, t: np.ndarray):
        """(s, v, a_t) (T,) at absolute times ``t`` (T,) within ``[t_warp, t_end]``."""
        if self._t.shape[0] < 2:  # a stop where it starts: nothing to fly
            z = np.zeros_like(t)
            return z + self._s[0], z, z
        k = np.clip(np.searchsorted(self._t, t, side="right") - 1, 0, self._t.shape[0] - 2)
        h = np.clip(t - self._t[k], 0.0, self._t[k + 1] - self._t[k])
        a = self._acc[k]
        s = np.minimum(self._s[k] + self._v[k] * h + 0.5 * a * h * h, self._s[k + 1])
        v = np.maximum(self._v[k] + a * h, 0.0)
        return s, v, a

    def _point(self, s: np.ndarray) -> np.ndarray:
        """Positions (T, 3) at arc lengths ``s`` (T,): on the base path, then its continuation."""
        on_path = s <= self._length
        out = np.empty((s.shape[0], 3))
        if on_path.any():
            out[on_path] = self.base.spline.evaluate(self._tau_of(s[on_path]))
        if (~on_path).any():
            out[~on_path] = self._end_point + (s[~on_path] - self._length)[:, None] * self._direction
        return out

    def base_time(self, t: float) -> float:
        """The base trajectory's absolute time at the point this one reaches at ``t`` (the path
        parameter; past the base's end, its end)."""
        if t <= self.t_warp:
            return float(t)
        s = float(self._profile(np.array([min(t, self.t_end)]))[0][0])
        return self.t_start + float(self._tau_of(np.array([min(s, self._length)]))[0])

    # -- sampling --------------------------------------------------------------------------------
    def positions(self, t) -> np.ndarray:
        """Positions (T, 3) m at absolute times ``t`` (T,) s (vectorised)."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        out = np.empty((t.shape[0], 3))
        early = t <= self.t_warp
        if early.any():
            out[early] = self.base.spline.evaluate(np.maximum(t[early] - self.t_start, 0.0))
        if (~early).any():
            out[~early] = self._point(self._profile(np.minimum(t[~early], self.t_end))[0])
        return out

    def state(self, t: float):
        """(position, velocity, acceleration) (3,) each at absolute time ``t`` s."""
        t = float(t)
        if t <= self.t_warp:
            return self.base.state(t)
        if t >= self.t_end:
            return self.stop_position.copy(), np.zeros(3), np.zeros(3)
        s_arr, v_arr, a_arr = self._profile(np.array([t]))
        s, v, a_t = float(s_arr[0]), float(v_arr[0]), float(a_arr[0])
        if s > self._length:
            u = self._direction
            return self._end_point + (s - self._length) * u, v * u, a_t * u
        tau = float(self._tau_of(np.array([s]))[0])
        p, d1, d2 = self.base.state(self.t_start + tau)
        n = float(np.sqrt(d1 @ d1))
        if n < 1e-9:
            # a standstill of the base path (the start from rest): the direction of the next sample
            k = min(int(np.searchsorted(self._s_table, s, side="right")), self._s_table.shape[0] - 1)
            chord = self.base.spline.evaluate(self._tau_table[k]) - p
            c = float(np.sqrt(chord @ chord))
            u = chord / c if c > 1e-12 else np.zeros(3)
            return p, v * u, a_t * u
        u = d1 / n
        normal = (d2 - (d2 @ u) * u) / (n * n)  # curvature vector of the path, 1/m
        return p, v * u, a_t * u + v * v * normal

    def yaw_at(self, t: float):
        """(yaw rad in (-pi, pi], yaw rate rad/s) at absolute time ``t``."""
        return self.heading.at(float(t) - self.t_start)

    def sample(self, t: float) -> Setpoint:
        """Reference at absolute time ``t`` s (TrajectoryLike), with its jerk: up to ``t_warp`` the
        base's; on the re-timed braking the central difference of this trajectory's acceleration
        over +-``_JERK_STEP_S`` (the braking's own; a step of the acceleration, as at the braking
        onset, reads as a short burst instead of an impulse); zero once stopped."""
        if not math.isfinite(t):
            raise ValueError(f"cannot sample a trajectory at t = {t!r}")
        p, v, a = self.state(t)
        yaw, rate = self.yaw_at(t)
        if t <= self.t_warp:
            jerk = self.base.jerk(t)
        elif t >= self.t_end:
            jerk = np.zeros(3)
        else:
            t0, t1 = max(t - _JERK_STEP_S, self.t_warp), t + _JERK_STEP_S
            jerk = (self.state(t1)[2] - self.state(t0)[2]) / (t1 - t0)
        return Setpoint(p, v, a, yaw=yaw, yaw_rate=rate, jerk=jerk)

    # -- safety ----------------------------------------------------------------------------------
    def collision_time(self, grid_map, t_now: float, horizon_s: float, step_m: float) -> Optional[float]:
        """Absolute time of the first blocked point within ``[t_now, t_now + horizon_s]``
        (ignoring a blocked stretch the vehicle is already in), or None."""
        t1 = min(t_now + horizon_s, self.t_end)
        if t1 <= t_now:
            return None
        b0 = max(self.base_time(t_now), self.t_start) - self.t_start
        b1 = self.base_time(t1) - self.t_start
        hit = curve_collision_time(grid_map, self.base.spline, b0, b1, step_m, skip_leading_blocked=True)
        if hit is not None:
            return self._time_at_base(hit)
        s_now = float(self._profile(np.array([max(t_now, self.t_warp)]))[0][0])
        s1 = float(self._profile(np.array([t1]))[0][0]) if t1 > self.t_warp else 0.0
        if s1 <= self._length:
            return None
        # the straight continuation past the base's end
        s_lo = max(self._length, s_now)
        xs = np.linspace(s_lo, s1, max(2, int(math.ceil((s1 - s_lo) / step_m)) + 1))
        blocked = grid_map.is_blocked(self._point(xs))
        if not blocked.any():
            return None
        x = float(xs[int(np.argmax(blocked))])
        return float(np.interp(x, self._s, self._t))

    def _time_at_base(self, tau: float) -> float:
        """This trajectory's absolute time at base path parameter ``tau`` (s since the start)."""
        if self.t_start + tau <= self.t_warp:
            return self.t_start + tau
        s = float(np.interp(tau, self._tau_table, self._s_table))
        return float(np.interp(min(s, self.s_stop), self._s, self._t))
