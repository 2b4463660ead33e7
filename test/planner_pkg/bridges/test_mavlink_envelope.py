"""Hostile setpoints (issue 20, item 1): the flight envelope refuses absurd setpoints with a
reason while the last good one keeps streaming, yaw rate is clamped, the encoder can never
hand struct an unpackable float, and the I/O thread turns its own faults into a failsafe."""
import logging
import math
import struct

import numpy as np
import pytest
from mavlink_peer import PX4, BridgeAndPeer, fly_to, loopback_config, wait_until
from pymavlink.dialects.v20 import ardupilotmega as mavlink2

from planner_pkg.bridges.mavlink import BridgeConfig, EnvelopeConfig, FailsafeConfig, FailsafeReason
from planner_pkg.bridges.mavlink.failsafe import envelope_violation, limit_setpoint
from planner_pkg.bridges.mavlink.setpoints import FLOAT32_MAX, SetpointEncodingError, setpoint_to_target
from planner_pkg.types import Setpoint

ENV = EnvelopeConfig()  # defaults: 10 km, 50 m/s, 50 m/s^2, 20 rad/s
HOVER = (0.0, 0.0, 2.0)


# ---------------------------------------------------------------------------------------------
# Pure logic
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sp, words", [
    (Setpoint.from_velocity([0.0, 0.0, 0.0], yaw_rate=1e39), "yaw_rate 1e+39"),
    (Setpoint.from_velocity([0.0, 0.0, 0.0], yaw_rate=-50.0), "yaw_rate -50"),
    (Setpoint.hold([1e39, 0.0, 0.0]), "position (1e+39, 0, 0)"),
    (Setpoint.hold([8000.0, 8000.0, 10.0]), "max_position_m"),  # 11.3 km from the origin
    (Setpoint.hold([1e308, 1e308, 1e308]), "max_position_m"),  # hypot overflows to inf: still refused
    (Setpoint.from_velocity([300.0, 0.0, 0.0]), "velocity"),
    (Setpoint.from_acceleration([0.0, 0.0, -1e6]), "acceleration"),
    (Setpoint.hold([1.0, 2.0, 3.0], yaw=1e300), "not a heading"),
])
def test_out_of_envelope_setpoints_are_refused_with_a_reason(sp, words):
    reason = envelope_violation(sp, ENV)
    assert reason is not None and words in reason


def test_setpoints_inside_the_envelope_pass():
    for sp in (Setpoint.hold([9000.0, -4000.0, 100.0], yaw=7.0),  # 9.85 km: inside; an unwrapped yaw is fine
               Setpoint(position=[1, 2, 3], velocity=[30.0, 0.0, -40.0], acceleration=[0.0, 0.0, -49.0],
                        yaw_rate=-20.0)):
        assert envelope_violation(sp, ENV) is None


def test_yaw_rate_is_clamped_like_the_speeds():
    cfg = FailsafeConfig()  # max_yaw_rate_radps = 3.0
    sp, tags, details = limit_setpoint(Setpoint.from_velocity([0.0, 0.0, 0.0], yaw_rate=-5.0), cfg, None, None)
    assert sp.yaw_rate == -3.0 and tags == ("yaw_rate",) and "-5.00 rad/s clamped to -3.00" in details[0]
    ok = Setpoint.from_velocity([0.0, 0.0, 0.0], yaw_rate=2.5)
    assert limit_setpoint(ok, cfg, None, None)[0] is ok


def test_encoder_refuses_what_float32_cannot_hold_and_packs_the_rest():
    mav = mavlink2.MAVLink(None, 1, 191)
    for sp, field in ((Setpoint.from_velocity([0.0, 0.0, 0.0], yaw_rate=1e39), "yaw_rate"),
                      (Setpoint.hold([0.0, 1e39, 0.0]), ".x"),  # ENU y is NED x
                      (Setpoint.from_acceleration([0.0, 0.0, -3.5e38]), "afz")):
        with pytest.raises(SetpointEncodingError, match=field):
            setpoint_to_target(sp)
    edge = Setpoint.from_velocity([FLOAT32_MAX, -FLOAT32_MAX, 0.0], yaw_rate=-FLOAT32_MAX)
    t = setpoint_to_target(edge)
    data = mav.set_position_target_local_ned_encode(0, 1, 1, 1, t.type_mask, t.x, t.y, t.z, t.vx, t.vy, t.vz,
                                                   t.afx, t.afy, t.afz, t.yaw, t.yaw_rate).pack(mav)
    decoded = mavlink2.MAVLink(None, 1, 1).parse_buffer(data)[0]
    assert decoded.vx == -FLOAT32_MAX and decoded.yaw_rate == FLOAT32_MAX  # packed, not overflowed
    with pytest.raises(OverflowError):  # what the guard stands in front of
        struct.pack("<f", 1e39)


def test_envelope_config_is_validated_at_load():
    cfg = BridgeConfig.from_dict({"failsafe.envelope.max_yaw_rate_radps": 10.0})
    assert cfg.failsafe.envelope.max_yaw_rate_radps == 10.0 and cfg.failsafe.max_yaw_rate_radps == 3.0
    for values, words in (
            ({"failsafe.envelope.max_speed_mps": 3.0}, "failsafe.envelope.max_speed_mps (3) must be at least"),
            ({"failsafe.max_yaw_rate_radps": 30.0}, "failsafe.envelope.max_yaw_rate_radps"),
            ({"failsafe.envelope.max_position_m": 1e9}, "failsafe.envelope.max_position_m must be finite"),
            ({"failsafe.envelope.max_acceleration_mps2": math.nan}, "failsafe.envelope.max_acceleration_mps2"),
            ({"failsafe.envelope.max_position_m": 60.0, "failsafe.geofence.kind": "box"}, "must contain the geofence"),
            ({"failsafe.envelope.max_yaw_rate_radps": 0.0}, "failsafe.envelope.max_yaw_rate_radps"),
            ({"home_altitude_range_m": [100.0, -100.0]}, "home_altitude_range_m"),
            ({"home_altitude_range_m": [0.0, 1e9]}, "home_altitude_range_m")):
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
            BridgeConfig.from_dict(values)


# ---------------------------------------------------------------------------------------------
# End to end against the simulated PX4
# ---------------------------------------------------------------------------------------------
def hover(bridge):
    bridge.set_mode("offboard")
    bridge.arm()
    assert fly_to(bridge, Setpoint.hold(HOVER), lambda s: np.allclose(s.position, HOVER, atol=1e-3))


def test_absurd_setpoints_are_refused_and_the_last_good_one_keeps_streaming():
    with BridgeAndPeer(PX4) as (bridge, peer):
        hover(bridge)
        good = bridge.send_setpoint(Setpoint.hold(HOVER, yaw=0.0))
        assert good.accepted
        for bad, words in ((Setpoint.from_velocity([0.0, 0.0, 0.0], yaw_rate=1e39), "yaw_rate"),
                           (Setpoint.hold([1e39, 0.0, 2.0]), "position"),  # geofence none: nothing else stops it
                           (Setpoint.from_velocity([0.0, 0.0, 0.0], yaw_rate=-50.0), "yaw_rate")):
            result = bridge.send_setpoint(bad)
            assert not result.accepted and result.refused and words in result.reason
        received = peer.setpoints_received
        assert wait_until(lambda: peer.setpoints_received >= received + 5, 2.0)  # the stream goes on ...
        target = peer.target
        assert target["position"] == pytest.approx([0.0, 0.0, -2.0]) and target["yaw_rate"] is None  # ... unchanged
        assert target["yaw"] == pytest.approx(math.pi / 2)
        assert bridge.send_setpoint(Setpoint.hold(HOVER, yaw=0.0)).accepted
        status = bridge.status()
        assert status.setpoints_refused == 3 and "yaw_rate -50" in status.last_refusal
        assert status.handler_errors == 0 and status.failsafe is FailsafeReason.NONE and bridge._thread.is_alive()
        # a yaw rate inside the envelope but above the clamp is clamped, and the FCU sees the clamp
        result = bridge.send_setpoint(Setpoint.from_velocity([0.0, 0.0, 0.0], yaw_rate=5.0))
        assert result.accepted and result.clamped == ("yaw_rate",)
        assert wait_until(lambda: peer.target["yaw_rate"] is not None, 1.0)
        assert peer.target["yaw_rate"] == pytest.approx(-3.0)  # ENU +3 rad/s about up = NED -3 about down
        assert bridge.status().clamps["yaw_rate"] == 1


def test_only_refused_setpoints_end_in_the_stale_stream_hold():
    with BridgeAndPeer(PX4) as (bridge, _peer):
        hover(bridge)
        bad = Setpoint.hold([0.0, 0.0, 2.0e5])
        assert wait_until(lambda: not bridge.send_setpoint(bad).accepted
                          and bridge.status().failsafe is FailsafeReason.STREAM_STALE_HOLD, 2.0)
        assert bridge.status().setpoints_refused > 0


def test_an_unencodable_stream_target_raises_a_failsafe_and_holds_instead():
    """Defence in depth: should a bad setpoint ever get past the envelope, the I/O thread must
    neither die nor spin silently on it."""
    with BridgeAndPeer(PX4) as (bridge, peer):
        hover(bridge)
        with bridge._lock:  # what a bug in the acceptance path would leave behind (no fence: no clamp)
            bridge._supervisor.on_input(bridge._clock())
            bridge._user_sp = Setpoint.hold([0.0, 1e39, 2.0])
            bridge._dirty = True
        assert wait_until(lambda: bridge.status().failsafe is FailsafeReason.BRIDGE_FAULT, 1.0)
        status = bridge.status()
        assert "setpoint encoding failed" in status.failsafe_detail and "hold" in status.failsafe_detail
        received = peer.setpoints_received
        assert wait_until(lambda: peer.setpoints_received >= received + 5, 2.0)
        target = peer.target
        assert target["position"] == pytest.approx([0.0, 0.0, -2.0], abs=1e-3) and target["yaw_rate"] is None
        assert bridge._thread.is_alive()
        faults = bridge.status().handler_errors
        assert faults >= 1
        assert fly_to(bridge, Setpoint.hold([1.0, 0.0, 2.0]), lambda s: abs(s.position[0] - 1.0) < 1e-3)
        assert bridge.status().handler_errors == faults  # one fault, not one per tick


def test_a_failing_io_loop_is_a_failsafe_and_logs_throttled(caplog):
    with BridgeAndPeer(PX4) as (bridge, _peer):
        poll = bridge._commands.poll

        def broken(now):
            raise RuntimeError("injected bug")

        with caplog.at_level(logging.ERROR, logger="planner_pkg.fcu_bridge"):
            bridge._commands.poll = broken
            assert wait_until(lambda: bridge.status().handler_errors >= 20, 3.0)
            status = bridge.status()
            assert status.failsafe is FailsafeReason.BRIDGE_FAULT and "injected bug" in status.failsafe_detail
            bridge._commands.poll = poll
        faults = [r for r in caplog.records if "fcu_bridge fault" in r.getMessage()]
        assert 1 <= len(faults) < status.handler_errors / 4  # throttled, not one line per tick
        assert bridge._thread.is_alive()
        assert wait_until(lambda: bridge.status().failsafe is FailsafeReason.NONE, 3.0)  # cleared once it stops
        bridge.arm()  # and the link works
        assert bridge.status().armed


def test_envelope_from_the_config_is_enforced():
    config = loopback_config(failsafe={"envelope": {"max_position_m": 30.0}})
    with BridgeAndPeer(PX4, config=config) as (bridge, _peer):
        hover(bridge)
        assert bridge.send_setpoint(Setpoint.hold([20.0, 20.0, 2.0])).accepted  # 28.4 m
        result = bridge.send_setpoint(Setpoint.hold([25.0, 20.0, 2.0]))  # 32.1 m
        assert result.refused and "max_position_m = 30" in result.reason
