"""Command line: ``python -m planner_pkg <command>`` (also the ``planner_pkg`` console script).

Commands:
    fly     one closed-loop episode in the embedded simulator (DESIGN.md contract):
            fly --world FILE --start x,y,z --goal x,y,z --planner direct|ego|policy
                [--model FILE] [--seed N] [--max-vel V] --log flight.csv --summary summary.json
                [--plot flight.png] [--timeout S]
    world generate --kind forest --seed 3 -o forest.yaml [--param key=value ...]
    world sdf forest.yaml -o forest.sdf
    plot RUN.mcap --world FILE -o flight.png [--summary summary.json]   (a recorded run)
    policy train --config FILE --out model.agm [--resume CKPT]
    policy eval [--model model.agm] --episodes 100 --speed 3

Exit codes: 0 = done (for ``fly``: the episode was simulated and its files written, whatever
its outcome; read ``reached`` in the summary), 1 = failed while running (for ``fly`` also: the
planner never gave a setpoint the vehicle could track, so nothing was flown, or an output file
could not be written; the other files are still written), 2 = bad arguments or input files.
Errors are one line on stderr saying what was wrong and what to do.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import re
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from planner_pkg.cli_args import duration_s as _duration_s
from planner_pkg.cli_args import goal_tolerance_m as _goal_tolerance_m
from planner_pkg.cli_args import output_file as _output_file
from planner_pkg.cli_args import point as parse_point
from planner_pkg.cli_args import seed as _seed
from planner_pkg.cli_args import speed as _speed

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_COORD = re.compile(r"^-\d")


class CliError(Exception):
    """A user-facing error: printed as ``error: <message>``, exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------------------------
# argument helpers
# ---------------------------------------------------------------------------------------------
def _join_negative_coordinates(argv: Sequence[str], options=("--start", "--goal")) -> List[str]:
    """Let ``--start -20,0,1`` work: argparse would read ``-20,0,1`` as an option name."""
    out: List[str] = []
    it = iter(argv)
    for arg in it:
        if arg in options:
            nxt = next(it, None)
            if nxt is not None and _COORD.match(nxt):
                out.append(f"{arg}={nxt}")
                continue
            out.append(arg)
            if nxt is not None:
                out.append(nxt)
        else:
            out.append(arg)
    return out


def build_parser() -> argparse.ArgumentParser:
    from planner_pkg.sim.planner_factory import PLANNER_NAMES

    parser = argparse.ArgumentParser(
        prog="python -m planner_pkg", description="Onboard quadrotor autonomy: simulator and tools."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress (INFO) to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    fly = sub.add_parser("fly", help="fly one closed-loop episode in the embedded simulator")
    fly.add_argument("--world", required=True, metavar="FILE", help="world file (.yaml/.yml/.json)")
    fly.add_argument("--start", required=True, type=parse_point, metavar="X,Y,Z", help="start position, m (ENU)")
    fly.add_argument("--goal", required=True, type=parse_point, metavar="X,Y,Z", help="goal position, m (ENU)")
    fly.add_argument("--planner", required=True, choices=PLANNER_NAMES)
    fly.add_argument("--model", metavar="FILE", help="trained model file (policy planner)")
    fly.add_argument("--seed", type=_seed, default=0, help="seed for sensor noise and planners (default 0)")
    fly.add_argument("--max-vel", type=_speed, metavar="V", help="planner speed limit override, m/s")
    fly.add_argument("--log", required=True, type=_output_file, metavar="CSV",
                     help="flight log to write (t,x,y,z,vx,vy,vz)")
    fly.add_argument("--summary", required=True, type=_output_file, metavar="JSON", help="episode summary to write")
    fly.add_argument("--plot", type=_output_file, metavar="PNG", help="also draw the flight (needs matplotlib)")
    fly.add_argument("--timeout", type=_duration_s, default=60.0, metavar="S", help="sim time limit, s (60)")
    fly.add_argument(
        "--vehicle",
        choices=("quadrotor", "point_mass"),
        default="quadrotor",
        help="rigid-body quadrotor (default) or the fast point-mass model",
    )
    fly.add_argument("--goal-tolerance", type=_goal_tolerance_m, default=0.5, metavar="M",
                     help="goal radius, m (0.5)")
    fly.set_defaults(handler=_cmd_fly)

    sub.add_parser("bringup", help="start the ROS 2 graph (sim|gazebo|hardware) without ros2 launch; "
                   "'bringup --help' for its options")

    world = sub.add_parser("world", help="generate worlds and export them")
    wsub = world.add_subparsers(dest="world_command", metavar="WORLD_COMMAND")
    wsub.required = True
    gen = wsub.add_parser("generate", help="write a seeded random world file")
    gen.add_argument("--kind", required=True, choices=("forest", "cluttered", "walls", "gates"))
    gen.add_argument("--seed", type=_seed, default=0)
    gen.add_argument("-o", "--output", required=True, type=_output_file, metavar="FILE",
                     help="world file to write (.yaml/.json)")
    gen.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="generator parameter override; VALUE is YAML (3, 0.5, [1, 2, 1]); repeatable",
    )
    gen.set_defaults(handler=_cmd_world_generate)
    sdf = wsub.add_parser("sdf", help="export a world file as a Gazebo SDF world")
    sdf.add_argument("world", metavar="WORLD_FILE")
    sdf.add_argument("-o", "--output", required=True, type=_output_file, metavar="FILE", help="SDF file to write")
    sdf.add_argument("--name", help="SDF world name (default: the file's stem)")
    sdf.set_defaults(handler=_cmd_world_sdf)

    from planner_pkg.policy.cli import add_parser as add_policy_parser

    add_policy_parser(sub)  # policy train|eval (planner_pkg/policy/cli.py)
    from planner_pkg.sim.mcap_log import add_parser as add_plot_parser

    add_plot_parser(sub)  # plot RUN.mcap (planner_pkg/sim/mcap_log.py)
    return parser


# ---------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------
def _load_world(path: str):
    from planner_pkg.world import WorldFormatError, load_world

    if not Path(path).is_file():
        raise CliError(f"world file {path!r} does not exist; create one with 'python -m planner_pkg world generate'")
    try:
        return load_world(path)
    except WorldFormatError as exc:
        raise CliError(f"invalid world file: {exc}") from None
    except OSError as exc:
        raise CliError(f"cannot read world file {path!r}: {exc}") from None


def check_start_goal(world, start: np.ndarray, goal: np.ndarray, radius: float, tolerance_m: float) -> None:
    """CliError unless start and goal are free points of ``world`` and the start is not already
    within ``tolerance_m`` of the goal (that "flight" would be reached at t = 0). ``fly`` and
    ``bringup --goal`` refuse the same points."""
    _check_free(world, "start", start, radius)
    _check_free(world, "goal", goal, radius)
    gap = float(np.linalg.norm(np.asarray(goal) - np.asarray(start)))
    if gap <= tolerance_m:
        raise CliError(f"the start is {gap:.3f} m from the goal, within the goal tolerance {tolerance_m:g} m: "
                       f"there is nothing to fly; choose a goal farther away or a smaller --goal-tolerance")


def _check_free(world, name: str, point: np.ndarray, radius: float) -> None:
    lo, hi = np.asarray(world.bounds_min), np.asarray(world.bounds_max)
    where = ",".join(f"{v:g}" for v in point)
    if (point < lo).any() or (point > hi).any():
        raise CliError(
            f"{name} {where} is outside the world bounds {lo.tolist()} .. {hi.tolist()}; choose a point inside"
        )
    distance = float(world.signed_distance(point))
    if distance < radius:
        inside = "inside an obstacle" if distance < 0 else f"within {radius:g} m (the vehicle radius) of an obstacle"
        raise CliError(
            f"{name} {where} is {inside} (distance to the nearest surface {distance:.3f} m, ground included); "
            f"choose a free point"
        )


def _writable(path, what: str) -> Path:
    p = Path(path)
    if p.exists() and p.is_dir():
        raise CliError(f"{what} path {str(path)!r} is a directory; give a file name")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{what}: cannot create the folder of {str(path)!r}: {exc}") from None
    return p


def write_outputs(writers) -> List[str]:
    """Run each ``(what, path, write)`` in turn; one that fails does not stop the others (a flight
    is not lost to one bad path). Returns one error line per failure."""
    errors = []
    for what, path, write in writers:
        try:
            write()
        except (OSError, ValueError) as exc:
            errors.append(f"could not write {what} {str(path)!r}: {exc}")
    return errors


def _cmd_fly(args) -> int:
    from planner_pkg.sim.params import QuadrotorParams, PointMassParams
    from planner_pkg.sim.planner_factory import PlannerNotAvailableError, PlannerOptions, make_planner
    from planner_pkg.sim.runner import ClosedLoopRunner, RunnerConfig

    world = _load_world(args.world)
    radius = (QuadrotorParams() if args.vehicle == "quadrotor" else PointMassParams()).collision_radius_m
    check_start_goal(world, args.start, args.goal, radius, args.goal_tolerance)
    if args.model is not None and not Path(args.model).is_file():
        raise CliError(f"model file {args.model!r} does not exist")
    try:
        planner = make_planner(
            args.planner, PlannerOptions(max_vel_mps=args.max_vel, model_path=args.model, seed=args.seed)
        )
    except PlannerNotAvailableError as exc:
        raise CliError(str(exc)) from None
    log_path, summary_path = _writable(args.log, "--log"), _writable(args.summary, "--summary")
    plot_path = _writable(args.plot, "--plot") if args.plot else None
    if plot_path is not None:
        from planner_pkg.sim.plot import PlottingUnavailableError, require_pyplot

        try:
            require_pyplot()  # fail before flying, not after
        except PlottingUnavailableError as exc:
            raise CliError(str(exc)) from None

    config = RunnerConfig(
        timeout_s=args.timeout, seed=args.seed, vehicle=args.vehicle, goal_tolerance_m=args.goal_tolerance
    )
    heading = args.goal - args.start
    start_yaw = math.atan2(heading[1], heading[0]) if math.hypot(heading[0], heading[1]) > 1e-9 else 0.0
    runner = ClosedLoopRunner(world, planner, config, planner_name=args.planner, world_name=str(args.world))
    result = runner.run(args.start, args.goal, start_yaw=start_yaw)
    writers = [("--log", log_path, lambda: result.log.write_csv(log_path)),
               ("--summary", summary_path, lambda: result.summary.write_json(summary_path))]
    if plot_path is not None:
        from planner_pkg.sim.plot import plot_flight

        writers.append(("--plot", plot_path, lambda: plot_flight(
            plot_path, world, result.log, result.summary, title=f"{args.planner} in {Path(args.world).name}")))
    errors = write_outputs(writers)
    print(json.dumps(result.summary.to_dict(), allow_nan=False))
    if result.never_flew:
        s = result.summary
        errors.append(f"nothing was flown: the {args.planner} planner gave no setpoint the vehicle could track in "
                      f"{s.planner_calls} calls ({s.bad_setpoints} bad setpoints; first: "
                      f"{result.events[0] if result.events else 'none'}); the files describe a hover at the start")
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    return EXIT_FAILED if errors else EXIT_OK


def _parse_params(pairs: Sequence[str]) -> dict:
    import yaml

    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CliError(f"--param expects KEY=VALUE, got {pair!r}")
        try:
            params[key] = yaml.safe_load(value) if value.strip() else None
        except yaml.YAMLError as exc:
            raise CliError(f"--param {key}: cannot read value {value!r}: {exc}") from None
        if isinstance(params[key], list):
            params[key] = tuple(params[key])
    return params


def _cmd_world_generate(args) -> int:
    from planner_pkg.world import generate_world, save_world

    params = _parse_params(args.param)
    try:
        world = generate_world(args.kind, args.seed, **params)
    except (ValueError, TypeError) as exc:
        raise CliError(f"cannot generate a {args.kind} world: {exc}") from None
    out = _writable(args.output, "-o")
    try:
        save_world(world, out)
    except ValueError as exc:  # e.g. an unsupported file extension
        raise CliError(f"cannot write {args.output!r}: {exc}") from None
    print(f"wrote {out} ({args.kind}, seed {args.seed}, {len(world.obstacles)} obstacles)")
    return EXIT_OK


def _cmd_world_sdf(args) -> int:
    from planner_pkg.world import to_sdf

    world = _load_world(args.world)
    name = args.name or Path(args.world).stem
    out = _writable(args.output, "-o")
    out.write_text(to_sdf(world, name), encoding="utf-8")
    print(f"wrote {out} (SDF world {name!r}, {len(world.obstacles)} obstacles)")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point; returns the exit code instead of exiting (tests call it directly)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bringup"]:  # the ROS 2 graph without ros2 launch; needs rclpy (planner_pkg.nodes)
        from planner_pkg.nodes.bringup import main as bringup_main

        return bringup_main(argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(_join_negative_coordinates(argv))
    except SystemExit as exc:  # argparse already printed usage and the error
        return int(exc.code or 0)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return args.handler(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
