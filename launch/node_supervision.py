"""What the launch files share: the restart policy of our nodes, the same as ``bringup``'s supervisor.

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

from planner_pkg.nodes.supervisor import EXIT_CONFIG, MAX_RESTARTS, NodeSpec


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

