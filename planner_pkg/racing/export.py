"""Export a trained racing policy to one data-only model file, and load it for flying.

The file (``.agm``) is an ``autograd_core.export`` graph file (safetensors: weights as tensors,
graph as JSON; no pickle, nothing executable), traced at batch 1:

    input   obs (1, obs_dim) float32, the raw observation of :mod:`planner_pkg.racing.env`
    output  action (1, 4) float32 in [-1, 1]: collective thrust, body rates (the policy's mean)

The observation normalisation is part of the graph. One more metadata string,
``planner_pkg.racing``, holds JSON with the training configuration (``RaceConfig.to_dict()``):
the vehicle, observation layout and limits the model was trained for. :func:`load_racer`
checks the graph against that configuration.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import numpy as np

from planner_pkg.racing.config import ConfigError, RaceConfig, config_from_dict
from planner_pkg.racing.env import ACTION_DIM, obs_dim
from planner_pkg.racing.network import CLIP_OBS

__all__ = ["default_model_path", "RACER_METADATA_KEY", "RACER_FORMAT_VERSION", "RacerModelError", "LoadedRacer",
           "export_racer", "load_racer"]

_SHIPPED_MODEL = Path(__file__).resolve().parent / "models" / "racer_default.agm"


def default_model_path():
    """The shipped racing model, or None when this installation has none."""
    return _SHIPPED_MODEL if _SHIPPED_MODEL.is_file() else None


RACER_METADATA_KEY = "planner_pkg.racing"
RACER_FORMAT_VERSION = 1
_MAX_HEADER_BYTES = 64 << 20


class RacerModelError(ValueError):
    """The model file is missing, not a racing model, or inconsistent with its configuration."""


def _deploy_module(net, normalizer):
    import autograd_core as ag

    class DeployedRacer(ag.nn.Module):
        def __init__(self):
            super().__init__()
            self.actor = net.actor
            self.register_buffer("obs_mean", ag.tensor(normalizer.mean.astype(np.float32)))
            self.register_buffer("obs_std", ag.tensor(normalizer.std.astype(np.float32)))

        def forward(self, obs):
            x = ag.clamp((obs - self.obs_mean) / self.obs_std, -CLIP_OBS, CLIP_OBS)
            return ag.clamp(self.actor(x), -1.0, 1.0)

    return DeployedRacer()


def export_racer(net, normalizer, cfg: RaceConfig, path: Union[str, Path]) -> Path:
    """Write the actor of ``net`` with the observation statistics and ``cfg`` to ``path``."""
    import autograd_core as ag
    from autograd_core import export

    module = _deploy_module(net, normalizer)
    module.eval()
    graph = export.trace(module, (ag.zeros(1, obs_dim(cfg.env)),))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    graph.save(str(path), {RACER_METADATA_KEY: json.dumps(
        {"version": RACER_FORMAT_VERSION, "config": cfg.to_dict()}, separators=(",", ":"))})
    return path


@dataclass
class LoadedRacer:
    """``act(obs (N, D)) -> actions (N, 4)`` with the NumPy runtime (one row at a time)."""

    model: object  # autograd_core.runtime.Model
    config: RaceConfig
    path: str

    def act(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float32)
        return np.concatenate([self.model(obs[i:i + 1]) for i in range(obs.shape[0])]).astype(np.float64)


def load_racer(path: Union[str, Path]) -> LoadedRacer:
    """Load a model written by :func:`export_racer`, checking its graph against its config."""
    from autograd_core import runtime

    where = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise RacerModelError(f"cannot read racing model {where!r}: {exc}") from None
    if len(data) < 8:
        raise RacerModelError(f"{where}: not a racing model file (only {len(data)} bytes)")
    n = int.from_bytes(data[:8], "little")
    if n > _MAX_HEADER_BYTES or 8 + n > len(data):
        raise RacerModelError(f"{where}: not a racing model file (bad header length {n})")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
        meta = json.loads(header["__metadata__"][RACER_METADATA_KEY])
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        raise RacerModelError(f"{where}: not a racing model (no '{RACER_METADATA_KEY}' metadata); train one with "
                              "'python -m planner_pkg race train'") from None
    if not isinstance(meta, dict) or meta.get("version") != RACER_FORMAT_VERSION:
        raise RacerModelError(f"{where}: unsupported racing model version (this code reads {RACER_FORMAT_VERSION})")
    try:
        cfg = config_from_dict(meta.get("config"))
    except ConfigError as exc:
        raise RacerModelError(f"{where}: its configuration is invalid: {exc}") from None
    try:
        model = runtime.load_bytes(data)
    except runtime.FormatError as exc:
        raise RacerModelError(f"{where}: {exc}") from None
    want_in, want_out = [(1, obs_dim(cfg.env))], [(1, ACTION_DIM)]
    got_in = [tuple(s) for s in model.input_shapes]
    got_out = [tuple(s) for s in model.output_shapes]
    if got_in != want_in or got_out != want_out:
        raise RacerModelError(f"{where}: the network takes {got_in} and gives {got_out}, but its configuration "
                              f"needs {want_in} -> {want_out}; re-export the model")
    return LoadedRacer(model=model, config=cfg, path=where)
