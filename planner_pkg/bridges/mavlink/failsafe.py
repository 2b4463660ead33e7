"""Failsafes the bridge enforces on its own, whatever the planner sends (pure logic, no I/O).

* :func:`envelope_violation`: why a setpoint lies outside the configured flight envelope (then
  the bridge refuses it outright: a 1e39 m position is a bug, not something to clamp).
* :func:`limit_setpoint`: geofence (box or cylinder) and speed/acceleration/yaw-rate clamps
  applied to every accepted setpoint before it reaches the wire.
* :class:`StreamSupervisor`: the planner's setpoint stream went quiet while the FCU follows us
  -> hold position; still quiet after ``land_after_hold_s`` -> land (latched).
* :func:`state_unfit_reason`: why a state estimate is too old or broken to hand control to us.

All positions are world ENU metres, velocities m/s, accelerations m/s^2, times seconds on the
bridge's monotonic clock. Link loss is handled by the bridge (it stops streaming so the FCU's
own offboard-loss failsafe takes over) and reported with :data:`FailsafeReason.LINK_LOST`.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from enum import Enum
from typing import List, Optional, Tuple

import numpy as np

from planner_pkg.types import Setpoint

from .config import EnvelopeConfig, FailsafeConfig, GeofenceConfig

__all__ = [
    "FailsafeReason",
    "StreamPhase",
    "Geofence",
    "BoxGeofence",
    "CylinderGeofence",
    "make_geofence",
    "envelope_violation",
    "limit_setpoint",
    "StreamSupervisor",
    "state_unfit_reason",
]


class FailsafeReason(str, Enum):
    """The failsafe currently in force (``status().failsafe``), most severe first."""

    LINK_LOST = "fcu_link_lost"
    BRIDGE_FAULT = "bridge_fault"  # the bridge's own I/O loop failed (a bug): see failsafe_detail
    STREAM_STALE_LAND = "setpoint_stream_stale_land"
    STREAM_STALE_HOLD = "setpoint_stream_stale_hold"
    GEOFENCE_BREACH = "geofence_breach"
    NONE = "none"


class StreamPhase(str, Enum):
    IDLE = "idle"  # no stream to supervise, or the FCU is not following us
    NOMINAL = "nominal"  # planner setpoints are fresh
    HOLD = "hold"  # stream stale: the bridge streams a hold at the position where it went stale
    LAND = "land"  # held too long: landing commanded (latched until reset)


# ---------------------------------------------------------------------------------------------
# Geofences
# ---------------------------------------------------------------------------------------------
class Geofence(ABC):
    """A closed region of world ENU space the vehicle must stay in."""

    margin_m: float
    ceiling_m: float  # highest allowed z, m ENU

    @abstractmethod
    def contains(self, p) -> bool:
        """True when position ``p`` (3,) m is inside or on the boundary."""

    @abstractmethod
    def clamp(self, p) -> np.ndarray:
        """The point (3,) of the fence nearest to ``p`` (``p`` itself when inside)."""

    @abstractmethod
    def outward_normals(self, p) -> List[np.ndarray]:
        """Unit outward normals (3,) of the faces within ``margin_m`` of ``p`` (or behind it)."""


class BoxGeofence(Geofence):
    """Axis-aligned box ``min_m`` .. ``max_m`` (3,) in ENU metres."""

    def __init__(self, min_m, max_m, margin_m: float = 0.5):
        self.min_m = np.asarray(min_m, dtype=np.float64)
        self.max_m = np.asarray(max_m, dtype=np.float64)
        self.margin_m = float(margin_m)
        self.ceiling_m = float(self.max_m[2])

    def contains(self, p) -> bool:
        p = np.asarray(p, dtype=np.float64)
        return bool(np.all(p >= self.min_m) and np.all(p <= self.max_m))

    def clamp(self, p) -> np.ndarray:
        return np.clip(np.asarray(p, dtype=np.float64), self.min_m, self.max_m)

    def outward_normals(self, p) -> List[np.ndarray]:
        p = np.asarray(p, dtype=np.float64)
        normals = []
        for axis in range(3):
            if p[axis] >= self.max_m[axis] - self.margin_m:
                normals.append(np.eye(3)[axis])
            if p[axis] <= self.min_m[axis] + self.margin_m:
                normals.append(-np.eye(3)[axis])
        return normals

    def __repr__(self) -> str:
        return f"BoxGeofence(min_m={self.min_m.tolist()}, max_m={self.max_m.tolist()})"


class CylinderGeofence(Geofence):
    """Vertical cylinder: ``center_m`` (x, y), ``radius_m``, heights ``z_min_m`` .. ``z_max_m``."""

    def __init__(self, center_m, radius_m: float, z_min_m: float, z_max_m: float, margin_m: float = 0.5):
        self.center_m = np.asarray(center_m, dtype=np.float64)
        self.radius_m = float(radius_m)
        self.z_min_m, self.z_max_m = float(z_min_m), float(z_max_m)
        self.margin_m = float(margin_m)
        self.ceiling_m = self.z_max_m

    def contains(self, p) -> bool:
        p = np.asarray(p, dtype=np.float64)
        r = math.hypot(p[0] - self.center_m[0], p[1] - self.center_m[1])
        return bool(r <= self.radius_m and self.z_min_m <= p[2] <= self.z_max_m)

    def clamp(self, p) -> np.ndarray:
        out = np.array(p, dtype=np.float64)
        d = out[:2] - self.center_m
        r = math.hypot(d[0], d[1])
        if r > self.radius_m:
            out[:2] = self.center_m + d * (self.radius_m / r)
        out[2] = min(max(out[2], self.z_min_m), self.z_max_m)
        return out

    def outward_normals(self, p) -> List[np.ndarray]:
        p = np.asarray(p, dtype=np.float64)
        normals = []
        d = p[:2] - self.center_m
        r = math.hypot(d[0], d[1])
        if r >= self.radius_m - self.margin_m and r > 1e-9:
            normals.append(np.array([d[0] / r, d[1] / r, 0.0]))
        if p[2] >= self.z_max_m - self.margin_m:
            normals.append(np.array([0.0, 0.0, 1.0]))
        if p[2] <= self.z_min_m + self.margin_m:
            normals.append(np.array([0.0, 0.0, -1.0]))
        return normals

    def __repr__(self) -> str:
        return (f"CylinderGeofence(center_m={self.center_m.tolist()}, radius_m={self.radius_m}, "
                f"z={self.z_min_m}..{self.z_max_m})")


def make_geofence(cfg: GeofenceConfig) -> Optional[Geofence]:
    """The fence described by ``cfg``, or None for ``kind: none``."""
    if cfg.kind == "box":
        return BoxGeofence(cfg.box_min_m, cfg.box_max_m, cfg.margin_m)
    if cfg.kind == "cylinder":
        return CylinderGeofence(cfg.center_m, cfg.radius_m, cfg.z_min_m, cfg.z_max_m, cfg.margin_m)
    return None


# ---------------------------------------------------------------------------------------------
# Setpoint limits
# ---------------------------------------------------------------------------------------------
def _cut_outward(v: np.ndarray, normals: List[np.ndarray]) -> Tuple[np.ndarray, bool]:
    out, cut = v.copy(), False
    for n in normals:
        d = float(out @ n)
        if d > 0.0:
            out -= d * n
            cut = True
    return out, cut


def _fmt(v) -> str:
    return "(" + ", ".join(f"{x:.2f}" for x in v) + ")"


def _fmt_g(v) -> str:
    """Like :func:`_fmt`, readable for absurd magnitudes too (1e+39, not 40 digits)."""
    return "(" + ", ".join(f"{x:.4g}" for x in v) + ")"


#: |yaw| beyond this is garbage, not an unwrapped heading: float64 still resolves 1e-10 rad
#: here, but no planner accumulates 160,000 turns.
MAX_ABS_YAW_RAD = 1e6


def envelope_violation(sp: Setpoint, env: EnvelopeConfig) -> Optional[str]:
    """Why ``sp`` lies outside the flight envelope ``env`` (non-finite or too large a field), or
    None when it may be flown (after :func:`limit_setpoint`). Magnitudes are Euclidean norms;
    ``math.hypot`` does not overflow where ``x**2`` would, and a NaN or inf fails every test."""
    checks = []
    if sp.has_position:
        checks.append(("position", sp.position, env.max_position_m, "m from the local origin", "max_position_m"))
    if sp.has_velocity:
        checks.append(("velocity", sp.velocity, env.max_speed_mps, "m/s", "max_speed_mps"))
    if sp.has_acceleration:
        checks.append(("acceleration", sp.acceleration, env.max_acceleration_mps2, "m/s^2", "max_acceleration_mps2"))
    for name, vec, limit, unit, key in checks:
        x, y, z = (float(c) for c in vec)
        size = math.hypot(x, y, z)
        if not size <= limit:
            return (f"{name} {_fmt_g((x, y, z))} is {size:.4g} {unit}, outside the flight envelope "
                    f"(failsafe.envelope.{key} = {limit:g})")
    if sp.has_yaw_rate and not abs(sp.yaw_rate) <= env.max_yaw_rate_radps:
        return (f"yaw_rate {sp.yaw_rate:.4g} rad/s is outside the flight envelope "
                f"(failsafe.envelope.max_yaw_rate_radps = {env.max_yaw_rate_radps:g})")
    if sp.has_yaw and not abs(sp.yaw) <= MAX_ABS_YAW_RAD:
        return f"yaw {sp.yaw:.4g} rad is not a heading (|yaw| above {MAX_ABS_YAW_RAD:g} rad)"
    return None


def limit_setpoint(
    sp: Setpoint, cfg: FailsafeConfig, fence: Optional[Geofence], position: Optional[np.ndarray]
) -> Tuple[Setpoint, Tuple[str, ...], Tuple[str, ...]]:
    """Apply the geofence and the speed/acceleration/yaw-rate clamps to ``sp`` (a setpoint inside
    the envelope, see :func:`envelope_violation`: the clamps assume finite, sane numbers).

    Args:
        sp: the planner's setpoint (ENU).
        position: the vehicle's current position (3,) m, or None when unknown (then the
            near-boundary velocity cut is skipped; position setpoints are still clamped).

    Returns:
        ``(setpoint, tags, details)``: the setpoint to send; the kinds of clamp applied
        (``"geofence"``, ``"speed"``, ``"acceleration"``, ``"yaw_rate"``); one human-readable line
        per clamp.
    """
    tags: List[str] = []
    details: List[str] = []
    pos, vel, acc = sp.position, sp.velocity, sp.acceleration
    normals: List[np.ndarray] = []
    if fence is not None:
        if sp.has_position and not fence.contains(pos):
            clamped = fence.clamp(pos)
            tags.append("geofence")
            details.append(f"geofence: position setpoint {_fmt(pos)} clamped to {_fmt(clamped)}")
            pos = clamped
        reference = pos if sp.has_position else position
        if reference is not None:
            normals = fence.outward_normals(reference)
    if sp.has_velocity:
        v = vel.copy()
        h = math.hypot(v[0], v[1])
        if h > cfg.max_horizontal_speed_mps:
            v[:2] *= cfg.max_horizontal_speed_mps / h
        v[2] = min(max(v[2], -cfg.max_vertical_speed_mps), cfg.max_vertical_speed_mps)
        if not np.array_equal(v, vel):
            tags.append("speed")
            details.append(f"speed: velocity {_fmt(vel)} clamped to {_fmt(v)}")
        v_cut, cut = _cut_outward(v, normals)
        if cut:
            if "geofence" not in tags:
                tags.append("geofence")
            details.append(f"geofence: outward velocity removed at the boundary, {_fmt(v)} -> {_fmt(v_cut)}")
        vel = v_cut
    if sp.has_acceleration:
        a = acc.copy()
        n = float(np.linalg.norm(a))
        if n > cfg.max_acceleration_mps2:
            a *= cfg.max_acceleration_mps2 / n
            tags.append("acceleration")
            details.append(f"acceleration: {_fmt(acc)} clamped to {_fmt(a)}")
        a_cut, cut = _cut_outward(a, normals)
        if cut:
            if "geofence" not in tags:
                tags.append("geofence")
            details.append(f"geofence: outward acceleration removed at the boundary, {_fmt(a)} -> {_fmt(a_cut)}")
        acc = a_cut
    yaw_rate = sp.yaw_rate
    if sp.has_yaw_rate and abs(yaw_rate) > cfg.max_yaw_rate_radps:
        yaw_rate = math.copysign(cfg.max_yaw_rate_radps, yaw_rate)
        tags.append("yaw_rate")
        details.append(f"yaw_rate: {sp.yaw_rate:.2f} rad/s clamped to {yaw_rate:.2f} rad/s")
    if not tags:
        return sp, (), ()
    return Setpoint(position=pos, velocity=vel, acceleration=acc, yaw=sp.yaw, yaw_rate=yaw_rate), tuple(tags), tuple(details)


def state_unfit_reason(state, received_t: Optional[float], now: float, max_age_s: float) -> Optional[str]:
    """Why ``state`` (a VehicleState received at ``received_t``) may not be trusted to fly on,
    or None when it is fresh and finite."""
    if state is None or received_t is None:
        return "no state estimate received from the FCU yet"
    age = now - received_t
    if age > max_age_s:
        return f"the state estimate is {age:.2f} s old (limit {max_age_s:.2f} s)"
    if not state.is_finite():
        return "the state estimate is not finite"
    return None


# ---------------------------------------------------------------------------------------------
# Stale setpoint stream
# ---------------------------------------------------------------------------------------------
class StreamSupervisor:
    """Watches the planner's setpoint stream while the FCU follows it.

    A stream starts with the first input (a planner setpoint, or the bridge's own priming hold
    before PX4 OFFBOARD). While ``engaged`` (FCU armed and in OFFBOARD/GUIDED):
    no input for ``stale_setpoint_s`` -> HOLD; HOLD for ``land_after_hold_s`` -> LAND. Fresh
    input during HOLD resumes NOMINAL; LAND is latched until :meth:`reset` (a new OFFBOARD
    request, disarm, or link loss) so a planner that wakes up cannot take back a landing.
    When not engaged (pilot took over, FCU switched mode) nothing is supervised.
    """

    def __init__(self, cfg: FailsafeConfig):
        self.cfg = cfg
        self.phase = StreamPhase.IDLE
        self.last_input_t: Optional[float] = None
        self.hold_since: Optional[float] = None

    def reset(self) -> None:
        self.phase = StreamPhase.IDLE
        self.last_input_t = None
        self.hold_since = None

    def on_input(self, now: float) -> bool:
        """Record a setpoint at ``now``; False when it is ignored because a landing is latched."""
        if self.phase is StreamPhase.LAND:
            return False
        self.last_input_t = now
        if self.phase is StreamPhase.HOLD:
            self.phase = StreamPhase.NOMINAL
            self.hold_since = None
        return True

    def force_land(self) -> None:
        """Latch LAND now (used when holding is impossible: no position to hold)."""
        self.phase = StreamPhase.LAND
        self.hold_since = None

    def evaluate(self, now: float, engaged: bool) -> Optional[StreamPhase]:
        """Advance the state machine; returns the new phase when it changed, else None."""
        before = self.phase
        if self.phase is StreamPhase.LAND:
            return None
        if not engaged or self.last_input_t is None:
            self.phase, self.hold_since = StreamPhase.IDLE, None
        elif now - self.last_input_t <= self.cfg.stale_setpoint_s:
            self.phase, self.hold_since = StreamPhase.NOMINAL, None
        elif self.phase is not StreamPhase.HOLD:
            self.phase, self.hold_since = StreamPhase.HOLD, now
        elif now - self.hold_since >= self.cfg.land_after_hold_s:
            self.phase = StreamPhase.LAND
        return self.phase if self.phase is not before else None
