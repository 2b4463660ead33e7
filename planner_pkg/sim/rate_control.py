"""Collective thrust + body-rate input for the rigid-body quadrotor (what a racing policy commands).

A :class:`BodyRateCommand` is what PX4's ``VehicleRatesSetpoint`` / an Betaflight-style "acro"
input carries: a mass-normalised collective thrust ``thrust_mps2`` (m/s^2 along body +z, so
hovering level takes ``g``) and body rates ``rates_rad_s`` (3,) in the body FLU frame (roll,
pitch, yaw rates about body x, y, z; what a gyro measures).

:class:`BodyRateController` is the onboard rate loop: a proportional law on the rate error, damped
by the measured angular acceleration (a gyro difference over one control period), with the
gyroscopic term cancelled,

    tau = J (k (w_cmd - w) - d dw/dt) + w x J w,        T = m clamp(thrust, 0, max_thrust)

and the X mixer (``sim.mixer``: roll/pitch torques before collective thrust, "airmode": at zero
thrust the rotors are raised together so the torques still act). With the motors' first-order lag
(``motor_time_constant_s``, 33 ms) a plain proportional loop is second order,
``tau_m s^2 + s + k``, and slow (at k = 25 1/s it reaches 63 % of a step in 58 ms with 15 %
overshoot); the damping term lets the gain rise. The defaults (k = 50 1/s, d = 0.8) reach 63 %
in 42 ms with 5 % overshoot, close to the 40 ms first-order lag the racing policy is trained
with (``racing.config.QuadConfig.rate_time_constant_s``; ``test/planner_pkg/sim/test_sim_rate_control.py``
measures it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Optional, Tuple

import numpy as np

from planner_pkg.config_schema import Config, non_negative, positive
from planner_pkg.sim.mixer import Mixer
from planner_pkg.sim.params import QuadrotorParams
from planner_pkg.types import VehicleState

__all__ = ["BodyRateCommand", "BodyRateGains", "BodyRateController", "check_body_rate_command",
           "RATE_COMMAND_TIMEOUT_S"]

#: Largest body rate accepted in a command, rad/s (the flight envelope's 50 rad/s is for odometry;
#: no rate loop follows more than this).
MAX_COMMAND_RATE_RAD_S = 35.0
#: A body-rate command older than this (sim time) is stale: the simulator brakes to a hold, s
#: (2.5 periods of the racing policy's 25 Hz; the simulator's and sim_bridge's default).
RATE_COMMAND_TIMEOUT_S = 0.1
_MAX_DAMPING_DT_S = 0.05  # an older previous gyro sample is no estimate of the angular acceleration


class BodyRateCommand(NamedTuple):
    """Mass-normalised collective thrust, m/s^2 (body +z), and body rates (3,), rad/s, body FLU."""

    thrust_mps2: float
    rates_rad_s: Tuple[float, float, float]


def check_body_rate_command(thrust_mps2, rates_rad_s) -> BodyRateCommand:
    """A validated command; ValueError naming the bad value (NaN/inf, negative thrust, rates
    beyond :data:`MAX_COMMAND_RATE_RAD_S`)."""
    try:
        thrust = float(thrust_mps2)
        rates = tuple(float(r) for r in rates_rad_s)
    except (TypeError, ValueError):
        raise ValueError(f"body-rate command must be numbers, got thrust {thrust_mps2!r}, rates {rates_rad_s!r}") from None
    if len(rates) != 3:
        raise ValueError(f"body-rate command needs 3 body rates, got {len(rates)}")
    if not (math.isfinite(thrust) and all(math.isfinite(r) for r in rates)):
        raise ValueError(f"body-rate command contains NaN/inf: thrust {thrust}, rates {list(rates)}")
    if thrust < 0.0:
        raise ValueError(f"collective thrust must be >= 0 m/s^2, got {thrust}")
    if max(abs(r) for r in rates) > MAX_COMMAND_RATE_RAD_S:
        raise ValueError(f"body rates {list(rates)} exceed +-{MAX_COMMAND_RATE_RAD_S:g} rad/s")
    return BodyRateCommand(thrust, rates)  # type: ignore[arg-type]


@dataclass(frozen=True)
class BodyRateGains(Config):
    """Gains of the body-rate loop, per unit inertia (module docstring).

    roll_pitch_gain_per_s, yaw_gain_per_s: rate error -> angular acceleration, 1/s (the yaw
    torque comes from the rotors' drag and saturates first: the mixer gives way on yaw before
    roll/pitch). damping: measured angular acceleration fed back, dimensionless (the motor lag
    over the wanted rate lag, 33 / 40 ms, is the model-matching value).
    """

    roll_pitch_gain_per_s: float = positive(50.0)
    yaw_gain_per_s: float = positive(50.0)
    damping: float = non_negative(0.8)


class BodyRateController:
    """Body-rate command -> rotor speeds (4,) rad/s for :class:`~planner_pkg.sim.dynamics.RigidBodyQuadrotor`."""

    def __init__(self, params: QuadrotorParams = QuadrotorParams(), gains: BodyRateGains = BodyRateGains()):
        self.params = params
        self.gains = gains
        self.mixer = Mixer(params)
        self._J = np.asarray(params.inertia_kgm2, dtype=np.float64)
        self._k = np.array([gains.roll_pitch_gain_per_s] * 2 + [gains.yaw_gain_per_s])
        self._max_thrust_mps2 = params.max_total_thrust_n / params.mass_kg
        self.last_thrust_n = 0.0
        self.last_torque_nm = np.zeros(3)
        self._w_prev: Optional[np.ndarray] = None
        self._t_prev = 0.0

    def reset(self) -> None:
        """Forget the previous gyro sample (the next update has no damping term)."""
        self._w_prev = None

    @property
    def max_thrust_mps2(self) -> float:
        """Largest mass-normalised collective thrust the rotors give, m/s^2."""
        return self._max_thrust_mps2

    def update(self, state: VehicleState, command: BodyRateCommand) -> np.ndarray:
        """Rotor speed commands (4,) rad/s realising ``command`` from ``state`` (module docstring)."""
        w = np.asarray(state.angular_velocity, dtype=np.float64)
        w_cmd = np.asarray(command.rates_rad_s, dtype=np.float64)
        alpha = np.zeros(3)
        dt = state.t - self._t_prev
        if self._w_prev is not None and 0.0 < dt <= _MAX_DAMPING_DT_S:
            alpha = (w - self._w_prev) / dt
        self._w_prev, self._t_prev = w, state.t
        Jw = self._J * w
        torque = self._J * (self._k * (w_cmd - w) - self.gains.damping * alpha) + np.cross(w, Jw)
        thrust = self.params.mass_kg * min(max(float(command.thrust_mps2), 0.0), self._max_thrust_mps2)
        self.last_thrust_n, self.last_torque_nm = thrust, torque
        return self.mixer.rotor_speeds(thrust, torque)
