"""Typed, validated configuration of the FCU bridge (defaults live here, nowhere else).

The ``fcu_bridge`` ROS parameters and the hardware YAML files are views of :class:`BridgeConfig`:
``BridgeConfig.from_dict`` (:class:`planner_pkg.config_schema.Config`) takes nested dicts (YAML) or dotted keys
(``"failsafe.geofence.kind"``, the ROS parameter spelling) and names the offending key in every
error. All distances are metres in the world ENU frame, times seconds, rates hertz.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Tuple

from planner_pkg.config_schema import Config, Schema, setting

from .connection import parse_url

__all__ = ["GeofenceConfig", "EnvelopeConfig", "FailsafeConfig", "BridgeConfig"]

_AUTOPILOTS = ("auto", "px4", "ardupilot")
_FENCE_KINDS = ("none", "box", "cylinder")


#: Errors read "key must be ..., got ..." (ConfigError, a ValueError); an unknown key is named alone.
_SCHEMA = Schema(sep=" ", finite_and=True,
                 unknown=lambda keys, known, section: f"unknown config key {keys[0]!r}; known keys here: {list(known)}")
_MAX_HOME_ALTITUDE_M = 1e5  # a home beyond 100 km AMSL is corruption, whatever the config says
_POSITIVE = dict(range=(0.0, float("inf")), low_open=True)
_NON_NEGATIVE = dict(range=(0.0, float("inf")))


@dataclass(frozen=True)
class GeofenceConfig(Config, schema=_SCHEMA, prefix="failsafe.geofence."):
    """Where the vehicle may go, ENU metres. ``kind``: ``none``, ``box`` (``box_min_m`` ..
    ``box_max_m``) or ``cylinder`` (``center_m`` (x, y), ``radius_m``, ``z_min_m`` .. ``z_max_m``).
    ``margin_m``: within this distance of the boundary, velocity/acceleration pointing out is cut."""

    kind: str = setting("none", choices=_FENCE_KINDS, description="none, box or cylinder")
    box_min_m: Tuple[float, float, float] = setting((-50.0, -50.0, 0.0), description=(
        "box fence: lowest corner (x, y, z), m, map frame"))
    box_max_m: Tuple[float, float, float] = setting((50.0, 50.0, 20.0), description=(
        "box fence: highest corner (x, y, z), m, map frame"))
    center_m: Tuple[float, float] = setting((0.0, 0.0), description="cylinder fence: axis (x, y), m, map frame")
    radius_m: float = setting(50.0, description="cylinder fence: radius, m")
    z_min_m: float = setting(0.0, description="cylinder fence: floor, m")
    z_max_m: float = setting(20.0, description="cylinder fence: ceiling, m")
    margin_m: float = setting(0.5, **_NON_NEGATIVE, description=(
        "within this distance of the fence, motion pointing out is cut, m"))

    def _check(self):
        p = "failsafe.geofence."
        if self.kind == "box" and not all(lo < hi for lo, hi in zip(self.box_min_m, self.box_max_m)):
            raise _SCHEMA.error(f"{p}box_min_m", f"{list(self.box_min_m)} must be below box_max_m "
                                f"{list(self.box_max_m)} on every axis")
        if self.kind == "cylinder":
            _SCHEMA.number(f"{p}radius_m", self.radius_m, **_POSITIVE)
            if not self.z_min_m < self.z_max_m:
                raise _SCHEMA.error(f"{p}z_min_m", f"({self.z_min_m}) must be below z_max_m ({self.z_max_m})")


#: Highest envelope the config accepts: the telemetry plausibility bounds (telemetry.py), far
#: inside float32 range, where float32 still resolves positions to 8 mm.
_ENVELOPE_CAPS = {"max_position_m": 1e5, "max_speed_mps": 200.0, "max_acceleration_mps2": 100.0,
                  "max_yaw_rate_radps": 100.0}


def _fence_reach_m(fence: GeofenceConfig) -> float:
    """Farthest distance (m) from the local origin of a point inside the fence (0 for none)."""
    if fence.kind == "box":
        return math.sqrt(sum(max(abs(lo), abs(hi)) ** 2 for lo, hi in zip(fence.box_min_m, fence.box_max_m)))
    if fence.kind == "cylinder":
        return math.hypot(math.hypot(*fence.center_m) + fence.radius_m, max(abs(fence.z_min_m), abs(fence.z_max_m)))
    return 0.0


@dataclass(frozen=True)
class EnvelopeConfig(Config, schema=_SCHEMA, prefix="failsafe.envelope."):
    """What a working planner could ever ask for; a setpoint beyond it is refused, never clamped.

    The clamps in :class:`FailsafeConfig` shape plausible setpoints (a little too fast -> the speed
    limit); the envelope catches broken ones (1e39 m, 300 m/s: a bug or corruption in the producer),
    which must not be turned into a flyable command. A refused setpoint is counted and logged and
    the bridge keeps streaming the last good one (or its hold).

    max_position_m: distance of a position setpoint from the FCU's local origin, m.
    max_speed_mps: magnitude of a velocity setpoint, m/s. max_acceleration_mps2: of an
    acceleration setpoint, m/s^2. max_yaw_rate_radps: |yaw rate|, rad/s.
    """

    max_position_m: float = setting(10_000.0, range=(0.0, _ENVELOPE_CAPS["max_position_m"]), low_open=True,
                                    description="a position setpoint farther than this from the FCU's origin is "
                                                "refused, m")
    max_speed_mps: float = setting(50.0, range=(0.0, _ENVELOPE_CAPS["max_speed_mps"]), low_open=True,
                                    description="a velocity setpoint faster than this is refused (not clamped), m/s")
    max_acceleration_mps2: float = setting(50.0, range=(0.0, _ENVELOPE_CAPS["max_acceleration_mps2"]), low_open=True,
                                    description="an acceleration setpoint above this is refused (not clamped), m/s^2")
    max_yaw_rate_radps: float = setting(20.0, range=(0.0, _ENVELOPE_CAPS["max_yaw_rate_radps"]), low_open=True,
                                    description="a yaw rate setpoint above this is refused (not clamped), rad/s")


@dataclass(frozen=True)
class FailsafeConfig(Config, schema=_SCHEMA, prefix="failsafe."):
    """Failsafes the bridge enforces regardless of what the planner does.

    stale_setpoint_s: no setpoint from the planner for this long while the FCU follows us ->
        hold position. land_after_hold_s: holding for this long -> land.
    state_max_age_s: the state estimate must be younger than this to enter OFFBOARD/GUIDED.
    max_horizontal_speed_mps, max_vertical_speed_mps, max_acceleration_mps2, max_yaw_rate_radps:
        clamps applied to the velocity, acceleration and yaw-rate fields of every setpoint.
    envelope: bounds beyond which a setpoint is refused instead (must contain the clamps and
        the geofence).
    """

    stale_setpoint_s: float = setting(0.5, **_POSITIVE, description=(
        "no setpoint for this long while the FCU follows us -> hold position, s"))
    land_after_hold_s: float = setting(5.0, **_NON_NEGATIVE, description="holding for this long -> land, s")
    state_max_age_s: float = setting(0.5, **_POSITIVE, description=(
        "OFFBOARD/GUIDED needs a state estimate younger than this, s"))
    max_horizontal_speed_mps: float = setting(5.0, **_POSITIVE, description=(
        "clamp on the horizontal velocity of every setpoint, m/s"))
    max_vertical_speed_mps: float = setting(2.0, **_POSITIVE, description=(
        "clamp on the vertical velocity of every setpoint, m/s"))
    max_acceleration_mps2: float = setting(5.0, **_POSITIVE, description=(
        "clamp on the acceleration of every setpoint, m/s^2"))
    max_yaw_rate_radps: float = setting(3.0, **_POSITIVE, description="clamp on the yaw rate of every setpoint, rad/s")
    geofence: GeofenceConfig = field(default_factory=GeofenceConfig)
    envelope: EnvelopeConfig = field(default_factory=EnvelopeConfig)

    def _check(self):
        env = self.envelope
        # A clamp above the envelope would refuse setpoints the clamp is meant to shape.
        fastest = math.hypot(self.max_horizontal_speed_mps, self.max_vertical_speed_mps)
        for clamp, value, bound, name in (
                ("hypot(failsafe.max_horizontal_speed_mps, max_vertical_speed_mps)", fastest, env.max_speed_mps,
                 "max_speed_mps"),
                ("failsafe.max_acceleration_mps2", self.max_acceleration_mps2, env.max_acceleration_mps2,
                 "max_acceleration_mps2"),
                ("failsafe.max_yaw_rate_radps", self.max_yaw_rate_radps, env.max_yaw_rate_radps, "max_yaw_rate_radps")):
            if value > bound:
                raise _SCHEMA.error(f"failsafe.envelope.{name}", f"({bound:g}) must be at least the clamp "
                                    f"{clamp} ({value:g})")
        reach = _fence_reach_m(self.geofence)
        if reach > env.max_position_m:
            raise _SCHEMA.error("failsafe.envelope.max_position_m", f"({env.max_position_m}) must contain the "
                                f"geofence, which reaches {reach:g} m from the origin")


_SIGNING_KEY_REFUSED = ("the signing key is never a parameter (parameters end up in logs); write it to a file "
                        "with mode 600 and set signing_key_path")
_FORBIDDEN = {name: _SIGNING_KEY_REFUSED for name in ("signing_key", "secret_key", "key")}


@dataclass(frozen=True)
class BridgeConfig(Config, schema=_SCHEMA, prefix="", refuse=_FORBIDDEN):
    """Everything the FCU bridge needs (see the module doc for units).

    fcu_url: see ``connection.parse_url``. autopilot: ``auto`` (trust the HEARTBEAT), ``px4`` or
    ``ardupilot`` (refuse to work with anything else). system_id/component_id: ours (a companion
    shares the vehicle's system id; 191 = MAV_COMP_ID_ONBOARD_COMPUTER). fcu_system_id: 0 = the
    first autopilot heard. setpoint_rate_hz: keep-alive stream rate (>= 20). max_setpoint_rate_hz:
    cap on what reaches the wire when the planner publishes faster (serial links are slow).
    telemetry_rate_hz: asked of the FCU with SET_MESSAGE_INTERVAL (0 = leave its defaults).
    command_timeout_s: per attempt; command_retries: extra attempts. confirm_timeout_s: after an
    ACK, how long the HEARTBEAT may take to show the new mode / arming state. offboard_prime_s:
    how long setpoints stream before PX4 is asked for OFFBOARD. signing_key_path: file with the
    MAVLink 2 signing key ("" = unsigned link). home_altitude_range_m: (low, high) AMSL altitude,
    m, a HOME_POSITION must lie in to be believed (PX4 takes off to home + height).
    """

    fcu_url: str = setting("udpin:0.0.0.0:14540", description=(
        "FCU link: udpin:HOST:PORT (listen), udpout:HOST:PORT, tcp:HOST:PORT, or /dev/DEVICE:BAUD"))
    autopilot: str = setting("auto", choices=_AUTOPILOTS, description=(
        "auto (trust the HEARTBEAT), px4 or ardupilot (refuse any other autopilot)"))
    system_id: int = setting(1, range=(1, 255), description="our MAVLink system id (a companion shares the vehicle's)")
    component_id: int = setting(191, range=(1, 255), description="our MAVLink component id (191 = onboard computer)")
    fcu_system_id: int = setting(0, range=(0, 255), description="the FCU's system id; 0 = the first autopilot heard")
    fcu_component_id: int = setting(1, range=(1, 255), description="the FCU's component id (1 = autopilot)")
    heartbeat_rate_hz: float = setting(1.0, **_POSITIVE, description="rate of our HEARTBEAT, Hz")
    setpoint_rate_hz: float = setting(20.0, description="keep-alive rate of the setpoint stream, Hz (20..250)")
    max_setpoint_rate_hz: float = setting(100.0, description="most setpoints per second put on the wire, Hz")
    telemetry_rate_hz: float = setting(30.0, **_NON_NEGATIVE, description=(
        "position/attitude rate asked of the FCU, Hz (0 = the FCU's defaults)"))
    request_odometry: bool = setting(False, description="also ask the FCU for ODOMETRY (carries covariances)")
    timesync_rate_hz: float = setting(1.0, **_NON_NEGATIVE, description="TIMESYNC rate, Hz (0 = off)")
    link_timeout_s: float = setting(1.5, **_POSITIVE, description="FCU silence after which the link counts as lost, s")
    connect_timeout_s: float = setting(10.0, **_POSITIVE, description=(
        "log an error with hints when no FCU HEARTBEAT came for this long, s"))
    reconnect_backoff_s: float = setting(0.5, **_POSITIVE, description=(
        "pause between attempts to reopen a lost serial/TCP link, s"))
    command_timeout_s: float = setting(1.0, **_POSITIVE, description="wait for a COMMAND_ACK per attempt, s")
    command_retries: int = setting(2, range=(0, 10), description="extra attempts of an unanswered command")
    confirm_timeout_s: float = setting(2.0, **_POSITIVE, description=(
        "after an ACK, wait for the HEARTBEAT to show the new mode/arming, s"))
    offboard_prime_s: float = setting(0.5, **_NON_NEGATIVE, description=(
        "PX4: stream setpoints this long before asking for OFFBOARD, s"))
    signing_key_path: str = setting("", description=(
        "file (mode 600) with the MAVLink 2 signing key; empty = unsigned link"))
    signing_link_id: int = setting(0, range=(0, 255), description="MAVLink 2 signing link id")
    home_altitude_range_m: Tuple[float, float] = setting((-500.0, 9000.0), description=(
        "(low, high) AMSL altitude, m, a HOME_POSITION must lie in to be believed"))
    failsafe: FailsafeConfig = field(default_factory=FailsafeConfig)

    def _check(self):
        parse_url(self.fcu_url)
        if not 20.0 <= self.setpoint_rate_hz <= 250.0:
            raise _SCHEMA.error("setpoint_rate_hz", "must be in 20..250 Hz (PX4 leaves OFFBOARD below 2 Hz; 20 Hz "
                                f"leaves margin for lost packets), got {self.setpoint_rate_hz}")
        if not self.max_setpoint_rate_hz >= self.setpoint_rate_hz:
            raise _SCHEMA.error("max_setpoint_rate_hz", f"({self.max_setpoint_rate_hz}) must be >= setpoint_rate_hz "
                                f"({self.setpoint_rate_hz})")
        low, high = self.home_altitude_range_m
        if not -_MAX_HOME_ALTITUDE_M <= low < high <= _MAX_HOME_ALTITUDE_M:
            raise _SCHEMA.error("home_altitude_range_m", f"must be (low, high) with low < high, both within "
                                f"+-{_MAX_HOME_ALTITUDE_M:g} m, got {list(self.home_altitude_range_m)}")
