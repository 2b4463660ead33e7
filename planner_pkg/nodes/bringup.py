"""``python -m planner_pkg bringup sim|hardware|gazebo``: the launch files' graph without ``ros2 launch``.

Each node runs in its own process, started as ``ros2 launch`` would start it: the same node
names, topics (no namespace by default, so ``/odom`` and ``/goal_pose`` are what a user sees) and
the same parameter YAML (``--params``, default ``config/<profile>.yaml``), with the same
overrides the launch files apply (``world_file``, ``start_m``, ``planner``, ``use_sim_time``, and
the planner's geofence from the world's bounds). ``--single-process`` runs the nodes in one
process instead (each on its own executor thread).

Supervision: a node that exits while the graph runs is reported; one that crashed is restarted
after its ``respawn_delay_s`` when its spec says ``respawn`` (at most ``MAX_RESTARTS`` times);
one that refused its configuration (exit code 2) is not restarted and the whole graph stops
with exit code 2. Ctrl-C / SIGTERM stop every node: SIGINT first (rclpy shuts down cleanly),
SIGTERM after ``--stop-timeout``, then SIGKILL. Children also get SIGTERM from the kernel if
the bringup itself dies (``PR_SET_PDEATHSIG``), so none is ever orphaned.

With ``--goal x,y,z`` the bringup also flies a mission over DDS: it publishes the goal, logs
``odom`` and ends (stopping the graph) when the goal is reached, the vehicle collides (checked
from ``odom`` against the world file) or ``--timeout`` s of sim time pass; then it writes
``--log`` (``t,x,y,z,vx,vy,vz``), ``--summary`` and ``--plot`` like the ``fly`` command, and
``--record FILE.mcap`` records the topics with the ``recorder`` node.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_CONFIG = 2  # a node refused its parameters (planner_pkg.nodes.common.EXIT_CONFIG)
MAX_RESTARTS = 5
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class NodeSpec:
    """One node of the graph, as the launch files declare it.

    name: ROS node name; module: ``python -m`` module; executable: console script (launch files);
    respawn / respawn_delay_s: restart after a crash, and how long after.
    """

    name: str
    module: str
    executable: str
    respawn: bool = True
    respawn_delay_s: float = 1.0


SIM_BRIDGE = NodeSpec("sim_bridge", "planner_pkg.nodes.sim_bridge", "sim_bridge", respawn=False)
PLANNER = NodeSpec("planner", "planner_pkg.nodes.planner_node", "planner_node")
TRAJ_SERVER = NodeSpec("traj_server", "planner_pkg.nodes.traj_server", "traj_server")
FCU_BRIDGE = NodeSpec("fcu_bridge", "planner_pkg.nodes.fcu_bridge", "fcu_bridge")
POLICY = NodeSpec("policy", "planner_pkg.nodes.policy_node", "policy_node")
RECORDER = NodeSpec("recorder", "planner_pkg.nodes.recorder", "recorder", respawn=False)

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


def profile_specs(profile: str, planner: Optional[str] = None) -> List[NodeSpec]:
    """The nodes ``profile`` starts for ``planner`` (the launch files' node selection)."""
    specs = list(PROFILES[profile])
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
    """The sim_bridge's ``world_file`` in a parameter YAML, or None (the launch files use this too)."""
    import yaml

    data = yaml.safe_load(Path(params_file).read_text()) or {}
    for key, block in data.items():
        if str(key).split("/")[-1] == "sim_bridge" and isinstance(block, dict):
            world = (block.get("ros__parameters") or {}).get("world_file")
            if world:
                return str(world)
    return None


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
    elif spec is RECORDER:
        out += ["-p", f"output:={Path(args.record).resolve()}"]  # absolute: always a YAML string
    return out


def node_command(profile: str, spec: NodeSpec, args) -> List[str]:
    cmd = [sys.executable, "-m", spec.module, "--ros-args", "-r", f"__node:={spec.name}"]
    if args.namespace:
        cmd += ["-r", f"__ns:={args.namespace}"]
    cmd += ["--params-file", str(args.params)]
    cmd += node_overrides(profile, spec, args)
    cmd += ["--log-level", args.log_level]
    return cmd


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Supervisor:
    """Starts, watches, restarts and stops the node processes."""

    def __init__(self, commands: Dict[str, List[str]], specs: Dict[str, NodeSpec], env: dict,
                 stop_timeout_s: float = 5.0, log=print):
        self.commands, self.specs, self.env = commands, specs, env
        self.stop_timeout_s = stop_timeout_s
        self.log = log
        self.procs: Dict[str, subprocess.Popen] = {}
        self.restarts: Dict[str, int] = {name: 0 for name in commands}
        self._restart_at: Dict[str, float] = {}
        self.failed: Optional[int] = None  # exit code the whole bringup should end with

    def start(self, name: str) -> None:
        self.procs[name] = subprocess.Popen(self.commands[name], env=self.env, start_new_session=True,
                                            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        self.log(f"[bringup] started {name} (pid {self.procs[name].pid})")

    def start_all(self) -> None:
        for name in self.commands:
            self.start(name)

    def poll(self) -> None:
        """Check the children once: report exits, schedule and perform restarts."""
        now = time.monotonic()
        for name, proc in list(self.procs.items()):
            code = proc.poll()
            if code is None or name in self._restart_at:
                continue
            spec = self.specs[name]
            if code == EXIT_CONFIG:
                self.log(f"[bringup] {name} refused its configuration (exit {code}); fix the parameters. Stopping.")
                self.failed = EXIT_CONFIG
                continue
            what = f"signal {-code}" if code < 0 else f"exit code {code}"
            if spec.respawn and self.restarts[name] < MAX_RESTARTS:
                self.log(f"[bringup] {name} died ({what}); restarting in {spec.respawn_delay_s:g} s "
                         f"({self.restarts[name] + 1}/{MAX_RESTARTS})")
                self._restart_at[name] = now + spec.respawn_delay_s
            else:
                self.log(f"[bringup] {name} ended ({what}); not restarting")
                del self.procs[name]
                if spec.respawn:
                    self.failed = EXIT_FAILED
        for name, when in list(self._restart_at.items()):
            if now >= when:
                del self._restart_at[name]
                self.restarts[name] += 1
                self.start(name)

    def alive(self) -> List[str]:
        return [n for n, p in self.procs.items() if p.poll() is None]

    def stop(self) -> None:
        """SIGINT, then SIGTERM, then SIGKILL; waits for every child."""
        for sig, grace in ((signal.SIGINT, self.stop_timeout_s), (signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
            running = [p for p in self.procs.values() if p.poll() is None]
            if not running:
                break
            for p in running:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(p.poll() is None for p in running):
                time.sleep(0.05)
        for name, p in self.procs.items():
            if p.poll() is None:  # pragma: no cover - SIGKILL cannot be refused
                p.wait()
            self.log(f"[bringup] {name} stopped (exit {p.returncode})")


# ---------------------------------------------------------------------------------------------
# the mission (--goal): publish the goal, log odom, judge from the world file
# ---------------------------------------------------------------------------------------------
class Mission:
    """Runs in the bringup process on its own rclpy context; see the module docstring."""

    def __init__(self, world, goal: np.ndarray, tolerance_m: float, timeout_s: float, radius_m: float,
                 namespace: str = ""):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        from planner_pkg.nodes import common as c
        from planner_pkg.sim.flight_log import FlightLog

        self.world, self.goal, self.tolerance_m = world, goal, tolerance_m
        self.timeout_s, self.radius_m = timeout_s, radius_m
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
        self.node = Node("mission", namespace=namespace or None, context=self.context)
        self.log = FlightLog()
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.reason = ""
        self.t_goal: Optional[float] = None
        self.path_m = 0.0
        self.min_clearance = math.inf
        self.prev: Optional[np.ndarray] = None
        self.replan_ms: List[float] = []
        self.goal_pub = self.node.create_publisher(PoseStamped, c.TOPIC_GOAL, c.GOAL_QOS)
        self.node.create_subscription(Odometry, c.TOPIC_ODOM, self._on_odom, c.ODOM_QOS)
        self.node.create_subscription(DiagnosticArray, c.TOPIC_STATUS, self._on_status, c.STATUS_QOS)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()
        self.goal_sent = False
        self.planner_status = ""
        self.wait_for_recorder = False  # --record: the goal goes out once the recorder listens too

    def _on_status(self, msg) -> None:
        from planner_pkg.nodes.conversions import status_values

        v = status_values(msg)
        name = v.get("name", "")
        if name.endswith("planner"):
            self.planner_status = v.get("goal_status", "")
            med = v.get("replan_ms_median", "n/a")
        elif name.endswith("policy"):  # the policy's "replan" is one network step
            med = v.get("inference_ms_median", "n/a")
        else:
            return
        try:
            if med not in ("n/a", "none", ""):
                self.replan_ms.append(float(med))
        except ValueError:
            pass

    def _on_odom(self, msg) -> None:
        from planner_pkg.nodes.conversions import odometry_to_state

        try:
            s = odometry_to_state(msg)
        except ValueError:
            return
        with self.lock:
            if self.done.is_set():
                return
            self.log.append(s.t, s.position, s.velocity)
            if self.t_goal is None:
                return
            if self.prev is not None:
                self.path_m += float(np.linalg.norm(s.position - self.prev))
            self.prev = s.position
            clearance = float(self.world.signed_distance(s.position)) - self.radius_m
            self.min_clearance = min(self.min_clearance, clearance)
            if clearance < 0:
                self._finish("collision", s.t)
            elif np.linalg.norm(s.position - self.goal) <= self.tolerance_m:
                self._finish("goal_reached", s.t)
            elif s.t - self.t_goal >= self.timeout_s:
                self._finish("timeout", s.t)

    def _finish(self, reason: str, t: float) -> None:
        self.reason, self.t_end = reason, t
        self.wall_end = time.monotonic()
        self.done.set()

    def send_goal(self) -> bool:
        """Publish the goal once the planner subscribes and odometry flows; True when sent."""
        from planner_pkg.nodes.conversions import goal_to_pose

        if self.goal_sent:
            return True
        if self.goal_pub.get_subscription_count() == 0 or len(self.log) == 0 or not self._goal_listeners_ready():
            return False
        with self.lock:
            self.t_goal = self.log.t[-1]
            self.wall_goal = time.monotonic()
        self.goal_pub.publish(goal_to_pose(self.goal))
        self.goal_sent = True
        return True

    def _goal_listeners_ready(self) -> bool:
        """Every node that must hear the (volatile) goal is subscribed and matched: a flying node
        (planner / policy: any subscriber but the recorder) and, with ``--record``, the recorder."""
        try:
            infos = self.node.get_subscriptions_info_by_topic(self.goal_pub.topic_name)
        except Exception:  # noqa: BLE001 - graph query while shutting down
            return False
        names = {i.node_name for i in infos}
        if not names - {"recorder"} or (self.wait_for_recorder and "recorder" not in names):
            return False
        return self.goal_pub.get_subscription_count() >= len(infos)

    def summary(self, planner: str, world_name: str, vehicle: str = "quadrotor"):
        """The mission as an :class:`~planner_pkg.sim.flight_log.EpisodeSummary` (fly's summary.json)."""
        from planner_pkg.sim.flight_log import EpisodeSummary

        with self.lock:
            data = self.log.as_array()
        t_end = getattr(self, "t_end", None)
        flown = data[data[:, 0] >= self.t_goal] if self.t_goal is not None else data[:0]
        duration = 0.0
        if self.t_goal is not None and len(flown):
            duration = (t_end if t_end is not None else float(flown[-1, 0])) - self.t_goal
        speeds = np.linalg.norm(flown[:, 4:7], axis=1) if len(flown) else np.zeros(1)
        wall_goal, wall_end = getattr(self, "wall_goal", None), getattr(self, "wall_end", None)
        wall = (wall_end if wall_end is not None else time.monotonic()) - wall_goal if wall_goal is not None else 0.0
        last = flown[-1, 1:4] if len(flown) else (data[-1, 1:4] if len(data) else np.full(3, np.nan))
        collided = self.reason == "collision"
        return EpisodeSummary(
            reached=self.reason == "goal_reached", collided=collided, time_s=duration, path_length_m=self.path_m,
            min_clearance_m=self.min_clearance if math.isfinite(self.min_clearance) else None,
            replan_ms_median=float(np.median(self.replan_ms)) if self.replan_ms else None,
            replan_ms_p95=float(np.percentile(self.replan_ms, 95)) if self.replan_ms else None,
            reason=self.reason or "interrupted", mean_speed_mps=self.path_m / duration if duration > 0 else 0.0,
            max_speed_mps=float(speeds.max()), final_goal_distance_m=float(np.linalg.norm(last - self.goal)),
            seed=None, planner=planner, vehicle=vehicle, world=world_name,
            start=flown[0, 1:4].tolist() if len(flown) else [], goal=self.goal.tolist(),
            collision_time_s=t_end if collided else None, collision_position=last.tolist() if collided else None,
            planner_calls=None, bad_setpoints=None, depth_frames=None,  # counted inside the nodes, not here
            wall_time_s=wall, real_time_factor=duration / wall if wall > 0 and duration > 0 else None,
            message=f"over ROS 2 DDS; planner status: {self.planner_status}",
        )

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        if self.context.ok():
            self.context.shutdown()
        self.thread.join(timeout=2.0)


# ---------------------------------------------------------------------------------------------
def _point(text: str) -> np.ndarray:
    from planner_pkg.cli import parse_point

    return parse_point(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m planner_pkg bringup",
                                description="Start the ROS 2 graph of a launch file without ros2 launch.")
    p.add_argument("profile", choices=sorted(PROFILES), help="sim (embedded simulator), gazebo, hardware")
    p.add_argument("--params", metavar="FILE", help="parameter YAML (default: config/<profile>.yaml)")
    p.add_argument("--world", metavar="FILE", help="world file for the simulator (and the planner's geofence)")
    p.add_argument("--start", type=_point, metavar="X,Y,Z", help="start position, m")
    p.add_argument("--planner", help="planner name (ego, direct, policy)")
    p.add_argument("--namespace", default="", help="ROS namespace for every node (swarms); default none")
    p.add_argument("--real-time-factor", type=float,
                   help="simulated seconds per wall second; 0 = as fast as the planner allows (lockstep)")
    p.add_argument("--use-sim-time", dest="use_sim_time", action="store_true", default=None)
    p.add_argument("--no-sim-time", dest="use_sim_time", action="store_false")
    p.add_argument("--single-process", action="store_true", help="all nodes in one process (one executor thread each)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warn", "error"))
    p.add_argument("--stop-timeout", type=float, default=5.0, help="grace after SIGINT before SIGTERM, s")
    p.add_argument("--duration", type=float, help="stop after this many wall seconds")
    mission = p.add_argument_group("mission (fly a goal over DDS and write the fly command's files)")
    mission.add_argument("--goal", type=_point, metavar="X,Y,Z", help="publish this goal and wait for the outcome")
    mission.add_argument("--timeout", type=float, default=60.0, help="mission limit in sim seconds (60)")
    mission.add_argument("--goal-tolerance", type=float, default=0.5, help="goal radius, m (0.5)")
    mission.add_argument("--log", metavar="CSV", help="flight log t,x,y,z,vx,vy,vz from odom")
    mission.add_argument("--summary", metavar="JSON", help="mission summary")
    mission.add_argument("--plot", metavar="PNG", help="flight plot (matplotlib)")
    mission.add_argument("--record", metavar="MCAP", help="record the topics to an MCAP file")
    return p


def _prepare(args) -> Optional[str]:
    """Fill in defaults; returns an error message or None."""
    if args.use_sim_time is None:
        args.use_sim_time = USE_SIM_TIME[args.profile]
    args.params = Path(args.params) if args.params else default_params_file(args.profile)
    if not args.params.is_file():
        return f"parameter file {str(args.params)!r} does not exist"
    args.world_bounds, args.world_obj = None, None
    if args.profile != "hardware":
        from planner_pkg.nodes.sim_bridge import DEFAULT_WORLD, find_world
        from planner_pkg.world import WorldFormatError, load_world

        world = args.world or world_from_params(args.params) or DEFAULT_WORLD
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
    for spec in specs:
        if importlib.util.find_spec(spec.module) is None:
            return (f"node '{spec.name}' ({spec.module}) is not installed in this version of planner_pkg; "
                    f"the '{args.profile}' profile needs it")
    args.specs = specs
    if args.goal is not None and args.world_obj is None:
        return "--goal needs a simulated profile (sim or gazebo) with a world file"
    return None


def _run_single_process(args, stop: threading.Event) -> int:
    """All nodes in this process, each on its own single-threaded executor and thread.

    Not one MultiThreadedExecutor for all: rclpy's starves timers and subscriptions when
    several busy nodes share it (ros2/rclpy#1223; a 100 Hz timer ran at 2-3 Hz here)."""
    import rclpy
    import yaml
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

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
                overrides.append(Parameter(name, value=yaml.safe_load(value)))
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
    from planner_pkg.cli import _join_negative_coordinates

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
                from planner_pkg.sim.params import QuadrotorParams

                mission = Mission(args.world_obj, args.goal, args.goal_tolerance, args.timeout,
                                  QuadrotorParams().collision_radius_m, args.namespace)
                mission.wait_for_recorder = bool(args.record)
            while not stop.is_set():
                sup.poll()
                if sup.failed is not None:
                    code = sup.failed
                    break
                if mission is not None:
                    mission.send_goal()
                    if mission.done.is_set():
                        break
                if args.duration and time.monotonic() - t_start >= args.duration:
                    break
                stop.wait(0.1)
        finally:
            sup.stop()
            if mission is not None:
                code = _write_mission(args, mission) if code == EXIT_OK else code
                mission.close()
        return code
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _write_mission(args, mission: Mission) -> int:
    summary = mission.summary(args.planner or "(params file)", Path(args.world).name)
    if args.summary:
        Path(args.summary).parent.mkdir(parents=True, exist_ok=True)
        summary.write_json(args.summary)
    if args.log:
        Path(args.log).parent.mkdir(parents=True, exist_ok=True)
        mission.log.write_csv(args.log)
    if args.plot:
        from planner_pkg.sim.plot import PlottingUnavailableError, plot_flight

        try:
            plot_flight(args.plot, args.world_obj, mission.log, summary,
                        title=f"bringup {args.profile}: {Path(args.world).name}")
        except PlottingUnavailableError as exc:
            print(f"[bringup] no plot: {exc}", file=sys.stderr)
    print(json.dumps(summary.to_dict(), allow_nan=False), flush=True)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
