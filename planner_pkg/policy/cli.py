"""``python -m planner_pkg policy train|eval``: the learned policy's commands.

    policy train --config FILE --out model.agm [--resume model.ckpt | --init-from model.agm] [--widen] [--iterations N]
                 [--stop-after N]
    policy export --checkpoint model.ckpt --out model.agm
    policy eval  [--model model.agm] [--episodes 100] [--speed 3 [5 ...]] [--vehicle quadrotor|point_mass]
                 [--first-world K] [--json results.json] [--plot speed_success.png]
                 [--workers N [--ray-address local|auto|ray://host:port]] [--no-calibration]
    policy calibrate [--model model.agm] --out model.agm [--episodes 2] [--course 110]

``planner_pkg.cli`` registers these with :func:`add_parser`; errors are raised as its CliError
(one line on stderr, exit code 2 for bad input, 1 for a failure while running).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from planner_pkg.cli_args import nonneg_int as _nonneg_int, positive_float, positive_int as _positive_int, speed as _speed

__all__ = ["add_parser"]


def add_parser(subparsers) -> None:
    """Add the ``policy`` command (with ``train`` and ``eval``) to the CLI's subparsers."""
    policy = subparsers.add_parser("policy", help="train and evaluate the learned depth policy")
    psub = policy.add_subparsers(dest="policy_command", metavar="POLICY_COMMAND")
    psub.required = True

    tr = psub.add_parser("train", help="train through the differentiable point mass and export a model")
    tr.add_argument("--config", required=True, metavar="FILE", help="training YAML (see config/policy/)")
    tr.add_argument("--out", required=True, metavar="MODEL", help="model file to write (.agm); the checkpoint, "
                    "CSV and PNG go next to it (.ckpt, .csv, .png)")
    tr.add_argument("--resume", metavar="CKPT", help="continue from this checkpoint")
    tr.add_argument("--init-from", metavar="MODEL", help="start from this exported model's weights (same network "
                    "shape; a fine-tune with a fresh optimiser), instead of a random initialisation")
    tr.add_argument("--widen", action="store_true", help="with --init-from: the config's network may be wider "
                    "(channels, hidden); the model fills its first units and the new ones start with no "
                    "influence on the output, so training starts from the model's exact behaviour")
    tr.add_argument("--iterations", type=_positive_int, metavar="N", help="override train.iterations")
    tr.add_argument("--stop-after", type=_positive_int, metavar="N",
                    help="run at most N iterations now, checkpoint and stop (continue with --resume)")
    tr.add_argument("--no-progress", action="store_true", help="log lines instead of a progress bar")
    tr.set_defaults(handler=_cmd_train)

    ex = psub.add_parser("export", help="export the network of a training checkpoint as a model file")
    ex.add_argument("--checkpoint", required=True, metavar="CKPT", help="checkpoint written by 'policy train'")
    ex.add_argument("--out", required=True, metavar="MODEL", help="model file to write (.agm)")
    ex.set_defaults(handler=_cmd_export)

    ev = psub.add_parser("eval", help="fly the policy in the embedded simulator in unseen worlds")
    ev.add_argument("--model", metavar="MODEL", help="policy model (.agm); default: the shipped model")
    ev.add_argument("--episodes", type=_positive_int, default=100, help="worlds per speed (100)")
    ev.add_argument("--speed", type=_speed, nargs="+", default=[3.0], metavar="V",
                    help="commanded speed(s), m/s (3)")
    ev.add_argument("--vehicle", choices=("quadrotor", "point_mass"), default="quadrotor",
                    help="simulated vehicle (default: rigid-body quadrotor + SE(3) controller)")
    ev.add_argument("--world-kind", choices=("cluttered", "forest"), default="cluttered",
                    help="world generator (default: cluttered course, 40 x 20 m, 80 obstacles)")
    ev.add_argument("--first-world", type=_nonneg_int, default=0, metavar="K",
                    help="index of the first evaluation world (odd generator seeds 2K+1, 2K+3, ...)")
    ev.add_argument("--json", metavar="FILE", help="also write the results (and every episode) as JSON")
    ev.add_argument("--plot", metavar="PNG", help="also write a speed-success plot: success, mean and cruise speed "
                    "against the commanded speed (needs matplotlib)")
    ev.add_argument("--workers", type=_positive_int, default=1, metavar="N",
                    help="episodes spread over N workers (Ray actors when N > 1 and ray is installed; default 1, "
                         "in-process); the results do not depend on N")
    ev.add_argument("--ray-address", default="local", metavar="ADDR",
                    help="local (private Ray instance, default), auto (cluster on this machine) or ray://host:port")
    ev.add_argument("--no-calibration", action="store_true",
                    help="tell the network the commanded speed as it is, not through the model's speed calibration")
    ev.set_defaults(handler=_cmd_eval)

    ca = psub.add_parser("calibrate", help="measure the model's open-space cruise per command and store the "
                         "command -> cruise calibration in a model file")
    ca.add_argument("--model", metavar="MODEL", help="policy model (.agm); default: the shipped model")
    ca.add_argument("--out", required=True, metavar="MODEL", help="model file to write (may be --model itself)")
    ca.add_argument("--episodes", type=_positive_int, default=2, help="open-space flights per command (2)")
    ca.add_argument("--course", type=positive_float, default=None, metavar="M",
                    help="length of the straight open-space course, m (default 110)")
    ca.add_argument("--workers", type=_positive_int, default=1, metavar="N", help="as for eval")
    ca.add_argument("--ray-address", default="local", metavar="ADDR", help="as for eval")
    ca.set_defaults(handler=_cmd_calibrate)


def _err(message: str, code: int = 2):
    from planner_pkg.cli_args import CliError

    return CliError(message, code)


def _cmd_train(args) -> int:
    from planner_pkg.policy.config import ConfigError, load_config
    from planner_pkg.policy.trainer import train

    if not Path(args.config).is_file():
        raise _err(f"config file {args.config!r} does not exist (see config/policy/ for examples)")
    try:
        cfg = load_config(args.config)
        if args.iterations is not None:
            cfg = cfg.replace(train={"iterations": args.iterations})
    except ConfigError as exc:
        raise _err(str(exc)) from None
    if args.resume is not None and not Path(args.resume).is_file():
        raise _err(f"checkpoint {args.resume!r} does not exist")
    if args.init_from is not None:
        if args.resume is not None:
            raise _err("--resume and --init-from exclude each other: a checkpoint already holds the weights")
        if not Path(args.init_from).is_file():
            raise _err(f"model {args.init_from!r} does not exist")
    elif args.widen:
        raise _err("--widen needs --init-from MODEL (the narrower model to start from)")
    try:
        result = train(cfg, args.out, resume=args.resume, stop_after=args.stop_after, progress=not args.no_progress,
                       init_from=args.init_from, widen=args.widen)
    except ValueError as exc:
        raise _err(str(exc)) from None
    last = result.history[-1] if result.history else {}
    print(json.dumps({
        "iteration": result.iteration, "iterations_run": result.iterations_run, "wall_s": round(result.wall_s, 1),
        "model": str(result.paths["model"]) if result.iteration == cfg.train.iterations else None,
        "checkpoint": str(result.paths["checkpoint"]), "csv": str(result.paths["csv"]),
        "last_loss": last.get("total"), "last_success_rate": last.get("success_rate"),
    }))
    return 0


def _cmd_export(args) -> int:
    from planner_pkg.policy.checkpoint import load_checkpoint, network_from_checkpoint
    from planner_pkg.policy.export import export_policy

    if not Path(args.checkpoint).is_file():
        raise _err(f"checkpoint {args.checkpoint!r} does not exist")
    try:
        ckpt = load_checkpoint(args.checkpoint)
        cfg, net = network_from_checkpoint(ckpt, args.checkpoint)
    except ValueError as exc:
        raise _err(str(exc)) from None
    try:
        path = export_policy(net, cfg, args.out)
    except OSError as exc:
        raise _err(f"cannot write model {args.out!r}: {exc}") from None
    print(f"wrote {path} (network of iteration {ckpt['iteration']})")
    return 0


def _pool_and_model(args):
    """(model path, LoadedPolicy) of ``--model`` (default: the shipped one), after checking
    ``--ray-address``; CliError (exit 2) otherwise."""
    from planner_pkg.policy.export import PolicyModelError, default_model_path, load_policy
    from planner_pkg.pool import check_ray_address

    try:
        check_ray_address(args.ray_address)
    except ValueError as exc:
        raise _err(str(exc)) from None
    path = args.model or default_model_path()
    if path is None:
        raise _err("no --model given and this installation ships no trained policy; train one with "
                   "'python -m planner_pkg policy train --config config/policy/default.yaml --out model.agm'")
    try:
        return path, load_policy(path)
    except PolicyModelError as exc:
        raise _err(str(exc)) from None


def _cmd_eval(args) -> int:
    from planner_pkg.policy.evaluate import evaluate_speeds, format_results, plot_results

    path, policy = _pool_and_model(args)

    def progress(speed, i, summary):
        print(f"  {speed:g} m/s, world {i + 1}/{args.episodes}: {summary['reason']}", file=sys.stderr, flush=True)

    try:
        results = evaluate_speeds(policy, args.speed, episodes=args.episodes, vehicle=args.vehicle,
                                  world_kind=args.world_kind, first_world=args.first_world,
                                  progress=progress if sys.stderr.isatty() else None, workers=args.workers,
                                  ray_address=args.ray_address, calibrated=not args.no_calibration)
    except ConnectionError as exc:
        raise _err(f"cannot reach the Ray cluster at {args.ray_address!r}: {exc}", 1) from None
    print(f"policy {path}: {args.vehicle}, {args.world_kind} worlds (unseen: odd seeds from "
          f"{2 * args.first_world + 1}), {args.workers} worker(s)")
    cal = policy.speed_calibration
    if cal is None or args.no_calibration:
        print("speed calibration: " + ("none in this model" if cal is None else "off (--no-calibration)")
              + ": the network is told the commanded speed")
    else:
        print("speed calibration: on: the network is told " + ", ".join(
            f"{v:g} -> {cal.network_speed(v):.2f}" for v in args.speed) + " m/s")
    print(format_results(results))
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"model": str(path), "speed_calibration": None if cal is None or args.no_calibration
                                   else cal.to_dict(), "results": [r.to_dict() for r in results],
                                   "episodes": {str(r.speed_mps): r.episodes for r in results}}, indent=1))
    if args.plot:
        try:
            plot_results(results, args.plot, title=f"{Path(str(path)).name}: {args.vehicle}, {args.world_kind} worlds, "
                         f"{args.episodes} per speed (unseen from {args.first_world})")
        except (RuntimeError, OSError) as exc:
            raise _err(f"cannot write the plot {args.plot!r}: {exc}", 1) from None
        print(f"wrote {args.plot}")
    return 0


def _cmd_calibrate(args) -> int:
    from planner_pkg.policy.calibrate import DEFAULT_COURSE_M, measure_speed_calibration, write_speed_calibration
    from planner_pkg.policy.export import PolicyModelError
    from planner_pkg.policy.speed_calibration import SpeedCalibrationError

    path, policy = _pool_and_model(args)
    course = DEFAULT_COURSE_M if args.course is None else args.course
    try:
        calibration, rows = measure_speed_calibration(policy, episodes=args.episodes, course_m=course,
                                                      workers=args.workers, ray_address=args.ray_address)
    except SpeedCalibrationError as exc:
        raise _err(str(exc), 1) from None
    except ConnectionError as exc:
        raise _err(f"cannot reach the Ray cluster at {args.ray_address!r}: {exc}", 1) from None
    print(f"policy {path}: open-space cruise per network command ({args.episodes} flight(s) of {course:g} m each, "
          "full quadrotor, uncalibrated)")
    print("network m/s  cruise m/s  cruise / command")
    for r in rows:
        print(f"{r['network_mps']:11.2f} {r['cruise_mps']:11.2f} {r['cruise_mps'] / r['network_mps']:17.3f}")
    try:
        out = write_speed_calibration(path, calibration, args.out)
    except (OSError, PolicyModelError) as exc:
        raise _err(f"cannot write model {args.out!r}: {exc}", 1) from None
    print(f"wrote {out} (speed calibration: requested cruise "
          f"{calibration.cruise_mps[0]:.2f}..{calibration.cruise_mps[-1]:.2f} m/s -> network "
          f"{calibration.network_mps[0]:.2f}..{calibration.network_mps[-1]:.2f} m/s)")
    return 0
