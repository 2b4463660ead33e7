"""Configuration of the occupancy grid map (:mod:`planner_pkg.planning.grid_map`)."""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields
from typing import Tuple

__all__ = ["UnknownPolicy", "GridMapConfig", "logit", "MAX_VOXELS", "BYTES_PER_VOXEL"]

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


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover - the loop always returns


def logit(p: float) -> float:
    return math.log(p / (1.0 - p))


@dataclass(frozen=True)
class GridMapConfig:
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
    inflation_m: obstacles are grown by this much (the vehicle radius), m.
    floor_m, ceiling_m: planning queries treat z below / above these as blocked, m.
    unknown: :class:`UnknownPolicy` (or its string value).

    The window ``size_m / resolution_m`` may hold at most :data:`MAX_VOXELS` voxels (memory cap).
    """

    resolution_m: float = 0.1
    size_m: Tuple[float, float, float] = (24.0, 24.0, 4.0)
    recentre_distance_m: float = 2.0
    prob_hit: float = 0.65
    prob_miss: float = 0.35
    prob_min: float = 0.12
    prob_max: float = 0.90
    prob_occupied: float = 0.80
    min_ray_m: float = 0.1
    max_ray_m: float = 8.0
    clear_ray_stride: int = 2
    inflation_m: float = 0.2
    floor_m: float = 0.5
    ceiling_m: float = 3.0
    unknown: UnknownPolicy = UnknownPolicy.FREE

    def __post_init__(self):
        def positive(name):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"GridMapConfig.{name} must be a positive finite number, got {v!r}")

        for name in ("resolution_m", "recentre_distance_m", "max_ray_m"):
            positive(name)
        for name in ("min_ray_m", "inflation_m"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"GridMapConfig.{name} must be a finite number >= 0, got {v!r}")
        size = tuple(float(s) for s in self.size_m)
        if len(size) != 3 or not all(math.isfinite(s) and s >= 4 * self.resolution_m for s in size):
            raise ValueError(f"GridMapConfig.size_m must be 3 finite extents >= 4 voxels, got {self.size_m!r}")
        object.__setattr__(self, "size_m", size)
        dims = [int(round(s / self.resolution_m)) for s in size]  # as OccupancyGridMap sizes its arrays
        voxels = dims[0] * dims[1] * dims[2]
        if voxels > MAX_VOXELS:
            need = voxels * BYTES_PER_VOXEL
            raise ValueError(
                f"GridMapConfig: resolution_m {self.resolution_m:g} over size_m {list(size)} is "
                f"{dims[0]} x {dims[1]} x {dims[2]} = {voxels:.3g} voxels ({_bytes(need)}), above the memory cap of "
                f"{MAX_VOXELS} voxels ({_bytes(MAX_VOXELS * BYTES_PER_VOXEL)}); use a coarser resolution_m or a "
                f"smaller size_m")
        for name in ("prob_hit", "prob_miss", "prob_min", "prob_max", "prob_occupied"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0.0 < v < 1.0):
                raise ValueError(f"GridMapConfig.{name} must be a probability in (0, 1), got {v!r}")
        if not self.prob_miss < 0.5 < self.prob_hit:
            raise ValueError(f"GridMapConfig needs prob_miss < 0.5 < prob_hit, got {self.prob_miss}, {self.prob_hit}")
        if not self.prob_min < self.prob_occupied <= self.prob_max:
            raise ValueError("GridMapConfig needs prob_min < prob_occupied <= prob_max, got "
                             f"{self.prob_min}, {self.prob_occupied}, {self.prob_max}")
        if self.min_ray_m >= self.max_ray_m:
            raise ValueError(f"GridMapConfig.min_ray_m ({self.min_ray_m}) must be below max_ray_m ({self.max_ray_m})")
        if not (isinstance(self.clear_ray_stride, int) and self.clear_ray_stride >= 1):
            raise ValueError(f"GridMapConfig.clear_ray_stride must be an int >= 1, got {self.clear_ray_stride!r}")
        if not (math.isfinite(self.floor_m) and math.isfinite(self.ceiling_m) and self.floor_m < self.ceiling_m):
            raise ValueError(f"GridMapConfig needs finite floor_m < ceiling_m, got {self.floor_m}, {self.ceiling_m}")
        try:
            object.__setattr__(self, "unknown", UnknownPolicy(self.unknown))
        except ValueError:
            raise ValueError(f"GridMapConfig.unknown must be one of {[p.value for p in UnknownPolicy]}, "
                             f"got {self.unknown!r}") from None

    @classmethod
    def from_dict(cls, values: dict) -> "GridMapConfig":
        """Build from a plain mapping (e.g. YAML), naming any unknown key."""
        known = {f.name for f in fields(cls)}
        bad = sorted(set(values) - known)
        if bad:
            raise ValueError(f"unknown GridMapConfig key(s) {bad}; known: {sorted(known)}")
        return cls(**values)
