"""ROS 2 environment for the node tests: real rclpy, real DDS, loopback only.

Every test gets its own random ROS_DOMAIN_ID (so tests, and concurrent runs on one machine, do
not see each other's nodes; a bringup the test starts inherits it), discovery is limited to this host, and AMENT_PREFIX_PATH points at the interpreter's
prefix, where the ROS 2 PyPI wheels keep their ament index. Without rclpy the folder is skipped.
"""
import os
import random
import sys

import pytest

if not os.environ.get("AMENT_PREFIX_PATH"):
    os.environ["AMENT_PREFIX_PATH"] = sys.prefix
os.environ["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 200))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")

try:
    import rclpy  # noqa: F401

    HAVE_RCLPY = True
except ImportError:  # pragma: no cover - depends on the installation
    HAVE_RCLPY = False

collect_ignore_glob = [] if HAVE_RCLPY else ["test_nodes_*.py", "nodes_ros_harness.py"]


@pytest.fixture(autouse=True)
def fresh_domain_id(monkeypatch):
    """A fresh random DDS domain per test (Fast DDS allows 0..232), so that nothing a previous test
    left behind - a late publisher, transient-local samples - reaches this one."""
    monkeypatch.setenv("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 200)))


@pytest.fixture
def ros():
    from nodes_ros_harness import RosHarness

    harness = RosHarness()
    try:
        yield harness
    finally:
        harness.close()
