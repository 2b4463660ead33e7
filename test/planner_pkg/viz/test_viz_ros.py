"""The ROS-native view (planner_pkg/nodes/viz_node.py) over real DDS on loopback: a viewer that
subscribes *after* everything was published (a late RViz) still gets the world markers, the
trajectory markers and the flown path, with transient-local QoS; their content is what was sent.
With ``foxglove: true`` the same node serves the Foxglove live view, checked with a real client."""
import math
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nodes"))  # the node tests' RosHarness

from nodes_ros_harness import RosHarness, wait_for  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402

from planner_pkg.nodes import common as c  # noqa: E402
from planner_pkg.nodes import conversions as conv  # noqa: E402
from planner_pkg.planning.sampled_trajectory import SampledTrajectory  # noqa: E402
from planner_pkg.nodes.viz_node import TOPIC_PATH, TOPIC_TRAJECTORY_MARKERS, TOPIC_WORLD, VizNode  # noqa: E402
from planner_pkg.types import VehicleState, quaternion_from_yaw  # noqa: E402
from planner_pkg.world import Box, Cylinder, Sphere, World, save_world  # noqa: E402

from nav_msgs.msg import Odometry, Path as PathMsg  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from trajectory_msgs.msg import MultiDOFJointTrajectory  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

LATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)
GOAL = (4.0, 0.0, 1.0)


@pytest.fixture
def ros():
    harness = RosHarness()
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def world_file(tmp_path):
    world = World((-10.0, -6.0, 0.0), (10.0, 6.0, 4.0), [
        Cylinder((0.0, 3.0), 0.5, 3.0), Box((3.0, -3.0, 1.0), (1.0, 2.0, 2.0), 0.3), Sphere((-3.0, -3.0, 2.0), 0.5)])
    path = tmp_path / "w.yaml"
    save_world(world, path)
    return path


def fly_a_little(ros, viz):
    """Publish a goal, 9 odometry samples 0.25 m apart along x and one trajectory; returns
    (positions (9, 3), trajectory positions (K, 3))."""
    src = ros.node("viz_test_source")
    pub_odom = src.create_publisher(Odometry, c.TOPIC_ODOM, c.ODOM_QOS)
    pub_traj = src.create_publisher(MultiDOFJointTrajectory, c.TOPIC_TRAJECTORY, c.TRAJECTORY_QOS)
    pub_goal = src.create_publisher(PoseStamped, c.TOPIC_GOAL, c.GOAL_QOS)
    assert wait_for(lambda: all(p.get_subscription_count() >= 1 for p in (pub_odom, pub_traj, pub_goal)), 60.0)
    pub_goal.publish(conv.goal_to_pose(GOAL, 0.0))
    assert wait_for(lambda: viz.goal is not None, 60.0)
    positions = np.array([[0.25 * i, 0.0, 1.0] for i in range(9)])
    for i, p in enumerate(positions):
        state = VehicleState(0.1 * (i + 1), p, np.array([2.5, 0.0, 0.0]), quaternion_from_yaw(0.0), np.zeros(3))
        pub_odom.publish(conv.state_to_odometry(state))
    assert wait_for(lambda: len(viz.path) == 9, 60.0)
    t = np.linspace(1.0, 2.0, 11)
    traj_pos = np.stack([2.0 + t, np.sin(t), np.full_like(t, 1.0)], axis=1)
    pub_traj.publish(conv.trajectory_to_msg(SampledTrajectory(t, traj_pos), 1.0))
    assert wait_for(lambda: viz.trajectory_points is not None, 60.0)
    assert wait_for(lambda: not viz._path_dirty, 60.0)  # the path timer (2 Hz wall) published it
    return positions, traj_pos


def late_viewer(ros):
    """Subscribe to the viz topics now, transient local; returns {topic: [messages]}."""
    got = {TOPIC_WORLD: [], TOPIC_TRAJECTORY_MARKERS: [], TOPIC_PATH: []}
    node = ros.node("late_rviz")
    for topic, kind in ((TOPIC_WORLD, MarkerArray), (TOPIC_TRAJECTORY_MARKERS, MarkerArray), (TOPIC_PATH, PathMsg)):
        node.create_subscription(kind, topic, lambda m, t=topic: got[t].append(m), LATE_QOS)
    assert wait_for(lambda: all(got.values()), 60.0), {k: len(v) for k, v in got.items()}
    return node, got


def test_a_late_rviz_gets_world_trajectory_and_path_with_transient_local_qos(ros, world_file):
    viz = ros.add(VizNode(context=ros.context, parameter_overrides=[Parameter("world_file", value=str(world_file))]))
    positions, traj_pos = fly_a_little(ros, viz)
    node, got = late_viewer(ros)

    for topic in (TOPIC_WORLD, TOPIC_TRAJECTORY_MARKERS, TOPIC_PATH):
        (info,) = node.get_publishers_info_by_topic("/" + topic)
        assert info.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL, topic
        assert info.qos_profile.reliability == ReliabilityPolicy.RELIABLE, topic

    world = got[TOPIC_WORLD][-1].markers
    assert world[0].action == Marker.DELETEALL
    obstacles = [m for m in world if m.ns == "obstacles"]
    assert [m.type for m in obstacles] == [Marker.CYLINDER, Marker.CUBE, Marker.SPHERE]
    cyl = obstacles[0]
    assert (cyl.scale.x, cyl.scale.z, cyl.pose.position.y, cyl.pose.position.z) == (1.0, 3.0, 3.0, 1.5)
    (bounds,) = [m for m in world if m.ns == "bounds"]
    edges = np.array([[p.x, p.y, p.z] for p in bounds.points])
    assert bounds.type == Marker.LINE_LIST and edges.shape == (24, 3)
    assert edges.min(axis=0).tolist() == [-10.0, -6.0, 0.0] and edges.max(axis=0).tolist() == [10.0, 6.0, 4.0]

    markers = {m.ns: m for m in got[TOPIC_TRAJECTORY_MARKERS][-1].markers if m.action == Marker.ADD}
    line = np.array([[p.x, p.y, p.z] for p in markers["trajectory"].points])
    assert markers["trajectory"].type == Marker.LINE_STRIP
    np.testing.assert_allclose(line, traj_pos, atol=1e-12)
    g = markers["goal"].pose.position
    assert (g.x, g.y, g.z) == GOAL

    path = got[TOPIC_PATH][-1]
    assert path.header.frame_id == "map"
    flown = np.array([[p.pose.position.x, p.pose.position.y, p.pose.position.z] for p in path.poses])
    np.testing.assert_array_equal(flown, positions)
    assert [conv.stamp_to_seconds(p.header.stamp) for p in path.poses] == pytest.approx([0.1 * (i + 1) for i in range(9)])


def test_bad_input_is_ignored_and_counted(ros, world_file):
    viz = ros.add(VizNode(context=ros.context, parameter_overrides=[Parameter("world_file", value=str(world_file))]))
    src = ros.node("viz_bad_source")
    pub_goal = src.create_publisher(PoseStamped, c.TOPIC_GOAL, c.GOAL_QOS)
    assert wait_for(lambda: pub_goal.get_subscription_count() >= 1, 60.0)
    bad = conv.goal_to_pose((1.0, 2.0, 3.0), 0.0)
    bad.pose.position.x = math.nan
    pub_goal.publish(bad)
    other = conv.goal_to_pose((1.0, 2.0, 3.0), 0.0)
    other.header.frame_id = "odom"
    pub_goal.publish(other)
    assert wait_for(lambda: viz.counters["bad_goal"] == 2, 60.0)
    assert viz.goal is None


def test_a_missing_world_file_is_refused_by_name(ros, tmp_path):
    from planner_pkg.nodes.params import ParameterConfigError

    with pytest.raises(ParameterConfigError, match="nope.yaml"):
        VizNode(context=ros.context, parameter_overrides=[Parameter("world_file", value=str(tmp_path / "nope.yaml"))])


def test_the_node_serves_foxglove_from_ros_odometry(ros, world_file):
    pytest.importorskip("foxglove")
    pytest.importorskip("websockets")
    from foxglove_client import decoder, run_client

    viz = ros.add(VizNode(context=ros.context, parameter_overrides=[
        Parameter("world_file", value=str(world_file)), Parameter("foxglove", value=True),
        Parameter("foxglove_port", value=0)]))
    assert viz.view is not None and viz.view.port > 0
    result = {}

    def client():
        result["session"] = run_client(viz.view.url, ["/world", "/vehicle/path"], ["/tf"],
                                       until=lambda s: any(m.topic == "/tf" for m in s.messages), timeout_s=120)

    thread = threading.Thread(target=client)
    thread.start()
    try:
        assert viz.view.wait_for_subscriber("/tf", 120.0)
        src = ros.node("viz_fox_source")
        pub_odom = src.create_publisher(Odometry, c.TOPIC_ODOM, c.ODOM_QOS)
        assert wait_for(lambda: pub_odom.get_subscription_count() >= 1, 60.0)
        q = quaternion_from_yaw(0.4)
        state = VehicleState(3.5, np.array([1.5, -2.0, 1.25]), np.array([0.5, 0.0, 0.0]), q, np.zeros(3))

        def publish_until_seen():
            pub_odom.publish(conv.state_to_odometry(state))
            return "session" in result
        assert wait_for(publish_until_seen, 120.0, period_s=0.1)
    finally:
        thread.join(120.0)
    session = result["session"]
    tf_channel = next(ch for ch in session.channels.values() if ch["topic"] == "/tf")
    msg = next(decoder(tf_channel)(m.payload) for m in session.messages if m.topic == "/tf")
    (tf,) = msg.transforms
    assert (tf.parent_frame_id, tf.child_frame_id) == ("map", "base_link")
    assert tf.timestamp.seconds == 3 and tf.timestamp.nanos == 500_000_000
    assert [tf.translation.x, tf.translation.y, tf.translation.z] == [1.5, -2.0, 1.25]
    assert [tf.rotation.x, tf.rotation.y, tf.rotation.z, tf.rotation.w] == pytest.approx(q.tolist(), abs=1e-12)
    assert any(m.topic == "/world" for m in session.messages)


def test_the_rviz_config_shows_the_graph_topics_with_matching_qos():
    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parents[3] / "rviz" / "planner.rviz").read_text())
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "map"
    goal_tool = [t for t in manager["Tools"] if t["Class"] == "rviz_default_plugins/SetGoal"]
    assert goal_tool and goal_tool[0]["Topic"]["Value"] == c.TOPIC_GOAL
    topics = {d["Topic"]["Value"]: d["Topic"] for d in manager["Displays"] if "Topic" in d}
    expected = {t for t in (TOPIC_WORLD, TOPIC_TRAJECTORY_MARKERS, TOPIC_PATH, c.TOPIC_PLANNING_MARKERS,
                                  c.TOPIC_ODOM, c.TOPIC_CLOUD, c.TOPIC_DEPTH)}
    assert set(topics) == expected
    for name in (TOPIC_WORLD, TOPIC_TRAJECTORY_MARKERS, TOPIC_PATH):  # a late RViz asks for the stored sample
        assert topics[name]["Durability Policy"] == "Transient Local"
        assert topics[name]["Reliability Policy"] == "Reliable"
    for name in (c.TOPIC_CLOUD, c.TOPIC_DEPTH):  # best effort matches a reliable or best-effort publisher
        assert topics[name]["Reliability Policy"] == "Best Effort"
