"""Node ``viz``: what RViz2 and Foxglove show of a flight, as ROS topics (and, optionally, the
Foxglove live server).

Publishes, all *transient local* (depth 1, reliable) so a viewer that starts late still gets the
newest of each:

* ``viz/world`` (visualization_msgs/MarkerArray): the obstacles of ``world_file`` (namespace
  ``obstacles``) and the world's bounds (``bounds``, a LINE_LIST), once at start;
* ``viz/trajectory`` (MarkerArray): the newest ``planning/trajectory`` as a LINE_STRIP
  (``trajectory``) and the goal (``goal``, a sphere), at most ``trajectory_rate_hz``;
* ``viz/path`` (nav_msgs/Path): the flown path from ``odom``, a pose every ``path_spacing_m``
  (at most ``max_path_poses``: then every other pose is dropped), at ``path_rate_hz``; a new goal
  starts a new path.

``rviz/planner.rviz`` shows these plus ``odom``, ``cloud`` and ``depth/image``. With
``foxglove: true`` the node also serves :class:`planner_pkg.viz.foxglove_live.LiveView` on
``foxglove_host:foxglove_port`` from the same inputs (plus ``depth/image``, ``cloud`` and the
planner's ``status`` for the replan time); if the server cannot start (port taken, no
foxglove-sdk) the node logs why and keeps publishing the ROS topics.

The drawing geometry is ROS-free (:mod:`planner_pkg.viz.geometry`); this file only converts.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry, Path
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import Image, PointCloud2
from trajectory_msgs.msg import MultiDOFJointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from planner_pkg.config_schema import Config
from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes import markers as mk
from planner_pkg.nodes.params import ConfigParameters, ParameterConfigError
from planner_pkg.viz.config import DEFAULT_PORT, LiveViewConfig
from planner_pkg.viz.geometry import FlownPath, bounds_edges

NODE_NAME = "viz"
TOPIC_WORLD = "viz/world"
TOPIC_TRAJECTORY_MARKERS = "viz/trajectory"
TOPIC_PATH = "viz/path"
VIZ_QOS = c.LATCHED_QOS  # reliable, transient local, depth 1: a late RViz still sees them


@dataclass(frozen=True)
class VizNodeConfig(Config, prefix=""):
    """Parameters of the ``viz`` node."""

    world_file: str = field(default="", metadata={"read_only": True, "description":
                            "world to draw on viz/world (path, or a shipped world's name); empty = none"})
    map_frame: str = field(default=conv.MAP_FRAME, metadata={"read_only": True, "description": "world frame"})
    path_spacing_m: float = field(default=0.1, metadata={"range": (0.001, 100.0), "description":
                                  "viz/path: least distance between kept poses, m"})
    max_path_poses: int = field(default=5000, metadata={"range": (2, 1_000_000), "description":
                                "viz/path: most poses kept (then every other one is dropped)"})
    path_rate_hz: float = field(default=2.0, metadata={"range": (0.1, 50.0), "read_only": True,
                                "description": "viz/path publish rate, Hz (wall clock)"})
    trajectory_rate_hz: float = field(default=5.0, metadata={"range": (0.1, 100.0), "description":
                                      "most viz/trajectory updates per wall second"})
    foxglove: bool = field(default=False, metadata={"read_only": True, "description":
                           "also serve the Foxglove live view (WebSocket, needs foxglove-sdk)"})
    foxglove_port: int = field(default=DEFAULT_PORT, metadata={"range": (0, 65535), "read_only": True,
                               "description": "Foxglove WebSocket port (0 = any free port)"})
    foxglove_host: str = field(default="127.0.0.1", metadata={"read_only": True, "description":
                               "address the Foxglove server binds (0.0.0.0 = every interface)"})


def path_message(path: FlownPath, stamp_s: float, frame_id: str) -> Path:
    """nav_msgs/Path of the flown path (orientation identity: the path is positions)."""
    msg = Path()
    msg.header.stamp = conv.seconds_to_stamp(max(0.0, stamp_s))
    msg.header.frame_id = frame_id
    for t, (x, y, z) in zip(path.times().tolist(), path.points().tolist()):
        pose = PoseStamped()
        pose.header.stamp = conv.seconds_to_stamp(max(0.0, t))
        pose.header.frame_id = frame_id
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = x, y, z
        pose.pose.orientation.w = 1.0
        msg.poses.append(pose)
    return msg


def world_markers(world, frame_id: str) -> MarkerArray:
    """The obstacles (markers.world_to_markers) and the bounds as a LINE_LIST."""
    out = mk.world_to_markers(world, 0.0, frame_id)
    out.markers.append(mk.marker("bounds", 0, Marker.LINE_LIST, 0.0, frame_id, points=bounds_edges(world),
                                 scale=(0.03, 0.0, 0.0), rgba=(0.6, 0.6, 0.6, 0.6)))
    return out


def trajectory_markers(points: Optional[np.ndarray], goal: Optional[np.ndarray], stamp_s: float,
                       frame_id: str) -> MarkerArray:
    """The planned trajectory (N, 3) m as a LINE_STRIP and the goal (3,) m as a sphere; a DELETEALL
    first, so that what is not given disappears."""
    out = MarkerArray()
    out.markers.append(mk.delete_all_marker())
    if points is not None and len(points) >= 2:
        out.markers.append(mk.marker("trajectory", 0, Marker.LINE_STRIP, stamp_s, frame_id, points=points,
                                     scale=(0.06, 0.0, 0.0), rgba=(0.1, 0.5, 1.0, 1.0)))
    if goal is not None:
        out.markers.append(mk.marker("goal", 0, Marker.SPHERE, stamp_s, frame_id, position=tuple(goal),
                                     scale=(0.5, 0.5, 0.5), rgba=(0.1, 0.8, 0.2, 0.8)))
    return out


class VizNode(Node):
    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.params = ConfigParameters(self, VizNodeConfig)
        cfg = self.params.config
        self.log = self.get_logger()
        self.throttle = c.Throttle(5.0)
        self.counters = {"bad_odom": 0, "bad_trajectory": 0, "bad_goal": 0, "bad_sensor": 0}
        self.path = FlownPath(cfg.path_spacing_m, cfg.max_path_poses)
        self._path_dirty = False
        self.goal: Optional[np.ndarray] = None
        self.trajectory_points: Optional[np.ndarray] = None
        self._last_traj_wall = -math.inf
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        self.world = self._load_world(cfg.world_file)

        self.pub_world = self.create_publisher(MarkerArray, TOPIC_WORLD, VIZ_QOS)
        self.pub_traj = self.create_publisher(MarkerArray, TOPIC_TRAJECTORY_MARKERS, VIZ_QOS)
        self.pub_path = self.create_publisher(Path, TOPIC_PATH, VIZ_QOS)
        if self.world is not None:
            self.pub_world.publish(world_markers(self.world, cfg.map_frame))
        self.view = self._start_view(cfg) if cfg.foxglove else None
        self.create_subscription(Odometry, c.TOPIC_ODOM, self._on_odom, c.ODOM_QOS)
        self.create_subscription(MultiDOFJointTrajectory, c.TOPIC_TRAJECTORY, self._on_trajectory, c.TRAJECTORY_QOS)
        self.create_subscription(PoseStamped, c.TOPIC_GOAL, self._on_goal, c.GOAL_QOS)
        if self.view is not None:
            self.create_subscription(Image, c.TOPIC_DEPTH, self._on_depth, c.SENSOR_QOS)
            self.create_subscription(PointCloud2, c.TOPIC_CLOUD, self._on_cloud, c.SENSOR_QOS)
            self.create_subscription(DiagnosticArray, c.TOPIC_STATUS, self._on_status, c.STATUS_QOS)
        self.create_timer(1.0 / cfg.path_rate_hz, self._publish_path, clock=self._wall)

    # -- setup -----------------------------------------------------------------------------------
    def _load_world(self, name: str):
        if not name:
            return None
        from planner_pkg.nodes.sim_bridge import find_world
        from planner_pkg.world import WorldFormatError, load_world

        try:
            return load_world(find_world(name))
        except (FileNotFoundError, WorldFormatError, OSError) as exc:
            raise ParameterConfigError(f"viz: world_file: cannot load {name!r}: {exc}") from None

    def _start_view(self, cfg: VizNodeConfig):
        from planner_pkg.viz.foxglove_live import LiveView, VizServerError, VizUnavailableError

        view = LiveView(LiveViewConfig(port=cfg.foxglove_port, host=cfg.foxglove_host, map_frame=cfg.map_frame,
                                       path_spacing_m=cfg.path_spacing_m, max_path_points=cfg.max_path_poses),
                        name=f"planner_pkg {self.get_fully_qualified_name()}")
        try:
            url = view.start()
        except (VizUnavailableError, VizServerError) as exc:
            self.log.error(f"no Foxglove live view: {exc}; the ROS topics viz/* are still published")
            return None
        if self.world is not None:
            view.set_world(self.world)
        self.log.info(f"live view: {url} (Foxglove: Open connection > Foxglove WebSocket)")
        print(f"[viz] live view: {url}", flush=True)
        return view

    # -- inputs ----------------------------------------------------------------------------------
    def _bad(self, key: str, what: str, exc: Exception) -> None:
        self.counters[key] += 1
        if self.throttle(key):
            self.log.warning(f"{what} ignored ({self.counters[key]} so far): {exc}")

    def _on_odom(self, msg: Odometry) -> None:
        try:
            state = conv.odometry_to_state(msg, frame_id=self.params.config.map_frame, child_frame_id=None)
        except ValueError as exc:
            self._bad("bad_odom", "odometry", exc)
            return
        if self.path.add(state.t, state.position):
            self._path_dirty = True
        if self.view is not None:
            self.view.post_state(state.t, state.position, state.attitude, state.velocity)

    def _on_trajectory(self, msg: MultiDOFJointTrajectory) -> None:
        try:
            traj = conv.msg_to_trajectory(msg, frame_id=self.params.config.map_frame)
        except ValueError as exc:
            self._bad("bad_trajectory", "trajectory", exc)
            return
        self.trajectory_points = traj.position
        t = float(traj.t[0])
        if self.view is not None:
            self.view.post_trajectory(t, points=traj.position)
        now = self._wall.now().nanoseconds * 1e-9
        if now - self._last_traj_wall >= 1.0 / self.params.config.trajectory_rate_hz:
            self._last_traj_wall = now
            self.pub_traj.publish(trajectory_markers(traj.position, self.goal, t, self.params.config.map_frame))

    def _on_goal(self, msg: PoseStamped) -> None:
        try:
            goal = conv.pose_to_goal(msg, expected_frame=self.params.config.map_frame)
        except ValueError as exc:
            self._bad("bad_goal", "goal", exc)
            return
        self.goal = np.asarray(goal, dtype=np.float64).reshape(3)
        self.path.clear()  # a new flight
        self._path_dirty = True
        if self.view is not None:
            self.view.set_goal(self.goal)
        self.pub_traj.publish(trajectory_markers(self.trajectory_points, self.goal, conv.stamp_to_seconds(
            msg.header.stamp), self.params.config.map_frame))

    def _on_depth(self, msg: Image) -> None:
        if self.view is None:
            return
        try:
            depth = conv.image_to_depth(msg)
        except ValueError as exc:
            self._bad("bad_sensor", "depth image", exc)
            return
        self.view.post_sensors(conv.stamp_to_seconds(msg.header.stamp), depth=depth)

    def _on_cloud(self, msg: PointCloud2) -> None:
        if self.view is None:
            return
        try:
            points = conv.cloud_to_points(msg)
        except ValueError as exc:
            self._bad("bad_sensor", "point cloud", exc)
            return
        self.view.post_sensors(conv.stamp_to_seconds(msg.header.stamp), points=points)

    def _on_status(self, msg: DiagnosticArray) -> None:
        values = conv.status_values(msg)
        try:
            replan = float(values.get("replan_ms_median", "nan"))
        except ValueError:
            return  # "n/a" before the first replan
        if self.view is not None and math.isfinite(replan):
            self.view.post_replan(conv.stamp_to_seconds(msg.header.stamp), replan)

    # -- output ----------------------------------------------------------------------------------
    def _publish_path(self) -> None:
        if not self._path_dirty:
            return
        self._path_dirty = False
        times = self.path.times()
        stamp = float(times[-1]) if len(times) else 0.0
        self.pub_path.publish(path_message(self.path, stamp, self.params.config.map_frame))

    def close(self) -> None:
        """Stop the Foxglove server (run_node and the bringup call this before destroying the node)."""
        view, self.view = getattr(self, "view", None), None  # also on a node whose __init__ failed
        if view is not None:
            view.stop()

    def destroy_node(self):
        self.close()
        return super().destroy_node()


def main(args=None) -> int:
    return c.run_node(VizNode, args)


if __name__ == "__main__":
    sys.exit(main())
