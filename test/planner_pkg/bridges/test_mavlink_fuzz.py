"""Fuzz: random bytes and malformed MAVLink into the bridge's port, from a stranger's address and
from the FCU's own, for a bounded number of packets -> no crash, no state change, counted.

Seeds are random per run and printed (test/planner_pkg/bridges/conftest.py: ``MAVLINK_FUZZ_SEED=N`` replays
a run). The fuzz of message *content*, telemetry order and outgoing setpoints is in
test_mavlink_fuzz_content.py."""
import math
import socket
import struct
import time

import numpy as np
from mavlink_peer import PX4, BridgeAndPeer, loopback_config, wait_until
from pymavlink.dialects.v20 import ardupilotmega as mavlink2

from planner_pkg.bridges.mavlink import LinkState
from planner_pkg.bridges.mavlink.codec import MavCodec

PACKETS_PER_KIND = 300


def fcu_frame(build, system=1, component=1):
    mav = mavlink2.MAVLink(None, system, component)
    return bytearray(build(mav).pack(mav))


VALID = [
    fcu_frame(lambda m: m.heartbeat_encode(2, 12, 129, 6 << 16, 4, 3)),
    fcu_frame(lambda m: m.local_position_ned_encode(10, 1.0, 2.0, -3.0, 0.0, 0.0, 0.0)),
    fcu_frame(lambda m: m.attitude_quaternion_encode(10, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, [0.0] * 4)),
    fcu_frame(lambda m: m.command_ack_encode(400, 0, 0, 0, 1, 191)),
    fcu_frame(lambda m: m.odometry_encode(10, 1, 12, 1, 2, 3, [1, 0, 0, 0], 0, 0, 0, 0, 0, 0, [0.0] * 21, [0.0] * 21, 0, 0, 0)),
]


def random_bytes(rng):
    return bytes(rng.integers(0, 256, size=int(rng.integers(1, 300)), dtype=np.uint8))


def malformed_frame(rng, glue_junk: bool = True):
    """A real frame, broken in one of the ways a bad radio or an attacker breaks frames; with
    ``glue_junk`` also intact frames followed by junk (only from a stranger's address: from the
    FCU's address the intact frame would rightly be accepted)."""
    frame = bytearray(VALID[int(rng.integers(len(VALID)))])
    kind = int(rng.integers(7 if glue_junk else 6))
    if kind == 0:  # one flipped byte after the start marker
        i = int(rng.integers(1, len(frame)))
        frame[i] ^= int(rng.integers(1, 256))
    elif kind == 1:  # truncated
        frame = frame[: int(rng.integers(1, len(frame)))]
    elif kind == 2:  # length byte lies
        frame[1] = (frame[1] + int(rng.integers(1, 255))) % 256
    elif kind == 3:  # unknown incompatibility flags
        frame[2] |= 0x80
    elif kind == 4:  # a message id nobody knows, random payload, CRC of nothing
        frame[7:10] = struct.pack("<I", 0xABCDEF)[:3]
    elif kind == 5:  # claims to be signed but carries no signature
        frame[2] |= 0x01
    else:  # valid frame glued to junk
        frame = frame + bytearray(random_bytes(rng))
    return bytes(frame)


def implausible_frames():
    """CRC-valid frames from the FCU's ids whose *content* is impossible."""
    nan, inf = math.nan, math.inf
    return [
        fcu_frame(lambda m: m.local_position_ned_encode(10, nan, 0.0, 0.0, 0.0, 0.0, 0.0)),
        fcu_frame(lambda m: m.local_position_ned_encode(10, 0.0, inf, 0.0, 0.0, 0.0, 0.0)),
        fcu_frame(lambda m: m.local_position_ned_encode(10, 1e9, 0.0, 0.0, 0.0, 0.0, 0.0)),
        fcu_frame(lambda m: m.attitude_quaternion_encode(10, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, [0.0] * 4)),
        fcu_frame(lambda m: m.odometry_encode(10, 9, 12, 0, 0, 0, [1, 0, 0, 0], 0, 0, 0, 0, 0, 0, [0.0] * 21, [0.0] * 21, 0, 0, 0)),
        fcu_frame(lambda m: m.heartbeat_encode(2, 3, 1, 9, 4, 3)),  # suddenly ArduPilot
        fcu_frame(lambda m: m.sys_status_encode(0, 0, 0, 0, 16000, 250, 120, 0, 0, 0, 0, 0, 0)),
        fcu_frame(lambda m: m.extended_sys_state_encode(0, 9)),
        fcu_frame(lambda m: m.home_position_encode(2_000_000_000, 0, 0, 0, 0, 0, [1, 0, 0, 0], 0, 0, 0)),
    ]


def snapshot(bridge):
    s = bridge.status()
    return dict(estimate=bridge.estimate(), link=s.link, mode=s.mode_name, armed=s.armed, autopilot=s.autopilot,
                battery=(s.battery_voltage_v, s.battery_remaining), landed=s.landed_state,
                home=bridge._vehicle.home_amsl_m, fcu=bridge._link.fcu, offset=s.time_offset_s)


def send_paced(sock_send, frames):
    for i, frame in enumerate(frames):
        sock_send(frame)
        if i % 25 == 24:
            time.sleep(0.002)  # stay below the socket buffer: every packet must reach the parser


def test_codec_survives_random_streams_and_resynchronises(fuzz_rng):
    codec = MavCodec(1, 191)
    for datagram in (True, False):
        for _ in range(1000):
            result = codec.decode(random_bytes(fuzz_rng), datagram=datagram)
            assert all(not isinstance(m, mavlink2.MAVLink_bad_data) for m in result.messages)
        # after the junk, real frames come through again: at once for datagrams; for a byte
        # stream after the parser has consumed the (at most 280-byte) frame the junk announced
        # (280 bytes swallow 10 of these 28-byte frames: the old fixed seed never showed that)
        frame = bytes(VALID[1])
        swallowed = -(-280 // len(frame))
        good = [len(codec.decode(frame, datagram=datagram).messages) for _ in range(swallowed + 4)]
        assert good[swallowed + 1:] == [1] * 3 and (not datagram or all(good)), good
    assert codec.rx_rejected_total > 1000


def test_fuzzing_the_port_changes_nothing_and_is_counted(fuzz_rng):
    config = loopback_config(link_timeout_s=5.0)  # the FCU goes quiet during the fuzz on purpose
    with BridgeAndPeer(PX4, config=config) as (bridge, peer):
        bridge.set_mode("hold")
        assert wait_until(lambda: bridge.status().battery_voltage_v is not None and bridge.status().time_offset_s, 2.0)
        peer.tx_enabled = False  # freeze the real telemetry so any state change would be the fuzzer's
        time.sleep(0.1)
        before, counters = snapshot(bridge), bridge.status().rx_rejected
        heartbeats_seen = len(peer.bridge_heartbeats)
        stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        stranger.bind(("127.0.0.1", 0))
        stranger.settimeout(0.05)
        target = bridge.local_address
        try:
            junk = [random_bytes(fuzz_rng) for _ in range(PACKETS_PER_KIND)]
            broken = [malformed_frame(fuzz_rng) for _ in range(PACKETS_PER_KIND)]
            broken_intact_free = [malformed_frame(fuzz_rng, glue_junk=False) for _ in range(PACKETS_PER_KIND)]
            valid_from_stranger = [bytes(f) for f in VALID] * 10
            send_paced(lambda d: stranger.sendto(d, target), junk + broken + valid_from_stranger)
            send_paced(peer.send_raw, junk + broken_intact_free)  # the FCU's own address: the parser must hold
            send_paced(peer.send_raw, implausible_frames() * 5)
            expected_min = 4 * PACKETS_PER_KIND
            assert wait_until(lambda: bridge.status().rx_rejected_total - sum(counters.values()) >= expected_min, 3.0)
            time.sleep(0.1)
            after = snapshot(bridge)
            status = bridge.status()
            assert after == before  # nothing the fuzzer sent was believed
            grown = {k: status.rx_rejected[k] - counters[k] for k in status.rx_rejected}
            assert grown["foreign_source"] >= len(valid_from_stranger)  # valid frames, wrong address
            assert grown["invalid_values"] >= 5 * 9 - 5  # every implausible frame (heartbeats included)
            for reason in ("garbage", "crc", "malformed", "unknown_message", "truncated"):
                assert grown[reason] > 0, reason
            assert status.handler_errors == 0 and bridge._thread.is_alive()
            # our replies did not follow the fuzzer: the stranger never heard from us
            try:
                stranger.recvfrom(1024)
                raise AssertionError("the bridge sent something to the fuzzer's address")
            except socket.timeout:
                pass
        finally:
            stranger.close()
        # and the real link still works
        peer.tx_enabled = True
        assert wait_until(lambda: bridge.estimate() is not before["estimate"], 1.0)
        assert wait_until(lambda: len(peer.bridge_heartbeats) > heartbeats_seen, 2.0)
        bridge.arm()
        assert bridge.status().armed and bridge.status().link is LinkState.OK
