"""Getting out of a stall: no progress toward the goal -> local targets along an A* route.

The EGO planner approaches a far goal through *local targets*: the point of the mission's
start-goal line ``planning_horizon_m`` from the vehicle (:func:`~planner_pkg.planning.initial_path.local_target`).
The line knows nothing of the map, and the target moves with the vehicle. Behind a row of trunks
across the line that point can lie in a pocket that opens only the long way round, and each way
round leads the target (and the plan toward it) back into the pocket: forest seed 61 of
``benchmarks/forest.py`` at 2 and 4 m/s flew back and forth between y 2 and 7.5 m at x 3-5 m for
29 s until its timeout, every plan a success, while a wide way round the row to the north-east was
in the map all along.

:class:`ProgressMonitor` notices that: the distance to the goal has not come down by
``progress_m`` for ``time_s`` (or the plans failed ``max_consecutive_failures`` times in a row,
where EGO gives the goal up). The planner then takes its local targets from an A* route
(:func:`find_route`) instead of the line: through the map (unknown space as the map's policy
says, free by default) from the vehicle to the goal, or to where the vehicle-goal line leaves the
map window, in 0.3 m cells with extra clearance (``astar``) so it keeps to ways wide enough to fly;
the target is the route's point ``planning_horizon_m`` of path ahead of the vehicle. The route is
searched again every ``reroute_period_s`` (the map learns meanwhile) and when its target turns
out blocked; once the distance to the goal comes down by ``progress_m`` the planner goes back to
the line.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np

from planner_pkg.config_schema import Config, Schema, setting
from planner_pkg.planning.astar import AStarConfig, AStarResult, astar_search

__all__ = ["StallConfig", "ProgressMonitor", "Route", "RouteTarget", "find_route"]

_SCHEMA = Schema(sep=" ")
_WINDOW_INSET_M = 0.5  # the route's far end stays this far inside the map window


def _route_astar() -> AStarConfig:
    # the whole window around start and goal (the map bounds the box), in 0.3 m cells (a cell is
    # blocked where any of its voxels is: the route keeps to gaps wide enough to fly at speed)
    # with 0.2 m more clearance than the guide paths' first try, and a budget for a search across
    # the window (~4 us per expansion: 80 ms at most, once per reroute_period_s)
    return AStarConfig(max_expansions=20000, max_time_s=0.2, margin_m=12.0, step_voxels=3, clearance_voxels=2)


@dataclass(frozen=True)
class StallConfig(Config, schema=_SCHEMA, prefix="EgoConfig.stall."):
    """When the EGO planner counts itself stalled and how it routes out (see :mod:`.stall`)."""

    enabled: bool = setting(True, description=(
        "after time_s without progress_m of progress toward the goal (or max_consecutive_failures failed plans "
        "in a row), take the local targets from an A* route through the map instead of the start-goal line, "
        "until the progress comes; False: EGO's line targets always"))
    time_s: float = setting(10.0, range=(0.5, 600.0), description=(
        "no progress for this long counts as a stall, s (6 s also routed 24 of 900 forest flights that were "
        "getting out by themselves, 13 of them slower for it)"))
    progress_m: float = setting(2.0, range=(0.1, 100.0), description=(
        "progress is the distance to the goal coming down by this much, m"))
    reroute_period_s: float = setting(1.0, range=(0.0, 60.0), description=(
        "while stalled the route is searched again this often (and whenever its target is blocked), s"))
    corridor_m: float = setting(8.0, range=(0.5, 1000.0), description=(
        "the route keeps within this horizontal distance of the segment from the mission start to the goal "
        "(or of the vehicle, when it is farther off), m: the never-observed space beside the mission counts "
        "free, and the way round through it is the way out of the flight area"))
    astar: AStarConfig = field(default_factory=_route_astar)


class ProgressMonitor:
    """Is the vehicle still getting closer to the goal? Progress is the distance to the goal coming
    down by ``progress_m`` below where it stood at the last progress (or the start); a stall is
    ``time_s`` without it. Deterministic: it reads only the times and positions it is given."""

    def __init__(self, config: StallConfig):
        self.config = config
        self.goal = np.zeros(3)
        self.anchor_m = math.inf  # distance to the goal at the last progress, m
        self.anchor_t = 0.0  # when that was, s
        self.stalled = False
        self.stalls = 0  # stalls begun (a stall that goes on past another time_s counts again)

    def reset(self, goal, t: float, position) -> None:
        self.goal = np.asarray(goal, dtype=np.float64).copy()
        self.anchor_m = float(np.linalg.norm(np.asarray(position, dtype=np.float64) - self.goal))
        self.anchor_t = float(t)
        self.stalled = False
        self.stalls = 0

    def set_goal(self, goal) -> None:
        """A moved goal (snapped out of an obstacle): measure progress toward it from now on."""
        goal = np.asarray(goal, dtype=np.float64)
        if not np.array_equal(goal, self.goal):
            # the anchor's distance to the new goal is at least this (triangle inequality): the
            # moved goal never counts as the vehicle's progress
            self.anchor_m = max(self.anchor_m - float(np.linalg.norm(goal - self.goal)), 0.0)
            self.goal = goal.copy()

    def force_stall(self, t: float) -> None:
        """Count the vehicle stalled from now (the planner's plans keep failing where it is)."""
        self.anchor_t = float(t)
        self.stalled = True
        self.stalls += 1

    def update(self, t: float, position) -> Optional[str]:
        """Feed one state; returns "stalled" when a stall begins (or goes on for another
        ``time_s``), "progress" when a stall ends, None otherwise."""
        c = self.config
        d = float(np.linalg.norm(np.asarray(position, dtype=np.float64) - self.goal))
        if d <= self.anchor_m - c.progress_m:
            self.anchor_m, self.anchor_t = d, float(t)
            if self.stalled:
                self.stalled = False
                return "progress"
            return None
        if t - self.anchor_t >= c.time_s:
            self.anchor_t = float(t)  # the next report after another time_s
            self.stalled = True
            self.stalls += 1
            return "stalled"
        return None


@dataclass
class RouteTarget:
    """A local target on an A* route. target: (3,) m; direction: (3,) unit tangent of the route
    there (zero at the goal); is_goal: the target is the goal."""

    target: np.ndarray
    direction: np.ndarray
    is_goal: bool


@dataclass
class Route:
    """An A* route from where the vehicle was toward the goal. path: (K, 3) m; ends_at_goal: its
    last point is the goal (else the map window's edge toward it)."""

    path: np.ndarray
    ends_at_goal: bool

    def target(self, position, horizon_m: float) -> RouteTarget:
        """The point ``horizon_m`` of path ahead of ``position`` (3,) m: along the route from its
        vertex nearest to ``position`` (the vehicle flies along it between searches). A route
        shorter than that ends at its far end."""
        p = np.asarray(position, dtype=np.float64).reshape(3)
        i = int(np.argmin(((self.path - p) ** 2).sum(axis=1)))
        path = np.concatenate([p[None], self.path[i + 1:]]) if i + 1 < len(self.path) else np.stack([p, self.path[-1]])
        seg = np.sqrt((np.diff(path, axis=0) ** 2).sum(axis=1))
        s = np.concatenate([[0.0], np.cumsum(seg)])
        if s[-1] <= horizon_m:
            target, is_goal, k = path[-1].copy(), self.ends_at_goal, len(path) - 1
        else:
            k = int(np.searchsorted(s, horizon_m))  # s[k-1] < horizon <= s[k]
            f = (horizon_m - s[k - 1]) / max(seg[k - 1], 1e-12)
            target, is_goal = path[k - 1] + f * (path[k] - path[k - 1]), False
        # the route's heading at the target: over the next ~1 m of it (the grid path's steps are 0.2 m)
        ahead = path[min(k + 5, len(path) - 1)] - path[max(k - 1, 0)]
        n = float(np.linalg.norm(ahead))
        direction = np.zeros(3) if is_goal or n < 1e-9 else ahead / n
        return RouteTarget(target, direction, is_goal)


def _far_end(grid_map, position: np.ndarray, goal: np.ndarray) -> Tuple[np.ndarray, bool]:
    """(point, is_goal): the goal when it lies inside the map window (less the inset), else the
    point where the vehicle-goal segment leaves it."""
    lo = grid_map.window_min + _WINDOW_INSET_M
    hi = grid_map.window_max - _WINDOW_INSET_M
    lo[2], hi[2] = grid_map.window_min[2], grid_map.window_max[2]
    if (goal >= lo).all() and (goal <= hi).all():
        return goal.copy(), True
    d = goal - position
    s = 1.0
    for k in range(3):
        if d[k] > 1e-12:
            s = min(s, (hi[k] - position[k]) / d[k])
        elif d[k] < -1e-12:
            s = min(s, (lo[k] - position[k]) / d[k])
    return position + max(s, 0.0) * d, False


def _distance_to_segment(xy: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N,) distances of the points ``xy`` (N, 2) from the segment ``a``-``b`` (2,)."""
    ab = b - a
    n2 = float(ab @ ab)
    s = np.zeros(len(xy)) if n2 < 1e-12 else np.clip((xy - a) @ ab / n2, 0.0, 1.0)
    off = xy - (a + s[:, None] * ab)
    return np.sqrt((off * off).sum(axis=1))


class _CorridorView:
    """``grid_map`` as the route search sees it: also blocked where a voxel's centre lies farther
    than ``corridor_m`` horizontally from the segment ``a``-``b``. Everything else is the map's."""

    def __init__(self, grid_map, a: np.ndarray, b: np.ndarray, corridor_m: float):
        self._map = grid_map
        self._a, self._b, self._r = a[:2].copy(), b[:2].copy(), float(corridor_m)
        o, d, res = grid_map.origin, grid_map.dims, grid_map.res
        x = (np.arange(d[0]) + o[0] + 0.5) * res
        y = (np.arange(d[1]) + o[1] + 0.5) * res
        xy = np.stack(np.meshgrid(x, y, indexing="ij"), axis=-1)
        outside = self._outside(xy.reshape(-1, 2)).reshape(int(d[0]), int(d[1]))
        self._blocked = grid_map.blocked_array() | outside[:, :, None]

    def _outside(self, xy: np.ndarray) -> np.ndarray:
        return _distance_to_segment(xy, self._a, self._b) > self._r

    def __getattr__(self, name):
        return getattr(self._map, name)

    def blocked_array(self) -> np.ndarray:
        return self._blocked

    def is_blocked(self, points) -> np.ndarray:
        pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        return self._map.is_blocked(pts) | self._outside(pts[:, :2])

    def nearest_free(self, point, max_distance_m: float):
        free = self._map.nearest_free(point, max_distance_m)
        return None if free is None or self._outside(free[None, :2])[0] else free


def find_route(grid_map, position, goal, astar: AStarConfig, mission_start=None,
               corridor_m: float = math.inf) -> Tuple[Optional[Route], AStarResult]:
    """``(Route, search)``, or ``(None, search)`` when none is found (the goal boxed in, the
    search's budget or time spent: ``search.status`` and ``search.message`` say which): an A* route
    through ``grid_map`` from ``position`` toward ``goal`` (both finite (3,) m), to the goal when it
    is inside the map window, else to where the straight line to it leaves the window. With
    ``mission_start`` and a finite ``corridor_m`` the route keeps within ``corridor_m``
    horizontally of the segment mission_start-goal (within the vehicle's own distance from it, when
    that is more)."""
    p = np.asarray(position, dtype=np.float64).reshape(3)
    g = np.asarray(goal, dtype=np.float64).reshape(3)
    far, far_is_goal = _far_end(grid_map, p, g)
    if mission_start is not None and math.isfinite(corridor_m):
        a = np.asarray(mission_start, dtype=np.float64).reshape(3)
        off = float(_distance_to_segment(p[None, :2], a[:2], g[:2])[0])
        # a vehicle (nearly) outside the corridor widens it to itself: it must be able to start
        grid_map = _CorridorView(grid_map, a, g, max(corridor_m, off + 0.5))
    search = astar_search(grid_map, p, far, astar)
    if not search.success:
        return None, search
    return Route(search.path, far_is_goal), search
