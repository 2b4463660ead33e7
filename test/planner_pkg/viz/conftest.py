"""test/planner_pkg/viz/: the live view. The ROS tests here use real rclpy over real DDS on loopback, each in a
ROS_DOMAIN_ID of its own (claimed as in test/planner_pkg/nodes/conftest.py); without rclpy they are skipped."""
import os
import sys

import pytest

if not os.environ.get("AMENT_PREFIX_PATH"):
    os.environ["AMENT_PREFIX_PATH"] = sys.prefix
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")


@pytest.fixture(autouse=True)
def fresh_domain_id(ros_domain_id):
    return ros_domain_id
