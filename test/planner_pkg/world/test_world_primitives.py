"""Obstacle primitives: validation, exact float storage, bounding boxes, immutability."""
import dataclasses
import math

import numpy as np
import pytest

from planner_pkg.world import Box, Cylinder, Sphere, World


def test_values_are_stored_as_plain_floats_and_compare_equal():
    a = Box(np.array([1, 2, 3]), [1, 1, 1], np.float32(0.5))
    b = Box((1.0, 2.0, 3.0), (1.0, 1.0, 1.0), float(np.float32(0.5)))
    assert a == b and hash(a) == hash(b)
    assert type(a.center[0]) is float and type(a.yaw) is float
    assert Box((0, 0, 0), (1, 1, 1)).yaw == 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.yaw = 1.0


@pytest.mark.parametrize("make, message", [
    (lambda: Cylinder((0, 0), 0, 1), "key 'radius' must be a positive finite number, got 0"),
    (lambda: Cylinder((0, float("nan")), 1, 1), "key 'center' must be 2 finite numbers"),
    (lambda: Box((0, 0, 0), (1, -2, 3)),
     "key 'size' must be 3 positive finite numbers, got (1, -2, 3)"),
    (lambda: Box((0, 0, 0), (1, 1, 1), math.inf), "key 'yaw' must be a finite number"),
    (lambda: Box((0, 0, 0), (1, 1, 1), True), "key 'yaw'"),
    (lambda: Sphere((0, 0, 0), "1"), "key 'radius'"),
    (lambda: Sphere((0, 0), 1), "key 'center' must be 3"),
])
def test_invalid_values(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert message in str(info.value)


def test_aabb_contains_the_shape():
    rng = np.random.default_rng(3)
    for obstacle in (Cylinder((1, -1), 0.5, 2.0), Sphere((0, 1, 2), 0.7),
                     Box((1, 2, 1.5), (2.0, 0.5, 1.0), 0.9)):
        low, high = obstacle.aabb()
        world = World(low - 5, high + 5, [obstacle], ground=False)
        points = rng.uniform(low - 1, high + 1, (4000, 3))
        inside = world.signed_distance(points) <= 0
        assert inside.any()
        assert np.all((points[inside] >= low - 1e-12) & (points[inside] <= high + 1e-12))
    low, high = Box((0, 0, 0), (2, 1, 1), math.pi / 2).aabb()
    np.testing.assert_allclose(high, [0.5, 1.0, 0.5])
