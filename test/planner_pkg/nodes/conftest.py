"""ROS 2 environment for the node tests: real rclpy, real DDS, loopback only.

Every test gets its own ROS_DOMAIN_ID, claimed so that no other test on this machine, of this
run or of a concurrent one, uses it at the same time (test/ros_domains.py; a bringup the test
starts inherits it); discovery is limited to this host, and AMENT_PREFIX_PATH points at the
interpreter's prefix, where the ROS 2 PyPI wheels keep their ament index. Without rclpy the folder
is skipped.
"""
import os
import sys

import pytest
from ros_domains import claim_ros_domain

if not os.environ.get("AMENT_PREFIX_PATH"):
    os.environ["AMENT_PREFIX_PATH"] = sys.prefix
_SESSION_DOMAIN = claim_ros_domain()  # for anything outside a test (held until this process ends)
os.environ["ROS_DOMAIN_ID"] = str(_SESSION_DOMAIN.id)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")

try:
    import rclpy  # noqa: F401

    HAVE_RCLPY = True
except ImportError:  # pragma: no cover - depends on the installation
    HAVE_RCLPY = False

collect_ignore_glob = [] if HAVE_RCLPY else ["test_nodes_*.py", "nodes_ros_harness.py"]


@pytest.fixture(autouse=True)
def fresh_domain_id(ros_domain_id):
    """A domain of this test's own (test/conftest.py), so that nothing a previous test left behind -
    a late publisher, transient-local samples - nor a concurrent run's graph reaches this one."""
    return ros_domain_id


@pytest.fixture
def ros():
    from nodes_ros_harness import RosHarness

    harness = RosHarness()
    try:
        yield harness
    finally:
        harness.close()
