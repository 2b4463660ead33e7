"""Node ``policy``: the learned depth policy flying acceleration setpoints between DDS topics.

Subscribes ``depth/image`` (32FC1 m, or 16UC1 mm), ``odom`` and ``goal_pose``; publishes
``setpoint`` (one-point MultiDOFJointTrajectory, see ``conversions.setpoint_to_msg``) and
``status``. The network (:class:`~planner_pkg.policy.planner.PolicyPlanner`, NumPy only) runs at
``rate_hz`` on the ROS clock (sim time under ``use_sim_time``) with the newest depth image and
odometry, keeping its GRU state between calls (forgotten on a new goal). Its command is an
acceleration setpoint: position and velocity NaN, acceleration (world ENU, gravity excluded)
clamped in vertical, tilt and norm, and a speed guard (``max_speed_mps``); the heading faces the
goal. The latest command is re-sent at ``setpoint_rate_hz`` between network calls.

Simulation lockstep (as ``planner_node``, see ``planner_pkg/nodes/lockstep.py``): under
``use_sim_time`` with ``lockstep_report`` the network tick and the re-send are lockstep-gated: a
tick due at sim time ``T`` runs once the odometry and depth image the simulator's manifest names
for ``T`` have arrived, and every finished tick - also one that flew nothing (no odometry, no
goal, a hold) - reports the next one and the setpoints sent; a ``sim_bridge`` with
``lockstep: true`` then never runs sim time past it nor before those setpoints arrived, so the
flight does not depend on the real-time factor or the load. On wall time (hardware) nothing of
this applies.

Odometry twist is in ``base_link`` (REP 105); ``conversions.odometry_to_state`` rotates it into
the map frame, which is what the network's state input needs.

Startup refusals (:class:`ParameterConfigError`, exit code 2): a model file that cannot be read or
whose graph does not take/give the shapes its configuration promises, and a camera (``camera.*``)
whose image is not the same integer multiple of the network input on both axes, or whose field
of view or mount pitch lies outside the model's training range.

Guards (each counted in ``status`` and logged, throttled):

* odometry with NaN/inf, a zero quaternion or in another frame is dropped; no good odometry for
  ``odom_timeout_s`` -> hold;
* a depth image of the wrong size/encoding or with no valid pixel is refused; none usable for
  ``depth_timeout_s`` (vs the odometry stamp) -> hold;
* a non-finite network output -> hold;
* a goal with NaN/inf, in another frame or outside the geofence is refused (the previous goal,
  if any, is kept);
* within ``goal_tolerance_m`` of the goal -> a position setpoint at the goal;
* before any goal: zero-velocity setpoints (hover in place, no position target).

"Hold" is a position setpoint at the last good odometry position, with zero velocity and
acceleration feed-forward, latched when the hold begins and kept until the policy flies again.
Why not the alternatives: a zero *acceleration* setpoint (what an acceleration-mode planner
would naturally send) has no velocity feedback, so a vehicle at 3 m/s would coast on into what
it can no longer see; a zero *velocity* setpoint brakes but then drifts with wind and estimator
bias for as long as the fault lasts. The latched point is known free (the vehicle was just
there), braking overshoot is the same as with a velocity stop, and the vehicle stays put however
long the sensor is gone. It is also what ``traj_server`` and the simulator do when their inputs
stop. It relies on the flight controller's own position estimate, which is independent of our
``odom`` topic going quiet (a link/bridge fault is the common cause).
"""
from __future__ import annotations

import math
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Image
from trajectory_msgs.msg import MultiDOFJointTrajectory

from planner_pkg.config_schema import Config
from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes.lockstep import LOCKSTEP_SENSOR_QOS, LockstepParticipant
from planner_pkg.nodes.params import ConfigParameters, ParameterConfigError
from planner_pkg.policy.planner import PolicyPlannerConfig
from planner_pkg.sim.params import CameraParams
from planner_pkg.types import Setpoint, VehicleState

NODE_NAME = "policy"


_PD = PolicyPlannerConfig  # the ROS-free planner's defaults are the node's (each written once)


@dataclass(frozen=True)
class PolicyNodeConfig(Config, prefix=""):
    """Parameters of the ``policy`` node."""

    model_path: str = field(default="", metadata={"read_only": True, "description":
                            "policy model file (.agm, 'policy train' output); empty = the shipped model"})
    rate_hz: float = field(default=_PD.rate_hz, metadata={"range": (1.0, 100.0), "description":
                           "network updates per second on the ROS clock (the model is trained at 15 Hz)"})
    setpoint_rate_hz: float = field(default=50.0, metadata={"range": (1.0, 500.0), "description":
                                    "setpoint publishing rate, Hz (>= rate_hz; re-sends the last command)"})
    target_speed_mps: Optional[float] = field(default=None, metadata={"range": (0.0, math.inf), "low_open": True,
                                                                       "description":
                                              "commanded cruise speed, m/s; none = the model's evaluation speed"})
    max_speed_mps: float = field(default=4.0, metadata={"range": (0.1, 20.0), "description":
                                 "speed guard, m/s: caps the cruise speed, and above it the command may not "
                                 "accelerate further along the velocity"})
    speed_calibration: bool = field(default=_PD.speed_calibration, metadata={"description":
                                    "tell the network the command whose measured open-space cruise is the target "
                                    "speed, when the model carries a speed calibration ('policy calibrate')"})
    margin_m: Optional[float] = field(default=None, metadata={"range": (0.0, 5.0), "description":
                                      "safety margin fed to the network, m; none = the middle of its training range"})
    max_accel_mps2: float = field(default=_PD.max_accel_mps2, metadata={"range": (0.5, 20.0), "description":
                                  "clamp on the commanded acceleration's norm, m/s^2"})
    max_tilt_deg: float = field(default=_PD.max_tilt_deg, metadata={"range": (5.0, 60.0), "description":
                                "clamp on the thrust tilt the command implies, deg"})
    max_descent_accel_mps2: float = field(default=_PD.max_descent_accel_mps2, metadata={"range": (0.5, 9.0),
                                                                                        "description":
                                          "clamp on the downward acceleration, m/s^2"})
    odom_timeout_s: float = field(default=0.25, metadata={"range": (0.01, 10.0), "description":
                                  "hold when no good odometry arrived for this long, s (ROS clock)"})
    depth_timeout_s: float = field(default=_PD.stale_after_s, metadata={"range": (0.01, 10.0), "description":
                                   "hold when the newest usable depth image is older than this vs the odometry, s"})
    goal_tolerance_m: float = field(default=_PD.arrive_radius_m, metadata={"range": (0.05, 10.0), "description":
                                    "within this distance the node holds a position setpoint at the goal, m"})
    geofence_min_m: Tuple[float, float, float] = field(default=(-1000.0, -1000.0, 0.0), metadata={
        "description": "lower corner of the allowed goal volume, m (map frame)"})
    geofence_max_m: Tuple[float, float, float] = field(default=(1000.0, 1000.0, 100.0), metadata={
        "description": "upper corner of the allowed goal volume, m (map frame)"})
    frame_id: str = field(default=conv.MAP_FRAME, metadata={"read_only": True, "description":
                          "world frame: odometry, goals and setpoints"})
    base_frame: str = field(default=conv.BODY_FRAME, metadata={"read_only": True, "description":
                            "body frame of the odometry twist (child_frame_id)"})
    status_rate_hz: float = field(default=1.0, metadata={"range": (0.1, 50.0), "description": "status rate, Hz"})
    lockstep_report: bool = field(default=True, metadata={"read_only": True, "description":
                                  "under use_sim_time: be a lockstep participant (each tick waits for the inputs "
                                  "of its instant and reports the next one, so a lockstep simulator waits for it)"})
    camera: CameraParams = field(default_factory=CameraParams)

    def _check(self):
        if self.setpoint_rate_hz < self.rate_hz:
            raise self._error("setpoint_rate_hz", f"({self.setpoint_rate_hz}) must be >= rate_hz ({self.rate_hz}), "
                              f"or network commands would be dropped")
        if self.target_speed_mps is not None and self.target_speed_mps > self.max_speed_mps:
            raise self._error("target_speed_mps", f"{self.target_speed_mps} exceeds max_speed_mps {self.max_speed_mps}")
        if not all(lo < hi for lo, hi in zip(self.geofence_min_m, self.geofence_max_m)):
            raise self._error("geofence_min_m", f"{list(self.geofence_min_m)} must be below geofence_max_m "
                              f"{list(self.geofence_max_m)} on every axis")


def planner_config(cfg: PolicyNodeConfig):
    """The node's parameters as :class:`PolicyPlannerConfig` (the ROS-free planner's options; the
    node's defaults are the planner's, read from it)."""
    return PolicyPlannerConfig(
        rate_hz=cfg.rate_hz, speed_mps=cfg.target_speed_mps, margin_m=cfg.margin_m, max_speed_mps=cfg.max_speed_mps,
        max_accel_mps2=cfg.max_accel_mps2, max_tilt_deg=cfg.max_tilt_deg,
        max_descent_accel_mps2=cfg.max_descent_accel_mps2, stale_after_s=cfg.depth_timeout_s,
        arrive_radius_m=cfg.goal_tolerance_m, speed_calibration=cfg.speed_calibration)


def camera_mismatch(observation, camera: CameraParams) -> Optional[Tuple[str, str]]:
    """(parameter, reason) when the camera cannot feed a model with ``observation``
    (:class:`~planner_pkg.policy.config.ObservationConfig`), else None."""
    rows, cols = observation.image_hw
    w, h = camera.width_px, camera.height_px
    if w % cols or h % rows or w // cols != h // rows:
        return ("camera.width_px", f"a {w}x{h} depth image cannot feed the network's {cols}x{rows} input: it must "
                f"be the same integer multiple of it on both axes (e.g. {4 * cols}x{4 * rows})")
    lo, hi = observation.hfov_deg
    if not lo <= camera.hfov_deg <= hi:
        return ("camera.hfov_deg", f"{camera.hfov_deg} deg is outside the model's training field of view "
                f"{lo}..{hi} deg")
    lo, hi = observation.pitch_deg
    if not lo <= camera.mount_pitch_deg <= hi:
        return ("camera.mount_pitch_deg", f"{camera.mount_pitch_deg} deg is outside the model's training mount "
                f"pitch {lo}..{hi} deg")
    return None


def load_planner(cfg: PolicyNodeConfig):
    """Load the model named by ``cfg`` and check it against the camera; ParameterConfigError if unusable."""
    from planner_pkg.policy.export import default_model_path
    from planner_pkg.policy.export import PolicyModelError, load_policy
    from planner_pkg.policy.planner import PolicyPlanner

    path = cfg.model_path or default_model_path()
    if path is None:
        raise ParameterConfigError("parameter 'model_path' refused: empty, and this installation ships no trained "
                                   "policy; train one with 'python -m planner_pkg policy train'")
    try:
        policy = load_policy(path)
    except PolicyModelError as exc:
        raise ParameterConfigError(f"parameter 'model_path' refused: {exc}") from None
    bad = camera_mismatch(policy.config.observation, cfg.camera)
    if bad is not None:
        raise ParameterConfigError(f"parameter '{bad[0]}' refused for model {policy.path}: {bad[1]}")
    try:
        return PolicyPlanner(policy, planner_config(cfg))
    except ValueError as exc:  # pragma: no cover - the node's ranges are inside the planner's
        raise ParameterConfigError(f"policy options refused: {exc}") from None


class PolicyNode(c.LockstepNode):
    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        try:
            self.params = ConfigParameters(self, PolicyNodeConfig, on_change=self._config_changed)
            self.planner = load_planner(self.params.config)
        except ParameterConfigError:
            self.destroy_node()  # nobody else holds it: free its rosout publisher and handles
            raise
        cfg = self.params.config
        self.log = self.get_logger()
        self.throttle = c.Throttle(2.0)
        self.state: Optional[VehicleState] = None
        self.odom_received = -math.inf  # ROS time (s) of the last good odometry
        self.image: Optional[Tuple[np.ndarray, float]] = None  # newest usable image not yet stepped
        self.goal: Optional[np.ndarray] = None
        self.goal_status = "no goal"
        self.reached = False
        self.mode = "waiting for odometry"
        self.command: Optional[Setpoint] = None
        self.hold: Optional[Setpoint] = None
        self.hold_reason = ""
        self.inference_ms: deque = deque(maxlen=300)
        self.counters = {"steps": 0, "setpoints": 0, "images": 0, "bad_odom": 0, "bad_image": 0, "bad_goal": 0,
                         "holds": 0, "bad_output": 0}

        self.pub_setpoint = self.create_publisher(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, c.SETPOINT_QOS)
        self.pub_status = self.create_publisher(DiagnosticArray, c.TOPIC_STATUS, c.STATUS_QOS)
        self._loop_timers: list = []
        self.lockstep = LockstepParticipant(self, cfg.lockstep_report, frames=True,
                                            setpoints=True, goals=True)
        self.create_subscription(Odometry, c.TOPIC_ODOM, self._on_odom, c.ODOM_QOS)
        self.create_subscription(Image, c.TOPIC_DEPTH, self._on_image,
                                 LOCKSTEP_SENSOR_QOS if self.lockstep.active else c.SENSOR_QOS)
        self.create_subscription(PoseStamped, c.TOPIC_GOAL, self._on_goal, c.GOAL_QOS)
        self._start_timers(cfg)
        obs = self.planner.policy.config.observation
        self.log.info(f"policy {self.planner.policy.path} ready: {self.planner.rate_hz:g} Hz, "
                      f"{obs.image_hw[1]}x{obs.image_hw[0]} input from {cfg.camera.width_px}x{cfg.camera.height_px} "
                      f"images, cruise {self.planner.speed_mps:g} m/s"
                      + ("; lockstep participant" if self._lockstep_reporting() else ""))

    # -- configuration ---------------------------------------------------------------------------
    def _start_timers(self, cfg: PolicyNodeConfig) -> None:
        for timer in self._loop_timers:
            self.lockstep.destroy_timer(timer)
        # the network tick and the re-send are gated (in lockstep they run once the inputs of their
        # instant are in, in the order they were due); status is not
        self._loop_timers = [self.lockstep.create_timer(1.0 / cfg.rate_hz, self._step),
                        self.lockstep.create_timer(1.0 / cfg.setpoint_rate_hz, self._republish),
                        self.create_timer(1.0 / cfg.status_rate_hz, self._publish_status)]

    def _config_changed(self, cfg: PolicyNodeConfig) -> None:
        self.planner.set_config(planner_config(cfg))
        self._start_timers(cfg)
        self.lockstep.report()  # a new period: tell a waiting simulator

    def _lockstep_reporting(self) -> bool:
        """Under sim time with ``lockstep_report`` (at start-up): a lockstep participant."""
        return self.lockstep.active

    # -- inputs ----------------------------------------------------------------------------------
    def _bad(self, key: str, what: str, exc, cause: str = "") -> None:
        """Count a refused input; log it, throttled per ``key`` and ``cause`` (so a new kind of fault
        is logged even while an older one is still being throttled)."""
        self.counters[key] += 1
        if self.throttle(f"{key}:{cause}"):
            self.log.warning(f"{what} refused ({self.counters[key]} so far): {exc}")

    def _take_odom(self, msg: Odometry) -> None:
        cfg = self.params.config
        cause = "frame"
        try:
            if msg.header.frame_id not in ("", cfg.frame_id):
                raise ValueError(f"odometry in frame {msg.header.frame_id!r}, expected {cfg.frame_id!r}")
            if msg.child_frame_id not in ("", cfg.base_frame):
                raise ValueError(f"odometry twist in frame {msg.child_frame_id!r}, expected {cfg.base_frame!r}")
            cause = "values"
            # twist rotated from base_link into the map frame (the frames are checked above)
            state = conv.odometry_to_state(msg, None, None)
        except ValueError as exc:
            self._bad("bad_odom", "odometry", exc, cause)
            return
        self.state = state
        self.odom_received = c.now_s(self)

    def _on_image(self, msg: Image) -> None:
        try:
            self._take_image(msg)
        finally:
            self.lockstep.saw_frame(msg.header.stamp)

    def _take_image(self, msg: Image) -> None:
        cam = self.params.config.camera
        cause = "decode"
        try:
            depth = conv.image_to_depth(msg)
            cause = "size"
            if depth.shape != (cam.height_px, cam.width_px):
                raise ValueError(f"depth image is {depth.shape[1]}x{depth.shape[0]}, but camera.width_px/height_px "
                                 f"say {cam.width_px}x{cam.height_px} (the size checked against the model)")
            cause = "invalid"
            if np.isnan(depth).all():
                raise ValueError("depth image has no valid pixel (all NaN)")
        except ValueError as exc:
            self._bad("bad_image", "depth image", exc, cause)
            return
        self.counters["images"] += 1
        self.image = (depth, conv.stamp_to_seconds(msg.header.stamp))

    def _on_goal(self, msg: PoseStamped) -> None:
        cfg = self.params.config
        try:
            goal = conv.pose_to_goal(msg, cfg.frame_id)
            lo, hi = np.asarray(cfg.geofence_min_m), np.asarray(cfg.geofence_max_m)
            if (goal < lo).any() or (goal > hi).any():
                raise ValueError(f"{np.round(goal, 2).tolist()} is outside the geofence {lo.tolist()} .. {hi.tolist()}")
        except ValueError as exc:
            self.counters["bad_goal"] += 1
            self.goal_status = f"goal refused: {exc}"
            self.log.warning(self.goal_status + ("" if self.goal is None else "; keeping the previous goal"))
            return
        self.planner.set_goal(goal)
        self.planner.reset_memory()
        self.goal = goal
        self.reached = False
        self.goal_status = f"goal {np.round(goal, 2).tolist()} accepted"
        self.log.info(self.goal_status)
        self.lockstep.accepted_goal()

    # -- the network loop ------------------------------------------------------------------------
    def _step(self) -> None:
        cfg = self.params.config
        now = c.now_s(self)
        state = self.state
        if state is None:
            self.mode = "waiting for odometry"
            return
        if now - self.odom_received > cfg.odom_timeout_s:
            self._hold(f"odometry lost: no good odometry for {cfg.odom_timeout_s:g} s")
            return
        if self.goal is None:
            self.mode = "no goal"
            self._release()
            self._send(Setpoint.from_velocity(np.zeros(3), yaw=state.yaw))  # hover in place, no position pull
            return
        depth, stamp = self.image if self.image is not None else (None, None)
        self.image = None
        t0 = time.perf_counter()
        try:
            setpoint = self.planner.step(state, depth, stamp)
        except ValueError as exc:  # the image size is checked on arrival; anything else is a bug to survive
            self._bad("bad_output", "policy step", exc)
            self._hold(f"policy step failed: {exc}")
            return
        elapsed_ms = 1e3 * (time.perf_counter() - t0)
        status = self.planner.last_status
        if status == "ok":
            self.inference_ms.append(elapsed_ms)
            self.counters["steps"] += 1
            self.mode = "flying"
            self._release()
            self._send(setpoint)
        elif status.startswith("at goal"):
            self.mode = "at goal"
            if not self.reached:
                self.reached = True
                self.goal_status = f"goal {np.round(self.goal, 2).tolist()} reached"
                self.log.info(self.goal_status + ": holding there")
            self._release()
            self._send(setpoint)
        else:
            if status.startswith("non-finite network output"):
                self.inference_ms.append(elapsed_ms)
                self._bad("bad_output", "network output", "non-finite")
            self._hold(status.removesuffix(": holding"))

    def _hold(self, reason: str) -> None:
        """Latched position hold at the last good odometry (see the module docstring)."""
        self.mode = "holding"
        if self.hold is None:
            s = self.state
            self.hold = Setpoint.hold(s.position, s.yaw)
            self.counters["holds"] += 1
        if reason != self.hold_reason:
            self.hold_reason = reason
            self.log.warning(f"holding at {np.round(self.hold.position, 2).tolist()}: {reason}")
        self._send(self.hold)

    def _release(self) -> None:
        if self.hold is not None:
            self.log.info(f"hold released ({self.hold_reason}): {self.mode}")
        self.hold, self.hold_reason = None, ""

    def _send(self, setpoint: Setpoint) -> None:
        self.command = setpoint
        self._publish(setpoint)

    def _republish(self) -> None:
        if self.command is not None:
            self._publish(self.command)

    def _publish(self, setpoint: Setpoint) -> None:
        self.counters["setpoints"] += 1
        self.pub_setpoint.publish(conv.setpoint_to_msg(setpoint, max(c.now_s(self), 0.0), self.params.config.frame_id))
        self.lockstep.published_setpoint()

    # -- status ----------------------------------------------------------------------------------
    def _publish_status(self) -> None:
        now = c.now_s(self)
        if self.mode == "holding" or self.goal_status.startswith("goal refused"):
            level, message = "warn", (f"holding: {self.hold_reason}" if self.mode == "holding" else self.goal_status)
        else:
            level, message = "ok", f"{self.mode}; {self.goal_status}"
        ms = np.asarray(self.inference_ms, dtype=float)
        values = [
            ("mode", self.mode), ("hold_reason", self.hold_reason or "none"), ("goal_status", self.goal_status),
            ("reached", self.reached), ("policy_status", self.planner.last_status),
            ("goal", "none" if self.goal is None else ",".join(f"{v:.3f}" for v in self.goal)),
            ("inference_ms_median", f"{np.median(ms):.3f}" if ms.size else "n/a"),
            ("inference_ms_p95", f"{np.percentile(ms, 95):.3f}" if ms.size else "n/a"),
            ("inference_ms_max", f"{ms.max():.3f}" if ms.size else "n/a"),
            ("cruise_speed_mps", f"{self.planner.speed_mps:g}"), ("model", self.planner.policy.path),
        ] + self.lockstep.status_values() + list(self.counters.items())
        self.pub_status.publish(conv.make_status(self.get_name(), level, message, values, now))


def main(args=None) -> int:
    return c.run_node(PolicyNode, args)


if __name__ == "__main__":
    sys.exit(main())
