"""Gate-racing throughput: rollout env steps/s against the number of Ray workers, and where a
training iteration's time goes.

    python benchmarks/race.py [--workers 1 2] [--envs 64] [--steps 128] [--repeat 3] [--ray-address local]
                              [--profile] [--model M.agm] [--tracks N]

(a) Scale-out: a WorkerPool of N rollout workers (N = 1 in-process; N > 1 Ray actors on a
    ``local`` Ray instance, or ``--ray-address auto|ray://...``) collects ``--steps`` steps of
    ``--envs`` environments per worker with a fixed random policy; env steps/s is the median over
    ``--repeat`` collections after one warm-up (Ray start-up excluded). Columns: speed-up against
    1 worker, and speed-up per worker (1.0 = linear scaling). On a machine with fewer free cores
    than workers the speed-up is bounded by the free cores, not by the code.
(b) ``--profile``: one training iteration of config/race/default.yaml split into env physics,
    gate checks, observation, reward and reset (inside the environment), the NumPy policy forward
    in the workers, and the autograd_core PPO update (forward + backward + Adam), each in
    milliseconds and as a share of the iteration.
(c) ``--model M.agm`` (default: the shipped model): success rate (every gate in order, 2 laps),
    mean speed and lap-time ratio against the minimum-snap baseline over ``--tracks`` unseen
    random tracks.

Times are medians; the machine is shared, so read ratios, not absolute numbers. Never asserts.
"""
import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner_pkg.racing.config import load_config  # noqa: E402
from planner_pkg.racing.env import ACTION_DIM, obs_dim  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _random_params(cfg, seed=0):
    import autograd_core as ag
    from planner_pkg.racing.network import ActorCritic, ObsNormalizer, numpy_params

    ag.manual_seed(seed)
    d = obs_dim(cfg.env)
    return numpy_params(ActorCritic(d, ACTION_DIM, cfg.network), ObsNormalizer(d))


def scale_out(cfg, workers_list, envs, steps, repeat, address):
    from planner_pkg.racing.pool import WorkerPool

    params = _random_params(cfg)
    rows = []
    for n in workers_list:
        with WorkerPool(cfg.to_dict(), n, envs, 0, address) as pool:
            pool.collect(params, steps)  # warm-up (actor start, imports)
            rates = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                batches = pool.collect(params, steps)
                dt = time.perf_counter() - t0
                rates.append(sum(b["stats"]["steps"] for b in batches) / dt)
            rows.append((n, pool.mode, float(np.median(rates))))
    base = rows[0][2]
    print(f"(a) rollout throughput: {envs} envs x {steps} steps per worker, median of {repeat}; "
          f"os.cpu_count() = {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'workers':>7} {'mode':>10} {'env steps/s':>12} {'speed-up':>9} {'per worker':>10}")
    for n, mode, r in rows:
        print(f"{n:>7} {mode:>10} {r:>12.0f} {r / base:>9.2f} {r / base / n:>10.2f}")


def profile_iteration(cfg):
    import autograd_core as ag
    from threadpoolctl import threadpool_limits

    from planner_pkg.racing.network import ActorCritic, ObsNormalizer, numpy_params
    from planner_pkg.racing.ppo import ppo_update
    from planner_pkg.racing.rollout import RolloutWorker

    d = obs_dim(cfg.env)
    ag.manual_seed(0)
    net = ActorCritic(d, ACTION_DIM, cfg.network)
    norm = ObsNormalizer(d)
    opt = ag.optim.Adam(net.parameters(), lr=cfg.ppo.lr)
    w = RolloutWorker(cfg.to_dict(), 0, cfg.train.envs_per_worker, 0)
    w.collect(numpy_params(net, norm), 8)
    prof = cProfile.Profile()
    with threadpool_limits(limits=1):
        t0 = time.perf_counter()
        prof.enable()
        b = w.collect(numpy_params(net, norm), cfg.train.steps)
        prof.disable()
        t1 = time.perf_counter()
        prof_u = cProfile.Profile()
        prof_u.enable()
        ppo_update(net, opt, b, norm.normalize(b["obs"]), cfg.ppo, np.random.default_rng(0))
        prof_u.disable()
        t2 = time.perf_counter()
    st = pstats.Stats(prof)
    total = (t2 - t0) * 1e3

    def cum(fn_name, file_part):
        for (f, _, name), (_, _, _, ct, _) in st.stats.items():
            if name == fn_name and file_part in f:
                return ct * 1e3
        return 0.0

    # cProfile inflates the collection; scale the parts to the measured collection time
    scale = (t1 - t0) * 1e3 / max(cum("_collect", "rollout.py"), 1e-9)
    parts = [("env: physics (quad.step)", cum("step", "racing/quad.py")),
             ("env: gate crossings / frame hits", cum("gate_events", "racing/gates.py")),
             ("env: observation", cum("observe", "racing/env.py")),
             ("env: resets (new random tracks)", cum("reset", "racing/env.py")),
             ("env: step total", cum("step", "racing/env.py")),
             ("workers: policy + critic forward (NumPy)", cum("mlp_forward", "racing/network.py"))]
    n_steps = cfg.train.steps * cfg.train.envs_per_worker
    print(f"(b) one iteration of {n_steps} env steps (1 worker, {cfg.train.envs_per_worker} envs): {total:.0f} ms; "
          f"collection {(t1 - t0) * 1e3:.0f} ms, PPO update ({cfg.ppo.epochs} epochs x {cfg.ppo.minibatches} "
          f"minibatches, autograd_core) {(t2 - t1) * 1e3:.0f} ms")
    print(f"{'part':<44} {'ms':>8} {'share':>7}")
    for name, ms in parts:
        ms *= scale
        print(f"{name:<44} {ms:>8.0f} {ms / total:>7.1%}")
    print(f"{'learner: PPO update':<44} {(t2 - t1) * 1e3:>8.0f} {(t2 - t1) * 1e3 / total:>7.1%}")
    print("    top of the update profile (cumulative):")
    su = pstats.Stats(prof_u)
    su.sort_stats("tottime")
    rows = sorted(su.stats.items(), key=lambda kv: -kv[1][2])[:6]
    tot_u = sum(v[2] for v in su.stats.values())
    for (f, line, name), (_, _, tt, ct, _) in rows:
        print(f"    {Path(f).name + ':' + name:<50} self {tt * 1e3:7.0f} ms ({tt / tot_u:5.1%})")


def evaluate(model, n_tracks):
    from planner_pkg.racing.baseline import baseline_lap_time
    from planner_pkg.racing.export import default_model_path
    from planner_pkg.racing.evaluate import eval_tracks, fly_tracks, summarize
    from planner_pkg.racing.export import load_racer

    path = model or default_model_path()
    if path is None:
        print("(c) no model (none shipped, none given)")
        return
    racer = load_racer(path)
    tracks = eval_tracks(n_tracks, racer.config.env.track, first=10_000)
    res = fly_tracks(racer.act, tracks, racer.config.env, laps=2)
    s = summarize(res)
    ratios = []
    for r in res:
        if r.success:
            base = baseline_lap_time(r.track, racer.config.env.quad)
            ratios.append(r.lap_times_s[1] / base.lap_time_s)
    print(f"(c) {path}: {n_tracks} unseen random tracks (eval seeds from 10000), 2 laps")
    print(f"    success {s['success_rate']:.1%} (target >= 90 %), mean speed of successful flights "
          f"{s['mean_speed_mps']:.2f} m/s (target >= 6), gates passed {s['gates_frac']:.1%}, crashes {s['crashes']}")
    if ratios:
        print(f"    lap-2 time / minimum-snap baseline: median {np.median(ratios):.2f}, "
              f"range {min(ratios):.2f}-{max(ratios):.2f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "config/race/default.yaml"))
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ray-address", default="local")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--model")
    ap.add_argument("--tracks", type=int, default=0)
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    if not args.skip_scale:
        scale_out(cfg, args.workers, args.envs, args.steps, args.repeat, args.ray_address)
    if args.profile:
        profile_iteration(cfg)
    if args.tracks:
        evaluate(args.model, args.tracks)


if __name__ == "__main__":
    main()
