"""The bringup's mission (``bringup ... --goal``): publish the goal, listen to ``odom`` and the
simulator's ``status``, and let a :class:`~planner_pkg.sim.mission_judge.MissionJudge` decide.

It runs in the bringup process on its own rclpy context. What it trusts (issue 20 item 7):

* ``odom`` only from the graph's simulator: the publisher of each message (its GID, from the
  message info) must be a node named ``sim_bridge`` in the bringup's namespace, in the process the
  bringup started (``simulator_pid``; Fast DDS writes the low 16 bits of the process id into
  bytes 4-5 of every GUID, little-endian; with another RMW the first simulator heard is taken),
  and only that one is heard from then on (a second simulator on the same ROS domain, e.g. a
  leftover run, is refused and reported). Odometry also passes ``conversions.odometry_to_state``: finite, frames
  ``map`` / ``base_link``, inside the flight envelope.
* ``status`` of that same simulator (same DDS participant) as ground truth: position, collision,
  crash and ``lockstep_fault``; a planner's status only for its replan times.
* With the embedded simulator (``ground_truth_expected``) the ground truth decides reached and
  collided; a lockstep fault ends the mission at once.

A mission whose odometry stops for ``stall_timeout_wall_s`` wall seconds after the goal ends as
``stalled`` (it would otherwise wait for a sim time that never comes).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from planner_pkg.sim.mission_judge import MissionJudge, ground_truth_from_status

__all__ = ["Mission", "SIM_NODE"]

SIM_NODE = "sim_bridge"
#: Longest wait, wall s, for the recorder to report that it records once it listens to the goal.
RECORDER_WAIT_S = 10.0
#: wall seconds a mission that ended waits, at most, for the odometry of its last instants (separate
#: topic; the wait ends as soon as it is in). 2 s was too short on a loaded machine: a fresh-clone
#: run's log (and recording) stopped 1 m short of the goal its summary said was reached.
END_SAMPLES_WAIT_S = 15.0


def _gid_bytes(gid) -> bytes:
    """A publisher GID as bytes, from message info (``{'data': bytes}``) or endpoint info (list of ints)."""
    if isinstance(gid, dict):
        gid = gid.get("data", b"")
    return bytes(gid or b"")


def _participant(gid: bytes) -> bytes:
    """The DDS participant part of a 16-byte GID (its 12-byte GUID prefix): one per process/context,
    shared by the ``odom`` and ``status`` publishers of one node."""
    return gid[:12] if len(gid) == 16 else gid


def fastdds_pid16(info) -> Optional[int]:
    """Low 16 bits of the publishing process id from a Fast DDS GID (its GUID prefix carries it in
    bytes 4-5, little-endian), or None for another RMW."""
    gid = info.get("publisher_gid") if isinstance(info, dict) else None
    if not isinstance(gid, dict) or gid.get("implementation_identifier") != "rmw_fastrtps_cpp":
        return None
    data = _gid_bytes(gid)
    return int.from_bytes(data[4:6], "little") if len(data) == 16 else None


class Mission:
    """See the module docstring. ``poll()`` from the bringup's loop; ``done`` is set at the end."""

    def __init__(self, world, goal: np.ndarray, tolerance_m: float, timeout_s: float, radius_m: float,
                 namespace: str = "", ground_truth_expected: bool = True, stall_timeout_wall_s: float = 30.0,
                 simulator_pid: Optional[Callable[[], Optional[int]]] = None,
                 recorder_status_topic: Optional[str] = None):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        from planner_pkg.nodes import common as c

        self.judge = MissionJudge(world, goal, tolerance_m, timeout_s, radius_m,
                                  ground_truth_expected=ground_truth_expected)
        self.goal = np.asarray(goal, dtype=np.float64)
        self.namespace = namespace.rstrip("/") or "/"
        self.stall_timeout_wall_s = float(stall_timeout_wall_s)
        self.simulator_pid = simulator_pid  # () -> pid of the sim_bridge process this bringup started
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.replan_ms: List[float] = []
        self.planner_status = ""
        self.refused: Dict[str, int] = {}
        self.warnings: List[str] = []  # one line each, printed by the bringup
        self.goal_sent = False
        self.wait_for_recorder = False  # --record: the goal goes out once the recorder listens too
        self._recorder_seen: Optional[float] = None  # wall time the recorder was first on the goal topic
        self.recorder_recording = False  # the recorder's status said it records messages
        self.wall_goal: Optional[float] = None
        self.wall_end: Optional[float] = None
        self._wall_progress = time.monotonic()
        self._sim_participant: Optional[bytes] = None
        self._publishers: Dict[bytes, Tuple[str, str]] = {}  # publisher GID -> (node name, namespace)
        self._lookups: Dict[bytes, float] = {}  # publisher GID -> wall time of the last graph query
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
        self.node = Node("mission", namespace=namespace or None, context=self.context)
        self.goal_pub = self.node.create_publisher(PoseStamped, c.TOPIC_GOAL, c.GOAL_QOS)
        self.odom_sub = self.node.create_subscription(Odometry, c.TOPIC_ODOM, self._on_odom, c.ODOM_QOS)
        self.status_sub = self.node.create_subscription(DiagnosticArray, c.TOPIC_STATUS, self._on_status,
                                                        c.STATUS_QOS)
        if recorder_status_topic is not None:  # a recorder outside this namespace (a swarm's, at the root)
            self.node.create_subscription(DiagnosticArray, recorder_status_topic, self._on_recorder_status,
                                          c.STATUS_QOS)
        # fully qualified names, read once: a handle's name cannot be read once it is being destroyed
        self.topics = {"odom": self.odom_sub.topic_name, "status": self.status_sub.topic_name,
                       "goal": self.goal_pub.topic_name}
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    # -- who sent it -----------------------------------------------------------------------------
    def _publisher(self, info, topic: str) -> Tuple[str, str, bytes]:
        """(node name, namespace, participant) of the publisher of one message; name '' while the
        graph does not know it yet (DDS matches an endpoint before ROS learns its node's name)."""
        gid = _gid_bytes(info.get("publisher_gid") if isinstance(info, dict) else None)
        if not gid:
            return "", "", b""
        now = time.monotonic()
        if gid not in self._publishers and now - self._lookups.get(gid, -1.0) >= 0.1:
            self._lookups[gid] = now
            try:
                endpoints = self.node.get_publishers_info_by_topic(topic)
            except Exception:  # noqa: BLE001 - graph query while shutting down
                endpoints = []
            for endpoint in endpoints:
                name = endpoint.node_name
                if name and not name.startswith("_NODE_"):  # _NODE_NAME_UNKNOWN_: ask again later
                    self._publishers[_gid_bytes(endpoint.endpoint_gid)] = (name, endpoint.node_namespace)
        name, ns = self._publishers.get(gid, ("", ""))
        return name, ns, _participant(gid)

    def _from_simulator(self, info, topic: str, what: str) -> bool:
        """Whether a message comes from this graph's simulator (see the module docstring)."""
        name, ns, participant = self._publisher(info, topic)
        if not name:
            self.refused[f"{what} before its publisher was known"] = \
                self.refused.get(f"{what} before its publisher was known", 0) + 1
            return False
        if name != SIM_NODE or (ns.rstrip("/") or "/") != self.namespace:
            who = f"node {ns.rstrip('/')}/{name}"
            self._refuse(f"{what} from {who}", f"{what} from {who} ignored: only {SIM_NODE} "
                         f"in namespace {self.namespace} is trusted")
            return False
        if self._sim_participant is None:
            expected = self.simulator_pid() if self.simulator_pid is not None else None
            pid16 = fastdds_pid16(info)
            if expected is not None and pid16 is not None and pid16 != expected & 0xFFFF:
                self._refuse(f"{what} from another process's {SIM_NODE}",
                             f"a {SIM_NODE} that this bringup did not start publishes {what} on this ROS domain "
                             f"(another graph? give each run its own ROS_DOMAIN_ID); it is not heard")
                return False
            self._sim_participant = participant
        if participant != self._sim_participant:
            self._refuse(f"{what} from a second {SIM_NODE}",
                         f"a second {SIM_NODE} publishes {what} on this ROS domain (another graph? give each run its "
                         f"own ROS_DOMAIN_ID); only the first one is heard")
            return False
        return True

    def _refuse(self, key: str, warning: str) -> None:
        self.refused[key] = self.refused.get(key, 0) + 1
        if self.refused[key] == 1:
            self.warnings.append(warning)

    # -- callbacks -------------------------------------------------------------------------------
    # both take the message info (rclpy passes it to a two-argument callback): its publisher GID
    def _on_odom(self, msg, info) -> None:
        from planner_pkg.nodes.conversions import odometry_to_state

        if not self._from_simulator(info, self.topics["odom"], "odom"):
            return
        try:
            s = odometry_to_state(msg, child_frame_id=None)  # any body frame: a swarm drone's is drone<i>/base_link
        except ValueError as exc:
            self._refuse("odom unreadable", f"odometry refused: {exc}")
            return
        self._feed("odom out of order", "odometry", lambda: self.judge.odometry(s.t, s.position, s.velocity))

    def _recorder_says(self, v: dict) -> None:
        try:
            messages = int(v.get("messages", "0"))
        except ValueError:
            messages = 0
        self.recorder_recording = self.recorder_recording or (v.get("message") == "recording" and messages > 0)

    def _on_recorder_status(self, msg) -> None:
        """The status topic of a recorder outside this mission's namespace: only its entries count."""
        from planner_pkg.nodes.conversions import status_values

        v = status_values(msg)
        if v.get("name", "").endswith("recorder"):
            self._recorder_says(v)

    def _on_status(self, msg, info) -> None:
        from planner_pkg.nodes.conversions import status_values

        v = status_values(msg)
        name = v.get("name", "")
        if name.endswith(SIM_NODE):
            if not self._from_simulator(info, self.topics["status"], "status"):
                return
            try:
                truth = ground_truth_from_status(v)
            except ValueError as exc:
                self._refuse("status unreadable", f"simulator status refused: {exc}")
                return
            if truth is not None:
                self._feed("status out of order", "simulator status", lambda: self.judge.ground_truth(truth))
            return
        if name.endswith("recorder"):
            self._recorder_says(v)
            return
        if name.endswith("planner"):
            self.planner_status = v.get("goal_status", "")
            med = v.get("replan_ms_median", "n/a")
        elif name.endswith("policy"):  # the policy's "replan" is one network step
            med = v.get("inference_ms_median", "n/a")
        else:
            return
        try:
            value = float(med)
        except ValueError:
            return
        if np.isfinite(value) and 0.0 <= value < 1e6:
            self.replan_ms.append(value)

    def _feed(self, key: str, what: str, feed: Callable[[], Optional[str]]) -> None:
        """One input to the judge (``feed`` returns why it was refused, or None), under the lock;
        nothing once the mission is over. Accepted odometry counts as progress (see ``poll``)."""
        with self.lock:
            if self.judge.done and what != "odometry":  # late odometry may still complete the log
                return
            why = feed()
            if why is not None:
                self._refuse(key, f"{what} refused: {why}")
            elif what == "odometry":
                self._wall_progress = time.monotonic()
            self._check_done()

    def _check_done(self) -> None:
        if self.judge.done and not self.done.is_set():
            self.wall_end = time.monotonic()
            self.done.set()

    # -- the bringup's loop ----------------------------------------------------------------------
    def poll(self) -> None:
        """Send the goal when the graph is ready; end a mission that cannot go on: odometry that
        stalled (twice the allowance before the goal: nodes are still starting), or no planner
        listening to the goal for the mission's whole timeout of sim time."""
        self.send_goal()
        if self.done.is_set():
            return
        with self.lock:
            quiet = time.monotonic() - self._wall_progress
            allowance = self.stall_timeout_wall_s * (1.0 if self.goal_sent else 2.0)
            latest = self.judge.latest_time()
            if quiet >= allowance:
                self.judge.finish(f"stalled: no odometry from the simulator for {quiet:.0f} s wall", latest)
            elif not self.goal_sent and latest is not None and latest >= self.judge.timeout_s:
                self.judge.finish(f"not_started: no planner listened to {self.topics['goal']} within "
                                  f"{self.judge.timeout_s:g} s of sim time", latest)
            self._check_done()

    def wait_for_log_end(self, timeout_s: float = END_SAMPLES_WAIT_S) -> bool:
        """After the mission ended on a simulator report: wait (at most ``timeout_s`` wall) for the
        odometry up to that instant, still on its way on its own topic; True when the log has it."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self.lock:
                if self.judge.log_reaches_end():
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def send_goal(self) -> bool:
        """Publish the goal once the planner subscribes and odometry flows; True when sent."""
        from planner_pkg.nodes.conversions import goal_to_pose

        if self.goal_sent:
            return True
        if self.goal_pub.get_subscription_count() == 0 or len(self.judge.log) == 0 or not self._goal_listeners_ready():
            return False
        with self.lock:
            if self.judge.done:  # e.g. a lockstep fault before the goal
                return False
            self.judge.start()
            self.wall_goal = self._wall_progress = time.monotonic()
        self.goal_pub.publish(goal_to_pose(self.goal))
        self.goal_sent = True
        return True

    def _goal_listeners_ready(self) -> bool:
        """Every node that must hear the (volatile) goal is subscribed and matched: a flying node
        (planner / policy: any subscriber but the recorder) and, with ``--record``, the recorder,
        which should also have said it records (its status: ``recording``, messages > 0; a node
        that subscribed but does not spin yet loses what its queue cannot hold), so the recording
        holds the whole flight; that is waited for ``RECORDER_WAIT_S`` at most."""
        try:
            infos = self.node.get_subscriptions_info_by_topic(self.topics["goal"])
        except Exception:  # noqa: BLE001 - graph query while shutting down
            return False
        names = {i.node_name for i in infos}
        if not names - {"recorder"}:
            return False
        if self.wait_for_recorder:
            if "recorder" not in names:
                return False
            now = time.monotonic()
            if self._recorder_seen is None:
                self._recorder_seen = now
            if not self.recorder_recording and now - self._recorder_seen < RECORDER_WAIT_S:
                return False
        return self.goal_pub.get_subscription_count() >= len(infos)

    @property
    def log(self):
        """Every accepted odometry sample (before the goal too)."""
        return self.judge.log

    def flight_log(self):
        """This mission's flight (``MissionJudge.flight_log``): what ``--log`` and ``--plot`` show."""
        with self.lock:
            return self.judge.flight_log()

    @property
    def reason(self) -> str:
        return self.judge.reason

    @property
    def run_failed(self) -> bool:
        return self.judge.run_failed

    def summary(self, planner: str, world_name: str, vehicle: str = "quadrotor"):
        """The mission as an :class:`~planner_pkg.sim.flight_log.EpisodeSummary` (fly's summary.json)."""
        with self.lock:
            wall = None
            if self.wall_goal is not None:
                wall = (self.wall_end if self.wall_end is not None else time.monotonic()) - self.wall_goal
            refused = ", ".join(f"{k}: {n}" for k, n in self.refused.items()
                                if "before its publisher was known" not in k)  # discovery, not data
            message = f"over ROS 2 DDS; planner status: {self.planner_status}" + (f"; refused {refused}" if refused
                                                                                   else "")
            return self.judge.summary(planner, world_name, vehicle, replan_ms=list(self.replan_ms),
                                      wall_time_s=wall, message=message)

    def close(self) -> None:
        """Stop spinning (waiting for a callback in progress), then destroy the node and context."""
        self.executor.shutdown(timeout_sec=5.0)
        self.thread.join(timeout=5.0)
        self.node.destroy_node()
        if self.context.ok():
            self.context.shutdown()
