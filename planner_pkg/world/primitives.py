"""Obstacle primitives: frozen dataclasses in metres, world frame ENU, ground at z = 0.

Each primitive validates itself on construction and stores plain Python floats, so two obstacles
built from the same numbers compare (and hash) equal, and a YAML/JSON round trip is exact.
Validation failures raise ``ValueError`` with a message of the form
``key 'size' must be 3 positive finite numbers, got [1, -2, 3]``; the file loader prefixes it
with the obstacle index and type.
"""
from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, Union

import numpy as np

__all__ = ["Cylinder", "Box", "Sphere", "Obstacle", "OBSTACLE_TYPES", "FieldError"]


class FieldError(ValueError):
    """A primitive's field is invalid; ``key`` names the field."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


def _is_real(value: Any) -> bool:
    # bool is an int subclass; `radius: true` in a YAML file is a mistake, not 1.0.
    if isinstance(value, (bool, np.bool_)):
        return False
    return isinstance(value, (int, float, np.integer, np.floating))


def _shown(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def real_vector(value: Any, length: int, key: str, positive: bool = False) -> tuple[float, ...]:
    """Check ``value`` is ``length`` finite reals (all > 0 when ``positive``); return float tuple.

    Raises FieldError (a ValueError) naming ``key`` and showing the offending value.
    """
    what = "positive finite numbers" if positive else "finite numbers"
    message = f"key '{key}' must be {length} {what}, got {_shown(value)!r}"
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or len(value) != length:
        raise FieldError(message, key)
    if not all(_is_real(v) for v in value):
        raise FieldError(message, key)
    out = tuple(float(v) for v in value)
    if not all(math.isfinite(v) for v in out) or (positive and not all(v > 0.0 for v in out)):
        raise FieldError(message, key)
    return out


def real_scalar(value: Any, key: str, positive: bool = False) -> float:
    """Check ``value`` is one finite real (> 0 when ``positive``); return it as float."""
    what = "a positive finite number" if positive else "a finite number"
    message = f"key '{key}' must be {what}, got {_shown(value)!r}"
    if not _is_real(value):
        raise FieldError(message, key)
    out = float(value)
    if not math.isfinite(out) or (positive and not out > 0.0):
        raise FieldError(message, key)
    return out


@dataclass(frozen=True)
class Cylinder:
    """Solid vertical cylinder standing on the ground, from z = 0 up to z = ``height``.

    center: (x, y) of the axis, metres. radius: metres, > 0. height: metres, > 0.
    """

    center: tuple[float, float]
    radius: float
    height: float

    TYPE: ClassVar[str] = "cylinder"

    def __post_init__(self) -> None:
        object.__setattr__(self, "center", real_vector(self.center, 2, "center"))
        object.__setattr__(self, "radius", real_scalar(self.radius, "radius", positive=True))
        object.__setattr__(self, "height", real_scalar(self.height, "height", positive=True))

    def aabb(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned bounding box as ((3,), (3,)) float64 min and max corners, metres."""
        x, y = self.center
        r = self.radius
        return np.array([x - r, y - r, 0.0]), np.array([x + r, y + r, self.height])

    def to_dict(self) -> dict:
        """The world-file mapping for this obstacle."""
        return {"type": self.TYPE, "center": list(self.center), "radius": self.radius,
                "height": self.height}


@dataclass(frozen=True)
class Box:
    """Solid box rotated by ``yaw`` about the vertical axis through its centre.

    center: (x, y, z) of the box centre, metres. size: full edge lengths (sx, sy, sz) along the
    box's own axes before yaw, metres, each > 0. yaw: radians, counter-clockwise seen from above.
    """

    center: tuple[float, float, float]
    size: tuple[float, float, float]
    yaw: float = 0.0

    TYPE: ClassVar[str] = "box"

    def __post_init__(self) -> None:
        object.__setattr__(self, "center", real_vector(self.center, 3, "center"))
        object.__setattr__(self, "size", real_vector(self.size, 3, "size", positive=True))
        object.__setattr__(self, "yaw", real_scalar(self.yaw, "yaw"))

    def aabb(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned bounding box of the yawed box, ((3,), (3,)) float64, metres."""
        c, s = abs(math.cos(self.yaw)), abs(math.sin(self.yaw))
        hx, hy, hz = (0.5 * v for v in self.size)
        half = np.array([c * hx + s * hy, s * hx + c * hy, hz])
        center = np.array(self.center)
        return center - half, center + half

    def to_dict(self) -> dict:
        """The world-file mapping for this obstacle (``yaw`` always written)."""
        return {"type": self.TYPE, "center": list(self.center), "size": list(self.size),
                "yaw": self.yaw}


@dataclass(frozen=True)
class Sphere:
    """Solid sphere. center: (x, y, z), metres. radius: metres, > 0."""

    center: tuple[float, float, float]
    radius: float

    TYPE: ClassVar[str] = "sphere"

    def __post_init__(self) -> None:
        object.__setattr__(self, "center", real_vector(self.center, 3, "center"))
        object.__setattr__(self, "radius", real_scalar(self.radius, "radius", positive=True))

    def aabb(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned bounding box, ((3,), (3,)) float64, metres."""
        center = np.array(self.center)
        return center - self.radius, center + self.radius

    def to_dict(self) -> dict:
        """The world-file mapping for this obstacle."""
        return {"type": self.TYPE, "center": list(self.center), "radius": self.radius}


Obstacle = Union[Cylinder, Box, Sphere]

#: World-file ``type`` string -> primitive class.
OBSTACLE_TYPES: dict[str, type] = {cls.TYPE: cls for cls in (Cylinder, Box, Sphere)}


def required_keys(cls: type) -> tuple[str, ...]:
    """Field names a world file must give for ``cls`` (those without a default)."""
    return tuple(f.name for f in fields(cls) if f.default is MISSING)


def allowed_keys(cls: type) -> tuple[str, ...]:
    """All field names a world file may give for ``cls``, plus ``type``."""
    return ("type",) + tuple(f.name for f in fields(cls))
