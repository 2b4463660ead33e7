"""What the FCU says about itself: arming, flight mode, landed state, battery, home, messages.

Pure bookkeeping from HEARTBEAT, SYS_STATUS, EXTENDED_SYS_STATE, HOME_POSITION and STATUSTEXT;
implausible values raise :class:`~.telemetry.TelemetryRejected` and change nothing. The public
summary is :class:`BridgeStatus` (built by the bridge) and :class:`SendResult`.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from planner_pkg.types import Setpoint

from .failsafe import FailsafeReason, StreamPhase
from .link import LinkState
from .modes import MAV_MODE_FLAG_SAFETY_ARMED, Autopilot, FlightMode, decode_mode
from .telemetry import TelemetryRejected

__all__ = ["VehicleTracker", "BridgeStatus", "SendResult", "LANDED_STATES"]

LANDED_STATES = {0: "unknown", 1: "on_ground", 2: "in_air", 3: "takeoff", 4: "landing"}
_SEVERITY = ("EMERGENCY", "ALERT", "CRITICAL", "ERROR", "WARNING", "NOTICE", "INFO", "DEBUG")


class VehicleTracker:
    """Latest vehicle-level facts reported by the FCU."""

    def __init__(self, statustext_keep: int = 8, home_altitude_range_m: Tuple[float, float] = (-500.0, 9000.0)):
        self.home_altitude_range_m = home_altitude_range_m
        self.armed = False
        self.mode = FlightMode.OTHER
        self.mode_name = "unknown"
        self.system_status = 0
        self.landed_state = 0
        self.battery_voltage_v: Optional[float] = None
        self.battery_current_a: Optional[float] = None
        self.battery_remaining: Optional[float] = None  # fraction 0..1
        self.home_amsl_m: Optional[float] = None
        self.statustext: deque = deque(maxlen=statustext_keep)
        self.heartbeats = 0

    def on_heartbeat(self, msg, autopilot: Autopilot) -> None:
        self.armed = bool(msg.base_mode & MAV_MODE_FLAG_SAFETY_ARMED)
        self.mode, self.mode_name = decode_mode(autopilot, msg.base_mode, msg.custom_mode)
        self.system_status = int(msg.system_status)
        self.heartbeats += 1

    def on_sys_status(self, msg) -> None:
        if not (msg.battery_remaining == -1 or 0 <= msg.battery_remaining <= 100):
            raise TelemetryRejected(f"SYS_STATUS battery_remaining {msg.battery_remaining} % is outside -1..100")
        self.battery_voltage_v = None if msg.voltage_battery == 0xFFFF else msg.voltage_battery * 1e-3
        self.battery_current_a = None if msg.current_battery == -1 else msg.current_battery * 1e-2
        self.battery_remaining = None if msg.battery_remaining == -1 else msg.battery_remaining / 100.0

    def on_extended_sys_state(self, msg) -> None:
        if msg.landed_state not in LANDED_STATES:
            raise TelemetryRejected(f"EXTENDED_SYS_STATE landed_state {msg.landed_state} is not a MAV_LANDED_STATE")
        self.landed_state = int(msg.landed_state)

    def on_home_position(self, msg) -> None:
        """PX4 takes off to home altitude + height: an implausible home is never believed."""
        if not (abs(msg.latitude) <= 900_000_000 and abs(msg.longitude) <= 1_800_000_000):
            raise TelemetryRejected(f"HOME_POSITION lat/lon {msg.latitude}, {msg.longitude} (degE7) out of range")
        altitude_m = msg.altitude * 1e-3
        low, high = self.home_altitude_range_m
        if not low <= altitude_m <= high:
            raise TelemetryRejected(f"HOME_POSITION altitude {altitude_m:.3f} m AMSL is outside home_altitude_range_m "
                                    f"[{low:g}, {high:g}]")
        self.home_amsl_m = altitude_m

    def on_statustext(self, msg) -> None:
        text = msg.text.decode("utf-8", "replace") if isinstance(msg.text, (bytes, bytearray)) else str(msg.text)
        severity = _SEVERITY[msg.severity] if 0 <= msg.severity < len(_SEVERITY) else str(msg.severity)
        self.statustext.append(f"{severity}: {text.rstrip(chr(0))}")


@dataclass(frozen=True)
class SendResult:
    """What ``FcuBridge.send_setpoint`` did with a setpoint.

    accepted: False when it was dropped (``reason`` says why: link down, landing latched,
        outside the flight envelope).
    commanded: the setpoint actually streamed (ENU, after clamps), or None.
    clamped: kinds of clamp applied (``"geofence"``, ``"speed"``, ``"acceleration"``, ``"yaw_rate"``).
    details: one readable line per clamp.
    refused: True when the setpoint itself was bad (outside the envelope): the bridge keeps
        streaming the last good one; False for a drop that says nothing about the setpoint.
    """

    accepted: bool
    commanded: Optional[Setpoint]
    clamped: Tuple[str, ...] = ()
    details: Tuple[str, ...] = ()
    reason: str = ""
    refused: bool = False


@dataclass(frozen=True)
class BridgeStatus:
    """A snapshot of the bridge for diagnostics (the ROS node's ``status`` topic).

    Times are seconds, battery voltage volts, ``battery_remaining`` a fraction 0..1 (None when
    the FCU does not know). ``rx_rejected`` counts rejected frames per reason: the codec's
    (garbage, crc, signature, malformed, unknown_message, truncated) plus ``foreign_source``
    (valid frame from another address/system than the locked FCU), ``invalid_values``
    (authentic frame with impossible content) and ``out_of_order`` (telemetry older than the
    newest of its stream). ``setpoints_refused`` counts setpoints outside the flight envelope
    (``last_refusal`` says why); ``fcu_reboots`` the FCU timeline restarts seen in telemetry.
    """

    link: LinkState
    autopilot: Optional[Autopilot]
    fcu_system_id: Optional[int]
    mode: FlightMode
    mode_name: str
    armed: bool
    landed_state: str
    battery_voltage_v: Optional[float]
    battery_remaining: Optional[float]
    failsafe: FailsafeReason
    failsafe_detail: str
    stream_phase: StreamPhase
    streaming: bool
    setpoint_rate_hz: float
    state_age_s: Optional[float]
    time_offset_s: Optional[float]
    time_sync_source: str
    signing: bool
    rx_messages: int
    rx_rejected: Dict[str, int]
    tx_messages: int
    clamps: Dict[str, int]
    last_clamp: str
    link_losses: int
    last_link_loss_detect_s: Optional[float]
    reconnects: int
    transport_errors: int
    last_transport_error: str
    handler_errors: int
    last_error: str
    statustext: Tuple[str, ...] = field(default_factory=tuple)
    setpoints_refused: int = 0
    last_refusal: str = ""
    fcu_reboots: int = 0

    @property
    def rx_rejected_total(self) -> int:
        return sum(self.rx_rejected.values())
