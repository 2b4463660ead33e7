"""Node ``traj_server``: the latest ``planning/trajectory`` sampled into ``setpoint`` at 100 Hz.

Heading: along the horizontal velocity when faster than ``yaw_min_speed_mps`` (else the
trajectory's own yaw if it has one, else the last heading), always rate-limited to
``max_yaw_rate_rad_s``. The node holds position (zero velocity and acceleration) in three cases,
each logged once when it starts:

* the trajectory has ended: hold its final point;
* the trajectory is stale (no message for ``trajectory_timeout_s``, the planner re-sends every
  second while alive): hold the reference where it was when it went stale;
* odometry stopped for ``odom_timeout_s``: hover at the last known position.

Before any trajectory it streams zero-velocity setpoints (hover in place, no position target). A trajectory message that cannot be
read (no points, NaN/inf positions, times not increasing, wrong frame) is dropped with a log line
and the previous one is kept. All times are on the ROS clock (sim time under ``use_sim_time``).

Simulation lockstep (under ``use_sim_time`` with ``lockstep_report``, see
``planner_pkg/nodes/lockstep.py``): a tick due at sim time ``T`` runs once the odometry of ``T``
has arrived and every planner has finished its ticks due by ``T`` and its trajectories are in;
each tick then reports the next one and the stamp of the setpoint it sent, and the simulator
advances only once it holds that setpoint.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from trajectory_msgs.msg import MultiDOFJointTrajectory

from planner_pkg.config_schema import Config
from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes.lockstep import LockstepParticipant
from planner_pkg.nodes.params import ConfigParameters
from planner_pkg.planning.sampled_trajectory import SampledTrajectory, wrap_angle
from planner_pkg.types import Setpoint, VehicleState

NODE_NAME = "traj_server"


@dataclass(frozen=True)
class TrajServerConfig(Config, prefix=""):
    """Parameters of the ``traj_server`` node."""

    rate_hz: float = field(default=100.0, metadata={"range": (1.0, 1000.0), "description": "setpoint rate, Hz"})
    max_yaw_rate_rad_s: float = field(default=2.0, metadata={"range": (0.01, 20.0),
                                                              "description": "heading rate limit, rad/s"})
    yaw_min_speed_mps: float = field(default=0.3, metadata={"range": (0.0, 10.0), "description":
                                     "below this horizontal speed the heading is not taken from the velocity, m/s"})
    yaw_mode: str = field(default="velocity", metadata={"choices": ("velocity", "trajectory"), "description":
                          "'velocity': face the direction of travel; 'trajectory': the planner's yaw"})
    trajectory_timeout_s: float = field(default=2.0, metadata={"range": (0.05, 60.0),
                                        "description": "hold when no trajectory message came for this long, s"})
    odom_timeout_s: float = field(default=0.5, metadata={"range": (0.01, 10.0),
                                                          "description": "hover when odometry is older, s"})
    status_rate_hz: float = field(default=1.0, metadata={"range": (0.1, 50.0), "description": "status rate, Hz"})
    frame_id: str = field(default=conv.MAP_FRAME, metadata={"description": "world frame of the setpoints"})
    lockstep_report: bool = field(default=True, metadata={"read_only": True, "description":
                                  "under use_sim_time: be a lockstep participant (wait for the planners' "
                                  "trajectories of each instant, report every tick and setpoint)"})
    lockstep_planners: Tuple[str, ...] = field(default=("planner",), metadata={"read_only": True, "description":
                                               "in lockstep: the planner nodes (names in this namespace) whose "
                                               "ticks and trajectories each setpoint waits for, from their first "
                                               "report on"})

    def _check(self):
        names = list(self.lockstep_planners)
        if not names or len(set(names)) != len(names) or any(not n or "/" in n for n in names):
            raise self._error("lockstep_planners", f"must be one or more distinct node names without '/', got {names}")


class YawLimiter:
    """Heading reference that moves towards a target at most ``max_rate`` rad/s (plain Python)."""

    def __init__(self, max_rate: float):
        self.max_rate = max_rate
        self.yaw: Optional[float] = None

    def reset(self, yaw: float) -> None:
        self.yaw = wrap_angle(yaw) if math.isfinite(yaw) else None

    def step(self, target: float, dt: float) -> float:
        """New heading after ``dt`` s towards ``target`` (NaN target = keep)."""
        if self.yaw is None:
            self.yaw = wrap_angle(target) if math.isfinite(target) else 0.0
            return self.yaw
        if math.isfinite(target):
            err = wrap_angle(target - self.yaw)
            limit = self.max_rate * max(dt, 0.0)
            self.yaw = wrap_angle(self.yaw + max(-limit, min(limit, err)))
        return self.yaw


class TrajServer(c.LockstepNode):
    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.params = ConfigParameters(self, TrajServerConfig, on_change=self._config_changed)
        cfg = self.params.config
        self.log = self.get_logger()
        self.throttle = c.Throttle(2.0)
        self.trajectory: Optional[SampledTrajectory] = None
        self.traj_received = -math.inf
        self.state: Optional[VehicleState] = None
        self.odom_received = -math.inf
        self.yaw = YawLimiter(cfg.max_yaw_rate_rad_s)
        self.hold: Optional[Setpoint] = None
        self.hold_reason = ""
        self.mode = "idle"
        self.last_setpoint: Optional[Setpoint] = None
        self.last_tick: Optional[float] = None
        self.counters = {"bad_trajectory": 0, "bad_odom": 0, "setpoints": 0}
        self.lockstep = LockstepParticipant(self, cfg.lockstep_report, frames=False,
                                            setpoints=True, follows_planners=cfg.lockstep_planners)
        self.pub_setpoint = self.create_publisher(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, c.SETPOINT_QOS)
        self.pub_status = self.create_publisher(DiagnosticArray, c.TOPIC_STATUS, c.STATUS_QOS)
        self.create_subscription(MultiDOFJointTrajectory, c.TOPIC_TRAJECTORY, self._on_trajectory, c.TRAJECTORY_QOS)
        self.create_subscription(Odometry, c.TOPIC_ODOM, self._on_odom, c.ODOM_QOS)
        self._timer = self.lockstep.create_timer(1.0 / cfg.rate_hz, self._tick)
        self.create_timer(1.0 / cfg.status_rate_hz, self._publish_status)

    def _config_changed(self, cfg: TrajServerConfig) -> None:
        self.yaw.max_rate = cfg.max_yaw_rate_rad_s
        self.lockstep.destroy_timer(self._timer)
        self._timer = self.lockstep.create_timer(1.0 / cfg.rate_hz, self._tick)
        self.lockstep.report()  # a new period: tell a waiting simulator

    # -- inputs ----------------------------------------------------------------------------------
    def _on_trajectory(self, msg: MultiDOFJointTrajectory) -> None:
        try:
            self._take_trajectory(msg)
        finally:
            self.lockstep.saw_trajectory()  # taken or refused: not to be waited for

    def _take_trajectory(self, msg: MultiDOFJointTrajectory) -> None:
        try:
            traj = conv.msg_to_trajectory(msg)
        except ValueError as exc:
            self.counters["bad_trajectory"] += 1
            if self.throttle("traj"):
                self.log.warning(f"trajectory dropped ({self.counters['bad_trajectory']} so far), keeping the "
                                 f"previous one: {exc}")
            return
        self.trajectory = traj
        self.traj_received = c.now_s(self)
        if self.hold is not None and self.hold_reason.startswith("trajectory stale"):
            self._release("a trajectory arrived")

    def _on_odom(self, msg: Odometry) -> None:
        try:
            self.state = conv.odometry_to_state(msg, self.params.config.frame_id, None)
        except ValueError as exc:
            self.counters["bad_odom"] += 1
            if self.throttle("odom"):
                self.log.warning(f"odometry dropped ({self.counters['bad_odom']} so far): {exc}")
        else:
            self.odom_received = c.now_s(self)
        finally:
            self.lockstep.saw_odom(msg.header.stamp)

    # -- holding ---------------------------------------------------------------------------------
    def _hold_at(self, position, yaw: float, reason: str) -> None:
        if self.hold is not None and self.hold_reason == reason:
            return
        self.hold = Setpoint.hold(position, yaw)
        self.hold_reason = reason
        self.log.warning(f"holding at {np.round(position, 2).tolist()}: {reason}")

    def _release(self, why: str) -> None:
        if self.hold is not None:
            self.log.info(f"resuming the trajectory: {why}")
        self.hold, self.hold_reason = None, ""

    # -- the 100 Hz loop -------------------------------------------------------------------------
    def _tick(self) -> None:
        cfg = self.params.config
        now = c.now_s(self)
        dt = 0.0 if self.last_tick is None else max(now - self.last_tick, 0.0)
        self.last_tick = now
        setpoint = self._reference(now, dt, cfg)
        if setpoint is None:
            return
        self.last_setpoint = setpoint
        self.counters["setpoints"] += 1
        msg = conv.setpoint_to_msg(setpoint, max(now, 0.0), cfg.frame_id)
        self.pub_setpoint.publish(msg)
        self.lockstep.published_setpoint()

    def _reference(self, now: float, dt: float, cfg: TrajServerConfig) -> Optional[Setpoint]:
        if self.state is None:
            self.mode = "waiting for odometry"
            return None
        if now - self.odom_received > cfg.odom_timeout_s:
            self.mode = "odometry lost"
            self._hold_at(self.state.position, self.yaw.yaw if self.yaw.yaw is not None else self.state.yaw,
                          "odometry lost: hovering at the last known position")
            return self.hold
        if self.hold_reason.startswith("odometry lost"):
            self._release("odometry is back")
        if self.trajectory is None:
            # Zero velocity, no position target: hover wherever the vehicle is. A position hold at
            # the first odometry (usually the ground) would pull a vehicle that the FCU has since
            # taken off back down the moment OFFBOARD/GUIDED is entered.
            self.mode = "no trajectory"
            if self.hold_reason != "no trajectory yet":
                self.hold_reason = "no trajectory yet"
                self.log.info("no trajectory yet: streaming zero-velocity setpoints (hover in place)")
            return Setpoint.from_velocity(np.zeros(3), yaw=self.state.yaw)
        if self.hold_reason == "no trajectory yet":
            self.hold_reason = ""
            self.log.info("first trajectory: tracking")
        if now - self.traj_received > cfg.trajectory_timeout_s:
            self.mode = "trajectory stale"
            ref = self.last_setpoint.position if self.last_setpoint is not None else self.state.position
            self._hold_at(ref, self.yaw.yaw if self.yaw.yaw is not None else math.nan,
                          f"trajectory stale: none for {cfg.trajectory_timeout_s:g} s")
            return self.hold
        traj = self.trajectory
        if now >= traj.t_end:
            self.mode = "trajectory ended"
            final = traj.position[-1]
            if self.hold is None or self.hold_reason != "trajectory ended" or \
                    not np.allclose(self.hold.position, final):
                self.hold, self.hold_reason = None, ""
                yaw = self.yaw.yaw if self.yaw.yaw is not None else float(traj.yaw[-1])
                self._hold_at(final, yaw, "trajectory ended")
            return self.hold
        if self.hold is not None:
            self._release("tracking")
        self.mode = "tracking"
        p, v, a = traj.state(now)
        traj_yaw, _ = traj.yaw_at(now)
        speed_xy = math.hypot(v[0], v[1])
        if cfg.yaw_mode == "velocity" and speed_xy >= cfg.yaw_min_speed_mps:
            target = math.atan2(v[1], v[0])
        else:
            target = traj_yaw
        if self.yaw.yaw is None:
            self.yaw.reset(self.state.yaw)
        previous = self.yaw.yaw
        yaw = self.yaw.step(target, dt)
        yaw_rate = wrap_angle(yaw - previous) / dt if dt > 0 else 0.0
        return Setpoint(p, v, a, yaw=yaw, yaw_rate=yaw_rate)

    def _publish_status(self) -> None:
        now = c.now_s(self)
        level = "ok" if self.mode in ("tracking", "trajectory ended") else "warn"
        if self.mode in ("waiting for odometry", "no trajectory"):
            level = "ok"
        values = [("mode", self.mode), ("hold_reason", self.hold_reason or "none")] + list(self.counters.items()) \
            + self.lockstep.status_values()
        if self.trajectory is not None:
            values.append(("trajectory_end_s", f"{self.trajectory.t_end:.3f}"))
        self.pub_status.publish(conv.make_status(self.get_name(), level, self.mode, values, now))


def main(args=None) -> int:
    return c.run_node(TrajServer, args)


if __name__ == "__main__":
    sys.exit(main())
