"""Simulated graph: embedded simulator + planner + trajectory server (+ RViz2), from one YAML.

    ros2 launch planner_pkg sim.launch.py [world:=forest_small.yaml] [start:='[-12.0, 0.0, 1.0]']
        [planner:=ego|direct|policy|racer] [track:=FILE] [namespace:=drone1] [params_file:=...]
        [use_sim_time:=true] [rviz:=true]

``planner:=policy`` starts the learned depth policy node (``policy``, acceleration setpoints
straight to the simulator) instead of the planner and the trajectory server. ``planner:=racer
track:=FILE`` starts the gate racer (``racer``, body-rate commands) instead; the simulator's world
is the track's gate frames (written into this launch's log folder) and it starts facing gate 0.

Without ROS 2's launch tools (the PyPI wheels): ``python -m planner_pkg bringup sim`` starts the
same nodes with the same parameters (planner_pkg/nodes/bringup.py). Send a goal with RViz2's
"2D Goal Pose" tool (topic ``goal_pose``) or ``ros2 topic pub --once /goal_pose ...``.
``rviz:=true`` starts RViz2 where it is installed (a log line says so where it is not).

Restarts as ``bringup``'s: the planner, trajectory server and policy restart 1 s after exiting,
at most 5 times, never after exit code 2 (a refused parameter), which stops the launch
(launch/node_supervision.py); the simulator is not restarted.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch_ros.actions import Node

PACKAGE = "planner_pkg"


def _nodes(context):
    from planner_pkg.nodes import bringup
    from planner_pkg.nodes.supervisor import launch_helpers

    sup = launch_helpers(__file__)  # launch/node_supervision.py
    restart = sup.restart_policy
    share = get_package_share_directory(PACKAGE)
    get, params_file, use_sim_time = sup.launch_values(context, share, "sim.yaml")
    namespace = get("namespace")
    world = get("world")
    if not world:  # the params file's world, as `bringup sim` does
        world = bringup.world_from_params(params_file) or ""
    sim_params = {"use_sim_time": use_sim_time}
    planner_params = {"use_sim_time": use_sim_time}
    if world:
        path, _, geofence = sup.world_geofence(world)
        sim_params["world_file"] = str(path)
        planner_params.update(geofence)
    start = get("start")
    if start:
        sim_params["start_m"] = sup.point(start)
    rviz = []
    if get("rviz").lower() in sup.TRUE:
        if sup.package_share("rviz2") is not None:
            rviz.append(Node(package="rviz2", executable="rviz2", name="rviz2", output="screen",
                             arguments=["-d", os.path.join(share, "config", "planner.rviz")],
                             parameters=[{"use_sim_time": use_sim_time}]))
        else:  # launching it would fail the whole launch ("package 'rviz2' not found")
            rviz.append(LogInfo(msg="rviz:=true but rviz2 is not installed (apt install ros-$ROS_DISTRO-rviz2): "
                                    "starting the graph without it"))
    if get("planner") == "racer":
        return _racer_nodes(get, params_file, sim_params, use_sim_time, namespace, restart) + rviz
    # the lockstep participants the simulator waits for before sim time starts (as `bringup sim`)
    sim_params["lockstep_participants"] = ["policy"] if get("planner") == "policy" else ["planner", "traj_server"]
    sim = Node(package=PACKAGE, executable="sim_bridge", name="sim_bridge", namespace=namespace,
               parameters=[params_file, sim_params], output="screen", **restart(bringup.SIM_BRIDGE))
    if get("planner") == "policy":
        # the policy node publishes setpoints itself: no planner, no trajectory server
        policy_params = {k: v for k, v in planner_params.items() if k != "planner"}
        return [
            sim,
            Node(package=PACKAGE, executable="policy_node", name="policy", namespace=namespace,
                 parameters=[params_file, policy_params], output="screen", **restart(bringup.POLICY)),
        ] + rviz
    if get("planner"):
        planner_params["planner"] = get("planner")
    return [
        sim,
        Node(package=PACKAGE, executable="planner_node", name="planner", namespace=namespace,
             parameters=[params_file, planner_params], output="screen", **restart(bringup.PLANNER)),
        Node(package=PACKAGE, executable="traj_server", name="traj_server", namespace=namespace,
             parameters=[params_file, {"use_sim_time": use_sim_time}], output="screen",
             **restart(bringup.TRAJ_SERVER)),
    ] + rviz


def _racer_nodes(get, params_file, sim_params, use_sim_time, namespace, restart):
    """planner:=racer track:=FILE: sim_bridge on the track's gate frames + the racer (as `bringup sim
    --planner racer --track FILE`)."""
    from launch.logging import launch_config

    from planner_pkg.nodes import bringup
    from planner_pkg.nodes.params import read_params_file
    from planner_pkg.nodes.racer_node import race_world

    track = get("track")
    if not track or get("world"):
        raise RuntimeError("planner:=racer needs track:=FILE (a gate track) and no world:= (the world is the "
                           "track's gate frames)")
    model = bringup._sim_bridge_value(read_params_file(params_file), "model_path", "racer") or ""
    world_file, start, yaw = race_world(track, model, launch_config.log_dir)
    sim_params["world_file"] = world_file
    sim_params.setdefault("start_m", [float(v) for v in start])
    sim_params["start_yaw_rad"] = float(yaw)
    sim_params["lockstep_participants"] = ["racer"]
    return [
        Node(package=PACKAGE, executable="sim_bridge", name="sim_bridge", namespace=namespace,
             parameters=[params_file, sim_params], output="screen", **restart(bringup.SIM_BRIDGE)),
        Node(package=PACKAGE, executable="racer_node", name="racer", namespace=namespace,
             parameters=[params_file, {"use_sim_time": use_sim_time, "track_file": os.path.abspath(track)}],
             output="screen", **restart(bringup.RACER)),
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
        DeclareLaunchArgument("planner", default_value="", description="planner (ego, direct, policy, racer)"),
        DeclareLaunchArgument("track", default_value="", description="gate track file for planner:=racer"),
        DeclareLaunchArgument("rviz", default_value="false", description="also start RViz2 (if installed)"),
        OpaqueFunction(function=_nodes),
    ])
