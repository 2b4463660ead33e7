"""``bringup sim --drones N`` and ``bringup sim --drone-id I``: the EGO-Swarm graph over ROS 2.

* ``bringup sim --drones N --starts S.json [--goals G.json] [--summary JSON] [--log-dir DIR]``:
  the swarm simulator (``swarm_sim``: N drones in one world, each drone's topics in ``/drone<i>``)
  and, per drone, a ``planner`` (EGO, ``swarm_drone_id`` i, on the shared ``/swarm/trajectories``)
  and a ``traj_server`` in ``/drone<i>``. S.json / G.json are ``swarm fly``'s lists of
  ``[x, y, z]`` (same checks, exit 2 with one line). With ``--goals`` the bringup flies a mission
  per drone over DDS (``nodes/mission.py``, one per namespace: the simulator's ground truth
  decides reached / collided), sim time starts once every drone has accepted its goal, and the
  run ends when every drone has reached its goal or is down (or at ``--timeout`` s of sim time);
  then it writes the summary (per drone reached / collided, the smallest inter-drone distance,
  like ``swarm fly``'s) and ``DIR/drone_<i>.csv``. ``--sim-only``: the simulator alone, the drones
  coming from other bringups.
* ``bringup sim --drone-id I [--goal X,Y,Z] [--summary JSON] [--log CSV]``: drone I's planner and
  trajectory server only, in ``/drone<I>``, as their own process group (as on the drone's own
  computer); the simulator is started by another bringup (``--drones N --sim-only``: its sim time
  starts once every drone's planner has accepted a goal). With
  ``--goal`` it flies drone I's mission and writes the single-drone files when it ends; the nodes
  then keep running (the drone hovers, and the simulator, in lockstep, keeps waiting for them:
  a drone whose nodes left would be a lockstep fault for the whole swarm) until Ctrl-C or
  ``--duration``.

Supervision, stopping and exit codes are the single-drone bringup's (``bringup.Supervisor``).
"""
from __future__ import annotations

import copy
import json
import math
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from planner_pkg.nodes import bringup as b

__all__ = ["add_arguments", "main", "run", "SWARM_SIM", "default_starts", "check_starts", "drone_overrides", "sim_overrides"]

SWARM_SIM = b.NodeSpec("swarm_sim", "planner_pkg.nodes.swarm_sim", "swarm_sim", respawn=False)
DEFAULT_SPACING_M = 1.0
#: wall seconds the end of a swarm mission waits for a simulator status that covers it
FINAL_STATUS_WAIT_S = 5.0


def add_arguments(p) -> None:
    g = p.add_argument_group("swarm (EGO-Swarm over ROS 2, docs/swarm.md)")
    g.add_argument("--drones", type=int, metavar="N",
                   help="start the swarm simulator for N drones and (unless --sim-only) every drone's nodes")
    g.add_argument("--starts", metavar="S.json", help="--drones: JSON list of [x, y, z] starts, m (swarm fly's format; "
                                                      "default: a line across y at x = -12, 1 m apart)")
    g.add_argument("--goals", metavar="G.json", help="--drones: JSON list of [x, y, z] goals, m: fly a mission per drone")
    g.add_argument("--log-dir", metavar="DIR", help="--drones with --goals: write DIR/drone_<i>.csv")
    g.add_argument("--sim-only", action="store_true", help="--drones: the simulator only (drones from --drone-id bringups)")
    g.add_argument("--drone-id", type=int, metavar="I", help="only drone I's planner + traj_server, in /drone<I>")
    g.add_argument("--peers", metavar="J,K,...", help="--drone-id: the other drones' ids; in lockstep each planning tick "
                                                       "waits for their broadcasts sent before it (docs/swarm.md; "
                                                       "--drones N sets this itself)")


def _refuse_options(args) -> Optional[str]:
    if args.profile != "sim":
        return "--drones / --drone-id need the sim profile (bringup sim)"
    if args.drones is not None and args.drone_id is not None:
        return "give either --drones N (the simulator and all drones) or --drone-id I (one drone), not both"
    if args.drones is not None and not (1 <= args.drones <= 64):
        return f"--drones must be 1..64, got {args.drones}"
    if args.drone_id is not None and not (0 <= args.drone_id <= 10_000):
        return f"--drone-id must be 0..10000, got {args.drone_id}"
    if args.peers is not None:
        if args.drone_id is None:
            return "--peers goes with --drone-id (--drones N knows every drone)"
        try:
            peers = [int(v) for v in args.peers.split(",")]
        except ValueError:
            return f"--peers must be comma-separated drone ids, got {args.peers!r}"
        if any(not 0 <= p <= 10_000 or p == args.drone_id for p in peers) or len(set(peers)) != len(peers):
            return f"--peers must be distinct drone ids 0..10000 other than --drone-id {args.drone_id}, got {args.peers!r}"
    for name in ("namespace", "viz", "single_process", "start"):
        if getattr(args, name, None):
            return f"--{name.replace('_', '-')} is not available with --drones / --drone-id (each drone is in /drone<i>)"
    if args.planner not in (None, "ego"):
        return "a swarm flies the ego planner only (--planner ego)"
    if args.drones is not None:
        if args.goal is not None or args.log:
            return "--drones takes --goals G.json (one goal per drone) and --log-dir, not --goal / --log"
        if args.sim_only and (args.goals or args.summary or args.log_dir or args.plot):
            return "--sim-only runs no mission: give the goals to the --drone-id bringups"
        if (args.summary or args.log_dir or args.plot) and not args.goals:
            return "--summary / --log-dir are written by a mission: give --goals G.json too"
        if args.plot:
            return "--plot is not available with --drones (swarm fly --plot draws the same paths)"
    else:
        for name in ("starts", "goals", "log_dir"):
            if getattr(args, name):
                return f"--{name.replace('_', '-')} belongs to --drones; --drone-id takes --goal X,Y,Z"
        if args.sim_only:
            return "--sim-only belongs to --drones"
        if args.goal is None and (args.summary or args.log or args.plot):
            return "--summary / --log / --plot are written by a mission: give --goal X,Y,Z too"
    return None


def _prepare(args) -> Optional[str]:
    from planner_pkg.app.swarm import check_swarm_points, read_points
    from planner_pkg.cli_args import CliError, writable_path
    from planner_pkg.nodes.params import ParamsFileError, check_params_file, read_params_file
    from planner_pkg.nodes.sim_bridge import DEFAULT_WORLD, find_world
    from planner_pkg.sim.params import QuadrotorParams
    from planner_pkg.world import WorldFormatError, load_world

    error = _refuse_options(args)
    if error:
        return error
    if args.use_sim_time is None:
        args.use_sim_time = True
    args.params = Path(args.params) if args.params else b.default_params_file("sim")
    if not args.params.is_file():
        return f"parameter file {str(args.params)!r} does not exist"
    try:
        blocks = read_params_file(args.params)
        check_params_file(blocks, b.node_parameter_configs(), args.params)
    except ParamsFileError as exc:
        return str(exc)
    world = args.world or b._sim_bridge_value(blocks, "world_file") or DEFAULT_WORLD
    try:
        path = find_world(world)
        args.world_obj = load_world(path)
    except (FileNotFoundError, WorldFormatError, OSError) as exc:
        return f"cannot load the world: {exc}"
    args.world = str(path.resolve())
    args.world_bounds = (np.asarray(args.world_obj.bounds_min), np.asarray(args.world_obj.bounds_max))
    args.stall_timeout_wall_s = b.mission_stall_timeout_s(blocks)
    if args.record:
        import importlib.util

        if importlib.util.find_spec("mcap_ros2") is None:
            return "--record needs the MCAP writer: pip install mcap-ros2-support"
    radius = QuadrotorParams().collision_radius_m
    try:
        if args.drones is not None:
            args.starts_xyz = read_points(args.starts, "--starts") if args.starts else default_starts(args.drones)
            if args.starts_xyz.shape[0] != args.drones:
                raise CliError(f"--drones {args.drones} but --starts lists {args.starts_xyz.shape[0]} drones")
            args.goals_xyz = None
            if args.goals:
                args.goals_xyz = read_points(args.goals, "--goals")
                check_swarm_points(args.world_obj, args.starts_xyz, args.goals_xyz, radius, args.goal_tolerance)
            check_starts(args.world_obj, args.starts_xyz, radius)
            if args.summary:
                args.summary = writable_path(str(args.summary), "--summary")
            if args.log_dir:
                d = Path(args.log_dir)
                if d.exists() and not d.is_dir():
                    raise CliError(f"--log-dir {args.log_dir!r} exists and is not a folder")
        elif args.goal is not None:
            _check_goal(args.world_obj, args.goal, radius)
    except CliError as exc:
        return str(exc)
    return None


def default_starts(n: int) -> np.ndarray:
    """(n, 3) m: the starts without ``--starts`` / ``starts:=``: a line across y at x = -12 m,
    1 m apart, 1 m up (the shipped forest's start side); checked like given ones."""
    y = (np.arange(n) - 0.5 * (n - 1)) * DEFAULT_SPACING_M
    return np.column_stack([np.full(n, -12.0), y, np.ones(n)])


def check_starts(world, starts: np.ndarray, radius: float) -> None:
    """The starts alone (``--sim-only`` or no goals): swarm fly's start checks."""
    from planner_pkg.cli_args import CliError

    lo, hi = np.asarray(world.bounds_min), np.asarray(world.bounds_max)
    for k, s in enumerate(starts):
        if (s < lo).any() or (s > hi).any():
            raise CliError(f"drone {k}: start {s.tolist()} is outside the world bounds {lo.tolist()} .. {hi.tolist()}")
        if float(world.signed_distance(s)) < radius:
            raise CliError(f"drone {k}: start {s.tolist()} is inside or within {radius} m of an obstacle")
    d = np.linalg.norm(starts[:, None] - starts[None], axis=2)
    d[np.diag_indices(starts.shape[0])] = np.inf
    a, c = np.unravel_index(int(np.argmin(d)), d.shape)
    if d[a, c] < 2.0 * radius:
        raise CliError(f"starts of drones {min(a, c)} and {max(a, c)} are {d[a, c]:.3f} m apart, closer than two "
                       f"vehicle radii ({2 * radius:.2f} m)")


def _check_goal(world, goal, radius: float) -> None:
    from planner_pkg.cli_args import CliError

    g = np.asarray(goal, dtype=np.float64)
    if (g < np.asarray(world.bounds_min)).any() or (g > np.asarray(world.bounds_max)).any():
        raise CliError(f"goal {g.tolist()} is outside the world bounds")
    if float(world.signed_distance(g)) < radius:
        raise CliError(f"goal {g.tolist()} is inside or within {radius} m of an obstacle")


def _yaw_to(start, goal) -> float:
    d = np.asarray(goal) - np.asarray(start)
    return math.atan2(d[1], d[0]) if math.hypot(d[0], d[1]) > 1e-9 else 0.0


def _commands(args) -> Dict[str, tuple]:
    """{process name: (NodeSpec, command)} of this bringup."""
    out: Dict[str, tuple] = {}
    if args.drones is not None:
        starts = args.starts_xyz
        goals = args.goals_xyz
        yaws = [_yaw_to(s, g) for s, g in zip(starts, goals)] if goals is not None else [0.0] * args.drones
        cmd = b.node_command("sim", SWARM_SIM, _for_namespace(args, ""))
        # with goals, or with the drones' own bringups bringing them: sim time starts once every drone has one
        params = sim_overrides(args.world, starts, yaws, start_on_goal=goals is not None or args.sim_only)
        if args.real_time_factor is not None:
            params["real_time_factor"] = float(args.real_time_factor)
        out[SWARM_SIM.name] = (SWARM_SIM, cmd + _as_ros_args(params))
        ids = [] if args.sim_only else list(range(args.drones))
        everyone = list(range(args.drones))
    else:
        ids = [args.drone_id]
        everyone = [args.drone_id] + ([int(v) for v in args.peers.split(",")] if args.peers else [])
    for i in ids:
        ns_args = _for_namespace(args, f"/drone{i}")
        for spec in (b.PLANNER, b.TRAJ_SERVER):
            cmd = b.node_command("sim", spec, ns_args)
            if spec is b.PLANNER:
                cmd += _as_ros_args(drone_overrides(i, [j for j in everyone if j != i]))
            out[f"drone{i}_{spec.name}"] = (spec, cmd)
    if args.record:  # one recorder at the root: the clock, the broadcasts and every drone's topics
        cmd = b.node_command("sim", b.RECORDER, _for_namespace(args, ""))
        out[b.RECORDER.name] = (b.RECORDER, cmd + _as_ros_args({"topics": recorded_topics(everyone)}))
    return out


def recorded_topics(ids) -> List[str]:
    """What ``--record`` records in a swarm: ``/clock``, the broadcast topic and, for each drone id,
    every topic of the single-drone graph in ``/drone<i>``."""
    from planner_pkg.nodes.recorder import KNOWN_TOPICS
    from planner_pkg.nodes.swarm_link import SWARM_TOPIC, drone_namespace

    relative = [t for t in KNOWN_TOPICS if not t.startswith("/")]
    absolute = [t for t in KNOWN_TOPICS if t.startswith("/")]
    return absolute + [SWARM_TOPIC] + [f"{drone_namespace(i)}/{t}" for i in ids for t in relative]


def sim_overrides(world: str, starts, yaws, start_on_goal: bool = False) -> dict:
    """The swarm simulator's parameters set by the bringup and launch/swarm.launch.py."""
    out = {"world_file": str(world), "drones": int(len(starts)),
           "starts_m": [float(v) for v in np.asarray(starts, dtype=np.float64).reshape(-1)],
           "start_yaws_rad": [float(v) for v in yaws],
           "lockstep_participants": [b.PLANNER.name, b.TRAJ_SERVER.name]}
    if start_on_goal:
        out["lockstep_start_on_goal"] = True
    return out


def drone_overrides(i: int, peers=()) -> dict:
    """Drone i's planner parameters beyond the single-drone ones (its id on the broadcast topic, its
    own EGO seed, as ``swarm fly`` seeds drone i, and the peers whose broadcasts it waits for in lockstep)."""
    # the point cloud, not depth images (the sim profile's single-drone input): a peer's pixels are
    # masked out of a drone's depth (no obstacle, no free space), so the space behind a peer stays
    # never-observed for the stop-before-unknown limit. On depth, drone 3 of the 4-drone DDS test
    # hovered at its start until a replan passed the 30 s lockstep fault timeout; on the cloud,
    # unknown space counts as free, as in EGO-Swarm, and the test passes.
    out = {"swarm_drone_id": int(i), "ego.seed": int(i), "sensor_input": "cloud"}
    if len(peers):  # (an empty list has no ROS parameter type: the default, no peers, stays)
        out["swarm_peers"] = [int(j) for j in peers]
    return out


def _as_ros_args(params: dict) -> List[str]:
    out: List[str] = []
    for k, v in params.items():
        if isinstance(v, bool):
            text = "true" if v else "false"
        elif isinstance(v, list):
            text = "[" + ",".join(repr(x) if isinstance(x, float) else str(x) for x in v) + "]"
        else:
            text = repr(v) if isinstance(v, float) else str(v)
        out += ["-p", f"{k}:={text}"]
    return out


def _for_namespace(args, namespace: str):
    a = copy.copy(args)
    a.namespace = namespace
    a.goal = None  # (node_overrides: the single-drone lockstep_start_on_goal is not used here)
    return a


class _StatusWatch:
    """The swarm simulator's per-drone status (ground truth: drone collisions, the smallest
    inter-drone distance) heard on ``/drone<i>/status``, on its own rclpy context."""

    def __init__(self, n: int):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        from planner_pkg.nodes import common as c

        self.latest: Dict[int, dict] = {}
        self.lock = threading.Lock()
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
        self.node = Node("swarm_mission", context=self.context)
        for i in range(n):
            self.node.create_subscription(DiagnosticArray, f"/drone{i}/{c.TOPIC_STATUS}",
                                          lambda msg, i=i: self._on_status(i, msg), c.STATUS_QOS)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _on_status(self, i: int, msg) -> None:
        from planner_pkg.nodes.conversions import status_values

        v = status_values(msg)
        if v.get("name", "").endswith("sim_bridge") and "drone_collision" in v:
            with self.lock:
                self.latest[i] = v

    def sim_time(self) -> float:
        with self.lock:
            times = [float(v.get("sim_time_s", "nan")) for v in self.latest.values()]
        return min(times) if times else -math.inf

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=5.0)
        self.thread.join(timeout=5.0)
        self.node.destroy_node()
        if self.context.ok():
            self.context.shutdown()


def _number(text) -> Optional[float]:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def swarm_summary(missions, watch: _StatusWatch, world_name: str, wall_s: float) -> dict:
    """``swarm fly``'s summary shape from the per-drone missions and the simulator's ground truth."""
    drones, pooled = [], []
    with watch.lock:
        status = dict(watch.latest)
    min_sep, pair = None, None
    for i, m in enumerate(missions):
        s = m.summary("ego", world_name).to_dict()
        v = status.get(i, {})
        hit = str(v.get("drone_collision", "")).lower() == "true"
        d = {"drone": i, **s, "collided": bool(s.get("collided") or hit), "collided_world": bool(s.get("collided")
                                                                                               and not hit),
             "drone_collision": hit}
        drones.append(d)
        pooled += list(m.replan_ms)
        sep = _number(v.get("min_inter_drone_distance_m"))
        if sep is not None and (min_sep is None or sep < min_sep):
            min_sep = sep
            text = str(v.get("min_inter_drone_pair", ""))
            pair = [int(x) for x in text.split(",")] if text.replace(",", "").isdigit() else None
    reach = [d.get("time_s") for d in drones if d.get("reached")]
    return {
        "n_drones": len(drones),
        "success": all(d["reached"] and not d["collided"] for d in drones),
        "all_reached": all(d["reached"] for d in drones),
        "any_collision": any(d["collided"] for d in drones),
        "min_inter_drone_distance_m": min_sep,  # the simulator's, over every dynamics step
        "min_inter_drone_pair": pair,
        "replan_ms_median": float(np.median(pooled)) if pooled else None,
        "flight_time_s": max(reach) if len(reach) == len(drones) and all(r is not None for r in reach) else None,
        "time_s": watch.sim_time() if math.isfinite(watch.sim_time()) else None,
        "wall_time_s": wall_s,
        "world": world_name,
        "over": "ROS 2 DDS (bringup sim --drones)",
        "drones": drones,
    }


def run(args, env: dict, stop: threading.Event) -> int:
    """The swarm bringup (after argparse); exit code."""
    error = _prepare(args)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return b.EXIT_USAGE
    commands = _commands(args)
    sup = b.Supervisor({k: v[1] for k, v in commands.items()}, {k: v[0] for k, v in commands.items()}, env,
                       args.stop_timeout)
    missions: List = []
    watch = None
    code = b.EXIT_OK
    written: Optional[int] = None  # the missions' exit code once their files are written
    t0 = time.monotonic()
    try:
        sup.start_all()
        missions, watch = _missions(args, sup)
        while not stop.is_set():
            sup.poll()
            if sup.failed is not None:
                code = sup.failed
                break
            for m in missions:
                m.poll()
                b._print_mission_warnings(m)
            if written is None and missions and all(m.done.is_set() for m in missions):
                for m in missions:  # each drone's odometry up to its deciding report, still in flight
                    if not m.wait_for_log_end():
                        print(f"[bringup] mission {m.namespace}: its flight log ends before the instant the simulator "
                              "decided it (the last odometry did not arrive in time)", file=sys.stderr, flush=True)
                if args.drone_id is None:
                    _wait_final_status(missions, watch)
                    break
                # one drone of a swarm run elsewhere: its files now, but its nodes stay up (it hovers at
                # its goal, an obstacle the others know, and the simulator keeps lockstep with it)
                written = _write(args, missions, watch, time.monotonic() - t0)
                print(f"[bringup] drone {args.drone_id}: mission over; its nodes keep running (Ctrl-C to stop)",
                      flush=True)
            if args.duration and time.monotonic() - t0 >= args.duration:
                break
            stop.wait(0.1)
    finally:
        sup.stop()
        if missions:
            mission_code = written if written is not None else _write(args, missions, watch, time.monotonic() - t0)
            code = code if code != b.EXIT_OK else mission_code
        for m in missions:
            m.close()
        if watch is not None:
            watch.close()
    return code


def _missions(args, sup):
    from planner_pkg.nodes import common as c
    from planner_pkg.nodes.mission import Mission
    from planner_pkg.sim.params import QuadrotorParams

    radius = QuadrotorParams().collision_radius_m
    recorder = f"/{c.TOPIC_STATUS}" if args.record else None  # the root recorder's status

    def simulator_pid() -> Optional[int]:
        proc = sup.procs.get(SWARM_SIM.name)
        return proc.pid if proc is not None else None

    if args.drones is not None and args.goals_xyz is not None:
        missions = [Mission(args.world_obj, g, args.goal_tolerance, args.timeout, radius, f"/drone{i}",
                            ground_truth_expected=True, simulator_pid=simulator_pid,
                            stall_timeout_wall_s=args.stall_timeout_wall_s, recorder_status_topic=recorder)
                    for i, g in enumerate(args.goals_xyz)]
        watch = _StatusWatch(args.drones)
    elif args.drone_id is not None and args.goal is not None:
        # the simulator runs in another process group (another bringup): its pid is not known here
        missions = [Mission(args.world_obj, args.goal, args.goal_tolerance, args.timeout, radius,
                            f"/drone{args.drone_id}", ground_truth_expected=True,
                            stall_timeout_wall_s=args.stall_timeout_wall_s, recorder_status_topic=recorder)]
        watch = None
    else:
        return [], None
    for m in missions:  # --record: each goal goes out once the recorder listens (the file holds the flight)
        m.wait_for_recorder = bool(args.record)
    return missions, watch


def _wait_final_status(missions, watch) -> None:
    """Wait (a little) for a simulator status of a time at or after every mission's end, so that the
    ground truth read (drone collisions, smallest distance) covers the whole flight."""
    if watch is None:
        return
    end = max((m.judge.latest_time() or 0.0) for m in missions)
    deadline = time.monotonic() + FINAL_STATUS_WAIT_S
    while time.monotonic() < deadline and watch.sim_time() < end:
        time.sleep(0.1)


def _write(args, missions, watch, wall_s: float) -> int:
    if watch is None:  # --drone-id: one drone's mission, the single-drone files
        return b._write_mission(args, missions[0])
    from planner_pkg.cli_args import write_outputs

    for m in missions:
        b._print_mission_warnings(m)
    summary = swarm_summary(missions, watch, Path(args.world).name, wall_s)
    writers = []
    if args.log_dir:
        d = Path(args.log_dir)
        for i, m in enumerate(missions):
            p = d / f"drone_{i}.csv"
            writers.append((f"drone_{i}.csv", p, (lambda m, p: lambda: (d.mkdir(parents=True, exist_ok=True),
                                                                       m.flight_log().write_csv(p)))(m, p)))
    text = json.dumps(summary, allow_nan=False, indent=1)
    if args.summary:
        writers.append(("--summary", args.summary, lambda: Path(args.summary).write_text(text + "\n", encoding="utf-8")))
    errors = write_outputs(writers)
    brief = {k: summary[k] for k in ("n_drones", "success", "all_reached", "any_collision",
                                     "min_inter_drone_distance_m", "flight_time_s", "time_s")}
    print(json.dumps(brief, allow_nan=False), flush=True)
    failed = [i for i, m in enumerate(missions) if m.run_failed]
    if failed:
        errors.append(f"the missions of drones {failed} failed: " + "; ".join(missions[i].reason for i in failed))
    for line in errors:
        print(f"[bringup] error: {line}", file=sys.stderr, flush=True)
    return b.EXIT_FAILED if errors else b.EXIT_OK


def main(argv=None) -> int:
    """``python -m planner_pkg bringup``: with ``--drones`` / ``--drone-id`` the swarm graph, else
    ``bringup.main`` (the CLI and the ``bringup`` console script come here)."""
    import os
    import signal

    from planner_pkg.cli_args import join_negative_coordinates

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = b.build_parser()
    add_arguments(parser)
    try:
        args = parser.parse_args(join_negative_coordinates(argv, ("--start", "--goal")))
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.drones is None and args.drone_id is None:
        return b.main(argv)
    if args.drones is not None and not any(a.split("=")[0] == "--timeout" for a in argv):
        from planner_pkg.app.swarm import SWARM_TIMEOUT_S

        args.timeout = SWARM_TIMEOUT_S  # drones give way: a swarm mission's own default
    env = b.ros_environment()
    os.environ.update({k: env[k] for k in ("AMENT_PREFIX_PATH", "RMW_IMPLEMENTATION")})
    stop = threading.Event()
    old = {s: signal.signal(s, lambda _signum, _frame: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return run(args, env, stop)
    finally:
        for s, h in old.items():
            signal.signal(s, h)


if __name__ == "__main__":
    sys.exit(main())
