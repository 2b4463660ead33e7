"""The flight envelope: the largest magnitudes a position, velocity, acceleration or rate may have
before the stack treats the number as garbage rather than as a (possibly extreme) flight.

It is a sanity bound, not the vehicle's performance limits (those live in the planner and
controller configs): a message with odometry at 1e300 m or a velocity of 1e30 m/s, or a command
line ``--max-vel 1e308``, is refused with a reason instead of flowing into arithmetic that
overflows or into a summary that reports it. The defaults are generous for any multirotor flight
in a local map frame (racing drones reach ~50 m/s and ~35 rad/s); a user flying something
faster builds a :class:`FlightEnvelope` with larger values and passes it to the readers in
``planner_pkg.nodes.conversions``.

Plain Python (no NumPy arrays kept, no rclpy): the command line uses it too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from planner_pkg.config_schema import Config, positive

__all__ = ["FlightEnvelope", "DEFAULT_ENVELOPE"]


@dataclass(frozen=True)
class FlightEnvelope(Config):
    """Magnitude bounds (all finite, > 0).

    max_position_m: largest |x|, |y| or |z| of a position in the map frame, m (100 km).
    max_speed_mps: largest velocity norm, m/s.
    max_accel_mps2: largest acceleration norm (gravity excluded), m/s^2 (about 10 g).
    max_angular_rate_rad_s: largest body or yaw rate, rad/s.
    max_trajectory_duration_s: largest ``time_from_start`` of a trajectory sample, s.
    """

    max_position_m: float = positive(1.0e5)
    max_speed_mps: float = positive(100.0)
    max_accel_mps2: float = positive(100.0)
    max_angular_rate_rad_s: float = positive(50.0)
    max_trajectory_duration_s: float = positive(3600.0)

    # -- checks: each raises ValueError naming ``what`` and the bound (non-finite values skipped) --
    def check_position(self, what: str, xyz: Sequence[float]) -> None:
        """Every finite component within +-max_position_m. NaN (= unused in a setpoint) and inf
        are skipped: the callers' finiteness checks refuse them with words that say so."""
        worst = max((abs(c) for c in xyz if math.isfinite(c)), default=0.0)
        if worst > self.max_position_m:
            raise ValueError(f"{what} {_fmt(xyz)} is outside the flight envelope "
                             f"(|coordinate| <= max_position_m = {self.max_position_m:g} m)")

    def check_speed(self, what: str, xyz: Sequence[float]) -> None:
        self._check_norm(what, xyz, self.max_speed_mps, "max_speed_mps", "m/s")

    def check_accel(self, what: str, xyz: Sequence[float]) -> None:
        self._check_norm(what, xyz, self.max_accel_mps2, "max_accel_mps2", "m/s^2")

    def check_rate(self, what: str, xyz: Sequence[float]) -> None:
        self._check_norm(what, xyz, self.max_angular_rate_rad_s, "max_angular_rate_rad_s", "rad/s")

    def check_duration(self, what: str, seconds: float) -> None:
        if math.isfinite(seconds) and abs(seconds) > self.max_trajectory_duration_s:
            raise ValueError(f"{what} {seconds:g} s is outside the flight envelope "
                             f"(max_trajectory_duration_s = {self.max_trajectory_duration_s:g} s)")

    @staticmethod
    def _check_norm(what: str, xyz: Sequence[float], limit: float, name: str, unit: str) -> None:
        values = [c for c in xyz if math.isfinite(c)]  # NaN / inf: the caller's finiteness checks
        big = max((abs(c) for c in values), default=0.0)
        if big > limit:  # before squaring: 1e200 ** 2 overflows
            norm = big
        else:
            norm = math.sqrt(sum(c * c for c in values))
        if norm > limit:
            raise ValueError(f"{what} {_fmt(xyz)} ({norm:.3g} {unit}) is outside the flight envelope "
                             f"({name} = {limit:g} {unit})")


def _fmt(xyz: Sequence[float]) -> str:
    return "[" + ", ".join(f"{c:.4g}" for c in xyz) + "]"


#: The envelope every reader uses unless given another.
DEFAULT_ENVELOPE = FlightEnvelope()
