"""Node ``swarm_sim``: the embedded simulator for N drones (EGO-Swarm over ROS 2, docs/swarm.md).

One process, one world, one clock: :class:`~planner_pkg.sim.swarm_embedded.SwarmStepper` (N
:class:`~planner_pkg.sim.embedded.EmbeddedSim` s stepped together, each camera seeing the
other drones, drone-drone collisions). For each drone ``i`` the node holds a small node named
``sim_bridge`` in namespace ``/drone<i>`` that carries that drone's side of the single-drone
contract (``nodes/sim_bridge.py``): it publishes ``odom``, ``depth/image``, ``cloud``, ``status``
(the sim_bridge's keys, so a bringup mission judges it the same way, plus ``drone_collision`` and
``min_inter_drone_distance_m``) and ``sim/lockstep``, and takes ``setpoint`` and
``planning/lockstep``. The driver node (``swarm_sim``, root namespace) publishes ``/clock`` and
``/map/markers``. The single-drone ``sim_bridge`` is unchanged; what both publish and read per
vehicle (topics, stamps, setpoints, reports, pacing) is one code, ``nodes/sim_vehicle.py``.

Parameters: the sim_bridge's (``SimBridgeConfig``: world, rates, lockstep, real-time factor, ...;
``start_m`` / ``start_yaw_rad`` / ``mode`` / ``gz_*`` do not apply) plus ``drones``, ``starts_m``
(3 per drone, flat) and ``start_yaws_rad`` (one per drone).

Lockstep (docs/lockstep.md) holds for every drone's participants: each drone has its own
:class:`~planner_pkg.sim.lockstep.LockstepBarrier` (its ``lockstep_participants``, reports on its
own ``planning/lockstep``, its setpoints counted), its own step manifest (its odometry and frame
stamps), and the simulator advances only as far as the most restrictive barrier allows. Sim time
starts once every drone's participants have reported (and, with ``lockstep_start_on_goal``, each
drone's planner has accepted a goal). A participant of any drone that keeps the simulator waiting
for ``lockstep_fault_timeout_s`` is a lockstep fault: the whole swarm stops, every drone's status
says so.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rosgraph_msgs.msg import Clock as ClockMsg
from trajectory_msgs.msg import MultiDOFJointTrajectory
from visualization_msgs.msg import MarkerArray

from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.nodes import markers as mk
from planner_pkg.nodes import lockstep as ls
from planner_pkg.nodes import sim_vehicle as sv
from planner_pkg.nodes.params import ConfigParameters, ParameterConfigError
from planner_pkg.nodes.sim_bridge import SimBridgeConfig, load_world_param, simulator_options
from planner_pkg.nodes.swarm_link import drone_namespace
from planner_pkg.sim.swarm_embedded import SwarmStepper
from planner_pkg.sim.lockstep import LockstepBarrier, seconds_to_ns

NODE_NAME = "swarm_sim"
DRONE_NODE = "sim_bridge"  # each drone's part, in /drone<i> (what a mission trusts)




@dataclass(frozen=True)
class SwarmSimConfig(SimBridgeConfig, prefix=""):
    """Parameters of the ``swarm_sim`` node: the sim_bridge's plus the drones'."""

    drones: int = field(default=2, metadata={"range": (1, 64), "read_only": True,
                                             "description": "number of drones (namespaces /drone0 ...)"})
    starts_m: Tuple[float, ...] = field(default=(-6.0, -1.0, 1.0, -6.0, 1.0, 1.0), metadata={
        "read_only": True, "description": "start positions, 3 per drone (x0, y0, z0, x1, ...), m (map, ENU)"})
    start_yaws_rad: Tuple[float, ...] = field(default=(0.0, 0.0), metadata={
        "read_only": True, "description": "start headings, one per drone, rad"})

    def _check(self):
        super()._check()
        if self.mode != "embedded":
            raise self._error("mode", "the swarm simulator is embedded only")
        if len(self.starts_m) != 3 * self.drones:
            raise self._error("starts_m", f"needs 3 values per drone ({3 * self.drones} for {self.drones} drones), "
                                          f"got {len(self.starts_m)}")
        if len(self.start_yaws_rad) != self.drones:
            raise self._error("start_yaws_rad", f"needs one heading per drone ({self.drones}), "
                                                f"got {len(self.start_yaws_rad)}")
        if not all(math.isfinite(v) for v in self.starts_m + self.start_yaws_rad):
            raise self._error("starts_m", "starts and headings must be finite")


class _Drone:
    """One drone's topics: a ``sim_bridge`` node in ``/drone<i>`` and its lockstep barrier."""

    def __init__(self, sim: "SwarmSim", i: int, cfg: SwarmSimConfig):
        # no global arguments: the process's `-r __node:=swarm_sim` / `__ns` remaps are the driver's
        self.node = Node(DRONE_NODE, namespace=drone_namespace(i), context=sim.context, use_global_arguments=False)
        self.i = i
        self.sim = sim
        node = self.node
        # odom, depth/image, cloud, sim/lockstep; frames drone<i>/base_link, drone<i>/camera_optical
        self.topics = sv.VehicleTopics(node, sim.params, frame_prefix=drone_namespace(i).lstrip("/") + "/")
        self.tf = c.tf_broadcaster(node)  # map -> drone<i>/base_link (None without tf2_ros: the PyPI wheels)
        self.pub_status = node.create_publisher(DiagnosticArray, c.TOPIC_STATUS, c.STATUS_QOS)
        node.create_subscription(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, self._on_setpoint, c.SETPOINT_QOS)
        node.create_subscription(DiagnosticStatus, ls.TOPIC_REPORT, self._on_report, ls.LOCKSTEP_SUB_QOS)
        self.barrier = LockstepBarrier(cfg.lockstep_participants, cfg.lockstep_start_on_goal,
                                       cfg.lockstep_fault_timeout_s) if cfg.lockstep else None
        self.counters = {"bad_setpoints": 0, "setpoints": 0, "frames": 0, "bad_lockstep_reports": 0}
        self.events: List[str] = []
        self.throttle = c.Throttle(2.0)

    @property
    def stepper_sim(self):
        return self.sim.stepper.sims[self.i]

    def publish_manifest(self) -> None:
        if self.barrier is not None:
            self.topics.publish_manifest(self.sim.stepper.t)

    def _on_setpoint(self, msg: MultiDOFJointTrajectory) -> None:
        cfg = self.sim.params.config
        sim = self.stepper_sim
        try:
            setpoint = sv.read_setpoint(msg, cfg.map_frame)
        except ValueError as exc:
            self.counters["bad_setpoints"] += 1
            held = sim.hold()
            if self.throttle("setpoint"):
                self.node.get_logger().warning(f"setpoint refused ({self.counters['bad_setpoints']} so far): {exc}; "
                                               f"holding at {np.round(held.position, 2).tolist()}")
        else:
            self.counters["setpoints"] += 1
            sim.set_setpoint(setpoint, conv.stamp_to_seconds(msg.header.stamp))
        if self.barrier is not None:
            self.barrier.saw_setpoint()  # read or refused, it was sent: counted
            self.sim.resume()

    def _on_report(self, msg: DiagnosticStatus, info) -> None:
        if self.barrier is None:
            return
        if sv.take_report(self.barrier, msg, info, self.counters, self.throttle, self.node.get_logger(),
                          lambda fault: self.sim.fault_logged(self, fault)):
            self.sim.resume()

    def publish(self, out) -> None:
        self.counters["frames"] += self.topics.publish_output(out)
        if out.odometry and self.tf is not None:
            self.tf(out.odometry[-1], self.sim.params.config.map_frame, self.topics.base_frame)
        for text in out.events:
            self.events.append(text)
            del self.events[:-20]
            self.node.get_logger().warning(text)

    def publish_start_odometry(self) -> None:
        self.topics.publish_state(self.stepper_sim.state())

    def publish_status(self, fault: str) -> None:
        sim, st = self.stepper_sim, self.sim.stepper
        s = sim.state()
        drone_hit = st.drone_collided[self.i]
        level = "error" if sim.crashed else ("warn" if sim.out_of_bounds or sim.holding else "ok")
        message = sim.crash_reason or ("holding position" if sim.holding else "tracking setpoints")
        values = list(self.counters.items()) + [
            ("drone_id", self.i), ("sim_time_s", f"{st.t:.3f}"), ("crashed", sim.crashed),
            ("collision", sim.monitor.collided or drone_hit), ("drone_collision", drone_hit),
            ("min_clearance_m", f"{sim.monitor.min_clearance_m:.3f}"),
            ("min_inter_drone_distance_m", f"{st.min_separation_m:.3f}" if math.isfinite(st.min_separation_m) else "n/a"),
            ("min_inter_drone_pair", ",".join(map(str, st.min_separation_pair)) if st.min_separation_pair else "n/a"),
            ("drone_contacts", len(st.contacts)),
            ("position", ",".join(f"{v:.3f}" for v in s.position)), ("world", self.sim.world_path),
            ("out_of_bounds", sim.out_of_bounds), ("lockstep", self.sim.lockstep_state()), ("mode", "embedded")]
        if fault:
            level, message = "error", f"lockstep fault: {fault}"
            values.append(("lockstep_fault", fault))
        if self.events:
            values.append(("last_event", self.events[-1]))
        self.pub_status.publish(conv.make_status(self.node.get_name(), level, message, values, st.t))


class SwarmSim(Node):
    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.params = ConfigParameters(self, SwarmSimConfig)
        cfg = self.params.config
        self.log = self.get_logger()
        self.world, path = load_world_param(cfg.world_file)
        self.world_path = str(path)
        starts = np.asarray(cfg.starts_m, dtype=np.float64).reshape(-1, 3)
        try:
            self.stepper = SwarmStepper(self.world, starts, cfg.start_yaws_rad, **simulator_options(cfg))
        except ValueError as exc:
            raise ParameterConfigError(f"simulator refused its parameters: {exc}") from None
        self._check_starts(starts)
        self._added = False
        self.drones = [_Drone(self, i, cfg) for i in range(cfg.drones)]
        self.pub_clock = self.create_publisher(ClockMsg, c.TOPIC_CLOCK, c.CLOCK_QOS)
        self.pub_map = self.create_publisher(MarkerArray, c.TOPIC_MAP_MARKERS, c.LATCHED_QOS)
        self.pub_map.publish(mk.world_to_markers(self.world, 0.0, cfg.map_frame))
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        self.pacer = sv.StepPacer()
        self.lockstep_faults = 0
        for d in self.drones:
            d.publish_manifest()
        self._publish_clock()
        self.create_timer(cfg.step_period_s, self._step, clock=self._wall)
        self.create_timer(1.0 / cfg.status_rate_hz, self._publish_status, clock=self._wall)
        pace = "as fast as possible" if cfg.real_time_factor == 0 else f"x{cfg.real_time_factor:g} real time"
        self.log.info(f"swarm simulator: {cfg.drones} drones in {self.world_path} "
                      f"({len(self.world.obstacles)} obstacles), {cfg.vehicle}, {pace}"
                      + (f", lockstep with {', '.join(cfg.lockstep_participants)} of every drone" if cfg.lockstep else ""))

    def _check_starts(self, starts: np.ndarray) -> None:
        lo, hi = np.asarray(self.world.bounds_min), np.asarray(self.world.bounds_max)
        r = self.stepper.radius_m
        for i, s in enumerate(starts):
            if (s < lo).any() or (s > hi).any():
                raise ParameterConfigError(f"parameter 'starts_m' refused: drone {i} start {s.tolist()} is outside "
                                           f"the world bounds {lo.tolist()} .. {hi.tolist()}")
            if float(self.world.signed_distance(s)) < r:
                raise ParameterConfigError(f"parameter 'starts_m' refused: drone {i} start {s.tolist()} is inside or "
                                           f"within {r} m of an obstacle")
        for a in range(len(starts)):
            for b in range(a + 1, len(starts)):
                d = float(np.linalg.norm(starts[a] - starts[b]))
                if d < 2 * r:
                    raise ParameterConfigError(f"parameter 'starts_m' refused: drones {a} and {b} start {d:.3f} m "
                                               f"apart, closer than two vehicle radii ({2 * r:.2f} m)")

    # -- stepping --------------------------------------------------------------------------------
    def _publish_clock(self) -> None:
        self.pub_clock.publish(ClockMsg(clock=conv.seconds_to_stamp(self.stepper.t)))

    def _barriers(self):
        return [d.barrier for d in self.drones if d.barrier is not None]

    def fault(self) -> str:
        return next((f"drone {d.i}: {d.barrier.fault}" for d in self.drones if d.barrier is not None and d.barrier.fault), "")

    def fault_logged(self, drone: _Drone, fault: str) -> None:
        self.lockstep_faults += 1
        self.log.error(f"lockstep fault at sim time {self.stepper.t:.3f} s, drone {drone.i}: {fault}; "
                       f"the simulation is stopped")
        self._publish_status()

    def lockstep_state(self) -> str:
        return sv.lockstep_state([(f"drone {d.i}: ", d.barrier) for d in self.drones if d.barrier is not None])

    def _allowance(self, wall: float) -> Optional[int]:
        """Dynamics steps every drone's lockstep allows now (None = no limit: lockstep off)."""
        now_ns = seconds_to_ns(self.stepper.t)
        limit, blocking = None, []
        for d in self.drones:
            if d.barrier is None:
                continue
            lim, on = d.barrier.limit_ns(now_ns)
            if lim is None:
                continue
            limit = lim if limit is None else min(limit, lim)
            if lim <= now_ns:
                blocking.append((d, on))
        if limit is None:
            return None
        n = self.stepper.steps_until(limit * 1e-9) if limit > now_ns else 0
        if n > 0:
            return n
        for d, on in blocking:
            had = bool(d.barrier.fault)
            if d.barrier.blocked(wall, on) and not had:
                self.fault_logged(d, d.barrier.fault)
        return 0

    def resume(self) -> None:
        if self.pacer.at_limit:
            self._step()

    def _step(self) -> None:
        cfg = self.params.config
        if not self._added and self.executor is not None:
            for d in self.drones:  # the drones' nodes spin on this node's executor (one thread: no locks)
                self.executor.add_node(d.node)
            self._added = True
        wall = time.monotonic()
        n = self.pacer.steps(cfg, wall, self.stepper.dt,
                             lambda now: self._allowance(now) if self._barriers() else None)
        if n <= 0:
            if self.pacer.resend_due(wall):
                if not all(b.started for b in self._barriers()):
                    for d in self.drones:  # a mission sends its goal once it sees its vehicle
                        d.publish_start_odometry()
                        d.publish_manifest()
                self._publish_clock()
            return
        for b in self._barriers():
            b.advanced(wall)
        outs = self.stepper.advance_steps(n)
        for d, out in zip(self.drones, outs):
            d.publish(out)
        for d in self.drones:  # every manifest, then the clock (docs/lockstep.md)
            d.publish_manifest()
        self._publish_clock()

    def _publish_status(self) -> None:
        fault = self.fault()
        for d in self.drones:
            d.publish_status(fault)

    def close(self) -> None:
        """Take the drones' nodes off the executor and destroy them (run_node calls this first)."""
        drones, self.drones = getattr(self, "drones", []), []
        executor = self.executor if getattr(self, "_added", False) else None
        for d in drones:
            if executor is not None:
                executor.remove_node(d.node)
            d.node.destroy_node()

    def destroy_node(self):
        self.close()
        return super().destroy_node()


def main(args=None) -> int:
    return c.run_node(SwarmSim, args)


if __name__ == "__main__":
    sys.exit(main())
