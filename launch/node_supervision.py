"""What the launch files share: the restart policy of our nodes, the same as ``bringup``'s
supervisor, and how they read their launch arguments and worlds.

A node restarts ``respawn_delay_s`` after it exits, at most ``MAX_RESTARTS`` times; then the
launch stops. A node that exits with code 2 refused its configuration (a bad parameter,
planner_pkg.nodes.common.EXIT_CONFIG): restarting cannot fix that, so it is not restarted and
the launch stops, naming it. Nothing of this applies while the launch itself is shutting down.

Stopping is a failure of the launch, not an end: ``ros2 launch`` must exit non-zero so a script or
a service manager sees it. launch's only way to a non-zero exit is an exception in an action
(``LaunchService.run`` then shuts everything down in order and returns 1; a ``Shutdown`` event
returns 0), so the exit handler's last action raises ``NodeGaveUp``.

Not a launch file (``ros2 launch`` lists only ``*.launch.py``): each launch file loads it from its
own folder (installed next to it in share/planner_pkg/launch), as that folder is not on ``sys.path``.
"""
import inspect
import os
from typing import Optional

from planner_pkg.nodes.supervisor import EXIT_CONFIG, MAX_RESTARTS, NodeSpec

TRUE = ("true", "1", "yes")  # launch argument values that mean true


def package_share(package: str) -> Optional[str]:
    """share/<package> of an installed ROS package, or None where it is not installed."""
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        return get_package_share_directory(package)
    except PackageNotFoundError:
        return None


def launch_values(context, share: Optional[str], default_params: str):
    """What a launch file's OpaqueFunction reads first: ``(get, params_file, use_sim_time)``.
    ``get(name)``: the value of launch argument ``name`` (a string); ``params_file``: the
    ``params_file:=`` argument, else ``<share>/config/<default_params>``; ``use_sim_time``: the
    ``use_sim_time:=`` argument as a bool."""
    from launch.substitutions import LaunchConfiguration

    def get(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    params_file = get("params_file") or os.path.join(share, "config", default_params)
    return get, params_file, get("use_sim_time").lower() in TRUE


def world_geofence(name: str):
    """``(path, world, geofence)`` of a world file, or a shipped world's name: ``geofence`` is the
    planner's ``geofence_min_m`` / ``geofence_max_m`` parameters, the world's flight volume (the
    planner never sees the obstacles)."""
    from planner_pkg.nodes.sim_bridge import find_world
    from planner_pkg.world import load_world

    path = find_world(name)
    world = load_world(path)
    return path, world, {"geofence_min_m": [float(v) for v in world.bounds_min],
                         "geofence_max_m": [float(v) for v in world.bounds_max]}


def point(text: str) -> list:
    """A launch argument ``'[x, y, z]'`` (brackets optional) as floats."""
    return [float(v) for v in text.strip("[] ").split(",")]


def launch_has_max_retries() -> bool:
    """Whether this ``launch`` takes ``respawn_max_retries`` (launch >= 3.1, ROS 2 Jazzy; Humble's has none)."""
    from launch import actions

    for cls in (getattr(actions, "ExecuteLocal", None), getattr(actions, "ExecuteProcess", None)):
        if cls is not None and "respawn_max_retries" in inspect.signature(cls.__init__).parameters:
            return True
    return False


def restart_policy(spec: NodeSpec) -> dict:
    """``launch_ros.actions.Node`` keyword arguments for the node ``spec`` (bringup's NodeSpec):
    respawn, respawn_delay, respawn_max_retries (where supported) and an ``on_exit`` handler
    enforcing the rules above."""
    kwargs = {"respawn": spec.respawn, "on_exit": _exit_handler(spec)}
    if spec.respawn:
        # > 0 matters: launch checks for a respawn right after the exit, and it is during this
        # delay that the handler stopping the launch (exit 2) cancels the pending restart
        kwargs["respawn_delay"] = float(spec.respawn_delay_s)
        if launch_has_max_retries():
            kwargs["respawn_max_retries"] = MAX_RESTARTS
    return kwargs


class NodeGaveUp(RuntimeError):
    """A node that cannot come up (refused configuration, or crashed past its restarts)."""


def _fail(reason: str):
    def fail(context):
        raise NodeGaveUp(reason)

    return fail


def _exit_handler(spec: NodeSpec):
    exits = []

    def on_exit(event, context):
        """Called by launch (ProcessExited, LaunchContext) each time the node's process ends."""
        from launch.actions import LogInfo, OpaqueFunction

        if context.is_shutdown:
            return None  # the launch is stopping: every exit is expected
        code = event.returncode
        exits.append(code)
        if code == EXIT_CONFIG:
            reason = (f"{spec.name} refused its configuration (exit {code}; its log names the parameter): "
                      f"not restarting it, stopping the launch")
        elif spec.respawn and len(exits) > MAX_RESTARTS:
            reason = (f"{spec.name} exited {len(exits)} times (last exit code {code}): "
                      f"not restarting it, stopping the launch")
        else:
            return None  # launch restarts it (respawn) or it simply ended
        return [LogInfo(msg=f"[planner_pkg] {reason}"), OpaqueFunction(function=_fail(reason))]

    return on_exit

