"""The bringup's process supervisor: starts the node processes, watches, restarts and stops them.

Rules (the launch files apply the same ones, ``launch/node_supervision.py``): a node that exits
while the graph runs is reported; one that crashed is restarted after its ``respawn_delay_s`` when
its :class:`NodeSpec` says ``respawn`` (at most :data:`MAX_RESTARTS` times); one that is not
restarted (the simulator, the recorder, or a node out of restarts) ends the graph with exit code 1;
one that refused its configuration (exit code 2) is not restarted and the graph ends with exit 2.
Stopping sends SIGINT (once each child has its handler in place: the ``PLANNER_PKG_READY_FD`` pipe
of ``nodes/run.py``), SIGTERM after ``stop_timeout_s``, then SIGKILL. Each child runs in its own
session and gets SIGTERM from the kernel if the supervisor itself dies (``PR_SET_PDEATHSIG``).
ROS-free: it runs commands, whatever they are.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

from planner_pkg.nodes.run import READY_FD_ENV

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_CONFIG", "MAX_RESTARTS", "NodeSpec", "Supervisor",
           "launch_helpers"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_CONFIG = 2  # a node refused its parameters (planner_pkg.nodes.common.EXIT_CONFIG)
MAX_RESTARTS = 5


def launch_helpers(launch_file: str):
    """The module ``node_supervision.py`` next to ``launch_file`` (a launch file's ``__file__``:
    launch/, installed as share/planner_pkg/launch): what the launch files share (these rules,
    reading their arguments). Loaded from that folder by path, as it is not on ``sys.path``."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(launch_file)), "node_supervision.py")
    spec = importlib.util.spec_from_file_location("planner_pkg_node_supervision", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class NodeSpec:
    """One node of the graph, as the launch files declare it.

    name: ROS node name; module: ``python -m`` module; executable: console script (launch files);
    respawn / respawn_delay_s: restart after a crash, and how long after.
    """

    name: str
    module: str
    executable: str
    respawn: bool = True
    respawn_delay_s: float = 1.0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Supervisor:
    """Starts, watches, restarts and stops the node processes."""

    def __init__(self, commands: Dict[str, List[str]], specs: Dict[str, NodeSpec], env: dict,
                 stop_timeout_s: float = 5.0, log=print):
        self.commands, self.specs, self.env = commands, specs, env
        self.stop_timeout_s = stop_timeout_s
        self.log = log
        self.procs: Dict[str, subprocess.Popen] = {}
        self.restarts: Dict[str, int] = {name: 0 for name in commands}
        self._restart_at: Dict[str, float] = {}
        self.failed: Optional[int] = None  # exit code the whole bringup should end with
        self._ready_pipes: Dict[str, int] = {}  # read end of each child's "SIGINT handler installed" pipe

    def start(self, name: str) -> None:
        self._close_ready_pipe(name)
        read_fd, write_fd = os.pipe()
        env = dict(os.environ if self.env is None else self.env, **{READY_FD_ENV: str(write_fd)})
        try:
            self.procs[name] = subprocess.Popen(self.commands[name], env=env, start_new_session=True,
                                                pass_fds=(write_fd,),
                                                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self._ready_pipes[name] = read_fd
        self.log(f"[bringup] started {name} (pid {self.procs[name].pid})")

    def _close_ready_pipe(self, name: str) -> None:
        fd = self._ready_pipes.pop(name, None)
        if fd is not None:
            os.close(fd)

    def _wait_until_interruptible(self, names: List[str], timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until each child started through ``nodes.run`` has its SIGINT
        handler in place: a SIGINT during the interpreter's own start-up would end it with a
        traceback. A child that announces nothing (not a ``nodes.run`` command) or has exited
        closes its end of the pipe, which ends the wait for it too."""
        pending = {self._ready_pipes[n]: n for n in names if n in self._ready_pipes}
        deadline = time.monotonic() + timeout_s
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self.log(f"[bringup] {', '.join(sorted(pending.values()))}: not yet interruptible after "
                         f"{timeout_s:g} s; interrupting anyway")
                return
            readable, _, _ = select.select(list(pending), [], [], min(left, 0.5))
            for fd in readable:
                self._close_ready_pipe(pending.pop(fd))  # the byte (handler in place) or EOF (exited)

    def start_all(self) -> None:
        for name in self.commands:
            self.start(name)

    def poll(self) -> None:
        """Check the children once: report exits, schedule and perform restarts."""
        now = time.monotonic()
        for name, proc in list(self.procs.items()):
            code = proc.poll()
            if code is None or name in self._restart_at:
                continue
            spec = self.specs[name]
            if code == EXIT_CONFIG:
                self.log(f"[bringup] {name} refused its configuration (exit {code}); fix the parameters. Stopping.")
                self.failed = EXIT_CONFIG
                continue
            what = f"signal {-code}" if code < 0 else f"exit code {code}"
            if spec.respawn and self.restarts[name] < MAX_RESTARTS:
                self.log(f"[bringup] {name} died ({what}); restarting in {spec.respawn_delay_s:g} s "
                         f"({self.restarts[name] + 1}/{MAX_RESTARTS})")
                self._restart_at[name] = now + spec.respawn_delay_s
            else:
                self.log(f"[bringup] {name} ended ({what}); not restarting. Stopping.")
                del self.procs[name]
                self.failed = EXIT_FAILED  # the graph lost a node for good (the simulator, say): a failed run
        for name, when in list(self._restart_at.items()):
            if now >= when:
                del self._restart_at[name]
                self.restarts[name] += 1
                self.start(name)

    def alive(self) -> List[str]:
        return [n for n, p in self.procs.items() if p.poll() is None]

    def stop(self) -> None:
        """SIGINT (once each child can take it), then SIGTERM, then SIGKILL; waits for every child."""
        self._wait_until_interruptible([n for n, p in self.procs.items() if p.poll() is None], self.stop_timeout_s)
        for sig, grace in ((signal.SIGINT, self.stop_timeout_s), (signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
            running = [p for p in self.procs.values() if p.poll() is None]
            if not running:
                break
            for p in running:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(p.poll() is None for p in running):
                time.sleep(0.05)
        for name, p in self.procs.items():
            if p.poll() is None:  # pragma: no cover - SIGKILL cannot be refused
                p.wait()
            self._close_ready_pipe(name)
            self.log(f"[bringup] {name} stopped (exit {p.returncode})")
