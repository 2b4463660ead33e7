"""Helpers of the node tests (a unique module name: test folders have no __init__.py)."""
import threading
import time


def wait_for(predicate, timeout_s: float, period_s: float = 0.02) -> bool:
    """Poll ``predicate`` until it is true or ``timeout_s`` wall seconds pass."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(period_s)
    return bool(predicate())


class RosHarness:
    """One rclpy context; every node added by the test spins on its own executor in its own thread,
    as if it were its own process (the way ``bringup`` and ``ros2 launch`` run them).

    One executor per node rather than one MultiThreadedExecutor for all: rclpy's
    MultiThreadedExecutor starves timers and subscriptions when several busy nodes share it
    (ros2/rclpy#1223; measured here: a 100 Hz timer ran at 2-3 Hz next to a 50 Hz probe node).
    """

    def __init__(self):
        import rclpy

        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context)
        self.nodes = []
        self._spinners = []

    def add(self, node, executor=None):
        """Spin ``node`` on ``executor`` (default: a new SingleThreadedExecutor) in a new thread."""
        from rclpy.executors import SingleThreadedExecutor

        executor = executor if executor is not None else SingleThreadedExecutor(context=self.context)
        executor.add_node(node)
        thread = threading.Thread(target=executor.spin, daemon=True, name=f"spin-{node.get_name()}")
        thread.start()
        self.nodes.append(node)
        self._spinners.append((executor, thread))
        return node

    def node(self, name: str):
        from rclpy.node import Node

        return self.add(Node(name, context=self.context))

    def close(self):
        for executor, _ in self._spinners:
            executor.shutdown(timeout_sec=2.0)
        for _, thread in self._spinners:
            thread.join(timeout=2.0)
        for n in self.nodes:
            n.destroy_node()
        if self.context.ok():
            self.context.shutdown()


def started_pids(text: str):
    """(node, pid) of every "started NAME (pid N)" line the bringup printed."""
    import re

    return [(m.group(1), int(m.group(2))) for m in re.finditer(r"started (\w+) \(pid (\d+)\)", text)]


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def kill_leftovers(proc, log_path) -> None:
    """Last resort after a bringup subprocess test, pass or fail: SIGKILL the bringup's process
    group if it still runs and every node process its log says it started; nothing may outlive
    the test."""
    import os
    import signal
    from pathlib import Path

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    for _, pid in started_pids(Path(log_path).read_text()):
        if pid_alive(pid):
            os.killpg(pid, signal.SIGKILL)
