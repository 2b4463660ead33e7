"""Training loop: AdamW + cosine decay through the differentiable point mass, with checkpoints.

``train(cfg, out)`` writes, next to the model file ``out`` (e.g. ``model.agm``):

* ``model.ckpt``: checkpoint after every ``checkpoint_every`` iterations and at the end
  (``autograd_core.save``: data only, written atomically, so an interrupted run never leaves a
  half-written file): weights, optimiser and scheduler state, the configuration, the history;
* ``model.csv``: one row per iteration (losses, training success rate, lr, grad norm, time,
  and the periodic evaluation's success rate where one ran); ``model.png``: its curves;
* ``model.agm``: the exported policy (``policy.export``) at the end.

Reproducible: the weights come from ``manual_seed(train.seed)`` and every iteration's
randomness (worlds, starts, randomisation, noise) from ``SeedSequence([train.seed, iteration])``,
so ``--resume model.ckpt`` continues exactly where an uninterrupted run would be.
"""
from __future__ import annotations

import logging
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

import numpy as np

import autograd_core as ag
from autograd_core.nn.utils import clip_grad_norm_
from autograd_core.optim import AdamW
from autograd_core.optim.lr_scheduler import CosineAnnealingLR

from planner_pkg.policy.checkpoint import (CHECKPOINT_FORMAT, HISTORY_COLUMNS, CheckpointError, load_checkpoint,
                                           restore_training, save_checkpoint)
from planner_pkg.policy.config import PolicyConfig, config_from_dict
from planner_pkg.policy.env import sample_episode
from planner_pkg.policy.export import LoadedPolicy, export_policy, policy_graph
from planner_pkg.policy.losses import LOSS_TERMS
from planner_pkg.policy.network import PolicyNet
from planner_pkg.policy.rollout import run_rollout

__all__ = ["TrainResult", "train", "output_paths", "CHECKPOINT_FORMAT", "HISTORY_COLUMNS", "build_network",
           "load_checkpoint", "CheckpointError"]

logger = logging.getLogger(__name__)

#: Evaluation worlds during training start here (the final test set starts at world 0).
VALIDATION_FIRST_WORLD = 100_000


@dataclass
class TrainResult:
    """What :func:`train` did: iterations run now, total, the output paths and the history."""

    iterations_run: int
    iteration: int
    paths: Dict[str, Path]
    history: List[Dict[str, float]] = field(default_factory=list)
    wall_s: float = 0.0


def output_paths(out: Union[str, Path]) -> Dict[str, Path]:
    """The files a run writes for model file ``out``: model, checkpoint, csv, png."""
    out = Path(out)
    return {"model": out, "checkpoint": out.with_suffix(".ckpt"), "csv": out.with_suffix(".csv"),
            "png": out.with_suffix(".png")}


def build_network(cfg: PolicyConfig) -> PolicyNet:
    """The network of ``cfg``, initialised from ``train.seed``."""
    ag.manual_seed(cfg.train.seed)
    return PolicyNet(cfg.network, cfg.observation)


def _write_csv(path: Path, history: List[Dict[str, float]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(",".join(HISTORY_COLUMNS) + "\n")
        for row in history:
            vals = [row.get(c, math.nan) for c in HISTORY_COLUMNS]
            fh.write(",".join("" if (isinstance(v, float) and math.isnan(v)) else f"{v:.6g}" for v in vals) + "\n")
    tmp.replace(path)


def _write_png(path: Path, history: List[Dict[str, float]]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed: no loss plot (pip install matplotlib)")
        return False
    it = np.array([r["iteration"] for r in history])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name in ("total", *LOSS_TERMS):
        vals = np.array([r.get(name, math.nan) for r in history])
        if np.all(vals > 0):  # False for a term that is off (NaN) or zero somewhere
            ax1.plot(it, vals, label=name, lw=1.5 if name == "total" else 0.8)
    ax1.set_yscale("log")
    ax1.set_xlabel("iteration")
    ax1.set_title("training losses")
    ax1.legend(fontsize=7)
    ax2.plot(it, [r["success_rate"] for r in history], label="training: collision-free rollouts", lw=0.8)
    ev = [(r["iteration"], r["eval_success_rate"]) for r in history if not math.isnan(r.get("eval_success_rate", math.nan))]
    if ev:
        ax2.plot(*zip(*ev), "o-", label="closed-loop evaluation: success")
    ax2.set_ylim(0, 1)
    ax2.set_xlabel("iteration")
    ax2.set_title("success rate")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
    return True


def _in_memory_policy(net, cfg: PolicyConfig) -> LoadedPolicy:
    return LoadedPolicy(model=policy_graph(net, cfg).runtime(), config=cfg, path="<training>")


def _progress(total: int, initial: int, enabled: bool):
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, unit="it", dynamic_ncols=True)


def train(
    cfg: PolicyConfig,
    out: Union[str, Path],
    resume: Optional[Union[str, Path]] = None,
    stop_after: Optional[int] = None,
    progress: bool = True,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
    init_from: Optional[Union[str, Path]] = None,
    widen: bool = False,
) -> TrainResult:
    """Train a policy with ``cfg`` and export it to ``out`` (module docstring).

    resume: a checkpoint to continue from (its configuration must equal ``cfg`` except for
    ``train.iterations``). stop_after: run at most this many iterations now, then checkpoint
    and return without exporting (a time-boxed run; resume later). init_from: an exported model
    (``.agm``) of the same network shape whose weights start the run instead of ``train.seed``'s
    initialisation (a warm start / fine-tune; fresh optimiser and schedule). Not with ``resume``:
    a checkpoint already holds the weights. widen: with ``init_from``, ``cfg``'s network may be
    wider than the model's (more channels, a larger hidden size); the model's weights fill its first
    units so it starts with the model's exact outputs (``export.load_weights_from_model``).
    """
    tc = cfg.train
    paths = output_paths(out)
    paths["model"].parent.mkdir(parents=True, exist_ok=True)
    ag.set_num_threads(tc.num_threads)
    net = build_network(cfg)
    if init_from is not None:
        if resume is not None:
            raise ValueError("give either a checkpoint to resume or a model to start from (--init-from), not both")
        from planner_pkg.policy.export import load_weights_from_model

        n = load_weights_from_model(net, init_from, widen=widen)
        log(f"initialised {n} weight tensors from {init_from}"
            + (f" (widened to channels {list(cfg.network.channels)}, hidden {cfg.network.hidden} where smaller)"
               if widen else ""))
    elif widen:
        raise ValueError("widen needs a model to start from (--init-from)")
    opt = AdamW(net.parameters(), lr=tc.lr, weight_decay=tc.weight_decay)
    sched = CosineAnnealingLR(opt, T_max=tc.iterations, eta_min=tc.lr_min)
    history: List[Dict[str, float]] = []
    start = 0
    if resume is not None:
        ckpt = load_checkpoint(resume)
        saved = config_from_dict(ckpt["config"])
        if saved.replace(train={"iterations": tc.iterations}) != cfg:
            raise CheckpointError(f"checkpoint {resume} was trained with a different configuration; resume with the "
                                  "same config file (only train.iterations may change)")
        if ckpt["iteration"] > tc.iterations:
            raise CheckpointError(f"checkpoint {resume} is at iteration {ckpt['iteration']}, beyond the "
                                  f"{tc.iterations} iterations asked for; raise train.iterations (--iterations)")
        start, history = restore_training(ckpt, resume, net, opt, sched)
        if saved.train.iterations != tc.iterations:  # a longer (or shorter) schedule from here on
            sched.T_max = tc.iterations
        log(f"resumed from {resume} at iteration {start}")
    end = tc.iterations if stop_after is None else min(tc.iterations, start + stop_after)
    wall0 = time.perf_counter()
    wall_base = history[-1]["wall_s"] if history else 0.0
    bar = _progress(tc.iterations, start, progress)
    skipped = 0
    it = start
    try:
        for it in range(start, end):
            t0 = time.perf_counter()
            rng = np.random.default_rng(np.random.SeedSequence([tc.seed, it]))
            episode = sample_episode(cfg, tc.batch_size, rng)
            net.train()
            result = run_rollout(net, episode, cfg, rng, tc.steps)
            opt.zero_grad()
            lr = opt.param_groups[0]["lr"]
            total = float(result.total.item())
            if math.isfinite(total):
                result.total.backward()
                norm = float(clip_grad_norm_(net.parameters(), tc.grad_clip_norm if tc.grad_clip_norm > 0 else math.inf))
                if math.isfinite(norm):
                    opt.step()
                else:
                    skipped += 1
            else:
                norm = math.nan
                skipped += 1
            sched.step()
            row = {"iteration": it + 1, "lr": lr, "grad_norm": norm, **result.summary(), "eval_success_rate": math.nan}
            row["iter_s"] = time.perf_counter() - t0
            row["wall_s"] = wall_base + time.perf_counter() - wall0
            last = it + 1 == tc.iterations
            if tc.eval_episodes and ((tc.eval_every and (it + 1) % tc.eval_every == 0) or last):
                from planner_pkg.policy.evaluate import evaluate_policy

                ev = evaluate_policy(_in_memory_policy(net, cfg), episodes=tc.eval_episodes,
                                     speed_mps=tc.eval_speed_mps, vehicle=tc.eval_vehicle,
                                     world_kind=cfg.env.world_kinds[0], first_world=VALIDATION_FIRST_WORLD)
                row["eval_success_rate"] = ev.success_rate
                log(f"iteration {it + 1}: closed-loop evaluation ({tc.eval_vehicle}, {tc.eval_speed_mps:g} m/s, "
                    f"{tc.eval_episodes} worlds): success {100 * ev.success_rate:.0f} %, collisions "
                    f"{100 * ev.collision_rate:.0f} % ({ev.wall_s:.0f} s)")
            history.append(row)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{row['total']:.3g}", success=f"{row['success_rate']:.2f}")
            elif tc.log_every and ((it + 1) % tc.log_every == 0 or it == start):
                rate = (it + 1 - start) / max(time.perf_counter() - wall0, 1e-9)
                log(f"iteration {it + 1}/{tc.iterations}: loss {row['total']:.4g} (velocity {row['velocity']:.3g}, "
                    f"collision {row['collision']:.3g}, avoidance {row['avoidance']:.3g}), collision-free "
                    f"{100 * row['success_rate']:.0f} %, speed {row['mean_speed_mps']:.2f} m/s, {rate:.3f} it/s")
            if tc.checkpoint_every and (it + 1) % tc.checkpoint_every == 0 and it + 1 < end:
                save_checkpoint(paths["checkpoint"], it + 1, cfg, net, opt, sched, history)
                _write_csv(paths["csv"], history)
        it = end
    finally:
        if bar is not None:
            bar.close()
    if skipped:
        log(f"warning: {skipped} iteration(s) had a non-finite loss or gradient and were skipped")
    save_checkpoint(paths["checkpoint"], end, cfg, net, opt, sched, history)
    _write_csv(paths["csv"], history)
    if history:
        _write_png(paths["png"], history)
    if end == tc.iterations:
        export_policy(net, cfg, paths["model"])
        log(f"wrote {paths['model']} ({end} iterations)")
    return TrainResult(iterations_run=end - start, iteration=end, paths=paths, history=history,
                       wall_s=time.perf_counter() - wall0)
