"""Built-structure generators: walls with windows across the path, and a racing gate track.

Both are made of boxes only. Coordinates are rounded to millimetres. Metres and radians.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from planner_pkg.config_schema import Config, non_negative, positive

from .gen_common import (WORLD_SCHEMA, at_least, check_inside, check_obstacle_count, enclosing_bounds, extent,
                         set_field, to_mm)
from .primitives import Box
from .world import World

__all__ = ["WallsParams", "GatesParams", "walls", "gates"]

#: Slivers thinner than this (metres) are left out rather than written as degenerate boxes.
_MIN_PIECE_M = 1e-3
#: Free space between the gate track and the map edge, and above the tallest gate, metres.
_TRACK_MARGIN_M = 2.0


@dataclass(frozen=True)
class WallsParams(Config, schema=WORLD_SCHEMA, prefix=""):
    """Walls across the x axis between start and goal, each with rectangular windows to fly
    through. Walls span the whole map width and height, so windows are the only way past.

    size_x, size_y, size_z: map extent, metres (x, y centred on 0; z from 0 to size_z).
    num_walls: number of walls, evenly spaced in x between the clear zones of start and goal.
    thickness: wall thickness along x, metres.
    windows_per_wall: windows per wall; the wall is split into this many equal strips across y
        and each strip gets one window at a random lateral position.
    window_width, window_height: window opening, metres.
    sill_min, sill_max: range of the window's bottom edge height, metres; sill_max None means
        size_z - window_height - 0.5.
    start, goal: (x, y, z), metres, inside the map, start.x < goal.x.
    clear_radius: no wall comes within this distance (metres) of start or goal.
    """

    size_x: float = extent(40.0)
    size_y: float = extent(10.0)
    size_z: float = extent(4.0)
    num_walls: int = at_least(4)
    thickness: float = positive(0.3)
    windows_per_wall: int = at_least(1, 1)
    window_width: float = positive(1.5)
    window_height: float = positive(1.5)
    sill_min: float = non_negative(0.5)
    sill_max: Optional[float] = positive(None)
    start: Tuple[float, float, float] = (-18.0, 0.0, 1.5)
    goal: Tuple[float, float, float] = (18.0, 0.0, 1.5)
    clear_radius: float = non_negative(2.0)

    def _check(self) -> None:
        # each wall is at most 3 boxes per window plus one (_wall_pieces)
        check_obstacle_count(f"parameters 'num_walls' ({self.num_walls}) x 'windows_per_wall' "
                             f"({self.windows_per_wall})", self.num_walls * (3 * self.windows_per_wall + 1))
        sill_max = self.sill_max
        if sill_max is None:
            sill_max = max(self.sill_min, self.size_z - self.window_height - 0.5)
        set_field(self, "sill_max", sill_max)
        if self.sill_min > self.sill_max:
            raise ValueError(f"parameter 'sill_min' ({self.sill_min}) must be <= 'sill_max' "
                             f"({self.sill_max})")
        if self.sill_max + self.window_height > self.size_z:
            raise ValueError(f"parameter 'window_height' ({self.window_height}) with 'sill_max' "
                             f"({self.sill_max}) does not fit under 'size_z' ({self.size_z})")
        if self.size_y / self.windows_per_wall < self.window_width:
            raise ValueError(f"parameter 'windows_per_wall' ({self.windows_per_wall}): windows of "
                             f"width {self.window_width} do not fit in size_y {self.size_y}")
        low = (-0.5 * self.size_x, -0.5 * self.size_y, 0.0)
        high = (0.5 * self.size_x, 0.5 * self.size_y, self.size_z)
        for name in ("start", "goal"):
            check_inside(name, getattr(self, name), low, high)
        room = (self.goal[0] - self.start[0]) - 2.0 * self.clear_radius
        if room <= self.num_walls * self.thickness:
            raise ValueError(f"parameter 'goal': goal.x - start.x ({self.goal[0] - self.start[0]})"
                             f" leaves no room for {self.num_walls} walls outside the clear zones")


def _wall_pieces(x: float, p: WallsParams, y_windows: np.ndarray, sills: np.ndarray) -> list:
    """Boxes of one wall at x with windows centred at ``y_windows`` (sorted) over ``sills``."""
    half_y = 0.5 * p.size_y
    pieces = []

    def add(y0: float, y1: float, z0: float, z1: float) -> None:
        if y1 - y0 >= _MIN_PIECE_M and z1 - z0 >= _MIN_PIECE_M:
            # Edges are on the millimetre grid; round away the float noise of their differences
            # (centres of two mm values are half-mm values, hence 4 decimals).
            centre = (x, round(0.5 * (y0 + y1), 4), round(0.5 * (z0 + z1), 4))
            pieces.append(Box(centre, (p.thickness, round(y1 - y0, 3), round(z1 - z0, 3))))

    edge = -half_y
    for yc, sill in zip(y_windows.tolist(), sills.tolist()):
        y0, y1 = yc - 0.5 * p.window_width, yc + 0.5 * p.window_width
        add(edge, y0, 0.0, p.size_z)
        add(y0, y1, 0.0, sill)
        add(y0, y1, sill + p.window_height, p.size_z)
        edge = y1
    add(edge, half_y, 0.0, p.size_z)
    return pieces


def walls(params: WallsParams, rng: np.random.Generator) -> World:
    """A World of wall boxes with window openings (see ``WallsParams``)."""
    p = params
    first = p.start[0] + p.clear_radius + 0.5 * p.thickness
    last = p.goal[0] - p.clear_radius - 0.5 * p.thickness
    xs = to_mm(first + (last - first) * (np.arange(p.num_walls) + 1.0) / (p.num_walls + 1.0),
               first, last)
    strip = p.size_y / p.windows_per_wall
    obstacles: list = []
    for x in xs.tolist():
        lows = -0.5 * p.size_y + strip * np.arange(p.windows_per_wall) + 0.5 * p.window_width
        highs = lows + strip - p.window_width
        y_windows = to_mm(rng.uniform(lows, highs), lows, highs)
        sills = to_mm(rng.uniform(p.sill_min, p.sill_max, p.windows_per_wall), p.sill_min,
                      p.sill_max)
        obstacles.extend(_wall_pieces(x, p, y_windows, sills))
    low = (-0.5 * p.size_x, -0.5 * p.size_y, 0.0)
    high = (0.5 * p.size_x, 0.5 * p.size_y, p.size_z)
    low, high = enclosing_bounds(obstacles, low, high)
    return World(low, high, obstacles)


@dataclass(frozen=True)
class GatesParams(Config, schema=WORLD_SCHEMA, prefix=""):
    """A closed racing track of square gates on an ellipse around the origin.

    Gate i sits at track angle 2*pi*(i + 0.5)/num_gates, facing along the track, so flying the
    gates in index order is one counter-clockwise lap. The start (and finish) point is
    (track_radius_x, 0, gate_height), midway between the last and the first gate.

    num_gates: number of gates (>= 1).
    track_radius_x, track_radius_y: ellipse semi-axes, metres.
    gate_opening: side of the square opening, metres.
    bar_width: side of the square cross-section of the frame bars, metres.
    gate_height: height of the opening's centre above the ground, metres.
    height_jitter, position_jitter: uniform +- perturbation of the opening's height and of the
        gate's horizontal position, metres.
    yaw_jitter: uniform +- perturbation of the gate's heading, radians (< pi/2).
    legs: when True the side posts reach down to the ground, like a real gate stand.
    clear_radius: no gate comes within this horizontal distance (metres) of the start point.
    """

    num_gates: int = at_least(6, 1)
    track_radius_x: float = extent(12.0)
    track_radius_y: float = extent(8.0)
    gate_opening: float = positive(1.5)
    bar_width: float = positive(0.15)
    gate_height: float = positive(2.0)
    height_jitter: float = non_negative(0.5)
    position_jitter: float = non_negative(0.5)
    yaw_jitter: float = non_negative(0.2)
    legs: bool = True
    clear_radius: float = non_negative(1.5)

    def _check(self) -> None:
        check_obstacle_count(f"parameter 'num_gates' ({self.num_gates}, 4 boxes each)", 4 * self.num_gates)
        if self.yaw_jitter >= 0.5 * math.pi:
            raise ValueError(f"parameter 'yaw_jitter' ({self.yaw_jitter}) must be < pi/2")
        lowest = self.gate_height - self.height_jitter - 0.5 * self.gate_opening - self.bar_width
        if lowest <= 0.0:
            raise ValueError(f"parameter 'gate_height' ({self.gate_height}) is too low: the bottom"
                             f" bar would reach {lowest:.3f} m with height_jitter "
                             f"{self.height_jitter}")
        centres = _nominal_centres(self)
        footprint = math.hypot(0.5 * self.gate_opening + self.bar_width, 0.5 * self.bar_width)
        if self.num_gates > 1:
            spacing = np.hypot(*(centres - np.roll(centres, 1, axis=0)).T).min()
            if spacing < 2.0 * (footprint + self.position_jitter) + self.gate_opening:
                raise ValueError(f"parameter 'num_gates' ({self.num_gates}): gates {spacing:.2f} m"
                                 " apart would crowd or overlap; use fewer or a larger track")
        start_gap = np.hypot(*(centres - [self.track_radius_x, 0.0]).T).min()
        if start_gap - footprint - self.position_jitter < self.clear_radius:
            raise ValueError(f"parameter 'clear_radius' ({self.clear_radius}) does not fit "
                             "between the start and the nearest gate")


def _nominal_centres(p: GatesParams) -> np.ndarray:
    """(num_gates, 2) unperturbed gate centres on the ellipse, metres."""
    angle = 2.0 * math.pi * (np.arange(p.num_gates) + 0.5) / p.num_gates
    return np.stack([p.track_radius_x * np.cos(angle), p.track_radius_y * np.sin(angle)], axis=1)


def _gate_pieces(x: float, y: float, z: float, yaw: float, p: GatesParams) -> list:
    """Four boxes of a gate whose opening is centred at (x, y, z), facing ``yaw``."""
    s, b = p.gate_opening, p.bar_width
    top = float(to_mm(z + 0.5 * s + b))
    bottom = 0.0 if p.legs else float(to_mm(z - 0.5 * s - b))
    # Post centre from the rounded height, so a leg's foot lands exactly on z = 0.
    post_height = float(to_mm(top - bottom))
    post_z = bottom + 0.5 * post_height
    lateral = (-math.sin(yaw), math.cos(yaw))
    post_offset = 0.5 * (s + b)

    def at(offset: float, zc: float, size: tuple) -> Box:
        cx = float(to_mm(x + offset * lateral[0]))
        cy = float(to_mm(y + offset * lateral[1]))
        return Box((cx, cy, zc), size, yaw)

    bar = (b, s, b)
    return [at(-post_offset, post_z, (b, b, post_height)),
            at(post_offset, post_z, (b, b, post_height)),
            at(0.0, float(to_mm(z + 0.5 * (s + b))), bar),
            at(0.0, float(to_mm(z - 0.5 * (s + b))), bar)]


def gates(params: GatesParams, rng: np.random.Generator) -> World:
    """A World of gate frames on a closed track (see ``GatesParams``)."""
    p = params
    angle = 2.0 * math.pi * (np.arange(p.num_gates) + 0.5) / p.num_gates
    centres = _nominal_centres(p)
    heading = np.arctan2(p.track_radius_y * np.cos(angle), -p.track_radius_x * np.sin(angle))
    shift_radius = p.position_jitter * np.sqrt(rng.uniform(0.0, 1.0, p.num_gates))
    shift_angle = rng.uniform(-math.pi, math.pi, p.num_gates)
    xs = to_mm(centres[:, 0] + shift_radius * np.cos(shift_angle))
    ys = to_mm(centres[:, 1] + shift_radius * np.sin(shift_angle))
    zs = to_mm(p.gate_height + rng.uniform(-p.height_jitter, p.height_jitter, p.num_gates))
    yaws = to_mm(heading + rng.uniform(-p.yaw_jitter, p.yaw_jitter, p.num_gates))
    obstacles: list = []
    for x, y, z, yaw in zip(xs.tolist(), ys.tolist(), zs.tolist(), yaws.tolist()):
        obstacles.extend(_gate_pieces(x, y, z, yaw, p))
    reach = 0.5 * p.gate_opening + p.bar_width + p.position_jitter + _TRACK_MARGIN_M
    low = (-p.track_radius_x - reach, -p.track_radius_y - reach, 0.0)
    high = (p.track_radius_x + reach, p.track_radius_y + reach,
            p.gate_height + p.height_jitter + 0.5 * p.gate_opening + p.bar_width + _TRACK_MARGIN_M)
    low, high = enclosing_bounds(obstacles, low, high)
    return World(low, high, obstacles)
