"""FcuBridge: our ENU setpoints to a PX4 / ArduPilot flight controller, its state back, safely.

The public, thread-safe API; the I/O thread, handlers and failsafe supervision live in
:mod:`.runtime`. User threads (the ROS node's callbacks) call these methods: a new setpoint
goes on the wire at once from the caller's thread (lowest latency), and the I/O thread repeats
the latest one at ``setpoint_rate_hz`` so the FCU never sees the stream drop. Commands block
until the FCU acknowledged them and its HEARTBEAT shows the result.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Callable, Optional

from planner_pkg.types import Setpoint, VehicleState

from . import commands as cmd
from .commands import CommandRefused, CommandTimeout
from .connection import open_transport
from .failsafe import StreamPhase, envelope_violation, limit_setpoint, state_unfit_reason
from .link import FcuIdentity, LinkState
from .modes import Autopilot, FlightMode, encode_mode
from .runtime import _LOG_PERIOD_S, BridgeRuntime, fmt_vector
from .setpoints import SetpointEncodingError, setpoint_to_target
from .telemetry import StateEstimate
from .vehicle import LANDED_STATES, BridgeStatus, SendResult

__all__ = ["FcuBridge"]

_FORCE_DISARM_MAGIC = 21196.0  # MAVLink's "disarm even in flight" param2


class FcuBridge(BridgeRuntime):
    """Thread-safe link to one flight controller. Use as a context manager or call
    :meth:`connect` / :meth:`close`. Positions are world ENU metres, yaw ENU radians.

    Args:
        config: validated settings (``BridgeConfig.from_dict`` for YAML / ROS parameters).
        clock: monotonic seconds; ``VehicleState.t`` is on this clock.
        logger: where transitions and failsafes are logged (default ``planner_pkg.fcu_bridge``).
    """

    # ------------------------------------------------------------------ lifecycle
    def open(self):
        """Open the port and start the I/O thread without waiting for the FCU; returns our
        local ``(host, port)`` (UDP/TCP) or None. Use :meth:`wait_for_fcu` next, or
        :meth:`connect` for both. Raises OSError when the port cannot be opened."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("FcuBridge is already open; close() it first")
            self._transport = open_transport(self.config.fcu_url, self.config.reconnect_backoff_s,
                                             min(1.0, self.config.connect_timeout_s))
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="fcu_bridge_io", daemon=True)
            self._thread.start()
            return self._transport.local_address

    def wait_for_fcu(self, timeout_s: Optional[float] = None) -> FcuIdentity:
        """Wait for an acceptable autopilot HEARTBEAT; raises ConnectionError saying what was
        heard when none arrives within ``timeout_s`` (default ``config.connect_timeout_s``).
        The link stays open either way."""
        wait_s = self.config.connect_timeout_s if timeout_s is None else timeout_s
        with self._cond:
            if self._thread is None:
                raise RuntimeError("FcuBridge is not open; call open() or connect() first")
            if self._cond.wait_for(lambda: self._link.fcu is not None, wait_s):
                return self._link.fcu
        status = self.status()
        hints = [self._link.note] if self._link.note else []
        if status.rx_rejected.get("signature"):
            hints.append(f"{status.rx_rejected['signature']} frames failed the signature check (key mismatch?)")
        if status.last_transport_error:
            hints.append(f"transport: {status.last_transport_error}")
        raise ConnectionError(
            f"no PX4/ArduPilot HEARTBEAT on {self.config.fcu_url} within {wait_s} s; check the URL and the FCU's "
            f"MAVLink port (PX4: `mavlink start` on TELEM2; ArduPilot: SERIALn_PROTOCOL 2)"
            + ("; " + "; ".join(hints) if hints else "")
        )

    def connect(self, timeout_s: Optional[float] = None) -> FcuIdentity:
        """:meth:`open` then :meth:`wait_for_fcu`; on failure the bridge is closed again."""
        self.open()
        try:
            return self.wait_for_fcu(timeout_s)
        except ConnectionError:
            self.close()
            raise

    def close(self) -> None:
        """Stop the I/O thread, cancel pending commands and close the port (idempotent)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5.0)
            if thread.is_alive():
                self._log.error("fcu_bridge I/O thread did not stop within 5 s")
        self._commands.cancel_all("the bridge was closed")
        with self._lock:
            if self._transport is not None:
                self._transport.close()
            self._transport, self._thread = None, None
            self._streaming = False

    def __enter__(self) -> "FcuBridge":
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def local_address(self):
        """``(host, port)`` our socket is bound to (UDP/TCP), e.g. to point a peer at it."""
        transport = self._transport
        return None if transport is None else transport.local_address

    def add_state_listener(self, callback: Callable[[StateEstimate], None]) -> None:
        """Call ``callback(estimate)`` from the I/O thread on every new state (keep it short)."""
        with self._lock:
            self._listeners.append(callback)

    # ------------------------------------------------------------------ queries
    def state(self) -> Optional[VehicleState]:
        """Latest vehicle state in ENU/FLU (``t`` on our clock), or None before the first."""
        est = self._telemetry.latest
        return None if est is None else est.state

    def estimate(self) -> Optional[StateEstimate]:
        """Latest state with covariances and receipt time, or None."""
        return self._telemetry.latest

    def status(self) -> BridgeStatus:
        """Snapshot of link, mode, arming, battery, failsafe and counters."""
        now = self._clock()
        with self._lock:
            reason, detail = self._failsafe(now)
            fcu, vehicle, transport, est = self._link.fcu, self._vehicle, self._transport, self._telemetry.latest
            rejected = dict(self._codec.rx_rejected, foreign_source=self._foreign, invalid_values=self._invalid,
                            out_of_order=self._out_of_order)
            return BridgeStatus(
                link=self._link.state, autopilot=fcu.autopilot if fcu else None,
                fcu_system_id=fcu.system_id if fcu else None, mode=vehicle.mode, mode_name=vehicle.mode_name,
                armed=vehicle.armed, landed_state=LANDED_STATES[vehicle.landed_state],
                battery_voltage_v=vehicle.battery_voltage_v, battery_remaining=vehicle.battery_remaining,
                failsafe=reason, failsafe_detail=detail, stream_phase=self._supervisor.phase,
                streaming=self._streaming, setpoint_rate_hz=self._tx_meter.rate_hz(now),
                state_age_s=None if est is None else now - est.received_t,
                time_offset_s=self._timesync.offset_s, time_sync_source=self._timesync.source,
                signing=self._codec.signing, rx_messages=self._codec.rx_messages, rx_rejected=rejected,
                tx_messages=self._codec.tx_messages, clamps=dict(self._clamps), last_clamp=self._last_clamp,
                link_losses=self._link.losses, last_link_loss_detect_s=self._loss_detect_s,
                reconnects=transport.reconnects if transport else 0,
                transport_errors=transport.io_errors if transport else 0,
                last_transport_error=transport.last_error if transport else "",
                handler_errors=self._handler_errors, last_error=self._last_error or self._last_invalid,
                statustext=tuple(vehicle.statustext), setpoints_refused=self._refused,
                last_refusal=self._last_refusal, fcu_reboots=self._fcu_reboots,
            )

    # ------------------------------------------------------------------ setpoints
    def send_setpoint(self, sp: Setpoint) -> SendResult:
        """Stream ``sp`` (world ENU, NaN = unused) to the FCU after the failsafe clamps.

        This is the one place a setpoint enters the bridge. One outside the flight envelope
        (``failsafe.envelope``: too far, too fast, a yaw rate of 1e39) is refused: counted in
        ``status().setpoints_refused``, logged (at most once a second) and answered
        ``accepted=False, refused=True`` with the reason, while the stream keeps repeating the
        last good setpoint (or the bridge's hold). A refused setpoint is no input for the
        stale-stream failsafe: a planner that sends only bad ones ends in hold, then land.
        Goes on the wire immediately unless that would exceed ``max_setpoint_rate_hz`` (then
        within ``1 / max_setpoint_rate_hz``); the I/O thread repeats it at ``setpoint_rate_hz``.
        Raises TypeError/ValueError for something that is not a Setpoint or an empty one;
        returns ``accepted=False`` with a reason when the link is down or a landing is latched.
        """
        if not isinstance(sp, Setpoint):
            raise TypeError(f"send_setpoint takes a planner_pkg.types.Setpoint, got {type(sp).__name__}")
        if sp.is_empty:
            raise ValueError("setpoint has no position, velocity or acceleration: nothing to track")
        now = self._clock()
        with self._lock:
            if self._thread is None:
                return SendResult(False, None, reason="not connected: call connect() first")
            if self._link.state is not LinkState.OK:
                return SendResult(False, None, reason=f"FCU link is {self._link.state.value}: setpoint dropped")
            refusal = envelope_violation(sp, self.config.failsafe.envelope)
            if refusal is None:
                commanded, tags, details = limit_setpoint(sp, self.config.failsafe, self._fence,
                                                          self._fresh_position(now))
                try:
                    target = setpoint_to_target(commanded)
                except SetpointEncodingError as exc:  # the envelope should make this impossible: a bug
                    refusal = f"cannot be encoded: {exc}"
                    self._on_fault("setpoint encoding", exc, now, "setpoint refused")
            if refusal is not None:
                return self._refuse(refusal, now)
            resumed = self._supervisor.phase is StreamPhase.HOLD
            if not self._supervisor.on_input(now):
                return SendResult(False, None, reason="stale-stream failsafe is landing the vehicle: setpoint ignored "
                                                      "(re-enter OFFBOARD to take control again)")
            if resumed:
                self._hold = None
                self._log.info("setpoint stream resumed: hold released")
            for tag in tags:
                self._clamps[tag] += 1
            if details:
                self._last_clamp = "; ".join(details)
                self._log.warning("setpoint clamped: %s", self._last_clamp)
            self._user_sp = sp
            if not self._streaming:
                self._streaming, self._stream_since = True, now
            if now - self._last_tx_t >= self._min_interval_s:
                self._send_target(commanded, now, target)
            else:
                self._dirty = True  # rate cap: the I/O thread sends the newest one shortly
            return SendResult(True, commanded, tags, details)

    def _refuse(self, reason: str, now: float) -> SendResult:
        """Count and log (throttled) a refused setpoint; the stream goes on unchanged."""
        self._refused += 1
        self._last_refusal = reason
        if now - self._refusal_logged_t >= _LOG_PERIOD_S:
            self._refusal_logged_t = now
            last = self._hold or self._user_sp
            keeps = f"still streaming {last.mode} setpoint" if self._streaming and last is not None else "nothing streamed"
            self._log.warning("setpoint refused (%d so far; %s): %s", self._refused, keeps, reason)
        return SendResult(False, None, reason=f"setpoint refused: {reason}", refused=True)

    # ------------------------------------------------------------------ commands
    def arm(self) -> None:
        """Arm; returns once the FCU ACKed and its HEARTBEAT shows armed (else CommandError)."""
        self._run_command(cmd.MAV_CMD_COMPONENT_ARM_DISARM, (1.0, 0, 0, 0, 0, 0, 0), "arm")
        self._wait_for(lambda: self._vehicle.armed, "arming")

    def disarm(self, force: bool = False) -> None:
        """Disarm (``force`` also in flight: motors stop, the vehicle falls)."""
        magic = _FORCE_DISARM_MAGIC if force else 0.0
        self._run_command(cmd.MAV_CMD_COMPONENT_ARM_DISARM, (0.0, magic, 0, 0, 0, 0, 0), "disarm")
        self._wait_for(lambda: not self._vehicle.armed, "disarming")

    def set_mode(self, mode) -> None:
        """Switch flight mode (a :class:`FlightMode` or its value, e.g. ``"offboard"``).

        ``offboard`` (PX4 OFFBOARD / ArduCopter GUIDED) is refused without a fresh, finite state
        estimate (CommandRefused). For PX4 the bridge first streams setpoints for
        ``offboard_prime_s`` (a hold at the current position if the planner has not started),
        since PX4 refuses OFFBOARD without a stream. After the switch the planner has
        ``stale_setpoint_s`` to stream before the bridge holds, and ``land_after_hold_s`` more
        before it lands.
        """
        mode = FlightMode(mode)
        fcu = self._require_link(f"set mode {mode.value}")
        params = encode_mode(fcu.autopilot, mode)
        primed = False
        if mode is FlightMode.OFFBOARD:
            sent_before = self._tx_meter.count
            primed, ready_at = self._prepare_offboard(fcu)
            delay = ready_at - self._clock()
            if delay > 0:
                time.sleep(delay)  # the I/O thread streams meanwhile
            if fcu.autopilot is Autopilot.PX4:
                self._wait_for_stream(sent_before)
        self._run_command(cmd.MAV_CMD_DO_SET_MODE, params + (0.0, 0.0, 0.0, 0.0), f"set mode {mode.value}")
        self._wait_for(lambda: self._vehicle.mode is mode, f"mode {mode.value}")
        if primed:
            with self._lock:
                self._supervisor.on_input(self._clock())

    def takeoff(self, height_m: float) -> None:
        """Climb to ``height_m`` above home (m). PX4: AUTO.TAKEOFF (needs HOME_POSITION, since
        PX4 takes an AMSL altitude). ArduCopter: must already be armed in GUIDED."""
        if not (isinstance(height_m, (int, float)) and math.isfinite(height_m) and 0.0 < height_m <= 500.0):
            raise ValueError(f"takeoff height must be in (0, 500] m, got {height_m!r}")
        fcu = self._require_link("take off")
        if self._fence is not None and height_m > self._fence.ceiling_m:
            raise CommandRefused(f"takeoff to {height_m} m would leave the geofence (ceiling {self._fence.ceiling_m} m)")
        with self._lock:
            if fcu.autopilot is Autopilot.PX4:
                if self._vehicle.home_amsl_m is None:
                    raise CommandRefused("PX4 takes off to an AMSL altitude and no HOME_POSITION has arrived yet; "
                                         "wait for a home position, or climb with setpoints in OFFBOARD")
                params = (0.0, 0.0, 0.0, math.nan, math.nan, math.nan, self._vehicle.home_amsl_m + height_m)
            else:
                if not (self._vehicle.armed and self._vehicle.mode is FlightMode.OFFBOARD):
                    raise CommandRefused("ArduCopter takes off only when armed in GUIDED: set_mode('offboard') and "
                                         "arm() first")
                params = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, float(height_m))
        self._run_command(cmd.MAV_CMD_NAV_TAKEOFF, params, f"takeoff to {height_m} m")

    def land(self) -> None:
        """Land where the vehicle is (MAV_CMD_NAV_LAND); returns when the FCU is in its land mode."""
        self._run_command(cmd.MAV_CMD_NAV_LAND, (0.0,) * 7, "land")
        self._wait_for(lambda: self._vehicle.mode is FlightMode.LAND, "mode land")

    def return_to_launch(self) -> None:
        """Fly home and land (MAV_CMD_NAV_RETURN_TO_LAUNCH)."""
        self._run_command(cmd.MAV_CMD_NAV_RETURN_TO_LAUNCH, (0.0,) * 7, "return to launch")
        self._wait_for(lambda: self._vehicle.mode is FlightMode.RETURN, "mode return")

    # ------------------------------------------------------------------ command helpers
    def _require_link(self, action: str) -> FcuIdentity:
        with self._lock:
            if self._thread is None:
                raise CommandRefused(f"cannot {action}: not connected (call connect() first)")
            if self._link.state is not LinkState.OK:
                raise CommandRefused(f"cannot {action}: the FCU link is {self._link.state.value}")
            return self._link.fcu

    def _run_command(self, command: int, params, label: str) -> None:
        self._require_link(label)
        pending = self._commands.submit(self._request(command, params, label), self._clock())
        cfg = self.config
        # The manager's retry budget ends the wait; the extra bound only guards a dead I/O thread.
        pending.wait((cfg.command_retries + 1) * cfg.command_timeout_s + cfg.confirm_timeout_s)

    def _wait_for(self, predicate, what: str) -> None:
        with self._cond:
            if not self._cond.wait_for(predicate, self.config.confirm_timeout_s):
                raise CommandTimeout(
                    f"the FCU accepted the command but its HEARTBEAT did not show {what} within "
                    f"{self.config.confirm_timeout_s} s (mode {self._vehicle.mode_name}, armed={self._vehicle.armed})"
                )

    def _wait_for_stream(self, sent_before: int) -> None:
        """PX4 enters OFFBOARD only while setpoints arrive: after the priming time, also wait until
        the stream has put ``offboard_prime_s`` x ``setpoint_rate_hz`` setpoints on the wire (a
        loaded companion computer streams late), at most 10 x the priming time; then the FCU decides."""
        cfg = self.config
        needed = max(3, math.ceil(cfg.offboard_prime_s * cfg.setpoint_rate_hz))
        deadline = self._clock() + 10.0 * max(cfg.offboard_prime_s, 0.1)
        while self._tx_meter.count - sent_before < needed and self._clock() < deadline:
            time.sleep(0.01)
        if self._tx_meter.count - sent_before < needed:
            self._log.warning("only %d of %d priming setpoints went out before requesting OFFBOARD",
                              self._tx_meter.count - sent_before, needed)

    def _prepare_offboard(self, fcu: FcuIdentity):
        """Check the state estimate and (PX4) start the priming stream; returns (primed, ready_at)."""
        now = self._clock()
        cfg = self.config.failsafe
        with self._lock:
            est = self._telemetry.latest
            reason = state_unfit_reason(est.state if est else None, est.received_t if est else None, now,
                                        cfg.state_max_age_s)
            if reason is not None:
                raise CommandRefused(f"refusing to enter OFFBOARD/GUIDED: {reason}; the FCU must publish a local "
                                     f"position estimate before it may follow our setpoints")
            last = self._supervisor.last_input_t
            planner_live = self._streaming and last is not None and now - last <= cfg.stale_setpoint_s
            self._supervisor.reset()
            self._failsafe_land, self._hold = None, None
            primed = False
            if fcu.autopilot is Autopilot.PX4 and not planner_live:
                position = est.state.position if self._fence is None else self._fence.clamp(est.state.position)
                self._user_sp, primed = Setpoint.hold(position, est.state.yaw), True
                self._log.info("priming the PX4 setpoint stream with a hold at %s", fmt_vector(position))
            if planner_live or primed:
                self._supervisor.on_input(now)
            if primed and not self._streaming:
                self._streaming, self._stream_since, self._dirty = True, now, True
            ready_at = now
            if fcu.autopilot is Autopilot.PX4:
                ready_at = self._stream_since + self.config.offboard_prime_s
            return primed, ready_at

