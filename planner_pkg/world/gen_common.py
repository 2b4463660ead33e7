"""Helpers shared by the world generators: parameter checks, millimetre rounding, bounds."""
from __future__ import annotations

import math
from dataclasses import fields
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from .primitives import Obstacle
from .world import MAX_EXTENT_M, MAX_OBSTACLES  # the caps (world.py says why); a bigger world is refused

__all__ = ["check_seed", "make_params", "positive", "non_negative", "integer", "point",
           "optional_positive", "to_mm", "check_inside", "enclosing_bounds", "set_field",
           "map_size", "check_obstacle_count", "MAX_OBSTACLES", "MAX_EXTENT_M"]


def _real(name: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise ValueError(f"parameter '{name}' must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"parameter '{name}' must be finite, got {value!r}")
    return value


def positive(name: str, value: Any) -> float:
    """``value`` as a float > 0, else ValueError naming ``name``."""
    value = _real(name, value)
    if not value > 0.0:
        raise ValueError(f"parameter '{name}' must be > 0, got {value!r}")
    return value


def map_size(name: str, value: Any) -> float:
    """A map extent / track size: a float in (0, MAX_EXTENT_M] metres, else ValueError naming ``name``."""
    value = positive(name, value)
    if value > MAX_EXTENT_M:
        raise ValueError(f"parameter '{name}' must be <= {MAX_EXTENT_M:g} m, got {value!r}")
    return value


def check_obstacle_count(what: str, n: float) -> None:
    """ValueError naming ``what`` when a world would have more than MAX_OBSTACLES obstacles."""
    if n > MAX_OBSTACLES:
        raise ValueError(f"{what} would make {n:.6g} obstacles, more than the {MAX_OBSTACLES} a generated world "
                         f"may have; lower it")


def optional_positive(name: str, value: Any) -> Optional[float]:
    """None, or ``value`` as a float > 0."""
    return None if value is None else positive(name, value)


def non_negative(name: str, value: Any) -> float:
    """``value`` as a float >= 0, else ValueError naming ``name``."""
    value = _real(name, value)
    if value < 0.0:
        raise ValueError(f"parameter '{name}' must be >= 0, got {value!r}")
    return value


def integer(name: str, value: Any, minimum: int = 0) -> int:
    """``value`` as an int >= ``minimum``, else ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"parameter '{name}' must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"parameter '{name}' must be >= {minimum}, got {value!r}")
    return int(value)


def point(name: str, value: Any) -> tuple[float, float, float]:
    """``value`` as an (x, y, z) tuple of finite floats (metres)."""
    array = np.asarray(value, dtype=object)
    if array.shape != (3,):
        raise ValueError(f"parameter '{name}' must be 3 numbers (x, y, z), got {value!r}")
    return tuple(_real(name, v) for v in array)


def check_seed(seed: Any) -> int:
    """The seed as a non-negative int (same seed -> same world)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def set_field(obj: Any, name: str, value: Any) -> None:
    """Assign a field of a frozen params dataclass during its validation."""
    object.__setattr__(obj, name, value)


def make_params(cls: type, kind: str, params: dict) -> Any:
    """Build ``cls(**params)``; an unknown name raises ValueError listing the known ones."""
    known = [f.name for f in fields(cls)]
    for name in params:
        if name not in known:
            raise ValueError(f"unknown parameter {name!r} for world kind {kind!r} "
                             f"(known: {', '.join(known)})")
    return cls(**params)


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
