"""Rotation helpers against scipy."""
import math

import numpy as np
from scipy.spatial.transform import Rotation

from planner_pkg.sim.rotation import cross3, hat, matrix_to_quaternion, quaternion_multiply, vee, wrap_angle


def test_matrix_to_quaternion_round_trips_including_half_turns():
    rotations = list(Rotation.random(50, random_state=2)) + [
        Rotation.from_euler("x", math.pi),
        Rotation.from_euler("y", math.pi),
        Rotation.from_euler("z", math.pi),
        Rotation.from_rotvec([math.pi / math.sqrt(2), math.pi / math.sqrt(2), 0.0]),
        Rotation.identity(),
    ]
    for r in rotations:
        q = matrix_to_quaternion(r.as_matrix())
        assert q[3] >= 0 and abs(np.linalg.norm(q) - 1.0) < 1e-12
        np.testing.assert_allclose(Rotation.from_quat(q).as_matrix(), r.as_matrix(), atol=1e-12)


def test_quaternion_multiply_composes_like_scipy():
    a, b = Rotation.random(2, random_state=4)
    np.testing.assert_allclose(
        Rotation.from_quat(quaternion_multiply(a.as_quat(), b.as_quat())).as_matrix(), (a * b).as_matrix(), atol=1e-12
    )


def test_hat_vee_cross_and_wrap():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=3), rng.normal(size=3)
    np.testing.assert_allclose(hat(a) @ b, np.cross(a, b), atol=1e-15)
    np.testing.assert_allclose(cross3(a, b), np.cross(a, b), atol=1e-15)
    np.testing.assert_allclose(vee(hat(a)), a)
    assert wrap_angle(3 * math.pi / 2) == -math.pi / 2 and wrap_angle(math.pi) == -math.pi
