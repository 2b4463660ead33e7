"""Command line: ``python -m planner_pkg <command>`` (also the ``planner_pkg`` console script).

Commands:
    fly     one closed-loop episode in the embedded simulator (DESIGN.md contract):
            fly --world FILE --start x,y,z --goal x,y,z --planner direct|ego|policy
                [--model FILE] [--seed N] [--max-vel V] --log flight.csv --summary summary.json
                [--plot flight.png] [--timeout S] [--viz [--viz-port P] [--viz-wait S]]
    world generate --kind forest --seed 3 -o forest.yaml [--param key=value ...]
    world sdf forest.yaml -o forest.sdf
    plot RUN.mcap --world FILE -o flight.png [--summary summary.json]   (a recorded run)
    swarm fly --world W --starts S.json --goals G.json --log-dir DIR --summary JSON [--max-vel V]
            [--timeout S]   N drones with EGO-Swarm (planner_pkg/app/swarm.py)
    policy train --config FILE --out model.agm [--resume CKPT]
    policy eval [--model model.agm] --episodes 100 --speed 3
    race train --config config/race/default.yaml --workers N --ray-address local --out M.agm
    race fly --track T --laps L --log CSV --summary JSON [--model M] [--plot PNG]

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
import sys
from pathlib import Path
from typing import Optional, Sequence

# The shared helpers live in cli_args so that library code (bringup, the policy commands) never
# imports this entry point; CliError and the exit codes are re-exported here for scripts.
from planner_pkg.cli_args import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError  # noqa: F401
from planner_pkg.cli_args import check_start_goal, join_negative_coordinates, write_outputs
from planner_pkg.cli_args import duration_s as _duration_s
from planner_pkg.cli_args import goal_tolerance_m as _goal_tolerance_m
from planner_pkg.cli_args import load_world_file as _load_world
from planner_pkg.cli_args import output_file as _output_file
from planner_pkg.cli_args import point as parse_point
from planner_pkg.cli_args import seed as _seed
from planner_pkg.cli_args import speed as _speed
from planner_pkg.cli_args import writable_path as _writable
from planner_pkg.sim.mission_judge import GOAL_TOLERANCE_M, MISSION_TIMEOUT_S


# ---------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from planner_pkg.app.planners import PLANNER_NAMES

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
    fly.add_argument("--max-vel", type=_speed, metavar="V",
                     help="planner speed limit override, m/s (EGO: with the acceleration limit for that speed, "
                          "min(7, max(3, 1.5 V)) m/s^2)")
    fly.add_argument("--log", required=True, type=_output_file, metavar="CSV",
                     help="flight log to write (t,x,y,z,vx,vy,vz)")
    fly.add_argument("--summary", required=True, type=_output_file, metavar="JSON", help="episode summary to write")
    fly.add_argument("--plot", type=_output_file, metavar="PNG", help="also draw the flight (needs matplotlib)")
    fly.add_argument("--timeout", type=_duration_s, default=MISSION_TIMEOUT_S, metavar="S",
                     help=f"sim time limit, s ({MISSION_TIMEOUT_S:g})")
    fly.add_argument(
        "--vehicle",
        choices=("quadrotor", "point_mass"),
        default="quadrotor",
        help="rigid-body quadrotor (default) or the fast point-mass model",
    )
    fly.add_argument("--goal-tolerance", type=_goal_tolerance_m, default=GOAL_TOLERANCE_M, metavar="M",
                     help=f"goal radius, m ({GOAL_TOLERANCE_M:g})")
    from planner_pkg.viz.launch import add_viz_arguments

    add_viz_arguments(fly, wait=True)  # --viz [--viz-port P] [--viz-host A] [--viz-wait S]
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
    from planner_pkg.racing.cli import add_parser as add_race_parser

    add_race_parser(sub)  # race train|fly (planner_pkg/racing/cli.py)
    from planner_pkg.app.swarm import add_parser as add_swarm_parser

    add_swarm_parser(sub)  # swarm fly (planner_pkg/app/swarm.py)
    _add_plot_parser(sub)  # plot RUN.mcap (read back by planner_pkg/sim/mcap_log.py)
    return parser


def _add_plot_parser(sub) -> None:
    p = sub.add_parser("plot", help="draw flight.png (and a summary) from a recorded run (MCAP)")
    p.add_argument("recording", metavar="RUN.mcap", help="MCAP written by 'bringup --record' / the recorder node")
    p.add_argument("--world", required=True, metavar="FILE", help="the world file the run flew in")
    p.add_argument("-o", "--output", required=True, type=_output_file, metavar="PNG", help="plot to write")
    p.add_argument("--summary", type=_output_file, metavar="JSON",
                   help="also write the run's summary (fly's summary.json keys)")
    p.add_argument("--log", type=_output_file, metavar="CSV", help="also write the flight log t,x,y,z,vx,vy,vz")
    p.add_argument("--goal", type=parse_point, metavar="X,Y,Z", help="goal, if the recording has no goal_pose")
    p.add_argument("--goal-tolerance", type=_goal_tolerance_m, default=GOAL_TOLERANCE_M, metavar="M",
                   help=f"goal radius, m ({GOAL_TOLERANCE_M:g})")
    p.add_argument("--timeout", type=_duration_s, default=MISSION_TIMEOUT_S, metavar="S",
                   help=f"mission limit after the goal, sim s ({MISSION_TIMEOUT_S:g}, as bringup)")
    p.add_argument("--title", help="plot title (default: the recording's name)")
    p.set_defaults(handler=_cmd_plot)


# ---------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------
def _cmd_fly(args) -> int:
    from planner_pkg.app.planners import PlannerNotAvailableError, PlannerOptions, make_planner
    from planner_pkg.sim.params import QuadrotorParams, PointMassParams
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
    view = _start_viz(args, world) if args.viz else None
    if view is not None:
        from planner_pkg.viz.tap import VizTap

        planner = VizTap(planner, view)  # the live view sees what the planner sees
    runner = ClosedLoopRunner(world, planner, config, planner_name=args.planner, world_name=str(args.world))
    try:
        result = runner.run(args.start, args.goal, start_yaw=start_yaw)
    finally:
        if view is not None:
            view.stop()
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


def _start_viz(args, world):
    from planner_pkg.viz.foxglove_live import VizServerError, VizUnavailableError
    from planner_pkg.viz.launch import start_live_view

    try:
        return start_live_view(args, world)
    except (VizUnavailableError, VizServerError) as exc:
        raise CliError(str(exc)) from None


def _parse_params(pairs: Sequence[str]) -> dict:
    from planner_pkg import safe_yaml

    try:
        params = safe_yaml.key_values(pairs)
    except ValueError as exc:
        raise CliError(f"--param {exc}") from None
    return {key: tuple(value) if isinstance(value, list) else value for key, value in params.items()}


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


def _cmd_plot(args) -> int:
    from planner_pkg.sim.mcap_log import RecordingError, read_run, summarize
    from planner_pkg.sim.plot import PlottingUnavailableError, plot_flight, require_pyplot

    world = _load_world(args.world)
    out = _writable(args.output, "-o")
    try:
        require_pyplot()
    except PlottingUnavailableError as exc:
        raise CliError(str(exc)) from None
    try:
        run = read_run(args.recording)
    except RecordingError as exc:
        raise CliError(str(exc)) from None
    summary, log = summarize(run, world, goal=args.goal, tolerance_m=args.goal_tolerance, timeout_s=args.timeout,
                             world_name=Path(args.world).name)
    plot_flight(out, world, log, summary, title=args.title or f"recorded run {Path(args.recording).name}")
    if args.summary:
        summary.write_json(_writable(args.summary, "--summary"))
    if args.log:
        log.write_csv(_writable(args.log, "--log"))
    print(json.dumps(summary.to_dict(), allow_nan=False))
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point; returns the exit code instead of exiting (tests call it directly)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bringup"]:  # the ROS 2 graph without ros2 launch; needs rclpy (planner_pkg.nodes)
        # (through the swarm bringup: it adds --drones / --drone-id and hands anything else to bringup.main)
        from planner_pkg.nodes.swarm_bringup import main as bringup_main

        return bringup_main(argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(join_negative_coordinates(argv))
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
