"""test/viz: the live view. The ROS tests here use real rclpy over real DDS on loopback, each in a
fresh random ROS_DOMAIN_ID (as test/nodes/conftest.py does); without rclpy they are skipped."""
import os
import random
import sys

import pytest

if not os.environ.get("AMENT_PREFIX_PATH"):
    os.environ["AMENT_PREFIX_PATH"] = sys.prefix
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")


@pytest.fixture(autouse=True)
def fresh_domain_id(monkeypatch):
    monkeypatch.setenv("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 200)))
