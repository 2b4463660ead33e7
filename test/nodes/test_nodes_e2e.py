"""End to end over real DDS (issue 6, must-show 1): ``python -m planner_pkg bringup sim`` starts the
graph as processes, a goal goes out on ``goal_pose``, the drone reaches it without collision -
checked here from ``odom`` against the world file - and everything stops with no orphan left.
Also: a crashed node is restarted, a node refusing its configuration stops the graph (exit 2)."""
import importlib.util
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
from nodes_ros_harness import wait_for
from nav_msgs.msg import Odometry

from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.sim.params import QuadrotorParams
from planner_pkg.world import load_world

ROOT = Path(__file__).resolve().parents[2]
HAVE_EGO = importlib.util.find_spec("planner_pkg.planning.ego_planner") is not None
# EGO flies the shipped forest; without it the straight-line baseline flies an open world.
OPEN_WORLD = """
bounds: {min: [-15.0, -6.0, 0.0], max: [15.0, 6.0, 5.0]}
obstacles:
- {type: cylinder, center: [-6.0, 3.0], radius: 0.4, height: 4.0}
- {type: box, center: [-3.0, -3.0, 1.0], size: [1.0, 1.0, 2.0], yaw: 0.3}
"""
START, GOAL = (-12.0, 0.0, 1.0), (0.0, 0.0, 1.0)
RTF = "1.0"  # real time: EGO budgets its optimiser in wall time, and the test shares 2 cores


def _world_args(tmp_path):
    if HAVE_EGO:
        return ROOT / "config" / "worlds" / "forest_small.yaml", ["--planner", "ego"]
    path = tmp_path / "open.yaml"
    path.write_text(OPEN_WORLD)
    return path, ["--planner", "direct"]


def _bringup(args, log_path):
    cmd = [sys.executable, "-m", "planner_pkg", "bringup", "sim", "--real-time-factor", RTF,
           "--start", ",".join(map(str, START)), "--log-level", "warn"] + args
    fh = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    fh.close()
    return proc


def _pids(log_path):
    return [(m.group(1), int(m.group(2))) for m in
            re.finditer(r"started (\w+) \(pid (\d+)\)", Path(log_path).read_text())]


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _cleanup(proc, log_path):
    """Last resort for a failed test: nothing may outlive it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    for _, pid in _pids(log_path):
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)


class OdomCheck:
    """Subscribes odom and checks every sample against the world file: clearance and goal."""

    def __init__(self, ros, world, goal, tolerance_m=0.5):
        self.world, self.goal, self.tol = world, np.asarray(goal), tolerance_m
        self.radius = QuadrotorParams().collision_radius_m
        self.samples, self.min_clearance, self.reached = 0, math.inf, False
        node = ros.node("odom_check")
        node.create_subscription(Odometry, c.TOPIC_ODOM, self._on_odom, c.ODOM_QOS)

    def _on_odom(self, msg):
        p = conv.odometry_to_state(msg).position
        self.samples += 1
        self.min_clearance = min(self.min_clearance, float(self.world.signed_distance(p)) - self.radius)
        if np.linalg.norm(p - self.goal) <= self.tol:
            self.reached = True


def test_bringup_flies_a_goal_over_dds_and_stops_cleanly(ros, tmp_path):
    world_path, extra = _world_args(tmp_path)
    world = load_world(world_path)
    check = OdomCheck(ros, world, GOAL)
    log = tmp_path / "bringup.log"
    summary, flight = tmp_path / "summary.json", tmp_path / "flight.csv"
    proc = _bringup(["--world", str(world_path), "--goal", ",".join(map(str, GOAL)), "--timeout", "40",
                     "--summary", str(summary), "--log", str(flight)] + extra, log)
    try:
        code = proc.wait(timeout=120)
        output = log.read_text()
        assert code == 0, output
        assert check.samples > 100, "the test saw no odometry over DDS"
        assert check.reached, f"not reached; {output[-2000:]}"
        assert check.min_clearance >= 0.0, f"collision: clearance {check.min_clearance:.3f} m (from odom)"
        import json

        result = json.loads(summary.read_text())
        assert result["reached"] and not result["collided"] and result["reason"] == "goal_reached"
        assert flight.read_text().splitlines()[0] == "t,x,y,z,vx,vy,vz"
        pids = _pids(log)
        assert {name for name, _ in pids} == {"sim_bridge", "planner", "traj_server"}
        assert not [p for _, p in pids if _alive(p)], "orphaned node processes"
        assert output.count("stopped (exit 0)") == 3, output
    finally:
        _cleanup(proc, log)


def test_bringup_restarts_a_crashed_node_and_stops_on_sigterm(ros, tmp_path):
    world_path, extra = _world_args(tmp_path)
    check = OdomCheck(ros, load_world(world_path), GOAL)
    log = tmp_path / "bringup.log"
    proc = _bringup(["--world", str(world_path)] + extra, log)
    try:
        assert wait_for(lambda: len(_pids(log)) == 3 and check.samples > 10, 30.0), log.read_text()
        planner_pid = dict(_pids(log))["planner"]
        os.kill(planner_pid, signal.SIGKILL)
        assert wait_for(lambda: "planner died (signal 9); restarting" in log.read_text(), 10.0), log.read_text()
        assert wait_for(lambda: len(_pids(log)) == 4, 10.0)
        new_pid = _pids(log)[-1][1]
        assert new_pid != planner_pid and _alive(new_pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert not [p for _, p in _pids(log) if _alive(p)], "orphaned node processes"
    finally:
        _cleanup(proc, log)


def test_bringup_stops_when_a_node_refuses_its_configuration(tmp_path):
    world_path = tmp_path / "w.yaml"
    world_path.write_text(OPEN_WORLD)
    log = tmp_path / "bringup.log"
    # the start lies inside the cylinder: sim_bridge refuses start_m (exit 2) and is not restarted
    proc = _bringup(["--world", str(world_path), "--planner", "direct", "--start", "-6.0,3.0,1.0"], log)
    try:
        assert proc.wait(timeout=60) == 2
        text = log.read_text()
        assert "start_m" in text and "refused its configuration" in text
        assert not [p for _, p in _pids(log) if _alive(p)]
    finally:
        _cleanup(proc, log)


def test_bringup_single_process_runs_the_same_graph(ros, tmp_path):
    world_path, _ = _world_args(tmp_path)
    check = OdomCheck(ros, load_world(world_path), GOAL)
    log = tmp_path / "bringup.log"
    proc = _bringup(["--world", str(world_path), "--planner", "direct", "--single-process", "--duration", "4"], log)
    try:
        assert proc.wait(timeout=60) == 0, log.read_text()
        assert check.samples > 50 and check.min_clearance > 0
        text = log.read_text()
        assert all(f"[{name}]" in text for name in ("sim_bridge", "planner", "traj_server"))
    finally:
        _cleanup(proc, log)
