"""The PPO update (Schulman et al. 2017) in autograd_core, on a batch from the rollout workers.

Loss per minibatch (advantages normalised per minibatch):

    L = -mean(min(ratio A, clip(ratio, 1 - eps, 1 + eps) A))        clipped surrogate
        + value_coef * mean((V - R)^2)                                value loss
        - entropy_coef * mean(H[pi])                                  entropy bonus

with ratio = exp(log pi(a|s) - log pi_old(a|s)). Actor and critic gradients are clipped to
``max_grad_norm`` separately (a large value error cannot shrink the policy step). Epochs stop
early when the approximate KL of the last minibatch exceeds ``target_kl``.
"""
from __future__ import annotations

import math
from typing import Dict

import numpy as np

import autograd_core as ag

__all__ = ["ppo_update", "PPO_STATS"]

PPO_STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac", "epochs_run")
_LOG_2PI = math.log(2 * math.pi)


def ppo_update(net, opt, batch: Dict[str, np.ndarray], obs_n: np.ndarray, cfg, rng: np.random.Generator) -> dict:
    """One iteration's epochs of minibatch updates; returns mean statistics (PPO_STATS)."""
    n = obs_n.shape[0]
    mb = max(1, n // cfg.minibatches)
    obs_t = obs_n.astype(np.float32)
    act = batch["actions"].astype(np.float32)
    old_logp = batch["logp"].astype(np.float32)
    adv_all = batch["advantages"].astype(np.float32)
    ret = batch["returns"].astype(np.float32)
    actor_params = list(net.actor.parameters()) + [net.log_std]
    critic_params = list(net.critic.parameters())
    sums = {k: 0.0 for k in PPO_STATS}
    count = 0
    epochs_run = 0
    for _ in range(cfg.epochs):
        perm = rng.permutation(n)
        kl_epoch = []
        for start in range(0, n - mb + 1, mb):
            idx = perm[start:start + mb]
            x = ag.tensor(obs_t[idx])
            a = ag.tensor(act[idx])
            adv = adv_all[idx]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            adv_t = ag.tensor(adv.astype(np.float32))
            mean, value = net(x)
            log_std = net.log_std
            z = (a - mean) / log_std.exp()
            logp = -0.5 * (z * z).sum(dim=1) - log_std.sum() - 0.5 * a.shape[1] * _LOG_2PI
            log_ratio = logp - ag.tensor(old_logp[idx])
            ratio = log_ratio.exp()
            surr = ag.minimum(ratio * adv_t, ag.clamp(ratio, 1.0 - cfg.clip, 1.0 + cfg.clip) * adv_t)
            policy_loss = -surr.mean()
            value_loss = ((value - ag.tensor(ret[idx])) ** 2).mean()
            entropy = log_std.sum() + 0.5 * a.shape[1] * (1.0 + _LOG_2PI)
            loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
            opt.zero_grad()
            loss.backward()
            ag.nn.utils.clip_grad_norm_(actor_params, cfg.max_grad_norm)
            ag.nn.utils.clip_grad_norm_(critic_params, cfg.max_grad_norm)
            opt.step()
            lr_np = log_ratio.detach().numpy()
            kl = float(np.mean(np.exp(lr_np) - 1.0 - lr_np))
            kl_epoch.append(kl)
            sums["policy_loss"] += float(policy_loss.item())
            sums["value_loss"] += float(value_loss.item())
            sums["entropy"] += float(entropy.item())
            sums["approx_kl"] += kl
            sums["clip_frac"] += float(np.mean(np.abs(np.exp(lr_np) - 1.0) > cfg.clip))
            count += 1
        epochs_run += 1
        if cfg.target_kl > 0 and kl_epoch and kl_epoch[-1] > cfg.target_kl:
            break
    out = {k: sums[k] / max(count, 1) for k in PPO_STATS if k != "epochs_run"}
    out["epochs_run"] = float(epochs_run)
    return out
