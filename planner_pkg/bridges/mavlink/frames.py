"""Frame conversions between our frames (world ENU, body FLU) and MAVLink's (world NED, body FRD).

This is the ONLY module in the code base where NED and FRD exist (DESIGN.md). Everything that
enters the bridge in ENU/FLU leaves it in NED/FRD through these functions, and the other way
round.

Conventions:
    * ENU: x east, y north, z up (REP 103).  NED: x north, y east, z down.
    * FLU: x forward, y left, z up.          FRD: x forward, y right, z down.
    * Our quaternions are ``(x, y, z, w)`` (ROS, scipy); MAVLink's are ``(w, x, y, z)``
      (``q1..q4`` of ATTITUDE_QUATERNION, ``q[4]`` of ODOMETRY).
    * A quaternion ``q_enu_flu`` rotates body FLU vectors into world ENU; ``q_ned_frd`` rotates
      body FRD vectors into world NED.
    * Yaw ENU: 0 = east, counter-clockwise positive. Yaw NED: 0 = north, clockwise positive.

Both changes of basis are rotations by pi (proper rotations, det = +1), so each is its own
inverse: ``T = [[0,1,0],[1,0,0],[0,0,-1]]`` (ENU <-> NED) and ``F = diag(1,-1,-1)``
(FLU <-> FRD). Vector functions accept (3,) or (N, 3) arrays.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

__all__ = [
    "ENU_NED",
    "FLU_FRD",
    "enu_to_ned",
    "enu_to_ned_floats",
    "ned_to_enu",
    "flu_to_frd",
    "frd_to_flu",
    "yaw_enu_to_ned",
    "yaw_ned_to_enu",
    "yaw_rate_enu_to_ned",
    "yaw_rate_ned_to_enu",
    "quaternion_enu_flu_to_ned_frd",
    "quaternion_ned_frd_to_enu_flu",
    "quaternion_to_mavlink",
    "quaternion_from_mavlink",
    "quaternion_multiply",
    "wrap_pi",
    "covariance_ned_to_enu",
    "covariance_frd_to_flu",
    "covariance_from_mavlink_urt",
    "covariance_to_mavlink_urt",
]

#: (3, 3) change of basis ENU <-> NED (its own inverse): ``v_ned = ENU_NED @ v_enu``.
ENU_NED = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
ENU_NED.setflags(write=False)
#: (3, 3) change of basis FLU <-> FRD (its own inverse): ``v_frd = FLU_FRD @ v_flu``.
FLU_FRD = np.diag([1.0, -1.0, -1.0])
FLU_FRD.setflags(write=False)

# The same two rotations as quaternions (x, y, z, w): pi about (1, 1, 0)/sqrt(2) and pi about x.
_Q_ENU_NED = np.array([math.sqrt(0.5), math.sqrt(0.5), 0.0, 0.0])
_Q_FLU_FRD = np.array([1.0, 0.0, 0.0, 0.0])


def _vectors(v, name: str) -> np.ndarray:
    arr = np.asarray(v, dtype=np.float64)
    if arr.shape[-1:] != (3,) or arr.ndim > 2:
        raise ValueError(f"{name} must have shape (3,) or (N, 3), got {arr.shape}")
    return arr


def enu_to_ned(v) -> np.ndarray:
    """World vector(s) (3,) or (N, 3) from ENU to NED: ``(x, y, z) -> (y, x, -z)``.

    Works for positions (m), velocities (m/s) and accelerations (m/s^2) alike.
    """
    arr = _vectors(v, "ENU vector")
    out = arr[..., [1, 0, 2]]  # fancy indexing copies
    out[..., 2] = 0.0 - out[..., 2]  # 0 - z, not -z: a zero stays +0.0 in logs
    return out


def enu_to_ned_floats(v) -> tuple:
    """One world vector (3,) from ENU to NED as three Python floats: the setpoint hot path,
    where numpy's per-call overhead on 3 elements costs more than the arithmetic."""
    x, y, z = v.tolist() if isinstance(v, np.ndarray) else (float(c) for c in v)
    return y, x, 0.0 - z


def ned_to_enu(v) -> np.ndarray:
    """World vector(s) (3,) or (N, 3) from NED to ENU: ``(n, e, d) -> (e, n, -d)``."""
    arr = _vectors(v, "NED vector")
    out = arr[..., [1, 0, 2]]  # fancy indexing copies
    out[..., 2] = 0.0 - out[..., 2]  # 0 - z, not -z: a zero stays +0.0 in logs
    return out


def flu_to_frd(v) -> np.ndarray:
    """Body vector(s) (3,) or (N, 3) from FLU to FRD: ``(x, y, z) -> (x, -y, -z)``.

    Also maps body angular velocities (rad/s): roll rate keeps its sign, pitch and yaw rates flip.
    """
    arr = _vectors(v, "FLU vector")
    return arr * np.array([1.0, -1.0, -1.0])


def frd_to_flu(v) -> np.ndarray:
    """Body vector(s) (3,) or (N, 3) from FRD to FLU: ``(x, y, z) -> (x, -y, -z)``."""
    arr = _vectors(v, "FRD vector")
    return arr * np.array([1.0, -1.0, -1.0])


def wrap_pi(angle: float) -> float:
    """Angle (rad) wrapped to (-pi, pi]."""
    a = math.fmod(angle + math.pi, 2.0 * math.pi)
    if a <= 0.0:
        a += 2.0 * math.pi
    return a - math.pi


def yaw_enu_to_ned(yaw_enu: float) -> float:
    """Heading (rad) from ENU (0 = east, CCW+) to NED (0 = north, CW+), wrapped to (-pi, pi].

    NaN stays NaN (an unused yaw stays unused).
    """
    if math.isnan(yaw_enu):
        return math.nan
    return wrap_pi(0.5 * math.pi - yaw_enu)


def yaw_ned_to_enu(yaw_ned: float) -> float:
    """Heading (rad) from NED (0 = north, CW+) to ENU (0 = east, CCW+), wrapped to (-pi, pi]."""
    if math.isnan(yaw_ned):
        return math.nan
    return wrap_pi(0.5 * math.pi - yaw_ned)


def yaw_rate_enu_to_ned(rate_enu: float) -> float:
    """Yaw rate (rad/s) about world up -> about world down: the sign flips (NaN stays NaN)."""
    return -rate_enu


def yaw_rate_ned_to_enu(rate_ned: float) -> float:
    """Yaw rate (rad/s) about world down -> about world up: the sign flips (NaN stays NaN)."""
    return -rate_ned


def quaternion_multiply(a, b) -> np.ndarray:
    """Hamilton product ``a * b`` of quaternions (4,) in ``(x, y, z, w)`` order."""
    ax, ay, az, aw = (float(c) for c in a)
    bx, by, bz, bw = (float(c) for c in b)
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def _unit(q, name: str) -> np.ndarray:
    arr = np.asarray(q, dtype=np.float64)
    if arr.shape != (4,):
        raise ValueError(f"{name} must have shape (4,), got {arr.shape}")
    n = float(np.linalg.norm(arr))
    if not (math.isfinite(n) and n > 1e-9):
        raise ValueError(f"{name} = {arr.tolist()} is not a rotation (zero or non-finite norm)")
    return arr / n


def quaternion_enu_flu_to_ned_frd(q_enu_flu) -> np.ndarray:
    """Attitude (4,) ``(x, y, z, w)`` body FLU -> world ENU  to  body FRD -> world NED.

    ``R_ned_frd = T @ R_enu_flu @ F``, i.e. ``q_ned_frd = q_T * q_enu_flu * q_F``. The result
    is unit-norm; its sign is not canonicalised (``q`` and ``-q`` are the same rotation).
    """
    q = _unit(q_enu_flu, "q_enu_flu")
    return quaternion_multiply(quaternion_multiply(_Q_ENU_NED, q), _Q_FLU_FRD)


def quaternion_ned_frd_to_enu_flu(q_ned_frd) -> np.ndarray:
    """Attitude (4,) ``(x, y, z, w)`` body FRD -> world NED  to  body FLU -> world ENU."""
    q = _unit(q_ned_frd, "q_ned_frd")
    return quaternion_multiply(quaternion_multiply(_Q_ENU_NED, q), _Q_FLU_FRD)


def quaternion_to_mavlink(q_xyzw) -> list:
    """Our ``(x, y, z, w)`` order to MAVLink's ``[w, x, y, z]`` (a list of 4 floats)."""
    x, y, z, w = (float(c) for c in q_xyzw)
    return [w, x, y, z]


def quaternion_from_mavlink(q_wxyz) -> np.ndarray:
    """MAVLink's ``(w, x, y, z)`` order to our ``(x, y, z, w)`` (4,) float64."""
    w, x, y, z = (float(c) for c in q_wxyz)
    return np.array([x, y, z, w])


# -------------------------------------------------------------------------------------------
# Covariances
# -------------------------------------------------------------------------------------------
def _block(matrix3: np.ndarray, n: int) -> np.ndarray:
    return np.kron(np.eye(n // 3), matrix3)


def _covariance(c, name: str) -> np.ndarray:
    arr = np.asarray(c, dtype=np.float64)
    if arr.shape not in ((3, 3), (6, 6)):
        raise ValueError(f"{name} must be (3, 3) or (6, 6), got {arr.shape}")
    return arr


def covariance_ned_to_enu(cov) -> np.ndarray:
    """World covariance (3, 3) or (6, 6) from NED to ENU (the same map works both ways).

    A (6, 6) pose covariance is ordered ``(x, y, z, rot_x, rot_y, rot_z)``; the rotation block
    is treated as small rotations about the world axes (the ROS / mavros convention), so it
    transforms with the same basis change as the position block.
    """
    c = _covariance(cov, "covariance")
    m = _block(ENU_NED, c.shape[0])
    return m @ c @ m.T


def covariance_frd_to_flu(cov) -> np.ndarray:
    """Body covariance (3, 3) or (6, 6) from FRD to FLU (same map both ways); a (6, 6) twist
    covariance is ordered ``(vx, vy, vz, wx, wy, wz)``."""
    c = _covariance(cov, "covariance")
    m = _block(FLU_FRD, c.shape[0])
    return m @ c @ m.T


_URT_ROWS, _URT_COLS = np.triu_indices(6)


def covariance_from_mavlink_urt(urt) -> Optional[np.ndarray]:
    """Full symmetric (6, 6) covariance from MAVLink's 21-element upper-right triangle
    (row-major), or None when the first element is NaN (MAVLink's "unknown")."""
    arr = np.asarray(urt, dtype=np.float64)
    if arr.shape != (21,):
        raise ValueError(f"a MAVLink covariance has 21 elements, got shape {arr.shape}")
    if math.isnan(arr[0]):
        return None
    if not np.isfinite(arr).all():
        raise ValueError("MAVLink covariance has non-finite entries after a finite first element")
    full = np.zeros((6, 6))
    full[_URT_ROWS, _URT_COLS] = arr
    full[_URT_COLS, _URT_ROWS] = arr
    return full


def covariance_to_mavlink_urt(cov: Optional[np.ndarray]) -> list:
    """MAVLink's 21-element upper-right triangle of a (6, 6) covariance; None -> NaN first."""
    if cov is None:
        return [math.nan] + [0.0] * 20
    c = _covariance(cov, "covariance")
    if c.shape != (6, 6):
        raise ValueError(f"need a (6, 6) covariance, got {c.shape}")
    return [float(v) for v in c[_URT_ROWS, _URT_COLS]]
