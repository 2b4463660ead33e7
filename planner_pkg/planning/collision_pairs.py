"""Collision segments of a cubic B-spline and EGO's {p, v} pairs from an A* guide path.

Edge ``i`` (``Q_i -> Q_{i+1}``) collides when a sample on the control polygon's edge is blocked,
or when the curve itself is blocked in knot interval ``i - 1`` (whose shape the middle points
``Q_i``, ``Q_{i+1}`` dominate, weights 4/6): EGO checks control points only, which lets the curve
cut the corners of inflated obstacles. A run of consecutive colliding edges ``a .. b`` is one
*segment*: A* searches from ``Q_{a-1}`` to ``Q_{b+2}`` (one point of context each side, so the
planes of the run's end points cross the path too), and every control point ``Q_a .. Q_{b+1}``
gets a pair where its plane meets the path: the plane through ``Q_j`` normal to
``Q_{j+1} - Q_{j-1}`` meets the A* path at ``X``; ``v = unit(X - Q_j)`` and ``p`` is the last
free point stepping from ``X`` back toward ``Q_j`` (the obstacle surface seen from the guide
path), so ``d = (Q_j - p) . v`` is negative inside the obstacle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from planner_pkg.planning.astar import AStarConfig, AStarResult, astar_search
from planner_pkg.planning.bspline import basis_matrix

__all__ = ["Segment", "edge_collisions", "curve_interval_collisions", "collision_segments", "pairs_from_path", "guide_path", "curve_collision_time"]


@dataclass(frozen=True)
class Segment:
    """Colliding edges ``first_edge .. last_edge`` (inclusive), touching control points
    ``in_id = first_edge`` .. ``out_id = last_edge + 1``."""

    first_edge: int
    last_edge: int

    @property
    def in_id(self) -> int:
        return self.first_edge

    @property
    def out_id(self) -> int:
        return self.last_edge + 1

    def pair_points(self) -> range:
        """Control points that receive pairs."""
        return range(self.in_id, self.out_id + 1)


def edge_collisions(grid_map, q: np.ndarray, first_edge: int, last_edge: int, step_m: float) -> np.ndarray:
    """(last_edge - first_edge + 1,) bool: does edge ``Q_i -> Q_{i+1}`` hit a blocked voxel?

    Each edge is sampled at ``step_m`` (at least its two ends), vectorised over all edges.
    """
    if last_edge < first_edge:
        return np.zeros(0, dtype=bool)
    a = q[first_edge:last_edge + 1]
    b = q[first_edge + 1:last_edge + 2]
    length = np.sqrt(((b - a) ** 2).sum(axis=1))
    k = max(2, int(np.ceil(float(length.max()) / step_m)) + 1)
    s = np.linspace(0.0, 1.0, k)
    pts = a[:, None, :] + (b - a)[:, None, :] * s[None, :, None]  # (E, k, 3)
    blocked = grid_map.is_blocked(pts.reshape(-1, 3)).reshape(a.shape[0], k)
    return blocked.any(axis=1)


def curve_interval_collisions(grid_map, q: np.ndarray, first: int, last: int, step_m: float) -> np.ndarray:
    """(last - first + 1,) bool: is the cubic B-spline of ``q`` blocked in knot interval k?

    Each interval is sampled (about every ``step_m``) in the knot parameter, not in time, so
    the knot interval's length in seconds does not matter.
    """
    n_int = q.shape[0] - 3
    first, last = max(first, 0), min(last, n_int - 1)
    if last < first:
        return np.zeros(0, dtype=bool)
    span = np.sqrt(((q[first + 2:last + 3] - q[first + 1:last + 2]) ** 2).sum(axis=1))
    m = max(3, int(np.ceil(float(span.max()) / step_m)) + 1)
    s = np.linspace(0.0, 1.0, m)
    w = (s[:, None] ** np.arange(4)) @ basis_matrix(3)  # (m, 4)
    k = np.arange(first, last + 1)
    pts = np.einsum("mj,kjd->kmd", w, q[k[:, None] + np.arange(4)])  # (K, m, 3)
    return grid_map.is_blocked(pts.reshape(-1, 3)).reshape(k.shape[0], m).any(axis=1)


def collision_segments(grid_map, q: np.ndarray, first_edge: int, last_edge: int, step_m: float,
                       merge_gap: int = 2) -> List[Segment]:
    """Runs of consecutive colliding edges between ``first_edge`` and ``last_edge`` (polygon
    edges and curve intervals, see the module docstring).

    Runs separated by at most ``merge_gap`` free edges are merged into one: the free control
    points between them are usually inside an obstacle's unobserved core (a depth camera sees
    only the front of a trunk, and unknown space counts as free), from where A* cannot get out.
    """
    hit = edge_collisions(grid_map, q, first_edge, last_edge, step_m)
    # knot interval k is dominated by Q_{k+1}, Q_{k+2}: it marks edge k + 1
    curve = curve_interval_collisions(grid_map, q, first_edge - 1, last_edge - 1, step_m)
    lo = max(first_edge - 1, 0) + 1 - first_edge
    hit[lo:lo + curve.shape[0]] |= curve
    segments = []
    i = 0
    n = hit.shape[0]
    while i < n:
        if hit[i]:
            j = i
            while j + 1 < n and hit[j + 1]:
                j += 1
            if segments and first_edge + i - segments[-1].last_edge - 1 <= merge_gap:
                segments[-1] = Segment(segments[-1].first_edge, first_edge + j)
            else:
                segments.append(Segment(first_edge + i, first_edge + j))
            i = j + 1
        else:
            i += 1
    return segments


def _plane_intersection(path: np.ndarray, point: np.ndarray, normal: np.ndarray) -> Optional[np.ndarray]:
    """First point where the polyline ``path`` (K, 3) crosses the plane through ``point`` with
    ``normal``; None when it does not."""
    side = (path - point) @ normal
    cross = np.nonzero((side[:-1] <= 0.0) & (side[1:] > 0.0) | (side[:-1] >= 0.0) & (side[1:] < 0.0))[0]
    if cross.shape[0] == 0:
        return None
    k = int(cross[0])
    denom = side[k] - side[k + 1]
    t = side[k] / denom if denom != 0.0 else 0.0
    return path[k] + t * (path[k + 1] - path[k])


def pairs_from_path(grid_map, q: np.ndarray, indices, path: np.ndarray, step_m: float,
                    extra_m: float = 1.0) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """{p, v} pairs for control points ``indices`` of ``q`` (N, 3) from guide ``path`` (K, 3).

    Returns (index (M,), p (M, 3), v (M, 3), x (M, 3)) with ``x`` the guide-path point of each
    pair; control points whose plane misses the path or that lie on it get no pair. The walk from ``X`` toward ``Q_j`` continues up to ``extra_m`` past
    ``Q_j`` (a free control point beside an obstacle still finds its surface); when no blocked
    voxel is met, ``p = Q_j`` (EGO's choice: push by s_f).
    """
    out_i, out_p, out_v, out_x = [], [], [], []
    n = q.shape[0]
    for j in indices:
        if j <= 0 or j >= n - 1:
            continue
        tangent = q[j + 1] - q[j - 1]
        if not np.any(tangent):
            continue
        x = _plane_intersection(path, q[j], tangent)
        if x is None:
            continue
        dx = x - q[j]
        dist = float(np.sqrt(dx @ dx))
        if dist < 1e-3:
            continue
        v = dx / dist
        # walk from X toward Q_j (and a little beyond); p = last free sample before the first blocked
        k = int(np.ceil((dist + extra_m) / step_m)) + 1
        s = np.linspace(0.0, dist + extra_m, k)
        pts = x[None, :] - s[:, None] * v[None, :]
        blocked = grid_map.is_blocked(pts)
        first = int(np.argmax(blocked)) if blocked.any() else -1
        if first < 0:
            p = q[j].copy()
        elif first == 0:
            continue  # the guide path itself is blocked here (snapped start/goal): no surface
        else:
            p = pts[first - 1]
        out_i.append(j)
        out_p.append(p)
        out_v.append(v)
        out_x.append(x)
    if not out_i:
        return np.zeros(0, dtype=np.intp), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3))
    return np.asarray(out_i, dtype=np.intp), np.asarray(out_p), np.asarray(out_v), np.asarray(out_x)


def guide_path(grid_map, q: np.ndarray, segment: Segment, config: AStarConfig) -> AStarResult:
    """A* around a colliding segment, from ``Q_{in-1}`` to ``Q_{out+1}`` (clamped to the
    curve); blocked ends are snapped to free space by the search."""
    a = max(segment.in_id - 1, 0)
    b = min(segment.out_id + 1, q.shape[0] - 1)
    return astar_search(grid_map, q[a], q[b], config)


def curve_collision_time(grid_map, curve, t0: float, t1: float, step_m: float,
                         skip_leading_blocked: bool = False) -> Optional[float]:
    """Earliest time in ``[t0, t1]`` (s, the curve's time) where it is blocked, or None.

    curve: a UniformBSpline (spline time); sampled so that consecutive samples are at most about
        ``step_m`` apart (the largest velocity control point bounds the speed).
    skip_leading_blocked: ignore a blocked stretch at ``t0`` (the vehicle is inside an inflated
        obstacle and leaving it): report only a blocked sample after the first free one. (Blocked
        samples just *after* a free start are not tolerated: that is the way into an obstacle.)
    """
    t1 = min(t1, curve.duration)
    if t1 <= t0:
        return None
    vmax = max(curve.max_derivative_norm(1), 1e-3)
    n = int(np.ceil((t1 - t0) * vmax / step_m)) + 1
    ts = np.linspace(t0, t1, max(n, 2))
    blocked = grid_map.is_blocked(curve.evaluate(ts))
    if skip_leading_blocked and blocked[0]:
        free = np.nonzero(~blocked)[0]
        if free.shape[0] == 0:
            return None
        blocked[: free[0]] = False
    if not blocked.any():
        return None
    return float(ts[int(np.argmax(blocked))])
