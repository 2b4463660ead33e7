"""MAVLink 2 signing: the key file, signed flights, and rejection of unsigned, wrongly signed and
replayed frames (so a spoofed ACK, telemetry or command is never accepted)."""
import os
import socket
import threading
import time

import numpy as np
import pytest
from mavlink_peer import PX4, BridgeAndPeer, fly_to, loopback_config, wait_until
from pymavlink.dialects.v20 import ardupilotmega as mavlink2

from planner_pkg.bridges.mavlink import BridgeConfig, CommandTimeout, FcuBridge, LinkState
from planner_pkg.bridges.mavlink.commands import MAV_CMD_COMPONENT_ARM_DISARM
from planner_pkg.bridges.mavlink.signing import load_signing_key, signing_timestamp_now, write_signing_key
from planner_pkg.types import Setpoint

KEY = bytes(range(32))
WRONG_KEY = bytes(range(1, 33))


@pytest.fixture
def key_path(tmp_path):
    path = str(tmp_path / "mavlink.key")
    write_signing_key(path, KEY)
    return path


def forged(build, key=None, system=1, component=1, link_id=0, timestamp=None):
    """Wire bytes of ``build(mav)`` from ``system/component``, signed with ``key`` (or unsigned)."""
    mav = mavlink2.MAVLink(None, system, component)
    if key is not None:
        mav.signing.secret_key, mav.signing.sign_outgoing, mav.signing.link_id = key, True, link_id
        mav.signing.timestamp = signing_timestamp_now() if timestamp is None else timestamp
    return build(mav).pack(mav)


# ---------------------------------------------------------------------------------------------
# Key file
# ---------------------------------------------------------------------------------------------
def test_key_file_round_trip_and_mode(tmp_path, key_path):
    assert load_signing_key(key_path) == KEY
    assert os.stat(key_path).st_mode & 0o777 == 0o600
    with pytest.raises(FileExistsError):
        write_signing_key(key_path)  # never overwrites a key
    raw = tmp_path / "raw.key"
    raw.write_bytes(KEY)
    raw.chmod(0o600)
    assert load_signing_key(str(raw)) == KEY


def test_key_file_with_loose_permissions_or_bad_content_is_refused(tmp_path, key_path):
    os.chmod(key_path, 0o644)
    with pytest.raises(PermissionError, match="chmod 600"):
        load_signing_key(key_path)
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    bad.chmod(0o600)
    with pytest.raises(ValueError, match="32 raw bytes or 64 hex characters"):
        load_signing_key(str(bad))
    with pytest.raises(FileNotFoundError):
        load_signing_key(str(tmp_path / "missing.key"))
    link = tmp_path / "link.key"
    link.symlink_to(bad)
    with pytest.raises(PermissionError, match="symbolic link"):
        load_signing_key(str(link))
    with pytest.raises(PermissionError, match="chmod 600"):  # the bridge refuses to start with it
        FcuBridge(BridgeConfig.from_dict(loopback_config(signing_key_path=key_path)))


# ---------------------------------------------------------------------------------------------
# On the wire
# ---------------------------------------------------------------------------------------------
def test_signed_flight(key_path):
    with BridgeAndPeer(PX4, signing_key_path=key_path, peer_key=KEY) as (bridge, peer):
        bridge.set_mode("offboard")
        bridge.arm()
        assert fly_to(bridge, Setpoint.hold([1.0, 0.0, 1.0]), lambda s: np.allclose(s.position, [1, 0, 1], atol=1e-3))
        assert bridge.status().signing and bridge.status().rx_rejected["signature"] == 0
        # everything we sent was signed: at least every setpoint verified at the FCU
        assert peer.mav.signing.goodsig_count >= peer.snapshot()["setpoints"] > 5 and peer.rejected_signature == 0


def test_spoofed_unsigned_and_wrong_key_frames_are_rejected(key_path):
    with BridgeAndPeer(PX4, signing_key_path=key_path, peer_key=KEY) as (bridge, peer):
        before = bridge.status()
        position = bridge.state().position.copy()
        spoofs = [
            # a disarmed-in-LAND heartbeat, fake telemetry 10 m away, a command to us
            forged(lambda m: m.heartbeat_encode(2, 12, 1, 6 << 16 | 4 << 24, 3, 3)),
            forged(lambda m: m.local_position_ned_encode(1, 10.0, 10.0, -10.0, 0, 0, 0), key=WRONG_KEY),
            forged(lambda m: m.command_long_encode(1, 191, 400, 0, 1, 0, 0, 0, 0, 0, 0), key=WRONG_KEY),
        ]
        spoofer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for frame in spoofs:
                peer.send_raw(frame)  # from the FCU's own address: only the signature can tell
                spoofer.sendto(frame, bridge.local_address)
        finally:
            spoofer.close()
        assert wait_until(lambda: bridge.status().rx_rejected["signature"] >= 6, 1.0)
        after = bridge.status()
        assert (after.mode, after.armed, after.link) == (before.mode, before.armed, LinkState.OK)
        np.testing.assert_allclose(bridge.state().position, position, atol=1e-6)
        assert not any(c == 400 for c, _ in peer.commands)


def test_spoofed_ack_cannot_fake_an_arm(key_path):
    """The FCU ignores our arm request; an unsigned ACCEPTED from its address must not count."""
    with BridgeAndPeer(PX4, signing_key_path=key_path, peer_key=KEY) as (bridge, peer):
        peer.drop_acks[MAV_CMD_COMPONENT_ARM_DISARM] = -1
        fake_ack = forged(lambda m: m.command_ack_encode(MAV_CMD_COMPONENT_ARM_DISARM, 0, 0, 0, 1, 191))
        done = threading.Event()

        def spam():
            while not done.wait(0.02):
                peer.send_raw(fake_ack)

        spammer = threading.Thread(target=spam)
        spammer.start()
        try:
            with pytest.raises(CommandTimeout):
                bridge.arm()
        finally:
            done.set()
            spammer.join(timeout=3.0)
        assert not bridge.status().armed and bridge.status().rx_rejected["signature"] > 10


def test_replayed_and_future_dated_forgeries(key_path):
    with BridgeAndPeer(PX4, signing_key_path=key_path, peer_key=KEY) as (bridge, peer):
        # a correctly signed frame (someone with the key, link id 7) is accepted once, not twice
        frame = forged(lambda m: m.statustext_encode(6, b"hello", 0, 0), key=KEY, link_id=7)
        peer.send_raw(frame)
        assert wait_until(lambda: any("hello" in t for t in bridge.status().statustext), 1.0)
        rejected = bridge.status().rx_rejected["signature"]
        peer.send_raw(frame)
        assert wait_until(lambda: bridge.status().rx_rejected["signature"] == rejected + 1, 1.0)
        # a wrong-key frame dated far in the future on the FCU's own stream must not poison the
        # replay check for the genuine frames that follow (pymavlink's check_signature would)
        future = signing_timestamp_now() + 10**12
        peer.send_raw(forged(lambda m: m.heartbeat_encode(2, 12, 1, 0, 3, 3), key=WRONG_KEY, timestamp=future))
        time.sleep(0.1)
        t_before = bridge.state().t
        assert wait_until(lambda: bridge.state().t > t_before + 0.2, 2.0)  # genuine telemetry still flows
        assert bridge.status().link is LinkState.OK


def test_mismatched_keys_fail_loudly(key_path, tmp_path):
    # bridge with a different key: nothing from the FCU verifies, connect says so
    wrong_path = str(tmp_path / "wrong.key")
    write_signing_key(wrong_path, WRONG_KEY)
    with pytest.raises(ConnectionError, match="failed the signature check"):
        with BridgeAndPeer(PX4, signing_key_path=wrong_path, peer_key=KEY, connect_timeout_s=0.5):
            pass
    # bridge without a key talking to a signing FCU: our unsigned commands are refused there
    with BridgeAndPeer(PX4, peer_key=KEY) as (bridge, peer):
        with pytest.raises(CommandTimeout, match="signing keys match"):
            bridge.arm()
        assert peer.rejected_signature > 0 and not peer.snapshot()["armed"]
