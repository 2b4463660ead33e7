"""The collective thrust + body-rate input of the rigid-body quadrotor, against analytic truth."""
import math

import numpy as np
import pytest

from planner_pkg.sim.embedded import EmbeddedSim
from planner_pkg.sim.dynamics import RigidBodyQuadrotor
from planner_pkg.sim.params import GRAVITY_MPS2
from planner_pkg.sim.rate_control import (BodyRateCommand, BodyRateController, MAX_COMMAND_RATE_RAD_S,
                                          check_body_rate_command)
from planner_pkg.sim.rotation import quaternion_to_matrix
from planner_pkg.types import VehicleState
from planner_pkg.world import World

DT, CONTROL_EVERY = 0.002, 2  # 500 Hz physics, 250 Hz rate loop (the simulator's defaults)


def fly(command, seconds, start=None, record=None):
    """Fly a constant command; returns the vehicle (and fills ``record`` with (t, state) samples)."""
    quad = RigidBodyQuadrotor()
    quad.reset(start or VehicleState.at_rest(np.array([0.0, 0.0, 100.0])))
    ctl = BodyRateController(quad.params)
    rotors = None
    for k in range(int(round(seconds / DT))):
        if k % CONTROL_EVERY == 0:
            rotors = ctl.update(quad.state(), command)
        quad.step(rotors, DT)
        if record is not None:
            record.append(quad.state())
    return quad


def rot_x(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def rot_z(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def test_hover_thrust_level_gives_zero_vertical_acceleration_and_keeps_attitude():
    quad = fly(BodyRateCommand(GRAVITY_MPS2, (0.0, 0.0, 0.0)), 2.0)
    s = quad.state()
    assert abs(s.velocity[2]) < 1e-6 and np.abs(s.position - [0, 0, 100]).max() < 1e-6
    assert np.abs(s.rotation - np.eye(3)).max() < 1e-9


def test_collective_thrust_gives_its_acceleration_along_body_z():
    # level, thrust 2 g: v_z' = (c - g) - d_z v_z (vertical rotor drag d_z), after the motor lag
    c = 2.0 * GRAVITY_MPS2
    rec = []
    quad = fly(BodyRateCommand(c, (0.0, 0.0, 0.0)), 0.6, record=rec)
    d_z = quad.params.drag_coeffs_per_s[2]
    for a, b in zip(rec[200:-1:50], rec[201::50]):  # from 0.4 s: the 33 ms motor lag has settled
        accel = (b.velocity[2] - a.velocity[2]) / DT
        assert accel == pytest.approx(c - GRAVITY_MPS2 - d_z * a.velocity[2], rel=2e-3)


@pytest.mark.parametrize("axis, rate", [(0, 3.0), (2, 2.0), (0, -6.0)])
def test_constant_body_rate_rotates_at_that_rate(axis, rate):
    # once the rate loop has settled, R(t2) = R(t1) exp([w e_axis]x (t2 - t1))
    rates = [0.0, 0.0, 0.0]
    rates[axis] = rate
    rec = []
    fly(BodyRateCommand(GRAVITY_MPS2, tuple(rates)), 0.6, record=rec)
    s1, s2 = rec[199], rec[299]  # 0.4 s and 0.6 s
    step = (rot_x if axis == 0 else rot_z)(rate * (s2.t - s1.t))
    expected = s1.rotation @ step
    assert np.abs(s2.rotation - expected).max() < 2e-3
    assert s2.angular_velocity[axis] == pytest.approx(rate, rel=2e-3)
    assert np.abs(np.delete(s2.angular_velocity, axis)).max() < 1e-3


def test_rate_step_response_is_close_to_the_racing_policys_40_ms_lag():
    rec = []
    fly(BodyRateCommand(GRAVITY_MPS2, (4.0, 0.0, 0.0)), 0.2, record=rec)
    w = np.array([s.angular_velocity[0] for s in rec])
    t63 = (np.argmax(w > 0.632 * 4.0) + 1) * DT
    assert 0.030 <= t63 <= 0.050, t63  # measured 42 ms
    assert w.max() < 4.0 * 1.10  # overshoot measured 5 %


def test_zero_thrust_still_rotates_airmode():
    # the policy starts races with a zero-thrust dive: the rotors rise together so the torque acts
    rec = []
    fly(BodyRateCommand(0.0, (0.0, 8.0, 0.0)), 0.15, record=rec)
    assert rec[-1].angular_velocity[1] > 6.0


@pytest.mark.parametrize("thrust, rates, match", [
    (math.nan, (0, 0, 0), "NaN"), (9.8, (0, math.inf, 0), "NaN"), (-1.0, (0, 0, 0), ">= 0"),
    (9.8, (0, 0, MAX_COMMAND_RATE_RAD_S + 1), "exceed"), (9.8, (0, 0), "3 body rates"), ("x", (0, 0, 0), "numbers"),
])
def test_bad_commands_are_refused(thrust, rates, match):
    with pytest.raises(ValueError, match=match):
        check_body_rate_command(thrust, rates)


def _sim(vehicle="quadrotor", **kw):
    world = World((-50.0, -50.0, 0.0), (50.0, 50.0, 50.0), [])
    return EmbeddedSim(world, np.array([0.0, 0.0, 10.0]), 0.0, vehicle=vehicle, camera_rate_hz=0.0, **kw)


def test_embedded_sim_flies_rates_and_a_stale_command_brakes_to_a_hold():
    sim = _sim(rate_command_timeout_s=0.1)
    sim.set_body_rate_command(BodyRateCommand(GRAVITY_MPS2, (0.0, 2.0, 0.0)))  # pitch forward
    sim.advance(0.05)
    assert sim.rate_command is not None and not sim.holding
    assert sim.state().angular_velocity[1] > 1.0
    out = sim.advance(0.1)  # no new command: stale after 0.1 s
    assert sim.holding and sim.rate_command is None
    assert any("no body-rate command for 0.1 s" in e for e in out.events)
    sim.advance(3.0)  # the hold brakes and levels the vehicle near where it was
    s = sim.state()
    assert s.speed < 0.2 and np.abs(s.angular_velocity).max() < 0.2 and not sim.crashed


def test_a_setpoint_replaces_a_rate_command_and_point_mass_refuses_rates():
    from planner_pkg.types import Setpoint

    sim = _sim(setpoint_timeout_s=10.0)
    sim.set_body_rate_command(BodyRateCommand(GRAVITY_MPS2, (0.0, 0.0, 0.0)))
    sim.set_setpoint(Setpoint.hold(np.array([1.0, 0.0, 10.0])))
    assert sim.rate_command is None
    sim.advance(3.0)
    assert np.abs(sim.state().position - [1.0, 0.0, 10.0]).max() < 0.05
    with pytest.raises(ValueError, match="point_mass"):
        _sim("point_mass").set_body_rate_command(BodyRateCommand(GRAVITY_MPS2, (0.0, 0.0, 0.0)))
