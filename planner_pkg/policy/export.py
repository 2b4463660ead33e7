"""Export a trained policy network to one data-only model file, and load it for onboard use.

The file (``.agm``) is an ``autograd_core.export`` graph file (safetensors: the weights as tensors,
the graph as JSON metadata; no pickle, nothing executable), traced at batch 1:

    inputs  image (1, 1, rows, cols) float32, state (1, 10) float32, hidden (1, H) float32
    outputs action (1, 6) float32 (acceleration (3) and velocity estimate (3), yaw frame),
            hidden (1, H) float32

plus one more metadata string, ``planner_pkg.policy``: JSON with the training configuration
(``PolicyConfig.to_dict()``) that fixes the observation transform, the image size and the
default commanded speed, and optionally the model's measured speed calibration
(``speed_calibration``, :mod:`planner_pkg.policy.speed_calibration`). ``autograd_core.runtime.load`` reads the file as any graph file;
:func:`load_policy` reads the metadata too and refuses a file whose graph does not take and
give the shapes its configuration promises.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np

from planner_pkg.policy.config import ConfigError, PolicyConfig, STATE_DIM, config_from_dict
from planner_pkg.policy.speed_calibration import (CALIBRATION_KEY, SpeedCalibration, SpeedCalibrationError,
                                                  parse_speed_calibration)

__all__ = ["default_model_path", "POLICY_METADATA_KEY", "POLICY_FORMAT_VERSION", "PolicyModelError", "LoadedPolicy", "export_policy", "load_policy_bytes", "file_metadata",
           "load_policy", "policy_graph", "load_weights_from_model"]

logger = logging.getLogger(__name__)

POLICY_METADATA_KEY = "planner_pkg.policy"
POLICY_FORMAT_VERSION = 1
_MAX_HEADER_BYTES = 64 << 20
_SHIPPED_MODEL = Path(__file__).resolve().parent / "models" / "policy_default.agm"


def default_model_path():
    """The shipped model file, or None when this installation has none."""
    return _SHIPPED_MODEL if _SHIPPED_MODEL.is_file() else None


class PolicyModelError(ValueError):
    """The model file is missing, not a policy model, or inconsistent with its configuration."""


def policy_graph(net, cfg: PolicyConfig):
    """Trace ``net`` (a ``PolicyNet``) at batch 1 in eval mode; returns an ``export.Graph``."""
    import autograd_core as ag
    from autograd_core import export

    rows, cols = cfg.observation.image_hw
    was_training = net.training
    net.eval()
    try:
        example = (ag.zeros(1, 1, rows, cols), ag.zeros(1, STATE_DIM), ag.zeros(1, cfg.network.hidden))
        return export.trace(net, example)
    finally:
        net.train(was_training)


def export_policy(net, cfg: PolicyConfig, path: Union[str, Path]) -> Path:
    """Write ``net`` with its configuration to ``path`` (atomically). Returns the path."""
    graph = policy_graph(net, cfg)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    graph.save(str(path), {POLICY_METADATA_KEY: json.dumps(
        {"version": POLICY_FORMAT_VERSION, "config": cfg.to_dict()}, separators=(",", ":"))})
    return path


@dataclass
class LoadedPolicy:
    """A policy model ready to run: ``model(image, state, hidden) -> (action, hidden)``."""

    model: object  # autograd_core.runtime.Model
    config: PolicyConfig
    path: str
    #: the measured command -> cruise map (``policy calibrate``); None: the model flies uncalibrated
    speed_calibration: Optional[SpeedCalibration] = None

    @property
    def hidden_size(self) -> int:
        return self.config.network.hidden

    @property
    def image_hw(self):
        return self.config.observation.image_hw


def file_metadata(data: bytes, where: str) -> dict:
    """The ``__metadata__`` strings of a model file's safetensors header (PolicyModelError when the
    bytes are not such a file)."""
    if len(data) < 8:
        raise PolicyModelError(f"{where}: not a policy model file (only {len(data)} bytes)")
    n = int.from_bytes(data[:8], "little")
    if n > _MAX_HEADER_BYTES or 8 + n > len(data):
        raise PolicyModelError(f"{where}: not a policy model file (bad header length {n})")
    try:
        metadata = json.loads(data[8:8 + n].decode("utf-8")).get("__metadata__")
    except (UnicodeDecodeError, ValueError, AttributeError):
        metadata = None
    if not isinstance(metadata, dict):
        raise PolicyModelError(f"{where}: not a policy model (no '{POLICY_METADATA_KEY}' metadata); export one with "
                               "'python -m planner_pkg policy train' or planner_pkg.policy.export.export_policy")
    return metadata


def _policy_metadata(data: bytes, where: str) -> dict:
    metadata = file_metadata(data, where)
    try:
        meta = json.loads(metadata[POLICY_METADATA_KEY])
    except (ValueError, KeyError, TypeError):
        raise PolicyModelError(
            f"{where}: not a policy model (no '{POLICY_METADATA_KEY}' metadata); export one with "
            "'python -m planner_pkg policy train' or planner_pkg.policy.export.export_policy") from None
    if not isinstance(meta, dict) or meta.get("version") != POLICY_FORMAT_VERSION:
        raise PolicyModelError(f"{where}: unsupported policy model version {meta.get('version') if isinstance(meta, dict) else meta!r} "
                               f"(this code reads version {POLICY_FORMAT_VERSION})")
    return meta


def _model_config(values, where: str) -> PolicyConfig:
    """The model's configuration. Only the observation and network sections define the model's
    interface; when a later version of this code no longer accepts the training-only sections
    (renamed or retyped fields), those fall back to today's defaults with a warning."""
    try:
        return config_from_dict(values)
    except ConfigError as exc:
        first = exc
    values = values if isinstance(values, dict) else {}
    try:
        cfg = config_from_dict({k: values.get(k) or {} for k in ("observation", "network")})
    except ConfigError as exc:
        raise PolicyModelError(f"{where}: its configuration is invalid: {exc}") from None
    logger.warning("%s: training settings not understood by this version (%s); using defaults for them "
                   "(the model's observation and network settings are intact)", where, first)
    return cfg


def load_policy(path: Union[str, Path]) -> LoadedPolicy:
    """Load a model written by :func:`export_policy`, checking its graph against its config."""
    from autograd_core import runtime

    where = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PolicyModelError(f"cannot read policy model {where!r}: {exc}") from None
    return load_policy_bytes(data, where)


def load_policy_bytes(data: bytes, where: str = "<bytes>") -> LoadedPolicy:
    """:func:`load_policy` of a model file's contents (``where`` names it in errors and becomes
    the policy's ``path``): how the evaluation workers of another process get the model."""
    from autograd_core import runtime

    meta = _policy_metadata(data, where)
    cfg = _model_config(meta.get("config"), where)
    calibration = None
    if CALIBRATION_KEY in meta:
        try:
            calibration = parse_speed_calibration(meta[CALIBRATION_KEY], f"{where}: its {CALIBRATION_KEY}")
        except SpeedCalibrationError as exc:
            raise PolicyModelError(f"{exc}; rewrite it with 'python -m planner_pkg policy calibrate'") from None
    try:
        model = runtime.load_bytes(data)
    except runtime.FormatError as exc:
        raise PolicyModelError(f"{where}: {exc}") from None
    rows, cols = cfg.observation.image_hw
    hidden = cfg.network.hidden
    want_in = [(1, 1, rows, cols), (1, STATE_DIM), (1, hidden)]
    want_out = [(1, 6), (1, hidden)]
    got_in = [tuple(s) for s in model.input_shapes]
    got_out = [tuple(s) for s in model.output_shapes]
    if got_in != want_in or got_out != want_out:
        raise PolicyModelError(
            f"{where}: the network takes {got_in} and gives {got_out}, but its configuration needs "
            f"inputs {want_in} (image, state, hidden) and outputs {want_out}; re-export the model")
    if any(np.dtype(d) != np.float32 for d in list(model.input_dtypes) + list(model.output_dtypes)):
        raise PolicyModelError(f"{where}: the network's inputs and outputs must be float32")
    return LoadedPolicy(model=model, config=cfg, path=where, speed_calibration=calibration)


def load_weights_from_model(net, path: Union[str, Path], widen: bool = False) -> int:
    """Copy the weights of the exported model ``path`` into ``net`` (a ``PolicyNet``), in place: a
    warm start (``policy train --init-from``). Every parameter of ``net`` must be in the file with
    the same shape (the same channels, hidden size and image size); the buffers (output scales,
    feed-forward) stay those of ``net``'s own configuration. Returns the number of tensors copied;
    raises PolicyModelError naming the file and the first mismatch.

    widen: ``net`` may be wider than the file's network (more channels in any convolution, a larger
    hidden size; the same image size). The file's weights then fill the first units of every layer
    and the weights from each new unit into an old one (and into the outputs) are set to zero, so
    the widened network computes exactly the file's outputs (its first hidden units carry the file's
    GRU state); the new units keep ``net``'s own initialisation and start to matter as training
    moves those zeros (Net2Net-style widening, Chen et al. 2016, with zero outgoing weights).

    A ``net`` with a fine branch (``NetworkConfig.fine_branch``) starts from a file without one: the
    file's CNN becomes the coarse CNN (its image size must be half ``net``'s), and the fine CNN keeps
    ``net``'s own initialisation, whose zero last layer leaves the file's outputs unchanged."""
    import autograd_core as ag
    from autograd_core.runtime import _format

    where = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PolicyModelError(f"cannot read policy model {where!r}: {exc}") from None
    _policy_metadata(data, where)
    try:
        _, tensors = _format.loads(data)
    except _format.FormatError as exc:
        raise PolicyModelError(f"{where}: {exc}") from None
    params = dict(net.named_parameters())
    if net.fine_branch and not any(k.startswith("fine_stem.") for k in tensors):
        params = {k: p for k, p in params.items() if not k.startswith("fine_stem.")}
    for name, param in params.items():
        if name not in tensors:
            raise PolicyModelError(f"{where}: has no weight {name!r}; it is not a model of this network "
                                   "(channels, hidden size and image size must match the config)")
        have = tuple(np.shape(tensors[name]))
        need = tuple(param.shape)
        if have == need:
            continue
        if not widen:
            raise PolicyModelError(f"{where}: weight {name!r} is {have}, the config's network needs "
                                   f"{need} (channels, hidden size and image size must match)")
        if len(have) != len(need) or any(h > n for h, n in zip(have, need)):
            raise PolicyModelError(f"{where}: weight {name!r} is {have} and cannot widen to {need}: the config's "
                                   "network must have at least the model's channels and hidden size")
    if widen:
        _check_widened_flatten(net, tensors, where)
    values = {}
    for name, param in params.items():
        old = np.asarray(tensors[name], dtype=np.float32)
        values[name] = old if old.shape == tuple(param.shape) else _widened(
            param.detach().numpy(), old, groups=3 if name.startswith("gru.") else 1)
    with ag.no_grad():
        for name, param in params.items():
            param.copy_(ag.tensor(values[name]))
    return len(params)


def _widened(fresh: np.ndarray, old: np.ndarray, groups: int) -> np.ndarray:
    """``fresh`` (the wider layer's own initialisation) with ``old`` in its first units.

    Axis 0 holds the layer's outputs in ``groups`` equal blocks (the GRU's r, z, n gates): the old
    outputs of block g sit at the start of the new block g. Axis 1 (if any) holds the inputs, old
    ones first; the new inputs' weights into an old output are zeroed, so old outputs depend on the
    old inputs exactly as before. New outputs keep their fresh weights."""
    new_out, old_out = fresh.shape[0] // groups, old.shape[0] // groups
    if fresh.shape[0] % groups or old.shape[0] % groups:
        raise ValueError(f"cannot split {fresh.shape[0]} / {old.shape[0]} outputs into {groups} gate blocks")
    rows = np.concatenate([np.arange(g * new_out, g * new_out + old_out) for g in range(groups)])
    out = np.array(fresh, dtype=np.float32, copy=True)
    if old.ndim == 1:
        out[rows] = old
        return out
    if old.shape[2:] != fresh.shape[2:]:
        raise ValueError(f"kernel {old.shape[2:]} cannot widen to {fresh.shape[2:]}")
    n_in = old.shape[1]
    out[rows, n_in:] = 0.0
    out[rows, :n_in] = old
    return out


def _check_widened_flatten(net, tensors, where: str) -> None:
    """The flattened image features are channel-major, so a wider last convolution appends whole
    channels after the old features; that holds only with the same image size (same features per
    channel). Checked from the shapes of the first linear layer and the last convolution."""
    old_c3 = int(np.shape(tensors["stem.4.weight"])[0])
    old_feat = int(np.shape(tensors["stem.7.weight"])[1])
    new_c3 = int(net.stem[4].weight.shape[0])
    new_feat = int(net.stem[7].weight.shape[1])
    if old_feat * new_c3 != new_feat * old_c3:
        raise PolicyModelError(f"{where}: its network sees {old_feat // old_c3} image features per channel, the "
                               f"config's {new_feat // new_c3}: widening needs the same observation.image_hw")
