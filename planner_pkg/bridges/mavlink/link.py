"""Who the flight controller is and whether it is still there.

* :class:`LinkMonitor` locks onto the first autopilot HEARTBEAT that fits the config (system
  id, component id, PX4 or ArduPilot, a multirotor for ArduPilot), remembers its address, and
  declares the link LOST when no valid message from it arrived for ``timeout_s``. Until the
  link is lost, frames from any other address or MAVLink source are not trusted: a spoofer on
  the network cannot take the link over (signing closes the rest).
* :func:`our_heartbeat` is what we send at 1 Hz: an onboard controller component, so the FCU
  can detect *our* loss (PX4's COM_OBC_LOSS_T, ArduPilot's companion checks).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional, Tuple

from .modes import COPTER_TYPES, Autopilot

__all__ = ["LinkState", "FcuIdentity", "LinkMonitor", "our_heartbeat"]

Address = Optional[Tuple[str, int]]

MAV_TYPE_ONBOARD_CONTROLLER = 18
MAV_AUTOPILOT_INVALID = 8
MAV_STATE_ACTIVE = 4
_NON_VEHICLE_TYPES = frozenset({6, 18, 26, 27, 30, 31, 32, 33, 34, 36, 37, 38, 39})  # GCS, companion, gimbal, camera, ...


class LinkState(str, Enum):
    WAITING = "waiting"  # no autopilot heard yet
    OK = "ok"
    LOST = "lost"  # heard before, silent for longer than the link timeout


@dataclass(frozen=True)
class FcuIdentity:
    """The flight controller we are locked onto."""

    system_id: int
    component_id: int
    autopilot: Autopilot
    vehicle_type: int  # MAV_TYPE
    address: Address  # UDP source address, None on stream links


def our_heartbeat(mav):
    """Our HEARTBEAT message (type ONBOARD_CONTROLLER, autopilot INVALID, state ACTIVE)."""
    return mav.heartbeat_encode(MAV_TYPE_ONBOARD_CONTROLLER, MAV_AUTOPILOT_INVALID, 0, 0, MAV_STATE_ACTIVE)


class LinkMonitor:
    """Link lock-on and loss detection (pure logic; times in seconds on the bridge clock).

    Args:
        timeout_s: silence after which the link is LOST.
        expected: the autopilot family the config demands, or None for any supported one.
        fcu_system_id: 0 = any; fcu_component_id: usually 1 (MAV_COMP_ID_AUTOPILOT1).
    """

    def __init__(self, timeout_s: float, expected: Optional[Autopilot] = None, fcu_system_id: int = 0,
                 fcu_component_id: int = 1):
        self.timeout_s = timeout_s
        self.expected = expected
        self.fcu_system_id = fcu_system_id
        self.fcu_component_id = fcu_component_id
        self.state = LinkState.WAITING
        self.fcu: Optional[FcuIdentity] = None
        self.last_rx_t: Optional[float] = None
        self.lost_at: Optional[float] = None
        self.losses = 0
        self.note = ""  # why a heard autopilot was not accepted (shown when connect() times out)

    def _candidate(self, msg, address: Address) -> Optional[FcuIdentity]:
        src_sys, src_comp = msg.get_srcSystem(), msg.get_srcComponent()
        if src_comp != self.fcu_component_id or msg.type in _NON_VEHICLE_TYPES:
            return None
        if self.fcu_system_id and src_sys != self.fcu_system_id:
            self.note = f"ignored an autopilot with system id {src_sys} (config fcu_system_id: {self.fcu_system_id})"
            return None
        autopilot = Autopilot.from_heartbeat(msg.autopilot)
        if autopilot is None:
            self.note = f"system {src_sys} runs MAV_AUTOPILOT {msg.autopilot}, which is neither PX4 nor ArduPilot"
            return None
        if self.expected is not None and autopilot is not self.expected:
            self.note = f"system {src_sys} runs {autopilot.value} but the config says autopilot: {self.expected.value}"
            return None
        if autopilot is Autopilot.ARDUPILOT and msg.type not in COPTER_TYPES:
            self.note = f"ArduPilot system {src_sys} has MAV_TYPE {msg.type}; only ArduCopter frames are supported"
            return None
        return FcuIdentity(src_sys, src_comp, autopilot, int(msg.type), address)

    def is_from_fcu(self, src_system: int, src_component: int, address: Address) -> bool:
        fcu = self.fcu
        return (
            fcu is not None
            and src_system == fcu.system_id
            and src_component == fcu.component_id
            and (fcu.address is None or address == fcu.address)
        )

    def on_heartbeat(self, msg, address: Address, now: float) -> str:
        """Handle a HEARTBEAT; returns ``"fcu"`` (from the locked FCU), ``"locked"`` (this one
        made us lock on), ``"foreign"`` (another source) or ``"invalid"`` (claims to be the FCU
        but contradicts it: a different autopilot family).

        The lock is taken on the first acceptable heartbeat, and may move to a new address only
        while the link is LOST (e.g. the FCU rebooted onto another port). A different autopilot
        at the same system id is never accepted mid-session.
        """
        if self.is_from_fcu(msg.get_srcSystem(), msg.get_srcComponent(), address):
            if Autopilot.from_heartbeat(msg.autopilot) is not self.fcu.autopilot:
                return "invalid"
            self.on_fcu_message(now)
            return "fcu"
        if self.fcu is not None and self.state is not LinkState.LOST:
            return "foreign"
        candidate = self._candidate(msg, address)
        if candidate is None:
            return "foreign"
        if self.fcu is not None and (candidate.system_id, candidate.autopilot) != (self.fcu.system_id, self.fcu.autopilot):
            self.note = f"after link loss, refused a different autopilot (system {candidate.system_id}, {candidate.autopilot.value})"
            return "foreign"
        self.fcu = candidate
        self.on_fcu_message(now)
        return "locked"

    def on_fcu_message(self, now: float) -> None:
        """Any valid message from the FCU proves the link is up."""
        self.last_rx_t = now
        if self.state is not LinkState.OK:
            self.state = LinkState.OK
            self.lost_at = None

    def poll(self, now: float) -> Optional[LinkState]:
        """Check for silence; returns LinkState.LOST on the transition, else None."""
        if self.state is LinkState.OK and now - self.last_rx_t > self.timeout_s:
            self.state = LinkState.LOST
            self.lost_at = now
            self.losses += 1
            return LinkState.LOST
        return None
