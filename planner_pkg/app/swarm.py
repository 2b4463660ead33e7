"""EGO-Swarm in the embedded simulator: ``python -m planner_pkg swarm fly`` and what it is built of.

``swarm fly --world W --starts S.json --goals G.json --log-dir DIR --summary JSON [--max-vel V]
[--timeout S]``: S.json / G.json are JSON lists of ``[x, y, z]`` (m, ENU), one per drone, same
order. Every drone runs its own EGO planner (:class:`~planner_pkg.planning.swarm.SwarmAgent`)
that knows the others only through their broadcast trajectories (an in-process
:class:`~planner_pkg.planning.swarm.LocalBroadcast`); the drones fly in one world on one clock
(:class:`~planner_pkg.sim.multi.MultiVehicleRunner`), each seeing the others in its depth camera.

Writes ``DIR/drone_<i>.csv`` (``t,x,y,z,vx,vy,vz``, every file on the same sample times) and the
summary JSON (:func:`swarm_summary`). Exit 2 with a one-line message for bad input: lists of
different lengths, not lists of three finite numbers, a start or goal outside the bounds or
within the vehicle radius of an obstacle, two starts (or two goals) closer than two vehicle
radii. Exit 0 once the flight was simulated and written (read ``success`` in the summary),
1 when an output could not be written.

Fault injection (tests, demonstrations): ``--lose-planner I:T`` (drone I's planner stops at sim
time T: it flies its last trajectory to the end and hovers there, its broadcasts stop) and
``--mute I:T`` (drone I's broadcasts are lost from T on; it keeps planning).
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from planner_pkg.planning import EGO_MAX_VEL_MPS
from planner_pkg.sim.mission_judge import GOAL_TOLERANCE_M

#: a swarm mission's default time limit, s (longer than one drone's MISSION_TIMEOUT_S: drones give way)
SWARM_TIMEOUT_S = 90.0
from planner_pkg.cli_args import (EXIT_FAILED, EXIT_OK, CliError, check_start_goal, duration_s, goal_tolerance_m,
                                  load_world_file, output_file, positive_float, seed, speed, writable_path,
                                  write_outputs)

__all__ = ["add_parser", "build_swarm", "fly_swarm", "swarm_summary", "plot_swarm", "read_points"]

MAX_DRONES = 64


def add_parser(sub) -> None:
    """Register ``swarm fly`` on the CLI's subparsers."""
    swarm = sub.add_parser("swarm", help="several drones with EGO-Swarm in the embedded simulator")
    ssub = swarm.add_subparsers(dest="swarm_command", metavar="SWARM_COMMAND")
    ssub.required = True
    fly = ssub.add_parser("fly", help="fly N drones, each planning on its own, coordinated by broadcast trajectories")
    fly.add_argument("--world", required=True, metavar="FILE", help="world file (.yaml/.yml/.json)")
    fly.add_argument("--starts", required=True, metavar="S.json", help="JSON list of [x, y, z] starts, m (one per drone)")
    fly.add_argument("--goals", required=True, metavar="G.json", help="JSON list of [x, y, z] goals, m (same order)")
    fly.add_argument("--log-dir", required=True, metavar="DIR", help="folder for drone_<i>.csv (t,x,y,z,vx,vy,vz)")
    fly.add_argument("--summary", required=True, type=output_file, metavar="JSON", help="swarm summary to write")
    fly.add_argument("--max-vel", type=speed, default=EGO_MAX_VEL_MPS, metavar="V",
                     help=f"every planner's speed limit, m/s ({EGO_MAX_VEL_MPS:g}), with the acceleration limit for "
                          f"that speed, min(7, max(3, 1.5 V)) m/s^2")
    fly.add_argument("--timeout", type=duration_s, default=SWARM_TIMEOUT_S, metavar="S", help=f"sim time limit, s ({SWARM_TIMEOUT_S:g})")
    fly.add_argument("--seed", type=seed, default=0, help="seed for sensor noise and planners (0)")
    fly.add_argument("--vehicle", choices=("quadrotor", "point_mass"), default="quadrotor")
    fly.add_argument("--goal-tolerance", type=goal_tolerance_m, default=GOAL_TOLERANCE_M, metavar="M",
                     help=f"goal radius, m ({GOAL_TOLERANCE_M:g})")
    fly.add_argument("--time-scale", type=positive_float, default=1.0, metavar="K",
                     help="widen the planners' wall-clock safety nets K times (the sim clock waits for them; 1)")
    fly.add_argument("--plot", type=output_file, metavar="PNG", help="also draw the paths (needs matplotlib)")
    fly.add_argument("--lose-planner", action="append", default=[], metavar="I:T",
                     help="fault: drone I's planner stops at sim time T s (repeatable)")
    fly.add_argument("--mute", action="append", default=[], metavar="I:T",
                     help="fault: drone I's broadcasts are lost from sim time T s (repeatable)")
    fly.set_defaults(handler=cmd_swarm_fly)


def read_points(path: str, what: str) -> np.ndarray:
    """(N, 3) float64 from a JSON file holding a list of [x, y, z]; CliError saying what is wrong."""
    p = Path(path)
    if not p.is_file():
        raise CliError(f"{what} file {path!r} does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CliError(f"{what} file {path!r} is not readable JSON: {exc}") from None
    if not isinstance(data, list) or not data:
        raise CliError(f"{what} file {path!r} must hold a non-empty JSON list of [x, y, z] positions")
    if len(data) > MAX_DRONES:
        raise CliError(f"{what} file {path!r} lists {len(data)} drones; at most {MAX_DRONES} are supported")
    out = []
    for k, item in enumerate(data):
        ok = (isinstance(item, list) and len(item) == 3
              and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in item))
        if not ok:
            raise CliError(f"{what} file {path!r}: entry {k} must be [x, y, z] (three finite numbers, m), got {item!r}")
        out.append([float(v) for v in item])
    return np.array(out)


def _faults(values: Sequence[str], option: str, n: int) -> Dict[int, float]:
    out = {}
    for text in values:
        k, sep, t = text.partition(":")
        try:
            k_i, t_f = int(k), float(t)
        except ValueError:
            k_i, t_f = -1, math.nan
        if not sep or not (0 <= k_i < n) or not (math.isfinite(t_f) and t_f >= 0):
            raise CliError(f"{option} expects I:T with a drone index 0..{n - 1} and a time >= 0 s, got {text!r}")
        out[k_i] = t_f
    return out


def check_swarm_points(world, starts: np.ndarray, goals: np.ndarray, radius: float, tolerance: float) -> None:
    """CliError unless the lists match and every start / goal is usable (see the module doc)."""
    if starts.shape[0] != goals.shape[0]:
        raise CliError(f"--starts lists {starts.shape[0]} drones but --goals lists {goals.shape[0]}: give one goal "
                       f"per start, in the same order")
    for k in range(starts.shape[0]):
        try:
            check_start_goal(world, starts[k], goals[k], radius, tolerance)
        except CliError as exc:
            raise CliError(f"drone {k}: {exc}") from None
    for name, pts in (("starts", starts), ("goals", goals)):
        if pts.shape[0] < 2:
            continue
        d = np.linalg.norm(pts[:, None] - pts[None], axis=2)
        d[np.diag_indices(pts.shape[0])] = np.inf
        a, b = np.unravel_index(int(np.argmin(d)), d.shape)
        if d[a, b] < 2.0 * radius:
            raise CliError(f"{name} of drones {min(a, b)} and {max(a, b)} are {d[a, b]:.3f} m apart, closer than two "
                           f"vehicle radii ({2 * radius:.2f} m): the drones would start in contact; move them apart")


def build_swarm(n: int, max_vel: float = EGO_MAX_VEL_MPS, seed_value: int = 0, time_scale: float = 1.0, ego_overrides=None):
    """``(agents, bus)``: n :class:`SwarmAgent` s (EGO planners, seeds ``seed_value + i``) on one
    :class:`LocalBroadcast`, at ``max_vel`` m/s with the acceleration limit for that speed
    (:func:`~planner_pkg.planning.ego_config.speed_scaled_max_acc`). ``ego_overrides``: EgoConfig
    overrides (dotted keys, e.g. ``map.inflation_shape``; validated: ConfigError) for benchmarks."""
    from planner_pkg.planning.ego_planner import EgoConfig, EgoPlanner
    from planner_pkg.planning.swarm import LocalBroadcast, SwarmAgent

    base = EgoConfig().at_speed(max_vel)
    if ego_overrides:
        base = base.with_overrides(ego_overrides)
    bus = LocalBroadcast(n, base.swarm.timeout_s)
    agents = []
    for k in range(n):
        cfg = replace(base, seed=seed_value + k)
        if time_scale > 1.0:
            cfg = cfg.with_time_limits_scaled(time_scale)
        agents.append(SwarmAgent(EgoPlanner(cfg), k, bus))
    return agents, bus


def fly_swarm(world, starts, goals, *, max_vel: float = EGO_MAX_VEL_MPS, timeout_s: float = SWARM_TIMEOUT_S, seed_value: int = 0,
              vehicle: str = "quadrotor", goal_tolerance: float = GOAL_TOLERANCE_M, time_scale: float = 1.0,
              lose_planner: Optional[Dict[int, float]] = None, mute: Optional[Dict[int, float]] = None,
              ego_overrides=None, agents_bus=None):
    """Fly the swarm once; ``(MultiResult, agents, bus)``."""
    from planner_pkg.sim.multi import MultiVehicleRunner
    from planner_pkg.sim.runner import RunnerConfig

    starts = np.asarray(starts, dtype=np.float64)
    goals = np.asarray(goals, dtype=np.float64)
    agents, bus = agents_bus or build_swarm(starts.shape[0], max_vel, seed_value, time_scale, ego_overrides)
    for k, t in (mute or {}).items():
        bus.mute(k, t)
    config = RunnerConfig(timeout_s=timeout_s, seed=seed_value, vehicle=vehicle, goal_tolerance_m=goal_tolerance)
    yaws = [math.atan2(g[1] - s[1], g[0] - s[0]) if math.hypot(g[0] - s[0], g[1] - s[1]) > 1e-9 else 0.0
            for s, g in zip(starts, goals)]
    runner = MultiVehicleRunner(world, agents, config)
    result = runner.run(starts, goals, yaws, planner_lost_at=lose_planner)
    return result, agents, bus


def _pct(values, q):
    return float(np.percentile(values, q)) if len(values) else None


def swarm_summary(result, agents, bus, world_name: str = "", max_vel: float = EGO_MAX_VEL_MPS) -> dict:
    """The summary JSON: per drone ``reached`` / ``collided`` (world or drone) and replan times,
    the smallest inter-drone centre distance, the drone-drone collisions, pooled replan times."""
    drones = []
    pooled: List[float] = []
    for out, agent in zip(result.vehicles, agents):
        d = out.to_dict()
        replans = list(agent.stats.replan_ms)
        pooled += replans
        d.update({"collided": bool(out.collided or out.drone_collision), "collided_world": bool(out.collided),
                  "replans": len(replans), "replan_ms_median": _pct(replans, 50), "replan_ms_p95": _pct(replans, 95),
                  "replan_ms_max": max(replans) if replans else None,
                  "plan_tick_cpu_ms_median": _pct(agent.plan_cpu_ms, 50),
                  "emergency_stops": agent.stats.emergency_stops, "masked_pixels": agent.masked_pixels})
        drones.append(d)
    finite = math.isfinite(result.min_separation_m)
    reach = [v.reach_time_s for v in result.vehicles if v.reach_time_s is not None]
    return {
        "n_drones": len(drones),
        "success": result.success,
        "all_reached": all(v.reached for v in result.vehicles),
        "any_collision": any(d["collided"] for d in drones),
        "min_inter_drone_distance_m": result.min_separation_m if finite else None,
        "min_inter_drone_pair": list(result.min_separation_pair) if result.min_separation_pair else None,
        "min_inter_drone_time_s": result.min_separation_time_s,
        "drone_collisions": [{"t": c.t, "a": c.a, "b": c.b, "distance_m": c.distance_m}
                             for c in result.drone_collisions],
        "replan_ms_median": _pct(pooled, 50),
        "replan_ms_p95": _pct(pooled, 95),
        "replans": len(pooled),
        "plan_tick_cpu_ms_median": _pct([x for a in agents for x in a.plan_cpu_ms], 50),
        "flight_time_s": max(reach) if len(reach) == len(drones) else None,
        "time_s": result.time_s,
        "wall_time_s": result.wall_time_s,
        "broadcasts_sent": bus.sent,
        "broadcasts_lost": bus.lost,
        "max_vel_mps": max_vel,
        "world": world_name,
        "drones": drones,
        "events": result.events[:50],
    }


def plot_swarm(path, world, logs, starts, goals, title: str = "", collisions=()) -> None:
    """Top-down PNG of every drone's path (start o, goal *, drone-drone collision x)."""
    from matplotlib import patches

    from planner_pkg.sim.plot import _draw_obstacles, require_pyplot

    plt = require_pyplot()
    lo, hi = np.asarray(world.bounds_min), np.asarray(world.bounds_max)
    h = float(np.clip(8.0 * (hi[1] - lo[1]) / (hi[0] - lo[0]), 3.0, 9.0))
    fig, ax = plt.subplots(figsize=(9, h + 0.8), constrained_layout=True)
    _draw_obstacles(ax, world, patches)
    cmap = plt.get_cmap("tab10")
    for k, log in enumerate(logs):
        pos = log.positions
        c = cmap(k % 10)
        ax.plot(pos[:, 0], pos[:, 1], "-", color=c, linewidth=1.3, label=f"drone {k}")
        ax.plot(starts[k][0], starts[k][1], "o", color=c, markersize=6)
        ax.plot(goals[k][0], goals[k][1], "*", color=c, markersize=11)
    for col in collisions:
        p = logs[col.a].positions[-1]
        ax.plot(p[0], p[1], "x", color="red", markersize=12, mew=3)
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_aspect("equal")
    ax.set_xlabel("x east [m]")
    ax.set_ylabel("y north [m]")
    ax.set_title(title)
    if len(logs) <= 12:
        ax.legend(loc="upper right", fontsize=7, ncol=2)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def cmd_swarm_fly(args) -> int:
    from planner_pkg.sim.params import PointMassParams, QuadrotorParams

    world = load_world_file(args.world)
    starts = read_points(args.starts, "--starts")
    goals = read_points(args.goals, "--goals")
    radius = (QuadrotorParams() if args.vehicle == "quadrotor" else PointMassParams()).collision_radius_m
    check_swarm_points(world, starts, goals, radius, args.goal_tolerance)
    n = starts.shape[0]
    lose = _faults(args.lose_planner, "--lose-planner", n)
    mute = _faults(args.mute, "--mute", n)
    log_dir = Path(args.log_dir)
    if log_dir.exists() and not log_dir.is_dir():
        raise CliError(f"--log-dir {args.log_dir!r} exists and is not a folder")
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--log-dir: cannot create {args.log_dir!r}: {exc}") from None
    summary_path = writable_path(args.summary, "--summary")
    plot_path = writable_path(args.plot, "--plot") if args.plot else None
    if plot_path is not None:
        from planner_pkg.sim.plot import PlottingUnavailableError, require_pyplot

        try:
            require_pyplot()
        except PlottingUnavailableError as exc:
            raise CliError(str(exc)) from None
    result, agents, bus = fly_swarm(world, starts, goals, max_vel=args.max_vel, timeout_s=args.timeout,
                                    seed_value=args.seed, vehicle=args.vehicle, goal_tolerance=args.goal_tolerance,
                                    time_scale=args.time_scale, lose_planner=lose, mute=mute)
    summary = swarm_summary(result, agents, bus, str(args.world), args.max_vel)
    writers = [(f"drone_{k}.csv", log_dir / f"drone_{k}.csv", (lambda log, p: lambda: log.write_csv(p))(
        log, log_dir / f"drone_{k}.csv")) for k, log in enumerate(result.logs)]
    text = json.dumps(summary, allow_nan=False, indent=1)
    writers.append(("--summary", summary_path, lambda: summary_path.write_text(text + "\n", encoding="utf-8")))
    if plot_path is not None:
        writers.append(("--plot", plot_path, lambda: plot_swarm(
            plot_path, world, result.logs, starts, goals, f"{n} drones in {Path(args.world).name}",
            result.drone_collisions)))
    errors = write_outputs(writers)
    brief = {k: summary[k] for k in ("n_drones", "success", "all_reached", "any_collision",
                                     "min_inter_drone_distance_m", "replan_ms_median", "flight_time_s", "time_s")}
    print(json.dumps(brief, allow_nan=False))
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    return EXIT_FAILED if errors else EXIT_OK
