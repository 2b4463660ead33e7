"""The suite's ROS domain ids (test/ros_domains.py): no two live tests on a machine share one, and an
id just given back is not handed out again before its quiet time."""
import subprocess
import sys

import pytest

import ros_domains


@pytest.fixture
def two_ids(tmp_path, monkeypatch):
    monkeypatch.setattr(ros_domains, "LOCK_DIR", tmp_path)
    monkeypatch.setattr(ros_domains, "DOMAIN_IDS", range(7, 9))


def test_live_claims_never_share_an_id_and_run_out_with_a_clear_error(two_ids):
    a, b = ros_domains.claim_ros_domain(), ros_domains.claim_ros_domain()
    assert {a.id, b.id} == {7, 8}
    with pytest.raises(RuntimeError, match="every ROS domain id 7..8 is in use"):
        ros_domains.claim_ros_domain()
    a.release()
    b.release()


def test_an_id_given_back_is_quiet_for_a_while_then_free_again(two_ids, monkeypatch):
    a, b = ros_domains.claim_ros_domain(), ros_domains.claim_ros_domain()
    a.release()
    with pytest.raises(RuntimeError):  # a is free but was released just now; b is held
        ros_domains.claim_ros_domain()
    monkeypatch.setattr(ros_domains, "QUIET_S", 0.0)
    c = ros_domains.claim_ros_domain()
    assert c.id == a.id
    c.release()
    b.release()
    a.release()  # a second release is a no-op


def test_a_claim_held_by_another_process_is_respected(two_ids, tmp_path, monkeypatch):
    """Another test run (another process) holding id 7: this process gets 8, every time."""
    monkeypatch.setattr(ros_domains, "QUIET_S", 0.0)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()", str(tmp_path / "7.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for _ in range(5):
            d = ros_domains.claim_ros_domain()
            assert d.id == 8
            d.release()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
