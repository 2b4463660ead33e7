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
import importlib.util
import os

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, LogInfo, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.logging import launch_config
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

PACKAGE = "planner_pkg"


def _supervision():
    """launch/node_supervision.py (restart rules), next to this file: its folder is not on sys.path."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node_supervision.py")
    spec = importlib.util.spec_from_file_location("planner_pkg_node_supervision", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _share(package):
    try:
        return get_package_share_directory(package)
    except PackageNotFoundError:
        return None


def _nodes(context):
    from planner_pkg.nodes import bringup
    from planner_pkg.nodes.sim_bridge import find_world
    from planner_pkg.world import load_world, to_sdf

    restart = _supervision().restart_policy
    share = _share(PACKAGE)
    get = lambda name: LaunchConfiguration(name).perform(context)  # noqa: E731
    namespace = get("namespace")
    params_file = get("params_file") or os.path.join(share, "config", "gazebo.yaml")
    use_sim_time = get("use_sim_time").lower() in ("true", "1", "yes")
    world_path = find_world(get("world"))
    world = load_world(world_path)
    sdf = os.path.join(launch_config.log_dir, world_path.stem + ".sdf")  # this run's log folder, kept with it
    with open(sdf, "w") as fh:
        fh.write(to_sdf(world, world_path.stem))
    start = [float(v) for v in get("start").strip("[] ").split(",")]
    actions = []
    gz_sim, gz_bridge = _share("ros_gz_sim"), _share("ros_gz_bridge")
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
    bounds = {"geofence_min_m": [float(v) for v in world.bounds_min],
              "geofence_max_m": [float(v) for v in world.bounds_max]}
    actions += [
        Node(package=PACKAGE, executable="sim_bridge", name="sim_bridge", namespace=namespace,
             parameters=[params_file, {"use_sim_time": use_sim_time, "mode": "gazebo",
                                       "world_file": str(world_path)}], output="screen",
             **restart(bringup.SIM_BRIDGE)),
        Node(package=PACKAGE, executable="planner_node", name="planner", namespace=namespace,
             parameters=[params_file, dict(bounds, use_sim_time=use_sim_time)], output="screen",
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
