"""World: an immutable set of obstacles with bounds, ground and ceiling, and its geometric queries.

Metres, world frame ENU (z up). The ground, when solid, is the half-space z <= 0; the ceiling,
when set, is the half-space z >= ceiling. Obstacles are packed by type into arrays once, at
construction, so every query is a handful of NumPy calls however many points or rays it gets.
"""
from __future__ import annotations

import math
from typing import Iterable, Optional

import numpy as np

from planner_pkg.envelope import DEFAULT_ENVELOPE

from .distance import min_distance, per_obstacle_distance
from .packed import Block, pack
from .primitives import Box, Cylinder, Obstacle, Sphere, real_vector
from .raycast import cast_brute, cast_single_origin

__all__ = ["World", "FAR_DISTANCE_M", "MAX_RAY_RANGE_M", "MAX_OBSTACLES", "MAX_EXTENT_M"]

#: Signed distance reported where nothing solid exists at all (no ground, ceiling or obstacles):
#: large but finite, so callers can do arithmetic on it.
FAR_DISTANCE_M = 1.0e6
#: Longest ray length honoured; rays are clipped to this even when ``max_range`` is inf.
MAX_RAY_RANGE_M = 1.0e9
#: Most obstacles a world file or a generated world may have (memory and query time grow with it;
#: measured: 50 000 forest trunks generate in about 1 s, 50 000 cluttered shapes in about 5 s).
#: Checked by the file loader and the generators; a ``World`` built in code is not limited.
MAX_OBSTACLES = 50_000
#: Largest |coordinate| of a world file's bounds and largest generated map extent / track radius,
#: metres: the flight envelope's position bound (``planner_pkg.envelope``).
MAX_EXTENT_M = DEFAULT_ENVELOPE.max_position_m
#: Rays per call below which angular culling costs more than it saves.
_MIN_RAYS_FOR_CULLING = 64


def _is_number(value) -> bool:
    """A real scalar, not a bool (NaN passes; callers' comparisons reject it)."""
    return isinstance(value, (int, float, np.integer, np.floating)) \
        and not isinstance(value, (bool, np.bool_))


def _points(points) -> tuple[np.ndarray, bool]:
    """(N, 3) float64 view of ``points`` and whether a single (3,) point was given."""
    array = np.asarray(points, dtype=np.float64)
    if array.shape == (3,):
        return array[None, :], True
    if array.ndim != 2 or array.shape[1] != 3:
        raise ValueError(f"points must have shape (3,) or (N, 3), got {array.shape}")
    return array, False


class World:
    """Obstacles inside an axis-aligned flight volume.

    bounds_min, bounds_max: (3,) float64 corners of the flight volume, metres, min < max.
    obstacles: tuple of Cylinder / Box / Sphere, in file order.
    ground: bool, the half-space z <= 0 is solid (default True).
    ceiling: float or None, the half-space z >= ceiling is solid (metres, > 0).

    Obstacles may stick out of the bounds; the bounds are where a vehicle may fly.
    """

    __slots__ = ("_bounds_min", "_bounds_max", "_obstacles", "_ground", "_ceiling", "_blocks")

    def __init__(self, bounds_min, bounds_max, obstacles: Iterable[Obstacle] = (),
                 ground: bool = True, ceiling: Optional[float] = None) -> None:
        low = np.array(real_vector(bounds_min, 3, "bounds_min"))
        high = np.array(real_vector(bounds_max, 3, "bounds_max"))
        if not np.all(low < high):
            raise ValueError(f"bounds_min must be < bounds_max on every axis, got min "
                             f"{low.tolist()} max {high.tolist()}")
        if not isinstance(ground, (bool, np.bool_)):
            raise ValueError(f"ground must be True or False, got {ground!r}")
        if ceiling is not None:
            if not _is_number(ceiling) or not math.isfinite(ceiling) or not ceiling > 0.0:
                raise ValueError(f"ceiling must be None or a positive finite height in metres, "
                                 f"got {ceiling!r}")
            ceiling = float(ceiling)
        obstacles = tuple(obstacles)
        for i, obstacle in enumerate(obstacles):
            if not isinstance(obstacle, (Cylinder, Box, Sphere)):
                raise TypeError(f"obstacle {i}: expected Cylinder, Box or Sphere, "
                                f"got {type(obstacle).__name__}")
        low.flags.writeable = False
        high.flags.writeable = False
        self._bounds_min = low
        self._bounds_max = high
        self._obstacles = obstacles
        self._ground = bool(ground)
        self._ceiling = ceiling
        self._blocks: tuple[Block, ...] = pack(obstacles)

    # -- read-only attributes -------------------------------------------------------------------
    @property
    def bounds_min(self) -> np.ndarray:
        """(3,) float64 lower corner of the flight volume, metres (read-only)."""
        return self._bounds_min

    @property
    def bounds_max(self) -> np.ndarray:
        """(3,) float64 upper corner of the flight volume, metres (read-only)."""
        return self._bounds_max

    @property
    def obstacles(self) -> tuple:
        """Tuple of Cylinder / Box / Sphere."""
        return self._obstacles

    @property
    def ground(self) -> bool:
        """True when the half-space z <= 0 is solid."""
        return self._ground

    @property
    def ceiling(self) -> Optional[float]:
        """Height of the solid half-space z >= ceiling, metres, or None."""
        return self._ceiling

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, World):
            return NotImplemented
        return (np.array_equal(self._bounds_min, other._bounds_min)
                and np.array_equal(self._bounds_max, other._bounds_max)
                and self._obstacles == other._obstacles and self._ground == other._ground
                and self._ceiling == other._ceiling)

    def __hash__(self) -> int:
        return hash((tuple(self._bounds_min), tuple(self._bounds_max), self._obstacles,
                     self._ground, self._ceiling))

    def __repr__(self) -> str:
        counts = {b.kind: b.size for b in self._blocks}
        return (f"World(bounds_min={self._bounds_min.tolist()}, "
                f"bounds_max={self._bounds_max.tolist()}, obstacles={len(self._obstacles)} "
                f"{counts}, ground={self._ground}, ceiling={self._ceiling})")

    # -- queries --------------------------------------------------------------------------------
    def signed_distance(self, points):
        """Signed distance to the nearest solid (obstacles, ground, ceiling), metres.

        points: (N, 3) or (3,) float64, metres. Returns (N,) float64, or a float for a (3,) point;
        negative inside a solid. Exact outside all solids; inside overlapping solids it is minus
        the deepest single penetration. With nothing solid it is ``FAR_DISTANCE_M``.
        """
        array, single = _points(points)
        if self._ground:
            out = array[:, 2].copy()
        else:
            out = np.full(array.shape[0], FAR_DISTANCE_M)
        if self._ceiling is not None:
            np.minimum(out, self._ceiling - array[:, 2], out=out)
        min_distance(self._blocks, array, out)
        return float(out[0]) if single else out

    def collides(self, points, radius: float):
        """True where a ball of ``radius`` metres at each point touches a solid.

        points: (N, 3) or (3,) float64, metres. Returns (N,) bool, or a bool for a (3,) point.
        """
        return self.signed_distance(points) < radius

    def raycast(self, origins, directions, max_range: float):
        """Distance along each ray to the first solid surface (obstacles, ground, ceiling).

        origins: (3,) shared by all rays, or (M, 3). directions: (M, 3), or (3,) for one ray;
        normalised here, so any non-zero length works. max_range: metres, > 0 (inf allowed,
        clipped to ``MAX_RAY_RANGE_M``). Returns (M,) float64 metres (a float for (3,)
        directions): np.inf where nothing is hit within max_range, 0 for an origin inside a solid.
        """
        if not _is_number(max_range) or not max_range > 0.0:
            raise ValueError(f"max_range must be a positive number of metres, got {max_range!r}")
        max_range = min(float(max_range), MAX_RAY_RANGE_M)
        d = np.asarray(directions, dtype=np.float64)
        single_ray = d.shape == (3,)
        if single_ray:
            d = d[None, :]
        if d.ndim != 2 or d.shape[1] != 3:
            raise ValueError(f"directions must have shape (M, 3) or (3,), got {d.shape}")
        o = np.asarray(origins, dtype=np.float64)
        if o.shape == (3,):
            o = o[None, :]
        elif o.shape != d.shape and o.shape != (1, 3):
            raise ValueError(f"origins must have shape (3,) or {d.shape}, got {o.shape}")
        if not np.all(np.isfinite(o)):
            raise ValueError("origins must be finite")
        norm = np.sqrt(np.einsum("ij,ij->i", d, d))
        if not np.all(norm > 0.0) or not np.all(np.isfinite(norm)):
            raise ValueError("directions must be finite and non-zero")
        d = d / norm[:, None]
        shared = o.shape[0] <= 1 or bool(np.all(o == o[0]))
        if shared and d.shape[0] >= _MIN_RAYS_FOR_CULLING:
            out = cast_single_origin(self._blocks, o[0], d, max_range)
        else:
            out = cast_brute(self._blocks, o[:1] if shared and o.shape[0] else o, d)
        self._cast_planes(o, d, out)
        out[out > max_range] = np.inf
        return float(out[0]) if single_ray else out

    def _cast_planes(self, origins: np.ndarray, directions: np.ndarray, out: np.ndarray) -> None:
        """Lower ``out`` (M,) to the ground and ceiling hit distances (metres)."""
        oz = origins[:, 2]
        dz = directions[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            if self._ground:
                t = np.where(oz <= 0.0, 0.0, np.where(dz < 0.0, -oz / dz, np.inf))
                np.minimum(out, t, out=out)
            if self._ceiling is not None:
                gap = self._ceiling - oz
                t = np.where(gap <= 0.0, 0.0, np.where(dz > 0.0, gap / dz, np.inf))
                np.minimum(out, t, out=out)

    def cull(self, center, radius: float) -> "World":
        """This world keeping only the obstacles within ``radius`` metres of ``center``.

        center: (3,) metres; radius: metres >= 0. An obstacle is kept when its exact distance
        from ``center`` is <= radius. So rays cast from ``center`` with max_range <= radius see
        exactly what they see in the full world, and at a point p inside the ball the signed
        distance is unchanged wherever it is below radius - |p - center|. Bounds, ground and
        ceiling are kept; obstacle order is preserved.
        """
        point = np.asarray(center, dtype=np.float64)
        if point.shape != (3,):
            raise ValueError(f"center must have shape (3,), got {point.shape}")
        if not _is_number(radius) or not radius >= 0.0:
            raise ValueError(f"radius must be a non-negative number of metres, got {radius!r}")
        n = len(self._obstacles)
        keep = per_obstacle_distance(self._blocks, point[None, :], n)[0] <= radius
        culled = object.__new__(World)
        culled._bounds_min = self._bounds_min
        culled._bounds_max = self._bounds_max
        culled._ground = self._ground
        culled._ceiling = self._ceiling
        culled._obstacles = tuple(o for o, k in zip(self._obstacles, keep) if k)
        # Positions in the culled tuple: rank of each kept obstacle among the kept ones.
        new_position = np.cumsum(keep) - 1
        blocks = []
        for block in self._blocks:
            sub = block.take(keep[block.index])
            index = new_position[sub.index]
            index.flags.writeable = False
            blocks.append(Block(sub.kind, sub.params, sub.hull, index))
        culled._blocks = tuple(blocks)
        return culled

    def obstacle_distances(self, points) -> np.ndarray:
        """Signed distance from each point to each obstacle (no ground or ceiling).

        points: (N, 3) or (3,) float64 metres. Returns (N, K) float64 metres, K in
        ``obstacles`` order (a (K,) row for a (3,) point). Unchunked: meant for small N.
        """
        array, single = _points(points)
        result = per_obstacle_distance(self._blocks, array, len(self._obstacles))
        return result[0] if single else result

    def to_dict(self) -> dict:
        """The world-file mapping (see ``planner_pkg.world.io``); plain Python types only."""
        return {
            "bounds": {"min": self._bounds_min.tolist(), "max": self._bounds_max.tolist()},
            "ground": self._ground,
            "ceiling": self._ceiling,
            "obstacles": [o.to_dict() for o in self._obstacles],
        }
