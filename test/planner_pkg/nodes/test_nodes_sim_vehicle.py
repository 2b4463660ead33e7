"""What sim_bridge and swarm_sim share per simulated vehicle (nodes/sim_vehicle.py), without a
graph: the stepping pace, the lockstep status text, setpoint and report reading; the publishing
itself is covered over DDS by test_nodes_e2e.py (lockstep) and test_nodes_swarm.py."""
import math
from types import SimpleNamespace

import pytest
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from geometry_msgs.msg import Transform, Twist
from trajectory_msgs.msg import MultiDOFJointTrajectory, MultiDOFJointTrajectoryPoint

from planner_pkg.nodes import common as c
from planner_pkg.nodes import lockstep as ls
from planner_pkg.nodes import sim_vehicle as sv
from planner_pkg.sim.lockstep import MAX_SENDER_SWITCHES, LockstepBarrier, ParticipantReport

DT = 0.002  # s: a 500 Hz dynamics step


def _cfg(real_time_factor=1.0, step_period_s=0.01, max_step_s=0.05):
    return SimpleNamespace(real_time_factor=real_time_factor, step_period_s=step_period_s, max_step_s=max_step_s)


def test_pacer_advances_real_time_factor_times_the_wall_time_carrying_the_rest():
    pacer = sv.StepPacer()
    free = lambda wall: None  # noqa: E731 - lockstep off
    assert pacer.steps(_cfg(), 100.0, DT, free) == 5  # first tick: one timer period, 0.01 s / 0.002 s
    assert pacer.steps(_cfg(), 100.003, DT, free) == 1  # 3 ms: one step, 1 ms carried
    assert pacer.steps(_cfg(), 100.004, DT, free) == 1  # 1 ms + the 1 ms carried
    assert pacer.steps(_cfg(real_time_factor=2.0), 100.009, DT, free) == 5  # 2 x 5 ms
    assert pacer.steps(_cfg(), 101.0, DT, free) == 25  # a 1 s stall advances max_step_s only
    assert pacer.steps(_cfg(real_time_factor=0.0), 101.0, DT, free) == 25  # 0: max_step_s every tick
    assert not pacer.at_limit


def test_pacer_keeps_what_lockstep_holds_back_due_and_says_when_to_resend_the_clock():
    pacer = sv.StepPacer()
    assert pacer.steps(_cfg(), 0.0, DT, lambda wall: 2) == 2 and pacer.at_limit  # 6 of the 10 ms stay due
    assert pacer.steps(_cfg(), 0.01, DT, lambda wall: 0) == 0 and pacer.at_limit  # 16 ms due
    assert pacer.resend_due(0.01) and not pacer.resend_due(0.01 + sv.RESEND_CLOCK_S / 2)
    assert pacer.resend_due(0.01 + sv.RESEND_CLOCK_S)
    assert pacer.steps(_cfg(), 0.02, DT, lambda wall: 100) == 13  # the 16 ms held + 10 ms
    assert pacer.steps(_cfg(), 0.03, DT, lambda wall: 0) == 0  # 10 ms due
    assert pacer.steps(_cfg(), 1.0, DT, lambda wall: 100) == 25  # held + a stall: at most max_step_s
    assert not pacer.at_limit and not pacer.resend_due(10.0)  # not held: nothing to re-send
    assert pacer.steps(_cfg(), 1.01, DT, lambda wall: 5) == 5 and pacer.at_limit  # allowed == wanted: at the limit


def _barrier(fault="", waiting="", started=False):
    return SimpleNamespace(fault=fault, waiting_for=lambda: waiting, started=started)


def test_lockstep_state_text():
    assert sv.lockstep_state([]) == "off"
    assert sv.lockstep_state([("", _barrier(started=False))]) == "starting"
    assert sv.lockstep_state([("", _barrier(started=True))]) == "engaged"
    assert sv.lockstep_state([("", _barrier(waiting="planner (next tick 1.000 s)"))]) == \
        "waiting for planner (next tick 1.000 s)"
    swarm = [("drone 0: ", _barrier(started=True)), ("drone 1: ", _barrier(waiting="planner")),
             ("drone 2: ", _barrier(waiting="setpoint"))]
    assert sv.lockstep_state(swarm) == "waiting for drone 1: planner; drone 2: setpoint"
    assert sv.lockstep_state(swarm + [("drone 3: ", _barrier(fault="silent", waiting="x"))]) == "fault"
    assert sv.lockstep_state([("drone 0: ", _barrier(started=True)), ("drone 1: ", _barrier())]) == "starting"


def _setpoint_msg(frame="map", position=(1.0, 2.0, 3.0)):
    msg = MultiDOFJointTrajectory()
    msg.header.frame_id = frame
    point = MultiDOFJointTrajectoryPoint()
    t = Transform()
    t.translation.x, t.translation.y, t.translation.z = (float(v) for v in position)
    t.rotation.w = 1.0
    point.transforms = [t]
    point.velocities = [Twist()]
    point.accelerations = [Twist()]
    msg.points = [point]
    return msg


def test_read_setpoint_takes_the_map_frame_and_refuses_others_and_nothing_to_track():
    assert sv.read_setpoint(_setpoint_msg(), "map").position.tolist() == [1.0, 2.0, 3.0]
    assert sv.read_setpoint(_setpoint_msg(frame=""), "map").position.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="setpoint in frame 'odom', expected 'map'"):
        sv.read_setpoint(_setpoint_msg(frame="odom"), "map")
    with pytest.raises(ValueError, match="setpoint in frame 'map', expected 'world'"):
        sv.read_setpoint(_setpoint_msg(), "world")
    with pytest.raises(ValueError):
        sv.read_setpoint(_setpoint_msg(position=(math.nan, 0.0, 1.0)), "map")
    empty = MultiDOFJointTrajectory()
    empty.header.frame_id = "map"
    with pytest.raises(ValueError):
        sv.read_setpoint(empty, "map")


class _Log:
    def __init__(self):
        self.lines = []

    def info(self, text):
        self.lines.append(("info", text))

    def warning(self, text):
        self.lines.append(("warning", text))


def _info(gid: bytes):
    return {"publisher_gid": {"data": gid, "implementation_identifier": "rmw_fastrtps_cpp"}}


def test_take_report_counts_bad_ones_and_reports_a_two_publisher_fault_once():
    barrier, counters, log, faults = LockstepBarrier(("planner",)), {"bad_lockstep_reports": 0}, _Log(), []
    bad = DiagnosticStatus(name="planner", values=[KeyValue(key="next_ns", value="soon")])
    assert not sv.take_report(barrier, bad, _info(b"a" * 16), counters, c.Throttle(), log, faults.append)
    assert counters["bad_lockstep_reports"] == 1 and log.lines[0][0] == "warning"
    assert not barrier.reports
    report = ls.to_msg("planner", ParticipantReport(name="planner", next_ns=1_000_000_000))
    assert sv.take_report(barrier, report, _info(b"a" * 16), counters, c.Throttle(), log, faults.append)
    assert barrier.reports["planner"].next_ns == 1_000_000_000
    assert log.lines[-1] == ("info", "lockstep: planner reports (next tick at 1.000 s)")
    for k in range(2 * MAX_SENDER_SWITCHES + 2):  # two nodes named planner on one domain
        assert sv.take_report(barrier, report, _info(b"ab"[k % 2:k % 2 + 1] * 16), counters, c.Throttle(), log,
                              faults.append)
    assert barrier.fault and faults == [barrier.fault]  # told once


def test_publisher_gid_from_message_info():
    assert c.publisher_gid(_info(b"\x01" * 16)) == b"\x01" * 16
    assert c.publisher_gid({"publisher_gid": [1, 2, 3]}) == b"\x01\x02\x03"
    assert c.publisher_gid({}) == b"" and c.publisher_gid(None) == b""
