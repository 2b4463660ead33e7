"""Gazebo graph: Gazebo (gz sim) with our world as SDF, an x500-style depth-camera quadrotor,
ros_gz_bridge (config/gz_bridge.yaml), the sim bridge in gazebo mode, planner, trajectory server.

    ros2 launch planner_pkg gazebo.launch.py [world:=forest_small.yaml] [model:=x500_depth]
        [start:='[-12.0, 0.0, 1.0]'] [namespace:=] [params_file:=...] [use_sim_time:=true]

``ros_gz_sim`` and ``ros_gz_bridge`` are included when installed; without them only our nodes
start (e.g. against a Gazebo started by hand). The world is exported with planner_pkg's SDF
export (``python -m planner_pkg world sdf``) into the launch's log directory.
"""
import os
import tempfile

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, LogInfo, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

PACKAGE = "planner_pkg"


def _share(package):
    try:
        return get_package_share_directory(package)
    except PackageNotFoundError:
        return None


def _nodes(context):
    from planner_pkg.nodes.sim_bridge import find_world
    from planner_pkg.world import load_world, to_sdf

    share = _share(PACKAGE)
    get = lambda name: LaunchConfiguration(name).perform(context)  # noqa: E731
    namespace = get("namespace")
    params_file = get("params_file") or os.path.join(share, "config", "gazebo.yaml")
    use_sim_time = get("use_sim_time").lower() in ("true", "1", "yes")
    world_path = find_world(get("world"))
    world = load_world(world_path)
    sdf = os.path.join(tempfile.mkdtemp(prefix="planner_pkg_gz_"), world_path.stem + ".sdf")
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
                                       "world_file": str(world_path)}], output="screen", respawn=True,
             respawn_delay=1.0),
        Node(package=PACKAGE, executable="planner_node", name="planner", namespace=namespace,
             parameters=[params_file, dict(bounds, use_sim_time=use_sim_time)], output="screen", respawn=True,
             respawn_delay=1.0),
        Node(package=PACKAGE, executable="traj_server", name="traj_server", namespace=namespace,
             parameters=[params_file, {"use_sim_time": use_sim_time}], output="screen", respawn=True,
             respawn_delay=1.0),
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
