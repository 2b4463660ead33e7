"""Node ``sim_bridge``: the vehicle side of the graph, simulated or in Gazebo.

``mode: embedded`` (default) runs :class:`~planner_pkg.sim.embedded.EmbeddedSim` on a
*wall-clock* timer (it is the clock source, so its own timer cannot run on sim time), advancing
``real_time_factor`` x the elapsed wall time per tick (at most ``max_step_s`` at once, so a stall
slows the simulation rather than making it jump; ``real_time_factor: 0`` = as fast as possible,
``max_step_s`` per tick). It publishes ``odom`` (100 Hz sim time), ``depth/image`` (32FC1, frame
``camera_optical``) and ``cloud`` (map frame) at the camera rate, then ``/clock`` (so a node woken
by the clock already has the data of that instant), ``map/markers`` (the world's obstacles,
transient local) and ``status``, and tracks ``setpoint``.

Lockstep (``lockstep: true``, like Gazebo's / PX4 SITL's; the rules are in
``planner_pkg/sim/lockstep.py``): after every advance the simulator publishes a step manifest on
``sim/lockstep`` (the sim time and the stamps of the newest odometry and frame), then ``/clock``.
Every participant (``lockstep_participants``: the planner and the trajectory server, or the
policy) reports on ``planning/lockstep`` after each tick the sim time of its next tick and the
stamp of the setpoint it published; the simulator never advances past any participant's next tick
nor before it holds the setpoint it was told of, and a participant's tick runs only once it holds
the inputs the manifest names. Sim time stands still while a node computes, so the flight is the
same at any real-time factor and under any CPU load. Sim time starts once every listed
participant has reported (and, with ``lockstep_start_on_goal``, one has accepted a goal). A
participant that does not answer for ``lockstep_fault_timeout_s`` wall seconds is a *lockstep
fault*: logged, status ERROR with ``lockstep_fault``, and the simulation stops (it never runs on
without its planner: that would be another flight). While it waits the simulator re-sends
``/clock`` so that a restarted node's timers fire.
A setpoint that cannot be read (partly NaN, inf, no points) is refused with a log
line and the vehicle holds where it is; none for ``setpoint_timeout_s`` also makes it hold.
A collision freezes the vehicle and turns the status to ERROR.

Body-rate commands (embedded quadrotor only; the racer's): ``body_rate_setpoint``,
``geometry_msgs/TwistStamped`` in ``base_link``: ``twist.angular`` = body FLU rates, rad/s;
``twist.linear.z`` = mass-normalised collective thrust along body +z, m/s^2 (level hover = g);
``linear.x``/``.y`` = 0. They go to the simulator's rate loop (``sim/rate_control.py``) instead of
the tracking controller until a setpoint replaces them. The same safety as setpoints: one that
cannot be read (NaN/inf, another frame, negative thrust, rates beyond 35 rad/s, a point-mass
vehicle, gazebo mode) is refused with a log line and the vehicle holds where it is; none for
``rate_command_timeout_s`` (sim time) brakes it to a position hold, logged. In lockstep a body-rate
command counts as a setpoint of its sender.

``mode: gazebo`` does no physics. ``ros_gz_bridge`` (``config/gz_bridge.yaml``) brings the
Gazebo model's odometry to ``gz/odom``, its depth camera to ``depth/image`` and takes velocity
commands from ``gz/cmd_vel``. This node republishes ``gz/odom`` as ``odom`` (frames ``map`` /
``base_link``), deprojects ``depth/image`` into ``cloud`` with the camera parameters and the
odometry pose, and turns each ``setpoint`` into a velocity command for the multicopter velocity
controller (position error x ``gz_position_gain_per_s`` + velocity feed-forward, capped at
``gz_max_speed_mps``; heading error x ``gz_yaw_gain_per_s``), in the body-yaw frame the
Gazebo ``MulticopterVelocityControl`` plugin expects.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Tuple

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import Image
from trajectory_msgs.msg import MultiDOFJointTrajectory
from visualization_msgs.msg import MarkerArray

from planner_pkg.config_schema import Config
from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes import markers as mk
from planner_pkg.nodes import lockstep as ls
from planner_pkg.nodes import sim_vehicle as sv
from planner_pkg.nodes.params import ConfigParameters, ParameterConfigError
from planner_pkg.sim.embedded import EmbeddedSim
from planner_pkg.sim.camera import DepthCamera, depth_to_world_points
from planner_pkg.sim.lockstep import LockstepBarrier, seconds_to_ns
from planner_pkg.sim.params import CameraParams
from planner_pkg.sim.rate_control import RATE_COMMAND_TIMEOUT_S
from planner_pkg.types import Setpoint, VehicleState

NODE_NAME = "sim_bridge"
DEFAULT_WORLD = "forest_small.yaml"


def find_world(name: str) -> Path:
    """A world file by path, or by name among the shipped worlds (``config/worlds``)."""
    p = Path(name).expanduser()
    if p.is_file():
        return p
    candidates = [Path(__file__).resolve().parents[2] / "config" / "worlds" / name]
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        try:
            candidates.append(Path(get_package_share_directory("planner_pkg")) / "config" / "worlds" / name)
        except (PackageNotFoundError, EnvironmentError, LookupError, ValueError):
            pass  # not installed as a ROS package, or no ament index (AMENT_PREFIX_PATH unset)
    except ImportError:  # pragma: no cover - ament_index comes with rclpy
        pass
    for cand in candidates:
        if cand.is_file():
            return cand
    raise FileNotFoundError(f"world file {name!r} not found (looked in the working directory and "
                            f"{[str(x.parent) for x in candidates]})")


def load_world_param(name: str):
    """(world, path) of the ``world_file`` parameter's world (see :func:`find_world`); a
    ParameterConfigError naming the parameter where it is not found or cannot be read."""
    from planner_pkg.world import WorldFormatError, load_world

    try:
        path = find_world(name)
        return load_world(path), path
    except (FileNotFoundError, WorldFormatError, OSError) as exc:
        raise ParameterConfigError(f"parameter 'world_file' refused: {exc}") from None


def simulator_options(cfg: "SimBridgeConfig") -> dict:
    """The keyword arguments of each simulated vehicle (EmbeddedSim, the swarm's SwarmStepper)
    that the parameters set."""
    return dict(vehicle=cfg.vehicle, dynamics_rate_hz=cfg.dynamics_rate_hz, control_rate_hz=cfg.control_rate_hz,
                camera_rate_hz=cfg.camera_rate_hz, odom_rate_hz=cfg.odom_rate_hz, camera=cfg.camera,
                with_points=cfg.publish_cloud, setpoint_timeout_s=cfg.setpoint_timeout_s, seed=cfg.seed,
                setpoint_extrapolation_s=cfg.setpoint_extrapolation_s)


@dataclass(frozen=True)
class SimBridgeConfig(Config, prefix=""):
    """Parameters of the ``sim_bridge`` node."""

    mode: str = field(default="embedded", metadata={"choices": ("embedded", "gazebo"), "read_only": True,
                                                    "description": "embedded simulator or Gazebo adapter"})
    world_file: str = field(default=DEFAULT_WORLD, metadata={"read_only": True, "description":
                            "world file (path, or name of a shipped world in config/worlds)"})
    start_m: Tuple[float, float, float] = field(default=(-12.0, 0.0, 1.0), metadata={
        "read_only": True, "description": "start position, m (map frame, ENU)"})
    start_yaw_rad: float = field(default=0.0, metadata={"range": (-math.pi, math.pi), "read_only": True,
                                                        "description": "start heading, rad"})
    vehicle: str = field(default="quadrotor", metadata={"choices": ("quadrotor", "point_mass"), "read_only": True,
                                                        "description": "vehicle model"})
    real_time_factor: float = field(default=1.0, metadata={"range": (0.0, 100.0), "description":
                                    "sim seconds per wall second (0 = as fast as possible: max_step_s per tick)"})
    lockstep: bool = field(default=True, metadata={"description":
                           "never run sim time past a participant's next tick nor before its setpoint arrived "
                           "(sim/lockstep, planning/lockstep): the flight does not depend on real_time_factor "
                           "or machine load; false = free running"})
    lockstep_participants: Tuple[str, ...] = field(default=("planner", "traj_server"), metadata={
        "read_only": True, "description": "node names that must report before sim time starts (the graph's "
                                          "planner and trajectory server, or its policy)"})
    lockstep_start_on_goal: bool = field(default=False, metadata={"read_only": True, "description":
                                         "hold sim time at 0 until a participant has accepted a goal "
                                         "(a mission: the flight then starts at the same sim time every run)"})
    lockstep_fault_timeout_s: float = field(default=30.0, metadata={"range": (0.1, 3600.0), "description":
                                            "wall seconds the simulator waits for one participant before that is "
                                            "a lockstep fault that stops the simulation"})
    step_period_s: float = field(default=0.01, metadata={"range": (0.001, 0.1), "read_only": True,
                                                         "description": "wall period of the stepping timer, s"})
    max_step_s: float = field(default=0.05, metadata={"range": (0.001, 1.0),
                                                      "description": "most sim time advanced in one tick, s"})
    dynamics_rate_hz: float = field(default=500.0, metadata={"range": (50.0, 5000.0), "read_only": True,
                                                             "description": "physics rate, Hz (sim time)"})
    control_rate_hz: float = field(default=250.0, metadata={"range": (10.0, 5000.0), "read_only": True,
                                                            "description": "tracking controller rate, Hz"})
    camera_rate_hz: float = field(default=30.0, metadata={"range": (0.0, 500.0), "read_only": True,
                                                          "description": "depth camera rate, Hz (0 = off)"})
    odom_rate_hz: float = field(default=100.0, metadata={"range": (1.0, 1000.0), "read_only": True,
                                                         "description": "odometry rate, Hz"})
    publish_depth: bool = field(default=True, metadata={"description": "publish depth/image"})
    publish_cloud: bool = field(default=True, metadata={"description": "publish cloud"})
    setpoint_timeout_s: float = field(default=0.5, metadata={"range": (0.01, 60.0), "description":
                                      "hold position when no setpoint came for this long (sim time), s"})
    rate_command_timeout_s: float = field(default=RATE_COMMAND_TIMEOUT_S, metadata={"range": (0.01, 10.0), "description":
                                          "brake to a position hold when no body-rate command came for this long "
                                          "(sim time) while flying body rates, s"})
    setpoint_extrapolation_s: float = field(default=0.05, metadata={"range": (0.0, 1.0), "read_only": True,
                                            "description": "follow a position+velocity setpoint forward by its "
                                            "feed-forward for at most this long after its stamp, s (0 = hold it)"})
    seed: int = field(default=0, metadata={"range": (0, 2**31 - 1), "read_only": True,
                                           "description": "sensor noise seed"})
    status_rate_hz: float = field(default=1.0, metadata={"range": (0.1, 50.0), "description": "status rate, Hz (wall clock)"})
    map_frame: str = field(default=conv.MAP_FRAME, metadata={"read_only": True, "description": "world frame"})
    base_frame: str = field(default=conv.BODY_FRAME, metadata={"read_only": True, "description": "body frame"})
    camera_frame: str = field(default="camera_optical", metadata={"read_only": True,
                                                                  "description": "depth image frame"})
    gz_position_gain_per_s: float = field(default=1.5, metadata={"range": (0.0, 20.0), "description":
                                          "gazebo mode: velocity command per metre of position error, 1/s"})
    gz_yaw_gain_per_s: float = field(default=2.0, metadata={"range": (0.0, 20.0),
                                     "description": "gazebo mode: yaw rate per radian of heading error, 1/s"})
    gz_max_speed_mps: float = field(default=3.0, metadata={"range": (0.1, 30.0),
                                                           "description": "gazebo mode: velocity command cap, m/s"})
    camera: CameraParams = field(default_factory=CameraParams)

    def _check(self):
        if self.control_rate_hz > self.dynamics_rate_hz or self.camera_rate_hz > self.dynamics_rate_hz:
            raise self._error("dynamics_rate_hz", "must be at least control_rate_hz and camera_rate_hz")
        names = list(self.lockstep_participants)
        if any(not n or "/" in n for n in names) or len(set(names)) != len(names):
            raise self._error("lockstep_participants", f"must be distinct node names without '/', got {names}")


class SimBridge(Node):
    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.params = ConfigParameters(self, SimBridgeConfig)
        cfg = self.params.config
        self.log = self.get_logger()
        self.throttle = c.Throttle(2.0)
        self.counters = {"bad_setpoints": 0, "setpoints": 0, "frames": 0, "bad_lockstep_reports": 0, "lockstep_faults": 0,
                         "body_rate_commands": 0, "bad_body_rate_commands": 0}
        self.events: list = []
        # odom, cloud; in embedded mode depth/image and sim/lockstep too, and the newest stamps
        self.vehicle = sv.VehicleTopics(self, self.params, embedded=cfg.mode == "embedded")
        self.pub_odom, self.pub_cloud = self.vehicle.pub_odom, self.vehicle.pub_cloud
        self.pub_status = self.create_publisher(DiagnosticArray, c.TOPIC_STATUS, c.STATUS_QOS)
        self.create_subscription(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, self._on_setpoint, c.SETPOINT_QOS)
        self.create_subscription(TwistStamped, c.TOPIC_BODY_RATE_SETPOINT, self._on_body_rates, c.SETPOINT_QOS)
        self.sim: Optional[EmbeddedSim] = None
        self.lockstep: Optional[LockstepBarrier] = None  # embedded mode with lockstep only
        self.gz_state: Optional[VehicleState] = None
        self.camera = DepthCamera(cfg.camera)
        if cfg.mode == "embedded":
            self._init_embedded(cfg)
        else:
            self._init_gazebo(cfg)
        # on the wall clock: the status (a lockstep fault above all) must go out while sim time stands still
        self.create_timer(1.0 / cfg.status_rate_hz, self._publish_status, clock=Clock(clock_type=ClockType.STEADY_TIME))

    # -- embedded --------------------------------------------------------------------------------
    def _init_embedded(self, cfg: SimBridgeConfig) -> None:
        self.world, path = load_world_param(cfg.world_file)
        start = np.asarray(cfg.start_m, dtype=np.float64)
        lo, hi = np.asarray(self.world.bounds_min), np.asarray(self.world.bounds_max)
        if (start < lo).any() or (start > hi).any():
            raise ParameterConfigError(f"parameter 'start_m' refused: {start.tolist()} is outside the world bounds "
                                       f"{lo.tolist()} .. {hi.tolist()}")
        try:
            self.sim = EmbeddedSim(self.world, start, cfg.start_yaw_rad, **simulator_options(cfg),
                                   rate_command_timeout_s=cfg.rate_command_timeout_s)
        except ValueError as exc:
            raise ParameterConfigError(f"simulator refused its parameters: {exc}") from None
        if float(self.world.signed_distance(start)) < self.sim.radius_m:
            raise ParameterConfigError(f"parameter 'start_m' refused: {start.tolist()} is inside or within "
                                       f"{self.sim.radius_m} m of an obstacle")
        self.world_path = str(path)
        self.pub_clock = self.create_publisher(ClockMsg, c.TOPIC_CLOCK, c.CLOCK_QOS)
        self.pub_map = self.create_publisher(MarkerArray, c.TOPIC_MAP_MARKERS, c.LATCHED_QOS)
        self.pub_map.publish(mk.world_to_markers(self.world, 0.0, cfg.map_frame))
        self.tf = c.tf_broadcaster(self)
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        self.pacer = sv.StepPacer()
        self.lockstep = LockstepBarrier(cfg.lockstep_participants, cfg.lockstep_start_on_goal,
                                        cfg.lockstep_fault_timeout_s) if cfg.lockstep else None
        self.create_subscription(DiagnosticStatus, ls.TOPIC_REPORT, self._on_report, ls.LOCKSTEP_SUB_QOS)
        self._publish_manifest()
        self._publish_clock(0.0)
        self._step_timer = self.create_timer(cfg.step_period_s, self._step, clock=self._wall)
        pace = "as fast as possible" if cfg.real_time_factor == 0 else f"x{cfg.real_time_factor:g} real time"
        self.log.info(f"embedded simulator: world {self.world_path} ({len(self.world.obstacles)} obstacles), "
                      f"start {start.tolist()}, {cfg.vehicle}, {pace}"
                      + (f", lockstep with {', '.join(cfg.lockstep_participants)}"
                         + (" from the first goal" if cfg.lockstep_start_on_goal else "") if cfg.lockstep else ""))

    def _publish_clock(self, t: float) -> None:
        self.pub_clock.publish(ClockMsg(clock=conv.seconds_to_stamp(t)))

    def _publish_manifest(self) -> None:
        if self.lockstep is not None:
            self.vehicle.publish_manifest(self.sim.t)

    def _step(self) -> None:
        cfg = self.params.config
        wall = time.monotonic()
        n = self.pacer.steps(cfg, wall, self.sim.dt, self._lockstep_allowance)
        if n <= 0:
            if self.pacer.resend_due(wall):
                # waiting: re-send the clock, and before the start the odometry of the start (a
                # mission sends its goal once it sees the vehicle; the simulator may be waiting
                # for that goal)
                if not self.lockstep.started:
                    self.vehicle.publish_state(self.sim.state())
                    self._publish_manifest()
                self._publish_clock(self.sim.t)
            return
        if self.lockstep is not None:
            self.lockstep.advanced(wall)
        out = self.sim.advance_steps(n)
        for text in out.events:
            self._event(text)
        for state in out.odometry:
            self.vehicle.publish_state(state)
        if out.odometry and self.tf is not None:
            self.tf(out.odometry[-1], cfg.map_frame, cfg.base_frame)
        self.counters["frames"] += self.vehicle.publish_frames(out.frames)
        # the manifest, then the clock: a node woken by the clock knows which data of now to wait for
        self._publish_manifest()
        self._publish_clock(self.sim.t)

    # -- lockstep --------------------------------------------------------------------------------
    def _lockstep_state(self) -> str:
        return sv.lockstep_state([] if self.lockstep is None else [("", self.lockstep)])

    def _lockstep_allowance(self, wall: float) -> Optional[int]:
        """Dynamics steps lockstep allows now (None = no limit: lockstep off)."""
        b = self.lockstep
        if b is None:
            return None
        now_ns = seconds_to_ns(self.sim.t)
        limit, on = b.limit_ns(now_ns)
        if limit is None:
            return None
        n = self.sim.steps_until(limit * 1e-9) if limit > now_ns else 0
        if n > 0:
            return n
        had_fault = bool(b.fault)
        if b.blocked(wall, on) and not had_fault:
            self._fault_logged(b.fault)
        return 0

    def _fault_logged(self, fault: str) -> None:
        self.counters["lockstep_faults"] += 1
        self.log.error(f"lockstep fault at sim time {self.sim.t:.3f} s: {fault}; the simulation is stopped")
        self._publish_status()

    def _resume(self) -> None:
        if self.pacer.at_limit:
            self._step()  # resume at once rather than at the next timer tick

    def _on_report(self, msg: DiagnosticStatus, info) -> None:
        if self.lockstep is None or self.sim is None:
            return
        if sv.take_report(self.lockstep, msg, info, self.counters, self.throttle, self.log, self._fault_logged):
            self._resume()

    def _setpoint_arrived(self, msg: MultiDOFJointTrajectory) -> None:
        if self.lockstep is None:
            return
        self.lockstep.saw_setpoint()  # read or refused, it was sent: counted
        self._resume()

    def _event(self, text: str) -> None:
        self.events.append(text)
        del self.events[:-20]
        self.log.warning(text)

    # -- setpoints (both modes) ------------------------------------------------------------------
    def _on_setpoint(self, msg: MultiDOFJointTrajectory) -> None:
        try:
            setpoint = sv.read_setpoint(msg, self.params.config.map_frame)
        except ValueError as exc:
            self.counters["bad_setpoints"] += 1
            held = self.sim.hold() if self.sim is not None else None
            if self.sim is not None:
                self._setpoint_arrived(msg)  # refused, but the sender is alive and in step
            if self.throttle("setpoint"):
                where = "" if held is None else f"; holding at {np.round(held.position, 2).tolist()}"
                self.log.warning(f"setpoint refused ({self.counters['bad_setpoints']} so far): {exc}{where}")
            if self.sim is None:  # gazebo: hold where the vehicle is (zero command until odometry comes)
                s = self.gz_state
                self._gz_setpoint = None if s is None else Setpoint.hold(s.position, s.yaw)
                self._gz_command(None)
            return
        self.counters["setpoints"] += 1
        if self.sim is not None:
            self.sim.set_setpoint(setpoint, conv.stamp_to_seconds(msg.header.stamp))
            self._setpoint_arrived(msg)
        else:
            self._gz_setpoint = setpoint
            self._gz_command(setpoint)

    def _on_body_rates(self, msg: TwistStamped) -> None:
        try:
            if self.sim is None:
                raise ValueError("gazebo mode takes no body-rate commands (its velocity controller takes setpoints)")
            command = conv.msg_to_body_rate_command(msg, self.params.config.base_frame)
            self.sim.set_body_rate_command(command)  # ValueError on the point-mass vehicle
        except ValueError as exc:
            self.counters["bad_body_rate_commands"] += 1
            held = self.sim.hold() if self.sim is not None else None
            if self.throttle("body_rates"):
                where = "" if held is None else f"; holding at {np.round(held.position, 2).tolist()}"
                self.log.warning(f"body-rate command refused ({self.counters['bad_body_rate_commands']} so far): "
                                 f"{exc}{where}")
        else:
            self.counters["body_rate_commands"] += 1
        if self.sim is not None:
            self._setpoint_arrived(msg)  # read or refused, the sender is alive and in step

    # -- gazebo ----------------------------------------------------------------------------------
    def _init_gazebo(self, cfg: SimBridgeConfig) -> None:
        self._gz_setpoint: Optional[Setpoint] = None
        self.pub_cmd = self.create_publisher(Twist, "gz/cmd_vel", c.SETPOINT_QOS)
        from std_msgs.msg import Bool

        self.pub_enable = self.create_publisher(Bool, "gz/enable", c.LATCHED_QOS)
        self.pub_enable.publish(Bool(data=True))  # the velocity controller ignores commands until enabled
        self.create_subscription(Odometry, "gz/odom", self._on_gz_odom, c.ODOM_QOS)
        self.create_subscription(Image, c.TOPIC_DEPTH, self._on_gz_depth, c.SENSOR_QOS)
        self.tf = c.tf_broadcaster(self)
        self.log.info("gazebo mode: gz/odom -> odom, depth/image -> cloud, setpoint -> gz/cmd_vel")

    def _on_gz_odom(self, msg: Odometry) -> None:
        cfg = self.params.config
        try:
            state = conv.odometry_to_state(msg, None, None)  # Gazebo's own frames: republished in map
        except ValueError as exc:
            if self.throttle("gz_odom"):
                self.log.warning(f"gazebo odometry dropped: {exc}")
            return
        self.gz_state = state
        self.pub_odom.publish(conv.state_to_odometry(state, cfg.map_frame, cfg.base_frame))
        if self.tf is not None:
            self.tf(state, cfg.map_frame, cfg.base_frame)
        if self._gz_setpoint is not None:
            self._gz_command(self._gz_setpoint)

    def _on_gz_depth(self, msg: Image) -> None:
        cfg = self.params.config
        if self.gz_state is None:
            return
        try:
            depth = conv.image_to_depth(msg)
            cam = self.camera
            if depth.shape != (cam.intrinsics.height, cam.intrinsics.width):
                raise ValueError(f"depth image is {depth.shape[1]}x{depth.shape[0]}; camera.* parameters say "
                                 f"{cam.intrinsics.width}x{cam.intrinsics.height}")
        except ValueError as exc:
            if self.throttle("gz_depth"):
                self.log.warning(f"gazebo depth image dropped: {exc}")
            return
        position, R = self.camera.pose(self.gz_state)
        pts = depth_to_world_points(depth, self.camera.intrinsics, position, R)
        self.pub_cloud.publish(conv.points_to_cloud(pts, conv.stamp_to_seconds(msg.header.stamp), cfg.map_frame))

    def _gz_command(self, setpoint: Optional[Setpoint]) -> None:
        """Velocity command (body-yaw frame) for Gazebo's multicopter velocity controller."""
        cfg = self.params.config
        s = self.gz_state
        cmd = Twist()
        if s is not None and setpoint is not None:
            v = setpoint.velocity.copy() if setpoint.has_velocity else np.zeros(3)
            if setpoint.has_position:
                v = v + cfg.gz_position_gain_per_s * (setpoint.position - s.position)
            speed = float(np.linalg.norm(v))
            if speed > cfg.gz_max_speed_mps:
                v *= cfg.gz_max_speed_mps / speed
            yaw = s.yaw
            cy, sy = math.cos(yaw), math.sin(yaw)
            cmd.linear.x, cmd.linear.y, cmd.linear.z = cy * v[0] + sy * v[1], -sy * v[0] + cy * v[1], float(v[2])
            rate = setpoint.yaw_rate if setpoint.has_yaw_rate else 0.0
            if setpoint.has_yaw:
                err = math.atan2(math.sin(setpoint.yaw - yaw), math.cos(setpoint.yaw - yaw))
                rate += cfg.gz_yaw_gain_per_s * err
            cmd.angular.z = rate
        self.pub_cmd.publish(cmd)  # all zero = stop and hover (no state or a refused setpoint)

    # -- status ----------------------------------------------------------------------------------
    def _publish_status(self) -> None:
        cfg = self.params.config
        values = list(self.counters.items())
        if self.sim is not None:
            s = self.sim.state()
            level = "error" if self.sim.crashed else ("warn" if self.sim.out_of_bounds or self.sim.holding else "ok")
            message = self.sim.crash_reason or ("holding position" if self.sim.holding else
                                                ("flying body rates" if self.sim.rate_command is not None
                                                 else "tracking setpoints"))
            values += [("sim_time_s", f"{self.sim.t:.3f}"), ("crashed", self.sim.crashed),
                       ("collision", self.sim.monitor.collided),
                       ("min_clearance_m", f"{self.sim.monitor.min_clearance_m:.3f}"),
                       ("position", ",".join(f"{v:.3f}" for v in s.position)), ("world", self.world_path),
                       ("out_of_bounds", self.sim.out_of_bounds), ("lockstep", self._lockstep_state())]
            b = self.lockstep
            if b is not None:
                values += [("lockstep_waits", b.waits), ("lockstep_wait_wall_s", f"{b.wait_wall_s:.3f}"),
                           ("lockstep_participants", ",".join(sorted(b.reports)) or "none")]
                if b.fault:
                    level, message = "error", f"lockstep fault: {b.fault}"
                    values.append(("lockstep_fault", b.fault))
            stamp = self.sim.t
        else:
            level = "ok" if self.gz_state is not None else "warn"
            message = "gazebo: receiving odometry" if self.gz_state is not None else "gazebo: no odometry yet"
            stamp = c.now_s(self)
        values.append(("mode", cfg.mode))
        if self.events:
            values.append(("last_event", self.events[-1]))
        self.pub_status.publish(conv.make_status(self.get_name(), level, message, values, stamp))


def main(args=None) -> int:
    return c.run_node(SimBridge, args)


if __name__ == "__main__":
    sys.exit(main())
