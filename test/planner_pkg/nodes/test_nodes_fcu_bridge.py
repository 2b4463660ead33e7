"""The fcu_bridge node over real DDS (loopback) against the simulated PX4 / ArduCopter over UDP
loopback (test/planner_pkg/bridges/mavlink_peer.py): odometry in ENU/FLU, the command services, setpoints
reaching the autopilot as NED targets, bad setpoints and bad parameters refused (issue 8)."""
import configparser
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from nodes_ros_harness import wait_for
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger
from trajectory_msgs.msg import MultiDOFJointTrajectory

from planner_pkg.bridges.mavlink import BridgeConfig
from planner_pkg.bridges.mavlink.signing import write_signing_key
from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes.fcu_bridge import SERVICES, FcuBridgeNode, FcuBridgeNodeConfig
from planner_pkg.nodes.params import ParameterConfigError, build_config, flatten_yaml_block, param_specs
from planner_pkg.types import Setpoint, yaw_from_quaternion

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bridges"))
from mavlink_peer import ARDUPILOT, PX4, SimulatedAutopilot, loopback_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
TOL_M = 1e-3  # the peer stops exactly on a position target; telemetry is float32


def _overrides(**extra):
    """ROS parameter overrides: the bridge tests' quick loopback settings plus ``extra``."""
    cfg = loopback_config(failsafe={"land_after_hold_s": 5.0})  # a slow CI step must not trigger a landing
    values = flatten_yaml_block(cfg)
    values["status_rate_hz"] = 10.0
    values.update(extra)
    return [Parameter(k, value=v) for k, v in values.items()]


class Graph:
    """The node under test, a simulated autopilot talking to it, and a probe node with the
    other end of every topic and service. Closing stops the node's link and the peer."""

    def __init__(self, ros, flavour, peer_kwargs=None, **params):
        self.node = ros.add(FcuBridgeNode(context=ros.context, parameter_overrides=_overrides(**params)))
        self.peer = SimulatedAutopilot(flavour, remote=self.node.local_address, **(peer_kwargs or {}))
        self.peer.start()
        probe = ros.node("probe")
        self.odom, self.status, self.status_messages = [], {}, []
        probe.create_subscription(Odometry, c.TOPIC_ODOM, self.odom.append, c.ODOM_QOS)
        probe.create_subscription(DiagnosticArray, c.TOPIC_STATUS, self._on_status, c.STATUS_QOS)
        self.pub_setpoint = probe.create_publisher(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, c.SETPOINT_QOS)
        self.clients = {name: probe.create_client(Trigger, name) for name in SERVICES}
        self.probe = probe

    def _on_status(self, msg):
        values = conv.status_values(msg)
        self.status[values["name"]] = values
        self.status_messages.append(values)

    def close(self):
        self.node.close()
        self.peer.stop()

    def call(self, name: str, timeout_s: float = 10.0):
        client = self.clients[name]
        assert client.wait_for_service(timeout_sec=5.0), f"service {name} not available"
        future = client.call_async(Trigger.Request())
        assert wait_for(future.done, timeout_s), f"{name} did not answer within {timeout_s} s"
        return future.result()

    def publish(self, setpoint: Setpoint, frame_id: str = "map"):
        self.pub_setpoint.publish(conv.setpoint_to_msg(setpoint, 0.0, frame_id))

    def stream(self, setpoint: Setpoint, until, timeout_s: float = 30.0, period_s: float = 0.05) -> bool:
        """Publish ``setpoint`` at 1 / ``period_s`` until ``until()`` or the timeout (generous: the
        simulated peer flies on wall time, and a loop run at a load of 18 did not climb 2 m in 5 s)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.publish(setpoint)
            if until():
                return True
            time.sleep(period_s)
        return bool(until())

    def odom_position(self):
        p = self.odom[-1].pose.pose.position
        return np.array([p.x, p.y, p.z])

    def odom_yaw(self):
        q = self.odom[-1].pose.pose.orientation
        return yaw_from_quaternion((q.x, q.y, q.z, q.w))

    def peer_target(self):
        with self.peer.lock:
            return None if self.peer.target is None else dict(self.peer.target)


@pytest.fixture
def graph(ros):
    graphs = []

    def make(flavour, peer_kwargs=None, **params):
        graphs.append(Graph(ros, flavour, peer_kwargs, **params))
        return graphs[-1]

    try:
        yield make
    finally:
        for g in graphs:
            g.close()


def _angle_diff(a, b):
    return abs(math.remainder(a - b, 2 * math.pi))


def test_px4_odom_services_and_setpoints(graph):
    g = graph(PX4)
    g.peer.set_position([2.0, 1.0, 0.0])  # NED: 2 m north, 1 m east, on the ground
    with g.peer.lock:
        g.peer.yaw = 0.3  # NED: 0.3 rad east of north
    # position and yaw reach the peer's telemetry at different moments: wait for both (ENU yaw is
    # measured from east, so NED 0.3 rad is pi/2 - 0.3)
    assert wait_for(lambda: len(g.odom) > 3 and np.allclose(g.odom_position(), [1.0, 2.0, 0.0], atol=TOL_M)
                    and _angle_diff(g.odom_yaw(), math.pi / 2 - 0.3) < 1e-5, 5.0), (g.odom_position(), g.odom_yaw())
    msg = g.odom[-1]
    assert (msg.header.frame_id, msg.child_frame_id) == ("map", "base_link")
    now = g.probe.get_clock().now().nanoseconds * 1e-9
    assert abs(conv.stamp_to_seconds(msg.header.stamp) - now) < 0.5  # stamped at the measurement
    assert wait_for(lambda: g.status.get("fcu_bridge", {}).get("autopilot") == "px4", 20.0)
    assert g.status["fcu_bridge"]["link"] == "ok" and g.status["fcu_bridge"]["armed"] == "False"

    # a command the FCU refuses answers success=False with the reason, and nothing changes
    refused = g.call("takeoff")
    assert not refused.success and refused.message.startswith("takeoff failed:")
    assert not g.peer.snapshot()["armed"]

    # OFFBOARD (the bridge primes PX4's stream with a hold), arm
    response = g.call("offboard")
    assert response.success, response.message
    assert g.peer.snapshot()["mode"] == "OFFBOARD"
    response = g.call("arm")
    assert response.success, response.message
    assert g.peer.snapshot()["armed"]

    # a setpoint on `setpoint` reaches the autopilot as the NED target: north = ENU y, down = -z,
    # NED yaw = pi/2 - ENU yaw
    target_enu = np.array([3.0, -1.0, 2.0])
    assert g.stream(Setpoint.hold(target_enu, yaw=math.pi / 2),
                    lambda: np.allclose(g.odom_position(), target_enu, atol=TOL_M))
    sent = g.peer_target()
    assert sent["position"] == pytest.approx([-1.0, 3.0, -2.0], abs=1e-5)
    assert sent["yaw"] == pytest.approx(0.0, abs=1e-5)
    north, east, down = g.peer.snapshot()["position"]
    assert (east, north, -down) == pytest.approx(target_enu.tolist(), abs=TOL_M)
    assert _angle_diff(g.odom_yaw(), math.pi / 2) < 1e-5

    # velocity leg: 1 m/s east while facing north -> twist in base_link (FLU) is 1 m/s to the right
    def moving_right():
        v = g.odom[-1].twist.twist.linear
        return np.allclose([v.x, v.y, v.z], [0.0, -1.0, 0.0], atol=1e-4)

    assert g.stream(Setpoint.from_velocity([1.0, 0.0, 0.0], yaw=math.pi / 2), moving_right)
    sent = g.peer_target()
    assert sent["position"] is None and sent["velocity"] == pytest.approx([0.0, 1.0, 0.0], abs=1e-6)

    # hold; then unreadable setpoints are logged, counted and ignored: the FCU keeps the hold
    hold_enu = [3.0, 0.0, 2.0]
    assert g.stream(Setpoint.hold(hold_enu, yaw=math.pi / 2),
                    lambda: np.allclose(g.odom_position(), hold_enu, atol=TOL_M))
    partial = conv.setpoint_to_msg(Setpoint.hold([9.0, 9.0, 2.0]), 0.0)
    partial.points[0].transforms[0].translation.y = math.nan
    inf = conv.setpoint_to_msg(Setpoint.hold([9.0, 9.0, 2.0]), 0.0)
    inf.points[0].velocities[0].linear.x = math.inf
    empty = conv.setpoint_to_msg(Setpoint(), 0.0)
    other_frame = conv.setpoint_to_msg(Setpoint.hold([9.0, 9.0, 2.0]), 0.0, frame_id="odom")
    for i, bad in enumerate((partial, inf, empty, other_frame, MultiDOFJointTrajectory())):
        g.pub_setpoint.publish(bad)  # setpoint QoS is depth 1: one at a time
        assert wait_for(lambda: g.node.counters["bad_setpoints"] == i + 1, 20.0)
    assert g.peer_target()["position"] == pytest.approx([0.0, 3.0, -2.0], abs=1e-5)
    assert g.node.counters["setpoints"] > 0 and g.node.counters["dropped_setpoints"] == 0

    status = None

    def status_shows_bad_setpoints():
        nonlocal status
        status = g.status.get("fcu_bridge", {})
        return status.get("bad_setpoints") == "5"

    assert wait_for(status_shows_bad_setpoints, 20.0)
    assert status["mode"] == "offboard" and status["mode_name"] == "OFFBOARD" and status["armed"] == "True"
    assert status["battery_voltage_v"] == "16.00" and status["battery_remaining"] == "0.75"
    assert status["signing"] == "False" and status["rx_rejected"] == "0"
    assert status["last_arm"] == "arm: done" and status["last_takeoff"].startswith("takeoff failed")

    response = g.call("land")
    assert response.success, response.message
    assert wait_for(lambda: not g.peer.snapshot()["armed"], 20.0)  # the peer lands and disarms
    assert wait_for(lambda: abs(g.odom_position()[2]) < TOL_M, 2.0)


def test_ardupilot_guided_takeoff_covariances_and_refused_disarm(graph):
    g = graph(ARDUPILOT, peer_kwargs={"odometry": True}, takeoff_height_m=1.5, request_odometry=True)
    assert wait_for(lambda: len(g.odom) > 3, 20.0)
    # ODOMETRY covariances (peer: NED pose, body-FRD velocity) -> ENU pose, FLU twist
    pose = np.array(g.odom[-1].pose.covariance).reshape(6, 6)
    twist = np.array(g.odom[-1].twist.covariance).reshape(6, 6)
    assert np.diag(pose)[:3] == pytest.approx([0.04, 0.01, 0.09])  # east, north, up variances
    assert pose[0, 1] == pytest.approx(0.005) and pose[1, 0] == pytest.approx(0.005)
    assert np.diag(twist)[:3] == pytest.approx([0.01, 0.04, 0.09])  # forward, left, up
    assert twist[0, 1] == pytest.approx(-0.005)  # FRD right -> FLU left flips the sign

    for name in ("offboard", "arm", "takeoff"):  # GUIDED, arm, NAV_TAKEOFF to takeoff_height_m
        response = g.call(name)
        assert response.success, f"{name}: {response.message}"
    assert g.peer.snapshot()["mode"] == "GUIDED"
    assert wait_for(lambda: abs(g.odom_position()[2] - 1.5) < TOL_M, 20.0)

    refused = g.call("disarm")  # ArduCopter refuses to disarm in the air
    assert not refused.success and "DENIED" in refused.message
    assert g.peer.snapshot()["armed"]
    response = g.call("land")
    assert response.success, response.message
    assert wait_for(lambda: not g.peer.snapshot()["armed"], 20.0)


def test_wrong_autopilot_is_never_locked_and_commands_are_refused(graph):
    g = graph(PX4, autopilot="ardupilot")
    # the node hears the PX4 ...
    assert wait_for(lambda: g.status.get("fcu_bridge", {}).get("rx_messages", "0") not in ("0", "1"), 20.0)
    status = g.status["fcu_bridge"]
    assert status["link"] == "waiting" and status["level"] == 1 and status["autopilot"] == "unknown"
    refused = g.call("offboard")  # ... but never answers it, takes no state from it, sends it no command
    assert not refused.success and "link is waiting" in refused.message
    assert not g.odom and not g.peer.bridge_heartbeats and not g.peer.commands
    assert g.peer.snapshot()["mode"] == "POSCTL"


def test_link_loss_is_reported_as_an_error(graph):
    g = graph(PX4)
    assert wait_for(lambda: g.status.get("fcu_bridge", {}).get("link") == "ok", 20.0)
    g.peer.tx_enabled = False  # the FCU goes silent (cable pulled)
    assert wait_for(lambda: g.status["fcu_bridge"]["failsafe"] == "fcu_link_lost", 20.0)
    status = g.status["fcu_bridge"]
    assert status["link"] == "lost" and status["level"] == 2 and status["link_losses"] == "1"
    refused = g.call("arm")
    assert not refused.success and "link is lost" in refused.message


def test_bad_parameters_are_refused_at_startup_and_link_parameters_are_frozen(ros, tmp_path):
    def make(**params):
        return FcuBridgeNode(context=ros.context, parameter_overrides=_overrides(**params))

    with pytest.raises(ParameterConfigError, match="setpoint_rate_hz"):
        make(setpoint_rate_hz=5.0)  # PX4 would drop out of OFFBOARD
    with pytest.raises(ParameterConfigError, match="autopilot"):
        make(autopilot="betaflight")
    with pytest.raises(ParameterConfigError, match="fcu_url"):
        make(fcu_url="serial-port-one")
    with pytest.raises(ParameterConfigError, match="geofence"):
        make(**{"failsafe.geofence.kind": "box", "failsafe.geofence.box_min_m": [0.0, 0.0, 5.0],
                "failsafe.geofence.box_max_m": [1.0, 1.0, 1.0]})
    with pytest.raises(ParameterConfigError, match="base_frame"):
        make(base_frame="map")
    with pytest.raises(ParameterConfigError, match="signing_key_path.*No such file"):
        make(signing_key_path=str(tmp_path / "missing.key"))
    readable = tmp_path / "readable.key"
    write_signing_key(str(readable))
    os.chmod(readable, 0o644)
    with pytest.raises(ParameterConfigError, match="chmod 600"):
        make(signing_key_path=str(readable))

    key = tmp_path / "signing.key"
    write_signing_key(str(key))
    node = ros.add(make(signing_key_path=str(key)))
    try:
        assert node.bridge.status().signing
        frozen = node.set_parameters([Parameter("fcu_url", value="udpin:0.0.0.0:14550")])[0]
        assert not frozen.successful and node.link_params.config.fcu_url == "udpin:127.0.0.1:0"
        frozen = node.set_parameters([Parameter("failsafe.geofence.kind", value="none")])[0]
        assert not frozen.successful
        described = node.describe_parameters(["fcu_url", "signing_key_path"])
        assert described[0].read_only and "udpin:HOST:PORT" in described[0].description
        assert "mode 600" in described[1].description
        bad = node.set_parameters([Parameter("takeoff_height_m", value=-1.0)])[0]
        assert not bad.successful and "takeoff_height_m" in bad.reason
        ok = node.set_parameters([Parameter("takeoff_height_m", value=3.0)])[0]
        assert ok.successful and node.params.config.takeoff_height_m == 3.0
    finally:
        node.close()


def test_every_link_parameter_is_described():
    """Each BridgeConfig field carries its own description (the field metadata the descriptors read)."""
    specs = param_specs(BridgeConfig)
    undescribed = [s.name for s in specs if not s.description]
    assert not undescribed, f"give these BridgeConfig fields a description: {undescribed}"
    assert len({s.description for s in specs}) == len(specs)  # one line each, not a class docstring's shared one
    assert not {s.name for s in specs} & {s.name for s in param_specs(FcuBridgeNodeConfig)}


@pytest.mark.parametrize("autopilot", ["px4", "ardupilot", "auto"])
def test_shipped_hardware_yaml_is_valid(autopilot):
    """hardware_px4.yaml, hardware_ardupilot.yaml and the generic hardware.yaml (autopilot: auto)."""
    name = "hardware.yaml" if autopilot == "auto" else f"hardware_{autopilot}.yaml"
    data = yaml.safe_load((ROOT / "config" / name).read_text())
    assert all(key.startswith("/**/") for key in data), "use '/**/node' keys so namespaced nodes get the values"
    flat = flatten_yaml_block(data["/**/fcu_bridge"]["ros__parameters"])
    assert flat.pop("use_sim_time") is False
    link_specs, node_specs = param_specs(BridgeConfig), param_specs(FcuBridgeNodeConfig)
    kinds = {s.name: s.kind for s in link_specs + node_specs}
    assert not set(flat) - set(kinds), "unknown fcu_bridge parameters (ROS drops typos silently)"
    for name, value in flat.items():  # ROS parameters are typed: 2 is not a double
        if kinds[name] == "double":
            assert isinstance(value, float), f"{name} = {value!r} must be written as a double"
    link = build_config(BridgeConfig, link_specs, {k: v for k, v in flat.items() if k in {s.name for s in link_specs}})
    build_config(FcuBridgeNodeConfig, node_specs, {k: v for k, v in flat.items() if k in {s.name for s in node_specs}})
    assert link.autopilot == autopilot and not link.signing_key_path
    assert link.failsafe.geofence.kind != "none"
    # the rest of the graph as in hardware.yaml (its blocks are repeated, so they must not drift)
    base = yaml.safe_load((ROOT / "config" / "hardware.yaml").read_text())
    for node in ("/**/planner", "/**/traj_server", "/**/policy"):
        assert data[node] == base[node], f"{name} {node} differs from hardware.yaml's"
    # the bridge's fence contains the planner's
    planner = data["/**/planner"]["ros__parameters"]
    fence = link.failsafe.geofence
    assert all(lo <= p for lo, p in zip(fence.box_min_m, planner["geofence_min_m"]))
    assert all(p <= hi for hi, p in zip(fence.box_max_m, planner["geofence_max_m"]))


def test_systemd_unit_starts_the_px4_bringup():
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str
    unit.read(ROOT / "config" / "systemd" / "planner_pkg.service")
    service = unit["Service"]
    assert "bringup hardware --params config/hardware_px4.yaml" in service["ExecStart"]
    assert service["KillMode"] == "mixed" and service["KillSignal"] == "SIGINT"  # the bringup stops its nodes
    assert service["Restart"] == "on-failure" and "2" in service["RestartPreventExitStatus"].split()
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_executable_exits_2_on_bad_parameters_and_0_on_sigint(ros):
    base = [sys.executable, "-m", "planner_pkg.nodes.fcu_bridge", "--ros-args", "-p", "fcu_url:=udpin:127.0.0.1:0"]
    bad = subprocess.run(base + ["-p", "setpoint_rate_hz:=5.0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == c.EXIT_CONFIG and "setpoint_rate_hz" in bad.stderr
    statuses = []
    ros.node("watcher").create_subscription(
        DiagnosticArray, c.TOPIC_STATUS, lambda m: statuses.append(conv.status_values(m)), c.STATUS_QOS)
    proc = subprocess.Popen(base + ["-p", "status_rate_hz:=10.0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        assert wait_for(lambda: any(s.get("name") == "fcu_bridge" for s in statuses), 30.0), "no status from the node"
        assert statuses[-1]["link"] == "waiting" and statuses[-1]["level"] == 1  # WARN: no FCU yet
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=15)
        assert proc.returncode == 0, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_setpoints_and_status_flow_while_a_command_waits_on_the_fcu(graph):
    """A service waiting seconds for the FCU must not hold up the node: the command runs on a
    worker thread while the single-threaded executor keeps forwarding setpoints and status."""
    g = graph(PX4, offboard_prime_s=1.5)  # OFFBOARD primes the stream for 1.5 s before asking
    assert wait_for(lambda: g.status.get("fcu_bridge", {}).get("link") == "ok", 20.0)
    assert g.clients["offboard"].wait_for_service(timeout_sec=5.0)
    future = g.clients["offboard"].call_async(Trigger.Request())
    time.sleep(0.1)
    setpoints_before, status_before = g.node.counters["setpoints"], len(g.status_messages)
    hold = Setpoint.hold([0.0, 0.0, 0.0])
    for _ in range(16):  # 0.8 s at 20 Hz, all inside the 1.5 s prime
        g.publish(hold)
        time.sleep(0.05)
    assert not future.done(), "the command should still be waiting for its prime period"
    assert g.node.counters["setpoints"] - setpoints_before >= 8
    assert len(g.status_messages) - status_before >= 4  # status at 10 Hz kept coming
    assert wait_for(future.done, 10.0)
    assert future.result().success, future.result().message
    assert g.peer.snapshot()["mode"] == "OFFBOARD"


def test_absurd_setpoints_are_refused_and_the_stream_goes_on(graph):
    """Issue 20: one setpoint with a yaw rate of 1e39 (or beyond the bridge's envelope) used to
    kill the node; now it is refused and counted while the FCU keeps the last good setpoint."""
    g = graph(PX4)
    assert wait_for(lambda: g.status.get("fcu_bridge", {}).get("link") == "ok", 20.0)
    for name in ("offboard", "arm"):
        response = g.call(name)
        assert response.success, f"{name}: {response.message}"
    hover = [0.0, 0.0, 2.0]  # floats: the rclpy wheel sends a Python int in a float64 field wrong
    assert g.stream(Setpoint.hold(hover, yaw=0.0), lambda: np.allclose(g.odom_position(), hover, atol=TOL_M))
    bad = (Setpoint.from_velocity([0.0, 0.0, 0.0], yaw_rate=1e39),  # float32 cannot even carry it
           Setpoint.from_velocity([0.0, 0.0, 0.0], yaw_rate=30.0),  # beyond failsafe.envelope (20 rad/s)
           Setpoint.hold([1e39, 0.0, 2.0]))
    for i, sp in enumerate(bad):
        g.publish(sp)
        assert wait_for(lambda: g.node.counters["bad_setpoints"] == i + 1, 20.0), g.node.counters
    assert g.node.bridge.status().setpoints_refused >= 1  # the 30 rad/s one at least reached the bridge
    received = g.peer.setpoints_received
    assert wait_for(lambda: g.peer.setpoints_received >= received + 5, 20.0)  # the stream goes on ...
    target = g.peer_target()
    assert target["position"] == pytest.approx([0.0, 0.0, -2.0], abs=1e-5) and target["yaw_rate"] is None  # unchanged
    assert g.node.counters["bridge_errors"] == 0 and g.node.bridge.status().handler_errors == 0
    moved = [1.0, 0.0, 2.0]
    assert g.stream(Setpoint.hold(moved, yaw=0.0), lambda: np.allclose(g.odom_position(), moved, atol=TOL_M))
    assert wait_for(lambda: g.status["fcu_bridge"].get("setpoints_refused", "0") != "0", 20.0)
    assert g.status["fcu_bridge"]["failsafe"] == "none"
