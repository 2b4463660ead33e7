"""Rollout worker: runs ``envs`` racing environments with the current policy and returns a batch
with GAE advantages. Plain NumPy (no autograd): the same class runs in-process or as a Ray actor
(:mod:`planner_pkg.racing.pool`).

Truncated episodes (time limit) are bootstrapped: their last reward gets ``gamma * V(s_final)``.
"""
from __future__ import annotations

import time
from typing import Dict

import numpy as np

from planner_pkg.racing.config import config_from_dict
from planner_pkg.racing.env import ACTION_DIM, RaceEnv, rng_state, set_rng_state
from planner_pkg.racing.network import CLIP_OBS, gaussian_log_prob, mlp_forward

__all__ = ["RolloutWorker", "compute_gae"]


def compute_gae(rewards, values, dones, last_values, gamma: float, lam: float):
    """Generalised advantage estimation (Schulman et al. 2016) over (T, N) arrays.

    ``dones[t]`` ends the episode after step t (no bootstrap across it; truncation bootstraps
    are already folded into ``rewards``). Returns (advantages, returns), each (T, N).
    """
    t_len = rewards.shape[0]
    adv = np.zeros_like(rewards)
    last = np.zeros_like(last_values)
    for t in range(t_len - 1, -1, -1):
        next_v = last_values if t == t_len - 1 else values[t + 1]
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_v * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv, adv + values


class RolloutWorker:
    """``envs`` vehicles on random tracks, seeded by (seed, worker_id)."""

    def __init__(self, config: dict, worker_id: int, envs: int, seed: int):
        self.cfg = config_from_dict(config)
        self.worker_id = int(worker_id)
        self.env = RaceEnv(self.cfg.env, int(envs), np.random.default_rng([seed, worker_id, 0]))
        self.action_rng = np.random.default_rng([seed, worker_id, 1])
        self.obs = self.env.observe()
        self.ep_return = np.zeros(envs)
        self.ep_gates = np.zeros(envs, dtype=np.int64)

    def get_state(self) -> dict:
        """The worker's resume point as plain data: its environments, its action noise stream
        and its running episode sums (:meth:`set_state` continues exactly where this left)."""
        return {"env": self.env.get_state(), "action_rng": rng_state(self.action_rng), "obs": self.obs.copy(),
                "ep_return": self.ep_return.copy(), "ep_gates": self.ep_gates.copy()}

    def set_state(self, state) -> None:
        """Restore :meth:`get_state` (of a worker with the same configuration and environment
        count); ValueError if it does not fit."""
        try:
            arrays = {k: np.asarray(state[k]) for k in ("obs", "ep_return", "ep_gates")}
            env, noise = state["env"], state["action_rng"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"rollout worker state: missing {exc}") from None
        for k, cur in (("obs", self.obs), ("ep_return", self.ep_return), ("ep_gates", self.ep_gates)):
            if arrays[k].shape != cur.shape or arrays[k].dtype != cur.dtype:
                raise ValueError(f"rollout worker state: {k} is {arrays[k].dtype}{list(arrays[k].shape)}, "
                                 f"expected {cur.dtype}{list(cur.shape)}")
        self.env.set_state(env)
        set_rng_state(self.action_rng, noise)
        self.obs, self.ep_return, self.ep_gates = (arrays[k].copy() for k in ("obs", "ep_return", "ep_gates"))

    def _norm(self, params, obs):
        return np.clip((obs - params["obs_mean"]) / params["obs_std"], -CLIP_OBS, CLIP_OBS)

    def collect(self, params: Dict[str, object], steps: int) -> Dict[str, np.ndarray]:
        """``steps`` control steps of every environment with the policy ``params``
        (:func:`~planner_pkg.racing.network.numpy_params`). BLAS is pinned to one thread: these
        small GEMMs run ~10x slower threaded on a loaded CPU (measured here), and a Ray actor gets
        one CPU."""
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            return self._collect(params, steps)

    def _collect(self, params, steps):
        t0 = time.perf_counter()
        gamma, lam = self.cfg.ppo.gamma, self.cfg.ppo.gae_lambda
        n, d = self.env.n, self.env.obs_dim
        obs_buf = np.zeros((steps, n, d))
        act_buf = np.zeros((steps, n, ACTION_DIM))
        logp_buf = np.zeros((steps, n))
        val_buf = np.zeros((steps, n))
        rew_buf = np.zeros((steps, n))
        done_buf = np.zeros((steps, n))
        std = np.exp(params["log_std"])
        ep_returns, ep_gates, ep_crashes, speeds = [], [], [], []
        t_policy = t_env = 0.0
        for t in range(steps):
            ta = time.perf_counter()
            x = self._norm(params, self.obs)
            mean = mlp_forward(params["actor"], x)
            value = mlp_forward(params["critic"], x)[:, 0]
            action = mean + std * self.action_rng.standard_normal(mean.shape)
            tb = time.perf_counter()
            obs, reward, term, trunc, info = self.env.step(action)
            tc = time.perf_counter()
            t_policy += tb - ta
            t_env += tc - tb
            obs_buf[t], act_buf[t], val_buf[t] = self.obs, action, value
            logp_buf[t] = gaussian_log_prob(action, mean, params["log_std"])
            speeds.append(np.linalg.norm(self.env.state.vel, axis=1).mean())
            if trunc.any():
                final_v = mlp_forward(params["critic"], self._norm(params, info["final_obs"][trunc]))[:, 0]
                reward = reward.copy()
                reward[trunc] += gamma * final_v
            rew_buf[t] = reward
            finished = term | trunc
            done_buf[t] = finished
            self.ep_return += reward
            self.ep_gates += info["passed_gate"]
            for i in np.flatnonzero(finished):
                ep_returns.append(self.ep_return[i])
                ep_gates.append(self.ep_gates[i])
                ep_crashes.append(float(info["crash"][i] != 0))
            self.ep_return[finished] = 0.0
            self.ep_gates[finished] = 0
            self.obs = obs
        last_v = mlp_forward(params["critic"], self._norm(params, self.obs))[:, 0]
        adv, ret = compute_gae(rew_buf, val_buf, done_buf, last_v, gamma, lam)
        t_end = time.perf_counter()
        return {
            "obs": obs_buf.reshape(-1, d), "actions": act_buf.reshape(-1, ACTION_DIM),
            "logp": logp_buf.reshape(-1), "values": val_buf.reshape(-1), "advantages": adv.reshape(-1),
            "returns": ret.reshape(-1),
            "stats": {"episodes": len(ep_returns), "return_sum": float(np.sum(ep_returns)),
                      "gates_sum": float(np.sum(ep_gates)), "crashes": float(np.sum(ep_crashes)),
                      "speed_sum": float(np.sum(speeds)), "speed_n": len(speeds), "reward_sum": float(rew_buf.sum()),
                      "steps": steps * n, "t_policy_s": t_policy, "t_env_s": t_env, "t_total_s": t_end - t0},
        }
