"""What the live view draws, as plain numpy: obstacles as shapes, trajectories as polylines,
the flown path, thinned point clouds. No ROS and no Foxglove here: the Foxglove server
(:mod:`planner_pkg.viz.foxglove_live`) and the ROS viz node (``planner_pkg/nodes/viz_node.py``)
both convert from these.

Conventions: world frame ENU, metres; quaternions ``(x, y, z, w)``; a shape's ``size`` is its
full extent along its own axes (a cylinder's ``(2 r, 2 r, height)``, a sphere's ``(2 r,) * 3``),
which is what both a Foxglove primitive and a ROS ``Marker`` scale mean.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from planner_pkg.types import quaternion_from_yaw
from planner_pkg.world import Box, Cylinder, Sphere

__all__ = ["Shape", "obstacle_shapes", "bounds_edges", "sample_trajectory", "FlownPath", "thin_points",
           "trajectory_end_time"]


@dataclass(frozen=True)
class Shape:
    """One obstacle to draw.

    kind: ``"cylinder"``, ``"box"`` or ``"sphere"``. position: (3,) centre, m.
    orientation: (4,) quaternion (x, y, z, w). size: (3,) full extents, m.
    """

    kind: str
    position: Tuple[float, float, float]
    orientation: Tuple[float, float, float, float]
    size: Tuple[float, float, float]


def obstacle_shapes(world) -> List[Shape]:
    """The world's obstacles in file order, as :class:`Shape` s."""
    level = (0.0, 0.0, 0.0, 1.0)
    out: List[Shape] = []
    for ob in world.obstacles:
        if isinstance(ob, Cylinder):
            (x, y), r, h = ob.center, ob.radius, ob.height
            out.append(Shape("cylinder", (x, y, 0.5 * h), level, (2.0 * r, 2.0 * r, h)))
        elif isinstance(ob, Box):
            q = tuple(float(v) for v in quaternion_from_yaw(ob.yaw))
            out.append(Shape("box", tuple(ob.center), q, tuple(ob.size)))
        elif isinstance(ob, Sphere):
            d = 2.0 * ob.radius
            out.append(Shape("sphere", tuple(ob.center), level, (d, d, d)))
        else:  # World holds only the three primitives; a new one must be added here
            raise TypeError(f"cannot draw obstacle of type {type(ob).__name__}")
    return out


def bounds_edges(world) -> np.ndarray:
    """(24, 3) float64: the 12 edges of the world's bounding box as point pairs (a line list), m."""
    lo, hi = np.asarray(world.bounds_min, float), np.asarray(world.bounds_max, float)
    corners = np.array([[(lo, hi)[(i >> k) & 1][k] for k in range(3)] for i in range(8)])
    pairs = [(i, i | (1 << k)) for i in range(8) for k in range(3) if not (i >> k) & 1]
    return np.array([corners[j] for pair in pairs for j in pair])


def trajectory_end_time(trajectory) -> Optional[float]:
    """The absolute end time (s) a trajectory object reports (``t_end``, or a start plus
    ``duration``), or None when it says nothing."""
    end = getattr(trajectory, "t_end", None)
    if callable(end):
        end = end()
    if end is None:
        start = getattr(trajectory, "t_start", getattr(trajectory, "t0", None))
        duration = getattr(trajectory, "duration", None)
        if start is not None and duration is not None:
            end = float(start) + float(duration)
    try:
        end = float(end) if end is not None else None
    except (TypeError, ValueError):
        return None
    return end if end is not None and math.isfinite(end) else None


def sample_trajectory(trajectory, t_now: float, n: int, horizon_s: float) -> np.ndarray:
    """(M, 3) float64 positions, m, of ``trajectory.sample(t)`` for ``n`` times from ``t_now`` to its
    end (or ``t_now + horizon_s`` when it reports none); M < n where a sample has no position
    (a velocity-only setpoint). An empty (0, 3) array when nothing could be sampled.

    ``sample`` errors (ValueError, ArithmeticError) end the polyline there: a trajectory that
    cannot serve a time is drawn up to it.
    """
    end = trajectory_end_time(trajectory)
    t1 = end if end is not None and end > t_now else t_now + horizon_s
    out = []
    for t in np.linspace(t_now, t1, max(2, int(n))):
        try:
            sp = trajectory.sample(float(t))
        except (ValueError, ArithmeticError):
            break
        p = getattr(sp, "position", None)
        if p is None or not np.all(np.isfinite(p)):
            continue
        out.append(np.asarray(p, dtype=np.float64))
    return np.array(out).reshape(-1, 3)


class FlownPath:
    """The vehicle's path so far: a point every ``spacing_m`` metres at most; past ``max_points``
    every other point is dropped (bounded memory, the whole flight still drawn)."""

    def __init__(self, spacing_m: float = 0.1, max_points: int = 5000):
        if not (spacing_m > 0 and math.isfinite(spacing_m)) or max_points < 2:
            raise ValueError(f"FlownPath needs spacing_m > 0 and max_points >= 2, got {spacing_m}, {max_points}")
        self.spacing_m, self.max_points = float(spacing_m), int(max_points)
        self._t: List[float] = []
        self._p: List[Tuple[float, float, float]] = []

    def __len__(self) -> int:
        return len(self._p)

    def add(self, t: float, position) -> bool:
        """Record the vehicle at ``position`` (3,) m at time ``t`` s; True when the point was kept.
        A non-finite position is ignored."""
        x, y, z = (float(v) for v in position)
        if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
            return False
        if self._p:
            px, py, pz = self._p[-1]
            if (x - px) ** 2 + (y - py) ** 2 + (z - pz) ** 2 < self.spacing_m ** 2:
                return False
        self._t.append(float(t))
        self._p.append((x, y, z))
        if len(self._p) > self.max_points:
            keep = list(range(0, len(self._p) - 1, 2)) + [len(self._p) - 1]  # always keep the newest
            self._t = [self._t[i] for i in keep]
            self._p = [self._p[i] for i in keep]
        return True

    def times(self) -> np.ndarray:
        """(N,) float64 times, s."""
        return np.array(self._t, dtype=np.float64)

    def points(self) -> np.ndarray:
        """(N, 3) float64 positions, m."""
        return np.array(self._p, dtype=np.float64).reshape(-1, 3)

    def clear(self) -> None:
        self._t.clear()
        self._p.clear()


def thin_points(points: np.ndarray, max_points: int) -> np.ndarray:
    """(K, 3) float32: every ``ceil(N / max_points)``-th row of ``points`` (N, 3), K <= max_points;
    rows with a non-finite coordinate are dropped first."""
    pts = np.asarray(points, dtype=np.float32).reshape(-1, 3)
    pts = pts[np.isfinite(pts).all(axis=1)]
    if len(pts) > max_points:
        pts = pts[:: int(math.ceil(len(pts) / max_points))]
    return np.ascontiguousarray(pts)
