"""A trajectory carried as time samples, as it travels on ``planning/trajectory``.

Plain Python + NumPy (no rclpy): the planner node turns any ``TrajectoryLike`` into samples with
:func:`sample_trajectory`; the trajectory server rebuilds a ``TrajectoryLike`` from them with
:class:`SampledTrajectory`. Position is interpolated with cubic Hermite segments (position and
velocity at both ends), so a B-spline sampled every 50 ms is reproduced to well under a
millimetre at flight speeds; acceleration and yaw are interpolated linearly (yaw on the circle),
and the jerk is the slope of that acceleration.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from planner_pkg.types import Setpoint

__all__ = ["SampledTrajectory", "sample_trajectory", "trajectory_span", "wrap_angle"]


def wrap_angle(a: float) -> float:
    """Angle in rad wrapped to (-pi, pi]."""
    return math.atan2(math.sin(a), math.cos(a))


class SampledTrajectory:
    """``K`` samples at absolute times ``t`` (K,) s, strictly increasing.

    position (K, 3) m, velocity (K, 3) m/s, acceleration (K, 3) m/s^2 (world ENU, gravity
    excluded), yaw (K,) rad (NaN = no heading given), yaw_rate (K,) rad/s (NaN = none).
    ``sample(t)`` follows the TrajectoryLike protocol: before the first sample it returns the
    first one, after the last one the final position with zero velocity and acceleration.
    Raises ValueError when the arrays are inconsistent or not finite where they must be.
    """

    def __init__(self, t, position, velocity=None, acceleration=None, yaw=None, yaw_rate=None):
        self.t = np.array(t, dtype=np.float64).reshape(-1)
        k = self.t.shape[0]
        if k == 0:
            raise ValueError("a trajectory needs at least one sample")
        self.position = self._vectors("position", position, k)
        self.velocity = np.zeros((k, 3)) if velocity is None else self._vectors("velocity", velocity, k)
        self.acceleration = np.zeros((k, 3)) if acceleration is None else self._vectors("acceleration", acceleration, k)
        self.yaw = np.full(k, np.nan) if yaw is None else np.array(yaw, dtype=np.float64).reshape(-1)
        self.yaw_rate = np.full(k, np.nan) if yaw_rate is None else np.array(yaw_rate, dtype=np.float64).reshape(-1)
        if self.yaw.shape != (k,) or self.yaw_rate.shape != (k,):
            raise ValueError(f"yaw and yaw_rate need {k} values, got {self.yaw.shape} and {self.yaw_rate.shape}")
        if not np.isfinite(self.t).all():
            raise ValueError("trajectory sample times must be finite")
        if k > 1 and not (np.diff(self.t) > 0).all():
            raise ValueError("trajectory sample times must be strictly increasing")
        for name in ("position", "velocity", "acceleration"):
            if not np.isfinite(getattr(self, name)).all():
                raise ValueError(f"trajectory {name} samples must be finite (NaN/inf found)")
        if np.isinf(self.yaw).any() or np.isinf(self.yaw_rate).any():
            raise ValueError("trajectory yaw / yaw_rate must be finite or NaN (= not given)")

    @staticmethod
    def _vectors(name: str, value, k: int) -> np.ndarray:
        arr = np.array(value, dtype=np.float64)
        if arr.shape != (k, 3):
            raise ValueError(f"trajectory {name} must have shape ({k}, 3), got {arr.shape}")
        return arr

    @property
    def t_start(self) -> float:
        return float(self.t[0])

    @property
    def t_end(self) -> float:
        return float(self.t[-1])

    def __len__(self) -> int:
        return int(self.t.shape[0])

    def final_setpoint(self) -> Setpoint:
        """Hover at the last sample (zero velocity and acceleration), its heading if given."""
        yaw = float(self.yaw[-1])
        return Setpoint.hold(self.position[-1], yaw)

    def state(self, t: float):
        """(position, velocity, acceleration) (3,) each at absolute time ``t`` s."""
        ts = self.t
        if t >= ts[-1]:
            return self.position[-1].copy(), np.zeros(3), np.zeros(3)
        if t <= ts[0]:
            return self.position[0].copy(), self.velocity[0].copy(), self.acceleration[0].copy()
        i = int(np.searchsorted(ts, t, side="right")) - 1
        h = ts[i + 1] - ts[i]
        s = (t - ts[i]) / h
        p0, p1 = self.position[i], self.position[i + 1]
        m0, m1 = self.velocity[i] * h, self.velocity[i + 1] * h
        s2, s3 = s * s, s * s * s
        p = (2 * s3 - 3 * s2 + 1) * p0 + (s3 - 2 * s2 + s) * m0 + (-2 * s3 + 3 * s2) * p1 + (s3 - s2) * m1
        dp = ((6 * s2 - 6 * s) * p0 + (3 * s2 - 4 * s + 1) * m0 + (-6 * s2 + 6 * s) * p1 + (3 * s2 - 2 * s) * m1) / h
        a = (1 - s) * self.acceleration[i] + s * self.acceleration[i + 1]
        return p, dp, a

    def yaw_at(self, t: float):
        """(yaw rad or NaN, yaw rate rad/s or NaN) at absolute time ``t``."""
        ts = self.t
        if t <= ts[0] or len(ts) == 1:
            return float(self.yaw[0]), float(self.yaw_rate[0])
        if t >= ts[-1]:
            return float(self.yaw[-1]), math.nan
        i = int(np.searchsorted(ts, t, side="right")) - 1
        s = (t - ts[i]) / (ts[i + 1] - ts[i])
        y0, y1 = float(self.yaw[i]), float(self.yaw[i + 1])
        if math.isnan(y0) or math.isnan(y1):
            yaw = y0 if s < 0.5 else y1
        else:
            yaw = wrap_angle(y0 + s * wrap_angle(y1 - y0))
        r0, r1 = float(self.yaw_rate[i]), float(self.yaw_rate[i + 1])
        rate = (1 - s) * r0 + s * r1 if not (math.isnan(r0) or math.isnan(r1)) else math.nan
        return yaw, rate

    def sample(self, t: float) -> Setpoint:
        """Reference at absolute time ``t`` s (TrajectoryLike)."""
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"cannot sample a trajectory at t = {t!r}")
        if t >= self.t[-1]:
            return self.final_setpoint()
        p, v, a = self.state(t)
        yaw, rate = self.yaw_at(t)
        return Setpoint(p, v, a, yaw=yaw, yaw_rate=rate, jerk=self.jerk(t))

    def jerk(self, t: float) -> np.ndarray:
        """(3,) jerk, m/s^3, at absolute time ``t``: the slope of the linearly interpolated
        acceleration (zero before the first sample and from the last one on, where it is held)."""
        ts = self.t
        if t <= ts[0] or t >= ts[-1]:
            return np.zeros(3)
        i = int(np.searchsorted(ts, t, side="right")) - 1
        return (self.acceleration[i + 1] - self.acceleration[i]) / (ts[i + 1] - ts[i])


def trajectory_span(trajectory, t_now: float, horizon_s: float):
    """(t0, t1) absolute seconds worth sampling from ``trajectory``.

    Uses the trajectory's own start/end when it has them (``t_start``/``t0``, ``t_end`` or
    ``t_start + duration``/``duration_s``); otherwise ``[t_now, t_now + horizon_s]``. The span is
    clipped to begin no earlier than ``t_now`` (the past is not worth sending) and to last at most
    ``horizon_s``.
    """
    t0 = getattr(trajectory, "t_start", None)
    if t0 is None:
        t0 = getattr(trajectory, "t0", None)
    t1 = getattr(trajectory, "t_end", None)
    if t1 is None and t0 is not None:
        duration = getattr(trajectory, "duration", getattr(trajectory, "duration_s", None))
        if duration is not None:
            t1 = float(t0) + float(duration)
    t0 = t_now if t0 is None or not math.isfinite(float(t0)) else max(float(t0), t_now)
    if t1 is None or not math.isfinite(float(t1)):
        t1 = t0 + horizon_s
    t1 = min(float(t1), t0 + horizon_s)
    return t0, max(t1, t0)


def sample_trajectory(trajectory, t0: float, t1: float, dt: float) -> SampledTrajectory:
    """Samples of ``trajectory.sample`` at ``t0, t0 + dt, ..., t1`` (t1 always included).

    Raises ValueError when the trajectory cannot be sampled there or gives a setpoint without a
    position (a trajectory on ``planning/trajectory`` is always a position reference).
    """
    if not (dt > 0 and math.isfinite(t0) and math.isfinite(t1) and t1 >= t0):
        raise ValueError(f"bad sampling span t0={t0}, t1={t1}, dt={dt}")
    n = int(math.floor((t1 - t0) / dt + 1e-9)) + 1
    times = t0 + dt * np.arange(n)
    if t1 - times[-1] > 1e-6:
        times = np.append(times, t1)
    k = times.shape[0]
    pos, vel, acc = np.empty((k, 3)), np.empty((k, 3)), np.empty((k, 3))
    yaw, rate = np.empty(k), np.empty(k)
    for i, t in enumerate(times.tolist()):
        sp = trajectory.sample(t)
        if not isinstance(sp, Setpoint) or not sp.has_position:
            raise ValueError(f"trajectory.sample({t:.3f}) gave no position reference")
        pos[i] = sp.position
        vel[i] = sp.velocity if sp.has_velocity else 0.0
        acc[i] = sp.acceleration if sp.has_acceleration else 0.0
        yaw[i], rate[i] = sp.yaw, sp.yaw_rate
    if not sp.has_velocity:
        vel = np.gradient(pos, times, axis=0) if k > 1 else np.zeros((k, 3))
    return SampledTrajectory(times, pos, vel, acc, yaw, rate)


def hold_trajectory(position, t: float, yaw: float = math.nan) -> SampledTrajectory:
    """A one-sample trajectory: hover at ``position`` (3,) m from time ``t``."""
    return SampledTrajectory([t], [np.asarray(position, dtype=np.float64)], yaw=[yaw], yaw_rate=[math.nan])


def setpoint_trajectory(setpoint: Setpoint, t: float) -> Optional[SampledTrajectory]:
    """A planner's Setpoint as a one-sample trajectory (None when it has no position)."""
    if not setpoint.has_position:
        return None
    v = setpoint.velocity if setpoint.has_velocity else np.zeros(3)
    a = setpoint.acceleration if setpoint.has_acceleration else np.zeros(3)
    return SampledTrajectory([t], [setpoint.position], [v], [a], [setpoint.yaw], [setpoint.yaw_rate])
