"""Trajectories the trajectory server samples: position / velocity / acceleration / yaw at any time.

Both classes implement :class:`planner_pkg.types.TrajectoryLike`: ``sample(t)`` takes absolute
time (s, the odometry clock) and returns a :class:`~planner_pkg.types.Setpoint`. They are
immutable after construction, so sampling is a pure function of ``t`` (the runner may sample
any time, in any order).

Yaw follows the direction of travel with a rate limit, like EGO's ``traj_server``: the heading
target is the direction from the current reference point to the point ``yaw_lookahead_s``
ahead (smoother than the instantaneous velocity); the rate-limited yaw profile is integrated
once at construction on a ``yaw_dt_s`` grid and interpolated when sampled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner_pkg.config_schema import Config, positive
from planner_pkg.planning.bspline import UniformBSpline, basis_matrix
from planner_pkg.types import Setpoint

__all__ = ["YawConfig", "HeadingProfile", "BsplineTrajectory", "BrakingTrajectory", "wrap_angle"]


def wrap_angle(a: float) -> float:
    """Angle in (-pi, pi], rad."""
    return math.atan2(math.sin(a), math.cos(a))


@dataclass(frozen=True)
class YawConfig(Config):
    """Heading along the path.

    max_yaw_rate_rad_s: rate limit, rad/s.
    yaw_lookahead_s: the heading points at the reference this far ahead, s.
    yaw_dt_s: integration step of the yaw profile, s.
    min_travel_m: closer look-ahead points than this keep the previous heading (hovering), m.
    """

    max_yaw_rate_rad_s: float = positive(1.5)
    yaw_lookahead_s: float = positive(0.5)
    yaw_dt_s: float = positive(0.02)
    min_travel_m: float = positive(0.05)


def _yaw_profile(positions: np.ndarray, start_yaw: float, cfg: YawConfig, lookahead: int) -> np.ndarray:
    """Rate-limited, unwrapped yaw (K,) rad along sampled positions (K, 3) at ``cfg.yaw_dt_s``."""
    k = positions.shape[0]
    ahead = positions[np.minimum(np.arange(k) + lookahead, k - 1)]
    delta = ahead[:, :2] - positions[:, :2]
    dist = np.hypot(delta[:, 0], delta[:, 1])
    target = np.arctan2(delta[:, 1], delta[:, 0])
    max_step = cfg.max_yaw_rate_rad_s * cfg.yaw_dt_s
    yaw = np.empty(k)
    y = 0.0 if not math.isfinite(start_yaw) else float(start_yaw)
    moving = (dist > cfg.min_travel_m).tolist()
    tgt = target.tolist()
    # a short sequential filter (one float op per 20 ms of trajectory): the rate limit makes
    # each value depend on the previous one
    yaw[0] = y
    for i in range(1, k):
        if moving[i]:
            err = math.atan2(math.sin(tgt[i] - y), math.cos(tgt[i] - y))
            y += max(-max_step, min(max_step, err))
        yaw[i] = y
    return yaw


class HeadingProfile:
    """The rate-limited heading of a trajectory, integrated once on a ``yaw_dt_s`` grid.

    positions: ``(T,) s -> (T, 3) m``, the trajectory's positions at times since its start
    (vectorised); duration: s; start_yaw: rad (NaN = 0).
    """

    def __init__(self, positions, duration: float, start_yaw: float, cfg: YawConfig):
        self.config = cfg
        self.duration = float(duration)
        n = max(2, int(math.ceil(self.duration / cfg.yaw_dt_s)) + 1)
        self._t = np.arange(n) * cfg.yaw_dt_s
        lookahead = max(1, int(round(cfg.yaw_lookahead_s / cfg.yaw_dt_s)))
        self._yaw = _yaw_profile(positions(self._t), start_yaw, cfg, lookahead)
        self._rate = np.gradient(self._yaw, cfg.yaw_dt_s)
        self.end_yaw = wrap_angle(float(self._yaw[-1]))

    def at(self, tau: float):
        """(yaw rad in (-pi, pi], yaw rate rad/s) at ``tau`` s since the start (held outside)."""
        tau_c = min(max(tau, 0.0), float(self._t[-1]))
        i = min(int(tau_c / self.config.yaw_dt_s), self._yaw.shape[0] - 2)
        f = tau_c / self.config.yaw_dt_s - i
        y = (1.0 - f) * self._yaw[i] + f * self._yaw[i + 1]
        rate = 0.0 if tau > self.duration else float(self._rate[i])
        return wrap_angle(float(y)), rate


class BsplineTrajectory:
    """A cubic :class:`UniformBSpline` flown from absolute time ``t_start`` (s).

    Before ``t_start`` the start state is held; after the end, the final position (with zero
    velocity and acceleration). ``start_yaw`` (rad) is where the heading profile begins (the
    previous reference's yaw, for continuity).
    """

    def __init__(self, spline: UniformBSpline, t_start: float, start_yaw: float = math.nan,
                 yaw: YawConfig = YawConfig()):
        if spline.degree != 3 or spline.control_points.shape[1] != 3:
            raise ValueError("BsplineTrajectory needs a cubic 3-D B-spline")
        if not math.isfinite(t_start):
            raise ValueError(f"t_start must be finite, got {t_start!r}")
        self.spline = spline
        self.t_start = float(t_start)
        self.duration = spline.duration
        self.dt = spline.dt
        q = spline.control_points
        n_seg = spline.num_segments
        idx = np.arange(n_seg)[:, None] + np.arange(4)
        # (S, 4, 3) power-basis coefficients of each segment: p(s) = c0 + c1 s + c2 s^2 + c3 s^3
        self._coef = np.einsum("ij,sjd->sid", basis_matrix(3), q[idx])
        self._end = spline.evaluate(self.duration)
        self.yaw_config = yaw
        self.heading = HeadingProfile(lambda tau: spline.evaluate(np.minimum(tau, self.duration)), self.duration,
                                      start_yaw, yaw)
        self.end_yaw = self.heading.end_yaw

    @property
    def t_end(self) -> float:
        """Absolute end time, s."""
        return self.t_start + self.duration

    def state(self, t: float):
        """(position, velocity, acceleration) (3,) each at absolute time ``t`` s."""
        tau = float(t) - self.t_start
        if tau > self.duration:
            return self._end.copy(), np.zeros(3), np.zeros(3)
        tau = max(tau, 0.0)
        u = tau / self.dt
        k = min(int(u), self._coef.shape[0] - 1)  # tau == duration: the end of the last segment
        s = u - k
        c0, c1, c2, c3 = self._coef[k]
        p = c0 + s * (c1 + s * (c2 + s * c3))
        v = (c1 + s * (2.0 * c2 + 3.0 * s * c3)) / self.dt
        a = (2.0 * c2 + 6.0 * s * c3) / (self.dt * self.dt)
        return p, v, a

    def positions(self, t) -> np.ndarray:
        """Positions (T, 3) m at absolute times ``t`` (T,) s (vectorised; held before the start
        and after the end, as :meth:`state`)."""
        tau = np.atleast_1d(np.asarray(t, dtype=np.float64)) - self.t_start
        return self.spline.evaluate(np.clip(tau, 0.0, self.duration)).reshape(-1, 3)

    def jerk(self, t: float) -> np.ndarray:
        """(3,) jerk, m/s^3, at absolute time ``t``: constant over each knot interval (a cubic's
        third derivative); zero before the start and after the end (a held state)."""
        tau = float(t) - self.t_start
        if tau < 0.0 or tau > self.duration:
            return np.zeros(3)
        k = min(int(tau / self.dt), self._coef.shape[0] - 1)
        return self._coef[k][3] * (6.0 / (self.dt * self.dt * self.dt))

    def yaw_at(self, t: float):
        """(yaw rad in (-pi, pi], yaw rate rad/s) at absolute time ``t``."""
        return self.heading.at(float(t) - self.t_start)

    def sample(self, t: float) -> Setpoint:
        """Reference at absolute time ``t`` s (TrajectoryLike), with the jerk as feed-forward."""
        if not math.isfinite(t):
            raise ValueError(f"cannot sample a trajectory at t = {t!r}")
        p, v, a = self.state(t)
        yaw, rate = self.yaw_at(t)
        return Setpoint(p, v, a, yaw=yaw, yaw_rate=rate, jerk=self.jerk(t))


class BrakingTrajectory:
    """Emergency stop from (p0, v0) at ``t_start``: a deceleration of ``decel_mps2`` m/s^2, then
    hold; heading fixed at ``yaw`` (rad).

    steer_rad = 0: straight along v0 (a = -decel v0 / |v0| until rest). Otherwise the same
    acceleration magnitude turned by ``steer_rad`` toward the horizontal side ``n`` (the
    horizontal unit vector 90 deg left of v0; a negative angle steers right): first ``a1 =
    decel (-cos(th) v0/|v0| + sin(th) n)`` until the speed along v0 is gone (``T1 = |v0| /
    (decel cos th)``), which leaves ``|v0| tan(th)`` sideways, then ``a2 = -decel n`` until rest
    (``T2 = |v0| tan(th) / decel``). The stop lies ``D / cos th`` along v0 (``D = |v0|^2 / (2
    decel)``, the straight stop) and ``D (tan th / cos th + tan^2 th)`` aside: at 5 m/s and 10
    m/s^2, steering 30 deg stops 1.44 m along (1.25 straight) and 1.25 m aside. The acceleration
    never exceeds ``decel_mps2``; its direction jumps once, at ``T1``.

    With ``ramp_s`` > 0 and the ``acceleration`` the vehicle flies at ``t_start``, the stop is
    one the vehicle can follow: the acceleration first turns from that one to the first phase's
    linearly over ``ramp_s`` (a quadrotor changes its acceleration by tilting: one accelerating
    forward pitches back before it brakes, in about the same time whatever the change, as its
    attitude loop is linear up to the tilt limit), then the two phases follow from where the ramp
    left the vehicle (their directions from its velocity there). If the speed along ``v0`` is gone
    within the ramp, the ramp ends there. 0 (or no acceleration): the braking starts at once.
    """

    def __init__(self, position, velocity, t_start: float, decel_mps2: float, yaw: float = math.nan,
                 steer_rad: float = 0.0, acceleration=None, ramp_s: float = 0.0):
        if not (math.isfinite(decel_mps2) and decel_mps2 > 0):
            raise ValueError(f"braking deceleration must be positive, got {decel_mps2!r}")
        if not (math.isfinite(steer_rad) and abs(steer_rad) < math.radians(80.0)):
            raise ValueError(f"the steer angle must be finite and within +-80 deg, got {steer_rad!r} rad")
        self.p0 = np.asarray(position, dtype=np.float64).copy()
        self.v0 = np.asarray(velocity, dtype=np.float64).copy()
        if not (np.isfinite(self.p0).all() and np.isfinite(self.v0).all()):
            raise ValueError("BrakingTrajectory needs a finite position and velocity")
        self.t_start = float(t_start)
        speed = float(np.linalg.norm(self.v0))
        self.direction = self.v0 / speed if speed > 1e-9 else np.zeros(3)
        self.speed = speed
        self.decel = float(decel_mps2)
        self.yaw = yaw
        horizontal = float(np.hypot(self.direction[0], self.direction[1]))
        requested_steer = float(steer_rad)  # (the braking after a ramp judges its own motion)
        if horizontal < 1e-6:
            steer_rad = 0.0  # no horizontal motion: nothing to steer across
        self.steer_rad = float(steer_rad)
        self.side = (np.array([-self.direction[1], self.direction[0], 0.0]) / horizontal if horizontal >= 1e-6
                     else np.zeros(3))  # left of the motion, horizontal
        c, sn = math.cos(self.steer_rad), math.sin(self.steer_rad)
        self._a1 = self.decel * (-c * self.direction + sn * self.side)
        self._t1 = speed / (self.decel * c)
        lateral = speed * math.tan(self.steer_rad)  # m/s sideways after the first phase (signed)
        self._t2 = abs(lateral) / self.decel
        self._a2 = -math.copysign(self.decel, lateral) * self.side if lateral != 0.0 else np.zeros(3)
        self._p1 = self.p0 + self.v0 * self._t1 + 0.5 * self._a1 * self._t1 ** 2
        self._v1 = lateral * self.side
        self.duration = self._t1 + self._t2
        self.stop_position = self._p1 + self._v1 * self._t2 + 0.5 * self._a2 * self._t2 ** 2
        self.ramp_s = 0.0
        self._ramp = None  # (T, a0, jerk vector, the braking after the ramp) when there is one
        if not (math.isfinite(ramp_s) and ramp_s >= 0):
            raise ValueError(f"the braking ramp must be finite and >= 0 s, got {ramp_s!r}")
        if ramp_s > 0 and acceleration is not None:
            a0 = np.asarray(acceleration, dtype=np.float64).reshape(3)
            if not np.isfinite(a0).all():
                raise ValueError("BrakingTrajectory needs a finite acceleration")
            if speed > 1e-9:
                ramp = float(ramp_s)
                j = (self._a1 - a0) / ramp
                # the speed along v0 over the ramp: s + (a0.d) tau + (j.d) tau^2 / 2; ends at its first zero
                roots = np.roots([0.5 * float(j @ self.direction), float(a0 @ self.direction), speed])
                roots = [float(r.real) for r in roots if abs(r.imag) < 1e-12 and 1e-9 < r.real < ramp]
                ramp = min(roots, default=ramp)
                p1 = self.p0 + self.v0 * ramp + 0.5 * a0 * ramp ** 2 + j * ramp ** 3 / 6.0
                v1 = self.v0 + a0 * ramp + 0.5 * j * ramp ** 2
                rest = BrakingTrajectory(p1, v1, self.t_start + ramp, decel_mps2, yaw, requested_steer)
                self._ramp = (ramp, a0, j, rest)
                self.ramp_s = ramp
                self.duration = ramp + rest.duration
                self.stop_position = rest.stop_position

    @property
    def t_end(self) -> float:
        return self.t_start + self.duration

    def state(self, t: float):
        if self._ramp is not None:
            ramp, a0, j, rest = self._ramp
            tau = max(float(t) - self.t_start, 0.0)
            if tau >= ramp:
                return rest.state(t)
            return (self.p0 + self.v0 * tau + 0.5 * a0 * tau * tau + j * (tau ** 3 / 6.0),
                    self.v0 + a0 * tau + 0.5 * j * tau * tau, a0 + j * tau)
        tau = min(max(float(t) - self.t_start, 0.0), self.duration)
        if tau < self._t1:
            return self.p0 + self.v0 * tau + 0.5 * self._a1 * tau * tau, self.v0 + self._a1 * tau, self._a1.copy()
        if tau < self.duration:
            h = tau - self._t1
            return self._p1 + self._v1 * h + 0.5 * self._a2 * h * h, self._v1 + self._a2 * h, self._a2.copy()
        return self.stop_position.copy(), np.zeros(3), np.zeros(3)

    def positions(self, t) -> np.ndarray:
        """Positions (T, 3) m at absolute times ``t`` (T,) s."""
        return np.array([self.state(tt)[0] for tt in np.atleast_1d(np.asarray(t, dtype=np.float64))]).reshape(-1, 3)

    def sample(self, t: float) -> Setpoint:
        """Reference at absolute time ``t`` s; its jerk is the ramp's during the ramp, else zero
        (constant acceleration in each phase, then rest)."""
        if not math.isfinite(t):
            raise ValueError(f"cannot sample a trajectory at t = {t!r}")
        p, v, a = self.state(t)
        ramping = self._ramp is not None and float(t) - self.t_start < self.ramp_s
        return Setpoint(p, v, a, yaw=self.yaw, jerk=self._ramp[2].copy() if ramping else np.zeros(3))
