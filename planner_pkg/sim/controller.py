"""Tracking controllers: setpoint -> desired acceleration -> (SE(3)) thrust, torques, rotor speeds.

Two layers, so the point-mass and the rigid-body models share the translational part:

* :class:`TranslationalController` turns a :class:`Setpoint` (PX4 NaN semantics) into a desired
  world acceleration and heading: position, velocity or acceleration mode depending on which
  fields are given. In position mode it is exactly the translational law of Lee, Leok and
  McClamroch ("Geometric tracking control of a quadrotor UAV on SE(3)", CDC 2010):
  ``m a = -k_x e_x - k_v e_v + m a_d``, written as ``a = a_d + k_v (v_d + c - v)`` with
  ``c = -(k_x / k_v) e_x`` so that the speed the position error alone may demand can be capped
  (large jumps of the reference then do not command violent accelerations). With a reference
  velocity ``v_d`` the airframe's rotor drag at it, ``R diag(d) R^T v_d``, is fed forward
  (``ControllerGains.drag_feedforward``); an acceleration-only setpoint is a thrust command.
* :class:`SE3Controller` (rigid body) adds Lee's attitude law on SO(3) and the mixer, with the
  setpoint's jerk fed forward as body rates (``ControllerGains.jerk_feedforward``);
  :class:`PointMassController` hands the acceleration to the point-mass model.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Tuple

import numpy as np

from planner_pkg.sim.mixer import Mixer
from planner_pkg.sim.params import ControllerGains, GRAVITY_MPS2, QuadrotorParams
from planner_pkg.sim.point_mass import AccelerationCommand
from planner_pkg.sim.rotation import cross3, wrap_angle
from planner_pkg.types import Setpoint, VehicleState

_E3 = np.array([0.0, 0.0, 1.0])


class TranslationalController:
    """Setpoint -> desired acceleration (3,) m/s^2 (world, gravity excluded) and heading.

    Heading: a given ``yaw`` is tracked (``yaw_rate`` as feed-forward); with ``yaw`` NaN and
    ``yaw_rate`` given, the heading reference integrates ``yaw_rate``; with both NaN the last
    heading reference is held (initially the vehicle's heading at ``reset``).
    """

    def __init__(self, gains: ControllerGains = ControllerGains(), gravity_mps2: float = GRAVITY_MPS2,
                 drag_per_s=(0.0, 0.0, 0.0), drag_in_body_frame: bool = True):
        self.gains = gains
        self.g = gravity_mps2
        self._yaw_ref = 0.0
        self._tan_tilt = math.tan(gains.max_tilt_rad)
        # the drag fed forward at a reference velocity (body-frame coefficients, 1/s)
        self._drag = gains.drag_feedforward * np.asarray(drag_per_s, dtype=np.float64)
        self._has_drag = bool(np.any(self._drag > 0.0))
        self._body_drag = bool(drag_in_body_frame)
        self.saturated = False  # did the last limit() change the acceleration (tilt, thrust, norm)?

    def drag_compensation(self, state: VehicleState, velocity) -> np.ndarray:
        """(3,) m/s^2 that cancels the airframe's linear drag at ``velocity`` (world frame):
        ``R diag(d) R^T v`` with the vehicle's attitude ``R`` (rotor drag, body frame), or
        ``diag(d) v`` (world-frame drag: the point mass); zeros without a drag model."""
        if not self._has_drag:
            return np.zeros(3)
        if not self._body_drag:
            return self._drag * np.asarray(velocity, dtype=np.float64)
        R = state.rotation
        return R @ (self._drag * (R.T @ np.asarray(velocity, dtype=np.float64)))

    def reset(self, state: VehicleState) -> None:
        self._yaw_ref = state.yaw

    @property
    def yaw_reference(self) -> float:
        """Current heading reference, rad."""
        return self._yaw_ref

    def acceleration(self, state: VehicleState, setpoint: Setpoint, dt: float) -> Tuple[np.ndarray, float, float]:
        """Desired acceleration (3,) m/s^2, heading (rad) and heading rate (rad/s).

        Raises ValueError for an empty setpoint (no position, velocity or acceleration).
        """
        k = self.gains
        a_ff = setpoint.acceleration if setpoint.has_acceleration else np.zeros(3)
        if setpoint.has_position:
            v_ff = setpoint.velocity if setpoint.has_velocity else np.zeros(3)
            correction = -(k.position_gain_per_s2 / k.velocity_gain_per_s) * (state.position - setpoint.position)
            norm = math.sqrt(float(correction @ correction))
            if norm > k.max_position_correction_mps:
                correction *= k.max_position_correction_mps / norm
            accel = a_ff + k.velocity_gain_per_s * (v_ff + correction - state.velocity)
            if setpoint.has_velocity:
                accel = accel + self.drag_compensation(state, v_ff)
        elif setpoint.has_velocity:
            accel = (a_ff + k.velocity_gain_per_s * (setpoint.velocity - state.velocity)
                     + self.drag_compensation(state, setpoint.velocity))
        elif setpoint.has_acceleration:
            accel = np.array(a_ff, dtype=np.float64)
        else:
            raise ValueError("empty setpoint: no position, velocity or acceleration to track")
        yaw_rate = setpoint.yaw_rate if setpoint.has_yaw_rate else 0.0
        if setpoint.has_yaw:
            self._yaw_ref = setpoint.yaw
        elif setpoint.has_yaw_rate:
            self._yaw_ref = wrap_angle(self._yaw_ref + yaw_rate * dt)
        return self.limit(accel), self._yaw_ref, yaw_rate

    def velocity_command(self, state: VehicleState, velocity, yaw: float = math.nan) -> Tuple[np.ndarray, float]:
        """Explicit velocity mode: acceleration (3,) that drives the velocity to ``velocity`` (3,) m/s."""
        if math.isfinite(yaw):
            self._yaw_ref = yaw
        v = np.asarray(velocity, dtype=np.float64)
        accel = self.gains.velocity_gain_per_s * (v - state.velocity) + self.drag_compensation(state, v)
        return self.limit(accel), self._yaw_ref

    def acceleration_command(self, accel, yaw: float = math.nan) -> Tuple[np.ndarray, float]:
        """Explicit acceleration mode: the limited acceleration (3,) m/s^2 itself."""
        if math.isfinite(yaw):
            self._yaw_ref = yaw
        return self.limit(np.asarray(accel, dtype=np.float64)), self._yaw_ref

    def limit(self, accel: np.ndarray) -> np.ndarray:
        """Clamp a desired acceleration: vertical first, then tilt, then the norm.

        Vertical: the specific thrust ``a_z + g`` stays >= 0.2 g so attitude stays controllable;
        horizontal: ``|a_xy| <= tan(max_tilt) (a_z + g)``; total: ``|a| <= max_accel``.
        """
        a = np.array(accel, dtype=np.float64)
        k = self.gains
        z = min(max(a[2], -0.8 * self.g), k.max_accel_mps2)
        saturated = z != a[2]
        a[2] = z
        h = math.hypot(a[0], a[1])
        h_max = self._tan_tilt * (a[2] + self.g)
        if h > h_max:
            a[:2] *= h_max / h
            saturated = True
        n = math.sqrt(float(a @ a))
        if n > k.max_accel_mps2:
            a *= k.max_accel_mps2 / n
            saturated = True
        self.saturated = saturated
        return a


class ControlOutput(NamedTuple):
    """What the SE(3) controller computed on its last update."""

    rotor_speeds_rad_s: np.ndarray  # (4,) commands, PX4 quad-X order
    thrust_n: float  # collective thrust demanded, N
    torque_nm: np.ndarray  # (3,) body torques demanded, N m
    acceleration_mps2: np.ndarray  # (3,) desired world acceleration, gravity excluded
    yaw_rad: float  # heading reference


class SE3Controller:
    """Geometric tracking controller on SE(3) (Lee, Leok, McClamroch 2010) + X mixer.

    ``update(state, setpoint, dt)`` returns rotor speed commands (4,) rad/s for
    :class:`~planner_pkg.sim.dynamics.RigidBodyQuadrotor`; the full result is kept in
    ``last_output``. Attitude law (body frame):
        e_R = 1/2 vee(R_d^T R - R^T R_d),  e_W = W - R^T R_d W_d
        M = -k_R e_R - k_W e_W + W x J W - J (hat(W) R^T R_d W_d)   (W_d' taken as 0)
    with ``W_d`` the heading rate plus, when the setpoint gives a jerk, the rate at which the
    reference tilts the thrust axis (see :meth:`attitude_control`).
    """

    def __init__(self, params: QuadrotorParams = QuadrotorParams(), gains: ControllerGains = ControllerGains()):
        self.params = params
        self.gains = gains
        self.translational = TranslationalController(gains, params.gravity_mps2, params.drag_coeffs_per_s)
        self.mixer = Mixer(params)
        self._m = params.mass_kg
        self._J = np.array(params.inertia_kgm2, dtype=np.float64)
        self._kR = self._J * np.array([gains.attitude_gain_per_s2] * 2 + [gains.yaw_attitude_gain_per_s2])
        self._kW = self._J * np.array([gains.rate_gain_per_s] * 2 + [gains.yaw_rate_gain_per_s])
        self._jerk_ff = float(gains.jerk_feedforward)
        self._max_ff_rate = float(gains.max_feedforward_rate_rad_s)
        self.last_output: ControlOutput | None = None

    def reset(self, state: VehicleState) -> None:
        self.translational.reset(state)
        self.last_output = None

    def update(self, state: VehicleState, setpoint: Setpoint, dt: float) -> np.ndarray:
        """Rotor speed commands (4,) rad/s tracking ``setpoint``. ValueError if it is empty."""
        accel, yaw, yaw_rate = self.translational.acceleration(state, setpoint, dt)
        # a clamped acceleration (tilt, thrust or norm limit) does not move with the reference's
        # jerk: feeding it forward then turns the thrust past the limit the attitude loop holds
        jerk = (setpoint.jerk if setpoint.has_jerk and self._jerk_ff > 0.0 and not self.translational.saturated
                else None)
        return self._from_acceleration(state, accel, yaw, yaw_rate, jerk)

    def velocity_command(self, state: VehicleState, velocity, yaw: float = math.nan) -> np.ndarray:
        """Explicit velocity mode: rotor speeds (4,) driving the velocity to ``velocity`` m/s."""
        accel, yaw_ref = self.translational.velocity_command(state, velocity, yaw)
        return self._from_acceleration(state, accel, yaw_ref, 0.0)

    def acceleration_command(self, state: VehicleState, accel, yaw: float = math.nan) -> np.ndarray:
        """Explicit acceleration mode: rotor speeds (4,) realising ``accel`` (3,) m/s^2."""
        accel, yaw_ref = self.translational.acceleration_command(accel, yaw)
        return self._from_acceleration(state, accel, yaw_ref, 0.0)

    def attitude_control(self, state: VehicleState, accel, yaw: float, yaw_rate: float = 0.0, jerk=None):
        """Collective thrust (N) and body torques (3,) N m for a desired acceleration and heading.

        jerk: (3,) m/s^3 or None: the rate of change of ``accel``, fed forward (x the gains'
        ``jerk_feedforward``) as the body rate that turns the thrust axis ``b3 = f / |f|`` at the
        rate the reference turns it: ``W_d = b3 x d(b3)/dt`` with ``d(b3)/dt = (I - b3 b3^T) j / |f|``
        per unit mass (Mellinger & Kumar 2011), besides the heading rate; that rate is clamped to
        the gains' ``max_feedforward_rate_rad_s``."""
        force = self._m * (np.asarray(accel, dtype=np.float64) + self.params.gravity_mps2 * _E3)
        R = state.rotation
        thrust = float(force @ R[:, 2])
        b3 = force / math.sqrt(float(force @ force))  # limit() keeps force_z >= 0.2 m g, so never zero
        b2 = cross3(b3, (math.cos(yaw), math.sin(yaw), 0.0))
        b2 /= math.sqrt(float(b2 @ b2))  # b3 is within max_tilt < 90 deg of vertical: never parallel
        Rd = np.column_stack((cross3(b2, b3), b2, b3))
        E = Rd.T @ R
        e_R = 0.5 * np.array([E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]])
        w = state.angular_velocity
        w_d = yaw_rate * R[2, :]  # R^T R_d W_d with W_d = R_d^T (0, 0, yaw_rate): world z in body
        if jerk is not None:
            # the thrust axis turns at b3 x d(b3)/dt = b3 x (m j / |f|) (world frame: b3 x b3 = 0
            # drops the projection), in body coordinates via R^T (taking R_d ~ R, as for the heading)
            j = (self._jerk_ff * self._m / math.sqrt(float(force @ force))) * np.asarray(jerk, dtype=np.float64)
            w_jerk = cross3(b3, j)
            rate = math.sqrt(float(w_jerk @ w_jerk))
            if rate > self._max_ff_rate:  # a jerk burst: demand no more than the airframe can turn
                w_jerk *= self._max_ff_rate / rate
            w_d = w_d + R.T @ w_jerk
        e_W = w - w_d
        Jw = self._J * w
        torque = -self._kR * e_R - self._kW * e_W + cross3(w, Jw) - self._J * cross3(w, w_d)
        return max(thrust, 0.0), torque

    def _from_acceleration(self, state, accel, yaw, yaw_rate, jerk=None) -> np.ndarray:
        thrust, torque = self.attitude_control(state, accel, yaw, yaw_rate, jerk)
        speeds = self.mixer.rotor_speeds(thrust, torque)
        self.last_output = ControlOutput(speeds, thrust, torque, accel, yaw)
        return speeds


class PointMassController:
    """Translational controller for :class:`~planner_pkg.sim.point_mass.PointMassQuadrotor`."""

    def __init__(self, gains: ControllerGains = ControllerGains(), gravity_mps2: float = GRAVITY_MPS2,
                 drag_per_s=(0.0, 0.0, 0.0)):
        self.translational = TranslationalController(gains, gravity_mps2, drag_per_s, drag_in_body_frame=False)
        self.last_output: AccelerationCommand | None = None

    def reset(self, state: VehicleState) -> None:
        self.translational.reset(state)
        self.last_output = None

    def update(self, state: VehicleState, setpoint: Setpoint, dt: float) -> AccelerationCommand:
        accel, yaw, _ = self.translational.acceleration(state, setpoint, dt)
        self.last_output = AccelerationCommand(accel, yaw)
        return self.last_output

    def velocity_command(self, state: VehicleState, velocity, yaw: float = math.nan) -> AccelerationCommand:
        accel, yaw_ref = self.translational.velocity_command(state, velocity, yaw)
        return AccelerationCommand(accel, yaw_ref)

    def acceleration_command(self, state: VehicleState, accel, yaw: float = math.nan) -> AccelerationCommand:
        accel, yaw_ref = self.translational.acceleration_command(accel, yaw)
        return AccelerationCommand(accel, yaw_ref)
