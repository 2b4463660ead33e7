"""A lockstep participant under a clock that is not a lockstep simulator's (Gazebo, a bag): with no
step manifest in the graph nothing is waited for, and the trajectory server streams setpoints on
that clock as it would on any other."""
import numpy as np
from nav_msgs.msg import Odometry
from nodes_ros_harness import wait_for
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock as ClockMsg
from trajectory_msgs.msg import MultiDOFJointTrajectory

from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes.traj_server import TrajServer
from planner_pkg.types import VehicleState


def test_traj_server_on_a_plain_sim_clock_streams_setpoints(ros):
    node = ros.add(TrajServer(context=ros.context, parameter_overrides=[Parameter("use_sim_time", value=True)]))
    assert node.lockstep.active  # a participant, but no lockstep simulator is there
    probe = ros.node("plain_clock")
    clock = probe.create_publisher(ClockMsg, c.TOPIC_CLOCK, c.CLOCK_QOS)
    odom = probe.create_publisher(Odometry, c.TOPIC_ODOM, c.ODOM_QOS)
    got = []
    probe.create_subscription(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, got.append, c.SETPOINT_QOS)
    t = {"ns": 1_000_000_000}

    def tick():
        t["ns"] += 10_000_000
        msg = ClockMsg()
        msg.clock = conv.seconds_to_stamp(t["ns"] * 1e-9)
        clock.publish(msg)
        odom.publish(conv.state_to_odometry(VehicleState.at_rest(np.array([1.0, 2.0, 3.0]), 0.0, t=t["ns"] * 1e-9),
                                            "map", "base_link"))
        return len(got) >= 20

    assert wait_for(tick, 30.0, period_s=0.01), (len(got), node.lockstep.waiting, node.mode)
    assert node.lockstep.waiting == ""


def test_a_goal_accepted_before_the_first_step_manifest_is_reported_with_it(ros):
    """The report that lets a lockstep simulator start sim time waits for this node's first
    manifest: a node without one runs its ticks ungated (a swarm flight that depended on load)."""
    from planner_pkg.nodes import lockstep as ls
    from planner_pkg.sim.lockstep import StepManifest

    node = ros.node("goal_first")
    node.set_parameters([Parameter("use_sim_time", value=True)])
    part = ls.LockstepParticipant(node, True, frames=True, goals=True)
    reports = []
    part._pub = type("Pub", (), {"publish": lambda _self, msg: reports.append(ls.report_from_msg(msg))})()
    part.accepted_goal()
    assert reports == [] and part.goals == 1  # counted, not reported: no manifest yet
    part._on_manifest(ls.to_msg("sim_bridge", StepManifest(t_ns=0, odom_ns=0, frame_ns=-1)))
    assert [r.goals for r in reports] == [1]  # the joining report carries it
    part.accepted_goal()
    assert [r.goals for r in reports] == [1, 2]  # with a manifest held: at once
    part.close()
