"""The ROS side of the simulation lockstep (the rules are in ``planner_pkg/sim/lockstep.py``).

Two topics, both ``diagnostic_msgs/DiagnosticStatus`` with integer key/values (ns of sim time),
reliable and transient-local (a node that starts late still gets the newest one):

* :data:`TOPIC_MANIFEST` (``sim/lockstep``), sim_bridge -> participants: a
  :class:`~planner_pkg.sim.lockstep.StepManifest` after every advance, before ``/clock``.
* :data:`TOPIC_REPORT` (``planning/lockstep``), participants -> sim_bridge (and the planner's
  reports -> traj_server): a :class:`~planner_pkg.sim.lockstep.ParticipantReport` after every tick.

:class:`LockstepParticipant` is what a planner, policy or trajectory server node holds. Its
periodic callbacks are made with :meth:`~LockstepParticipant.create_timer`: on wall time
(hardware) or with lockstep off that is a plain rclpy timer and nothing is published. In lockstep
the participant keeps the schedule itself (a fixed grid of sim time per callback, as an rclpy
timer's): a callback due at sim time ``T`` runs once the node's clock has reached ``T`` and it
holds the inputs of ``T`` (for the trajectory server, also the planners' trajectories of ``T``);
callbacks due together run in the order they were due, then in creation order; and once nothing
is due the node reports its next one. It is driven by the clock's jump callback (which only
triggers a guard condition: nothing runs inside rcl) and by the arrival of every input, not by
rclpy's sim-time timers: a simulator that publishes one clock message per step and then waits
for the node must not depend on a timer's wake-up (a missed one stalls the flight).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Mapping, Optional, Sequence

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from planner_pkg.sim.lockstep import InputGate, ParticipantReport, PeerGate, StepManifest, TrajectoryGate

TOPIC_MANIFEST = "sim/lockstep"
TOPIC_REPORT = "planning/lockstep"
LOCKSTEP_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: Subscriptions to them: deep, because a topic without keys is one instance, so a reader's depth
#: is shared by all its writers; at depth 1 the trajectory server's report could overwrite the
#: planner's before the simulator took it, and the simulator would wait for a report already sent.
LOCKSTEP_SUB_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE,
                              durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: Sensor frames in lockstep: reliable and deep enough for the frames of one planning period, so
#: none is lost under load (the simulator publishes them reliably; a best-effort subscriber such as
#: RViz still matches). Transient local: the first frames go out with the first advance, and
#: nothing before it proves that the simulator's frame writer and the planner's reader have
#: matched (DDS discovery is per pair of endpoints; the participant's report only proves the
#: report topic). A frame published before the match would be lost, and the first plan made from
#: fewer frames: two runs of one swarm flight differed from drone 0's first plan on. With the
#: writer's history a reader that matches late still gets them, in order.
LOCKSTEP_SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=30, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)


def stamp_ns(stamp) -> int:
    """builtin_interfaces/Time -> integer ns (exact, unlike a float of seconds)."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def to_msg(name: str, payload) -> DiagnosticStatus:
    return DiagnosticStatus(name=name, hardware_id="lockstep",
                            values=[KeyValue(key=k, value=v) for k, v in payload.to_pairs()])


def manifest_from_msg(msg: DiagnosticStatus) -> StepManifest:
    return StepManifest.from_pairs((kv.key, kv.value) for kv in msg.values)


def report_from_msg(msg: DiagnosticStatus) -> ParticipantReport:
    return ParticipantReport.from_pairs((kv.key, kv.value) for kv in msg.values)


@dataclass
class _Task:
    """A periodic callback on the participant's own sim-time schedule."""

    period_ns: int
    next_ns: int
    callback: Callable[[], None]
    order: int
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class LockstepParticipant:
    """A node's part in the lockstep.

    node: the rclpy node; enabled: its ``lockstep_report`` parameter (active only under
    ``use_sim_time``); frames: it takes sensor frames (wait for the manifest's frame); setpoints /
    trajectories / goals: it publishes setpoints / trajectories / accepts goals (counted in its
    reports); follows_planners: the planner node names whose ticks and reported trajectories it
    waits for (trajectory server; with a lockstep simulator, from each one's first report on).
    broadcasts: it sends EGO-Swarm broadcasts (counted in its reports; :meth:`published_broadcast`);
    peers: drone id -> the lockstep report topic of that peer's planner, whose ticks before this
    one's and whose reported broadcasts (:meth:`saw_broadcast`) a tick waits for (``PeerGate``).
    """

    def __init__(self, node, enabled: bool, *, frames: bool, setpoints: bool = False, trajectories: bool = False,
                 goals: bool = False, follows_planners: Sequence[str] = (), broadcasts: bool = False,
                 peers: Optional[Mapping[int, str]] = None):
        self._node = node
        self.active = bool(enabled and node.get_parameter("use_sim_time").value)
        self.inputs = InputGate(frames=frames)
        self.planners: Optional[TrajectoryGate] = TrajectoryGate(follows_planners) if follows_planners else None
        self.setpoints = 0 if setpoints else -1
        self.trajectories = 0 if trajectories else -1
        self.goals = 0 if goals else -1
        self.broadcasts = 0 if broadcasts else -1
        self.peers: Optional[PeerGate] = PeerGate(sorted(peers)) if peers else None
        self.reports = 0
        self.ticks = 0
        self.clock_jumps = 0
        self.waiting = ""  # what a due callback waits for ('' = none waits)
        self.bad_messages = 0
        self._tasks: List[_Task] = []
        self._running = False
        self._pub = None
        self._jump = None
        self._wake = None
        if not self.active:
            return
        self._pub = node.create_publisher(DiagnosticStatus, TOPIC_REPORT, LOCKSTEP_QOS)
        node.create_subscription(DiagnosticStatus, TOPIC_MANIFEST, self._on_manifest, LOCKSTEP_SUB_QOS)
        if self.planners is not None:
            node.create_subscription(DiagnosticStatus, TOPIC_REPORT, self._on_report, LOCKSTEP_SUB_QOS)
        for peer, topic in sorted((peers or {}).items()):
            node.create_subscription(DiagnosticStatus, topic, lambda msg, peer=int(peer): self._on_peer_report(peer, msg),
                                     LOCKSTEP_SUB_QOS)
        # the clock's jump callback runs inside rcl (C): it only wakes the executor, which then runs
        # what is due from a guard condition (an exception there is an ordinary callback exception,
        # never one thrown through rcl's C frames, and nothing runs while rcl holds the clock)
        self._wake = node.create_guard_condition(self._drain)
        self._jump = node.get_clock().create_jump_callback(
            JumpThreshold(min_forward=Duration(nanoseconds=1), min_backward=None, on_clock_change=False),
            post_callback=self._on_clock_jump)

    def _on_clock_jump(self, _jump) -> None:
        self.clock_jumps += 1
        wake = self._wake
        if wake is not None:
            wake.trigger()

    def close(self) -> None:
        """Stop: no callback runs any more (call before the node is destroyed)."""
        self.active = False
        self._tasks = []
        if self._jump is not None:
            try:
                self._jump.unregister()
            except Exception:  # noqa: BLE001 - the clock may already be gone at shutdown
                pass
            self._jump = None
        self._wake = None

    # -- the schedule ----------------------------------------------------------------------------
    def create_timer(self, period_s: float, callback: Callable[[], None]):
        """A periodic callback: an rclpy timer when not in lockstep, else one on this schedule
        (first call one period from now, as an rclpy timer's). Stop it with :meth:`destroy_timer`."""
        if not self.active:
            return self._node.create_timer(period_s, callback)
        period_ns = int(float(period_s) * 1e9)  # as rclpy rounds a timer period
        if period_ns <= 0:
            raise ValueError(f"timer period must be positive, got {period_s!r} s")
        now = self._node.get_clock().now().nanoseconds
        task = _Task(period_ns, now + period_ns, callback, len(self._tasks))
        self._tasks.append(task)
        return task

    def destroy_timer(self, handle) -> None:
        if handle is None:
            return
        if isinstance(handle, _Task):
            handle.cancel()
            self._tasks = [t for t in self._tasks if not t.cancelled]
        else:
            self._node.destroy_timer(handle)

    # -- what the node tells it ------------------------------------------------------------------
    def saw_odom(self, stamp) -> None:
        if self.active:
            self.inputs.saw_odom(stamp_ns(stamp))
            self._drain()

    def saw_frame(self, stamp) -> None:
        if self.active:
            self.inputs.saw_frame(stamp_ns(stamp))
            self._drain()

    def saw_trajectory(self) -> None:
        if self.active and self.planners is not None:
            self.planners.saw_trajectory()
            self._drain()

    def saw_broadcast(self, peer: int) -> None:
        """A broadcast of drone ``peer`` arrived (also one its table then refuses: the peer counts what it sent)."""
        if self.active and self.peers is not None:
            self.peers.saw_broadcast(int(peer))
            self._drain()

    def published_broadcast(self) -> None:
        if self.broadcasts >= 0:
            self.broadcasts += 1

    def published_setpoint(self) -> None:
        if self.setpoints >= 0:
            self.setpoints += 1

    def published_trajectory(self) -> None:
        if self.trajectories >= 0:
            self.trajectories += 1

    def accepted_goal(self) -> None:
        """A new goal: counted, and reported at once (a simulator waiting to start hears of it) once
        this node holds a step manifest. Before its first manifest the report waits for it
        (``_on_manifest`` reports on joining, with the goal counted): a report lets the simulator
        start sim time, and a node without a manifest would run its first ticks ungated (no
        manifest = no lockstep simulator, :meth:`InputGate.missing`), before the sensor frames and
        the peers' broadcasts of their instant. The goal can come first: the mission's goal and the
        simulator's manifest reach the node over separately discovered endpoints."""
        if self.goals >= 0:
            self.goals += 1
            if not self._running and self.inputs.manifest is not None:
                self.report()

    # -- running what is due ----------------------------------------------------------------------
    def _missing(self, now: int) -> str:
        why = self.inputs.missing(now)
        if not why and self.planners is not None:
            why = self.planners.missing(now, simulated=self.inputs.manifest is not None)
        if not why and self.peers is not None:
            why = self.peers.missing(now, simulated=self.inputs.manifest is not None)
        return why

    def _drain(self) -> None:
        """Run every callback due by the node's clock whose inputs are in; report when none is due."""
        if not self.active or self._running:
            return  # (a callback that publishes can bring us back here: the loop below goes on)
        self._running = True
        ran = False
        try:
            while True:
                now = self._node.get_clock().now().nanoseconds
                due = [t for t in self._tasks if t.next_ns <= now]
                if not due:
                    self.waiting = ""
                    break
                why = self._missing(now)
                if why:
                    self.waiting = why
                    return
                task = min(due, key=lambda t: (t.next_ns, t.order))
                task.next_ns += task.period_ns
                if task.next_ns <= now:  # (a clock jump past several periods: once, then on the grid)
                    task.next_ns += ((now - task.next_ns) // task.period_ns + 1) * task.period_ns
                ran = True
                self.ticks += 1
                task.callback()
        finally:
            self._running = False
        if ran:
            self.report()

    def report(self) -> Optional[int]:
        """Publish the sim time (ns) of the node's next scheduled callback; returns it (None: not active)."""
        if self._pub is None:
            return None
        now = self._node.get_clock().now().nanoseconds
        next_ns = min((t.next_ns for t in self._tasks), default=now)
        self.reports += 1
        report = ParticipantReport(name=self._node.get_name(), next_ns=int(next_ns), setpoints=self.setpoints,
                                   trajectories=self.trajectories, goals=self.goals, seq=self.reports,
                                   broadcasts=self.broadcasts)
        self._pub.publish(to_msg(self._node.get_name(), report))
        return int(next_ns)

    # -- subscriptions ---------------------------------------------------------------------------
    def _on_manifest(self, msg: DiagnosticStatus) -> None:
        try:
            self.inputs.saw_manifest(manifest_from_msg(msg))
        except ValueError as exc:
            self.bad_messages += 1
            self._node.get_logger().warning(f"lockstep manifest refused: {exc}", throttle_duration_sec=2.0)
            return
        if self.reports == 0 and not self._running:
            self.report()  # joining: the simulator hears of this node (and of its next tick)
        self._drain()

    def _on_report(self, msg: DiagnosticStatus) -> None:
        try:
            report = report_from_msg(msg)
        except ValueError as exc:
            self.bad_messages += 1
            self._node.get_logger().warning(f"lockstep report refused: {exc}", throttle_duration_sec=2.0)
            return
        if report.name == self._node.get_name():
            return
        self.planners.saw_report(report)
        self._drain()

    def _on_peer_report(self, peer: int, msg: DiagnosticStatus) -> None:
        try:
            report = report_from_msg(msg)
        except ValueError as exc:
            self.bad_messages += 1
            self._node.get_logger().warning(f"lockstep report of drone {peer} refused: {exc}",
                                            throttle_duration_sec=2.0)
            return
        self.peers.saw_report(peer, report)
        self._drain()

    def status_values(self) -> list:
        return [("lockstep", "off" if not self.active else ("waiting for " + self.waiting if self.waiting
                                                            else "in step")),
                ("lockstep_reports", self.reports)]
