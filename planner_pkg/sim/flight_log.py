"""Flight log (``flight.csv``) and episode summary (``summary.json``): the fly command's outputs.

``flight.csv``: header exactly ``t,x,y,z,vx,vy,vz`` (DESIGN.md contract), one row per log
sample: sim time (s), position (m) and velocity (m/s), world ENU.

``summary.json``: the keys of :class:`EpisodeSummary`; the contract requires at least
``reached, collided, time_s, path_length_m, min_clearance_m, replan_ms_median,
replan_ms_p95``. Non-finite numbers are written as ``null`` so the file is strict JSON.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

CSV_HEADER = ("t", "x", "y", "z", "vx", "vy", "vz")


class FlightLog:
    """Append-only recorder of (t, position, velocity) samples; arrays on demand."""

    def __init__(self):
        self._rows: List[tuple] = []

    def append(self, t: float, position, velocity) -> None:
        self._rows.append((float(t), *map(float, position), *map(float, velocity)))

    def __len__(self) -> int:
        return len(self._rows)

    def as_array(self) -> np.ndarray:
        """(N, 7) float64: columns ``CSV_HEADER``."""
        return np.array(self._rows, dtype=np.float64).reshape(-1, len(CSV_HEADER))

    @property
    def t(self) -> np.ndarray:
        return self.as_array()[:, 0]

    @property
    def positions(self) -> np.ndarray:
        return self.as_array()[:, 1:4]

    @property
    def velocities(self) -> np.ndarray:
        return self.as_array()[:, 4:7]

    def write_csv(self, path) -> None:
        """Write ``flight.csv``; ``repr`` floats so the file round-trips exactly."""
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(CSV_HEADER)
            for row in self._rows:
                writer.writerow([repr(v) for v in row])

    @classmethod
    def read_csv(cls, path) -> "FlightLog":
        """Read a ``flight.csv`` back; ValueError naming the line on a malformed file."""
        log = cls()
        with open(path, newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None or tuple(header) != CSV_HEADER:
                raise ValueError(f"{path}: header must be {','.join(CSV_HEADER)}, got {header}")
            for lineno, row in enumerate(reader, start=2):
                if len(row) != len(CSV_HEADER):
                    raise ValueError(f"{path}:{lineno}: expected {len(CSV_HEADER)} columns, got {len(row)}")
                try:
                    values = [float(v) for v in row]
                except ValueError as exc:
                    raise ValueError(f"{path}:{lineno}: {exc}") from None
                log._rows.append(tuple(values))
        return log


def percentile_or_none(values: Sequence[float], q: float) -> Optional[float]:
    """``np.percentile(values, q)`` or None for an empty sequence."""
    return float(np.percentile(values, q)) if len(values) else None


@dataclass
class EpisodeSummary:
    """Outcome of one closed-loop episode (units in the names)."""

    reached: bool
    collided: bool
    time_s: float
    path_length_m: float
    min_clearance_m: Optional[float]  # ball-to-surface gap, m; negative on collision
    replan_ms_median: Optional[float]  # wall time of planner.update, ms
    replan_ms_p95: Optional[float]
    reason: str  # goal_reached | collision | timeout | non_finite_state | out_of_bounds
    mean_speed_mps: float
    max_speed_mps: float
    final_goal_distance_m: float
    seed: Optional[int]  # None where no seed applies (a mission over ROS on a given world)
    planner: str
    vehicle: str
    world: Optional[str] = None
    start: List[float] = field(default_factory=list)
    goal: List[float] = field(default_factory=list)
    collision_time_s: Optional[float] = None
    collision_position: Optional[List[float]] = None
    planner_calls: Optional[int] = 0  # None: not counted (a mission over ROS)
    bad_setpoints: Optional[int] = 0
    depth_frames: Optional[int] = 0
    wall_time_s: Optional[float] = 0.0
    real_time_factor: Optional[float] = None
    # distance of the vehicle from its position setpoint at each control tick (the planner's
    # reference; ticks without a position setpoint and bad-setpoint holds left out), m;
    # None where not measured: no position setpoint flown (acceleration or velocity commands), or a
    # mission judged over ROS (the judge sees odometry, not the setpoints)
    tracking_error_p95_m: Optional[float] = None
    tracking_error_max_m: Optional[float] = None
    message: str = ""

    def to_dict(self) -> dict:
        """Plain JSON-ready mapping; non-finite floats become None."""
        return {k: _json_safe(v) for k, v in asdict(self).items()}

    def write_json(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")


def _json_safe(value):
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_json_safe(v) for v in value.tolist()]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def path_length(positions: np.ndarray) -> float:
    """Length (m) of the polyline through positions (N, 3)."""
    if len(positions) < 2:
        return 0.0
    return float(np.linalg.norm(np.diff(positions, axis=0), axis=1).sum())
