"""End to end over real DDS (issue 6, must-show 1): ``python -m planner_pkg bringup sim`` starts the
graph as processes, a goal goes out on ``goal_pose``, the drone reaches it without collision -
checked here from ``odom`` against the world file - and everything stops with no orphan left.
Also: a crashed node is restarted, a node refusing its configuration stops the graph (exit 2).
Lockstep (sim_bridge ``lockstep``): EGO flies a forest at 3x real time as at 1x, the simulator
waits for its participants (a silent one is a fault, never a free run), and the same flight under
a CPU hog is the same to the last digit."""
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from nodes_ros_harness import kill_leftovers, pid_alive, started_pids, wait_for
from nav_msgs.msg import Odometry

from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.sim.params import QuadrotorParams
from planner_pkg.world import load_world

ROOT = Path(__file__).resolve().parents[3]
# the graph tests fly EGO through the shipped forest; OPEN_WORLD is for the simulator-only tests
OPEN_WORLD = """
bounds: {min: [-15.0, -6.0, 0.0], max: [15.0, 6.0, 5.0]}
obstacles:
- {type: cylinder, center: [-6.0, 3.0], radius: 0.4, height: 4.0}
- {type: box, center: [-3.0, -3.0, 1.0], size: [1.0, 1.0, 2.0], yaw: 0.3}
"""
START, GOAL = (-12.0, 0.0, 1.0), (0.0, 0.0, 1.0)
RTF = "1.0"  # real time here; the lockstep test below flies at 3x


def _world_args(tmp_path):
    return ROOT / "config" / "worlds" / "forest_small.yaml", ["--planner", "ego"]


def _bringup(args, log_path, rtf=RTF):
    # a generous grace before bringup escalates to SIGTERM/SIGKILL (as test_nodes_shutdown.py): on a
    # loaded 2-core machine a node's clean teardown (rclpy, DDS, the interpreter) took over 5 s (a
    # traj_server SIGKILLed beside a benchmark); what is tested is that it ends cleanly, not how fast
    cmd = [sys.executable, "-m", "planner_pkg", "bringup", "sim", "--real-time-factor", rtf,
           "--start", ",".join(map(str, START)), "--log-level", "warn", "--stop-timeout", "30"] + args
    fh = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    fh.close()
    return proc


def _pids(log_path):
    return started_pids(Path(log_path).read_text())


_alive = pid_alive


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
        kill_leftovers(proc, log)


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
        kill_leftovers(proc, log)


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
        kill_leftovers(proc, log)


def test_bringup_single_process_runs_the_same_graph(ros, tmp_path):
    world_path, _ = _world_args(tmp_path)
    check = OdomCheck(ros, load_world(world_path), GOAL)
    log = tmp_path / "bringup.log"
    # --duration is wall time: 10 s, as a loaded machine publishes odometry at 12 Hz instead of 50
    proc = _bringup(["--world", str(world_path), "--planner", "direct", "--single-process", "--duration", "10"], log)
    try:
        assert proc.wait(timeout=90) == 0, log.read_text()
        assert check.samples > 50 and check.min_clearance > 0
        text = log.read_text()
        assert all(f"[{name}]" in text for name in ("sim_bridge", "planner", "traj_server"))
    finally:
        kill_leftovers(proc, log)


def test_bringup_flies_ego_through_a_forest_at_3x_in_lockstep(tmp_path):
    """Lockstep: sim time waits for every planning tick, so EGO flies at 3x as it does at 1x (no
    wall-clock performance assert: only the outcome, checked from odom against the world file)."""
    world_path = ROOT / "config" / "worlds" / "forest_small.yaml"
    world = load_world(world_path)
    log = tmp_path / "bringup.log"
    summary, flight = tmp_path / "summary.json", tmp_path / "flight.csv"
    proc = _bringup(["--world", str(world_path), "--planner", "ego", "--goal", ",".join(map(str, GOAL)),
                     "--timeout", "40", "--summary", str(summary), "--log", str(flight), "--log-level", "info"],
                    log, rtf="3.0")
    try:
        code = proc.wait(timeout=150)
        output = log.read_text()
        assert code == 0, output
        # judged here from the odometry the bringup logged (every sample from start to end; this
        # test's own subscriber may join late in so short a flight)
        data = np.loadtxt(flight, delimiter=",", skiprows=1)
        assert data.shape[0] > 100, "no odometry logged"
        radius = QuadrotorParams().collision_radius_m
        clearance = min(float(world.signed_distance(p)) - radius for p in data[:, 1:4])
        assert np.linalg.norm(data[-1, 1:4] - np.asarray(GOAL)) <= 0.5, f"not reached; {output[-2000:]}"
        assert clearance >= 0.0, f"collision: clearance {clearance:.3f} m (from odom)"
        max_vel, speed = 2.0, float(np.linalg.norm(data[:, 4:7], axis=1).max())  # ego.max_vel_mps (sim.yaml)
        assert speed <= max_vel * 1.25, f"speed {speed:.2f} m/s over the {max_vel} m/s limit"
        # the simulator was paced by the planner, and never had to give up waiting for it
        assert "lockstep: planner reports" in output and "lockstep: traj_server reports" in output, output[-3000:]
        assert "lockstep fault" not in output, output[-3000:]
        import json

        result = json.loads(summary.read_text())
        assert result["reached"] and not result["collided"]
        assert not [p for _, p in _pids(log) if _alive(p)], "orphaned node processes"
    finally:
        kill_leftovers(proc, log)


def test_lockstep_simulator_waits_for_its_participants_and_a_silent_one_is_a_fault(ros, tmp_path):
    """The simulator does not start before its listed participant reported, stops at the sim time
    of the participant's next tick, waits for the setpoints it was told of, and, when the
    participant goes silent for lockstep_fault_timeout_s, reports a lockstep fault and stays
    stopped (no free-running fallback: that would be another flight)."""
    import time

    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.parameter import Parameter
    from rosgraph_msgs.msg import Clock as ClockMsg

    from planner_pkg.nodes import lockstep as ls
    from planner_pkg.nodes.sim_bridge import SimBridge
    from planner_pkg.sim.lockstep import ParticipantReport
    from planner_pkg.types import Setpoint

    world_path = tmp_path / "open.yaml"
    world_path.write_text(OPEN_WORLD)
    bridge = ros.add(SimBridge(context=ros.context, parameter_overrides=[
        Parameter("world_file", value=str(world_path)), Parameter("start_m", value=list(START)),
        Parameter("real_time_factor", value=5.0), Parameter("lockstep_participants", value=["fake_planner"]),
        Parameter("lockstep_fault_timeout_s", value=2.0), Parameter("publish_depth", value=False),
        Parameter("status_rate_hz", value=10.0)]))
    probe = ros.node("fake_planner")
    seen = {"clock": -1.0, "manifest": None, "status": {}}
    probe.create_subscription(ClockMsg, c.TOPIC_CLOCK, lambda m: seen.update(clock=conv.stamp_to_seconds(m.clock)),
                              c.CLOCK_QOS)
    probe.create_subscription(DiagnosticStatus, ls.TOPIC_MANIFEST,
                              lambda m: seen.update(manifest=ls.manifest_from_msg(m)), ls.LOCKSTEP_SUB_QOS)
    probe.create_subscription(DiagnosticArray, c.TOPIC_STATUS,
                              lambda m: seen.update(status=conv.status_values(m)), c.STATUS_QOS)
    pub_report = probe.create_publisher(DiagnosticStatus, ls.TOPIC_REPORT, ls.LOCKSTEP_QOS)
    from trajectory_msgs.msg import MultiDOFJointTrajectory

    pub_setpoint = probe.create_publisher(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, c.SETPOINT_QOS)
    seq = {"n": 0}

    def report(next_s, setpoints):
        seq["n"] += 1
        r = ParticipantReport(name="fake_planner", next_ns=int(round(next_s * 1e9)), setpoints=setpoints, seq=seq["n"])
        pub_report.publish(ls.to_msg("fake_planner", r))

    def sim_t():
        return bridge.sim.t

    # nobody reported: sim time does not start (the clock stands at 0)
    assert wait_for(lambda: pub_report.get_subscription_count() > 0 and seen["manifest"] is not None, 15.0)
    time.sleep(0.5)
    assert sim_t() == 0.0 and bridge._lockstep_state().startswith("waiting for start"), bridge._lockstep_state()
    # a report: it runs to that sim time and waits there
    report(1.0, setpoints=0)
    assert wait_for(lambda: sim_t() >= 1.0 - 1e-9, 10.0), sim_t()
    time.sleep(0.4)
    assert abs(sim_t() - 1.0) < 1e-9, sim_t()
    assert wait_for(lambda: abs(seen["clock"] - 1.0) < 1e-9 and seen["manifest"].t_ns == 1_000_000_000, 5.0)
    assert seen["manifest"].odom_ns == 1_000_000_000  # the odometry of the instant is named
    assert bridge._lockstep_state() == "waiting for fake_planner (next tick 1.000 s)"
    # told of a setpoint that has not arrived: no advance, whatever the next tick
    report(1.3, setpoints=1)
    time.sleep(0.5)
    assert abs(sim_t() - 1.0) < 1e-9 and "setpoint" in bridge._lockstep_state(), bridge._lockstep_state()
    pub_setpoint.publish(conv.setpoint_to_msg(Setpoint.hold(np.asarray(START), 0.0), 1.0, "map"))
    assert wait_for(lambda: sim_t() >= 1.3 - 1e-9, 10.0), (sim_t(), bridge._lockstep_state())
    time.sleep(0.3)
    assert abs(sim_t() - 1.3) < 1e-9
    assert bridge.counters["lockstep_faults"] == 0
    # silent for lockstep_fault_timeout_s (2 s wall): a fault, logged and in status, and it stays stopped
    assert wait_for(lambda: bridge.counters["lockstep_faults"] == 1, 10.0)
    assert wait_for(lambda: "lockstep_fault" in seen["status"], 5.0), seen["status"]
    assert "fake_planner" in seen["status"]["lockstep_fault"] and seen["status"]["level"] == 2
    report(1.6, setpoints=1)
    time.sleep(0.5)
    assert abs(sim_t() - 1.3) < 1e-9 and bridge._lockstep_state() == "fault"


def test_embedded_sim_steps_to_a_time_and_follows_setpoints_forward():
    from planner_pkg.sim.embedded import EmbeddedSim
    from planner_pkg.types import Setpoint

    world_path = ROOT / "config" / "worlds" / "forest_small.yaml"
    sim = EmbeddedSim(load_world(world_path), START, setpoint_extrapolation_s=0.05)
    n = sim.steps_until(0.1)
    assert n == 50 and sim.steps_until(0.1 - 1e-12) == 50 and sim.steps_until(0.1009) == 51
    sim.advance_steps(n)
    assert sim.t == pytest.approx(0.1, abs=1e-9) and sim.steps_until(0.05) == 0
    p0 = np.array(START)
    sp = Setpoint(p0, np.array([1.0, 0.0, 0.0]), np.zeros(3), yaw=0.0)
    sim.set_setpoint(sp, stamp=0.09)  # describes 10 ms ago
    ref = sim._reference_at(sim.t)
    np.testing.assert_allclose(ref.position, p0 + [0.01, 0.0, 0.0], atol=1e-12)
    ref = sim._reference_at(sim.t + 1.0)  # never more than setpoint_extrapolation_s after the stamp
    np.testing.assert_allclose(ref.position, p0 + [0.05, 0.0, 0.0], atol=1e-12)
    sim.set_setpoint(sp, stamp=0.0)  # a stamp from another clock counts as now
    np.testing.assert_allclose(sim._reference_at(sim.t).position, p0)
    sim.hold()
    assert sim._reference_at(sim.t + 0.02) is sim.reference  # holds are never moved


def test_the_same_lockstep_flight_with_and_without_a_cpu_hog_is_the_same_flight(tmp_path):
    """Issue 13: in lockstep the planner paces the simulator, so load cannot change the flight. EGO
    flies the forest as fast as possible twice, the second time with a busy loop competing for the
    CPU; sim time starts with the goal (bringup --goal), so the two odometry logs must agree sample
    for sample (same sim times, positions equal to 1e-6)."""
    world_path, planner = _world_args(tmp_path)
    logs = []
    for hog in (False, True):
        run = tmp_path / ("hog" if hog else "quiet")
        run.mkdir()
        log, flight = run / "bringup.log", run / "flight.csv"
        hog_proc = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if hog else None
        proc = _bringup(["--world", str(world_path)] + planner + ["--goal", ",".join(map(str, GOAL)), "--timeout", "30",
                                                                  "--log", str(flight)], log, rtf="0")
        try:
            assert proc.wait(timeout=240) == 0, log.read_text()[-3000:]
        finally:
            kill_leftovers(proc, log)
            if hog_proc is not None:
                hog_proc.kill()
                hog_proc.wait()
        data = np.loadtxt(flight, delimiter=",", skiprows=1)
        assert data.shape[0] > 100, "no odometry logged"
        logs.append({round(float(row[0]), 6): row[1:4] for row in data})  # sim time -> position
    quiet, loaded = logs
    common = sorted(set(quiet) & set(loaded))
    # both ran to the goal: nearly every sample time is in both logs (the mission's end can cut one short)
    assert len(common) >= 0.95 * min(len(quiet), len(loaded)), (len(common), len(quiet), len(loaded))
    diff = max(float(np.abs(quiet[t] - loaded[t]).max()) for t in common)
    # the one known source of a difference: an EGO wall-clock safety net that fired (logged)
    nets = [line for name in ("quiet", "hog") for line in (tmp_path / name / "bringup.log").read_text().splitlines()
            if "safety nets fired" in line]
    assert diff <= 1e-6, f"the flight under load differs by {diff:.3e} m; safety nets: {nets}"
    print(f"\nlockstep flight with and without a CPU hog: {len(common)} common samples over "
          f"{common[-1]:.2f} s of sim time, max position difference {diff:.1e} m")


def test_two_graphs_planners_on_one_domain_are_a_lockstep_fault_not_a_wrong_flight(ros, tmp_path):
    """Two nodes named ``planner`` on one ROS domain (another graph without a namespace): their
    reports alternate, which would pace this simulator with the wrong node; it is a fault instead."""
    from diagnostic_msgs.msg import DiagnosticStatus
    from rclpy.parameter import Parameter

    from planner_pkg.nodes import lockstep as ls
    from planner_pkg.nodes.sim_bridge import SimBridge
    from planner_pkg.sim.lockstep import ParticipantReport

    world_path = tmp_path / "open.yaml"
    world_path.write_text(OPEN_WORLD)
    bridge = ros.add(SimBridge(context=ros.context, parameter_overrides=[
        Parameter("world_file", value=str(world_path)), Parameter("start_m", value=list(START)),
        Parameter("lockstep_participants", value=["planner"]), Parameter("publish_depth", value=False)]))
    pubs = [ros.node(f"graph{i}").create_publisher(DiagnosticStatus, ls.TOPIC_REPORT, ls.LOCKSTEP_QOS) for i in (1, 2)]
    assert wait_for(lambda: all(p.get_subscription_count() > 0 for p in pubs), 15.0)
    for seq in range(1, 8):
        for k, pub in enumerate(pubs):
            r = ParticipantReport(name="planner", next_ns=(seq + 10 * k) * 100_000_000, seq=seq)
            pub.publish(ls.to_msg("planner", r))
            assert wait_for(lambda: bridge.lockstep.reports.get("planner") is not None
                            and bridge.lockstep.reports["planner"].next_ns == r.next_ns, 5.0)
    assert wait_for(lambda: bridge.counters["lockstep_faults"] == 1, 5.0)
    assert "two nodes named 'planner'" in bridge.lockstep.fault
