"""Control allocation for the X quadrotor: collective thrust + body torques -> rotor speeds.

Saturation policy (why: attitude is what keeps a quadrotor upright; yaw is the weakest and
least urgent axis; collective thrust can give a little for a moment):
    1. roll/pitch torques and collective thrust are allocated first;
    2. yaw torque is added only as far as it fits in the rotor thrust range;
    3. if roll/pitch alone do not fit, all rotors are shifted together (collective thrust is
       sacrificed, the torque differences are kept), then clipped as a last resort.
"""
from __future__ import annotations

import math

import numpy as np

from planner_pkg.sim.dynamics import ROTOR_SPIN, ROTOR_XY_UNIT
from planner_pkg.sim.params import QuadrotorParams


class Mixer:
    """Allocation matrix of :class:`QuadrotorParams` and its inverse, with saturation."""

    def __init__(self, params: QuadrotorParams):
        self.params = params
        d = params.arm_length_m / math.sqrt(2.0)
        kappa = params.k_torque_nm_per_rad2s2 / params.k_thrust_n_per_rad2s2
        # rows: collective thrust, tau_x = sum y_i f_i, tau_y = -sum x_i f_i, tau_z = -kappa sum s_i f_i
        self.allocation = np.array(
            [
                [1.0, 1.0, 1.0, 1.0],
                [d * y for _, y in ROTOR_XY_UNIT],
                [-d * x for x, _ in ROTOR_XY_UNIT],
                [-kappa * s for s in ROTOR_SPIN],
            ]
        )
        self._inverse = np.linalg.inv(self.allocation)
        self._kf = params.k_thrust_n_per_rad2s2
        self.rotor_thrust_min_n = self._kf * params.rotor_speed_min_rad_s**2
        self.rotor_thrust_max_n = self._kf * params.rotor_speed_max_rad_s**2

    def rotor_thrusts(self, thrust_n: float, torque_nm) -> np.ndarray:
        """Per-rotor thrusts (4,), N, realising (thrust, torque) within the rotor range."""
        lo, hi = self.rotor_thrust_min_n, self.rotor_thrust_max_n
        inv = self._inverse
        base = inv[:, 0] * thrust_n + inv[:, 1] * torque_nm[0] + inv[:, 2] * torque_nm[1]
        yaw = inv[:, 3] * torque_nm[2]
        if base.min() >= lo and base.max() <= hi:
            # largest fraction of the yaw torque that keeps every rotor in range
            scale = 1.0
            for b, y in zip(base, yaw):
                if y > 0.0 and b + y > hi:
                    scale = min(scale, (hi - b) / y)
                elif y < 0.0 and b + y < lo:
                    scale = min(scale, (lo - b) / y)
            return base + scale * yaw
        spread = base.max() - base.min()
        if spread <= hi - lo:
            shift = hi - base.max() if base.max() > hi else lo - base.min()
            return base + shift
        return np.clip(base, lo, hi)

    def rotor_speeds(self, thrust_n: float, torque_nm) -> np.ndarray:
        """Rotor speed commands (4,), rad/s, PX4 quad-X order."""
        f = self.rotor_thrusts(thrust_n, torque_nm)
        return np.sqrt(np.maximum(f, 0.0) / self._kf)
