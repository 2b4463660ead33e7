"""Autopilot families and flight modes: what a HEARTBEAT's ``custom_mode`` means and how to ask
for a mode with MAV_CMD_DO_SET_MODE.

Our code speaks in :class:`FlightMode` (autopilot-neutral); only this module knows PX4's
``(main_mode, sub_mode)`` packing and ArduCopter's mode numbers. ``FlightMode.OFFBOARD`` is the
mode in which the FCU follows our SET_POSITION_TARGET_LOCAL_NED stream: PX4 OFFBOARD,
ArduCopter GUIDED.
"""
from __future__ import annotations

from enum import Enum
from typing import Tuple

__all__ = [
    "Autopilot",
    "FlightMode",
    "decode_mode",
    "encode_mode",
    "MAV_AUTOPILOT_PX4",
    "MAV_AUTOPILOT_ARDUPILOTMEGA",
    "MAV_MODE_FLAG_CUSTOM_MODE_ENABLED",
    "MAV_MODE_FLAG_SAFETY_ARMED",
    "COPTER_TYPES",
    "px4_custom_mode",
]

# MAVLink common.xml values (kept here so the mode tables read without the dialect module).
MAV_AUTOPILOT_ARDUPILOTMEGA = 3
MAV_AUTOPILOT_PX4 = 12
MAV_MODE_FLAG_CUSTOM_MODE_ENABLED = 1
MAV_MODE_FLAG_SAFETY_ARMED = 128
#: MAV_TYPEs that ArduCopter reports (quad, coax, heli, hexa, octo, tri, dodeca, deca).
COPTER_TYPES = frozenset({2, 3, 4, 13, 14, 15, 29, 35})


class Autopilot(str, Enum):
    """Flight-controller firmware family, detected from HEARTBEAT.autopilot."""

    PX4 = "px4"
    ARDUPILOT = "ardupilot"

    @classmethod
    def from_heartbeat(cls, autopilot_field: int):
        """The family for a HEARTBEAT ``autopilot`` value, or None for anything else."""
        return {MAV_AUTOPILOT_PX4: cls.PX4, MAV_AUTOPILOT_ARDUPILOTMEGA: cls.ARDUPILOT}.get(int(autopilot_field))


class FlightMode(str, Enum):
    """Autopilot-neutral flight modes (the value is what ``status()`` and the ROS node show)."""

    OFFBOARD = "offboard"  # PX4 OFFBOARD / ArduCopter GUIDED: follow our setpoint stream
    HOLD = "hold"  # PX4 AUTO.LOITER / ArduCopter LOITER or BRAKE
    POSITION = "position"  # PX4 POSCTL / ArduCopter POSHOLD
    ALTITUDE = "altitude"  # PX4 ALTCTL / ArduCopter ALT_HOLD
    STABILIZED = "stabilized"
    MANUAL = "manual"
    ACRO = "acro"
    TAKEOFF = "takeoff"
    LAND = "land"
    RETURN = "return"
    MISSION = "mission"
    OTHER = "other"  # a mode this table does not name (see the mode name string)


# ---- PX4: custom_mode = main_mode << 16 | sub_mode << 24 (px4_custom_mode.h) ----------------
_PX4_MAIN = {1: "MANUAL", 2: "ALTCTL", 3: "POSCTL", 4: "AUTO", 5: "ACRO", 6: "OFFBOARD", 7: "STABILIZED", 8: "RATTITUDE"}
_PX4_AUTO_SUB = {
    1: "READY", 2: "TAKEOFF", 3: "LOITER", 4: "MISSION", 5: "RTL", 6: "LAND",
    8: "FOLLOW_TARGET", 9: "PRECLAND", 10: "VTOL_TAKEOFF",
}
_PX4_ENCODE = {
    FlightMode.OFFBOARD: (6, 0),
    FlightMode.HOLD: (4, 3),
    FlightMode.POSITION: (3, 0),
    FlightMode.ALTITUDE: (2, 0),
    FlightMode.STABILIZED: (7, 0),
    FlightMode.MANUAL: (1, 0),
    FlightMode.ACRO: (5, 0),
    FlightMode.TAKEOFF: (4, 2),
    FlightMode.LAND: (4, 6),
    FlightMode.RETURN: (4, 5),
    FlightMode.MISSION: (4, 4),
}
_PX4_DECODE = {v: k for k, v in _PX4_ENCODE.items()}
_PX4_DECODE[(4, 9)] = FlightMode.LAND  # precision land is still a landing

# ---- ArduCopter: custom_mode is the mode number (ArduCopter/mode.h) --------------------------
_COPTER_NAMES = {
    0: "STABILIZE", 1: "ACRO", 2: "ALT_HOLD", 3: "AUTO", 4: "GUIDED", 5: "LOITER", 6: "RTL",
    7: "CIRCLE", 9: "LAND", 11: "DRIFT", 13: "SPORT", 14: "FLIP", 15: "AUTOTUNE", 16: "POSHOLD",
    17: "BRAKE", 18: "THROW", 19: "AVOID_ADSB", 20: "GUIDED_NOGPS", 21: "SMART_RTL",
    22: "FLOWHOLD", 23: "FOLLOW", 24: "ZIGZAG", 25: "SYSTEMID", 26: "AUTOROTATE", 27: "AUTO_RTL",
}
_COPTER_ENCODE = {
    FlightMode.OFFBOARD: 4,
    FlightMode.HOLD: 5,
    FlightMode.POSITION: 16,
    FlightMode.ALTITUDE: 2,
    FlightMode.STABILIZED: 0,
    FlightMode.ACRO: 1,
    FlightMode.LAND: 9,
    FlightMode.RETURN: 6,
    FlightMode.MISSION: 3,
}
_COPTER_DECODE = {v: k for k, v in _COPTER_ENCODE.items()}
_COPTER_DECODE.update({17: FlightMode.HOLD, 21: FlightMode.RETURN, 27: FlightMode.RETURN})


def px4_custom_mode(main_mode: int, sub_mode: int = 0) -> int:
    """PX4's 32-bit HEARTBEAT ``custom_mode`` for ``(main_mode, sub_mode)``."""
    return (int(main_mode) & 0xFF) << 16 | (int(sub_mode) & 0xFF) << 24


def decode_mode(autopilot: Autopilot, base_mode: int, custom_mode: int) -> Tuple[FlightMode, str]:
    """``(FlightMode, name)`` of a HEARTBEAT, e.g. ``(FlightMode.HOLD, "AUTO.LOITER")``.

    A HEARTBEAT without MAV_MODE_FLAG_CUSTOM_MODE_ENABLED carries no custom mode: that is
    reported as ``(FlightMode.OTHER, "BASE_MODE_<n>")``.
    """
    if not int(base_mode) & MAV_MODE_FLAG_CUSTOM_MODE_ENABLED:
        return FlightMode.OTHER, f"BASE_MODE_{int(base_mode)}"
    if autopilot is Autopilot.PX4:
        main = (int(custom_mode) >> 16) & 0xFF
        sub = (int(custom_mode) >> 24) & 0xFF
        main_name = _PX4_MAIN.get(main, f"MAIN_{main}")
        if main == 4:
            name = f"AUTO.{_PX4_AUTO_SUB.get(sub, f'SUB_{sub}')}"
            return _PX4_DECODE.get((main, sub), FlightMode.OTHER), name
        return _PX4_DECODE.get((main, 0), FlightMode.OTHER), main_name
    number = int(custom_mode)
    return _COPTER_DECODE.get(number, FlightMode.OTHER), _COPTER_NAMES.get(number, f"MODE_{number}")


def encode_mode(autopilot: Autopilot, mode: FlightMode) -> Tuple[float, float, float]:
    """``(param1, param2, param3)`` of MAV_CMD_DO_SET_MODE that selects ``mode``.

    Raises ValueError for a mode the autopilot does not have (e.g. ArduCopter has no TAKEOFF
    mode: use GUIDED and ``FcuBridge.takeoff``).
    """
    mode = FlightMode(mode)
    if autopilot is Autopilot.PX4:
        if mode not in _PX4_ENCODE:
            raise ValueError(f"PX4 has no mode for {mode.value!r}; choose one of {[m.value for m in _PX4_ENCODE]}")
        main, sub = _PX4_ENCODE[mode]
        return float(MAV_MODE_FLAG_CUSTOM_MODE_ENABLED), float(main), float(sub)
    if mode not in _COPTER_ENCODE:
        raise ValueError(
            f"ArduCopter has no mode for {mode.value!r}; choose one of {[m.value for m in _COPTER_ENCODE]}"
        )
    return float(MAV_MODE_FLAG_CUSTOM_MODE_ENABLED), float(_COPTER_ENCODE[mode]), 0.0
