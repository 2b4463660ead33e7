"""Rigid-body quadrotor dynamics: 6-DoF Newton-Euler, rotor-speed lag, linear rotor drag, RK4.

State vector (17,), SI units:
    [0:3]  position, m, world ENU          [3:6]   velocity, m/s, world ENU
    [6:10] attitude quaternion (x, y, z, w), body FLU -> world ENU
    [10:13] body angular velocity, rad/s   [13:17] rotor speeds, rad/s (PX4 quad-X order)

Equations (Mahony, Kumar, Corke, IEEE RAM 2012; drag as Faessler et al., RA-L 2018):
    p' = v
    v' = (T / m) R e3 - g e3 - R D R^T v            T = k_f sum(w_i^2)
    q' = 1/2 q (x) (Omega, 0)
    J Omega' = tau - Omega x J Omega                tau from the X geometry and k_m
    w_i' = (sat(w_cmd_i) - w_i) / tau_m             first-order motor lag, saturated command

Not modelled (stated so nobody relies on it): rotor gyroscopic and inertia effects, blade
flapping, ground effect, ground contact (touching the ground is a collision in the runner),
battery sag, wind. The derivative is written with Python floats on purpose: for a 17-element
state it is ~4x faster than the same algebra on small numpy arrays, and the 500 Hz loop is
the simulator's hot path.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from planner_pkg.sim.params import QuadrotorParams
from planner_pkg.types import VehicleState

STATE_SIZE = 17
_POS, _VEL, _QUAT, _RATE, _ROTOR = slice(0, 3), slice(3, 6), slice(6, 10), slice(10, 13), slice(13, 17)

# Rotor geometry of the X frame in units of arm/sqrt(2), body FLU, PX4 order:
# 0 front-right CCW, 1 rear-left CCW, 2 front-left CW, 3 rear-right CW.
ROTOR_XY_UNIT = ((1.0, -1.0), (-1.0, 1.0), (1.0, 1.0), (-1.0, -1.0))
# Spin seen from above: +1 CCW. A CCW rotor's reaction torque on the body is about -z.
ROTOR_SPIN = (1.0, 1.0, -1.0, -1.0)


class RigidBodyQuadrotor:
    """Simulated quadrotor airframe; commanded by rotor speeds (rad/s).

    Use ``reset(state)`` to place it, ``step(rotor_speed_cmd, dt)`` to advance it with one RK4
    step, and ``state()`` to read a :class:`VehicleState`.
    """

    kind = "quadrotor"

    def __init__(self, params: QuadrotorParams = QuadrotorParams()):
        self.params = params
        self._m = params.mass_kg
        self._g = params.gravity_mps2
        self._kf = params.k_thrust_n_per_rad2s2
        self._kappa = params.k_torque_nm_per_rad2s2 / params.k_thrust_n_per_rad2s2
        self._d = params.arm_length_m / math.sqrt(2.0)
        self._jx, self._jy, self._jz = (float(v) for v in params.inertia_kgm2)
        self._dx, self._dy, self._dz = (float(v) for v in params.drag_coeffs_per_s)
        self._inv_tau = 1.0 / params.motor_time_constant_s
        self._t = 0.0
        self._s = [0.0] * STATE_SIZE
        self.reset(VehicleState.at_rest(np.zeros(3)))

    # -- state access -------------------------------------------------------------------------
    def reset(self, state: VehicleState, rotor_speeds_rad_s: Optional[Sequence[float]] = None) -> None:
        """Place the vehicle at ``state``; rotors default to hover speed (airborne start)."""
        rotors = (
            [self.params.hover_rotor_speed_rad_s] * 4 if rotor_speeds_rad_s is None else list(rotor_speeds_rad_s)
        )
        if len(rotors) != 4:
            raise ValueError(f"need 4 rotor speeds, got {len(rotors)}")
        q = np.asarray(state.attitude, dtype=np.float64)
        n = float(np.linalg.norm(q))
        if n > 0.0:
            q = q / n
        self._s = (
            list(map(float, state.position))
            + list(map(float, state.velocity))
            + list(map(float, q))
            + list(map(float, state.angular_velocity))
            + [float(r) for r in rotors]
        )
        self._t = state.t

    @property
    def t(self) -> float:
        """Simulation time, s."""
        return self._t

    def state(self) -> VehicleState:
        """Current :class:`VehicleState` (copies)."""
        s = self._s
        return VehicleState.from_floats(self._t, s[0:3], s[3:6], s[6:10], s[10:13])

    @property
    def position(self) -> np.ndarray:
        """(3,) m, world ENU (a copy)."""
        return np.array(self._s[0:3])

    @property
    def velocity(self) -> np.ndarray:
        """(3,) m/s, world ENU (a copy)."""
        return np.array(self._s[3:6])

    @property
    def rotor_speeds(self) -> np.ndarray:
        """(4,) rad/s, PX4 quad-X order (a copy)."""
        return np.array(self._s[13:17])

    def state_vector(self) -> np.ndarray:
        """(17,) full state, layout in the module docstring (a copy)."""
        return np.array(self._s)

    def kinematics(self) -> tuple:
        """(px, py, pz, vx, vy, vz) as plain floats, m and m/s: the runner's per-step view."""
        return tuple(self._s[0:6])

    def is_finite(self) -> bool:
        """False once any state element is NaN or inf (or absurdly large: the sum overflows)."""
        return math.isfinite(sum(self._s))

    # -- physics ------------------------------------------------------------------------------
    def rotor_forces(self, rotor_speeds_rad_s) -> tuple:
        """Collective thrust, N, and body torques (3,), N m, produced by rotor speeds (4,)."""
        f = [self._kf * w * w for w in rotor_speeds_rad_s]
        return self._wrench(f)

    def _wrench(self, f):
        d, kappa = self._d, self._kappa
        thrust = f[0] + f[1] + f[2] + f[3]
        tau_x = d * (-f[0] + f[1] + f[2] - f[3])  # sum of y_i f_i
        tau_y = d * (-f[0] + f[1] - f[2] + f[3])  # sum of -x_i f_i
        tau_z = kappa * (-f[0] - f[1] + f[2] + f[3])  # CCW rotors push the body CW
        return thrust, (tau_x, tau_y, tau_z)

    def derivative(self, s: Sequence[float], rotor_cmd: Sequence[float]) -> list:
        """Time derivative of the state ``s`` (17,) under saturated rotor commands (4,), SI."""
        (_, _, _, vx, vy, vz, qx, qy, qz, qw, wx, wy, wz, r0, r1, r2, r3) = s
        kf, d, kappa = self._kf, self._d, self._kappa
        f0, f1, f2, f3 = kf * r0 * r0, kf * r1 * r1, kf * r2 * r2, kf * r3 * r3
        thrust = f0 + f1 + f2 + f3
        tau_x = d * (-f0 + f1 + f2 - f3)  # same as _wrench, inlined: this is the hot path
        tau_y = d * (-f0 + f1 - f2 + f3)
        tau_z = kappa * (-f0 - f1 + f2 + f3)
        # R from a possibly slightly non-unit quaternion (RK4 stages): scale by 2/|q|^2 so R
        # stays a rotation; the stored state is renormalised after every step.
        s2 = 2.0 / (qx * qx + qy * qy + qz * qz + qw * qw)
        r00 = 1.0 - s2 * (qy * qy + qz * qz)
        r01 = s2 * (qx * qy - qz * qw)
        r02 = s2 * (qx * qz + qy * qw)
        r10 = s2 * (qx * qy + qz * qw)
        r11 = 1.0 - s2 * (qx * qx + qz * qz)
        r12 = s2 * (qy * qz - qx * qw)
        r20 = s2 * (qx * qz - qy * qw)
        r21 = s2 * (qy * qz + qx * qw)
        r22 = 1.0 - s2 * (qx * qx + qy * qy)
        # rotor drag acts on the body-frame velocity
        dbx = self._dx * (r00 * vx + r10 * vy + r20 * vz)
        dby = self._dy * (r01 * vx + r11 * vy + r21 * vz)
        dbz = self._dz * (r02 * vx + r12 * vy + r22 * vz)
        a_t = thrust / self._m
        ax = r02 * a_t - (r00 * dbx + r01 * dby + r02 * dbz)
        ay = r12 * a_t - (r10 * dbx + r11 * dby + r12 * dbz)
        az = r22 * a_t - (r20 * dbx + r21 * dby + r22 * dbz) - self._g
        # q' = 1/2 q (x) (Omega, 0)
        dqx = 0.5 * (qw * wx + qy * wz - qz * wy)
        dqy = 0.5 * (qw * wy + qz * wx - qx * wz)
        dqz = 0.5 * (qw * wz + qx * wy - qy * wx)
        dqw = -0.5 * (qx * wx + qy * wy + qz * wz)
        # Euler's equations with diagonal inertia
        jx, jy, jz = self._jx, self._jy, self._jz
        hx, hy, hz = jx * wx, jy * wy, jz * wz
        dwx = (tau_x - (wy * hz - wz * hy)) / jx
        dwy = (tau_y - (wz * hx - wx * hz)) / jy
        dwz = (tau_z - (wx * hy - wy * hx)) / jz
        k = self._inv_tau
        c0, c1, c2, c3 = rotor_cmd
        return [
            vx, vy, vz, ax, ay, az, dqx, dqy, dqz, dqw, dwx, dwy, dwz,
            k * (c0 - r0), k * (c1 - r1), k * (c2 - r2), k * (c3 - r3),
        ]  # fmt: skip

    def step(self, rotor_speed_cmd, dt: float) -> None:
        """Advance ``dt`` seconds with one classical RK4 step under constant rotor commands.

        ``rotor_speed_cmd`` (4,) rad/s is saturated to the motor range first (NaN passes
        through and makes the state non-finite, which the runner reports).
        """
        lo, hi = self.params.rotor_speed_min_rad_s, self.params.rotor_speed_max_rad_s
        cmd = [min(max(float(c), lo), hi) if c == c else math.nan for c in rotor_speed_cmd]
        s = self._s
        h2, h6 = 0.5 * dt, dt / 6.0
        k1 = self.derivative(s, cmd)
        k2 = self.derivative([a + h2 * b for a, b in zip(s, k1)], cmd)
        k3 = self.derivative([a + h2 * b for a, b in zip(s, k2)], cmd)
        k4 = self.derivative([a + dt * b for a, b in zip(s, k3)], cmd)
        s = [a + h6 * (b1 + 2.0 * (b2 + b3) + b4) for a, b1, b2, b3, b4 in zip(s, k1, k2, k3, k4)]
        n = math.sqrt(s[6] * s[6] + s[7] * s[7] + s[8] * s[8] + s[9] * s[9])
        if n > 0.0:  # NaN or zero norm: leave it, the runner sees a non-finite state
            s[6], s[7], s[8], s[9] = s[6] / n, s[7] / n, s[8] / n, s[9] / n
        self._s = s
        self._t += dt
