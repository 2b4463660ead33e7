"""Onboard graph on a real drone: planner + trajectory server (or the policy) + the flight-controller bridge.

    ros2 launch planner_pkg hardware.launch.py [namespace:=drone1] [params_file:=...]
        [use_sim_time:=false] [world:=] [planner:=policy]

``planner:=policy`` starts the learned depth policy node (``policy``, acceleration setpoints
straight to the fcu_bridge) instead of the planner and the trajectory server; the default is the
EGO graph (the params file's planner).

Odometry and the depth camera come from the drone (``odom``, ``depth/image``); the flight
controller bridge (``fcu_bridge``, MAVLink to PX4/ArduPilot) consumes ``setpoint``. Without
ROS 2's launch tools: ``python -m planner_pkg bringup hardware``.

Restarts as ``bringup``'s: every node restarts 1 s after exiting, at most 5 times, never after
exit code 2 (a refused parameter), which stops the launch (launch/node_supervision.py).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch_ros.actions import Node

PACKAGE = "planner_pkg"


def _nodes(context):
    from planner_pkg.nodes import bringup
    from planner_pkg.nodes.supervisor import launch_helpers

    sup = launch_helpers(__file__)  # launch/node_supervision.py
    restart = sup.restart_policy
    get, params_file, use_sim_time = sup.launch_values(context, get_package_share_directory(PACKAGE), "hardware.yaml")
    namespace = get("namespace")
    planner_params = {"use_sim_time": use_sim_time}
    if get("world"):  # optional: a known flying area bounds the goals
        planner_params.update(sup.world_geofence(get("world"))[2])
    fcu = Node(package=PACKAGE, executable="fcu_bridge", name="fcu_bridge", namespace=namespace,
               parameters=[params_file, {"use_sim_time": use_sim_time}], output="screen",
               **restart(bringup.FCU_BRIDGE))
    if get("planner") == "policy":
        # the policy node publishes setpoints itself: no planner, no trajectory server
        return [
            Node(package=PACKAGE, executable="policy_node", name="policy", namespace=namespace,
                 parameters=[params_file, planner_params], output="screen", **restart(bringup.POLICY)),
            fcu,
        ]
    if get("planner"):
        planner_params["planner"] = get("planner")
    return [
        Node(package=PACKAGE, executable="planner_node", name="planner", namespace=namespace,
             parameters=[params_file, planner_params], output="screen", **restart(bringup.PLANNER)),
        Node(package=PACKAGE, executable="traj_server", name="traj_server", namespace=namespace,
             parameters=[params_file, {"use_sim_time": use_sim_time}], output="screen",
             **restart(bringup.TRAJ_SERVER)),
        fcu,
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="", description="namespace of every node"),
        DeclareLaunchArgument("params_file", default_value="",
                              description="parameter YAML (default: share/planner_pkg/config/hardware.yaml)"),
        DeclareLaunchArgument("world", default_value="", description="optional world file bounding the goals"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="follow /clock (SITL)"),
        DeclareLaunchArgument("planner", default_value="",
                              description="planner (default: the params file's, EGO; policy: the learned policy)"),
        OpaqueFunction(function=_nodes),
    ])
