"""Gazebo graph: Gazebo (gz sim) with our world as SDF, an x500-style depth-camera quadrotor,
ros_gz_bridge (config/gz_bridge.yaml), the sim bridge in gazebo mode, planner, trajectory server.

    ros2 launch planner_pkg gazebo.launch.py [world:=forest_small.yaml] [model:=x500_depth]
        [start:='[-12.0, 0.0, 1.0]'] [namespace:=] [params_file:=...] [use_sim_time:=true]

``ros_gz_sim`` and ``ros_gz_bridge`` are included when installed; without them only our nodes
start (e.g. against a Gazebo started by hand). The world is exported with planner_pkg's SDF
export (``python -m planner_pkg world sdf``) as ``<world>.sdf`` into this launch's log directory
(``~/.ros/log/<date>-<host>-<pid>/``, under ``ROS_LOG_DIR`` where set), next to the launch log.

Restarts as ``bringup``'s: the planner and trajectory server restart 1 s after exiting, at most
5 times, never after exit code 2 (a refused parameter), which stops the launch
(launch/node_supervision.py); the sim bridge is not restarted.
"""
import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, LogInfo, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.logging import launch_config
from launch_ros.actions import Node

PACKAGE = "planner_pkg"


def _nodes(context):
    from planner_pkg.nodes import bringup
    from planner_pkg.nodes.supervisor import launch_helpers
    from planner_pkg.world import to_sdf

    sup = launch_helpers(__file__)  # launch/node_supervision.py
    restart = sup.restart_policy
    share = sup.package_share(PACKAGE)
    get, params_file, use_sim_time = sup.launch_values(context, share, "gazebo.yaml")
    namespace = get("namespace")
    world_path, world, geofence = sup.world_geofence(get("world"))
    sdf = os.path.join(launch_config.log_dir, world_path.stem + ".sdf")  # this run's log folder, kept with it
    with open(sdf, "w") as fh:
        fh.write(to_sdf(world, world_path.stem))
    start = sup.point(get("start"))
    actions = []
    gz_sim, gz_bridge = sup.package_share("ros_gz_sim"), sup.package_share("ros_gz_bridge")
    if gz_sim is not None:
        actions.append(IncludeLaunchDescription(
            PythonLaunchDescriptionSource(os.path.join(gz_sim, "launch", "gz_sim.launch.py")),
            launch_arguments={"gz_args": f"-r {sdf}"}.items()))
        actions.append(Node(package="ros_gz_sim", executable="create", output="screen",
                            arguments=["-name", "x500_depth_0", "-file", f"model://{get('model')}",
                                       "-x", str(start[0]), "-y", str(start[1]), "-z", str(start[2])]))
    else:
        actions.append(LogInfo(msg=f"ros_gz_sim is not installed: start Gazebo yourself with {sdf}"))
    if gz_bridge is not None:
        actions.append(Node(package="ros_gz_bridge", executable="parameter_bridge", namespace=namespace,
                            parameters=[{"config_file": os.path.join(share, "config", "gz_bridge.yaml"),
                                         "use_sim_time": use_sim_time}], output="screen"))
    else:
        actions.append(LogInfo(msg="ros_gz_bridge is not installed: no Gazebo topics will reach the graph"))
    actions += [
        Node(package=PACKAGE, executable="sim_bridge", name="sim_bridge", namespace=namespace,
             parameters=[params_file, {"use_sim_time": use_sim_time, "mode": "gazebo",
                                       "world_file": str(world_path)}], output="screen",
             **restart(bringup.SIM_BRIDGE)),
        Node(package=PACKAGE, executable="planner_node", name="planner", namespace=namespace,
             parameters=[params_file, dict(geofence, use_sim_time=use_sim_time)], output="screen",
             **restart(bringup.PLANNER)),
        Node(package=PACKAGE, executable="traj_server", name="traj_server", namespace=namespace,
             parameters=[params_file, {"use_sim_time": use_sim_time}], output="screen",
             **restart(bringup.TRAJ_SERVER)),
    ]
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="", description="namespace of our nodes"),
        DeclareLaunchArgument("params_file", default_value="",
                              description="parameter YAML (default: share/planner_pkg/config/gazebo.yaml)"),
        DeclareLaunchArgument("world", default_value="forest_small.yaml", description="world file to export"),
        DeclareLaunchArgument("use_sim_time", default_value="true", description="follow Gazebo's /clock"),
        DeclareLaunchArgument("model", default_value="x500_depth", description="Gazebo model to spawn"),
        DeclareLaunchArgument("start", default_value="[-12.0, 0.0, 1.0]", description="spawn position, m"),
        OpaqueFunction(function=_nodes),
    ])
