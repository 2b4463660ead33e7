"""One training rollout: render -> observe -> network -> delayed command -> point mass, T times.

Gradients flow from the losses through the point-mass states and the commands into the
network's weights (and back through time along the dynamics, decayed per step). The velocity
entries of the state input are differentiable functions of the simulated velocity (the policy
is a feedback law); the depth image, the target velocity, the up axis and the heading are
treated as constants (rendering is not differentiable).

:func:`run_rollout` returns the loss terms (scalar Tensors) and per-agent statistics, so the
trainer can call ``total.backward()``; with ``ag.no_grad()`` around it, it is also a cheap
point-mass evaluation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import numpy as np

import autograd_core as ag

from planner_pkg.policy import losses as L
from planner_pkg.policy.config import PolicyConfig
from planner_pkg.policy.distance import distance_and_gradient, world_distance
from planner_pkg.policy.dynamics import PointMassBatch
from planner_pkg.policy.env import Episode, target_velocity, wrap_angles
from planner_pkg.policy.guidance import guide_directions
from planner_pkg.policy.observation import (attitude_from_thrust_batch, camera_rotation_batch,
                                            depth_observation, heading_to, state_vector, yaw_rotate)
from planner_pkg.policy.render import render_depth

__all__ = ["RolloutResult", "run_rollout", "yaw_to_world", "cone_half_angle", "guided_target"]


@dataclass
class RolloutResult:
    """Loss terms (name -> scalar Tensor), their weighted ``total``, and per-agent statistics.

    stats: ``collided`` (B,) bool (the vehicle's ball touched a surface), ``reached`` (B,) bool
    (came within the goal tolerance), ``success`` (B,) bool: no collision in the rollout (a
    10 s training rollout at low speed cannot reach a goal 30 m away, so the training statistic
    is collision-free flight; closed-loop evaluation measures reaching the goal),
    ``min_clearance_m`` (B,), ``mean_speed_mps`` (B,). velocity: the flown velocities (T, B, 3)
    Tensor, m/s, in the graph of the losses (diagnostics differentiate the speed through it).
    """

    terms: Dict[str, object]
    total: object
    stats: Dict[str, np.ndarray]
    velocity: object = None

    def summary(self) -> Dict[str, float]:
        """Batch means of the statistics and the loss values as plain floats."""
        out = {name: float(t.item()) for name, t in self.terms.items()}
        out["total"] = float(self.total.item())
        out["success_rate"] = float(np.mean(self.stats["success"]))
        out["collision_rate"] = float(np.mean(self.stats["collided"]))
        out["mean_speed_mps"] = float(np.mean(self.stats["mean_speed_mps"]))
        return out


def yaw_to_world(vec_yaw, yaw: np.ndarray):
    """(B, 3) Tensor in the yaw frame -> (B, 3) float64 Tensor in world ENU (autograd ops)."""
    v = vec_yaw.double()
    c = ag.tensor(np.cos(yaw)[:, None])
    s = ag.tensor(np.sin(yaw)[:, None])
    x, y, z = v[:, 0:1], v[:, 1:2], v[:, 2:3]
    return ag.cat([c * x - s * y, s * x + c * y, z], dim=1)


def attach_velocity(state: np.ndarray, velocity, velocity_np: np.ndarray, yaw: np.ndarray):
    """The state input as a Tensor whose velocity entries (0:3, yaw frame) are differentiable
    functions of the simulated ``velocity`` (B, 3) Tensor: the policy is a feedback law, and
    its gradient must see that its own input moves with the vehicle (as in Zhang et al.'s code).
    Any noise already in ``state`` is kept as a constant offset. Other entries stay constants."""
    c = ag.tensor(np.cos(yaw)[:, None])
    s = ag.tensor(np.sin(yaw)[:, None])
    vx, vy, vz = velocity[:, 0:1], velocity[:, 1:2], velocity[:, 2:3]
    v_yaw = ag.cat([c * vx + s * vy, c * vy - s * vx, vz], dim=1)
    offset = state[:, 0:3].astype(np.float64) - yaw_rotate(velocity_np, yaw)  # noise (and float32 rounding)
    v_in = (v_yaw + ag.tensor(offset)).float()
    return ag.cat([v_in, ag.tensor(state[:, 3:])], dim=1)


def cone_half_angle(cfg: PolicyConfig, hfov: np.ndarray) -> float:
    """Fat-ray half-angle (rad) for the training renderer: half a rendered pixel, or 0."""
    if not cfg.observation.fat_rays:
        return 0.0
    cols = cfg.observation.image_hw[1] * cfg.observation.render_scale
    return float(np.max(hfov)) * 0.5 / cols


def observe(cfg: PolicyConfig, ep: Episode, position, velocity, thrust, yaw, rng, noisy: bool):
    """Network inputs (image (B, 1, rows, cols) float32, state (B, 10) float32) and the camera's
    body-to-world rotations, for detached NumPy state arrays (B, 3) and headings (B,)."""
    obs = cfg.observation
    body = attitude_from_thrust_batch(thrust, yaw)
    cam = camera_rotation_batch(body, ep.pitch)
    hw = (obs.image_hw[0] * obs.render_scale, obs.image_hw[1] * obs.render_scale)
    depth = render_depth(ep.scene, ep.agent_world, position, cam, ep.hfov, hw, obs.max_range_m,
                         cone_half_angle(cfg, ep.hfov))
    image = depth_observation(depth, obs)
    v_seen = velocity
    if noisy:
        if obs.noise_std > 0:
            image = image + rng.normal(0.0, obs.noise_std, image.shape).astype(np.float32)
        if obs.velocity_noise_std_mps > 0:
            v_seen = velocity + rng.normal(0.0, obs.velocity_noise_std_mps, velocity.shape)
    target = target_velocity(position, ep.goal, ep.speed, cfg.env.approach_gain_per_s, cfg.env.approach_decel_mps2)
    state = state_vector(v_seen, target, body[:, :, 2], yaw, ep.margin)
    return image[:, None], state, target


def _distances_with_lateral(position, velocity, ep: Episode):
    """(B,) distances of ``position`` (B, 3) Tensor to the batch's worlds, twice: with the distance
    field's gradient (as :func:`world_distance`) and with that gradient's part along the horizontal
    direction of ``velocity`` (B, 3) removed (faded out below 0.5 m/s; the direction is not
    differentiated). Same values; one evaluation of the field."""
    p_np = position.detach().numpy()
    dist, grad = distance_and_gradient(ep.worlds, ep.agent_world, p_np)
    v = velocity.detach().numpy().astype(np.float64)
    v[:, 2] = 0.0
    speed = np.linalg.norm(v, axis=1, keepdims=True)
    along = v / np.maximum(speed, 1e-9) * np.minimum(speed / 0.5, 1.0)
    lateral = grad - (grad * along).sum(axis=1, keepdims=True) * along
    dtype = p_np.dtype
    moved = position - position.detach()  # zero; carries the gradient to the position
    base = ag.tensor(dist.astype(dtype))
    full = base + (moved * ag.tensor(grad.astype(dtype))).sum(dim=1)
    return full, base + (moved * ag.tensor(lateral.astype(dtype))).sum(dim=1)


def guided_target(ep: Episode, target: np.ndarray, position: np.ndarray, lookahead_m: float) -> np.ndarray:
    """The velocity loss's target under ``loss.velocity_guidance``: ``target`` (B, 3) m/s (the
    straight-line target at ``position`` (B, 3) m) with its horizontal part turned to the guide's
    direction, same horizontal speed; unchanged where there is no guide (``guidance.guide_directions``)."""
    out = np.array(target, dtype=np.float64, copy=True)
    speed_xy = np.hypot(target[:, 0], target[:, 1])
    for w, grid in enumerate(ep.guidance):
        idx = np.nonzero(ep.agent_world == w)[0]
        if idx.size == 0:
            continue
        direction, valid = guide_directions(grid, ep.guidance_index[idx], position[idx], ep.goal[idx], lookahead_m)
        k = idx[valid]
        out[k, 0:2] = direction[valid] * speed_xy[k, None]
    return out


def run_rollout(net, ep: Episode, cfg: PolicyConfig, rng: np.random.Generator, steps: int,
                noisy: bool = True) -> RolloutResult:
    """Fly the batch of ``ep`` for ``steps`` control steps with ``net``; losses and statistics."""
    b = ep.batch
    dyn = cfg.dynamics
    sim = PointMassBatch(dyn, ep.dynamics, ep.start, rng)
    hidden = net.initial_hidden(b)
    steer_estimate = cfg.loss.velocity_estimate_steers
    hidden_const = None if steer_estimate else net.initial_hidden(b)
    yaw = ep.yaw0.copy()
    radius = cfg.env.vehicle_radius_m
    margin = ag.tensor(ep.margin)
    positions, velocities, commands, estimates, clearances = [], [], [], [], []
    # the acceleration term's reference: the drag feed-forward at the velocity before each step
    # (LossConfig.acceleration_beyond_drag; 0 = the whole command is charged)
    drag_ff = cfg.network.velocity_prior_drag_per_s if cfg.loss.acceleration_beyond_drag else 0.0
    v_before = []
    ray_on = cfg.loss.ray_clearance > 0  # probes ahead along the flight direction (losses.ray_probes)
    # (0, 0): the probes at their fixed distances, as before the look-ahead times existed
    ray_lookahead = cfg.loss.ray_clearance_lookahead_s if any(cfg.loss.ray_clearance_lookahead_s) else None
    ray_clear, ray_weights = [], []
    # the avoidance term on positions whose along-track gradient is removed (LossConfig)
    lateral_avoidance = not cfg.loss.avoidance_along_track_gradient
    lateral_clearances = []
    targets, truths, dts = [], [], []
    guided = cfg.loss.velocity_guidance  # the velocity term's target follows the privileged guide
    if guided and ep.guidance is None:
        raise ValueError("loss.velocity_guidance needs an episode sampled with it (env.sample_episode)")
    raw_dist = np.empty((steps, b))
    goal_dist = np.empty((steps, b))
    for t in range(steps):
        p_np, v_np, f_np = sim.position.detach().numpy(), sim.velocity.detach().numpy(), sim.thrust.detach().numpy()
        image, state, target = observe(cfg, ep, p_np, v_np, f_np, yaw, rng, noisy)
        attached = attach_velocity(state, sim.velocity, v_np, yaw)
        if steer_estimate:
            out, hidden = net(ag.tensor(image), attached, hidden)
        else:  # the estimate from a pass whose state input is a constant (LossConfig.velocity_estimate_steers)
            out, hidden, hidden_const = net.forward_training(ag.tensor(image), attached, ag.tensor(state), hidden,
                                                             hidden_const)
        command = yaw_to_world(out[:, 0:3], yaw)
        estimates.append(out[:, 3:6])
        truths.append(yaw_rotate(v_np, yaw))
        targets.append(guided_target(ep, target, p_np, cfg.loss.guidance_lookahead_m) if guided else target)
        sim.step(command)
        commands.append(command)
        if drag_ff > 0:
            v_before.append(v_np)
        positions.append(sim.position)
        velocities.append(sim.velocity)
        if lateral_avoidance:
            dist, dist_lateral = _distances_with_lateral(sim.position, sim.velocity, ep)
            lateral_clearances.append(dist_lateral - radius - margin)
        else:
            dist = world_distance(sim.position, ep.worlds, ep.agent_world)
        clearances.append(dist - radius - margin)
        if ray_on:
            probes, weights = L.ray_probes(sim.position, sim.velocity, cfg.loss.ray_clearance_probes_m,
                                           lookahead_s=ray_lookahead)
            k = probes.shape[0]
            probe_dist = world_distance(probes.reshape(k * b, 3), ep.worlds, np.tile(ep.agent_world, k))
            ray_clear.append(probe_dist.reshape(k, b) - radius - margin)
            ray_weights.append(weights)
        raw_dist[t] = dist.detach().numpy()
        dt = sim.last_dt[:, 0]
        dts.append(dt)
        p_new = sim.position.detach().numpy()
        goal_dist[t] = np.linalg.norm(p_new - ep.goal, axis=1)
        # heading: first-order tracking of the direction to the goal (not differentiated)
        want = heading_to(ep.goal - p_new, yaw)
        yaw = wrap_angles(yaw - np.expm1(-dyn.yaw_gain_per_s * dt) * wrap_angles(want - yaw))

    lc = cfg.loss
    pos, vel, cmd = ag.stack(positions), ag.stack(velocities), ag.stack(commands)
    charged = cmd
    if v_before:  # the command beyond the drag feed-forward (one node for the whole rollout)
        held = np.zeros(cmd.shape, dtype=cmd.detach().numpy().dtype)
        held[..., :2] = drag_ff * np.stack(v_before)[..., :2]
        charged = cmd - ag.tensor(held)
    clear = ag.stack(clearances)
    window = max(1, int(round(lc.velocity_window_s / dyn.dt_s)))
    terms = {
        "velocity": L.velocity_loss(vel, np.stack(targets), window, lc.velocity_beta_mps),
        "velocity_estimate": L.velocity_estimate_loss(ag.stack(estimates), np.stack(truths)),
        "avoidance": L.avoidance_loss(ag.stack(lateral_clearances) if lateral_avoidance else clear, np.stack(dts),
                                      lc.avoidance_range_m,
                                      constant_weight=not lc.avoidance_closing_gradient),
        "collision": L.collision_loss(clear, lc.collision_sharpness_per_m),
        **({"ray_clearance": L.ray_clearance_loss(ag.stack(ray_clear), np.stack(ray_weights),
                                                  lc.ray_clearance_range_m)} if ray_on else {}),
        "acceleration": L.acceleration_loss(charged),
        "jerk": L.jerk_loss(cmd),
        "altitude": L.altitude_loss(pos, lc.altitude_band_m),
    }
    total = L.total_loss(terms, lc)

    # statistics (no gradient)
    hit = raw_dist < radius
    reach = goal_dist <= cfg.env.goal_tolerance_m
    speed = np.linalg.norm(vel.detach().numpy(), axis=2).mean(axis=0)
    stats = {
        "collided": hit.any(axis=0),
        "reached": reach.any(axis=0),
        "success": ~hit.any(axis=0),
        "min_clearance_m": raw_dist.min(axis=0) - radius,
        "mean_speed_mps": speed,
    }
    return RolloutResult(terms, total, stats, vel)
