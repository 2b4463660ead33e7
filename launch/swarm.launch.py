"""EGO-Swarm graph: the swarm simulator + one planner and trajectory server per drone, from one YAML.

    ros2 launch planner_pkg swarm.launch.py drones:=4 [starts:=S.json] [world:=forest_small.yaml]
        [params_file:=...] [use_sim_time:=true]

Drone i's planner and trajectory server run in namespace ``drone<i>`` (i from 0, as ``swarm fly``
numbers drones); the planners meet on ``/swarm/trajectories`` (docs/swarm.md). ``starts``: a JSON
list of ``[x, y, z]``, one per drone (``swarm fly``'s format; default a line across y at
x = -12 m, 1 m apart), checked as ``bringup`` checks them. Send each drone its goal on
``/drone<i>/goal_pose`` (RViz2's "2D Goal Pose" with the topic set); sim time starts once every
drone's planner and trajectory server have reported to the simulator (lockstep, docs/lockstep.md).

Without ROS 2's launch tools (the PyPI wheels): ``python -m planner_pkg bringup sim --drones N
[--starts S.json --goals G.json]`` starts the same nodes with the same parameters
(planner_pkg/nodes/swarm_bringup.py). Restarts as ``bringup``'s (launch/node_supervision.py): the
planners and trajectory servers restart, the simulator does not.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch_ros.actions import Node

PACKAGE = "planner_pkg"


def _nodes(context):
    from planner_pkg.app.swarm import read_points
    from planner_pkg.nodes import bringup, swarm_bringup
    from planner_pkg.nodes.supervisor import launch_helpers
    from planner_pkg.sim.params import QuadrotorParams

    sup = launch_helpers(__file__)  # launch/node_supervision.py
    restart = sup.restart_policy
    get, params_file, use_sim_time = sup.launch_values(context, get_package_share_directory(PACKAGE), "sim.yaml")
    drones = int(get("drones"))
    path, bounds, geofence = sup.world_geofence(get("world") or bringup.world_from_params(params_file))
    starts = read_points(get("starts"), "starts") if get("starts") else swarm_bringup.default_starts(drones)
    if starts.shape[0] != drones:
        raise ValueError(f"drones:={drones} but starts lists {starts.shape[0]} drones")
    swarm_bringup.check_starts(bounds, starts, QuadrotorParams().collision_radius_m)
    sim_params = {"use_sim_time": use_sim_time}
    sim_params.update(swarm_bringup.sim_overrides(str(path), starts, [0.0] * drones))
    nodes = [Node(package=PACKAGE, executable="swarm_sim", name="swarm_sim", namespace="",
                  parameters=[params_file, sim_params], output="screen", **restart(swarm_bringup.SWARM_SIM))]
    for i in range(drones):
        planner_params = {"use_sim_time": use_sim_time, **geofence}
        planner_params.update(swarm_bringup.drone_overrides(i, [j for j in range(drones) if j != i]))
        nodes += [
            Node(package=PACKAGE, executable="planner_node", name="planner", namespace=f"drone{i}",
                 parameters=[params_file, planner_params], output="screen", **restart(bringup.PLANNER)),
            Node(package=PACKAGE, executable="traj_server", name="traj_server", namespace=f"drone{i}",
                 parameters=[params_file, {"use_sim_time": use_sim_time}], output="screen",
                 **restart(bringup.TRAJ_SERVER)),
        ]
    return nodes


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("drones", default_value="2", description="number of drones (namespaces drone0 ...)"),
        DeclareLaunchArgument("starts", default_value="",
                              description="JSON file: list of [x, y, z] starts, one per drone (default: a line)"),
        DeclareLaunchArgument("params_file", default_value="",
                              description="parameter YAML (default: share/planner_pkg/config/sim.yaml)"),
        DeclareLaunchArgument("world", default_value="",
                              description="world file, or a shipped world's name (default: the params file's)"),
        DeclareLaunchArgument("use_sim_time", default_value="true", description="follow /clock from the simulator"),
        OpaqueFunction(function=_nodes),
    ])
