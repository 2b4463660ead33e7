"""The embedded simulator advanced in slices of simulated time, for the sim bridge node.

Plain Python (no rclpy). It is the closed-loop runner's physics without its planner: the same
vehicle/controller pair (``ClosedLoopRunner.make_vehicle``), depth camera and collision monitor,
each at its own rate on one simulated clock, but the reference comes from outside
(:meth:`EmbeddedSim.set_setpoint`) and ``advance(dt)`` returns what the sensors produced so the
node can publish it.

A setpoint is the reference at its stamp. With position and velocity given, the controller
follows it forward in time with its own feed-forward (first-order hold: ``p + v dt + a dt^2 / 2``,
``v + a dt``, yaw by ``yaw_rate``) for at most ``setpoint_extrapolation_s`` after the stamp, so the
tracking matches the closed-loop runner's (which samples the trajectory at every control step)
whether setpoints come every 10 ms or every 20 ms; 0 = hold each setpoint as it is.

The jerk feed-forward (``ControllerGains.jerk_feedforward``) needs the reference's jerk. A setpoint
that gives none but an acceleration (a ROS ``MultiDOFJointTrajectory`` point has no field for it)
gets the backward difference of the accelerations of the last two setpoints over their stamps,
when they are at most ``JERK_ESTIMATE_MAX_GAP_S`` apart and the vehicle was tracking the older one
(not a hold of its own), its norm capped at ``JERK_ESTIMATE_MAX_MPS3`` (a jump of the reference,
e.g. an emergency stop, is then a bounded kick rather than an impulse).

Body-rate input (:meth:`EmbeddedSim.set_body_rate_command`, rigid-body quadrotor only): a
:class:`~planner_pkg.sim.rate_control.BodyRateCommand` (mass-normalised collective thrust and
body FLU rates) goes to the onboard rate loop (:class:`~planner_pkg.sim.rate_control.BodyRateController`)
instead of the SE(3) tracking controller, until a setpoint replaces it. A command older than
``rate_command_timeout_s`` (sim time) is stale: the vehicle brakes to a position hold where it is.

Safety behaviour, like a flight controller in offboard mode: before the first setpoint the
vehicle holds its start; when no setpoint arrived for ``setpoint_timeout_s`` of simulated time it
holds where it is (latched) until a new one arrives. A collision or a non-finite state freezes
the vehicle where it happened (``crashed``), as a crash would.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import List, Optional

import numpy as np

from planner_pkg.sim.camera import DepthCamera
from planner_pkg.sim.collision import CollisionMonitor
from planner_pkg.sim.params import CameraParams
from planner_pkg.sim.rate_control import RATE_COMMAND_TIMEOUT_S, BodyRateCommand, BodyRateController
from planner_pkg.sim.runner import ClosedLoopRunner, RunnerConfig
from planner_pkg.types import SensorFrame, Setpoint, VehicleState

#: setpoints further apart than this (s) give no jerk estimate (see the module docstring)
JERK_ESTIMATE_MAX_GAP_S = 0.1
#: cap of an estimated jerk's norm, m/s^3: twice an 8 m/s^2 change of the reference within 0.1 s
JERK_ESTIMATE_MAX_MPS3 = 160.0

__all__ = ["EmbeddedSim", "SimOutputs"]


@dataclass
class SimOutputs:
    """What one ``advance`` produced, oldest first."""

    odometry: List[VehicleState] = field(default_factory=list)
    frames: List[SensorFrame] = field(default_factory=list)
    events: List[str] = field(default_factory=list)


class _Every:
    """Due every ``period`` s of sim time (tolerant to float accumulation)."""

    def __init__(self, rate_hz: float, t0: float = 0.0):
        self.period = 1.0 / rate_hz if rate_hz > 0 else math.inf
        self.next_t = t0 if rate_hz > 0 else math.inf

    def due(self, t: float) -> bool:
        if t + 1e-9 < self.next_t:
            return False
        self.next_t += self.period
        if self.next_t <= t:  # never schedule in the past after a long stall
            self.next_t = t + self.period
        return True


class EmbeddedSim:
    """One vehicle in one world, stepped from outside.

    world: a :class:`planner_pkg.world.World`; start (3,) m, start_yaw rad; vehicle
    ``quadrotor`` | ``point_mass``; rates in Hz (camera 0 = no camera); seed for sensor noise.
    """

    def __init__(self, world, start, start_yaw: float = 0.0, *, vehicle: str = "quadrotor",
                 dynamics_rate_hz: float = 500.0, control_rate_hz: float = 250.0, camera_rate_hz: float = 30.0,
                 odom_rate_hz: float = 100.0, camera: CameraParams = CameraParams(), with_points: bool = True,
                 setpoint_timeout_s: float = 0.5, seed: int = 0, setpoint_extrapolation_s: float = 0.0,
                 rate_command_timeout_s: float = RATE_COMMAND_TIMEOUT_S):
        start = np.asarray(start, dtype=np.float64)
        if start.shape != (3,) or not np.isfinite(start).all():
            raise ValueError(f"start must be a finite (3,) position in metres, got {start}")
        cfg = RunnerConfig(dynamics_rate_hz=dynamics_rate_hz, control_rate_hz=control_rate_hz,
                           depth_rate_hz=camera_rate_hz, vehicle=vehicle, seed=seed)
        self.world = world
        self.vehicle, self.controller, self.radius_m, accel_bound = ClosedLoopRunner(world, None, cfg).make_vehicle()
        self.monitor = CollisionMonitor(world, self.radius_m, max_accel_mps2=accel_bound)
        rng = np.random.default_rng(seed)
        self.camera = DepthCamera(camera, rng) if camera_rate_hz > 0 else None
        self.with_points = with_points
        initial = VehicleState.at_rest(start, start_yaw)
        self.vehicle.reset(initial)
        self.controller.reset(initial)
        self.dt = 1.0 / dynamics_rate_hz
        self.control_dt = 1.0 / control_rate_hz
        self._lo = tuple(float(v) for v in world.bounds_min)
        self._hi = tuple(float(v) for v in world.bounds_max)
        self._control = _Every(control_rate_hz)
        self._camera = _Every(camera_rate_hz if self.camera is not None else 0.0)
        self._odom = _Every(odom_rate_hz)
        self.setpoint_timeout_s = setpoint_timeout_s
        if not (math.isfinite(setpoint_extrapolation_s) and setpoint_extrapolation_s >= 0):
            raise ValueError(f"setpoint_extrapolation_s must be >= 0, got {setpoint_extrapolation_s!r}")
        self.setpoint_extrapolation_s = float(setpoint_extrapolation_s)
        self._reference_stamp = 0.0  # sim time the reference describes
        self.steps = 0
        self.t = 0.0
        self.reference: Setpoint = Setpoint.hold(start, start_yaw)
        self.reference_time: Optional[float] = None  # sim time of the last external setpoint
        self.holding = True  # True while tracking a hold of our own (no/old setpoint)
        self.crashed = False
        self.crash_reason = ""
        self.out_of_bounds = False
        self._command = None
        self._frozen_state: Optional[VehicleState] = None
        if not (math.isfinite(rate_command_timeout_s) and rate_command_timeout_s > 0):
            raise ValueError(f"rate_command_timeout_s must be > 0, got {rate_command_timeout_s!r}")
        self.rate_command_timeout_s = float(rate_command_timeout_s)
        self.rate_command: Optional[BodyRateCommand] = None  # flying body rates while set
        self._rate_controller = (BodyRateController(self.vehicle.params) if vehicle == "quadrotor" else None)

    # -- inputs ----------------------------------------------------------------------------------
    def set_setpoint(self, setpoint: Setpoint, stamp: Optional[float] = None) -> None:
        """Track ``setpoint`` from now on (an empty one is refused with ValueError); ``stamp``:
        the sim time it describes (default: now)."""
        if setpoint.is_empty:
            raise ValueError("empty setpoint: no position, velocity or acceleration given")
        previous, previous_stamp, was_holding = self.reference, self._reference_stamp, self.holding
        # a stamp from another clock (0, wall time, far behind) says nothing: then it is now
        usable = stamp is not None and math.isfinite(stamp) and self.t - self.setpoint_extrapolation_s <= stamp <= self.t
        self._reference_stamp = float(stamp) if usable else self.t
        gap = self._reference_stamp - previous_stamp
        if (not setpoint.has_jerk and setpoint.has_acceleration and previous.has_acceleration and not was_holding
                and self.rate_command is None and 0.0 < gap <= JERK_ESTIMATE_MAX_GAP_S):
            jerk = (setpoint.acceleration - previous.acceleration) / gap
            norm = math.sqrt(float(jerk @ jerk))
            if norm > JERK_ESTIMATE_MAX_MPS3:
                jerk *= JERK_ESTIMATE_MAX_MPS3 / norm
            setpoint = replace(setpoint, jerk=jerk)
        self.reference = setpoint
        self.reference_time = self.t
        self.holding = False
        self.rate_command = None

    def set_body_rate_command(self, command: BodyRateCommand) -> None:
        """Fly ``command`` (collective thrust m/s^2 + body rates rad/s) from now on, until a
        setpoint replaces it or it goes stale. ValueError on a point-mass vehicle (no attitude)."""
        if self._rate_controller is None:
            raise ValueError("the point_mass vehicle has no attitude to command: body-rate commands need "
                             "vehicle 'quadrotor'")
        if self.rate_command is None:
            self._rate_controller.reset()  # its gyro difference starts anew with the rate mode
        self.rate_command = command
        self.reference_time = self.t
        self.holding = False

    def _reference_at(self, t: float) -> Setpoint:
        """The reference at ``t``: the setpoint followed forward by its feed-forward (see above)."""
        sp = self.reference
        dt = min(t - self._reference_stamp, self.setpoint_extrapolation_s)
        if self.holding or dt <= 0.0 or not (sp.has_position and sp.has_velocity):
            return sp
        a = sp.acceleration if sp.has_acceleration else np.zeros(3)
        yaw = sp.yaw
        if math.isfinite(yaw) and math.isfinite(sp.yaw_rate):
            yaw = math.remainder(yaw + sp.yaw_rate * dt, 2.0 * math.pi)
        return Setpoint(sp.position + sp.velocity * dt + 0.5 * a * dt * dt, sp.velocity + a * dt, sp.acceleration,
                        yaw=yaw, yaw_rate=sp.yaw_rate, jerk=sp.jerk)

    def hold(self) -> Setpoint:
        """Hold where the vehicle is now (latched) and return that setpoint."""
        s = self.state()
        self.reference = Setpoint.hold(s.position, s.yaw)
        self.holding = True
        self.rate_command = None
        return self.reference

    # -- queries ---------------------------------------------------------------------------------
    def state(self) -> VehicleState:
        if self._frozen_state is not None:
            return VehicleState(self.t, self._frozen_state.position, np.zeros(3), self._frozen_state.attitude,
                                np.zeros(3))
        s = self.vehicle.state()
        return VehicleState(self.t, s.position, s.velocity, s.attitude, s.angular_velocity)

    # -- stepping --------------------------------------------------------------------------------
    def advance(self, duration_s: float) -> SimOutputs:
        """Advance the simulation by ``duration_s`` (rounded to whole dynamics steps)."""
        return self.advance_steps(max(int(round(duration_s / self.dt)), 0))

    def steps_until(self, t: float) -> int:
        """Whole dynamics steps from now until sim time reaches ``t`` s or just beyond (0 if past)."""
        if not math.isfinite(t):
            raise ValueError(f"target time must be finite, got {t!r}")
        return max(int(math.ceil(t / self.dt - 1e-7)) - self.steps, 0)

    def advance_steps(self, n: int) -> SimOutputs:
        """Advance by ``n`` whole dynamics steps."""
        out = SimOutputs()
        n = max(int(n), 0)
        for _ in range(n):
            self._step(out)
        if n:
            self._sense_now(out)
        return out

    def _sense_now(self, out: SimOutputs) -> None:
        """Odometry and a camera frame due at the time the advance ended, now rather than at the
        start of the next advance: whoever wakes on this time (a planner tick) gets the data of this
        instant, as the closed-loop runner's planner does. (The next step then finds them done.)"""
        if self.crashed or not self.vehicle.is_finite():
            return
        t = self.t
        odom_due, camera_due = self._odom.due(t), self._camera.due(t)
        if odom_due or camera_due:
            state = self.state()
            if camera_due:
                out.frames.append(self.camera.render(self.world, state, with_points=self.with_points))
            if odom_due:
                out.odometry.append(state)

    def _step(self, out: SimOutputs) -> None:
        t = self.steps * self.dt
        self.t = t
        if self.crashed:
            if self._odom.due(t):
                out.odometry.append(self.state())
            self.steps += 1
            return
        px, py, pz, vx, vy, vz = self.vehicle.kinematics()
        if not self.vehicle.is_finite():
            self._crash(out, f"vehicle state became non-finite at t={t:.3f} s")
            return
        speed = math.sqrt(vx * vx + vy * vy + vz * vz)
        if self.monitor.update(t, (px, py, pz), speed):
            self._crash(out, f"collision at t={t:.3f} s at {[round(px, 3), round(py, 3), round(pz, 3)]}")
            return
        lo, hi = self._lo, self._hi
        inside = lo[0] <= px <= hi[0] and lo[1] <= py <= hi[1] and lo[2] <= pz <= hi[2]
        if not inside and not self.out_of_bounds:
            out.events.append(f"left the world bounds at t={t:.3f} s at {[round(px, 2), round(py, 2), round(pz, 2)]}")
        self.out_of_bounds = not inside
        control_due, camera_due, odom_due = self._control.due(t), self._camera.due(t), self._odom.due(t)
        if control_due or camera_due or odom_due or self._command is None:
            state = self.state()
            rates = self.rate_command is not None
            timeout = self.rate_command_timeout_s if rates else self.setpoint_timeout_s
            if not self.holding and self.reference_time is not None and t - self.reference_time > timeout:
                self.hold()
                what = "body-rate command" if rates else "setpoint"
                out.events.append(f"no {what} for {timeout:g} s at t={t:.3f} s: holding position "
                                  f"at {np.round(state.position, 2).tolist()}")
            if camera_due:
                out.frames.append(self.camera.render(self.world, state, with_points=self.with_points))
            if odom_due:
                out.odometry.append(state)
            if control_due or self._command is None:
                if self.rate_command is not None:
                    self._command = self._rate_controller.update(state, self.rate_command)
                else:
                    self._command = self.controller.update(state, self._reference_at(t), self.control_dt)
        self.vehicle.step(self._command, self.dt)
        self.steps += 1
        self.t = self.steps * self.dt

    def crash(self, reason: str) -> bool:
        """Freeze the vehicle where it is now, for a collision found outside this simulator (another
        vehicle: the swarm stepper); the clock goes on. False when it had already crashed."""
        if self.crashed:
            return False
        self.crashed = True
        self.crash_reason = reason
        self._frozen_state = self.vehicle.state() if self.vehicle.is_finite() else self.state()
        return True

    def _crash(self, out: SimOutputs, reason: str) -> None:
        self.crashed = True
        self.crash_reason = reason
        s = self.vehicle.state()
        if not s.is_finite():
            s = VehicleState.at_rest(np.nan_to_num(s.position), 0.0)
        self._frozen_state = s
        out.events.append(reason + "; vehicle frozen")
        out.odometry.append(self.state())
        self.steps += 1
