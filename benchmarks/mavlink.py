"""MAVLink bridge performance: setpoint -> wire latency and sustained setpoint rates.

Prints tables; never asserts on time (machines differ). Everything runs on 127.0.0.1: a bare UDP
socket plays the FCU (one HEARTBEAT and one state to lock the bridge on, then it only listens),
so the numbers are the bridge's own cost plus loopback, without a simulated autopilot's thread.

1. Latency: ``FcuBridge.send_setpoint(sp)`` called -> the SET_POSITION_TARGET_LOCAL_NED datagram
   read by the FCU socket (clamps, ENU->NED, encode, optional signing, sendto, loopback, recv).
   Also the time the call itself takes (what a ROS callback pays).
2. Keep-alive stream: the rate and the largest gap the FCU sees when the planner sends nothing
   new, at the configured 20 and 50 Hz.
3. Throughput: the planner calls send_setpoint as fast as it can; what reaches the wire with the
   default 100 Hz cap and with the cap lifted.

    python benchmarks/mavlink.py            # about 15 s
    python benchmarks/mavlink.py --quick    # about 5 s
"""
from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from pymavlink.dialects.v20 import ardupilotmega as mavlink2  # noqa: E402

from planner_pkg.bridges.mavlink import BridgeConfig, FcuBridge  # noqa: E402
from planner_pkg.bridges.mavlink.signing import signing_timestamp_now, write_signing_key  # noqa: E402
from planner_pkg.types import Setpoint  # noqa: E402

_SET_POSITION_TARGET_LOCAL_NED = 84


class FakeFcu:
    """A UDP socket that introduces itself as a PX4 and then only listens."""

    def __init__(self, key: bytes = None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
        self.mav = mavlink2.MAVLink(None, 1, 1)
        self.mav.robust_parsing = True
        if key is not None:
            self.mav.signing.secret_key, self.mav.signing.sign_outgoing = key, True
            self.mav.signing.timestamp = signing_timestamp_now()

    def introduce(self, bridge_address) -> None:
        for msg in (
            self.mav.heartbeat_encode(2, 12, 1, 3 << 16, 3, 3),
            self.mav.local_position_ned_encode(1, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0),
            self.mav.attitude_quaternion_encode(1, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, [0.0] * 4),
        ):
            self.sock.sendto(msg.pack(self.mav), bridge_address)
            self.mav.seq = (self.mav.seq + 1) % 256

    def recv(self, timeout_s: float):
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(65535)
        except socket.timeout:
            return None

    def close(self) -> None:
        self.sock.close()


def start(max_rate_hz: float = 1000.0, rate_hz: float = 20.0, key_path: str = "", key: bytes = None):
    cfg = BridgeConfig.from_dict({
        "fcu_url": "udpin:127.0.0.1:0", "link_timeout_s": 3600.0, "telemetry_rate_hz": 0.0, "timesync_rate_hz": 0.0,
        "setpoint_rate_hz": rate_hz, "max_setpoint_rate_hz": max_rate_hz, "signing_key_path": key_path,
        "failsafe": {"state_max_age_s": 3600.0},
    })
    bridge = FcuBridge(cfg)
    fcu = FakeFcu(key)
    fcu.introduce(bridge.open())
    bridge.wait_for_fcu(2.0)
    while fcu.recv(0.05) is not None:  # drain the bridge's hello (heartbeat, stream requests)
        pass
    return bridge, fcu


def latency(samples: int, signed: bool):
    key_dir = tempfile.mkdtemp()
    key = bytes(range(32))
    key_path = ""
    if signed:
        key_path = os.path.join(key_dir, "k")
        write_signing_key(key_path, key)
    bridge, fcu = start(key=key if signed else None, key_path=key_path)
    wire, call = [], []
    try:
        for i in range(samples):
            x = 1.0 + i * 1e-3  # a unique value so keep-alive repeats are not mistaken for it
            sp = Setpoint.hold([x, 0.0, 2.0])
            t0 = time.perf_counter()
            bridge.send_setpoint(sp)
            t1 = time.perf_counter()
            while True:
                data = fcu.recv(1.0)
                t2 = time.perf_counter()
                if data is None:
                    raise RuntimeError("a setpoint never reached the FCU socket")
                msgs = fcu.mav.parse_buffer(data) or []
                if any(m.get_msgId() == _SET_POSITION_TARGET_LOCAL_NED and abs(m.y - x) < 1e-6 for m in msgs):
                    break
            wire.append(t2 - t0)
            call.append(t1 - t0)
            time.sleep(0.003)  # stay under the 1 kHz cap: every sample goes out at once
    finally:
        bridge.close()
        fcu.close()
    return np.array(wire) * 1e6, np.array(call) * 1e6


def keep_alive(rate_hz: float, seconds: float):
    bridge, fcu = start(rate_hz=rate_hz)
    times = []
    try:
        bridge.send_setpoint(Setpoint.hold([0.0, 0.0, 2.0]))
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            data = fcu.recv(0.2)
            if data is None:
                continue
            now = time.perf_counter()
            for m in fcu.mav.parse_buffer(data) or []:
                if m.get_msgId() == _SET_POSITION_TARGET_LOCAL_NED:
                    times.append(now)
    finally:
        bridge.close()
        fcu.close()
    gaps = np.diff(times) * 1e3
    return (len(times) - 1) / (times[-1] - times[0]), float(np.max(gaps)), float(np.percentile(gaps, 99))


def throughput(max_rate_hz: float, seconds: float):
    bridge, fcu = start(max_rate_hz=max_rate_hz)
    received = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            data = fcu.recv(0.05)
            if data is not None:
                received[0] += sum(1 for m in fcu.mav.parse_buffer(data) or []
                                   if m.get_msgId() == _SET_POSITION_TARGET_LOCAL_NED)

    counter = threading.Thread(target=count)
    counter.start()
    calls = 0
    try:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            bridge.send_setpoint(Setpoint(position=[calls * 1e-4, 0.0, 2.0], velocity=[0.0, 0.0, 0.0]))
            calls += 1
        elapsed = time.perf_counter() - t0
        time.sleep(0.1)
    finally:
        stop.set()
        counter.join(timeout=2.0)
        bridge.close()
        fcu.close()
    return calls / elapsed, received[0] / elapsed


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples, shorter runs")
    args = parser.parse_args(argv)
    # the fake FCU answers no command: the bridge's "HOME_POSITION request unanswered" warnings
    # are expected here and would only clutter the tables
    logging.getLogger("planner_pkg.fcu_bridge").setLevel(logging.ERROR)
    samples, seconds = (300, 1.0) if args.quick else (1500, 3.0)

    print(f"MAVLink bridge benchmark (loopback UDP, {samples} latency samples, {seconds:.0f} s rate runs)\n")
    print("1. setpoint -> wire latency, microseconds")
    print(f"   {'link':<10}{'median':>9}{'p95':>9}{'p99':>9}{'max':>9}   {'send_setpoint() call, median / p99':>36}")
    for signed in (False, True):
        wire, call = latency(samples, signed)
        print(f"   {'signed' if signed else 'unsigned':<10}{np.median(wire):9.0f}{np.percentile(wire, 95):9.0f}"
              f"{np.percentile(wire, 99):9.0f}{np.max(wire):9.0f}   {np.median(call):26.0f} / {np.percentile(call, 99):.0f}")
    print("\n2. keep-alive stream (planner silent), as the FCU receives it")
    print(f"   {'configured':>10}{'measured Hz':>13}{'max gap ms':>12}{'p99 gap ms':>12}")
    for rate in (20.0, 50.0):
        measured, max_gap, p99_gap = keep_alive(rate, seconds)
        print(f"   {rate:10.0f}{measured:13.1f}{max_gap:12.1f}{p99_gap:12.1f}")
    print("\n3. planner calling send_setpoint in a tight loop")
    print(f"   {'max_setpoint_rate_hz':>20}{'calls/s':>10}{'on the wire/s':>15}")
    for cap in (100.0, 100000.0):
        calls, wire_rate = throughput(cap, seconds)
        print(f"   {cap:20.0f}{calls:10.0f}{wire_rate:15.0f}")


if __name__ == "__main__":
    main()
