"""Parameters of the simulated vehicle, its controller and its sensors, as frozen dataclasses.

Every field carries its unit in its name or comment. Each class validates itself on
construction and names the bad field, so a typo in a YAML view fails at load, not mid-flight.

Default airframe: a 250 mm-class quadrotor (motor-to-motor diagonal 250 mm, 5-inch props)
carrying a depth camera and a companion computer, ~1 kg. The numbers come from the Agilicious
"Kingfisher" quadrotor (Foehn et al., "Agilicious: Open-source and open-hardware agile
quadrotor for vision-based flight", Science Robotics 7(67), 2022; uzh-rpg/agilicious, as also
tabulated in rotorpy's ``agilicious`` parameter file): rotors at (+-0.075, +-0.10) m, i.e. arm
0.125 m; thrust map 1.562522e-6 N/(rad/s)^2; torque/thrust ratio 0.022 m; motor time constant
0.033 s; rotor speed 150..2800 rad/s; inertia diag(2.5, 2.1, 4.3)e-3 kg m^2 at 0.752 kg.
Departures, stated: mass raised to 1.0 kg for the sensor payload, with the inertia scaled by the
same ratio (1.0 / 0.752); the X is taken as symmetric (45 deg arms of 0.125 m); the drag is the
linear rotor-drag model of Faessler et al. (RA-L 2018, who identified ~0.54 / 0.39 1/s in x / y)
at 0.35 1/s horizontally, inside the 0.30..0.45 range Zhang et al. 2024 train with, and a small
assumed 0.10 1/s vertically.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Tuple

GRAVITY_MPS2 = 9.81
"""Standard gravity used everywhere in the simulator, m/s^2 (world -z)."""

_AGILICIOUS_MASS_KG = 0.752
_MASS_KG = 1.0
_INERTIA_SCALE = _MASS_KG / _AGILICIOUS_MASS_KG


def _check_positive(obj, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{type(obj).__name__}.{name} must be a positive finite number, got {value!r}")


def _check_nonnegative(obj, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{type(obj).__name__}.{name} must be a finite number >= 0, got {value!r}")


def _check_vector(obj, name: str, length: int, *, positive: bool = False) -> None:
    value = getattr(obj, name)
    if len(value) != length or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in value):
        raise ValueError(f"{type(obj).__name__}.{name} must be {length} finite numbers, got {value!r}")
    if positive and not all(v > 0 for v in value):
        raise ValueError(f"{type(obj).__name__}.{name} must be positive, got {value!r}")
    if not positive and not all(v >= 0 for v in value):
        raise ValueError(f"{type(obj).__name__}.{name} must be >= 0, got {value!r}")


def replace_checked(obj, **changes):
    """``dataclasses.replace`` that names an unknown key instead of a TypeError about __init__."""
    known = {f.name for f in fields(obj)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ValueError(f"unknown {type(obj).__name__} field(s) {unknown}; known: {sorted(known)}")
    return replace(obj, **changes)


@dataclass(frozen=True)
class QuadrotorParams:
    """Rigid-body quadrotor in X configuration (sources in the module docstring).

    Rotor order and spin follow PX4's quad-X: 0 front-right CCW, 1 rear-left CCW,
    2 front-left CW, 3 rear-right CW (CCW seen from above). Rotor ``i`` makes thrust
    ``k_thrust * w_i^2`` along body +z and reaction torque ``-+k_torque * w_i^2`` about body z.
    """

    mass_kg: float = _MASS_KG
    inertia_kgm2: Tuple[float, float, float] = (
        2.5e-3 * _INERTIA_SCALE,
        2.1e-3 * _INERTIA_SCALE,
        4.3e-3 * _INERTIA_SCALE,
    )
    arm_length_m: float = 0.125  # centre to rotor axis
    k_thrust_n_per_rad2s2: float = 1.562522e-6  # thrust = k * w^2, N / (rad/s)^2
    k_torque_nm_per_rad2s2: float = 1.562522e-6 * 0.022  # yaw reaction torque = k * w^2
    motor_time_constant_s: float = 0.033  # first-order lag of rotor speed
    rotor_speed_min_rad_s: float = 150.0  # idle; ESCs keep props spinning
    rotor_speed_max_rad_s: float = 2800.0
    drag_coeffs_per_s: Tuple[float, float, float] = (0.35, 0.35, 0.10)  # body-frame linear drag
    collision_radius_m: float = 0.19  # 0.125 m arm + 0.0635 m 5-inch prop radius
    gravity_mps2: float = GRAVITY_MPS2

    def __post_init__(self):
        _check_positive(
            self,
            "mass_kg",
            "arm_length_m",
            "k_thrust_n_per_rad2s2",
            "k_torque_nm_per_rad2s2",
            "motor_time_constant_s",
            "rotor_speed_max_rad_s",
            "collision_radius_m",
        )
        _check_nonnegative(self, "rotor_speed_min_rad_s", "gravity_mps2")
        _check_vector(self, "inertia_kgm2", 3, positive=True)
        _check_vector(self, "drag_coeffs_per_s", 3)
        if self.rotor_speed_min_rad_s >= self.rotor_speed_max_rad_s:
            raise ValueError(
                f"QuadrotorParams.rotor_speed_min_rad_s ({self.rotor_speed_min_rad_s}) must be below "
                f"rotor_speed_max_rad_s ({self.rotor_speed_max_rad_s})"
            )
        if self.max_total_thrust_n <= self.mass_kg * self.gravity_mps2:
            raise ValueError(
                f"QuadrotorParams: max thrust {self.max_total_thrust_n:.2f} N cannot lift "
                f"{self.mass_kg} kg; raise rotor_speed_max_rad_s or k_thrust_n_per_rad2s2"
            )

    @property
    def max_total_thrust_n(self) -> float:
        """Collective thrust at full rotor speed, N."""
        return 4.0 * self.k_thrust_n_per_rad2s2 * self.rotor_speed_max_rad_s**2

    @property
    def min_total_thrust_n(self) -> float:
        """Collective thrust at idle rotor speed, N."""
        return 4.0 * self.k_thrust_n_per_rad2s2 * self.rotor_speed_min_rad_s**2

    @property
    def hover_thrust_n(self) -> float:
        """Collective thrust that balances gravity, N (= m g)."""
        return self.mass_kg * self.gravity_mps2

    @property
    def hover_rotor_speed_rad_s(self) -> float:
        """Equal rotor speed giving m g in total, rad/s."""
        return math.sqrt(self.hover_thrust_n / (4.0 * self.k_thrust_n_per_rad2s2))


@dataclass(frozen=True)
class PointMassParams:
    """Point-mass quadrotor for fast runs (the "Back to Newton's Laws" training model).

    The commanded acceleration becomes a specific thrust (``a_cmd + g e3``) that the vehicle
    reaches through a first-order lag of ``thrust_time_constant_s`` (1/12 s: k = 12 1/s in
    Zhang et al. 2024); linear drag as in :class:`QuadrotorParams`; heading follows the yaw
    command at up to ``max_yaw_rate_rad_s``.
    """

    mass_kg: float = _MASS_KG
    thrust_time_constant_s: float = 1.0 / 12.0
    max_thrust_accel_mps2: float = 4.0 * 1.562522e-6 * 2800.0**2 / _MASS_KG  # same T/W as above
    drag_coeffs_per_s: Tuple[float, float, float] = (0.35, 0.35, 0.10)  # world-frame linear drag
    yaw_gain_per_s: float = 4.0
    max_yaw_rate_rad_s: float = math.radians(200.0)
    collision_radius_m: float = 0.19
    gravity_mps2: float = GRAVITY_MPS2

    def __post_init__(self):
        _check_positive(
            self,
            "mass_kg",
            "thrust_time_constant_s",
            "max_thrust_accel_mps2",
            "yaw_gain_per_s",
            "max_yaw_rate_rad_s",
            "collision_radius_m",
        )
        _check_nonnegative(self, "gravity_mps2")
        _check_vector(self, "drag_coeffs_per_s", 3)
        if self.max_thrust_accel_mps2 <= self.gravity_mps2:
            raise ValueError("PointMassParams.max_thrust_accel_mps2 must exceed gravity to hover")


@dataclass(frozen=True)
class ControllerGains:
    """Gains of the geometric SE(3) tracking controller (Lee, Leok, McClamroch, CDC 2010).

    Gains are given per unit mass / per unit inertia, so they survive a change of airframe:
    ``k_x = m * position_gain``, ``k_v = m * velocity_gain``, ``k_R = J * attitude_gain``,
    ``k_Omega = J * rate_gain``. The defaults put the position loop at 3.2 rad/s and the
    attitude loop at 17 rad/s (damping 0.87 both), below the 30 rad/s pole of the 33 ms motor
    lag. There is no integral term (Lee's law has none), so unmodelled rotor drag leaves a
    steady lag at speed (~5 cm on a 2 m/s circle); the measured errors are asserted in
    test/sim/test_sim_controller.py.
    """

    position_gain_per_s2: float = 10.0
    velocity_gain_per_s: float = 5.5
    attitude_gain_per_s2: float = 300.0
    rate_gain_per_s: float = 30.0
    yaw_attitude_gain_per_s2: float = 40.0  # yaw authority is ~20x weaker (reaction torque)
    yaw_rate_gain_per_s: float = 10.0
    max_tilt_rad: float = math.radians(45.0)
    max_accel_mps2: float = 12.0  # norm of the commanded acceleration (gravity excluded)
    max_position_correction_mps: float = 3.0  # speed the position error alone may demand

    def __post_init__(self):
        _check_positive(
            self,
            "position_gain_per_s2",
            "velocity_gain_per_s",
            "attitude_gain_per_s2",
            "rate_gain_per_s",
            "yaw_attitude_gain_per_s2",
            "yaw_rate_gain_per_s",
            "max_tilt_rad",
            "max_accel_mps2",
            "max_position_correction_mps",
        )
        if self.max_tilt_rad >= math.pi / 2:
            raise ValueError(f"ControllerGains.max_tilt_rad must be below pi/2, got {self.max_tilt_rad}")


@dataclass(frozen=True)
class CameraParams:
    """Forward-looking pinhole depth camera (64 x 48, the policy's input size).

    ``mount_pitch_deg`` rotates the camera about body +y (FLU, right-handed), so a positive
    value tilts the optical axis *down*. ``offset_m`` is the optical centre in the body frame.
    Depth noise is zero-mean Gaussian with ``noise_std_m`` (m) on every valid pixel.
    Default range 0.2..10 m is a RealSense D435-class envelope.
    """

    width_px: int = 64
    height_px: int = 48
    hfov_deg: float = 90.0
    min_range_m: float = 0.2
    max_range_m: float = 10.0
    mount_pitch_deg: float = 0.0
    offset_m: Tuple[float, float, float] = (0.0, 0.0, 0.0)
    noise_std_m: float = 0.0

    def __post_init__(self):
        for name in ("width_px", "height_px"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) > 0):
                raise ValueError(f"CameraParams.{name} must be a positive integer, got {getattr(self, name)!r}")
        _check_positive(self, "hfov_deg", "max_range_m")
        _check_nonnegative(self, "min_range_m", "noise_std_m")
        if not self.hfov_deg < 180.0:
            raise ValueError(f"CameraParams.hfov_deg must be below 180, got {self.hfov_deg}")
        if self.min_range_m >= self.max_range_m:
            raise ValueError("CameraParams.min_range_m must be below max_range_m")
        if len(self.offset_m) != 3 or not all(math.isfinite(v) for v in self.offset_m):
            raise ValueError(f"CameraParams.offset_m must be 3 finite numbers, got {self.offset_m!r}")
        if not math.isfinite(self.mount_pitch_deg):
            raise ValueError("CameraParams.mount_pitch_deg must be finite")


@dataclass(frozen=True)
class OdometryParams:
    """What the planner's odometry adds to the true state: Gaussian noise and a fixed latency.

    The flight controller itself uses the true state (its own EKF is assumed good); only the
    planner sees this degraded copy. Zero noise and latency by default.
    """

    position_noise_std_m: float = 0.0
    velocity_noise_std_mps: float = 0.0
    latency_s: float = 0.0

    def __post_init__(self):
        _check_nonnegative(self, "position_noise_std_m", "velocity_noise_std_mps", "latency_s")
