"""FCU telemetry -> our :class:`~planner_pkg.types.VehicleState` (world ENU, body FLU).

Sources, in order of preference:
    * ODOMETRY (PX4 streams it; ArduPilot 4.5+ on request): one consistent sample with pose and
      velocity covariances.
    * LOCAL_POSITION_NED + ATTITUDE_QUATERNION (or ATTITUDE, which ArduPilot streams by
      default): combined on every position message with the latest attitude.
While ODOMETRY keeps arriving (within ``odometry_timeout_s``) the pair is ignored, so the two
never interleave into a jittery state.

Frames accepted for ODOMETRY: pose in MAV_FRAME_LOCAL_NED, or MAV_FRAME_LOCAL_FRD (a local frame
aligned with the vehicle's heading at boot instead of north; the map frame then is "east" of
that heading - consistent, just not geographic). Velocity in the child frame: MAV_FRAME_BODY_FRD
(rotated to the world here) or a local frame. Anything else is rejected, never guessed.

Every value is checked (finite, plausible, unit quaternion); a bad message raises
:class:`TelemetryRejected` and leaves the last good state untouched.

Order: each stream (LOCAL_POSITION_NED, ATTITUDE_QUATERNION, ATTITUDE, ODOMETRY) must not go
back in FCU time. A message older than the newest accepted one of its kind (a late UDP packet, a
radio retransmission, a replay) raises :class:`TelemetryOutOfOrder` and changes nothing; equal
timestamps pass (1 ms resolution). An autopilot *reboot* also sends time backwards, so
:class:`FcuClockGuard` takes a new timeline when ``reboot_confirm`` consecutive messages of a
stream all lie more than ``reboot_gap_s`` behind the newest and run forward among themselves;
any message on the old timeline in between cancels that. After a reboot a stream's first
``reboot_confirm - 1`` messages are dropped (40 ms at 50 Hz) and ``reboots`` counts it. Without
MAVLink signing a recorded burst can pass the same test, as can any forged message; signing is
the defence against forgery, this guard against the network's own reordering.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from planner_pkg.types import VehicleState, quaternion_to_matrix

from . import frames

__all__ = ["StateEstimate", "TelemetryRejected", "TelemetryOutOfOrder", "FcuClockGuard", "TelemetryAssembler",
           "euler_to_quaternion"]

MAV_FRAME_LOCAL_NED = 1
MAV_FRAME_BODY_NED = 8  # despite the name: vehicle-carried NED, i.e. world axes
MAV_FRAME_BODY_FRD = 12
MAV_FRAME_LOCAL_FRD = 20
_WORLD_FRAMES = (MAV_FRAME_LOCAL_NED, MAV_FRAME_LOCAL_FRD)
#: Sanity bounds: a local position beyond 100 km or a speed above 200 m/s is corruption.
MAX_POSITION_M = 1e5
MAX_SPEED_MPS = 200.0
MAX_RATE_RADPS = 100.0
#: ODOMETRY time_usec above this is UNIX time (2001+), not time since boot.
_UNIX_TIME_USEC = 1e15


class TelemetryRejected(ValueError):
    """A telemetry message with impossible or unsupported content."""


class TelemetryOutOfOrder(TelemetryRejected):
    """A telemetry message older (FCU time) than the newest accepted one of its stream."""


class FcuClockGuard:
    """Keeps one telemetry stream moving forward in FCU time (see the module doc).

    Timestamps are integer microseconds of FCU time (``time_boot_ms * 1000`` or ``time_usec``).
    Use :meth:`check` before decoding a message and :meth:`commit` once its content was
    accepted: a rejected message never moves the clock.

    Args:
        name: the stream, for messages. reboot_gap_s: how far behind the newest a message must
        be to count towards a reboot. reboot_confirm: how many such messages in a row.
    """

    def __init__(self, name: str, reboot_gap_s: float = 1.0, reboot_confirm: int = 3):
        self.name = name
        self.reboot_gap_us = int(reboot_gap_s * 1e6)
        self.reboot_confirm = reboot_confirm
        self.newest_us: Optional[int] = None
        self.reboots = 0
        self._candidate_us: Optional[int] = None  # newest of the run that may be a new timeline
        self._candidate_n = 0

    def check(self, stamp_us: int) -> None:
        """Raise TelemetryOutOfOrder unless ``stamp_us`` may be accepted."""
        newest = self.newest_us
        if newest is None or stamp_us >= newest:
            self._candidate_us, self._candidate_n = None, 0
            return
        behind_us = newest - stamp_us
        if behind_us > self.reboot_gap_us:
            if self._candidate_us is not None and stamp_us >= self._candidate_us:
                self._candidate_n += 1
            else:
                self._candidate_n = 1
            self._candidate_us = stamp_us
            if self._candidate_n >= self.reboot_confirm:
                return  # a new timeline: commit() takes it
        raise TelemetryOutOfOrder(
            f"{self.name} at FCU time {stamp_us * 1e-6:.3f} s is {behind_us * 1e-6:.3f} s older than the newest "
            f"accepted ({newest * 1e-6:.3f} s): out of order, dropped")

    def commit(self, stamp_us: int) -> bool:
        """Record an accepted message; returns True when it started a new timeline (reboot)."""
        rebooted = self.newest_us is not None and stamp_us < self.newest_us
        if rebooted:
            self.reboots += 1
        self.newest_us = stamp_us
        self._candidate_us, self._candidate_n = None, 0
        return rebooted


@dataclass(frozen=True, eq=False)
class StateEstimate:
    """The vehicle state as the FCU estimates it.

    Attributes:
        state: ENU/FLU state; ``state.t`` is our clock (s) at the FCU's measurement instant.
        pose_covariance: (6, 6) over ``(x, y, z, rot_x, rot_y, rot_z)`` in world ENU, or None.
        twist_covariance: (6, 6) over ``(vx, vy, vz, wx, wy, wz)`` in body FLU (the frame of a
            ROS ``nav_msgs/Odometry`` twist), or None.
        source: ``"odometry"`` or ``"local_position"``.
        received_t: our clock (s) when the message arrived (freshness is judged on this).
    """

    state: VehicleState
    pose_covariance: Optional[np.ndarray]
    twist_covariance: Optional[np.ndarray]
    source: str
    received_t: float


def euler_to_quaternion(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Quaternion (4,) ``(x, y, z, w)`` of ZYX Euler angles (rad): yaw, then pitch, then roll."""
    cr, sr = math.cos(0.5 * roll), math.sin(0.5 * roll)
    cp, sp = math.cos(0.5 * pitch), math.sin(0.5 * pitch)
    cy, sy = math.cos(0.5 * yaw), math.sin(0.5 * yaw)
    return np.array([
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
        cr * cp * cy + sr * sp * sy,
    ])


def _finite(name: str, values) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise TelemetryRejected(f"{name} has non-finite values {arr.tolist()}")
    return arr


def _bounded(name: str, vec: np.ndarray, limit: float) -> np.ndarray:
    if float(np.linalg.norm(vec)) > limit:
        raise TelemetryRejected(f"{name} {vec.tolist()} exceeds the plausible limit {limit}")
    return vec


def _unit_quaternion(name: str, q_xyzw) -> np.ndarray:
    q = _finite(name, q_xyzw)
    n = float(np.linalg.norm(q))
    if not 0.9 < n < 1.1:
        raise TelemetryRejected(f"{name} {q.tolist()} is not a unit quaternion (norm {n:.3f})")
    return q / n


class TelemetryAssembler:
    """Builds :class:`StateEstimate` objects from telemetry messages (pure logic).

    Each ``on_*`` method takes the message, the measurement time already mapped to our clock
    (``t_s``, see ``TimeSync.to_local``) and the receipt time ``now_s``.
    """

    def __init__(self, odometry_timeout_s: float = 0.5, attitude_max_age_s: float = 0.5):
        self.odometry_timeout_s = odometry_timeout_s
        self.attitude_max_age_s = attitude_max_age_s
        self.latest: Optional[StateEstimate] = None
        self._q_ned_frd: Optional[np.ndarray] = None
        self._rates_frd: Optional[np.ndarray] = None
        self._attitude_t: Optional[float] = None
        self._odometry_t: Optional[float] = None
        self._clocks = {name: FcuClockGuard(name) for name in
                        ("LOCAL_POSITION_NED", "ATTITUDE_QUATERNION", "ATTITUDE", "ODOMETRY")}

    @property
    def reboots(self) -> int:
        """FCU timeline restarts seen (the most over the streams: each stream sees the reboot)."""
        return max(c.reboots for c in self._clocks.values())

    def _check_order(self, name: str, msg) -> int:
        stamp_us = int(msg.time_boot_ms) * 1000 if hasattr(msg, "time_boot_ms") else int(msg.time_usec)
        self._clocks[name].check(stamp_us)
        return stamp_us

    @staticmethod
    def fcu_time_s(msg) -> float:
        """The message's FCU timestamp in seconds since FCU boot (NaN when it is UNIX time)."""
        if hasattr(msg, "time_boot_ms"):
            return msg.time_boot_ms * 1e-3
        usec = float(msg.time_usec)
        return math.nan if usec > _UNIX_TIME_USEC else usec * 1e-6

    # -- attitude -----------------------------------------------------------------------------
    def on_attitude_quaternion(self, msg, t_s: float, now_s: float) -> None:
        stamp = self._check_order("ATTITUDE_QUATERNION", msg)
        q = _unit_quaternion("ATTITUDE_QUATERNION.q", frames.quaternion_from_mavlink([msg.q1, msg.q2, msg.q3, msg.q4]))
        rates = _bounded("ATTITUDE_QUATERNION rates",
                         _finite("ATTITUDE_QUATERNION rates", [msg.rollspeed, msg.pitchspeed, msg.yawspeed]),
                         MAX_RATE_RADPS)
        self._clocks["ATTITUDE_QUATERNION"].commit(stamp)
        self._q_ned_frd, self._rates_frd, self._attitude_t = q, rates, now_s

    def on_attitude_euler(self, msg, t_s: float, now_s: float) -> None:
        stamp = self._check_order("ATTITUDE", msg)
        angles = _finite("ATTITUDE angles", [msg.roll, msg.pitch, msg.yaw])
        rates = _bounded("ATTITUDE rates", _finite("ATTITUDE rates", [msg.rollspeed, msg.pitchspeed, msg.yawspeed]),
                         MAX_RATE_RADPS)
        self._clocks["ATTITUDE"].commit(stamp)
        self._q_ned_frd, self._rates_frd, self._attitude_t = euler_to_quaternion(*angles), rates, now_s

    # -- position -----------------------------------------------------------------------------
    def on_local_position(self, msg, t_s: float, now_s: float) -> Optional[StateEstimate]:
        """LOCAL_POSITION_NED; returns the new estimate, or None while ODOMETRY is preferred
        or no recent attitude is known."""
        stamp = self._check_order("LOCAL_POSITION_NED", msg)
        p_ned = _bounded("LOCAL_POSITION_NED position", _finite("LOCAL_POSITION_NED position", [msg.x, msg.y, msg.z]),
                         MAX_POSITION_M)
        v_ned = _bounded("LOCAL_POSITION_NED velocity", _finite("LOCAL_POSITION_NED velocity", [msg.vx, msg.vy, msg.vz]),
                         MAX_SPEED_MPS)
        self._clocks["LOCAL_POSITION_NED"].commit(stamp)
        if self._odometry_t is not None and now_s - self._odometry_t <= self.odometry_timeout_s:
            return None
        if self._attitude_t is None or now_s - self._attitude_t > self.attitude_max_age_s:
            return None
        state = VehicleState.from_floats(
            t_s,
            frames.ned_to_enu(p_ned),
            frames.ned_to_enu(v_ned),
            frames.quaternion_ned_frd_to_enu_flu(self._q_ned_frd),
            frames.frd_to_flu(self._rates_frd),
        )
        self.latest = StateEstimate(state, None, None, "local_position", now_s)
        return self.latest

    def on_odometry(self, msg, t_s: float, now_s: float) -> StateEstimate:
        """ODOMETRY; returns the new estimate (raises TelemetryRejected on bad content)."""
        stamp = self._check_order("ODOMETRY", msg)
        if msg.frame_id not in _WORLD_FRAMES:
            raise TelemetryRejected(f"ODOMETRY frame_id {msg.frame_id} unsupported (need LOCAL_NED or LOCAL_FRD)")
        body_velocity = msg.child_frame_id == MAV_FRAME_BODY_FRD
        if not body_velocity and msg.child_frame_id not in _WORLD_FRAMES + (MAV_FRAME_BODY_NED,):
            raise TelemetryRejected(f"ODOMETRY child_frame_id {msg.child_frame_id} unsupported")
        p_ned = _bounded("ODOMETRY position", _finite("ODOMETRY position", [msg.x, msg.y, msg.z]), MAX_POSITION_M)
        v_child = _bounded("ODOMETRY velocity", _finite("ODOMETRY velocity", [msg.vx, msg.vy, msg.vz]), MAX_SPEED_MPS)
        rates = _bounded("ODOMETRY rates", _finite("ODOMETRY rates", [msg.rollspeed, msg.pitchspeed, msg.yawspeed]),
                         MAX_RATE_RADPS)
        if math.isnan(msg.q[0]):
            if self._attitude_t is None or now_s - self._attitude_t > self.attitude_max_age_s:
                raise TelemetryRejected("ODOMETRY without attitude, and no recent ATTITUDE_QUATERNION to fill in")
            q_ned_frd = self._q_ned_frd
        else:
            q_ned_frd = _unit_quaternion("ODOMETRY.q", frames.quaternion_from_mavlink(msg.q))
        q_enu_flu = frames.quaternion_ned_frd_to_enu_flu(q_ned_frd)
        r_enu_flu = quaternion_to_matrix(q_enu_flu)
        if body_velocity:
            v_enu = r_enu_flu @ frames.frd_to_flu(v_child)
        else:
            v_enu = frames.ned_to_enu(v_child)
        try:
            pose_cov = frames.covariance_from_mavlink_urt(msg.pose_covariance)
            twist_cov = frames.covariance_from_mavlink_urt(msg.velocity_covariance)
        except ValueError as exc:
            raise TelemetryRejected(f"ODOMETRY covariance: {exc}") from None
        if pose_cov is not None:
            pose_cov = frames.covariance_ned_to_enu(pose_cov)
        if twist_cov is not None:
            if body_velocity:
                twist_cov = frames.covariance_frd_to_flu(twist_cov)
            else:  # linear part world NED -> body FLU; angular rates are body FRD -> FLU
                m = np.zeros((6, 6))
                m[:3, :3] = r_enu_flu.T @ frames.ENU_NED
                m[3:, 3:] = frames.FLU_FRD
                twist_cov = m @ twist_cov @ m.T
        state = VehicleState.from_floats(t_s, frames.ned_to_enu(p_ned), v_enu, q_enu_flu, frames.frd_to_flu(rates))
        self._clocks["ODOMETRY"].commit(stamp)
        self._odometry_t = now_s
        self.latest = StateEstimate(state, pose_cov, twist_cov, "odometry", now_s)
        return self.latest
