"""The learned policy as a planner: depth image + odometry -> acceleration setpoint, 15 Hz.

``PolicyPlanner`` follows the closed-loop runner's Planner protocol (``rate_hz``,
``reset(start, goal)``, ``update(state, sensors) -> Setpoint``) and offers the same thing to a
ROS node without a SensorFrame: ``set_goal(goal)`` and ``step(state, depth_m, depth_stamp_s)``
with the depth image as a (H, W) float array in metres (a 32FC1 image) and the odometry as a
:class:`~planner_pkg.types.VehicleState`. It runs the exported network with
``autograd_core.runtime`` (NumPy only) and keeps the GRU state between calls.

Output: ``Setpoint.from_acceleration(a, yaw)``: world-frame acceleration (gravity excluded,
position and velocity NaN) and the heading towards the goal. Guards, each reported in
``last_status``:

* no goal yet, or within ``arrive_radius_m`` of it -> hold position (hover);
* non-finite odometry -> zero acceleration (hover thrust; there is no position to hold);
* no depth image yet, an image older than ``stale_after_s``, or an all-invalid one -> hold
  the current position;
* a non-finite network output -> hold the current position;
* above ``max_speed_mps`` (when set) the acceleration's component along the velocity is
  dropped (the policy cannot speed up further; braking and turning stay);
* the acceleration is clamped: vertical to [-max_descent_accel, max_accel], the thrust tilt
  to ``max_tilt_deg`` and the norm to ``max_accel_mps2``.

The commanded speed is a cruise speed. When the model carries a speed calibration (measured by
``policy calibrate``) the network is told the command whose open-space cruise was that speed
(``network_speed_mps``); ``speed_calibration=False`` tells it the speed as it is.

A long-running user (the ``policy`` ROS node) may change the run-time options with
:meth:`PolicyPlanner.set_config` and forget the GRU memory with :meth:`reset_memory` (a new
goal) without forgetting the latest depth image.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np

from planner_pkg.config_schema import Config, non_negative, positive, setting
from planner_pkg.policy.export import LoadedPolicy, load_policy
from planner_pkg.policy.observation import depth_observation, state_vector, target_velocity
from planner_pkg.types import SensorFrame, Setpoint, VehicleState, quaternion_to_matrix

__all__ = ["PolicyPlannerConfig", "PolicyPlanner"]

_G = 9.81


@dataclass(frozen=True)
class PolicyPlannerConfig(Config):
    """Run-time options of :class:`PolicyPlanner` (the model fixes the rest).

    rate_hz: network updates per second (trained at 15 Hz).
    speed_mps: commanded cruise speed; None = the model's evaluation speed (either is capped
        at ``max_speed_mps`` when that is set).
    max_speed_mps: speed guard: above it the acceleration may not point further along the
        velocity; None = off.
    margin_m: safety margin fed to the network; None = the middle of its training range.
    max_accel_mps2, max_tilt_deg, max_descent_accel_mps2: output clamps (see module docstring).
    stale_after_s: a depth image older than this (vs the odometry stamp) is not used.
    arrive_radius_m: within this distance of the goal the planner holds the goal (a position
        setpoint: the last metre is a plain position-controlled approach; goals are free space).
    speed_calibration: tell the network the command whose measured open-space cruise is the
        requested speed, when the model carries a speed calibration (``policy calibrate``;
        :mod:`planner_pkg.policy.speed_calibration`); False: the requested speed as it is.
    """

    rate_hz: float = positive(15.0)
    speed_mps: Optional[float] = non_negative(None)
    margin_m: Optional[float] = non_negative(None)
    max_speed_mps: Optional[float] = positive(None)
    max_accel_mps2: float = positive(10.0)
    max_tilt_deg: float = setting(40.0, range=(0.0, 90.0), low_open=True, high_open=True)
    max_descent_accel_mps2: float = positive(5.0)
    stale_after_s: float = positive(0.25)
    arrive_radius_m: float = positive(1.0)
    speed_calibration: bool = True


class PolicyPlanner:
    """Runs a policy model (a path or a :class:`LoadedPolicy`); see the module docstring."""

    name = "policy"

    def __init__(self, model: Union[str, Path, LoadedPolicy], config: PolicyPlannerConfig = PolicyPlannerConfig()):
        self.policy = model if isinstance(model, LoadedPolicy) else load_policy(model)
        pc = self.policy.config
        self._approach_gain = pc.env.approach_gain_per_s
        self._approach_decel = pc.env.approach_decel_mps2
        self._hidden = np.zeros((1, pc.network.hidden), dtype=np.float32)
        self._goal: Optional[np.ndarray] = None
        self._image: Optional[np.ndarray] = None
        self._image_t = -math.inf
        self.set_config(config)
        self.last_status = "no goal"
        self.last_action: Optional[np.ndarray] = None

    @property
    def rate_hz(self) -> float:
        return self.config.rate_hz

    def set_config(self, config: PolicyPlannerConfig) -> None:
        """New run-time options (speed, clamps, staleness...); keeps the GRU state and the image."""
        pc = self.policy.config
        self.config = config
        speed = config.speed_mps if config.speed_mps is not None else pc.train.eval_speed_mps
        self.speed_mps = speed if config.max_speed_mps is None else min(speed, config.max_speed_mps)
        calibration = self.policy.speed_calibration if config.speed_calibration else None
        # what the network is told: the command that cruises at speed_mps in open space
        self.network_speed_mps = self.speed_mps if calibration is None else calibration.network_speed(self.speed_mps)
        self.margin_m = config.margin_m if config.margin_m is not None else 0.5 * sum(pc.loss.margin_m)
        self._tan_tilt = math.tan(math.radians(config.max_tilt_deg))

    def reset_memory(self) -> None:
        """Forget the GRU state (a new goal); the latest depth image is kept."""
        self._hidden = np.zeros_like(self._hidden)

    # -- the runner's protocol ---------------------------------------------------------------
    def reset(self, start, goal) -> None:
        """New episode: forget the GRU state and any image; fly to ``goal`` (3,) m."""
        self._hidden[:] = 0.0
        self._image, self._image_t = None, -math.inf
        self.set_goal(goal)

    def update(self, state: VehicleState, sensors: Optional[SensorFrame]) -> Setpoint:
        if sensors is not None and sensors.depth is not None:
            return self.step(state, sensors.depth, sensors.t)
        return self.step(state, None, None)

    # -- the node's interface -----------------------------------------------------------------
    def set_goal(self, goal) -> None:
        """Fly to ``goal`` (3,) m, world ENU (keeps the GRU state: the scene has not changed)."""
        g = np.asarray(goal, dtype=np.float64)
        if g.shape != (3,) or not np.isfinite(g).all():
            raise ValueError(f"goal must be three finite numbers (m, ENU), got {goal!r}")
        self._goal = g.copy()

    def observation_image(self, depth_m) -> np.ndarray:
        """(1, 1, rows, cols) float32 network image from a (H, W) z-depth image in metres."""
        d = np.asarray(depth_m, dtype=np.float32)
        if d.ndim != 2:
            raise ValueError(f"depth image must be (H, W) metres, got shape {d.shape}")
        return depth_observation(d, self.policy.config.observation)[None, None]

    def step(self, state: VehicleState, depth_m=None, depth_stamp_s: Optional[float] = None) -> Setpoint:
        """One policy update from odometry ``state`` and, when a new one arrived, a depth image
        (H, W) in metres stamped ``depth_stamp_s`` (s, same clock as ``state.t``)."""
        if not state.is_finite():
            self.last_status = "non-finite odometry: hover thrust"
            return Setpoint.from_acceleration(np.zeros(3))
        if depth_m is not None:
            d = np.asarray(depth_m)
            if np.isnan(d).all():
                self.last_status = "depth image has no valid pixel"
            else:
                self._image = self.observation_image(d)
                self._image_t = state.t if depth_stamp_s is None else float(depth_stamp_s)
        if self._goal is None:
            self.last_status = "no goal: holding"
            return Setpoint.hold(state.position, state.yaw)
        to_goal = self._goal - state.position
        if float(np.linalg.norm(to_goal)) <= self.config.arrive_radius_m:
            self.last_status = "at goal: holding"
            return Setpoint.hold(self._goal, state.yaw)
        if self._image is None or state.t - self._image_t > self.config.stale_after_s:
            self.last_status = "no fresh depth image: holding"
            return Setpoint.hold(state.position, state.yaw)

        yaw = state.yaw
        target = target_velocity(state.position[None], self._goal[None], np.array([self.network_speed_mps]),
                                 self._approach_gain, self._approach_decel)[0]
        up = quaternion_to_matrix(state.attitude)[:, 2]
        s = state_vector(state.velocity[None], target[None], up[None], yaw, self.margin_m)
        action, hidden = self.policy.model(self._image, s, self._hidden)
        if not np.isfinite(action).all() or not np.isfinite(hidden).all():
            self._hidden[:] = 0.0
            self.last_status = "non-finite network output: holding"
            return Setpoint.hold(state.position, yaw)
        self._hidden = hidden
        c, sn = math.cos(yaw), math.sin(yaw)
        ax, ay, az = (float(v) for v in action[0, :3])
        accel = self._clamp(self._limit_speed(np.array([c * ax - sn * ay, sn * ax + c * ay, az]), state.velocity))
        self.last_action = accel
        heading = math.atan2(to_goal[1], to_goal[0]) if math.hypot(to_goal[0], to_goal[1]) > 1e-6 else yaw
        self.last_status = "ok"
        return Setpoint.from_acceleration(accel, yaw=heading)

    def _limit_speed(self, a: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        """Above ``max_speed_mps`` drop the part of ``a`` that would speed the vehicle up further."""
        vmax = self.config.max_speed_mps
        speed = float(np.linalg.norm(velocity))
        if vmax is None or speed <= vmax:
            return a
        along = float(a @ velocity) / speed
        if along > 0:
            a = a - along * (velocity / speed)
        return a

    def _clamp(self, a: np.ndarray) -> np.ndarray:
        cfg = self.config
        a[2] = min(max(a[2], -cfg.max_descent_accel_mps2), cfg.max_accel_mps2)
        horiz = math.hypot(a[0], a[1])
        limit = self._tan_tilt * (a[2] + _G)
        if horiz > limit:
            a[:2] *= limit / horiz
        norm = float(np.linalg.norm(a))
        if norm > cfg.max_accel_mps2:
            a *= cfg.max_accel_mps2 / norm
        return a
