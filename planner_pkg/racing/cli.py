"""``python -m planner_pkg race train|fly``: the gate-racing commands.

    race train --config config/race/default.yaml --workers N --ray-address local|auto|ray://host:port
               --out M.agm [--resume M.ckpt] [--iterations N] [--stop-after N] [--no-progress]
    race fly   --track T --laps L --log CSV --summary JSON [--model M] [--plot PNG] [--baseline]

``planner_pkg.cli`` registers these with :func:`add_parser`; errors are CliError (one line on
stderr; exit code 2 for bad input, 1 for a failure while running).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from planner_pkg.cli_args import CliError, output_file, positive_int, write_outputs

__all__ = ["add_parser"]

def add_parser(subparsers) -> None:
    race = subparsers.add_parser("race", help="gate racing: train a PPO policy (Ray workers) and fly tracks")
    rsub = race.add_subparsers(dest="race_command", metavar="RACE_COMMAND")
    rsub.required = True

    tr = rsub.add_parser("train", help="train a racing policy with PPO; writes M.agm, M.ckpt, M.csv")
    tr.add_argument("--config", required=True, metavar="FILE", help="training YAML (see config/race/)")
    tr.add_argument("--out", required=True, type=output_file, metavar="M.agm",
                    help="model to write; the checkpoint and scalars CSV go next to it (.ckpt, .csv)")
    tr.add_argument("--workers", type=positive_int, default=1, metavar="N",
                    help="rollout workers (Ray actors when N > 1 and ray is installed; default 1, in-process)")
    tr.add_argument("--ray-address", default="local", metavar="ADDR",
                    help="local (private Ray instance, default), auto (cluster on this machine) or ray://host:port")
    tr.add_argument("--resume", metavar="CKPT", help="continue from this checkpoint")
    tr.add_argument("--iterations", type=positive_int, metavar="N", help="override train.iterations")
    tr.add_argument("--stop-after", type=positive_int, metavar="N",
                    help="run at most N iterations now, checkpoint and stop (continue with --resume)")
    tr.add_argument("--no-progress", action="store_true", help="log lines instead of a progress bar")
    tr.set_defaults(handler=_cmd_train)

    fl = rsub.add_parser("fly", help="fly a racing policy on a track; writes the log and a summary")
    fl.add_argument("--track", required=True, metavar="T", help="track file (.json/.yaml): {gates: [...]}")
    fl.add_argument("--laps", type=positive_int, default=2, metavar="L", help="laps to fly (2)")
    fl.add_argument("--log", required=True, type=output_file, metavar="CSV", help="flight log t,x,y,z,vx,vy,vz")
    fl.add_argument("--summary", required=True, type=output_file, metavar="JSON",
                    help="summary: gates passed, lap times, crash, mean speed, baseline lap-time ratio")
    fl.add_argument("--model", metavar="M", help="racing model (.agm); default: the shipped model")
    fl.add_argument("--plot", type=output_file, metavar="PNG", help="also draw the flight (needs matplotlib)")
    fl.add_argument("--timeout", type=float, metavar="S", help="sim time limit, s (default 12 per lap + 5)")
    fl.set_defaults(handler=_cmd_fly)


def _cmd_train(args) -> int:
    from planner_pkg.racing.config import ConfigError, load_config
    from planner_pkg.racing.pool import check_ray_address
    from planner_pkg.racing.trainer import CheckpointError, train

    if not Path(args.config).is_file():
        raise CliError(f"config file {args.config!r} does not exist (see config/race/ for examples)")
    try:
        check_ray_address(args.ray_address)
        cfg = load_config(args.config)
        if args.iterations is not None:
            from planner_pkg.racing.config import config_from_dict

            d = cfg.to_dict()
            d["train"]["iterations"] = args.iterations
            cfg = config_from_dict(d)
    except (ConfigError, ValueError) as exc:
        raise CliError(str(exc)) from None
    if args.resume is not None and not Path(args.resume).is_file():
        raise CliError(f"checkpoint {args.resume!r} does not exist")
    try:
        result = train(cfg, args.out, workers=args.workers, ray_address=args.ray_address, resume=args.resume,
                       stop_after=args.stop_after, progress=not args.no_progress)
    except (CheckpointError, ValueError) as exc:
        raise CliError(str(exc)) from None
    except ConnectionError as exc:
        raise CliError(f"cannot reach the Ray cluster at {args.ray_address!r}: {exc}", 1) from None
    last = result.history[-1] if result.history else {}
    print(json.dumps({"iteration": result.iteration, "iterations_run": result.iterations_run,
                      "wall_s": round(result.wall_s, 1), "workers": args.workers, "mode": result.mode,
                      "env_steps": last.get("env_steps"), "model": str(result.paths["model"]),
                      "checkpoint": str(result.paths["checkpoint"]), "csv": str(result.paths["csv"]),
                      "gates_per_episode": last.get("gates_per_episode"),
                      "eval_success_rate": last.get("eval_success_rate")}))
    return 0


def _cmd_fly(args) -> int:
    import numpy as np

    from planner_pkg.racing.baseline import BaselineError, baseline_lap_time
    from planner_pkg.racing.evaluate import fly_tracks
    from planner_pkg.racing.export import RacerModelError, default_model_path, load_racer
    from planner_pkg.racing.track import TrackError, load_track

    try:
        track = load_track(args.track)
    except TrackError as exc:
        raise CliError(str(exc)) from None
    path = args.model or default_model_path()
    if path is None:
        raise CliError("no --model given and this installation ships no racing model; train one with "
                       "'python -m planner_pkg race train --config config/race/default.yaml --out M.agm'")
    try:
        racer = load_racer(path)
    except RacerModelError as exc:
        raise CliError(str(exc)) from None
    if args.timeout is not None and not (np.isfinite(args.timeout) and args.timeout > 0):
        raise CliError(f"--timeout must be a positive number of seconds, got {args.timeout!r}")
    try:
        (res,) = fly_tracks(racer.act, [track], racer.config.env, laps=args.laps, timeout_s=args.timeout, log=True)
    except ValueError as exc:
        raise CliError(f"cannot fly {args.track!r}: {exc}") from None
    summary = res.summary()
    summary["model"] = str(path)
    summary["track"] = str(args.track)
    try:
        base = baseline_lap_time(track, racer.config.env.quad)
        summary["baseline_lap_s"] = round(base.lap_time_s, 3)
        summary["baseline_mean_speed_mps"] = round(base.mean_speed_mps, 3)
        laps = res.lap_times_s[1:] or res.lap_times_s  # the first lap starts from hover
        summary["lap_time_ratio"] = round(float(np.mean(laps)) / base.lap_time_s, 3) if laps else None
    except BaselineError as exc:
        summary["baseline_lap_s"] = None
        summary["lap_time_ratio"] = None
        summary["baseline_error"] = str(exc)

    def write_log():
        np.savetxt(args.log, res.log, delimiter=",", header="t,x,y,z,vx,vy,vz", comments="", fmt="%.4f")

    def write_summary():
        Path(args.summary).write_text(json.dumps(summary, indent=1) + "\n")

    writers = [("log", args.log, write_log), ("summary", args.summary, write_summary)]
    if args.plot:
        from planner_pkg.racing.plot import plot_flight

        writers.append(("plot", args.plot, lambda: plot_flight(res, args.plot)))
    errors = write_outputs(writers)
    print(json.dumps(summary))
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return 1 if errors else 0
