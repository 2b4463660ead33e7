"""Seeded obstacle-world generators: ``generate_world(kind, seed, **params)``.

Kinds and their parameters (all documented with units on the params dataclasses):
- ``forest``: vertical trunks, EGO-Planner style (``ForestParams``).
- ``cluttered``: spheres, yawed boxes and trunks, optional ceiling (``ClutteredParams``).
- ``walls``: walls across the path with windows (``WallsParams``).
- ``gates``: a closed track of square racing gates (``GatesParams``).

Each generator draws from ``np.random.default_rng(seed)`` only, so the same kind, seed and
parameters give an identical World on every machine and NumPy version that keeps the
``default_rng`` (PCG64) streams stable. Bad parameters raise ValueError naming the parameter.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .gen_common import check_seed, make_params
from .gen_scatter import ClutteredParams, ForestParams, cluttered, forest
from .gen_structures import GatesParams, WallsParams, gates, walls
from .world import World

__all__ = ["generate_world", "GENERATOR_PARAMS", "ForestParams", "ClutteredParams",
           "WallsParams", "GatesParams"]

_GENERATORS = {
    "forest": (ForestParams, forest),
    "cluttered": (ClutteredParams, cluttered),
    "walls": (WallsParams, walls),
    "gates": (GatesParams, gates),
}

#: World kind -> its parameters dataclass (field defaults are the generator defaults).
GENERATOR_PARAMS = {kind: entry[0] for kind, entry in _GENERATORS.items()}


def generate_world(kind: str, seed: int, **params: Any) -> World:
    """A random World of ``kind`` ("forest", "cluttered", "walls" or "gates").

    seed: non-negative int; the same seed and params give an identical World.
    params: overrides of the kind's parameters dataclass fields (see ``GENERATOR_PARAMS``).
    The returned World's bounds contain every obstacle.
    """
    if kind not in _GENERATORS:
        raise ValueError(f"unknown world kind {kind!r} (one of: {', '.join(_GENERATORS)})")
    seed = check_seed(seed)
    params_cls, build = _GENERATORS[kind]
    return build(make_params(params_cls, kind, params), np.random.default_rng(seed))
