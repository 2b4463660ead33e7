"""FCU URLs, transports (UDP in/out, TCP with reconnect, serial through a pty) and the config.

Every socket here is on 127.0.0.1 with a timeout; every thread is joined."""
import os
import socket
import threading
import time

import pytest

from planner_pkg.bridges.mavlink import BridgeConfig, parse_url
from planner_pkg.bridges.mavlink.connection import ConnectionUrl, open_transport


# ---------------------------------------------------------------------------------------------
# URLs
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url, expected",
    [
        ("udpin:0.0.0.0:14540", ConnectionUrl("udpin", "0.0.0.0", 14540)),
        ("udp:127.0.0.1:14550", ConnectionUrl("udpin", "127.0.0.1", 14550)),
        ("udpout:192.168.1.10:14580", ConnectionUrl("udpout", "192.168.1.10", 14580)),
        ("tcp:localhost:5760", ConnectionUrl("tcp", "localhost", 5760)),
        ("udpin:[::1]:14540", ConnectionUrl("udpin", "::1", 14540)),
        ("/dev/ttyACM0:921600", ConnectionUrl("serial", "/dev/ttyACM0", 921600)),
        ("serial:/dev/ttyAMA0:57600", ConnectionUrl("serial", "/dev/ttyAMA0", 57600)),
        ("/dev/serial/by-id/usb-Holybro_Pixhawk6C-if00:115200",
         ConnectionUrl("serial", "/dev/serial/by-id/usb-Holybro_Pixhawk6C-if00", 115200)),
        ("  udpin:0.0.0.0:14540 ", ConnectionUrl("udpin", "0.0.0.0", 14540)),
    ],
)
def test_parse_url(url, expected):
    assert parse_url(url) == expected


@pytest.mark.parametrize(
    "url, message",
    [
        ("", "non-empty"),
        ("udpin:14540", "HOST:PORT"),
        ("udpin:0.0.0.0:port", "not an integer"),
        ("udpin:0.0.0.0:70000", "outside 0..65535"),
        ("udpout:127.0.0.1:0", "needs the FCU's port"),
        ("/dev/ttyACM0", "not understood"),  # a serial device needs its baud rate
        ("/dev/ttyACM0:fast", "baud rate 'fast'"),
        ("http://fcu:80", "not understood"),
        ("udpin::14540", "empty host"),
    ],
)
def test_parse_url_errors_say_what_is_wrong(url, message):
    with pytest.raises(ValueError, match=message):
        parse_url(url)


# ---------------------------------------------------------------------------------------------
# UDP
# ---------------------------------------------------------------------------------------------
def test_udpin_reads_with_timeout_and_replies_only_to_the_set_remote():
    transport = open_transport("udpin:127.0.0.1:0")
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.1", 0))
    peer.settimeout(1.0)
    try:
        t0 = time.monotonic()
        assert transport.read(0.05) == (b"", None)
        assert time.monotonic() - t0 < 0.5
        assert transport.write(b"nobody to send to") is False  # no remote until the bridge trusts one
        peer.sendto(b"hello", transport.local_address)
        data, address = transport.read(1.0)
        assert data == b"hello" and address == peer.getsockname()
        transport.set_remote(address)
        assert transport.write(b"reply")
        assert peer.recvfrom(100)[0] == b"reply"
    finally:
        transport.close()
        peer.close()


def test_udpin_port_in_use_fails_loudly():
    first = open_transport("udpin:127.0.0.1:0")
    try:
        with pytest.raises(OSError, match="cannot open the UDP socket"):
            open_transport(f"udpin:127.0.0.1:{first.local_address[1]}")
    finally:
        first.close()


def test_udpout_socket_is_connected_so_other_senders_are_dropped():
    fcu = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fcu.bind(("127.0.0.1", 0))
    fcu.settimeout(1.0)
    spoofer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    transport = open_transport(f"udpout:127.0.0.1:{fcu.getsockname()[1]}")
    try:
        assert transport.write(b"ping")
        data, ours = fcu.recvfrom(100)
        assert data == b"ping"
        spoofer.sendto(b"spoof", ours)
        fcu.sendto(b"pong", ours)
        assert transport.read(1.0)[0] == b"pong"  # the spoofed datagram never reached us
        assert transport.read(0.05)[0] == b""
    finally:
        transport.close()
        fcu.close()
        spoofer.close()


def test_udpout_to_a_closed_port_is_not_fatal():
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nobody listens there now: the kernel answers "port unreachable"
    transport = open_transport(f"udpout:127.0.0.1:{port}")
    try:
        for _ in range(3):
            transport.write(b"x")
            assert transport.read(0.02)[0] == b""
    finally:
        transport.close()


# ---------------------------------------------------------------------------------------------
# TCP: reconnect after the FCU drops the connection
# ---------------------------------------------------------------------------------------------
def test_tcp_reconnects_after_the_server_closes():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(2)
    server.settimeout(2.0)
    transport = open_transport(f"tcp:127.0.0.1:{server.getsockname()[1]}", reconnect_backoff_s=0.05)
    try:
        first, _ = server.accept()
        first.sendall(b"one")
        assert transport.read(1.0)[0] == b"one"
        first.close()  # FCU / router restarts
        deadline = time.monotonic() + 3.0
        second = None
        accepted = []
        acceptor = threading.Thread(target=lambda: accepted.append(server.accept()[0]))
        acceptor.start()
        while not accepted and time.monotonic() < deadline:
            transport.read(0.02)  # notices EOF, waits the backoff, reconnects
        acceptor.join(timeout=3.0)
        assert accepted, "the transport did not reconnect"
        second = accepted[0]
        second.sendall(b"two")
        got = b""
        while got != b"two" and time.monotonic() < deadline:
            got += transport.read(0.05)[0]
        assert got == b"two"
        assert transport.reconnects == 1
        assert transport.write(b"up")
        second.settimeout(1.0)
        assert second.recv(10) == b"up"
        second.close()
    finally:
        transport.close()
        server.close()


def test_tcp_without_server_keeps_trying_without_raising():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    transport = open_transport(f"tcp:127.0.0.1:{port}", reconnect_backoff_s=0.02)
    try:
        assert not transport.connected
        assert transport.read(0.05) == (b"", None)
        assert transport.write(b"x") is False
        assert "ConnectionRefused" in transport.last_error
    finally:
        transport.close()


# ---------------------------------------------------------------------------------------------
# Serial, through a pseudo-terminal (no hardware needed)
# ---------------------------------------------------------------------------------------------
def test_serial_through_a_pty():
    master, slave = os.openpty()
    path = os.ttyname(slave)
    transport = open_transport(f"{path}:921600")
    try:
        assert transport.connected
        os.write(master, b"\xfd\x09mavlink bytes")
        data = b""
        deadline = time.monotonic() + 1.0
        while len(data) < 15 and time.monotonic() < deadline:
            data += transport.read(0.05)[0]
        assert data == b"\xfd\x09mavlink bytes"  # raw mode: no byte was translated or eaten
        assert transport.write(b"\r\nout\x00")
        assert os.read(master, 100) == b"\r\nout\x00"
    finally:
        transport.close()
        os.close(slave)
        os.close(master)


def test_serial_unplug_is_detected_and_retried_without_raising():
    master, slave = os.openpty()
    transport = open_transport(f"{os.ttyname(slave)}:57600", reconnect_backoff_s=0.01)
    try:
        os.close(master)  # the other end goes away, like a USB cable pulled out
        assert transport.read(0.05) == (b"", None)
        assert not transport.connected and transport.last_error  # EOF or EIO, by kernel
        for _ in range(3):  # keeps trying to reopen, quietly and boundedly
            assert transport.read(0.02) == (b"", None)
        assert transport.write(b"x") is False
    finally:
        transport.close()
        os.close(slave)


def test_serial_bad_baud_and_missing_device_are_reported_not_raised():
    transport = open_transport("/dev/does-not-exist-fcu:57600", reconnect_backoff_s=0.01)
    try:
        assert not transport.connected
        assert transport.read(0.01) == (b"", None)
        assert "FileNotFoundError" in transport.last_error
    finally:
        transport.close()
    master, slave = os.openpty()
    transport = open_transport(f"{os.ttyname(slave)}:12345")
    try:
        assert not transport.connected and "12345 is not supported" in transport.last_error
    finally:
        transport.close()
        os.close(slave)
        os.close(master)


# ---------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------
def test_default_config_is_valid():
    cfg = BridgeConfig()
    assert cfg.setpoint_rate_hz >= 20 and cfg.failsafe.stale_setpoint_s == 0.5
    assert cfg.heartbeat_rate_hz == 1.0 and cfg.component_id == 191


def test_from_dict_nested_and_dotted_keys():
    cfg = BridgeConfig.from_dict({
        "fcu_url": "tcp:127.0.0.1:5760",
        "autopilot": "ardupilot",
        "failsafe": {"land_after_hold_s": 3, "geofence": {"kind": "cylinder", "radius_m": 20}},
        "failsafe.geofence.z_max_m": 12.5,
    })
    assert cfg.autopilot == "ardupilot" and cfg.failsafe.land_after_hold_s == 3.0
    assert cfg.failsafe.geofence.kind == "cylinder" and cfg.failsafe.geofence.radius_m == 20.0
    assert cfg.failsafe.geofence.z_max_m == 12.5


@pytest.mark.parametrize(
    "values, message",
    [
        ({"fcu_ur": "udpin:0.0.0.0:1"}, "unknown config key 'fcu_ur'"),
        ({"failsafe": {"stale_s": 1}}, "unknown config key 'failsafe.stale_s'"),
        ({"setpoint_rate_hz": 10}, "setpoint_rate_hz must be in 20..250"),
        ({"failsafe.stale_setpoint_s": -1}, "failsafe.stale_setpoint_s must be finite and > 0"),
        ({"command_retries": 1.5}, "command_retries must be an integer"),
        ({"link_timeout_s": "1"}, "link_timeout_s must be a number"),
        ({"autopilot": "inav"}, "autopilot must be one of"),
        ({"fcu_url": "/dev/ttyUSB0"}, "not understood"),
        ({"failsafe.geofence.kind": "sphere"}, "geofence.kind must be one of"),
        ({"failsafe.geofence": {"kind": "box", "box_min_m": [0, 0, 0], "box_max_m": [1, -1, 1]}}, "below box_max_m"),
        ({"failsafe.geofence.box_min_m": [0, 0]}, "box_min_m must be 3 finite numbers"),
        ({"signing_key": "00" * 32}, "never a parameter"),
        ({"system_id": 0}, "system_id must be in 1..255"),
    ],
)
def test_config_errors_name_the_key(values, message):
    with pytest.raises(ValueError, match=message):
        BridgeConfig.from_dict(values)


def test_bridge_rejects_a_plain_dict_config():
    from planner_pkg.bridges.mavlink import FcuBridge

    with pytest.raises(TypeError, match="from_dict"):
        FcuBridge({"fcu_url": "udpin:127.0.0.1:0"})
