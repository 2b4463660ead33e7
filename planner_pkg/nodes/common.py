"""What every node shares: QoS per topic (DESIGN.md table), ``main`` boilerplate, status helpers."""
from __future__ import annotations

import logging
import sys
from typing import Callable, Optional

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)

from planner_pkg.nodes.params import ParameterConfigError

# Exit codes of the node executables; the bringup restarts a node that *crashed*, not one that
# refused its configuration (restarting cannot fix that).
EXIT_OK, EXIT_CRASH, EXIT_CONFIG = 0, 1, 2

ODOM_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=50, reliability=ReliabilityPolicy.RELIABLE)  # 0.5 s at 100 Hz
SENSOR_QOS = qos_profile_sensor_data  # best effort, depth 5: depth/image, cloud
GOAL_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
TRAJECTORY_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
SETPOINT_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
MARKERS_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE)
LATCHED_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)  # map/markers
CLOCK_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE)
STATUS_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)

# Relative topic names (DESIGN.md); a namespace (swarm) prefixes all but /clock.
TOPIC_ODOM = "odom"
TOPIC_DEPTH = "depth/image"
TOPIC_CLOUD = "cloud"
TOPIC_GOAL = "goal_pose"
TOPIC_TRAJECTORY = "planning/trajectory"
TOPIC_SETPOINT = "setpoint"
# geometry_msgs/TwistStamped, base_link: angular = body FLU rates (rad/s), linear.z = collective
# thrust / mass (m/s^2); the racer -> the embedded simulator (conversions.body_rate_command_to_msg)
TOPIC_BODY_RATE_SETPOINT = "body_rate_setpoint"
TOPIC_PLANNING_MARKERS = "planning/markers"
TOPIC_MAP_MARKERS = "map/markers"
TOPIC_STATUS = "status"
TOPIC_CLOCK = "/clock"
# Simulation only (use_sim_time): the planner reports, as a rosgraph_msgs/Clock, the sim time of its
# next tick; a sim_bridge in lockstep does not advance past it (sim_bridge.py, planner_node.py).


def publisher_gid(info) -> bytes:
    """The publisher's GID (bytes; empty where unknown) from a subscription callback's message info."""
    gid = info.get("publisher_gid") if isinstance(info, dict) else None
    return bytes(gid.get("data", b"") if isinstance(gid, dict) else (gid or b""))


class LockstepNode(Node):
    """A node holding ``self.lockstep``, a ``nodes.lockstep.LockstepParticipant`` (or None before it
    is made): destroying the node closes it first, as its clock-jump callback must not outlive
    the node. ``_on_odom`` is the ``odom`` callback of a node with ``_take_odom(msg)``."""

    def _on_odom(self, msg) -> None:
        try:
            self._take_odom(msg)
        finally:
            self.lockstep.saw_odom(msg.header.stamp)  # taken or refused: not to be waited for

    def destroy_node(self):
        lockstep = getattr(self, "lockstep", None)
        if lockstep is not None:
            lockstep.close()
        return super().destroy_node()


def now_s(node) -> float:
    """The node's ROS time in seconds (sim time when ``use_sim_time`` is true)."""
    return node.get_clock().now().nanoseconds * 1e-9


def run_node(make_node: Callable[[], "rclpy.node.Node"], args=None) -> int:
    """``rclpy.init``, build the node, ``executor.spin()``, clean shutdown; returns an exit code.

    Ctrl-C / SIGTERM / an external shutdown end the spin normally (exit 0), however many SIGINTs
    arrive and whenever: during the spin, inside a callback, during ``close``/``destroy_node``.
    A parameter refused at startup exits with :data:`EXIT_CONFIG` after one log line naming it.

    How: rclpy's own SIGINT/SIGTERM handler (installed by ``rclpy.init``) shuts the context down,
    wakes the executor, then calls the Python-level handler that was in place before it. That
    handler is Python's default, which raises KeyboardInterrupt wherever the main thread happens
    to be (seen: inside ``take_message`` as "Unable to convert call argument '0'", and, after
    ``rclpy.shutdown`` removed rclpy's handler, inside ``destroy_node`` on a second Ctrl-C). So a
    handler that only records the request is installed *before* ``rclpy.init``; it stays in place
    after ``rclpy.shutdown``. Once a stop was requested (or the context is down), a RuntimeError
    from rclpy (RCLError, InvalidHandle, a pybind11 conversion on a destroyed handle) is the stop
    racing the spin or the cleanup, not a crash.
    """
    import signal
    import threading

    log = logging.getLogger("planner_pkg.nodes")
    stop_signals: list = []
    if threading.current_thread() is threading.main_thread():  # signal.signal works only there
        signal.signal(signal.SIGINT, lambda signum, _frame: stop_signals.append(signum))
    rclpy.init(args=args)

    def stopping() -> bool:
        return bool(stop_signals) or not rclpy.ok()

    node = None
    code = EXIT_OK
    executor = SingleThreadedExecutor()
    try:
        if not stop_signals:  # a Ctrl-C before rclpy.init: nothing to start
            node = make_node()
            executor.add_node(node)
            executor.spin()
    except ParameterConfigError as exc:
        log.error("%s", exc)
        print(f"[FATAL] {exc}", file=sys.stderr, flush=True)
        code = EXIT_CONFIG
    except (KeyboardInterrupt, ExternalShutdownException):
        pass  # KeyboardInterrupt: only where the handler above could not be installed
    except RuntimeError:
        if not stopping():
            raise
    finally:
        steps = []
        if node is not None:
            close = getattr(node, "close", None)
            if close is not None:
                steps.append(close)
            steps += [lambda: executor.remove_node(node), node.destroy_node]
        steps.append(executor.shutdown)
        for step in steps:
            try:
                step()
            except RuntimeError as exc:  # e.g. a final publish on the context a signal shut down
                if not stopping():
                    raise
                log.debug("while stopping: %s: %s", type(exc).__name__, exc)
        rclpy.try_shutdown()  # no error where a signal already shut the context down
        if threading.current_thread() is threading.main_thread():
            # The process exits next. Python's finalisation resets a SIGINT handler that is a
            # function to SIG_DFL, so a Ctrl-C arriving while DDS tears down (tens of ms) would
            # kill the process (exit -2, seen with two SIGINTs 50 ms apart); SIG_IGN it keeps.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


def tf_broadcaster(node):
    """``send(state, parent, child, stamp=None)`` publishing the vehicle pose as the ``parent`` ->
    ``child`` transform on /tf (stamp: a builtin_interfaces Time, default the state's time), or
    None where tf2_ros is not installed (the PyPI wheels have none)."""
    try:
        from geometry_msgs.msg import TransformStamped
        from tf2_ros import TransformBroadcaster
    except ImportError:
        return None
    from planner_pkg.nodes.conversions import seconds_to_stamp

    broadcaster = TransformBroadcaster(node)

    def send(state, parent: str, child: str, stamp=None) -> None:
        tf = TransformStamped()
        tf.header.stamp = stamp if stamp is not None else seconds_to_stamp(state.t)
        tf.header.frame_id, tf.child_frame_id = parent, child
        t = tf.transform.translation
        t.x, t.y, t.z = (float(v) for v in state.position)
        r = tf.transform.rotation
        r.x, r.y, r.z, r.w = (float(v) for v in state.attitude)
        broadcaster.sendTransform(tf)

    return send


def exit_with(code: int) -> None:  # pragma: no cover - process exit
    sys.exit(code)


class Throttle:
    """Says whether an event of kind ``key`` may be logged again (at most once per ``period_s`` wall s)."""

    def __init__(self, period_s: float = 2.0):
        import time

        self._time = time.monotonic
        self.period_s = period_s
        self._last: dict = {}
        self.counts: dict = {}

    def __call__(self, key: str) -> bool:
        self.counts[key] = self.counts.get(key, 0) + 1
        t = self._time()
        last: Optional[float] = self._last.get(key)
        if last is None or t - last >= self.period_s:
            self._last[key] = t
            return True
        return False

