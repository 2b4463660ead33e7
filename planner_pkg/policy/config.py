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

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple, Union

from planner_pkg.config_schema import Config, ConfigError, Schema, setting
from planner_pkg.sim.mission_judge import GOAL_TOLERANCE_M

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
    "MAX_PARAMETERS",
    "MAX_TRAINING_BYTES",
    "parameter_count",
    "training_bytes_estimate",
    "cnn_input_sizes",
]

#: Length of the state vector fed to the network: velocity (3) and target velocity (3) in the
#: yaw frame, the attitude's up axis in the yaw frame (3), the safety margin (1).
STATE_DIM = 10


_SCHEMA = Schema()  # errors read "section.key: must be ..., got ..."
_INF = math.inf

# Size limits, checked when a configuration is built (a YAML file, a checkpoint's or a model's
# metadata), so an absurd size is refused with a message instead of a MemoryError mid-run.
#: Side of the network's depth input: >= 10 (the CNN's three convolutions need it), at most a
#: depth camera's resolution.
MAX_IMAGE_SIDE = 1024
MAX_RENDER_SCALE = 16
MAX_CHANNELS = 1024
MAX_HIDDEN = 4096
MAX_BATCH = 65536
MAX_STEPS = 100_000
MAX_DELAY_STEPS = 1000
#: Network weights; 64 M float32 is 256 MB, and the exported model must fit the onboard
#: runtime's 1 GiB buffer cap (autograd_core.runtime).
MAX_PARAMETERS = 64_000_000
#: Upper estimate of a training iteration's memory (see :func:`training_bytes_estimate`).
MAX_TRAINING_BYTES = 64 << 30


def _positive(default: float):
    """A field that must be finite and > 0."""
    return setting(default, range=(0.0, _INF), low_open=True)


def _non_negative(default):
    """A field (or each element of a tuple field) that must be >= 0."""
    return setting(default, range=(0, _INF))


def _at_least_one(default):
    """An integer field (or each element of a tuple field) that must be >= 1."""
    return setting(default, range=(1, _INF))


def _pair(default, low: float = -_INF, high: float = _INF, low_open: bool = False):
    """A (low, high) range field: low <= high, both within [low, high] (or (low, high])."""
    return setting(default, range=(low, high), low_open=low_open, pair=True)


@dataclass(frozen=True)
class DynamicsConfig(Config, schema=_SCHEMA, prefix="dynamics."):
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

    dt_s: float = setting(1.0 / 15.0, range=(0.0, 1.0), low_open=True)
    dt_jitter: float = setting(0.1, range=(0.0, 0.5))
    lag_rate_per_s: Tuple[float, float] = _pair((10.0, 14.0), 0.0, low_open=True)
    action_delay_steps: Tuple[int, int] = _pair((0, 1), 0, MAX_DELAY_STEPS)
    drag_xy_per_s: Tuple[float, float] = _pair((0.30, 0.45), 0.0, low_open=True)
    drag_z_per_s: Tuple[float, float] = _pair((0.05, 0.15), 0.0, low_open=True)
    wind_std_mps: float = _non_negative(0.3)
    ou_sigma_mps2: float = _non_negative(0.2)
    ou_theta_per_s: float = _non_negative(2.0)
    grad_decay_per_s: float = setting(0.4, range=(0.0, 1.0), low_open=True)
    gravity_mps2: float = _non_negative(9.81)
    yaw_gain_per_s: float = _positive(6.0)


@dataclass(frozen=True)
class ObservationConfig(Config, schema=_SCHEMA, prefix="observation."):
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

    image_hw: Tuple[int, int] = setting((12, 16), range=(10, MAX_IMAGE_SIDE))
    render_scale: int = setting(1, range=(1, MAX_RENDER_SCALE))
    fat_rays: bool = True
    hfov_deg: Tuple[float, float] = _pair((85.0, 95.0), 10.0, 150.0)
    pitch_deg: Tuple[float, float] = _pair((-5.0, 5.0), -45.0, 45.0)
    max_range_m: float = _positive(10.0)
    near_m: float = _positive(0.3)
    far_m: float = 24.0  # > near_m
    inv_depth_scale: float = _positive(3.0)
    inv_depth_offset: float = 0.6
    noise_std: float = _non_negative(0.02)
    velocity_noise_std_mps: float = _non_negative(0.05)

    def _check(self):
        _SCHEMA.number(self._key("far_m"), self.far_m, (self.near_m, _INF), low_open=True)


@dataclass(frozen=True)
class NetworkConfig(Config, schema=_SCHEMA, prefix="network."):
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
        The network then starts out flying near the commanded speed and only has to learn when
        and how to deviate, which cuts the training a CPU can afford by a large factor.
    velocity_prior_drag_per_s: drag feed-forward of that prior (0 = none): the horizontal (yaw
        frame x, y) part of the prior becomes ``gain * (target - velocity) + drag * target``, so
        against a linear drag ``drag`` the prior alone settles at the target speed. Without it
        the prior settles at ``gain / (gain + D)`` of the target (0.84 at gain 2, D 0.375: the
        network has to learn the missing thrust itself; measured in issue 16's note).
    fine_branch: departure from the paper (False = the paper's single CNN): the CNN above reads
        the image max-pooled by 2 (the nearest obstacle in each 2 x 2 cell, as a camera pooled to
        half of ``observation.image_hw`` would give it), and a second CNN of the same shape reads
        the full image; their embeddings are added. ``observation.image_hw`` must be even (e.g.
        24 x 32 with a 12 x 16 coarse CNN). The second CNN's last linear layer starts at zero, so a
        model trained on the coarse image (``policy train --init-from``) starts with exactly that
        model's outputs and training brings the finer image in. Why: at 12 x 16 over a 90 deg
        field one input cell is 5.6 deg wide, so a gap between trunks 5 m ahead narrower than
        0.5 m falls inside one cell and reads as the trunk in front of it.
    """

    channels: Tuple[int, int, int] = setting((32, 64, 128), range=(1, MAX_CHANNELS))
    hidden: int = setting(192, range=(1, MAX_HIDDEN))
    leaky_slope: float = setting(0.05, range=(0.0, 1.0))
    max_accel_xy_mps2: float = _positive(8.0)
    max_accel_z_mps2: float = _positive(5.0)
    velocity_prior_gain_per_s: float = _non_negative(0.0)
    velocity_prior_drag_per_s: float = _non_negative(0.0)
    fine_branch: bool = False


@dataclass(frozen=True)
class LossConfig(Config, schema=_SCHEMA, prefix="loss."):
    """Loss weights and shapes (see :mod:`planner_pkg.policy.losses`).

    Weights of the terms (see :mod:`planner_pkg.policy.losses` for their exact form):
    velocity: smooth-L1 of (moving-average velocity over ``velocity_window_s`` - target), with
        its knee at ``velocity_beta_mps`` (1 m/s: the old behaviour; below the knee the pull
        is proportional to the error, so an opposing pull leaves a steady error ~ beta).
    velocity_estimate: MSE of the auxiliary velocity estimate (yaw frame).
    avoidance: max(closing speed, 1 m/s) x squared hinge of the clearance below
        ``avoidance_range_m`` (paper: 1.5-3.0).
    collision: softplus(-collision_sharpness_per_m * clearance) (paper: 2.0-7.5, sharpness 32).
    ray_clearance: squared hinge of the clearance below ``ray_clearance_range_m`` at probe points
        ``ray_clearance_probes_m`` ahead along the horizontal flight direction (speed-invariant:
        it asks for a turn, never for braking). 0 (default) = off: older configs train as before.
        ``ray_clearance_lookahead_s`` (s, per probe; default (0, 0) = fixed distances): probe k
        lies at ``max(probes_m[k], speed x lookahead_s[k])``, the speed not differentiated, so a
        fast vehicle probes as far ahead in time as a slow one (at 7 m/s, 0.35 / 0.7 s put the
        probes at 2.45 / 4.9 m; below 4.3 m/s they stay at 1.5 / 3 m).
    acceleration, jerk: mean squared command and per-step command change.
    altitude: squared excursion outside ``altitude_band_m``.
    margin_m: range of the per-episode safety margin (also a network input); the clearance is
        signed distance - vehicle radius - margin.
    avoidance_closing_gradient: whether the avoidance term's closing-speed weight is
        differentiated. True (the old behaviour) adds a gradient that asks the vehicle to fly
        *slower* wherever it is near an obstacle, on top of the hinge's push away from it; False
        treats the weight as a constant per step, as Zhang et al.'s code does (``no_grad``), so the
        term asks for clearance (swerving) and the weight only says where that matters most.
    velocity_estimate_steers: whether the velocity-estimate term's gradient may reach the flown
        trajectory. The estimate reads the state input, which is a differentiable function of the
        simulated velocity (``rollout.attach_velocity``), so with True (the old behaviour) the
        auxiliary loss also *steers* the vehicle towards states it estimates well. False computes
        the estimate from a copy of the recurrent pass whose state input is a constant: the term
        then trains the weights only (same values, same forward result; a little more compute).
    acceleration_beyond_drag: whether the acceleration term penalises the command beyond the
        network's drag feed-forward (``network.velocity_prior_drag_per_s`` x the horizontal
        velocity before the step, not differentiated) instead of the whole command. False (the old
        behaviour) also charges the thrust that only holds the speed against drag: in open space
        that charge is the main brake on the policy (speed pull -0.25 against the velocity term's
        +0.34 for the stage-5 model, docs/policy.md), and the network settles at 0.90 x its command.
    avoidance_along_track_gradient: whether the avoidance term's gradient may move the vehicle
        along its horizontal flight direction. True (the old behaviour): the term's gradient is
        the distance field's, which for an obstacle ahead points back along the path, i.e. it
        asks to arrive later (brake). False: each step's position reaches the avoidance term with
        the along-track part of its gradient removed (the direction of the velocity after the
        step, not differentiated, faded out below 0.5 m/s where a direction means nothing), so
        the term can only ask for more clearance sideways (or vertically); the collision term
        keeps the full gradient (it still asks to brake when contact is near). Same loss values.
    velocity_guidance: whether the velocity term's target follows a privileged guide instead of the
        straight line to the goal (``planner_pkg.policy.guidance``): the cheapest way to the goal
        around the obstacles, planned on the whole world (which the network never sees) on a grid
        of ``guidance_cell_m``, keeping ``guidance_clearance_m`` beyond the vehicle radius where it
        can (moving closer costs up to ``1 + guidance_cost`` times the distance), aimed at the
        farthest point of that way visible within ``guidance_lookahead_m``. Only the direction of
        the horizontal target changes (its speed and the vertical part stay); in open space, or where
        the vehicle's cell has no way to the goal, the target is the straight one. The network's
        input is always the straight-line target (all a flight has). False (default): as before.
    """

    velocity: float = _non_negative(1.0)
    velocity_estimate: float = _non_negative(2.0)
    avoidance: float = _non_negative(2.0)
    collision: float = _non_negative(4.0)
    ray_clearance: float = _non_negative(0.0)
    acceleration: float = _non_negative(0.01)
    jerk: float = _non_negative(0.001)
    altitude: float = _non_negative(1.0)
    velocity_window_s: float = _positive(2.0)
    velocity_beta_mps: float = _positive(1.0)
    avoidance_range_m: float = _positive(1.0)
    collision_sharpness_per_m: float = _positive(32.0)
    ray_clearance_range_m: float = _positive(0.5)
    ray_clearance_probes_m: Tuple[float, float] = _pair((1.5, 3.0), 0.0, low_open=True)
    ray_clearance_lookahead_s: Tuple[float, float] = _pair((0.0, 0.0), 0.0)
    altitude_band_m: Tuple[float, float] = _pair((0.5, 4.0))
    margin_m: Tuple[float, float] = _pair((0.1, 0.3), 0.0)
    avoidance_closing_gradient: bool = True
    velocity_estimate_steers: bool = True
    acceleration_beyond_drag: bool = False
    avoidance_along_track_gradient: bool = True
    velocity_guidance: bool = False
    guidance_cell_m: float = setting(0.25, range=(0.05, 2.0))
    guidance_clearance_m: float = _positive(0.4)
    guidance_cost: float = _non_negative(10.0)
    guidance_lookahead_m: float = _positive(8.0)


@dataclass(frozen=True)
class EnvConfig(Config, schema=_SCHEMA, prefix="env."):
    """The training scenarios (see :mod:`planner_pkg.policy.env`).

    world_kind, world_params: ``planner_pkg.world.generate_world`` arguments; every world of
        training is a fresh seed, drawn from the training seed (evaluation uses other seeds).
        ``"forest+cluttered"`` alternates the two kinds over the batch's worlds (the same
        ``world_params`` go to both, e.g. ``size_x`` and ``count``); the periodic evaluation
        during training then flies the first kind.
    worlds_per_batch: the batch's agents are spread evenly over this many worlds.
    count_scale: range of a per-world factor on ``world_params.count`` (the obstacle count is
        rounded; 0 gives an empty world). (1, 1), the default, keeps every world at ``count``;
        a range below 1 mixes in sparse and open worlds (density randomisation; it did not by
        itself raise the open-space cruise, docs/policy.md). Needs ``world_params.count``.
    speed_mps: range of the per-agent commanded speed.
    start_x_frac: range of the start's x, as a fraction of the world's half length on the far
        side from the goal (x = -frac * size_x / 2; a negative fraction starts past the middle,
        so part of the batch reaches the goal within a rollout and learns to arrive there).
    goal_x_frac: the goal lies at x = +goal_x_frac * size_x / 2.
    lateral_frac: |y| of start and goal up to this fraction of the half width.
    altitude_m: range of start and goal altitudes.
    start_clearance_m: starts are resampled until this far from every surface.
    vehicle_radius_m: collision radius (the simulator's 0.19 m).
    approach_gain_per_s, approach_decel_mps2: near the goal the target speed is
        ``min(speed, gain * d, sqrt(2 * decel * d))`` at distance ``d`` (the braking curve only
        where decel > 0; see ``observation.target_velocity``). The planner uses the same profile.
    goal_tolerance_m: "reached" radius for the training success statistic.
    """

    world_kind: str = setting("cluttered", choices=("forest", "cluttered", "walls", "gates", "forest+cluttered"))
    world_params: Mapping[str, Any] = field(default_factory=dict)
    worlds_per_batch: int = setting(4, range=(1, MAX_BATCH))
    count_scale: Tuple[float, float] = _pair((1.0, 1.0), 0.0, 10.0)
    speed_mps: Tuple[float, float] = _pair((1.5, 7.0), 0.0, low_open=True)
    start_x_frac: Tuple[float, float] = _pair((-0.3, 0.85), -1.0, 1.0)
    goal_x_frac: float = setting(0.85, range=(0.0, 1.0))
    lateral_frac: float = setting(0.6, range=(0.0, 1.0))
    altitude_m: Tuple[float, float] = _pair((1.0, 2.5), 0.0, low_open=True)
    start_clearance_m: float = _non_negative(1.0)
    vehicle_radius_m: float = _non_negative(0.19)
    approach_gain_per_s: float = _positive(1.0)
    approach_decel_mps2: float = _non_negative(0.0)
    goal_tolerance_m: float = _positive(GOAL_TOLERANCE_M)  # as a mission's

    def _check(self):
        if tuple(self.count_scale) != (1.0, 1.0):
            count = self.world_params.get("count")
            if isinstance(count, bool) or not isinstance(count, int):
                raise _SCHEMA.error(self._key("count_scale"), f"scales world_params.count, which is {count!r}; "
                                    "give env.world_params.count (an obstacle count) or leave count_scale at [1, 1]")

    @property
    def world_kinds(self) -> Tuple[str, ...]:
        """The generator kinds the training worlds cycle through (one, or two for "a+b")."""
        return tuple(self.world_kind.split("+"))

    def world_params_for(self, rng) -> Mapping[str, Any]:
        """``world_params`` for one training world: ``count`` scaled by a factor drawn from
        ``count_scale`` with ``rng`` (a numpy Generator; nothing is drawn, and ``world_params``
        comes back unchanged, when that range is [1, 1], so older configs replay exactly)."""
        if tuple(self.count_scale) == (1.0, 1.0):
            return self.world_params
        factor = rng.uniform(*self.count_scale)
        return {**self.world_params, "count": int(round(self.world_params["count"] * factor))}


@dataclass(frozen=True)
class TrainConfig(Config, schema=_SCHEMA, prefix="train."):
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

    iterations: int = _at_least_one(2000)
    batch_size: int = setting(64, range=(1, MAX_BATCH))
    steps: int = setting(150, range=(1, MAX_STEPS))
    lr: float = _positive(1e-3)
    lr_min: float = _non_negative(1e-5)  # <= lr
    weight_decay: float = _non_negative(0.01)
    grad_clip_norm: float = _non_negative(5.0)
    seed: int = _non_negative(0)
    checkpoint_every: int = _non_negative(50)
    eval_every: int = _non_negative(200)
    log_every: int = _non_negative(10)
    eval_episodes: int = _non_negative(10)
    eval_speed_mps: float = _positive(3.0)
    eval_vehicle: str = setting("point_mass", choices=("point_mass", "quadrotor"))
    num_threads: int = _at_least_one(1)

    def _check(self):
        _SCHEMA.number(self._key("lr_min"), self.lr_min, (0.0, self.lr))


@dataclass(frozen=True)
class PolicyConfig(Config, schema=_SCHEMA, prefix=""):
    """Everything that defines a training run and the exported policy's interface."""

    dynamics: DynamicsConfig = field(default_factory=DynamicsConfig)
    observation: ObservationConfig = field(default_factory=ObservationConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def _check(self):
        if self.network.fine_branch:
            rows, cols = self.observation.image_hw
            if rows % 2 or cols % 2 or min(rows, cols) < 20:
                raise ConfigError(
                    f"network.fine_branch: the coarse CNN reads the image pooled by 2, so observation.image_hw must "
                    f"be even and at least 20 x 20 (a 10 x 10 coarse image), got {rows} x {cols}")
        n = parameter_count(self.network, self.observation)
        if n > MAX_PARAMETERS:
            rows, cols = self.observation.image_hw
            raise ConfigError(
                f"network: {n:,} weights for a {rows} x {cols} image with channels {list(self.network.channels)} and "
                f"hidden {self.network.hidden}, above the limit of {MAX_PARAMETERS:,}; use a smaller "
                "observation.image_hw, network.channels or network.hidden")
        need = training_bytes_estimate(self)
        if need > MAX_TRAINING_BYTES:
            raise ConfigError(
                f"train: a training iteration would need about {need / 2 ** 30:.3g} GiB of memory (batch_size "
                f"{self.train.batch_size} x steps {self.train.steps} with a {self.observation.image_hw[0]} x "
                f"{self.observation.image_hw[1]} image, render_scale {self.observation.render_scale}), above the "
                f"limit of {MAX_TRAINING_BYTES / 2 ** 30:g} GiB; reduce train.batch_size, train.steps, "
                "observation.image_hw or network.channels")

    def replace(self, **sections) -> "PolicyConfig":
        """A copy with whole sections or ``section={field: value}`` overrides applied."""
        return self.with_overrides({name: value.to_dict() if isinstance(value, Config) else value
                                    for name, value in sections.items()})


def _conv_hw(image_hw):
    """Feature map sizes after each of the CNN's convolutions (k2 s2, k3, k3; network.py)."""
    h1, w1 = (image_hw[0] - 2) // 2 + 1, (image_hw[1] - 2) // 2 + 1
    return (h1, w1), (h1 - 2, w1 - 2), (h1 - 4, w1 - 4)


def parameter_count(net: NetworkConfig, obs: ObservationConfig) -> int:
    """Number of weights of ``PolicyNet(net, obs)`` (exact; see network.py)."""
    c1, c2, c3 = net.channels
    hid = net.hidden
    convs = 4 * c1 + 9 * c1 * c2 + 9 * c2 * c3
    stems = 0
    for hw in cnn_input_sizes(net, obs):
        _, _, (h3, w3) = _conv_hw(hw)
        stems += convs + c3 * h3 * w3 * hid
    return stems + (STATE_DIM + 1) * hid + 6 * hid * hid + 6 * hid + 6 * hid


def cnn_input_sizes(net: NetworkConfig, obs: ObservationConfig):
    """The image sizes (rows, cols) the network's CNNs read, in order (``stem``, then
    ``fine_stem``): the input's, or with NetworkConfig.fine_branch half of it for the coarse CNN
    and the input's for the fine one. network.py builds its CNNs from this list."""
    rows, cols = obs.image_hw
    return [(rows // 2, cols // 2), (rows, cols)] if net.fine_branch else [(rows, cols)]


def training_bytes_estimate(cfg: "PolicyConfig") -> int:
    """Rough upper estimate of one training iteration's peak memory, bytes: the weights with
    their gradients and AdamW moments, the activations backpropagation keeps for every agent
    and step (images, feature maps before and after the activations, im2col matrices, the
    recurrent state), and the renderer's per-step ray buffers. Measured with tracemalloc on
    configurations from 12 x 16 to 48 x 64 images: 1.0x to 2.7x the real peak (never below)."""
    c1, c2, c3 = cfg.network.channels
    rows, cols = cfg.observation.image_hw
    hid = cfg.network.hidden
    per_agent_step = 20 * hid  # float32 values kept for backward: the images each CNN reads and its maps
    for hw in cnn_input_sizes(cfg.network, cfg.observation):
        (h1, w1), (h2, w2), (h3, w3) = _conv_hw(hw)
        maps = c1 * h1 * w1 + c2 * h2 * w2 + c3 * h3 * w3
        im2col = 4 * h1 * w1 + 9 * c1 * h2 * w2 + 9 * c2 * h3 * w3
        per_agent_step += hw[0] * hw[1] + 2 * maps + im2col
    rays = rows * cols * cfg.observation.render_scale ** 2
    b, t = cfg.train.batch_size, cfg.train.steps
    return 4 * (5 * parameter_count(cfg.network, cfg.observation) + b * t * per_agent_step) + 512 * b * rays


def config_from_dict(values: Optional[Mapping[str, Any]]) -> PolicyConfig:
    """A validated :class:`PolicyConfig` from nested mappings (missing keys keep their defaults)."""
    return PolicyConfig.from_dict(values)


def _unique_key_loader():
    """The project's safe YAML loader (:mod:`planner_pkg.safe_yaml`) refusing a key given twice in
    one mapping (PyYAML keeps the last one silently, so a typo'd override would be lost)."""
    import yaml

    from planner_pkg.safe_yaml import SafeLoader

    class UniqueKeyLoader(SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *base" merges; explicit keys override
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: the base class reports it
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}",
                        key_node.start_mark)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def load_config(path: Union[str, Path]) -> PolicyConfig:
    """Read a training YAML file (see ``config/policy/``); raises ConfigError naming bad keys."""
    import yaml

    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r} is not UTF-8 text (byte {exc.start}: "
                          f"{raw[exc.start:exc.start + 1]!r}); save it as UTF-8 YAML") from None
    try:
        data = yaml.load(text, Loader=_unique_key_loader())
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"config file {str(path)!r} is nested too deeply to be a training config") from None
    try:
        return config_from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
