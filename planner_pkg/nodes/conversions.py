"""Messages <-> core types: the one module that knows ROS message layouts.

Frames (DESIGN.md): ``map`` is ENU, ``base_link`` is FLU. Odometry follows REP 105 / the
nav_msgs definition: the pose is in ``header.frame_id`` (map), the twist in ``child_frame_id``
(base_link, i.e. body FLU), so velocities are rotated here. Trajectories and setpoints are
``trajectory_msgs/MultiDOFJointTrajectory`` in ``map``; a field that is all NaN is *unused*
(PX4 convention), also a missing ``transforms``/``velocities``/``accelerations`` list.

Every ``*_to_*`` reader validates what it reads and raises ``ValueError`` saying what was wrong,
so a node can log one line and carry on: NaN/inf, magnitudes outside the flight envelope
(:class:`planner_pkg.envelope.FlightEnvelope`: odometry at 1e300 m, a trajectory at 1e30 m/s) and
a frame other than the one expected (``map`` / ``base_link`` unless the caller names another;
``None`` skips the check, for a bridge that re-labels a foreign frame itself). Arrays are
converted without Python loops per point (``np.frombuffer`` over the message bytes);
trajectories loop per sample, which is bounded by the publisher (at most a few hundred samples).
"""
from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence, Tuple

import numpy as np
from builtin_interfaces.msg import Duration as DurationMsg
from builtin_interfaces.msg import Time as TimeMsg
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped, Transform, Twist, TwistStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Image, PointCloud2, PointField
from trajectory_msgs.msg import MultiDOFJointTrajectory, MultiDOFJointTrajectoryPoint

from planner_pkg.envelope import DEFAULT_ENVELOPE, FlightEnvelope
from planner_pkg.planning.sampled_trajectory import SampledTrajectory
from planner_pkg.types import Setpoint, VehicleState, quaternion_from_yaw, quaternion_to_matrix, yaw_from_quaternion

MAP_FRAME = "map"
BODY_FRAME = "base_link"

_NAN3 = (math.nan, math.nan, math.nan)


def _check_frame(what: str, frame: str, expected: Optional[str]) -> None:
    """``frame`` must be ``expected`` (or ``/expected``, or empty = unspecified); None = any."""
    if expected is not None and frame not in ("", expected, "/" + expected):
        raise ValueError(f"{what} is in frame {frame!r}; only {expected!r} is accepted (no tf here)")


# ---------------------------------------------------------------------------------------------
# time
# ---------------------------------------------------------------------------------------------
def stamp_to_seconds(stamp) -> float:
    """builtin_interfaces/Time -> seconds (float)."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def seconds_to_stamp(t: float) -> TimeMsg:
    """Seconds (finite, >= 0) -> builtin_interfaces/Time."""
    if not (math.isfinite(t) and t >= 0.0):
        raise ValueError(f"a ROS time stamp must be finite and >= 0 s, got {t!r}")
    sec = int(math.floor(t))
    nanosec = int(round((t - sec) * 1e9))
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return TimeMsg(sec=sec, nanosec=nanosec)


def seconds_to_duration(d: float) -> DurationMsg:
    sec = int(math.floor(d))
    nanosec = int(round((d - sec) * 1e9))
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return DurationMsg(sec=sec, nanosec=nanosec)


def duration_to_seconds(d) -> float:
    return float(d.sec) + 1e-9 * float(d.nanosec)


# ---------------------------------------------------------------------------------------------
# odometry
# ---------------------------------------------------------------------------------------------
def state_to_odometry(state: VehicleState, frame_id: str = MAP_FRAME, child_frame_id: str = BODY_FRAME) -> Odometry:
    """VehicleState -> nav_msgs/Odometry stamped at ``state.t`` (twist in the body frame)."""
    msg = Odometry()
    msg.header.stamp = seconds_to_stamp(state.t)
    msg.header.frame_id = frame_id
    msg.child_frame_id = child_frame_id
    p, q = state.position.tolist(), state.attitude.tolist()
    pose = msg.pose.pose
    pose.position.x, pose.position.y, pose.position.z = p
    pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = q
    v_body = (state.rotation.T @ state.velocity).tolist()
    twist = msg.twist.twist
    twist.linear.x, twist.linear.y, twist.linear.z = v_body
    twist.angular.x, twist.angular.y, twist.angular.z = state.angular_velocity.tolist()
    return msg


def odometry_to_state(msg: Odometry, frame_id: Optional[str] = MAP_FRAME, child_frame_id: Optional[str] = BODY_FRAME,
                      envelope: FlightEnvelope = DEFAULT_ENVELOPE) -> VehicleState:
    """nav_msgs/Odometry -> VehicleState (world velocity).

    ValueError on NaN/inf, a zero quaternion, a pose frame other than ``frame_id`` / twist frame
    other than ``child_frame_id`` (None = any), or a position, speed or body rate outside
    ``envelope``."""
    _check_frame("odometry pose", msg.header.frame_id, frame_id)
    _check_frame("odometry twist (child_frame_id)", msg.child_frame_id, child_frame_id)
    pose, twist = msg.pose.pose, msg.twist.twist
    values = (
        pose.position.x, pose.position.y, pose.position.z,
        pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w,
        twist.linear.x, twist.linear.y, twist.linear.z,
        twist.angular.x, twist.angular.y, twist.angular.z,
    )
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"odometry contains NaN/inf: position/orientation/twist = {[round(v, 3) for v in values]}")
    envelope.check_position("odometry position", values[0:3])
    envelope.check_speed("odometry velocity", values[7:10])  # a rotation keeps the norm
    envelope.check_rate("odometry angular velocity", values[10:13])
    q = values[3:7]
    if max(abs(c) for c in q) < 1e-6 or max(abs(c) for c in q) > 1e6:
        raise ValueError(f"odometry orientation {list(q)} is not a usable quaternion (norm ~0 or huge)")
    n = math.sqrt(sum(c * c for c in q))
    q = tuple(c / n for c in q)
    R = quaternion_to_matrix(q)
    v_world = R @ np.array(values[7:10])
    return VehicleState.from_floats(stamp_to_seconds(msg.header.stamp), values[0:3], v_world, q, values[10:13])


# ---------------------------------------------------------------------------------------------
# body-rate commands (collective thrust + body rates; the racer -> sim_bridge)
# ---------------------------------------------------------------------------------------------
def body_rate_command_to_msg(thrust_mps2: float, rates_rad_s, stamp_s: float,
                             frame_id: str = BODY_FRAME) -> TwistStamped:
    """geometry_msgs/TwistStamped in ``base_link`` (FLU): ``twist.angular`` = body rates, rad/s;
    ``twist.linear.z`` = mass-normalised collective thrust along body +z, m/s^2 (g = hover level);
    ``twist.linear.x``, ``.y`` = 0."""
    msg = TwistStamped()
    msg.header.stamp = seconds_to_stamp(stamp_s)
    msg.header.frame_id = frame_id
    msg.twist.linear.z = float(thrust_mps2)
    msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z = (float(r) for r in rates_rad_s)
    return msg


def msg_to_body_rate_command(msg: TwistStamped, frame_id: Optional[str] = BODY_FRAME):
    """TwistStamped (layout of :func:`body_rate_command_to_msg`) -> ``sim.rate_control.BodyRateCommand``.

    ValueError on another frame, NaN/inf, a non-zero ``linear.x``/``.y`` (not this layout), a
    negative thrust or body rates beyond the rate loop's limit."""
    from planner_pkg.sim.rate_control import check_body_rate_command

    _check_frame("body-rate command", msg.header.frame_id, frame_id)
    lin, ang = msg.twist.linear, msg.twist.angular
    if not (math.isfinite(lin.x) and math.isfinite(lin.y)) or lin.x != 0.0 or lin.y != 0.0:
        raise ValueError(f"body-rate command: twist.linear.x/.y must be 0 (linear.z is the collective thrust, "
                         f"m/s^2), got {lin.x!r}, {lin.y!r}")
    return check_body_rate_command(lin.z, (ang.x, ang.y, ang.z))


# ---------------------------------------------------------------------------------------------
# point clouds
# ---------------------------------------------------------------------------------------------
_FIELD_DTYPES = {
    PointField.INT8: "i1", PointField.UINT8: "u1", PointField.INT16: "i2", PointField.UINT16: "u2",
    PointField.INT32: "i4", PointField.UINT32: "u4", PointField.FLOAT32: "f4", PointField.FLOAT64: "f8",
}


def points_to_cloud(points: np.ndarray, stamp_s: float, frame_id: str = MAP_FRAME) -> PointCloud2:
    """(N, 3) points, m -> PointCloud2 with float32 x, y, z (little-endian, unorganised)."""
    pts = np.ascontiguousarray(np.asarray(points, dtype="<f4").reshape(-1, 3))
    msg = PointCloud2()
    msg.header.stamp = seconds_to_stamp(stamp_s)
    msg.header.frame_id = frame_id
    msg.height, msg.width = 1, int(pts.shape[0])
    msg.fields = [
        PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1) for i, n in enumerate("xyz")
    ]
    msg.is_bigendian = False
    msg.point_step = 12
    msg.row_step = 12 * msg.width
    msg.is_dense = bool(np.isfinite(pts).all())
    msg.data = pts.tobytes()
    return msg


def cloud_to_points(msg: PointCloud2) -> np.ndarray:
    """PointCloud2 -> (N, 3) float32 points (non-finite points dropped).

    Accepts any layout that has float32 or float64 ``x``, ``y``, ``z`` fields (extra fields,
    padding, organised clouds, big-endian). Raises ValueError naming what is wrong otherwise.
    """
    by_name = {f.name: f for f in msg.fields}
    missing = [n for n in "xyz" if n not in by_name]
    if missing:
        raise ValueError(
            f"PointCloud2 has no field(s) {missing} (fields: {[f.name for f in msg.fields]}); need float x, y, z"
        )
    step, width, height = int(msg.point_step), int(msg.width), int(msg.height)
    order = ">" if msg.is_bigendian else "<"
    formats, offsets = [], []
    for n in "xyz":
        f = by_name[n]
        code = _FIELD_DTYPES.get(f.datatype)
        if code not in ("f4", "f8") or f.count not in (0, 1):
            raise ValueError(f"PointCloud2 field {n!r} must be one FLOAT32/FLOAT64, got datatype {f.datatype} count {f.count}")
        if f.offset + int(code[1]) > step:
            raise ValueError(f"PointCloud2 field {n!r} at offset {f.offset} does not fit in point_step {step}")
        formats.append(order + code)
        offsets.append(int(f.offset))
    n_points = width * height
    if n_points == 0:
        return np.zeros((0, 3), dtype=np.float32)
    row_step = int(msg.row_step)
    if row_step < width * step:
        raise ValueError(f"PointCloud2 row_step {row_step} < width {width} * point_step {step}")
    raw = np.frombuffer(msg.data, dtype=np.uint8)
    if raw.size < row_step * (height - 1) + width * step:
        raise ValueError(f"PointCloud2 data has {raw.size} bytes, need {row_step * height} for {width}x{height} points")
    if row_step != width * step:
        raw = np.concatenate([raw[r * row_step: r * row_step + width * step] for r in range(height)])
    else:
        raw = raw[: n_points * step]
    dtype = np.dtype({"names": ["x", "y", "z"], "formats": formats, "offsets": offsets, "itemsize": step})
    rec = raw.view(dtype)
    pts = np.empty((n_points, 3), dtype=np.float32)
    pts[:, 0], pts[:, 1], pts[:, 2] = rec["x"], rec["y"], rec["z"]
    finite = np.isfinite(pts).all(axis=1)
    return pts if finite.all() else pts[finite]


# ---------------------------------------------------------------------------------------------
# depth images
# ---------------------------------------------------------------------------------------------
def depth_to_image(depth: np.ndarray, stamp_s: float, frame_id: str) -> Image:
    """(H, W) z-depth, m -> sensor_msgs/Image 32FC1 (REP 118 +-inf / NaN kept)."""
    d = np.ascontiguousarray(np.asarray(depth, dtype="<f4"))
    if d.ndim != 2:
        raise ValueError(f"depth image must be 2-D (H, W), got shape {d.shape}")
    msg = Image()
    msg.header.stamp = seconds_to_stamp(stamp_s)
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(d.shape[0]), int(d.shape[1])
    msg.encoding = "32FC1"
    msg.is_bigendian = 0
    msg.step = 4 * msg.width
    msg.data = d.tobytes()
    return msg


def image_to_depth(msg: Image) -> np.ndarray:
    """sensor_msgs/Image -> (H, W) float32 z-depth, m.

    32FC1 (metres) is read as is; 16UC1 (millimetres, RealSense style) is scaled and its 0
    ("no data") becomes NaN. Any other encoding raises ValueError.
    """
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    if msg.encoding == "32FC1":
        code, size = "f4", 4
    elif msg.encoding == "16UC1":
        code, size = "u2", 2
    else:
        raise ValueError(f"depth image encoding {msg.encoding!r} is not supported; use 32FC1 (m) or 16UC1 (mm)")
    if h == 0 or w == 0:
        raise ValueError("depth image is empty (0 pixels)")
    if step < w * size:
        raise ValueError(f"depth image step {step} < width {w} * {size} bytes")
    raw = np.frombuffer(msg.data, dtype=np.uint8)
    if raw.size < step * h:
        raise ValueError(f"depth image has {raw.size} bytes, need step {step} * height {h}")
    rows = raw[: step * h].reshape(h, step)[:, : w * size]
    order = ">" if msg.is_bigendian else "<"
    depth = np.ascontiguousarray(rows).view(order + code).reshape(h, w)
    if code == "u2":
        out = depth.astype(np.float32) * np.float32(1e-3)
        out[depth == 0] = np.nan
        return out
    return depth.astype(np.float32, copy=False)


# ---------------------------------------------------------------------------------------------
# goals
# ---------------------------------------------------------------------------------------------
def pose_to_goal(msg: PoseStamped, expected_frame: str = MAP_FRAME,
                 envelope: FlightEnvelope = DEFAULT_ENVELOPE) -> np.ndarray:
    """PoseStamped -> goal position (3,) m. ValueError for NaN/inf, another frame (no tf here) or
    a position outside the flight envelope."""
    frame = msg.header.frame_id
    if frame not in ("", expected_frame, "/" + expected_frame):
        raise ValueError(f"goal is in frame {frame!r}; only {expected_frame!r} goals are accepted")
    p = msg.pose.position
    goal = np.array([p.x, p.y, p.z], dtype=np.float64)
    if not np.isfinite(goal).all():
        raise ValueError(f"goal position contains NaN/inf: {goal.tolist()}")
    envelope.check_position("goal position", goal.tolist())
    return goal


def goal_to_pose(goal, stamp_s: float = 0.0, frame_id: str = MAP_FRAME) -> PoseStamped:
    msg = PoseStamped()
    msg.header.stamp = seconds_to_stamp(stamp_s)
    msg.header.frame_id = frame_id
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in goal)
    msg.pose.orientation.w = 1.0
    return msg


# ---------------------------------------------------------------------------------------------
# setpoints and trajectories (MultiDOFJointTrajectory, NaN = unused)
# ---------------------------------------------------------------------------------------------
def _fill_point(pt: MultiDOFJointTrajectoryPoint, pos, vel, acc, yaw: float, yaw_rate: float, dt_s: float) -> None:
    tf, tw, ta = Transform(), Twist(), Twist()
    tf.translation.x, tf.translation.y, tf.translation.z = pos
    if math.isnan(yaw):
        tf.rotation.x = tf.rotation.y = tf.rotation.z = tf.rotation.w = math.nan
    else:
        tf.rotation.x, tf.rotation.y, tf.rotation.z, tf.rotation.w = quaternion_from_yaw(yaw).tolist()
    tw.linear.x, tw.linear.y, tw.linear.z = vel
    tw.angular.x, tw.angular.y, tw.angular.z = math.nan, math.nan, yaw_rate
    ta.linear.x, ta.linear.y, ta.linear.z = acc
    ta.angular.x = ta.angular.y = ta.angular.z = math.nan
    pt.transforms, pt.velocities, pt.accelerations = [tf], [tw], [ta]
    pt.time_from_start = seconds_to_duration(dt_s)


def setpoint_to_msg(setpoint: Setpoint, stamp_s: float, frame_id: str = MAP_FRAME) -> MultiDOFJointTrajectory:
    """Setpoint -> one-point MultiDOFJointTrajectory (unused fields NaN; yaw as a quaternion). The
    message has no field for the jerk; the simulator estimates it from successive setpoints
    (:mod:`planner_pkg.sim.embedded`)."""
    msg = MultiDOFJointTrajectory()
    msg.header.stamp = seconds_to_stamp(stamp_s)
    msg.header.frame_id = frame_id
    msg.joint_names = [BODY_FRAME]
    pt = MultiDOFJointTrajectoryPoint()
    _fill_point(pt, setpoint.position.tolist(), setpoint.velocity.tolist(), setpoint.acceleration.tolist(),
                setpoint.yaw, setpoint.yaw_rate, 0.0)
    msg.points = [pt]
    return msg


def _vec(v) -> Tuple[float, float, float]:
    return (v.x, v.y, v.z)


def _yaw_of(rotation) -> float:
    q = (rotation.x, rotation.y, rotation.z, rotation.w)
    if all(math.isnan(c) for c in q):
        return math.nan
    if not all(math.isfinite(c) for c in q) or sum(c * c for c in q) < 1e-12:
        raise ValueError(f"setpoint rotation {q} is neither a finite quaternion nor all NaN (unused)")
    return yaw_from_quaternion(q)


def _point_fields(pt: MultiDOFJointTrajectoryPoint, envelope: FlightEnvelope, what: str):
    """(pos, vel, acc, yaw, yaw_rate) of one point; NaN = unused. ValueError outside ``envelope``
    (inf is refused later, by the Setpoint / SampledTrajectory finiteness checks)."""
    pos = _vec(pt.transforms[0].translation) if pt.transforms else _NAN3
    yaw = _yaw_of(pt.transforms[0].rotation) if pt.transforms else math.nan
    vel = _vec(pt.velocities[0].linear) if pt.velocities else _NAN3
    yaw_rate = float(pt.velocities[0].angular.z) if pt.velocities else math.nan
    acc = _vec(pt.accelerations[0].linear) if pt.accelerations else _NAN3
    envelope.check_position(f"{what} position", pos)
    envelope.check_speed(f"{what} velocity", vel)
    envelope.check_accel(f"{what} acceleration", acc)
    envelope.check_rate(f"{what} yaw rate", (yaw_rate,))
    return pos, vel, acc, yaw, yaw_rate


def msg_to_setpoint(msg: MultiDOFJointTrajectory, frame_id: Optional[str] = None,
                    envelope: FlightEnvelope = DEFAULT_ENVELOPE) -> Setpoint:
    """First point of a MultiDOFJointTrajectory -> Setpoint.

    ValueError on partial NaN, inf, no point, a magnitude outside ``envelope`` or, when
    ``frame_id`` is given, another frame (the bridges check their configured frame themselves)."""
    _check_frame("setpoint", msg.header.frame_id, frame_id)
    if not msg.points:
        raise ValueError("setpoint message has no points")
    pos, vel, acc, yaw, yaw_rate = _point_fields(msg.points[0], envelope, "setpoint")
    return Setpoint(pos, vel, acc, yaw=yaw, yaw_rate=yaw_rate)


def trajectory_to_msg(traj: SampledTrajectory, stamp_s: float, frame_id: str = MAP_FRAME) -> MultiDOFJointTrajectory:
    """Samples -> MultiDOFJointTrajectory; ``time_from_start`` is relative to ``stamp_s``.

    ``stamp_s`` must not be after the first sample (durations stay >= 0). The planner node uses
    the stamp of the sensor data the plan was made from, so latency can be traced per message.
    """
    if stamp_s > traj.t_start + 1e-9:
        raise ValueError(f"trajectory stamp {stamp_s:.3f} s is after its first sample {traj.t_start:.3f} s")
    msg = MultiDOFJointTrajectory()
    msg.header.stamp = seconds_to_stamp(stamp_s)
    msg.header.frame_id = frame_id
    msg.joint_names = [BODY_FRAME]
    dts = (traj.t - stamp_s).tolist()
    pos, vel, acc = traj.position.tolist(), traj.velocity.tolist(), traj.acceleration.tolist()
    yaw, rate = traj.yaw.tolist(), traj.yaw_rate.tolist()
    points = []
    for i in range(len(dts)):
        pt = MultiDOFJointTrajectoryPoint()
        _fill_point(pt, pos[i], vel[i], acc[i], yaw[i], rate[i], dts[i])
        points.append(pt)
    msg.points = points
    return msg


def msg_to_trajectory(msg: MultiDOFJointTrajectory, frame_id: Optional[str] = MAP_FRAME,
                      envelope: FlightEnvelope = DEFAULT_ENVELOPE) -> SampledTrajectory:
    """MultiDOFJointTrajectory -> SampledTrajectory (absolute times). ValueError if unusable.

    Every point needs a finite position; velocities/accelerations that are missing or all NaN
    count as zero (the position samples are then interpolated piecewise-cubically with zero
    slopes, so send velocities for smooth tracking). Positions, velocities, accelerations, yaw
    rates and ``time_from_start`` must lie inside ``envelope``; the frame must be ``frame_id``.
    """
    if not msg.points:
        raise ValueError("trajectory message has no points")
    _check_frame("trajectory", msg.header.frame_id, frame_id)
    t0 = stamp_to_seconds(msg.header.stamp)
    k = len(msg.points)
    t = np.empty(k)
    pos, vel, acc = np.empty((k, 3)), np.zeros((k, 3)), np.zeros((k, 3))
    yaw, rate = np.empty(k), np.empty(k)
    for i, pt in enumerate(msg.points):
        p, v, a, yaw[i], rate[i] = _point_fields(pt, envelope, f"trajectory point {i}")
        dt = duration_to_seconds(pt.time_from_start)
        envelope.check_duration(f"trajectory point {i} time_from_start", dt)
        t[i] = t0 + dt
        pos[i] = p
        if not all(math.isnan(c) for c in v):
            vel[i] = v
        if not all(math.isnan(c) for c in a):
            acc[i] = a
    if not np.isfinite(pos).all():
        bad = int(np.argmax(~np.isfinite(pos).all(axis=1)))
        raise ValueError(f"trajectory point {bad} has a non-finite position {pos[bad].tolist()}")
    return SampledTrajectory(t, pos, vel, acc, yaw, rate)


# ---------------------------------------------------------------------------------------------
# swarm trajectory broadcasts (docs/swarm.md, "Over ROS 2")
# ---------------------------------------------------------------------------------------------
SWARM_JOINT_PREFIX = "drone"
#: Most control points one broadcast may carry (bounded work per message; 30 s at 0.1 s knots is 303).
MAX_BROADCAST_POINTS = 1000
_KNOT_TOLERANCE_S = 1e-6


def swarm_broadcast_to_msg(drone_id: int, control_points, dt: float, t_start: float, sent_s: Optional[float] = None,
                           frame_id: str = MAP_FRAME) -> MultiDOFJointTrajectory:
    """One drone's cubic B-spline -> MultiDOFJointTrajectory: ``header.stamp`` = when it was sent
    (``sent_s``, ROS clock; default ``t_start``), ``joint_names`` = ``["drone<id>"]``, point k =
    control point k (``transforms[0]`` translation, identity rotation) with ``time_from_start`` =
    ``t_start + k dt - stamp`` (so stamp + time_from_start is the knot time of point k; negative
    for the points of a spline that started before it was sent)."""
    q = np.asarray(control_points, dtype=np.float64)
    if isinstance(drone_id, bool) or int(drone_id) != drone_id or drone_id < 0:
        raise ValueError(f"drone id must be an int >= 0, got {drone_id!r}")
    if q.ndim != 2 or q.shape[1] != 3 or q.shape[0] < 4:
        raise ValueError(f"control points must be (N >= 4, 3), got shape {q.shape}")
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"knot interval must be positive and finite, got {dt!r} s")
    sent_s = float(t_start) if sent_s is None else float(sent_s)
    if not math.isfinite(t_start):
        raise ValueError(f"start time must be finite, got {t_start!r} s")
    msg = MultiDOFJointTrajectory()
    msg.header.stamp = seconds_to_stamp(sent_s)
    msg.header.frame_id = frame_id
    msg.joint_names = [f"{SWARM_JOINT_PREFIX}{int(drone_id)}"]
    offset = float(t_start) - sent_s
    points = []
    for k, (x, y, z) in enumerate(q.tolist()):
        tf = Transform()
        tf.translation.x, tf.translation.y, tf.translation.z = x, y, z
        tf.rotation.w = 1.0
        pt = MultiDOFJointTrajectoryPoint()
        pt.transforms = [tf]
        pt.time_from_start = seconds_to_duration(offset + k * dt)
        points.append(pt)
    msg.points = points
    return msg


def msg_to_swarm_broadcast(msg: MultiDOFJointTrajectory, frame_id: Optional[str] = MAP_FRAME,
                           envelope: FlightEnvelope = DEFAULT_ENVELOPE) -> Tuple[int, np.ndarray, float, float, float]:
    """A broadcast -> ``(drone id, control points (N, 3) m, knot interval s, start time s, sent s)``.
    ValueError (saying what) unless: frame ``frame_id``, one joint name ``drone<id>``, 4 to
    ``MAX_BROADCAST_POINTS`` points each with a finite translation inside ``envelope``, and
    ``time_from_start`` o, o + dt, o + 2 dt, ... (uniform to 1 us, dt > 0, |o| within the envelope's
    durations)."""
    _check_frame("swarm broadcast", msg.header.frame_id, frame_id)
    names = list(msg.joint_names)
    if len(names) != 1 or not names[0].startswith(SWARM_JOINT_PREFIX) or not names[0][len(SWARM_JOINT_PREFIX):].isdigit():
        raise ValueError(f"swarm broadcast joint_names must be ['{SWARM_JOINT_PREFIX}<id>'], got {names}")
    drone_id = int(names[0][len(SWARM_JOINT_PREFIX):])
    n = len(msg.points)
    if not 4 <= n <= MAX_BROADCAST_POINTS:
        raise ValueError(f"swarm broadcast has {n} control points; a cubic B-spline needs 4 to {MAX_BROADCAST_POINTS}")
    q = np.empty((n, 3))
    tfs = np.empty(n)
    for k, pt in enumerate(msg.points):
        if not pt.transforms:
            raise ValueError(f"swarm broadcast point {k} has no transform")
        q[k] = _vec(pt.transforms[0].translation)
        tfs[k] = duration_to_seconds(pt.time_from_start)
    if not np.isfinite(q).all():
        raise ValueError(f"swarm broadcast point {int(np.argmax(~np.isfinite(q).all(axis=1)))} is not finite")
    for k in (0, int(np.argmax(np.abs(q).max(axis=1)))):
        envelope.check_position(f"swarm broadcast point {k}", q[k].tolist())
    dt = float(tfs[1] - tfs[0])
    if not (dt > 0 and math.isfinite(dt)):
        raise ValueError(f"swarm broadcast knot interval {dt!r} s is not positive")
    off = np.abs(tfs - tfs[0] - dt * np.arange(n))
    if off.max() > _KNOT_TOLERANCE_S:
        raise ValueError("swarm broadcast time_from_start must step by one uniform knot interval")
    envelope.check_duration("swarm broadcast start offset", abs(float(tfs[0])))
    sent = stamp_to_seconds(msg.header.stamp)
    return drone_id, q, dt, sent + float(tfs[0]), sent


# ---------------------------------------------------------------------------------------------
# status
# ---------------------------------------------------------------------------------------------
LEVELS = {"ok": DiagnosticStatus.OK, "warn": DiagnosticStatus.WARN, "error": DiagnosticStatus.ERROR,
          "stale": DiagnosticStatus.STALE}


def make_status(name: str, level: str, message: str, values: Iterable[Tuple[str, object]], stamp_s: float,
                hardware_id: str = "") -> DiagnosticArray:
    """One-status DiagnosticArray; ``level`` in ok / warn / error / stale; values as (key, value)."""
    st = DiagnosticStatus()
    st.level = LEVELS[level]
    st.name, st.message, st.hardware_id = name, message, hardware_id
    st.values = [KeyValue(key=str(k), value=str(v)) for k, v in values]
    arr = DiagnosticArray()
    arr.header.stamp = seconds_to_stamp(max(stamp_s, 0.0))
    arr.status = [st]
    return arr


def status_values(msg: DiagnosticArray) -> dict:
    """{key: value} of the first status of a DiagnosticArray (plus ``level`` and ``message``)."""
    if not msg.status:
        return {}
    st = msg.status[0]
    out = {kv.key: kv.value for kv in st.values}
    out["level"] = int.from_bytes(st.level, "little") if isinstance(st.level, bytes) else int(st.level)
    out["message"] = st.message
    out["name"] = st.name
    return out


def stamp_of(msg) -> Optional[float]:
    header = getattr(msg, "header", None)
    return None if header is None else stamp_to_seconds(header.stamp)

