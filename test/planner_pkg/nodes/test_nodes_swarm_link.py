"""The swarm broadcast link (nodes/swarm_link.py) without a graph: what a broadcast is stamped with,
and which of a peer's broadcasts a planning tick takes. Over DDS: test_nodes_swarm.py."""
from types import SimpleNamespace

from planner_pkg.nodes.swarm_link import RosBroadcast
from planner_pkg.planning.swarm import hover_spline


class _Node:
    """What RosBroadcast uses of an rclpy node, with a settable ROS clock (ns)."""

    def __init__(self, now_ns: int):
        self.now_ns = now_ns
        self.sent = []

    def get_clock(self):
        return SimpleNamespace(now=lambda: SimpleNamespace(nanoseconds=self.now_ns))

    def create_publisher(self, _type, topic, _qos):
        return SimpleNamespace(topic_name=topic, publish=self.sent.append)

    def create_subscription(self, *_args):
        return None

    def get_logger(self):
        return SimpleNamespace(warning=lambda _msg: None)


def test_a_broadcast_is_stamped_with_the_clock_of_the_tick_that_sent_it_and_used_from_the_next_tick_on():
    # drone 1's first planning tick at 0.3 s resets its planner, which broadcasts a hover with
    # t_now = 0: stamped 0, a peer ticking at 0.3 s after it arrived took it and one ticking before
    # did not (a load-dependent swarm flight)
    node1 = _Node(now_ns=300_000_000)
    link1 = RosBroadcast(node1, drone_id=1)
    link1.publish(1, hover_spline([3.0, 0.0, 1.0]), t_start=0.0, t_now=0.0)
    (msg,) = node1.sent
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (0, 300_000_000)

    link0 = RosBroadcast(_Node(now_ns=300_000_000), drone_id=0)
    link0._on_broadcast(msg, SimpleNamespace(publisher_gid=b"1"))
    assert link0.take_pending(300_000_000) == 0  # drone 0's tick of the same instant: never
    assert link0.take_pending(400_000_000) == 1  # its next tick: always (the lockstep waits for it)
    assert link0.table.split(0.4, exclude=0)[0][0].drone_id == 1
