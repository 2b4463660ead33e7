"""The rebound optimiser (EGO-Planner's ``bspline_opt``): collision-free, smooth, feasible B-splines.

``optimize(spline)``: find colliding segments of the control polygon (first ``check_fraction`` of
it, as EGO), attach {p, v} pairs from an A* guide path through each, minimise smoothness +
collision + feasibility with L-BFGS (:func:`~planner_pkg.planning.lbfgs.minimize_lbfgs` on the
fused cost of the free control points, :class:`~planner_pkg.planning.costs.FreeObjective`: the
same value and gradient as :func:`~planner_pkg.planning.costs.total_kernel`, which the tests check
by finite differences and against its autograd_core wrapper ``TotalCost``; calling that wrapper
added 100-250 us to a 50-450 us evaluation, and scipy's L-BFGS-B wrapper ~47 us, so neither is in
the loop: ``benchmarks/ego_optimizer.py`` measures what is. A plain NumPy BFGS tried earlier
needed 50 % more evaluations than L-BFGS-B; this L-BFGS needs as many, its Wolfe constants and
stopping rules being L-BFGS-B's).
Then *rebound*: when the result hits an obstacle no pair knows about, new pairs are added and the
optimisation restarts (at most ``max_rebounds`` times); when it still collides with known
obstacles the collision weight is doubled (at most ``max_weight_doublings`` times).

``refine(spline)``: when the result exceeds the velocity or acceleration limit, the time is
stretched by the violation ratio and the control points are re-fitted to the stretched curve with
EGO's anisotropic fitness term (cheap along the path, expensive across it), keeping the start
state; see :meth:`ReboundOptimizer.refine`.

The first and last three control points are fixed: they carry the start and end position,
velocity and acceleration. Every loop here is bounded.
"""
from __future__ import annotations

import enum
import math
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

import numpy as np
from scipy.spatial import cKDTree

from planner_pkg.config_schema import Config, non_negative, positive, setting
from planner_pkg.planning import EGO_MAX_ACC_MPS2, EGO_MAX_VEL_MPS
from planner_pkg.planning.astar import AStarConfig, AStarStatus
from planner_pkg.planning.bspline import UniformBSpline
from planner_pkg.planning.collision_pairs import (Segment, collision_segments, curve_collision_time, guide_path,
                                                  pairs_from_path)
from planner_pkg.planning.costs import CostProblem, CostWeights, FreeObjective, smoothness_preconditioner
from planner_pkg.planning.lbfgs import minimize_lbfgs
from planner_pkg.planning.retiming import retime

__all__ = ["OptimizerConfig", "OptimStatus", "ReboundResult", "ReboundOptimizer", "free_range", "single_threaded_blas"]

_FIXED = 3  # control points fixed at each end (cubic: position, velocity, acceleration)

_blas_controller = None


def single_threaded_blas():
    """Context manager limiting the loaded BLAS libraries to one thread.

    The optimiser's small dense products run 50x slower when OpenBLAS wakes worker threads on a
    busy machine (measured with scipy's L-BFGS-B: 1 ms instead of 20 us per iteration on 2 shared
    cores). The controller is built once (~1 ms); entering the limit then costs ~15 us.
    """
    global _blas_controller
    if _blas_controller is None:
        from threadpoolctl import ThreadpoolController

        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=1, user_api="blas")


@lru_cache(maxsize=16)
def _rebound_weights(weights: CostWeights, feasibility_scale: float) -> CostWeights:
    """The rebound stage's weights: the feasibility weight times ``feasibility_scale`` (cached:
    a validated ``replace`` costs ~30 us per optimize() call)."""
    return replace(weights, feasibility=weights.feasibility * feasibility_scale)


def free_range(problem: CostProblem) -> Tuple[int, int]:
    """(lo, hi): the control points ``Q_lo .. Q_{hi-1}`` the optimiser moves. The first and last
    ``_FIXED`` are fixed; with other drones near and a free end (EGO-Swarm) the last ones move too."""
    n, swarm = problem.n, problem.swarm
    return _FIXED, (n if swarm is not None and swarm.free_end else n - _FIXED)


class OptimStatus(enum.Enum):
    SUCCESS = "success"
    COLLISION = "collision"  # still colliding after every rebound and weight doubling
    TOO_SHORT = "too_short"  # fewer control points than the fixed ends need
    TIME_LIMIT = "time_limit"  # the iteration budget or max_time_s ran out between rebounds


@dataclass(frozen=True)
class OptimizerConfig(Config):
    """Parameters of the rebound optimiser (EGO-Planner defaults where it has one).

    max_vel_mps, max_acc_mps2: limits used by the feasibility term and the refine step.
    weights: cost weights and the clearance s_f.
    lbfgs_memory, max_iterations: L-BFGS history size and iteration cap per minimisation (EGO:
        16 and 200; 100 here because each rebound restarts the minimisation anyway).
    gtol, ftol: L-BFGS stopping tolerances, L-BFGS-B's rules (largest gradient component;
        relative decrease, relative to max(|f_k|, |f_k+1|, 1)). Loose on purpose: the plan needs
        to be collision free, not converged to 1e-6, and the refine step re-times it afterwards.
    max_rebounds: restarts with new pairs when a new obstacle is hit.
    max_weight_doublings: restarts with a doubled collision weight when known obstacles still
        collide.
    check_fraction: only this leading fraction of the control points is checked for collisions
        (the tail is re-planned before it is flown).
    check_step_m: sampling step of collision checks along edges and curves, m.
    feasibility_tolerance: refine when a limit is exceeded by more than this fraction.
    max_accept_ratio: a plan whose feasibility ratio is still above this after refine is
        rejected (the controller could not follow it).
    max_total_iterations: L-BFGS iteration budget of one optimize() call over all its rebounds;
        the last minimisation stops where it runs out (deterministic, unlike a time limit: the
        same inputs give the same plan on any machine).
    max_time_s: wall-clock safety net of one optimize() call, checked between rebounds, s.
    warm_start: move each paired control point onto its guide-path point before optimising
        (a departure from EGO, which keeps the point where it is: pushing a point through an
        obstacle toward a guide path on its far side fails in tight clutter, where a second
        pair from the other side then cancels the first).
    rebound_feasibility_scale: the feasibility weight is multiplied by this during the rebound
        stage: the rebound finds a collision-free *path* and the refine step re-times it to the
        limits (at high speed a full-strength feasibility term otherwise keeps the curve from
        swerving far enough and the plan fails).
    clearance_margin_m: the distance term (see :mod:`planner_pkg.planning.costs`) keeps the
        curve this far beyond the map's inflation (the vehicle radius) from every occupied voxel
        centre, m (0 = no distance term). A voxel centre can be half a voxel diagonal (0.07 m at
        0.1 m voxels, horizontally) off the surface it saw, and the vehicle tracks the curve to
        0.05-0.13 m in turns (measured at 4 m/s): 0.3 m keeps about 0.1 m beyond the radius. Soft: where a gap is narrower the
        curve still passes (the collision check against the inflated map decides).
    jerk_time_s: the feasibility term also limits the jerk to ``max_acc_mps2 / jerk_time_s`` (the
        acceleration changes by at most its limit in this time; 0 = no jerk limit, EGO). The
        vehicle tilts to change its acceleration: a reference that jumps from full acceleration
        to none in one knot interval (0.12 s at 4 m/s) leaves it accelerating past the speed it
        was to hold (measured: +10 % over max_vel after a re-acceleration at 6 m/s^2), and a
        swerve whose lateral acceleration reverses within a few knots leaves it lagging the
        curve by 0.1-0.15 s (traced at 6 m/s: 0.43 m off it, 0.07 m from a trunk). 0 here (the
        optimiser alone, as EGO); the planner's default (``EgoConfig.optimizer``) is 0.15 s (40 /
        47 m/s^3 at 4 / 6 m/s). 0.1 s against 0, over 800 forest flights (``benchmarks/forest.py``,
        seeds 0-399 at 4 and 6 m/s, paired): 2 collisions against 6, 16 flights closer than 0.1 m
        beyond the radius against 20 and 77 closer than 0.15 m against 105, for 0.6-2.3 % of mean
        speed. 0.15 s against 0.1 (seeds 0-399 at 4 and 6 m/s, 0-99 at 2 m/s, paired): 897 of 900
        reached against 898 (one collision at 6 m/s against one collision and one timeout; seed 61,
        a pocket of trunks, timed out at 2 and 4 m/s), 7 flights closer than 0.1 m against 13, 44
        closer than 0.15 m against 62, mean speed +0.2 to +0.8 % at 6 m/s and within 0.3 % at 4
        and 2, flown peak 1.02x / 1.01x / 1.00x max_vel at 6 / 4 / 2 m/s against 1.04x / 1.05x /
        1.01x, the vehicle's distance from its reference (each flight's p95) 0.11 against 0.125-0.13
        m at 6 m/s and 0.07 against 0.077 m at 4 m/s. 0.2 s left one flight of 20 at 6 m/s 1.3 m
        off its reference; 0.3 s (measured in 16 forests at 4 m/s) cost 7 % of the flight time.
    preconditioner_damping: L-BFGS runs in coordinates that whiten the smoothness term
        (:func:`~planner_pkg.planning.costs.smoothness_preconditioner`; this is its damping, the
        curvature per m^2 given to every free point); 0 = plain L-BFGS on the control points,
        as EGO. The stopping rules (``gtol``, ``ftol``) then apply in those coordinates. On the
        minimisations of 6 m/s forest flights (benchmarks/ego_optimizer.py) it needs 2.4-2.6 x fewer
        iterations and ends at a lower cost (median 0.85 x); 0.1 was the best of 0.01-100.
    astar: the guide-path search.
    guide_expansions_per_iteration: the iteration budget (``max_total_iterations``, a call's
        ``max_iterations``) also pays for the rebound's guide-path searches: this many A*
        expansions count as one L-BFGS iteration (0 = A* is free, as EGO). An iteration costs
        ~0.13 ms here and an expansion ~4.6 us, so 28 charges the searches at their CPU cost.
        A failed replan in flight spends its whole budget plus 2-3 rebounds' searches, and those
        plans are most of the replan time over 20 ms at 6 m/s (``benchmarks/forest.py``'s split).
    guided_wide_margin_m: the A* search of the A*-guided initial guess (``PlanManager.plan``)
        that finds the target cut off from the start inside its box (the two grown by
        ``astar.margin_m``: NO_PATH) searches once more in a box grown by this much, m (the map
        window bounds it; 0, or not above ``astar.margin_m``: never). A row of trunks across the
        way whose open end lies outside the 3 m box otherwise fails every plan from rest until
        the goal is given up (forest benchmark seed 51 at 6 m/s: 40 failed plans in 3.6 s, then a
        timeout). In 400 forest flights (``benchmarks/forest.py``, seeds 0-199 at 4 and 6 m/s) it
        turned 3 timeouts into goals reached (seeds 51 and 135 at 6 m/s, 136 at 4 m/s); the other
        flights' figures stayed the same (lowest clearance, flights under 0.1 m, mean speed).
    """

    max_vel_mps: float = positive(EGO_MAX_VEL_MPS)
    max_acc_mps2: float = positive(EGO_MAX_ACC_MPS2)
    weights: CostWeights = field(default_factory=CostWeights)
    lbfgs_memory: int = setting(16, range=(1, math.inf))
    max_iterations: int = setting(100, range=(1, math.inf))
    gtol: float = positive(1e-2)
    ftol: float = positive(1e-3)
    max_rebounds: int = setting(20, range=(0, math.inf))
    max_weight_doublings: int = setting(3, range=(0, math.inf))
    check_fraction: float = setting(2.0 / 3.0, range=(0.0, 1.0), low_open=True)
    check_step_m: float = positive(0.05)
    feasibility_tolerance: float = non_negative(0.05)
    max_accept_ratio: float = setting(1.3, range=(1.0, math.inf))
    max_total_iterations: int = setting(250, range=(1, math.inf))
    max_time_s: float = positive(0.1)
    warm_start: bool = True
    rebound_feasibility_scale: float = non_negative(0.1)
    clearance_margin_m: float = setting(0.3, range=(0.0, 2.0))
    jerk_time_s: float = setting(0.0, range=(0.0, 10.0))
    preconditioner_damping: float = non_negative(0.1)
    astar: AStarConfig = field(default_factory=AStarConfig)
    guide_expansions_per_iteration: float = non_negative(28.0)
    guided_wide_margin_m: float = non_negative(6.0)


@dataclass
class ReboundResult:
    """Outcome of :meth:`ReboundOptimizer.optimize` / :meth:`~ReboundOptimizer.refine`.

    spline: the optimised curve (the best attempt, also on failure).
    iterations, evaluations: L-BFGS totals; rebounds, doublings: restarts used;
    astar_calls, astar_failures: guide-path searches; pairs: {p, v} pairs at the end;
    time_ratio: time stretch applied by refine (1 = none); time_s: wall time, s.
    wall_time_limited: the wall-clock safety net ``max_time_s`` (not the iteration budget) ended
        the optimisation; astar_time_limits: guide-path searches stopped by A*'s ``max_time_s``.
        Both are safety nets: when they fire, the result depends on the machine's speed and load.
    budget_used: what the call charged to its iteration budget: the iterations plus the
        guide-path expansions over ``guide_expansions_per_iteration`` (the iterations when 0).
    """

    status: OptimStatus
    spline: UniformBSpline
    message: str = ""
    iterations: int = 0
    evaluations: int = 0
    rebounds: int = 0
    doublings: int = 0
    astar_calls: int = 0
    astar_failures: int = 0
    pairs: int = 0
    time_ratio: float = 1.0
    time_s: float = 0.0
    wall_time_limited: bool = False
    astar_time_limits: int = 0
    budget_used: float = 0.0

    @property
    def success(self) -> bool:
        return self.status is OptimStatus.SUCCESS


class _Pairs:
    """{p, v} pairs per control point, flattened on demand for the cost."""

    def __init__(self):
        self.by_point: Dict[int, List[Tuple[np.ndarray, np.ndarray]]] = {}

    def add(self, idx, p, v) -> int:
        for j, pj, vj in zip(idx.tolist(), p, v):
            self.by_point.setdefault(j, []).append((pj, vj))
        return len(idx)

    def arrays(self):
        idx, ps, vs = [], [], []
        for j, lst in self.by_point.items():
            for p, v in lst:
                idx.append(j)
                ps.append(p)
                vs.append(v)
        if not idx:
            return np.zeros(0, np.intp), np.zeros((0, 3)), np.zeros((0, 3))
        return np.asarray(idx, np.intp), np.asarray(ps), np.asarray(vs)

    def knows(self, q: np.ndarray, j: int, tol: float) -> bool:
        """True if some pair of Q_j says it is still behind a known surface (d < tol)."""
        return any(float((q[j] - p) @ v) < tol for p, v in self.by_point.get(j, ()))

    def __len__(self):
        return sum(len(v) for v in self.by_point.values())


class _ObstacleSet:
    """The occupied voxel centres around the curves of one plan (its optimize() and refine()
    calls, over all its initial guesses: the map does not change during it), read from the map
    once and cut to each minimisation's box.

    Reading them (``occupied_points``: ``argwhere`` over the box) took ~0.25 ms of the ~0.4 ms a
    minimisation spent on its obstacles, 7-10 % of the slowest plans at 6 m/s; a mask over the
    points read is ~20 us. The box read is grown by ``slack_m`` so that later rebounds' boxes
    stay inside it (else it is read again). Each box gets exactly the points the map gives it.
    """

    def __init__(self, grid_map, slack_m: float = 0.5):
        self.map = grid_map
        self.slack_m = float(slack_m)
        self.lo = self.hi = None
        self.points = np.zeros((0, 3))
        self.index = np.zeros((0, 3), np.int64)  # their local voxel indices
        self.reads = 0
        self._tree_points: Optional[np.ndarray] = None  # the points of the last tree built, and it
        self._tree = None
        self.trees_built = 0

    def in_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """(K, 3) m: the occupied voxel centres in the world box ``[lo, hi]`` (as the map's
        ``occupied_points(lo, hi)``, in the same order)."""
        if self.lo is None or (lo < self.lo).any() or (hi > self.hi).any():
            self.lo, self.hi = lo - self.slack_m, hi + self.slack_m
            self.points = self.map.occupied_points(self.lo, self.hi)
            self.index = self.map.local_index(self.points)
            self.reads += 1
        # the map's own rule for a centre in the box (voxel indices, not float comparisons)
        i0, i1 = self.map.centre_index_range(lo, hi)
        keep = ((self.index >= i0) & (self.index < i1)).all(axis=1)
        return self.points[keep]

    def for_box(self, lo: np.ndarray, hi: np.ndarray):
        """``(points, tree)``: :meth:`in_box`'s points and a KD-tree over them (None when there are
        none). A box that gets the same points as the one before shares its tree: consecutive
        minimisations (rebounds, weight doublings, the refit) mostly do, and a tree of ~600
        points takes ~0.1 ms to build."""
        pts = self.in_box(lo, hi)
        last = self._tree_points
        if last is not None and last.shape == pts.shape and np.array_equal(last, pts):
            return last, self._tree
        self._tree_points, self._tree = pts, (cKDTree(pts) if pts.shape[0] else None)
        self.trees_built += 1
        return pts, self._tree


class ReboundOptimizer:
    """EGO's rebound optimisation on a :class:`~planner_pkg.planning.grid_map.OccupancyGridMap`."""

    def __init__(self, grid_map, config: OptimizerConfig = OptimizerConfig()):
        self.map = grid_map
        self.config = config
        # EGO-Swarm: ``(n, dt, q) -> SwarmPlanContext | None`` for the plan being optimised (set
        # per plan by the PlanManager; None = single drone). With other drones near, the end
        # control points are free too (see planning/swarm.py).
        self.swarm_plan = None

    @property
    def max_jerk_mps3(self):
        """The feasibility term's jerk limit, m/s^3 (None: none)."""
        c = self.config
        return c.max_acc_mps2 / c.jerk_time_s if c.jerk_time_s > 0 else None

    # -- the distance term's obstacles --------------------------------------------------------------
    @property
    def safe_distance_m(self) -> float:
        """Distance the curve should keep from occupied voxel centres, m (0: no distance term)."""
        if self.config.clearance_margin_m <= 0 or self.config.weights.distance <= 0:
            return 0.0
        return float(self.map.config.inflation_m) + self.config.clearance_margin_m

    def _set_obstacles(self, problem: CostProblem, q: np.ndarray, cache: Optional["_ObstacleSet"] = None) -> None:
        """Give ``problem`` the occupied voxels near the control polygon ``q`` (its bounding box
        grown by the safe distance and a voxel: points farther away cannot reach the curve,
        which lies in the polygon's convex hull). ``cache``: the :class:`_ObstacleSet` shared by
        the minimisations of one plan (the same points, read from the map once)."""
        r = self.safe_distance_m
        if r <= 0:
            return
        pad = r + self.map.res
        lo, hi = q.min(axis=0) - pad, q.max(axis=0) + pad
        if cache is None:
            problem.set_obstacles(self.map.occupied_points(lo, hi), r)
        else:
            points, tree = cache.for_box(lo, hi)
            problem.set_obstacles(points, r, tree=tree)

    def _set_swarm(self, problem: CostProblem, q: np.ndarray) -> None:
        if self.swarm_plan is not None:
            problem.swarm = self.swarm_plan(problem.n, problem.dt, q)

    # -- L-BFGS on the free control points -------------------------------------------------------
    def _minimize(self, q: np.ndarray, problem: CostProblem,
                  max_iterations: Optional[int] = None) -> Tuple[np.ndarray, int, int]:
        """Minimise over Q_3 .. Q_{N-4} in at most ``max_iterations`` L-BFGS iterations (default
        and upper bound: ``config.max_iterations``); returns (q, iterations, evaluations)."""
        lo, hi = free_range(problem)
        work = q.copy()
        if hi <= lo:
            return work, 0, 0
        c = self.config
        maxiter = c.max_iterations if max_iterations is None else max(1, min(c.max_iterations, max_iterations))
        basis = (smoothness_preconditioner(problem, lo, hi, c.preconditioner_damping)
                 if c.preconditioner_damping > 0.0 else None)
        objective = FreeObjective(problem, q, lo, hi, basis)
        with single_threaded_blas():
            res = minimize_lbfgs(objective, objective.start(), memory=c.lbfgs_memory, max_iterations=maxiter,
                                 gtol=c.gtol, ftol=c.ftol)
        # res.x is finite: minimize_lbfgs only moves to finite trial points (a non-finite start is returned as is)
        work[lo:hi] = objective.points(res.x)
        return work, res.iterations, res.evaluations

    def _start_blocked(self, spline: UniformBSpline) -> bool:
        """Is the start inside a blocked voxel or at the edge of one (within a voxel, or its last
        fixed control point blocked)? Then the first stretch of the curve is the way out."""
        q = spline.control_points
        p0 = spline.evaluate(0.0)
        r = self.map.res
        probe = np.vstack([p0, q[_FIXED - 1], p0 + r * np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0],
                                                                   [0, 0, 1], [0, 0, -1]])])
        return bool(self.map.is_blocked(probe).any())

    def _check_range(self, n: int) -> Tuple[int, int]:
        """Edges checked for collisions: from the last fixed start point to the checked fraction."""
        last_point = max(_FIXED, min(n - 1, int(round((n - 1) * self.config.check_fraction))))
        return _FIXED - 1, last_point - 1

    # -- rebound ----------------------------------------------------------------------------------
    def obstacle_set(self) -> _ObstacleSet:
        """A cache of the map's obstacle points (and KD-trees over them) for the optimize() and
        refine() calls of one plan: pass it to each (``obstacles=``). Valid while the map does
        not change."""
        return _ObstacleSet(self.map)

    def optimize(self, spline: UniformBSpline, time_scale: float = 1.0,
                 max_iterations: Optional[int] = None, obstacles: Optional[_ObstacleSet] = None) -> ReboundResult:
        """Collision-free, smooth, feasible version of ``spline`` (cubic, (N, 3)).

        time_scale: multiplies the budgets (``max_total_iterations``, ``max_time_s`` and A*'s
        expansions and time), e.g. when the vehicle hovers and can afford to think longer.
        max_iterations: a smaller L-BFGS iteration budget for this call (None: the scaled
        ``max_total_iterations``). The budget is hard: the last minimisation stops where it runs
        out, and its curve is kept if it is collision free.
        obstacles: the plan's :meth:`obstacle_set` (None: one for this call).
        """
        t0 = time.perf_counter()
        c = self.config
        if not (math.isfinite(time_scale) and time_scale > 0):
            raise ValueError(f"time_scale must be positive, got {time_scale!r}")
        max_time = c.max_time_s * time_scale
        budget = int(c.max_total_iterations * time_scale)
        if max_iterations is not None:
            if max_iterations < 1:
                raise ValueError(f"max_iterations must be at least 1, got {max_iterations!r}")
            budget = min(budget, int(max_iterations))
        budget = max(1, budget)
        astar_cfg = c.astar.scaled(time_scale)
        q = spline.control_points.copy()
        n = q.shape[0]
        if spline.degree != 3 or q.shape[1] != 3:
            raise ValueError(f"the rebound optimiser needs a cubic 3-D spline, got degree {spline.degree}, "
                             f"dimension {q.shape[1]}")
        if n < 2 * _FIXED + 1:
            return ReboundResult(OptimStatus.TOO_SHORT, spline, f"{n} control points: need at least "
                                 f"{2 * _FIXED + 1} (the first and last {_FIXED} are fixed)", time_s=time.perf_counter() - t0)
        first_edge, last_edge = self._check_range(n)
        step = c.check_step_m
        res_m = self.map.res
        pairs = _Pairs()
        stats = {"astar_calls": 0, "astar_failures": 0, "astar_time_limits": 0, "astar_expansions": 0}
        per_it = c.guide_expansions_per_iteration

        def add_pairs(segments: List[Segment], qq: np.ndarray) -> int:
            added = 0
            for seg in segments:
                stats["astar_calls"] += 1
                path = guide_path(self.map, qq, seg, astar_cfg)
                stats["astar_expansions"] += path.expansions
                if not path.success:
                    stats["astar_failures"] += 1
                    if path.status is AStarStatus.TIME_LIMIT:
                        stats["astar_time_limits"] += 1
                    continue
                idx, p, v, x = pairs_from_path(self.map, qq, seg.pair_points(), path.path, step)
                added += pairs.add(idx, p, v)
                if c.warm_start:
                    # start the colliding points on the (free) guide path: the optimiser then only
                    # has to open the clearance instead of dragging points through obstacles
                    qq[idx] = x
            return added

        # a start inside an inflated obstacle (the fixed Q_2 is blocked): the leading colliding
        # run is the way out; it gets pairs but cannot be made free, so it does not count
        start_blocked = self._start_blocked(spline)

        def remaining(segments: List[Segment]) -> List[Segment]:
            if start_blocked and segments and segments[0].first_edge == first_edge:
                return segments[1:]
            return segments

        obstacles = _ObstacleSet(self.map) if obstacles is None else obstacles
        add_pairs(collision_segments(self.map, q, first_edge, last_edge, step), q)
        weights = _rebound_weights(c.weights, c.rebound_feasibility_scale)
        iterations = evaluations = rebounds = doublings = 0

        def used() -> float:  # the budget charged so far: iterations + guide-path expansions / per_it
            return iterations + (stats["astar_expansions"] / per_it if per_it > 0 else 0.0)

        check_t1 = spline.dt * max(0, int(round((n - 1) * c.check_fraction)) - 1)
        status, message = OptimStatus.COLLISION, ""
        wall_limited = False
        for _ in range(c.max_rebounds + c.max_weight_doublings + 1):
            problem = CostProblem(n, spline.dt, c.max_vel_mps, c.max_acc_mps2, weights, *pairs.arrays(),
                                  max_jerk=self.max_jerk_mps3)
            self._set_obstacles(problem, q, obstacles)
            self._set_swarm(problem, q)
            q, nit, nfev = self._minimize(q, problem, max(1, int(math.ceil(budget - used()))))
            iterations += nit
            evaluations += nfev
            all_segments = collision_segments(self.map, q, first_edge, last_edge, step)
            segments = remaining(all_segments)
            curve = UniformBSpline(q, spline.dt)
            hit_t = curve_collision_time(self.map, curve, 0.0, check_t1, step, skip_leading_blocked=start_blocked)
            if not segments and hit_t is None:
                status, message = OptimStatus.SUCCESS, "collision free"
                break
            if used() >= budget or time.perf_counter() - t0 > max_time:
                status = OptimStatus.TIME_LIMIT
                wall_limited = used() < budget
                spent = (f"{max_time * 1e3:.0f} ms" if wall_limited else f"{iterations} L-BFGS iterations"
                         + (f" and {stats['astar_expansions']} guide-path A* expansions" if per_it > 0 else ""))
                message = (f"budget spent ({spent}) after {rebounds} rebounds and {doublings} "
                           f"doublings, still in collision")
                break
            new = [s for s in all_segments if not all(pairs.knows(q, j, res_m) for j in s.pair_points())]
            if new and rebounds < c.max_rebounds and add_pairs(new, q) > 0:
                rebounds += 1
                continue
            if doublings < c.max_weight_doublings:
                doublings += 1
                weights = replace(weights, collision=weights.collision * 2.0)
                continue
            where = f"at t = {hit_t:.2f} s" if hit_t is not None else f"on {len(segments)} polygon segment(s)"
            message = (f"still in collision {where} after {rebounds} rebounds and {doublings} collision-weight "
                       f"doublings ({stats['astar_failures']} of {stats['astar_calls']} A* searches failed)")
            break
        return ReboundResult(status, UniformBSpline(q, spline.dt), message, iterations, evaluations, rebounds,
                             doublings, stats["astar_calls"], stats["astar_failures"], len(pairs), 1.0,
                             time.perf_counter() - t0, wall_limited, stats["astar_time_limits"], used())

    # -- time reallocation + anisotropic refit ------------------------------------------------------
    def refine(self, spline: UniformBSpline, max_iterations: Optional[int] = None,
               obstacles: Optional[_ObstacleSet] = None) -> ReboundResult:
        """Respect the limits by re-timing the path, keeping the start state and the shape.

        If the feasibility ratio (see :meth:`UniformBSpline.feasibility_ratio`) exceeds
        ``1 + feasibility_tolerance``: the path is re-timed with a speed profile (see
        :mod:`planner_pkg.planning.retiming`; EGO stretches time uniformly instead), then the
        control points are optimised for smoothness + feasibility + EGO's anisotropic fitness to
        the re-timed knot points. Returns the input unchanged when it is feasible; the refit is
        accepted only if it is collision free over the checked part. ``max_iterations`` caps the
        refit's L-BFGS iterations below ``config.max_iterations``; at 0 a curve that needs a refit
        is returned unrefined (status TIME_LIMIT). ``obstacles``: the plan's :meth:`obstacle_set`
        (None: the map is read for this call).
        """
        t0 = time.perf_counter()
        c = self.config
        ratio = spline.feasibility_ratio(c.max_vel_mps, c.max_acc_mps2)
        if ratio <= 1.0 + c.feasibility_tolerance:
            return ReboundResult(OptimStatus.SUCCESS, spline, "feasible", time_s=time.perf_counter() - t0)
        if max_iterations is not None and max_iterations < 1:
            return ReboundResult(OptimStatus.TIME_LIMIT, spline, f"no L-BFGS iterations left for the refit (limits "
                                 f"exceeded by x{ratio:.2f})", time_s=time.perf_counter() - t0)
        fitted, knots, tangents = retime(spline, c.max_vel_mps, c.max_acc_mps2, spline.dt, step_m=c.check_step_m)
        dt = fitted.dt
        problem = CostProblem(fitted.control_points.shape[0], dt, c.max_vel_mps, c.max_acc_mps2, c.weights,
                              ref_points=knots, ref_tangents=tangents, max_jerk=self.max_jerk_mps3)
        self._set_obstacles(problem, fitted.control_points, obstacles)
        self._set_swarm(problem, fitted.control_points)
        # the fitness term replaces the collision term (no pairs): staying near the collision-free
        # shape keeps it free, which the check below confirms
        q, nit, nfev = self._minimize(fitted.control_points, problem, max_iterations)
        refined = UniformBSpline(q, dt)
        n = q.shape[0]
        check_t1 = dt * max(0, int(round((n - 1) * c.check_fraction)) - 1)
        start_blocked = self._start_blocked(refined)
        hit = curve_collision_time(self.map, refined, 0.0, check_t1, c.check_step_m, skip_leading_blocked=start_blocked)
        elapsed = time.perf_counter() - t0
        time_ratio = refined.duration / spline.duration
        if hit is not None:
            return ReboundResult(OptimStatus.COLLISION, spline, f"refined curve collides at t = {hit:.2f} s; kept "
                                 f"the unrefined one (limits exceeded by x{ratio:.2f})", nit, nfev, time_s=elapsed)
        new_ratio = refined.feasibility_ratio(c.max_vel_mps, c.max_acc_mps2)
        return ReboundResult(OptimStatus.SUCCESS, refined, f"re-timed x{time_ratio:.2f} (limits were exceeded by "
                             f"x{ratio:.2f}, now x{new_ratio:.3f})", nit, nfev, time_ratio=time_ratio, time_s=elapsed)
