"""Fixtures the whole suite shares (this folder is on sys.path through this file: ros_domains.py)."""
import pytest

from ros_domains import claim_ros_domain


@pytest.fixture
def ros_domain_id(monkeypatch):
    """This test's own ROS_DOMAIN_ID (set in the environment, so a bringup the test starts inherits it)."""
    domain = claim_ros_domain()
    monkeypatch.setenv("ROS_DOMAIN_ID", str(domain.id))
    try:
        yield domain.id
    finally:
        domain.release()
