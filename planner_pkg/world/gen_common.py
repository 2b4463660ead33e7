"""Helpers shared by the world generators: parameter checks, millimetre rounding, bounds."""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

from planner_pkg.config_schema import Schema, setting

from .primitives import Obstacle
from .world import MAX_EXTENT_M, MAX_OBSTACLES  # the caps (world.py says why); a bigger world is refused

__all__ = ["check_seed", "make_params", "WORLD_SCHEMA", "extent", "at_least", "to_mm", "check_inside",
           "enclosing_bounds", "set_field", "check_obstacle_count", "MAX_OBSTACLES", "MAX_EXTENT_M"]


#: The wording of the generators' errors: ``parameter 'size_x' must be > 0, got -1.0``.
WORLD_SCHEMA = Schema(sep=" ", key_format="parameter '{}'",
                      unknown=lambda keys, known, section: f"unknown parameter {keys[0]!r} (known: {', '.join(known)})")


def extent(default: float):
    """A map extent / track size field: a float in (0, MAX_EXTENT_M] metres."""
    return setting(default, range=(0.0, MAX_EXTENT_M), low_open=True)


def at_least(default, minimum: int = 0):
    """An integer field >= ``minimum``."""
    return setting(default, range=(minimum, math.inf))


def check_obstacle_count(what: str, n: float) -> None:
    """ValueError naming ``what`` when a world would have more than MAX_OBSTACLES obstacles."""
    if n > MAX_OBSTACLES:
        raise ValueError(f"{what} would make {n:.6g} obstacles, more than the {MAX_OBSTACLES} a generated world "
                         f"may have; lower it")


def check_seed(seed: Any) -> int:
    """The seed as a non-negative int (same seed -> same world)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def set_field(obj: Any, name: str, value: Any) -> None:
    """Assign a field of a frozen params dataclass during its validation."""
    object.__setattr__(obj, name, value)


def make_params(cls: type, kind: str, params: dict) -> Any:
    """``cls`` (a :class:`~planner_pkg.config_schema.Config`) from ``params``; an unknown name raises
    ValueError listing the known ones."""
    return cls.from_dict(params)


def to_mm(values, low=None, high=None) -> np.ndarray:
    """Round to whole millimetres, then clip into [low, high] so rounding never leaves a range."""
    # rint(x * 1000) / 1000 is the double nearest k / 1000, so files show e.g. 0.3, not 0.30000004.
    out = np.round(np.asarray(values, dtype=np.float64), 3)
    if low is not None or high is not None:
        out = np.clip(out, low, high)
    return out


def check_inside(name: str, value: Sequence[float], low: Sequence[float],
                 high: Sequence[float]) -> None:
    """ValueError naming ``name`` unless low <= value <= high on every axis."""
    if not all(lo <= v <= hi for v, lo, hi in zip(value, low, high)):
        raise ValueError(f"parameter '{name}' = {tuple(value)} must lie inside the map "
                         f"[{tuple(low)}, {tuple(high)}]")


def enclosing_bounds(obstacles: Iterable[Obstacle], low: Sequence[float],
                     high: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The box [low, high] widened, if needed, to contain every obstacle's AABB (metres)."""
    low = np.array(low, dtype=np.float64)
    high = np.array(high, dtype=np.float64)
    for obstacle in obstacles:
        a, b = obstacle.aabb()
        np.minimum(low, a, out=low)
        np.maximum(high, b, out=high)
    return low, high
