"""Node ``fcu_bridge``: the flight controller (PX4 / ArduPilot over MAVLink) as ROS topics and services.

A thin shell around :class:`~planner_pkg.bridges.mavlink.FcuBridge`, which owns the link, the
NED/FRD conversions and every failsafe (stale setpoint stream -> hold -> land, geofence and
speed clamps, link loss, signing). This node only moves messages:

* ``setpoint`` (one-point MultiDOFJointTrajectory in ``map``, NaN = unused) -> ``send_setpoint``.
  A message that cannot be read (partly NaN, inf, no point, nothing to track, another frame)
  or that the bridge refuses (outside its flight envelope ``failsafe.envelope``: a 1e39 yaw
  rate, a position 100 km away) is logged (throttled), counted in ``bad_setpoints`` and
  dropped: the bridge keeps streaming the last good one, and its stale-stream failsafe takes
  over if only bad ones keep coming.
* the bridge's state -> ``odom`` (frame ``map``, child ``base_link``; twist in ``base_link``
  per REP 105, i.e. the ENU world velocity rotated into body FLU; the FCU's covariances where
  it reports them, else zeros) and ``map`` -> ``base_link`` on ``/tf`` where tf2_ros exists.
  Published from the bridge's I/O thread as each estimate arrives, stamped at the FCU's
  measurement instant: ROS now minus the estimate's age on the monotonic clock.
* ``status`` (diagnostic_msgs): link, autopilot, mode, armed, battery, failsafe and its reason,
  stream and rejection counters.
* services (std_srvs/Trigger) ``arm``, ``disarm``, ``takeoff`` (to ``takeoff_height_m``),
  ``land``, ``return_to_launch`` and ``offboard`` (PX4 OFFBOARD / ArduCopter GUIDED). A command
  waits until the FCU acknowledged and its HEARTBEAT confirmed (seconds): it runs on a worker
  thread while the service callback (a coroutine in a reentrant callback group) awaits it, so
  the single-threaded executor keeps forwarding setpoints meanwhile. A refusal, NACK or timeout
  answers ``success=False`` with the reason. One call per service at a time.
  (Not rclpy's MultiThreadedExecutor: it starves timers and subscriptions, ros2/rclpy#1223.)

Parameters: every field of :class:`~planner_pkg.bridges.mavlink.BridgeConfig` (dotted for the
nested failsafe/geofence blocks) plus :class:`FcuBridgeNodeConfig`. The link's parameters are
read-only once the node runs (a new link or geofence mid-flight is not a safe change): edit the
YAML and restart. The signing key is read from ``signing_key_path`` only.
"""
from __future__ import annotations

import copy
import logging
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.task import Future
from std_srvs.srv import Trigger
from trajectory_msgs.msg import MultiDOFJointTrajectory

from planner_pkg.config_schema import Config
from planner_pkg.bridges.mavlink import BridgeConfig, CommandError, FailsafeReason, FcuBridge, LinkState
from planner_pkg.bridges.mavlink.telemetry import StateEstimate
from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes.params import ConfigParameters, ParameterConfigError

NODE_NAME = "fcu_bridge"
SERVICES = ("arm", "disarm", "takeoff", "land", "return_to_launch", "offboard")


@dataclass(frozen=True)
class FcuBridgeNodeConfig(Config, prefix=""):
    """Parameters of the ``fcu_bridge`` node itself (the link's are BridgeConfig's)."""

    map_frame: str = field(default=conv.MAP_FRAME, metadata={"read_only": True, "description":
                           "world frame (ENU) of odom and of the setpoints accepted"})
    base_frame: str = field(default=conv.BODY_FRAME, metadata={"read_only": True, "description":
                            "body frame (FLU): odom child frame, frame of its twist"})
    publish_tf: bool = field(default=True, metadata={"read_only": True, "description":
                             "publish map -> base_link on /tf (where tf2_ros is installed)"})
    takeoff_height_m: float = field(default=2.0, metadata={"range": (0.5, 100.0), "description":
                                    "height above home the takeoff service climbs to, m"})
    status_rate_hz: float = field(default=2.0, metadata={"range": (0.1, 50.0), "description": "status rate, Hz"})

    def _check(self):
        if not self.map_frame or not self.base_frame or self.map_frame == self.base_frame:
            raise self._error("map_frame", f"{self.map_frame!r} and base_frame {self.base_frame!r} must be two "
                              f"different, non-empty frame ids")


def estimate_to_odometry(est: StateEstimate, stamp_s: float, frame_id: str, child_frame_id: str) -> Odometry:
    """The bridge's estimate as nav_msgs/Odometry stamped ``stamp_s`` (twist in the body frame).

    Covariances are row-major 6x6: pose over (x, y, z, rot x, rot y, rot z) in ``frame_id``,
    twist over (vx, vy, vz, wx, wy, wz) in ``child_frame_id``; all zero when the FCU gave none.
    """
    msg = conv.state_to_odometry(est.state, frame_id, child_frame_id)
    msg.header.stamp = conv.seconds_to_stamp(max(stamp_s, 0.0))
    if est.pose_covariance is not None:
        msg.pose.covariance = np.asarray(est.pose_covariance, dtype=np.float64).reshape(36)
    if est.twist_covariance is not None:
        msg.twist.covariance = np.asarray(est.twist_covariance, dtype=np.float64).reshape(36)
    return msg


class _RosLogHandler(logging.Handler):
    """Forwards the bridge's Python log records to the node's ROS logger (so they reach
    /rosout and the console), at most one per message template per ``period_s``: the bridge
    logs every clamped setpoint, which at 100 Hz would drown everything else."""

    def __init__(self, ros_logger, period_s: float = 1.0):
        super().__init__(logging.DEBUG)
        self.ros_logger = ros_logger
        self.throttle = c.Throttle(period_s)

    def emit(self, record: logging.LogRecord) -> None:
        if not self.throttle(f"{record.levelno}:{record.msg}"):
            return
        text = self.format(record)
        if record.levelno >= logging.ERROR:
            self.ros_logger.error(text)
        elif record.levelno >= logging.WARNING:
            self.ros_logger.warning(text)
        elif record.levelno >= logging.INFO:
            self.ros_logger.info(text)
        else:
            self.ros_logger.debug(text)


class FcuBridgeNode(Node):
    def __init__(self, **kwargs):
        # set first: rclpy may destroy (and so close()) a node whose __init__ raised
        self._closed, self._close_lock, self.bridge = False, threading.Lock(), None
        super().__init__(NODE_NAME, **kwargs)
        self.params = ConfigParameters(self, FcuBridgeNodeConfig, on_change=self._config_changed)
        self.link_params = ConfigParameters(self, BridgeConfig)
        self._freeze_link_parameters()
        cfg = self.params.config
        self.log = self.get_logger()
        self.throttle = c.Throttle(2.0)
        self.counters = {"setpoints": 0, "bad_setpoints": 0, "dropped_setpoints": 0, "bridge_errors": 0, "odom": 0}
        self.last_command = {}
        self._busy = {name: threading.Lock() for name in SERVICES}
        bridge_log = logging.Logger(f"planner_pkg.fcu_bridge.{self.get_fully_qualified_name()}")
        bridge_log.propagate = False
        bridge_log.addHandler(_RosLogHandler(self.log))
        try:
            self.bridge = FcuBridge(self.link_params.config, clock=time.monotonic, logger=bridge_log)
        except (OSError, ValueError) as exc:
            if not self.link_params.config.signing_key_path:
                raise
            # the key file: missing, a symlink, readable by others, not 32 bytes
            raise ParameterConfigError(f"parameter 'signing_key_path' refused: {exc}") from None
        self.pub_odom = self.create_publisher(Odometry, c.TOPIC_ODOM, c.ODOM_QOS)
        self.pub_status = self.create_publisher(DiagnosticArray, c.TOPIC_STATUS, c.STATUS_QOS)
        self.tf = c.tf_broadcaster(self) if cfg.publish_tf else None
        self.create_subscription(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, self._on_setpoint, c.SETPOINT_QOS,
                                 callback_group=MutuallyExclusiveCallbackGroup())
        commands = ReentrantCallbackGroup()
        actions = {
            "arm": self.bridge.arm,
            "disarm": self.bridge.disarm,
            "takeoff": lambda: self.bridge.takeoff(self.params.config.takeoff_height_m),
            "land": self.bridge.land,
            "return_to_launch": self.bridge.return_to_launch,
            "offboard": lambda: self.bridge.set_mode("offboard"),
        }
        for name in SERVICES:
            self.create_service(Trigger, name, self._command_callback(name, actions[name]), callback_group=commands)
        self._status_timer = self.create_timer(1.0 / cfg.status_rate_hz, self._publish_status)
        link = self.link_params.config
        self.create_timer(link.connect_timeout_s, self._warn_if_no_fcu)
        self.bridge.add_state_listener(self._on_state)
        try:
            self.local_address = self.bridge.open()
        except OSError as exc:
            raise ParameterConfigError(f"parameter 'fcu_url' refused: cannot open {link.fcu_url!r}: {exc}") from None
        self.log.info(f"waiting for a {link.autopilot if link.autopilot != 'auto' else 'PX4/ArduPilot'} HEARTBEAT "
                      f"on {link.fcu_url}{' (signed link)' if link.signing_key_path else ''}")

    def _freeze_link_parameters(self) -> None:
        """Describe the link's parameters and make them read-only (see the module doc)."""
        for name in self.link_params.names:
            descriptor = copy.deepcopy(self.describe_parameter(name))  # the node's own object: do not edit it
            descriptor.description += " (fixed while the node runs: edit the YAML and restart)"
            descriptor.read_only = True
            self.set_descriptor(name, descriptor)

    def _config_changed(self, cfg: FcuBridgeNodeConfig) -> None:
        self.destroy_timer(self._status_timer)
        self._status_timer = self.create_timer(1.0 / cfg.status_rate_hz, self._publish_status)

    # -- FCU -> ROS (called from the bridge's I/O thread) ----------------------------------------
    def _on_state(self, est: StateEstimate) -> None:
        if self._closed:
            return
        cfg = self.params.config
        age_s = max(time.monotonic() - est.state.t, 0.0)  # state.t: the measurement, on our monotonic clock
        stamp_s = c.now_s(self) - age_s
        msg = estimate_to_odometry(est, stamp_s, cfg.map_frame, cfg.base_frame)
        self.pub_odom.publish(msg)
        self.counters["odom"] += 1
        if self.tf is not None:
            self.tf(est.state, cfg.map_frame, cfg.base_frame, msg.header.stamp)

    # -- ROS -> FCU ------------------------------------------------------------------------------
    def _on_setpoint(self, msg: MultiDOFJointTrajectory) -> None:
        frame = self.params.config.map_frame
        try:
            if msg.header.frame_id not in ("", frame, "/" + frame):
                raise ValueError(f"setpoint in frame {msg.header.frame_id!r}, expected {frame!r} (no tf here)")
            setpoint = conv.msg_to_setpoint(msg)
            if setpoint.is_empty:
                raise ValueError("empty setpoint: no position, velocity or acceleration given")
            result = self.bridge.send_setpoint(setpoint)
        except ValueError as exc:
            self._bad_setpoint(str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - a bridge bug must not kill the node (and with it the stream)
            self.counters["bridge_errors"] += 1
            if self.throttle("bridge_error"):
                self.log.error(f"send_setpoint failed ({self.counters['bridge_errors']} so far), setpoint "
                               f"dropped: {exc!r}")
            return
        if result.refused:
            self._bad_setpoint(result.reason)
        elif result.accepted:
            self.counters["setpoints"] += 1
        else:
            self.counters["dropped_setpoints"] += 1
            if self.throttle("dropped_setpoint"):
                self.log.warning(f"setpoint not forwarded ({self.counters['dropped_setpoints']} so far): "
                                 f"{result.reason}")

    def _bad_setpoint(self, reason: str) -> None:
        self.counters["bad_setpoints"] += 1
        if self.throttle("bad_setpoint"):
            self.log.warning(f"setpoint refused ({self.counters['bad_setpoints']} so far), the FCU keeps the "
                             f"last good one: {reason}")

    def _command_callback(self, name: str, action):
        busy = self._busy[name]

        async def callback(request, response):
            if not busy.acquire(blocking=False):
                response.success, response.message = False, f"'{name}' is already in progress"
                return response
            try:
                self.log.info(f"{name}: requested")
                error = await self._in_worker(name, action)
            finally:
                busy.release()
            if error is None:
                response.success, response.message = True, f"{name}: done"
                self.log.info(response.message)
            else:
                response.success, response.message = False, f"{name} failed: {error}"
                self.log.warning(response.message)
            self.last_command[name] = response.message
            return response

        return callback

    def _in_worker(self, name: str, action) -> Future:
        """Run the blocking ``action`` on a worker thread; the returned future (awaitable in a
        coroutine callback) holds None, or the CommandError/ValueError that refused it. Any other
        exception is set on the future and so reaches the executor like a callback's would."""
        executor = self.executor
        future: Future = Future(executor=executor)

        def work():
            try:
                action()
            except (CommandError, ValueError) as exc:
                future.set_result(exc)
            except Exception as exc:  # noqa: BLE001 - handed to the awaiting callback
                future.set_exception(exc)
            else:
                future.set_result(None)
            if executor is not None:
                executor.wake()  # resume the awaiting callback now, not at the next message

        threading.Thread(target=work, name=f"fcu-{name}", daemon=True).start()
        return future

    # -- diagnostics -----------------------------------------------------------------------------
    def _warn_if_no_fcu(self) -> None:
        if self._closed:
            return
        s = self.bridge.status()
        if s.link is not LinkState.WAITING:
            return
        link = self.link_params.config
        hints = [f"{s.rx_messages} valid frames heard but none from an acceptable autopilot: check autopilot "
                 f"({link.autopilot}) and fcu_system_id ({link.fcu_system_id})" if s.rx_messages
                 else "nothing heard at all"]
        if s.rx_rejected.get("signature"):
            hints.append(f"{s.rx_rejected['signature']} frames failed the signature check (same key on the FCU?)")
        if s.last_transport_error:
            hints.append(f"transport: {s.last_transport_error}")
        self.log.error(f"no PX4/ArduPilot HEARTBEAT on {link.fcu_url} yet ({'; '.join(hints)}). Check the URL and baud rate "
                       f"and the FCU's MAVLink port (PX4: MAV_x_CONFIG / `mavlink start` in Onboard mode; ArduPilot: "
                       f"SERIALn_PROTOCOL 2); see docs/deploy.md")

    def _publish_status(self) -> None:
        s = self.bridge.status()
        level, message = _level_and_message(s)
        battery = "unknown" if s.battery_remaining is None else f"{s.battery_remaining:.2f}"
        voltage = "unknown" if s.battery_voltage_v is None else f"{s.battery_voltage_v:.2f}"
        values = [
            ("link", s.link.value), ("fcu_url", self.link_params.config.fcu_url),
            ("autopilot", s.autopilot.value if s.autopilot else "unknown"),
            ("mode", s.mode.value), ("mode_name", s.mode_name), ("armed", s.armed), ("landed_state", s.landed_state),
            ("battery_voltage_v", voltage), ("battery_remaining", battery),
            ("failsafe", s.failsafe.value), ("failsafe_detail", s.failsafe_detail or "none"),
            ("stream_phase", s.stream_phase.value), ("streaming", s.streaming),
            ("setpoint_rate_hz", f"{s.setpoint_rate_hz:.1f}"),
            ("state_age_s", "none" if s.state_age_s is None else f"{s.state_age_s:.3f}"),
            ("time_sync", s.time_sync_source), ("signing", s.signing),
            ("rx_messages", s.rx_messages), ("rx_rejected", s.rx_rejected_total), ("tx_messages", s.tx_messages),
            ("clamps", sum(s.clamps.values())), ("last_clamp", s.last_clamp or "none"),
            ("link_losses", s.link_losses), ("handler_errors", s.handler_errors),
            ("setpoints_refused", s.setpoints_refused), ("last_refusal", s.last_refusal or "none"),
            ("out_of_order", s.rx_rejected.get("out_of_order", 0)), ("fcu_reboots", s.fcu_reboots),
            ("last_error", s.last_error or "none"),
        ] + list(self.counters.items())
        values += [(f"last_{name}", text) for name, text in sorted(self.last_command.items())]
        if s.statustext:
            values.append(("fcu_says", s.statustext[-1]))
        self.pub_status.publish(conv.make_status(self.get_name(), level, message, values, c.now_s(self)))

    # -- shutdown --------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the link (the I/O thread, pending commands, the port); idempotent. The setpoint
        stream stops with it, so the FCU's own offboard-loss failsafe takes over in flight."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self.bridge is not None:
            self.bridge.close()

    def destroy_node(self):
        self.close()  # before the publishers go: the I/O thread publishes odom
        return super().destroy_node()


def _level_and_message(s) -> tuple:
    """Diagnostic level and one-line summary of a BridgeStatus."""
    if s.link is LinkState.WAITING:
        return "warn", "waiting for the FCU's HEARTBEAT"
    if s.link is LinkState.LOST or s.failsafe in (FailsafeReason.LINK_LOST, FailsafeReason.BRIDGE_FAULT,
                                                  FailsafeReason.STREAM_STALE_LAND, FailsafeReason.GEOFENCE_BREACH):
        return "error", f"failsafe {s.failsafe.value}: {s.failsafe_detail}"
    if s.failsafe is not FailsafeReason.NONE:
        return "warn", f"failsafe {s.failsafe.value}: {s.failsafe_detail}"
    armed = "armed" if s.armed else "disarmed"
    return "ok", f"{s.autopilot.value if s.autopilot else 'FCU'} {s.mode_name}, {armed}"


def main(args=None) -> int:
    return c.run_node(FcuBridgeNode, args)


if __name__ == "__main__":
    sys.exit(main())
