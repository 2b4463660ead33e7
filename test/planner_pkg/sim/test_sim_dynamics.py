"""Physics of the rigid-body and point-mass models against analytic truth."""
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from planner_pkg.sim.dynamics import RigidBodyQuadrotor
from planner_pkg.sim.mixer import Mixer
from planner_pkg.sim.params import PointMassParams, QuadrotorParams
from planner_pkg.sim.point_mass import AccelerationCommand, PointMassQuadrotor
from planner_pkg.types import VehicleState

P = QuadrotorParams()
DT = 0.002  # the default 500 Hz


def test_default_airframe_is_a_1kg_250mm_quad_that_can_lift_itself():
    assert P.mass_kg == 1.0 and 2 * P.arm_length_m == 0.25
    assert 0.15 <= P.collision_radius_m <= 0.2
    assert P.max_total_thrust_n / (P.mass_kg * P.gravity_mps2) == pytest.approx(5.0, rel=0.01)


def test_hover_rotor_speed_gives_exactly_mg_and_keeps_the_vehicle_still():
    quad = RigidBodyQuadrotor(P)
    w = P.hover_rotor_speed_rad_s
    thrust, torque = quad.rotor_forces([w] * 4)
    assert thrust == pytest.approx(P.mass_kg * P.gravity_mps2, rel=1e-12)
    np.testing.assert_allclose(torque, 0.0, atol=1e-15)
    quad.reset(VehicleState.at_rest([1.0, 2.0, 3.0], yaw=0.7))
    for _ in range(1000):  # 2 s
        quad.step([w] * 4, DT)
    s = quad.state()
    np.testing.assert_allclose(s.position, [1.0, 2.0, 3.0], atol=1e-9)
    np.testing.assert_allclose(s.velocity, 0.0, atol=1e-9)
    assert s.yaw == pytest.approx(0.7, abs=1e-12)


def test_free_fall_follows_half_g_t_squared():
    params = replace(P, rotor_speed_min_rad_s=0.0, drag_coeffs_per_s=(0.0, 0.0, 0.0))
    quad = RigidBodyQuadrotor(params)
    quad.reset(VehicleState.at_rest([0, 0, 10.0]), rotor_speeds_rad_s=[0.0] * 4)
    for _ in range(500):  # 1 s
        quad.step([0.0] * 4, DT)
    s = quad.state()
    g = params.gravity_mps2
    assert s.t == pytest.approx(1.0)
    assert s.position[2] == pytest.approx(10.0 - 0.5 * g, abs=1e-6)
    assert s.velocity[2] == pytest.approx(-g, abs=1e-6)
    np.testing.assert_allclose(s.position[:2], 0.0, atol=1e-12)


def test_motor_step_reaches_63_percent_at_the_time_constant():
    tau = P.motor_time_constant_s
    quad = RigidBodyQuadrotor(P)
    w0, w1 = 600.0, 1800.0
    quad.reset(VehicleState.at_rest([0, 0, 50.0]), rotor_speeds_rad_s=[w0] * 4)
    n = 33
    for _ in range(n):  # exactly tau = 33 x 1 ms
        quad.step([w1] * 4, tau / n)
    frac = (quad.rotor_speeds - w0) / (w1 - w0)
    np.testing.assert_allclose(frac, 1.0 - math.exp(-1.0), rtol=1e-7)


def test_motor_command_is_saturated_to_the_rotor_range():
    quad = RigidBodyQuadrotor(P)
    quad.reset(VehicleState.at_rest([0, 0, 50.0]))
    for _ in range(1000):
        quad.step([1e6, -5.0, 1e6, 0.0], DT)
    w = quad.rotor_speeds
    assert w[0] == pytest.approx(P.rotor_speed_max_rad_s, rel=1e-6)
    assert w[1] == pytest.approx(P.rotor_speed_min_rad_s, rel=1e-6)


def test_torque_free_rotation_conserves_world_angular_momentum_and_energy():
    # no rotor thrust, no drag; an asymmetric body tumbling about a non-principal axis
    params = replace(P, rotor_speed_min_rad_s=0.0, inertia_kgm2=(2e-3, 3e-3, 5e-3), drag_coeffs_per_s=(0, 0, 0))
    quad = RigidBodyQuadrotor(params)
    q0 = Rotation.from_euler("xyz", [0.3, -0.2, 1.0]).as_quat()
    quad.reset(VehicleState(0.0, [0, 0, 100.0], [0, 0, 0], q0, [3.0, -2.0, 4.0]), rotor_speeds_rad_s=[0.0] * 4)
    J = np.array(params.inertia_kgm2)

    def invariants():
        s = quad.state()
        w = s.angular_velocity
        return s.rotation @ (J * w), 0.5 * float(w @ (J * w))

    L0, E0 = invariants()
    for _ in range(1000):  # 2 s, several tumbles
        quad.step([0.0] * 4, DT)
    L1, E1 = invariants()
    np.testing.assert_allclose(L1, L0, rtol=0, atol=1e-9 * np.linalg.norm(L0) * 1e3)  # 1e-6 relative
    assert E1 == pytest.approx(E0, rel=1e-6)
    assert np.linalg.norm(quad.state().attitude) == pytest.approx(1.0, abs=1e-12)


def test_rk4_is_fourth_order():
    # tumbling body: halving dt must cut the error by ~2^4
    params = replace(P, rotor_speed_min_rad_s=0.0, inertia_kgm2=(2e-3, 3e-3, 5e-3))

    def final_attitude(dt, steps):
        quad = RigidBodyQuadrotor(params)
        quad.reset(VehicleState(0.0, [0, 0, 100.0], [0, 0, 0], [0, 0, 0, 1], [6.0, -4.0, 8.0]), [0.0] * 4)
        for _ in range(steps):
            quad.step([0.0] * 4, dt)
        return quad.state_vector()[6:13]

    ref = final_attitude(0.0005, 2000)
    e1 = np.abs(final_attitude(0.01, 100) - ref).max()
    e2 = np.abs(final_attitude(0.005, 200) - ref).max()
    assert 10.0 < e1 / e2 < 22.0


def test_roll_torque_from_differential_thrust_has_the_flu_sign():
    quad = RigidBodyQuadrotor(P)
    w = P.hover_rotor_speed_rad_s
    # left rotors (1 rear-left, 2 front-left) faster: rolls right side down = +x torque (FLU)
    thrust, (tx, ty, tz) = quad.rotor_forces([w, w * 1.1, w * 1.1, w])
    assert tx > 0 and abs(ty) < 1e-12 * tx
    # front rotors faster: nose up = -y torque in FLU (positive pitch is nose down)
    _, (tx, ty, _) = quad.rotor_forces([w * 1.1, w, w * 1.1, w])
    assert ty < 0 and abs(tx) < 1e-12 * abs(ty)
    # CW rotors (2, 3) faster: reaction torque on the body is CCW = +z
    _, (_, _, tz) = quad.rotor_forces([w, w, w * 1.1, w * 1.1])
    assert tz > 0


def test_mixer_inverts_the_allocation_and_protects_roll_pitch_when_saturated():
    mixer = Mixer(P)
    quad = RigidBodyQuadrotor(P)
    thrust, torque = 12.0, np.array([0.05, -0.03, 0.01])
    speeds = mixer.rotor_speeds(thrust, torque)
    t2, tau2 = quad.rotor_forces(speeds)
    assert t2 == pytest.approx(thrust) and np.allclose(tau2, torque)
    # a yaw demand that cannot fit is scaled down; roll/pitch and thrust are kept
    speeds = mixer.rotor_speeds(9.81, np.array([0.2, 0.0, 5.0]))
    t3, tau3 = quad.rotor_forces(speeds)
    assert t3 == pytest.approx(9.81) and tau3[0] == pytest.approx(0.2) and 0 < tau3[2] < 5.0
    # full throttle plus roll: collective gives way, the roll torque survives
    speeds = mixer.rotor_speeds(P.max_total_thrust_n, np.array([0.3, 0.0, 0.0]))
    t4, tau4 = quad.rotor_forces(speeds)
    assert t4 < P.max_total_thrust_n and tau4[0] == pytest.approx(0.3)


def test_params_validate_and_name_the_bad_field():
    with pytest.raises(ValueError, match="mass_kg"):
        QuadrotorParams(mass_kg=-1.0)
    with pytest.raises(ValueError, match="cannot lift"):
        QuadrotorParams(mass_kg=10.0)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['QuadrotorParams\.mass'\]; known in QuadrotorParams: "
                                         r".*'mass_kg'"):
        P.with_overrides({"mass": 2.0})
    assert P.with_overrides({"mass_kg": 1.2}).mass_kg == 1.2


# -- point mass ------------------------------------------------------------------------------------
def test_point_mass_hovers_at_rest_and_follows_the_thrust_lag():
    pm_params = PointMassParams()
    pm = PointMassQuadrotor(pm_params)
    pm.reset(VehicleState.at_rest([0, 0, 2.0]))
    for _ in range(500):
        pm.step(AccelerationCommand(np.zeros(3), 0.0), DT)
    np.testing.assert_allclose(pm.position, [0, 0, 2.0], atol=1e-12)
    # step the commanded acceleration: the specific thrust covers 63 % of the step at tau
    tau = pm_params.thrust_time_constant_s
    n = 250
    for _ in range(n):
        pm.step(AccelerationCommand(np.array([2.0, 0.0, 0.0]), 0.0), tau / n)
    assert pm.specific_thrust[0] / 2.0 == pytest.approx(1.0 - math.exp(-1.0), rel=1e-8)


def test_point_mass_terminal_velocity_is_thrust_over_drag():
    pm_params = PointMassParams(drag_coeffs_per_s=(0.4, 0.4, 0.1))
    pm = PointMassQuadrotor(pm_params)
    pm.reset(VehicleState.at_rest([0, 0, 2.0]))
    for _ in range(int(20 / DT)):
        pm.step(AccelerationCommand(np.array([1.2, 0.0, 0.0]), 0.0), DT)
    assert pm.velocity[0] == pytest.approx(1.2 / 0.4, rel=1e-3)
    # the reported attitude tilts body z along the thrust and keeps the heading
    s = pm.state()
    f = pm.specific_thrust
    np.testing.assert_allclose(s.rotation[:, 2], f / np.linalg.norm(f), atol=1e-12)
    assert s.yaw == pytest.approx(0.0, abs=1e-12)
