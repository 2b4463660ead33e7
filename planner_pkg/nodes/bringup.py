# ~600 lines: one command (its options, the node commands of each profile, the mission run and its files); the supervisor and the swarm graph are already apart (supervisor.py, swarm_bringup.py).
"""``python -m planner_pkg bringup sim|hardware|gazebo``: the launch files' graph without ``ros2 launch``.

Each node runs in its own process, started as ``ros2 launch`` would start it: the same node
names, topics (no namespace by default, so ``/odom`` and ``/goal_pose`` are what a user sees) and
the same parameter YAML (``--params``, default ``config/<profile>.yaml``), with the same
overrides the launch files apply (``world_file``, ``start_m``, ``planner``, ``use_sim_time``, and
the planner's geofence from the world's bounds). ``--single-process`` runs the nodes in one
process instead (each on its own executor thread).

Before anything starts, the bringup checks what it was given, with the ``fly`` command's argument
types (``planner_pkg/cli_args.py``) and checks: the parameter file (UTF-8 YAML, a mapping of node
blocks, only our nodes, only parameters they declare, values of the right type that their configs
accept), the world, the start and goal (inside the bounds, free, not already within the goal
tolerance), the namespace and every output path. A problem exits 2 with one line naming it.

Supervision (``planner_pkg/nodes/supervisor.py``): a node that exits while the graph runs is
reported; one that crashed is restarted after its ``respawn_delay_s`` when its spec says
``respawn`` (at most ``MAX_RESTARTS`` times); one that is not restarted (the simulator, the
recorder, or a node out of restarts) stops the graph with exit code 1; one that refused its
configuration (exit code 2) is not restarted and the whole graph stops with exit code 2. Ctrl-C /
SIGTERM stop every node: SIGINT first (rclpy shuts down cleanly), SIGTERM after
``--stop-timeout``, then SIGKILL. Children also get SIGTERM from the
kernel if the bringup itself dies (``PR_SET_PDEATHSIG``), so none is ever orphaned.

With ``--goal x,y,z`` the bringup also flies a mission over DDS (``planner_pkg/nodes/mission.py``):
it publishes the goal, logs the simulator's ``odom`` and ends (stopping the graph) when the goal is
reached or the vehicle collides (the embedded simulator's ground truth decides; without one,
odometry against the world file), the simulator reports a lockstep fault, odometry stalls, or
``--timeout`` s of sim time pass. Then it writes ``--log`` (``t,x,y,z,vx,vy,vz`` from the goal
to the end), ``--summary``
and ``--plot`` like the ``fly`` command (each on its own: one that fails does not lose the others),
and ``--record FILE.mcap`` records the topics with the ``recorder`` node. Exit code 1 when an
output could not be written or the run itself failed (no goal sent, nothing flown after it, a
lockstep fault, stalled odometry); otherwise 0, whatever the outcome (read ``reached``).

``--viz [--viz-port P] [--viz-host A]`` adds the ``viz`` node (``planner_pkg/nodes/viz_node.py``):
latched ``viz/*`` topics for RViz2 and a Foxglove WebSocket server on the port (docs/viz.md).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from planner_pkg.nodes.supervisor import (EXIT_CONFIG, EXIT_FAILED, EXIT_OK, EXIT_USAGE, MAX_RESTARTS,  # noqa: F401
                                          NodeSpec, Supervisor)

REPO_ROOT = Path(__file__).resolve().parents[2]

SIM_BRIDGE = NodeSpec("sim_bridge", "planner_pkg.nodes.sim_bridge", "sim_bridge", respawn=False)
PLANNER = NodeSpec("planner", "planner_pkg.nodes.planner_node", "planner_node")
TRAJ_SERVER = NodeSpec("traj_server", "planner_pkg.nodes.traj_server", "traj_server")
FCU_BRIDGE = NodeSpec("fcu_bridge", "planner_pkg.nodes.fcu_bridge", "fcu_bridge")
POLICY = NodeSpec("policy", "planner_pkg.nodes.policy_node", "policy_node")
RECORDER = NodeSpec("recorder", "planner_pkg.nodes.recorder", "recorder", respawn=False)
VIZ = NodeSpec("viz", "planner_pkg.nodes.viz_node", "viz_node")  # --viz: RViz topics + Foxglove server
RACER = NodeSpec("racer", "planner_pkg.nodes.racer_node", "racer_node")  # sim --planner racer --track T

# The graph of each profile; the launch files (launch/*.launch.py) start the same nodes.
PROFILES: Dict[str, tuple] = {
    "sim": (SIM_BRIDGE, PLANNER, TRAJ_SERVER),
    "gazebo": (SIM_BRIDGE, PLANNER, TRAJ_SERVER),
    "hardware": (PLANNER, TRAJ_SERVER, FCU_BRIDGE),
}
USE_SIM_TIME = {"sim": True, "gazebo": True, "hardware": False}
# ``--planner policy`` in these profiles: the policy node flies setpoints itself, so it replaces
# the planner and the trajectory server (launch/sim.launch.py and hardware.launch.py
# ``planner:=policy`` do the same; on hardware the fcu_bridge takes its setpoints).
POLICY_PROFILES = ("sim", "hardware")
# the nodes that pace a lockstep simulator (planner_pkg/nodes/lockstep.py)
LOCKSTEP_PARTICIPANTS = (PLANNER, TRAJ_SERVER, POLICY, RACER)


def profile_specs(profile: str, planner: Optional[str] = None) -> List[NodeSpec]:
    """The nodes ``profile`` starts for ``planner`` (the launch files' node selection)."""
    specs = list(PROFILES[profile])
    if planner == "racer" and profile == "sim":  # the racer flies body rates into the simulator itself
        return [SIM_BRIDGE, RACER]
    if planner == "policy" and profile in POLICY_PROFILES:
        specs = [POLICY if s is PLANNER else s for s in specs if s is not TRAJ_SERVER]
    return specs


def default_params_file(profile: str) -> Path:
    """``config/<profile>.yaml`` from the source tree, else from the installed share directory."""
    name = f"{profile}.yaml"
    local = REPO_ROOT / "config" / name
    if local.is_file():
        return local
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("planner_pkg")) / "config" / name
    except Exception:  # noqa: BLE001 - PackageNotFoundError or no ament index: report the local path
        return local


def ros_environment(env: Optional[dict] = None) -> dict:
    """The environment for the node processes: the ROS 2 PyPI wheels need AMENT_PREFIX_PATH."""
    env = dict(os.environ if env is None else env)
    if not env.get("AMENT_PREFIX_PATH"):
        env["AMENT_PREFIX_PATH"] = sys.prefix
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def world_from_params(params_file) -> Optional[str]:
    """The sim_bridge's ``world_file`` in a parameter YAML, or its default when the file leaves it out
    (the launch files use this too). ParamsFileError (a ValueError naming the file) when the file cannot
    be read as parameters."""
    from planner_pkg.nodes.params import read_params_file
    from planner_pkg.nodes.sim_bridge import DEFAULT_WORLD

    world = _sim_bridge_value(read_params_file(params_file), "world_file")
    return str(world or DEFAULT_WORLD)


def _float_list(values) -> str:
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def node_overrides(profile: str, spec: NodeSpec, args) -> List[str]:
    """``-p name:=value`` overrides for one node, the same the launch files apply."""
    out: List[str] = ["-p", f"use_sim_time:={'true' if args.use_sim_time else 'false'}"]
    if spec is SIM_BRIDGE:
        if profile == "gazebo":
            out += ["-p", "mode:=gazebo"]
        if args.world:
            out += ["-p", f"world_file:={args.world}"]
        if args.start is not None:
            out += ["-p", f"start_m:={_float_list(args.start)}"]
        if args.real_time_factor is not None:
            out += ["-p", f"real_time_factor:={float(args.real_time_factor)!r}"]
        if getattr(args, "start_yaw", None) is not None:  # --planner racer: facing the first gate
            out += ["-p", f"start_yaw_rad:={float(args.start_yaw)!r}"]
        if profile == "sim":
            # lockstep: the participants of this graph must report before sim time starts, and a
            # mission's flight starts with its goal (the same sim time every run, whatever the load)
            names = [s.name for s in profile_specs(profile, args.planner) if s in LOCKSTEP_PARTICIPANTS]
            out += ["-p", f"lockstep_participants:=[{','.join(names)}]"]
            if getattr(args, "goal", None) is not None:
                out += ["-p", "lockstep_start_on_goal:=true"]
    elif spec is PLANNER:
        if args.planner:
            out += ["-p", f"planner:={args.planner}"]
        if args.world_bounds is not None:
            lo, hi = args.world_bounds
            out += ["-p", f"geofence_min_m:={_float_list(lo)}", "-p", f"geofence_max_m:={_float_list(hi)}"]
    elif spec is POLICY:
        if args.world_bounds is not None:
            lo, hi = args.world_bounds
            out += ["-p", f"geofence_min_m:={_float_list(lo)}", "-p", f"geofence_max_m:={_float_list(hi)}"]
    elif spec is RACER:
        out += ["-p", f"track_file:={args.track}"]
    elif spec is RECORDER:
        out += ["-p", f"output:={Path(args.record).resolve()}"]  # absolute: always a YAML string
    elif spec is VIZ:
        if args.world:
            out += ["-p", f"world_file:={args.world}"]
        out += ["-p", "foxglove:=true", "-p", f"foxglove_port:={int(args.viz_port)}",
                "-p", f"foxglove_host:={args.viz_host}"]
    return out


def node_command(profile: str, spec: NodeSpec, args) -> List[str]:
    # through nodes.run: a SIGINT while the node is still importing ends it quietly (exit 0)
    cmd = [sys.executable, "-m", "planner_pkg.nodes.run", spec.module, "--ros-args", "-r", f"__node:={spec.name}"]
    if args.namespace:
        cmd += ["-r", f"__ns:={args.namespace}"]
    cmd += ["--params-file", str(args.params)]
    cmd += node_overrides(profile, spec, args)
    cmd += ["--log-level", args.log_level]
    return cmd


# ---------------------------------------------------------------------------------------------
# what each node declares (the parameter file is checked against it before anything starts)
# ---------------------------------------------------------------------------------------------
def node_parameter_configs() -> Dict[str, list]:
    """{node name: [(config dataclass, parameter prefix), ...]} of every node a profile may start
    (their ``ConfigParameters``). A node whose module cannot be imported here (an optional extra
    that is not installed) has an empty list: its block is not checked."""
    out: Dict[str, list] = {}

    def add(name: str, module: str, attrs) -> None:
        try:
            mod = importlib.import_module(module)
            out[name] = [(getattr(mod, attr), prefix) for attr, prefix in attrs]
        except (ImportError, AttributeError):  # an optional node (extra not installed)
            out[name] = []

    add("sim_bridge", SIM_BRIDGE.module, [("SimBridgeConfig", "")])
    add("swarm_sim", "planner_pkg.nodes.swarm_sim", [("SwarmSimConfig", "")])
    add("planner", PLANNER.module, [("PlannerNodeConfig", "")])
    if out["planner"]:
        ego_cls, _ = importlib.import_module(PLANNER.module)._ego_config()
        if ego_cls is not None:
            out["planner"].append((ego_cls, "ego."))
    add("traj_server", TRAJ_SERVER.module, [("TrajServerConfig", "")])
    add("policy", POLICY.module, [("PolicyNodeConfig", "")])
    add("fcu_bridge", FCU_BRIDGE.module, [("FcuBridgeNodeConfig", ""), ("BridgeConfig", "")])
    add("recorder", RECORDER.module, [("RecorderConfig", "")])
    add("viz", VIZ.module, [("VizNodeConfig", "")])
    add("racer", RACER.module, [("RacerNodeConfig", "")])
    return out


def _sim_bridge_value(blocks: dict, name: str, node_name: str = "sim_bridge"):
    """The sim_bridge's (or ``node_name``'s) ``name`` in the parameter blocks (its own block over a
    ``/**`` one), or None."""
    from planner_pkg.nodes.params import flatten_yaml_block, node_of_key

    value = None
    for key, params in blocks.items():
        node = node_of_key(key)
        flat = flatten_yaml_block(params)
        if node == node_name and name in flat:
            value = flat[name]
        elif node == "*" and name in flat and value is None:
            value = flat[name]
    return value


# ---------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from planner_pkg import cli_args as types

    p = argparse.ArgumentParser(prog="python -m planner_pkg bringup",
                                description="Start the ROS 2 graph of a launch file without ros2 launch.",
                                epilog="EGO-Swarm: bringup sim --drones N --starts S.json [--goals G.json] and "
                                       "bringup sim --drone-id I (planner_pkg/nodes/swarm_bringup.py; "
                                       "'bringup sim --drones 1 --help' lists their options)")
    p.add_argument("profile", choices=sorted(PROFILES), help="sim (embedded simulator), gazebo, hardware")
    p.add_argument("--params", metavar="FILE", help="parameter YAML (default: config/<profile>.yaml)")
    p.add_argument("--world", metavar="FILE", help="world file for the simulator (and the planner's geofence)")
    p.add_argument("--start", type=types.point, metavar="X,Y,Z", help="start position, m")
    p.add_argument("--planner", help="planner name (ego, direct, policy, racer)")
    p.add_argument("--track", metavar="FILE", help="gate track for --planner racer (sim profile): the simulator's "
                                                  "world is its gate frames, the start the track's")
    p.add_argument("--namespace", type=types.ros_namespace, default="",
                   help="ROS namespace for every node (swarms); default none")
    p.add_argument("--real-time-factor", type=types.real_time_factor,
                   help="simulated seconds per wall second; 0 = as fast as the planner allows (lockstep)")
    p.add_argument("--use-sim-time", dest="use_sim_time", action="store_true", default=None)
    p.add_argument("--no-sim-time", dest="use_sim_time", action="store_false")
    p.add_argument("--single-process", action="store_true", help="all nodes in one process (one executor thread each)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warn", "error"))
    p.add_argument("--stop-timeout", type=types.duration_s, default=5.0, help="grace after SIGINT before SIGTERM, s")
    p.add_argument("--duration", type=types.duration_s, help="stop after this many wall seconds")
    mission = p.add_argument_group("mission (fly a goal over DDS and write the fly command's files)")
    mission.add_argument("--goal", type=types.point, metavar="X,Y,Z", help="publish this goal and wait for the outcome")
    from planner_pkg.sim.mission_judge import GOAL_TOLERANCE_M, MISSION_TIMEOUT_S

    mission.add_argument("--timeout", type=types.duration_s, default=MISSION_TIMEOUT_S,
                         help=f"mission limit in sim seconds ({MISSION_TIMEOUT_S:g})")
    mission.add_argument("--goal-tolerance", type=types.goal_tolerance_m, default=GOAL_TOLERANCE_M,
                         help=f"goal radius, m ({GOAL_TOLERANCE_M:g})")
    mission.add_argument("--log", type=types.output_file, metavar="CSV",
                         help="flight log t,x,y,z,vx,vy,vz from odom, from the goal to the end of the mission")
    mission.add_argument("--summary", type=types.output_file, metavar="JSON", help="mission summary")
    mission.add_argument("--plot", type=types.output_file, metavar="PNG", help="flight plot (matplotlib)")
    mission.add_argument("--record", type=types.output_file, metavar="MCAP", help="record the topics to an MCAP file")
    from planner_pkg.viz.launch import add_viz_arguments

    add_viz_arguments(p)  # --viz: the viz node (viz/* topics for RViz2, Foxglove server on --viz-port)
    return p


def _prepare(args) -> Optional[str]:
    """Fill in defaults and check everything a run needs before any node starts (the parameter
    file, the world, the start and goal, the output files); returns an error message or None."""
    from planner_pkg.nodes.params import ParamsFileError, check_params_file, read_params_file

    if args.use_sim_time is None:
        args.use_sim_time = USE_SIM_TIME[args.profile]
    args.params = Path(args.params) if args.params else default_params_file(args.profile)
    if not args.params.is_file():
        return f"parameter file {str(args.params)!r} does not exist"
    try:
        blocks = read_params_file(args.params)
        check_params_file(blocks, node_parameter_configs(), args.params)
    except ParamsFileError as exc:
        return str(exc)
    if args.goal is None:
        given = [name for name in ("log", "summary", "plot") if getattr(args, name)]
        if given:
            return f"--{given[0]} is written by a mission: give --goal X,Y,Z too"
    args.world_bounds, args.world_obj = None, None
    if args.planner == "racer" or args.track:
        error = _prepare_race(args, blocks)
        if error:
            return error
    mode = "gazebo" if args.profile == "gazebo" else (_sim_bridge_value(blocks, "mode") or "embedded")
    args.ground_truth = args.profile != "hardware" and mode == "embedded"
    if args.profile != "hardware":
        from planner_pkg.nodes.sim_bridge import DEFAULT_WORLD, find_world
        from planner_pkg.world import WorldFormatError, load_world

        world = args.world or _sim_bridge_value(blocks, "world_file") or DEFAULT_WORLD
        try:
            path = find_world(world)
            args.world_obj = load_world(path)
        except (FileNotFoundError, WorldFormatError, OSError) as exc:
            return f"cannot load the world: {exc}"
        args.world = str(path.resolve())
        args.world_bounds = (np.asarray(args.world_obj.bounds_min), np.asarray(args.world_obj.bounds_max))
    specs = profile_specs(args.profile, args.planner)
    if args.record:
        if importlib.util.find_spec("mcap_ros2") is None:
            return "--record needs the MCAP writer: pip install mcap-ros2-support"
        specs.append(RECORDER)
    if args.viz:
        error = _check_viz(args)
        if error:
            return error
        specs.append(VIZ)
    for spec in specs:
        if importlib.util.find_spec(spec.module) is None:
            return (f"node '{spec.name}' ({spec.module}) is not installed in this version of planner_pkg; "
                    f"the '{args.profile}' profile needs it")
    args.specs = specs
    if args.goal is not None:
        if args.world_obj is None:
            return "--goal needs a simulated profile (sim or gazebo) with a world file"
        return _check_mission(args, blocks)
    return None


def _prepare_race(args, blocks) -> Optional[str]:
    """``--planner racer --track FILE``: the simulator's world (the track's gate frames), start and
    heading from the track and the racer's model (docs/racing.md)."""
    if args.planner != "racer":
        return "--track is for --planner racer (sim profile)"
    if args.profile != "sim":
        return "--planner racer runs in the sim profile (the embedded simulator's body-rate input)"
    if not args.track:
        return "--planner racer needs --track FILE (a gate track, e.g. config/race/track_example.yaml)"
    if args.world or args.goal is not None:
        return (f"--{'world' if args.world else 'goal'} is not used with --planner racer: the simulator's world is "
                "the track's gate frames and the racer flies its gates (read its status)")
    from planner_pkg.nodes.racer_node import race_world

    try:
        args.world, start, args.start_yaw = race_world(args.track, _sim_bridge_value(blocks, "model_path", "racer") or "")
    except ValueError as exc:
        return str(exc)
    args.track = str(Path(args.track).resolve())
    if args.start is None:
        args.start = start
    return None


def _check_viz(args) -> Optional[str]:
    from planner_pkg.viz.foxglove_live import viz_available
    from planner_pkg.viz.launch import check_port_free

    if not viz_available():
        return "--viz needs the foxglove-sdk package: pip install 'planner_pkg[viz]' (or pip install foxglove-sdk)"
    return check_port_free(args.viz_host, args.viz_port)


def _viz_banner(args) -> str:
    from planner_pkg.viz.foxglove_live import url_for

    if args.viz_port == 0:
        return "[bringup] live view: any free port; the viz node prints the URL once it listens"
    return (f"[bringup] live view: {url_for(args.viz_host, args.viz_port)}  (Foxglove: Open connection > Foxglove "
            f"WebSocket; layout: config/foxglove/planner_live.json; RViz2: rviz2 -d rviz/planner.rviz)")


#: Least wall time without odometry before a mission ends as ``stalled``, s.
MIN_STALL_TIMEOUT_S = 30.0


def mission_stall_timeout_s(blocks: dict) -> float:
    """How long the mission waits without odometry before it ends as ``stalled``, wall s: longer
    than the simulator's ``lockstep_fault_timeout_s`` plus two of its status periods, so a
    lockstep fault is reported as one (with its reason) rather than as a stall."""
    from planner_pkg.nodes.sim_bridge import SimBridgeConfig

    default = SimBridgeConfig()
    fault = _sim_bridge_value(blocks, "lockstep_fault_timeout_s")
    rate = _sim_bridge_value(blocks, "status_rate_hz")
    fault = float(fault if fault is not None else getattr(default, "lockstep_fault_timeout_s", MIN_STALL_TIMEOUT_S))
    rate = float(rate if rate is not None else default.status_rate_hz)
    return max(MIN_STALL_TIMEOUT_S, fault + 2.0 / rate + 5.0)


def _check_mission(args, blocks) -> Optional[str]:
    """The checks ``fly`` makes: start and goal free and inside the world, not within the goal
    tolerance of each other, and a plot can be drawn (before flying, not after)."""
    from planner_pkg.cli_args import CliError, check_start_goal
    from planner_pkg.sim.params import QuadrotorParams

    args.stall_timeout_wall_s = mission_stall_timeout_s(blocks)
    start = args.start
    if start is None:
        value = _sim_bridge_value(blocks, "start_m")
        from planner_pkg.nodes.sim_bridge import SimBridgeConfig

        start = np.asarray(value if value is not None else SimBridgeConfig().start_m, dtype=np.float64)
    try:
        check_start_goal(args.world_obj, start, args.goal, QuadrotorParams().collision_radius_m, args.goal_tolerance)
    except CliError as exc:
        return str(exc)
    if args.plot:
        from planner_pkg.sim.plot import PlottingUnavailableError, require_pyplot

        try:
            require_pyplot()
        except PlottingUnavailableError as exc:
            return str(exc)
    return None


def _run_single_process(args, stop: threading.Event) -> int:
    """All nodes in this process, each on its own single-threaded executor and thread.

    Not one MultiThreadedExecutor for all: rclpy's starves timers and subscriptions when
    several busy nodes share it (ros2/rclpy#1223; a 100 Hz timer ran at 2-3 Hz here)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from planner_pkg import safe_yaml
    from planner_pkg.nodes.params import ParameterConfigError

    ros_args = ["--ros-args", "--params-file", str(args.params)]
    rclpy.init(args=ros_args)
    nodes, spinners = [], []
    try:
        for spec in args.specs:
            module = importlib.import_module(spec.module)
            cls = next(v for v in vars(module).values() if isinstance(v, type) and getattr(v, "__module__", "")
                       == spec.module and issubclass(v, rclpy.node.Node))
            overrides = []
            raw = node_overrides(args.profile, spec, args)
            for i in range(1, len(raw), 2):
                name, _, value = raw[i].partition(":=")
                overrides.append(Parameter(name, value=safe_yaml.safe_load(value)))
            nodes.append(cls(namespace=args.namespace or "", parameter_overrides=overrides))
        for node in nodes:
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            thread = threading.Thread(target=executor.spin, daemon=True, name=f"spin-{node.get_name()}")
            thread.start()
            spinners.append((executor, thread))
        while not stop.is_set() and rclpy.ok():
            stop.wait(0.2)
        return EXIT_OK
    except ParameterConfigError as exc:
        print(f"[bringup] {exc}", file=sys.stderr)
        return EXIT_CONFIG
    finally:
        for executor, _ in spinners:
            executor.shutdown()
        for _, thread in spinners:
            thread.join(timeout=5.0)
        for n in nodes:
            close = getattr(n, "close", None)
            if close:
                close()
            n.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()


def main(argv: Optional[Sequence[str]] = None) -> int:
    from planner_pkg.cli_args import join_negative_coordinates as _join_negative_coordinates

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(_join_negative_coordinates(argv, ("--start", "--goal")))
    except SystemExit as exc:
        return int(exc.code or 0)
    env = ros_environment()
    os.environ.update({k: env[k] for k in ("AMENT_PREFIX_PATH", "RMW_IMPLEMENTATION")})
    error = _prepare(args)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE

    if args.viz:
        print(_viz_banner(args), flush=True)
    stop = threading.Event()
    received = []

    def on_signal(signum, _frame):
        received.append(signum)
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if args.single_process and args.goal is None:
            if args.duration:
                timer = threading.Timer(args.duration, stop.set)
                timer.daemon = True
                timer.start()
            return _run_single_process(args, stop)
        commands = {s.name: node_command(args.profile, s, args) for s in args.specs}
        sup = Supervisor(commands, {s.name: s for s in args.specs}, env, args.stop_timeout)
        mission = None
        code = EXIT_OK
        t_start = time.monotonic()
        try:
            sup.start_all()
            if args.goal is not None:
                from planner_pkg.nodes.mission import END_SAMPLES_WAIT_S, Mission
                from planner_pkg.sim.params import QuadrotorParams

                def simulator_pid() -> Optional[int]:
                    proc = sup.procs.get(SIM_BRIDGE.name)
                    return proc.pid if proc is not None else None

                mission = Mission(args.world_obj, args.goal, args.goal_tolerance, args.timeout,
                                  QuadrotorParams().collision_radius_m, args.namespace,
                                  ground_truth_expected=args.ground_truth, simulator_pid=simulator_pid,
                                  stall_timeout_wall_s=args.stall_timeout_wall_s)
                mission.wait_for_recorder = bool(args.record)
            while not stop.is_set():
                sup.poll()
                if sup.failed is not None:
                    code = sup.failed
                    break
                if mission is not None:
                    mission.poll()
                    _print_mission_warnings(mission)
                    if mission.done.is_set():
                        if not mission.wait_for_log_end():  # the odometry up to the deciding report, still in flight
                            print("[bringup] mission: the flight log (--log, --plot) ends before the instant the "
                                  "simulator decided the mission: its last odometry did not arrive in "
                                  f"{END_SAMPLES_WAIT_S:g} s wall", file=sys.stderr, flush=True)
                        break
                if args.duration and time.monotonic() - t_start >= args.duration:
                    break
                stop.wait(0.1)
        finally:
            sup.stop()
            if mission is not None:
                mission_code = _write_mission(args, mission)
                code = code if code != EXIT_OK else mission_code
                mission.close()
        return code
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _print_mission_warnings(mission) -> None:
    while mission.warnings:
        print(f"[bringup] mission: {mission.warnings.pop(0)}", file=sys.stderr, flush=True)


def _write_mission(args, mission) -> int:
    """Write every output the mission has (each on its own: one that fails does not lose the
    others); EXIT_FAILED when one failed or the run itself failed (nothing flown, lockstep fault,
    stalled), else EXIT_OK."""
    from planner_pkg.cli_args import write_outputs

    _print_mission_warnings(mission)
    summary = mission.summary(args.planner or "(params file)", Path(args.world).name)
    flight = mission.flight_log()
    writers = []

    def folder(path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)

    if args.log:
        writers.append(("--log", args.log, lambda: (folder(args.log), flight.write_csv(args.log))))
    if args.summary:
        writers.append(("--summary", args.summary, lambda: (folder(args.summary), summary.write_json(args.summary))))
    if args.plot:
        from planner_pkg.sim.plot import PlottingUnavailableError, plot_flight

        def plot():
            folder(args.plot)
            try:
                plot_flight(args.plot, args.world_obj, flight, summary,
                            title=f"bringup {args.profile}: {Path(args.world).name}")
            except PlottingUnavailableError as exc:
                raise ValueError(str(exc)) from None

        writers.append(("--plot", args.plot, plot))
    errors = write_outputs(writers)
    print(json.dumps(summary.to_dict(), allow_nan=False), flush=True)
    if mission.run_failed:
        if mission.judge.reason_is_failure:  # a lockstep fault, stalled odometry: say that first
            what = summary.reason
        elif not mission.goal_sent:
            what = "no goal was sent (the graph never became ready)"
        else:
            what = "no odometry of this mission arrived after the goal"
        errors.append(f"the mission failed: {what}")
    for line in errors:
        print(f"[bringup] error: {line}", file=sys.stderr, flush=True)
    return EXIT_FAILED if errors else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
