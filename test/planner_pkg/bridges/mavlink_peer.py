"""A simulated PX4 / ArduCopter autopilot speaking MAVLink 2 over UDP loopback, for bridge tests.

Not a test module (pytest collects only ``test_*.py``); import it from the tests and benchmarks.
It deliberately does NOT use ``planner_pkg.bridges.mavlink`` (no frames, no mode tables): it
thinks in NED/FRD like a real autopilot, so a conversion bug in the bridge cannot cancel out.

Rules it follows (the ones the bridge must respect):
    * HEARTBEAT (1 Hz, plus one right after any arming/mode change so tests run fast),
      LOCAL_POSITION_NED + ATTITUDE_QUATERNION (or ODOMETRY) at ``rate_hz``, SYS_STATUS,
      EXTENDED_SYS_STATE, HOME_POSITION and SYSTEM_TIME at 1 Hz; answers TIMESYNC requests on
      a boot clock that started ``boot_offset_s`` before the peer.
    * Every COMMAND_LONG gets a COMMAND_ACK (ACCEPTED, DENIED, TEMPORARILY_REJECTED, FAILED,
      UNSUPPORTED), unless a test asked to drop or override some.
    * PX4: OFFBOARD is refused (TEMPORARILY_REJECTED) unless >= 5 setpoints arrived in the last
      second and the latest within 0.5 s; in OFFBOARD, a setpoint gap > 0.5 s switches to
      AUTO.LOITER (PX4's offboard-loss failsafe). NAV_TAKEOFF takes an AMSL altitude.
    * ArduCopter: GUIDED follows position targets; NAV_TAKEOFF (relative altitude) only when
      armed in GUIDED.
    * Both: disarm refused in the air unless forced; LAND descends and auto-disarms on ground.
    * Position integrates the commanded target: straight toward a position target at
      ``speed_mps`` (exact arrival), or at a velocity target; z (down) never goes below ground.
    * With ``signing_key``: signs everything, and unsigned / wrongly signed frames are dropped
      (``rejected_signature`` counts them).
"""
from __future__ import annotations

import math
import select
import socket
import threading
import time
from collections import deque
from typing import Dict, List, Optional, Tuple

from pymavlink.dialects.v20 import ardupilotmega as mavlink2

PX4, ARDUPILOT = "px4", "ardupilot"
_PX4_MODES = {  # name -> (main, sub)
    "MANUAL": (1, 0), "ALTCTL": (2, 0), "POSCTL": (3, 0), "OFFBOARD": (6, 0), "STABILIZED": (7, 0),
    "AUTO.TAKEOFF": (4, 2), "AUTO.LOITER": (4, 3), "AUTO.MISSION": (4, 4), "AUTO.RTL": (4, 5), "AUTO.LAND": (4, 6),
}
_AP_MODES = {"STABILIZE": 0, "ALT_HOLD": 2, "AUTO": 3, "GUIDED": 4, "LOITER": 5, "RTL": 6, "LAND": 9, "POSHOLD": 16, "BRAKE": 17}
_FOLLOW = {PX4: "OFFBOARD", ARDUPILOT: "GUIDED"}
_HOLD = {PX4: "AUTO.LOITER", ARDUPILOT: "LOITER"}
_LAND = {PX4: "AUTO.LAND", ARDUPILOT: "LAND"}
_RTL = {PX4: "AUTO.RTL", ARDUPILOT: "RTL"}
ACCEPTED, TEMPORARILY_REJECTED, DENIED, UNSUPPORTED, FAILED = 0, 1, 2, 3, 4


def _urt(diagonal, off_diagonal):
    """21-element row-major upper triangle of a 6x6 matrix from its diagonal and {(i, j): v}."""
    return [diagonal[i] if i == j else off_diagonal.get((i, j), 0.0) for i in range(6) for j in range(i, 6)]


#: Covariance the peer sends in ODOMETRY (both pose, NED, and velocity, body FRD): variances
#: 0.01/0.04/0.09 m^2 on x/y/z, 0.001/0.002/0.003 rad^2 on roll/pitch/yaw, cov(x, y) = 0.005,
#: cov(y, yaw) = 0.0007 (to check that off-diagonal terms move with the frames).
ODOMETRY_COVARIANCE_URT = _urt([0.01, 0.04, 0.09, 0.001, 0.002, 0.003], {(0, 1): 0.005, (1, 5): 0.0007})


class SimulatedAutopilot:
    """See the module doc. Use as a context manager (starts and joins its thread).

    Args:
        flavour: "px4" or "ardupilot".
        remote: the bridge's (host, port) when the bridge listens (udpin); None to listen
            ourselves and reply to whoever talks first (the bridge uses udpout).
        signing_key: 32 bytes, or None.
        rate_hz: physics and telemetry rate. speed_mps: horizontal/vertical tracking speed.
    """

    def __init__(self, flavour: str = PX4, remote: Optional[Tuple[str, int]] = None, signing_key: Optional[bytes] = None,
                 rate_hz: float = 50.0, speed_mps: float = 8.0, land_speed_mps: float = 6.0, odometry: bool = False,
                 home_amsl_m: float = 488.0, boot_offset_s: float = 100.0, system_id: int = 1,
                 offboard_loss_s: float = 0.5, heartbeat_on_change: bool = True):
        if flavour not in (PX4, ARDUPILOT):
            raise ValueError(f"flavour must be 'px4' or 'ardupilot', got {flavour!r}")
        self.flavour = flavour
        self.rate_hz, self.speed_mps, self.land_speed_mps = rate_hz, speed_mps, land_speed_mps
        self.odometry = odometry
        self.home_amsl_m = home_amsl_m
        self.offboard_loss_s = offboard_loss_s
        self.heartbeat_on_change = heartbeat_on_change
        self.boot_t0 = time.monotonic() - boot_offset_s
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.address = self.sock.getsockname()
        self.remote = remote
        self.mav = mavlink2.MAVLink(None, srcSystem=system_id, srcComponent=1)
        self.mav.robust_parsing = True
        if signing_key is not None:
            self.mav.signing.secret_key = bytes(signing_key)
            self.mav.signing.sign_outgoing = True
            self.mav.signing.timestamp = int((time.time() - 1420070400) * 100_000)
        self.lock = threading.Lock()
        # vehicle state, NED metres / rad
        self.position = [0.0, 0.0, 0.0]
        self.velocity = [0.0, 0.0, 0.0]
        self.yaw = 0.0
        self.armed = False
        self.mode = "POSCTL" if flavour == PX4 else "STABILIZE"
        self.target: Optional[dict] = None  # last SET_POSITION_TARGET_LOCAL_NED, decoded
        self.hold_position: Optional[List[float]] = None
        self.climb_to: Optional[float] = None  # NED z of a takeoff in progress
        # observations for tests
        self.setpoint_times: deque = deque(maxlen=500)
        self.setpoints_received = 0
        #: every SET_POSITION_TARGET_LOCAL_NED as received (NED, float32 values as decoded):
        #: (type_mask, x, y, z, vx, vy, vz, afx, afy, afz, yaw, yaw_rate)
        self.received_targets: deque = deque(maxlen=50_000)
        self.commands: List[Tuple[int, int]] = []  # (command, result) in arrival order
        self.events: List[str] = []
        self.bridge_heartbeats: List[Tuple[int, int, int]] = []  # (sys, comp, MAV_TYPE)
        self.rejected_signature = 0
        self.rejected_other = 0
        # test knobs
        self.tx_enabled = True
        self.drop_acks: Dict[int, int] = {}  # command -> number of attempts to ignore (-1: all)
        self.force_result: Dict[int, int] = {}  # command -> MAV_RESULT to answer instead
        self.corrupt_position = False  # publish NaN positions (a diverged estimator), keep flying
        self.stream_state = True  # False: no LOCAL_POSITION_NED/ATTITUDE/ODOMETRY (tests send their own)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._next_1hz = 0.0
        self._heartbeat_due = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"peer_{self.flavour}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            assert not self._thread.is_alive(), "simulated autopilot thread did not stop"
        self.sock.close()

    # ------------------------------------------------------------------ helpers for tests
    def boot_time_s(self) -> float:
        return time.monotonic() - self.boot_t0

    def snapshot(self) -> dict:
        with self.lock:
            return dict(position=list(self.position), velocity=list(self.velocity), yaw=self.yaw, armed=self.armed,
                        mode=self.mode, setpoints=self.setpoints_received,
                        last_setpoint_t=self.setpoint_times[-1] if self.setpoint_times else None)

    def send(self, msg) -> None:
        """Send a message (build it with ``peer.mav.<name>_encode``) as the autopilot."""
        if self.remote is not None and self.tx_enabled:
            self.sock.sendto(msg.pack(self.mav), self.remote)
            self.mav.seq = (self.mav.seq + 1) % 256

    def send_raw(self, data: bytes) -> None:
        """Send bytes as they are from the autopilot's own address (fuzzing the trusted path)."""
        if self.remote is not None:
            self.sock.sendto(data, self.remote)

    def set_position(self, position_ned) -> None:
        with self.lock:
            self.position = [float(v) for v in position_ned]

    # ------------------------------------------------------------------ main loop
    def _run(self) -> None:
        dt = 1.0 / self.rate_hz
        next_step = time.monotonic()
        while not self._stop.is_set():
            timeout = max(0.0, next_step - time.monotonic())
            ready, _, _ = select.select([self.sock], [], [], min(timeout, 0.05))
            if ready:
                data, address = self.sock.recvfrom(65535)
                if self.remote is None:
                    self.remote = address
                    self._next_1hz = 0.0  # introduce ourselves right away
                self._on_bytes(data, address)
            now = time.monotonic()
            if now >= next_step:
                next_step += dt
                if next_step < now:  # fell behind (loaded machine): do not try to catch up
                    next_step = now + dt
                with self.lock:
                    self._step(dt, now)
                self._telemetry(now)

    def _on_bytes(self, data: bytes, address) -> None:
        for msg in self.mav.parse_buffer(data) or []:
            if isinstance(msg, mavlink2.MAVLink_bad_data):
                if "signature" in str(msg.reason):
                    self.rejected_signature += 1
                else:
                    self.rejected_other += 1
                continue
            kind = msg.get_type()
            if kind == "HEARTBEAT":
                self.bridge_heartbeats.append((msg.get_srcSystem(), msg.get_srcComponent(), msg.type))
            elif kind == "SET_POSITION_TARGET_LOCAL_NED":
                self._on_setpoint(msg)
            elif kind == "COMMAND_LONG":
                self._on_command(msg)
            elif kind == "TIMESYNC" and msg.tc1 == 0:
                self.send(self.mav.timesync_encode(int(self.boot_time_s() * 1e9), msg.ts1))

    def _on_setpoint(self, msg) -> None:
        if msg.target_system != self.mav.srcSystem or msg.coordinate_frame != 1:
            return
        m = msg.type_mask
        target = {
            "position": None if m & 0b111 else [msg.x, msg.y, msg.z],
            "velocity": None if m & 0b111000 else [msg.vx, msg.vy, msg.vz],
            "yaw": None if m & 1024 else msg.yaw,
            "yaw_rate": None if m & 2048 else msg.yaw_rate,
            "type_mask": m,
        }
        with self.lock:
            self.target = target
            self.received_targets.append((m, msg.x, msg.y, msg.z, msg.vx, msg.vy, msg.vz, msg.afx, msg.afy, msg.afz,
                                          msg.yaw, msg.yaw_rate))
            self.setpoints_received += 1
            self.setpoint_times.append(time.monotonic())

    # ------------------------------------------------------------------ commands
    def _on_command(self, msg) -> None:
        command = msg.command
        if command in self.drop_acks and self.drop_acks[command] != 0:
            self.drop_acks[command] -= 1
            return
        with self.lock:
            result = self.force_result.get(command)
            if result is None:
                result = self._execute(command, [msg.param1, msg.param2, msg.param3, msg.param4, msg.param5,
                                                 msg.param6, msg.param7])
            self.commands.append((command, result))
        self.send(self.mav.command_ack_encode(command, result, 0, 0, msg.get_srcSystem(), msg.get_srcComponent()))
        if result == ACCEPTED and self.heartbeat_on_change:
            self._heartbeat()

    def _set_mode(self, mode: str) -> None:
        if mode != self.mode:
            self.events.append(f"mode {self.mode} -> {mode}")
            self._heartbeat_due = self.heartbeat_on_change
        self.mode = mode
        if mode == _HOLD[self.flavour]:
            self.hold_position = list(self.position)

    def _stream_ok(self, now: float) -> bool:
        recent = [t for t in self.setpoint_times if now - t <= 1.0]
        return len(recent) >= 5 and now - recent[-1] <= 0.5

    def _landed(self) -> bool:
        return self.position[2] > -0.05

    def _execute(self, command: int, p: List[float]) -> int:
        now = time.monotonic()
        if command == 400:  # COMPONENT_ARM_DISARM
            if p[0] == 1.0:
                if self.mode in (_LAND[self.flavour], _RTL[self.flavour]):
                    return DENIED
                if self.flavour == PX4 and self.mode == "OFFBOARD" and not self._stream_ok(now):
                    return DENIED
                self.armed = True
                return ACCEPTED
            if not self._landed() and p[1] != 21196.0:
                return DENIED
            self.armed = False
            return ACCEPTED
        if command == 176:  # DO_SET_MODE
            if not int(p[0]) & 1:
                return DENIED
            if self.flavour == PX4:
                names = {v: k for k, v in _PX4_MODES.items()}
                name = names.get((int(p[1]), int(p[2])))
                if name is None:
                    return UNSUPPORTED
                if name == "OFFBOARD" and not self._stream_ok(now):
                    return TEMPORARILY_REJECTED
            else:
                names = {v: k for k, v in _AP_MODES.items()}
                name = names.get(int(p[1]))
                if name is None:
                    return UNSUPPORTED
                if name == "GUIDED":
                    self.target = {"position": list(self.position), "velocity": None, "yaw": None, "yaw_rate": None}
            self._set_mode(name)
            return ACCEPTED
        if command == 22:  # NAV_TAKEOFF
            if not self.armed:
                return DENIED
            if self.flavour == PX4:
                if math.isnan(p[6]):
                    return DENIED
                self.climb_to = -(p[6] - self.home_amsl_m)
                self._set_mode("AUTO.TAKEOFF")
            else:
                if self.mode != "GUIDED":
                    return FAILED
                self.target = {"position": [self.position[0], self.position[1], -p[6]], "velocity": None,
                               "yaw": None, "yaw_rate": None}
            return ACCEPTED
        if command == 21:  # NAV_LAND
            self._set_mode(_LAND[self.flavour])
            return ACCEPTED
        if command == 20:  # NAV_RETURN_TO_LAUNCH
            self._set_mode(_RTL[self.flavour])
            return ACCEPTED
        if command == 511:  # SET_MESSAGE_INTERVAL
            return ACCEPTED
        if command == 512:  # REQUEST_MESSAGE
            return ACCEPTED
        return UNSUPPORTED

    # ------------------------------------------------------------------ physics
    def _move_toward(self, goal: List[float], speed: float, dt: float) -> None:
        delta = [g - p for g, p in zip(goal, self.position)]
        dist = math.sqrt(sum(d * d for d in delta))
        step = speed * dt
        if dist <= step or dist < 1e-12:
            self.velocity = [d / dt for d in delta] if dist > 1e-12 else [0.0, 0.0, 0.0]
            self.position = list(goal)
        else:
            self.velocity = [d / dist * speed for d in delta]
            self.position = [p + v * dt for p, v in zip(self.position, self.velocity)]

    def _step(self, dt: float, now: float) -> None:
        if not self.armed:
            self.velocity = [0.0, 0.0, 0.0]
            return
        mode = self.mode
        if mode == "OFFBOARD" and self.setpoint_times and now - self.setpoint_times[-1] > self.offboard_loss_s:
            self.events.append("offboard lost: setpoint stream stopped")
            self._set_mode("AUTO.LOITER")
            mode = self.mode
        if mode == _FOLLOW[self.flavour] and self.target is not None:
            t = self.target
            if t["position"] is not None:
                self._move_toward(t["position"], self.speed_mps, dt)
            elif t["velocity"] is not None:
                self.velocity = list(t["velocity"])
                self.position = [p + v * dt for p, v in zip(self.position, self.velocity)]
            if t["yaw"] is not None:
                self.yaw = t["yaw"]
            elif t["yaw_rate"] is not None:
                self.yaw = math.remainder(self.yaw + t["yaw_rate"] * dt, 2 * math.pi)
        elif mode == "AUTO.TAKEOFF" and self.climb_to is not None:
            self._move_toward([self.position[0], self.position[1], self.climb_to], self.speed_mps, dt)
            if abs(self.position[2] - self.climb_to) < 1e-6:
                self.climb_to = None
                self._set_mode("AUTO.LOITER")
        elif mode == _HOLD[self.flavour] and self.hold_position is not None:
            self._move_toward(self.hold_position, self.speed_mps, dt)
        elif mode in (_LAND[self.flavour], _RTL[self.flavour]):
            if mode == _RTL[self.flavour] and math.hypot(self.position[0], self.position[1]) > 1e-6:
                self._move_toward([0.0, 0.0, self.position[2]], self.speed_mps, dt)
            else:
                self._move_toward([self.position[0], self.position[1], 0.0], self.land_speed_mps, dt)
                if self._landed() and self.position[2] == 0.0:
                    self.armed = False
                    self.events.append("landed and disarmed")
                    self._heartbeat_due = self.heartbeat_on_change
        else:
            self.velocity = [0.0, 0.0, 0.0]
        if self.position[2] > 0.0:  # NED z is down: the ground is at 0
            self.position[2], self.velocity[2] = 0.0, 0.0

    # ------------------------------------------------------------------ telemetry
    def _custom_mode(self) -> int:
        if self.flavour == PX4:
            main, sub = _PX4_MODES[self.mode]
            return main << 16 | sub << 24
        return _AP_MODES[self.mode]

    def _heartbeat_fields(self) -> Tuple[int, int, int]:
        """(base mode, custom mode, system status) of the state now; call with the lock held."""
        base = 1 | (128 if self.armed else 0)  # CUSTOM_MODE_ENABLED | SAFETY_ARMED
        return base, self._custom_mode(), 4 if self.armed else 3  # ACTIVE / STANDBY

    def _heartbeat(self, fields: Optional[Tuple[int, int, int]] = None) -> None:
        if fields is None:
            with self.lock:
                fields = self._heartbeat_fields()
        autopilot = 12 if self.flavour == PX4 else 3
        self.send(self.mav.heartbeat_encode(2, autopilot, *fields, 3))

    def _telemetry(self, now: float) -> None:
        boot_ms = int(self.boot_time_s() * 1000)
        # one snapshot for the heartbeat and the state, and a heartbeat due to a change (a landing's
        # disarm) goes out after that state: "disarmed" must not reach the bridge ahead of the
        # position it landed at (the flight tests read both at the disarm)
        with self.lock:
            pos, vel, yaw, armed = list(self.position), list(self.velocity), self.yaw, self.armed
            beat = self._heartbeat_fields()
            due, self._heartbeat_due = self._heartbeat_due, False
        self._send_state(now, boot_ms, pos, vel, yaw, armed, beat)
        if due:
            self._heartbeat(beat)

    def _send_state(self, now: float, boot_ms: int, pos, vel, yaw: float, armed: bool, beat) -> None:
        if now >= self._next_1hz:  # heartbeat first, as an FCU introduces itself before its telemetry
            self._next_1hz = now + 1.0
            self._heartbeat(beat)
            self.send(self.mav.sys_status_encode(0, 0, 0, 0, 16000, 250, 75, 0, 0, 0, 0, 0, 0))
            self.send(self.mav.extended_sys_state_encode(0, 2 if armed and pos[2] < -0.05 else 1))
            self.send(self.mav.home_position_encode(473977420, 85455940, int(self.home_amsl_m * 1000), 0, 0, 0,
                                                    [1, 0, 0, 0], 0, 0, 0))
            self.send(self.mav.system_time_encode(int(time.time() * 1e6), boot_ms))
        if not self.stream_state:
            return
        q = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]  # w, x, y, z: level, heading yaw (NED)
        if self.odometry:
            cov = list(ODOMETRY_COVARIANCE_URT)
            body_v = [math.cos(yaw) * vel[0] + math.sin(yaw) * vel[1], -math.sin(yaw) * vel[0] + math.cos(yaw) * vel[1], vel[2]]
            self.send(self.mav.odometry_encode(boot_ms * 1000, 1, 12, *pos, q, *body_v, 0.0, 0.0, 0.0, cov, cov, 0, 0, 100))
        else:
            shown = [math.nan] * 3 if self.corrupt_position else pos
            self.send(self.mav.local_position_ned_encode(boot_ms, *shown, *vel))
            self.send(self.mav.attitude_quaternion_encode(boot_ms, *q, 0.0, 0.0, 0.0, [0.0, 0.0, 0.0, 0.0]))


# ---------------------------------------------------------------------------------------------
# Helpers shared by the bridge tests and the benchmark
# ---------------------------------------------------------------------------------------------
def wait_until(predicate, timeout_s: float, poll_s: float = 0.01) -> bool:
    """Poll ``predicate`` until it is true or ``timeout_s`` passed; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return bool(value)
        time.sleep(poll_s)


def loopback_config(**overrides) -> dict:
    """Bridge settings for loopback tests: quick timeouts so failures show in well under a second."""
    cfg = {
        "fcu_url": "udpin:127.0.0.1:0",
        "link_timeout_s": 0.5,
        "connect_timeout_s": 3.0,
        "reconnect_backoff_s": 0.1,
        "command_timeout_s": 0.3,
        "command_retries": 2,
        "confirm_timeout_s": 2.0,
        "offboard_prime_s": 0.3,
        "telemetry_rate_hz": 50.0,
        "failsafe": {"land_after_hold_s": 0.6},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg




class BridgeAndPeer:
    """Context manager: an FcuBridge listening on an ephemeral loopback port and a simulated
    autopilot talking to it; both are closed and their threads joined on exit.

        with BridgeAndPeer("px4") as (bridge, peer): ...
    """

    def __init__(self, flavour: str = PX4, config: Optional[dict] = None, signing_key_path: str = "",
                 peer_key: Optional[bytes] = None, connect_timeout_s: float = 3.0, **peer_kwargs):
        from planner_pkg.bridges.mavlink import BridgeConfig, FcuBridge

        cfg = dict(config or loopback_config())
        if signing_key_path:
            cfg["signing_key_path"] = signing_key_path
        self.bridge = FcuBridge(BridgeConfig.from_dict(cfg))
        self.flavour, self.peer_key, self.peer_kwargs = flavour, peer_key, peer_kwargs
        self.connect_timeout_s = connect_timeout_s
        self.peer: Optional[SimulatedAutopilot] = None

    def __enter__(self):
        try:
            address = self.bridge.open()
            self.peer = SimulatedAutopilot(self.flavour, remote=address, signing_key=self.peer_key, **self.peer_kwargs)
            self.peer.start()
            self.bridge.wait_for_fcu(self.connect_timeout_s)
            # telemetry has started once the first state arrived
            assert wait_until(lambda: self.bridge.state() is not None, 2.0), "no state from the simulated autopilot"
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.bridge, self.peer

    def __exit__(self, *exc):
        self.bridge.close()
        if self.peer is not None:
            self.peer.stop()


def fly_to(bridge, setpoint, reached, timeout_s: float = 4.0, period_s: float = 0.05) -> bool:
    """Stream ``setpoint`` at 1 / ``period_s`` until ``reached(bridge.state())`` or the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        bridge.send_setpoint(setpoint)
        state = bridge.state()
        if state is not None and reached(state):
            return True
        time.sleep(period_s)
    return False
