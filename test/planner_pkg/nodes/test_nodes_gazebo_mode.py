"""sim_bridge in gazebo mode (no Gazebo here): gz/odom -> odom, depth/image -> cloud, setpoint ->
velocity command on gz/cmd_vel in the body-yaw frame, zero command for a refused setpoint."""
import math

import numpy as np
from nodes_ros_harness import wait_for
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.parameter import Parameter
from sensor_msgs.msg import Image, PointCloud2
from trajectory_msgs.msg import MultiDOFJointTrajectory

from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes.sim_bridge import SimBridge
from planner_pkg.types import Setpoint, VehicleState, quaternion_from_yaw


def test_gazebo_mode_adapts_topics_and_tracks_setpoints(ros):
    bridge = ros.add(SimBridge(context=ros.context, parameter_overrides=[
        Parameter("mode", value="gazebo"), Parameter("use_sim_time", value=False)]))
    probe = ros.node("gz_probe")
    got = {"odom": [], "cmd": [], "cloud": []}
    probe.create_subscription(Odometry, c.TOPIC_ODOM, got["odom"].append, c.ODOM_QOS)
    probe.create_subscription(Twist, "gz/cmd_vel", got["cmd"].append, c.SETPOINT_QOS)
    probe.create_subscription(PointCloud2, c.TOPIC_CLOUD, got["cloud"].append, c.SENSOR_QOS)
    gz_odom = probe.create_publisher(Odometry, "gz/odom", c.ODOM_QOS)
    depth = probe.create_publisher(Image, c.TOPIC_DEPTH, c.SENSOR_QOS)
    setpoint = probe.create_publisher(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, c.SETPOINT_QOS)
    yaw = math.pi / 2  # facing north
    state = VehicleState(1.0, [0.0, 0.0, 1.0], [0.0, 0.0, 0.0], quaternion_from_yaw(yaw), [0.0, 0.0, 0.0])
    msg = conv.state_to_odometry(state, "x500_depth_0/odom", "x500_depth_0/base")
    assert wait_for(lambda: (gz_odom.publish(msg) or len(got["odom"]) > 0), 10.0)
    assert got["odom"][-1].header.frame_id == "map" and got["odom"][-1].child_frame_id == "base_link"
    # a wall 2 m ahead fills the depth image -> a cloud in the map frame at y = 2
    wall = np.full((48, 64), 2.0, dtype=np.float32)
    assert wait_for(lambda: (depth.publish(conv.depth_to_image(wall, 1.0, "cam")) or len(got["cloud"]) > 0), 10.0)
    pts = conv.cloud_to_points(got["cloud"][-1])
    assert pts.shape == (48 * 64, 3) and np.allclose(pts[:, 1], 2.0, atol=1e-4)
    # a setpoint 1 m east of the vehicle: with the nose north, east is body -y (right)
    sp = conv.setpoint_to_msg(Setpoint.hold([1.0, 0.0, 1.0], yaw), 1.0)
    assert wait_for(lambda: (setpoint.publish(sp) or bridge.counters["setpoints"] > 0), 10.0)
    assert wait_for(lambda: got["cmd"] and got["cmd"][-1].linear.y < -0.5, 5.0)
    cmd = got["cmd"][-1]
    assert abs(cmd.linear.x) < 1e-6 and abs(cmd.angular.z) < 1e-6
    # a refused setpoint commands zero velocity (stop and hover)
    bad = conv.setpoint_to_msg(Setpoint.hold([1.0, 0.0, 1.0]), 1.0)
    bad.points[0].velocities[0].linear.x = math.inf
    n = bridge.counters["bad_setpoints"]
    assert wait_for(lambda: (setpoint.publish(bad) or bridge.counters["bad_setpoints"] > n), 10.0)
    assert wait_for(lambda: got["cmd"][-1].linear.y == 0.0 and got["cmd"][-1].linear.x == 0.0, 5.0)
