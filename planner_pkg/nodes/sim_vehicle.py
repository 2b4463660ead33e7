"""One simulated vehicle's side of the graph, in one place for ``sim_bridge`` (one vehicle) and
``swarm_sim`` (one per drone, in ``/drone<i>``): the topics the embedded simulator publishes after
an advance (``odom``, ``depth/image``, ``cloud``, the step manifest ``sim/lockstep``) with the
stamps of the newest odometry and frame (what the manifest names, docs/lockstep.md), how a
``setpoint`` and a participant's ``planning/lockstep`` report are read, how far one tick of the
wall-clock stepping timer advances sim time, and the lockstep state text of the status.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence, Tuple

from diagnostic_msgs.msg import DiagnosticStatus
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Image, PointCloud2

from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes import lockstep as ls
from planner_pkg.sim.lockstep import NONE_NS, LockstepBarrier, StepManifest, seconds_to_ns
from planner_pkg.types import Setpoint

RESEND_CLOCK_S = 0.5  # while lockstep waits, /clock is re-sent this often (wall s)


class VehicleTopics:
    """The publishers of one simulated vehicle in ``node``'s namespace, and the stamps (ns of sim
    time, ``NONE_NS`` before the first) of the newest odometry and frame they published.

    ``params``: the node's ``ConfigParameters`` of a ``SimBridgeConfig`` (read at every publish:
    ``publish_depth`` / ``publish_cloud`` may change at run time). ``embedded``: the embedded
    simulator also publishes depth images and step manifests, and in lockstep its sensor topics
    are reliable (no frame lost under load; best-effort subscribers still match); a Gazebo
    adapter only republishes odometry and clouds. ``frame_prefix``: put before the body and camera
    frame names (``drone<i>/``: each drone of a swarm has its own ``drone<i>/base_link``, as a
    multi-robot tf tree needs; the world frame ``map`` is shared)."""

    def __init__(self, node, params, embedded: bool = True, frame_prefix: str = ""):
        cfg = params.config
        sensor_qos = ls.LOCKSTEP_SENSOR_QOS if cfg.lockstep and embedded else c.SENSOR_QOS
        self.node, self.params = node, params
        self.frame_prefix = frame_prefix
        self.pub_odom = node.create_publisher(Odometry, c.TOPIC_ODOM, c.ODOM_QOS)
        self.pub_cloud = node.create_publisher(PointCloud2, c.TOPIC_CLOUD, sensor_qos)
        self.pub_depth = node.create_publisher(Image, c.TOPIC_DEPTH, sensor_qos) if embedded else None
        self.pub_manifest = node.create_publisher(DiagnosticStatus, ls.TOPIC_MANIFEST, ls.LOCKSTEP_QOS) \
            if embedded else None
        self.odom_ns = NONE_NS
        self.frame_ns = NONE_NS

    def publish_state(self, state) -> None:
        """One odometry message of ``state`` (a VehicleState; the start's too, re-sent before sim time starts)."""
        cfg = self.params.config
        self.pub_odom.publish(conv.state_to_odometry(state, cfg.map_frame, self.base_frame))
        self.odom_ns = seconds_to_ns(state.t)

    @property
    def base_frame(self) -> str:
        return self.frame_prefix + self.params.config.base_frame

    @property
    def camera_frame(self) -> str:
        return self.frame_prefix + self.params.config.camera_frame

    def publish_output(self, out) -> int:
        """The odometry, then the sensor frames of one advance (``out.odometry``, ``out.frames``,
        oldest first); returns how many frames it had."""
        for state in out.odometry:
            self.publish_state(state)
        return self.publish_frames(out.frames)

    def publish_frames(self, frames) -> int:
        """Depth images and clouds of sensor ``frames`` (oldest first); returns how many frames.
        A frame counts as published (its stamp is the one a manifest names) when its depth image
        or its cloud went out."""
        cfg = self.params.config
        for frame in frames:
            if cfg.publish_depth:
                self.pub_depth.publish(conv.depth_to_image(frame.depth, frame.t, self.camera_frame))
            if cfg.publish_cloud and frame.points is not None:
                self.pub_cloud.publish(conv.points_to_cloud(frame.points, frame.t, cfg.map_frame))
            if cfg.publish_depth or (cfg.publish_cloud and frame.points is not None):
                self.frame_ns = seconds_to_ns(frame.t)
        return len(frames)

    def publish_manifest(self, t_s: float) -> None:
        """The step manifest of sim time ``t_s``: the newest odometry and frame published up to then."""
        manifest = StepManifest(t_ns=seconds_to_ns(t_s), odom_ns=self.odom_ns, frame_ns=self.frame_ns)
        self.pub_manifest.publish(ls.to_msg(self.node.get_name(), manifest))


def read_setpoint(msg, map_frame: str) -> Setpoint:
    """The Setpoint of a ``setpoint`` message; ValueError for another frame than ``map_frame``
    (or none), an unreadable one (NaN, inf, no points) or one that gives nothing to track."""
    if msg.header.frame_id not in ("", map_frame):
        raise ValueError(f"setpoint in frame {msg.header.frame_id!r}, expected {map_frame!r}")
    setpoint = conv.msg_to_setpoint(msg)
    if setpoint.is_empty:
        raise ValueError("empty setpoint: no position, velocity or acceleration given")
    return setpoint


def take_report(barrier: LockstepBarrier, msg: DiagnosticStatus, info, counters: dict, throttle: c.Throttle,
                log, on_fault: Callable[[str], None]) -> bool:
    """Hands a participant report (``planning/lockstep``, with its message ``info``: the publisher's
    GID tells two nodes of one name apart) to ``barrier``. False for one that cannot be read:
    counted in ``counters['bad_lockstep_reports']`` and logged (``throttle``d). ``on_fault(text)``
    once when this report made a lockstep fault."""
    try:
        report = ls.report_from_msg(msg)
    except ValueError as exc:
        counters["bad_lockstep_reports"] += 1
        if throttle("lockstep"):
            log.warning(f"lockstep report refused: {exc}")
        return False
    if report.name not in barrier.reports:
        log.info(f"lockstep: {report.name} reports (next tick at {report.next_ns * 1e-9:.3f} s)")
    had_fault = bool(barrier.fault)
    barrier.saw_report(report, c.publisher_gid(info))
    if barrier.fault and not had_fault:
        on_fault(barrier.fault)
    return True


def lockstep_state(barriers: Sequence[Tuple[str, LockstepBarrier]]) -> str:
    """The status's ``lockstep`` text for ``(label, barrier)`` pairs (none: lockstep is off):
    ``fault``, ``waiting for <label><what>`` (joined by ``; ``), ``engaged`` once all started,
    else ``starting``."""
    if not barriers:
        return "off"
    if any(b.fault for _, b in barriers):
        return "fault"
    on = [f"{label}{b.waiting_for()}" for label, b in barriers if b.waiting_for()]
    if on:
        return "waiting for " + "; ".join(on)
    return "engaged" if all(b.started for _, b in barriers) else "starting"


class StepPacer:
    """How many dynamics steps one tick of the simulator's wall-clock stepping timer advances:
    ``real_time_factor`` x the wall time since the last tick (``0``: ``max_step_s`` per tick),
    never more than ``max_step_s`` at once (a stall slows the simulation rather than making it
    jump), what is less than one step carried to the next tick, cut to what lockstep allows."""

    def __init__(self):
        self._last_wall: Optional[float] = None
        self._carry_s = 0.0  # sim time due but not yet stepped
        self.at_limit = False  # the last tick was cut short by lockstep
        self._resent_wall = -math.inf  # wall time /clock was last re-sent while waiting

    def steps(self, cfg, wall: float, dt: float, allowance: Callable[[float], Optional[int]]) -> int:
        """Steps of ``dt`` s to advance at wall time ``wall`` (s, monotonic); ``cfg``: a
        SimBridgeConfig; ``allowance(wall)``: the steps lockstep allows now (None: no limit).
        What lockstep holds back stays due (at most ``max_step_s``), caught up once it allows."""
        elapsed = cfg.step_period_s if self._last_wall is None else wall - self._last_wall
        self._last_wall = wall
        want = cfg.max_step_s if cfg.real_time_factor == 0 else min(elapsed * cfg.real_time_factor, cfg.max_step_s)
        self._carry_s = min(self._carry_s + want, cfg.max_step_s)
        n = int(math.floor(self._carry_s / dt + 1e-6))
        allowed = allowance(wall)
        self.at_limit = allowed is not None and allowed <= n
        if self.at_limit:
            n = allowed
        self._carry_s = max(self._carry_s - n * dt, 0.0)
        return n

    def resend_due(self, wall: float) -> bool:
        """Whether, held by lockstep at wall time ``wall``, the simulator re-sends ``/clock`` now
        (every ``RESEND_CLOCK_S``: a node that missed it, or restarted, needs one); noted as sent."""
        if self.at_limit and wall - self._resent_wall >= RESEND_CLOCK_S:
            self._resent_wall = wall
            return True
        return False
