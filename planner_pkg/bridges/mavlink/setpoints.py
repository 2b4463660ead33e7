"""Our ENU :class:`~planner_pkg.types.Setpoint` <-> the fields of SET_POSITION_TARGET_LOCAL_NED.

A Setpoint marks unused fields with NaN (PX4 convention); MAVLink marks them with bits of
``type_mask`` (POSITION_TARGET_TYPEMASK) and we send 0.0 in the ignored fields, because
ArduPilot and older PX4 releases do not all treat NaN in an ignored field the same way.
The frame is always MAV_FRAME_LOCAL_NED: the FCU's local origin, north-east-down.

The fields go on the wire as float32. :func:`setpoint_to_target` is the last guard before
struct packing: a field that is not a finite float32 raises :class:`SetpointEncodingError`
instead of pymavlink's ``OverflowError`` (or a silent inf). The bridge refuses such setpoints
long before (its flight envelope); this guard exists so that a bug there cannot kill the link.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from planner_pkg.types import Setpoint

from . import frames

__all__ = [
    "MAV_FRAME_LOCAL_NED",
    "IGNORE_POSITION",
    "IGNORE_VELOCITY",
    "IGNORE_ACCELERATION",
    "FORCE_SET",
    "IGNORE_YAW",
    "IGNORE_YAW_RATE",
    "FLOAT32_MAX",
    "SetpointEncodingError",
    "PositionTargetNed",
    "setpoint_to_target",
    "target_to_setpoint",
    "RateMeter",
]

MAV_FRAME_LOCAL_NED = 1
IGNORE_POSITION = 0b111  # X, Y, Z
IGNORE_VELOCITY = 0b111 << 3  # VX, VY, VZ
IGNORE_ACCELERATION = 0b111 << 6  # AX, AY, AZ
FORCE_SET = 1 << 9  # afx..afz are forces, not accelerations: never set by us
IGNORE_YAW = 1 << 10
IGNORE_YAW_RATE = 1 << 11
#: Largest finite float32: anything larger cannot be packed (struct raises OverflowError).
FLOAT32_MAX = float(np.finfo(np.float32).max)
_FIELDS = ("x", "y", "z", "vx", "vy", "vz", "afx", "afy", "afz", "yaw", "yaw_rate")


class SetpointEncodingError(ValueError):
    """A setpoint field that cannot go on the wire as a finite float32 (names the field)."""


@dataclass(frozen=True)
class PositionTargetNed:
    """The payload of SET_POSITION_TARGET_LOCAL_NED (NED metres, m/s, m/s^2, rad, rad/s)."""

    type_mask: int
    x: float
    y: float
    z: float
    vx: float
    vy: float
    vz: float
    afx: float
    afy: float
    afz: float
    yaw: float
    yaw_rate: float

    @property
    def position(self) -> np.ndarray:
        return np.array([self.x, self.y, self.z])

    @property
    def velocity(self) -> np.ndarray:
        return np.array([self.vx, self.vy, self.vz])

    @property
    def acceleration(self) -> np.ndarray:
        return np.array([self.afx, self.afy, self.afz])


def setpoint_to_target(sp: Setpoint) -> PositionTargetNed:
    """Convert an ENU setpoint to NED target fields with the matching ``type_mask``.

    A setpoint's jerk is not sent: SET_POSITION_TARGET_LOCAL_NED has no field for it (the
    autopilot's own position controller shapes its attitude).

    Raises ValueError for an empty setpoint (no position, velocity or acceleration): MAVLink has
    no meaning for "ignore everything", and PX4 would reject it while in OFFBOARD; and
    :class:`SetpointEncodingError` when a field is not a finite float32 (see the module doc).
    """
    if sp.is_empty:
        raise ValueError("setpoint has no position, velocity or acceleration: nothing to send")
    mask = 0
    zeros = (0.0, 0.0, 0.0)
    if sp.has_position:
        pos = frames.enu_to_ned_floats(sp.position)
    else:
        mask |= IGNORE_POSITION
        pos = zeros
    if sp.has_velocity:
        vel = frames.enu_to_ned_floats(sp.velocity)
    else:
        mask |= IGNORE_VELOCITY
        vel = zeros
    if sp.has_acceleration:
        acc = frames.enu_to_ned_floats(sp.acceleration)
    else:
        mask |= IGNORE_ACCELERATION
        acc = zeros
    if sp.has_yaw:
        yaw = frames.yaw_enu_to_ned(sp.yaw)
    else:
        mask |= IGNORE_YAW
        yaw = 0.0
    if sp.has_yaw_rate:
        yaw_rate = frames.yaw_rate_enu_to_ned(sp.yaw_rate)
    else:
        mask |= IGNORE_YAW_RATE
        yaw_rate = 0.0
    target = PositionTargetNed(mask, *pos, *vel, *acc, yaw, yaw_rate)
    for name in _FIELDS:
        value = getattr(target, name)
        if not abs(value) <= FLOAT32_MAX:  # NaN fails too
            raise SetpointEncodingError(f"SET_POSITION_TARGET_LOCAL_NED.{name} = {value!r} is not a finite float32")
    return target


def target_to_setpoint(t: PositionTargetNed) -> Setpoint:
    """The inverse of :func:`setpoint_to_target` (used by the FCU side of tests and to read back
    POSITION_TARGET_LOCAL_NED). Raises ValueError when ``type_mask`` ignores only part of a
    vector or asks for forces: such a target has no Setpoint equivalent."""
    mask = int(t.type_mask)
    if mask & FORCE_SET:
        raise ValueError("type_mask FORCE_SET (force targets) is not supported")
    nan3 = np.full(3, math.nan)
    fields = []
    for bits, vec, name in (
        (IGNORE_POSITION, t.position, "position"),
        (IGNORE_VELOCITY, t.velocity, "velocity"),
        (IGNORE_ACCELERATION, t.acceleration, "acceleration"),
    ):
        part = mask & bits
        if part == bits:
            fields.append(nan3)
        elif part == 0:
            fields.append(frames.ned_to_enu(vec))
        else:
            raise ValueError(f"type_mask {mask:#06x} ignores only some {name} axes")
    yaw = math.nan if mask & IGNORE_YAW else frames.yaw_ned_to_enu(t.yaw)
    yaw_rate = math.nan if mask & IGNORE_YAW_RATE else frames.yaw_rate_ned_to_enu(t.yaw_rate)
    return Setpoint(position=fields[0], velocity=fields[1], acceleration=fields[2], yaw=yaw, yaw_rate=yaw_rate)


class RateMeter:
    """Events per second over a sliding window (``window_s``), e.g. setpoints on the wire."""

    def __init__(self, window_s: float = 1.0):
        self.window_s = window_s
        self._times: deque = deque()
        self.count = 0

    def tick(self, now: float) -> None:
        self.count += 1
        self._times.append(now)
        self._trim(now)

    def rate_hz(self, now: float) -> float:
        self._trim(now)
        return len(self._times) / self.window_s

    def _trim(self, now: float) -> None:
        cutoff = now - self.window_s
        while self._times and self._times[0] < cutoff:
            self._times.popleft()
