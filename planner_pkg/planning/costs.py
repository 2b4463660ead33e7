"""EGO-Planner's B-spline cost terms as fused autograd_core Functions.

Every term has one shape: a NumPy kernel ``kernel(q, problem) -> (value, gradient)`` on the
control points ``q`` (N, 3) float64, m, with the gradient (N, 3) derived by hand, and a
``Function`` whose forward runs the kernel and whose backward scales the saved gradient. The
optimiser calls :class:`TotalCost` (one autograd node for the whole cost: the Python overhead of
an op, not its FLOPs, decides small-array speed, see ANCHORS.md), and the tests gradcheck every
term and the total.

Terms (EGO-Planner, Zhou et al. 2021, and its code):
- smoothness: ``sum ||Q_{i+3} - 3 Q_{i+2} + 3 Q_{i+1} - Q_i||^2`` (jerk control points times dt^3), m^2;
- collision: for each {p, v} pair attached to control point ``Q_i``, ``d = (Q_i - p) . v`` and
  ``c = s_f - d``: 0 for c <= 0, c^3 for c <= s_f, ``3 s_f c^2 - 3 s_f^2 c + s_f^3`` beyond
  (C^1: a cubic near the surface, a quadratic deep inside so the gradient stays bounded);
- feasibility: squared excess of the velocity control-point *norm* over ``max_vel`` (scaled by
  1/dt^2, as EGO's code does, so both parts have similar magnitude) plus the squared excess of
  the acceleration norm over ``max_acc``, plus (when a ``max_jerk`` is given; not in EGO) the
  squared excess of the jerk norm over it, scaled by dt^2 (a jerk excess over one knot interval
  is an acceleration step). EGO limits each axis; the norm is used here so that
  ``max_vel`` is a real speed limit (DESIGN.md: ``--max-vel`` is the planner's speed limit);
- fitness (refine step only): distance of the knot points to reference points, anisotropic:
  ``(x . t)^2 / a^2 + |x x t|^2 / b^2`` with ``t`` the unit reference tangent (EGO: a^2 = 25, b^2 = 1);
- distance (not in EGO): ``sum max(0, r - |P_j - o_j|)^2`` over points ``P_j`` of the *curve*
  (every knot and every segment's midpoint, linear in the control points), ``o_j`` the nearest
  obstacle point (occupied voxel centre) and ``r`` the wanted distance, m^2. EGO's collision
  term only acts on control points of segments that collide with the inflated map, so a curve
  that merely grazes the inflation (a few cm beyond the vehicle radius) costs nothing; this
  term keeps a margin everywhere the map has seen an obstacle.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Tuple

import numpy as np
# imported with the module, not on the first plan: the first import costs ~0.15 s, which would
# otherwise land in the first replan of a flight
from scipy.spatial import cKDTree

import autograd_core as ac
from autograd_core.autograd import Function
from planner_pkg.config_schema import Config, non_negative, positive

__all__ = [
    "CostWeights",
    "CostProblem",
    "smoothness_kernel",
    "collision_kernel",
    "feasibility_kernel",
    "fitness_kernel",
    "distance_kernel",
    "total_kernel",
    "FreeObjective",
    "smoothness_preconditioner",
    "SmoothnessCost",
    "CollisionCost",
    "FeasibilityCost",
    "FitnessCost",
    "DistanceCost",
    "TotalCost",
    "value_and_grad",
]

_TINY = 1e-12


@dataclass(frozen=True)
class CostWeights(Config):
    """Weights of the cost terms (EGO-Planner defaults) and the collision clearance.

    smoothness, collision, feasibility, fitness, distance: dimensionless weights (>= 0). The
        distance term's 4 (1 before): at 1 the other terms won and plans passed trunks 0.10-0.17 m
        beyond the vehicle radius, which the controller's 0.1-0.25 m tracking error at 6 m/s ate
        (flown clearances 0.01-0.05 m, contacts); 4 keeps the reference farther where the gap
        allows it. Forest A/B (benchmarks/forest.py, time-scale 1000, seeds 0-14 / 0-15): at
        6 m/s 15/15 reached (13/15 at weight 1), flights under 0.1 m beyond the radius 3/15
        (6/13), mean speed 3.60 m/s (3.44: passing farther from a trunk keeps the body out of
        its unobserved shadow, so fewer plans brake for never-observed space); 4 m/s: 16/16,
        3/16 under 0.1 m, the same mean speed (16/16, 4/16).
    clearance_m: s_f (EGO's ``dist0``), m: the collision term is zero once ``d >= s_f``.
    (The distance term's wanted distance is set with the obstacles, see
    :meth:`CostProblem.set_obstacles`.)
    fitness_along2, fitness_across2: a^2 and b^2 of the anisotropic fitness term, m^2.
    swarm, terminal: weights of EGO-Swarm's reciprocal-avoidance and terminal terms (only with
        other drones near: ``CostProblem.swarm``, see :mod:`planner_pkg.planning.swarm`).
    swarm_clearance_m: wanted distance between drone centres, m; swarm_z_scale: vertical
        offsets count by this factor (0.5: twice the distance vertically, for downwash).
    """

    smoothness: float = non_negative(1.0)
    collision: float = non_negative(0.5)
    feasibility: float = non_negative(0.1)
    fitness: float = non_negative(1.0)
    distance: float = non_negative(4.0)
    clearance_m: float = positive(0.5)
    fitness_along2: float = positive(25.0)
    fitness_across2: float = positive(1.0)
    swarm: float = non_negative(10.0)
    terminal: float = non_negative(1.0)
    swarm_clearance_m: float = positive(1.0)
    swarm_z_scale: float = positive(0.5)


@lru_cache(maxsize=64)
def _jerk_operator(n: int) -> Tuple[np.ndarray, np.ndarray]:
    """(N-3, N) third-difference operator ``D`` and its transpose times 2 (for the gradient).

    The jerk is computed as ``D Q`` and squared, not as ``Q^T D^T D Q``: the rows of D sum to
    zero exactly, so world coordinates of tens of metres do not cancel catastrophically.
    """
    d = np.zeros((n - 3, n))
    r = np.arange(n - 3)
    for j, c in enumerate((-1.0, 3.0, -3.0, 1.0)):
        d[r, r + j] = c
    dt2 = np.ascontiguousarray(2.0 * d.T)
    d.setflags(write=False)
    dt2.setflags(write=False)
    return d, dt2


def _feasibility_operator(n: int, dt: float, max_vel: float, max_acc: float, max_jerk: Optional[float] = None):
    """Stacked operator (2N-3, N), or (3N-6, N) with a jerk limit: N-1 velocity rows (1/dt), N-2
    acceleration rows (1/dt^2) and N-3 jerk rows (1/dt^3), with the per-row limit (m/s, m/s^2,
    m/s^3) and weight (1/dt^2 for velocity, as EGO's code, 1 for acceleration, dt^2 for jerk)."""
    rows = 2 * n - 3 + (n - 3 if max_jerk is not None else 0)
    op = np.zeros((rows, n))
    r = np.arange(n - 1)
    op[r, r], op[r, r + 1] = -1.0 / dt, 1.0 / dt
    r = np.arange(n - 2)
    inv2 = 1.0 / (dt * dt)
    op[n - 1 + r, r], op[n - 1 + r, r + 1], op[n - 1 + r, r + 2] = inv2, -2.0 * inv2, inv2
    limits = [np.full(n - 1, max_vel), np.full(n - 2, max_acc)]
    weights = [np.full(n - 1, inv2), np.ones(n - 2)]
    if max_jerk is not None:
        r = np.arange(n - 3)
        inv3 = inv2 / dt
        k = 2 * n - 3 + r
        op[k, r], op[k, r + 1], op[k, r + 2], op[k, r + 3] = -inv3, 3.0 * inv3, -3.0 * inv3, inv3
        limits.append(np.full(n - 3, max_jerk))
        weights.append(np.full(n - 3, dt * dt))
    return op, np.concatenate(limits), np.concatenate(weights)


@lru_cache(maxsize=64)
def _knot_matrix(n: int) -> np.ndarray:
    """(N-2, N) matrix mapping cubic control points to the curve at the interior knots."""
    m = np.zeros((n - 2, n))
    r = np.arange(n - 2)
    m[r, r], m[r, r + 1], m[r, r + 2] = 1.0 / 6.0, 4.0 / 6.0, 1.0 / 6.0
    m.setflags(write=False)
    return m


@lru_cache(maxsize=64)
def _curve_sample_matrix(n: int) -> np.ndarray:
    """(2 (N-3) + 1, N) matrix mapping cubic control points to the curve at every knot and every
    segment's midpoint (uniform basis at s = 0: (1, 4, 1) / 6; at s = 1/2: (1, 23, 23, 1) / 48)."""
    segs = n - 3
    m = np.zeros((2 * segs + 1, n))
    for k in range(segs):
        m[2 * k, k:k + 3] = (1.0 / 6.0, 4.0 / 6.0, 1.0 / 6.0)
        m[2 * k + 1, k:k + 4] = (1.0 / 48.0, 23.0 / 48.0, 23.0 / 48.0, 1.0 / 48.0)
    m[2 * segs, segs:segs + 3] = (1.0 / 6.0, 4.0 / 6.0, 1.0 / 6.0)
    m.setflags(write=False)
    return m


class CostProblem:
    """Everything the cost needs besides the control points, precomputed once per optimisation.

    n: number of control points N (>= 4).
    dt: knot interval, s.
    max_vel: m/s; max_acc: m/s^2 (both > 0); max_jerk: m/s^3 (> 0) or None (no jerk limit).
    weights: :class:`CostWeights`.
    pair_index: (M,) int, control point of each {p, v} pair (empty = no collision term).
    pair_p: (M, 3) m, obstacle points; pair_v: (M, 3) unit directions out of the obstacle.
    ref_points: (N-2, 3) m, reference for the fitness term (the refine step), or None.
    ref_tangents: (N-2, 3) unit tangents at ``ref_points`` (required with ``ref_points``).
    obstacle_points: (K, 3) m, obstacle points for the distance term (None or empty = no term);
    safe_distance_m: the distance from them the curve should keep, m (> 0 with obstacles).
    """

    def __init__(self, n: int, dt: float, max_vel: float, max_acc: float, weights: CostWeights = CostWeights(),
                 pair_index=None, pair_p=None, pair_v=None, ref_points=None, ref_tangents=None,
                 obstacle_points=None, safe_distance_m: float = 0.0, max_jerk: Optional[float] = None):
        if n < 4:
            raise ValueError(f"the cost needs at least 4 control points, got {n}")
        for name, value in (("dt", dt), ("max_vel", max_vel), ("max_acc", max_acc)) + (
                (("max_jerk", max_jerk),) if max_jerk is not None else ()):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"CostProblem.{name} must be positive and finite, got {value!r}")
        self.n, self.dt, self.max_vel, self.max_acc, self.weights = int(n), float(dt), float(max_vel), float(max_acc), weights
        self.max_jerk = None if max_jerk is None else float(max_jerk)
        self.jerk_operator, self.jerk_operator_t2 = _jerk_operator(self.n)
        self.diff_operator, self.diff_limits, self.diff_weights = _feasibility_operator(
            self.n, self.dt, self.max_vel, self.max_acc, self.max_jerk)
        self.set_pairs(pair_index, pair_p, pair_v)
        self.ref_points: Optional[np.ndarray] = None
        self.ref_tangents: Optional[np.ndarray] = None
        if ref_points is not None:
            self.set_reference(ref_points, ref_tangents)
        self.obstacle_tree = None
        self.obstacle_points = np.zeros((0, 3))
        self.safe_distance_m = 0.0
        self.set_obstacles(obstacle_points, safe_distance_m)
        # EGO-Swarm's terms: a planning.swarm.SwarmPlanContext (set by the optimiser) or None
        self.swarm = None

    def set_obstacles(self, points, safe_distance_m: float, tree: Optional[cKDTree] = None) -> None:
        """Obstacle points (K, 3) m for the distance term and the distance to keep from them, m
        (None or K = 0: no distance term). ``tree``: a KD-tree already built over exactly these
        points (None: built here)."""
        if points is None or len(points) == 0:
            self.obstacle_tree, self.obstacle_points, self.safe_distance_m = None, np.zeros((0, 3)), 0.0
            return
        pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        if not np.isfinite(pts).all():
            raise ValueError("CostProblem: obstacle points must be finite")
        if not (isinstance(safe_distance_m, (int, float)) and math.isfinite(safe_distance_m) and safe_distance_m > 0):
            raise ValueError(f"CostProblem.safe_distance_m must be positive and finite with obstacles, got "
                             f"{safe_distance_m!r}")
        if tree is not None and tree.n != pts.shape[0]:
            raise ValueError(f"CostProblem.set_obstacles: the tree holds {tree.n} points, not the {pts.shape[0]} given")
        self.obstacle_points = pts
        self.obstacle_tree = cKDTree(pts) if tree is None else tree
        self.safe_distance_m = float(safe_distance_m)
        self.curve_samples = _curve_sample_matrix(self.n)

    def set_pairs(self, pair_index, pair_p, pair_v) -> None:
        """Replace the {p, v} pairs (see the class docstring for shapes)."""
        if pair_index is None or len(pair_index) == 0:
            self.pair_index = np.zeros(0, dtype=np.intp)
            self.pair_p = np.zeros((0, 3))
            self.pair_v = np.zeros((0, 3))
            self.pair_scatter = np.zeros((self.n, 0))
            self.pair_pv = np.zeros(0)
            return
        idx = np.asarray(pair_index, dtype=np.intp)
        p = np.asarray(pair_p, dtype=np.float64).reshape(-1, 3)
        v = np.asarray(pair_v, dtype=np.float64).reshape(-1, 3)
        if not (idx.shape[0] == p.shape[0] == v.shape[0]) or idx.min() < 0 or idx.max() >= self.n:
            raise ValueError("pair_index, pair_p and pair_v must have the same length and valid indices")
        self.pair_index, self.pair_p, self.pair_v = idx, p, v
        self.pair_pv = np.einsum("ij,ij->i", p, v)
        # one-hot (N, M) matrix: the gradient scatter is one matmul instead of np.add.at
        s = np.zeros((self.n, idx.shape[0]))
        s[idx, np.arange(idx.shape[0])] = 1.0
        self.pair_scatter = s

    def set_reference(self, ref_points, ref_tangents) -> None:
        """Set the fitness term's reference knot points (N-2, 3) m and unit tangents (N-2, 3)."""
        r = np.asarray(ref_points, dtype=np.float64)
        t = np.asarray(ref_tangents, dtype=np.float64)
        if r.shape != (self.n - 2, 3) or t.shape != (self.n - 2, 3):
            raise ValueError(f"reference points and tangents must be ({self.n - 2}, 3), got {r.shape}, {t.shape}")
        self.ref_points, self.ref_tangents = r, t
        self.knot_matrix = _knot_matrix(self.n)


# ---------------------------------------------------------------------------------------------
# Kernels: (N, 3) control points -> (value, (N, 3) gradient)
# ---------------------------------------------------------------------------------------------
def smoothness_kernel(q: np.ndarray, problem: CostProblem) -> Tuple[float, np.ndarray]:
    """Sum of squared third differences of ``q`` (m^2) and its gradient (m)."""
    jerk = problem.jerk_operator @ q
    return float(np.vdot(jerk, jerk)), problem.jerk_operator_t2 @ jerk


def collision_kernel(q: np.ndarray, problem: CostProblem) -> Tuple[float, np.ndarray]:
    """EGO's piecewise cubic/quadratic penalty of the clearance deficit over all pairs."""
    if problem.pair_index.shape[0] == 0:
        return 0.0, np.zeros_like(q)
    sf = problem.weights.clearance_m
    d = np.einsum("ij,ij->i", q[problem.pair_index], problem.pair_v) - problem.pair_pv
    c = np.maximum(sf - d, 0.0)
    # Branch-free form of the piecewise penalty: with m = min(c, s_f) and e = c - m,
    # cost = m^3 + 3 s_f^2 e + 3 s_f e^2 and dcost/dc = 3 m^2 + 6 s_f e (equal to EGO's cubic
    # for c <= s_f and to 3 s_f c^2 - 3 s_f^2 c + s_f^3 beyond).
    m = np.minimum(c, sf)
    e = c - m
    m2 = m * m
    value = float((m2 * m + (3.0 * sf * sf + 3.0 * sf * e) * e).sum())
    dcost_dc = 3.0 * m2 + 6.0 * sf * e
    # dc/dQ = -v for the pair's control point
    return value, problem.pair_scatter @ (-dcost_dc[:, None] * problem.pair_v)


def feasibility_kernel(q: np.ndarray, problem: CostProblem) -> Tuple[float, np.ndarray]:
    """Squared excess of |velocity|, |acceleration| (and |jerk|) control points over the limits."""
    # one stacked difference operator: rows 0..N-2 give velocity (m/s), then acceleration (and jerk)
    va = problem.diff_operator @ q
    norm = np.sqrt(np.einsum("ij,ij->i", va, va))
    excess = np.maximum(norm - problem.diff_limits, 0.0)
    weighted = problem.diff_weights * excess
    # d(w e^2)/d(va) = 2 w e va / |va|
    coef = 2.0 * weighted / np.maximum(norm, _TINY)
    return float(weighted @ excess), problem.diff_operator.T @ (coef[:, None] * va)


def fitness_kernel(q: np.ndarray, problem: CostProblem) -> Tuple[float, np.ndarray]:
    """Anisotropic squared distance of the interior knot points to the reference, m^2 / m^2."""
    if problem.ref_points is None:
        return 0.0, np.zeros_like(q)
    w = problem.weights
    x = problem.knot_matrix @ q - problem.ref_points  # (N-2, 3)
    t = problem.ref_tangents
    along = (x * t).sum(axis=1)
    sq = (x * x).sum(axis=1)
    inv_a2, inv_b2 = 1.0 / w.fitness_along2, 1.0 / w.fitness_across2
    value = float(inv_a2 * (along @ along) + inv_b2 * (sq.sum() - along @ along))
    gx = 2.0 * inv_b2 * x + (2.0 * (inv_a2 - inv_b2) * along)[:, None] * t
    return value, problem.knot_matrix.T @ gx


def distance_kernel(q: np.ndarray, problem: CostProblem) -> Tuple[float, np.ndarray]:
    """Squared shortfall of the curve points' distance to the nearest obstacle point below the
    safe distance, m^2, and its gradient (m). Zero without obstacles."""
    if problem.obstacle_tree is None:
        return 0.0, np.zeros_like(q)
    r = problem.safe_distance_m
    pts = problem.curve_samples @ q
    d, j = problem.obstacle_tree.query(pts, distance_upper_bound=r)
    near = np.nonzero(d < r)[0]
    if near.shape[0] == 0:
        return 0.0, np.zeros_like(q)
    dd = d[near]
    diff = pts[near] - problem.obstacle_points[j[near]]
    e = r - dd
    # d(e^2)/dP = -2 e (P - o) / |P - o|; a point exactly on an obstacle point has no direction
    g = (-2.0 * e / np.maximum(dd, _TINY))[:, None] * diff
    return float(e @ e), problem.curve_samples[near].T @ g


def total_kernel(q: np.ndarray, problem: CostProblem) -> Tuple[float, np.ndarray]:
    """Weighted sum of the terms (the fitness term only when a reference is set, the distance
    term only with obstacles)."""
    w = problem.weights
    fs, gs = smoothness_kernel(q, problem)
    fc, gc = collision_kernel(q, problem)
    ff, gf = feasibility_kernel(q, problem)
    value = w.smoothness * fs + w.collision * fc + w.feasibility * ff
    grad = w.smoothness * gs + w.collision * gc + w.feasibility * gf
    if problem.ref_points is not None:
        fr, gr = fitness_kernel(q, problem)
        value += w.fitness * fr
        grad += w.fitness * gr
    if problem.obstacle_tree is not None and w.distance > 0:
        fd, gd = distance_kernel(q, problem)
        value += w.distance * fd
        grad += w.distance * gd
    if problem.swarm is not None:  # weighted inside (planning/swarm.py: SwarmPlanContext.kernel)
        fw, gw = problem.swarm.kernel(q, w)
        value += fw
        grad += gw
    return value, grad


class FreeObjective:
    """The total cost (:func:`total_kernel`) as a function of the free control points
    ``Q_lo .. Q_{hi-1}`` only, flattened: ``objective(x) -> (value, gradient)`` with ``x`` and the
    gradient of shape ((hi - lo) * 3,). This is what the optimiser calls, ~40 times per plan.

    Same value and gradient as :func:`total_kernel` (the tests check it to rounding), computed with
    fewer NumPy calls, which is what decides the time at these sizes: every term's input is a
    linear image of the control points (jerk, velocity / acceleration / jerk differences, the
    paired control points, the curve samples, the knot points), so one stacked operator ``A``
    (rows x free points) gives them all in one product ``A X + c`` (``c``: the fixed points'
    part, computed once), each term writes its d(cost)/d(row) into one (rows, 3) array, and one
    product ``A^T G`` gives the gradient. The swarm terms (EGO-Swarm) see the whole curve and are
    added on it.

    basis: None, or an (hi - lo, hi - lo) matrix ``M``: the variables are then coordinates ``z``
    with free points ``X = q[lo:hi] + M z`` (the same ``M`` for x, y and z), and the gradient is
    ``M^T`` times the one above. A change of variables is how the optimiser preconditions
    L-BFGS (:func:`smoothness_preconditioner`); it is folded into the operator (``A M``, and
    ``q[lo:hi]`` into the offset), so a call costs the same as without it.
    """

    def __init__(self, problem: CostProblem, q: np.ndarray, lo: int, hi: int, basis: Optional[np.ndarray] = None):
        n = problem.n
        if q.shape != (n, 3) or not (0 <= lo < hi <= n):
            raise ValueError(f"FreeObjective: need q of shape ({n}, 3) and 0 <= lo < hi <= {n}, got {q.shape}, "
                             f"{lo}, {hi}")
        if basis is not None:
            basis = np.asarray(basis, dtype=np.float64)
            if basis.shape != (hi - lo, hi - lo) or not np.isfinite(basis).all():
                raise ValueError(f"FreeObjective: the basis must be a finite ({hi - lo}, {hi - lo}) matrix, got "
                                 f"shape {basis.shape}")
        w = problem.weights
        self.problem, self.lo, self.hi = problem, lo, hi
        blocks, pos = [], 0

        def block(op):
            nonlocal pos
            blocks.append(op)
            sl = slice(pos, pos + op.shape[0])
            pos += op.shape[0]
            return sl

        self.jerk_rows = block(problem.jerk_operator) if w.smoothness > 0 else None
        self.diff_rows = block(problem.diff_operator) if w.feasibility > 0 else None
        m = problem.pair_index.shape[0]
        self.pair_rows = None
        if m and w.collision > 0:
            sel = np.zeros((m, n))
            sel[np.arange(m), problem.pair_index] = 1.0
            self.pair_rows = block(sel)
        self.knot_rows = block(problem.knot_matrix) if problem.ref_points is not None and w.fitness > 0 else None
        self.sample_rows = (block(problem.curve_samples) if problem.obstacle_tree is not None and w.distance > 0
                            else None)
        op = np.vstack(blocks) if blocks else np.zeros((0, n))
        free = op[:, lo:hi]
        fixed = q.astype(np.float64, copy=True)
        if basis is None:
            fixed[lo:hi] = 0.0
        else:
            free = free @ basis
        self.basis = basis
        self.op = np.ascontiguousarray(free)
        self.op_t = np.ascontiguousarray(free.T)
        self.offset = op @ fixed  # the fixed control points' share of every row (with a basis: all of q's)
        self.rows = np.empty((pos, 3))  # d(cost)/d(row), rewritten on every call
        self.work = q.astype(np.float64, copy=True) if problem.swarm is not None else None
        self.origin = q[lo:hi].astype(np.float64, copy=True)

    def points(self, x: np.ndarray) -> np.ndarray:
        """The free control points (hi - lo, 3) of the variables ``x``."""
        xq = np.asarray(x, dtype=np.float64).reshape(-1, 3)
        return xq.copy() if self.basis is None else self.origin + self.basis @ xq

    def start(self) -> np.ndarray:
        """The variables of ``q``'s own free points (flattened): q[lo:hi], or zeros with a basis."""
        return self.origin.ravel().copy() if self.basis is None else np.zeros(self.origin.size)

    def __call__(self, x: np.ndarray) -> Tuple[float, np.ndarray]:
        p, w = self.problem, self.problem.weights
        xq = x.reshape(-1, 3)
        z = self.op @ xq
        z += self.offset
        g = self.rows
        value = 0.0
        if self.jerk_rows is not None:
            jerk = z[self.jerk_rows]
            value += w.smoothness * float(np.vdot(jerk, jerk))
            np.multiply(jerk, 2.0 * w.smoothness, out=g[self.jerk_rows])
        if self.diff_rows is not None:
            va = z[self.diff_rows]
            norm = np.sqrt(np.einsum("ij,ij->i", va, va))
            excess = np.maximum(norm - p.diff_limits, 0.0)
            weighted = p.diff_weights * excess
            value += w.feasibility * float(weighted @ excess)
            np.multiply(va, ((2.0 * w.feasibility) * weighted / np.maximum(norm, _TINY))[:, None],
                        out=g[self.diff_rows])
        if self.pair_rows is not None:
            sf = w.clearance_m
            c = np.maximum(sf - (np.einsum("ij,ij->i", z[self.pair_rows], p.pair_v) - p.pair_pv), 0.0)
            if c.max() <= sf:
                # the usual case (no point deeper than s_f): the cubic alone, the same numbers
                # as the general expression below with e = 0, in 5 NumPy calls instead of 13
                value += w.collision * float((c * c * c).sum())
                np.multiply(p.pair_v, (-w.collision * (3.0 * c * c))[:, None], out=g[self.pair_rows])
            else:
                mm = np.minimum(c, sf)
                e = c - mm
                value += w.collision * float((mm * mm * mm + (3.0 * sf * sf + 3.0 * sf * e) * e).sum())
                np.multiply(p.pair_v, (-w.collision * (3.0 * mm * mm + 6.0 * sf * e))[:, None], out=g[self.pair_rows])
        if self.knot_rows is not None:
            xr = z[self.knot_rows] - p.ref_points
            t = p.ref_tangents
            along = np.einsum("ij,ij->i", xr, t)
            inv_a2, inv_b2 = 1.0 / w.fitness_along2, 1.0 / w.fitness_across2
            a2 = float(along @ along)
            value += w.fitness * (inv_a2 * a2 + inv_b2 * (float(np.vdot(xr, xr)) - a2))
            gk = g[self.knot_rows]
            np.multiply(xr, 2.0 * w.fitness * inv_b2, out=gk)
            gk += (2.0 * w.fitness * (inv_a2 - inv_b2) * along)[:, None] * t
        if self.sample_rows is not None:
            pts = z[self.sample_rows]
            gd = g[self.sample_rows]
            gd.fill(0.0)
            r = p.safe_distance_m
            d, j = p.obstacle_tree.query(pts, distance_upper_bound=r)
            near = np.nonzero(d < r)[0]
            if near.shape[0]:
                dd = d[near]
                e = r - dd
                value += w.distance * float(e @ e)
                diff = pts[near] - p.obstacle_points[j[near]]
                gd[near] = ((-2.0 * w.distance) * e / np.maximum(dd, _TINY))[:, None] * diff
        grad = self.op_t @ g
        if self.work is not None:
            self.work[self.lo:self.hi] = xq if self.basis is None else self.points(xq)
            fw, gw = p.swarm.kernel(self.work, w)
            value += fw
            grad += gw[self.lo:self.hi] if self.basis is None else self.basis.T @ gw[self.lo:self.hi]
        return value, grad.reshape(-1)


def smoothness_preconditioner(problem: CostProblem, lo: int, hi: int, damping: float) -> np.ndarray:
    """The basis ``M`` (see :class:`FreeObjective`) that preconditions L-BFGS with the smoothness
    term: ``M = L^-T`` for ``L L^T = H = 2 w_s D_f^T D_f + damping I``, where ``D_f`` is the jerk
    operator's free columns. In the coordinates ``z`` (``X = q + M z``) the smoothness term's
    curvature is the identity where it dominates, so L-BFGS's scaled-identity start fits it.

    The smoothness Hessian alone has a condition number of 3e4 over 15 free points, 1e5 over 19 (third
    differences: the smooth bends of the curve cost almost nothing, the wiggles a lot), which
    plain L-BFGS spends its iterations discovering; the collision, distance and feasibility
    terms act on few points and are left to L-BFGS's curvature pairs. ``damping`` (> 0, the
    curvature per m^2 given to every point) keeps ``H`` well defined and sets how far the
    smooth bends are scaled up. Cached per (N, lo, hi, w_s, damping): the matrices are tiny.
    """
    if not (math.isfinite(damping) and damping > 0.0):
        raise ValueError(f"the preconditioner's damping must be positive and finite, got {damping!r}")
    return _smoothness_basis(problem.n, lo, hi, float(problem.weights.smoothness), float(damping))


@lru_cache(maxsize=128)
def _smoothness_basis(n: int, lo: int, hi: int, smoothness: float, damping: float) -> np.ndarray:
    d = _jerk_operator(n)[0][:, lo:hi]
    h = (2.0 * smoothness) * (d.T @ d) + damping * np.eye(hi - lo)
    basis = np.linalg.inv(np.linalg.cholesky(h)).T
    basis.setflags(write=False)
    return basis


# ---------------------------------------------------------------------------------------------
# Fused autograd Functions
# ---------------------------------------------------------------------------------------------
class _KernelFunction(Function):
    """Base: ``apply(q, problem)`` with q an (N, 3) float64 Tensor; returns a 0-d Tensor."""

    kernel = None  # set by subclasses: (q, problem) -> (value, gradient)

    @classmethod
    def forward(cls, ctx, q, problem):
        qd = q._data
        value, grad = cls.kernel(qd, problem)
        ctx.grad_q = grad
        return ac.from_numpy(np.array(value, dtype=qd.dtype))

    @staticmethod
    def backward(ctx, g):
        return ac.from_numpy(ctx.grad_q * g._data), None


class SmoothnessCost(_KernelFunction):
    kernel = staticmethod(smoothness_kernel)


class CollisionCost(_KernelFunction):
    kernel = staticmethod(collision_kernel)


class FeasibilityCost(_KernelFunction):
    kernel = staticmethod(feasibility_kernel)


class FitnessCost(_KernelFunction):
    kernel = staticmethod(fitness_kernel)


class DistanceCost(_KernelFunction):
    kernel = staticmethod(distance_kernel)


class TotalCost(_KernelFunction):
    kernel = staticmethod(total_kernel)


def value_and_grad(q: np.ndarray, problem: CostProblem) -> Tuple[float, np.ndarray]:
    """Total cost and its gradient (N, 3) through autograd_core (one TotalCost node)."""
    t = ac.from_numpy(q)
    t.requires_grad_(True)
    out = TotalCost.apply(t, problem)
    out.backward()
    return float(out._data), t._grad._data
