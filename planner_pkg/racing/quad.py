"""Vectorised racing quadrotor: N rigid bodies commanded by collective thrust and body rates.

State (per vehicle, world frame ENU, body frame FLU): position (N, 3) m, velocity (N, 3) m/s,
attitude R (N, 3, 3) body-to-world, body rates (N, 3) rad/s, collective thrust (N,) m/s^2
(mass-normalised). One physics step of ``dt`` (semi-implicit Euler, exact rotation update):

    thrust' = (thrust_cmd - thrust) / tau_f          omega' = (omega_cmd - omega) / tau_w
    v' = R e3 thrust - g e3 - R D R^T v              R' = R [omega]x

The first-order lags are integrated exactly over the step; R is advanced by Rodrigues' formula
and re-orthonormalised. Hovering level with thrust = g is an equilibrium.

Actions in [-1, 1]^4 map to commands by :func:`commands_from_actions`: body rates scale
linearly to ``max_rate_rps``; thrust is piecewise linear with hover at 0 (-1 = minimum, +1 =
maximum), so an untrained policy (mean 0) starts near hover.
"""
from __future__ import annotations

import numpy as np

__all__ = ["QuadState", "commands_from_actions", "hover_action", "step", "rotation_from_yaw",
           "rodrigues"]


class QuadState:
    """Arrays of N vehicles (see the module docstring)."""

    __slots__ = ("pos", "vel", "rot", "omega", "thrust")

    def __init__(self, n: int, gravity: float = 9.81):
        self.pos = np.zeros((n, 3))
        self.vel = np.zeros((n, 3))
        self.rot = np.tile(np.eye(3), (n, 1, 1))
        self.omega = np.zeros((n, 3))
        self.thrust = np.full(n, float(gravity))

    def copy(self) -> "QuadState":
        out = QuadState.__new__(QuadState)
        for k in self.__slots__:
            setattr(out, k, getattr(self, k).copy())
        return out


def rotation_from_yaw(yaw: np.ndarray, roll: np.ndarray = None, pitch: np.ndarray = None) -> np.ndarray:
    """(N, 3, 3) R = Rz(yaw) Ry(pitch) Rx(roll) (ZYX Euler, rad)."""
    yaw = np.asarray(yaw, dtype=np.float64)
    roll = np.zeros_like(yaw) if roll is None else np.asarray(roll, dtype=np.float64)
    pitch = np.zeros_like(yaw) if pitch is None else np.asarray(pitch, dtype=np.float64)
    cy, sy, cp, sp, cr, sr = np.cos(yaw), np.sin(yaw), np.cos(pitch), np.sin(pitch), np.cos(roll), np.sin(roll)
    r = np.empty(yaw.shape + (3, 3))
    r[..., 0, 0] = cy * cp
    r[..., 0, 1] = cy * sp * sr - sy * cr
    r[..., 0, 2] = cy * sp * cr + sy * sr
    r[..., 1, 0] = sy * cp
    r[..., 1, 1] = sy * sp * sr + cy * cr
    r[..., 1, 2] = sy * sp * cr - cy * sr
    r[..., 2, 0] = -sp
    r[..., 2, 1] = cp * sr
    r[..., 2, 2] = cp * cr
    return r


def rodrigues(w: np.ndarray) -> np.ndarray:
    """(N, 3) rotation vectors -> (N, 3, 3) rotation matrices exp([w]x)."""
    theta = np.linalg.norm(w, axis=1)
    small = theta < 1e-9
    safe = np.where(small, 1.0, theta)
    a = np.where(small, 1.0 - theta ** 2 / 6.0, np.sin(theta) / safe)
    b = np.where(small, 0.5 - theta ** 2 / 24.0, (1.0 - np.cos(theta)) / safe ** 2)
    k = np.zeros((len(w), 3, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -w[:, 2], w[:, 1], -w[:, 0]
    k[:, 1, 0], k[:, 2, 0], k[:, 2, 1] = w[:, 2], -w[:, 1], w[:, 0]
    return np.eye(3) + a[:, None, None] * k + b[:, None, None] * (k @ k)


def commands_from_actions(actions: np.ndarray, cfg):
    """(N, 4) actions in [-1, 1] (clipped) -> (thrust (N,) m/s^2, body rates (N, 3) rad/s)."""
    a = np.clip(actions, -1.0, 1.0)
    g = cfg.gravity_mps2
    up, down = cfg.max_thrust_mps2 - g, max(g - cfg.min_thrust_mps2, 0.0)
    thrust = g + np.where(a[:, 0] >= 0.0, a[:, 0] * up, a[:, 0] * down)
    rates = a[:, 1:4] * np.asarray(cfg.max_rate_rps)
    return thrust, rates


def hover_action(n: int) -> np.ndarray:
    """(n, 4) the actions that hold a level hover."""
    return np.zeros((n, 4))


def step(state: QuadState, thrust_cmd: np.ndarray, rate_cmd: np.ndarray, cfg, dt: float) -> None:
    """Advance ``state`` in place by ``dt`` seconds (module docstring)."""
    kf = 1.0 - np.exp(-dt / cfg.thrust_time_constant_s)
    kw = 1.0 - np.exp(-dt / cfg.rate_time_constant_s)
    state.thrust += (thrust_cmd - state.thrust) * kf
    omega_old = state.omega.copy()
    state.omega += (rate_cmd - state.omega) * kw
    rot = state.rot
    v_body = np.einsum("nji,nj->ni", rot, state.vel)
    drag_world = np.einsum("nij,nj->ni", rot, v_body * np.asarray(cfg.drag_per_s))
    acc = rot[:, :, 2] * state.thrust[:, None] - drag_world
    acc[:, 2] -= cfg.gravity_mps2
    state.vel += acc * dt
    state.pos += state.vel * dt
    rot = rot @ rodrigues(0.5 * (omega_old + state.omega) * dt)
    # Gram-Schmidt on the columns keeps R a rotation despite rounding
    x = rot[:, :, 0]
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    y = rot[:, :, 1] - x * np.sum(x * rot[:, :, 1], axis=1, keepdims=True)
    y = y / np.linalg.norm(y, axis=1, keepdims=True)
    state.rot = np.stack([x, y, np.cross(x, y)], axis=2)
