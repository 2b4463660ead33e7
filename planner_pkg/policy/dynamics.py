"""Batched differentiable point-mass quadrotor: the training dynamics of the learned policy.

Per agent, SI units, world ENU (the model of "Back to Newton's Laws", Zhang et al. 2024):

    f' = k (u + g e3 - f)                   f: specific thrust (thrust / mass), m/s^2
    v' = f - g e3 - D (v - w) + n           D = diag(drag), w: wind, n: OU disturbance
    p' = v

``u`` is the commanded acceleration (gravity excluded, 0 = hover) after the action delay.
Each step of length ``dt`` (jittered per agent) is integrated as

    f+ = uf + (f - uf) alpha                uf = u + g e3, alpha = exp(-k dt)   (exact lag)
    v+ = beta v + eta (fbar - g e3 + D w + n)                                    (exact drag)
    p+ = p + dt (v + v+) / 2                                                     (trapezoid)

with ``beta = exp(-D dt)``, ``eta = (1 - beta) / D`` and ``fbar = uf + (f - uf) gamma``,
``gamma = (1 - alpha) / (k dt)``, the mean thrust over the step. So the thrust lag is exact, the
velocity is exact for a constant thrust (drag alone, gravity alone: free fall), the position is
exact for constant acceleration and second-order accurate otherwise.

One step is ONE autograd node (:class:`PointMassStep`): forward and backward are a dozen NumPy
expressions on (B, 3) arrays instead of ~40 small-tensor ops, which is what makes a 150-step
rollout + backward cheap (see ``benchmarks/policy.py``). Its backward also applies the paper's
gradient decay: the gradient reaching the previous state (p, v, f) is scaled by
``decay = grad_decay_per_s ** dt``, the gradient to the command ``u`` is not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import numpy as np

import autograd_core as ag
from autograd_core.autograd import Function

from planner_pkg.policy.config import DynamicsConfig

__all__ = ["StepCoefficients", "step_coefficients", "PointMassStep", "point_mass_step", "EpisodeDynamics",
           "PointMassBatch", "sample_episode_dynamics"]


@dataclass(frozen=True)
class StepCoefficients:
    """Per-agent constants of one step (no gradient flows into them). Shapes broadcast to (B, 3).

    alpha, gamma: (B, 1) lag factors; beta, eta: (B, 3) drag factors; half_dt: (B, 1) s;
    forcing: (B, 3) m/s^2, ``D w + n - g e3``; decay: (B, 1) gradient decay of this step.
    """

    alpha: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    eta: np.ndarray
    half_dt: np.ndarray
    forcing: np.ndarray
    decay: np.ndarray
    gravity: float


def step_coefficients(dt, lag_rate, drag, wind, disturbance, gravity: float, grad_decay_per_s: float = 1.0):
    """:class:`StepCoefficients` for step lengths ``dt`` (B, 1) s, lag ``k`` (B, 1) 1/s, drag (B, 3)
    1/s (> 0), wind (B, 3) m/s and disturbance (B, 3) m/s^2."""
    dt = np.asarray(dt, dtype=np.float64)
    lag_rate = np.asarray(lag_rate, dtype=np.float64)
    drag = np.asarray(drag, dtype=np.float64)
    kdt = lag_rate * dt
    alpha = np.exp(-kdt)
    gamma = -np.expm1(-kdt) / kdt
    ddt = drag * dt
    beta = np.exp(-ddt)
    eta = -np.expm1(-ddt) / drag
    forcing = drag * np.asarray(wind, dtype=np.float64) + np.asarray(disturbance, dtype=np.float64)
    forcing = forcing.copy()
    forcing[..., 2] -= gravity
    decay = np.power(float(grad_decay_per_s), dt)
    return StepCoefficients(alpha, gamma, beta, eta, 0.5 * dt, forcing, decay, float(gravity))


def _forward(p, v, f, u, c: StepCoefficients):
    uf = u.copy()
    uf[..., 2] += c.gravity
    df = f - uf
    f_new = uf + df * c.alpha
    fbar = uf + df * c.gamma
    fbar += c.forcing
    v_new = c.beta * v
    v_new += c.eta * fbar
    p_new = v + v_new
    p_new *= c.half_dt
    p_new += p
    return p_new, v_new, f_new


class PointMassStep(Function):
    """``(p, v, f, u) -> (p+, v+, f+)``, all (B, 3); the step constants ride along as ``coeffs``."""

    @staticmethod
    def forward(ctx, p, v, f, u, coeffs: StepCoefficients):
        ctx.coeffs = coeffs
        ctx.u_dtype = u._data.dtype
        outs = _forward(p._data, v._data, f._data, u._data.astype(p._data.dtype, copy=False), coeffs)
        return tuple(ag.from_numpy(o) for o in outs)

    @staticmethod
    def backward(ctx, gp, gv, gf):
        c = ctx.coeffs
        gp, gv, gf = gp._data, gv._data, gf._data
        gvt = c.half_dt * gp
        gvt += gv  # total gradient on v+ (through v+ itself and through p+)
        gfbar = c.eta * gvt
        grad_u = (1.0 - c.alpha) * gf
        grad_u += (1.0 - c.gamma) * gfbar
        need = ctx.needs_input_grad
        grad_p = gp * c.decay if need[0] else None
        grad_v = None
        if need[1]:
            grad_v = c.half_dt * gp
            grad_v += c.beta * gvt
            grad_v *= c.decay
        grad_f = None
        if need[2]:
            grad_f = c.alpha * gf
            grad_f += c.gamma * gfbar
            grad_f *= c.decay
        wrap = ag.from_numpy
        return (None if grad_p is None else wrap(grad_p), None if grad_v is None else wrap(grad_v),
                None if grad_f is None else wrap(grad_f), wrap(grad_u.astype(ctx.u_dtype, copy=False)) if need[3] else None, None)


def point_mass_step(p, v, f, u, coeffs: StepCoefficients):
    """One fused step (autograd Tensors in, Tensors out); see the module docstring."""
    return PointMassStep.apply(p, v, f, u, coeffs)


@dataclass(frozen=True)
class EpisodeDynamics:
    """Per-agent parameters fixed for one episode (domain randomisation).

    lag_rate: (B, 1) 1/s; drag: (B, 3) 1/s; wind: (B, 3) m/s; delay: (B,) int steps.
    """

    lag_rate: np.ndarray
    drag: np.ndarray
    wind: np.ndarray
    delay: np.ndarray

    @property
    def batch(self) -> int:
        return self.drag.shape[0]


def sample_episode_dynamics(cfg: DynamicsConfig, batch: int, rng: np.random.Generator) -> EpisodeDynamics:
    """Draw per-agent lag, drag, wind and action delay from the configured ranges."""
    lag = rng.uniform(*cfg.lag_rate_per_s, size=(batch, 1))
    drag = np.empty((batch, 3))
    drag[:, :2] = rng.uniform(*cfg.drag_xy_per_s, size=(batch, 1))
    drag[:, 2] = rng.uniform(*cfg.drag_z_per_s, size=batch)
    wind = np.zeros((batch, 3))
    wind[:, :2] = rng.normal(0.0, cfg.wind_std_mps, size=(batch, 2))
    lo, hi = cfg.action_delay_steps
    delay = rng.integers(lo, hi + 1, size=batch)
    return EpisodeDynamics(lag, drag, wind, delay)


class PointMassBatch:
    """A batch of point masses stepped with commands from a policy (autograd state).

    ``position``, ``velocity``, ``thrust`` are (B, 3) float64 Tensors carrying the graph of the
    rollout; ``step(u)`` appends the command ``u`` (B, 3) m/s^2 (gravity excluded) to the delay
    line, draws this step's jittered ``dt`` and OU disturbance from ``rng`` and advances one
    fused step. Agents start at rest in hover (f = g e3) at ``start`` (B, 3) m.
    """

    def __init__(self, cfg: DynamicsConfig, episode: EpisodeDynamics, start, rng: np.random.Generator):
        self.cfg = cfg
        self.episode = episode
        self.rng = rng
        b = episode.batch
        start = np.asarray(start, dtype=np.float64)
        if start.shape != (b, 3):
            raise ValueError(f"start must be ({b}, 3) metres, got {start.shape}")
        self.position = ag.tensor(start)
        self.velocity = ag.zeros(b, 3, dtype=ag.float64)
        hover = np.zeros((b, 3))
        hover[:, 2] = cfg.gravity_mps2
        self.thrust = ag.tensor(hover)
        self.disturbance = np.zeros((b, 3))
        # OU: stationary std sigma; discretised exactly per step below
        self.time_s = np.zeros(b)
        self.last_dt = np.full((b, 1), cfg.dt_s)
        max_delay = int(episode.delay.max()) if b else 0
        zero = ag.zeros(b, 3, dtype=ag.float64)
        self._history: List = [zero] * (max_delay + 1)  # newest last; hover before the start
        self._delay_masks = [ag.tensor((episode.delay == k).astype(np.float64)[:, None]) for k in range(max_delay + 1)]
        self._uniform_delay: Optional[int] = int(episode.delay[0]) if b and (episode.delay == episode.delay[0]).all() else None

    def delayed_command(self, u):
        """Push ``u`` (B, 3) and return the command each agent applies now (its delay ago)."""
        self._history.append(u)
        self._history.pop(0)
        if self._uniform_delay is not None:
            return self._history[-1 - self._uniform_delay]
        out = None
        for k, mask in enumerate(self._delay_masks):
            term = self._history[-1 - k] * mask
            out = term if out is None else out + term
        return out

    def step(self, u) -> None:
        cfg, ep, rng = self.cfg, self.episode, self.rng
        b = ep.batch
        dt = cfg.dt_s * (1.0 + rng.uniform(-cfg.dt_jitter, cfg.dt_jitter, size=(b, 1)))
        if cfg.ou_sigma_mps2 > 0:
            a = np.exp(-cfg.ou_theta_per_s * dt)
            self.disturbance = a * self.disturbance + cfg.ou_sigma_mps2 * np.sqrt(1.0 - a * a) * rng.standard_normal((b, 3))
        coeffs = step_coefficients(dt, ep.lag_rate, ep.drag, ep.wind, self.disturbance, cfg.gravity_mps2,
                                   cfg.grad_decay_per_s)
        command = self.delayed_command(u)
        self.position, self.velocity, self.thrust = point_mass_step(
            self.position, self.velocity, self.thrust, command, coeffs)
        self.time_s += dt[:, 0]
        self.last_dt = dt
