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
    """One rclpy context with an executor spinning in a thread; nodes are added by the test."""

    def __init__(self):
        import rclpy
        from rclpy.executors import MultiThreadedExecutor

        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context)
        self.executor = MultiThreadedExecutor(num_threads=2, context=self.context)
        self.nodes = []
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def add(self, node):
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def node(self, name: str):
        from rclpy.node import Node

        return self.add(Node(name, context=self.context))

    def close(self):
        self.executor.shutdown(timeout_sec=2.0)
        self.thread.join(timeout=2.0)
        for n in self.nodes:
            n.destroy_node()
        if self.context.ok():
            self.context.shutdown()
