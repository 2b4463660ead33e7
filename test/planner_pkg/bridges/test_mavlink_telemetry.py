"""Telemetry -> ENU/FLU state (LOCAL_POSITION_NED + ATTITUDE_QUATERNION, ODOMETRY with
covariance), time sync between the FCU's boot clock and ours, battery/home bookkeeping, and
telemetry order (late messages dropped, FCU reboots followed)."""
import math
import time

import numpy as np
import pytest
from mavlink_peer import ARDUPILOT, ODOMETRY_COVARIANCE_URT, PX4, BridgeAndPeer, loopback_config, wait_until
from pymavlink.dialects.v20 import ardupilotmega as mavlink2

from planner_pkg.bridges.mavlink import frames
from planner_pkg.bridges.mavlink.telemetry import (
    FcuClockGuard,
    TelemetryAssembler,
    TelemetryOutOfOrder,
    TelemetryRejected,
    euler_to_quaternion,
)
from planner_pkg.bridges.mavlink.timesync import TimeSync
from planner_pkg.bridges.mavlink.vehicle import VehicleTracker
from planner_pkg.types import quaternion_to_matrix

MAV = mavlink2.MAVLink(None, 1, 1)
NAN = math.nan


def q_ned_yaw(yaw):
    return [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]  # w, x, y, z


def test_local_position_and_attitude_to_enu_state():
    tel = TelemetryAssembler()
    lpn = MAV.local_position_ned_encode(1000, 1.0, 2.0, -3.0, 0.5, 0.0, -1.0)  # 1 m north, 2 m east, 3 m up
    assert tel.on_local_position(lpn, 10.0, 10.0) is None  # no attitude yet: no state
    tel.on_attitude_quaternion(MAV.attitude_quaternion_encode(1000, *q_ned_yaw(0.0), 0.1, 0.2, 0.3, [0] * 4), 10.0, 10.0)
    est = tel.on_local_position(lpn, 10.0, 10.01)
    s = est.state
    np.testing.assert_allclose(s.position, [2.0, 1.0, 3.0])
    np.testing.assert_allclose(s.velocity, [0.0, 0.5, 1.0])  # 0.5 m/s north, climbing at 1 m/s
    assert s.yaw == pytest.approx(math.pi / 2)  # NED heading 0 = facing north = ENU pi/2
    np.testing.assert_allclose(s.angular_velocity, [0.1, -0.2, -0.3])
    assert est.source == "local_position" and est.pose_covariance is None


def test_attitude_euler_fallback_matches_quaternion():
    tel = TelemetryAssembler()
    roll, pitch, yaw = 0.1, -0.2, 2.0
    tel.on_attitude_euler(MAV.attitude_encode(0, roll, pitch, yaw, 0, 0, 0), 0.0, 0.0)
    est = tel.on_local_position(MAV.local_position_ned_encode(0, 0, 0, 0, 0, 0, 0), 0.0, 0.0)
    r_ned = frames.ENU_NED @ quaternion_to_matrix(est.state.attitude) @ frames.FLU_FRD
    assert math.atan2(r_ned[1, 0], r_ned[0, 0]) == pytest.approx(yaw)
    assert math.asin(-r_ned[2, 0]) == pytest.approx(pitch)
    np.testing.assert_allclose(np.linalg.norm(euler_to_quaternion(roll, pitch, yaw)), 1.0)


def odometry(yaw=0.0, child=12, frame=1, q=None, pos=(1.0, 2.0, -3.0), vel=(1.0, 0.0, 0.0), cov=ODOMETRY_COVARIANCE_URT):
    return MAV.odometry_encode(5_000_000, frame, child, *pos, q or q_ned_yaw(yaw), *vel, 0.0, 0.0, 0.1, list(cov),
                               list(cov), 0, 0, 100)


def test_odometry_body_velocity_and_covariances():
    tel = TelemetryAssembler()
    est = tel.on_odometry(odometry(yaw=math.pi / 2, vel=(1.0, 0.0, 0.0)), 5.0, 5.0)  # facing east, 1 m/s forward
    s = est.state
    np.testing.assert_allclose(s.position, [2.0, 1.0, 3.0])
    np.testing.assert_allclose(s.velocity, [1.0, 0.0, 0.0], atol=1e-12)  # forward = east
    assert s.yaw == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(s.angular_velocity, [0.0, 0.0, -0.1])  # yaw rate about down -> about up
    cov_ned = frames.covariance_from_mavlink_urt(ODOMETRY_COVARIANCE_URT)
    p = est.pose_covariance
    assert (p[0, 0], p[1, 1], p[2, 2]) == (0.04, 0.01, 0.09)  # east/north swap, up keeps the variance
    assert p[0, 1] == cov_ned[0, 1]  # north-east correlation stays
    assert p[0, 5] == pytest.approx(-cov_ned[1, 5])  # cov(east, yaw): yaw about up = -yaw about down
    t = est.twist_covariance  # body FRD -> FLU
    assert (t[0, 0], t[1, 1], t[2, 2]) == (0.01, 0.04, 0.09) and t[0, 1] == -cov_ned[0, 1]
    np.testing.assert_allclose(p, p.T)


def test_odometry_world_velocity_frame_and_unknown_covariance():
    tel = TelemetryAssembler()
    est = tel.on_odometry(odometry(yaw=0.0, child=1, vel=(0.0, 2.0, 0.0), cov=[NAN] + [0.0] * 20), 1.0, 1.0)
    np.testing.assert_allclose(est.state.velocity, [2.0, 0.0, 0.0])  # world NED east -> ENU x
    assert est.pose_covariance is None and est.twist_covariance is None


def test_odometry_preferred_over_local_position():
    tel = TelemetryAssembler(odometry_timeout_s=0.5)
    tel.on_attitude_quaternion(MAV.attitude_quaternion_encode(0, *q_ned_yaw(0.0), 0, 0, 0, [0] * 4), 0.0, 0.0)
    tel.on_odometry(odometry(), 1.0, 1.0)
    assert tel.on_local_position(MAV.local_position_ned_encode(0, 9, 9, 9, 0, 0, 0), 1.1, 1.1) is None
    assert tel.latest.source == "odometry"
    tel.on_attitude_quaternion(MAV.attitude_quaternion_encode(0, *q_ned_yaw(0.0), 0, 0, 0, [0] * 4), 2.0, 2.0)
    assert tel.on_local_position(MAV.local_position_ned_encode(0, 9, 9, -9, 0, 0, 0), 2.0, 2.0) is not None  # fallback


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: odometry(pos=(NAN, 0.0, 0.0)), "non-finite"),
        (lambda: odometry(q=[0.0, 0.0, 0.0, 0.0]), "not a unit quaternion"),
        (lambda: odometry(frame=8), "frame_id 8 unsupported"),
        (lambda: odometry(child=7), "child_frame_id 7 unsupported"),
        (lambda: odometry(pos=(1e7, 0.0, 0.0)), "plausible"),
        (lambda: odometry(vel=(500.0, 0.0, 0.0)), "plausible"),
        (lambda: odometry(cov=[1.0] + [NAN] * 20), "covariance"),
    ],
)
def test_bad_odometry_rejected_and_state_kept(make, message):
    tel = TelemetryAssembler()
    good = tel.on_odometry(odometry(), 1.0, 1.0)
    with pytest.raises(TelemetryRejected, match=message):
        tel.on_odometry(make(), 2.0, 2.0)
    assert tel.latest is good


# ---------------------------------------------------------------------------------------------
# Time sync (pure)
# ---------------------------------------------------------------------------------------------
def test_timesync_offset_from_the_best_round_trip():
    ts = TimeSync()
    true_offset = 123.0  # FCU boot clock = ours + 123 s
    for now, rtt, asym in ((10.0, 0.050, 0.8), (11.0, 0.004, 0.5), (12.0, 0.030, 0.2)):
        _, ts1 = ts.request(now)
        fcu_at_reply = now + asym * rtt + true_offset
        ts.on_timesync(int(fcu_at_reply * 1e9), ts1, now + rtt)
    assert ts.source == "timesync" and ts.rtt_s == pytest.approx(0.004)
    assert ts.offset_s == pytest.approx(true_offset, abs=0.001)
    assert ts.to_local(200.0, receipt_s=77.5) == pytest.approx(77.0, abs=0.001)  # measured 0.5 s before receipt
    assert ts.to_local(300.0, receipt_s=77.5) == 77.5  # far off (a reboot not caught yet): use the receipt


def test_timesync_answers_requests_ignores_strangers_and_detects_reboot():
    ts = TimeSync()
    assert ts.on_timesync(0, 42, 1.5) == (1_500_000_000, 42)  # the FCU asked: answer with our time
    assert ts.on_timesync(999, 12345, 2.0) is None and ts.offset_s is None  # not an answer to us
    _, ts1 = ts.request(3.0)
    ts.on_timesync(int((3.001 + 50.0) * 1e9), ts1, 3.002)
    _, ts1 = ts.request(4.0)
    ts.on_timesync(int((4.001 + 1.0) * 1e9), ts1, 4.002)  # FCU clock restarted
    assert ts.resets == 1 and ts.offset_s == pytest.approx(1.0, abs=0.01)


def test_system_time_fallback():
    ts = TimeSync()
    ts.on_system_time(5000, 2.0)
    ts.on_system_time(6010, 3.0)  # this one arrived 0 ms late, the first 10 ms late
    assert ts.source == "system_time" and ts.offset_s == pytest.approx(3.01)


# ---------------------------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------------------------
def test_time_sync_and_state_stamps_against_the_peer():
    with BridgeAndPeer(PX4) as (bridge, peer):
        assert wait_until(lambda: bridge.status().time_sync_source == "timesync", 3.0)
        assert bridge.status().time_offset_s == pytest.approx(-peer.boot_t0, abs=0.02)
        est = bridge.estimate()
        assert est.state.t <= est.received_t and est.received_t - est.state.t < 0.1
        assert abs(time.monotonic() - est.state.t) < 0.5


@pytest.mark.parametrize("flavour", [PX4, ARDUPILOT])
def test_odometry_end_to_end_with_covariance_and_status(flavour):
    with BridgeAndPeer(flavour, odometry=True) as (bridge, peer):
        peer.set_position([4.0, -1.0, -2.5])  # 4 m north, 1 m west, 2.5 m up
        assert wait_until(lambda: np.allclose(bridge.state().position, [-1.0, 4.0, 2.5]), 2.0)
        est = bridge.estimate()
        assert est.source == "odometry"
        assert est.pose_covariance[0, 0] == pytest.approx(0.04) and est.pose_covariance[1, 1] == pytest.approx(0.01)
        assert wait_until(lambda: bridge.status().battery_voltage_v is not None, 2.0)
        status = bridge.status()
        assert status.battery_voltage_v == pytest.approx(16.0) and status.battery_remaining == pytest.approx(0.75)
        assert status.autopilot.value == flavour and status.landed_state == "on_ground"
        assert status.rx_rejected_total == 0
        assert peer.bridge_heartbeats and peer.bridge_heartbeats[0][1:] == (191, 18)  # onboard controller


# ---------------------------------------------------------------------------------------------
# Order of telemetry, FCU reboots, HOME_POSITION bounds (issue 20, item 8)
# ---------------------------------------------------------------------------------------------
def lpn(boot_ms, north):
    return MAV.local_position_ned_encode(boot_ms, north, 0.0, -1.0, 0.0, 0.0, 0.0)


def att(boot_ms, yaw=0.0):
    return MAV.attitude_quaternion_encode(boot_ms, *q_ned_yaw(yaw), 0.0, 0.0, 0.0, [0] * 4)


def test_older_local_position_arriving_later_is_dropped():
    tel = TelemetryAssembler()
    tel.on_attitude_quaternion(att(2000), 2.0, 2.0)
    newer = tel.on_local_position(lpn(2000, 5.0), 2.0, 2.0)
    with pytest.raises(TelemetryOutOfOrder, match="0.010 s older"):
        tel.on_local_position(lpn(1990, 4.0), 1.99, 2.01)  # sent before `newer`, delivered after
    assert tel.latest is newer and newer.state.position[1] == 5.0
    assert tel.on_local_position(lpn(2000, 5.5), 2.0, 2.02).state.position[1] == 5.5  # same ms: accepted
    with pytest.raises(TelemetryOutOfOrder):
        tel.on_attitude_quaternion(att(1500, yaw=1.0), 1.5, 2.03)  # an old attitude is no attitude
    assert tel.on_local_position(lpn(2020, 6.0), 2.02, 2.04).state.yaw == pytest.approx(math.pi / 2)
    tel.on_odometry(odometry(), 5.0, 5.0)  # time_usec 5_000_000
    old = MAV.odometry_encode(4_000_000, 1, 12, 9.0, 9.0, 9.0, q_ned_yaw(0.0), 0, 0, 0, 0, 0, 0, [NAN] * 21,
                              [NAN] * 21, 0, 0, 100)
    with pytest.raises(TelemetryOutOfOrder, match="ODOMETRY"):
        tel.on_odometry(old, 4.0, 5.1)


def test_a_rejected_message_does_not_move_the_clock():
    tel = TelemetryAssembler()
    tel.on_attitude_quaternion(att(1000), 1.0, 1.0)
    tel.on_local_position(lpn(1000, 1.0), 1.0, 1.0)
    with pytest.raises(TelemetryRejected):
        tel.on_local_position(MAV.local_position_ned_encode(90_000, NAN, 0, 0, 0, 0, 0), 1.0, 1.0)
    assert tel.on_local_position(lpn(1020, 2.0), 1.02, 1.02) is not None  # not "older than 90 s"


def test_fcu_reboot_starts_a_new_timeline_after_three_consistent_messages():
    guard = FcuClockGuard("LOCAL_POSITION_NED")
    guard.commit(100_000_000)  # up for 100 s
    for stamp in (3_000_000, 3_020_000):  # rebooted: time restarts near zero
        with pytest.raises(TelemetryOutOfOrder):
            guard.check(stamp)
    guard.check(3_040_000)  # the third in a row, running forward: a new timeline
    assert guard.commit(3_040_000) and guard.reboots == 1 and guard.newest_us == 3_040_000
    guard.check(3_060_000)
    assert not guard.commit(3_060_000)


def test_replayed_old_messages_between_live_ones_never_look_like_a_reboot():
    guard = FcuClockGuard("LOCAL_POSITION_NED")
    guard.commit(100_000_000)
    for i in range(50):
        for stale in (10_000_000 + i, 10_000_001 + i):  # two replays, then a live message
            with pytest.raises(TelemetryOutOfOrder):
                guard.check(stale)
        live = 100_000_000 + 20_000 * (i + 1)
        guard.check(live)
        guard.commit(live)
    assert guard.reboots == 0
    for stale in (99_999_000, 99_998_000, 99_997_000):  # late, but within a second: never a reboot
        with pytest.raises(TelemetryOutOfOrder):
            guard.check(stale)


def test_reboot_end_to_end_state_follows_the_new_clock():
    tel = TelemetryAssembler()
    tel.on_attitude_quaternion(att(100_000), 1.0, 1.0)
    tel.on_local_position(lpn(100_000, 1.0), 1.0, 1.0)
    results = []
    for i in range(4):
        ms = 2000 + 20 * i
        for call in (lambda: tel.on_attitude_quaternion(att(ms), 2.0, 2.0),
                     lambda: tel.on_local_position(lpn(ms, 7.0 + i), 2.0, 2.0)):
            try:
                results.append(call())
            except TelemetryOutOfOrder:
                results.append("dropped")
    assert results[:4] == ["dropped"] * 4  # two of each stream
    assert results[4] is None  # the attitude's new timeline ...
    assert results[5].state.position[1] == 9.0  # ... and the position's
    assert tel.reboots == 1 and tel.latest.state.position[1] == 10.0


def test_home_position_altitude_is_bounded():
    tracker = VehicleTracker(home_altitude_range_m=(-500.0, 9000.0))
    tracker.on_home_position(MAV.home_position_encode(473977420, 85455940, 488_000, 0, 0, 0, [1, 0, 0, 0], 0, 0, 0))
    assert tracker.home_amsl_m == pytest.approx(488.0)
    for altitude_mm in (2_147_483_647, -2_147_483_648, 9_000_001, -500_001):
        with pytest.raises(TelemetryRejected, match="home_altitude_range_m"):
            tracker.on_home_position(MAV.home_position_encode(473977420, 85455940, altitude_mm, 0, 0, 0,
                                                              [1, 0, 0, 0], 0, 0, 0))
    assert tracker.home_amsl_m == pytest.approx(488.0)


def test_late_and_absurd_telemetry_from_the_fcu_changes_nothing_end_to_end():
    with BridgeAndPeer(PX4, config=loopback_config(link_timeout_s=3.0)) as (bridge, peer):
        assert wait_until(lambda: bridge._vehicle.home_amsl_m is not None, 2.0)
        peer.stream_state = False  # from here the test sends the position messages itself
        time.sleep(0.1)
        boot_ms = int(peer.boot_time_s() * 1000)
        peer.send(peer.mav.attitude_quaternion_encode(boot_ms, *q_ned_yaw(0.0), 0.0, 0.0, 0.0, [0.0] * 4))
        peer.send(peer.mav.local_position_ned_encode(boot_ms, 3.0, 0.0, -1.0, 0.0, 0.0, 0.0))
        assert wait_until(lambda: bridge.state() is not None and bridge.state().position[1] == 3.0, 1.0)
        newest = bridge.estimate()
        peer.send(peer.mav.local_position_ned_encode(boot_ms - 40, 2.0, 0.0, -1.0, 0.0, 0.0, 0.0))  # late
        peer.send(peer.mav.home_position_encode(473977420, 85455940, 2_147_000_000, 0, 0, 0, [1, 0, 0, 0], 0, 0, 0))
        time.sleep(0.1)  # loopback delivers in well under that
        assert bridge.estimate() is newest and bridge._vehicle.home_amsl_m == pytest.approx(peer.home_amsl_m)
        assert wait_until(lambda: bridge.status().rx_rejected.get("out_of_order") == 1
                          and bridge.status().rx_rejected["invalid_values"] >= 1, 1.0)
        peer.send(peer.mav.local_position_ned_encode(boot_ms + 20, 4.0, 0.0, -1.0, 0.0, 0.0, 0.0))
        assert wait_until(lambda: bridge.state().position[1] == 4.0, 1.0)  # the live stream goes on
        assert bridge.status().handler_errors == 0
