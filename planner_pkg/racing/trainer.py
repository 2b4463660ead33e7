"""PPO training loop for gate racing: rollout workers (in-process or Ray actors), the autograd_core
learner, checkpoints, scalars CSV and the exported model.

Files, next to ``out`` (``M.agm``): ``M.ckpt`` (checkpoint, ``autograd_core.save``: data only),
``M.csv`` (one row per iteration: the scalars of :data:`HISTORY_COLUMNS`, TensorBoard-style
``step,tag,...`` flattened to columns) and ``M.agm`` itself (the exported policy, rewritten at
every checkpoint so a running job always leaves a usable model).

Determinism: the networks' initialisation (``autograd_core.manual_seed(seed)``), the workers'
tracks, starts and action noise (seeded by (seed, worker)) and the minibatch order (seeded by
(seed, iteration)) derive from ``train.seed``; two runs with the same config and worker count give
the same weights.

Resume: the checkpoint holds everything the next iteration reads: the weights, the optimiser
(Adam moments and step counts), the observation statistics, the iteration counter (learning-rate
schedule, minibatch order), autograd_core's random state, the history and every rollout worker's
state (its environments mid-episode, their tracks and random streams, the action noise stream,
the running episode sums). Training k iterations, stopping and resuming to N gives the weights
of N iterations straight, bit for bit, when the resume uses the same worker count, environments
per worker and ``env`` settings (test/planner_pkg/racing/test_resume.py); otherwise the workers start fresh
episodes (a warning says why). A resume takes ``--config``'s settings, so one with another
reward, track generator or PPO setting is a fine-tune (the network and the observation layout
must stay those of the checkpoint).
"""
from __future__ import annotations

import csv
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Union

import numpy as np

import autograd_core as ag

from planner_pkg.racing.config import ConfigError, RaceConfig, config_from_dict
from planner_pkg.racing.env import ACTION_DIM, obs_dim
from planner_pkg.racing.evaluate import eval_tracks, fly_tracks, summarize
from planner_pkg.racing.export import export_racer
from planner_pkg.racing.network import ActorCritic, ObsNormalizer, mlp_forward, numpy_params
from planner_pkg.racing.pool import WorkerPool
from planner_pkg.racing.ppo import PPO_STATS, ppo_update

__all__ = ["train", "TrainResult", "CHECKPOINT_FORMAT", "HISTORY_COLUMNS", "CheckpointError", "load_checkpoint",
           "mean_policy"]

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "planner_pkg.racing.checkpoint/1"
HISTORY_COLUMNS = ("iteration", "env_steps", "wall_s", "iter_s", "collect_s", "env_s", "policy_s", "update_s",
                   "steps_per_s", "lr", "episodes", "mean_return", "gates_per_episode", "crash_rate",
                   "mean_speed_mps", *PPO_STATS, "eval_success_rate", "eval_mean_speed_mps", "eval_gates_frac")


class CheckpointError(ValueError):
    """Not a readable racing checkpoint, or its contents are inconsistent (names the file)."""


@dataclass
class TrainResult:
    iteration: int
    iterations_run: int
    wall_s: float
    history: List[Dict[str, float]]
    paths: Dict[str, Path]
    mode: str


def paths_for(out: Union[str, Path]) -> Dict[str, Path]:
    out = Path(out)
    return {"model": out, "checkpoint": out.with_suffix(".ckpt"), "csv": out.with_suffix(".csv")}


def mean_policy(params):
    """The deterministic (mean) policy of :func:`numpy_params` as ``act(obs) -> actions``."""
    def act(obs):
        x = np.clip((obs - params["obs_mean"]) / params["obs_std"], -5.0, 5.0)
        return np.clip(mlp_forward(params["actor"], x), -1.0, 1.0)
    return act


def _to_tensors(obj):
    """NumPy arrays inside ``obj`` as autograd_core tensors (what ``ag.save`` stores), dtype kept."""
    if isinstance(obj, np.ndarray):
        return ag.from_numpy(np.ascontiguousarray(obj))
    if isinstance(obj, dict):
        return {k: _to_tensors(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_tensors(v) for v in obj]
    return obj


def _to_arrays(obj):
    """The inverse of :func:`_to_tensors`."""
    if isinstance(obj, ag.Tensor):
        return obj.detach().numpy().copy()
    if isinstance(obj, dict):
        return {k: _to_arrays(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_arrays(v) for v in obj]
    return obj


def _save(path: Path, iteration: int, cfg: RaceConfig, net, opt, norm: ObsNormalizer, history, workers: int,
          rollout_states: List[dict]):
    table = np.array([[row.get(c, math.nan) for c in HISTORY_COLUMNS] for row in history], dtype=np.float64)
    st = norm.state()
    ag.save({"format": CHECKPOINT_FORMAT, "iteration": iteration, "config": cfg.to_dict(), "workers": workers,
             "model": net.state_dict(), "optimizer": opt.state_dict(),
             "normalizer": {k: ag.from_numpy(v.astype(np.float64)) for k, v in st.items()},
             "autograd_rng": ag.get_rng_state(),
             "rollout": {"workers": workers, "envs_per_worker": cfg.train.envs_per_worker,
                         "states": _to_tensors(rollout_states)},
             "history_columns": list(HISTORY_COLUMNS),
             "history": ag.tensor(table.reshape(-1, len(HISTORY_COLUMNS)))}, str(path))


def _exact_resume(ck: dict, cfg: RaceConfig, workers: int, where: str) -> Optional[List[dict]]:
    """The checkpoint's rollout worker states when this run can continue them exactly, else None
    (with a warning saying why: the workers then start fresh episodes)."""
    ro = ck.get("rollout")
    why = None
    if not isinstance(ro, dict) or not isinstance(ro.get("states"), list):
        why = "it holds no rollout worker state (written by an older version)"
    elif ro.get("workers") != workers or ro.get("envs_per_worker") != cfg.train.envs_per_worker:
        why = (f"it was written by {ro.get('workers')} worker(s) of {ro.get('envs_per_worker')} environments, "
               f"this run has {workers} of {cfg.train.envs_per_worker}")
    elif ck["config"].env != cfg.env:
        why = "the env settings changed"
    if why is not None:
        logger.warning("resuming %s with fresh episodes, not an exact continuation: %s", where, why)
        return None
    return _to_arrays(ro["states"])


def load_checkpoint(path: Union[str, Path]) -> dict:
    """Read and check a racing checkpoint; returns its dict (``config`` as a RaceConfig)."""
    where = str(path)
    try:
        ck = ag.load(where)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read checkpoint {where!r}: {exc}") from None
    if not isinstance(ck, dict) or ck.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{where} is not a racing checkpoint (expected format {CHECKPOINT_FORMAT!r})")
    for k in ("iteration", "config", "model", "optimizer", "normalizer", "history_columns", "history"):
        if k not in ck:
            raise CheckpointError(f"checkpoint {where!r}: missing {k!r}")
    try:
        ck["config"] = config_from_dict(ck["config"])
    except ConfigError as exc:
        raise CheckpointError(f"checkpoint {where!r}: its configuration is invalid: {exc}") from None
    it = ck["iteration"]
    if isinstance(it, bool) or not isinstance(it, int) or it < 0:
        raise CheckpointError(f"checkpoint {where!r}: iteration must be a non-negative integer, got {it!r}")
    for name, t in ck["model"].items():
        if not isinstance(t, ag.Tensor) or not np.isfinite(t.detach().numpy()).all():
            raise CheckpointError(f"checkpoint {where!r}: weight {name!r} is not a finite tensor (diverged run?)")
    if list(ck["history_columns"]) != list(HISTORY_COLUMNS) or tuple(ck["history"].shape) != (it, len(HISTORY_COLUMNS)):
        raise CheckpointError(f"checkpoint {where!r}: its history table does not match {len(HISTORY_COLUMNS)} "
                              f"columns x {it} iterations")
    return ck


def _write_csv(path: Path, history) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HISTORY_COLUMNS)
        for row in history:
            w.writerow([("" if not math.isfinite(v) else f"{v:.6g}") if isinstance(v, float) else v
                        for v in (row.get(c, math.nan) for c in HISTORY_COLUMNS)])
    tmp.replace(path)


def train(cfg: RaceConfig, out: Union[str, Path], workers: int = 1, ray_address: str = "local",
          resume: Optional[Union[str, Path]] = None, stop_after: Optional[int] = None, progress: bool = True,
          ray_init_kwargs: Optional[dict] = None, in_process: bool = False) -> TrainResult:
    """Train (or continue) a racing policy; see the module docstring for the files written."""
    from threadpoolctl import threadpool_limits

    paths = paths_for(out)
    paths["model"].parent.mkdir(parents=True, exist_ok=True)
    ag.manual_seed(cfg.train.seed)
    d = obs_dim(cfg.env)
    net = ActorCritic(d, ACTION_DIM, cfg.network)
    opt = ag.optim.Adam(net.parameters(), lr=cfg.ppo.lr)
    norm = ObsNormalizer(d)
    history: List[Dict[str, float]] = []
    start_it = 0
    rollout_states: Optional[List[dict]] = None
    if resume is not None:
        ck = load_checkpoint(resume)
        saved = ck["config"]
        if saved.network != cfg.network or saved.env.gate_obs != cfg.env.gate_obs:
            raise CheckpointError(f"checkpoint {str(resume)!r} holds a network of {saved.network} seeing "
                                  f"{saved.env.gate_obs} gates; --config asks for {cfg.network} seeing "
                                  f"{cfg.env.gate_obs}: resume with the same network and env.gate_obs")
        changed = [k for k in ("env", "ppo") if getattr(saved, k) != getattr(cfg, k)]
        if changed:
            logger.warning("resuming with changed %s settings (a fine-tune): the weights, optimiser and "
                           "observation statistics continue from the checkpoint", " and ".join(changed))
        net = ActorCritic(d, ACTION_DIM, cfg.network)
        opt = ag.optim.Adam(net.parameters(), lr=cfg.ppo.lr)
        try:
            net.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            norm.load({k: v.numpy() for k, v in ck["normalizer"].items()})
        except (KeyError, RuntimeError, TypeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint {str(resume)!r} does not fit its network: {exc}") from None
        if "autograd_rng" in ck:
            try:
                ag.set_rng_state(ck["autograd_rng"])
            except (TypeError, ValueError) as exc:
                raise CheckpointError(f"checkpoint {str(resume)!r}: bad autograd_rng: {exc}") from None
        rollout_states = _exact_resume(ck, cfg, workers, repr(str(resume)))
        start_it = ck["iteration"]
        history = [dict(zip(HISTORY_COLUMNS, (float(v) for v in row))) for row in ck["history"].numpy()]
        if start_it >= cfg.train.iterations:
            raise ValueError(f"checkpoint {str(resume)!r} is at iteration {start_it}, train.iterations is "
                             f"{cfg.train.iterations}: nothing to do (raise train.iterations to continue)")
    end_it = cfg.train.iterations if stop_after is None else min(cfg.train.iterations, start_it + stop_after)
    # a resume that cannot continue the workers' episodes draws fresh ones (not those of iteration 0)
    seed = cfg.train.seed + (7919 * start_it if rollout_states is None else 0)
    env_steps = int(history[-1]["env_steps"]) if history else 0
    t_start = time.perf_counter()
    wall0 = history[-1]["wall_s"] if history else 0.0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=end_it - start_it, desc="race train", unit="it", dynamic_ncols=True)
    eval_set = eval_tracks(cfg.train.eval_tracks, cfg.env.track) if cfg.train.eval_every else []
    with threadpool_limits(limits=1), WorkerPool(cfg.to_dict(), workers, cfg.train.envs_per_worker, seed,
                                                 ray_address, ray_init_kwargs, in_process) as pool:
        logger.info("race train: %d worker(s) (%s), %d envs each, %d steps per iteration", workers, pool.mode,
                    cfg.train.envs_per_worker, cfg.train.steps)
        if rollout_states is not None:
            try:
                pool.load_states(rollout_states)
            except ValueError as exc:
                raise CheckpointError(f"checkpoint {str(resume)!r}: its rollout worker states do not fit: {exc}") \
                    from None
        it = start_it
        for it in range(start_it, end_it):
            t0 = time.perf_counter()
            frac = it / max(cfg.train.iterations, 1)
            lr = cfg.ppo.lr * (1.0 - (1.0 - cfg.ppo.lr_final_frac) * frac)
            for g in opt.param_groups:
                g["lr"] = lr
            params = numpy_params(net, norm)
            batches = pool.collect(params, cfg.train.steps)
            t1 = time.perf_counter()
            batch = {k: np.concatenate([b[k] for b in batches]) for k in batches[0] if k != "stats"}
            stats = {k: sum(b["stats"][k] for b in batches) for k in batches[0]["stats"]}
            upd = ppo_update(net, opt, batch, norm.normalize(batch["obs"]), cfg.ppo,
                             np.random.default_rng([cfg.train.seed, 7, it]))
            norm.update(batch["obs"])
            t2 = time.perf_counter()
            env_steps += int(stats["steps"])
            eps = max(stats["episodes"], 1)
            row = {"iteration": it + 1, "env_steps": env_steps, "iter_s": t2 - t0, "collect_s": t1 - t0,
                   "env_s": stats["t_env_s"], "policy_s": stats["t_policy_s"], "update_s": t2 - t1,
                   "steps_per_s": stats["steps"] / max(t2 - t0, 1e-9), "lr": lr, "episodes": stats["episodes"],
                   "mean_return": stats["return_sum"] / eps if stats["episodes"] else math.nan,
                   "gates_per_episode": stats["gates_sum"] / eps if stats["episodes"] else math.nan,
                   "crash_rate": stats["crashes"] / eps if stats["episodes"] else math.nan,
                   "mean_speed_mps": stats["speed_sum"] / max(stats["speed_n"], 1), **upd}
            if cfg.train.eval_every and ((it + 1) % cfg.train.eval_every == 0 or it + 1 == cfg.train.iterations):
                s = summarize(fly_tracks(mean_policy(numpy_params(net, norm)), eval_set, cfg.env, laps=2))
                row.update(eval_success_rate=s["success_rate"], eval_mean_speed_mps=s["mean_speed_mps"],
                           eval_gates_frac=s["gates_frac"])
            row["wall_s"] = wall0 + time.perf_counter() - t_start
            history.append(row)
            last = it + 1 == end_it
            if (it + 1) % cfg.train.log_every == 0 or last:
                _write_csv(paths["csv"], history)
            if (it + 1) % cfg.train.checkpoint_every == 0 or last:
                _save(paths["checkpoint"], it + 1, cfg, net, opt, norm, history, workers, pool.states())
                export_racer(net, norm, cfg, paths["model"])
            if bar is not None:
                bar.set_postfix(gates=f"{row['gates_per_episode']:.2f}", crash=f"{row['crash_rate']:.2f}",
                                sps=f"{row['steps_per_s']:.0f}",
                                eval=f"{row.get('eval_success_rate', math.nan):.2f}")
                bar.update(1)
            else:
                logger.info("it %d: %s", it + 1, {k: round(v, 4) for k, v in row.items()})
        mode = pool.mode
    if bar is not None:
        bar.close()
    return TrainResult(iteration=end_it, iterations_run=end_it - start_it, wall_s=time.perf_counter() - t_start,
                       history=history, paths=paths, mode=mode)
