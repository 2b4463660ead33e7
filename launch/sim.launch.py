"""Simulated graph: embedded simulator + planner + trajectory server (+ RViz2), from one YAML.

    ros2 launch planner_pkg sim.launch.py [world:=forest_small.yaml] [start:='[-12.0, 0.0, 1.0]']
        [planner:=ego] [namespace:=drone1] [params_file:=...] [use_sim_time:=true] [rviz:=true]

``planner:=policy`` starts the learned depth policy node (``policy``, acceleration setpoints
straight to the simulator) instead of the planner and the trajectory server.

Without ROS 2's launch tools (the PyPI wheels): ``python -m planner_pkg bringup sim`` starts the
same nodes with the same parameters (planner_pkg/nodes/bringup.py). Send a goal with RViz2's
"2D Goal Pose" tool (topic ``goal_pose``) or ``ros2 topic pub --once /goal_pose ...``.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

PACKAGE = "planner_pkg"


def _nodes(context):
    share = get_package_share_directory(PACKAGE)
    get = lambda name: LaunchConfiguration(name).perform(context)  # noqa: E731
    namespace = get("namespace")
    params_file = get("params_file") or os.path.join(share, "config", "sim.yaml")
    use_sim_time = get("use_sim_time").lower() in ("true", "1", "yes")
    world = get("world")
    if not world:  # the params file's world, as `bringup sim` does
        from planner_pkg.nodes.bringup import world_from_params

        world = world_from_params(params_file) or ""
    sim_params = {"use_sim_time": use_sim_time}
    planner_params = {"use_sim_time": use_sim_time}
    if world:
        # the planner's geofence is the world's flight volume (the planner never sees the obstacles)
        from planner_pkg.nodes.sim_bridge import find_world
        from planner_pkg.world import load_world

        path = find_world(world)
        bounds = load_world(path)
        sim_params["world_file"] = str(path)
        planner_params["geofence_min_m"] = [float(v) for v in bounds.bounds_min]
        planner_params["geofence_max_m"] = [float(v) for v in bounds.bounds_max]
    start = get("start")
    if start:
        sim_params["start_m"] = [float(v) for v in start.strip("[] ").split(",")]
    rviz = Node(package="rviz2", executable="rviz2", name="rviz2", output="screen",
             arguments=["-d", os.path.join(share, "config", "planner.rviz")],
             parameters=[{"use_sim_time": use_sim_time}], condition=IfCondition(LaunchConfiguration("rviz")))
    sim = Node(package=PACKAGE, executable="sim_bridge", name="sim_bridge", namespace=namespace,
               parameters=[params_file, sim_params], output="screen", respawn=False)
    if get("planner") == "policy":
        # the policy node publishes setpoints itself: no planner, no trajectory server
        policy_params = {k: v for k, v in planner_params.items() if k != "planner"}
        return [
            sim,
            Node(package=PACKAGE, executable="policy_node", name="policy", namespace=namespace,
                 parameters=[params_file, policy_params], output="screen", respawn=True, respawn_delay=1.0),
            rviz,
        ]
    if get("planner"):
        planner_params["planner"] = get("planner")
    return [
        sim,
        Node(package=PACKAGE, executable="planner_node", name="planner", namespace=namespace,
             parameters=[params_file, planner_params], output="screen", respawn=True, respawn_delay=1.0),
        Node(package=PACKAGE, executable="traj_server", name="traj_server", namespace=namespace,
             parameters=[params_file, {"use_sim_time": use_sim_time}], output="screen", respawn=True,
             respawn_delay=1.0),
        rviz,
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="", description="namespace of every node (swarms)"),
        DeclareLaunchArgument("params_file", default_value="",
                              description="parameter YAML (default: share/planner_pkg/config/sim.yaml)"),
        DeclareLaunchArgument("world", default_value="",
                              description="world file, or a shipped world's name (default: the params file's)"),
        DeclareLaunchArgument("use_sim_time", default_value="true", description="follow /clock from the simulator"),
        DeclareLaunchArgument("start", default_value="", description="start position '[x, y, z]', m"),
        DeclareLaunchArgument("planner", default_value="", description="planner (ego, direct, policy)"),
        DeclareLaunchArgument("rviz", default_value="false", description="also start RViz2"),
        OpaqueFunction(function=_nodes),
    ])
