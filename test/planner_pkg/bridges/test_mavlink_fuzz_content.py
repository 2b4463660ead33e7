"""Fuzz of what authentic frames *say* (issue 20, item 9): every message type the bridge handles
with random fields, telemetry reordered and replayed, and random (often absurd) setpoints through
the acceptance path, the encoder and the wire. Seeds are random per run and printed; see
test/planner_pkg/bridges/conftest.py to replay one (``MAVLINK_FUZZ_SEED=N``)."""
import math
import time

import numpy as np
import pytest
from mavlink_peer import PX4, BridgeAndPeer, fly_to, loopback_config, wait_until
from pymavlink.dialects.v20 import ardupilotmega as mavlink2

from planner_pkg.bridges.mavlink import BridgeConfig, FailsafeReason, FcuBridge, StreamPhase
from planner_pkg.bridges.mavlink.failsafe import envelope_violation, limit_setpoint, make_geofence
from planner_pkg.bridges.mavlink.setpoints import FLOAT32_MAX, setpoint_to_target
from planner_pkg.bridges.mavlink.telemetry import MAX_POSITION_M, MAX_SPEED_MPS, TelemetryAssembler
from planner_pkg.bridges.mavlink.vehicle import LANDED_STATES
from planner_pkg.types import Setpoint

NAN, INF = math.nan, math.inf
FLOAT_EDGES = [NAN, INF, -INF, FLOAT32_MAX, -FLOAT32_MAX, 1e30, -1e30, 1.4e-45, -0.0, 0.0, 1.0, -1.0, 0.5]
INT_RANGES = {"uint8_t": (0, 2**8 - 1), "int8_t": (-2**7, 2**7 - 1), "uint16_t": (0, 2**16 - 1),
              "int16_t": (-2**15, 2**15 - 1), "uint32_t": (0, 2**32 - 1), "int32_t": (-2**31, 2**31 - 1),
              "uint64_t": (0, 2**63 - 1), "int64_t": (-2**63, 2**63 - 1)}  # uint64: pymavlink packs < 2**63 only

#: One plausible example of every message type the bridge handles (the fuzz mutates them).
TEMPLATES = {
    "HEARTBEAT": lambda m: m.heartbeat_encode(2, 12, 129, 6 << 16, 4, 3),
    "LOCAL_POSITION_NED": lambda m: m.local_position_ned_encode(5000, 1.0, 2.0, -3.0, 0.1, 0.0, 0.0),
    "ATTITUDE_QUATERNION": lambda m: m.attitude_quaternion_encode(5000, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1, [0.0] * 4),
    "ATTITUDE": lambda m: m.attitude_encode(5000, 0.1, -0.1, 1.0, 0.0, 0.0, 0.0),
    "ODOMETRY": lambda m: m.odometry_encode(5_000_000, 1, 12, 1.0, 2.0, -3.0, [1.0, 0.0, 0.0, 0.0], 0.0, 0.0, 0.0,
                                             0.0, 0.0, 0.0, [NAN] + [0.0] * 20, [NAN] + [0.0] * 20, 0, 0, 100),
    "COMMAND_ACK": lambda m: m.command_ack_encode(400, 0, 0, 0, 1, 191),
    "COMMAND_LONG": lambda m: m.command_long_encode(1, 191, 400, 0, 1.0, 0, 0, 0, 0, 0, 0),
    "TIMESYNC": lambda m: m.timesync_encode(0, 123456789),
    "SYSTEM_TIME": lambda m: m.system_time_encode(1_700_000_000_000_000, 5000),
    "SYS_STATUS": lambda m: m.sys_status_encode(0, 0, 0, 0, 16000, 250, 75, 0, 0, 0, 0, 0, 0),
    "EXTENDED_SYS_STATE": lambda m: m.extended_sys_state_encode(0, 2),
    "HOME_POSITION": lambda m: m.home_position_encode(473977420, 85455940, 488000, 0, 0, 0, [1, 0, 0, 0], 0, 0, 0),
    "STATUSTEXT": lambda m: m.statustext_encode(6, b"hello", 0, 0),
}


# ---------------------------------------------------------------------------------------------
# Random values
# ---------------------------------------------------------------------------------------------
def random_float32(rng) -> float:
    """Anything a float32 field can carry, absurd values often."""
    r = rng.random()
    if r < 0.35:
        return FLOAT_EDGES[int(rng.integers(len(FLOAT_EDGES)))]
    if r < 0.7:
        return float(np.float32(rng.normal(0.0, 10.0)))
    return float(np.float32(rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(-45.0, 38.5)))


def random_int(rng, kind: str) -> int:
    low, high = INT_RANGES[kind]
    if rng.random() < 0.3:
        return int(rng.choice([low, high, 0, 1, low + 1, high - 1]))
    return int(rng.integers(low, high, endpoint=True))


def random_field(rng, kind: str, length: int):
    if kind == "char":
        return bytes(rng.integers(0, 256, size=length, dtype=np.uint8))
    one = (lambda: random_float32(rng)) if kind in ("float", "double") else (lambda: random_int(rng, kind))
    return [one() for _ in range(length)] if length else one()


def random_message(rng, name: str, mav):
    """``name`` with random fields: all of them (one in four), else 1 to 3 of its template's."""
    msg = TEMPLATES[name](mav)
    lengths = dict(zip(msg.ordered_fieldnames, msg.array_lengths))  # wire order, unlike fieldtypes
    fields = [(name, kind, lengths[name]) for name, kind in zip(msg.fieldnames, msg.fieldtypes)]
    chosen = fields if rng.random() < 0.25 else [fields[i] for i in rng.choice(len(fields), int(rng.integers(1, 4)))]
    for field, kind, length in chosen:
        if field in ("target_system", "target_component") and rng.random() < 0.5:
            continue  # keep many COMMAND_LONG/ACK addressed to us, so the deeper paths run too
        setattr(msg, field, random_field(rng, kind, length))
    return msg


class FakeClock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def offline_bridge(clock, **config):
    """A bridge that was never opened, locked onto a PX4 at system 1: frames go straight into its
    receive path (the same one the I/O thread runs), thousands per second, no sockets."""
    bridge = FcuBridge(BridgeConfig.from_dict(loopback_config(**config)), clock=clock)
    mav = mavlink2.MAVLink(None, 1, 1)
    bridge._on_bytes(TEMPLATES["HEARTBEAT"](mav).pack(mav), None, True)
    assert bridge._link.fcu is not None
    return bridge, mav


def check_bridge_invariants(bridge, where: str):
    assert bridge._handler_errors == 0, f"{where}: {bridge._last_error}"
    est = bridge.estimate()
    if est is not None:
        s = est.state
        assert s.is_finite(), where
        assert np.linalg.norm(s.position) <= MAX_POSITION_M and np.linalg.norm(s.velocity) <= MAX_SPEED_MPS, where
        assert abs(np.linalg.norm(s.attitude) - 1.0) < 1e-6, where
    v = bridge._vehicle
    low, high = bridge.config.home_altitude_range_m
    assert v.home_amsl_m is None or low <= v.home_amsl_m <= high, where
    assert v.battery_remaining is None or 0.0 <= v.battery_remaining <= 1.0, where
    assert v.landed_state in LANDED_STATES, where


# ---------------------------------------------------------------------------------------------
# Every handled message type, random fields
# ---------------------------------------------------------------------------------------------
def test_random_fields_in_every_handled_message_type(fuzz_rng):
    clock = FakeClock()
    bridge, mav = offline_bridge(clock)
    handled = set(bridge._handlers) | {"HEARTBEAT"}
    assert handled == set(TEMPLATES), "a new handler needs a template here, so that it is fuzzed"
    names = sorted(TEMPLATES)
    for i in range(6000):
        name = names[int(fuzz_rng.integers(len(names)))]
        msg = random_message(fuzz_rng, name, mav)
        clock.t += 0.001
        bridge._on_bytes(msg.pack(mav), None, True)
        check_bridge_invariants(bridge, f"message {i}: {name} {msg.to_dict()}")
        if i % 500 == 0:
            bridge.status()  # builds from whatever the fuzz left behind
    status = bridge.status()
    assert status.rx_rejected["invalid_values"] > 0 and status.rx_messages > 5000
    # authentic, sane telemetry still gets through; a fuzzed clock far ahead costs at most the
    # reboot confirmation (three messages of each stream); ODOMETRY, preferred while it lasts,
    # has timed out
    clock.t += 1.0
    boot_ms = 10_000
    for k in range(4):
        bridge._on_bytes(mav.attitude_quaternion_encode(boot_ms + k, 1.0, 0.0, 0.0, 0.0, 0, 0, 0, [0.0] * 4).pack(mav),
                         None, True)
        bridge._on_bytes(mav.local_position_ned_encode(boot_ms + k, 4.0, 5.0, -6.0, 0, 0, 0).pack(mav), None, True)
    assert bridge.state() is not None
    np.testing.assert_allclose(bridge.state().position, [5.0, 4.0, 6.0])
    check_bridge_invariants(bridge, "after the fuzz")


# ---------------------------------------------------------------------------------------------
# Reordered and replayed telemetry
# ---------------------------------------------------------------------------------------------
def delivery_order(rng, n: int, max_delay: int):
    """Indices 0..n-1 as a network delivers them: most on time, some late (by up to
    ``max_delay`` places), and after on-time ones 0, 1 or 2 replays of any earlier message."""
    delays = np.where(rng.random(n) < 0.2, rng.integers(1, max_delay + 1, n), 0)
    order = sorted(range(n), key=lambda k: (k + delays[k], k))
    out = []
    for k in order:
        out.append(k)
        if delays[k] == 0 and k > 0:
            replays = int(rng.choice([0, 1, 2], p=[0.8, 0.13, 0.07]))
            out += [int(rng.integers(0, k + 1)) for _ in range(replays)]
    return out


def test_reordered_and_replayed_telemetry_never_turns_time_back(fuzz_rng):
    mav = mavlink2.MAVLink(None, 1, 1)
    tel = TelemetryAssembler()
    n, dt_ms = 3000, 20
    # north encodes the sample index; each ATTITUDE_QUATERNION is sent with its LOCAL_POSITION_NED
    arrivals = delivery_order(fuzz_rng, n, max_delay=15)  # late by up to 0.3 s
    newest = {"pos": -1, "att": -1}
    expected_drops = seen = 0
    last_accepted = -1
    now = 100.0
    for k in arrivals:
        stamp = 1000 + dt_ms * k
        for kind in ("att", "pos"):
            now += 0.001
            expected_drop = k < newest[kind]
            expected_drops += expected_drop
            newest[kind] = max(newest[kind], k)
            try:
                if kind == "att":
                    tel.on_attitude_quaternion(mav.attitude_quaternion_encode(stamp, 1, 0, 0, 0, 0, 0, 0, [0] * 4),
                                               now, now)
                else:
                    est = tel.on_local_position(mav.local_position_ned_encode(stamp, k * 0.01, 0, -1, 0, 0, 0), now, now)
                    if est is not None:
                        index = round(est.state.position[1] / 0.01)
                        assert index >= last_accepted, f"time went back: sample {index} after {last_accepted}"
                        last_accepted = index
                assert not expected_drop, f"sample {k} ({kind}) arrived after {newest[kind]} and was accepted"
            except Exception as exc:  # noqa: BLE001 - only the out-of-order rejection is expected
                assert type(exc).__name__ == "TelemetryOutOfOrder" and expected_drop, f"sample {k} ({kind}): {exc!r}"
                seen += 1
    assert seen == expected_drops > 0 and last_accepted == n - 1 and tel.reboots == 0


def test_reboot_in_a_reordered_stream_is_followed_once(fuzz_rng):
    mav = mavlink2.MAVLink(None, 1, 1)
    tel = TelemetryAssembler()
    now = [0.0]

    def feed(stamp_ms, north):
        now[0] += 0.001
        try:
            tel.on_attitude_quaternion(mav.attitude_quaternion_encode(stamp_ms, 1, 0, 0, 0, 0, 0, 0, [0] * 4),
                                       now[0], now[0])
        except ValueError:
            pass  # out of order: counted by the bridge, nothing to check here
        try:
            return tel.on_local_position(mav.local_position_ned_encode(stamp_ms, north, 0, -1, 0, 0, 0),
                                         now[0], now[0])
        except ValueError:
            return None

    for k in range(500):  # up for 10 s
        feed(1000 + 20 * k, 0.0)
    after = [feed(3000 + 20 * k, 1000.0 + k) for k in delivery_order(fuzz_rng, 500, max_delay=5)]
    accepted = [round(e.state.position[1] - 1000.0) for e in after if e is not None]
    assert tel.reboots == 1 and accepted, "the new timeline was never taken"
    assert accepted == sorted(accepted) and accepted[-1] == 499  # forward only, to the end
    assert tel.latest.state.position[1] == 1499.0


# ---------------------------------------------------------------------------------------------
# Outgoing setpoints
# ---------------------------------------------------------------------------------------------
FENCE = {"kind": "box", "box_min_m": [-20.0, -20.0, 0.0], "box_max_m": [20.0, 20.0, 10.0], "margin_m": 0.5}
ABSURD = [0.0, -0.0, 5e-324, 1e-300, 1e39, -1e39, 1.7e308, -1.7e308, FLOAT32_MAX, -FLOAT32_MAX,
          FLOAT32_MAX * 1.000001, 1e5, -2e5, 50.0000001, 20.0000001]


def random_setpoint(rng):
    """A random Setpoint: half of them plausible (some beyond the clamps), half hostile, with
    fields often absurd (1e308, subnormal, just past a limit); None when even Setpoint()
    refuses the values (partly NaN, inf)."""
    hostile = rng.random() < 0.5

    def scalar(scale):
        r = rng.random()
        if r < 0.5 or not hostile:
            return float(rng.normal(0.0, scale))
        if r < 0.75:
            return ABSURD[int(rng.integers(len(ABSURD)))] * float(rng.choice([-1.0, 1.0]))
        return float(rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(-320.0, 308.0))

    def vector(scale):
        r = rng.random()
        if r < 0.3:
            return [NAN] * 3
        if hostile and r < 0.33:
            return [scalar(scale), NAN, scalar(scale)]  # partly NaN: refused by Setpoint itself
        if hostile and r < 0.35:
            return [INF, 0.0, 0.0]
        return [scalar(scale) for _ in range(3)]

    def angle(scale):
        return NAN if rng.random() < 0.4 else scalar(scale)

    try:
        return Setpoint(position=vector(8.0), velocity=vector(3.0), acceleration=vector(3.0), yaw=angle(3.0),
                        yaw_rate=angle(2.0))
    except ValueError:
        return None


def limit_problem(cfg, fence, mask, p, v, a, yaw, yaw_rate, wrapped: bool = True):
    """What is outside the clamps / fence / envelope (float32 slack) of a commanded setpoint, or
    None; ``wrapped``: the yaw is the wire's, wrapped to (-pi, pi] (the bridge wraps when encoding)."""
    slack = 1.0 + 1e-6
    values = [c for c in (*p, *v, *a, yaw, yaw_rate) if not math.isnan(c)]
    if not all(math.isfinite(c) and abs(c) <= FLOAT32_MAX for c in values):
        return "a field is not a finite float32"
    if not mask & 0b111:
        if fence is not None and not (fence.contains(p) or np.allclose(fence.clamp(p), p, atol=1e-4)):
            return "position outside the geofence"
        if math.hypot(*p) > cfg.envelope.max_position_m * slack:
            return "position outside the envelope"
    if not mask & 0b111000:
        if math.hypot(v[0], v[1]) > cfg.max_horizontal_speed_mps * slack:
            return "horizontal speed above the clamp"
        if abs(v[2]) > cfg.max_vertical_speed_mps * slack:
            return "vertical speed above the clamp"
    if not mask & 0b111000000 and math.hypot(*a) > cfg.max_acceleration_mps2 * slack:
        return "acceleration above the clamp"
    if not mask & 1024 and abs(yaw) > (math.pi * slack if wrapped else 1e6):
        return "yaw out of range"
    if not mask & 2048 and abs(yaw_rate) > cfg.max_yaw_rate_radps * slack:
        return "yaw rate above the clamp"
    return None


def wire_to_enu(fields):
    """A received SET_POSITION_TARGET_LOCAL_NED tuple (see SimulatedAutopilot.received_targets) in
    ENU, written out here independently of frames.py: east = NED y, north = NED x, up = -NED z."""
    mask, x, y, z, vx, vy, vz, ax, ay, az, yaw, yaw_rate = fields
    return mask, (y, x, -z), (vy, vx, -vz), (ay, ax, -az), yaw, yaw_rate


def outside_envelope(sp, env) -> bool:
    """Independent truth for the envelope: norms in long double (no overflow below 1e4932)."""
    def norm(v):
        return float(np.sqrt(np.sum(np.square(np.asarray(v, dtype=np.longdouble)))))

    return ((sp.has_position and norm(sp.position) > env.max_position_m)
            or (sp.has_velocity and norm(sp.velocity) > env.max_speed_mps)
            or (sp.has_acceleration and norm(sp.acceleration) > env.max_acceleration_mps2)
            or (sp.has_yaw_rate and abs(sp.yaw_rate) > env.max_yaw_rate_radps)
            or (sp.has_yaw and abs(sp.yaw) > 1e6))


@pytest.mark.parametrize("fenced", [False, True])
def test_setpoint_fuzz_through_the_envelope_the_clamps_and_the_encoder(fuzz_rng, fenced):
    cfg = BridgeConfig.from_dict({"failsafe": {"geofence": FENCE}} if fenced else {}).failsafe
    fence = make_geofence(cfg.geofence)
    mav, peer = mavlink2.MAVLink(None, 1, 191), mavlink2.MAVLink(None, 1, 1)
    counts = {"unconstructible": 0, "refused": 0, "sent": 0}
    for i in range(10_000):
        sp = random_setpoint(fuzz_rng)
        if sp is None or sp.is_empty:
            counts["unconstructible"] += 1
            continue
        reason = envelope_violation(sp, cfg.envelope)
        if (reason is not None) != outside_envelope(sp, cfg.envelope):
            raise AssertionError(f"setpoint {i}: {sp!r}: envelope says {reason!r}")
        if reason is not None:
            counts["refused"] += 1
            continue
        position = None if fuzz_rng.random() < 0.5 else fuzz_rng.uniform(-25.0, 25.0, 3)
        commanded, _, _ = limit_setpoint(sp, cfg, fence, position)
        t = setpoint_to_target(commanded)  # never raises for an accepted setpoint
        data = mav.set_position_target_local_ned_encode(0, 1, 1, 1, t.type_mask, t.x, t.y, t.z, t.vx, t.vy, t.vz,
                                                       t.afx, t.afy, t.afz, t.yaw, t.yaw_rate).pack(mav)
        (msg,) = peer.parse_buffer(data)
        fields = (msg.type_mask, msg.x, msg.y, msg.z, msg.vx, msg.vy, msg.vz, msg.afx, msg.afy, msg.afz, msg.yaw,
                  msg.yaw_rate)
        problem = limit_problem(cfg, fence, *wire_to_enu(fields))
        assert problem is None, f"setpoint {i}: {sp!r} -> {fields}: {problem}"
        counts["sent"] += 1
    assert min(counts.values()) > 500, counts  # every path was exercised


def test_ten_thousand_random_setpoints_never_stop_the_stream_or_leave_the_limits(fuzz_rng):
    # link_timeout_s 5 (loopback tests use 0.5): this loop holds the GIL for 10 000 sends, and a
    # fresh-clone run under a CPU hog starved the peer's telemetry thread past 0.5 s at setpoint
    # 5944 (link lost -> setpoint dropped): the link's timing is tested in test_mavlink_failsafe.py,
    # here only what the setpoints' content does
    config = loopback_config(max_setpoint_rate_hz=250.0, link_timeout_s=5.0,
                             failsafe={"geofence": FENCE, "land_after_hold_s": 5.0})
    with BridgeAndPeer(PX4, config=config, offboard_loss_s=1.0) as (bridge, peer):
        cfg = bridge.config.failsafe
        fence = make_geofence(cfg.geofence)
        bridge.set_mode("offboard")
        bridge.arm()
        assert fly_to(bridge, Setpoint.hold([0.0, 0.0, 2.0]), lambda s: abs(s.position[2] - 2.0) < 1e-3)
        with peer.lock:
            peer.received_targets.clear()
        counts = {"unconstructible": 0, "refused": 0, "accepted": 0}
        for i in range(10_000):
            sp = random_setpoint(fuzz_rng)
            if sp is None or sp.is_empty:
                counts["unconstructible"] += 1
                continue
            result = bridge.send_setpoint(sp)
            if result.refused:
                counts["refused"] += 1
                assert "envelope" in result.reason or "heading" in result.reason, result.reason
            else:
                assert result.accepted, f"setpoint {i} dropped: {result.reason}"
                counts["accepted"] += 1
                c = result.commanded
                mask = (0b111 * (not c.has_position) | 0b111000 * (not c.has_velocity)
                        | 0b111000000 * (not c.has_acceleration) | 1024 * (not c.has_yaw) | 2048 * (not c.has_yaw_rate))
                problem = limit_problem(cfg, fence, mask, c.position, c.velocity, c.acceleration, c.yaw, c.yaw_rate,
                                        wrapped=False)
                assert problem is None, f"setpoint {i}: {sp!r} commanded as {c!r}: {problem}"
            if i % 25 == 24:
                time.sleep(0.001)  # let the I/O thread and the peer run: this is a stream, not a batch
        received = peer.setpoints_received
        assert wait_until(lambda: peer.setpoints_received >= received + 5, 2.0)  # still streaming after it
        with peer.lock:
            targets = list(peer.received_targets)
        for j, fields in enumerate(targets):
            problem = limit_problem(cfg, fence, *wire_to_enu(fields))
            assert problem is None, f"target {j} on the wire: {fields}: {problem}"
        status = bridge.status()
        assert counts["refused"] > 1000 and counts["accepted"] > 1000, counts
        assert status.setpoints_refused == counts["refused"]
        assert len(targets) > 100, "the fuzz never reached the wire"
        assert status.handler_errors == 0 and bridge._thread.is_alive(), status.last_error
        assert status.failsafe not in (FailsafeReason.BRIDGE_FAULT, FailsafeReason.LINK_LOST), status.failsafe_detail
        assert status.streaming
        # nominal again on the next good setpoint: a loaded fresh-clone run's fuzz loop (this
        # test's own producer) stalled past the 0.5 s stale time, so the bridge held, as it should
        assert wait_until(lambda: bridge.send_setpoint(Setpoint.hold([0.0, 0.0, 2.0])).accepted
                          and bridge.status().stream_phase is StreamPhase.NOMINAL, 10.0), bridge.status()
        assert peer.snapshot()["mode"] == "OFFBOARD" and not any("offboard lost" in e for e in peer.events)
