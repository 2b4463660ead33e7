"""Scattered-obstacle generators: a random forest and a cluttered course.

Both place obstacles uniformly at random inside an axis-aligned map centred on the origin in x
and y, from the ground (z = 0) up to ``size_z``, and keep a clear zone around ``start`` and
``goal``. Coordinates are rounded to millimetres. Metres and radians throughout.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from planner_pkg.config_schema import Config, non_negative, positive

from .gen_common import (WORLD_SCHEMA, at_least, check_inside, check_obstacle_count, enclosing_bounds, extent,
                         set_field, to_mm)
from .primitives import Box, Cylinder, Sphere
from .world import World

__all__ = ["ForestParams", "ClutteredParams", "forest", "cluttered"]

#: Rejection-sampling rounds before giving up on placing every obstacle.
_MAX_ROUNDS = 200
#: Cluttered worlds build each candidate as an object: at most this many candidates per obstacle
#: wanted (plus a floor), and give up early once the acceptance rate so far says the rest cannot fit.
_MAX_CANDIDATES_PER_OBSTACLE = 10
_MIN_CANDIDATES = 6400


def _check_range(owner, low_name: str, high_name: str) -> None:
    low, high = getattr(owner, low_name), getattr(owner, high_name)
    if low > high:
        raise ValueError(f"parameter '{low_name}' ({low}) must be <= '{high_name}' ({high})")


def _map_corners(size_x: float, size_y: float, size_z: float):
    return (-0.5 * size_x, -0.5 * size_y, 0.0), (0.5 * size_x, 0.5 * size_y, size_z)


@dataclass(frozen=True)
class ForestParams(Config, schema=WORLD_SCHEMA, prefix=""):
    """Random forest of vertical tree trunks, after EGO-Planner's ``random_forest`` map.

    size_x, size_y: map extent, metres (x in [-size_x/2, size_x/2], same for y).
    size_z: height of the flight volume, metres; trees are at most this tall.
    density: trees per square metre of map area; ignored when ``count`` is given.
    count: exact number of trees, or None to use ``density``.
    radius_min, radius_max: trunk radius range, metres (uniform).
    height_min, height_max: trunk height range, metres (uniform), <= size_z.
    start, goal: (x, y, z) points, metres, inside the map.
    clear_radius: no trunk comes within this horizontal distance (metres) of start or goal, so
        the vertical column of that radius above each is free.
    """

    size_x: float = extent(50.0)
    size_y: float = extent(20.0)
    size_z: float = extent(5.0)
    density: float = non_negative(0.1)
    count: Optional[int] = at_least(None)
    radius_min: float = positive(0.25)
    radius_max: float = positive(0.5)
    height_min: float = positive(4.0)
    height_max: float = positive(5.0)
    start: Tuple[float, float, float] = (-20.0, 0.0, 1.0)
    goal: Tuple[float, float, float] = (20.0, 0.0, 1.0)
    clear_radius: float = non_negative(2.0)

    def _check(self) -> None:
        if self.count is not None:
            check_obstacle_count("parameter 'count'", self.count)
        else:
            trees = self.density * self.size_x * self.size_y  # a float: 1e300 per m^2 is inf, not an int
            check_obstacle_count(f"parameter 'density' ({self.density:g} per m^2 over {self.size_x:g} x "
                                 f"{self.size_y:g} m)", trees)
        _check_range(self, "radius_min", "radius_max")
        _check_range(self, "height_min", "height_max")
        if self.height_max > self.size_z:
            raise ValueError(f"parameter 'height_max' ({self.height_max}) must be <= 'size_z' "
                             f"({self.size_z})")
        if 2.0 * self.radius_max >= min(self.size_x, self.size_y):
            raise ValueError(f"parameter 'radius_max' ({self.radius_max}) is too large for the map")
        low, high = _map_corners(self.size_x, self.size_y, self.size_z)
        for name in ("start", "goal"):
            check_inside(name, getattr(self, name), low, high)


def forest(params: ForestParams, rng: np.random.Generator) -> World:
    """A World of ``Cylinder`` trunks (see ``ForestParams``)."""
    p = params
    n_trees = p.count if p.count is not None else int(round(p.density * p.size_x * p.size_y))
    half_x, half_y = 0.5 * p.size_x, 0.5 * p.size_y
    batch = max(64, 2 * n_trees)
    accepted: list[np.ndarray] = []
    n_accepted = 0
    for _ in range(_MAX_ROUNDS):
        if n_accepted >= n_trees:
            break
        radius = to_mm(rng.uniform(p.radius_min, p.radius_max, batch), p.radius_min, p.radius_max)
        height = to_mm(rng.uniform(p.height_min, p.height_max, batch), p.height_min, p.height_max)
        x = to_mm(rng.uniform(-half_x + radius, half_x - radius), -half_x + radius, half_x - radius)
        y = to_mm(rng.uniform(-half_y + radius, half_y - radius), -half_y + radius, half_y - radius)
        keep = np.ones(batch, dtype=bool)
        for clear_point in (p.start, p.goal):
            gap = np.hypot(x - clear_point[0], y - clear_point[1]) - radius
            keep &= gap >= p.clear_radius
        rows = np.stack([x, y, radius, height], axis=1)[keep][: n_trees - n_accepted]
        accepted.append(rows)
        n_accepted += rows.shape[0]
    if n_accepted < n_trees:
        raise ValueError(f"parameter 'density'/'count': placed only {n_accepted} of {n_trees} "
                         "trees outside the clear zones; lower them or 'clear_radius'")
    rows = np.concatenate(accepted) if accepted else np.zeros((0, 4))
    trees = [Cylinder((x, y), r, h) for x, y, r, h in rows.tolist()]
    low, high = _map_corners(p.size_x, p.size_y, p.size_z)
    low, high = enclosing_bounds(trees, low, high)
    return World(low, high, trees)


@dataclass(frozen=True)
class ClutteredParams(Config, schema=WORLD_SCHEMA, prefix=""):
    """Cluttered course of random spheres, yawed boxes and trunks, as in the differentiable-physics
    drone papers (e.g. "Back to Newton's Laws", 2024).

    size_x, size_y, size_z: map extent, metres (x, y centred on 0; z from 0 to size_z).
    count: number of obstacles.
    sphere_weight, box_weight, cylinder_weight: relative frequency of each shape (>= 0, not all 0).
    sphere_radius_min/_max: metres. Spheres float anywhere between ground and size_z.
    box_size_min/_max: range of each edge length, metres; yaw uniform in [-pi, pi); boxes float
        anywhere between ground and size_z.
    cylinder_radius_min/_max, cylinder_height_min/_max: metres; trunks stand on the ground;
        cylinder_height_max None means size_z.
    ceiling: when True the half-space z >= size_z is solid (a room, not an open sky).
    start, goal: (x, y, z), metres, inside the map.
    clear_radius: no obstacle comes within this distance (metres) of start or goal.
    """

    size_x: float = extent(40.0)
    size_y: float = extent(20.0)
    size_z: float = extent(6.0)
    count: int = at_least(80)
    sphere_weight: float = non_negative(1.0)
    box_weight: float = non_negative(1.0)
    cylinder_weight: float = non_negative(1.0)
    sphere_radius_min: float = positive(0.3)
    sphere_radius_max: float = positive(1.0)
    box_size_min: float = positive(0.4)
    box_size_max: float = positive(2.5)
    cylinder_radius_min: float = positive(0.2)
    cylinder_radius_max: float = positive(0.6)
    cylinder_height_min: float = positive(1.0)
    cylinder_height_max: Optional[float] = positive(None)
    ceiling: bool = False
    start: Tuple[float, float, float] = (-15.0, 0.0, 1.5)
    goal: Tuple[float, float, float] = (15.0, 0.0, 1.5)
    clear_radius: float = non_negative(2.0)

    def _check(self) -> None:
        if self.cylinder_height_max is None:
            set_field(self, "cylinder_height_max", self.size_z)
        check_obstacle_count("parameter 'count'", self.count)
        if self.sphere_weight + self.box_weight + self.cylinder_weight <= 0.0:
            raise ValueError("parameters 'sphere_weight', 'box_weight', 'cylinder_weight' must not"
                             " all be 0")
        for low, high in (("sphere_radius_min", "sphere_radius_max"),
                          ("box_size_min", "box_size_max"),
                          ("cylinder_radius_min", "cylinder_radius_max"),
                          ("cylinder_height_min", "cylinder_height_max")):
            _check_range(self, low, high)
        horizontal = min(self.size_x, self.size_y)
        for name, extent in (("sphere_radius_max", 2.0 * self.sphere_radius_max),
                             ("box_size_max", self.box_size_max),
                             ("cylinder_height_max", self.cylinder_height_max)):
            if extent > self.size_z:
                raise ValueError(f"parameter '{name}' ({getattr(self, name)}) does not fit under "
                                 f"'size_z' ({self.size_z})")
        for name, extent in (("sphere_radius_max", 2.0 * self.sphere_radius_max),
                             ("box_size_max", math.sqrt(2.0) * self.box_size_max),
                             ("cylinder_radius_max", 2.0 * self.cylinder_radius_max)):
            if extent >= horizontal:
                raise ValueError(f"parameter '{name}' ({getattr(self, name)}) is too large for "
                                 "the map")
        low, high = _map_corners(self.size_x, self.size_y, self.size_z)
        for name in ("start", "goal"):
            check_inside(name, getattr(self, name), low, high)


def _random_obstacle(p: ClutteredParams, rng: np.random.Generator, kind: int):
    half_x, half_y = 0.5 * p.size_x, 0.5 * p.size_y

    def place(extent_x: float, extent_y: float) -> tuple[float, float]:
        x = to_mm(rng.uniform(-half_x + extent_x, half_x - extent_x), -half_x + extent_x,
                  half_x - extent_x)
        y = to_mm(rng.uniform(-half_y + extent_y, half_y - extent_y), -half_y + extent_y,
                  half_y - extent_y)
        return float(x), float(y)

    if kind == 0:
        r = float(to_mm(rng.uniform(p.sphere_radius_min, p.sphere_radius_max),
                        p.sphere_radius_min, p.sphere_radius_max))
        x, y = place(r, r)
        z = float(to_mm(rng.uniform(r, p.size_z - r), r, p.size_z - r))
        return Sphere((x, y, z), r)
    if kind == 1:
        size = to_mm(rng.uniform(p.box_size_min, p.box_size_max, 3), p.box_size_min,
                     p.box_size_max)
        yaw = float(to_mm(rng.uniform(-math.pi, math.pi)))
        c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
        hx, hy, hz = (0.5 * size).tolist()
        x, y = place(c * hx + s * hy, s * hx + c * hy)
        z = float(to_mm(rng.uniform(hz, p.size_z - hz), hz, p.size_z - hz))
        return Box((x, y, z), tuple(size.tolist()), yaw)
    r = float(to_mm(rng.uniform(p.cylinder_radius_min, p.cylinder_radius_max),
                    p.cylinder_radius_min, p.cylinder_radius_max))
    h = float(to_mm(rng.uniform(p.cylinder_height_min, p.cylinder_height_max),
                    p.cylinder_height_min, p.cylinder_height_max))
    x, y = place(r, r)
    return Cylinder((x, y), r, h)


def cluttered(params: ClutteredParams, rng: np.random.Generator) -> World:
    """A World of spheres, boxes and cylinders (see ``ClutteredParams``)."""
    p = params
    weights = np.array([p.sphere_weight, p.box_weight, p.cylinder_weight])
    weights = weights / weights.sum()
    low, high = _map_corners(p.size_x, p.size_y, p.size_z)
    clear_points = np.array([p.start, p.goal])
    obstacles: list = []
    batch = max(32, p.count)
    budget = _MAX_CANDIDATES_PER_OBSTACLE * p.count + _MIN_CANDIDATES
    drawn = 0
    for _ in range(_MAX_ROUNDS):
        missing = p.count - len(obstacles)
        if missing <= 0:
            break
        if drawn and missing * drawn > max(len(obstacles), 1) * (budget - drawn):
            break  # at the acceptance rate so far the rest needs more candidates than the budget
        kinds = rng.choice(3, size=batch, p=weights)
        candidates = [_random_obstacle(p, rng, int(k)) for k in kinds]
        drawn += batch
        probe = World(low, high, candidates, ground=False)
        clear = probe.obstacle_distances(clear_points).min(axis=0) >= p.clear_radius
        obstacles.extend(c for c, ok in zip(candidates, clear) if ok)
    if len(obstacles) < p.count:
        raise ValueError(f"parameter 'count': placed only {len(obstacles)} of {p.count} "
                         "obstacles outside the clear zones; lower it or 'clear_radius'")
    obstacles = obstacles[: p.count]
    low, high = enclosing_bounds(obstacles, low, high)
    return World(low, high, obstacles, ceiling=p.size_z if p.ceiling else None)
