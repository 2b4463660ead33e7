"""The EGO-style local planner behind the runner's Planner protocol (``--planner ego``).

It owns an :class:`OccupancyGridMap` fed only from :class:`~planner_pkg.types.SensorFrame`\\ s (the
depth image with its camera pose, or the world-frame point cloud), a :class:`PlanManager` that
runs one replan, and the replan state machine (:mod:`planner_pkg.planning.replan_fsm`):

- replan on a timer (``replan_period_s``), after ``replan_progress_m`` of progress, and at once
  when the trajectory ahead (its first 2/3, as EGO) becomes blocked in the map;
- if a replan fails while a collision is less than ``emergency_time_s`` ahead: emergency stop
  from the vehicle's own state (brake along the velocity, or while steering away from what is
  ahead where that keeps more clearance: :mod:`planner_pkg.planning.emergency`), then plan again
  from rest;
- stop before never-observed space: every new trajectory is re-timed so the vehicle can stop
  inside space the camera has seen free (:mod:`planner_pkg.planning.frontier`; on once a depth
  image has been fused, see ``EgoConfig.unknown_space``); a trajectory that brakes for it is
  replanned as the vehicle reaches the braking, by when the camera has usually seen farther;
- goals: a goal above the ceiling / below the floor is moved into the planning band, a goal
  inside an obstacle to the nearest free point within ``goal_search_radius_m`` (or refused);
  each with a message in ``events`` and the log. Long-range goals are approached through local
  targets at most ``planning_horizon_m`` ahead on the start-goal line.

Every call does a bounded amount of work: at most ``_MAX_STEPS`` FSM steps, each at most one
replan, whose optimiser and A* have their own iteration, node and time budgets.

The iteration and node budgets are deterministic: they decide the result on any machine. The
wall-clock limits (``optimizer.max_time_s``, ``optimizer.astar.max_time_s``,
``retry_budget_s``) are safety nets against a pathological plan; when one fires the result
depends on the machine's speed and load, so every firing is counted in
``stats.safety_net_hits`` and logged. Where the clock stands still while the planner thinks (a
lockstep simulation) they can be widened with :meth:`EgoConfig.with_time_limits_scaled`.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Union

import numpy as np

from planner_pkg.planning.astar import AStarStatus
from planner_pkg.planning.ego_config import EgoConfig
from planner_pkg.planning.emergency import choose_emergency_stop
from planner_pkg.planning.frontier import StopLimit, StopLimitedTrajectory, brake_before
from planner_pkg.planning.grid_map import OccupancyGridMap
from planner_pkg.planning.grid_map_config import UnknownPolicy
from planner_pkg.planning.initial_path import local_target
from planner_pkg.planning.planner_manager import PlanManager, PlanOutcome
from planner_pkg.planning.replan_fsm import FsmState, ReplanFSM
from planner_pkg.planning.stall import ProgressMonitor, Route, find_route
from planner_pkg.planning.trajectory import BrakingTrajectory, BsplineTrajectory
from planner_pkg.planning.visibility import DepthHistory
from planner_pkg.types import SensorFrame, Setpoint, VehicleState

__all__ = ["EgoConfig", "EgoPlanner", "PlannerStats"]

logger = logging.getLogger(__name__)

_MAX_STEPS = 4  # FSM steps per update(): e.g. EXEC_TRAJ -> REPLAN_TRAJ -> EMERGENCY_STOP
_LOOK_RAD = 0.2  # a plan refused for unobserved space turns the camera toward it when this far off, rad


@dataclass
class PlannerStats:
    """What the planner measured about itself (wall times in ms)."""

    replan_ms: List[float] = field(default_factory=list)  # every plan attempt (GEN_NEW + REPLAN)
    # the same plans' CPU time of the planning thread (time.thread_time): on a shared, loaded
    # machine the wall time above also counts the time other processes held the core
    replan_cpu_ms: List[float] = field(default_factory=list)
    replan_ok: List[bool] = field(default_factory=list)
    # the same plans' charged iteration budget (all guesses, both optimiser stages): L-BFGS
    # iterations plus guide-path A* expansions / OptimizerConfig.guide_expansions_per_iteration;
    # their compute, independent of the machine and its load
    plan_iterations: List[float] = field(default_factory=list)
    # the same plans: made while flying (within EgoConfig.replan_iterations) rather than from a
    # hover (GEN_NEW_TRAJ) or (nearly) at rest
    plan_in_flight: List[bool] = field(default_factory=list)
    iterations: List[int] = field(default_factory=list)  # L-BFGS iterations of successful plans
    # L-BFGS iterations of every optimiser run (each initial guess tried, failed ones too)
    optimizer_iterations: List[int] = field(default_factory=list)
    fuse_ms: List[float] = field(default_factory=list)  # map update per sensor frame
    emergency_stops: int = 0
    emergency_steered: int = 0  # ... of which braked while steering away (planning/emergency.py)
    # failed replans with the trajectory blocked within emergency_time_s only by the inflation's
    # outer band (clear of every occupied voxel by EgoConfig.emergency_clearance_m): flown on
    inflation_only_blocks: int = 0
    inflation_block_brakes: int = 0  # ... of which braked before the block (EgoConfig.inflation_block_braking)
    bad_frames: int = 0
    stop_limited: int = 0  # plans re-timed to stop before never-observed / blocked space
    cannot_stop: int = 0  # ... of which the start speed needed more room than was known free
    stalls: int = 0  # stalls (no progress toward the goal, EgoConfig.stall) begun
    route_plans: int = 0  # plans whose local target came from an A* route (while stalled)
    route_failures: int = 0  # route searches that found none (the plan then aims along the line)
    # wall-clock safety nets that fired: optimizer_time, astar_time, retry_time, route_astar_time -> count
    safety_net_hits: Dict[str, int] = field(default_factory=dict)

    @property
    def safety_net_total(self) -> int:
        return sum(self.safety_net_hits.values())


class EgoPlanner:
    """Planner protocol (see planner_pkg.sim.runner): ``reset``, ``update``, ``observe``."""

    name = "ego"

    def __init__(self, config: EgoConfig = EgoConfig()):
        if not isinstance(config, EgoConfig):
            raise TypeError(f"EgoPlanner needs an EgoConfig, got {type(config).__name__}")
        self.config = config
        self.rate_hz = config.rate_hz
        self._optimizer_config = replace(config.optimizer, max_vel_mps=config.plan_vel_mps,
                                         max_acc_mps2=config.max_acc_mps2)
        self.fsm = ReplanFSM()
        self.map: Optional[OccupancyGridMap] = None
        self.manager: Optional[PlanManager] = None
        self.goal: Optional[np.ndarray] = None
        self.mission_start: Optional[np.ndarray] = None
        self.trajectory: Union[BsplineTrajectory, StopLimitedTrajectory, BrakingTrajectory, None] = None
        self.stats = PlannerStats()
        self.events: List[str] = []
        self._last_frame: Optional[SensorFrame] = None
        self._plan_time = -math.inf
        self._plan_position = np.zeros(3)
        self._target_is_goal = False
        self._failures = 0
        self._rest_failures = 0  # failed plans from (nearly) rest in a row
        self._start_blocked_reported = False
        self._collision_time: Optional[float] = None  # absolute time of the blocked point ahead
        self._collision_in_map = False  # the blocked point ahead is in the map (not another drone's trajectory)
        self._rng = np.random.default_rng(config.seed)
        self._turn_since = -math.inf  # when a turn-on-the-spot before a new plan began, s
        self._turn_heading = None  # (heading rad, plan time s) of the turn on the spot under way
        self._unobserved: Optional[BsplineTrajectory] = None  # the last plan refused for unobserved space
        self._hold_point: Optional[np.ndarray] = None  # the latched hold position, m (None: not holding)
        u = config.unknown_space
        limit = StopLimit.from_config(u, config.max_acc_mps2, config.map.inflation_m, config.map.resolution_m)
        self._stop_limit = limit if u.stop_before_unknown else None
        self._block_limit = limit if config.inflation_block_braking else None  # see EgoConfig.inflation_block_braking
        self._history = DepthHistory(u.history_frames, u.history_period_s, config.map.resolution_m)
        self._cloud_only_reported = False
        self._progress = ProgressMonitor(config.stall)
        self._route: Optional[Route] = None  # while stalled: the A* route the local targets lie on
        self._route_time = -math.inf  # when it was searched, s
        self.swarm = None  # EGO-Swarm: a planning.swarm.SwarmView, see attach_swarm

    def attach_swarm(self, view) -> None:
        """EGO-Swarm: plan against the other drones' broadcast trajectories in ``view`` (a
        :class:`~planner_pkg.planning.swarm.SwarmView`; None = fly alone). Kept over resets."""
        self.swarm = view
        if self.manager is not None:
            self.manager.swarm = view

    # -- protocol --------------------------------------------------------------------------------
    def reset(self, start, goal) -> None:
        """Start a mission from ``start`` (3,) m to ``goal`` (3,) m (world ENU)."""
        start = np.asarray(start, dtype=np.float64).reshape(-1)
        goal = np.asarray(goal, dtype=np.float64).reshape(-1)
        if start.shape != (3,) or goal.shape != (3,) or not (np.isfinite(start).all() and np.isfinite(goal).all()):
            raise ValueError(f"EgoPlanner.reset: start and goal must be finite (3,) positions, got {start}, {goal}")
        c = self.config
        self.map = OccupancyGridMap(c.map, center=start)
        # the stop-before-unknown limit is switched on by the first fused depth image (a cloud
        # cannot tell free from never-observed space)
        self._history.clear()
        self._cloud_only_reported = False
        self.manager = PlanManager(self.map, self._optimizer_config, c.knot_dt_s, c.yaw, history=self._history,
                                   reuse_acc_mps2=c.reuse_retime_acc_fraction * c.max_acc_mps2)
        self.manager.swarm = self.swarm
        self.stats = PlannerStats()
        self.events = []
        self.trajectory = None
        self._last_frame = None
        self._plan_time = -math.inf
        self._failures = 0
        self._rest_failures = 0
        self._start_blocked_reported = False
        self._collision_time = None
        self._collision_in_map = False
        self._turn_since = -math.inf
        self._turn_heading = None
        self._hold_point = None
        self._rng = np.random.default_rng(self.config.seed)
        self.fsm = ReplanFSM()
        self.fsm.transition(FsmState.WAIT_TARGET, "mission reset", 0.0)
        lo, hi = c.map.floor_m, c.map.ceiling_m
        if not lo <= goal[2] <= hi:
            moved = goal.copy()
            moved[2] = min(max(goal[2], lo + c.map.resolution_m), hi - c.map.resolution_m)
            self._event(0.0, f"goal {np.round(goal, 2).tolist()} m is outside the planning band z in [{lo}, {hi}] m; "
                             f"moved to {np.round(moved, 2).tolist()} m")
            goal = moved
        self.goal = goal
        self.mission_start = start.copy()
        self._progress.reset(goal, 0.0, start)
        self._route = None
        self._route_time = -math.inf
        self.fsm.transition(FsmState.GEN_NEW_TRAJ, f"goal {np.round(goal, 2).tolist()} m received", 0.0)

    def observe(self, sensors: SensorFrame) -> None:
        """Fuse one sensor frame into the map (the runner calls this for every frame)."""
        self._fuse(sensors)

    def update(self, state: VehicleState, sensors: Optional[SensorFrame]):
        """One planning tick: returns a new trajectory, a hold Setpoint, or None (keep)."""
        if self.map is None or self.goal is None:
            raise RuntimeError("EgoPlanner.update() called before reset(start, goal)")
        if not state.is_finite():
            raise ValueError("EgoPlanner.update: the vehicle state is not finite")
        if sensors is not None and sensors is not self._last_frame:
            self._fuse(sensors)
        self.map.follow(state.position)
        if self.config.stall.enabled and self.fsm.state not in (FsmState.INIT, FsmState.WAIT_TARGET):
            self._watch_progress(state)
        out = None
        for _ in range(_MAX_STEPS):
            done, result = self._step(state)
            if result is not None:
                out = result
            if done:
                break
        if out is not None and not isinstance(out, Setpoint):
            self._hold_point = None  # a trajectory to fly: any hold is over
        return out

    def _watch_progress(self, state: VehicleState) -> None:
        """Stall detection (:mod:`planner_pkg.planning.stall`): no progress toward the goal for
        ``stall.time_s`` switches the local targets to an A* route, progress switches them back."""
        c = self.config.stall
        change = self._progress.update(state.t, state.position)
        if change == "stalled":
            self.stats.stalls = self._progress.stalls
            self._route = None
            to_goal = float(np.linalg.norm(state.position - self.goal))
            self._event(state.t, f"no progress toward the goal for {c.time_s:g} s (still {to_goal:.1f} m away): "
                                 f"local targets along an A* route through the map until the distance comes down "
                                 f"by {c.progress_m:g} m")
        elif change == "progress":
            self._route = None
            self._event(state.t, "progress toward the goal again: local targets back on the start-goal line")

    def _search_route(self, position: np.ndarray, t: float):
        """(route or None, the A* search): a new stall route from ``position``, kept as the current one."""
        c = self.config
        route, search = find_route(self.map, position, self.goal, c.stall.astar, self.mission_start, c.stall.corridor_m)
        self._route, self._route_time = route, t
        if search.status is AStarStatus.TIME_LIMIT:
            self._safety_nets(t, {"route_astar_time": 1}, route is not None)
        return route, search

    def _route_target(self, position: np.ndarray, t: float):
        """(target, direction, is_goal) on the stall route (searched again when older than
        ``stall.reroute_period_s`` or when its target is blocked), or None when no route is found."""
        c = self.config
        horizon = c.planning_horizon_m
        route = self._route
        rt = None
        fresh = t - self._route_time < c.stall.reroute_period_s
        if route is not None and fresh:
            rt = route.target(position, horizon)
            if self.map.is_blocked(rt.target[None])[0]:
                rt = None
        elif route is None and fresh:
            return None  # the last search found none: the next one after reroute_period_s
        if rt is None:
            route, search = self._search_route(position, t)
            if route is None:
                self.stats.route_failures += 1
                n = self.stats.route_failures
                if n <= 3 or n % 50 == 0:
                    self._event(t, f"stalled, and no route toward the goal ({search.message}; {n} so far): aiming "
                                   f"along the start-goal line")
                return None
            rt = route.target(position, horizon)
        self.stats.route_plans += 1
        return rt

    def _hold(self, state: VehicleState, yaw: float) -> Setpoint:
        """Hold position at the point latched when this hold began, until a trajectory is flown
        again (``EgoConfig.latch_hold``; False: where the vehicle is, re-read every tick). A turn on
        the spot or a run of plans from rest can last seconds, and a hold that follows the vehicle
        never pulls it back: the speed it had left after an emergency stop drifted it 0.19 m on
        toward a trunk (0.22 -> 0.08 m, benchmarks/forest.py seed 73 at 4 m/s)."""
        if not self.config.latch_hold:
            return Setpoint.hold(state.position, yaw)
        if self._hold_point is None:
            self._hold_point = state.position.copy()
        return Setpoint.hold(self._hold_point, yaw)

    # -- sensing ---------------------------------------------------------------------------------
    def _fuse(self, frame: Optional[SensorFrame]) -> None:
        if frame is None or frame is self._last_frame or self.map is None:
            return
        self._last_frame = frame
        t0 = time.perf_counter()
        try:
            self.map.follow(frame.camera_position)
            if self.config.use_depth and frame.depth is not None and frame.intrinsics is not None:
                self.map.insert_depth(frame.depth, frame.intrinsics, frame.camera_position, frame.camera_orientation,
                                      self.config.depth_pixel_stride)
                if self._stop_limit is not None:
                    self._history.add(frame.t, frame.depth, frame.intrinsics, frame.camera_position,
                                      frame.camera_orientation)
                    self.manager.stop_limit = self._stop_limit
            elif frame.points is not None:
                self.map.insert_point_cloud(frame.camera_position, frame.points)
                if self._stop_limit is not None and self.manager.stop_limit is None and not self._cloud_only_reported:
                    self._cloud_only_reported = True
                    self._event(frame.t, "sensor frames carry no depth image: a point cloud cannot tell free from "
                                         "never-observed space, so the stop-before-unknown speed limit is off and unknown "
                                         "space counts as free (EGO's behaviour); feed depth images to enable it")
        except ValueError as exc:
            # a bad frame (non-finite pose, wrong image shape) is skipped, not fatal
            self.stats.bad_frames += 1
            if self.stats.bad_frames <= 3:
                self._event(frame.t, f"sensor frame skipped: {exc}")
            return
        self.stats.fuse_ms.append(1e3 * (time.perf_counter() - t0))

    # -- the state machine -----------------------------------------------------------------------
    def _step(self, state: VehicleState):
        """One FSM step: (done for this tick?, result to return or None)."""
        s, t = self.fsm.state, state.t
        if s is FsmState.INIT or s is FsmState.WAIT_TARGET:
            return True, None
        if s is FsmState.GEN_NEW_TRAJ:
            return self._generate(state)
        if s is FsmState.EXEC_TRAJ:
            return self._execute(state)
        if s is FsmState.REPLAN_TRAJ:
            return self._replan(state)
        if s is FsmState.EMERGENCY_STOP:
            if state.speed < 0.3:
                self.fsm.transition(FsmState.GEN_NEW_TRAJ, f"stopped (speed {state.speed:.2f} m/s)", t)
                return False, None
            return True, None
        raise AssertionError(f"unhandled FSM state {s}")  # pragma: no cover - every state is above

    def _targets(self, position, t: float):
        """(target, target velocity, is_goal, message) or (None, ..., message) when refused."""
        c = self.config
        free_goal, msg = self.manager.free_point(self.goal, c.goal_search_radius_m)
        if free_goal is None:
            return None, None, False, f"goal {msg}; refusing it"
        if msg:
            self._event(None, f"goal {msg}")
            self.goal = free_goal
            self._progress.set_goal(free_goal)  # the moved goal is not the vehicle's progress
        routed = self._route_target(position, t) if self._progress.stalled else None
        if routed is not None:
            if routed.is_goal:
                return routed.target, np.zeros(3), True, ""
            # a route point is free of the inflated map (with the search's clearance) when found
            return routed.target, routed.direction * c.plan_vel_mps, False, ""
        target, is_goal = local_target(position, self.mission_start, self.goal, c.planning_horizon_m)
        if not is_goal:
            free, msg = self.manager.free_point(target, c.target_search_radius_m)
            if free is None:
                # pull the target back toward the vehicle until it is free (bounded: 5 tries)
                for frac in (0.8, 0.6, 0.4, 0.3, 0.2):
                    cand = position + frac * (target - position)
                    free, _ = self.manager.free_point(cand, c.target_search_radius_m)
                    if free is not None:
                        break
            if free is None:
                return None, None, False, f"no free local target near {np.round(target, 2).tolist()} m"
            target = free
        if is_goal:
            tvel = np.zeros(3)
        else:
            d = self.goal - target
            n = float(np.linalg.norm(d))
            tvel = d / n * c.plan_vel_mps if n > 1e-6 else np.zeros(3)
        return target, tvel, is_goal, ""

    def _start_state(self, state: VehicleState, use_reference: bool):
        """(p, v, a, yaw, t_ref) to plan from: the reference (continuity) at ``t_ref``, which is
        t or, when the vehicle lags the reference by more than ``lag_resync_m``, the earlier
        time where the reference is closest to the vehicle (see :class:`EgoConfig`); or the
        odometry (``t_ref`` None)."""
        t = state.t
        traj = self.trajectory
        if use_reference and traj is not None:
            p, v, a = traj.state(t)
            error = float(np.linalg.norm(p - state.position))
            if error <= self.config.max_tracking_error_m:
                yaw = traj.yaw_at(t)[0] if isinstance(traj, (BsplineTrajectory, StopLimitedTrajectory)) else state.yaw
                t_ref = t
                if error > self.config.lag_resync_m:
                    t_ref = self._progress_time(traj, state.position, t)
                    if t_ref < t:
                        p, v, a = traj.state(t_ref)
                return p, v, a, yaw, t_ref
        return state.position.copy(), state.velocity.copy(), np.zeros(3), state.yaw, None

    def _progress_time(self, traj, position: np.ndarray, t: float) -> float:
        """The time in the last ``max_resync_s`` (not before the trajectory's start) at which
        ``traj`` passes closest to ``position`` (every 10 ms; the latest of equal distances)."""
        t0 = max(t - self.config.max_resync_s, traj.t_start)
        if t0 >= t:
            return t
        ts = np.linspace(t0, t, max(2, int(math.ceil((t - t0) / 0.01)) + 1))
        if isinstance(traj, StopLimitedTrajectory):
            pts = traj.positions(ts)
        elif isinstance(traj, BsplineTrajectory):
            pts = traj.spline.evaluate(np.maximum(ts - traj.t_start, 0.0))
        else:
            pts = np.array([traj.state(tt)[0] for tt in ts])
        d2 = ((pts - position) ** 2).sum(axis=1)
        k = int(d2.shape[0] - 1 - np.argmin(d2[::-1]))
        return float(ts[k])

    def _plan(self, state: VehicleState, reuse: bool) -> PlanOutcome:
        p, v, a, yaw, t_ref = self._start_state(state, use_reference=reuse)
        if not self._start_blocked_reported and self.map.is_blocked(p[None])[0]:
            self._start_blocked_reported = True
            self._event(state.t, f"start {np.round(p, 2).tolist()} m is inside an inflated obstacle; planning a way out")
        target, tvel, is_goal, msg = self._targets(p, state.t)
        if target is None:
            self._failures += 1
            return PlanOutcome(None, msg)
        # (a stop-limited trajectory's base has its time up to the braking, where it is reused)
        previous = self._reusable(state.t) if reuse and t_ref is not None else None
        t0 = time.perf_counter()
        cpu0 = time.thread_time()
        # initial guesses in order (each leads the optimiser into its own local minimum): the
        # current trajectory extended (replans; keeps the chosen side of each obstacle), an A*
        # path to the target, then quintics through a waypoint to either side (EGO retries with
        # random waypoints); later ones only while the retry budget lasts
        attempts = [dict(previous=previous)] if previous is not None else []
        attempts.append(dict(guided=True))
        attempts += [dict(via=via) for via in self._via_points(p, target)]
        # more thinking time when hovering (GEN_NEW_TRAJ) and after repeated failures (in flight:
        # flight_failure_time_scale_step, 0 = none: the next tick tries again)
        flying = reuse and state.speed >= self.config.turn_first_speed_mps
        step = self.config.flight_failure_time_scale_step if flying else 0.5
        scale = min(1.0 + step * self._failures, self.config.max_time_scale)
        if not reuse:
            scale = self.config.max_time_scale
        attempts = self._order_guesses(attempts, reuse, flying)
        c = self.config
        k = c.crawl_after_rest_failures
        if not flying and k and self._rest_failures >= k and (self._rest_failures - k) % 2 == 0:
            # the guesses keep failing from here: every other plan first tries the A*-guided one
            # at a crawl, whose closer control points can follow a tight way through that the
            # full-speed curve cuts (the other plans leave the whole budget to the usual guesses)
            attempts.insert(0, dict(guided=True, guided_speed_fraction=c.crawl_speed_fraction))
        k = c.flight_brake_after_failures
        if flying and k and self._failures >= k and (self._failures - k) % 2 == 0:
            # the same in flight: the guesses at cruise speed keep failing, every other replan
            # first tries the A*-guided one slowing down (closer control points bend round more)
            attempts.insert(0, dict(guided=True, guided_speed_fraction=c.flight_brake_speed_fraction))
        # while flying, one replan spends at most replan_iterations L-BFGS iterations over all its
        # guesses (x the scale; the next tick starts from the next guess); from a hover or
        # (nearly) at rest rest_plan_iterations (unscaled), or with 0 each guess its own budgets
        if flying:
            budget = int(round(self.config.replan_iterations * scale))
        else:
            budget = self.config.rest_plan_iterations or None
        used = 0
        out = None
        hits: Dict[str, int] = {}
        self._unobserved = None
        obstacles = self.manager.optimizer.obstacle_set()  # the map stays as it is until the plan is made
        for k, kw in enumerate(attempts):
            if k > 0 and budget is not None and budget - used < 1:  # not a whole iteration left
                break
            if k > 0 and time.perf_counter() - t0 > self.config.retry_budget_s * scale:
                hits["retry_time"] = 1  # guesses left untried for lack of wall time
                break
            out = self.manager.plan(p, v, a, target, tvel, state.t, yaw, time_scale=scale,
                                    previous_t=t_ref if "previous" in kw else None,
                                    max_iterations=None if budget is None else int(budget - used),
                                    obstacles=obstacles, **kw)
            used += (out.optimize.budget_used if out.optimize else 0) + (out.refine.iterations if out.refine else 0)
            for name, n in out.safety_net_hits().items():
                hits[name] = hits.get(name, 0) + n
            if out.optimize is not None:
                self.stats.optimizer_iterations.append(out.optimize.iterations)
            if out.unobserved is not None and self._unobserved is None:
                self._unobserved = out.unobserved
            if out.success:
                break
        out.time_s = time.perf_counter() - t0
        if hits:
            self._safety_nets(state.t, hits, out.success)
        self.stats.replan_ms.append(1e3 * out.time_s)
        self.stats.replan_cpu_ms.append(1e3 * (time.thread_time() - cpu0))
        self.stats.replan_ok.append(out.success)
        self.stats.plan_iterations.append(used)
        self.stats.plan_in_flight.append(flying)
        if out.frontier is not None and out.frontier.limited:
            self._stop_limited(state.t, out)
        if out.success:
            self.stats.iterations.append(out.optimize.iterations if out.optimize else 0)
            self.trajectory = out.trajectory
            self._plan_time = state.t
            self._plan_position = state.position.copy()
            self._target_is_goal = is_goal
            self._failures = 0
        else:
            self._failures += 1
        self._rest_failures = 0 if (out.success or flying) else self._rest_failures + 1
        return out

    def _order_guesses(self, attempts: list, reuse: bool, flying: bool) -> list:
        """The initial guesses a plan tries, in order (the budget may stop it before the last).

        Three cases, each ordering the list as built (reused trajectory, A*-guided, detours):

        - a routine replan (the last plan succeeded) tries the reused guess only, one that avoids
          a newly blocked trajectory also A* (from (nearly) rest A* first); the others come in
          the next ticks if it fails;
        - a plan from a hover or (nearly) at rest starts from the A*-guided guess whatever failed
          in flight before: it is the one that succeeds there (EgoConfig.rest_guess_rotation has
          the figures); after failed plans from rest in a row it starts from the next guess in
          turn (a guess that spends the whole tick would otherwise be the only one ever tried);
        - a replan in flight after failed plans starts from the next guess each time, for the
          same reason (measured: 40 failures in a row on the reused trajectory while the A* guess
          was never run). With rest_guess_rotation true plans from rest rotate this way too.
        """
        from_rest = not flying and not self.config.rest_guess_rotation
        if reuse and self._failures == 0:
            attempts = attempts[:2] if self._collision_time is not None else attempts[:1]
            if from_rest:
                attempts = sorted(attempts, key=lambda kw: not kw.get("guided"))
            return attempts
        if len(attempts) < 2:
            return attempts
        if from_rest:
            attempts = sorted(attempts, key=lambda kw: not kw.get("guided"))  # stable: the rest keep their order
            k = self._rest_failures % len(attempts)
        else:
            k = self._failures % len(attempts)
        return attempts[k:] + attempts[:k]

    def _reusable(self, t: float):
        """The current trajectory as a replan's initial guess (None: nothing to reuse). A
        stop-limited one is its planned base while the vehicle has not reached the braking yet:
        the guess then keeps the plan's speed instead of a stop the new plan may not need."""
        traj = self.trajectory
        if isinstance(traj, StopLimitedTrajectory):
            return traj.base if t < traj.t_warp else traj
        return traj if isinstance(traj, BsplineTrajectory) else None

    def _stop_limited(self, t: float, out: PlanOutcome) -> None:
        """Count a plan re-timed (or refused) for never-observed space; report the first few."""
        self.stats.stop_limited += 1
        if out.frontier.cannot_stop:
            self.stats.cannot_stop += 1
            if self.stats.cannot_stop <= 3 or self.stats.cannot_stop % 50 == 0:
                self._event(t, f"too fast for the observed free space ahead ({self.stats.cannot_stop} plans so far): "
                               f"the plan {out.frontier.describe()}")

    def _via_points(self, p: np.ndarray, target: np.ndarray) -> list:
        """Two waypoints beside the midpoint of p -> target, one per side, in random order at a
        random lateral offset (seeded: episodes are reproducible)."""
        d = target - p
        horizontal = np.array([-d[1], d[0], 0.0])
        n = float(np.linalg.norm(horizontal))
        if n < 1e-6:
            return []
        side = horizontal / n
        offset = self._rng.uniform(*self.config.retry_offset_m)
        sign = 1.0 if self._rng.random() < 0.5 else -1.0
        mid = 0.5 * (p + target)
        return [mid + sign * offset * side, mid - sign * offset * side]

    def _generate(self, state: VehicleState):
        t = state.t
        if np.linalg.norm(state.position - self.goal) <= self.config.reached_tolerance_m:
            self.fsm.transition(FsmState.WAIT_TARGET, "already at the goal", t)
            return True, Setpoint.hold(self.goal, state.yaw)
        turn = self._turn_heading
        if turn is not None and state.speed < self.config.turn_first_speed_mps:
            # turning on the spot toward the last plan's heading: plan again once the camera is
            # (nearly) there, or every turn_replan_period_s with what it has seen meanwhile
            heading, planned_at = turn
            left = abs(math.remainder(heading - state.yaw, 2.0 * math.pi))
            if (left > _LOOK_RAD and t - planned_at < self.config.turn_replan_period_s
                    and t - self._turn_since < self.config.max_turn_s):
                return True, self._hold(state, heading)
        out = self._plan(state, reuse=False)
        # the plan to look along before flying: one refused because the camera has not seen the
        # space it leads into (turning shows it; preferred to a detour another guess found), or
        # else the new one
        refused = self._unobserved
        look = refused if refused is not None else getattr(out.trajectory, "base", out.trajectory)
        if look is not None and state.speed < self.config.turn_first_speed_mps:
            heading = self._initial_heading(look)
            threshold = _LOOK_RAD if refused is not None else self.config.turn_first_rad
            error = abs(math.remainder(heading - state.yaw, 2.0 * math.pi)) if heading is not None else 0.0
            turning_s = 0.0 if self._turn_since == -math.inf else t - self._turn_since
            if error > threshold and turning_s < self.config.max_turn_s:
                # the camera looks the other way: flying off sideways would discover obstacles
                # too late (and into never-observed space the plan stops at once). Turn on the
                # spot first, then plan again with what the camera sees.
                if self._turn_since == -math.inf:
                    self._turn_since = t
                self._turn_heading = (heading, t)
                if not out.success:
                    self._failures = 0  # looking is progress; max_turn_s bounds it
                    self._rest_failures = 0  # the next plan sees more: the guided guess first again
                self.trajectory = None
                self.fsm.transition(FsmState.GEN_NEW_TRAJ, f"turning to the new heading first "
                                    f"({math.degrees(error):.0f} deg off)", t)
                return True, self._hold(state, heading)
        self._turn_heading = None
        if out.success:
            self._turn_since = -math.inf
            self.fsm.transition(FsmState.EXEC_TRAJ, "new trajectory: " + out.message, t)
            return True, self.trajectory
        return self._failed(state, out.message, hold=self.trajectory is None)

    def _initial_heading(self, trajectory) -> Optional[float]:
        """Heading, rad, from the trajectory's start to where it is 1 m of travel later (None if
        it never gets 0.3 m away horizontally)."""
        ts = np.linspace(trajectory.t_start, trajectory.t_end, 40)
        p = np.array([trajectory.state(tt)[0] for tt in ts])
        d = p[:, :2] - p[0, :2]
        dist = np.hypot(d[:, 0], d[:, 1])
        far = np.nonzero(dist >= 1.0)[0]
        k = int(far[0]) if far.shape[0] else int(np.argmax(dist))
        if dist[k] < 0.3:
            return None
        return math.atan2(d[k, 1], d[k, 0])

    def _failed(self, state: VehicleState, message: str, hold: bool):
        t = state.t
        c = self.config
        if (c.stall.enabled and not self._progress.stalled and not message.endswith("refusing it")
                and self._failures >= c.max_consecutive_failures):
            # before giving the goal up: the way may lie beyond what the plans toward the line's
            # local target search (a long wall across it); route through the map if there is one
            route, search = self._search_route(state.position, t)
            if route is not None:
                self._progress.force_stall(t)
                self.stats.stalls = self._progress.stalls
                self._event(t, f"{self._failures} plans failed in a row (last: {message}); before giving the goal "
                               f"up, local targets along an A* route through the map")
                self._failures = 0
                self.fsm.transition(self.fsm.state, f"plan failed: {message}; routing", t)
                return True, (self._hold(state, state.yaw) if hold else None)
            message = f"{message}; no route toward the goal either: {search.message}"
        if message.endswith("refusing it") or self._failures >= c.max_consecutive_failures:
            why = message if message.endswith("refusing it") else (
                f"{self._failures} plans failed in a row (last: {message}); giving the goal up")
            self._event(t, why)
            self.fsm.transition(FsmState.WAIT_TARGET, why, t)
            self.trajectory = None
            return True, self._hold(state, state.yaw)
        if self._failures in (1, 10) or self._failures % 50 == 0:
            self._event(t, f"plan failed ({self._failures} in a row): {message}")
        self.fsm.transition(self.fsm.state, f"plan failed: {message}", t)
        return True, (self._hold(state, state.yaw) if hold else None)

    def _execute(self, state: VehicleState):
        c, t = self.config, state.t
        traj = self.trajectory
        if traj is None:
            self.fsm.transition(FsmState.GEN_NEW_TRAJ, "no trajectory to execute", t)
            return False, None
        to_goal = float(np.linalg.norm(state.position - self.goal))
        if self._target_is_goal and t >= traj.t_end and to_goal <= c.reached_tolerance_m:
            self.fsm.transition(FsmState.WAIT_TARGET, f"goal reached ({to_goal:.2f} m)", t)
            return True, None
        if isinstance(traj, (BsplineTrajectory, StopLimitedTrajectory)):
            # EGO checks the first 2/3 of the trajectory: the rest is re-planned before it is flown
            # (and at least the next safety_horizon_s: after failed replans the tail is flown too).
            # A stop-limited trajectory is checked to its stop: that is what it commits to.
            fraction = 1.0 if isinstance(traj, StopLimitedTrajectory) else self._optimizer_config.check_fraction
            horizon = max(traj.duration * fraction - (t - traj.t_start), c.safety_horizon_s)
            hit = self.manager.trajectory_collision_time(traj, t, horizon, self._optimizer_config.check_step_m)
            self._collision_in_map = hit is not None
            if hit is None and self.swarm is not None:  # EGO-Swarm: a new broadcast crosses this trajectory
                other = self.swarm.collision_time(traj, t, horizon)
                hit = None if other is None else other[0]
        else:
            hit = None
        if hit is not None:
            self._collision_time = hit
            self.fsm.transition(FsmState.REPLAN_TRAJ, f"trajectory blocked {hit - t:.2f} s ahead", t)
            return False, None
        self._collision_time = None
        if isinstance(traj, StopLimitedTrajectory) and traj.t_warp - 1.0 / self.rate_hz <= t < traj.t_end:
            # braking for space the camera had not seen when it was planned (it may have by now), or
            # before a block of the inflation that a replan may get round by now
            self.fsm.transition(FsmState.REPLAN_TRAJ, "reaching a planned stop (unobserved space or a block ahead)", t)
            return False, None
        near_end = self._target_is_goal and traj.t_end - t < 1.0
        lag = float(np.linalg.norm(traj.state(t)[0] - state.position))
        if (c.lag_replan_m > 0 and lag > c.lag_replan_m and t - self._plan_time >= c.lag_replan_period_s
                and not near_end):
            # the controller is about to sprint to catch the lag up (it saturated while the
            # reference accelerated): replan now, from where the vehicle is on the reference
            self.fsm.transition(FsmState.REPLAN_TRAJ, f"the vehicle lags the reference by {lag:.2f} m", t)
            return False, None
        if not near_end:
            if t - self._plan_time >= c.replan_period_s:
                self.fsm.transition(FsmState.REPLAN_TRAJ, "replan timer", t)
                return False, None
            if np.linalg.norm(state.position - self._plan_position) >= c.replan_progress_m:
                self.fsm.transition(FsmState.REPLAN_TRAJ, f"{c.replan_progress_m} m of progress", t)
                return False, None
        if t >= traj.t_end and to_goal > c.reached_tolerance_m:
            self.fsm.transition(FsmState.GEN_NEW_TRAJ, "trajectory ended short of the goal", t)
            return False, None
        return True, None

    def _replan(self, state: VehicleState):
        t = state.t
        out = self._plan(state, reuse=True)
        if out.success:
            self.fsm.transition(FsmState.EXEC_TRAJ, "replanned: " + out.message, t)
            return True, self.trajectory
        hit = self._collision_time
        emergency = hit is not None and hit - t < self.config.emergency_time_s
        if emergency and self._inflation_only(t):
            self.stats.inflation_only_blocks += 1
            n = self.stats.inflation_only_blocks
            braked, report = (brake_before(self.trajectory, t, hit, self._block_limit) if self._block_limit is not None
                              else (None, None))
            if n <= 3 or n % 50 == 0:
                what = "flying on"
                if braked is not None:
                    short = report.known_free_m - report.stop_m
                    where = f"{short:.2f} m before the block" if short >= 0.0 else f"{-short:.2f} m into the block"
                    what = (f"braking on its curve toward the full acceleration limit (it needs more room): stops {where}"
                            if report.cannot_stop else f"braking on its curve to stop {where}")
                self._event(t, f"trajectory blocked {hit - t:.2f} s ahead by the inflation only (at least "
                               f"{self.config.emergency_clearance_m:.2f} m from every occupied voxel; {n} so far) and "
                               f"replanning failed ({out.message}): {what}")
            if braked is not None:
                self.stats.inflation_block_brakes += 1
                self.trajectory = braked
                self.fsm.transition(FsmState.EXEC_TRAJ, f"replan failed, braking before the inflation-only block "
                                    f"{hit - t:.2f} s ahead: {out.message}", t)
                return True, braked
            emergency = False
        if emergency:
            c = self.config
            # from where the vehicle is and how fast it flies, not from the reference: the
            # controller lags or leads it (measured 0.2 m ahead and 0.5 m/s faster at 6 m/s), and a
            # stop planned from the reference then ends short of where the vehicle can stop
            yaw = self._start_state(state, use_reference=True)[3]
            p, v = state.position.copy(), state.velocity.copy()
            # the acceleration the vehicle flies now: the one it was commanded (the reference's)
            a0 = self.trajectory.state(t)[2] if self.trajectory is not None else np.zeros(3)
            decel = c.emergency_decel_mps2 or 2.0 * c.max_acc_mps2
            self.trajectory, choice = choose_emergency_stop(
                self.map, self._history, p, v, t, decel, yaw, [math.radians(a) for a in c.emergency_steer_deg],
                c.emergency_steer_gain_m, c.unknown_space.start_radius_m,
                accept=None if self.swarm is None else (lambda stop: self.swarm.collision_time(stop, t, stop.duration)
                                                        is None), blind_below_m=c.map.inflation_m,
                acceleration=a0 if np.isfinite(a0).all() else None, ramp_s=c.emergency_ramp_s)
            self.stats.emergency_stops += 1
            self.stats.emergency_steered += choice.steer_rad != 0.0
            self._event(t, f"emergency stop: collision {hit - t:.2f} s ahead and replanning failed ({out.message}); "
                           f"{choice.describe()}")
            self.fsm.transition(FsmState.EMERGENCY_STOP, f"collision {hit - t:.2f} s ahead, replan failed", t)
            return True, self.trajectory
        if out.message.endswith("refusing it") or self._failures >= self.config.max_consecutive_failures:
            return self._failed(state, out.message, hold=True)
        # keep flying the current (still safe for now) trajectory and try again next tick
        self.fsm.transition(FsmState.EXEC_TRAJ, f"replan failed, keeping the current trajectory: {out.message}", t)
        return True, None

    def _inflation_only(self, t: float) -> bool:
        """Is the current trajectory, blocked in the map, clear of every occupied voxel's centre by
        ``emergency_clearance_m`` over the next ``emergency_time_s`` (only the inflation's outer
        band is in its way)? Never with the option off, for a block by another drone, or where the
        trajectory leaves the floor-to-ceiling band, the map's window or (with unknown space
        counted occupied) observed space: those blocks are not the inflation's."""
        c, traj = self.config, self.trajectory
        if c.emergency_clearance_m is None or not self._collision_in_map or traj is None:
            return False
        t1 = min(t + c.emergency_time_s, traj.t_end)
        points = traj.positions(np.linspace(t, t1, max(int(math.ceil((t1 - t) / 0.02)) + 1, 2)))
        m = self.map
        z = points[:, 2]
        if (not np.isfinite(points).all() or ((z < m.config.floor_m) | (z > m.config.ceiling_m)).any()
                or not m.in_window(m.local_index(points)).all()):
            return False
        if m.config.unknown is UnknownPolicy.OCCUPIED and not m.is_known(points).all():
            return False
        distances = m.occupied_distances(points, c.emergency_clearance_m + c.map.resolution_m)
        return bool(distances.min() >= c.emergency_clearance_m)

    # -- reporting -------------------------------------------------------------------------------
    def _safety_nets(self, t: float, hits: Dict[str, int], success: bool) -> None:
        """Count wall-clock safety nets that fired in one plan; log the first few and then every 20th."""
        total = self.stats.safety_net_hits
        for name, n in hits.items():
            total[name] = total.get(name, 0) + n
        count = self.stats.safety_net_total
        if count <= 3 or count % 20 == 0:
            c, o = self.config, self.config.optimizer
            logger.warning("t=%.3f s: wall-clock safety net fired (%s; plan %s; %d so far): the result depends on "
                           "this machine's speed and load (limits: optimiser %.0f ms, A* %.0f ms, retries %.0f ms, "
                           "x%.3g when hovering or after failures)", t, ", ".join(sorted(hits)),
                           "succeeded" if success else "failed", count, 1e3 * o.max_time_s,
                           1e3 * o.astar.max_time_s, 1e3 * c.retry_budget_s, c.max_time_scale)

    def _event(self, t: Optional[float], text: str) -> None:
        line = text if t is None else f"t={t:.3f} s: {text}"
        logger.warning(line)
        self.events.append(line)
