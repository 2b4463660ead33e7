"""Training scenarios: seeded worlds, start/goal pairs and per-episode randomisation.

An :class:`Episode` is everything random about one training rollout except the per-step noise:
the batch's worlds, each agent's world, start, goal, commanded speed, safety margin, camera
field of view and pitch, and its dynamics parameters. Worlds used in training have *even*
generator seeds and evaluation worlds *odd* ones (:func:`eval_world_seed`), so evaluation
always flies in worlds the policy never saw.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from planner_pkg.policy.config import PolicyConfig
from planner_pkg.policy.dynamics import EpisodeDynamics, sample_episode_dynamics
from planner_pkg.policy.guidance import GuidanceGrid, guidance_grid
from planner_pkg.policy.observation import target_velocity  # noqa: F401 - re-exported (training scenarios)
from planner_pkg.policy.render import PackedScene, pack_scenes
from planner_pkg.world import generate_world

__all__ = ["Episode", "sample_episode", "train_world_seed", "eval_world_seed", "target_velocity"]

_MAX_WORLD_SEED = 1 << 30
_TRIES = 16


def train_world_seed(k: int) -> int:
    """The generator seed of training world number ``k`` (even)."""
    return 2 * (int(k) % _MAX_WORLD_SEED)


def eval_world_seed(k: int) -> int:
    """The generator seed of evaluation world number ``k`` (odd: never a training world)."""
    return 2 * (int(k) % _MAX_WORLD_SEED) + 1


@dataclass
class Episode:
    """One training rollout's scenario; arrays are per agent (B leading), SI units, world ENU."""

    worlds: List
    scene: PackedScene
    agent_world: np.ndarray  # (B,) int
    start: np.ndarray  # (B, 3) m
    goal: np.ndarray  # (B, 3) m
    speed: np.ndarray  # (B,) m/s
    margin: np.ndarray  # (B,) m
    hfov: np.ndarray  # (B,) rad
    pitch: np.ndarray  # (B,) rad, positive = camera tilted down
    yaw0: np.ndarray  # (B,) rad, initial heading (towards the goal)
    dynamics: EpisodeDynamics
    # loss.velocity_guidance: one grid of the ways to its agents' goals per world, and each agent's
    # goal index in its world's grid (None when the config does not ask for the guide)
    guidance: Optional[List[GuidanceGrid]] = None
    guidance_index: Optional[np.ndarray] = None

    @property
    def batch(self) -> int:
        return self.start.shape[0]


def _free_points(world, rng, x_center, n: int, cfg, clearance: float) -> np.ndarray:
    """``n`` points near x = ``x_center`` (scalar or (n,)) with the configured lateral/altitude spread, each at
    least ``clearance`` m from every surface (best of a few tries; never inside a solid)."""
    lo, hi = np.asarray(world.bounds_min), np.asarray(world.bounds_max)
    half_y = 0.5 * (hi[1] - lo[1])
    mid_y = 0.5 * (hi[1] + lo[1])
    alt_lo, alt_hi = cfg.env.altitude_m
    alt_hi = min(alt_hi, hi[2] - clearance)
    pts = np.empty((n, 3))
    cand = np.empty((n, _TRIES, 3))
    cand[..., 0] = np.reshape(x_center, (-1, 1)) + rng.uniform(-1.0, 1.0, (n, _TRIES))
    cand[..., 1] = mid_y + rng.uniform(-1.0, 1.0, (n, _TRIES)) * cfg.env.lateral_frac * half_y
    cand[..., 2] = rng.uniform(alt_lo, max(alt_lo, alt_hi), (n, _TRIES))
    d = world.signed_distance(cand.reshape(-1, 3)).reshape(n, _TRIES)
    ok = d >= clearance
    first = np.where(ok.any(axis=1), ok.argmax(axis=1), d.argmax(axis=1))  # else the freest try
    pts[:] = cand[np.arange(n), first]
    return pts


def sample_episode(cfg: PolicyConfig, batch: int, rng: np.random.Generator) -> Episode:
    """Draw one training episode of ``batch`` agents from ``rng`` (worlds included)."""
    env, obs = cfg.env, cfg.observation
    n_worlds = min(env.worlds_per_batch, batch)
    world_ids = rng.integers(0, _MAX_WORLD_SEED, size=n_worlds)
    kinds = env.world_kinds
    worlds = [generate_world(kinds[w % len(kinds)], train_world_seed(k), **env.world_params_for(rng))
              for w, k in enumerate(world_ids)]
    agent_world = np.arange(batch) % n_worlds
    start = np.empty((batch, 3))
    goal = np.empty((batch, 3))
    for w, world in enumerate(worlds):
        idx = np.nonzero(agent_world == w)[0]
        lo, hi = np.asarray(world.bounds_min), np.asarray(world.bounds_max)
        mid, half = 0.5 * (lo[0] + hi[0]), 0.5 * (hi[0] - lo[0])
        clear = env.start_clearance_m + env.vehicle_radius_m
        frac = rng.uniform(*env.start_x_frac, size=idx.size)
        start[idx] = _free_points(world, rng, mid - frac * half, idx.size, cfg, clear)
        goal[idx] = _free_points(world, rng, mid + env.goal_x_frac * half, idx.size, cfg, clear)
    # half the agents fly the other way (the worlds are not symmetric)
    flip = rng.random(batch) < 0.5
    start[flip], goal[flip] = goal[flip].copy(), start[flip].copy()
    delta = goal - start
    yaw0 = np.arctan2(delta[:, 1], delta[:, 0])
    guidance = guidance_index = None
    if cfg.loss.velocity_guidance:
        lc = cfg.loss
        guidance, guidance_index = [], np.empty(batch, dtype=int)
        for w, world in enumerate(worlds):
            idx = np.nonzero(agent_world == w)[0]
            guidance_index[idx] = np.arange(idx.size)
            guidance.append(guidance_grid(world, goal[idx], lc.guidance_cell_m, env.vehicle_radius_m,
                                          lc.guidance_clearance_m, lc.guidance_cost, env.altitude_m))
    return Episode(
        worlds=worlds,
        scene=pack_scenes(worlds),
        agent_world=agent_world,
        start=start,
        goal=goal,
        speed=rng.uniform(*env.speed_mps, size=batch),
        margin=rng.uniform(*cfg.loss.margin_m, size=batch),
        hfov=np.radians(rng.uniform(*obs.hfov_deg, size=batch)),
        pitch=np.radians(rng.uniform(*obs.pitch_deg, size=batch)),
        yaw0=yaw0,
        dynamics=sample_episode_dynamics(cfg.dynamics, batch, rng),
        guidance=guidance,
        guidance_index=guidance_index,
    )


def wrap_angles(angle: np.ndarray) -> np.ndarray:
    """Angles (any shape) wrapped to [-pi, pi)."""
    return np.remainder(angle + math.pi, 2.0 * math.pi) - math.pi
