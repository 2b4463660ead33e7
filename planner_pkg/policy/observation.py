"""What the policy network sees, computed the same way in training and on board.

* Depth image: z-depth (m, REP 118: +inf = no return, -inf = too near, NaN = invalid) ->
  inverse depth ``scale / clamp(d, near, far) - offset`` (paper: 3 / clamp(d, 0.3, 24) - 0.6)
  -> max-pooled to the network's ``image_hw`` (the nearest obstacle in each cell wins, because
  inverse depth grows as depth shrinks). +inf and NaN read as ``far``, -inf as ``near``.
* State vector (STATE_DIM = 10): velocity (3) and target velocity (3) in the yaw frame, the body
  up axis in the yaw frame (3), the safety margin (1). The yaw frame is world ENU rotated by the
  vehicle's heading about z, so the policy is invariant to the direction of flight.
* Target velocity (:func:`target_velocity`): towards the goal at the commanded speed, slowing
  down near it to ``min(speed, gain * distance, sqrt(2 * decel * distance))`` (the square-root
  term, a constant-deceleration braking curve, only where ``decel`` > 0).
* Camera geometry for training: body attitude from the specific-thrust direction and the heading
  (the point mass tilts as a quadrotor does when it accelerates), the camera mounted on the body
  with a pitch (positive = down), pinhole rays through pixel centres (as ``CameraIntrinsics``).
"""
from __future__ import annotations

import numpy as np

from planner_pkg.policy.config import ObservationConfig, STATE_DIM

__all__ = ["inverse_depth", "max_pool", "depth_observation", "state_vector", "target_velocity", "yaw_rotate",
           "attitude_from_thrust_batch", "optical_rays", "camera_rotation_batch", "heading_to"]

# Columns: the optical frame's axes (x right, y down, z forward) in the body FLU frame
# (the same matrix as planner_pkg.sim.camera.OPTICAL_IN_FLU).
_OPTICAL_IN_FLU = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


def inverse_depth(depth, cfg: ObservationConfig) -> np.ndarray:
    """Inverse-depth transform of a z-depth array (any shape, metres), float32."""
    d = np.asarray(depth, dtype=np.float32)
    d = np.clip(np.where(np.isnan(d), np.float32(cfg.far_m), d), cfg.near_m, cfg.far_m)
    return (np.float32(cfg.inv_depth_scale) / d - np.float32(cfg.inv_depth_offset)).astype(np.float32, copy=False)


def max_pool(image: np.ndarray, out_hw) -> np.ndarray:
    """Max-pool the last two axes (H, W) down to ``out_hw`` (exact integer factors only)."""
    h, w = image.shape[-2:]
    oh, ow = out_hw
    if h % oh or w % ow:
        raise ValueError(f"a {w}x{h} depth image cannot be pooled to the policy's {ow}x{oh} input: "
                         f"the camera size must be an integer multiple of it")
    fh, fw = h // oh, w // ow
    if fh == 1 and fw == 1:
        return image
    lead = image.shape[:-2]
    return image.reshape(*lead, oh, fh, ow, fw).max(axis=(-3, -1))


def depth_observation(depth, cfg: ObservationConfig) -> np.ndarray:
    """(..., H, W) z-depth in metres -> (..., rows, cols) float32 network image (no noise)."""
    return max_pool(inverse_depth(depth, cfg), cfg.image_hw)


def yaw_rotate(vectors: np.ndarray, yaw: np.ndarray, inverse: bool = True) -> np.ndarray:
    """Rotate (B, 3) world vectors into the yaw frame (``inverse=True``) or back, yaw (B,) rad."""
    c, s = np.cos(yaw), np.sin(yaw)
    if inverse:
        s = -s
    x, y = vectors[:, 0], vectors[:, 1]
    out = np.empty_like(vectors)
    out[:, 0] = c * x - s * y
    out[:, 1] = s * x + c * y
    out[:, 2] = vectors[:, 2]
    return out


def state_vector(velocity, target_velocity, up_axis, yaw, margin) -> np.ndarray:
    """(B, STATE_DIM) float32 state input from world-frame (B, 3) velocity (m/s), target velocity
    (m/s), body up axis (unit), heading yaw (B,) rad and safety margin (B,) m."""
    velocity = np.atleast_2d(np.asarray(velocity, dtype=np.float64))
    b = velocity.shape[0]
    yaw = np.broadcast_to(np.asarray(yaw, dtype=np.float64), (b,))
    out = np.empty((b, STATE_DIM), dtype=np.float32)
    out[:, 0:3] = yaw_rotate(velocity, yaw)
    out[:, 3:6] = yaw_rotate(np.atleast_2d(np.asarray(target_velocity, dtype=np.float64)), yaw)
    out[:, 6:9] = yaw_rotate(np.atleast_2d(np.asarray(up_axis, dtype=np.float64)), yaw)
    out[:, 9] = np.broadcast_to(np.asarray(margin, dtype=np.float64), (b,))
    return out


def target_velocity(position, goal, speed, approach_gain: float, approach_decel: float = 0.0) -> np.ndarray:
    """(B, 3) m/s: from ``position`` (B, 3) m towards ``goal`` (B, 3) m at ``speed`` (B,) m/s, slowing
    near the goal to ``min(speed, approach_gain * d, sqrt(2 approach_decel d))`` at distance ``d``
    (the braking curve only where ``approach_decel`` > 0, m/s^2). The linear term alone brakes
    exponentially from ``speed / gain`` metres out (slow at high speed: 2 s from 7 m/s at 1 1/s);
    the braking curve starts at ``speed^2 / (2 decel)`` and is the faster profile at high speed."""
    position = np.atleast_2d(np.asarray(position, dtype=np.float64))
    delta = np.atleast_2d(np.asarray(goal, dtype=np.float64)) - position
    dist = np.sqrt(np.einsum("bk,bk->b", delta, delta))
    mag = np.minimum(np.asarray(speed, dtype=np.float64), approach_gain * dist)
    if approach_decel > 0:
        mag = np.minimum(mag, np.sqrt(2.0 * approach_decel * dist))
    return delta * (mag / np.maximum(dist, 1e-9))[:, None]


def heading_to(delta: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Heading (B,) rad of the horizontal part of ``delta`` (B, 3); ``fallback`` where it is ~0."""
    h = np.hypot(delta[:, 0], delta[:, 1])
    return np.where(h > 1e-6, np.arctan2(delta[:, 1], delta[:, 0]), fallback)


def attitude_from_thrust_batch(thrust: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """(B, 3, 3) body-to-world rotations: body z along ``thrust`` (B, 3), body x at heading
    ``yaw`` (B,) rad projected onto the plane normal to z (as the simulator's point mass)."""
    norm = np.linalg.norm(thrust, axis=1, keepdims=True)
    b3 = np.where(norm > 1e-6, thrust / np.maximum(norm, 1e-12), np.array([0.0, 0.0, 1.0]))
    heading = np.stack([np.cos(yaw), np.sin(yaw), np.zeros_like(yaw)], axis=1)
    b2 = np.cross(b3, heading)
    n2 = np.linalg.norm(b2, axis=1, keepdims=True)
    fallback = np.stack([-np.sin(yaw), np.cos(yaw), np.zeros_like(yaw)], axis=1)
    b2 = np.where(n2 > 1e-6, b2 / np.maximum(n2, 1e-12), fallback)
    b1 = np.cross(b2, b3)
    return np.stack([b1, b2, b3], axis=2)


def optical_rays(hfov_rad: np.ndarray, image_hw) -> np.ndarray:
    """(B, H*W, 3) optical-frame rays (z = 1) through pixel centres, row-major, for per-agent
    horizontal fields of view (B,) rad; square pixels, centred principal point."""
    h, w = image_hw
    f = 0.5 * w / np.tan(0.5 * np.asarray(hfov_rad, dtype=np.float64))  # (B,)
    u = np.arange(w) - 0.5 * (w - 1)
    v = np.arange(h) - 0.5 * (h - 1)
    rays = np.empty((f.shape[0], h, w, 3))
    rays[..., 0] = u[None, None, :] / f[:, None, None]
    rays[..., 1] = v[None, :, None] / f[:, None, None]
    rays[..., 2] = 1.0
    return rays.reshape(f.shape[0], h * w, 3)


def camera_rotation_batch(body_to_world: np.ndarray, pitch_rad: np.ndarray) -> np.ndarray:
    """(B, 3, 3) optical-to-world rotations for cameras pitched down by ``pitch_rad`` (B,)."""
    c, s = np.cos(pitch_rad), np.sin(pitch_rad)
    ry = np.zeros((c.shape[0], 3, 3))  # rotation about body +y (positive tilts the axis down)
    ry[:, 0, 0], ry[:, 0, 2], ry[:, 1, 1], ry[:, 2, 0], ry[:, 2, 2] = c, s, 1.0, -s, c
    return body_to_world @ ry @ _OPTICAL_IN_FLU
