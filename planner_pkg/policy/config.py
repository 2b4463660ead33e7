"""Typed configuration of the learned depth policy: one frozen dataclass per concern.

The training YAML files (``config/policy/*.yaml``) are views of :class:`PolicyConfig`: nested
mappings whose keys are the field names below. :func:`config_from_dict` validates every value
and names the offending key (``loss.collision: must be >= 0, got -1``); unknown keys are errors,
never silently ignored. Units are SI and carried in the field names or comments; ranges are
``(low, high)`` pairs sampled uniformly per episode (domain randomisation).

Defaults follow "Back to Newton's Laws" (Zhang et al. 2024; see ANCHORS.md) where it gives a
value; departures are commented where they are made.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple, Union

__all__ = [
    "DynamicsConfig",
    "ObservationConfig",
    "NetworkConfig",
    "LossConfig",
    "EnvConfig",
    "TrainConfig",
    "PolicyConfig",
    "ConfigError",
    "config_from_dict",
    "load_config",
    "STATE_DIM",
]

#: Length of the state vector fed to the network: velocity (3) and target velocity (3) in the
#: yaw frame, the attitude's up axis in the yaw frame (3), the safety margin (1).
STATE_DIM = 10


class ConfigError(ValueError):
    """A configuration value is missing, unknown or out of range (the message names the key)."""


def _num(name: str, value, *, low: float = -math.inf, low_open: bool = False, high: float = math.inf) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name}: must be a finite number, got {value!r}")
    if value < low or (low_open and value == low) or value > high:
        lo = f"> {low}" if low_open else f">= {low}"
        rng = f"{lo} and <= {high}" if math.isfinite(high) else lo
        raise ConfigError(f"{name}: must be {rng}, got {value!r}")


def _int(name: str, value, *, low: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name}: must be an integer >= {low}, got {value!r}")


def _range(name: str, value, *, low: float = -math.inf, low_open: bool = False, high: float = math.inf) -> None:
    if not isinstance(value, tuple) or len(value) != 2:
        raise ConfigError(f"{name}: must be a [low, high] pair, got {value!r}")
    for v in value:
        _num(name, v, low=low, low_open=low_open, high=high)
    if value[0] > value[1]:
        raise ConfigError(f"{name}: low {value[0]} exceeds high {value[1]}")


@dataclass(frozen=True)
class DynamicsConfig:
    """The differentiable training point mass (see :mod:`planner_pkg.policy.dynamics`).

    dt_s: nominal control period, s (15 Hz). dt_jitter: relative uniform jitter of each step's
        period (0.1 = +-10 %), drawn per agent and step.
    lag_rate_per_s: range of k in the first-order thrust lag f' = k (f_cmd - f) (paper: ~12 1/s).
    action_delay_steps: range (inclusive integers) of the per-episode action delay, in steps.
        Departure: the paper's 2-step delay models its real camera pipeline; the embedded
        simulator's is ~0 (frame and policy update are aligned), so 0..1 is the default.
    drag_xy_per_s, drag_z_per_s: ranges of the linear drag coefficients (paper: 0.30..0.45).
    wind_std_mps: per-episode constant horizontal wind, Gaussian std per axis, m/s.
    ou_sigma_mps2, ou_theta_per_s: Ornstein-Uhlenbeck acceleration disturbance (stationary std
        sigma, mean reversion theta).
    grad_decay_per_s: the state gradient is scaled by ``grad_decay_per_s ** dt`` per step
        backward (paper: 0.4), so a loss t seconds later reaches a state scaled by ``0.4 ** t``.
    gravity_mps2: standard gravity, m/s^2.
    yaw_gain_per_s: the heading follows the command (towards the goal) as a first-order lag of
        this rate (the simulator's SE(3) yaw loop settles in ~0.3 s).
    """

    dt_s: float = 1.0 / 15.0
    dt_jitter: float = 0.1
    lag_rate_per_s: Tuple[float, float] = (10.0, 14.0)
    action_delay_steps: Tuple[int, int] = (0, 1)
    drag_xy_per_s: Tuple[float, float] = (0.30, 0.45)
    drag_z_per_s: Tuple[float, float] = (0.05, 0.15)
    wind_std_mps: float = 0.3
    ou_sigma_mps2: float = 0.2
    ou_theta_per_s: float = 2.0
    grad_decay_per_s: float = 0.4
    gravity_mps2: float = 9.81
    yaw_gain_per_s: float = 6.0

    def __post_init__(self):
        p = "dynamics."
        _num(p + "dt_s", self.dt_s, low=0.0, low_open=True, high=1.0)
        _num(p + "dt_jitter", self.dt_jitter, low=0.0, high=0.5)
        _range(p + "lag_rate_per_s", self.lag_rate_per_s, low=0.0, low_open=True)
        if not (isinstance(self.action_delay_steps, tuple) and len(self.action_delay_steps) == 2):
            raise ConfigError(f"{p}action_delay_steps: must be a [low, high] pair, got {self.action_delay_steps!r}")
        for v in self.action_delay_steps:
            _int(p + "action_delay_steps", v)
        if self.action_delay_steps[0] > self.action_delay_steps[1]:
            raise ConfigError(f"{p}action_delay_steps: low exceeds high in {list(self.action_delay_steps)}")
        _range(p + "drag_xy_per_s", self.drag_xy_per_s, low=0.0, low_open=True)
        _range(p + "drag_z_per_s", self.drag_z_per_s, low=0.0, low_open=True)
        for name in ("wind_std_mps", "ou_sigma_mps2", "ou_theta_per_s"):
            _num(p + name, getattr(self, name), low=0.0)
        _num(p + "grad_decay_per_s", self.grad_decay_per_s, low=0.0, low_open=True, high=1.0)
        _num(p + "gravity_mps2", self.gravity_mps2, low=0.0)
        _num(p + "yaw_gain_per_s", self.yaw_gain_per_s, low=0.0, low_open=True)


@dataclass(frozen=True)
class ObservationConfig:
    """What the network sees (see :mod:`planner_pkg.policy.observation`).

    image_hw: (rows, cols) of the network's depth input (paper: 12 x 16).
    render_scale: the training renderer casts ``render_scale`` x more rays per axis and
        max-pools (inverse depth) down to ``image_hw``; the simulator's 48 x 64 camera is pooled
        by 4 the same way at run time.
    fat_rays: training rays are cones half a (rendered) pixel wide, which approximates the
        max-pooled fine image with one ray per pixel (see ``policy.render``).
    hfov_deg: range of the camera's horizontal field of view (randomised per episode).
    pitch_deg: range of the camera's mount pitch, positive = down (randomised per episode).
    max_range_m: the training camera's range; beyond it a pixel reads "no return".
    near_m, far_m: depth clamp of the inverse-depth transform ``scale / clamp(d, near, far) -
        offset`` (paper: 3 / clamp(d, 0.3, 24) - 0.6).
    inv_depth_scale, inv_depth_offset: the transform's constants.
    noise_std: Gaussian noise added to the transformed image (training only), per pixel.
    velocity_noise_std_mps: Gaussian noise on the velocity the network sees (training only).
    """

    image_hw: Tuple[int, int] = (12, 16)
    render_scale: int = 1
    fat_rays: bool = True
    hfov_deg: Tuple[float, float] = (85.0, 95.0)
    pitch_deg: Tuple[float, float] = (-5.0, 5.0)
    max_range_m: float = 10.0
    near_m: float = 0.3
    far_m: float = 24.0
    inv_depth_scale: float = 3.0
    inv_depth_offset: float = 0.6
    noise_std: float = 0.02
    velocity_noise_std_mps: float = 0.05

    def __post_init__(self):
        p = "observation."
        if not (isinstance(self.image_hw, tuple) and len(self.image_hw) == 2):
            raise ConfigError(f"{p}image_hw: must be [rows, cols], got {self.image_hw!r}")
        for v in self.image_hw:
            _int(p + "image_hw", v, low=1)
        _int(p + "render_scale", self.render_scale, low=1)
        if not isinstance(self.fat_rays, bool):
            raise ConfigError(f"{p}fat_rays: must be true or false, got {self.fat_rays!r}")
        _range(p + "hfov_deg", self.hfov_deg, low=10.0, high=150.0)
        _range(p + "pitch_deg", self.pitch_deg, low=-45.0, high=45.0)
        _num(p + "max_range_m", self.max_range_m, low=0.0, low_open=True)
        _num(p + "near_m", self.near_m, low=0.0, low_open=True)
        _num(p + "far_m", self.far_m, low=self.near_m, low_open=True)
        _num(p + "inv_depth_scale", self.inv_depth_scale, low=0.0, low_open=True)
        _num(p + "inv_depth_offset", self.inv_depth_offset)
        _num(p + "noise_std", self.noise_std, low=0.0)
        _num(p + "velocity_noise_std_mps", self.velocity_noise_std_mps, low=0.0)


@dataclass(frozen=True)
class NetworkConfig:
    """CNN + GRU policy (see :mod:`planner_pkg.policy.network`).

    channels: output channels of the three convolutions (paper: 32, 64, 128).
    hidden: width of the image/state embedding and of the GRU (paper: 192).
    leaky_slope: LeakyReLU negative slope (paper: 0.05).
    max_accel_xy_mps2, max_accel_z_mps2: the acceleration head is squashed per axis by
        ``m * tanh(raw / m)`` (yaw frame); 8 m/s^2 horizontally is a 39 deg tilt, inside the
        simulator controller's 45 deg limit.
    velocity_prior_gain_per_s: departure from the paper (0 = the paper's network): the head
        outputs a correction to a proportional velocity controller, ``raw = head +
        gain * (target velocity - velocity)`` (both from the state input) before the squash.
        The network then starts out flying at the commanded speed and only has to learn when
        and how to deviate, which cuts the training a CPU can afford by a large factor.
    """

    channels: Tuple[int, int, int] = (32, 64, 128)
    hidden: int = 192
    leaky_slope: float = 0.05
    max_accel_xy_mps2: float = 8.0
    max_accel_z_mps2: float = 5.0
    velocity_prior_gain_per_s: float = 0.0

    def __post_init__(self):
        p = "network."
        if not (isinstance(self.channels, tuple) and len(self.channels) == 3):
            raise ConfigError(f"{p}channels: must be three integers, got {self.channels!r}")
        for v in self.channels:
            _int(p + "channels", v, low=1)
        _int(p + "hidden", self.hidden, low=1)
        _num(p + "leaky_slope", self.leaky_slope, low=0.0, high=1.0)
        _num(p + "max_accel_xy_mps2", self.max_accel_xy_mps2, low=0.0, low_open=True)
        _num(p + "max_accel_z_mps2", self.max_accel_z_mps2, low=0.0, low_open=True)
        _num(p + "velocity_prior_gain_per_s", self.velocity_prior_gain_per_s, low=0.0)


@dataclass(frozen=True)
class LossConfig:
    """Loss weights and shapes (see :mod:`planner_pkg.policy.losses`).

    Weights of the terms (see :mod:`planner_pkg.policy.losses` for their exact form):
    velocity: smooth-L1 of (moving-average velocity over ``velocity_window_s`` - target).
    velocity_estimate: MSE of the auxiliary velocity estimate (yaw frame).
    avoidance: max(closing speed, 1 m/s) x squared hinge of the clearance below
        ``avoidance_range_m`` (paper: 1.5-3.0).
    collision: softplus(-collision_sharpness_per_m * clearance) (paper: 2.0-7.5, sharpness 32).
    acceleration, jerk: mean squared command and per-step command change.
    altitude: squared excursion outside ``altitude_band_m``.
    margin_m: range of the per-episode safety margin (also a network input); the clearance is
        signed distance - vehicle radius - margin.
    """

    velocity: float = 1.0
    velocity_estimate: float = 2.0
    avoidance: float = 2.0
    collision: float = 4.0
    acceleration: float = 0.01
    jerk: float = 0.001
    altitude: float = 1.0
    velocity_window_s: float = 2.0
    avoidance_range_m: float = 1.0
    collision_sharpness_per_m: float = 32.0
    altitude_band_m: Tuple[float, float] = (0.5, 4.0)
    margin_m: Tuple[float, float] = (0.1, 0.3)

    def __post_init__(self):
        p = "loss."
        for name in ("velocity", "velocity_estimate", "avoidance", "collision", "acceleration", "jerk", "altitude"):
            _num(p + name, getattr(self, name), low=0.0)
        _num(p + "velocity_window_s", self.velocity_window_s, low=0.0, low_open=True)
        _num(p + "avoidance_range_m", self.avoidance_range_m, low=0.0, low_open=True)
        _num(p + "collision_sharpness_per_m", self.collision_sharpness_per_m, low=0.0, low_open=True)
        _range(p + "altitude_band_m", self.altitude_band_m)
        _range(p + "margin_m", self.margin_m, low=0.0)


@dataclass(frozen=True)
class EnvConfig:
    """The training scenarios (see :mod:`planner_pkg.policy.env`).

    world_kind, world_params: ``planner_pkg.world.generate_world`` arguments; every world of
        training is a fresh seed, drawn from the training seed (evaluation uses other seeds).
    worlds_per_batch: the batch's agents are spread evenly over this many worlds.
    speed_mps: range of the per-agent commanded speed.
    start_x_frac: range of the start's x, as a fraction of the world's half length on the far
        side from the goal (x = -frac * size_x / 2; a negative fraction starts past the middle,
        so part of the batch reaches the goal within a rollout and learns to arrive there).
    goal_x_frac: the goal lies at x = +goal_x_frac * size_x / 2.
    lateral_frac: |y| of start and goal up to this fraction of the half width.
    altitude_m: range of start and goal altitudes.
    start_clearance_m: starts are resampled until this far from every surface.
    vehicle_radius_m: collision radius (the simulator's 0.19 m).
    approach_gain_per_s: the target speed is min(speed, gain * distance to goal).
    goal_tolerance_m: "reached" radius for the training success statistic.
    """

    world_kind: str = "cluttered"
    world_params: Mapping[str, Any] = field(default_factory=dict)
    worlds_per_batch: int = 4
    speed_mps: Tuple[float, float] = (1.5, 7.0)
    start_x_frac: Tuple[float, float] = (-0.3, 0.85)
    goal_x_frac: float = 0.85
    lateral_frac: float = 0.6
    altitude_m: Tuple[float, float] = (1.0, 2.5)
    start_clearance_m: float = 1.0
    vehicle_radius_m: float = 0.19
    approach_gain_per_s: float = 1.0
    goal_tolerance_m: float = 0.5

    def __post_init__(self):
        p = "env."
        if self.world_kind not in ("forest", "cluttered", "walls", "gates"):
            raise ConfigError(f"{p}world_kind: must be forest, cluttered, walls or gates, got {self.world_kind!r}")
        if not isinstance(self.world_params, Mapping):
            raise ConfigError(f"{p}world_params: must be a mapping, got {self.world_params!r}")
        object.__setattr__(self, "world_params", dict(self.world_params))
        _int(p + "worlds_per_batch", self.worlds_per_batch, low=1)
        _range(p + "speed_mps", self.speed_mps, low=0.0, low_open=True)
        _range(p + "start_x_frac", self.start_x_frac, low=-1.0, high=1.0)
        for name in ("goal_x_frac", "lateral_frac"):
            _num(p + name, getattr(self, name), low=0.0, high=1.0)
        _range(p + "altitude_m", self.altitude_m, low=0.0, low_open=True)
        for name in ("start_clearance_m", "vehicle_radius_m"):
            _num(p + name, getattr(self, name), low=0.0)
        _num(p + "approach_gain_per_s", self.approach_gain_per_s, low=0.0, low_open=True)
        _num(p + "goal_tolerance_m", self.goal_tolerance_m, low=0.0, low_open=True)


@dataclass(frozen=True)
class TrainConfig:
    """The optimisation (see :mod:`planner_pkg.policy.trainer`).

    iterations: optimiser steps; batch_size: agents per step (split over the batch's worlds);
    steps: control steps per rollout (150 = 10 s at 15 Hz).
    lr, lr_min: AdamW learning rate, cosine-annealed from ``lr`` to ``lr_min`` over the run.
    weight_decay: AdamW decoupled weight decay. grad_clip_norm: global gradient norm clip (0 = off).
    seed: everything random (weights, worlds, randomisation, noise) derives from it and the
        iteration number, so a resumed run equals an uninterrupted one.
    checkpoint_every, eval_every, log_every: iterations between checkpoints / evaluations /
        progress lines (0 = only at the end for checkpoints and evaluations).
    eval_episodes, eval_speed_mps, eval_vehicle: periodic closed-loop evaluation in the
        embedded simulator (``point_mass`` is fast; ``quadrotor`` is the full model).
    num_threads: BLAS threads (1 is fastest for these small GEMMs).
    """

    iterations: int = 2000
    batch_size: int = 64
    steps: int = 150
    lr: float = 1e-3
    lr_min: float = 1e-5
    weight_decay: float = 0.01
    grad_clip_norm: float = 5.0
    seed: int = 0
    checkpoint_every: int = 50
    eval_every: int = 200
    log_every: int = 10
    eval_episodes: int = 10
    eval_speed_mps: float = 3.0
    eval_vehicle: str = "point_mass"
    num_threads: int = 1

    def __post_init__(self):
        p = "train."
        for name in ("iterations", "batch_size", "steps", "num_threads"):
            _int(p + name, getattr(self, name), low=1)
        for name in ("seed", "checkpoint_every", "eval_every", "log_every", "eval_episodes"):
            _int(p + name, getattr(self, name), low=0)
        _num(p + "lr", self.lr, low=0.0, low_open=True)
        _num(p + "lr_min", self.lr_min, low=0.0, high=self.lr)
        _num(p + "weight_decay", self.weight_decay, low=0.0)
        _num(p + "grad_clip_norm", self.grad_clip_norm, low=0.0)
        _num(p + "eval_speed_mps", self.eval_speed_mps, low=0.0, low_open=True)
        if self.eval_vehicle not in ("point_mass", "quadrotor"):
            raise ConfigError(f"{p}eval_vehicle: must be point_mass or quadrotor, got {self.eval_vehicle!r}")


@dataclass(frozen=True)
class PolicyConfig:
    """Everything that defines a training run and the exported policy's interface."""

    dynamics: DynamicsConfig = field(default_factory=DynamicsConfig)
    observation: ObservationConfig = field(default_factory=ObservationConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        """Plain nested dict (tuples as lists): the YAML/JSON view, round-trips via config_from_dict."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def replace(self, **sections) -> "PolicyConfig":
        """A copy with whole sections or ``section={field: value}`` overrides applied."""
        data = self.to_dict()
        for name, value in sections.items():
            if name not in data:
                raise ConfigError(f"unknown section {name!r}; known: {sorted(data)}")
            if dataclasses.is_dataclass(value):
                value = json.loads(json.dumps(dataclasses.asdict(value)))
            data[name].update(value)
        return config_from_dict(data)


def _build(cls, values: Mapping[str, Any], prefix: str):
    if not isinstance(values, Mapping):
        raise ConfigError(f"{prefix or 'config'}: must be a mapping, got {type(values).__name__}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"unknown key(s) {[prefix + k for k in unknown]}; known in "
                          f"{prefix.rstrip('.') or 'the top level'}: {sorted(known)}")
    kwargs = {}
    for name, value in values.items():
        default = getattr(cls(), name) if cls is not PolicyConfig else None
        sub = _SECTIONS.get(name) if cls is PolicyConfig else None
        if sub is not None:
            kwargs[name] = _build(sub, value or {}, f"{name}.")
        elif isinstance(value, list):
            kwargs[name] = tuple(value)
        elif isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            kwargs[name] = float(value)
        else:
            kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a wrongly-typed value tripping a comparison inside a check
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: {exc}") from None


_SECTIONS = {
    "dynamics": DynamicsConfig,
    "observation": ObservationConfig,
    "network": NetworkConfig,
    "loss": LossConfig,
    "env": EnvConfig,
    "train": TrainConfig,
}


def config_from_dict(values: Optional[Mapping[str, Any]]) -> PolicyConfig:
    """A validated :class:`PolicyConfig` from nested mappings (missing keys keep their defaults)."""
    return _build(PolicyConfig, values or {}, "")


def load_config(path: Union[str, Path]) -> PolicyConfig:
    """Read a training YAML file (see ``config/policy/``); raises ConfigError naming bad keys."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {exc}") from None
    try:
        return config_from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
