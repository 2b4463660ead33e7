"""Training losses of the depth policy, over a whole rollout at once (T steps x B agents).

Every term is a scalar Tensor, averaged over steps and agents; :func:`total_loss` weights them
with :class:`~planner_pkg.policy.config.LossConfig`. Shapes: positions/velocities/commands
(T, B, 3), clearances (T, B) in metres (signed distance - vehicle radius - safety margin).

* velocity: smooth-L1 of (the velocity averaged over the last ``window`` steps - the target
  velocity), per element: the average lets the policy swerve briefly without penalty, as long
  as it keeps its mean course (Zhang et al. 2024). Below the knee ``beta`` the penalty is
  quadratic, so its pull falls with the error: a constant opposing pull p (weight w) holds a
  steady error of p * beta / w, which a smaller knee shrinks.
* velocity_estimate: MSE of the auxiliary velocity estimate (yaw frame) against the truth.
* avoidance: closing speed x squared hinge, ``max(c, 1) * relu(range - clearance)^2`` with
  ``c = -(d clearance / dt)`` m/s: near obstacles it costs more the faster they approach. With
  ``constant_weight`` the weight ``max(c, 1)`` is not differentiated (Zhang et al.'s code): the
  gradient then only asks for more clearance, not for a lower closing speed.
* collision: ``softplus(-sharpness * clearance)``: a smooth barrier, ~0 beyond a few cm.
* ray_clearance: squared hinge ``relu(range - clearance)^2`` of the clearance at probe points
  ahead of the vehicle along its horizontal flight direction (fixed distances, not times). The
  probes move with the direction only (the position is not differentiated here), so the term's
  gradient asks the vehicle to *turn* away from what lies ahead and never to slow down: braking
  for a trunk leaves it as large as before, a swerve removes it. The clearance hinge alone points back
  along the path for an obstacle dead ahead (its gradient has no lateral part there), which
  trains braking rather than swerving (docs/policy.md).
* acceleration, jerk: squared command norm, squared per-step change of the command.
* altitude: squared excursion outside the altitude band (stay above the ground, below the sky).
"""
from __future__ import annotations

from typing import Dict

import numpy as np

import autograd_core as ag
import autograd_core.nn.functional as F

from planner_pkg.policy.config import LossConfig

__all__ = ["moving_average", "velocity_loss", "velocity_estimate_loss", "avoidance_loss", "collision_loss",
           "ray_probes", "ray_clearance_loss", "acceleration_loss", "jerk_loss", "altitude_loss", "total_loss",
           "LOSS_TERMS"]

#: Names of the loss terms, as in LossConfig and the training CSV.
LOSS_TERMS = ("velocity", "velocity_estimate", "avoidance", "collision", "ray_clearance", "acceleration", "jerk",
              "altitude")


def moving_average(x, window: int):
    """Trailing mean over ``window`` steps along axis 0 of ``x`` (T, ...) (fewer at the start)."""
    t = x.shape[0]
    window = max(1, min(int(window), t))
    c = ag.cumsum(x, dim=0)
    if window < t:
        zeros = ag.zeros((window,) + tuple(x.shape[1:]), dtype=x.dtype)
        c = c - ag.cat([zeros, c[: t - window]], dim=0)
    counts = np.minimum(np.arange(1, t + 1), window).reshape((t,) + (1,) * (x.dim() - 1))
    return c / ag.tensor(counts, dtype=x.dtype)


def velocity_loss(velocity, target, window: int, beta: float = 1.0):
    """velocity (T, B, 3) Tensor, target (T, B, 3) array or Tensor, m/s; ``beta`` (m/s): the
    smooth-L1's knee, below which the penalty is quadratic (its pull shrinks with the error)."""
    return F.smooth_l1_loss(moving_average(velocity, window), ag.as_tensor(target), beta=beta)


def velocity_estimate_loss(estimate, truth):
    """estimate (T, B, 3) Tensor, truth (T, B, 3) array, m/s (yaw frame)."""
    return F.mse_loss(estimate, ag.tensor(np.asarray(truth), dtype=estimate.dtype))


def avoidance_loss(clearance, dt, range_m: float, constant_weight: bool = False):
    """clearance (T, B) Tensor, m; dt (T, B) array of step lengths, s. constant_weight: the
    closing-speed weight is a constant (no gradient through it; module docstring)."""
    closing = (clearance[:-1] - clearance[1:]) / ag.tensor(np.asarray(dt)[1:])
    weight = ag.clamp_min(closing, 1.0)
    if constant_weight:
        weight = weight.detach()
    return (weight * F.relu(range_m - clearance[1:]) ** 2).mean()


def collision_loss(clearance, sharpness: float):
    """clearance (T, B) Tensor, m."""
    return F.softplus(clearance * (-sharpness)).mean()


def ray_probes(position, velocity, distances_m, min_speed_mps: float = 0.5, lookahead_s=None):
    """Probe points (K, B, 3) Tensor ahead of ``position`` (B, 3) along the horizontal direction of
    ``velocity`` (B, 3) Tensors, at each of ``distances_m`` (K,) metres, and their (B,) weights:
    ``min(|v_xy| / min_speed_mps, 1)``, not differentiated (the direction of a vehicle at rest means
    nothing). Only the direction is differentiated (the probes turn with the velocity): the speed
    cancels out of it, and the position is taken as given, since moving it back along the path (by
    flying slower earlier) would otherwise also pay.

    ``lookahead_s`` (K,) seconds, optional: probe k lies at ``max(distances_m[k], |v_xy| x
    lookahead_s[k])``, so a fast vehicle looks as far ahead in time as it needs to swerve. That
    distance is computed from the speed's value only (not differentiated): the gradient still turns
    the probes and never asks for less speed."""
    vxy = velocity[:, 0:2]
    speed2 = (vxy * vxy).sum(dim=1, keepdim=True)
    direction = vxy / ag.sqrt(speed2 + 1e-6)
    zeros = ag.zeros((position.shape[0], 1), dtype=position.dtype)
    heading = ag.cat([direction, zeros], dim=1)
    base = position.detach()
    speed = np.sqrt(speed2.detach().numpy()[:, 0])
    if lookahead_s is None:
        probes = ag.stack([base + heading * float(d) for d in distances_m])
    else:
        if len(lookahead_s) != len(distances_m):
            raise ValueError(f"one look-ahead time per probe distance: {len(lookahead_s)} and {len(distances_m)}")
        reach = [np.maximum(float(d), speed * float(t))[:, None] for d, t in zip(distances_m, lookahead_s)]
        probes = ag.stack([base + heading * ag.tensor(r, dtype=position.dtype) for r in reach])
    weights = np.minimum(speed / float(min_speed_mps), 1.0)
    return probes, weights


def ray_clearance_loss(clearance, weights, range_m: float):
    """clearance (T, K, B) Tensor at the probes, m; weights (T, B) array (see :func:`ray_probes`)."""
    hinge = F.relu(range_m - clearance) ** 2
    w = ag.tensor(np.asarray(weights)[:, None, :], dtype=clearance.dtype)
    return (hinge * w).mean()


def acceleration_loss(command):
    """command (T, B, 3) Tensor, m/s^2."""
    return (command * command).sum(dim=2).mean()


def jerk_loss(command):
    """command (T, B, 3) Tensor, m/s^2; per-step differences (not divided by dt)."""
    diff = command[1:] - command[:-1]
    return (diff * diff).sum(dim=2).mean()


def altitude_loss(position, band):
    """position (T, B, 3) Tensor, m; band (low, high) m."""
    z = position[:, :, 2]
    return (F.relu(band[0] - z) ** 2 + F.relu(z - band[1]) ** 2).mean()


def total_loss(terms: Dict[str, object], cfg: LossConfig):
    """Weighted sum of the ``terms`` (name -> scalar Tensor) with the weights in ``cfg``."""
    total = None
    for name in LOSS_TERMS:
        weight = getattr(cfg, name)
        if weight == 0 or name not in terms:
            continue
        term = terms[name] * weight
        total = term if total is None else total + term
    return total
