"""Node ``racer``: the exported gate-racing policy flying body-rate commands around a gate track.

Subscribes ``odom``; publishes ``body_rate_setpoint`` (``geometry_msgs/TwistStamped`` in
``base_link``: ``twist.angular`` = body FLU rates, rad/s; ``twist.linear.z`` = mass-normalised
collective thrust, m/s^2; see ``conversions.body_rate_command_to_msg``), ``setpoint`` (only to
hold) and ``status``. The network (``racing/export.py``, NumPy runtime, no autograd) runs once per
control period of its training (``env.quad.dt_s``, 25 Hz for the shipped model) on the ROS clock,
with the newest odometry; the observation is built by ``racing.pilot.RacerPilot`` with the
training environment's own ``build_observation`` and gate tests (``racing.gates``), fed with every
odometry sample, so the gate the policy aims at advances as it would in training.

Simulation lockstep (``planner_pkg/nodes/lockstep.py``): under ``use_sim_time`` with
``lockstep_report`` the network tick is lockstep-gated (it runs once the odometry of its instant
is in, and reports the next one and the commands sent), so ``bringup sim --planner racer`` flies
the same flight at any real-time factor and load.

Startup refusals (:class:`ParameterConfigError`, exit code 2, one line naming the parameter): no
``track_file``, a track file that is missing or malformed (``racing.track.load_track`` names the
gate and key), a model that cannot be read or is not a racing model.

Guards (counted in ``status``, logged, throttled): odometry with NaN/inf, a zero quaternion or in
another frame is dropped; no good odometry for ``odom_timeout_s`` -> hold; a non-finite network
output -> hold. "Hold" is a position setpoint on ``setpoint`` at the last good odometry (latched),
which the simulator's tracking controller flies instead of body rates: a vehicle at racing speed
brakes to a stop there. The simulator itself also brakes to a hold when the body-rate commands
stop (``sim_bridge`` ``rate_command_timeout_s``). After ``laps`` laps (0 = race on) the racer
holds where it is.
"""
from __future__ import annotations

import math
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import TwistStamped
from nav_msgs.msg import Odometry
from trajectory_msgs.msg import MultiDOFJointTrajectory

from planner_pkg.config_schema import Config
from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes.lockstep import LockstepParticipant
from planner_pkg.nodes.params import ConfigParameters, ParameterConfigError
from planner_pkg.types import Setpoint, VehicleState

NODE_NAME = "racer"


@dataclass(frozen=True)
class RacerNodeConfig(Config, prefix=""):
    """Parameters of the ``racer`` node."""

    model_path: str = field(default="", metadata={"read_only": True, "description":
                            "racing model file (.agm, 'race train' output); empty = the shipped model"})
    track_file: str = field(default="", metadata={"read_only": True, "description":
                            "gate track (.yaml/.json: {gates: [{center: [x, y, z], yaw: rad, size: m}], start}), "
                            "map frame; required"})
    laps: int = field(default=0, metadata={"range": (0, 100000), "read_only": True, "description":
                      "laps to fly, then hold where the vehicle is (0 = race on)"})
    odom_timeout_s: float = field(default=0.1, metadata={"range": (0.01, 10.0), "description":
                                  "hold when no good odometry arrived for this long, s (ROS clock)"})
    frame_id: str = field(default=conv.MAP_FRAME, metadata={"read_only": True, "description":
                          "world frame of the odometry and the track"})
    base_frame: str = field(default=conv.BODY_FRAME, metadata={"read_only": True, "description":
                            "body frame: the odometry twist and the body-rate commands"})
    status_rate_hz: float = field(default=1.0, metadata={"range": (0.1, 50.0), "description": "status rate, Hz"})
    lockstep_report: bool = field(default=True, metadata={"read_only": True, "description":
                                  "under use_sim_time: be a lockstep participant (each tick waits for the "
                                  "odometry of its instant and reports the next one)"})


def load_racer_and_track(cfg: RacerNodeConfig):
    """(LoadedRacer, Track) named by ``cfg``; ParameterConfigError naming the parameter if unusable."""
    from planner_pkg.racing.export import default_model_path
    from planner_pkg.racing.export import RacerModelError, load_racer
    from planner_pkg.racing.track import TrackError, load_track

    if not cfg.track_file:
        raise ParameterConfigError("parameter 'track_file' refused: empty; give the gate track the racer flies "
                                   "(e.g. config/race/track_example.yaml)")
    if not Path(cfg.track_file).is_file():
        raise ParameterConfigError(f"parameter 'track_file' refused: {cfg.track_file!r} does not exist")
    try:
        track = load_track(cfg.track_file)
    except TrackError as exc:
        raise ParameterConfigError(f"parameter 'track_file' refused: {exc}") from None
    path = cfg.model_path or default_model_path()
    if path is None:
        raise ParameterConfigError("parameter 'model_path' refused: empty, and this installation ships no racing "
                                   "model; train one with 'python -m planner_pkg race train'")
    try:
        racer = load_racer(path)
    except RacerModelError as exc:
        raise ParameterConfigError(f"parameter 'model_path' refused: {exc}") from None
    return racer, track


def race_world(track_file: str, model_path: str = "", folder: Optional[str] = None) -> tuple:
    """(world file, start (3,) m, start heading rad) for a simulator flying ``track_file``: the
    track's gate frames (``racing.pilot.track_world``, sized by the model's environment) written
    as a YAML world file into ``folder`` (None: a temporary folder removed when this process
    exits), and the environment's evaluation start. ParameterConfigError (a ValueError naming the
    parameter) if unusable."""
    import atexit
    import shutil
    import tempfile

    import yaml

    from planner_pkg.racing.pilot import start_pose, track_world

    racer, track = load_racer_and_track(RacerNodeConfig(model_path=model_path, track_file=track_file))
    if folder is None:
        folder = tempfile.mkdtemp(prefix="planner_pkg_race_")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = Path(folder) / (Path(track_file).stem + "_world.yaml")
    path.write_text(f"# gate frames of {track_file} (planner_pkg.racing.pilot.track_world)\n"
                    + yaml.safe_dump(track_world(track, racer.config.env), sort_keys=False))
    start, yaw = start_pose(track)
    return str(path), start, yaw


class RacerNode(c.LockstepNode):
    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        try:
            self.params = ConfigParameters(self, RacerNodeConfig)
            self.racer, self.track = load_racer_and_track(self.params.config)
        except ParameterConfigError:
            self.destroy_node()
            raise
        from planner_pkg.racing.pilot import RacerPilot

        self._make_pilot = lambda t: RacerPilot(self.racer, self.track, start_t=t)
        cfg = self.params.config
        self.log = self.get_logger()
        self.throttle = c.Throttle(2.0)
        self.period_s = float(self.racer.config.env.quad.dt_s)
        self.pilot = None  # made at the first flying tick (lap 1's time runs from there)
        self.state: Optional[VehicleState] = None
        self.odom_received = -math.inf
        self.mode = "waiting for odometry"
        self.hold: Optional[Setpoint] = None
        self.hold_reason = ""
        self.inference_ms: deque = deque(maxlen=300)
        self.counters = {"steps": 0, "commands": 0, "bad_odom": 0, "bad_output": 0, "holds": 0}
        self.pub_rates = self.create_publisher(TwistStamped, c.TOPIC_BODY_RATE_SETPOINT, c.SETPOINT_QOS)
        self.pub_setpoint = self.create_publisher(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, c.SETPOINT_QOS)
        self.pub_status = self.create_publisher(DiagnosticArray, c.TOPIC_STATUS, c.STATUS_QOS)
        self.lockstep = LockstepParticipant(self, cfg.lockstep_report, frames=False, setpoints=True)
        self.create_subscription(Odometry, c.TOPIC_ODOM, self._on_odom, c.ODOM_QOS)
        self._loop_timers = [self.lockstep.create_timer(self.period_s, self._step),
                        self.create_timer(1.0 / cfg.status_rate_hz, self._publish_status)]
        self.log.info(f"racer {self.racer.path} ready: {len(self.track)} gates from {cfg.track_file}, "
                      f"{1.0 / self.period_s:g} Hz" + ("; lockstep participant" if self.lockstep.active else ""))

    # -- inputs ----------------------------------------------------------------------------------
    def _take_odom(self, msg: Odometry) -> None:
        cfg = self.params.config
        try:
            if msg.header.frame_id not in ("", cfg.frame_id):
                raise ValueError(f"odometry in frame {msg.header.frame_id!r}, expected {cfg.frame_id!r}")
            if msg.child_frame_id not in ("", cfg.base_frame):
                raise ValueError(f"odometry twist in frame {msg.child_frame_id!r}, expected {cfg.base_frame!r}")
            state = conv.odometry_to_state(msg, None, None)
        except ValueError as exc:
            self.counters["bad_odom"] += 1
            if self.throttle("bad_odom"):
                self.log.warning(f"odometry refused ({self.counters['bad_odom']} so far): {exc}")
            return
        self.state = state
        self.odom_received = c.now_s(self)
        if self.pilot is not None and self.pilot.progress.update(state.t, state.position):
            p = self.pilot.progress
            self.log.info(f"gate {(p.passed - 1) % len(self.track)} passed at {state.t:.3f} s "
                          f"({p.passed} in order" + (f", lap {len(p.lap_times_s)} in {p.lap_times_s[-1]:.3f} s)"
                                                     if p.passed % len(self.track) == 0 else ")"))
            self._publish_status()

    # -- the network loop ------------------------------------------------------------------------
    def _step(self) -> None:
        cfg = self.params.config
        now = c.now_s(self)
        s = self.state
        if s is None:
            self.mode = "waiting for odometry"
            return
        if now - self.odom_received > cfg.odom_timeout_s:
            self._hold(f"odometry lost: no good odometry for {cfg.odom_timeout_s:g} s")
            return
        if self.pilot is None:
            self.pilot = self._make_pilot(s.t)
            self.pilot.progress.update(s.t, s.position)
        if cfg.laps and self.pilot.progress.passed >= cfg.laps * len(self.track):
            self._hold(f"{cfg.laps} laps done")
            self.mode = "finished"
            return
        t0 = time.perf_counter()
        try:
            thrust, rates, _ = self.pilot.act(s.position, s.velocity, s.rotation, s.angular_velocity)
        except ValueError as exc:
            self.counters["bad_output"] += 1
            self._hold(f"network output refused: {exc}")
            return
        self.inference_ms.append(1e3 * (time.perf_counter() - t0))
        self.counters["steps"] += 1
        if self.hold is not None:
            self.log.info(f"hold released ({self.hold_reason}): racing")
            self.hold, self.hold_reason = None, ""
        self.mode = "racing"
        self.counters["commands"] += 1
        self.pub_rates.publish(conv.body_rate_command_to_msg(thrust, rates, max(now, 0.0), cfg.base_frame))
        self.lockstep.published_setpoint()

    def _hold(self, reason: str) -> None:
        """Latched position hold at the last good odometry (module docstring)."""
        self.mode = "holding"
        if self.hold is None:
            self.hold = Setpoint.hold(self.state.position, self.state.yaw)
            self.counters["holds"] += 1
        if reason != self.hold_reason:
            self.hold_reason = reason
            self.log.warning(f"holding at {np.round(self.hold.position, 2).tolist()}: {reason}")
        self.pub_setpoint.publish(conv.setpoint_to_msg(self.hold, max(c.now_s(self), 0.0),
                                                       self.params.config.frame_id))
        self.lockstep.published_setpoint()

    # -- status ----------------------------------------------------------------------------------
    def _publish_status(self) -> None:
        p = self.pilot.progress if self.pilot is not None else None
        level = "warn" if self.mode == "holding" else "ok"
        message = f"holding: {self.hold_reason}" if self.mode == "holding" else self.mode
        ms = np.asarray(self.inference_ms, dtype=float)
        values = [
            ("mode", self.mode), ("hold_reason", self.hold_reason or "none"),
            ("gates_passed", p.passed if p else 0), ("target_gate", p.target if p else 0),
            ("laps_completed", len(p.lap_times_s) if p else 0),
            ("lap_times_s", ",".join(f"{t:.3f}" for t in p.lap_times_s) if p else ""),
            ("gate_times_s", ",".join(f"{t:.3f}" for t in p.gate_times_s) if p else ""),
            ("frame_hits", p.hits if p else 0),
            ("inference_ms_median", f"{np.median(ms):.3f}" if ms.size else "n/a"),
            ("model", self.racer.path), ("track", self.params.config.track_file),
        ] + self.lockstep.status_values() + list(self.counters.items())
        self.pub_status.publish(conv.make_status(self.get_name(), level, message, values, c.now_s(self)))


def main(args=None) -> int:
    return c.run_node(RacerNode, args)


if __name__ == "__main__":
    sys.exit(main())
