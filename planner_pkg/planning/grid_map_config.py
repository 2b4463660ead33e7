"""Configuration of the occupancy grid map (:mod:`planner_pkg.planning.grid_map`)."""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Tuple

from planner_pkg.config_schema import Config, non_negative, positive, setting

__all__ = ["UnknownPolicy", "InflationShape", "GridMapConfig", "logit", "MAX_VOXELS", "BYTES_PER_VOXEL"]

#: Memory cap of the local window: at most this many voxels (2**25, about 33.5 million). The map
#: keeps ``BYTES_PER_VOXEL`` bytes per voxel (float32 log-odds, occupied, blocked and a scratch
#: mask), so the cap is about 235 MB of arrays, plus temporaries of the same order while it
#: inflates: 14x the default window (240 x 240 x 40 voxels), and what a companion computer can
#: spare. A finer resolution needs a smaller ``size_m``.
MAX_VOXELS = 2**25
BYTES_PER_VOXEL = 7


class UnknownPolicy(enum.Enum):
    """How planning queries treat voxels never observed (or outside the window)."""

    FREE = "free"  # optimistic, EGO-Planner's behaviour: plan through unknown space
    OCCUPIED = "occupied"  # conservative: only observed-free space is usable


class InflationShape(enum.Enum):
    """The shape occupied voxels are grown by (half-width / radius ``ceil(inflation_m / res)`` voxels)."""

    CUBE = "cube"  # EGO-Planner's: +-r voxels along each axis (r sqrt(2) along a horizontal diagonal)
    CYLINDER = "cylinder"  # a vertical cylinder: a horizontal disk of radius r voxels, +-r in z


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover - the loop always returns


def logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def _probability(default: float):
    return setting(default, range=(0.0, 1.0), low_open=True, high_open=True)


@dataclass(frozen=True)
class GridMapConfig(Config):
    """Parameters of :class:`OccupancyGridMap` (EGO-Planner defaults where it has one).

    resolution_m: voxel edge, m.
    size_m: (x, y, z) extent of the local window, m.
    recentre_distance_m: the window is shifted when the vehicle is farther than this from its
        centre along any axis, m.
    prob_hit, prob_miss: occupancy probability of one hit / miss observation.
    prob_min, prob_max: clamp of the probability (so a voxel can change state quickly).
    prob_occupied: a voxel at or above this probability is occupied.
    min_ray_m, max_ray_m: rays shorter than ``min_ray_m`` are ignored; points beyond
        ``max_ray_m`` only clear free space up to ``max_ray_m`` (no hit), m.
    clear_ray_stride: only every k-th ray clears free space (all rays mark hits): clearing is the
        expensive part and neighbouring rays pass through nearly the same voxels.
    free_space_erosion_px: a depth image's ray clears free space only up to the nearest depth
        within this many pixels of it (0: up to its own depth, as EGO). A pixel's depth is the
        surface on its centre ray; the space its neighbours' rays pass beside an obstacle's edge is
        not evidence that the edge voxel is free, and counting it so keeps a trunk's edge voxels
        below the occupied probability (a hit from their own pixel, a miss from the next).
    inflation_m: obstacles are grown by this much (the vehicle radius, 0.19 m, and a margin), m.
    inflation_shape: :class:`InflationShape` (or its string value): the cube (EGO's) grows an
        obstacle by up to sqrt(2) x ``inflation_m`` along a horizontal diagonal, which closes
        gaps between trunks that a round vehicle fits through; the cylinder grows it by the same
        distance in every horizontal direction (the EGO planner's default map: see
        :class:`~planner_pkg.planning.ego_config.EgoConfig`).
    floor_m, ceiling_m: planning queries treat z below / above these as blocked, m.
    unknown: :class:`UnknownPolicy` (or its string value).

    The window ``size_m / resolution_m`` may hold at most :data:`MAX_VOXELS` voxels (memory cap).
    """

    resolution_m: float = positive(0.1)
    size_m: Tuple[float, float, float] = positive((24.0, 24.0, 4.0))
    recentre_distance_m: float = positive(2.0)
    prob_hit: float = _probability(0.65)
    prob_miss: float = _probability(0.35)
    prob_min: float = _probability(0.12)
    prob_max: float = _probability(0.90)
    prob_occupied: float = _probability(0.80)
    min_ray_m: float = non_negative(0.1)
    max_ray_m: float = positive(8.0)
    clear_ray_stride: int = setting(2, range=(1, math.inf))
    free_space_erosion_px: int = setting(0, range=(0, 8))
    inflation_m: float = non_negative(0.2)
    floor_m: float = 0.5
    ceiling_m: float = 3.0
    unknown: UnknownPolicy = UnknownPolicy.FREE
    inflation_shape: InflationShape = InflationShape.CUBE

    def _check(self):
        if not all(s >= 4 * self.resolution_m for s in self.size_m):
            raise self._error("size_m", f"must be 3 finite extents >= 4 voxels, got {self.size_m!r}")
        dims = [int(round(s / self.resolution_m)) for s in self.size_m]  # as OccupancyGridMap sizes its arrays
        voxels = dims[0] * dims[1] * dims[2]
        if voxels > MAX_VOXELS:
            need = voxels * BYTES_PER_VOXEL
            raise self._error(
                "resolution_m", f"{self.resolution_m:g} over size_m {list(self.size_m)} is "
                f"{dims[0]} x {dims[1]} x {dims[2]} = {voxels:.3g} voxels ({_bytes(need)}), above the memory cap of "
                f"{MAX_VOXELS} voxels ({_bytes(MAX_VOXELS * BYTES_PER_VOXEL)}); use a coarser resolution_m or a "
                f"smaller size_m")
        if not self.prob_miss < 0.5 < self.prob_hit:
            raise self._error("prob_miss", f"must satisfy prob_miss < 0.5 < prob_hit, got {self.prob_miss}, {self.prob_hit}")
        if not self.prob_min < self.prob_occupied <= self.prob_max:
            raise self._error("prob_occupied", "needs prob_min < prob_occupied <= prob_max, got "
                              f"{self.prob_min}, {self.prob_occupied}, {self.prob_max}")
        if self.min_ray_m >= self.max_ray_m:
            raise self._error("min_ray_m", f"({self.min_ray_m}) must be below max_ray_m ({self.max_ray_m})")
        if not self.floor_m < self.ceiling_m:
            raise self._error("floor_m", f"must be below ceiling_m, got {self.floor_m}, {self.ceiling_m}")
