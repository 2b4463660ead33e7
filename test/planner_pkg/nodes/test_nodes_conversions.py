"""conversions.py and sampled_trajectory.py: messages <-> core types, without starting rclpy."""
import math
from pathlib import Path

import numpy as np
import pytest
from sensor_msgs.msg import Image, PointCloud2, PointField

from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes import markers as mk
from planner_pkg.planning.sampled_trajectory import SampledTrajectory, sample_trajectory, trajectory_span
from planner_pkg.planning.direct import StraightLineTrajectory
from planner_pkg.types import Setpoint, VehicleState, quaternion_from_yaw


def test_cloud_round_trip_and_empty():
    pts = np.random.default_rng(0).normal(size=(500, 3)).astype(np.float32)
    msg = conv.points_to_cloud(pts, 12.5)
    assert msg.point_step == 12 and msg.width == 500 and msg.header.frame_id == "map"
    assert np.array_equal(conv.cloud_to_points(msg), pts)
    assert conv.stamp_to_seconds(msg.header.stamp) == pytest.approx(12.5)
    empty = conv.cloud_to_points(conv.points_to_cloud(np.zeros((0, 3)), 0.0))
    assert empty.shape == (0, 3) and empty.dtype == np.float32


def _cloud(fields, dtype, data: np.ndarray, bigendian=False, height=1, row_pad=0):
    msg = PointCloud2()
    msg.fields = fields
    msg.point_step = dtype.itemsize
    msg.height = height
    msg.width = data.shape[0] // height
    msg.row_step = msg.width * msg.point_step + row_pad
    msg.is_bigendian = bigendian
    rows = data.reshape(height, -1).view(np.uint8).reshape(height, -1)
    rows = np.concatenate([rows, np.zeros((height, row_pad), np.uint8)], axis=1)
    msg.data = rows.tobytes()
    return msg


def test_cloud_other_layouts_float64_padding_bigendian_organised():
    n = 12
    dt = np.dtype({"names": ["x", "y", "z", "i"], "formats": [">f8", ">f8", ">f8", ">f4"],
                   "offsets": [0, 8, 16, 28], "itemsize": 32})
    data = np.zeros(n, dtype=dt)
    xyz = np.arange(3 * n, dtype=np.float64).reshape(n, 3)
    data["x"], data["y"], data["z"] = xyz.T
    data["x"][3] = np.nan  # dropped
    fields = [PointField(name="x", offset=0, datatype=PointField.FLOAT64, count=1),
              PointField(name="y", offset=8, datatype=PointField.FLOAT64, count=1),
              PointField(name="z", offset=16, datatype=PointField.FLOAT64, count=1),
              PointField(name="intensity", offset=28, datatype=PointField.FLOAT32, count=1)]
    pts = conv.cloud_to_points(_cloud(fields, dt, data, bigendian=True, height=3, row_pad=8))
    expect = np.delete(xyz, 3, axis=0).astype(np.float32)
    assert np.array_equal(pts, expect)


@pytest.mark.parametrize("fields,why", [
    ([PointField(name="x", offset=0, datatype=7, count=1), PointField(name="y", offset=4, datatype=7, count=1)],
     "no field"),
    ([PointField(name=n, offset=2 * i, datatype=PointField.UINT16, count=1) for i, n in enumerate("xyz")],
     "FLOAT32/FLOAT64"),
    ([PointField(name=n, offset=4 * i + 4, datatype=7, count=1) for i, n in enumerate("xyz")], "does not fit"),
])
def test_cloud_wrong_fields_raise_with_reason(fields, why):
    msg = PointCloud2()
    msg.fields, msg.point_step, msg.width, msg.height = fields, 12, 2, 1
    msg.row_step = 24
    msg.data = bytes(24)
    with pytest.raises(ValueError, match=why):
        conv.cloud_to_points(msg)


def test_cloud_truncated_data_raises():
    msg = conv.points_to_cloud(np.ones((10, 3)), 0.0)
    msg.data = bytes(msg.data)[:50]
    with pytest.raises(ValueError, match="bytes"):
        conv.cloud_to_points(msg)


def test_depth_image_round_trip_16uc1_and_bad_encoding():
    d = np.random.default_rng(1).uniform(0.3, 9.0, (48, 64)).astype(np.float32)
    d[0, 0], d[1, 1], d[2, 2] = np.inf, -np.inf, np.nan
    back = conv.image_to_depth(conv.depth_to_image(d, 1.0, "cam"))
    assert np.array_equal(back, d, equal_nan=True)
    mm = Image(height=2, width=2, encoding="16UC1", step=4)
    mm.data = np.array([[1000, 0], [2500, 65535]], dtype="<u2").tobytes()
    depth = conv.image_to_depth(mm)
    assert depth[0, 0] == pytest.approx(1.0) and math.isnan(depth[0, 1]) and depth[1, 0] == pytest.approx(2.5)
    with pytest.raises(ValueError, match="encoding"):
        conv.image_to_depth(Image(height=2, width=2, encoding="rgb8", step=6, data=bytes(12)))
    with pytest.raises(ValueError, match="bytes"):
        conv.image_to_depth(Image(height=48, width=64, encoding="32FC1", step=256, data=bytes(100)))


def test_odometry_twist_is_in_the_body_frame_and_round_trips():
    yaw = 0.7
    state = VehicleState(4.2, [1.0, 2.0, 3.0], [1.0, 0.0, 0.5], quaternion_from_yaw(yaw), [0.0, 0.1, 0.2])
    msg = conv.state_to_odometry(state)
    assert (msg.header.frame_id, msg.child_frame_id) == ("map", "base_link")
    # world velocity (1, 0) seen from a body yawed by 0.7 rad points backwards-right
    assert msg.twist.twist.linear.x == pytest.approx(math.cos(yaw))
    assert msg.twist.twist.linear.y == pytest.approx(-math.sin(yaw))
    back = conv.odometry_to_state(msg)
    assert back.t == pytest.approx(4.2)
    assert np.allclose(back.velocity, state.velocity) and np.allclose(back.position, state.position)


@pytest.mark.parametrize("field,value", [("x", math.nan), ("z", math.inf), ("w", 0.0)])
def test_odometry_with_nan_inf_or_zero_quaternion_raises(field, value):
    msg = conv.state_to_odometry(VehicleState.at_rest([0.0, 0.0, 1.0]))
    if field == "w":
        msg.pose.pose.orientation.w = 0.0
    else:
        setattr(msg.pose.pose.position, field, value)
    with pytest.raises(ValueError):
        conv.odometry_to_state(msg)


def test_setpoint_round_trip_keeps_nan_fields_unused():
    sp = Setpoint(velocity=[1.0, -2.0, 0.5], yaw=1.2)
    back = conv.msg_to_setpoint(conv.setpoint_to_msg(sp, 3.0))
    assert back.mode == "velocity" and not back.has_position and not back.has_acceleration
    assert np.allclose(back.velocity, sp.velocity) and back.yaw == pytest.approx(1.2)
    hold = conv.msg_to_setpoint(conv.setpoint_to_msg(Setpoint.hold([1.0, 2.0, 3.0]), 0.0))
    assert hold.mode == "position" and not hold.has_yaw


@pytest.mark.parametrize("breaker,match", [
    (lambda pt: setattr(pt.transforms[0].translation, "y", math.nan), "partially NaN"),
    (lambda pt: setattr(pt.velocities[0].linear, "x", math.inf), "not finite"),
    (lambda pt: setattr(pt.transforms[0].rotation, "w", math.inf), "quaternion"),
])
def test_bad_setpoints_raise_with_reason(breaker, match):
    msg = conv.setpoint_to_msg(Setpoint.hold([1.0, 2.0, 3.0], 0.3), 0.0)
    breaker(msg.points[0])
    with pytest.raises(ValueError, match=match):
        conv.msg_to_setpoint(msg)
    msg.points = []
    with pytest.raises(ValueError, match="no points"):
        conv.msg_to_setpoint(msg)


def test_trajectory_samples_reproduce_the_planner_trajectory():
    traj = StraightLineTrajectory([0.0, 0.0, 1.0], [6.0, 2.0, 1.5], 10.0, 2.0, 3.0)
    t0, t1 = trajectory_span(traj, 10.0, 30.0)
    assert t0 == pytest.approx(10.0) and t1 == pytest.approx(10.0 + traj.duration_s)
    samples = sample_trajectory(traj, t0, t1, 0.05)
    msg = conv.trajectory_to_msg(samples, 9.9)  # stamped with the (earlier) sensor time
    back = conv.msg_to_trajectory(msg)
    assert back.t_start == pytest.approx(10.0, abs=1e-8) and back.t_end == pytest.approx(t1, abs=1e-8)
    for t in np.linspace(10.0, t1 - 1e-3, 97):
        ref, got = traj.sample(t), back.sample(t)
        assert np.linalg.norm(ref.position - got.position) < 1e-3
        assert np.linalg.norm(ref.velocity - got.velocity) < 2e-2
    final = back.sample(t1 + 5.0)
    assert np.allclose(final.position, [6.0, 2.0, 1.5]) and np.allclose(final.velocity, 0.0)


def test_unusable_trajectories_raise():
    good = SampledTrajectory([0.0, 1.0], [[0, 0, 1], [1, 0, 1]])
    msg = conv.trajectory_to_msg(good, 0.0)
    msg.points[1].transforms[0].translation.x = math.nan
    with pytest.raises(ValueError, match="position"):
        conv.msg_to_trajectory(msg)
    with pytest.raises(ValueError, match="increasing"):
        SampledTrajectory([0.0, 0.0], [[0, 0, 1], [1, 0, 1]])
    msg = conv.trajectory_to_msg(good, 0.0)
    msg.header.frame_id = "odom"
    with pytest.raises(ValueError, match="frame"):
        conv.msg_to_trajectory(msg)


def test_world_markers_and_status():
    from planner_pkg.world import load_world

    world = load_world(Path(__file__).resolve().parents[3] / "config" / "worlds" / "forest_small.yaml")
    markers = mk.world_to_markers(world)
    assert len(markers.markers) == len(world.obstacles) + 1  # + DELETEALL
    status = conv.make_status("planner", "warn", "odometry lost", [("reached", False)], 1.0)
    v = conv.status_values(status)
    assert v["reached"] == "False" and v["message"] == "odometry lost" and v["level"] == 1


# -- issue 20 item 7: magnitudes outside the flight envelope and wrong frames are refused ---------
def _odom(**changes):
    msg = conv.state_to_odometry(VehicleState.at_rest([1.0, 2.0, 1.0]))
    for path, value in changes.items():
        obj = msg
        *parents, leaf = path.split(".")
        for name in parents:
            obj = getattr(obj, name)
        setattr(obj, leaf, value)
    return msg


@pytest.mark.parametrize("path,value,words", [
    ("pose.pose.position.x", 1e300, "odometry position"),
    ("twist.twist.linear.y", 1e30, "odometry velocity"),
    ("twist.twist.angular.z", 1e30, "odometry angular velocity"),
    ("pose.pose.orientation.w", 1e30, "quaternion"),
    ("header.frame_id", "odom", "frame 'odom'"),
    ("child_frame_id", "camera_optical", "frame 'camera_optical'"),
])
def test_odometry_outside_the_envelope_or_in_another_frame_is_refused(path, value, words):
    with pytest.raises(ValueError, match=words):
        conv.odometry_to_state(_odom(**{path: value}))


def test_odometry_limits_follow_the_envelope_and_frame_checks_can_be_skipped():
    from planner_pkg.envelope import FlightEnvelope

    fast = _odom(**{"twist.twist.linear.x": 150.0})
    with pytest.raises(ValueError, match="max_speed_mps = 100"):
        conv.odometry_to_state(fast)
    assert conv.odometry_to_state(fast, envelope=FlightEnvelope(max_speed_mps=200.0)).velocity[0] == 150.0
    gz = _odom(**{"header.frame_id": "x500_depth_0/odom", "child_frame_id": "x500_depth_0/base"})
    assert np.allclose(conv.odometry_to_state(gz, frame_id=None, child_frame_id=None).position, [1.0, 2.0, 1.0])
    assert np.allclose(conv.odometry_to_state(_odom(**{"header.frame_id": "/map"})).position, [1.0, 2.0, 1.0])


def test_trajectories_and_setpoints_outside_the_envelope_are_refused():
    good = SampledTrajectory([0.0, 1.0], [[0, 0, 1], [1, 0, 1]], [[1, 0, 0], [1, 0, 0]])
    breakers = [
        (lambda m: setattr(m.points[1].velocities[0].linear, "x", 1e30), "trajectory point 1 velocity"),
        (lambda m: setattr(m.points[0].transforms[0].translation, "y", 1e30), "trajectory point 0 position"),
        (lambda m: setattr(m.points[1].accelerations[0].linear, "z", -1e30), "trajectory point 1 acceleration"),
        (lambda m: setattr(m.points[1].time_from_start, "sec", 10**9), "time_from_start"),
    ]
    for breaker, words in breakers:
        msg = conv.trajectory_to_msg(good, 0.0)
        breaker(msg)
        with pytest.raises(ValueError, match=words):
            conv.msg_to_trajectory(msg)
    sp = conv.setpoint_to_msg(Setpoint.hold([1.0, 2.0, 3.0]), 0.0)
    sp.points[0].accelerations[0].linear.x = 1e30
    with pytest.raises(ValueError, match="setpoint acceleration"):
        conv.msg_to_setpoint(sp)
    sp = conv.setpoint_to_msg(Setpoint.hold([1.0, 2.0, 3.0]), 0.0, frame_id="odom")
    assert conv.msg_to_setpoint(sp).has_position  # frame unchecked by default: the bridges check their own
    with pytest.raises(ValueError, match="frame 'odom'"):
        conv.msg_to_setpoint(sp, frame_id="map")
    with pytest.raises(ValueError, match="goal position"):
        conv.pose_to_goal(conv.goal_to_pose([1e30, 0.0, 1.0]))


def test_the_envelope_itself():
    """Bounds are inclusive; a huge component is caught before squaring (1e200**2 overflows);
    NaN (unused) and inf are left to the finiteness checks; an envelope must be positive, finite."""
    from planner_pkg.envelope import DEFAULT_ENVELOPE as env, FlightEnvelope

    env.check_position("p", [1e5, -1e5, 0.0])
    env.check_speed("v", [60.0, 80.0, 0.0])  # norm exactly 100
    with pytest.raises(ValueError, match=r"v \[60, 80, 1\] \(100 m/s\) is outside"):
        env.check_speed("v", [60.0, 80.0, 1.0])
    with pytest.raises(ValueError, match="1e\\+200 m/s"):
        env.check_speed("v", [1e200, 1e200, 0.0])
    env.check_speed("v", [math.nan, math.inf, 1.0])
    env.check_duration("d", 3600.0)
    with pytest.raises(ValueError, match="max_trajectory_duration_s"):
        env.check_duration("d", -3601.0)
    for bad in (0.0, -1.0, math.inf, math.nan, True, "1"):
        with pytest.raises(ValueError, match="max_speed_mps must be a positive finite number"):
            FlightEnvelope(max_speed_mps=bad)
