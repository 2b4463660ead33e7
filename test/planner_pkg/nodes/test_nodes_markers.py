"""The planner's RViz markers (planning/markers, planner_pkg/nodes/markers.py) over DDS: what it
holds (goal, trajectory, control points) arrives as one MarkerArray in the map frame."""
import numpy as np
from nodes_ros_harness import wait_for
from visualization_msgs.msg import Marker, MarkerArray

from planner_pkg.nodes import common as c
from planner_pkg.nodes import markers as mk


def test_planner_publishes_its_goal_trajectory_and_control_points_as_markers(ros):
    from planner_pkg.nodes.planner_node import PlannerNode
    from planner_pkg.planning.sampled_trajectory import SampledTrajectory

    planner = ros.add(PlannerNode(context=ros.context))
    probe = ros.node("marker_probe")
    got = []
    probe.create_subscription(MarkerArray, c.TOPIC_PLANNING_MARKERS, got.append, c.MARKERS_QOS)
    assert wait_for(lambda: planner.pub_markers.get_subscription_count() > 0, 20.0)
    t = np.linspace(0.0, 1.0, 11)
    line = np.stack([t, 2.0 * t, np.ones_like(t)], axis=1)
    planner.goal = np.array([5.0, 1.0, 1.5])
    planner.last_traj = SampledTrajectory(t, line, np.zeros_like(line), np.zeros_like(line))
    planner.last_control_points = line[::2].copy()

    def seen():
        planner._publish_markers()
        return any({m.ns for m in a.markers} >= {"goal", "trajectory", "control_points"} for a in got)

    assert wait_for(seen, 20.0, period_s=0.1)
    msg = next(a for a in got if {m.ns for m in a.markers} >= {"goal", "trajectory", "control_points"})
    by_ns = {m.ns: m for m in msg.markers}
    assert all(m.header.frame_id == "map" and m.action == Marker.ADD for m in msg.markers)
    goal = by_ns["goal"].pose.position
    assert (goal.x, goal.y, goal.z) == (5.0, 1.0, 1.5) and by_ns["goal"].type == Marker.SPHERE
    traj = np.array([[p.x, p.y, p.z] for p in by_ns["trajectory"].points])
    np.testing.assert_allclose(traj, line)
    assert len(by_ns["control_points"].points) == 6 and by_ns["control_points"].type == Marker.SPHERE_LIST


def test_delete_all_marker_clears_and_a_marker_carries_pose_scale_and_colour():
    m = mk.marker("x", 3, Marker.CUBE, 1.5, "map", position=(1.0, 2.0, 3.0), scale=(0.2, 0.3, 0.4),
                  rgba=(0.1, 0.2, 0.3, 0.4), yaw=np.pi / 2)
    assert (m.ns, m.id, m.type, m.header.frame_id) == ("x", 3, Marker.CUBE, "map")
    assert (m.header.stamp.sec, m.header.stamp.nanosec) == (1, 500_000_000)
    assert (m.scale.x, m.scale.y, m.scale.z) == (0.2, 0.3, 0.4)
    np.testing.assert_allclose([m.color.r, m.color.g, m.color.b, m.color.a], [0.1, 0.2, 0.3, 0.4], rtol=1e-6)
    np.testing.assert_allclose([m.pose.orientation.z, m.pose.orientation.w], [np.sqrt(0.5), np.sqrt(0.5)])
    assert mk.delete_all_marker().action == Marker.DELETEALL
