"""EGO-Swarm over ROS 2 (issue 17 item 4): the broadcast encoding, malformed and own-id broadcasts,
the swarm simulator's physics, the bringup's checks, and 4 drones crossing over real DDS in
lockstep (docs/swarm.md, "Over ROS 2")."""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from nodes_ros_harness import kill_leftovers, wait_for
from trajectory_msgs.msg import MultiDOFJointTrajectory

from planner_pkg.nodes import conversions as conv
from planner_pkg.planning.bspline import UniformBSpline
from planner_pkg.planning.swarm import SwarmTrajectoryTable
from planner_pkg.sim.params import QuadrotorParams
from planner_pkg.types import Setpoint
from planner_pkg.world import load_world

ROOT = Path(__file__).resolve().parents[3]
# sparse: three thin poles off the straight lines, so the drones mostly have each other to avoid
SPARSE_WORLD = """
bounds: {min: [-7.0, -7.0, 0.0], max: [7.0, 7.0, 4.0]}
obstacles:
- {type: cylinder, center: [0.0, 2.5], radius: 0.3, height: 4.0}
- {type: cylinder, center: [-2.0, -2.5], radius: 0.3, height: 4.0}
- {type: cylinder, center: [2.5, -1.0], radius: 0.3, height: 4.0}
"""
# a 4-drone swap on a circle of radius 4 m: every straight line goes through the centre at once
STARTS = [[-4.0, 0.0, 1.0], [4.0, 0.0, 1.0], [0.0, -4.0, 1.0], [0.0, 4.0, 1.0]]
GOALS = [[4.0, 0.0, 1.0], [-4.0, 0.0, 1.0], [0.0, 4.0, 1.0], [0.0, -4.0, 1.0]]
MIN_SEPARATION_M = 0.4


def _spline(seed=0, n=9, dt=0.24):
    rng = np.random.default_rng(seed)
    return UniformBSpline(np.cumsum(rng.normal(0.0, 0.3, (n, 3)), axis=0) + [1.0, 2.0, 1.5], dt)


# ---------------------------------------------------------------------------------------------
# the encoding (no DDS)
# ---------------------------------------------------------------------------------------------
def test_broadcast_round_trip_keeps_the_spline_the_start_time_and_the_id():
    spline = _spline()
    # a spline that started 0.7 s before it was sent (a re-broadcast): the first offsets are negative
    msg = conv.swarm_broadcast_to_msg(3, spline.control_points, spline.dt, 12.345678901, 13.045678901)
    assert msg.joint_names == ["drone3"] and msg.header.frame_id == "map"
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (13, 45678901)
    assert conv.duration_to_seconds(msg.points[0].time_from_start) == pytest.approx(-0.7, abs=1e-9)
    drone_id, q, dt, t_start, sent = conv.msg_to_swarm_broadcast(msg)
    assert drone_id == 3
    np.testing.assert_array_equal(q, spline.control_points)
    assert dt == pytest.approx(spline.dt, abs=1e-9)
    assert t_start == pytest.approx(12.345678901, abs=1e-9) and sent == pytest.approx(13.045678901, abs=1e-9)
    # the receiver's table predicts the sender where the sender's own spline says it is
    table = SwarmTrajectoryTable()
    assert table.update(drone_id, q, dt, t_start, received_t=t_start)
    ts = t_start + np.linspace(0.0, spline.duration, 17)
    np.testing.assert_allclose(table.get(3).positions(ts), spline.evaluate(ts - t_start), atol=1e-6)


def _bad_messages():
    spline = _spline()

    def good():
        return conv.swarm_broadcast_to_msg(1, spline.control_points, spline.dt, 2.0)

    cases = []
    m = good(); m.joint_names = []; cases.append(("no id", m))  # noqa: E702
    m = good(); m.joint_names = ["base_link"]; cases.append(("not a drone id", m))  # noqa: E702
    m = good(); m.joint_names = ["drone-1"]; cases.append(("negative id", m))  # noqa: E702
    m = good(); m.header.frame_id = "odom"; cases.append(("other frame", m))  # noqa: E702
    m = good(); m.points = m.points[:3]; cases.append(("3 points", m))  # noqa: E702
    m = good(); m.points[4].transforms[0].translation.y = math.nan; cases.append(("NaN", m))  # noqa: E702
    m = good(); m.points[2].transforms[0].translation.x = 1e30; cases.append(("outside the envelope", m))  # noqa: E702
    m = good(); m.points[3].transforms = []; cases.append(("no transform", m))  # noqa: E702
    m = good(); m.points[5].time_from_start = conv.seconds_to_duration(9.0); cases.append(("not uniform", m))  # noqa
    m = good()
    for p in m.points:
        p.time_from_start = conv.seconds_to_duration(conv.duration_to_seconds(p.time_from_start) - 1e9)
    cases.append(("start outside the envelope", m))
    m = good()
    for p in m.points:
        p.time_from_start = conv.seconds_to_duration(0.0)
    cases.append(("zero knot interval", m))
    m = MultiDOFJointTrajectory(); m.joint_names = ["drone1"]; cases.append(("empty", m))  # noqa: E702
    return cases


@pytest.mark.parametrize("what,msg", _bad_messages(), ids=[c[0] for c in _bad_messages()])
def test_malformed_broadcasts_are_refused_with_a_reason(what, msg):
    with pytest.raises(ValueError, match="swarm broadcast"):
        conv.msg_to_swarm_broadcast(msg)


# ---------------------------------------------------------------------------------------------
# the planner node on the topic (DDS)
# ---------------------------------------------------------------------------------------------
def test_planner_takes_peers_broadcasts_and_ignores_malformed_and_own_id_ones(ros):
    from rclpy.parameter import Parameter

    from planner_pkg.nodes.planner_node import PlannerNode
    from planner_pkg.nodes.swarm_link import SWARM_QOS, SWARM_TOPIC

    # on sim time with no clock running: no tick runs, so the test decides when broadcasts are taken
    planner = ros.add(PlannerNode(context=ros.context, namespace="/drone1",
                                  parameter_overrides=[Parameter("swarm_drone_id", value=1),
                                                       Parameter("use_sim_time", value=True)]))
    probe = ros.node("probe")
    pub = probe.create_publisher(MultiDOFJointTrajectory, SWARM_TOPIC, SWARM_QOS)
    assert wait_for(lambda: pub.get_subscription_count() >= 1, 20.0)
    link = planner.swarm
    assert link is not None and link.topic == SWARM_TOPIC
    spline = _spline()
    bad = _bad_messages()[5][1]  # a NaN control point
    pub.publish(bad)
    pub.publish(conv.swarm_broadcast_to_msg(1, spline.control_points, spline.dt, 1.0))  # "my" id from elsewhere
    pub.publish(conv.swarm_broadcast_to_msg(0, spline.control_points, spline.dt, 0.5, 1.0))  # sent at 1.0 s
    pub.publish(conv.swarm_broadcast_to_msg(7, spline.control_points + 1.0, spline.dt, 1.5, 1.5))  # sent at 1.5 s
    assert wait_for(lambda: len(link._pending) >= 2 and link.refused >= 1 and link.duplicate_id >= 1, 20.0), \
        (len(link._pending), link.refused, link.duplicate_id)
    # taken at the first tick after they were sent, not on arrival nor at a tick of their send time
    assert link.table.ids() == [] and link.take_pending(1_000_000_000) == 0
    assert link.take_pending(1_000_000_001) == 1 and link.table.ids() == [0]
    assert link.take_pending(1_600_000_000) == 1 and link.table.ids() == [0, 7] and link.received == 2
    assert link.table.get(7).received_t == pytest.approx(1.6)  # received at the tick's time
    np.testing.assert_array_equal(link.table.get(7).spline.control_points, spline.control_points + 1.0)
    # its own broadcasts come back on the topic too: skipped without counting them as a duplicate
    link.publish(1, spline, 2.0, 2.0)
    assert wait_for(lambda: link.sent >= 1 and link._own_gids, 20.0)
    assert link.duplicate_id == 1 and link.table.ids() == [0, 7]


def test_a_swarm_planners_tick_waits_for_its_peers_reported_broadcasts(ros):
    """In lockstep a drone's tick at T runs only once its peer has reported (over DDS, on the
    peer's /drone<j>/planning/lockstep), has run its ticks before T and every broadcast it reported
    sent has arrived on the broadcast topic: a broadcast in transit is waited for, not missed."""
    from diagnostic_msgs.msg import DiagnosticStatus
    from rclpy.parameter import Parameter
    from rosgraph_msgs.msg import Clock as ClockMsg

    from planner_pkg.nodes import common as c
    from planner_pkg.nodes import lockstep as ls
    from planner_pkg.nodes.planner_node import PlannerNode
    from planner_pkg.nodes.swarm_link import SWARM_QOS, SWARM_TOPIC
    from planner_pkg.sim.lockstep import ParticipantReport, StepManifest

    planner = ros.add(PlannerNode(context=ros.context, namespace="/drone1", parameter_overrides=[
        Parameter("swarm_drone_id", value=1), Parameter("swarm_peers", value=[0]),
        Parameter("use_sim_time", value=True)]))
    assert planner.lockstep.active and planner.lockstep.peers is not None
    probe = ros.node("peer_probe")
    clock = probe.create_publisher(ClockMsg, c.TOPIC_CLOCK, c.CLOCK_QOS)
    manifest = probe.create_publisher(DiagnosticStatus, "/drone1/" + ls.TOPIC_MANIFEST, ls.LOCKSTEP_QOS)
    peer_report = probe.create_publisher(DiagnosticStatus, "/drone0/" + ls.TOPIC_REPORT, ls.LOCKSTEP_QOS)
    bus = probe.create_publisher(MultiDOFJointTrajectory, SWARM_TOPIC, SWARM_QOS)
    assert wait_for(lambda: min(p.get_subscription_count() for p in (manifest, peer_report, bus)) >= 1, 20.0)
    t_ns = 100_000_000  # the planner's first tick (10 Hz from sim time 0)
    manifest.publish(ls.to_msg("sim_bridge", StepManifest(t_ns=t_ns)))
    msg = ClockMsg()
    msg.clock = conv.seconds_to_stamp(t_ns * 1e-9)
    clock.publish(msg)
    assert wait_for(lambda: "drone 0's first lockstep report" in planner.lockstep.waiting, 20.0), \
        planner.lockstep.waiting
    # the peer ran its tick at 0.05 s and broadcast once; its next tick is at 0.15 s
    peer_report.publish(ls.to_msg("planner", ParticipantReport(name="planner", next_ns=150_000_000, trajectories=0,
                                                               goals=0, seq=2, broadcasts=1)))
    assert wait_for(lambda: "1 broadcast(s) of drone 0" in planner.lockstep.waiting, 20.0), planner.lockstep.waiting
    assert planner.lockstep.ticks == 0
    spline = _spline()
    bus.publish(conv.swarm_broadcast_to_msg(0, spline.control_points, spline.dt, 0.05, 0.05))
    assert wait_for(lambda: planner.lockstep.ticks == 1 and planner.lockstep.waiting == "", 20.0), \
        (planner.lockstep.ticks, planner.lockstep.waiting)
    assert planner.swarm.table.ids() == [0]  # sent before the tick: used by it


# ---------------------------------------------------------------------------------------------
# the swarm simulator's physics (no DDS)
# ---------------------------------------------------------------------------------------------
def test_swarm_stepper_cameras_see_the_others_and_contacts_freeze_both(tmp_path):
    from planner_pkg.sim.swarm_embedded import SwarmStepper

    (tmp_path / "w.yaml").write_text(SPARSE_WORLD)
    world = load_world(tmp_path / "w.yaml")
    st = SwarmStepper(world, [[-5.0, -5.0, 1.0], [-3.0, -5.0, 1.0], [5.0, 5.0, 1.0]], [0.0, math.pi, 0.0],
                      camera_rate_hz=30.0)
    solo = SwarmStepper(world, [[-5.0, -5.0, 1.0]], [0.0], camera_rate_hz=30.0)
    out, alone = st.advance_steps(50), solo.advance_steps(50)
    r = st.radius_m
    # drone 0 looks along +x at drone 1, 2 m away: the centre of its depth image is on the ball,
    # 2 m - r ahead (less the camera's forward offset); alone in the world, nothing is there
    d0, d_alone = out[0].frames[-1].depth, alone[0].frames[-1].depth
    h, w = d0.shape
    assert 2.0 - r - 0.3 < d0[h // 2, w // 2] < 2.0 - r + 0.01
    assert not d_alone[h // 2, w // 2] < 3.0
    # fly 0 and 1 into each other: a contact, both frozen, the third flies on
    st.sims[0].set_setpoint(Setpoint.hold(np.array([-3.0, -5.0, 1.0]), 0.0))
    st.sims[1].set_setpoint(Setpoint.hold(np.array([-5.0, -5.0, 1.0]), math.pi))
    st.advance_steps(2500)
    assert len(st.contacts) == 1 and st.contacts[0][1:3] == (0, 1) and st.contacts[0][3] < 2 * r
    assert st.sims[0].crashed and st.sims[1].crashed and not st.sims[2].crashed
    assert st.drone_collided == [True, True, False]
    assert st.min_separation_m < 2 * r and st.min_separation_pair == (0, 1)
    assert "collision at t=" in st.sims[0].crash_reason and "with drone 1" in st.sims[0].crash_reason
    assert len({s.steps for s in st.sims}) == 1 and st.t == pytest.approx(2550 * st.dt)  # one clock


def test_swarm_sim_config_refuses_starts_that_do_not_match_the_drones():
    from planner_pkg.config_schema import ConfigError
    from planner_pkg.nodes.swarm_sim import SwarmSimConfig

    SwarmSimConfig(drones=1, starts_m=(0.0, 0.0, 1.0), start_yaws_rad=(0.0,))
    with pytest.raises(ConfigError, match="starts_m"):
        SwarmSimConfig(drones=3, starts_m=(0.0, 0.0, 1.0, 1.0, 1.0, 1.0), start_yaws_rad=(0.0, 0.0, 0.0))
    with pytest.raises(ConfigError, match="start_yaws_rad"):
        SwarmSimConfig(drones=2, starts_m=(0.0, 0.0, 1.0, 1.0, 1.0, 1.0), start_yaws_rad=(0.0,))
    with pytest.raises(ConfigError, match="mode"):
        SwarmSimConfig(mode="gazebo")


def test_swarm_simulator_keeps_lockstep_with_every_drones_participants(ros, tmp_path):
    """Sim time starts only once both drones' participants reported, stops at the earliest next
    tick of any drone, each drone's manifest names its own odometry of the instant, and one drone's
    silent participant is a lockstep fault that stops the whole swarm (both statuses say so)."""
    import time

    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.parameter import Parameter

    from planner_pkg.nodes import common as c
    from planner_pkg.nodes import lockstep as ls
    from planner_pkg.nodes.swarm_sim import SwarmSim
    from planner_pkg.sim.lockstep import ParticipantReport

    (tmp_path / "w.yaml").write_text(SPARSE_WORLD)
    sim = ros.add(SwarmSim(context=ros.context, parameter_overrides=[
        Parameter("world_file", value=str(tmp_path / "w.yaml")), Parameter("drones", value=2),
        Parameter("starts_m", value=[-5.0, -5.0, 1.0, 5.0, 5.0, 1.0]), Parameter("start_yaws_rad", value=[0.0, 0.0]),
        Parameter("real_time_factor", value=5.0), Parameter("lockstep_participants", value=["fake_planner"]),
        Parameter("lockstep_fault_timeout_s", value=2.0), Parameter("publish_depth", value=False),
        Parameter("status_rate_hz", value=10.0)]))
    probe = ros.node("fake_planner")
    seen = {"manifest": [None, None], "status": [{}, {}]}
    pubs = []
    for i in range(2):
        probe.create_subscription(DiagnosticStatus, f"/drone{i}/{ls.TOPIC_MANIFEST}",
                                  lambda m, i=i: seen["manifest"].__setitem__(i, ls.manifest_from_msg(m)),
                                  ls.LOCKSTEP_SUB_QOS)
        probe.create_subscription(DiagnosticArray, f"/drone{i}/{c.TOPIC_STATUS}",
                                  lambda m, i=i: seen["status"].__setitem__(i, conv.status_values(m)), c.STATUS_QOS)
        pubs.append(probe.create_publisher(DiagnosticStatus, f"/drone{i}/{ls.TOPIC_REPORT}", ls.LOCKSTEP_QOS))
    seq = {0: 0, 1: 0}

    def report(i, next_s):
        seq[i] += 1
        r = ParticipantReport(name="fake_planner", next_ns=int(round(next_s * 1e9)), seq=seq[i])
        pubs[i].publish(ls.to_msg("fake_planner", r))

    def t():
        return sim.stepper.t

    assert wait_for(lambda: all(p.get_subscription_count() > 0 for p in pubs)
                    and all(m is not None for m in seen["manifest"]), 20.0)
    report(0, 1.0)  # drone 1's participant has not reported: no start
    time.sleep(0.6)
    assert t() == 0.0 and "drone 1" in sim.lockstep_state(), sim.lockstep_state()
    report(1, 0.5)  # both in: up to the earliest next tick
    assert wait_for(lambda: t() >= 0.5 - 1e-9, 10.0), t()
    time.sleep(0.4)
    assert abs(t() - 0.5) < 1e-9
    report(1, 1.2)  # now drone 0's tick at 1.0 holds it
    assert wait_for(lambda: t() >= 1.0 - 1e-9, 10.0), t()
    time.sleep(0.4)
    assert abs(t() - 1.0) < 1e-9 and "drone 0" in sim.lockstep_state(), sim.lockstep_state()
    assert wait_for(lambda: all(m.t_ns == 1_000_000_000 and m.odom_ns == 1_000_000_000
                                for m in seen["manifest"]), 5.0), seen["manifest"]
    # drone 0 silent for lockstep_fault_timeout_s: a fault for the whole swarm
    assert wait_for(lambda: sim.lockstep_faults == 1, 10.0)
    assert wait_for(lambda: all("lockstep_fault" in s for s in seen["status"]), 5.0), seen["status"]
    assert all("drone 0" in s["lockstep_fault"] and s["level"] == 2 for s in seen["status"])
    report(0, 1.5)
    time.sleep(0.5)
    assert abs(t() - 1.0) < 1e-9 and sim.lockstep_state() == "fault"


def test_each_drone_has_its_own_body_frame_in_odometry_depth_and_tf(ros, tmp_path, monkeypatch):
    """A multi-robot tf tree: drone i's odometry child frame and depth image frame are
    drone<i>/base_link and drone<i>/camera_optical, and map -> drone<i>/base_link is broadcast at
    its pose (tf2_ros is not in the PyPI wheels: a stand-in records what would be sent)."""
    import sys
    import types

    from nav_msgs.msg import Odometry
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Image

    from planner_pkg.nodes import common as c
    from planner_pkg.nodes.swarm_sim import SwarmSim

    sent = []

    class Recorder:
        def __init__(self, node):
            self.node = node

        def sendTransform(self, tf):  # noqa: N802 - tf2_ros's name
            sent.append(tf)

    monkeypatch.setitem(sys.modules, "tf2_ros", types.SimpleNamespace(TransformBroadcaster=Recorder))
    (tmp_path / "w.yaml").write_text(SPARSE_WORLD)
    ros.add(SwarmSim(context=ros.context, parameter_overrides=[
        Parameter("world_file", value=str(tmp_path / "w.yaml")), Parameter("drones", value=2),
        Parameter("starts_m", value=[-5.0, -5.0, 1.0, 5.0, 5.0, 1.0]), Parameter("start_yaws_rad", value=[0.0, 0.0]),
        Parameter("real_time_factor", value=5.0), Parameter("lockstep", value=False)]))
    probe = ros.node("frames_probe")
    odom, depth = {}, {}
    for i in range(2):
        probe.create_subscription(Odometry, f"/drone{i}/{c.TOPIC_ODOM}", lambda m, i=i: odom.__setitem__(i, m),
                                  c.ODOM_QOS)
        probe.create_subscription(Image, f"/drone{i}/{c.TOPIC_DEPTH}", lambda m, i=i: depth.__setitem__(i, m),
                                  c.SENSOR_QOS)
    assert wait_for(lambda: len(odom) == 2 and len(depth) == 2
                    and {tf.child_frame_id for tf in sent} >= {"drone0/base_link", "drone1/base_link"}, 30.0), \
        (sorted(odom), sorted(depth), {tf.child_frame_id for tf in sent})
    for i, start in enumerate(([-5.0, -5.0, 1.0], [5.0, 5.0, 1.0])):
        assert (odom[i].header.frame_id, odom[i].child_frame_id) == ("map", f"drone{i}/base_link")
        assert depth[i].header.frame_id == f"drone{i}/camera_optical"
        tf = next(t for t in reversed(sent) if t.child_frame_id == f"drone{i}/base_link")
        p = tf.transform.translation
        assert tf.header.frame_id == "map" and np.allclose([p.x, p.y, p.z], start, atol=0.3), (i, p)


# ---------------------------------------------------------------------------------------------
# the bringup
# ---------------------------------------------------------------------------------------------
def _bringup(argv, log_path):
    cmd = [sys.executable, "-m", "planner_pkg", "bringup", "sim", "--log-level", "warn"] + argv
    fh = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    fh.close()
    return proc


def _run_to_end(argv, log_path) -> str:
    """One bringup run to its end (exit 0 asserted, leftovers killed); its log text."""
    proc = _bringup(argv, log_path)
    try:
        code = proc.wait(timeout=900)
    finally:
        kill_leftovers(proc, log_path)
    text = log_path.read_text()
    assert code == 0, text[-4000:]
    return text


def _points(path, pts):
    path.write_text(json.dumps(pts))
    return str(path)


def test_swarm_bringup_refuses_bad_starts_and_goals_with_exit_2(tmp_path):
    (tmp_path / "w.yaml").write_text(SPARSE_WORLD)
    w = ["--world", str(tmp_path / "w.yaml")]
    s = _points(tmp_path / "s.json", STARTS)
    cases = [
        (["--drones", "4", "--starts", s, "--goals", _points(tmp_path / "g3.json", GOALS[:3])], "lists 4 drones but"),
        (["--drones", "3", "--starts", s], "--drones 3 but --starts lists 4"),
        (["--drones", "2", "--starts", _points(tmp_path / "in.json", [[0.0, 2.5, 1.0], [1.0, 1.0, 1.0]])],
         "obstacle"),
        (["--drones", "2", "--starts", _points(tmp_path / "close.json", [[1.0, 1.0, 1.0], [1.1, 1.0, 1.0]])],
         "closer than two"),
        (["--drones", "4", "--starts", s, "--goals", _points(tmp_path / "bad.json", [[1, 2]] * 4)], "three finite"),
        (["--drones", "4", "--starts", s, "--summary", str(tmp_path / "x.json")], "give --goals"),
        (["--drones", "2", "--drone-id", "1"], "not both"),
        (["--drones", "2", "--peers", "1"], "goes with --drone-id"),
        (["--drone-id", "1", "--peers", "0,1"], "other than --drone-id 1"),
        (["--drone-id", "1", "--peers", "0,x"], "comma-separated"),
        (["--drone-id", "0", "--goal", "0,2.5,1"], "obstacle"),
    ]
    for argv, needle in cases:
        log = tmp_path / "refused.log"
        proc = _bringup(w + argv, log)
        try:
            assert proc.wait(timeout=120) == 2, (argv, log.read_text())
        finally:
            kill_leftovers(proc, log)
        text = log.read_text()
        assert needle in text and "started" not in text, (argv, text)


def _pairwise_min(logs):
    """Smallest centre distance over every pair at the common sample times of the drones' CSVs."""
    data = [np.loadtxt(p, delimiter=",", skiprows=1) for p in logs]
    best = math.inf
    for a in range(len(data)):
        for b in range(a + 1, len(data)):
            ta, tb = np.round(data[a][:, 0], 6), np.round(data[b][:, 0], 6)
            common, ia, ib = np.intersect1d(ta, tb, return_indices=True)
            assert common.size > 100, "the flight logs share no sample times"
            best = min(best, float(np.linalg.norm(data[a][ia, 1:4] - data[b][ib, 1:4], axis=1).min()))
    return best, data


def test_four_drones_cross_over_dds_in_lockstep_without_collisions(tmp_path):
    """`bringup sim --drones 4`: the swarm simulator, 4 planners and 4 trajectory servers over real
    DDS, lockstep (sim time waits for every drone's nodes, so the load does not matter), one mission
    per drone. Checked against the summary and, independently, against the flight logs and the
    world file: all reach their goals, none touches an obstacle or another drone, separation >= 0.4 m."""
    (tmp_path / "w.yaml").write_text(SPARSE_WORLD)
    world = load_world(tmp_path / "w.yaml")
    summary_path, log_dir, log = tmp_path / "swarm.json", tmp_path / "flights", tmp_path / "bringup.log"
    _run_to_end(["--world", str(tmp_path / "w.yaml"), "--drones", "4", "--real-time-factor", "0",
                 "--starts", _points(tmp_path / "s.json", STARTS), "--goals", _points(tmp_path / "g.json", GOALS),
                 "--timeout", "40", "--summary", str(summary_path), "--log-dir", str(log_dir)], log)
    summary = json.loads(summary_path.read_text())
    assert summary["n_drones"] == 4 and summary["success"] and summary["all_reached"], summary
    assert not summary["any_collision"]
    assert summary["min_inter_drone_distance_m"] >= MIN_SEPARATION_M
    for d in summary["drones"]:
        assert d["reached"] and not d["collided"] and not d["drone_collision"] and d["reason"] == "goal_reached", d
    # independent truth: the logged odometry against the world file and against each other
    sep, data = _pairwise_min([log_dir / f"drone_{i}.csv" for i in range(4)])
    assert sep >= MIN_SEPARATION_M, sep
    radius = QuadrotorParams().collision_radius_m
    for i, flight in enumerate(data):
        pos = flight[:, 1:4]
        assert np.linalg.norm(pos[0] - STARTS[i]) < 0.05 and np.linalg.norm(pos[-1] - GOALS[i]) <= 0.5 + 0.05
        clearance = min(float(world.signed_distance(p)) for p in pos[::5])
        assert clearance > radius, (i, clearance)


def test_each_drone_runs_as_its_own_bringup_with_the_simulator_in_another(tmp_path):
    """As on separate computers: `bringup sim --drones 2 --sim-only` runs the simulator alone and
    one `bringup sim --drone-id I --goal ...` per drone runs that drone's planner and trajectory
    server in /drone<I>, its own process group; each writes its own mission summary, the drones
    cross without touching, and all three stop cleanly on Ctrl-C. (--sim-only starts every drone
    facing +x: both fly that way; a drone whose goal is behind it flies its first metres blind.)"""
    import os
    import signal

    from nodes_ros_harness import started_pids

    (tmp_path / "w.yaml").write_text(SPARSE_WORLD)
    w = ["--world", str(tmp_path / "w.yaml")]
    # the two straight lines cross near x = 0.6 at about the same time
    starts, goals = [[-4.0, 0.8, 1.0], [-4.0, -0.8, 1.0]], [[4.0, -0.4, 1.0], [4.0, 0.8, 1.0]]
    logs = [tmp_path / f"{name}.log" for name in ("sim", "drone0", "drone1")]
    summaries = [tmp_path / "drone0.json", tmp_path / "drone1.json"]
    procs = [_bringup(w + ["--drones", "2", "--sim-only", "--starts", _points(tmp_path / "s.json", starts),
                           "--real-time-factor", "0"], logs[0])]
    for i in range(2):
        procs.append(_bringup(w + ["--drone-id", str(i), "--peers", str(1 - i), "--goal=" + ",".join(map(str, goals[i])),
                                   "--summary", str(summaries[i])], logs[i + 1]))
    try:
        assert wait_for(lambda: all(p.exists() for p in summaries) or any(p.poll() is not None for p in procs), 600.0)
        assert all(p.exists() for p in summaries), [log.read_text()[-2000:] for log in logs]
        for p in procs[1:] + procs[:1]:
            os.killpg(p.pid, signal.SIGINT)
        codes = [p.wait(timeout=120) for p in procs]
    finally:
        for p, log in zip(procs, logs):
            kill_leftovers(p, log)
    assert codes == [0, 0, 0], [log.read_text()[-2000:] for log in logs]
    assert [n for n, _ in started_pids(logs[0].read_text())] == ["swarm_sim"]
    for i in range(2):
        assert sorted(n for n, _ in started_pids(logs[i + 1].read_text())) == [f"drone{i}_planner",
                                                                                f"drone{i}_traj_server"]
        s = json.loads(summaries[i].read_text())
        assert s["reached"] and not s["collided"] and s["goal"] == goals[i] and s["start"] == starts[i], s


def test_the_same_swarm_flight_twice_at_once_is_the_same_flight(tmp_path):
    """Two runs of the same 2-drone head-on swap, flown at the same time (each loading the machine for
    the other, on its own ROS domain): both swap without contact and fly the same flight, every
    odometry sample equal. Each planning tick waits for the peer's broadcasts sent before it (their
    count is in the peer's lockstep reports, docs/swarm.md); before that count a fresh-clone run on
    a quiet machine saw drone 0 differ from 0.12 s on."""
    import os

    from ros_domains import claim_ros_domain

    (tmp_path / "w.yaml").write_text(SPARSE_WORLD)
    s = _points(tmp_path / "s.json", [[-3.0, 0.0, 1.0], [3.0, 0.0, 1.0]])
    g = _points(tmp_path / "g.json", [[3.0, 0.0, 1.0], [-3.0, 0.0, 1.0]])
    procs, logs = [], []
    # two domains of this test's own, claimed like every test's (test/ros_domains.py): random ones
    # could meet a concurrent test run's graph (a loop run beside a fresh-clone run failed here)
    claimed = [claim_ros_domain() for _ in range(2)]
    domains = [d.id for d in claimed]
    for k in range(2):
        log = tmp_path / f"run{k}.log"
        cmd = [sys.executable, "-m", "planner_pkg", "bringup", "sim", "--log-level", "warn", "--world",
               str(tmp_path / "w.yaml"), "--drones", "2", "--starts", s, "--goals", g, "--real-time-factor", "0",
               "--timeout", "30", "--summary", str(tmp_path / f"run{k}.json"), "--log-dir", str(tmp_path / f"run{k}")]
        fh = open(log, "w")
        procs.append(subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True,
                                      env=dict(os.environ, ROS_DOMAIN_ID=str(domains[k]))))
        fh.close()
        logs.append(log)
    try:
        codes = [p.wait(timeout=900) for p in procs]
    finally:
        for p, log in zip(procs, logs):
            kill_leftovers(p, log)
        for d in claimed:
            d.release()
    assert codes == [0, 0], [log.read_text()[-3000:] for log in logs]
    for k in range(2):
        summary = json.loads((tmp_path / f"run{k}.json").read_text())
        assert summary["success"] and summary["min_inter_drone_distance_m"] >= MIN_SEPARATION_M, summary
    for i in range(2):
        a, b = (np.loadtxt(tmp_path / f"run{k}" / f"drone_{i}.csv", delimiter=",", skiprows=1) for k in range(2))
        assert len(a) > 100 and len(b) > 100, f"drone {i}: too little odometry logged"
        n = min(len(a), len(b))
        same = bool(np.array_equal(a[:n], b[:n]))
        diff = float(np.abs(a[:n, 1:4] - b[:n, 1:4]).max())
        print(f"\ndrone {i}: the two runs' logs are {'identical' if same else 'different'} over {n} samples "
              f"(max position difference {diff:.2e} m)")
        if not same:
            first = int(np.flatnonzero(np.any(a[:n] != b[:n], axis=1))[0])
            pytest.fail(f"drone {i}: the two runs differ from t = {a[first, 0]:.3f} s on (max {diff:.2e} m)\n"
                        + "\n".join(log.read_text()[-2000:] for log in logs))


def test_a_swarm_run_is_recorded_to_one_mcap_with_every_drones_topics(tmp_path):
    """`bringup sim --drones 2 --record run.mcap`: one recorder at the root records the clock, the
    broadcast topic and each drone's topics in /drone<i>; each drone's goal goes out only once the
    recorder listens (so its one goal is in the file), and each drone's last logged odometry sample
    is in the recording, identical."""
    pytest.importorskip("mcap_ros2")
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from nodes_ros_harness import started_pids

    (tmp_path / "w.yaml").write_text(SPARSE_WORLD)
    rec, log, log_dir = tmp_path / "swarm.mcap", tmp_path / "bringup.log", tmp_path / "flights"
    summary = tmp_path / "swarm.json"
    text = _run_to_end(["--world", str(tmp_path / "w.yaml"), "--drones", "2", "--real-time-factor", "0",
                        "--starts", _points(tmp_path / "s.json", [[-3.0, 0.0, 1.0], [3.0, 0.0, 1.0]]),
                        "--goals", _points(tmp_path / "g.json", [[3.0, 0.0, 1.0], [-3.0, 0.0, 1.0]]),
                        "--timeout", "30", "--summary", str(summary), "--log-dir", str(log_dir),
                        "--record", str(rec)], log)
    assert "recorder" in {n for n, _ in started_pids(text)}
    assert json.loads(summary.read_text())["success"]
    messages = {}
    with open(rec, "rb") as fh:
        reader = make_reader(fh, decoder_factories=[DecoderFactory()])
        assert reader.get_summary() is not None  # finished
        for _schema, channel, message, decoded in reader.iter_decoded_messages():
            messages.setdefault(channel.topic, []).append((message.publish_time, decoded))
    for topic in ("/clock", "/swarm/trajectories", "/drone0/odom", "/drone1/odom", "/drone0/planning/trajectory",
                  "/drone1/setpoint", "/drone0/status"):
        assert messages.get(topic), f"nothing recorded on {topic}: {sorted(messages)}"
    for i in range(2):
        assert len(messages[f"/drone{i}/goal_pose"]) == 1, sorted(messages)
        rows = (log_dir / f"drone_{i}.csv").read_text().splitlines()
        t_last, *last = map(float, rows[-1].split(","))
        recorded = {round(t * 1e-9, 6): m for t, m in messages[f"/drone{i}/odom"]}
        got = recorded[round(t_last, 6)].pose.pose.position
        assert [got.x, got.y, got.z] == last[:3]
    # both drones' broadcasts (joint name swarm_drone_<id>)
    ids = {m.joint_names[0] for _, m in messages["/swarm/trajectories"]}
    assert ids == {f"{conv.SWARM_JOINT_PREFIX}0", f"{conv.SWARM_JOINT_PREFIX}1"}, ids
