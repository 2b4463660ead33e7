"""Exact signed distance from points to packed obstacles, vectorised over points x obstacles.

Every kernel takes point coordinates as columns ``x, y, z`` of shape (n, 1) and one Block's
parameter rows of shape (K,), and returns the (n, K) signed distance in metres (negative inside).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .packed import Block

__all__ = ["min_distance", "per_obstacle_distance", "DISTANCE_KERNELS", "CHUNK_ELEMENTS"]

#: Upper bound on n x K per kernel call: keeps temporaries cache-sized and memory bounded.
CHUNK_ELEMENTS = 1 << 16


def cylinder_distance(x, y, z, p):
    """Capped vertical cylinder on the ground (z in [0, height]); (n, K) metres."""
    cx, cy, radius, height = p
    dx = x - cx
    dy = y - cy
    dx *= dx
    dy *= dy
    dx += dy
    radial = np.sqrt(dx, out=dx)
    radial -= radius
    half = 0.5 * height
    axial = np.abs(z - half)
    axial -= half
    inside = np.maximum(radial, axial)
    np.minimum(inside, 0.0, out=inside)
    np.maximum(radial, 0.0, out=radial)
    np.maximum(axial, 0.0, out=axial)
    radial *= radial
    axial *= axial
    radial += axial
    np.sqrt(radial, out=radial)
    radial += inside
    return radial


def box_distance(x, y, z, p):
    """Box yawed about z; exact inside and outside; (n, K) metres."""
    cx, cy, cz, hx, hy, hz, c, s = p
    rx = x - cx
    ry = y - cy
    # Rotate into the box frame by -yaw.
    qx = np.abs(c * rx + s * ry)
    qx -= hx
    qy = np.abs(c * ry - s * rx)
    qy -= hy
    qz = np.abs(z - cz)
    qz -= hz
    inside = np.maximum(qx, qy)
    np.maximum(inside, qz, out=inside)
    np.minimum(inside, 0.0, out=inside)
    for q in (qx, qy, qz):
        np.maximum(q, 0.0, out=q)
        q *= q
    qx += qy
    qx += qz
    np.sqrt(qx, out=qx)
    qx += inside
    return qx


def sphere_distance(x, y, z, p):
    """Sphere; (n, K) metres."""
    cx, cy, cz, radius = p
    dx = x - cx
    dy = y - cy
    dz = z - cz
    dx *= dx
    dy *= dy
    dz *= dz
    dx += dy
    dx += dz
    np.sqrt(dx, out=dx)
    dx -= radius
    return dx


DISTANCE_KERNELS = {"cylinder": cylinder_distance, "box": box_distance, "sphere": sphere_distance}


def min_distance(blocks: Sequence[Block], points: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Lower ``out`` (N,) in place to the distance to the nearest obstacle in ``blocks``.

    points: (N, 3) float64, metres. Exact for points outside all obstacles; inside overlapping
    obstacles it is minus the deepest single penetration (the usual union-of-SDFs bound).
    """
    n_points = points.shape[0]
    n_obstacles = sum(b.size for b in blocks)
    if n_obstacles == 0 or n_points == 0:
        return out
    step = max(1, CHUNK_ELEMENTS // n_obstacles)
    x_all, y_all, z_all = (points[:, i].copy()[:, None] for i in range(3))
    for start in range(0, n_points, step):
        stop = min(start + step, n_points)
        x, y, z = x_all[start:stop], y_all[start:stop], z_all[start:stop]
        view = out[start:stop]
        for block in blocks:
            if block.size:
                d = DISTANCE_KERNELS[block.kind](x, y, z, block.params)
                np.minimum(view, d.min(axis=1), out=view)
    return out


def per_obstacle_distance(blocks: Sequence[Block], points: np.ndarray,
                          n_obstacles: int) -> np.ndarray:
    """Signed distance from each point to each obstacle: (N, K) float64 metres, K in World order.

    points: (N, 3) float64, metres. Meant for small N (culling, generators), so not chunked.
    """
    result = np.empty((points.shape[0], n_obstacles))
    x, y, z = (points[:, i].copy()[:, None] for i in range(3))
    for block in blocks:
        if block.size:
            result[:, block.index] = DISTANCE_KERNELS[block.kind](x, y, z, block.params)
    return result
