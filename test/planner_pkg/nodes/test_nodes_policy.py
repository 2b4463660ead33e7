"""The ``policy`` node over real DDS (issue 7): acceleration setpoints from depth + odometry towards a
goal, the clamps, hovering on bad or stale input, refusals at startup and at run time, and a
mission flown by ``bringup sim --planner policy`` (sim_bridge + policy as processes)."""
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from nodes_ros_harness import kill_leftovers, pid_alive, started_pids, wait_for
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import Log
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from trajectory_msgs.msg import MultiDOFJointTrajectory

from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes.params import ParameterConfigError, build_config, flatten_yaml_block, param_specs
from planner_pkg.nodes.policy_node import PolicyNode, PolicyNodeConfig, camera_mismatch
from planner_pkg.sim.params import CameraParams
from planner_pkg.policy.export import default_model_path
from planner_pkg.policy.config import ObservationConfig
from planner_pkg.sim.params import QuadrotorParams
from planner_pkg.types import VehicleState
from planner_pkg.world import load_world

ROOT = Path(__file__).resolve().parents[3]
G = 9.81
MODEL = default_model_path()

FENCE = [Parameter("geofence_min_m", value=[-5.0, -5.0, 0.0]), Parameter("geofence_max_m", value=[5.0, 20.0, 5.0])]
# generous timeouts: the probe's 50 Hz odometry shares two loaded cores with the node
TIMEOUTS = [Parameter("odom_timeout_s", value=0.6), Parameter("depth_timeout_s", value=0.6),
            Parameter("status_rate_hz", value=10.0)]


class Probe:
    """Plays the vehicle (odometry at 50 Hz, depth images at 30 Hz) and records the node's output."""

    def __init__(self, ros, name="policy_probe"):
        self.node = n = ros.node(name)
        self.setpoints, self.status, self.logs = [], {}, []
        n.create_subscription(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, self.setpoints.append, c.SETPOINT_QOS)
        n.create_subscription(DiagnosticArray, c.TOPIC_STATUS, self._on_status, c.STATUS_QOS)
        n.create_subscription(Log, "/rosout", self._on_log,
                              QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE))
        self.pub_odom = n.create_publisher(Odometry, c.TOPIC_ODOM, c.ODOM_QOS)
        self.pub_depth = n.create_publisher(Image, c.TOPIC_DEPTH, c.SENSOR_QOS)
        self.pub_goal = n.create_publisher(PoseStamped, c.TOPIC_GOAL, c.GOAL_QOS)
        self.position, self.yaw = np.array([0.0, 0.0, 1.5]), math.pi / 2
        self.velocity = np.zeros(3)  # world ENU; the odometry message carries it in base_link (REP 105)
        self.odom_mode = "good"  # good | nan | off
        self.depth = np.full((48, 64), np.inf, dtype=np.float32)  # free space (REP 118: no return)
        n.create_timer(0.02, self._odom)
        n.create_timer(1.0 / 30.0, self._image)

    def now(self):
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _on_status(self, msg):
        v = conv.status_values(msg)
        self.status[v["name"]] = v

    def _on_log(self, msg):
        if msg.name.endswith("policy"):
            self.logs.append(msg.msg)

    def _odom(self):
        if self.odom_mode == "off":
            return
        rest = VehicleState.at_rest(self.position, self.yaw, self.now())
        msg = conv.state_to_odometry(VehicleState(rest.t, rest.position, self.velocity, rest.attitude, np.zeros(3)))
        if self.odom_mode == "nan":
            msg.pose.pose.position.x = math.nan
        self.pub_odom.publish(msg)

    def _image(self):
        if self.depth is not None:
            self.pub_depth.publish(conv.depth_to_image(self.depth, self.now(), "camera_optical"))

    def last(self):
        return conv.msg_to_setpoint(self.setpoints[-1])

    def wait_setpoint(self, predicate, timeout_s=5.0):
        """A setpoint published from now on that satisfies ``predicate``."""
        start = len(self.setpoints)
        return wait_for(lambda: any(predicate(conv.msg_to_setpoint(m)) for m in self.setpoints[start:]), timeout_s)

    def wait_status(self, predicate, timeout_s=5.0):
        return wait_for(lambda: "policy" in self.status and predicate(self.status["policy"]), timeout_s)

    def logged(self, text):
        return any(text in line for line in self.logs)


def _flying(sp):
    return sp.mode == "acceleration"


def _holding_at(position):
    def check(sp):
        return (sp.mode == "position" and np.allclose(sp.position, position, atol=1e-6)
                and np.allclose(sp.velocity, 0.0) and np.allclose(sp.acceleration, 0.0))
    return check


def _start(ros, *extra):
    node = ros.add(PolicyNode(context=ros.context, parameter_overrides=FENCE + TIMEOUTS + list(extra)))
    probe = Probe(ros)
    assert wait_for(lambda: node.state is not None and node.counters["images"] > 0
                    and probe.pub_goal.get_subscription_count() > 0, 15.0), "no odometry/images reached the node"
    return node, probe


def test_flies_clamped_acceleration_setpoints_towards_the_goal(ros):
    node, probe = _start(ros, Parameter("max_accel_mps2", value=3.0), Parameter("max_tilt_deg", value=15.0))
    # before a goal: zero-velocity setpoints (hover in place, no position target)
    assert probe.wait_setpoint(lambda sp: sp.mode == "velocity" and np.allclose(sp.velocity, 0.0))
    probe.pub_goal.publish(conv.goal_to_pose([0.0, 10.0, 1.5]))  # +y; the vehicle faces +y (yaw pi/2)
    assert probe.wait_setpoint(_flying), f"no acceleration setpoint; status {probe.status.get('policy')}"
    assert wait_for(lambda: node.counters["steps"] >= 10, 10.0)
    time.sleep(0.5)
    flying = [conv.msg_to_setpoint(m) for m in probe.setpoints[-10:]]
    flying = [sp for sp in flying if _flying(sp)]
    assert flying
    tan15 = math.tan(math.radians(15.0))
    for sp in flying:
        a = sp.acceleration
        assert np.isnan(sp.position).all() and np.isnan(sp.velocity).all()  # acceleration mode
        assert np.linalg.norm(a) <= 3.0 + 1e-6  # norm clamp
        assert math.hypot(a[0], a[1]) <= tan15 * (a[2] + G) + 1e-6  # tilt clamp
        assert a[2] >= -5.0 - 1e-6
        assert a[1] > 1.0 and abs(a[0]) < 0.5 * a[1]  # roughly towards the goal (+y) in free space
        assert sp.yaw == pytest.approx(math.pi / 2, abs=1e-6)  # facing the goal
    assert probe.wait_status(lambda s: s["mode"] == "flying" and s["inference_ms_median"] != "n/a"
                             and int(s["steps"]) >= 10)
    med = float(probe.status["policy"]["inference_ms_median"])
    print(f"\npolicy node inference (network step incl. preprocessing): median {med:.3f} ms, "
          f"p95 {probe.status['policy']['inference_ms_p95']} ms, max {probe.status['policy']['inference_ms_max']} ms")
    # odometry twist is body-frame: 5 m/s body-forward while facing +y is +y in the map frame; above
    # max_speed_mps (4) the command may not accelerate further along the velocity
    probe.velocity = np.array([0.0, 5.0, 0.0])
    msg = conv.state_to_odometry(VehicleState(0.0, probe.position, probe.velocity, [0, 0, math.sin(math.pi / 4),
                                                                                     math.cos(math.pi / 4)], np.zeros(3)))
    assert msg.twist.twist.linear.x == pytest.approx(5.0)  # what the node receives
    assert wait_for(lambda: np.allclose(node.state.velocity, [0.0, 5.0, 0.0], atol=1e-6), 5.0)
    assert probe.wait_setpoint(lambda sp: _flying(sp) and sp.acceleration[1] < 0.0)
    time.sleep(0.3)
    assert all(conv.msg_to_setpoint(m).acceleration[1] <= 1e-9 for m in probe.setpoints[-5:])
    probe.velocity = np.zeros(3)
    # the goal reached (the probe "teleports" within goal_tolerance_m): a position hold at the goal
    probe.position = np.array([0.0, 9.5, 1.5])
    assert probe.wait_setpoint(_holding_at([0.0, 10.0, 1.5]))
    assert probe.wait_status(lambda s: s["reached"] == "True" and s["mode"] == "at goal")


def test_hovers_on_nan_or_stale_input_and_refuses_bad_messages(ros):
    node, probe = _start(ros)
    here = probe.position.copy()
    # refused goals: NaN, another frame, outside the geofence; nothing flown
    for goal in (conv.goal_to_pose([math.nan, 1.0, 1.5]), conv.goal_to_pose([0.0, 5.0, 1.5], frame_id="odom"),
                 conv.goal_to_pose([0.0, 50.0, 1.5])):
        probe.pub_goal.publish(goal)
    assert probe.wait_status(lambda s: int(s["bad_goal"]) == 3 and "refused" in s["goal_status"])
    assert node.goal is None and probe.logged("outside the geofence")
    probe.pub_goal.publish(conv.goal_to_pose([0.0, 10.0, 1.5]))
    assert probe.wait_setpoint(_flying)

    # all-NaN depth images are refused; once the last good one is stale: hold where the vehicle is
    probe.depth = np.full((48, 64), np.nan, dtype=np.float32)
    assert probe.wait_setpoint(_holding_at(here))
    assert probe.wait_status(lambda s: int(s["bad_image"]) > 0 and s["mode"] == "holding"
                             and "depth" in s["hold_reason"] and s["level"] == 1)
    assert probe.logged("no valid pixel") and probe.logged("holding at")
    # good images again: flying
    probe.depth = np.full((48, 64), np.inf, dtype=np.float32)
    assert probe.wait_setpoint(_flying)

    # a wrong-size image is refused with a log line; with only those the image goes stale: hold
    bad_before = node.counters["bad_image"]
    probe.depth = np.full((50, 64), np.inf, dtype=np.float32)
    assert probe.wait_setpoint(_holding_at(here))
    assert node.counters["bad_image"] > bad_before and probe.logged("depth image is 64x50")
    probe.depth = np.full((48, 64), np.inf, dtype=np.float32)
    assert probe.wait_setpoint(_flying)

    # the camera stops: the last image goes stale -> hold; the hold is latched where it began
    probe.depth = None
    assert probe.wait_setpoint(_holding_at(here))
    probe.position = here + [0.0, 0.3, 0.0]  # drifting (odometry still good)
    assert wait_for(lambda: np.allclose(node.state.position, probe.position), 5.0)
    time.sleep(0.3)
    assert _holding_at(here)(probe.last())
    probe.position = here.copy()
    probe.depth = np.full((48, 64), np.inf, dtype=np.float32)
    assert probe.wait_setpoint(_flying)

    # NaN odometry is dropped; with no good odometry for odom_timeout_s: hold at the last good one
    probe.odom_mode = "nan"
    assert probe.wait_setpoint(_holding_at(here))
    assert probe.wait_status(lambda s: int(s["bad_odom"]) > 0 and "odometry lost" in s["hold_reason"])
    assert probe.logged("odometry refused") and probe.logged("odometry lost")
    probe.odom_mode = "good"
    assert probe.wait_setpoint(_flying)
    # odometry that stops altogether is the same hold
    probe.odom_mode = "off"
    assert probe.wait_setpoint(_holding_at(here))
    assert probe.wait_status(lambda s: int(s["holds"]) >= 5)


def _tampered_model(dst: Path, edit) -> Path:
    """The shipped model with its configuration metadata edited (the graph left as it is)."""
    data = MODEL.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    meta = json.loads(header["__metadata__"]["planner_pkg.policy"])
    edit(meta["config"])
    header["__metadata__"]["planner_pkg.policy"] = json.dumps(meta)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    dst.write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + n:])
    return dst


def test_refuses_a_mismatched_model_or_camera_at_startup(ros, tmp_path):
    def hidden_64(cfg):
        cfg["network"]["hidden"] = 64  # the graph's GRU is 128 wide

    bad = _tampered_model(tmp_path / "bad.agm", hidden_64)
    with pytest.raises(ParameterConfigError, match="model_path.*re-export"):
        PolicyNode(context=ros.context, parameter_overrides=[Parameter("model_path", value=str(bad))])
    with pytest.raises(ParameterConfigError, match="model_path.*cannot read"):
        PolicyNode(context=ros.context, parameter_overrides=[Parameter("model_path", value=str(tmp_path / "no.agm"))])
    with pytest.raises(ParameterConfigError, match="camera.width_px.*integer multiple"):
        PolicyNode(context=ros.context, parameter_overrides=[Parameter("camera.width_px", value=60)])
    with pytest.raises(ParameterConfigError, match="camera.width_px"):  # 128x48 is 8x4: not one factor
        PolicyNode(context=ros.context, parameter_overrides=[Parameter("camera.width_px", value=128)])
    with pytest.raises(ParameterConfigError, match="camera.hfov_deg"):
        PolicyNode(context=ros.context, parameter_overrides=[Parameter("camera.hfov_deg", value=120.0)])
    # a consistent model whose input does not fit the camera: the plain check says why
    obs = ObservationConfig(image_hw=(10, 16))
    assert camera_mismatch(obs, CameraParams())[0] == "camera.width_px"
    assert camera_mismatch(ObservationConfig(), CameraParams(width_px=128, height_px=96)) is None
    # the executable exits with code 2 (the bringup then stops instead of restarting it)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, "-m", "planner_pkg.nodes.policy_node", "--ros-args",
                           "-p", f"model_path:={bad}"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "model_path" in proc.stderr


def test_parameters_are_described_and_refused_at_runtime(ros):
    node = ros.add(PolicyNode(context=ros.context))
    bad = node.set_parameters([Parameter("rate_hz", value=500.0)])[0]
    assert not bad.successful and "rate_hz" in bad.reason
    bad = node.set_parameters([Parameter("max_tilt_deg", value=80.0)])[0]  # the clamps cannot be switched off
    assert not bad.successful
    bad = node.set_parameters([Parameter("setpoint_rate_hz", value=5.0)])[0]
    assert not bad.successful and "setpoint_rate_hz" in bad.reason
    bad = node.set_parameters([Parameter("target_speed_mps", value=6.0)])[0]  # above max_speed_mps
    assert not bad.successful and "max_speed_mps" in bad.reason
    bad = node.set_parameters([Parameter("model_path", value="/tmp/other.agm")])[0]
    assert not bad.successful  # read-only: checked against the camera at startup
    ok = node.set_parameters([Parameter("max_tilt_deg", value=25.0), Parameter("target_speed_mps", value=2.0)])
    assert all(r.successful for r in ok)
    assert node.planner.config.max_tilt_deg == 25.0 and node.planner.speed_mps == 2.0
    for spec in param_specs(PolicyNodeConfig):
        d = node.describe_parameters([spec.name])[0]
        assert d.description, spec.name
        if spec.kind in ("double", "integer") and not spec.optional:
            assert d.floating_point_range or d.integer_range, f"{spec.name} has no range"


def test_sim_yaml_policy_block_matches_the_declared_parameters():
    data = yaml.safe_load((ROOT / "config" / "sim.yaml").read_text())
    flat = flatten_yaml_block(data["/**/policy"]["ros__parameters"])
    assert flat.pop("use_sim_time") is True
    specs = {s.name: s for s in param_specs(PolicyNodeConfig)}
    assert not set(flat) - set(specs), f"undeclared: {sorted(set(flat) - set(specs))}"
    for k, v in flat.items():
        if specs[k].kind == "double":
            assert isinstance(v, float), f"{k} = {v!r} must be written as a double"
    build_config(PolicyNodeConfig, list(specs.values()), flat)


# ---------------------------------------------------------------------------------------------
# simulation lockstep (planning/lockstep) and the hardware parameter files
# ---------------------------------------------------------------------------------------------
PERIOD_NS = int(1.0 / 15.0 * 1e9)  # rate_hz 15, as rclpy rounds a timer's period
RESEND_NS = int(1.0 / 50.0 * 1e9)  # setpoint_rate_hz 50
HARDWARE_YAMLS = ("hardware.yaml", "hardware_px4.yaml", "hardware_ardupilot.yaml")


class FakeLockstepSim:
    """Plays a lockstep simulator: publishes step manifests and /clock, records the participants'
    reports (planner_pkg.sim.lockstep.ParticipantReport)."""

    def __init__(self, ros):
        from diagnostic_msgs.msg import DiagnosticStatus
        from rosgraph_msgs.msg import Clock as ClockMsg

        from planner_pkg.nodes import lockstep as ls

        self.ls = ls
        self.msg_type = ClockMsg
        self.node = n = ros.node("fake_lockstep_sim")
        self.reports = []
        n.create_subscription(DiagnosticStatus, ls.TOPIC_REPORT, self._on_report, ls.LOCKSTEP_SUB_QOS)
        self.pub_clock = n.create_publisher(ClockMsg, c.TOPIC_CLOCK, c.CLOCK_QOS)
        self.pub_manifest = n.create_publisher(DiagnosticStatus, ls.TOPIC_MANIFEST, ls.LOCKSTEP_QOS)
        self.pub_odom = n.create_publisher(Odometry, c.TOPIC_ODOM, c.ODOM_QOS)

    def _on_report(self, msg):
        self.reports.append(self.ls.report_from_msg(msg))

    def step(self, t_ns: int, odom_ns: int = -1) -> None:
        """The simulator reached ``t_ns``: manifest (naming odometry of ``odom_ns``), then the clock."""
        from planner_pkg.sim.lockstep import StepManifest

        self.pub_manifest.publish(self.ls.to_msg("sim_bridge", StepManifest(t_ns=int(t_ns), odom_ns=int(odom_ns))))
        msg = self.msg_type()
        msg.clock.sec, msg.clock.nanosec = divmod(int(t_ns), 1_000_000_000)
        self.pub_clock.publish(msg)

    def odom(self, t_ns: int) -> None:
        self.pub_odom.publish(conv.state_to_odometry(VehicleState.at_rest(np.asarray(START), 0.0, t=t_ns * 1e-9),
                                                     "map", "base_link"))

    def report_after(self, t_ns: int, timeout_s: float = 5.0):
        """The newest report whose next tick is later than ``t_ns`` (waiting for it), or None."""
        ok = wait_for(lambda: self.reports and self.reports[-1].next_ns > t_ns, timeout_s)
        return self.reports[-1] if ok else None


def test_reports_lockstep_under_sim_time_on_every_tick(ros):
    """Under use_sim_time the node is a lockstep participant: it reports when it joins and, after
    every tick (here ticks that fly nothing: no goal yet), the sim time of its next one - on its
    15 Hz network grid or its 50 Hz re-send grid - so a simulator that only ever advances to the
    reported time keeps it ticking; a tick whose odometry the manifest names waits for it."""
    sim = FakeLockstepSim(ros)
    node = ros.add(PolicyNode(context=ros.context, parameter_overrides=FENCE + [
        Parameter("use_sim_time", value=True)]))
    assert node._lockstep_reporting() and node.lockstep.active
    assert wait_for(lambda: sim.pub_clock.get_subscription_count() > 0
                    and sim.node.count_publishers(sim.ls.TOPIC_REPORT) == 1, 15.0), "no DDS match"
    sim.step(0)
    first = sim.report_after(-1)
    assert first is not None and first.name == "policy" and first.goals == 0 and first.setpoints == 0
    t, grants = 0, []
    for _ in range(12):  # lockstep: the clock goes exactly to each reported time, never beyond
        r = sim.report_after(t)
        assert r is not None, f"no lockstep report after sim time {t} ns (reports {sim.reports[-3:]})"
        assert r.next_ns - t <= 20_000_000, (r, t)  # the next tick (the 50 Hz re-send), never further
        grants.append(r.next_ns)
        t = r.next_ns
        sim.odom(t)
        sim.step(t, odom_ns=t)
    assert all(g % PERIOD_NS == 0 or g % RESEND_NS == 0 for g in grants), grants
    assert any(g % PERIOD_NS == 0 for g in grants) and any(g % RESEND_NS == 0 for g in grants), grants
    assert wait_for(lambda: node.mode == "no goal", 5.0), node.mode  # it ticked: hovering, no goal
    # the manifest names odometry that has not come: the tick due now waits, and runs when it comes
    last = sim.report_after(t)  # the answer to the loop's last step
    assert last is not None
    n, t = len(sim.reports), last.next_ns
    sim.step(t, odom_ns=t)
    time.sleep(0.5)
    assert len(sim.reports) == n and node.lockstep.waiting == "odometry", node.lockstep.waiting
    sim.odom(t)
    assert sim.report_after(t) is not None
    # which role it plays is fixed at start-up
    assert not node.set_parameters([Parameter("lockstep_report", value=False)])[0].successful


@pytest.mark.parametrize("name", HARDWARE_YAMLS)
def test_no_lockstep_reports_on_wall_time_with_the_hardware_parameters(ros, name):
    """The shipped hardware policy block loads in the node (model and camera accepted), is on wall
    time, and publishes no lockstep report (no publisher at all) while it ticks."""
    data = yaml.safe_load((ROOT / "config" / name).read_text())
    flat = flatten_yaml_block(data["/**/policy"]["ros__parameters"])
    assert flat["use_sim_time"] is False and flat["lockstep_report"] is False
    sim = FakeLockstepSim(ros)
    node = ros.add(PolicyNode(context=ros.context, parameter_overrides=[Parameter(k, value=v)
                                                                         for k, v in flat.items()]))
    assert not node.lockstep.active and not node._lockstep_reporting()
    assert node.params.config.max_speed_mps <= 2.0 and node.planner.speed_mps <= 2.0
    statuses = []
    sim.node.create_subscription(DiagnosticArray, c.TOPIC_STATUS,
                                 lambda m: statuses.append(conv.status_values(m)), c.STATUS_QOS)
    assert wait_for(lambda: any(s.get("name") == "policy" for s in statuses), 10.0)
    time.sleep(0.5)  # several 15 Hz ticks
    assert sim.reports == [] and sim.node.count_publishers(sim.ls.TOPIC_REPORT) == 0
    assert [s["lockstep"] for s in statuses if s.get("name") == "policy"][-1] == "off"


def test_hardware_yamls_policy_blocks_match_and_stay_inside_the_bridge_limits():
    """The policy block is repeated in hardware_px4/ardupilot.yaml: it must equal hardware.yaml's;
    its geofence is the planner's, inside the fcu_bridge's fence, and its speed under the bridge's clamp."""
    base = yaml.safe_load((ROOT / "config" / "hardware.yaml").read_text())
    specs = param_specs(PolicyNodeConfig)
    kinds = {s.name: s.kind for s in specs}
    for name in HARDWARE_YAMLS:
        data = yaml.safe_load((ROOT / "config" / name).read_text())
        assert data["/**/policy"] == base["/**/policy"], f"{name} /**/policy differs from hardware.yaml's"
        flat = flatten_yaml_block(data["/**/policy"]["ros__parameters"])
        assert flat.pop("use_sim_time") is False
        for k, v in flat.items():
            if kinds[k] == "double":
                assert isinstance(v, float), f"{name}: {k} = {v!r} must be written as a double"
        cfg = build_config(PolicyNodeConfig, specs, flat)
        assert not cfg.lockstep_report
        planner = data["/**/planner"]["ros__parameters"]
        assert list(cfg.geofence_min_m) == planner["geofence_min_m"]
        assert list(cfg.geofence_max_m) == planner["geofence_max_m"]
        failsafe = data["/**/fcu_bridge"]["ros__parameters"]["failsafe"]
        fence = failsafe["geofence"]
        assert all(lo <= p for lo, p in zip(fence["box_min_m"], cfg.geofence_min_m))
        assert all(p <= hi for hi, p in zip(fence["box_max_m"], cfg.geofence_max_m))
        assert cfg.max_speed_mps < failsafe["max_horizontal_speed_mps"]
        assert cfg.max_accel_mps2 <= failsafe["max_acceleration_mps2"]


def test_bringup_hardware_policy_starts_policy_and_fcu_bridge_only():
    from planner_pkg.nodes import bringup

    args = bringup.build_parser().parse_args(["hardware", "--planner", "policy"])
    assert bringup._prepare(args) is None
    assert [s.name for s in args.specs] == ["policy", "fcu_bridge"]
    cmd = bringup.node_command("hardware", args.specs[0], args)
    assert cmd[cmd.index("--params-file") + 1].endswith("hardware.yaml") and "use_sim_time:=false" in cmd
    args = bringup.build_parser().parse_args(["hardware"])  # default: the EGO graph
    assert bringup._prepare(args) is None
    assert [s.name for s in args.specs] == ["planner", "traj_server", "fcu_bridge"]


# ---------------------------------------------------------------------------------------------
# integration: bringup sim --planner policy flies a mission (sim_bridge + policy processes)
# ---------------------------------------------------------------------------------------------
WORLD = """
bounds: {min: [-15.0, -6.0, 0.0], max: [15.0, 6.0, 5.0]}
obstacles:
- {type: cylinder, center: [-6.0, 0.5], radius: 0.4, height: 4.0}
- {type: box, center: [-3.0, -3.0, 1.0], size: [1.0, 1.0, 2.0], yaw: 0.3}
"""
START, GOAL = (-12.0, 0.0, 1.0), (0.0, 0.0, 1.0)


_pids = started_pids


_alive = pid_alive


def test_bringup_sim_policy_reaches_the_goal_without_collision(ros, tmp_path):
    world_path = tmp_path / "world.yaml"
    world_path.write_text(WORLD)
    world = load_world(world_path)
    radius = QuadrotorParams().collision_radius_m
    seen = {"n": 0, "clearance": math.inf, "closest": math.inf, "inference": []}

    def on_odom(msg):
        p = conv.odometry_to_state(msg).position
        seen["n"] += 1
        seen["clearance"] = min(seen["clearance"], float(world.signed_distance(p)) - radius)
        seen["closest"] = min(seen["closest"], float(np.linalg.norm(p - np.asarray(GOAL))))

    def on_status(msg):
        v = conv.status_values(msg)
        if v.get("name") == "policy" and v.get("inference_ms_median", "n/a") != "n/a":
            seen["inference"].append((float(v["inference_ms_median"]), float(v["inference_ms_p95"])))

    check = ros.node("policy_mission_check")
    check.create_subscription(Odometry, c.TOPIC_ODOM, on_odom, c.ODOM_QOS)
    check.create_subscription(DiagnosticArray, c.TOPIC_STATUS, on_status, c.STATUS_QOS)
    log, summary, flight = tmp_path / "bringup.log", tmp_path / "summary.json", tmp_path / "flight.csv"
    cmd = [sys.executable, "-m", "planner_pkg", "bringup", "sim", "--planner", "policy", "--world", str(world_path),
           "--start", ",".join(map(str, START)), "--goal", ",".join(map(str, GOAL)), "--timeout", "30",
           "--real-time-factor", "1.0", "--log-level", "warn", "--summary", str(summary), "--log", str(flight)]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    try:
        code = proc.wait(timeout=120)
        output = log.read_text()
        assert code == 0, output
        pids = _pids(output)
        assert {name for name, _ in pids} == {"sim_bridge", "policy"}, output  # no planner, no traj_server
        assert not [p for _, p in pids if _alive(p)], "orphaned node processes"
        assert output.count("stopped (exit 0)") == 2, output
        result = json.loads(summary.read_text())
        assert result["reason"] == "goal_reached" and result["reached"] and not result["collided"], output[-3000:]
        # the graph stops on the sample that reaches the goal: the last best-effort odometry messages
        # can miss this subscriber (a loaded machine), so it must have seen the approach (within 1 m: the
        # last few tenths of a second), and the bringup's flight log, every sample, the goal itself
        assert seen["n"] > 100 and seen["closest"] <= 1.0, f"the test's odometry check: closest {seen['closest']:.2f} m"
        flown = np.loadtxt(flight, delimiter=",", skiprows=1)
        assert np.linalg.norm(flown[:, 1:4] - np.asarray(GOAL), axis=1).min() <= 0.5
        assert seen["clearance"] >= 0.0, f"collision seen from odom: clearance {seen['clearance']:.3f} m"
        assert flight.read_text().splitlines()[0] == "t,x,y,z,vx,vy,vz"
        print(f"\nbringup sim --planner policy: reached in {result['time_s']:.2f} sim s, path "
              f"{result['path_length_m']:.2f} m, min clearance {result['min_clearance_m']:.3f} m (mission) / "
              f"{seen['clearance']:.3f} m (test), max speed {result['max_speed_mps']:.2f} m/s; node inference "
              f"median/p95 {seen['inference'][-1] if seen['inference'] else 'n/a'} ms")
    finally:
        kill_leftovers(proc, log)


@pytest.mark.parametrize("rtf", ["0", "3"])
def test_bringup_sim_policy_in_lockstep_at_max_and_3x(ros, tmp_path, rtf):
    """``--real-time-factor 0`` (as fast as possible) and 3x: the simulator is paced by the policy's
    lockstep reports, so the flight is the 1x one; judged from the bringup's flight log against the
    world file, and the sim_bridge's log and status say lockstep engaged without a timeout."""
    world_path = tmp_path / "world.yaml"
    world_path.write_text(WORLD)
    world = load_world(world_path)
    bridge_status = []

    def on_status(msg):
        v = conv.status_values(msg)
        if v.get("name") == "sim_bridge":
            bridge_status.append(v)

    check = ros.node("policy_lockstep_check")
    check.create_subscription(DiagnosticArray, c.TOPIC_STATUS, on_status, c.STATUS_QOS)
    log, summary, flight = tmp_path / "bringup.log", tmp_path / "summary.json", tmp_path / "flight.csv"
    cmd = [sys.executable, "-m", "planner_pkg", "bringup", "sim", "--planner", "policy", "--world", str(world_path),
           "--start", ",".join(map(str, START)), "--goal", ",".join(map(str, GOAL)), "--timeout", "30",
           "--real-time-factor", rtf, "--log-level", "info", "--summary", str(summary), "--log", str(flight)]
    t0 = time.monotonic()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    try:
        code = proc.wait(timeout=50)
        wall = time.monotonic() - t0
        output = log.read_text()
        assert code == 0, output[-3000:]
        assert {name for name, _ in _pids(output)} == {"sim_bridge", "policy"}, output[-3000:]
        assert not [p for _, p in _pids(output) if _alive(p)], "orphaned node processes"
        # judged here from the odometry the bringup logged, against the world file
        data = np.loadtxt(flight, delimiter=",", skiprows=1)
        assert data.shape[0] > 100, "no odometry logged"
        radius = QuadrotorParams().collision_radius_m
        clearance = min(float(world.signed_distance(p)) - radius for p in data[:, 1:4])
        assert np.linalg.norm(data[-1, 1:4] - np.asarray(GOAL)) <= 0.5, f"not reached; {output[-2000:]}"
        assert clearance >= 0.0, f"collision: clearance {clearance:.3f} m (from the flight log)"
        speed = float(np.linalg.norm(data[:, 4:7], axis=1).max())
        assert speed <= 4.0 * 1.25, f"speed {speed:.2f} m/s over the 4 m/s guard (sim.yaml max_speed_mps)"
        result = json.loads(summary.read_text())
        assert result["reached"] and not result["collided"], result
        # paced by the policy (it reported and sim time waited for it), and never a lockstep fault
        assert "lockstep: policy reports" in output and "lockstep fault" not in output, output[-3000:]
        assert all(s["lockstep_faults"] == "0" and s["lockstep"] != "fault" for s in bridge_status), bridge_status[-1]
        print(f"\nbringup sim --planner policy --real-time-factor {rtf}: reached in {result['time_s']:.2f} sim s "
              f"({wall:.1f} s wall for the whole bringup), min clearance {clearance:.3f} m, max speed {speed:.2f} m/s; "
              f"{len(bridge_status)} sim_bridge status messages seen")
    finally:
        kill_leftovers(proc, log)


def test_planner_additions_speed_guard_set_config_and_reset_memory():
    """The small PolicyPlanner API the node uses (plain Python, no DDS)."""
    from dataclasses import replace

    from planner_pkg.policy.planner import PolicyPlanner, PolicyPlannerConfig

    planner = PolicyPlanner(MODEL, PolicyPlannerConfig(max_speed_mps=2.0))
    assert planner.speed_mps == 2.0  # the model's 3 m/s cruise capped by the guard
    a = planner._limit_speed(np.array([3.0, 1.0, 0.5]), np.array([2.5, 0.0, 0.0]))
    np.testing.assert_allclose(a, [0.0, 1.0, 0.5])  # no further push along +x; turning stays
    np.testing.assert_allclose(planner._limit_speed(np.array([-3.0, 1.0, 0.0]), np.array([2.5, 0.0, 0.0])),
                               [-3.0, 1.0, 0.0])  # braking stays
    planner.set_goal([10.0, 0.0, 1.5])
    state = VehicleState.at_rest([0.0, 0.0, 1.5], 0.0, 0.0)
    depth = np.full((48, 64), 5.0, np.float32)
    first = planner.step(state, depth, 0.0).acceleration
    planner.set_config(replace(planner.config, max_tilt_deg=10.0))  # keeps the GRU state and the image
    assert planner.step(VehicleState.at_rest([0.0, 0.0, 1.5], 0.0, 0.05), None).mode == "acceleration"
    assert math.hypot(*planner.last_action[:2]) <= math.tan(math.radians(10.0)) * (planner.last_action[2] + G) + 1e-9
    planner.set_config(replace(planner.config, max_tilt_deg=40.0))
    planner.reset_memory()  # forgets the GRU state, keeps the image: same output as the first call
    np.testing.assert_allclose(planner.step(state, None).acceleration, first, rtol=1e-5, atol=1e-6)
