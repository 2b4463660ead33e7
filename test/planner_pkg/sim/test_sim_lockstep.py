"""The lockstep rules (planner_pkg/sim/lockstep.py), without ROS: what the simulator may advance
to, what a participant's tick waits for, counting messages across joins and restarts, faults."""
import pytest

from planner_pkg.sim.lockstep import (NONE_NS, InputGate, LockstepBarrier, MessageTally, ParticipantReport,
                                      PeerGate, StepManifest, TrajectoryGate, seconds_to_ns)

MS = 1_000_000


def report(name, next_ms, setpoints=-1, trajectories=-1, goals=-1, seq=1):
    return ParticipantReport(name=name, next_ns=next_ms * MS, setpoints=setpoints, trajectories=trajectories,
                             goals=goals, seq=seq)


def test_messages_round_trip_as_integer_pairs_and_refuse_bad_values():
    r = report("planner", 100, trajectories=3, goals=1, seq=7)
    pairs = r.to_pairs()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in pairs)
    assert ParticipantReport.from_pairs(pairs) == r
    m = StepManifest(t_ns=123456789012, odom_ns=123450000000, frame_ns=NONE_NS)
    assert StepManifest.from_pairs(m.to_pairs() + [("from_a_newer_peer", "x")]) == m
    with pytest.raises(ValueError, match="next_ns"):
        ParticipantReport.from_pairs([("name", "p"), ("next_ns", "1.5e9")])
    with pytest.raises(ValueError, match="t_ns"):
        StepManifest.from_pairs([("odom_ns", "1")])
    with pytest.raises(ValueError):
        seconds_to_ns(float("nan"))


def test_seconds_to_ns_rounds_as_a_ros_stamp_does():
    from planner_pkg.sim.lockstep import seconds_to_ns

    for t in (0.0, 0.002, 0.1, 1.0 / 15.0, 12.345678901, 1234.56, 0.30000000000000004):
        sec = int(t)
        stamp_ns = sec * 1_000_000_000 + int(round((t - sec) * 1e9))  # conversions.seconds_to_stamp
        assert seconds_to_ns(t) == stamp_ns


def test_the_simulator_starts_only_when_every_participant_reported_and_a_goal_was_taken():
    b = LockstepBarrier(["planner", "traj_server"], start_on_goal=True)
    assert b.limit_ns(0) == (0, "start: waiting for planner, traj_server to report")
    b.saw_report(report("planner", 100, trajectories=0, goals=0))
    assert b.limit_ns(0)[1] == "start: waiting for traj_server to report"
    b.saw_report(report("traj_server", 10, setpoints=0))
    assert b.limit_ns(0)[1] == "start: waiting for a goal"
    # waiting for the start is never a fault, however long
    assert not b.blocked(0.0, "start: waiting for a goal") and not b.blocked(1e6, "start: waiting for a goal")
    b.saw_report(report("planner", 100, trajectories=0, goals=1))
    assert b.limit_ns(0) == (10 * MS, "") and b.started


def test_the_limit_is_the_earliest_next_tick_and_reported_setpoints_must_have_arrived():
    b = LockstepBarrier(["planner", "traj_server"])
    b.saw_report(report("planner", 100, trajectories=0))
    b.saw_report(report("traj_server", 10, setpoints=0))
    assert b.limit_ns(0) == (10 * MS, "")
    # at 10 ms the trajectory server has ticked: two setpoints of one instant (a re-send, then a
    # new command); the report may overtake them on DDS: no advance until both are in
    b.saw_report(report("traj_server", 20, setpoints=2, seq=2))
    assert b.limit_ns(10 * MS) == (10 * MS, "2 setpoint message(s) reported but not received")
    b.saw_setpoint()
    assert b.limit_ns(10 * MS)[0] == 10 * MS
    b.saw_setpoint()
    assert b.limit_ns(10 * MS) == (20 * MS, "")
    # the planner's tick is next: the limit names it when reached
    b.saw_report(report("traj_server", 110, setpoints=3, seq=3))
    b.saw_setpoint()
    assert b.limit_ns(100 * MS) == (100 * MS, "planner (next tick 0.100 s)")


def test_a_silent_participant_is_a_fault_after_the_timeout_and_the_simulation_stays_stopped():
    b = LockstepBarrier(["planner"], fault_timeout_s=2.0)
    b.saw_report(report("planner", 100))
    on = b.limit_ns(100 * MS)[1]
    assert not b.blocked(10.0, on) and not b.blocked(11.9, on) and not b.fault
    assert b.blocked(12.0, on) and "planner" in b.fault and "2" in b.fault and b.faults == 1
    # a late report does not resume a faulted simulation: that would be a different flight
    b.saw_report(report("planner", 200, seq=2))
    limit, why = b.limit_ns(100 * MS)
    assert limit == 100 * MS and "fault" in why
    assert b.blocked(13.0, why) and b.faults == 1  # counted once
    with pytest.raises(ValueError):
        LockstepBarrier(fault_timeout_s=0.0)


def test_waits_are_counted_and_end_when_the_simulator_advances():
    b = LockstepBarrier(["p"], fault_timeout_s=5.0)
    b.saw_report(report("p", 10))
    assert not b.blocked(1.0, "p") and b.waiting_for() == "p"
    b.advanced(1.5)
    assert b.waiting_for() == "" and b.waits == 1 and b.wait_wall_s == pytest.approx(0.5)
    assert not b.blocked(2.0, "p") and not b.blocked(6.9, "p")  # a new wait: the timeout starts anew
    assert b.waits == 2


def test_the_input_gate_waits_for_the_manifest_then_for_the_odometry_and_frame_it_names():
    g = InputGate(frames=True)
    assert g.missing(0) == ""  # no manifest yet: no lockstep simulator (Gazebo's clock): nothing to wait for
    g.saw_manifest(StepManifest(0))  # joining at 0: nothing published yet
    assert g.missing(0) == ""
    assert g.missing(100 * MS) == "the simulator's step manifest"
    g.saw_manifest(StepManifest(100 * MS, odom_ns=100 * MS, frame_ns=66 * MS))
    assert g.missing(100 * MS) == "odometry"
    g.saw_odom(90 * MS)
    assert g.missing(100 * MS) == "odometry"
    g.saw_odom(100 * MS)
    assert g.missing(100 * MS) == "a sensor frame"
    g.saw_frame(66 * MS)
    assert g.missing(100 * MS) == ""
    # an older manifest arriving late changes nothing
    g.saw_manifest(StepManifest(50 * MS))
    assert g.manifest.t_ns == 100 * MS
    # a node that takes no frames does not wait for them
    t = InputGate(frames=False)
    t.saw_manifest(StepManifest(0))
    t.saw_manifest(StepManifest(10 * MS, odom_ns=10 * MS, frame_ns=10 * MS))
    t.saw_odom(10 * MS)
    assert t.missing(10 * MS) == ""


def test_a_node_joining_mid_flight_does_not_wait_for_what_was_published_before_it():
    g = InputGate()
    g.saw_manifest(StepManifest(5000 * MS, odom_ns=5000 * MS, frame_ns=4990 * MS))
    assert g.missing(5000 * MS) == ""  # it missed them: waiting would deadlock
    g.saw_manifest(StepManifest(5010 * MS, odom_ns=5010 * MS, frame_ns=4990 * MS))
    assert g.missing(5010 * MS) == "odometry"


def test_message_tally_across_a_late_join_a_restart_and_two_senders():
    tally = MessageTally("setpoints")
    tally.saw_message()
    tally.saw_message()  # sent before the sender was first heard of: gone by
    tally.saw_report(report("a", 10, setpoints=5, seq=9))
    assert tally.missing() == 0
    tally.saw_report(report("a", 20, setpoints=7, seq=10))
    assert tally.missing() == 2
    tally.saw_message()
    tally.saw_message()
    assert tally.missing() == 0
    # "a" restarts: counts start at 0 again, after what its last run sent
    tally.saw_report(report("a", 30, setpoints=1, seq=1))
    assert tally.missing() == 1
    tally.saw_message()
    # a second sender
    tally.saw_report(report("b", 30, setpoints=0, seq=1))
    tally.saw_report(report("b", 40, setpoints=2, seq=2))
    assert tally.missing() == 2
    tally.saw_report(report("c", 30))  # sends none: ignored
    tally.saw_message()
    tally.saw_message()
    assert tally.missing() == 0


def test_the_trajectory_gate_waits_for_the_planners_tick_and_its_trajectories():
    g = TrajectoryGate()
    assert g.missing(0) == ""  # no planner known (hardware-like): nothing to wait for
    g.saw_report(report("planner", 100, trajectories=0))
    g.saw_report(report("policy", 5, setpoints=3))  # not a planner: ignored
    assert g.missing(50 * MS) == ""
    assert g.missing(100 * MS) == "the planner tick due at 0.100 s"
    g.saw_report(report("planner", 200, trajectories=1, seq=2))
    assert g.missing(100 * MS) == "1 trajectory message(s) reported but not received"
    g.saw_trajectory()
    assert g.missing(100 * MS) == ""


def test_the_trajectory_gate_waits_for_a_required_planners_first_report_under_a_lockstep_simulator():
    """Discovery is per pair of nodes: the simulator can hear the planner (and start sim time) while the
    trajectory server does not yet. Sampling then as if there were no planner made a loaded flight
    differ from a quiet one; a planner the server follows by name is waited for instead."""
    g = TrajectoryGate(required=["planner"])
    assert g.missing(0) == "the planner's first lockstep report"
    assert g.missing(0, simulated=False) == ""  # a clock that is not a lockstep simulator's: nobody to wait for
    g.saw_report(report("traj_server", 100, setpoints=1))  # not a planner: no help
    assert g.missing(0) == "the planner's first lockstep report"
    g.saw_report(report("planner", 100, trajectories=0))
    assert g.missing(50 * MS) == ""
    assert g.missing(100 * MS) == "the planner tick due at 0.100 s"


def _peer(next_ms, broadcasts, seq):
    return ParticipantReport(name="planner", next_ns=next_ms * MS, trajectories=0, goals=0, seq=seq,
                             broadcasts=broadcasts)


def test_the_peer_gate_waits_for_each_peers_first_report_earlier_ticks_and_reported_broadcasts():
    """A swarm drone's tick at T uses the broadcasts its peers sent before T: it waits until every
    peer it follows has reported, has run its ticks before T (not the one at T: the peers' ticks of
    one instant run together) and every broadcast it reported has arrived - a broadcast still in
    transit must not be missed by a loaded run and used by a quiet one."""
    g = PeerGate(required=[1, 2])
    assert g.missing(0) == "drone 1's first lockstep report"
    assert g.missing(0, simulated=False) == ""  # no lockstep simulator: nobody to wait for
    g.saw_report(1, report("traj_server", 100, setpoints=3))  # the peer's trajectory server: no help
    assert g.missing(0) == "drone 1's first lockstep report"
    g.saw_report(1, _peer(100, 0, seq=1))
    g.saw_report(2, _peer(100, 0, seq=1))
    assert g.missing(100 * MS) == ""  # both due at 0.1 s too: never waited for
    assert g.missing(200 * MS) == "drone 1's tick due at 0.100 s"
    g.saw_report(1, _peer(200, 1, seq=2))  # drone 1 ran its 0.1 s tick and broadcast once
    assert g.missing(200 * MS) == "1 broadcast(s) of drone 1 reported but not received"
    g.saw_broadcast(2)  # drone 2's broadcast came before its report: counted, not yet expected
    assert g.missing(200 * MS) == "1 broadcast(s) of drone 1 reported but not received"
    g.saw_broadcast(1)
    assert g.missing(200 * MS) == "drone 2's tick due at 0.100 s"
    g.saw_report(2, _peer(200, 1, seq=2))
    assert g.missing(200 * MS) == ""
    # a peer first heard of with broadcasts already sent waits for them (the topic keeps its history)
    late = PeerGate(required=[3])
    late.saw_report(3, _peer(500, 4, seq=5))
    assert late.missing(500 * MS) == "4 broadcast(s) of drone 3 reported but not received"
    for _ in range(4):
        late.saw_broadcast(3)
    assert late.missing(500 * MS) == ""
    # a restarted peer (seq went down) counts on from where its last run ended
    late.saw_report(3, _peer(600, 1, seq=1))
    assert late.missing(600 * MS) == "1 broadcast(s) of drone 3 reported but not received"
    late.saw_broadcast(3)
    assert late.missing(600 * MS) == ""


def test_two_nodes_of_one_name_are_a_fault_but_a_restart_is_not():
    b = LockstepBarrier(["planner"])
    b.saw_report(report("planner", 100, seq=1), sender=b"A")
    b.saw_report(report("planner", 100, seq=1), sender=b"B")  # restarted: a new publisher, once
    for seq in range(2, 20):
        b.saw_report(report("planner", 100 + seq, seq=seq), sender=b"B")
    assert not b.fault
    # a second graph's planner on this domain: reports alternate between two publishers
    for seq in range(3):
        b.saw_report(report("planner", 5000, seq=seq), sender=b"C")
        b.saw_report(report("planner", 200, seq=20 + seq), sender=b"B")
    assert "two nodes named 'planner'" in b.fault and b.faults == 1
    assert b.limit_ns(200 * MS)[0] == 200 * MS  # stopped
