"""The ``direct`` baseline: fly a straight line at the goal, no obstacle avoidance.

It is the floor every real planner must beat, and the simplest planner that exercises the whole
closed loop. The reference is a smooth rest-to-rest speed profile (raised-cosine ramps, so the
acceleration is continuous) along the segment from where the vehicle is at its first update to
the goal, limited to ``max_vel_mps`` and ``max_acc_mps2``, sampled as position + velocity +
acceleration feed-forward, heading along the segment. It uses odometry only; sensor frames are ignored.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from planner_pkg.config_schema import Config, positive
from planner_pkg.planning import EGO_MAX_ACC_MPS2, EGO_MAX_VEL_MPS
from planner_pkg.types import SensorFrame, Setpoint, VehicleState


@dataclass(frozen=True)
class DirectConfig(Config):
    """Limits of the straight-line profile."""

    max_vel_mps: float = positive(EGO_MAX_VEL_MPS)  # EGO-Planner's, for like-for-like comparisons
    max_acc_mps2: float = positive(EGO_MAX_ACC_MPS2)
    rate_hz: float = positive(10.0)


class StraightLineTrajectory:
    """Rest-to-rest motion from ``start`` to ``goal`` (3,) m beginning at time ``t0`` s.

    Speed follows raised-cosine ramps, ``v = v_peak (1 - cos(pi tau / T_r)) / 2``, so the
    acceleration is continuous (zero at both ends of each ramp, peak exactly ``max_acc``) and
    the vehicle's attitude and motor lags can follow it; between the ramps it cruises at
    ``v_peak = max_vel``, or less when the segment is too short to reach it. Before ``t0`` it
    holds ``start``, after the end ``goal``.
    """

    def __init__(self, start, goal, t0: float, max_vel: float, max_acc: float):
        self.start = np.asarray(start, dtype=np.float64).copy()
        self.goal = np.asarray(goal, dtype=np.float64).copy()
        self.t0 = float(t0)
        delta = self.goal - self.start
        self.length_m = float(np.linalg.norm(delta))
        self.direction = delta / self.length_m if self.length_m > 0 else np.zeros(3)
        self.yaw = math.atan2(delta[1], delta[0]) if math.hypot(delta[0], delta[1]) > 1e-6 else math.nan
        # a ramp to speed v with peak acceleration a lasts T_r = pi v / (2 a) and covers v T_r / 2
        self.v_peak = min(float(max_vel), math.sqrt(2.0 * max_acc * self.length_m / math.pi))
        self.t_ramp = math.pi * self.v_peak / (2.0 * max_acc)
        ramp_length = 0.5 * self.v_peak * self.t_ramp
        self.t_cruise = max(self.length_m - 2.0 * ramp_length, 0.0) / self.v_peak if self.v_peak > 0 else 0.0
        self.duration_s = 2.0 * self.t_ramp + self.t_cruise

    def _ramp(self, tau: float):
        """Arc length (m), speed (m/s), acceleration (m/s^2) ``tau`` s into the speed-up ramp."""
        v, tr = self.v_peak, self.t_ramp
        phase = math.pi * tau / tr
        s = 0.5 * v * (tau - tr / math.pi * math.sin(phase))
        return s, 0.5 * v * (1.0 - math.cos(phase)), 0.5 * v * math.pi / tr * math.sin(phase)

    def _profile(self, tau: float):
        """Arc length (m), speed (m/s), acceleration (m/s^2) at ``tau`` s after ``t0``."""
        if tau <= 0.0 or self.v_peak <= 0.0:
            return 0.0, 0.0, 0.0
        if tau >= self.duration_s:
            return self.length_m, 0.0, 0.0
        tr, tc = self.t_ramp, self.t_cruise
        if tau < tr:
            return self._ramp(tau)
        if tau < tr + tc:
            return 0.5 * self.v_peak * tr + self.v_peak * (tau - tr), self.v_peak, 0.0
        s, v, a = self._ramp(self.duration_s - tau)  # the slow-down mirrors the speed-up
        return self.length_m - s, v, -a

    def sample(self, t: float) -> Setpoint:
        """Reference at absolute time ``t`` s: position, velocity, acceleration and heading."""
        s, v, a = self._profile(float(t) - self.t0)
        d = self.direction
        return Setpoint(self.start + s * d, v * d, a * d, yaw=self.yaw)


class DirectPlanner:
    """Planner protocol implementation (see planner_pkg.sim.runner): one straight trajectory."""

    name = "direct"

    def __init__(self, config: DirectConfig = DirectConfig()):
        self.config = config
        self.rate_hz = config.rate_hz
        self.goal: Optional[np.ndarray] = None
        self.trajectory: Optional[StraightLineTrajectory] = None

    def reset(self, start, goal) -> None:
        self.goal = np.asarray(goal, dtype=np.float64).copy()
        self.trajectory = None

    def update(self, state: VehicleState, sensors: Optional[SensorFrame]) -> Optional[StraightLineTrajectory]:
        """The trajectory on the first call after ``reset``; None (keep it) afterwards."""
        if self.goal is None:
            raise RuntimeError("DirectPlanner.update() called before reset(start, goal)")
        if self.trajectory is not None:
            return None
        c = self.config
        self.trajectory = StraightLineTrajectory(state.position, self.goal, state.t, c.max_vel_mps, c.max_acc_mps2)
        return self.trajectory
