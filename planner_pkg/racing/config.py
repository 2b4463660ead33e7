"""Typed configuration of gate racing: the quadrotor, the tracks, the reward, PPO and the run.

The training YAML files (``config/race/*.yaml``) are views of :class:`RaceConfig`: nested
mappings whose keys are the field names below; :func:`config_from_dict` validates every value and
names the offending key (``ppo.clip: must be in (0, 1], got 2``); unknown keys are errors.
Units are SI (names carry them); ranges are ``(low, high)`` pairs sampled uniformly.

Defaults follow Swift (Kaufmann et al., Nature 2023: PPO, collective thrust + body rates,
progress + perception reward, crash penalty) where it gives a value; departures are commented.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple, Union

from planner_pkg.config_schema import Config, ConfigError, Schema, setting

__all__ = ["QuadConfig", "TrackGenConfig", "RewardConfig", "EnvConfig", "NetworkConfig", "PPOConfig",
           "TrainConfig", "RaceConfig", "ConfigError", "config_from_dict", "load_config"]

_SCHEMA = Schema()
_INF = math.inf


def _positive(default):
    return setting(default, range=(0.0, _INF), low_open=True)


def _non_negative(default):
    return setting(default, range=(0.0, _INF))


def _pair(default, low=-_INF, high=_INF, low_open=False):
    return setting(default, range=(low, high), low_open=low_open, pair=True)


@dataclass(frozen=True)
class QuadConfig(Config, schema=_SCHEMA, prefix="env.quad."):
    """The racing quadrotor (:mod:`planner_pkg.racing.quad`): a rigid body commanded by mass-
    normalised collective thrust and body rates, as Swift's policy commands its drone.

    max_thrust_mps2: collective thrust at full command, m/s^2 (3.6 g; Swift's quad has a
        thrust-to-weight ratio near 4). min_thrust_mps2: at zero command.
    max_rate_rps: body-rate command limits (roll, pitch, yaw), rad/s.
    rate_time_constant_s: first-order lag of the onboard rate loop.
    thrust_time_constant_s: first-order lag of the motors' collective thrust.
    drag_per_s: linear drag, (x, y, z) in the body frame, 1/s.
    radius_m: the vehicle's collision radius (arm tip to arm tip / 2).
    dt_s: control period (policy step); substeps: physics steps per control step.
    gravity_mps2: standard gravity.
    """

    max_thrust_mps2: float = _positive(35.0)
    min_thrust_mps2: float = _non_negative(0.0)
    max_rate_rps: Tuple[float, float, float] = setting((8.0, 8.0, 3.0), range=(0.0, 50.0), low_open=True)
    rate_time_constant_s: float = _positive(0.04)
    thrust_time_constant_s: float = _positive(0.03)
    drag_per_s: Tuple[float, float, float] = setting((0.3, 0.3, 0.1), range=(0.0, 10.0))
    radius_m: float = setting(0.15, range=(0.0, 1.0), low_open=True)
    dt_s: float = setting(0.04, range=(0.0, 0.5), low_open=True)
    substeps: int = setting(2, range=(1, 100))
    gravity_mps2: float = _non_negative(9.81)

    def _check(self):
        if self.max_thrust_mps2 <= max(self.min_thrust_mps2, self.gravity_mps2):
            raise ConfigError(f"env.quad.max_thrust_mps2: must exceed gravity ({self.gravity_mps2:g}) and "
                              f"min_thrust_mps2 ({self.min_thrust_mps2:g}) or the vehicle cannot climb, "
                              f"got {self.max_thrust_mps2:g}")


@dataclass(frozen=True)
class TrackGenConfig(Config, schema=_SCHEMA, prefix="env.track."):
    """Random tracks (:func:`planner_pkg.racing.track.random_track`): gates on a jittered loop.

    gates: (min, max) number of gates, inclusive. area_m: (x, y) extent of the gate centres.
    height_m: range of the gate centres' height. size_m: side of the square openings.
    radial_jitter: relative jitter of each gate's distance from the loop centre.
    yaw_jitter_rad: jitter of the gate normal around the loop's tangent.
    min_spacing_m: smallest distance between two gate centres (resampled below it).
    """

    gates: Tuple[int, int] = _pair((6, 8), 1, 64)
    area_m: Tuple[float, float] = setting((22.0, 14.0), range=(2.0, 1000.0))
    height_m: Tuple[float, float] = _pair((1.2, 3.0), 0.5, 50.0)
    size_m: float = setting(1.5, range=(0.5, 10.0))
    radial_jitter: float = setting(0.25, range=(0.0, 0.6))
    yaw_jitter_rad: float = setting(0.35, range=(0.0, 1.2))
    min_spacing_m: float = setting(4.0, range=(0.0, 100.0))



@dataclass(frozen=True)
class RewardConfig(Config, schema=_SCHEMA, prefix="env.reward."):
    """Per-step reward (:mod:`planner_pkg.racing.env`), Swift's terms:

    r = progress * (d_prev - d_now)                        distance to the next gate's centre
        + perception * exp(perception_sharpness * angle^4)  camera (body x) axis towards that gate
        - rate_penalty * |omega|  - action_smoothness * |a - a_prev|^2
        + gate_bonus on each gate passed in order;  - crash on a crash (terminal).
    Departure: ``gate_bonus`` (Swift has none) makes the count of gates visible to the critic.
    """

    progress: float = _non_negative(1.0)
    perception: float = _non_negative(0.02)
    perception_sharpness: float = setting(-10.0, range=(-_INF, 0.0))
    rate_penalty: float = _non_negative(0.0005)
    action_smoothness: float = _non_negative(0.001)
    gate_bonus: float = _non_negative(1.0)
    crash: float = _non_negative(5.0)



@dataclass(frozen=True)
class EnvConfig(Config, schema=_SCHEMA, prefix="env."):
    """The vectorised racing environment.

    episode_s: training episode length (then truncated, bootstrapped with the critic).
    random_start_prob: probability that a training episode starts in flight before a random gate
        (Swift's randomised starts along the track); else hovering at the track's start.
    start_distance_m, start_speed_mps: that in-flight start's distance before the gate (along its
        normal) and speed towards it.
    frame_width_m, frame_depth_m: the gate frame's border width around the opening and its
        thickness along the normal (a frame hit is a crash).
    bounds_margin_m: the flight volume is the gates' bounding box grown by this much
        horizontally, from the ground to ceiling_m; leaving it is a crash.
    gate_obs: how many of the next gates the policy sees.
    """

    quad: QuadConfig = field(default_factory=QuadConfig)
    track: TrackGenConfig = field(default_factory=TrackGenConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    episode_s: float = setting(10.0, range=(0.1, 3600.0))
    random_start_prob: float = setting(0.7, range=(0.0, 1.0))
    start_distance_m: Tuple[float, float] = _pair((1.5, 6.0), 0.0, 100.0)
    start_speed_mps: Tuple[float, float] = _pair((0.0, 8.0), 0.0, 50.0)
    frame_width_m: float = setting(0.2, range=(0.0, 5.0))
    frame_depth_m: float = setting(0.1, range=(0.0, 5.0))
    bounds_margin_m: float = setting(5.0, range=(0.5, 100.0))
    ceiling_m: float = setting(8.0, range=(1.0, 1000.0))
    gate_obs: int = setting(2, range=(1, 4))



@dataclass(frozen=True)
class NetworkConfig(Config, schema=_SCHEMA, prefix="network."):
    """Actor and critic MLPs (Swift: 2 x 128, LeakyReLU): hidden layer widths, tanh activations.

    init_log_std: initial log standard deviation of the Gaussian policy (state independent).
    """

    actor_hidden: Tuple[int, ...] = setting((128, 128), range=(1, 4096))
    critic_hidden: Tuple[int, ...] = setting((128, 128), range=(1, 4096))
    init_log_std: float = setting(-0.5, range=(-5.0, 2.0))

    def _check(self):
        for name in ("actor_hidden", "critic_hidden"):
            if not 1 <= len(getattr(self, name)) <= 8:
                raise ConfigError(f"network.{name}: must list 1 to 8 layer widths, got {list(getattr(self, name))}")


@dataclass(frozen=True)
class PPOConfig(Config, schema=_SCHEMA, prefix="ppo."):
    """Proximal policy optimisation (Schulman et al. 2017), Swift's / SB3's usual values.

    gamma, gae_lambda: discount and GAE parameter. clip: ratio clip epsilon. epochs and
    minibatches per iteration. value_coef, entropy_coef: loss weights. max_grad_norm: global
    gradient clip. lr: Adam learning rate (linearly annealed to lr_final_frac * lr).
    target_kl: stop an iteration's epochs early when the approximate KL exceeds it (0 = never).
    """

    gamma: float = setting(0.99, range=(0.0, 1.0))
    gae_lambda: float = setting(0.95, range=(0.0, 1.0))
    clip: float = setting(0.2, range=(0.0, 1.0), low_open=True)
    epochs: int = setting(4, range=(1, 100))
    minibatches: int = setting(4, range=(1, 1024))
    value_coef: float = _non_negative(0.5)
    entropy_coef: float = _non_negative(0.0)
    max_grad_norm: float = _positive(0.5)
    lr: float = setting(3e-4, range=(0.0, 1.0), low_open=True)
    lr_final_frac: float = setting(0.2, range=(0.0, 1.0))
    target_kl: float = _non_negative(0.05)



@dataclass(frozen=True)
class TrainConfig(Config, schema=_SCHEMA, prefix="train."):
    """The run. An iteration collects ``workers x envs_per_worker x steps`` environment steps.

    seed: every random draw (tracks, starts, actions, minibatches) derives from it; a run is
        deterministic given the seed and the worker count.
    checkpoint_every, eval_every, log_every: in iterations (0 = never for eval).
    eval_tracks: unseen random tracks flown (2 laps, deterministic policy) at each evaluation.
    """

    iterations: int = setting(300, range=(1, 10_000_000))
    envs_per_worker: int = setting(64, range=(1, 65536))
    steps: int = setting(128, range=(1, 100_000))
    seed: int = setting(0, range=(0, 2 ** 31 - 1))
    checkpoint_every: int = setting(10, range=(1, 10_000_000))
    eval_every: int = setting(25, range=(0, 10_000_000))
    eval_tracks: int = setting(8, range=(1, 10_000))
    log_every: int = setting(1, range=(1, 10_000_000))



@dataclass(frozen=True)
class RaceConfig(Config, schema=_SCHEMA, prefix=""):
    """Everything that defines a racing training run and the exported policy's interface."""

    env: EnvConfig = field(default_factory=EnvConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def config_from_dict(values: Optional[Mapping[str, Any]]) -> RaceConfig:
    """A validated :class:`RaceConfig` from nested mappings (missing keys keep their defaults)."""
    return RaceConfig.from_dict(values or {})


def load_config(path: Union[str, Path]) -> RaceConfig:
    """Read a training YAML file (``config/race/``); raises ConfigError naming the file and key."""
    import yaml

    from planner_pkg import safe_yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from None
    try:
        data = safe_yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {' '.join(str(exc).split())}") from None
    try:
        return config_from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
