"""ENU <-> NED and FLU <-> FRD conversions, hand-checked and as round trips over random poses;
setpoint <-> SET_POSITION_TARGET_LOCAL_NED type masks."""
import math

import numpy as np
import pytest

from planner_pkg.bridges.mavlink import frames
from planner_pkg.bridges.mavlink.setpoints import (
    IGNORE_ACCELERATION,
    IGNORE_POSITION,
    IGNORE_VELOCITY,
    IGNORE_YAW,
    IGNORE_YAW_RATE,
    PositionTargetNed,
    setpoint_to_target,
    target_to_setpoint,
)
from planner_pkg.types import Setpoint, quaternion_from_yaw, quaternion_to_matrix

RNG = np.random.default_rng(8)


def random_quaternions(n):
    q = RNG.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def same_rotation(q1, q2, tol=1e-9):
    return abs(abs(float(np.dot(q1, q2))) - 1.0) < tol


# ---------------------------------------------------------------------------------------------
# Hand-checked cases
# ---------------------------------------------------------------------------------------------
def test_north_is_plus_y_enu_and_plus_x_ned():
    np.testing.assert_array_equal(frames.enu_to_ned([0.0, 1.0, 0.0]), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(frames.ned_to_enu([1.0, 0.0, 0.0]), [0.0, 1.0, 0.0])


def test_east_and_up():
    np.testing.assert_array_equal(frames.enu_to_ned([1.0, 0.0, 0.0]), [0.0, 1.0, 0.0])  # east is NED +y
    np.testing.assert_array_equal(frames.enu_to_ned([0.0, 0.0, 2.5]), [0.0, 0.0, -2.5])  # 2.5 m up is z = -2.5
    np.testing.assert_array_equal(frames.ned_to_enu([3.0, 4.0, -5.0]), [4.0, 3.0, 5.0])


def test_zero_stays_positive_zero():
    assert math.copysign(1.0, frames.ned_to_enu([0.0, 0.0, 0.0])[2]) == 1.0


@pytest.mark.parametrize(
    "yaw_enu, yaw_ned",
    [(0.0, math.pi / 2), (math.pi / 2, 0.0), (math.pi, -math.pi / 2), (-math.pi / 2, math.pi), (math.pi / 4, math.pi / 4)],
    ids=["east", "north", "west", "south", "north-east"],
)
def test_yaw_hand_cases(yaw_enu, yaw_ned):
    """ENU yaw 0 = facing east = NED yaw +90 deg; ENU north (pi/2) = NED 0."""
    assert frames.wrap_pi(frames.yaw_enu_to_ned(yaw_enu) - yaw_ned) == pytest.approx(0.0, abs=1e-12)
    assert frames.wrap_pi(frames.yaw_ned_to_enu(yaw_ned) - yaw_enu) == pytest.approx(0.0, abs=1e-12)


def test_yaw_rate_flips_and_nan_stays_nan():
    assert frames.yaw_rate_enu_to_ned(0.3) == -0.3
    assert frames.yaw_rate_ned_to_enu(-0.3) == 0.3
    assert math.isnan(frames.yaw_enu_to_ned(math.nan))
    assert math.isnan(frames.yaw_rate_enu_to_ned(math.nan))


def test_body_frames_hand_cases():
    np.testing.assert_array_equal(frames.flu_to_frd([1.0, 2.0, 3.0]), [1.0, -2.0, -3.0])  # left -> -right, up -> -down
    np.testing.assert_array_equal(frames.frd_to_flu([0.1, 0.2, 0.3]), [0.1, -0.2, -0.3])  # angular rates alike


def test_level_vehicle_facing_east_in_both_conventions():
    q_enu = quaternion_from_yaw(0.0)  # level, nose east
    q_ned = frames.quaternion_enu_flu_to_ned_frd(q_enu)
    r_ned = quaternion_to_matrix(q_ned)
    np.testing.assert_allclose(r_ned @ [1, 0, 0], [0, 1, 0], atol=1e-12)  # FRD forward = NED east
    np.testing.assert_allclose(r_ned @ [0, 0, 1], [0, 0, 1], atol=1e-12)  # FRD down = NED down
    assert math.atan2(r_ned[1, 0], r_ned[0, 0]) == pytest.approx(math.pi / 2)  # NED yaw +90 deg


def test_identity_ned_attitude_faces_north():
    q_enu = frames.quaternion_ned_frd_to_enu_flu([0.0, 0.0, 0.0, 1.0])  # PX4 attitude "null rotation"
    r = quaternion_to_matrix(q_enu)
    np.testing.assert_allclose(r @ [1, 0, 0], [0, 1, 0], atol=1e-12)  # forward = ENU north (+y)
    np.testing.assert_allclose(r @ [0, 0, 1], [0, 0, 1], atol=1e-12)  # FLU up = ENU up


def test_mavlink_quaternion_order():
    assert frames.quaternion_to_mavlink([0.1, 0.2, 0.3, 0.9]) == [0.9, 0.1, 0.2, 0.3]
    np.testing.assert_array_equal(frames.quaternion_from_mavlink([0.9, 0.1, 0.2, 0.3]), [0.1, 0.2, 0.3, 0.9])


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="shape"):
        frames.enu_to_ned([1.0, 2.0])
    with pytest.raises(ValueError, match="not a rotation"):
        frames.quaternion_enu_flu_to_ned_frd([0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="21"):
        frames.covariance_from_mavlink_urt([0.0] * 20)


# ---------------------------------------------------------------------------------------------
# Round trips over random poses
# ---------------------------------------------------------------------------------------------
def test_vector_round_trips_batched():
    v = RNG.uniform(-100, 100, size=(500, 3))
    np.testing.assert_array_equal(frames.ned_to_enu(frames.enu_to_ned(v)), v)
    np.testing.assert_array_equal(frames.frd_to_flu(frames.flu_to_frd(v)), v)
    # batched and single-vector forms agree
    np.testing.assert_array_equal(frames.enu_to_ned(v)[7], frames.enu_to_ned(v[7]))


def test_random_pose_round_trip_and_consistency():
    """For random attitudes and body vectors: the round trip is exact, and a body vector mapped
    to the world gives the same physical direction in either convention."""
    for q in random_quaternions(300):
        q_ned = frames.quaternion_enu_flu_to_ned_frd(q)
        assert same_rotation(frames.quaternion_ned_frd_to_enu_flu(q_ned), q)
        np.testing.assert_allclose(np.linalg.norm(q_ned), 1.0, atol=1e-12)
        r_enu, r_ned = quaternion_to_matrix(q), quaternion_to_matrix(q_ned)
        np.testing.assert_allclose(r_ned, frames.ENU_NED @ r_enu @ frames.FLU_FRD, atol=1e-12)
        v_flu = RNG.normal(size=3)
        world_enu = r_enu @ v_flu
        world_ned = r_ned @ frames.flu_to_frd(v_flu)
        np.testing.assert_allclose(frames.ned_to_enu(world_ned), world_enu, atol=1e-12)


def test_yaw_of_converted_quaternion_matches_yaw_conversion():
    for yaw in RNG.uniform(-math.pi, math.pi, size=100):
        q_ned = frames.quaternion_enu_flu_to_ned_frd(quaternion_from_yaw(yaw))
        r = quaternion_to_matrix(q_ned)
        assert frames.wrap_pi(math.atan2(r[1, 0], r[0, 0]) - frames.yaw_enu_to_ned(yaw)) == pytest.approx(0.0, abs=1e-9)
        assert frames.wrap_pi(frames.yaw_ned_to_enu(frames.yaw_enu_to_ned(yaw)) - yaw) == pytest.approx(0.0, abs=1e-12)


def test_covariance_hand_case_and_round_trip():
    cov_ned = np.diag([1.0, 2.0, 3.0])  # variance north 1, east 2, down 3
    cov_enu = frames.covariance_ned_to_enu(cov_ned)
    np.testing.assert_array_equal(np.diag(cov_enu), [2.0, 1.0, 3.0])  # east 2, north 1, up 3
    a = RNG.normal(size=(6, 6))
    c = a @ a.T
    np.testing.assert_allclose(frames.covariance_ned_to_enu(frames.covariance_ned_to_enu(c)), c, atol=1e-12)
    np.testing.assert_allclose(frames.covariance_frd_to_flu(frames.covariance_frd_to_flu(c)), c, atol=1e-12)
    # a north-east correlation keeps its sign (both axes keep their sign); an east-down one flips
    c3 = np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 1.0]])
    out = frames.covariance_ned_to_enu(c3)
    assert out[0, 1] == 0.5 and out[0, 2] == -0.3


def test_mavlink_covariance_triangle_round_trip():
    a = RNG.normal(size=(6, 6))
    c = a @ a.T
    urt = frames.covariance_to_mavlink_urt(c)
    assert len(urt) == 21
    np.testing.assert_allclose(frames.covariance_from_mavlink_urt(urt), c)
    assert frames.covariance_from_mavlink_urt([math.nan] + [0.0] * 20) is None  # MAVLink "unknown"
    assert math.isnan(frames.covariance_to_mavlink_urt(None)[0])


# ---------------------------------------------------------------------------------------------
# Setpoint -> SET_POSITION_TARGET_LOCAL_NED
# ---------------------------------------------------------------------------------------------
def test_position_setpoint_to_target_hand_case():
    t = setpoint_to_target(Setpoint(position=[1.0, 2.0, 3.0], yaw=0.0))
    assert (t.x, t.y, t.z) == (2.0, 1.0, -3.0)
    assert t.yaw == pytest.approx(math.pi / 2)
    assert t.type_mask == IGNORE_VELOCITY | IGNORE_ACCELERATION | IGNORE_YAW_RATE


@pytest.mark.parametrize(
    "sp, mask",
    [
        (Setpoint.hold([1.0, 2.0, 3.0]), IGNORE_YAW | IGNORE_YAW_RATE),
        (Setpoint.from_velocity([1.0, 0.0, 0.5], yaw_rate=0.2), IGNORE_POSITION | IGNORE_ACCELERATION | IGNORE_YAW),
        (Setpoint.from_acceleration([0.0, 0.0, 1.0], yaw=1.0), IGNORE_POSITION | IGNORE_VELOCITY | IGNORE_YAW_RATE),
        (Setpoint(position=[0, 0, 1], velocity=[1, 0, 0], yaw=0.0, yaw_rate=0.1), IGNORE_ACCELERATION),
    ],
    ids=["hold", "velocity", "acceleration", "position+velocity ff"],
)
def test_type_masks(sp, mask):
    t = setpoint_to_target(sp)
    assert t.type_mask == mask
    back = target_to_setpoint(t)
    for name in ("position", "velocity", "acceleration"):
        np.testing.assert_allclose(getattr(back, name), getattr(sp, name), equal_nan=True, atol=1e-12)
    assert (math.isnan(back.yaw) and math.isnan(sp.yaw)) or back.yaw == pytest.approx(sp.yaw)
    assert (math.isnan(back.yaw_rate) and math.isnan(sp.yaw_rate)) or back.yaw_rate == pytest.approx(sp.yaw_rate)


def test_velocity_setpoint_north_and_up():
    t = setpoint_to_target(Setpoint.from_velocity([0.0, 2.0, 1.0]))  # 2 m/s north, 1 m/s up
    assert (t.vx, t.vy, t.vz) == (2.0, 0.0, -1.0)
    assert (t.x, t.y, t.z) == (0.0, 0.0, 0.0)  # ignored fields go out as zeros, not NaN


def test_random_setpoint_round_trips():
    for _ in range(200):
        pos, vel, acc = (RNG.uniform(-50, 50, 3) if RNG.random() < 0.7 else np.full(3, np.nan) for _ in range(3))
        if np.isnan(pos[0]) and np.isnan(vel[0]) and np.isnan(acc[0]):
            pos = RNG.uniform(-5, 5, 3)
        yaw = RNG.uniform(-math.pi, math.pi) if RNG.random() < 0.5 else math.nan
        sp = Setpoint(position=pos, velocity=vel, acceleration=acc, yaw=yaw)
        back = target_to_setpoint(setpoint_to_target(sp))
        np.testing.assert_allclose(back.position, sp.position, equal_nan=True, atol=1e-12)
        np.testing.assert_allclose(back.velocity, sp.velocity, equal_nan=True, atol=1e-12)
        np.testing.assert_allclose(back.acceleration, sp.acceleration, equal_nan=True, atol=1e-12)
        if not math.isnan(yaw):
            assert frames.wrap_pi(back.yaw - yaw) == pytest.approx(0.0, abs=1e-12)


def test_empty_and_partial_targets_rejected():
    with pytest.raises(ValueError, match="nothing to send"):
        setpoint_to_target(Setpoint(yaw=1.0))
    partial = PositionTargetNed(0b110 | IGNORE_VELOCITY | IGNORE_ACCELERATION, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="only some position axes"):
        target_to_setpoint(partial)
