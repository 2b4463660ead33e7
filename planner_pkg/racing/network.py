"""Actor-critic networks (autograd_core) and their NumPy twins for the rollout workers.

Actor: normalised observation -> MLP (tanh) -> action mean (4); a state-independent log
standard deviation parameter makes the Gaussian policy. Critic: the same input -> MLP -> value.
Both read observations normalised by :class:`ObsNormalizer` (running mean / variance, clipped to
+-``CLIP_OBS``), whose statistics travel with the weights (checkpoint and exported model).

The rollout workers never import autograd: :func:`numpy_params` flattens the networks into a
dict of float32 arrays (what Ray ships to the actors) and :func:`mlp_forward` evaluates it.
"""
from __future__ import annotations

import math
from typing import Dict, Sequence

import numpy as np

__all__ = ["CLIP_OBS", "ObsNormalizer", "ActorCritic", "numpy_params", "mlp_forward", "gaussian_log_prob"]

CLIP_OBS = 5.0
_LOG_2PI = math.log(2 * math.pi)


class ObsNormalizer:
    """Running mean and variance of observations (parallel Welford / Chan et al. merge)."""

    def __init__(self, dim: int):
        self.mean = np.zeros(dim)
        self.var = np.ones(dim)
        self.count = 1e-4

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.mean.size)
        bm, bv, bn = x.mean(axis=0), x.var(axis=0), x.shape[0]
        delta = bm - self.mean
        tot = self.count + bn
        self.mean = self.mean + delta * bn / tot
        self.var = (self.var * self.count + bv * bn + delta ** 2 * self.count * bn / tot) / tot
        self.count = tot

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var + 1e-8)

    def normalize(self, x: np.ndarray) -> np.ndarray:
        return np.clip((x - self.mean) / self.std, -CLIP_OBS, CLIP_OBS)

    def state(self) -> Dict[str, np.ndarray]:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": np.array([self.count])}

    def load(self, state) -> None:
        mean, var, count = (np.asarray(state[k], dtype=np.float64) for k in ("mean", "var", "count"))
        if mean.shape != self.mean.shape or var.shape != self.var.shape or count.size != 1:
            raise ValueError(f"observation statistics of shape {mean.shape} do not fit observations of "
                             f"{self.mean.size} values")
        if not (np.isfinite(mean).all() and np.isfinite(var).all() and (var >= 0).all() and count[0] > 0):
            raise ValueError("observation statistics hold non-finite or negative values")
        self.mean, self.var, self.count = mean, var, float(count.reshape(-1)[0])


def _mlp(sizes: Sequence[int], out_gain: float):
    import autograd_core as ag

    layers = []
    for i in range(len(sizes) - 1):
        lin = ag.nn.Linear(sizes[i], sizes[i + 1])
        last = i == len(sizes) - 2
        ag.nn.init.orthogonal_(lin.weight, gain=out_gain if last else math.sqrt(2.0))
        ag.nn.init.zeros_(lin.bias)
        layers.append(lin)
        if not last:
            layers.append(ag.nn.Tanh())
    return ag.nn.Sequential(*layers)


def _module_base():
    import autograd_core as ag

    return ag.nn.Module


class ActorCritic(_module_base()):
    """``actor``: MLP obs -> mean (A); ``log_std`` (A,); ``critic``: MLP obs -> value (1)."""

    def __init__(self, obs_dim: int, action_dim: int, cfg):
        import autograd_core as ag

        super().__init__()
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.actor = _mlp([obs_dim, *cfg.actor_hidden, action_dim], 0.01)
        self.critic = _mlp([obs_dim, *cfg.critic_hidden, 1], 1.0)
        self.log_std = ag.nn.Parameter(ag.full((action_dim,), float(cfg.init_log_std)))

    def forward(self, obs_n):
        """Normalised observations (B, D) -> (mean (B, A), value (B,))."""
        return self.actor(obs_n), self.critic(obs_n).reshape(-1)


def _linears(seq):
    return [m for m in seq if hasattr(m, "weight")]


def numpy_params(net: ActorCritic, normalizer: ObsNormalizer) -> Dict[str, object]:
    """The networks as plain arrays: {"actor": [(W, b), ...], "critic": [...], "log_std", "obs_mean",
    "obs_std"} (float64; what the rollout workers evaluate with :func:`mlp_forward`)."""
    def layers(seq):
        return [(m.weight.detach().numpy().astype(np.float64), m.bias.detach().numpy().astype(np.float64))
                for m in _linears(seq)]

    return {"actor": layers(net.actor), "critic": layers(net.critic),
            "log_std": net.log_std.detach().numpy().astype(np.float64),
            "obs_mean": normalizer.mean.copy(), "obs_std": normalizer.std.copy()}


def mlp_forward(layers, x: np.ndarray) -> np.ndarray:
    """Evaluate an MLP of :func:`numpy_params` (tanh between layers) on (B, D) inputs."""
    for i, (w, b) in enumerate(layers):
        x = x @ w.T + b
        if i < len(layers) - 1:
            x = np.tanh(x)
    return x


def gaussian_log_prob(actions: np.ndarray, mean: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """Log density of a diagonal Gaussian, summed over the last axis."""
    z = (actions - mean) / np.exp(log_std)
    return -0.5 * np.sum(z * z, axis=-1) - np.sum(log_std) - 0.5 * actions.shape[-1] * _LOG_2PI
