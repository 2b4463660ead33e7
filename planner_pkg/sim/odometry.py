"""Odometry as the planner sees it: the true state, delayed and noisy (see :class:`OdometryParams`)."""
from __future__ import annotations

from collections import deque
from typing import Optional

import numpy as np

from planner_pkg.sim.params import OdometryParams
from planner_pkg.types import VehicleState


class Odometry:
    """Delay line plus Gaussian noise on position and velocity.

    ``record(state)`` stores true states; ``read()`` returns the newest recorded state that is
    at least ``latency_s`` older than the last one recorded (its own timestamp kept, as a ROS
    message stamp would be), with noise added. Until that much history exists it returns the
    oldest state recorded.
    Attitude and body rates pass through unchanged (the flight controller's estimate is good).
    """

    def __init__(self, params: OdometryParams = OdometryParams(), rng: Optional[np.random.Generator] = None):
        noisy = params.position_noise_std_m > 0 or params.velocity_noise_std_mps > 0
        if noisy and rng is None:
            raise ValueError("Odometry with noise needs a seeded rng for reproducibility")
        self.params = params
        self.rng = rng
        self._buffer: deque = deque()

    def reset(self) -> None:
        self._buffer.clear()

    def record(self, state: VehicleState) -> None:
        """Store a true state (call at the control rate so the delay has fine resolution)."""
        self._buffer.append(state)
        cutoff = state.t - self.params.latency_s + 1e-9  # tolerance: t accumulates in float steps
        # drop entries once a newer one is itself old enough
        while len(self._buffer) > 1 and self._buffer[1].t <= cutoff:
            self._buffer.popleft()

    def read(self) -> VehicleState:
        """The delayed, noisy state (ValueError before anything was recorded)."""
        if not self._buffer:
            raise ValueError("Odometry.read() before any state was recorded")
        p = self.params
        delayed = self._buffer[0]
        if p.position_noise_std_m == 0 and p.velocity_noise_std_mps == 0:
            return delayed
        return VehicleState(
            delayed.t,
            delayed.position + self.rng.normal(0.0, p.position_noise_std_m, 3),
            delayed.velocity + self.rng.normal(0.0, p.velocity_noise_std_mps, 3),
            delayed.attitude,
            delayed.angular_velocity,
        )

    def measure(self, state: VehicleState) -> VehicleState:
        """``record(state)`` then ``read()``."""
        self.record(state)
        return self.read()
