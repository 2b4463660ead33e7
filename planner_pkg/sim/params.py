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
from dataclasses import dataclass
from typing import Tuple

from planner_pkg.config_schema import Config, non_negative, positive, setting

GRAVITY_MPS2 = 9.81
"""Standard gravity used everywhere in the simulator, m/s^2 (world -z)."""

_AGILICIOUS_MASS_KG = 0.752
_MASS_KG = 1.0
_INERTIA_SCALE = _MASS_KG / _AGILICIOUS_MASS_KG


@dataclass(frozen=True)
class QuadrotorParams(Config):
    """Rigid-body quadrotor in X configuration (sources in the module docstring).

    Rotor order and spin follow PX4's quad-X: 0 front-right CCW, 1 rear-left CCW,
    2 front-left CW, 3 rear-right CW (CCW seen from above). Rotor ``i`` makes thrust
    ``k_thrust * w_i^2`` along body +z and reaction torque ``-+k_torque * w_i^2`` about body z.
    """

    mass_kg: float = positive(_MASS_KG)
    inertia_kgm2: Tuple[float, float, float] = positive((
        2.5e-3 * _INERTIA_SCALE,
        2.1e-3 * _INERTIA_SCALE,
        4.3e-3 * _INERTIA_SCALE,
    ))
    arm_length_m: float = positive(0.125)  # centre to rotor axis
    k_thrust_n_per_rad2s2: float = positive(1.562522e-6)  # thrust = k * w^2, N / (rad/s)^2
    k_torque_nm_per_rad2s2: float = positive(1.562522e-6 * 0.022)  # yaw reaction torque = k * w^2
    motor_time_constant_s: float = positive(0.033)  # first-order lag of rotor speed
    rotor_speed_min_rad_s: float = non_negative(150.0)  # idle; ESCs keep props spinning
    rotor_speed_max_rad_s: float = positive(2800.0)
    drag_coeffs_per_s: Tuple[float, float, float] = non_negative((0.35, 0.35, 0.10))  # body-frame linear drag
    collision_radius_m: float = positive(0.19)  # 0.125 m arm + 0.0635 m 5-inch prop radius
    gravity_mps2: float = non_negative(GRAVITY_MPS2)

    def _check(self):
        if self.rotor_speed_min_rad_s >= self.rotor_speed_max_rad_s:
            raise self._error("rotor_speed_min_rad_s", f"({self.rotor_speed_min_rad_s}) must be below "
                              f"rotor_speed_max_rad_s ({self.rotor_speed_max_rad_s})")
        if self.max_total_thrust_n <= self.mass_kg * self.gravity_mps2:
            raise self._error("rotor_speed_max_rad_s", f"max thrust {self.max_total_thrust_n:.2f} N cannot lift "
                              f"{self.mass_kg} kg; raise rotor_speed_max_rad_s or k_thrust_n_per_rad2s2")

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
class PointMassParams(Config):
    """Point-mass quadrotor for fast runs (the "Back to Newton's Laws" training model).

    The commanded acceleration becomes a specific thrust (``a_cmd + g e3``) that the vehicle
    reaches through a first-order lag of ``thrust_time_constant_s`` (1/12 s: k = 12 1/s in
    Zhang et al. 2024); linear drag as in :class:`QuadrotorParams`; heading follows the yaw
    command at up to ``max_yaw_rate_rad_s``.
    """

    mass_kg: float = positive(_MASS_KG)
    thrust_time_constant_s: float = positive(1.0 / 12.0)
    max_thrust_accel_mps2: float = positive(4.0 * 1.562522e-6 * 2800.0**2 / _MASS_KG)  # same T/W as above
    drag_coeffs_per_s: Tuple[float, float, float] = non_negative((0.35, 0.35, 0.10))  # world-frame linear drag
    yaw_gain_per_s: float = positive(4.0)
    max_yaw_rate_rad_s: float = positive(math.radians(200.0))
    collision_radius_m: float = positive(0.19)
    gravity_mps2: float = non_negative(GRAVITY_MPS2)

    def _check(self):
        if self.max_thrust_accel_mps2 <= self.gravity_mps2:
            raise self._error("max_thrust_accel_mps2", "must exceed gravity to hover")


@dataclass(frozen=True)
class ControllerGains(Config):
    """Gains of the geometric SE(3) tracking controller (Lee, Leok, McClamroch, CDC 2010).

    Gains are given per unit mass / per unit inertia, so they survive a change of airframe:
    ``k_x = m * position_gain``, ``k_v = m * velocity_gain``, ``k_R = J * attitude_gain``,
    ``k_Omega = J * rate_gain``. The defaults put the position loop at 3.2 rad/s and the
    attitude loop at 17 rad/s (damping 0.87 both), below the 30 rad/s pole of the 33 ms motor
    lag. There is no integral term (Lee's law has none). Rotor drag would then leave a steady lag
    of about ``drag * v / position_gain`` at speed (4.7 cm on a 2 m/s circle, ~10 cm at 3 m/s).
    So when a setpoint gives a reference velocity, the airframe's linear drag model at that
    velocity is fed forward (``drag_feedforward`` x the drag coefficients, body frame, as
    Faessler et al. RA-L 2018 do). A pure acceleration setpoint is a thrust command and gets
    none: the learned policy was trained with drag acting on its command. A setpoint's jerk is
    fed forward as body rates (``jerk_feedforward``): without it the attitude loop only starts
    to tilt once the tilt is wrong, the vehicle's acceleration lags the reference's, and after a
    hard acceleration it overshoots the reference speed while catching up. The measured errors
    are asserted in test/planner_pkg/sim/test_sim_controller.py.
    """

    position_gain_per_s2: float = positive(10.0)
    velocity_gain_per_s: float = positive(5.5)
    attitude_gain_per_s2: float = positive(300.0)
    rate_gain_per_s: float = positive(30.0)
    yaw_attitude_gain_per_s2: float = positive(40.0)  # yaw authority is ~20x weaker (reaction torque)
    yaw_rate_gain_per_s: float = positive(10.0)
    max_tilt_rad: float = setting(math.radians(45.0), range=(0.0, math.pi / 2), low_open=True, high_open=True)
    max_accel_mps2: float = positive(12.0)  # norm of the commanded acceleration (gravity excluded)
    max_position_correction_mps: float = positive(3.0)  # speed the position error alone may demand
    # fraction of the airframe's linear rotor drag fed forward when tracking a reference velocity
    # (Faessler et al., RA-L 2018); 0 = Lee's law alone, which lags by drag * v / k_x at speed
    drag_feedforward: float = setting(1.0, range=(0.0, 2.0))
    # fraction of a setpoint's jerk fed forward as the body rates that tilt the thrust along with
    # the reference acceleration (Mellinger & Kumar ICRA 2011, Faessler et al. RA-L 2018); 0 = the
    # attitude loop chases the tilt (and lags the reference acceleration by ~1 / attitude bandwidth)
    jerk_feedforward: float = setting(1.0, range=(0.0, 2.0))
    # the largest body rate (roll/pitch) the jerk feedforward may demand, rad/s: a reference whose
    # acceleration steps (a plan switch, the onset of a braking) has a jerk burst of 1000-3000
    # m/s^3, i.e. a demanded tilt rate of 100-300 rad/s for ~10 ms that the motors cannot give;
    # fed forward unclamped it saturated the torque and tilted the vehicle to 60-76 deg (45 deg is
    # the tilt limit) in EGO's 6 m/s forest flights, several of which then hit a trunk
    max_feedforward_rate_rad_s: float = positive(6.0)


@dataclass(frozen=True)
class CameraParams(Config):
    """Forward-looking pinhole depth camera (64 x 48, the policy's input size).

    ``mount_pitch_deg`` rotates the camera about body +y (FLU, right-handed), so a positive
    value tilts the optical axis *down*. ``offset_m`` is the optical centre in the body frame.
    Depth noise is zero-mean Gaussian with ``noise_std_m`` (m) on every valid pixel.
    Default range 0.2..10 m is a RealSense D435-class envelope.
    """

    # One camera model for the simulator, the planner node and the policy node (read-only as ROS
    # parameters: a camera does not change in flight, and the nodes build their projection once).
    width_px: int = setting(64, range=(1, math.inf), read_only=True, description="image width, px")
    height_px: int = setting(48, range=(1, math.inf), read_only=True, description="image height, px")
    hfov_deg: float = setting(90.0, range=(0.0, 180.0), low_open=True, high_open=True, read_only=True,
                              description="horizontal field of view, deg (square pixels)")
    min_range_m: float = non_negative(0.2, read_only=True, description="nearest valid depth, m")
    max_range_m: float = positive(10.0, read_only=True, description="farthest valid depth, m (beyond: no return)")
    mount_pitch_deg: float = setting(0.0, range=(-90.0, 90.0), read_only=True,
                                     description="camera pitch about body +y, deg, positive = down")
    offset_m: Tuple[float, float, float] = setting((0.0, 0.0, 0.0), read_only=True,
                                                   description="optical centre in the body frame (FLU), m")
    noise_std_m: float = non_negative(0.0, read_only=True,
                                      description="simulated depth noise (Gaussian), m; the nodes ignore it")

    def _check(self):
        if self.min_range_m >= self.max_range_m:
            raise self._error("min_range_m", f"({self.min_range_m}) must be below max_range_m ({self.max_range_m})")


@dataclass(frozen=True)
class OdometryParams(Config):
    """What the planner's odometry adds to the true state: Gaussian noise and a fixed latency.

    The flight controller itself uses the true state (its own EKF is assumed good); only the
    planner sees this degraded copy. Zero noise and latency by default.
    """

    position_noise_std_m: float = non_negative(0.0)
    velocity_noise_std_mps: float = non_negative(0.0)
    latency_s: float = non_negative(0.0)
