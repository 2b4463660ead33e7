"""MAVLink link to PX4 and ArduPilot flight controllers (ROS-free).

``FcuBridge`` streams our ENU setpoints to the FCU and turns its telemetry into ENU/FLU
``VehicleState``; it enforces the failsafes in ``failsafe.py`` on its own. NED/FRD exist only in
``frames.py``. The ``fcu_bridge`` ROS node is a thin shell around ``FcuBridge``.

    from planner_pkg.bridges.mavlink import BridgeConfig, FcuBridge
    with FcuBridge(BridgeConfig(fcu_url="udpin:0.0.0.0:14540")) as fcu:
        fcu.set_mode("offboard"); fcu.arm()
        fcu.send_setpoint(Setpoint.hold([0.0, 0.0, 2.0]))
"""
from .bridge import FcuBridge
from .commands import CommandCancelled, CommandError, CommandRefused, CommandRejected, CommandTimeout
from .config import BridgeConfig, EnvelopeConfig, FailsafeConfig, GeofenceConfig
from .connection import ConnectionUrl, parse_url
from .failsafe import FailsafeReason, StreamPhase
from .link import FcuIdentity, LinkState
from .modes import Autopilot, FlightMode
from .telemetry import StateEstimate
from .vehicle import BridgeStatus, SendResult

__all__ = [
    "FcuBridge",
    "BridgeConfig",
    "FailsafeConfig",
    "EnvelopeConfig",
    "GeofenceConfig",
    "BridgeStatus",
    "SendResult",
    "StateEstimate",
    "FcuIdentity",
    "Autopilot",
    "FlightMode",
    "LinkState",
    "FailsafeReason",
    "StreamPhase",
    "ConnectionUrl",
    "parse_url",
    "CommandError",
    "CommandRejected",
    "CommandRefused",
    "CommandTimeout",
    "CommandCancelled",
]
