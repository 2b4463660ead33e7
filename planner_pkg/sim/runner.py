"""Closed-loop runner: world -> sensors -> planner -> setpoint -> controller -> dynamics.

Every part runs at its own rate on one simulated clock (defaults: dynamics 500 Hz, controller
250 Hz, depth camera 30 Hz, planner at its ``rate_hz``, log 50 Hz). An episode is a pure
function of (world, planner, start, goal, config): the same seed gives the same flight log.
It ends with a reason, never an exception, on: ``goal_reached`` (within
``goal_tolerance_m``), ``collision``, ``out_of_bounds``, ``timeout`` or ``non_finite_state``.

Planner protocol (what ``planner`` must provide; see :class:`Planner`):

    planner.rate_hz                 -> float, Hz: how often ``update`` is called
    planner.reset(start, goal)      start, goal: (3,) float64, m, world ENU
    planner.update(state, sensors)  -> Setpoint | TrajectoryLike | None
        state: VehicleState from odometry (delayed/noisy per OdometryParams)
        sensors: the newest SensorFrame rendered since the previous call, or None
        returns a Setpoint (held until replaced), an object with ``sample(t) -> Setpoint``
        (absolute sim time, sampled at the control rate), or None to keep the current one.
    planner.observe(sensors)        optional; called with *every* rendered frame (30 Hz), for
                                    mapping planners that must fuse all frames.

The planner only ever receives the vehicle state and sensor frames, never the world.

Bad setpoints never crash the episode: when ``update`` or ``sample`` raises ``ValueError`` /
``ArithmeticError`` (e.g. a partially-NaN Setpoint), returns an empty setpoint (nothing
translational given) or something that is not a setpoint, the runner logs a warning, counts it
(``bad_setpoints``) and holds position where the vehicle is, until the planner returns a new
reference. Other exceptions from the planner are programming errors and propagate.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import List, Optional, Protocol, Union, runtime_checkable

import numpy as np

from planner_pkg.config_schema import Config, non_negative, positive, setting
from planner_pkg.sim.camera import DepthCamera
from planner_pkg.sim.collision import CollisionMonitor
from planner_pkg.sim.controller import PointMassController, SE3Controller
from planner_pkg.sim.dynamics import RigidBodyQuadrotor
from planner_pkg.sim.flight_log import EpisodeSummary, FlightLog, percentile_or_none
from planner_pkg.sim.mission_judge import GOAL_TOLERANCE_M, MISSION_TIMEOUT_S
from planner_pkg.sim.odometry import Odometry
from planner_pkg.sim.params import (
    CameraParams,
    ControllerGains,
    OdometryParams,
    PointMassParams,
    QuadrotorParams,
)
from planner_pkg.sim.point_mass import PointMassQuadrotor
from planner_pkg.types import SensorFrame, Setpoint, TrajectoryLike, VehicleState

logger = logging.getLogger(__name__)

VEHICLES = ("quadrotor", "point_mass")


@runtime_checkable
class Planner(Protocol):
    """What the runner needs from a planner (see the module docstring for the semantics)."""

    rate_hz: float

    def reset(self, start: np.ndarray, goal: np.ndarray) -> None:  # pragma: no cover - protocol
        ...

    def update(
        self, state: VehicleState, sensors: Optional[SensorFrame]
    ) -> Union[Setpoint, TrajectoryLike, None]:  # pragma: no cover - protocol
        ...


@dataclass(frozen=True)
class RunnerConfig(Config):
    """Rates (Hz), limits and options of one closed-loop episode."""

    dynamics_rate_hz: float = positive(500.0)
    control_rate_hz: float = positive(250.0)
    depth_rate_hz: float = non_negative(30.0)  # 0 = no camera (the planner gets sensors=None)
    point_cloud: bool = True  # attach the world-frame cloud to each frame
    planner_rate_hz: Optional[float] = positive(None)  # None = the planner's own rate_hz
    log_rate_hz: float = positive(50.0)
    timeout_s: float = positive(MISSION_TIMEOUT_S)
    goal_tolerance_m: float = positive(GOAL_TOLERANCE_M)
    vehicle: str = setting("quadrotor", choices=VEHICLES)  # or "point_mass"
    vehicle_radius_m: Optional[float] = non_negative(None)  # None = the vehicle params' collision radius
    seed: int = 0

    def _check(self):
        for name in ("control_rate_hz", "depth_rate_hz", "log_rate_hz"):
            if getattr(self, name) > self.dynamics_rate_hz:
                raise self._error(name, f"cannot exceed dynamics_rate_hz ({self.dynamics_rate_hz})")


@dataclass
class EpisodeResult:
    """What :meth:`ClosedLoopRunner.run` returns."""

    summary: EpisodeSummary
    log: FlightLog
    events: List[str] = field(default_factory=list)  # warnings raised during the episode
    final_state: Optional[VehicleState] = None
    planner_references: int = 0  # planner outputs (setpoint or trajectory) that were tracked at least once

    @property
    def never_flew(self) -> bool:
        """True when the planner never gave a reference the controller could track (every call
        raised, returned nothing usable, or only setpoints that failed): the vehicle only ever held
        its start, so the outcome says nothing about the planner; ``fly`` exits 1 for it."""
        return self.planner_references == 0


class _Schedule:
    """Fires every ``period`` seconds of simulated time, starting at t = 0."""

    def __init__(self, rate_hz: float):
        self.period = 1.0 / rate_hz if rate_hz > 0 else math.inf
        self.next_t = 0.0 if rate_hz > 0 else math.inf

    def due(self, t: float) -> bool:
        if t + 1e-9 < self.next_t:  # tolerance: t = i * dt is not exact in binary
            return False
        self.next_t += self.period
        return True


class ClosedLoopRunner:
    """One vehicle, one world, one planner. ``run(start, goal)`` flies one episode."""

    def __init__(
        self,
        world,
        planner: Planner,
        config: RunnerConfig = RunnerConfig(),
        *,
        quadrotor: QuadrotorParams = QuadrotorParams(),
        point_mass: PointMassParams = PointMassParams(),
        gains: ControllerGains = ControllerGains(),
        camera: CameraParams = CameraParams(),
        odometry: OdometryParams = OdometryParams(),
        planner_name: Optional[str] = None,
        world_name: Optional[str] = None,
    ):
        self.world = world
        self.planner = planner
        self.config = config
        self.quadrotor_params = quadrotor
        self.point_mass_params = point_mass
        self.gains = gains
        self.camera_params = camera
        self.odometry_params = odometry
        self.planner_name = planner_name or getattr(planner, "name", type(planner).__name__)
        self.world_name = world_name

    # -- construction of the per-episode parts ---------------------------------------------------
    def make_vehicle(self):
        """Fresh (vehicle, controller, collision radius m, acceleration bound m/s^2) per episode.

        The extension point for another vehicle model (e.g. a higher-fidelity backend): the
        vehicle needs ``reset(VehicleState)``, ``state() -> VehicleState``, ``kinematics()``
        -> (px, py, pz, vx, vy, vz) floats, ``is_finite()`` and
        ``step(command, dt)``; the controller ``reset(state)`` and
        ``update(state, setpoint, dt) -> command``. The bound must cover the vehicle's largest
        possible acceleration (it spaces the collision checks).
        """
        if self.config.vehicle == "quadrotor":
            p = self.quadrotor_params
            vehicle, controller = RigidBodyQuadrotor(p), SE3Controller(p, self.gains)
            accel_bound = p.max_total_thrust_n / p.mass_kg + p.gravity_mps2
        else:
            p = self.point_mass_params
            vehicle, controller = PointMassQuadrotor(p), PointMassController(self.gains, p.gravity_mps2,
                                                                               p.drag_coeffs_per_s)
            accel_bound = p.max_thrust_accel_mps2 + p.gravity_mps2
        radius = p.collision_radius_m if self.config.vehicle_radius_m is None else self.config.vehicle_radius_m
        return vehicle, controller, radius, accel_bound

    # -- the episode -----------------------------------------------------------------------------
    def run(self, start, goal, start_yaw: float = 0.0) -> EpisodeResult:
        """Fly from ``start`` (3,) m (at rest, heading ``start_yaw`` rad) towards ``goal`` (3,) m."""
        start = np.asarray(start, dtype=np.float64)
        goal = np.asarray(goal, dtype=np.float64)
        if start.shape != (3,) or goal.shape != (3,) or not (np.isfinite(start).all() and np.isfinite(goal).all()):
            raise ValueError(f"start and goal must be finite (3,) positions in metres, got {start}, {goal}")
        cfg = self.config
        seeds = np.random.SeedSequence(cfg.seed).spawn(2)
        camera = DepthCamera(self.camera_params, np.random.default_rng(seeds[0])) if cfg.depth_rate_hz > 0 else None
        odometry = Odometry(self.odometry_params, np.random.default_rng(seeds[1]))
        vehicle, controller, radius, accel_bound = self.make_vehicle()
        monitor = CollisionMonitor(self.world, radius, max_accel_mps2=accel_bound)
        initial = VehicleState.at_rest(start, start_yaw)
        vehicle.reset(initial)
        controller.reset(initial)
        self.planner.reset(start.copy(), goal.copy())

        dt = 1.0 / cfg.dynamics_rate_hz
        control_dt = 1.0 / cfg.control_rate_hz
        planner_rate = cfg.planner_rate_hz or float(getattr(self.planner, "rate_hz", 10.0))
        sched_control, sched_log = _Schedule(cfg.control_rate_hz), _Schedule(cfg.log_rate_hz)
        sched_depth, sched_plan = _Schedule(cfg.depth_rate_hz if camera else 0.0), _Schedule(planner_rate)
        observe = getattr(self.planner, "observe", None)
        bmin, bmax = np.asarray(self.world.bounds_min), np.asarray(self.world.bounds_max)

        log = FlightLog()
        events: List[str] = []
        replan_ms: List[float] = []
        reference: Union[Setpoint, TrajectoryLike] = Setpoint.hold(start, start_yaw)
        holding = False  # True from a bad setpoint until a planner reference resolves again
        hold_ref: Optional[Setpoint] = None  # the latched hold of the current streak
        bad_setpoints = 0
        tracked = 0  # planner references that resolved to a setpoint at least once
        fresh: Optional[object] = None  # the newest planner reference not yet resolved
        fresh_frame: Optional[SensorFrame] = None
        frames = planner_calls = 0
        command = None
        path_len, max_speed = 0.0, 0.0
        tracking_errors: List[float] = []  # |vehicle - position setpoint| at each control tick, m
        reason, message = "timeout", ""
        wall0 = time.perf_counter()

        def bad(t: float, state: VehicleState, why: str) -> Setpoint:
            """Count a bad setpoint; latch a hold where the vehicle is (once per streak)."""
            nonlocal holding, bad_setpoints, reference, hold_ref
            bad_setpoints += 1
            if not holding:
                hold_ref = Setpoint.hold(state.position, state.yaw)
                text = f"t={t:.3f} s: bad setpoint ({why}); holding position at {np.round(state.position, 3).tolist()}"
                logger.warning(text)
                events.append(text)
            holding = True
            reference = hold_ref
            return hold_ref

        tol2 = cfg.goal_tolerance_m**2
        gx, gy, gz = goal.tolist()
        (bx0, by0, bz0), (bx1, by1, bz1) = bmin.tolist(), bmax.tolist()
        prev = start.tolist()
        i = 0
        with np.errstate(all="ignore"):  # a diverging state is detected below, not warned about
            while True:
                t = i * dt
                # per-step checks on plain floats; a VehicleState is built only when a consumer
                # (controller, camera, planner) runs this step
                px, py, pz, vx, vy, vz = vehicle.kinematics()
                if not vehicle.is_finite():
                    reason, message = "non_finite_state", f"vehicle state became non-finite at t={t:.3f} s"
                    logger.warning(message)
                    break
                ex, ey, ez = px - prev[0], py - prev[1], pz - prev[2]  # products, not **: no OverflowError
                path_len += math.sqrt(ex * ex + ey * ey + ez * ez)
                prev = (px, py, pz)
                speed = math.sqrt(vx * vx + vy * vy + vz * vz)
                max_speed = max(max_speed, speed)
                if sched_log.due(t):
                    log.append(t, prev, (vx, vy, vz))
                if monitor.update(t, prev, speed):
                    reason = "collision"
                    message = f"collision at t={t:.3f} s at {[round(c, 3) for c in prev]}"
                    break
                if not (bx0 <= px <= bx1 and by0 <= py <= by1 and bz0 <= pz <= bz1):
                    reason, message = "out_of_bounds", f"left the world bounds at t={t:.3f} s"
                    break
                ex, ey, ez = px - gx, py - gy, pz - gz
                if ex * ex + ey * ey + ez * ez <= tol2:
                    reason, message = "goal_reached", f"goal reached at t={t:.3f} s"
                    break
                if t >= cfg.timeout_s - 1e-9:
                    reason, message = "timeout", f"timeout after {cfg.timeout_s:g} s"
                    break

                depth_due, control_due = sched_depth.due(t), sched_control.due(t) or command is None
                plan_due = sched_plan.due(t)
                if not (depth_due or control_due or plan_due):
                    vehicle.step(command, dt)
                    i += 1
                    continue
                state = vehicle.state()
                if depth_due:
                    fresh_frame = camera.render(self.world, state, with_points=cfg.point_cloud)
                    frames += 1
                    if observe is not None:
                        observe(fresh_frame)
                if control_due:
                    odometry.record(state)
                if plan_due:
                    odom = odometry.read()
                    wall = time.perf_counter()
                    try:
                        result = self.planner.update(odom, fresh_frame)
                        why = None
                    except (ValueError, ArithmeticError) as exc:
                        result, why = None, f"planner.update raised {type(exc).__name__}: {exc}"
                    replan_ms.append(1e3 * (time.perf_counter() - wall))
                    planner_calls += 1
                    fresh_frame = None
                    if why is not None:
                        bad(t, state, why)
                    elif result is not None:
                        if isinstance(result, Setpoint) or callable(getattr(result, "sample", None)):
                            reference = fresh = result
                        else:
                            bad(t, state, f"planner returned {type(result).__name__}, not a Setpoint or trajectory")
                if control_due:
                    setpoint = self._resolve(reference, t)
                    if isinstance(setpoint, str):
                        setpoint = bad(t, state, setpoint)
                    elif reference is not hold_ref:
                        holding = False  # the planner's reference works again: streak over
                        if reference is fresh:
                            tracked, fresh = tracked + 1, None
                    if not holding and setpoint.has_position:
                        # how far the vehicle is from the reference it is told to fly (holds excluded)
                        tracking_errors.append(float(np.linalg.norm(state.position - setpoint.position)))
                    command = controller.update(state, setpoint, control_dt)
                vehicle.step(command, dt)
                i += 1

        state = vehicle.state()
        if reason != "non_finite_state" and (not len(log) or log.t[-1] < t):
            log.append(t, state.position, state.velocity)  # the final sample, always logged
        wall_time = time.perf_counter() - wall0
        time_s = t
        summary = EpisodeSummary(
            reached=reason == "goal_reached",
            collided=reason == "collision",
            time_s=time_s,
            path_length_m=path_len,
            min_clearance_m=monitor.min_clearance_m,
            replan_ms_median=percentile_or_none(replan_ms, 50),
            replan_ms_p95=percentile_or_none(replan_ms, 95),
            reason=reason,
            mean_speed_mps=path_len / time_s if time_s > 0 else 0.0,
            max_speed_mps=max_speed,
            final_goal_distance_m=float(np.linalg.norm(state.position - goal)),
            seed=cfg.seed,
            planner=self.planner_name,
            vehicle=cfg.vehicle,
            world=self.world_name,
            start=start.tolist(),
            goal=goal.tolist(),
            collision_time_s=monitor.collision_time_s,
            collision_position=None if monitor.collision_position is None else monitor.collision_position.tolist(),
            planner_calls=planner_calls,
            bad_setpoints=bad_setpoints,
            depth_frames=frames,
            wall_time_s=wall_time,
            real_time_factor=time_s / wall_time if wall_time > 0 else None,
            tracking_error_p95_m=percentile_or_none(tracking_errors, 95),
            tracking_error_max_m=max(tracking_errors) if tracking_errors else None,
            message=message,
        )
        return EpisodeResult(summary, log, events, state, planner_references=tracked)

    @staticmethod
    def _resolve(reference, t: float):
        """The setpoint to track now, or a string saying why there is none."""
        if isinstance(reference, Setpoint):
            setpoint = reference
        else:
            try:
                setpoint = reference.sample(t)
            except (ValueError, ArithmeticError) as exc:
                return f"trajectory.sample({t:.3f}) raised {type(exc).__name__}: {exc}"
            if not isinstance(setpoint, Setpoint):
                return f"trajectory.sample returned {type(setpoint).__name__}, not a Setpoint"
        if setpoint.is_empty:
            return "empty setpoint: no position, velocity or acceleration given"
        return setpoint


def run_episode(world, planner: Planner, start, goal, config: RunnerConfig = RunnerConfig(), **kwargs) -> EpisodeResult:
    """Convenience: ``ClosedLoopRunner(world, planner, config, **kwargs).run(start, goal, start_yaw)``.

    ``start_yaw`` (rad) may be passed in ``kwargs``; default 0.
    """
    start_yaw = kwargs.pop("start_yaw", 0.0)
    return ClosedLoopRunner(world, planner, config, **kwargs).run(start, goal, start_yaw)
