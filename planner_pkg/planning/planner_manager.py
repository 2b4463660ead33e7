"""One replan, end to end (EGO's ``planner_manager::reboundReplan``): initial guess -> rebound
optimisation -> refine -> trajectory -> (with a ``stop_limit``) re-timed to stop before
never-observed space (:mod:`planner_pkg.planning.frontier`). Also the goal / local-target checks
against the map."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Optional, Tuple, Union

import numpy as np

from planner_pkg.planning.collision_pairs import curve_collision_time
from planner_pkg.planning.astar import AStarStatus, astar_search
from planner_pkg.planning.frontier import FrontierReport, StopLimit, StopLimitedTrajectory, limit_to_known_space
from planner_pkg.planning.initial_path import guided_spline, initial_spline, shortcut
from planner_pkg.planning.rebound import OptimizerConfig, ReboundOptimizer, ReboundResult
from planner_pkg.planning.trajectory import BsplineTrajectory, YawConfig

__all__ = ["PlanOutcome", "PlanManager"]

_SPEED_TOL = 1e-4  # a plan's peak speed may exceed the limit by this fraction (sampling error)


@dataclass
class PlanOutcome:
    """Result of :meth:`PlanManager.plan`.

    trajectory: the new trajectory (None on failure); message: what happened, in words;
    optimize, refine: the optimiser's reports (None where that stage did not run);
    time_s: wall time of the whole replan, s.
    guide_time_limited: the A* search for the guided initial guess was stopped by its wall-clock
        safety net (``astar.max_time_s``), not by its node budget.
    frontier: what the stop-before-unknown check found (None when it did not run).
    unobserved: a plan refused because it had no observed free space to fly into (its heading
        says where the camera should look); None otherwise.
    """

    trajectory: Union[BsplineTrajectory, StopLimitedTrajectory, None]
    message: str
    optimize: Optional[ReboundResult] = None
    refine: Optional[ReboundResult] = None
    time_s: float = 0.0
    guide_time_limited: bool = False
    frontier: Optional[FrontierReport] = None
    unobserved: Optional[BsplineTrajectory] = None

    @property
    def success(self) -> bool:
        return self.trajectory is not None

    def safety_net_hits(self) -> dict:
        """Which wall-clock safety nets fired in this plan: {name: count}, names ``optimizer_time``
        (rebound optimiser's max_time_s) and ``astar_time`` (A*'s max_time_s, guided guess and
        guide paths). Empty when the deterministic budgets alone decided the result."""
        hits = {}
        astar = int(self.guide_time_limited) + (self.optimize.astar_time_limits if self.optimize else 0)
        if self.optimize is not None and self.optimize.wall_time_limited:
            hits["optimizer_time"] = 1
        if astar:
            hits["astar_time"] = astar
        return hits


class PlanManager:
    """Plans on ``grid_map`` with the rebound optimiser.

    knot_dt: knot interval of new splines, s (EGO: ctrl_pt_dist / max_vel).
    stop_limit: when set, every new trajectory is re-timed to stop before never-observed or
        blocked space (see :func:`limit_to_known_space`); ``history``: the recent depth frames
        (a :class:`~planner_pkg.planning.visibility.DepthHistory`) that check uses. Both may be
        changed between plans.
    reuse_acc_mps2: a replan's reused trajectory is re-timed to speed up at this acceleration
        (see :func:`initial_spline`; 0: its own timing, EGO).
    """

    def __init__(self, grid_map, optimizer: OptimizerConfig, knot_dt: float, yaw: YawConfig = YawConfig(),
                 stop_limit: Optional[StopLimit] = None, history=None, reuse_acc_mps2: float = 0.0):
        if not (math.isfinite(knot_dt) and knot_dt > 0):
            raise ValueError(f"knot interval must be positive, got {knot_dt!r} s")
        if not (math.isfinite(reuse_acc_mps2) and reuse_acc_mps2 >= 0):
            raise ValueError(f"reuse_acc_mps2 must be finite and >= 0, got {reuse_acc_mps2!r}")
        self.reuse_acc_mps2 = float(reuse_acc_mps2)
        self.map = grid_map
        self.optimizer = ReboundOptimizer(grid_map, optimizer)
        self.knot_dt = float(knot_dt)
        self.yaw = yaw
        self.stop_limit = stop_limit
        self.history = history
        # EGO-Swarm: a planning.swarm.SwarmView (the other drones' broadcasts) or None
        self.swarm = None
        # the last guided guess's A* search and what it was for: (obstacle set, start, target,
        # time scale, result); a plan's guesses share one obstacle set while the map stays as it is
        self._guide_memo = None

    @property
    def config(self) -> OptimizerConfig:
        return self.optimizer.config

    def plan(self, p0, v0, a0, target, target_vel, t_now: float, start_yaw: float,
             previous: Optional[BsplineTrajectory] = None, via=None, guided: bool = False,
             time_scale: float = 1.0, previous_t: Optional[float] = None,
             max_iterations: Optional[int] = None, obstacles=None,
             guided_speed_fraction: float = 1.0) -> PlanOutcome:
        """A trajectory from the state (p0, v0, a0) at absolute time ``t_now`` to ``target``.

        The initial guess: with ``guided``, along an A* path from p0 to the target (string-pulled,
        see :func:`guided_spline`), cruising at ``guided_speed_fraction`` (0 < f <= 1) x the speed
        limit (for f < 1 slowing to it from a faster start along the path) and reaching the target
        at f x ``target_vel`` (a slower guess has its control points
        closer together along the path, so the curve can follow a tight way through); otherwise
        ``previous`` and ``via`` shape it (see :func:`initial_spline`; ``previous`` is reused from
        its time ``previous_t``, where it is at p0: ``t_now`` when None). ``time_scale``
        multiplies the optimiser's and A*'s time budgets; ``max_iterations`` caps the L-BFGS
        iterations of each optimiser stage (rebound, refit) below its configured budget: a rebound
        that ends at the cap still gets its refit, so an accepted plan keeps to the limits.
        ``obstacles``: the optimiser's
        :meth:`~planner_pkg.planning.rebound.ReboundOptimizer.obstacle_set` shared by the calls of
        one plan while the map stays as it is (None: one for this call).
        """
        t0 = time.perf_counter()
        c = self.config
        if not (0.0 < guided_speed_fraction <= 1.0):
            raise ValueError(f"guided_speed_fraction must be in (0, 1], got {guided_speed_fraction!r}")
        if guided:
            search = self._guide_search(p0, target, time_scale, obstacles)
            if not search.success:
                return PlanOutcome(None, f"no guide path to the target: {search.message}",
                                   time_s=time.perf_counter() - t0,
                                   guide_time_limited=search.status is AStarStatus.TIME_LIMIT)
            f = float(guided_speed_fraction)
            guess = guided_spline(shortcut(self.map, search.path, c.check_step_m), v0, a0,
                                  np.asarray(target_vel, dtype=np.float64) * f, c.max_vel_mps * f, c.max_acc_mps2,
                                  self.knot_dt, slow_down=f < 1.0)
        else:
            guess = initial_spline(p0, v0, a0, target, target_vel, c.max_vel_mps, c.max_acc_mps2, self.knot_dt,
                                   previous=previous, t_now=t_now if previous_t is None else previous_t, via=via,
                                   reuse_acc_mps2=self.reuse_acc_mps2)
        if guess is None:
            return PlanOutcome(None, "already at the target: nothing to plan", time_s=time.perf_counter() - t0)
        # EGO-Swarm: the other drones' broadcasts at this plan's times (set for every plan)
        self.optimizer.swarm_plan = None if self.swarm is None else self.swarm.plan_maker(t_now, target)
        if obstacles is None:
            obstacles = self.optimizer.obstacle_set()
        opt = self.optimizer.optimize(guess, time_scale, max_iterations, obstacles)
        if not opt.success:
            return PlanOutcome(None, f"optimisation failed: {opt.message}", opt, time_s=time.perf_counter() - t0)
        ref = self.optimizer.refine(opt.spline, max_iterations, obstacles)
        spline = ref.spline if ref.success else opt.spline
        ratio = spline.feasibility_ratio(c.max_vel_mps, c.max_acc_mps2)
        # a start state already beyond the limits (tracking overshoot, a lowered limit) cannot be
        # undone by the plan: judge the plan only by what it adds
        start_ratio = max(float(np.linalg.norm(v0)) / c.max_vel_mps, math.sqrt(float(np.linalg.norm(a0)) / c.max_acc_mps2))
        if ratio > max(c.max_accept_ratio, 1.1 * start_ratio):
            return PlanOutcome(None, f"limits exceeded by x{ratio:.2f} after refine ({ref.message})", opt, ref,
                               time.perf_counter() - t0)
        spline, speed_note = self._speed_limited(spline, float(np.linalg.norm(v0)))
        if spline is None:
            return PlanOutcome(None, f"speed limit exceeded after refine: {speed_note}", opt, ref,
                               time.perf_counter() - t0)
        traj = BsplineTrajectory(spline, t_now, start_yaw, self.yaw)
        msg = (f"{opt.iterations} L-BFGS iterations, {opt.rebounds} rebounds, {opt.pairs} pairs; refine: "
               f"{ref.message}{speed_note}")
        frontier = None
        if self.stop_limit is not None:
            traj, frontier = limit_to_known_space(traj, self.map, self.stop_limit, self.history)
            if frontier.limited:
                if frontier.stop_m < self.map.res:
                    return PlanOutcome(None, f"no observed free space to fly into: the plan {frontier.describe()}",
                                       opt, ref, time.perf_counter() - t0, frontier=frontier, unobserved=traj.base)
                msg += "; " + frontier.describe()
        if self.swarm is not None:
            # EGO-Swarm: the committed trajectory is checked against the others before it is flown
            hit = self.swarm.collision_time(traj, t_now, traj.duration * c.check_fraction)
            if hit is not None:
                return PlanOutcome(None, f"passes {hit[2]:.2f} m from drone {hit[1]} at t = {hit[0]:.2f} s", opt, ref,
                                   time.perf_counter() - t0, frontier=frontier)
        return PlanOutcome(traj, msg, opt, ref, time.perf_counter() - t0, frontier=frontier)

    def _guide_search(self, p0, target, time_scale: float, obstacles=None):
        """The A* search of the guided initial guess: in the box around start and target, and once
        more in a box grown by ``guided_wide_margin_m`` when the target is cut off inside the
        first (the way round a row of obstacles may leave it).

        Within one plan (the same ``obstacles`` set: the map has not changed) a second guided
        guess from the same start to the same target, e.g. the crawl guess's and the usual one's
        (``EgoConfig.crawl_after_rest_failures``), reuses the first one's search."""
        p0 = np.asarray(p0, dtype=np.float64)
        target = np.asarray(target, dtype=np.float64)
        memo = self._guide_memo
        if (obstacles is not None and memo is not None and memo[0] is obstacles and memo[3] == time_scale
                and np.array_equal(memo[1], p0) and np.array_equal(memo[2], target)):
            return memo[4]
        search = self._new_guide_search(p0, target, time_scale)
        self._guide_memo = None if obstacles is None else (obstacles, p0.copy(), target.copy(), time_scale, search)
        return search

    def _new_guide_search(self, p0, target, time_scale: float):
        c = self.config
        astar = c.astar.scaled(time_scale)
        search = astar_search(self.map, p0, target, astar)
        if search.status is AStarStatus.NO_PATH and c.guided_wide_margin_m > astar.margin_m:
            first = search.expansions
            search = astar_search(self.map, p0, target, replace(astar, margin_m=c.guided_wide_margin_m))
            search.expansions += first
        return search

    def _speed_limited(self, spline, start_speed: float):
        """``(spline, note)``: the plan with its speed at most ``max_vel_mps`` over the whole curve
        (or at most the start speed, when the vehicle already flies faster: the plan cannot undo
        that, only not add to it); ``(None, why)`` when that needs more than ``max_accept_ratio``.

        The optimiser's feasibility term is soft and bounds the *control points*, the refine step
        re-fits a re-timed path by least squares: either can leave the curve a few per cent over
        the limit (measured: up to 4.5 % on a plan from rest). The curve's own peak (sampled, see
        :meth:`UniformBSpline.max_speed`) is checked here, and an excess ``r`` is removed by
        flying the same path ``r`` times slower (EGO's time stretch). That scales the start
        velocity by ``1 / r`` too, a step the controller takes in its stride at the few per cent
        this sees (from rest, the usual case at take-off, it changes nothing)."""
        c = self.config
        limit = max(c.max_vel_mps, start_speed)
        peak = spline.max_speed()
        if peak <= limit * (1.0 + _SPEED_TOL):
            return spline, ""
        r = peak / limit
        if r > c.max_accept_ratio:
            return None, f"peak {peak:.2f} m/s is x{r:.2f} the limit {limit:.2f} m/s"
        return spline.lengthened(r * (1.0 + 0.5 * _SPEED_TOL)), f"; slowed x{r:.3f} to the speed limit"

    # -- targets ----------------------------------------------------------------------------------
    def free_point(self, point, search_radius_m: float) -> Tuple[Optional[np.ndarray], str]:
        """(usable point or None, message): ``point`` itself if free, else the nearest free voxel
        centre within ``search_radius_m`` (only when the point is inside the map window; outside
        it the map knows nothing and the point is used as is)."""
        p = np.asarray(point, dtype=np.float64)
        idx = self.map.local_index(p[None])
        if not self.map.in_window(idx)[0]:
            return p.copy(), ""
        if not self.map.is_blocked(p[None])[0]:
            return p.copy(), ""
        free = self.map.nearest_free(p, search_radius_m)
        if free is None:
            return None, (f"{np.round(p, 2).tolist()} m is inside an (inflated) obstacle with no free point "
                          f"within {search_radius_m} m")
        return free, (f"{np.round(p, 2).tolist()} m is inside an (inflated) obstacle; moved to the nearest free "
                      f"point {np.round(free, 2).tolist()} m")

    def trajectory_collision_time(self, trajectory: Union[BsplineTrajectory, StopLimitedTrajectory], t_now: float,
                                  horizon_s: float, step_m: float) -> Optional[float]:
        """Absolute time of the first blocked point on ``trajectory`` within ``[t_now, t_now +
        horizon_s]``, ignoring a blocked stretch the vehicle is already in; None if clear."""
        if isinstance(trajectory, StopLimitedTrajectory):
            return trajectory.collision_time(self.map, t_now, horizon_s, step_m)
        spline = trajectory.spline
        tau0 = max(t_now - trajectory.t_start, 0.0)
        hit = curve_collision_time(self.map, spline, tau0, tau0 + horizon_s, step_m, skip_leading_blocked=True)
        return None if hit is None else trajectory.t_start + hit
