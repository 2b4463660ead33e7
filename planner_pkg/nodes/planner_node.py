"""Node ``planner``: any planner of the registry (``app.planners``) (``ego`` by default) between DDS topics.

Subscribes ``odom``, ``cloud`` (or ``depth/image`` with ``sensor_input: depth``) and
``goal_pose``; publishes ``planning/trajectory`` (samples of the planner's trajectory, see
``sampled_trajectory``), ``planning/markers`` and ``status``. The planner is called like the
closed-loop runner calls it: ``observe(frame)`` for every sensor frame, ``update(state, frame)``
at its ``rate_hz`` on the ROS clock (sim time under ``use_sim_time``).

A trajectory's ``header.stamp`` is the stamp of the newest sensor message the planner had used
when it produced it (or the odometry stamp without one); ``time_from_start`` is relative to it.
The latest trajectory is re-sent every ``republish_period_s`` so the trajectory server can tell
a live planner from a dead one.

Simulation lockstep: under ``use_sim_time`` (and ``lockstep_report``) the node is a lockstep
participant (``planner_pkg/nodes/lockstep.py``): a tick due at sim time ``T`` runs once the
odometry and frame the simulator's manifest names for ``T`` have arrived, frames are fused at
the tick in stamp order (their pose from the odometry history), and every finished tick reports
the next one and the trajectories sent; a ``sim_bridge`` with ``lockstep: true`` does not run
sim time past it, so sim time stands still while the planner computes. The EGO planner's wall-clock safety nets (optimiser, A* and retry
time limits) are then widened by ``sim_time_limit_scale`` so that its deterministic iteration and
node budgets decide each plan, whatever the real-time factor or the machine's load; any safety
net that still fires is logged and counted (status ``safety_net_hits``). On wall time (hardware)
nothing of this applies: no report, the EGO limits as configured.

Bad input is logged (throttled) and survives: non-finite odometry and unreadable clouds/images
are dropped; a goal with NaN/inf, in another frame, outside the geofence or within
``goal_clearance_m`` of a point of the latest cloud is refused (status says why); when odometry
stops for ``odom_timeout_s`` the planner stops planning and publishes a hold at the last known
position until odometry returns; a planner error (ValueError/ArithmeticError) publishes a hold.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Image, PointCloud2
from trajectory_msgs.msg import MultiDOFJointTrajectory
from diagnostic_msgs.msg import DiagnosticArray
from visualization_msgs.msg import Marker, MarkerArray

from planner_pkg.config_schema import Config
from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes import markers as mk
from planner_pkg.nodes.lockstep import LOCKSTEP_SENSOR_QOS, LockstepParticipant
from planner_pkg.nodes.params import ConfigParameters
from planner_pkg.nodes.swarm_link import SWARM_TOPIC, RosBroadcast, peer_report_topic
from planner_pkg.planning.sampled_trajectory import (SampledTrajectory, hold_trajectory, sample_trajectory,
                                                  setpoint_trajectory, trajectory_span)
from planner_pkg.sim.camera import DepthCamera
from planner_pkg.sim.params import CameraParams
from planner_pkg.app.planners import PLANNER_NAMES, PlannerNotAvailableError, PlannerOptions, make_planner
from planner_pkg.sim.mission_judge import GOAL_TOLERANCE_M
from planner_pkg.types import SensorFrame, Setpoint, VehicleState

NODE_NAME = "planner"
MAX_PENDING_FRAMES = 30  # frames kept for the next tick; older ones are dropped


@dataclass(frozen=True)
class PlannerNodeConfig(Config, prefix=""):
    """Parameters of the ``planner`` node (the planner's own are under ``ego.*``)."""

    planner: str = field(default="ego", metadata={"choices": PLANNER_NAMES,
                                                  "description": "planner to run (a name of the app.planners registry)"})
    max_vel_mps: Optional[float] = field(default=None, metadata={"range": (0.0, math.inf), "low_open": True,
        "description": "speed limit override, m/s (NaN = none): the policy's commanded speed, the direct "
                       "planner's limit; for EGO it replaces ego.max_vel_mps and ego.max_acc_mps2 with the "
                       "acceleration limit for that speed (ego_config.speed_scaled_max_acc), as fly --max-vel does"})
    model_path: str = field(default="", metadata={"description": "trained model file (policy planner)"})
    seed: int = field(default=0, metadata={"range": (0, 2**31 - 1), "description": "planner seed"})
    rate_hz: Optional[float] = field(default=None, metadata={"range": (0.0, 200.0), "low_open": True,
        "description": "planning rate, Hz, on the ROS clock (NaN = the planner's own rate_hz)"})
    sensor_input: str = field(default="cloud", metadata={"choices": ("cloud", "depth"),
                                                          "description": "map from 'cloud' or 'depth/image'"})
    odom_timeout_s: float = field(default=0.5, metadata={"range": (0.01, 10.0),
                                                          "description": "odometry older than this is lost, s"})
    trajectory_dt_s: float = field(default=0.05, metadata={"range": (0.005, 1.0),
                                                            "description": "sample spacing on planning/trajectory, s"})
    trajectory_horizon_s: float = field(default=20.0, metadata={"range": (0.1, 120.0),
                                                                 "description": "longest span sent, s"})
    republish_period_s: float = field(default=1.0, metadata={"range": (0.05, 10.0),
                                                              "description": "re-send the latest trajectory, s"})
    goal_tolerance_m: float = field(default=GOAL_TOLERANCE_M, metadata={"range": (0.01, 10.0),
                                                            "description": "reported as reached within, m"})
    goal_clearance_m: float = field(default=0.3, metadata={"range": (0.0, 5.0), "description":
                                    "refuse a goal this close to a point of the latest cloud, m (0 = off)"})
    geofence_min_m: Tuple[float, float, float] = field(default=(-1000.0, -1000.0, 0.0), metadata={
        "description": "lower corner of the allowed goal volume, m (map frame)"})
    geofence_max_m: Tuple[float, float, float] = field(default=(1000.0, 1000.0, 100.0), metadata={
        "description": "upper corner of the allowed goal volume, m (map frame)"})
    markers_rate_hz: float = field(default=2.0, metadata={"range": (0.0, 50.0),
                                                          "description": "planning/markers rate, Hz (0 = off)"})
    marker_voxel_radius_m: float = field(default=5.0, metadata={"range": (0.0, 50.0),
                                                                 "description": "occupied voxels shown within, m"})
    status_rate_hz: float = field(default=1.0, metadata={"range": (0.1, 50.0), "description": "status rate, Hz"})
    frame_id: str = field(default=conv.MAP_FRAME, metadata={"description": "world frame of all messages"})
    lockstep_report: bool = field(default=True, metadata={"read_only": True, "description":
                                  "under use_sim_time: be a lockstep participant (each tick waits for the inputs "
                                  "of its instant and reports the next one, so a lockstep simulator waits for it)"})
    # 100: optimiser 10 s, A* 5 s, retries 5 s, still inside the simulator's 30 s lockstep fault
    # timeout. x10 was not enough: at a load of 18 on 2 cores plans took over 1 s and the nets fired,
    # and a lockstep flight under a CPU hog drifted 5 cm from the same flight on a quiet machine.
    sim_time_limit_scale: float = field(default=100.0, metadata={"range": (1.0, 1000.0), "description":
                                        "under use_sim_time with lockstep_report: the EGO planner's wall-clock "
                                        "safety nets (optimiser, A*, retry time limits) are multiplied by this, "
                                        "because sim time stands still while it plans (1 = as configured)"})
    swarm_drone_id: int = field(default=-1, metadata={"range": (-1, 10_000), "read_only": True, "description":
                                "EGO-Swarm: this drone's id on the shared broadcast topic (-1 = fly alone; "
                                "docs/swarm.md)"})
    swarm_topic: str = field(default=SWARM_TOPIC, metadata={"read_only": True, "description":
                             "EGO-Swarm: the shared trajectory broadcast topic (absolute: every drone's namespace "
                             "meets on it)"})
    swarm_peers: Tuple[int, ...] = field(default=(), metadata={"read_only": True, "description":
                                         "EGO-Swarm in lockstep: the other drones' ids; a tick waits for their "
                                         "ticks before it and for every broadcast they reported sent (their planners' "
                                         "reports on /drone<j>/planning/lockstep), so the flight does not depend on "
                                         "DDS delivery times (empty = plan with what has arrived)"})
    camera: CameraParams = field(default_factory=CameraParams)

    def _check(self):
        if self.swarm_drone_id >= 0 and not self.swarm_topic.startswith("/"):
            raise self._error("swarm_topic", f"must be absolute (start with '/'), got {self.swarm_topic!r}")
        if self.swarm_peers:
            if self.swarm_drone_id < 0:
                raise self._error("swarm_peers", "given without swarm_drone_id (this drone is not in a swarm)")
            bad = [p for p in self.swarm_peers if not 0 <= p <= 10_000 or p == self.swarm_drone_id]
            if bad or len(set(self.swarm_peers)) != len(self.swarm_peers):
                raise self._error("swarm_peers", f"must be distinct drone ids 0..10000 other than this drone's "
                                  f"{self.swarm_drone_id}, got {list(self.swarm_peers)}")
        if not all(lo < hi for lo, hi in zip(self.geofence_min_m, self.geofence_max_m)):
            raise self._error("geofence_min_m", f"{list(self.geofence_min_m)} must be below geofence_max_m "
                              f"{list(self.geofence_max_m)} on every axis")


def _ego_config():
    """(EgoConfig class, EgoPlanner class) when the EGO planner is installed, else (None, None)."""
    try:
        from planner_pkg.planning.ego_planner import EgoConfig, EgoPlanner
    except ImportError:
        return None, None
    return EgoConfig, EgoPlanner


class PlannerNode(c.LockstepNode):
    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.params = ConfigParameters(self, PlannerNodeConfig, on_change=self._config_changed)
        ego_cls, self._ego_planner_cls = _ego_config()
        self.ego_params = ConfigParameters(self, ego_cls, prefix="ego.", on_change=self._config_changed) \
            if ego_cls is not None else None
        cfg = self.params.config
        self.log = self.get_logger()
        self.throttle = c.Throttle(2.0)
        self.planner = None
        self.planner_error = ""
        self.swarm: Optional[RosBroadcast] = None  # EGO-Swarm: the broadcast topic (swarm_drone_id >= 0)
        # before the planner: its time limits depend on it
        swarm = cfg.swarm_drone_id >= 0 and cfg.planner == "ego"
        self.lockstep = LockstepParticipant(self, cfg.lockstep_report, frames=True, trajectories=True, goals=True,
                                            broadcasts=swarm,
                                            peers={j: peer_report_topic(j) for j in cfg.swarm_peers} if swarm else None)
        self._build_planner()
        self.state: Optional[VehicleState] = None
        self.odom_wall = -math.inf  # ROS time (s) when the last good odometry arrived
        self.odom_lost = False
        self.odom_history: list = []  # (t, VehicleState) for sensor poses
        self.goal: Optional[np.ndarray] = None
        self.goal_pending = False
        self.goal_status = "no goal"
        self.reached = False
        self.frame: Optional[SensorFrame] = None  # newest frame not yet passed to update()
        self.pending_frames: list = []  # (stamp, points or None, depth or None) received, fused at the next tick
        self.frame_stamp: Optional[float] = None  # stamp of the newest frame used
        self.latest_points: Optional[np.ndarray] = None
        self.last_traj: Optional[SampledTrajectory] = None
        self.last_msg: Optional[MultiDOFJointTrajectory] = None
        self.last_publish = -math.inf
        self.last_control_points: Optional[np.ndarray] = None
        self.plans_published = 0
        self.counters = {"bad_odom": 0, "bad_cloud": 0, "bad_image": 0, "bad_goal": 0, "planner_errors": 0}
        self.depth_camera = DepthCamera(cfg.camera)
        self.tick_clock_ms: list = []  # ROS-clock time that passed during each recent tick, ms (0 in lockstep)
        self._safety_nets_logged = 0

        self.pub_traj = self.create_publisher(MultiDOFJointTrajectory, c.TOPIC_TRAJECTORY, c.TRAJECTORY_QOS)
        self.pub_markers = self.create_publisher(MarkerArray, c.TOPIC_PLANNING_MARKERS, c.MARKERS_QOS)
        self.pub_status = self.create_publisher(DiagnosticArray, c.TOPIC_STATUS, c.STATUS_QOS)
        self.create_subscription(Odometry, c.TOPIC_ODOM, self._on_odom, c.ODOM_QOS)
        self.create_subscription(PoseStamped, c.TOPIC_GOAL, self._on_goal, c.GOAL_QOS)
        # in lockstep every frame counts (reliable, deep); otherwise the sensor's best-effort stream
        sensor_qos = LOCKSTEP_SENSOR_QOS if self.lockstep.active else c.SENSOR_QOS
        if cfg.sensor_input == "cloud":
            self.create_subscription(PointCloud2, c.TOPIC_CLOUD, self._on_cloud, sensor_qos)
        else:
            self.create_subscription(Image, c.TOPIC_DEPTH, self._on_image, sensor_qos)
        self._plan_timer = None
        self._start_plan_timer()
        self.create_timer(1.0 / cfg.status_rate_hz, self._publish_status)
        if cfg.markers_rate_hz > 0:
            self.create_timer(1.0 / cfg.markers_rate_hz, self._publish_markers)
        self.log.info(f"planner '{cfg.planner}' ready at {self._rate_hz():g} Hz; input '{cfg.sensor_input}'"
                      + (f"; lockstep participant, EGO time limits x{self.time_limit_scale:g}"
                         if self._lockstep_reporting() else ""))

    # -- configuration ---------------------------------------------------------------------------
    def _rate_hz(self) -> float:
        cfg = self.params.config
        if cfg.rate_hz is not None:
            return cfg.rate_hz
        return float(getattr(self.planner, "rate_hz", 10.0) or 10.0)

    def _lockstep_reporting(self) -> bool:
        """Under sim time with ``lockstep_report`` (at start-up): a lockstep participant."""
        return self.lockstep.active

    def _start_plan_timer(self) -> None:
        self.lockstep.destroy_timer(self._plan_timer)
        self._plan_timer = self.lockstep.create_timer(1.0 / self._rate_hz(), self._tick)

    def _build_planner(self) -> None:
        cfg = self.params.config
        self.time_limit_scale = cfg.sim_time_limit_scale if self._lockstep_reporting() else 1.0
        try:
            if cfg.planner == "ego" and self._ego_planner_cls is not None and self.ego_params is not None:
                ego = self.ego_params.config
                if cfg.max_vel_mps is not None:
                    # like fly --max-vel: the speed limit brings the acceleration limit for it
                    ego = ego.at_speed(cfg.max_vel_mps)
                if self.time_limit_scale != 1.0:
                    ego = ego.with_time_limits_scaled(self.time_limit_scale)
                self.planner = self._ego_planner_cls(ego)
                if cfg.swarm_drone_id >= 0:
                    self.planner = self._swarm_agent(self.planner, cfg, ego.swarm.timeout_s)
            else:
                if cfg.swarm_drone_id >= 0:
                    self.log.error(f"swarm_drone_id {cfg.swarm_drone_id} given but planner '{cfg.planner}' is not "
                                   f"the EGO planner: this drone flies alone (no broadcasts, others unknown)")
                self.planner = make_planner(cfg.planner, PlannerOptions(
                    max_vel_mps=cfg.max_vel_mps, model_path=cfg.model_path or None, seed=cfg.seed))
            self.planner_error = ""
        except (PlannerNotAvailableError, ValueError, OSError) as exc:
            self.planner = None
            self.planner_error = f"cannot build planner '{cfg.planner}': {exc}"
            self.log.error(self.planner_error)

    def _swarm_agent(self, planner, cfg: PlannerNodeConfig, timeout_s: float):
        """The EGO planner as one drone of a swarm: it knows the others from the broadcast topic and
        broadcasts its own trajectory after every tick (planning.swarm.SwarmAgent)."""
        from planner_pkg.planning.swarm import SwarmAgent

        if self.swarm is None:
            self.swarm = RosBroadcast(self, cfg.swarm_drone_id, cfg.swarm_topic, timeout_s, cfg.frame_id,
                                      on_sent=self.lockstep.published_broadcast,
                                      on_arrival=self.lockstep.saw_broadcast)
            self.log.info(f"swarm drone {cfg.swarm_drone_id}: trajectories on {self.swarm.topic}")
        return SwarmAgent(planner, cfg.swarm_drone_id, self.swarm)

    def _config_changed(self, _config) -> None:
        """A runtime parameter change: rebuild the planner and resume the current goal."""
        self._build_planner()
        self._start_plan_timer()
        self.lockstep.report()  # a new period: tell a waiting simulator
        if self.goal is not None:
            self.goal_pending = True

    # -- inputs ----------------------------------------------------------------------------------
    def _take_odom(self, msg: Odometry) -> None:
        try:
            state = conv.odometry_to_state(msg, self.params.config.frame_id, None)
        except ValueError as exc:
            self.counters["bad_odom"] += 1
            if self.throttle("odom"):
                self.log.warning(f"odometry dropped ({self.counters['bad_odom']} so far): {exc}")
            return
        self.state = state
        self.odom_wall = c.now_s(self)
        self.odom_history.append(state)
        if len(self.odom_history) > 200:
            del self.odom_history[:100]
        if self.odom_lost:
            self.odom_lost = False
            self.log.info("odometry is back: planning resumes")
            if self.goal is not None:
                self.goal_pending = True

    def _pose_at(self, t: float) -> Optional[VehicleState]:
        """The odometry state nearest in time to ``t`` (sensor pose), or None."""
        if not self.odom_history:
            return None
        times = np.fromiter((s.t for s in self.odom_history), float, len(self.odom_history))
        return self.odom_history[int(np.argmin(np.abs(times - t)))]

    def _accept_frame(self, frame: SensorFrame, stamp: float) -> None:
        self.frame = frame
        self.frame_stamp = stamp
        observe = getattr(self.planner, "observe", None)
        if observe is not None and self.goal is not None and not self.goal_pending:
            try:
                observe(frame)
            except (ValueError, ArithmeticError) as exc:
                if self.throttle("observe"):
                    self.log.warning(f"planner could not fuse a frame: {exc}")

    def _queue_frame(self, stamp: float, points: Optional[np.ndarray], depth: Optional[np.ndarray]) -> None:
        self.pending_frames.append((stamp, points, depth))
        if len(self.pending_frames) > MAX_PENDING_FRAMES:  # no tick for a while (no planner, no clock)
            del self.pending_frames[0]

    def _fuse_pending_frames(self) -> None:
        """Fuse the frames received since the last tick, oldest first, each with the odometry pose
        nearest its stamp: done here, not on arrival, because odometry and frames come on separate
        topics whose relative order DDS does not keep (at the tick, the odometry up to now is in)."""
        pending, self.pending_frames = sorted(self.pending_frames, key=lambda f: f[0]), []
        cam = self.depth_camera
        for stamp, points, depth in pending:
            pose = self._pose_at(stamp)
            if pose is None:
                continue
            if depth is None:
                cam_pos, _ = cam.pose(pose)
                self._accept_frame(SensorFrame(stamp, None, points, cam_pos, pose.attitude), stamp)
                continue
            from planner_pkg.sim.camera import depth_to_world_points
            from planner_pkg.sim.rotation import matrix_to_quaternion

            position, R = cam.pose(pose)
            points = depth_to_world_points(depth, cam.intrinsics, position, R).astype(np.float32)
            self.latest_points = points
            frame = SensorFrame(stamp, depth, points, position, matrix_to_quaternion(R), cam.intrinsics)
            self._accept_frame(frame, stamp)

    def _on_cloud(self, msg: PointCloud2) -> None:
        try:
            if msg.header.frame_id not in ("", self.params.config.frame_id):
                raise ValueError(f"cloud in frame {msg.header.frame_id!r}, expected {self.params.config.frame_id!r}")
            points = conv.cloud_to_points(msg)
            stamp = conv.stamp_to_seconds(msg.header.stamp)
        except ValueError as exc:
            self.counters["bad_cloud"] += 1
            if self.throttle("cloud"):
                self.log.warning(f"cloud dropped ({self.counters['bad_cloud']} so far): {exc}")
        else:
            self.latest_points = points
            if points.shape[0] == 0 and self.throttle("empty_cloud"):
                self.log.info("empty cloud (nothing in range): the planner keeps its map")
            self._queue_frame(stamp, points, None)
        finally:
            self.lockstep.saw_frame(msg.header.stamp)

    def _on_image(self, msg: Image) -> None:
        cam = self.depth_camera
        try:
            depth = conv.image_to_depth(msg)
            if depth.shape != (cam.intrinsics.height, cam.intrinsics.width):
                raise ValueError(f"depth image is {depth.shape[1]}x{depth.shape[0]}, the camera parameters say "
                                 f"{cam.intrinsics.width}x{cam.intrinsics.height}")
            stamp = conv.stamp_to_seconds(msg.header.stamp)
        except ValueError as exc:
            self.counters["bad_image"] += 1
            if self.throttle("image"):
                self.log.warning(f"depth image dropped ({self.counters['bad_image']} so far): {exc}")
        else:
            self._queue_frame(stamp, None, depth)
        finally:
            self.lockstep.saw_frame(msg.header.stamp)

    def _refuse_goal(self, why: str) -> None:
        self.counters["bad_goal"] += 1
        self.goal_status = f"goal refused: {why}"
        self.log.warning(self.goal_status)

    def _on_goal(self, msg: PoseStamped) -> None:
        cfg = self.params.config
        try:
            goal = conv.pose_to_goal(msg, cfg.frame_id)
        except ValueError as exc:
            self._refuse_goal(str(exc))
            return
        lo, hi = np.asarray(cfg.geofence_min_m), np.asarray(cfg.geofence_max_m)
        if (goal < lo).any() or (goal > hi).any():
            self._refuse_goal(f"{np.round(goal, 2).tolist()} is outside the geofence {lo.tolist()} .. {hi.tolist()}")
            return
        pts = self.latest_points
        if cfg.goal_clearance_m > 0 and pts is not None and pts.shape[0]:
            d = float(np.sqrt(((pts - goal.astype(np.float32)) ** 2).sum(axis=1).min()))
            if d < cfg.goal_clearance_m:
                self._refuse_goal(f"{np.round(goal, 2).tolist()} is {d:.2f} m from an obstacle seen in the latest "
                                  f"cloud (inside or too close; goal_clearance_m = {cfg.goal_clearance_m})")
                return
        self.goal = goal
        self.goal_pending = True
        self.reached = False
        self.goal_status = f"goal {np.round(goal, 2).tolist()} accepted"
        self.log.info(self.goal_status)
        self.lockstep.accepted_goal()

    # -- planning --------------------------------------------------------------------------------
    def _hold(self, position, t: float, why: str) -> None:
        yaw = self.state.yaw if self.state is not None else math.nan
        self._publish(hold_trajectory(position, t, yaw), t)
        self.log.warning(f"holding at {np.round(position, 2).tolist()}: {why}")

    def _publish(self, traj: SampledTrajectory, stamp: float) -> None:
        msg = conv.trajectory_to_msg(traj, min(stamp, traj.t_start), self.params.config.frame_id)
        self._send(msg)
        self.last_traj, self.last_msg = traj, msg
        self.last_publish = c.now_s(self)
        self.plans_published += 1

    def _send(self, msg: MultiDOFJointTrajectory) -> None:
        self.pub_traj.publish(msg)
        self.lockstep.published_trajectory()

    def _tick(self) -> None:
        # (in lockstep every tick, also one that planned nothing, is then reported)
        tick_ns = self.get_clock().now().nanoseconds
        try:
            if self.swarm is not None:
                self.swarm.take_pending(tick_ns)  # the peers' broadcasts that arrived before this tick
            self._fuse_pending_frames()
            self._plan_tick()
        finally:
            end_ns = self.get_clock().now().nanoseconds
            self.tick_clock_ms.append(1e-6 * (end_ns - tick_ns))
            del self.tick_clock_ms[:-100]
            self._log_safety_nets()

    def _log_safety_nets(self) -> None:
        stats = getattr(self.planner, "stats", None)
        hits = dict(getattr(stats, "safety_net_hits", None) or {})
        total = sum(hits.values())
        if total > self._safety_nets_logged:
            self._safety_nets_logged = total
            if self.throttle("safety_net"):
                self.log.warning(f"EGO wall-clock safety nets fired {total} times so far ({hits}): those plans "
                                 f"depend on this machine's speed and load (time limits x{self.time_limit_scale:g})")

    def _plan_tick(self) -> None:
        cfg = self.params.config
        now = c.now_s(self)
        if self.planner is None or self.goal is None or self.state is None:
            if self.swarm is not None and self.state is not None:
                self._broadcast_hover(self.state)  # a drone waiting for its goal is known to the others
            return
        if now - self.odom_wall > cfg.odom_timeout_s:
            if not self.odom_lost:
                self.odom_lost = True
                self._hold(self.state.position, max(self.state.t, 0.0),
                           f"odometry stopped ({now - self.odom_wall:.2f} s old): not planning until it returns")
            return
        state = self.state
        if self.goal_pending:
            self.goal_pending = False
            self.frame = None
            try:
                self.planner.reset(state.position.copy(), self.goal.copy())
            except (ValueError, ArithmeticError) as exc:
                self.goal_status = f"goal refused by the planner: {exc}"
                self.log.warning(self.goal_status)
                self.goal = None
                self._hold(state.position, state.t, "the planner refused the goal")
                return
        if not self.reached and np.linalg.norm(state.position - self.goal) <= cfg.goal_tolerance_m:
            self.reached = True
            self.goal_status = f"goal {np.round(self.goal, 2).tolist()} reached"
            self.log.info(self.goal_status)
        frame, self.frame = self.frame, None
        data_stamp = self.frame_stamp if self.frame_stamp is not None else state.t
        try:
            result = self.planner.update(state, frame)
            traj = self._to_samples(result, state)
        except (ValueError, ArithmeticError) as exc:
            self.counters["planner_errors"] += 1
            if self.throttle("planner"):
                self.log.warning(f"planner error ({type(exc).__name__}: {exc}); holding")
            self._publish(hold_trajectory(state.position, state.t, state.yaw), state.t)
            return
        if traj is not None:
            self._publish(traj, data_stamp)
        elif self.last_msg is not None and now - self.last_publish >= cfg.republish_period_s:
            self._send(self.last_msg)
            self.last_publish = now

    def _broadcast_hover(self, state: VehicleState) -> None:
        from planner_pkg.planning.swarm import hover_spline

        self.swarm.publish(self.params.config.swarm_drone_id, hover_spline(state.position), state.t, state.t)

    def _to_samples(self, result, state: VehicleState) -> Optional[SampledTrajectory]:
        cfg = self.params.config
        if result is None:
            return None
        if isinstance(result, Setpoint):
            traj = setpoint_trajectory(result, state.t)
            if traj is None:
                raise ValueError(f"the planner returned a {result.mode} setpoint; this node forwards position "
                                 f"references only")
            return traj
        if not callable(getattr(result, "sample", None)):
            raise ValueError(f"the planner returned {type(result).__name__}, not a Setpoint or trajectory")
        spline = getattr(result, "spline", None)
        self.last_control_points = getattr(spline, "control_points", None)
        t0, t1 = trajectory_span(result, state.t, cfg.trajectory_horizon_s)
        return sample_trajectory(result, t0, t1, cfg.trajectory_dt_s)

    # -- outputs ---------------------------------------------------------------------------------
    def _publish_markers(self) -> None:
        cfg = self.params.config
        t = max(c.now_s(self), 0.0)
        out = MarkerArray()
        frame = cfg.frame_id
        if self.last_traj is not None and len(self.last_traj) > 1:
            out.markers.append(mk.marker("trajectory", 0, Marker.LINE_STRIP, t, frame,
                                         points=self.last_traj.position, scale=(0.05, 0.0, 0.0),
                                         rgba=(0.1, 0.8, 0.2, 1.0)))
        if self.last_control_points is not None:
            out.markers.append(mk.marker("control_points", 0, Marker.SPHERE_LIST, t, frame,
                                         points=self.last_control_points, scale=(0.1, 0.1, 0.1),
                                         rgba=(0.9, 0.5, 0.1, 1.0)))
        guide = self._guide_path()
        if guide is not None and len(guide) > 1:
            out.markers.append(mk.marker("guide_path", 0, Marker.LINE_STRIP, t, frame, points=guide,
                                         scale=(0.03, 0.0, 0.0), rgba=(0.2, 0.4, 1.0, 0.8)))
        if self.goal is not None:
            out.markers.append(mk.marker("goal", 0, Marker.SPHERE, t, frame, position=self.goal,
                                         scale=(0.3, 0.3, 0.3), rgba=(1.0, 0.1, 0.1, 1.0)))
        voxels = self._occupied_voxels(cfg.marker_voxel_radius_m)
        if voxels is not None and voxels[0].shape[0]:
            centres, size = voxels
            out.markers.append(mk.marker("occupied", 0, Marker.CUBE_LIST, t, frame, points=centres,
                                         scale=(size, size, size), rgba=(0.6, 0.6, 0.6, 0.5)))
        if out.markers:
            self.pub_markers.publish(out)

    def _guide_path(self) -> Optional[np.ndarray]:
        for owner in (self.planner, getattr(self.planner, "manager", None)):
            for name in ("guide_path", "last_guide_path"):
                path = getattr(owner, name, None) if owner is not None else None
                if path is not None:
                    try:
                        arr = np.asarray(path, dtype=np.float64).reshape(-1, 3)
                    except (TypeError, ValueError):
                        continue
                    return arr
        return None

    def _occupied_voxels(self, radius: float):
        grid = getattr(self.planner, "map", None)
        occupied = getattr(grid, "occupied", None)
        if occupied is None or self.state is None or radius <= 0 or not hasattr(grid, "index_to_position"):
            return None
        idx = np.argwhere(occupied)
        if idx.shape[0] == 0:
            return None
        centres = grid.index_to_position(idx)
        near = np.linalg.norm(centres - self.state.position, axis=1) <= radius
        return centres[near][:20000], float(getattr(grid, "res", 0.1))

    def _fsm_state(self) -> str:
        fsm = getattr(self.planner, "fsm", None)
        state = getattr(fsm, "state", None)
        return getattr(state, "value", str(state)) if state is not None else "n/a"

    def _publish_status(self) -> None:
        cfg = self.params.config
        now = c.now_s(self)
        if self.planner is None:
            level, message = "error", self.planner_error
        elif self.state is not None and now - self.odom_wall > cfg.odom_timeout_s:
            level, message = "warn", "odometry lost: holding"
        elif self.goal_status.startswith("goal refused"):
            level, message = "warn", self.goal_status
        else:
            level, message = "ok", self.goal_status
        stats = getattr(self.planner, "stats", None)
        replan = list(getattr(stats, "replan_ms", []) or [])[-50:]
        values = [
            ("planner", cfg.planner), ("fsm", self._fsm_state()), ("goal_status", self.goal_status),
            ("reached", self.reached), ("odom_lost", self.odom_lost), ("plans_published", self.plans_published),
            ("replan_ms_median", f"{np.median(replan):.2f}" if replan else "n/a"),
            ("goal", "none" if self.goal is None else ",".join(f"{v:.3f}" for v in self.goal)),
            ("lockstep_report", self._lockstep_reporting()), ("time_limit_scale", f"{self.time_limit_scale:g}"),
            ("tick_clock_ms_max", f"{max(self.tick_clock_ms):.1f}" if self.tick_clock_ms else "n/a"),
            ("safety_net_hits", sum((getattr(stats, "safety_net_hits", None) or {}).values())),
        ] + [(k, v) for k, v in self.counters.items()]
        if self.swarm is not None:
            values += self.swarm.status_values()
        self.pub_status.publish(conv.make_status(f"{self.get_name()}", level, message, values, now))


def main(args=None) -> int:
    return c.run_node(PlannerNode, args)


if __name__ == "__main__":
    sys.exit(main())
