"""Obstacles of one type packed into parameter arrays, built once per World.

The distance and ray kernels broadcast a column of points/rays against a row of obstacles, so each
parameter is stored as its own contiguous (K,) row rather than as (K, 3) records: a trailing
dimension of 3 in the hot broadcasts is measurably slower here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np

from .primitives import Box, Cylinder, Obstacle, Sphere

__all__ = ["Block", "pack", "PARAM_ROWS", "KINDS"]

#: Order of the kernels' loops over obstacle types.
KINDS = ("cylinder", "box", "sphere")

#: Meaning of each row of ``Block.params`` per kind (metres, radians as cos/sin).
PARAM_ROWS = {
    "cylinder": ("cx", "cy", "radius", "height"),
    "box": ("cx", "cy", "cz", "half_x", "half_y", "half_z", "cos_yaw", "sin_yaw"),
    "sphere": ("cx", "cy", "cz", "radius"),
}


@dataclass(frozen=True)
class Block:
    """All obstacles of one kind.

    params: (P, K) float64, rows as in ``PARAM_ROWS[kind]``.
    hull: (5, K) float64 vertical-prism bound used for culling rays: xy disc centre x, y, disc
        radius, z min, z max (metres); the obstacle lies inside the disc x [z min, z max].
    index: (K,) int64 position of each obstacle in ``World.obstacles``.
    """

    kind: str
    params: np.ndarray
    hull: np.ndarray
    index: np.ndarray

    @property
    def size(self) -> int:
        return int(self.index.shape[0])

    @cached_property
    def frame(self) -> np.ndarray:
        """(4, 3, K) float64 bounding box of each obstacle as centre, then three half-axis vectors
        (metres): the obstacle lies inside centre + s1 * a1 + s2 * a2 + s3 * a3 for s_i in
        [-1, 1], so its 8 corners bound it. a1, a2 are horizontal, a3 vertical. Built on first
        use (the image-plane ray culling of ``raycast_fast`` reads it)."""
        return _frozen(_box_frame(self.kind, self.params))

    @cached_property
    def frame_radius(self) -> np.ndarray:
        """(K,) float64 radius of a ball about ``frame``'s centre holding its 8 corners (the
        half-axes are orthogonal), widened by 1e-9 relative; metres."""
        axes = self.frame[1:]
        return _frozen(np.sqrt((axes * axes).sum(axis=(0, 1))) * (1.0 + 1e-9))

    def take(self, selection: np.ndarray) -> "Block":
        """The sub-block of the obstacles picked by ``selection`` (bool (K,) or int indices)."""
        return Block(self.kind, _frozen(self.params[:, selection]),
                     _frozen(self.hull[:, selection]), _frozen(self.index[selection]))


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    array.flags.writeable = False
    return array


def _box_frame(kind: str, params: np.ndarray) -> np.ndarray:
    frame = np.zeros((4, 3, params.shape[1]))
    if kind == "cylinder":
        cx, cy, radius, height = params
        half = 0.5 * height
        frame[0] = cx, cy, half
        frame[1, 0] = radius
        frame[2, 1] = radius
        frame[3, 2] = half
    elif kind == "sphere":
        cx, cy, cz, radius = params
        frame[0] = cx, cy, cz
        frame[1, 0] = radius
        frame[2, 1] = radius
        frame[3, 2] = radius
    else:
        cx, cy, cz, hx, hy, hz, c, s = params
        frame[0] = cx, cy, cz
        frame[1, 0] = hx * c
        frame[1, 1] = hx * s
        frame[2, 0] = -hy * s
        frame[2, 1] = hy * c
        frame[3, 2] = hz
    return frame


def _rows(obstacle: Obstacle) -> tuple[list[float], list[float]]:
    if isinstance(obstacle, Cylinder):
        (x, y), r, h = obstacle.center, obstacle.radius, obstacle.height
        return [x, y, r, h], [x, y, r, 0.0, h]
    if isinstance(obstacle, Box):
        (x, y, z), (sx, sy, sz) = obstacle.center, obstacle.size
        hx, hy, hz = 0.5 * sx, 0.5 * sy, 0.5 * sz
        params = [x, y, z, hx, hy, hz, math.cos(obstacle.yaw), math.sin(obstacle.yaw)]
        return params, [x, y, math.hypot(hx, hy), z - hz, z + hz]
    if isinstance(obstacle, Sphere):
        (x, y, z), r = obstacle.center, obstacle.radius
        return [x, y, z, r], [x, y, r, z - r, z + r]
    raise TypeError(f"obstacles must be Cylinder, Box or Sphere, got {type(obstacle).__name__}")


def pack(obstacles: Sequence[Obstacle]) -> tuple[Block, ...]:
    """Group ``obstacles`` by kind into one Block per entry of ``KINDS`` (empty blocks included)."""
    params: dict[str, list] = {kind: [] for kind in KINDS}
    hulls: dict[str, list] = {kind: [] for kind in KINDS}
    index: dict[str, list] = {kind: [] for kind in KINDS}
    for i, obstacle in enumerate(obstacles):
        p, h = _rows(obstacle)
        params[obstacle.TYPE].append(p)
        hulls[obstacle.TYPE].append(h)
        index[obstacle.TYPE].append(i)
    blocks = []
    for kind in KINDS:
        n_rows = len(PARAM_ROWS[kind])
        p = np.array(params[kind], dtype=np.float64).reshape(-1, n_rows).T
        h = np.array(hulls[kind], dtype=np.float64).reshape(-1, 5).T
        blocks.append(Block(kind, _frozen(p), _frozen(h),
                            _frozen(np.array(index[kind], dtype=np.int64))))
    return tuple(blocks)
