"""Point-mass quadrotor: acceleration command through a first-order thrust lag, linear drag.

The fast model (the "Back to Newton's Laws" training dynamics, Zhang et al. 2024), for runs
where rotor and attitude dynamics do not matter. State, SI units, world ENU:
    p' = v
    v' = f - g e3 - D v                     f: specific thrust (thrust / mass), m/s^2
    f' = (sat(a_cmd + g e3) - f) / tau      saturated: f_z >= 0, |f| <= max_thrust_accel
    psi' = clip(k_psi * wrap(psi_cmd - psi), +-max_yaw_rate)

The linear part is integrated exactly per axis (matrix exponential, cached per step size), the
heading explicitly. The reported attitude points body z along ``f`` with heading ``psi`` (so a
camera mounted on it tilts the way a real quadrotor does when it accelerates); the reported
angular velocity is only the yaw rate about body z (roll/pitch rates are not modelled).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.linalg import expm

from planner_pkg.sim.params import PointMassParams
from planner_pkg.sim.rotation import cross3, matrix_to_quaternion, quaternion_from_yaw, wrap_angle
from planner_pkg.types import VehicleState


class AccelerationCommand(NamedTuple):
    """Command of the point-mass model.

    acceleration: (3,) m/s^2, world ENU, gravity excluded (0 = hover).
    yaw: rad, desired heading.
    """

    acceleration: np.ndarray
    yaw: float


def attitude_from_thrust(f, yaw: float) -> np.ndarray:
    """Quaternion (x, y, z, w) with body z along ``f`` (3,) and body x heading ``yaw`` (rad).

    The heading is kept by projecting (cos yaw, sin yaw, 0) onto the plane normal to ``f``, as
    in Lee et al. 2010; for a zero or near-horizontal ``f`` the pure-yaw attitude is returned.
    Plain float arithmetic: this runs at the control rate.
    """
    fx, fy, fz = (float(c) for c in f)
    norm = math.sqrt(fx * fx + fy * fy + fz * fz)
    if not norm > 1e-6:
        return quaternion_from_yaw(yaw)
    b3 = (fx / norm, fy / norm, fz / norm)
    c, s = math.cos(yaw), math.sin(yaw)
    b2 = (-b3[2] * s, b3[2] * c, b3[0] * s - b3[1] * c)  # b3 x (c, s, 0)
    n2 = math.sqrt(b2[0] * b2[0] + b2[1] * b2[1] + b2[2] * b2[2])
    if n2 < 1e-6:
        return quaternion_from_yaw(yaw)
    b2 = (b2[0] / n2, b2[1] / n2, b2[2] / n2)
    b1 = cross3(b2, b3)
    return matrix_to_quaternion(np.array([[b1[0], b2[0], b3[0]], [b1[1], b2[1], b3[1]], [b1[2], b2[2], b3[2]]]))


class PointMassQuadrotor:
    """Point-mass vehicle model; commanded by :class:`AccelerationCommand`."""

    kind = "point_mass"

    def __init__(self, params: PointMassParams = PointMassParams()):
        self.params = params
        self._g = params.gravity_mps2
        self._drag = tuple(float(c) for c in params.drag_coeffs_per_s)
        self._inv_tau = 1.0 / params.thrust_time_constant_s
        self._transitions: dict = {}
        self._t = 0.0
        self.reset(VehicleState.at_rest(np.zeros(3)))

    def reset(self, state: VehicleState) -> None:
        """Place the vehicle at ``state``, thrusting exactly against gravity and drag."""
        self._p = [float(v) for v in state.position]
        self._v = [float(v) for v in state.velocity]
        # start in equilibrium of the velocity it is given (no initial jolt)
        self._f = [self._drag[i] * self._v[i] for i in range(3)]
        self._f[2] += self._g
        self._yaw = state.yaw if np.isfinite(state.attitude).all() else math.nan
        self._yaw_rate = 0.0
        self._t = state.t

    @property
    def t(self) -> float:
        return self._t

    @property
    def position(self) -> np.ndarray:
        return np.array(self._p)

    @property
    def velocity(self) -> np.ndarray:
        return np.array(self._v)

    @property
    def specific_thrust(self) -> np.ndarray:
        """(3,) m/s^2, thrust / mass in world ENU."""
        return np.array(self._f)

    def kinematics(self) -> tuple:
        """(px, py, pz, vx, vy, vz) as plain floats, m and m/s: the runner's per-step view."""
        return (*self._p, *self._v)

    def is_finite(self) -> bool:
        """False once any state element is NaN or inf (or absurdly large: the sum overflows)."""
        return math.isfinite(sum(self._p) + sum(self._v) + sum(self._f) + self._yaw)

    def state(self) -> VehicleState:
        if not math.isfinite(self._yaw) or not all(math.isfinite(v) for v in self._f):
            attitude = np.full(4, np.nan)
        else:
            attitude = attitude_from_thrust(self._f, self._yaw)
        return VehicleState.from_floats(self._t, self._p, self._v, attitude, (0.0, 0.0, self._yaw_rate))

    def _thrust_command(self, accel_cmd) -> list:
        p = self.params
        f = [float(accel_cmd[0]), float(accel_cmd[1]), float(accel_cmd[2]) + self._g]
        f[2] = max(f[2], 0.0)  # rotors cannot pull down
        n = math.sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2])
        if n > p.max_thrust_accel_mps2:
            f = [c * p.max_thrust_accel_mps2 / n for c in f]
        return f

    def _transition(self, dt: float):
        """Per-axis exact discretisation over ``dt`` (cached): x+ = Phi x + Gamma (f_cmd, g).

        Each axis is linear and time-invariant with state (p, v, f) and inputs (f_cmd, gravity),
        so ``expm`` of the augmented 5x5 system gives the step exactly (no integration error).
        """
        cached = self._transitions.get(dt)
        if cached is None:
            cached = []
            for axis, drag in enumerate(self._drag):
                A = np.zeros((5, 5))
                A[0, 1] = 1.0  # p' = v
                A[1, 1], A[1, 2], A[1, 4] = -drag, 1.0, -1.0 if axis == 2 else 0.0  # v' = f - d v - g
                A[2, 2], A[2, 3] = -self._inv_tau, self._inv_tau  # f' = (f_cmd - f) / tau
                M = expm(A * dt)
                cached.append((M[:3, :3].tolist(), M[:3, 3].tolist(), M[:3, 4].tolist()))
            self._transitions[dt] = cached
        return cached

    def step(self, command: AccelerationCommand, dt: float) -> None:
        """Advance ``dt`` s (exact for the linear part) under a constant command."""
        fc = self._thrust_command(command.acceleration)
        g = self._g
        for axis, (phi, gamma_cmd, gamma_g) in enumerate(self._transition(dt)):
            x = (self._p[axis], self._v[axis], self._f[axis])
            p, v, f = (
                row[0] * x[0] + row[1] * x[1] + row[2] * x[2] + gc * fc[axis] + gg * g
                for row, gc, gg in zip(phi, gamma_cmd, gamma_g)
            )
            self._p[axis], self._v[axis], self._f[axis] = p, v, f
        # heading: rate-limited proportional tracking, integrated exactly over the step
        p = self.params
        err = wrap_angle(float(command.yaw) - self._yaw) if math.isfinite(command.yaw) else 0.0
        rate = max(-p.max_yaw_rate_rad_s, min(p.max_yaw_rate_rad_s, p.yaw_gain_per_s * err))
        self._yaw_rate = rate
        self._yaw = wrap_angle(self._yaw + rate * dt)
        self._t += dt
