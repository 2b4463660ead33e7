"""The planner node's part of an EGO-Swarm over ROS 2: the shared trajectory broadcast topic.

A :class:`RosBroadcast` is what :class:`~planner_pkg.planning.swarm.SwarmAgent` calls its bus
(the ROS counterpart of the in-process :class:`~planner_pkg.planning.swarm.LocalBroadcast`): its
``tables[drone_id]`` is this drone's :class:`~planner_pkg.planning.swarm.SwarmTrajectoryTable`,
filled from the shared topic (absolute, ``/swarm/trajectories`` by default, so that drones in
their own namespaces ``/drone<i>`` meet on it), and ``publish`` sends this drone's B-spline there
(``conversions.swarm_broadcast_to_msg``; the encoding is in docs/swarm.md).

A broadcast is not fed to the table when it arrives but at the start of this node's first planning
tick after it was *sent* (:meth:`RosBroadcast.take_pending`, with the tick's time; the message's
stamp is its send time): at a tick due at ``T``, the broadcasts sent before ``T`` that have arrived
are in, those sent at ``T`` or later are not. In lockstep every drone's tick of ``T`` runs while
the clock stands at ``T``, so a peer's broadcast of that same instant is never used at ``T``
(whether it has already arrived or not), and the earlier ones have arrived unless DDS took longer
than a whole planning period of sim time: which broadcasts a plan sees does not depend on the
machine's load, nor on the order in which this node's executor took the clock and the broadcast.
The receive time (the time base of the table's timeout) is the tick's time. A message that cannot be read is refused with a throttled log
line and counted (``refused``). A message with this drone's own id is never fed to the table: the
node's own publications come back on the topic it also subscribes (skipped quietly); one from
another publisher means two drones share an id, which is logged (throttled) and counted
(``duplicate_id``): the swarm cannot work so, and the status shows it.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from trajectory_msgs.msg import MultiDOFJointTrajectory

from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.planning.swarm import SwarmTrajectoryTable

__all__ = ["RosBroadcast", "SWARM_TOPIC", "SWARM_QOS", "drone_namespace", "peer_report_topic"]

SWARM_TOPIC = "/swarm/trajectories"
#: broadcasts held for the next tick at most (64 drones x 10 Hz x 1 s without a tick; older ones dropped)
MAX_PENDING = 640
#: Reliable and deep: one reader holds every writer's messages in one queue (a topic without keys),
#: and every drone broadcasts each planning tick. Transient local: a drone that discovers a peer late
#: (DDS discovery is per pair of endpoints) still gets what the peer sent before, so the lockstep's
#: count of a peer's broadcasts (``PeerGate``) can be met; older ones than the table holds are dropped.
SWARM_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)


def drone_namespace(i: int) -> str:
    """``/drone<i>``: drone i's namespace (i from 0, as ``swarm fly`` numbers drones)."""
    return f"/drone{int(i)}"


def peer_report_topic(i: int) -> str:
    """The lockstep report topic of drone i's nodes (its planner's reports count its broadcasts)."""
    from planner_pkg.nodes.lockstep import TOPIC_REPORT

    return f"{drone_namespace(i)}/{TOPIC_REPORT}"


class RosBroadcast:
    """This drone's end of the broadcast topic (see the module docstring)."""

    def __init__(self, node, drone_id: int, topic: str = SWARM_TOPIC, timeout_s: Optional[float] = None,
                 frame_id: str = conv.MAP_FRAME, on_sent: Optional[Callable[[], None]] = None,
                 on_arrival: Optional[Callable[[int], None]] = None):
        """on_sent(): after each broadcast sent; on_arrival(drone id): after each peer's broadcast
        that could be read has arrived (the lockstep counts both: ``LockstepParticipant``)."""
        self.node = node
        self.on_sent = on_sent
        self.on_arrival = on_arrival
        self.drone_id = int(drone_id)
        self.frame_id = frame_id
        table = SwarmTrajectoryTable() if timeout_s is None else SwarmTrajectoryTable(timeout_s)
        self.tables: Dict[int, SwarmTrajectoryTable] = {self.drone_id: table}
        self.throttle = c.Throttle(2.0)
        self.sent = 0
        self.received = 0
        self.refused = 0
        self.duplicate_id = 0
        self.peers: Dict[int, int] = {}  # drone id -> broadcasts taken
        self._own_gids: set = set()
        self._pending: list = []  # (send time ns, drone id, control points, dt, t_start), arrival order
        self.pub = node.create_publisher(MultiDOFJointTrajectory, topic, SWARM_QOS)
        self.sub = node.create_subscription(MultiDOFJointTrajectory, topic, self._on_broadcast, SWARM_QOS)
        self.topic = self.pub.topic_name

    @property
    def table(self) -> SwarmTrajectoryTable:
        return self.tables[self.drone_id]

    # -- SwarmAgent's bus ------------------------------------------------------------------------
    def publish(self, drone_id: int, spline, t_start: float, t_now: float) -> None:
        """Broadcast ``spline`` (a cubic UniformBSpline) starting at ``t_start`` s (ROS clock).

        The stamp is this node's ROS clock at the send, not the caller's ``t_now``: the peers'
        :meth:`take_pending` orders broadcasts by it, and only the clock says which tick sent one
        (the swarm agent's reset broadcasts its hover with ``t_now`` 0 from inside its first
        planning tick; stamped 0, a peer took it at that same instant or not, depending on which
        of the two ticks DDS and the load let run first)."""
        try:
            msg = conv.swarm_broadcast_to_msg(drone_id, spline.control_points, spline.dt, float(t_start),
                                              max(c.now_s(self.node), 0.0), self.frame_id)
        except ValueError as exc:  # a trajectory that cannot be sent: the others keep the previous one
            if self.throttle("send"):
                self.node.get_logger().warning(f"swarm broadcast not sent: {exc}")
            return
        self.pub.publish(msg)
        self.sent += 1
        if self.on_sent is not None:
            self.on_sent()

    # -- the topic -------------------------------------------------------------------------------
    def _is_own(self, gid: bytes) -> bool:
        if gid in self._own_gids:
            return True
        try:
            infos = self.node.get_publishers_info_by_topic(self.topic)
        except Exception:  # noqa: BLE001 - graph query while shutting down
            return False
        me, ns = self.node.get_name(), self.node.get_namespace()
        for info in infos:
            if info.node_name == me and info.node_namespace == ns:
                self._own_gids.add(bytes(info.endpoint_gid))
        return gid in self._own_gids

    def _on_broadcast(self, msg: MultiDOFJointTrajectory, info) -> None:  # (two arguments: rclpy passes the info)
        log = self.node.get_logger()
        try:
            drone_id, q, dt, t_start, sent = conv.msg_to_swarm_broadcast(msg, self.frame_id)
        except ValueError as exc:
            self.refused += 1
            if self.throttle("refused"):
                log.warning(f"swarm broadcast refused ({self.refused} so far): {exc}")
            return
        if drone_id == self.drone_id:
            if not self._is_own(c.publisher_gid(info)):
                self.duplicate_id += 1
                if self.throttle("duplicate"):
                    log.warning(f"swarm broadcast with this drone's own id {drone_id} from another node "
                                f"({self.duplicate_id} so far): two drones share an id; ignored")
            return
        self._pending.append((int(round(sent * 1e9)), drone_id, q, dt, t_start))
        del self._pending[:-MAX_PENDING]
        if self.on_arrival is not None:
            self.on_arrival(drone_id)

    def take_pending(self, tick_ns: int) -> int:
        """Feed the table every broadcast sent before ROS time ``tick_ns`` that has arrived (in arrival
        order; received at the tick's time); returns how many were taken."""
        due = [p for p in self._pending if p[0] < tick_ns]
        if not due:
            return 0
        self._pending = [p for p in self._pending if p[0] >= tick_ns]
        now = tick_ns * 1e-9
        for _, drone_id, q, dt, t_start in due:
            rejected = self.table.rejected
            if not self.table.update(drone_id, q, dt, t_start, now):
                if self.table.rejected > rejected:  # (the table logs why; an older broadcast arriving late is no error)
                    self.refused += 1
                continue
            self.received += 1
            self.peers[drone_id] = self.peers.get(drone_id, 0) + 1
        return len(due)

    def status_values(self) -> list:
        fresh, stale = self.table.split(c.now_s(self.node), exclude=self.drone_id)
        return [("swarm_drone_id", self.drone_id), ("swarm_topic", self.topic), ("swarm_sent", self.sent),
                ("swarm_received", self.received), ("swarm_refused", self.refused),
                ("swarm_duplicate_id", self.duplicate_id),
                ("swarm_fresh", ",".join(str(t.drone_id) for t in fresh) or "none"),
                ("swarm_stale", ",".join(str(t.drone_id) for t in stale) or "none")]
