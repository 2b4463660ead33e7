"""The I/O side of the FCU bridge: state, the I/O thread, message handlers, failsafe supervision.

:class:`BridgeRuntime` is the base of :class:`~.bridge.FcuBridge`, which adds the public API.
One I/O thread owns the receive side and every periodic duty: our HEARTBEAT, TIMESYNC, command
retries, link-loss detection, the failsafe supervisor and the setpoint keep-alive stream.
That thread must never die: an unexpected error in it is counted, logged (throttled) and shown
as the failsafe ``bridge_fault``; a setpoint it cannot encode is replaced by a hold.

Locks, always taken in this order: ``_lock`` (bridge state) -> the command manager's lock ->
``_tx_lock`` (codec sequence/signing state + socket writes). Blocking waits hold none of them.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from typing import Callable, List, Optional

from planner_pkg.types import Setpoint

from . import commands as cmd
from .codec import MavCodec
from .commands import CommandManager, CommandRequest
from .config import BridgeConfig
from .failsafe import FailsafeReason, StreamPhase, StreamSupervisor, limit_setpoint, make_geofence, state_unfit_reason
from .link import LinkMonitor, LinkState, our_heartbeat
from .modes import Autopilot, FlightMode
from .setpoints import MAV_FRAME_LOCAL_NED, PositionTargetNed, RateMeter, SetpointEncodingError, setpoint_to_target
from .signing import load_signing_key
from .telemetry import StateEstimate, TelemetryAssembler, TelemetryOutOfOrder, TelemetryRejected
from .timesync import TimeSync
from .vehicle import VehicleTracker

__all__ = ["BridgeRuntime"]

_IO_TICK_S = 0.005  # longest the I/O thread sleeps between duties: bounds close() latency
_MAV_CMD_REQUEST_MESSAGE = 512
_FAULT_RECENT_S = 1.0  # the failsafe shows bridge_fault until this long after the last fault
_LOG_PERIOD_S = 1.0  # faults and refused setpoints: at most one log line per period (plus a count)
_MSG_ATTITUDE_QUATERNION, _MSG_LOCAL_POSITION_NED, _MSG_ODOMETRY, _MSG_HOME_POSITION = 31, 32, 331, 242


def fmt_vector(v) -> str:
    """``(1.00, 2.00, 3.00)`` for log lines."""
    return "(" + ", ".join(f"{x:.2f}" for x in v) + ")"


class BridgeRuntime:
    """State and I/O thread of the bridge (see the module doc); construct :class:`FcuBridge`."""
    def __init__(self, config: Optional[BridgeConfig] = None, clock: Callable[[], float] = time.monotonic,
                 logger: Optional[logging.Logger] = None):
        cfg = BridgeConfig() if config is None else config
        if not isinstance(cfg, BridgeConfig):
            raise TypeError(f"config must be a BridgeConfig (use BridgeConfig.from_dict for dicts), got {type(cfg).__name__}")
        self.config = cfg
        self._clock = clock
        self._log = logger or logging.getLogger("planner_pkg.fcu_bridge")
        key = load_signing_key(cfg.signing_key_path) if cfg.signing_key_path else None
        self._codec = MavCodec(cfg.system_id, cfg.component_id, key, cfg.signing_link_id)
        expected = None if cfg.autopilot == "auto" else Autopilot(cfg.autopilot)
        self._link = LinkMonitor(cfg.link_timeout_s, expected, cfg.fcu_system_id, cfg.fcu_component_id)
        self._timesync = TimeSync()
        self._telemetry = TelemetryAssembler(odometry_timeout_s=cfg.failsafe.state_max_age_s,
                                             attitude_max_age_s=cfg.failsafe.state_max_age_s)
        self._vehicle = VehicleTracker(home_altitude_range_m=cfg.home_altitude_range_m)
        self._commands = CommandManager(self._send_command, cfg.command_timeout_s, cfg.command_retries)
        self._fence = make_geofence(cfg.failsafe.geofence)
        self._supervisor = StreamSupervisor(cfg.failsafe)
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._tx_lock = threading.Lock()
        self._transport = None
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._t0 = clock()
        self._stream_period_s = 1.0 / cfg.setpoint_rate_hz
        self._min_interval_s = 1.0 / cfg.max_setpoint_rate_hz
        self._streaming = False
        self._stream_since: Optional[float] = None
        self._user_sp: Optional[Setpoint] = None  # the planner's latest, unclamped
        self._hold: Optional[Setpoint] = None  # failsafe hold, overrides the planner
        self._last_commanded: Optional[Setpoint] = None
        self._dirty = False
        self._was_armed = False
        self._last_tx_t = -math.inf
        self._next_stream_t = -math.inf  # keep-alive grid: sends land on it, so the rate does not drift
        self._tx_meter = RateMeter()
        self._failsafe_land = None
        self._background: List = []
        self._breach = ""
        self._clamps = {"geofence": 0, "speed": 0, "acceleration": 0, "yaw_rate": 0}
        self._last_clamp = ""
        self._foreign = 0
        self._invalid = 0
        self._last_invalid = ""
        self._handler_errors = 0
        self._last_error = ""
        self._out_of_order = 0
        self._fcu_reboots = 0
        self._refused = 0  # setpoints outside the flight envelope
        self._last_refusal = ""
        self._refusal_logged_t = -math.inf
        self._faults = 0  # unexpected errors of the bridge itself (see _on_fault)
        self._fault_t: Optional[float] = None
        self._fault_detail = ""
        self._fault_logged_t = -math.inf
        self._loss_detect_s: Optional[float] = None
        self._next_heartbeat_t = -math.inf
        self._next_timesync_t = -math.inf
        self._listeners: List[Callable[[StateEstimate], None]] = []
        self._handlers = {
            "LOCAL_POSITION_NED": self._on_local_position,
            "ATTITUDE_QUATERNION": lambda m, now: self._telemetry.on_attitude_quaternion(m, now, now),
            "ATTITUDE": lambda m, now: self._telemetry.on_attitude_euler(m, now, now),
            "ODOMETRY": self._on_odometry,
            "COMMAND_ACK": self._on_command_ack,
            "COMMAND_LONG": self._on_command_long,
            "TIMESYNC": self._on_timesync,
            "SYSTEM_TIME": lambda m, now: self._timesync.on_system_time(m.time_boot_ms, now),
            "SYS_STATUS": lambda m, now: self._vehicle.on_sys_status(m),
            "EXTENDED_SYS_STATE": lambda m, now: self._vehicle.on_extended_sys_state(m),
            "HOME_POSITION": lambda m, now: self._vehicle.on_home_position(m),
            "STATUSTEXT": self._on_statustext,
        }

    def _request(self, command: int, params, label: str) -> CommandRequest:
        fcu = self._link.fcu
        return CommandRequest(command, tuple(float(p) for p in params), fcu.system_id, fcu.component_id, label)

    def _send_command(self, request: CommandRequest, confirmation: int) -> bool:
        return self._write(self._codec.mav.command_long_encode(
            request.target_system, request.target_component, request.command, confirmation, *request.params))

    # ------------------------------------------------------------------ I/O thread
    def _write(self, msg) -> bool:
        transport = self._transport
        if transport is None:
            return False
        with self._tx_lock:
            return transport.write(self._codec.encode(msg))

    def _run(self) -> None:
        transport = self._transport
        while not self._stop.is_set():
            try:
                data, address = transport.read(self._wake_in(self._clock()))
                if data:
                    self._on_bytes(data, address, transport.datagram)
                self._tick(self._clock())
            except Exception as exc:  # noqa: BLE001 - a bug must not end the link: failsafe, log, go on
                self._on_fault("I/O loop", exc, self._clock())
                self._stop.wait(_IO_TICK_S)

    def _on_fault(self, what: str, exc: BaseException, now: float, consequence: str = "") -> None:
        """An unexpected error of the bridge itself: counted, shown as the failsafe
        ``bridge_fault`` for ``_FAULT_RECENT_S`` after the last one, logged at most once per
        ``_LOG_PERIOD_S`` (a fault that repeats every tick must not flood the log)."""
        with self._lock:
            self._handler_errors += 1
            self._faults += 1
            self._last_error = f"{what}: {exc!r}"
            self._fault_t = now
            self._fault_detail = f"{what} failed: {exc!r}" + (f"; {consequence}" if consequence else "")
            if now - self._fault_logged_t < _LOG_PERIOD_S:
                return
            self._fault_logged_t = now
            count = self._faults
        self._log.error("fcu_bridge fault (%d so far, failsafe bridge_fault): %s", count, self._fault_detail,
                        exc_info=exc)

    def _wake_in(self, now: float) -> float:
        """Seconds until the next duty (read without the lock: a stale value only shifts one wake-up)."""
        t = now + _IO_TICK_S
        if self._streaming:
            t = min(t, self._next_stream_t)
            if self._dirty:
                t = min(t, self._last_tx_t + self._min_interval_s)
        return max(t - now, 0.0)

    def _on_bytes(self, data: bytes, address, datagram: bool) -> None:
        with self._tx_lock:  # the codec's signing timestamps are shared with encode()
            result = self._codec.decode(data, datagram)
        if not result.messages:
            return
        now = self._clock()
        fresh = []
        with self._lock:
            for msg in result.messages:
                est = self._on_message(msg, address, now)
                if est is not None:
                    fresh.append(est)
            self._cond.notify_all()
            listeners = list(self._listeners)
        for est in fresh:
            for callback in listeners:
                try:
                    callback(est)
                except Exception:  # noqa: BLE001 - user code must not kill the link thread; logged and counted
                    self._handler_errors += 1
                    self._log.exception("state listener %r failed", callback)

    def _on_message(self, msg, address, now: float) -> Optional[StateEstimate]:
        kind = msg.get_type()
        if kind == "HEARTBEAT":
            verdict = self._link.on_heartbeat(msg, address, now)
            if verdict == "invalid":
                self._invalid += 1
                self._last_invalid = f"HEARTBEAT from the FCU's address claims autopilot {msg.autopilot}"
            elif verdict == "foreign":
                self._foreign += 1
            else:
                if verdict == "locked":
                    self._on_locked(now)
                self._vehicle.on_heartbeat(msg, self._link.fcu.autopilot)
            return None
        if not self._link.is_from_fcu(msg.get_srcSystem(), msg.get_srcComponent(), address):
            self._foreign += 1
            return None
        self._link.on_fcu_message(now)
        handler = self._handlers.get(kind)
        if handler is None:
            return None
        try:
            est = handler(msg, now)
        except TelemetryOutOfOrder as exc:
            self._out_of_order += 1
            self._last_invalid = str(exc)
        except TelemetryRejected as exc:
            self._invalid += 1
            self._last_invalid = str(exc)
        except Exception as exc:  # noqa: BLE001 - a handler bug must not kill the link; counted and shown in status()
            self._handler_errors += 1
            self._last_error = f"{kind}: {exc!r}"
            self._log.exception("handling %s failed", kind)
        else:
            if self._telemetry.reboots != self._fcu_reboots:
                self._fcu_reboots = self._telemetry.reboots
                self._log.warning("FCU telemetry time restarted (%s): the autopilot rebooted; following its new "
                                  "clock", kind)
            return est
        return None

    def _on_locked(self, now: float) -> None:
        fcu = self._link.fcu
        if fcu.address is not None:
            self._transport.set_remote(fcu.address)
        self._log.info("FCU found: %s, system %d component %d, MAV_TYPE %d, at %s", fcu.autopilot.value,
                       fcu.system_id, fcu.component_id, fcu.vehicle_type, fcu.address or self.config.fcu_url)
        self._next_heartbeat_t = self._next_timesync_t = now  # let the FCU hear us right away
        rate = self.config.telemetry_rate_hz
        requests = []
        if rate > 0:
            ids = [_MSG_LOCAL_POSITION_NED, _MSG_ATTITUDE_QUATERNION] + ([_MSG_ODOMETRY] if self.config.request_odometry else [])
            requests += [(cmd.MAV_CMD_SET_MESSAGE_INTERVAL, (i, 1e6 / rate, 0, 0, 0, 0, 0), f"stream message {i} at {rate} Hz")
                         for i in ids]
        requests.append((_MAV_CMD_REQUEST_MESSAGE, (_MSG_HOME_POSITION, 0, 0, 0, 0, 0, 0), "request HOME_POSITION"))
        for command, params, label in requests:
            self._background.append(self._commands.submit(self._request(command, params, label), now))

    def _on_local_position(self, msg, now: float):
        t = self._timesync.to_local(self._telemetry.fcu_time_s(msg), now)
        return self._telemetry.on_local_position(msg, t, now)

    def _on_odometry(self, msg, now: float):
        fcu_t = self._telemetry.fcu_time_s(msg)
        return self._telemetry.on_odometry(msg, now if math.isnan(fcu_t) else self._timesync.to_local(fcu_t, now), now)

    def _on_command_ack(self, msg, now: float) -> None:
        # target fields are a MAVLink 2 extension: 0 when the FCU does not fill them in
        if msg.target_system in (0, self.config.system_id) and msg.target_component in (0, self.config.component_id):
            self._commands.on_ack(msg.command, msg.result, now)

    def _on_command_long(self, msg, now: float) -> None:
        if msg.target_system == self.config.system_id and msg.target_component == self.config.component_id:
            self._write(self._codec.mav.command_ack_encode(msg.command, 3, 0, 0, msg.get_srcSystem(), msg.get_srcComponent()))

    def _on_timesync(self, msg, now: float) -> None:
        reply = self._timesync.on_timesync(msg.tc1, msg.ts1, now)
        if reply is not None:
            self._write(self._codec.mav.timesync_encode(*reply))

    def _on_statustext(self, msg, now: float) -> None:
        self._vehicle.on_statustext(msg)
        self._log.info("FCU says %s", self._vehicle.statustext[-1])

    def _tick(self, now: float) -> None:
        with self._lock:
            if self._link.poll(now) is LinkState.LOST:
                self._on_link_lost(now)
            self._commands.poll(now)
            if now >= self._next_heartbeat_t:
                self._write(our_heartbeat(self._codec.mav))
                self._next_heartbeat_t = now + 1.0 / self.config.heartbeat_rate_hz
            link_ok = self._link.state is LinkState.OK
            if link_ok and self.config.timesync_rate_hz > 0 and now >= self._next_timesync_t:
                self._write(self._codec.mav.timesync_encode(*self._timesync.request(now)))
                self._next_timesync_t = now + 1.0 / self.config.timesync_rate_hz
            for pending in [p for p in self._background if p.done]:
                self._background.remove(pending)
                if pending.error is not None:
                    self._log.warning("%s", pending.error)
            self._supervise(now)
            if self._streaming and link_ok:
                if now >= self._next_stream_t or (self._dirty and now - self._last_tx_t >= self._min_interval_s):
                    target = self._hold
                    if target is None and self._user_sp is not None:
                        target = limit_setpoint(self._user_sp, self.config.failsafe, self._fence,
                                                self._fresh_position(now))[0]
                    if target is not None:
                        try:
                            self._send_target(target, now)
                        except SetpointEncodingError as exc:  # the envelope should make this impossible
                            self._on_unencodable(target, exc, now)

    def _on_unencodable(self, target: Setpoint, exc: SetpointEncodingError, now: float) -> None:
        """The stream's target cannot go on the wire: replace it so that the stream goes on."""
        if target is self._hold:
            self._hold = Setpoint.from_velocity([0.0, 0.0, 0.0])
            consequence = "the failsafe hold could not be encoded either: braking to zero velocity"
        else:
            est = self._telemetry.latest
            if self._fresh_position(now) is not None:
                self._user_sp = Setpoint.hold(est.state.position, est.state.yaw)
            elif self._last_commanded is not None and self._last_commanded.has_position:
                self._user_sp = Setpoint.hold(self._last_commanded.position, self._last_commanded.yaw)
            else:
                self._user_sp = Setpoint.from_velocity([0.0, 0.0, 0.0])
            consequence = f"streaming {self._user_sp.mode} hold instead until the planner sends a good setpoint"
        self._dirty = True
        self._on_fault("setpoint encoding", exc, now, consequence)

    def _send_target(self, sp: Setpoint, now: float, target: Optional[PositionTargetNed] = None) -> None:
        """Put ``sp`` on the wire (``target``: its encoding, when the caller already made it).
        Raises SetpointEncodingError, before anything changed, when it cannot be encoded."""
        t = setpoint_to_target(sp) if target is None else target
        fcu = self._link.fcu
        boot_ms = int((now - self._t0) * 1000.0) & 0xFFFFFFFF
        msg = self._codec.mav.set_position_target_local_ned_encode(
            boot_ms, fcu.system_id, fcu.component_id, MAV_FRAME_LOCAL_NED, t.type_mask,
            t.x, t.y, t.z, t.vx, t.vy, t.vz, t.afx, t.afy, t.afz, t.yaw, t.yaw_rate)
        if self._write(msg):
            self._tx_meter.tick(now)
        if now >= self._next_stream_t:  # on schedule: advance the grid (restart it if we fell behind)
            following = self._next_stream_t + self._stream_period_s
            self._next_stream_t = following if following > now else now + self._stream_period_s
        else:  # a fresh planner setpoint went out early: the keep-alive only fills the gaps after it
            self._next_stream_t = now + self._stream_period_s
        self._last_tx_t, self._dirty, self._last_commanded = now, False, sp

    def _fresh_position(self, now: float):
        est = self._telemetry.latest
        if est is None or state_unfit_reason(est.state, est.received_t, now, self.config.failsafe.state_max_age_s):
            return None
        return est.state.position

    # ------------------------------------------------------------------ failsafes
    def _on_link_lost(self, now: float) -> None:
        self._loss_detect_s = now - self._link.last_rx_t
        was_streaming = self._streaming
        self._streaming, self._user_sp, self._hold, self._dirty = False, None, None, False
        self._supervisor.reset()
        self._failsafe_land = None
        self._commands.cancel_all("the FCU link was lost")
        self._log.error("FCU link lost: no valid message for %.2f s%s", self._loss_detect_s,
                        "; setpoint stream stopped so the FCU's own offboard-loss failsafe takes over"
                        if was_streaming else "")

    def _supervise(self, now: float) -> None:
        vehicle = self._vehicle
        engaged = self._link.state is LinkState.OK and vehicle.armed and vehicle.mode is FlightMode.OFFBOARD
        change = self._supervisor.evaluate(now, engaged)
        if change is StreamPhase.HOLD:
            self._enter_hold(now)
        elif change is StreamPhase.LAND:
            self._start_failsafe_land(now)
        elif change is not None and self._hold is not None:
            self._hold = None
        if self._was_armed and not vehicle.armed:
            # A flight ended (landed, or disarmed by the pilot): the next flight starts with a
            # fresh OFFBOARD request and stream, never with this flight's last setpoint.
            self._log.info("vehicle disarmed: setpoint stream stopped")
            self._supervisor.reset()
            self._streaming, self._user_sp, self._hold, self._failsafe_land = False, None, None, None
        self._was_armed = vehicle.armed
        est = self._telemetry.latest
        if self._fence is not None and est is not None and not self._fence.contains(est.state.position):
            if not self._breach:
                self._log.error("geofence breach: vehicle at %s is outside %r", fmt_vector(est.state.position), self._fence)
            self._breach = f"vehicle at {fmt_vector(est.state.position)} is outside {self._fence!r}; setpoints are clamped inside"
        else:
            self._breach = ""

    def _enter_hold(self, now: float) -> None:
        est = self._telemetry.latest
        if self._fresh_position(now) is not None:
            position, yaw = est.state.position, est.state.yaw
        elif self._last_commanded is not None and self._last_commanded.has_position:
            position, yaw = self._last_commanded.position, self._last_commanded.yaw
        else:
            # Nothing to hold on to (estimate stale, planner sent velocities): brake to zero
            # velocity rather than keep streaming the planner's last command, and land.
            self._hold, self._dirty = Setpoint.from_velocity([0.0, 0.0, 0.0]), True
            self._log.error("setpoint stream stale and no position to hold (state estimate stale): braking and landing")
            self._supervisor.force_land()
            self._start_failsafe_land(now)
            return
        if self._fence is not None:
            position = self._fence.clamp(position)
        self._hold, self._dirty = Setpoint.hold(position, yaw), True
        self._log.warning("no setpoint for %.2f s: holding at %s; landing in %.1f s unless setpoints resume",
                          self.config.failsafe.stale_setpoint_s, fmt_vector(position), self.config.failsafe.land_after_hold_s)

    def _start_failsafe_land(self, now: float) -> None:
        if self._failsafe_land is not None and not self._failsafe_land.done:
            return
        self._log.error("setpoint stream stale too long: commanding LAND")
        self._failsafe_land = self._commands.submit(
            self._request(cmd.MAV_CMD_NAV_LAND, (0.0,) * 7, "failsafe land"), now)

    def _failsafe(self, now: float):
        if self._link.state is LinkState.LOST:
            return FailsafeReason.LINK_LOST, (
                f"no valid message from the FCU for {now - self._link.last_rx_t:.1f} s "
                f"(timeout {self.config.link_timeout_s} s); setpoint stream stopped")
        if self._fault_t is not None and now - self._fault_t <= _FAULT_RECENT_S:
            return FailsafeReason.BRIDGE_FAULT, f"{self._faults} fault(s), the last {now - self._fault_t:.1f} s ago: " \
                                                f"{self._fault_detail}"
        phase = self._supervisor.phase
        if phase is StreamPhase.LAND:
            land = self._failsafe_land
            outcome = ("LAND pending" if land is None or not land.done
                       else f"LAND failed: {land.error}; still holding" if land.error else "LAND accepted")
            return FailsafeReason.STREAM_STALE_LAND, f"setpoint stream stale: {outcome}"
        if phase is StreamPhase.HOLD:
            left = self.config.failsafe.land_after_hold_s - (now - self._supervisor.hold_since)
            where = fmt_vector(self._hold.position) if self._hold is not None else "?"
            return FailsafeReason.STREAM_STALE_HOLD, (
                f"no setpoint for {now - self._supervisor.last_input_t:.1f} s: holding at {where}, "
                f"landing in {max(left, 0.0):.1f} s")
        if self._breach:
            return FailsafeReason.GEOFENCE_BREACH, self._breach
        return FailsafeReason.NONE, ""

