"""Learned-policy diagnostics of issue 16, sections (e) and (f) of ``benchmarks/policy.py``.

    python benchmarks/policy.py --speed-diagnostics [--model FILE] [--config FILE]   # (e)
    python benchmarks/policy.py --braking-diagnostics [--model FILE] [--episodes N]  # (f)

(e) Speed diagnostics (issue 16; no flights, seconds): the velocity prior alone (zero head) in the
    training dynamics against its analytic steady state, for the model's prior; the model's
    open-space equilibrium (where its x-acceleration, on the empty-world image, equals the drag
    0.35 v) per commanded speed; the training config's target-speed distribution (an ideal
    tracker of the target over its episodes: share of steps in the approach, by speed); and the
    ceiling of ``policy eval``'s mean speed on the forest (40 m) and cluttered (30 m) courses for
    the model's approach profile (ideal tracker from rest, 8 m/s^2).

(f) Braking diagnostics (issue 16; flights, ~1 s per episode): the policy in the full-quadrotor
    forest eval (first world 500) at 5, 7 and 10 m/s, instrumented at every policy step where the
    target speed is the command (not in the approach): flown speed / command; the along-track
    acceleration, the velocity prior's alone and the network's correction to it (pre-squash); the
    share of braking steps (along-track < -1 m/s^2); by the free distance ahead along the velocity
    (a tube of the vehicle radius + 0.1 m, to 12 m) against the stopping distance 0.2 v + v^2 / 16;
    the share of steps whose clearance (distance - radius - 0.2 m margin) is inside the model's
    avoidance range; the planner's clamp activity; the velocity-estimate head against the truth.

(g) Loss pull (issue 16; 2 x 32 training rollouts per world density, ~1 min): for each loss term k of
    the training config, its speed pull -g_k . g_S / |g_S|, with g_S the gradient of the batch's
    mean horizontal flown speed S and g_k that of weight_k x term_k with respect to the network's
    weights: how much a gradient step on that term alone changes S (per unit step along g_S).
    Positive terms push the policy faster, negative ones slower; at a trained model they balance.
    Run for open space (obstacle count x 0) and for the training density (x 1).

    python benchmarks/policy.py --loss-pull [--model FILE] [--config FILE]             # (g)

(h) Time split (issue 16; flights, ~1 s per episode): the `policy eval` flights (first world 500,
    full quadrotor, calibrated command) at 7 m/s in forest and cluttered worlds; over the
    successful ones: the mean speed, the time spent in the first 5 m, the middle and the last 5 m
    of the path, and the flights that slow below half the command in the middle for more than
    0.3 s (a hard brake for an obstacle ahead) with the mean speed of the others. Compare with the
    ceilings of (e): where the mean speed goes.

    python benchmarks/policy.py --time-split [--model FILE] [--episodes N]             # (h)

(i) Brake geometry (issue 16; flights, ~1 s per episode): the same flights as (h); at the onset of each
    hard brake (a run below half the command in the middle of the path; onset: the last speed peak
    before it), whether an obstacle lies in the straight tube of the vehicle radius ahead (within
    10 m) and how far, and whether a sideways shift of at most 0.3 / 0.6 m would have cleared it
    (the shifted straight path to 1 m past where the tube is blocked keeps 0.1 m beyond the
    radius): is the network braking where a small swerve would do?

    python benchmarks/policy.py --brake-geometry [--model FILE] [--episodes N]         # (i)
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import autograd_core as ag  # noqa: E402


# ---------------------------------------------------------------------------------------------
# (e) speed diagnostics
# ---------------------------------------------------------------------------------------------
SPEEDS = (3.0, 5.0, 7.0, 10.0)


def _prior_steady_speed(net_cfg, speed, drag, steps=150, batch=1):
    """Speed reached by the prior alone (zero head, the network's squash) in the training point
    mass with drag ``drag`` (no wind, noise, jitter or delay)."""
    from planner_pkg.policy.config import DynamicsConfig
    from planner_pkg.policy.dynamics import EpisodeDynamics, PointMassBatch

    dyn = DynamicsConfig(dt_jitter=0.0, wind_std_mps=0.0, ou_sigma_mps2=0.0)
    ep = EpisodeDynamics(np.full((batch, 1), 12.0), np.tile([drag, drag, 0.1], (batch, 1)), np.zeros((batch, 3)),
                         np.zeros(batch, int))
    sim = PointMassBatch(dyn, ep, np.zeros((batch, 3)), np.random.default_rng(0))
    m = np.array([net_cfg.max_accel_xy_mps2, net_cfg.max_accel_xy_mps2, net_cfg.max_accel_z_mps2])
    ff = np.array([net_cfg.velocity_prior_drag_per_s, net_cfg.velocity_prior_drag_per_s, 0.0])
    target = np.array([speed, 0.0, 0.0])
    with ag.no_grad():
        for _ in range(steps):
            v = sim.velocity.numpy()
            raw = net_cfg.velocity_prior_gain_per_s * (target - v) + ff * target
            sim.step(ag.tensor(m * np.tanh(raw / m)))
    return float(sim.velocity.numpy()[0, 0])


def _equilibrium(pol, speed, drag=0.35):
    """Open-space cruise of a model: the v where its x-acceleration on the empty-world image
    (level, 1 m up, GRU warmed 30 steps per v) equals ``drag * v``; nan if none below 1.3 V."""
    from planner_pkg.policy.observation import depth_observation, state_vector
    from planner_pkg.sim.camera import DepthCamera
    from planner_pkg.types import VehicleState
    from planner_pkg.world import generate_world

    cfg = pol.config
    depth = DepthCamera().render_depth(generate_world("forest", 1, count=0), VehicleState.at_rest([0.0, 0.0, 1.0]))[0]
    img = depth_observation(depth, cfg.observation)[None, None]
    margin = 0.5 * sum(cfg.loss.margin_m)

    def excess(v):
        h = np.zeros((1, cfg.network.hidden), np.float32)
        s = state_vector(np.array([[v, 0, 0]]), np.array([[speed, 0, 0]]), np.array([[0, 0, 1.0]]), 0.0, margin)
        for _ in range(30):
            out, h = pol.model(img, s, h)
        return float(out[0, 0]) - drag * v

    vs = np.linspace(0.0, 1.3 * speed, 53)
    f = np.array([excess(v) for v in vs])
    k = np.nonzero(np.diff(np.sign(f)))[0]
    if not k.size:
        return math.nan
    i = k[0]
    return float(vs[i] - f[i] * (vs[i + 1] - vs[i]) / (f[i + 1] - f[i]))


def _ideal_mean_speed(speed, gain, decel, length=40.0, accel=8.0, tol=0.5, dt=2e-3):
    """Path / time of an ideal vehicle that tracks the target profile from rest with |a| <= accel."""
    from planner_pkg.policy.observation import target_velocity

    x = v = t = 0.0
    goal = np.array([[length, 0.0, 0.0]])
    while length - x > tol:
        vt = float(target_velocity(np.array([[x, 0.0, 0.0]]), goal, np.array([speed]), gain, decel)[0, 0])
        v = min(vt, v + accel * dt) if vt > v else max(vt, v - accel * dt)
        x += v * dt
        t += dt
    return length / t


def _eval_courses():
    """(world kind, start-goal distance m) of ``policy eval``'s courses (the generators' defaults)."""
    from planner_pkg.world import GENERATOR_PARAMS

    out = []
    for kind in ("forest", "cluttered"):
        d = GENERATOR_PARAMS[kind]()
        out.append((kind, float(np.linalg.norm(np.subtract(d.goal, d.start)))))
    return out


def _target_distribution(cfg, episodes=4, batch=32):
    from planner_pkg.policy.env import sample_episode
    from planner_pkg.policy.observation import target_velocity

    rng = np.random.default_rng(1)
    speeds, approach = [], []
    for _ in range(episodes):
        ep = sample_episode(cfg, batch, rng)
        p = ep.start.copy()
        for _ in range(cfg.train.steps):
            tv = target_velocity(p, ep.goal, ep.speed, cfg.env.approach_gain_per_s, cfg.env.approach_decel_mps2)
            s = np.linalg.norm(tv, axis=1)
            speeds.append(s)
            approach.append(s < ep.speed - 1e-6)
            p = p + tv * cfg.dynamics.dt_s
    return np.concatenate(speeds), np.concatenate(approach)


def bench_speed(model_path, cfg_path):
    from planner_pkg.policy.export import default_model_path
    from planner_pkg.policy.config import load_config
    from planner_pkg.policy.export import load_policy

    path = model_path or default_model_path()
    print(f"\n(e) speed diagnostics: model {path}, training config {cfg_path}")
    if path is not None:
        pol = load_policy(path)
        net = pol.config.network
        env = pol.config.env
        print(f"  model prior: gain {net.velocity_prior_gain_per_s:g} 1/s, drag feed-forward "
              f"{net.velocity_prior_drag_per_s:g} 1/s; approach gain {env.approach_gain_per_s:g} 1/s, braking "
              f"{env.approach_decel_mps2:g} m/s^2")
        courses = _eval_courses()
        print(f"  {'V m/s':>6} {'prior alone':>12} {'model cruise':>13} "
              + " ".join(f"{'ceiling ' + kind + f' {length:.0f} m':>22}" for kind, length in courses))
        for v in SPEEDS:
            prior = _prior_steady_speed(net, v, 0.35) if net.velocity_prior_gain_per_s > 0 else math.nan
            eq = _equilibrium(pol, v)
            ceilings = [_ideal_mean_speed(v, env.approach_gain_per_s, env.approach_decel_mps2, length)
                        for _, length in courses]
            print(f"  {v:6.1f} {prior:7.2f} ({prior / v:.2f}V) {eq:7.2f} ({eq / v:.2f}V) "
                  + " ".join(f"{c:15.2f} ({c / v:.2f}V)" for c in ceilings))
        print("  (prior alone: zero head, training dynamics, drag 0.35; model cruise: open-space equilibrium;\n"
              "   ceiling: the mean speed of an ideal tracker of the approach profile, from rest, 8 m/s^2, on\n"
              "   `policy eval`'s course of each world kind: what a flawless flight of that model would show)")
    cfg = load_config(cfg_path)
    speeds, approach = _target_distribution(cfg)
    edges = [0, 1, 3, 5, 7, 10, 1e9]
    hist, _ = np.histogram(speeds, edges)
    share = ", ".join((f"{a:g}-{b:g}" if b < 1e9 else f">{a:g}") + f": {100 * c / speeds.size:.0f}%"
                      for a, b, c in zip(edges, edges[1:], hist))
    print(f"  training targets ({cfg_path}): {100 * approach.mean():.0f} % of agent-steps in the approach; "
          f"by target speed (m/s) {share}")


def _braking_episode(planner, pol, world, start, goal, speed, rows):
    """Fly one instrumented episode (section (f)); appends per-step dicts to ``rows``."""
    from planner_pkg.sim.runner import ClosedLoopRunner, RunnerConfig

    pc = pol.config
    gain, drag = pc.network.velocity_prior_gain_per_s, pc.network.velocity_prior_drag_per_s
    mxy, mz = pc.network.max_accel_xy_mps2, pc.network.max_accel_z_mps2
    radius = pc.env.vehicle_radius_m
    seen = {}
    model, clamp, step = pol.model, planner._clamp, planner.step

    def model_spy(img, s, h):
        a, hh = model(img, s, h)
        seen["s"], seen["a"] = s[0].copy(), a[0].copy()
        return a, hh

    def clamp_spy(a):
        pre = a.copy()
        out = clamp(a)
        seen["clamped"] = bool(np.linalg.norm(pre - out) > 1e-6)
        return out

    def step_spy(state, depth_m=None, stamp=None):
        seen.clear()
        sp = step(state, depth_m, stamp)
        if planner.last_status != "ok" or "s" not in seen:
            return sp
        v, p = np.asarray(state.velocity, float), np.asarray(state.position, float)
        s, a = seen["s"], seen["a"]
        vt, vb, speed_now = s[3:6].astype(float), s[0:3].astype(float), float(np.linalg.norm(v))
        target = float(np.linalg.norm(vt))
        prior = gain * (vt - vb)
        prior[:2] += drag * vt[:2]
        head = np.array([mxy, mxy, mz]) * np.arctanh(np.clip(a[:3] / np.array([mxy, mxy, mz]), -0.999999, 0.999999))
        u = vb / speed_now if speed_now > 0.3 else vt / max(target, 1e-6)
        direction = v / speed_now if speed_now > 0.3 else (goal - p) / np.linalg.norm(goal - p)
        ahead = np.arange(0.0, 12.01, 0.1)
        sd = np.asarray(world.signed_distance(p[None] + ahead[:, None] * direction[None]))
        hit = np.nonzero(sd < radius + 0.1)[0]
        rows.append({"speed": speed_now, "target": target, "a_along": float(a[:3] @ u),
                     "prior_along": float(mxy * np.tanh(prior @ u / mxy)), "corr_along": float((head - prior) @ u),
                     "free": float(ahead[hit[0]]) if hit.size else 12.0, "near": float(sd[0] - radius),
                     "est_x": float(a[3]), "vbx": float(vb[0]), "clamped": seen.get("clamped", False)})
        return sp

    pol.model, planner._clamp, planner.step = model_spy, clamp_spy, step_spy
    try:
        run = ClosedLoopRunner(world, planner, RunnerConfig(timeout_s=3 * 40 / speed + 10, seed=0, point_cloud=False))
        return run.run(start, goal).summary
    finally:
        pol.model, planner._clamp, planner.step = model, clamp, step


def bench_braking(model_path, episodes, speeds=(5.0, 7.0, 10.0), first_world=500):
    """(f): where and why the policy brakes in the forest eval (module docstring)."""
    from planner_pkg.policy.export import default_model_path
    from planner_pkg.policy.env import eval_world_seed
    from planner_pkg.policy.export import load_policy
    from planner_pkg.policy.planner import PolicyPlanner, PolicyPlannerConfig
    from planner_pkg.world import GENERATOR_PARAMS, generate_world

    path = model_path or default_model_path()
    pol = load_policy(path)
    rng_m = pol.config.loss.avoidance_range_m
    d = GENERATOR_PARAMS["forest"]()
    start, goal = np.array(d.start, float), np.array(d.goal, float)
    print(f"\n(f) braking diagnostics: {path}, forest, {episodes} worlds per speed (first {first_world}), quadrotor;"
          f" steps with the target at the command")
    for speed in speeds:
        planner = PolicyPlanner(pol, PolicyPlannerConfig(speed_mps=speed))
        per_ep, reached = [], 0
        for i in range(episodes):
            seed = eval_world_seed(first_world + i)
            world = generate_world("forest", seed)
            rows = []
            summary = _braking_episode(planner, pol, world, start, goal, speed, rows)
            if summary.reached:
                reached += 1
                per_ep.extend(rows)
        if not per_ep:
            print(f"  {speed:g} m/s: no successful episode")
            continue
        A = {k: np.array([r[k] for r in per_ep]) for k in per_ep[0]}
        cruise = A["target"] >= 0.98 * speed
        brake = cruise & (A["a_along"] < -1.0)
        stop = 0.2 * A["speed"] + A["speed"] ** 2 / 16.0
        inside = (A["near"] - 0.2) < rng_m
        print(f"  {speed:g} m/s: {reached}/{episodes} reached; flown {A['speed'][cruise].mean():.2f} m/s = "
              f"{A['speed'][cruise].mean() / speed:.2f} x command; along-track accel {A['a_along'][cruise].mean():+.2f} "
              f"(prior alone {A['prior_along'][cruise].mean():+.2f}, network correction {A['corr_along'][cruise].mean():+.2f})"
              f" m/s^2; braking {100 * brake.sum() / max(cruise.sum(), 1):.1f} % of steps")
        print(f"    clearance inside the avoidance range ({rng_m:g} m) on {100 * inside[cruise].mean():.0f} % of steps"
              f" (median clearance {np.median(A['near'][cruise] - 0.2):.2f} m); clamp active "
              f"{100 * A['clamped'].mean():.1f} %; velocity estimate {A['est_x'][cruise].mean():.2f} vs true "
              f"{A['vbx'][cruise].mean():.2f} m/s")
        print(f"    {'free ahead m':>12} {'steps %':>8} {'speed':>6} {'net corr':>9} {'braking %':>9} {'stop dist m':>11}")
        for lo, hi in ((0, 2), (2, 4), (4, 6), (6, 8), (8, 10), (10, 12.1)):
            sel = cruise & (A["free"] >= lo) & (A["free"] < hi)
            if sel.any():
                print(f"    {f'{lo}-{min(hi, 12):g}':>12} {100 * sel.sum() / cruise.sum():8.1f} {A['speed'][sel].mean():6.2f} "
                      f"{A['corr_along'][sel].mean():+9.2f} {100 * (sel & brake).sum() / sel.sum():9.0f} "
                      f"{stop[sel].mean():11.2f}")


# ---------------------------------------------------------------------------------------------
# (g) loss pull
# ---------------------------------------------------------------------------------------------
def _flat_grad(value, params):
    """d value / d params, flattened into one float64 vector (zeros for a parameter it does not reach)."""
    grads = ag.autograd.grad(value, params, retain_graph=True, allow_unused=True)
    return np.concatenate([np.zeros(p.numel()) if g is None else g.numpy().ravel().astype(np.float64)
                           for p, g in zip(params, grads)])


def bench_loss_pull(model_path, cfg_path, factors=(0.0, 1.0), batches=2, batch_size=32):
    from planner_pkg.policy.config import load_config
    from planner_pkg.policy.env import sample_episode
    from planner_pkg.policy.export import default_model_path, load_weights_from_model
    from planner_pkg.policy.rollout import run_rollout
    from planner_pkg.policy.trainer import build_network

    path = model_path or default_model_path()
    base = load_config(cfg_path)
    if base.env.world_params.get("count") is None:
        print(f"\n(g) loss pull: {cfg_path} has no env.world_params.count to scale; skipped")
        return
    print(f"\n(g) loss pull: model {path}, training config {cfg_path}, {batches} x {batch_size} rollouts per density")
    for factor in factors:
        cfg = base.replace(env={"count_scale": [factor, factor]})
        net = build_network(cfg)
        load_weights_from_model(net, path)
        params = list(net.parameters())
        pulls, speeds = {}, []
        for k in range(batches):
            rng = np.random.default_rng(2000 + k)
            ep = sample_episode(cfg, batch_size, rng)
            res = run_rollout(net, ep, cfg, rng, cfg.train.steps)
            s = (res.velocity[:, :, :2] ** 2).sum(dim=2).sqrt().mean()
            speeds.append((float(s.detach().numpy()), float(ep.speed.mean())))
            g_s = _flat_grad(s, params)
            for name, term in res.terms.items():
                weight = getattr(cfg.loss, name)
                if weight:
                    g_k = _flat_grad(term * weight, params)
                    pulls.setdefault(name, []).append(-float(g_k @ g_s) / float(np.linalg.norm(g_s)))
        flown, commanded = np.mean(speeds, axis=0)
        print(f"  obstacle count x {factor:g}: flown {flown:.2f} m/s for a mean command of {commanded:.2f} m/s")
        print("    " + "  ".join(f"{name} {np.mean(v):+.3f}" for name, v in pulls.items())
              + f"  | net {sum(np.mean(v) for v in pulls.values()):+.3f}")


def _eval_flight(pol, kind, seed, speed):
    """One ``policy eval`` flight (full quadrotor, calibrated command) in world ``seed`` of ``kind``:
    (world, episode)."""
    from planner_pkg.policy.planner import PolicyPlanner, PolicyPlannerConfig
    from planner_pkg.sim.runner import ClosedLoopRunner, RunnerConfig
    from planner_pkg.world import GENERATOR_PARAMS, generate_world

    d = GENERATOR_PARAMS[kind]()
    start, goal = np.array(d.start, float), np.array(d.goal, float)
    heading = goal - start
    world = generate_world(kind, seed)
    cfg = RunnerConfig(timeout_s=3.0 * float(np.linalg.norm(heading)) / speed + 10.0, seed=seed, point_cloud=False)
    ep = ClosedLoopRunner(world, PolicyPlanner(pol, PolicyPlannerConfig(speed_mps=speed)), cfg).run(
        start, goal, start_yaw=math.atan2(heading[1], heading[0]))
    return world, ep


def _path_middle(log, edge_m):
    """(distance travelled at each sample of a flight log (t, p, v rows), m; the samples farther than
    ``edge_m`` along the path from either end): the take-off and the approach left out."""
    travelled = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(log[:, 1:4], axis=0), axis=1))])
    return travelled, (travelled >= edge_m) & (travelled <= travelled[-1] - edge_m)


def bench_time_split(model_path, episodes, speeds=(7.0,), first_world=500, edge_m=5.0, slow_s=0.3):
    """(h): where the mean speed of the eval flights goes (module docstring)."""
    from planner_pkg.policy.env import eval_world_seed
    from planner_pkg.policy.export import default_model_path, load_policy

    path = model_path or default_model_path()
    pol = load_policy(path)
    print(f"\n(h) time split: {path}, {episodes} worlds per kind and speed (first {first_world}), quadrotor")
    print(f"  {'world':>9} {'V':>4} {'ok':>5} {'mean':>5} {'first 5 m':>9} {'middle':>16} {'last 5 m':>8} "
          f"{'slowed':>7} {'slow s':>6} {'mean of others':>14}")
    for kind in ("forest", "cluttered"):
        for speed in speeds:
            rows = []
            for i in range(episodes):
                _, ep = _eval_flight(pol, kind, eval_world_seed(first_world + i), speed)
                s = ep.summary
                if not s.reached or s.collided:
                    continue
                log = ep.log.as_array()
                v = np.linalg.norm(log[:, 4:7], axis=1)
                travelled, mid = _path_middle(log, edge_m)
                dt = np.diff(log[:, 0], append=log[-1, 0])
                length = travelled[-1]
                first, last = dt[travelled < edge_m].sum(), dt[travelled > length - edge_m].sum()
                middle = s.time_s - first - last
                rows.append((s.mean_speed_mps, first, middle, (length - 2 * edge_m) / max(middle, 1e-9), last,
                             dt[mid & (v < 0.5 * speed)].sum()))
            if not rows:
                print(f"  {kind:>9} {speed:4g}     0 successful flights")
                continue
            r = np.array(rows)
            slowed = r[:, 5] > slow_s
            others = f"{r[~slowed, 0].mean():14.2f}" if (~slowed).any() else f"{'-':>14}"
            print(f"  {kind:>9} {speed:4g} {len(r):5d} {r[:, 0].mean():5.2f} {r[:, 1].mean():7.2f} s "
                  f"{r[:, 2].mean():5.2f} s ({r[:, 3].mean():4.2f} m/s) {r[:, 4].mean():6.2f} s {slowed.sum():7d} "
                  f"{r[slowed, 5].mean() if slowed.any() else 0.0:6.2f} {others}")
    print(f"  (successful flights; middle: the path between its first and last {edge_m:g} m, with its mean speed; "
          f"slowed: flights\n   below {0.5:g} x the command in the middle for more than {slow_s:g} s, slow s: "
          "their mean time there)")


def _brake_events(log, speed, edge_m=5.0):
    """Hard brakes of a flight log (t, p, v rows): runs of samples in the middle of the path (beyond
    ``edge_m`` from either end) below half the command. Per run: (index of its onset, the last
    speed peak before it; lowest speed, m/s; time below half the command, s)."""
    v = np.linalg.norm(log[:, 4:6], axis=1)
    slow = _path_middle(log, edge_m)[1] & (v < 0.5 * speed)
    events, k = [], 0
    while k < len(v):
        if not slow[k]:
            k += 1
            continue
        end = k
        while end < len(v) and slow[end]:
            end += 1
        onset = k
        while onset > 0 and v[onset - 1] > v[onset]:
            onset -= 1
        events.append((onset, float(v[k:end].min()), float(log[end - 1, 0] - log[k, 0])))
        k = end
    return events


def _brake_geometry(world, position, velocity, radius, reach_m=10.0, max_shift_m=2.0, margin_m=0.1, past_m=1.0):
    """At a brake's onset: the free distance ahead along the horizontal velocity (a tube of the
    vehicle ``radius``; inf when free to ``reach_m``), and the smallest sideways shift (either side,
    up to ``max_shift_m``; inf if none) that keeps the straight path to ``past_m`` beyond that point
    (past the obstacle's near side) ``margin_m`` beyond the radius from every surface."""
    d = np.array([velocity[0], velocity[1], 0.0])
    d /= max(float(np.linalg.norm(d)), 1e-9)
    side = np.array([-d[1], d[0], 0.0])
    ahead = np.arange(0.1, reach_m, 0.05)
    hit = np.nonzero(np.asarray(world.signed_distance(position[None] + ahead[:, None] * d[None])) < radius)[0]
    if not hit.size:
        return math.inf, math.inf
    along = np.arange(0.1, ahead[hit[0]] + past_m, 0.05)
    line = position[None] + along[:, None] * d[None]
    for shift in np.arange(0.05, max_shift_m + 1e-9, 0.05):
        for sign in (1.0, -1.0):
            if (np.asarray(world.signed_distance(line + sign * shift * side[None])) >= radius + margin_m).all():
                return float(ahead[hit[0]]), float(shift)
    return float(ahead[hit[0]]), math.inf


def bench_brake_geometry(model_path, episodes, speeds=(7.0,), first_world=500):
    """(i): what lies ahead when the eval flights brake hard (module docstring)."""
    from planner_pkg.policy.env import eval_world_seed
    from planner_pkg.policy.export import default_model_path, load_policy

    path = model_path or default_model_path()
    pol = load_policy(path)
    radius = pol.config.env.vehicle_radius_m
    print(f"\n(i) brake geometry: {path}, {episodes} worlds per kind and speed (first {first_world}), quadrotor")
    print(f"  {'world':>9} {'V':>4} {'brakes':>6} {'flights':>7} {'obstacle ahead':>14} {'median m':>8} "
          f"{'shift<=0.3':>10} {'<=0.6':>5} {'min m/s':>7} {'below s':>7}")
    for kind in ("forest", "cluttered"):
        for speed in speeds:
            rows, flights = [], 0
            for i in range(episodes):
                world, ep = _eval_flight(pol, kind, eval_world_seed(first_world + i), speed)
                log = ep.log.as_array()
                events = _brake_events(log, speed)
                flights += bool(events)
                for onset, low, below in events:
                    ahead, shift = _brake_geometry(world, log[onset, 1:4], log[onset, 4:7], radius)
                    rows.append((ahead, shift, low, below))
            if not rows:
                print(f"  {kind:>9} {speed:4g} {0:6d}")
                continue
            r = np.array(rows)
            blocked = np.isfinite(r[:, 0])
            median_ahead = f"{np.median(r[blocked, 0]):8.2f}" if blocked.any() else f"{'-':>8}"
            print(f"  {kind:>9} {speed:4g} {len(r):6d} {flights:7d} {blocked.sum():14d} {median_ahead} "
                  f"{(r[:, 1] <= 0.3).sum():10d} {(r[:, 1] <= 0.6).sum():5d} {np.median(r[:, 2]):7.2f} "
                  f"{np.median(r[:, 3]):7.2f}")
    print("  (brakes: runs below 0.5 x the command in the middle of the path; at each one's onset (the last speed "
          "peak\n   before it): obstacle ahead in a straight tube of the vehicle radius within 10 m, its median "
          "distance, and\n   how many a sideways shift of at most 0.3 / 0.6 m would have cleared (to 1 m past it, "
          "0.1 m to spare);\n   median lowest speed and time below 0.5 x the command)")
