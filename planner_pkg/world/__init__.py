"""Obstacle worlds: primitives, geometric queries, seeded generators, file I/O and SDF export.

Plain Python and NumPy; metres, ENU (z up), ground at z = 0.

    from planner_pkg.world import load_world, generate_world
    world = generate_world("forest", seed=1)
    world.signed_distance([[0.0, 0.0, 1.0]])        # (1,) metres
    world.raycast([0, 0, 1], [[1, 0, 0]], 20.0)     # (1,) metres, inf for no hit
"""
from .generators import (GENERATOR_PARAMS, ClutteredParams, ForestParams, GatesParams, WallsParams,
                         generate_world)
from .io import WorldFormatError, load_world, save_world, world_from_dict
from .primitives import Box, Cylinder, Sphere
from .sdf_export import to_sdf
from .world import FAR_DISTANCE_M, MAX_RAY_RANGE_M, World

__all__ = [
    "World", "Cylinder", "Box", "Sphere", "load_world", "save_world", "world_from_dict",
    "generate_world", "to_sdf", "WorldFormatError", "GENERATOR_PARAMS", "ForestParams",
    "ClutteredParams", "WallsParams", "GatesParams", "FAR_DISTANCE_M", "MAX_RAY_RANGE_M",
]
