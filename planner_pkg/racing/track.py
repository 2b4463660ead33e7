"""Gate tracks: load, validate, save and generate.

File format (JSON or YAML, metres, ENU)::

    {"gates": [{"center": [x, y, z], "yaw": rad, "size": m}, ...],
     "start": [x, y, z]}                       # optional; default: 3 m before the first gate

A gate is a square opening of side ``size`` centred on ``center``, in the vertical plane whose
normal is ``(cos yaw, sin yaw, 0)``; it is passed by crossing that plane along the normal, inside
the opening. The gates are flown in list order, lap after lap (after the last, the first again).
Loading never runs code (``safe_yaml.safe_load``) and every bad value is a :class:`TrackError` naming
the file, the gate and the key.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["Gate", "Track", "TrackError", "load_track", "track_from_dict", "save_track", "random_track",
           "MAX_GATES", "DEFAULT_START_BACK_M"]

MAX_GATES = 256
MAX_COORD_M = 10_000.0
DEFAULT_START_BACK_M = 3.0
_TRACK_KEYS = ("gates", "start")
_GATE_KEYS = ("center", "yaw", "size")


class TrackError(ValueError):
    """A track file or mapping is unreadable or holds a bad value (the message names it)."""


@dataclass(frozen=True)
class Gate:
    """center: (3,) m; yaw: rad, the normal (pass direction) is (cos yaw, sin yaw, 0); size: m."""

    center: Tuple[float, float, float]
    yaw: float
    size: float

    @property
    def normal(self) -> np.ndarray:
        return np.array([math.cos(self.yaw), math.sin(self.yaw), 0.0])

    @property
    def lateral(self) -> np.ndarray:
        """In-plane horizontal axis (normal rotated +90 deg about z)."""
        return np.array([-math.sin(self.yaw), math.cos(self.yaw), 0.0])


@dataclass(frozen=True)
class Track:
    gates: Tuple[Gate, ...]
    start: Tuple[float, float, float]

    def __len__(self) -> int:
        return len(self.gates)

    def arrays(self):
        """(centers (G, 3), normals (G, 3), laterals (G, 3), half sizes (G,)) float64."""
        c = np.array([g.center for g in self.gates], dtype=np.float64)
        n = np.array([g.normal for g in self.gates])
        lat = np.array([g.lateral for g in self.gates])
        h = np.array([g.size / 2.0 for g in self.gates])
        return c, n, lat, h

    def to_dict(self) -> dict:
        return {"gates": [{"center": list(g.center), "yaw": g.yaw, "size": g.size} for g in self.gates],
                "start": list(self.start)}


def _number(value, where: str, low: float = -MAX_COORD_M, high: float = MAX_COORD_M, low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TrackError(f"{where}: must be a finite number, got {value!r}")
    if value > high or value < low or (low_open and value == low):
        raise TrackError(f"{where}: must be in {'(' if low_open else '['}{low:g}, {high:g}], got {value!r}")
    return float(value)


def _point(value, where: str) -> Tuple[float, float, float]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)) or len(value) != 3:
        raise TrackError(f"{where}: must be a list of 3 numbers [x, y, z] (m), got {value!r}")
    return tuple(_number(v, f"{where}[{i}]") for i, v in enumerate(value))  # type: ignore[return-value]


def track_from_dict(data: Any, where: str = "track") -> Track:
    """A validated :class:`Track` from the file's mapping (module docstring)."""
    if not isinstance(data, Mapping):
        raise TrackError(f"{where}: must be a mapping with a 'gates' list, got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in _TRACK_KEYS)
    if unknown:
        raise TrackError(f"{where}: unknown key(s) {unknown}; a track has {list(_TRACK_KEYS)}")
    gates_raw = data.get("gates")
    if not isinstance(gates_raw, (list, tuple)) or not gates_raw:
        raise TrackError(f"{where}: 'gates' must be a non-empty list of "
                         "{{center: [x, y, z], yaw: rad, size: m}}, got {gates_raw!r}")
    if len(gates_raw) > MAX_GATES:
        raise TrackError(f"{where}: {len(gates_raw)} gates, more than the limit of {MAX_GATES}")
    gates = []
    for i, g in enumerate(gates_raw):
        gw = f"{where}: gates[{i}]"
        if not isinstance(g, Mapping):
            raise TrackError(f"{gw}: must be a mapping {{center, yaw, size}}, got {g!r}")
        missing = [k for k in _GATE_KEYS if k not in g]
        if missing:
            raise TrackError(f"{gw}: missing {missing}")
        extra = sorted(str(k) for k in g if k not in _GATE_KEYS)
        if extra:
            raise TrackError(f"{gw}: unknown key(s) {extra}; a gate has {list(_GATE_KEYS)}")
        center = _point(g["center"], f"{gw}.center")
        yaw = _number(g["yaw"], f"{gw}.yaw", -100.0, 100.0)
        size = _number(g["size"], f"{gw}.size", 0.0, 100.0, low_open=True)
        if center[2] - size / 2.0 < 0.0:
            raise TrackError(f"{gw}: the opening reaches below the ground (center z {center[2]:g} m < size/2 "
                             f"{size / 2:g} m); raise the gate")
        gates.append(Gate(center, yaw, size))
    for i in range(len(gates)):
        for j in range(i + 1, len(gates)):
            if np.linalg.norm(np.subtract(gates[i].center, gates[j].center)) < 1e-6:
                raise TrackError(f"{where}: gates[{i}] and gates[{j}] have the same center")
    if data.get("start") is not None:
        start = _point(data["start"], f"{where}.start")
        if start[2] < 0.0:
            raise TrackError(f"{where}.start: below the ground (z {start[2]:g} m)")
    else:
        g0 = gates[0]
        start = tuple(float(v) for v in np.asarray(g0.center) - DEFAULT_START_BACK_M * g0.normal)
    return Track(tuple(gates), start)  # type: ignore[arg-type]


def load_track(path: Union[str, Path]) -> Track:
    """Read a track file (.json, .yaml or .yml); raises TrackError naming the file and problem."""
    import yaml

    from planner_pkg import safe_yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrackError(f"cannot read track file {str(path)!r}: {exc}") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            data = json.loads(text)
        elif suffix in (".yaml", ".yml"):
            data = safe_yaml.safe_load(text)
        else:
            raise TrackError(f"track file {str(path)!r}: unknown extension {suffix!r}; use .json, .yaml or .yml")
    except (ValueError, yaml.YAMLError) as exc:
        if isinstance(exc, TrackError):
            raise
        raise TrackError(f"track file {str(path)!r} is not valid {suffix[1:].upper()}: "
                         f"{' '.join(str(exc).split())}") from None
    return track_from_dict(data, str(path))


def save_track(track: Track, path: Union[str, Path]) -> Path:
    """Write ``track`` as JSON or YAML (by the extension)."""
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = track.to_dict()
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(data, indent=1) + "\n")
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def random_track(rng: np.random.Generator, cfg=None) -> Track:
    """A random loop of gates (``cfg``: :class:`~planner_pkg.racing.config.TrackGenConfig`).

    The gates sit at evenly spaced angles (jittered) on an ellipse filling ``cfg.area_m``, each at
    a jittered radius, facing along the loop (jittered yaw), flown clockwise or anticlockwise;
    draws closer than ``cfg.min_spacing_m`` are redrawn (up to 50 times, then the spacing rule is
    relaxed, so the function always returns).
    """
    from planner_pkg.racing.config import TrackGenConfig

    cfg = cfg or TrackGenConfig()
    n = int(rng.integers(cfg.gates[0], cfg.gates[1] + 1))
    ax, ay = cfg.area_m[0] / 2.0, cfg.area_m[1] / 2.0
    direction = 1.0 if rng.random() < 0.5 else -1.0
    phase = rng.uniform(0.0, 2 * math.pi)
    for attempt in range(60):
        spacing = cfg.min_spacing_m if attempt < 50 else 0.0
        ang = phase + direction * (2 * math.pi * np.arange(n) / n + rng.uniform(-0.25, 0.25, n) * 2 * math.pi / n)
        rad = 1.0 - cfg.radial_jitter * rng.random(n)
        x, y = ax * rad * np.cos(ang), ay * rad * np.sin(ang)
        pts = np.stack([x, y], axis=1)
        d = np.linalg.norm(pts[:, None] - pts[None], axis=-1) + np.eye(n) * 1e9
        if d.min() >= spacing:
            break
    # tangent of the ellipse at each angle, in the flying direction
    tx, ty = -ax * np.sin(ang) * direction, ay * np.cos(ang) * direction
    yaw = np.arctan2(ty, tx) + rng.uniform(-cfg.yaw_jitter_rad, cfg.yaw_jitter_rad, n)
    z = rng.uniform(cfg.height_m[0], cfg.height_m[1], n)
    z = np.maximum(z, cfg.size_m / 2.0 + 0.2)
    gates = tuple(Gate((float(x[i]), float(y[i]), float(z[i])), float(math.remainder(yaw[i], 2 * math.pi)),
                       float(cfg.size_m)) for i in range(n))
    g0 = gates[0]
    start = np.asarray(g0.center) - DEFAULT_START_BACK_M * g0.normal
    return Track(gates, (float(start[0]), float(start[1]), float(start[2])))
