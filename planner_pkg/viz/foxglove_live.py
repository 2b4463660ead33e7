"""Foxglove live view: a WebSocket server (the maintained ``foxglove-sdk``, extra ``viz``) that shows
a flight in the Foxglove app while it flies.

Open Foxglove, *Open connection* > *Foxglove WebSocket*, ``ws://HOST:PORT`` (default
``ws://127.0.0.1:8765``); ``config/foxglove/planner_live.json`` is a layout for these topics
(docs/viz.md describes it). Topics, all with Foxglove's own schemas (protobuf) or JSON:

==========================  ===========================  =================================================
topic                       schema                       what
==========================  ===========================  =================================================
``/world``                  ``foxglove.SceneUpdate``     obstacles, world bounds, goal (re-sent to every
                                                         new subscriber: a late client still sees them)
``/tf``                     ``foxglove.FrameTransforms`` ``map -> base_link`` (odometry), ``map ->
                                                         camera_optical`` (with each depth frame)
``/planner/trajectory``     ``foxglove.SceneUpdate``     the planned trajectory, a line strip
``/vehicle/path``           ``foxglove.SceneUpdate``     the flown path, a line strip
``/camera/depth``           ``foxglove.RawImage``        depth image, ``32FC1`` (m), ``camera_optical``
``/camera/cloud``           ``foxglove.PointCloud``      the frame's point cloud (x, y, z float32, map)
``/vehicle/state``          JSON                         ``speed_mps``, position and velocity (plots)
``/planner/replan``         JSON                         ``replan_ms``: the planner's time per update
==========================  ===========================  =================================================

Message time stamps (and the server's time, ``Capability.Time``) are the flight's clock (sim time
from 0 in the embedded simulator, ROS time in the viz node).

Off the control path: ``post_*`` are called from the simulation or node callbacks and only
(1) drop the sample if one of its kind was posted less than a period ago (``LiveViewConfig``
``*_rate_hz``, wall clock), then (2) append a reference to a bounded deque (the oldest entry
drops when full) and wake the publisher thread. Encoding and sending happen on that thread;
the SDK queues per client and drops the oldest data for a slow client. Nothing in ``post_*``
blocks or raises for a bad sample (non-finite values are dropped and counted).
"""
from __future__ import annotations

import collections
import json
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, Optional

import numpy as np

from planner_pkg.viz.config import LiveViewConfig
from planner_pkg.viz.geometry import FlownPath, bounds_edges, obstacle_shapes, sample_trajectory, thin_points

logger = logging.getLogger(__name__)

__all__ = ["LiveView", "VizUnavailableError", "VizServerError", "TOPICS", "viz_available", "url_for"]

#: topic -> schema name (JSON channels: "json"), in the order they are advertised.
TOPICS: Dict[str, str] = {
    "/world": "foxglove.SceneUpdate",
    "/tf": "foxglove.FrameTransforms",
    "/planner/trajectory": "foxglove.SceneUpdate",
    "/vehicle/path": "foxglove.SceneUpdate",
    "/camera/depth": "foxglove.RawImage",
    "/camera/cloud": "foxglove.PointCloud",
    "/vehicle/state": "json",
    "/planner/replan": "json",
}

_STATE_SCHEMA = {
    "type": "object", "title": "planner_pkg.VehicleState",
    "properties": {k: {"type": "number"} for k in
                   ("t_s", "speed_mps", "x_m", "y_m", "z_m", "vx_mps", "vy_mps", "vz_mps")},
}
_REPLAN_SCHEMA = {"type": "object", "title": "planner_pkg.Replan",
                  "properties": {"t_s": {"type": "number"}, "replan_ms": {"type": "number"}}}

_OBSTACLE_RGBA = (0.55, 0.45, 0.35, 0.9)
_BOUNDS_RGBA = (0.6, 0.6, 0.6, 0.6)
_GOAL_RGBA = (0.1, 0.8, 0.2, 0.8)
_TRAJ_RGBA = (0.1, 0.5, 1.0, 1.0)
_PATH_RGBA = (1.0, 0.45, 0.0, 1.0)


class VizUnavailableError(RuntimeError):
    """The ``foxglove-sdk`` package (the ``viz`` extra) is not installed."""


class VizServerError(RuntimeError):
    """The WebSocket server could not start (e.g. the port is taken)."""


def viz_available() -> bool:
    """True when ``foxglove-sdk`` can be imported."""
    try:
        import foxglove  # noqa: F401
        import foxglove.websocket  # noqa: F401
    except ImportError:
        return False
    return True


def url_for(host: str, port: int) -> str:
    """``ws://host:port`` to type into Foxglove; an any-address bind names this machine instead."""
    if host in ("0.0.0.0", "::", ""):
        import socket

        host = socket.gethostname()
    return f"ws://{host}:{port}"


def _ns(t: float) -> int:
    return max(0, int(round(float(t) * 1e9)))


@dataclass
class LiveViewStats:
    """Counts since start: samples posted, dropped by the rate limit, dropped from a full queue,
    refused (non-finite), and messages sent (per topic)."""

    posted: int = 0
    rate_dropped: int = 0
    queue_dropped: int = 0
    refused: int = 0
    errors: int = 0
    sent: Dict[str, int] = field(default_factory=dict)
    thread_cpu_s: float = 0.0  # CPU time of the publisher thread (encoding, sending)


class LiveView:
    """A Foxglove WebSocket server fed from the flight (see the module docstring).

    ``start()`` -> URL; ``set_world(world)``, ``set_goal(goal)``; ``post_state``, ``post_frame``,
    ``post_trajectory``, ``post_replan`` from the flight; ``stop()`` (also a context manager).
    """

    def __init__(self, config: LiveViewConfig = LiveViewConfig(), name: str = "planner_pkg"):
        self.config = config
        self.name = name
        self.stats = LiveViewStats()
        self._period = {
            "state": 1.0 / config.pose_rate_hz, "trajectory": 1.0 / config.trajectory_rate_hz,
            "image": 1.0 / config.image_rate_hz, "cloud": 1.0 / config.cloud_rate_hz,
            "replan": 1.0 / config.replan_rate_hz,
        }
        self._last_post: Dict[str, float] = {}
        self._queue: collections.deque = collections.deque(maxlen=config.queue_size)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._server = None
        self._channels: Dict[str, object] = {}
        self._context = None
        self._subscribers: Dict[str, int] = collections.defaultdict(int)
        self._sub_cond = threading.Condition()
        self._world = None
        self._goal: Optional[np.ndarray] = None
        self._world_dirty = False
        self._path = FlownPath(config.path_spacing_m, config.max_path_points)
        self._path_sent_wall = -math.inf
        self._path_dirty = False
        self._fox = None  # the foxglove modules, imported by start()
        self.url: Optional[str] = None
        self.port: Optional[int] = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> str:
        """Start the server and the publisher thread; returns the URL to open.

        Raises VizUnavailableError without ``foxglove-sdk``, VizServerError when the server
        cannot listen (port taken, bad host)."""
        if self._server is not None:
            return self.url
        try:
            import foxglove
            import foxglove.channels as channels
            import foxglove.messages as messages
            from foxglove.websocket import Capability, ServerListener
        except ImportError as exc:
            raise VizUnavailableError(
                f"the live view needs the foxglove-sdk package ({exc}): pip install 'planner_pkg[viz]' "
                f"(or pip install foxglove-sdk)") from None
        self._fox = messages
        view = self

        class _Listener(ServerListener):
            def on_subscribe(self, client, channel):  # SDK thread: only bookkeeping here
                view._on_subscribe(channel.topic, +1)

            def on_unsubscribe(self, client, channel):
                view._on_subscribe(channel.topic, -1)

        context = self._context = foxglove.Context()  # held: a dropped context closes its channels
        self._channels = {
            "/world": channels.SceneUpdateChannel("/world", context=context),
            "/tf": channels.FrameTransformsChannel("/tf", context=context),
            "/planner/trajectory": channels.SceneUpdateChannel("/planner/trajectory", context=context),
            "/vehicle/path": channels.SceneUpdateChannel("/vehicle/path", context=context),
            "/camera/depth": channels.RawImageChannel("/camera/depth", context=context),
            "/camera/cloud": channels.PointCloudChannel("/camera/cloud", context=context),
            "/vehicle/state": foxglove.Channel("/vehicle/state", schema=_STATE_SCHEMA, context=context),
            "/planner/replan": foxglove.Channel("/planner/replan", schema=_REPLAN_SCHEMA, context=context),
        }
        try:
            self._server = foxglove.start_server(
                name=self.name, host=self.config.host, port=self.config.port, context=context,
                server_listener=_Listener(), capabilities=[Capability.Time])
        except (RuntimeError, OSError, ValueError) as exc:
            for ch in self._channels.values():
                ch.close()
            self._channels = {}
            raise VizServerError(f"cannot start the Foxglove server on {self.config.host}:{self.config.port}: {exc} "
                                 f"(is the port taken? choose another with --viz-port)") from None
        self.port = int(self._server.port)
        self.url = url_for(self.config.host, self.port)
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="foxglove-live", daemon=True)
        self._thread.start()
        logger.info("live view on %s", self.url)
        return self.url

    def stop(self, timeout_s: float = 5.0) -> None:
        """Publish what is queued (and the final path), then stop the thread and the server."""
        if self._server is None:
            return
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._server.stop()
        self._server = None
        for ch in self._channels.values():
            ch.close()
        with self._sub_cond:
            self._sub_cond.notify_all()

    def __enter__(self) -> "LiveView":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    def wait_for_subscriber(self, topic: str = "/tf", timeout_s: float = 0.0) -> bool:
        """Wait up to ``timeout_s`` wall seconds until a client subscribes to ``topic``; True if one has."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._sub_cond:
            while self._subscribers.get(topic, 0) <= 0 and self._server is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._sub_cond.wait(left)
            return self._subscribers.get(topic, 0) > 0

    def _on_subscribe(self, topic: str, delta: int) -> None:
        with self._sub_cond:
            self._subscribers[topic] = max(0, self._subscribers[topic] + delta)
            self._sub_cond.notify_all()
        if delta > 0 and topic in ("/world", "/vehicle/path"):
            # the world is latched: a new subscriber gets it (and the path so far) from the thread
            self._world_dirty = self._world_dirty or topic == "/world"
            self._path_dirty = self._path_dirty or topic == "/vehicle/path"
            self._wake.set()

    # -- producers (any thread; never block) ------------------------------------------------------
    def set_world(self, world) -> None:
        """Draw ``world`` (obstacles and bounds) on ``/world``; sent again to each new subscriber."""
        self._world = world
        self._world_dirty = True
        self._wake.set()

    def set_goal(self, goal) -> None:
        """Draw the goal (3,) m on ``/world``; None removes it. Also starts a new flown path."""
        g = None if goal is None else np.asarray(goal, dtype=np.float64).reshape(3)
        self._goal = g if g is None or np.isfinite(g).all() else None
        self._enqueue("reset_path", None)
        self._world_dirty = True
        self._wake.set()

    def _admit(self, kind: str) -> bool:
        now = time.monotonic()
        last = self._last_post.get(kind)
        if last is not None and now - last < self._period[kind]:
            self.stats.rate_dropped += 1
            return False
        self._last_post[kind] = now
        return True

    def _enqueue(self, kind: str, item) -> None:
        if len(self._queue) == self._queue.maxlen:
            self.stats.queue_dropped += 1  # the deque drops its oldest entry on append
        self._queue.append((kind, item))
        self.stats.posted += 1
        self._wake.set()

    def post_state(self, t: float, position, attitude, velocity) -> None:
        """The vehicle at time ``t`` s: position (3,) m, attitude (4,) (x, y, z, w), velocity (3,) m/s."""
        if self._server is None or not self._admit("state"):
            return
        values = (float(t), *(float(v) for v in position), *(float(v) for v in attitude),
                  *(float(v) for v in velocity))
        if len(values) != 11 or not all(math.isfinite(v) for v in values):
            self.stats.refused += 1
            return
        self._enqueue("state", values)

    def post_frame(self, frame) -> None:
        """A :class:`planner_pkg.types.SensorFrame` (depth image, cloud, camera pose)."""
        if frame is not None:
            self.post_sensors(frame.t, frame.depth, frame.points, frame.camera_position, frame.camera_orientation)

    def post_sensors(self, t: float, depth=None, points=None, camera_position=None, camera_orientation=None) -> None:
        """Sensor data at ``t`` s: depth (H, W) float z-depth, m; points (N, 3) world-frame m;
        the camera optical frame's pose in the world (3,) m and (4,) (x, y, z, w); each optional.
        Arrays are read on the publisher thread: pass ones that are not modified afterwards."""
        if self._server is None or not math.isfinite(t):
            return
        image = depth is not None and np.ndim(depth) == 2 and self._admit("image")
        cloud = points is not None and self._admit("cloud")
        if image or cloud:
            self._enqueue("sensors", (float(t), depth if image else None, points if cloud else None,
                                      camera_position, camera_orientation))

    def post_trajectory(self, t: float, trajectory=None, points=None) -> None:
        """The planned trajectory at time ``t`` s: an object with ``sample(t)`` (sampled on the
        publisher thread: its ``sample`` must not change it) or the positions (N, 3) m."""
        if self._server is None or (trajectory is None and points is None) or not self._admit("trajectory"):
            return
        if points is not None:
            points = np.array(points, dtype=np.float64).reshape(-1, 3)
        self._enqueue("trajectory", (float(t), trajectory, points))

    def post_replan(self, t: float, replan_ms: float) -> None:
        """The planner took ``replan_ms`` ms for its update at ``t`` s."""
        if self._server is None or not self._admit("replan"):
            return
        if not (math.isfinite(t) and math.isfinite(replan_ms)):
            self.stats.refused += 1
            return
        self._enqueue("replan", (float(t), float(replan_ms)))

    # -- the publisher thread ---------------------------------------------------------------------
    def _run(self) -> None:
        cpu0 = time.thread_time()
        while True:
            self._wake.wait(0.2)
            self._wake.clear()
            stopping = self._stopping.is_set()
            self.stats.thread_cpu_s = time.thread_time() - cpu0
            try:
                if self._world_dirty:
                    self._world_dirty = False
                    self._send_world()
                while self._queue:
                    kind, item = self._queue.popleft()
                    getattr(self, f"_send_{kind}")(item)
                if self._path_dirty and (stopping or time.monotonic() - self._path_sent_wall
                                         >= 1.0 / self.config.path_rate_hz):
                    self._send_path()
            except Exception as exc:  # noqa: BLE001 - a drawing bug must not end the view, nor the flight
                self.stats.errors += 1
                if self.stats.errors <= 3:
                    logger.warning("live view: could not publish (%s: %s); going on", type(exc).__name__, exc)
            if stopping:
                self.stats.thread_cpu_s = time.thread_time() - cpu0
                return

    def _log(self, topic: str, msg, t: float) -> None:
        self._channels[topic].log(msg, log_time=_ns(t))
        self.stats.sent[topic] = self.stats.sent.get(topic, 0) + 1

    def _log_json(self, topic: str, data: dict, t: float) -> None:
        # bytes, not the dict: foxglove.Channel.log drops log_time for dicts in 0.30
        self._log(topic, json.dumps(data).encode("utf-8"), t)

    # message builders
    def _ts(self, t: float):
        n = _ns(t)
        return self._fox.Timestamp(n // 1_000_000_000, n % 1_000_000_000)

    def _color(self, rgba):
        r, g, b, a = rgba
        return self._fox.Color(r=r, g=g, b=b, a=a)

    def _pose(self, position, orientation=(0.0, 0.0, 0.0, 1.0)):
        m = self._fox
        x, y, z = (float(v) for v in position)
        qx, qy, qz, qw = (float(v) for v in orientation)
        return m.Pose(position=m.Vector3(x=x, y=y, z=z), orientation=m.Quaternion(x=qx, y=qy, z=qz, w=qw))

    def _line(self, points, rgba, thickness_m: float, kind=None):
        m = self._fox
        return m.LinePrimitive(type=kind if kind is not None else m.LinePrimitiveLineType.LineStrip,
                               pose=self._pose((0, 0, 0)), thickness=thickness_m, scale_invariant=False,
                               points=[m.Point3(x=x, y=y, z=z) for x, y, z in np.asarray(points).tolist()],
                               color=self._color(rgba))

    def _send_world(self) -> None:
        m, frame = self._fox, self.config.map_frame
        entities = []
        if self._world is not None:
            cubes, cylinders, spheres = [], [], []
            color = self._color(_OBSTACLE_RGBA)
            for s in obstacle_shapes(self._world):
                size = m.Vector3(x=s.size[0], y=s.size[1], z=s.size[2])
                pose = self._pose(s.position, s.orientation)
                if s.kind == "cylinder":
                    cylinders.append(m.CylinderPrimitive(pose=pose, size=size, bottom_scale=1.0, top_scale=1.0,
                                                         color=color))
                elif s.kind == "box":
                    cubes.append(m.CubePrimitive(pose=pose, size=size, color=color))
                else:
                    spheres.append(m.SpherePrimitive(pose=pose, size=size, color=color))
            entities.append(m.SceneEntity(timestamp=self._ts(0.0), frame_id=frame, id="obstacles",
                                          cubes=cubes, cylinders=cylinders, spheres=spheres))
            entities.append(m.SceneEntity(timestamp=self._ts(0.0), frame_id=frame, id="bounds", lines=[
                self._line(bounds_edges(self._world), _BOUNDS_RGBA, 0.03, m.LinePrimitiveLineType.LineList)]))
        deletions = []
        if self._goal is not None:
            d = 2.0 * 0.25
            entities.append(m.SceneEntity(timestamp=self._ts(0.0), frame_id=frame, id="goal", spheres=[
                m.SpherePrimitive(pose=self._pose(self._goal), size=m.Vector3(x=d, y=d, z=d),
                                  color=self._color(_GOAL_RGBA))]))
        else:
            deletions.append(m.SceneEntityDeletion(timestamp=self._ts(0.0), id="goal"))
        self._log("/world", m.SceneUpdate(deletions=deletions, entities=entities), 0.0)

    def _send_state(self, v) -> None:
        m, c = self._fox, self.config
        t, px, py, pz, qx, qy, qz, qw, vx, vy, vz = v
        tf = m.FrameTransform(timestamp=self._ts(t), parent_frame_id=c.map_frame, child_frame_id=c.base_frame,
                              translation=m.Vector3(x=px, y=py, z=pz), rotation=m.Quaternion(x=qx, y=qy, z=qz, w=qw))
        self._log("/tf", m.FrameTransforms(transforms=[tf]), t)
        self._server.broadcast_time(_ns(t))
        speed = math.sqrt(vx * vx + vy * vy + vz * vz)
        self._log_json("/vehicle/state", {"t_s": t, "speed_mps": speed, "x_m": px, "y_m": py, "z_m": pz,
                                          "vx_mps": vx, "vy_mps": vy, "vz_mps": vz}, t)
        if self._path.add(t, (px, py, pz)):
            self._path_dirty = True

    def _send_reset_path(self, _item) -> None:
        self._path.clear()
        self._path_dirty = True

    def _send_path(self) -> None:
        self._path_dirty = False
        pts = self._path.points()
        if len(pts) < 2:
            return  # nothing drawn: the rate limit does not start, the first real path goes out at once
        self._path_sent_wall = time.monotonic()
        t = float(self._path.times()[-1])
        m = self._fox
        entity = m.SceneEntity(timestamp=self._ts(t), frame_id=self.config.map_frame, id="flown_path",
                               lines=[self._line(pts, _PATH_RGBA, 0.05)])
        self._log("/vehicle/path", m.SceneUpdate(entities=[entity]), t)

    def _send_sensors(self, item) -> None:
        t, depth, points, cam_position, cam_orientation = item
        m, c = self._fox, self.config
        if cam_position is not None and cam_orientation is not None:
            p = [float(v) for v in cam_position]
            q = [float(v) for v in cam_orientation]
            if all(math.isfinite(v) for v in p + q):
                cam = m.FrameTransform(timestamp=self._ts(t), parent_frame_id=c.map_frame, child_frame_id=c.camera_frame,
                                       translation=m.Vector3(x=p[0], y=p[1], z=p[2]),
                                       rotation=m.Quaternion(x=q[0], y=q[1], z=q[2], w=q[3]))
                self._log("/tf", m.FrameTransforms(transforms=[cam]), t)
        if depth is not None:
            depth = np.ascontiguousarray(depth, dtype="<f4")
            h, w = depth.shape
            self._log("/camera/depth", m.RawImage(timestamp=self._ts(t), frame_id=c.camera_frame, width=w, height=h,
                                                  encoding="32FC1", step=4 * w, data=depth.tobytes()), t)
        if points is not None:
            pts = thin_points(points, c.max_cloud_points).astype("<f4", copy=False)
            f32 = m.PackedElementFieldNumericType.Float32
            fields = [m.PackedElementField(name=n, offset=4 * i, type=f32) for i, n in enumerate("xyz")]
            self._log("/camera/cloud", m.PointCloud(timestamp=self._ts(t), frame_id=c.map_frame,
                                                    pose=self._pose((0, 0, 0)), point_stride=12, fields=fields,
                                                    data=pts.tobytes()), t)

    def _send_trajectory(self, item) -> None:
        t, trajectory, points = item
        c = self.config
        if points is None:
            points = sample_trajectory(trajectory, t, c.trajectory_samples, c.trajectory_horizon_s)
        m = self._fox
        lines = [self._line(points, _TRAJ_RGBA, 0.06)] if len(points) >= 2 else []
        entity = m.SceneEntity(timestamp=self._ts(t), frame_id=c.map_frame, id="trajectory", lines=lines)
        self._log("/planner/trajectory", m.SceneUpdate(entities=[entity]), t)

    def _send_replan(self, item) -> None:
        t, ms = item
        self._log_json("/planner/replan", {"t_s": t, "replan_ms": ms}, t)
