"""Collision detection for a vehicle modelled as a ball of radius ``radius_m`` (metres).

The vehicle collides when ``world.signed_distance(position) < radius_m`` (obstacles, the ground
z = 0 and the ceiling all count). *Clearance* is the gap between that ball and the nearest
surface, ``signed_distance - radius_m``; negative means collision.

Evaluating the distance at every 500 Hz dynamics step would dominate the simulator's cost, so
:class:`CollisionMonitor` spaces its checks adaptively and conservatively: after measuring a
gap ``g`` at speed ``s``, the next check is due no later than the time in which the vehicle,
accelerating at its physical maximum ``a``, could close ``safety_fraction * g``
(``s t + a t^2 / 2 = f g``), and never more than ``max_interval_s`` later. So no penetration can
happen between two checks, checks become every-step near obstacles, and the reported minimum
clearance is exact to within the distance flown in one interval where it is small.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np


def clearance(world, position, radius_m: float) -> float:
    """Gap (m) between a ball of ``radius_m`` at ``position`` (3,) and the nearest surface."""
    return float(world.signed_distance(np.asarray(position, dtype=np.float64))) - radius_m


class CollisionMonitor:
    """Collision and minimum clearance along one flight.

    Call ``update(t, position, speed)`` every dynamics step; it returns True on the first step
    found in collision. ``max_accel_mps2`` must bound the vehicle's acceleration (thrust limit
    plus gravity) for the spacing to be safe.
    """

    def __init__(
        self,
        world,
        radius_m: float,
        *,
        max_accel_mps2: float,
        max_interval_s: float = 0.05,
        safety_fraction: float = 0.5,
    ):
        if not radius_m >= 0:
            raise ValueError(f"collision radius must be >= 0 m, got {radius_m}")
        if not (max_accel_mps2 > 0 and max_interval_s > 0 and 0 < safety_fraction < 1):
            raise ValueError("need max_accel_mps2 > 0, max_interval_s > 0 and 0 < safety_fraction < 1")
        self.world = world
        self.radius_m = float(radius_m)
        self.max_accel_mps2 = float(max_accel_mps2)
        self.max_interval_s = float(max_interval_s)
        self.safety_fraction = float(safety_fraction)
        self.reset()

    def reset(self) -> None:
        self.min_clearance_m = math.inf
        self.collided = False
        self.collision_time_s: Optional[float] = None
        self.collision_position: Optional[np.ndarray] = None
        self.checks = 0
        self._next_check_t = -math.inf

    def update(self, t: float, position, speed_mps: float) -> bool:
        """Check at time ``t`` (s) if one is due; True when this check finds a collision."""
        if t < self._next_check_t or self.collided:
            return False
        gap = clearance(self.world, position, self.radius_m)
        self.checks += 1
        self.min_clearance_m = min(self.min_clearance_m, gap)
        if gap < 0.0:
            self.collided = True
            self.collision_time_s = float(t)
            self.collision_position = np.array(position, dtype=np.float64)
            return True
        a, s = self.max_accel_mps2, abs(float(speed_mps))
        closing = self.safety_fraction * gap
        t_safe = (math.sqrt(s * s + 2.0 * a * closing) - s) / a
        self._next_check_t = t + min(t_safe, self.max_interval_s)
        return False
