"""Differentiable distance from a batch of positions to the nearest surface of their worlds.

The value is ``World.signed_distance`` (obstacles, ground and ceiling; exact outside all solids).
Its gradient with respect to the position is the distance field's gradient, taken by central
differences of the same function (step ``FD_STEP_M``) in one batched call, so every primitive
the world module supports is covered without a second, hand-written derivative to keep in
sync. At a kink of the field (equidistant from two surfaces) the central difference averages
the two one-sided gradients, a valid subgradient direction for the avoidance losses.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

import autograd_core as ag
from autograd_core.autograd import Function

__all__ = ["WorldDistance", "world_distance", "distance_and_gradient", "FD_STEP_M"]

#: Central-difference step, m: far below every obstacle's size, far above float64 rounding of
#: coordinates of tens of metres (~1e-14 m).
FD_STEP_M = 1e-5

_OFFSETS = np.concatenate([np.zeros((1, 3)), np.eye(3) * FD_STEP_M, -np.eye(3) * FD_STEP_M])


def distance_and_gradient(worlds: Sequence, agent_world: np.ndarray, positions: np.ndarray, with_gradient: bool = True):
    """(B,) signed distances (m) and (B, 3) gradients (unit-length outside solids, None if not asked).

    worlds: the batch's worlds; agent_world: (B,) index of each position's world; positions:
    (B, 3) m, world ENU.
    """
    positions = np.asarray(positions, dtype=np.float64)
    b = positions.shape[0]
    dist = np.empty(b)
    grad = np.empty((b, 3)) if with_gradient else None
    for w, world in enumerate(worlds):
        idx = np.nonzero(agent_world == w)[0]
        if idx.size == 0:
            continue
        p = positions[idx]
        if not with_gradient:
            dist[idx] = world.signed_distance(p)
            continue
        probes = (p[None, :, :] + _OFFSETS[:, None, :]).reshape(-1, 3)
        d = world.signed_distance(probes).reshape(7, idx.size)
        dist[idx] = d[0]
        grad[idx] = ((d[1:4] - d[4:7]) / (2.0 * FD_STEP_M)).T
    return dist, grad


class WorldDistance(Function):
    """``positions (B, 3) -> distances (B,)``; backward multiplies by the field's gradient."""

    @staticmethod
    def forward(ctx, positions, worlds, agent_world):
        needs = ctx.needs_input_grad[0]
        dist, grad = distance_and_gradient(worlds, agent_world, positions._data, with_gradient=needs)
        ctx.field_gradient = grad
        return ag.from_numpy(dist.astype(positions._data.dtype, copy=False))

    @staticmethod
    def backward(ctx, g):
        return ag.from_numpy(g._data[:, None] * ctx.field_gradient), None, None


def world_distance(positions, worlds: Sequence, agent_world: np.ndarray):
    """Differentiable (B,) distances of ``positions`` (B, 3) Tensor to their worlds' surfaces."""
    return WorldDistance.apply(positions, list(worlds), np.asarray(agent_world))
