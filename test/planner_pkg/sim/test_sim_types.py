"""Core types: validation, NaN semantics, read-only fields, camera intrinsics."""
import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from planner_pkg.types import (
    CameraIntrinsics,
    SensorFrame,
    Setpoint,
    TrajectoryLike,
    VehicleState,
    quaternion_from_yaw,
    quaternion_to_matrix,
    yaw_from_quaternion,
)

NAN3 = [math.nan] * 3


def test_setpoint_defaults_are_unused_and_modes_follow_given_fields():
    empty = Setpoint()
    assert empty.is_empty and empty.mode == "none"
    assert not (empty.has_position or empty.has_velocity or empty.has_acceleration or empty.has_yaw)
    assert Setpoint.hold([1, 2, 3], yaw=0.5).mode == "position"
    assert Setpoint.from_velocity([1, 0, 0]).mode == "velocity"
    assert Setpoint.from_acceleration([0, 0, 1]).mode == "acceleration"
    hold = Setpoint.hold([1, 2, 3])
    np.testing.assert_array_equal(hold.velocity, 0.0)
    np.testing.assert_array_equal(hold.acceleration, 0.0)
    assert not hold.has_yaw


@pytest.mark.parametrize("field", ["position", "velocity", "acceleration"])
def test_setpoint_rejects_partially_nan_vectors_naming_the_field(field):
    with pytest.raises(ValueError, match=f"Setpoint.{field}.*partially NaN"):
        Setpoint(**{field: [1.0, math.nan, 0.0]})


@pytest.mark.parametrize(
    "kwargs",
    [{"position": [0, 0, math.inf]}, {"velocity": [-math.inf, 0, 0]}, {"yaw": math.inf}, {"yaw_rate": -math.inf}],
)
def test_setpoint_rejects_infinities(kwargs):
    with pytest.raises(ValueError, match="not finite"):
        Setpoint(**kwargs)


def test_setpoint_rejects_wrong_shapes_and_non_numbers():
    with pytest.raises(ValueError, match="shape"):
        Setpoint(position=[1, 2])
    with pytest.raises(ValueError, match="yaw"):
        Setpoint(yaw="north")


def test_fields_are_read_only_copies():
    p = np.array([1.0, 2.0, 3.0])
    sp = Setpoint.hold(p)
    p[0] = 99.0
    assert sp.position[0] == 1.0
    with pytest.raises(ValueError):
        sp.position[0] = 5.0
    st = VehicleState.at_rest(p)
    with pytest.raises(ValueError):
        st.velocity[0] = 1.0


def test_vehicle_state_validation_and_helpers():
    with pytest.raises(ValueError, match="attitude"):
        VehicleState(0.0, [0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 0, 0])
    st = VehicleState.at_rest([1, 2, 3], yaw=1.2, t=4.0)
    assert st.t == 4.0 and st.is_finite() and st.speed == 0.0
    assert st.yaw == pytest.approx(1.2)
    bad = VehicleState(0.0, [0, 0, math.nan], [0, 0, 0], [0, 0, 0, 1], [0, 0, 0])
    assert not bad.is_finite()  # representable, so a diverged sim can be reported
    fast = VehicleState.from_floats(1.0, [1, 2, 3], [0, 0, 0], [0, 0, 0, 1], [0, 0, 0])
    np.testing.assert_array_equal(fast.position, [1, 2, 3])
    with pytest.raises(ValueError):
        VehicleState.from_floats(1.0, [1, 2], [0, 0, 0], [0, 0, 0, 1], [0, 0, 0])


def test_quaternion_helpers_match_scipy():
    rng = np.random.default_rng(0)
    for q in Rotation.random(20, random_state=1).as_quat():
        np.testing.assert_allclose(quaternion_to_matrix(q), Rotation.from_quat(q).as_matrix(), atol=1e-12)
        assert yaw_from_quaternion(q) == pytest.approx(Rotation.from_quat(q).as_euler("ZYX")[0])
    for yaw in rng.uniform(-3, 3, 5):
        np.testing.assert_allclose(quaternion_from_yaw(yaw), Rotation.from_euler("z", yaw).as_quat(), atol=1e-12)


def test_intrinsics_from_fov_and_deproject():
    k = CameraIntrinsics.from_fov(64, 48, math.radians(90), 0.2, 10.0)
    assert k.fx == pytest.approx(32.0) and k.cx == 31.5 and k.cy == 23.5
    rays = k.rays()
    # pixel edges (not centres) span exactly the field of view: tan(45 deg) = 1
    assert rays[0, 0, 0] - 0.5 / k.fx == pytest.approx(-1.0)
    depth = np.full((48, 64), 2.0)
    depth[0, 0] = np.inf
    pts = k.deproject(depth)
    assert np.isnan(pts[0, 0]).all()
    np.testing.assert_allclose(pts[5, 7], [2 * (7 - 31.5) / 32, 2 * (5 - 23.5) / 32, 2.0])
    with pytest.raises(ValueError, match="FOV"):
        CameraIntrinsics.from_fov(64, 48, math.pi, 0.2, 10.0)
    with pytest.raises(ValueError, match="min_range"):
        CameraIntrinsics.from_fov(64, 48, 1.0, 5.0, 1.0)


def test_sensor_frame_checks_depth_shape_and_copies():
    k = CameraIntrinsics.from_fov(8, 6, 1.5, 0.1, 5.0)
    depth = np.ones((6, 8))
    frame = SensorFrame(0.0, depth, np.zeros((2, 3)), [0, 0, 1], [0, 0, 0, 1], k)
    assert frame.depth.dtype == np.float32 and frame.points.dtype == np.float32
    depth[0, 0] = 5.0
    assert frame.depth[0, 0] == 1.0
    with pytest.raises(ValueError, match="intrinsics say"):
        SensorFrame(0.0, np.ones((5, 8)), None, [0, 0, 1], [0, 0, 0, 1], k)
    with pytest.raises(ValueError, match="needs intrinsics"):
        SensorFrame(0.0, depth, None, [0, 0, 1], [0, 0, 0, 1], None)
    with pytest.raises(ValueError, match="points"):
        SensorFrame(0.0, None, np.zeros((2, 2)), [0, 0, 1], [0, 0, 0, 1], None)


def test_trajectory_like_protocol():
    class Line:
        def sample(self, t):
            return Setpoint.hold([t, 0, 1])

    assert isinstance(Line(), TrajectoryLike)
    assert not isinstance(Setpoint(), TrajectoryLike)
