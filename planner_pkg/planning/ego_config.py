"""Configuration of the EGO-style planner: one typed, validated dataclass (YAML / ROS parameters
are views of it, see :meth:`EgoConfig.from_dict`)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Optional

from planner_pkg.planning.frontier import UnknownSpaceConfig
from planner_pkg.planning.grid_map import GridMapConfig
from planner_pkg.planning.rebound import OptimizerConfig
from planner_pkg.planning.swarm import SwarmConfig
from planner_pkg.planning.trajectory import YawConfig

__all__ = ["EgoConfig"]


@dataclass(frozen=True)
class EgoConfig:
    """Parameters of :class:`EgoPlanner` (EGO-Planner's defaults where it has one).

    max_vel_mps, max_acc_mps2: speed and acceleration limits (they override the optimiser's).
    speed_headroom: plans cruise at ``(1 - speed_headroom) x max_vel_mps`` (:attr:`plan_vel_mps`,
        what the optimiser gets): max_vel_mps bounds the *flown* speed, and the tracking
        controller overshoots a reference that re-accelerates at the acceleration limit (it
        tilts late, then catches the lag up: measured up to +10.4 % over the reference at 4 m/s
        with 6 m/s^2 in the forest benchmark); 0 = plan at max_vel_mps.
    planning_horizon_m: distance of the local target, m.
    ctrl_pt_dist_m: control point spacing at full speed, m; knot interval =
        ctrl_pt_dist_m / max_vel_mps * 1.2 s (EGO).
    rate_hz: how often the runner calls update(), Hz.
    replan_period_s, replan_progress_m: replan after this long / this much progress.
    emergency_time_s: a failed replan with a collision closer than this is an emergency, s.
    safety_horizon_s: the trajectory ahead is checked for collisions over its first 2/3 (EGO)
        and at least this far ahead, s.
    emergency_decel_mps2: braking deceleration of an emergency stop, m/s^2 (None = 2 max_acc).
    goal_search_radius_m: how far a goal inside an obstacle may be moved, m.
    target_search_radius_m: same for a local target, m.
    reached_tolerance_m: the mission is complete within this distance of the goal, m.
    max_tracking_error_m: replan from odometry instead of the reference beyond this error, m.
    lag_resync_m: a replan from the reference starts where the vehicle actually is along it (the
        point of the last ``max_resync_s`` of the reference closest to the vehicle) once the
        vehicle is farther than this from the reference's point now, m. Continuing from the
        reference's own point keeps the lag, and the controller then flies faster than the plan
        to catch it up: at 6 m/s, after a take-off at 8 m/s^2, 0.6 m of lag gave a 12 % speed
        overshoot over the plan.
    max_resync_s: how far back along the reference the vehicle is looked for, s.
    max_consecutive_failures: give up the goal (WAIT_TARGET) after this many failed plans in a
        row (at rate_hz = 10: 4 s).
    retry_budget_s: after a failed plan, other initial guesses are tried in the same tick until
        this much wall time has been spent on it, s (a safety net: a routine replan tries two
        guesses, a plan from a hover or after failures all of them).
    max_time_scale: the optimiser, A* and retry time budgets are multiplied by up to this much
        when planning from a hover (GEN_NEW_TRAJ) and after consecutive failed replans.
    turn_first_rad, turn_first_speed_mps, max_turn_s: a plan from (nearly) rest, below
        turn_first_speed_mps, that leaves more than turn_first_rad away from where the camera
        looks first turns the vehicle on the spot (for at most max_turn_s), then plans again.
    retry_offset_m: (min, max) lateral offset of the retry waypoints, m.
    seed: seeds the retry waypoints.
    use_depth: fuse the depth image (also clears space along no-return rays) when a frame has
        one; otherwise the point cloud.
    depth_pixel_stride: fuse every k-th pixel row and column of the depth image.
    map, optimizer, yaw: the parts' configurations.
    unknown_space: an :class:`~planner_pkg.planning.frontier.UnknownSpaceConfig`: how the
        planner treats space its camera never observed (:mod:`planner_pkg.planning.frontier`).
        With ``stop_before_unknown`` (default on, once a depth image has been fused) every new
        trajectory is re-timed so that from each point the vehicle can brake at
        ``decel_fraction`` x max_acc_mps2, after ``latency_s``, to rest ``margin_m`` short of the
        first never-observed or blocked point along its path (EGO counts unknown as free and
        flies into it at cruise speed); ``start_radius_m`` around the start is exempt (the camera
        cannot see beside or below itself); ``history_frames`` / ``history_period_s``: the recent
        depth frames kept to answer "was this point seen free?" where the voxel map's rays leave
        gaps. A plan that can stop inside observed free space anyway is left exactly as EGO's.
        From rest, a plan refused for having no observed space to fly into turns the camera
        toward it (when more than 0.2 rad off; within max_turn_s) rather than flying a detour
        that another initial guess found.
    """

    max_vel_mps: float = 2.0
    max_acc_mps2: float = 3.0
    speed_headroom: float = 0.03
    planning_horizon_m: float = 7.5
    ctrl_pt_dist_m: float = 0.4
    rate_hz: float = 10.0
    replan_period_s: float = 1.0
    replan_progress_m: float = 1.5
    emergency_time_s: float = 1.0
    safety_horizon_s: float = 2.0
    emergency_decel_mps2: Optional[float] = None
    goal_search_radius_m: float = 1.0
    target_search_radius_m: float = 1.5
    reached_tolerance_m: float = 0.2
    max_tracking_error_m: float = 1.0
    lag_resync_m: float = 0.1
    max_resync_s: float = 1.0
    max_consecutive_failures: int = 40
    retry_budget_s: float = 0.05
    max_time_scale: float = 4.0
    turn_first_rad: float = 0.8
    turn_first_speed_mps: float = 0.5
    max_turn_s: float = 3.0
    retry_offset_m: tuple = (1.0, 2.5)
    seed: int = 0
    use_depth: bool = True
    depth_pixel_stride: int = 1
    map: GridMapConfig = field(default_factory=GridMapConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    yaw: YawConfig = field(default_factory=YawConfig)
    unknown_space: UnknownSpaceConfig = field(default_factory=UnknownSpaceConfig)
    # EGO-Swarm (planning/swarm.py): used only once a swarm is attached (EgoPlanner.attach_swarm)
    swarm: SwarmConfig = field(default_factory=SwarmConfig)

    def __post_init__(self):
        for name in ("max_vel_mps", "max_acc_mps2", "planning_horizon_m", "ctrl_pt_dist_m", "rate_hz",
                     "replan_period_s", "replan_progress_m", "emergency_time_s", "safety_horizon_s", "reached_tolerance_m",
                     "max_tracking_error_m", "lag_resync_m", "max_resync_s", "retry_budget_s", "max_time_scale", "turn_first_rad",
                     "turn_first_speed_mps", "max_turn_s"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
                raise ValueError(f"EgoConfig.{name} must be a positive finite number, got {v!r}")
        for name in ("goal_search_radius_m", "target_search_radius_m"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"EgoConfig.{name} must be a finite number >= 0, got {v!r}")
        if not (isinstance(self.speed_headroom, (int, float)) and not isinstance(self.speed_headroom, bool)
                and 0.0 <= self.speed_headroom <= 0.5):
            raise ValueError(f"EgoConfig.speed_headroom must be a fraction in [0, 0.5], got {self.speed_headroom!r}")
        if self.emergency_decel_mps2 is not None and not (
                math.isfinite(self.emergency_decel_mps2) and self.emergency_decel_mps2 > 0):
            raise ValueError(f"EgoConfig.emergency_decel_mps2 must be positive (or None), got {self.emergency_decel_mps2!r}")
        lo_hi = tuple(self.retry_offset_m)
        if len(lo_hi) != 2 or not (0 <= lo_hi[0] <= lo_hi[1] and math.isfinite(lo_hi[1])):
            raise ValueError(f"EgoConfig.retry_offset_m must be (min, max) with 0 <= min <= max, got {self.retry_offset_m!r}")
        object.__setattr__(self, "retry_offset_m", (float(lo_hi[0]), float(lo_hi[1])))
        if not (isinstance(self.seed, int) and self.seed >= 0):
            raise ValueError(f"EgoConfig.seed must be an int >= 0, got {self.seed!r}")
        for name in ("max_consecutive_failures", "depth_pixel_stride"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise ValueError(f"EgoConfig.{name} must be an int >= 1, got {v!r}")
        for name, cls in (("map", GridMapConfig), ("optimizer", OptimizerConfig), ("yaw", YawConfig),
                          ("unknown_space", UnknownSpaceConfig), ("swarm", SwarmConfig)):
            if not isinstance(getattr(self, name), cls):
                raise ValueError(f"EgoConfig.{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}")

    def with_time_limits_scaled(self, factor: float) -> "EgoConfig":
        """This config with every wall-clock safety net multiplied by ``factor`` (>= 1): the
        optimiser's ``max_time_s``, A*'s ``max_time_s`` and ``retry_budget_s``. The deterministic
        budgets (L-BFGS iterations, A* expansions) are unchanged and then decide the result alone
        unless the machine is ``factor`` times slower than the limits assume. Used where the clock
        stands still while the planner thinks (a lockstep simulation)."""
        if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor >= 1.0):
            raise ValueError(f"time limit scale must be a finite number >= 1, got {factor!r}")
        if factor == 1.0:
            return self
        opt = self.optimizer
        astar = replace(opt.astar, max_time_s=opt.astar.max_time_s * factor)
        return replace(self, retry_budget_s=self.retry_budget_s * factor,
                       optimizer=replace(opt, max_time_s=opt.max_time_s * factor, astar=astar))

    @property
    def plan_vel_mps(self) -> float:
        """The speed plans cruise at, m/s: ``max_vel_mps`` less the ``speed_headroom``."""
        return self.max_vel_mps * (1.0 - self.speed_headroom)

    @property
    def knot_dt_s(self) -> float:
        return self.ctrl_pt_dist_m / self.max_vel_mps * 1.2

    @classmethod
    def from_dict(cls, values: dict) -> "EgoConfig":
        """Build from a plain mapping (e.g. YAML); nested ``map``/``optimizer``/``yaw``/
        ``unknown_space`` mappings are allowed. Unknown keys raise ValueError naming them."""
        known = {f.name for f in fields(cls)}
        bad = sorted(set(values) - known)
        if bad:
            raise ValueError(f"unknown EgoConfig key(s) {bad}; known: {sorted(known)}")
        values = dict(values)
        if isinstance(values.get("map"), dict):
            values["map"] = GridMapConfig.from_dict(values["map"])
        for name, sub in (("optimizer", OptimizerConfig), ("yaw", YawConfig), ("unknown_space", UnknownSpaceConfig),
                          ("swarm", SwarmConfig)):
            if isinstance(values.get(name), dict):
                sub_known = {f.name for f in fields(sub)}
                sub_bad = sorted(set(values[name]) - sub_known)
                if sub_bad:
                    raise ValueError(f"unknown EgoConfig.{name} key(s) {sub_bad}; known: {sorted(sub_known)}")
                values[name] = sub(**values[name])
        return cls(**values)
