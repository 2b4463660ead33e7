"""Core data types shared by the simulator, the planners, the policy, the ROS nodes and the bridge.

Conventions (DESIGN.md): SI units; world frame ENU (x east, y north, z up); body frame FLU
(x forward, y left, z up); quaternions stored ``(x, y, z, w)`` like ROS messages and
``scipy.spatial.transform.Rotation.from_quat``. Every type here is a frozen dataclass whose
numpy fields are private, read-only float copies, so a planner cannot mutate the simulator's
state through a shared array.

Setpoints follow the PX4 offboard convention: a vector field that is all NaN is *unused*;
a vector that is partly NaN is an error (it has no meaning), and so is +-inf anywhere.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Protocol, runtime_checkable

import numpy as np

from planner_pkg.config_schema import Config, non_negative, positive, setting

__all__ = [
    "VehicleState",
    "Setpoint",
    "CameraIntrinsics",
    "SensorFrame",
    "TrajectoryLike",
    "quaternion_to_matrix",
    "quaternion_from_yaw",
    "yaw_from_quaternion",
]


def _frozen_array(name: str, value, shape: tuple, dtype=np.float64) -> np.ndarray:
    """Return a read-only copy of ``value`` as ``dtype`` with exactly ``shape`` (None = any)."""
    try:
        arr = np.array(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric with shape {shape}: {exc}") from None
    if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    arr.setflags(write=False)
    return arr


# ---------------------------------------------------------------------------------------------
# Quaternion helpers used by the types themselves (the full set lives in planner_pkg.sim.rotation)
# ---------------------------------------------------------------------------------------------
def quaternion_to_matrix(q) -> np.ndarray:
    """Rotation matrix (3, 3) of the unit quaternion ``q = (x, y, z, w)``.

    The result maps body-frame vectors to world-frame vectors (``v_world = R @ v_body``).
    ``q`` is normalised first, so slightly drifted quaternions are harmless.
    """
    x, y, z, w = (float(c) for c in q)
    n = math.sqrt(x * x + y * y + z * z + w * w)
    if not n > 0.0:
        raise ValueError(f"quaternion {tuple(q)} has no rotation (zero or NaN norm)")
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def quaternion_from_yaw(yaw: float) -> np.ndarray:
    """Quaternion (4,) ``(x, y, z, w)`` of a pure rotation by ``yaw`` rad about world +z."""
    return np.array([0.0, 0.0, math.sin(0.5 * yaw), math.cos(0.5 * yaw)])


def yaw_from_quaternion(q) -> float:
    """Heading (rad, in (-pi, pi]) of the body x axis projected on the world xy plane."""
    x, y, z, w = (float(c) for c in q)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


# ---------------------------------------------------------------------------------------------
# Vehicle state
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class VehicleState:
    """Full rigid-body state of the vehicle at one instant.

    Attributes:
        t: time, s (simulation time in the simulator, message stamp on hardware).
        position: (3,) float64, m, body origin in world ENU.
        velocity: (3,) float64, m/s, world ENU.
        attitude: (4,) float64 quaternion ``(x, y, z, w)`` rotating body FLU into world ENU.
        angular_velocity: (3,) float64, rad/s, in the body FLU frame (what a gyro measures).

    Non-finite values are representable on purpose: the simulator reports a diverged state
    (``is_finite()`` is False) instead of raising from deep inside a step.
    """

    t: float
    position: np.ndarray
    velocity: np.ndarray
    attitude: np.ndarray
    angular_velocity: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "t", float(self.t))
        object.__setattr__(self, "position", _frozen_array("VehicleState.position", self.position, (3,)))
        object.__setattr__(self, "velocity", _frozen_array("VehicleState.velocity", self.velocity, (3,)))
        object.__setattr__(self, "attitude", _frozen_array("VehicleState.attitude", self.attitude, (4,)))
        object.__setattr__(
            self,
            "angular_velocity",
            _frozen_array("VehicleState.angular_velocity", self.angular_velocity, (3,)),
        )

    @classmethod
    def from_floats(cls, t: float, position, velocity, attitude, angular_velocity) -> "VehicleState":
        """Fast constructor for producers holding plain float sequences of lengths (3, 3, 4, 3),
        e.g. the simulator at 500 Hz: one shape check at the end instead of four generic ones."""
        self = object.__new__(cls)
        for name, value in (
            ("position", position),
            ("velocity", velocity),
            ("attitude", attitude),
            ("angular_velocity", angular_velocity),
        ):
            arr = np.array(value, dtype=np.float64)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "t", float(t))
        shapes = (self.position.shape, self.velocity.shape, self.attitude.shape, self.angular_velocity.shape)
        if shapes != ((3,), (3,), (4,), (3,)):
            raise ValueError(f"VehicleState.from_floats: need 3, 3, 4 and 3 values, got shapes {shapes}")
        return self

    @classmethod
    def at_rest(cls, position, yaw: float = 0.0, t: float = 0.0) -> "VehicleState":
        """A level, motionless vehicle at ``position`` (m) heading ``yaw`` (rad)."""
        return cls(t, position, np.zeros(3), quaternion_from_yaw(yaw), np.zeros(3))

    def is_finite(self) -> bool:
        """True when every field is finite (a diverged simulation is not)."""
        return bool(
            math.isfinite(self.t)
            and np.isfinite(self.position).all()
            and np.isfinite(self.velocity).all()
            and np.isfinite(self.attitude).all()
            and np.isfinite(self.angular_velocity).all()
        )

    @property
    def yaw(self) -> float:
        """Heading, rad in (-pi, pi], of the body x axis in the world xy plane."""
        return yaw_from_quaternion(self.attitude)

    @property
    def rotation(self) -> np.ndarray:
        """(3, 3) rotation matrix body FLU -> world ENU."""
        return quaternion_to_matrix(self.attitude)

    @property
    def speed(self) -> float:
        """Norm of the velocity, m/s."""
        return float(np.linalg.norm(self.velocity))


# ---------------------------------------------------------------------------------------------
# Setpoint
# ---------------------------------------------------------------------------------------------
def _nan3() -> np.ndarray:
    return np.full(3, np.nan)


def _setpoint_vector(name: str, value) -> np.ndarray:
    arr = _frozen_array(f"Setpoint.{name}", value, (3,))
    x, y, z = arr.tolist()  # plain floats: ~5x cheaper than np.isnan/np.isinf on 3 elements
    if x == x and y == y and z == z:
        if math.isinf(x) or math.isinf(y) or math.isinf(z):
            raise ValueError(f"Setpoint.{name} = {arr.tolist()} is not finite; use NaN for 'unused'")
    elif x == x or y == y or z == z:
        raise ValueError(
            f"Setpoint.{name} = {arr.tolist()} is partially NaN: a vector is either fully given "
            f"or all NaN (= unused, PX4 convention)"
        )
    return arr


def _setpoint_scalar(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"Setpoint.{name} must be a number (NaN = unused), got {value!r}") from None
    if math.isinf(v):
        raise ValueError(f"Setpoint.{name} = {v} is not finite; use NaN for 'unused'")
    return v


@dataclass(frozen=True, eq=False)
class Setpoint:
    """A tracking reference for the flight controller (PX4 offboard semantics).

    Attributes:
        position: (3,) m, world ENU, or all NaN (unused).
        velocity: (3,) m/s, world ENU, or all NaN.
        acceleration: (3,) m/s^2, world ENU, *excluding* gravity (0 = hover), or all NaN.
        yaw: rad, heading of body x; NaN = keep the current heading (or integrate ``yaw_rate``).
        yaw_rate: rad/s about world z; NaN = 0 feed-forward.
        jerk: (3,) m/s^3, world ENU, or all NaN: the derivative of ``acceleration``, a feed-forward
            only (PX4's ``TrajectorySetpoint.jerk``): the attitude controller turns it into the
            body rates that tilt the thrust as fast as the reference acceleration changes.

    What the controller does with the given fields (see ``mode``):
        * position given: position control; velocity/acceleration, if given, are feed-forward;
        * else velocity given: velocity control, acceleration (if given) is feed-forward;
        * else acceleration given: acceleration mode (no position/velocity feedback);
        * nothing translational given: the setpoint is *empty*; the simulator treats it as a
          bad setpoint and holds position (logged).

    Raises ``ValueError`` on a partially-NaN vector or on +-inf: such a setpoint is a bug in
    its producer, and failing loudly here names the field.
    """

    position: np.ndarray = field(default_factory=_nan3)
    velocity: np.ndarray = field(default_factory=_nan3)
    acceleration: np.ndarray = field(default_factory=_nan3)
    yaw: float = math.nan
    yaw_rate: float = math.nan
    jerk: np.ndarray = field(default_factory=_nan3)

    def __post_init__(self):
        for name in ("position", "velocity", "acceleration", "jerk"):
            object.__setattr__(self, name, _setpoint_vector(name, getattr(self, name)))
        for name in ("yaw", "yaw_rate"):
            object.__setattr__(self, name, _setpoint_scalar(name, getattr(self, name)))

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def hold(cls, position, yaw: float = math.nan) -> "Setpoint":
        """Hover at ``position`` (m): zero velocity and acceleration feed-forward."""
        return cls(position=position, velocity=np.zeros(3), acceleration=np.zeros(3), yaw=yaw)

    @classmethod
    def from_velocity(cls, velocity, yaw: float = math.nan, yaw_rate: float = math.nan) -> "Setpoint":
        """Velocity-only setpoint (m/s, world ENU)."""
        return cls(velocity=velocity, yaw=yaw, yaw_rate=yaw_rate)

    @classmethod
    def from_acceleration(cls, acceleration, yaw: float = math.nan, yaw_rate: float = math.nan) -> "Setpoint":
        """Acceleration-only setpoint (m/s^2, world ENU, gravity excluded)."""
        return cls(acceleration=acceleration, yaw=yaw, yaw_rate=yaw_rate)

    # -- queries ------------------------------------------------------------------------------
    @property
    def has_position(self) -> bool:
        return not math.isnan(self.position[0])

    @property
    def has_velocity(self) -> bool:
        return not math.isnan(self.velocity[0])

    @property
    def has_acceleration(self) -> bool:
        return not math.isnan(self.acceleration[0])

    @property
    def has_jerk(self) -> bool:
        return not math.isnan(self.jerk[0])

    @property
    def has_yaw(self) -> bool:
        return not math.isnan(self.yaw)

    @property
    def has_yaw_rate(self) -> bool:
        return not math.isnan(self.yaw_rate)

    @property
    def is_empty(self) -> bool:
        """True when no translational field is given (nothing for the controller to track)."""
        return not (self.has_position or self.has_velocity or self.has_acceleration)

    @property
    def mode(self) -> str:
        """``"position"``, ``"velocity"``, ``"acceleration"`` or ``"none"`` (see class doc)."""
        if self.has_position:
            return "position"
        if self.has_velocity:
            return "velocity"
        if self.has_acceleration:
            return "acceleration"
        return "none"


# ---------------------------------------------------------------------------------------------
# Sensors
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CameraIntrinsics(Config):
    """Pinhole intrinsics of a depth camera (OpenCV / ROS ``CameraInfo`` convention).

    Pixel ``(u, v)`` (column, row; integer = pixel centre) looks along the optical-frame ray
    ``((u - cx) / fx, (v - cy) / fy, 1)``; the optical frame has z forward, x right, y down.

    Attributes:
        width, height: image size, pixels.
        fx, fy: focal lengths, pixels.
        cx, cy: principal point, pixels.
        min_range_m, max_range_m: valid z-depth interval, m.
    """

    width: int = setting(range=(1, math.inf))
    height: int = setting(range=(1, math.inf))
    fx: float = positive()
    fy: float = positive()
    cx: float = setting()
    cy: float = setting()
    min_range_m: float = non_negative()
    max_range_m: float = positive()

    def _check(self):
        if not self.min_range_m < self.max_range_m:
            raise self._error("min_range_m", f"({self.min_range_m}) must be below max_range_m ({self.max_range_m})")

    @classmethod
    def from_fov(cls, width: int, height: int, hfov_rad: float, min_range_m: float, max_range_m: float):
        """Square pixels, centred principal point, horizontal field of view ``hfov_rad``."""
        if not 0 < hfov_rad < math.pi:
            raise ValueError(f"horizontal FOV must be in (0, pi) rad, got {hfov_rad}")
        f = 0.5 * width / math.tan(0.5 * hfov_rad)
        return cls(width, height, f, f, 0.5 * (width - 1), 0.5 * (height - 1), min_range_m, max_range_m)

    def rays(self) -> np.ndarray:
        """(H, W, 3) optical-frame rays with z = 1 (multiply by a z-depth to get the point)."""
        u = (np.arange(self.width) - self.cx) / self.fx
        v = (np.arange(self.height) - self.cy) / self.fy
        rays = np.empty((self.height, self.width, 3))
        rays[..., 0] = u[None, :]
        rays[..., 1] = v[:, None]
        rays[..., 2] = 1.0
        return rays

    def deproject(self, depth) -> np.ndarray:
        """Optical-frame points (H, W, 3), m, of a z-depth image (H, W); invalid pixels give NaN."""
        d = np.asarray(depth, dtype=np.float64)
        if d.shape != (self.height, self.width):
            raise ValueError(f"depth image must be ({self.height}, {self.width}), got {d.shape}")
        d = np.where(np.isfinite(d), d, np.nan)
        return self.rays() * d[..., None]


@dataclass(frozen=True, eq=False)
class SensorFrame:
    """One exteroceptive sensor sample, as a planner or policy receives it.

    Attributes:
        t: capture time, s.
        depth: (H, W) float32 z-depth along the optical axis, m (like ROS 32FC1, REP 118):
            +inf = no return within max range, -inf = closer than min range, NaN = invalid;
            or None when the frame carries no image.
        points: (N, 3) float32 world-frame (ENU) points, m, from the valid depth pixels; or None.
        camera_position: (3,) m, optical centre in world ENU.
        camera_orientation: (4,) quaternion ``(x, y, z, w)`` rotating the camera *optical* frame
            (z forward, x right, y down) into world ENU, so that
            ``p_world = camera_position + R(camera_orientation) @ intrinsics.deproject(depth)[v, u]``.
        intrinsics: pinhole model of ``depth``, or None when there is no image.
    """

    t: float
    depth: Optional[np.ndarray]
    points: Optional[np.ndarray]
    camera_position: np.ndarray
    camera_orientation: np.ndarray
    intrinsics: Optional[CameraIntrinsics] = None

    def __post_init__(self):
        object.__setattr__(self, "t", float(self.t))
        if self.depth is not None:
            depth = _frozen_array("SensorFrame.depth", self.depth, (None, None), np.float32)
            if self.intrinsics is None:
                raise ValueError("SensorFrame.depth needs intrinsics to be interpretable")
            if depth.shape != (self.intrinsics.height, self.intrinsics.width):
                raise ValueError(
                    f"SensorFrame.depth has shape {depth.shape} but the intrinsics say "
                    f"({self.intrinsics.height}, {self.intrinsics.width})"
                )
            object.__setattr__(self, "depth", depth)
        if self.points is not None:
            object.__setattr__(
                self, "points", _frozen_array("SensorFrame.points", self.points, (None, 3), np.float32)
            )
        object.__setattr__(
            self, "camera_position", _frozen_array("SensorFrame.camera_position", self.camera_position, (3,))
        )
        object.__setattr__(
            self,
            "camera_orientation",
            _frozen_array("SensorFrame.camera_orientation", self.camera_orientation, (4,)),
        )


@runtime_checkable
class TrajectoryLike(Protocol):
    """Anything a planner may return instead of a single setpoint (e.g. a B-spline).

    ``sample(t)`` gets *absolute* time in seconds on the same clock as ``VehicleState.t`` and
    returns the reference at that instant; the simulator samples it at the control rate until
    the planner returns something new. Raise ``ValueError`` for a time it cannot serve.
    """

    def sample(self, t: float) -> Setpoint:  # pragma: no cover - protocol
        ...
