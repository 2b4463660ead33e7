"""Training checkpoints: written by the trainer, read back with every field checked.

A checkpoint (``model.ckpt``) is an ``autograd_core.save`` file (data only, written atomically)
holding a dict:

    format            CHECKPOINT_FORMAT
    iteration         int, iterations done (0 <= iteration <= config.train.iterations)
    config            PolicyConfig.to_dict()
    model             the network's state_dict (str -> float tensor, all finite)
    optimizer         AdamW.state_dict()
    scheduler         CosineAnnealingLR.state_dict()
    history_columns   HISTORY_COLUMNS
    history           (iteration, len(history_columns)) float64 tensor, one row per iteration

Reading one never trusts it: :func:`load_checkpoint` checks the layout, the configuration and
that every weight is finite; :func:`network_from_checkpoint` and :func:`restore_training` check
that the weights, optimiser and scheduler state fit the network and optimiser of that
configuration. Anything wrong raises :class:`CheckpointError` naming the file and the problem
(a ValueError, so the CLI reports it with exit code 2).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Tuple, Union

import numpy as np

import autograd_core as ag

from planner_pkg.policy.config import ConfigError, PolicyConfig, config_from_dict
from planner_pkg.policy.losses import LOSS_TERMS
from planner_pkg.policy.network import PolicyNet

__all__ = ["CHECKPOINT_FORMAT", "HISTORY_COLUMNS", "CheckpointError", "save_checkpoint", "load_checkpoint",
           "network_from_checkpoint", "restore_training"]

CHECKPOINT_FORMAT = "planner_pkg.policy.checkpoint/1"
HISTORY_COLUMNS = ("iteration", "wall_s", "iter_s", "lr", "total", *LOSS_TERMS, "success_rate", "collision_rate",
                   "mean_speed_mps", "grad_norm", "eval_success_rate")
# loss terms added after the format: a checkpoint written before lacks their columns (read as NaN)
_LATER_LOSS_COLUMNS = ("ray_clearance",)
_REQUIRED_COLUMNS = tuple(c for c in HISTORY_COLUMNS if c not in _LATER_LOSS_COLUMNS)
_KEYS = ("iteration", "config", "model", "optimizer", "scheduler", "history_columns", "history")


class CheckpointError(ValueError):
    """The file is not a readable policy training checkpoint, or its contents are inconsistent."""


def save_checkpoint(path: Path, iteration: int, cfg: PolicyConfig, net, opt, sched, history) -> None:
    """Write the checkpoint of ``iteration`` (module docstring) atomically."""
    table = np.array([[row.get(c, math.nan) for c in HISTORY_COLUMNS] for row in history], dtype=np.float64)
    ag.save({
        "format": CHECKPOINT_FORMAT,
        "iteration": iteration,
        "config": cfg.to_dict(),
        "model": net.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "history_columns": list(HISTORY_COLUMNS),
        "history": ag.tensor(table.reshape(-1, len(HISTORY_COLUMNS))),
    }, str(path))


def _non_finite(t) -> int:
    """Number of NaN / infinite entries of a tensor (0 for integer and bool tensors)."""
    arr = t.detach().numpy()
    if arr.dtype.kind not in "fc":
        return 0
    return int(arr.size - np.count_nonzero(np.isfinite(arr)))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def load_checkpoint(path: Union[str, Path]) -> dict:
    """Read a checkpoint written by the trainer and check its layout, configuration and weights.

    Returns the checkpoint dict (module docstring). Raises CheckpointError naming the file.
    """
    where = str(path)
    try:
        ckpt = ag.load(where)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read checkpoint {where!r}: {exc}") from None

    def bad(problem: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {where!r}: {problem}")

    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{where} is not a policy training checkpoint (expected format {CHECKPOINT_FORMAT!r})")
    missing = [k for k in _KEYS if k not in ckpt]
    if missing:
        raise bad(f"missing {missing} (written by another program, or edited?)")
    try:
        cfg = config_from_dict(ckpt["config"])
    except ConfigError as exc:
        raise bad(f"its configuration is invalid: {exc}") from None
    it = ckpt["iteration"]
    if isinstance(it, bool) or not isinstance(it, int) or not 0 <= it <= cfg.train.iterations:
        raise bad(f"iteration must be an integer in 0..{cfg.train.iterations} (its train.iterations), got {it!r}")
    model = ckpt["model"]
    if not isinstance(model, dict) or not model:
        raise bad("'model' must be the network's state_dict (a non-empty mapping of names to tensors)")
    for name, t in model.items():
        if not isinstance(name, str) or not isinstance(t, ag.Tensor):
            raise bad(f"'model' entry {name!r} is not a named tensor")
        n = _non_finite(t)
        if n:
            raise bad(f"weight {name!r} holds {n} non-finite value(s) (NaN or infinity) of {t.numel()}: the run "
                      "diverged or the file is corrupted; resume from an earlier checkpoint")
    for key in ("optimizer", "scheduler"):
        if not isinstance(ckpt[key], dict):
            raise bad(f"'{key}' must be a state_dict mapping, got {type(ckpt[key]).__name__}")
    cols, hist = ckpt["history_columns"], ckpt["history"]
    if not isinstance(cols, list) or not all(isinstance(c, str) for c in cols) or len(set(cols)) != len(cols) \
            or not set(_REQUIRED_COLUMNS) <= set(cols):
        raise bad(f"'history_columns' must list the distinct column names {list(_REQUIRED_COLUMNS)}")
    if not isinstance(hist, ag.Tensor) or hist.dim() != 2 or tuple(hist.shape) != (it, len(cols)) \
            or hist.dtype != ag.float64:
        shape = list(hist.shape) if isinstance(hist, ag.Tensor) else type(hist).__name__
        raise bad(f"'history' must be a float64 table of {it} rows (one per iteration) x {len(cols)} columns, "
                  f"got {shape}")
    return ckpt


def network_from_checkpoint(ckpt: dict, path: Union[str, Path]) -> Tuple[PolicyConfig, PolicyNet]:
    """The configuration and network of a checkpoint from :func:`load_checkpoint`."""
    cfg = config_from_dict(ckpt["config"])
    net = PolicyNet(cfg.network, cfg.observation)
    _load_weights(net, ckpt, path)
    return cfg, net


def _load_weights(net, ckpt: dict, path) -> None:
    try:
        net.load_state_dict(ckpt["model"])
    except (RuntimeError, TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: its weights do not fit the network of its configuration: "
                              f"{_one_line(exc)}") from None


def restore_training(ckpt: dict, path: Union[str, Path], net, opt, sched) -> Tuple[int, List[Dict[str, float]]]:
    """Load a checkpoint's weights, optimiser and scheduler state into fresh ``net``, ``opt`` and
    ``sched`` built from its configuration; returns (iteration, history rows)."""
    where = str(path)

    def bad(problem: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {where!r}: {problem}")

    _load_weights(net, ckpt, path)
    fresh_groups = opt.state_dict()["param_groups"]
    saved = ckpt["optimizer"]
    groups = saved.get("param_groups")
    if not isinstance(groups, list) or len(groups) != len(fresh_groups):
        raise bad(f"optimizer: expected {len(fresh_groups)} parameter group(s), got "
                  f"{len(groups) if isinstance(groups, list) else type(groups).__name__}")
    for i, (g, fresh) in enumerate(zip(groups, fresh_groups)):
        _check_like(g, {k: v for k, v in fresh.items() if k != "params"}, f"optimizer param_groups[{i}]", bad,
                    skip=("params", "param_names"))
    state = saved.get("state")
    if not isinstance(state, dict):
        raise bad("optimizer: 'state' must be a mapping")
    n_params = sum(len(g["params"]) for g in fresh_groups)
    for k, entry in state.items():
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < n_params or not isinstance(entry, dict):
            raise bad(f"optimizer state entry {k!r} does not name one of the {n_params} parameters")
        for name, v in entry.items():
            if not isinstance(v, ag.Tensor):
                raise bad(f"optimizer state [{k}][{name!r}] must be a tensor, got {type(v).__name__}")
            if _non_finite(v):
                raise bad(f"optimizer state [{k}][{name!r}] holds non-finite values (NaN or infinity)")
    try:
        opt.load_state_dict(saved)
    except (KeyError, TypeError, ValueError) as exc:
        raise bad(f"optimizer state does not fit the network: {_one_line(exc)}") from None
    sched_state = ckpt["scheduler"]
    _check_like(sched_state, sched.state_dict(), "scheduler", bad)
    sched.load_state_dict(sched_state)
    cols = list(ckpt["history_columns"])
    history = [dict(zip(cols, (float(v) for v in row))) for row in ckpt["history"].numpy()]
    return int(ckpt["iteration"]), history


def _check_like(saved, fresh, where: str, bad, skip=()) -> None:
    """``saved`` has the layout and value types of ``fresh`` (a freshly built object's state):
    the same keys (missing ones keep their fresh values), the same kinds of values, finite
    numbers, lists of the same length."""
    if isinstance(fresh, dict):
        if not isinstance(saved, dict):
            raise bad(f"{where} must be a mapping, got {type(saved).__name__}")
        extra = sorted(str(k) for k in saved if k not in fresh and k not in skip)
        if extra:
            raise bad(f"{where} has unexpected entries {extra}")
        for k, v in fresh.items():
            if k in saved:
                _check_like(saved[k], v, f"{where}[{k!r}]", bad)
        return
    if isinstance(fresh, bool):
        ok = isinstance(saved, bool)
    elif isinstance(fresh, (int, float)):
        ok = isinstance(saved, (int, float)) and not isinstance(saved, bool) and math.isfinite(saved)
        if ok and isinstance(fresh, int) and not isinstance(saved, int):
            ok = False
    elif isinstance(fresh, str):
        ok = isinstance(saved, str)
    elif isinstance(fresh, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(fresh):
            raise bad(f"{where} must hold {len(fresh)} value(s), got {saved!r}")
        for i, (a, b) in enumerate(zip(saved, fresh)):
            _check_like(a, b, f"{where}[{i}]", bad)
        return
    elif isinstance(fresh, ag.Tensor):
        ok = isinstance(saved, ag.Tensor) and tuple(saved.shape) == tuple(fresh.shape) and not _non_finite(saved)
    elif fresh is None:
        ok = saved is None or (isinstance(saved, (int, float)) and not isinstance(saved, bool)
                               and math.isfinite(saved))
    else:
        ok = type(saved) is type(fresh)
    if not ok:
        raise bad(f"{where} must be like {fresh!r}, got {saved!r}")
