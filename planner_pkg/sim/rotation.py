"""Rotation helpers for the simulator: quaternions ``(x, y, z, w)``, SO(3) hat/vee maps.

Hand-written rather than ``scipy.spatial.transform.Rotation`` because these run at the
control rate on single rotations, where scipy's per-call overhead (~10 us) dominates.
"""
from __future__ import annotations

import math

import numpy as np

from planner_pkg.types import quaternion_from_yaw, quaternion_to_matrix, yaw_from_quaternion

__all__ = [
    "quaternion_to_matrix",
    "quaternion_from_yaw",
    "yaw_from_quaternion",
    "matrix_to_quaternion",
    "quaternion_multiply",
    "rotation_about_y",
    "cross3",
    "hat",
    "vee",
    "wrap_angle",
]


def matrix_to_quaternion(R: np.ndarray) -> np.ndarray:
    """Unit quaternion (4,) ``(x, y, z, w)`` with ``w >= 0`` of a rotation matrix (3, 3).

    Shepperd's method: branch on the largest diagonal term so no square root of a small
    number is taken (stable for every rotation, including 180 deg ones).
    """
    m = np.asarray(R, dtype=np.float64)
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    if tr > 0.0:
        s = 2.0 * math.sqrt(1.0 + tr)
        q = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s]
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = [(m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = [(m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s, (m[1, 0] - m[0, 1]) / s]
    q = np.array(q)
    q /= np.linalg.norm(q)
    return -q if q[3] < 0 else q


def quaternion_multiply(a, b) -> np.ndarray:
    """Hamilton product ``a * b`` of quaternions ``(x, y, z, w)``: apply ``b`` first, then ``a``."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def rotation_about_y(angle_rad: float) -> np.ndarray:
    """(3, 3) right-handed rotation by ``angle_rad`` about +y."""
    c, s = math.cos(angle_rad), math.sin(angle_rad)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def cross3(a, b) -> np.ndarray:
    """Cross product (3,) of two 3-vectors; np.cross costs ~10 us per call at this size."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def hat(v) -> np.ndarray:
    """Skew-symmetric (3, 3) matrix with ``hat(a) @ b == cross(a, b)``."""
    x, y, z = v
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def vee(M: np.ndarray) -> np.ndarray:
    """Inverse of :func:`hat` for a skew-symmetric (3, 3) matrix: returns (3,)."""
    return np.array([M[2, 1], M[0, 2], M[1, 0]])


def wrap_angle(angle_rad: float) -> float:
    """Angle wrapped to [-pi, pi), rad."""
    return (angle_rad + math.pi) % (2.0 * math.pi) - math.pi
