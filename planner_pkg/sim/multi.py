"""Several vehicles in one world on one simulated clock (the swarm simulator).

:class:`MultiVehicleRunner` flies N vehicles, each with its own planner (any object following the
runner's Planner protocol, :mod:`planner_pkg.sim.runner`), controller, odometry and depth camera,
in lockstep: every part of every vehicle runs at the rates of one :class:`RunnerConfig`, and all
flight logs share the sample times. What is new over the single-vehicle runner:

* every camera sees the *other* vehicles, as balls of their collision radius (``_WorldWithDrones``:
  the world's raycast, then each ray against those balls);
* vehicle-vehicle collisions: two vehicles whose centres come closer than the sum of their radii
  collide; both are logged (time, ids, distance) and *down*: they stop where they are (still
  obstacles, still seen), their planners are no longer called. The smallest centre distance
  over all pairs and all steps is reported;
* a world collision, leaving the bounds or a non-finite state also puts that vehicle down, the
  others fly on;
* ``planner_lost_at``: from that sim time on a vehicle's planner is never called again (the lost
  planner fault); its controller keeps tracking the last reference (a trajectory flown to its end
  is held there: the trajectory server hovers);
* a vehicle that reached its goal keeps hovering under its planner (it stays an obstacle for the
  others). The run ends when every vehicle has reached its goal or is down, or at the timeout.

The simulator knows no planner and no swarm: how planners talk to each other (broadcast
trajectories) is up to the planners, see :mod:`planner_pkg.planning.swarm`.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from planner_pkg.sim.camera import DepthCamera
from planner_pkg.sim.collision import CollisionMonitor
from planner_pkg.sim.flight_log import FlightLog, percentile_or_none
from planner_pkg.sim.odometry import Odometry
from planner_pkg.sim.params import CameraParams, ControllerGains, OdometryParams, PointMassParams, QuadrotorParams
from planner_pkg.sim.runner import ClosedLoopRunner, RunnerConfig, _Schedule
from planner_pkg.types import SensorFrame, Setpoint, VehicleState

__all__ = ["MultiVehicleRunner", "MultiResult", "VehicleOutcome", "DroneCollision", "ray_ball_distances"]

logger = logging.getLogger(__name__)


def ray_ball_distances(origin: np.ndarray, directions: np.ndarray, centres: np.ndarray, radius: float) -> np.ndarray:
    """(M,) distance along each unit ray (M, 3) from ``origin`` (3,) to the first of the balls of
    ``radius`` at ``centres`` (J, 3) m; inf where none is hit (an origin inside a ball: 0)."""
    out = np.full(directions.shape[0], np.inf)
    for c in np.asarray(centres, dtype=np.float64).reshape(-1, 3):
        oc = c - origin
        b = directions @ oc
        cc = float(oc @ oc) - radius * radius
        if cc <= 0.0:
            out[:] = 0.0
            return out
        disc = b * b - cc
        hit = (disc >= 0.0) & (b > 0.0)
        if hit.any():
            t = b[hit] - np.sqrt(disc[hit])
            out[hit] = np.minimum(out[hit], t)
    return out


class _WorldWithDrones:
    """The world as one vehicle's camera sees it: the obstacles plus the other vehicles' balls."""

    def __init__(self, world, centres: np.ndarray, radius: float):
        self.world, self.centres, self.radius = world, centres, radius

    def raycast(self, origins, directions, max_range: float):
        out = self.world.raycast(origins, directions, max_range)
        if self.centres.shape[0]:
            d = np.asarray(directions, dtype=np.float64)
            d = d / np.linalg.norm(d, axis=1, keepdims=True)
            balls = ray_ball_distances(np.asarray(origins, dtype=np.float64).reshape(-1, 3)[0], d, self.centres,
                                       self.radius)
            balls[balls > max_range] = np.inf
            out = np.minimum(out, balls)
        return out


@dataclass(frozen=True)
class DroneCollision:
    """Two vehicles touched: at sim time ``t`` s, ids ``a`` < ``b``, centre distance m."""

    t: float
    a: int
    b: int
    distance_m: float


@dataclass
class VehicleOutcome:
    """One vehicle's flight. reason: ``goal_reached`` (and hovering since), ``collision`` (a world
    surface), ``drone_collision``, ``out_of_bounds``, ``non_finite_state`` or ``timeout``."""

    drone_id: int
    reached: bool = False
    collided: bool = False
    drone_collision: bool = False
    reason: str = "timeout"
    message: str = ""
    reach_time_s: Optional[float] = None
    down_time_s: Optional[float] = None
    path_length_m: float = 0.0
    max_speed_mps: float = 0.0
    min_clearance_m: float = math.inf  # to world surfaces (ball to surface)
    final_goal_distance_m: float = math.inf
    planner_calls: int = 0
    update_ms: List[float] = field(default_factory=list)
    planner_lost_at_s: Optional[float] = None
    # |vehicle - position setpoint| at each control tick, m (holds after a bad setpoint left out)
    tracking_errors: List[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        def num(x):
            return None if x is None or not math.isfinite(x) else float(x)

        return {"drone": self.drone_id, "reached": self.reached, "collided": self.collided,
                "drone_collision": self.drone_collision, "reason": self.reason, "message": self.message,
                "reach_time_s": num(self.reach_time_s), "path_length_m": num(self.path_length_m),
                "max_speed_mps": num(self.max_speed_mps), "min_clearance_m": num(self.min_clearance_m),
                "final_goal_distance_m": num(self.final_goal_distance_m), "planner_calls": self.planner_calls,
                "update_ms_median": percentile_or_none(self.update_ms, 50),
                "update_ms_p95": percentile_or_none(self.update_ms, 95),
                "planner_lost_at_s": num(self.planner_lost_at_s),
                "tracking_error_p95_m": percentile_or_none(self.tracking_errors, 95),
                "tracking_error_max_m": max(self.tracking_errors) if self.tracking_errors else None}


@dataclass
class MultiResult:
    """What :meth:`MultiVehicleRunner.run` returns; ``logs[i]`` is vehicle i's flight log (all on
    the same sample times)."""

    vehicles: List[VehicleOutcome]
    logs: List[FlightLog]
    drone_collisions: List[DroneCollision]
    min_separation_m: float
    min_separation_pair: Optional[tuple]
    min_separation_time_s: Optional[float]
    time_s: float
    wall_time_s: float
    events: List[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        """Every vehicle reached its goal and none touched a surface or another vehicle."""
        return all(v.reached and not v.collided and not v.drone_collision for v in self.vehicles)


class _Vehicle:
    """The per-vehicle parts of one run."""

    def __init__(self, k: int, runner: ClosedLoopRunner, planner, cfg: RunnerConfig, camera_params, odometry_params):
        seeds = np.random.SeedSequence([cfg.seed, k]).spawn(2)
        self.k = k
        self.planner = planner
        self.camera = DepthCamera(camera_params, np.random.default_rng(seeds[0])) if cfg.depth_rate_hz > 0 else None
        self.odometry = Odometry(odometry_params, np.random.default_rng(seeds[1]))
        self.vehicle, self.controller, self.radius, accel = runner.make_vehicle()
        self.monitor = CollisionMonitor(runner.world, self.radius, max_accel_mps2=accel)
        self.observe = getattr(planner, "observe", None)
        self.out = VehicleOutcome(k)
        self.log = FlightLog()
        self.down = False
        self.reference = None
        self.holding = False  # flying a hold put in for a bad setpoint (not the planner's reference)
        self.command = None
        self.fresh_frame: Optional[SensorFrame] = None
        self.prev = None


class MultiVehicleRunner:
    """N vehicles, one world, one planner each (see the module docstring). The keyword arguments are
    those of :class:`~planner_pkg.sim.runner.ClosedLoopRunner` and apply to every vehicle."""

    def __init__(self, world, planners: Sequence, config: RunnerConfig = RunnerConfig(), *,
                 quadrotor: QuadrotorParams = QuadrotorParams(), point_mass: PointMassParams = PointMassParams(),
                 gains: ControllerGains = ControllerGains(), camera: CameraParams = CameraParams(),
                 odometry: OdometryParams = OdometryParams()):
        if len(planners) < 1:
            raise ValueError("MultiVehicleRunner needs at least one planner")
        self.world = world
        self.planners = list(planners)
        self.config = config
        # a single-vehicle runner builds each vehicle (one extension point for vehicle models)
        self._factory = ClosedLoopRunner(world, self.planners[0], config, quadrotor=quadrotor, point_mass=point_mass,
                                         gains=gains, camera=camera, odometry=odometry)
        self.camera_params, self.odometry_params = camera, odometry

    def run(self, starts, goals, start_yaws: Optional[Sequence[float]] = None,
            planner_lost_at: Optional[Dict[int, float]] = None) -> MultiResult:
        """Fly vehicle i from ``starts[i]`` (at rest, heading ``start_yaws[i]`` rad, default 0)
        towards ``goals[i]`` ((3,) m each)."""
        n = len(self.planners)
        starts = np.asarray(starts, dtype=np.float64).reshape(-1, 3)
        goals = np.asarray(goals, dtype=np.float64).reshape(-1, 3)
        if starts.shape[0] != n or goals.shape[0] != n:
            raise ValueError(f"{n} planners need {n} starts and goals, got {starts.shape[0]} and {goals.shape[0]}")
        if not (np.isfinite(starts).all() and np.isfinite(goals).all()):
            raise ValueError("starts and goals must be finite positions in metres")
        yaws = [0.0] * n if start_yaws is None else [float(y) for y in start_yaws]
        lost = {int(k): float(v) for k, v in (planner_lost_at or {}).items()}
        cfg = self.config
        vs = [_Vehicle(k, self._factory, p, cfg, self.camera_params, self.odometry_params)
              for k, p in enumerate(self.planners)]
        for v in vs:
            initial = VehicleState.at_rest(starts[v.k], yaws[v.k])
            v.vehicle.reset(initial)
            v.controller.reset(initial)
            v.planner.reset(starts[v.k].copy(), goals[v.k].copy())
            v.reference = Setpoint.hold(starts[v.k], yaws[v.k])
            v.prev = starts[v.k].copy()
            v.out.planner_lost_at_s = lost.get(v.k)
        radii = np.array([v.radius for v in vs])
        touch = radii[:, None] + radii[None, :]
        iu = np.triu_indices(n, 1)
        dt = 1.0 / cfg.dynamics_rate_hz
        control_dt = 1.0 / cfg.control_rate_hz
        planner_rate = cfg.planner_rate_hz or float(getattr(self.planners[0], "rate_hz", 10.0))
        sched_control, sched_log = _Schedule(cfg.control_rate_hz), _Schedule(cfg.log_rate_hz)
        sched_depth = _Schedule(cfg.depth_rate_hz if cfg.depth_rate_hz > 0 else 0.0)
        sched_plan = _Schedule(planner_rate)
        bmin, bmax = np.asarray(self.world.bounds_min), np.asarray(self.world.bounds_max)
        tol2 = cfg.goal_tolerance_m ** 2
        collisions: List[DroneCollision] = []
        events: List[str] = []
        min_sep, min_pair, min_t = math.inf, None, None
        touching = set()
        pos = starts.copy()
        vel = np.zeros((n, 3))
        wall0 = time.perf_counter()
        i = 0
        t = 0.0

        def put_down(v: _Vehicle, reason: str, message: str, t: float) -> None:
            v.down = True
            v.out.reason, v.out.message, v.out.down_time_s = reason, message, t
            text = f"t={t:.3f} s: drone {v.k}: {message}"
            logger.warning(text)
            events.append(text)

        with np.errstate(all="ignore"):
            while True:
                t = i * dt
                log_due = sched_log.due(t)
                for v in vs:
                    if v.down:
                        vel[v.k] = 0.0
                        continue
                    px, py, pz, vx, vy, vz = v.vehicle.kinematics()
                    if not v.vehicle.is_finite():
                        put_down(v, "non_finite_state", "vehicle state became non-finite", t)
                        continue
                    d = math.sqrt((px - v.prev[0]) ** 2 + (py - v.prev[1]) ** 2 + (pz - v.prev[2]) ** 2)
                    v.out.path_length_m += d
                    v.prev = (px, py, pz)
                    pos[v.k] = v.prev
                    vel[v.k] = (vx, vy, vz)
                    speed = math.sqrt(vx * vx + vy * vy + vz * vz)
                    v.out.max_speed_mps = max(v.out.max_speed_mps, speed)
                    if v.monitor.update(t, v.prev, speed):
                        v.out.collided = True
                        put_down(v, "collision", f"collision with the world at {np.round(pos[v.k], 3).tolist()}", t)
                        continue
                    if not ((bmin <= pos[v.k]).all() and (pos[v.k] <= bmax).all()):
                        put_down(v, "out_of_bounds", "left the world bounds", t)
                        continue
                    g = goals[v.k]
                    if not v.out.reached and ((pos[v.k] - g) ** 2).sum() <= tol2:
                        v.out.reached, v.out.reach_time_s = True, t
                        v.out.reason, v.out.message = "goal_reached", f"goal reached at t={t:.3f} s"
                if log_due:
                    for v in vs:
                        v.log.append(t, pos[v.k], vel[v.k])
                if n > 1:
                    diff = pos[:, None, :] - pos[None, :, :]
                    dist = np.sqrt((diff * diff).sum(axis=2))
                    pair = dist[iu]
                    j = int(np.argmin(pair))
                    if pair[j] < min_sep:
                        min_sep, min_pair, min_t = float(pair[j]), (int(iu[0][j]), int(iu[1][j])), t
                    for a, b in zip(*np.nonzero(np.triu(dist < touch, 1))):
                        a, b = int(a), int(b)
                        if (a, b) in touching:
                            continue
                        touching.add((a, b))
                        collisions.append(DroneCollision(t, a, b, float(dist[a, b])))
                        for k in (a, b):
                            vk = vs[k]
                            vk.out.drone_collision = True
                            if not vk.down:
                                other = b if k == a else a
                                put_down(vk, "drone_collision",
                                         f"collided with drone {other} (centres {dist[a, b]:.3f} m apart)", t)
                if all(v.down or v.out.reached for v in vs):
                    break
                if t >= cfg.timeout_s - 1e-9:
                    break
                depth_due, control_due, plan_due = sched_depth.due(t), sched_control.due(t), sched_plan.due(t)
                for v in vs:
                    if v.down:
                        continue
                    if not (depth_due or control_due or plan_due or v.command is None):
                        v.vehicle.step(v.command, dt)
                        continue
                    state = v.vehicle.state()
                    alive = v.k not in lost or t < lost[v.k]
                    if depth_due and v.camera is not None:
                        others = np.delete(pos, v.k, axis=0)
                        scene = _WorldWithDrones(self.world, others, float(np.delete(radii, v.k).max()) if n > 1 else 0.0)
                        v.fresh_frame = v.camera.render(scene, state, with_points=cfg.point_cloud)
                        if alive and v.observe is not None:
                            v.observe(v.fresh_frame)
                    if control_due or v.command is None:
                        v.odometry.record(state)
                    if plan_due and alive:
                        odom = v.odometry.read()
                        w0 = time.perf_counter()
                        try:
                            result = v.planner.update(odom, v.fresh_frame)
                        except (ValueError, ArithmeticError) as exc:
                            result = None
                            text = f"t={t:.3f} s: drone {v.k}: planner.update raised {type(exc).__name__}: {exc}"
                            logger.warning(text)
                            events.append(text)
                        v.out.update_ms.append(1e3 * (time.perf_counter() - w0))
                        v.out.planner_calls += 1
                        v.fresh_frame = None
                        if result is not None and (isinstance(result, Setpoint) or callable(getattr(result, "sample", None))):
                            v.reference, v.holding = result, False
                    if control_due or v.command is None:
                        setpoint = ClosedLoopRunner._resolve(v.reference, t)
                        if isinstance(setpoint, str):
                            text = f"t={t:.3f} s: drone {v.k}: bad setpoint ({setpoint}); holding position"
                            if not events or events[-1] != text:
                                logger.warning(text)
                                events.append(text)
                            v.reference = setpoint = Setpoint.hold(state.position, state.yaw)
                            v.holding = True
                        if not v.holding and setpoint.has_position:
                            # how far the vehicle is from the reference it is told to fly
                            v.out.tracking_errors.append(float(np.linalg.norm(state.position - setpoint.position)))
                        v.command = v.controller.update(state, setpoint, control_dt)
                    v.vehicle.step(v.command, dt)
                i += 1
        for v in vs:
            if not len(v.log) or v.log.t[-1] < t:
                v.log.append(t, pos[v.k], vel[v.k])
            v.out.min_clearance_m = v.monitor.min_clearance_m
            v.out.final_goal_distance_m = float(np.linalg.norm(pos[v.k] - goals[v.k]))
            if not v.down and not v.out.reached:
                v.out.reason, v.out.message = "timeout", f"timeout after {cfg.timeout_s:g} s"
        return MultiResult([v.out for v in vs], [v.log for v in vs], collisions, min_sep, min_pair, min_t, t,
                           time.perf_counter() - wall0, events)
