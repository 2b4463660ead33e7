"""Command protocol (ACK, NACK, retries, IN_PROGRESS, queueing), mode tables, link lock-on.

Pure logic with an explicit clock, plus end-to-end ACK/NACK/timeout against the simulated FCU."""
import pytest
from mavlink_peer import DENIED, PX4, BridgeAndPeer, loopback_config
from pymavlink.dialects.v20 import ardupilotmega as mavlink2

from planner_pkg.bridges.mavlink import CommandRefused, CommandRejected, CommandTimeout, FlightMode, LinkState
from planner_pkg.bridges.mavlink.commands import (
    MAV_CMD_COMPONENT_ARM_DISARM,
    MAV_CMD_DO_SET_MODE,
    CommandCancelled,
    CommandManager,
    CommandRequest,
)
from planner_pkg.bridges.mavlink.link import LinkMonitor
from planner_pkg.bridges.mavlink.modes import Autopilot, decode_mode, encode_mode, px4_custom_mode
from planner_pkg.types import Setpoint


def request(command=MAV_CMD_COMPONENT_ARM_DISARM, label="arm"):
    return CommandRequest(command, (1.0, 0, 0, 0, 0, 0, 0), 1, 1, label)


class Wire:
    def __init__(self):
        self.sent = []

    def __call__(self, req, confirmation):
        self.sent.append((req.command, confirmation))
        return True


# ---------------------------------------------------------------------------------------------
# CommandManager
# ---------------------------------------------------------------------------------------------
def test_ack_completes_the_command():
    wire = Wire()
    mgr = CommandManager(wire, ack_timeout_s=0.5, retries=2)
    pending = mgr.submit(request(), now=0.0)
    assert wire.sent == [(MAV_CMD_COMPONENT_ARM_DISARM, 0)]
    assert mgr.on_ack(MAV_CMD_COMPONENT_ARM_DISARM, 0, now=0.1)
    assert pending.wait(0) == 0


def test_retries_increment_confirmation_then_time_out():
    wire = Wire()
    mgr = CommandManager(wire, ack_timeout_s=0.5, retries=2)
    pending = mgr.submit(request(), now=0.0)
    for now in (0.49, 0.5, 1.0, 1.5):
        mgr.poll(now)
    assert [c for _, c in wire.sent] == [0, 1, 2]  # three attempts, confirmation 0, 1, 2
    with pytest.raises(CommandTimeout, match="no COMMAND_ACK after 3 attempts"):
        pending.wait(0)


def test_nack_raises_with_the_result_name():
    mgr = CommandManager(Wire(), ack_timeout_s=0.5, retries=0)
    pending = mgr.submit(request(label="set mode offboard"), now=0.0)
    mgr.on_ack(MAV_CMD_COMPONENT_ARM_DISARM, 1, now=0.1)
    with pytest.raises(CommandRejected, match="'set mode offboard': MAV_RESULT_TEMPORARILY_REJECTED") as info:
        pending.wait(0)
    assert info.value.result == 1


def test_in_progress_extends_the_wait_without_resending():
    wire = Wire()
    mgr = CommandManager(wire, ack_timeout_s=0.5, retries=3)
    pending = mgr.submit(request(), now=0.0)
    mgr.on_ack(MAV_CMD_COMPONENT_ARM_DISARM, 5, now=0.4)
    mgr.poll(0.8)  # 0.4 s after IN_PROGRESS: still waiting, nothing re-sent
    assert len(wire.sent) == 1 and not pending.done
    mgr.on_ack(MAV_CMD_COMPONENT_ARM_DISARM, 0, now=0.85)
    assert pending.wait(0) == 0


def test_same_command_id_is_queued_and_others_run_concurrently():
    wire = Wire()
    mgr = CommandManager(wire, ack_timeout_s=0.5, retries=0)
    first = mgr.submit(request(label="first"), now=0.0)
    second = mgr.submit(request(label="second"), now=0.0)
    mode = mgr.submit(request(MAV_CMD_DO_SET_MODE, "mode"), now=0.0)
    assert wire.sent == [(MAV_CMD_COMPONENT_ARM_DISARM, 0), (MAV_CMD_DO_SET_MODE, 0)]
    mgr.on_ack(MAV_CMD_COMPONENT_ARM_DISARM, 0, now=0.1)  # completes "first", sends "second"
    assert first.done and not second.done and len(wire.sent) == 3
    mgr.on_ack(MAV_CMD_COMPONENT_ARM_DISARM, 0, now=0.2)
    mgr.on_ack(MAV_CMD_DO_SET_MODE, 0, now=0.2)
    assert second.wait(0) == 0 and mode.wait(0) == 0


def test_unexpected_ack_is_counted_and_cancel_fails_waiters():
    mgr = CommandManager(Wire(), ack_timeout_s=0.5, retries=0)
    assert not mgr.on_ack(22, 0, now=0.0)
    assert mgr.unexpected_acks == 1
    pending = mgr.submit(request(), now=0.0)
    mgr.cancel_all("the bridge was closed")
    with pytest.raises(CommandCancelled, match="'arm' cancelled: the bridge was closed"):
        pending.wait(0)


# ---------------------------------------------------------------------------------------------
# Modes
# ---------------------------------------------------------------------------------------------
def test_px4_mode_tables():
    assert encode_mode(Autopilot.PX4, FlightMode.OFFBOARD) == (1.0, 6.0, 0.0)
    assert encode_mode(Autopilot.PX4, "land") == (1.0, 4.0, 6.0)
    assert decode_mode(Autopilot.PX4, 1 | 128, px4_custom_mode(6)) == (FlightMode.OFFBOARD, "OFFBOARD")
    assert decode_mode(Autopilot.PX4, 1, px4_custom_mode(4, 3)) == (FlightMode.HOLD, "AUTO.LOITER")
    assert decode_mode(Autopilot.PX4, 1, px4_custom_mode(4, 77)) == (FlightMode.OTHER, "AUTO.SUB_77")
    assert decode_mode(Autopilot.PX4, 0, px4_custom_mode(6))[0] is FlightMode.OTHER  # no custom-mode flag


def test_ardupilot_mode_tables():
    assert encode_mode(Autopilot.ARDUPILOT, FlightMode.OFFBOARD) == (1.0, 4.0, 0.0)  # GUIDED
    assert decode_mode(Autopilot.ARDUPILOT, 1, 9) == (FlightMode.LAND, "LAND")
    assert decode_mode(Autopilot.ARDUPILOT, 1, 17) == (FlightMode.HOLD, "BRAKE")
    with pytest.raises(ValueError, match="ArduCopter has no mode for 'takeoff'"):
        encode_mode(Autopilot.ARDUPILOT, FlightMode.TAKEOFF)


# ---------------------------------------------------------------------------------------------
# Link lock-on and loss (pure)
# ---------------------------------------------------------------------------------------------
def heartbeat(src_system=1, src_component=1, autopilot=12, mav_type=2):
    mav = mavlink2.MAVLink(None, src_system, src_component)
    msg = mav.heartbeat_encode(mav_type, autopilot, 1, 0, 3, 3)
    return mav.decode(bytearray(msg.pack(mav)))


def test_link_locks_on_the_first_fitting_autopilot_and_detects_loss():
    link = LinkMonitor(timeout_s=0.5)
    addr = ("127.0.0.1", 5000)
    assert link.on_heartbeat(heartbeat(mav_type=6, autopilot=8), addr, 0.0) == "foreign"  # a GCS
    assert link.on_heartbeat(heartbeat(src_component=191, autopilot=8, mav_type=18), addr, 0.0) == "foreign"
    assert link.on_heartbeat(heartbeat(), addr, 0.0) == "locked"
    assert link.fcu.autopilot is Autopilot.PX4 and link.state is LinkState.OK
    assert link.on_heartbeat(heartbeat(), ("127.0.0.1", 6000), 0.1) == "foreign"  # same ids, other address
    assert link.on_heartbeat(heartbeat(autopilot=3), addr, 0.1) == "invalid"  # family changed mid-session
    assert link.poll(0.5) is None
    assert link.poll(0.61) is LinkState.LOST and link.losses == 1
    # while lost, the FCU may come back from another port (reboot)
    assert link.on_heartbeat(heartbeat(), ("127.0.0.1", 6000), 1.0) == "locked"
    assert link.fcu.address == ("127.0.0.1", 6000) and link.state is LinkState.OK


def test_link_refuses_the_wrong_autopilot_or_vehicle():
    link = LinkMonitor(timeout_s=0.5, expected=Autopilot.PX4)
    assert link.on_heartbeat(heartbeat(autopilot=3), None, 0.0) == "foreign"
    assert "config says autopilot: px4" in link.note
    link = LinkMonitor(timeout_s=0.5)
    assert link.on_heartbeat(heartbeat(autopilot=3, mav_type=1), None, 0.0) == "foreign"  # ArduPlane
    assert "only ArduCopter" in link.note
    link = LinkMonitor(timeout_s=0.5, fcu_system_id=7)
    assert link.on_heartbeat(heartbeat(src_system=1), None, 0.0) == "foreign"


# ---------------------------------------------------------------------------------------------
# End to end against the simulated FCU
# ---------------------------------------------------------------------------------------------
def test_nack_timeout_and_retry_end_to_end():
    with BridgeAndPeer(PX4) as (bridge, peer):
        peer.force_result[MAV_CMD_COMPONENT_ARM_DISARM] = DENIED
        with pytest.raises(CommandRejected, match="MAV_RESULT_DENIED"):
            bridge.arm()
        del peer.force_result[MAV_CMD_COMPONENT_ARM_DISARM]
        peer.drop_acks[MAV_CMD_COMPONENT_ARM_DISARM] = 2  # the first two attempts get lost
        bridge.arm()
        assert bridge.status().armed
        arms = [c for c, _ in peer.commands if c == MAV_CMD_COMPONENT_ARM_DISARM]
        assert len(arms) == 2  # one DENIED, then the third attempt of the second arm()
        peer.drop_acks[MAV_CMD_DO_SET_MODE] = -1  # never answers
        with pytest.raises(CommandTimeout, match="no COMMAND_ACK after 3 attempts"):
            bridge.set_mode("hold")
        with pytest.raises(ValueError):
            bridge.set_mode("warp")


def test_disarm_refused_in_the_air_unless_forced():
    with BridgeAndPeer(PX4) as (bridge, peer):
        bridge.arm()
        peer.set_position([0.0, 0.0, -3.0])
        with pytest.raises(CommandRejected, match="DENIED"):
            bridge.disarm()
        bridge.disarm(force=True)
        assert not bridge.status().armed


def test_confirmation_waits_for_a_1hz_heartbeat():
    """Real FCUs show a mode change only in their next 1 Hz HEARTBEAT: the bridge waits for it."""
    with BridgeAndPeer(PX4, heartbeat_on_change=False) as (bridge, _peer):
        bridge.set_mode("hold")
        assert bridge.status().mode_name == "AUTO.LOITER"


def test_commands_refused_when_not_connected():
    from planner_pkg.bridges.mavlink import BridgeConfig, FcuBridge

    bridge = FcuBridge(BridgeConfig.from_dict(loopback_config()))
    with pytest.raises(CommandRefused, match="not connected"):
        bridge.arm()
    result = bridge.send_setpoint(Setpoint.hold([0.0, 0.0, 1.0]))
    assert not result.accepted and "not connected" in result.reason
    with pytest.raises(TypeError, match="Setpoint"):
        bridge.send_setpoint([0.0, 0.0, 1.0])
