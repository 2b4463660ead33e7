"""Node start-up: ``python -m planner_pkg.nodes.run <module> [--ros-args ...]`` and the node
executables (``setup.py`` console scripts) start a node through here.

Importing a node (rclpy, NumPy, the planner) takes a second or more; a Ctrl-C (or the bringup's
SIGINT on shutdown) in that second would otherwise end it with a ``KeyboardInterrupt`` traceback
and exit code 1. Here a SIGINT before the node's own handling is in place (``rclpy.init`` installs
it) ends the process at once with exit code 0: nothing had started that needs stopping.
This module imports nothing heavy, so the handler is in place before the slow imports begin.

Before this module runs, the interpreter itself starts (site-packages, the ``-m`` package
imports: 0.4 s and more on a loaded machine), with Python's own SIGINT handling, which a SIGINT
ends with a ``KeyboardInterrupt`` traceback. A supervisor closes that window: it passes the write
end of a pipe as ``PLANNER_PKG_READY_FD`` and sends its SIGINT only after the byte written here,
once the handler is in place, has arrived (``nodes/supervisor.py``).
"""
from __future__ import annotations

import importlib
import os
import signal
import sys

#: environment variable naming the file descriptor on which the handler's installation is announced
READY_FD_ENV = "PLANNER_PKG_READY_FD"

#: executable name -> node module (every module has ``main(args=None) -> int``)
NODE_MODULES = {
    "sim_bridge": "planner_pkg.nodes.sim_bridge",
    "planner_node": "planner_pkg.nodes.planner_node",
    "traj_server": "planner_pkg.nodes.traj_server",
    "fcu_bridge": "planner_pkg.nodes.fcu_bridge",
    "policy_node": "planner_pkg.nodes.policy_node",
    "recorder": "planner_pkg.nodes.recorder",
    "viz_node": "planner_pkg.nodes.viz_node",
    "racer_node": "planner_pkg.nodes.racer_node",
    "swarm_sim": "planner_pkg.nodes.swarm_sim",
}


_interrupted: list = []


def _exit_quietly(signum, _frame) -> None:
    _interrupted.append(signum)
    raise SystemExit(0)


def _announce_handler_installed() -> None:
    """Write one byte on the supervisor's pipe (if there is one) and close it."""
    fd = os.environ.pop(READY_FD_ENV, None)
    if fd is None:
        return
    try:
        os.write(int(fd), b"1")
        os.close(int(fd))
    except (OSError, ValueError):
        pass  # not our pipe (a stale variable): the supervisor, if any, falls back on its timeout


def run(module: str, argv=None) -> int:
    """Import node ``module`` with the quiet SIGINT handler in place, then run its ``main``."""
    if module not in NODE_MODULES.values():
        print(f"planner_pkg.nodes.run: {module!r} is not a node module; known: "
              f"{', '.join(sorted(NODE_MODULES.values()))}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, _exit_quietly)
    _announce_handler_installed()
    try:
        node_module = importlib.import_module(module)
    except BaseException:
        if _interrupted:  # the interrupt, or what it left half-imported: a stop, not a failure
            return 0
        raise
    if _interrupted:
        # a library's bare ``except:`` swallowed the SystemExit and its import went on: still a stop
        return 0
    return node_module.main(argv)


def _entry(name: str):
    def main() -> int:
        return run(NODE_MODULES[name])
    main.__name__ = main.__qualname__ = name
    return main


sim_bridge = _entry("sim_bridge")
planner_node = _entry("planner_node")
traj_server = _entry("traj_server")
fcu_bridge = _entry("fcu_bridge")
policy_node = _entry("policy_node")
recorder = _entry("recorder")
viz_node = _entry("viz_node")
racer_node = _entry("racer_node")
swarm_sim = _entry("swarm_sim")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: python -m planner_pkg.nodes.run <node module> [--ros-args ...]", file=sys.stderr)
        sys.exit(2)
    target = sys.argv.pop(1)
    sys.exit(run(target))
