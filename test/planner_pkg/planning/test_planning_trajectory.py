"""Trajectory sampling for the trajectory server: p/v/a from the spline, rate-limited yaw, braking."""
import math

import numpy as np
import pytest

from planner_pkg.planning.bspline import UniformBSpline, fit_cubic
from planner_pkg.planning.trajectory import BrakingTrajectory, BsplineTrajectory, YawConfig
from planner_pkg.types import Setpoint, TrajectoryLike


def turning_spline():
    """1 m/s along +x, then a left turn to +y (a quarter circle of radius 2 m)."""
    th = np.linspace(0.0, np.pi / 2, 16)
    pts = np.column_stack([2.0 * np.sin(th), 2.0 - 2.0 * np.cos(th), np.ones(th.size)])
    dt = (np.pi / 2 * 2.0 / 15) / 1.0
    return fit_cubic(pts, dt, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.5, 0.0], [-0.5, 0.0, 0.0])


def test_samples_match_the_spline_and_hold_outside_its_time():
    sp = turning_spline()
    traj = BsplineTrajectory(sp, t_start=10.0, start_yaw=0.0)
    assert isinstance(traj, TrajectoryLike)
    for tau in np.linspace(0.0, sp.duration, 23):
        s = traj.sample(10.0 + tau)
        assert isinstance(s, Setpoint)
        p, v, a = sp.evaluate_derivatives(tau, 2)
        np.testing.assert_allclose(s.position, p, atol=1e-9)
        np.testing.assert_allclose(s.velocity, v, atol=1e-9)
        np.testing.assert_allclose(s.acceleration, a, atol=1e-8)
    before = traj.sample(5.0)
    np.testing.assert_allclose(before.position, sp.evaluate(0.0), atol=1e-12)
    after = traj.sample(10.0 + sp.duration + 3.0)
    np.testing.assert_allclose(after.position, sp.evaluate(sp.duration), atol=1e-12)
    np.testing.assert_array_equal(after.velocity, np.zeros(3))
    # the vectorised positions are the samples', held outside the time as well
    ts = np.concatenate([[5.0], 10.0 + np.linspace(0.0, sp.duration, 23), [10.0 + sp.duration + 3.0]])
    np.testing.assert_allclose(traj.positions(ts), [traj.sample(t).position for t in ts], atol=1e-12)
    with pytest.raises(ValueError):
        traj.sample(float("nan"))


def test_yaw_follows_the_path_within_the_rate_limit():
    sp = turning_spline()
    cfg = YawConfig(max_yaw_rate_rad_s=0.8)
    traj = BsplineTrajectory(sp, 0.0, start_yaw=math.pi, yaw=cfg)  # starts facing backwards
    ts = np.arange(0.0, sp.duration, 0.01)
    yaws = np.unwrap([traj.sample(t).yaw for t in ts])
    rates = np.diff(yaws) / 0.01
    assert np.abs(rates).max() <= 0.8 + 1e-6
    assert traj.sample(0.0).yaw == pytest.approx(math.pi)
    # long after the start transient, the heading is the direction of travel (+y at the end)
    assert abs(math.remainder(traj.end_yaw - math.pi / 2, 2 * math.pi)) < 0.35


def test_hovering_keeps_the_heading():
    sp = UniformBSpline(np.tile([1.0, 2.0, 1.0], (6, 1)), 0.2)
    traj = BsplineTrajectory(sp, 0.0, start_yaw=0.7)
    assert traj.sample(0.3).yaw == pytest.approx(0.7)


def test_braking_trajectory_stops_at_the_expected_distance():
    brake = BrakingTrajectory([0.0, 0.0, 1.0], [4.0, 0.0, 0.0], t_start=2.0, decel_mps2=8.0, yaw=0.0)
    assert brake.duration == pytest.approx(0.5)
    np.testing.assert_allclose(brake.stop_position, [1.0, 0.0, 1.0])  # v^2 / (2 a)
    s = brake.sample(2.25)
    np.testing.assert_allclose(s.velocity, [2.0, 0.0, 0.0])
    np.testing.assert_allclose(s.acceleration, [-8.0, 0.0, 0.0])
    end = brake.sample(10.0)
    np.testing.assert_allclose(end.position, [1.0, 0.0, 1.0])
    np.testing.assert_allclose(end.velocity, 0.0)
    with pytest.raises(ValueError):
        BrakingTrajectory([0, 0, 1], [1, 0, 0], 0.0, decel_mps2=0.0)


@pytest.mark.parametrize("kwargs", [dict(max_yaw_rate_rad_s=0.0), dict(yaw_dt_s=-0.1), dict(yaw_lookahead_s=float("inf"))])
def test_bad_yaw_config(kwargs):
    with pytest.raises(ValueError, match=list(kwargs)[0]):
        YawConfig(**kwargs)


def test_jerk_is_the_splines_third_derivative_and_zero_outside_its_time():
    """Checked against central differences of the sampled acceleration inside each knot interval
    (the jerk of a cubic is constant there)."""
    sp = turning_spline()
    traj = BsplineTrajectory(sp, t_start=10.0, start_yaw=0.0)
    h = 1e-5
    for k in range(sp.num_segments):
        tau = (k + 0.5) * sp.dt
        fd = (traj.sample(10.0 + tau + h).acceleration - traj.sample(10.0 + tau - h).acceleration) / (2 * h)
        s = traj.sample(10.0 + tau)
        assert s.has_jerk
        np.testing.assert_allclose(s.jerk, fd, atol=1e-5 * max(1.0, np.abs(fd).max()))
    assert np.abs(traj.sample(10.0 + 0.5 * sp.dt).jerk).max() > 0.1  # the turn has jerk to give
    np.testing.assert_array_equal(traj.sample(5.0).jerk, np.zeros(3))
    np.testing.assert_array_equal(traj.sample(10.0 + sp.duration + 1.0).jerk, np.zeros(3))


def test_braking_jerk_is_zero_and_sampled_trajectory_jerk_is_its_acceleration_slope():
    from planner_pkg.planning.sampled_trajectory import SampledTrajectory

    brake = BrakingTrajectory([0.0, 0.0, 1.0], [3.0, 0.0, 0.0], t_start=1.0, decel_mps2=6.0)
    np.testing.assert_array_equal(brake.sample(1.2).jerk, np.zeros(3))
    st = SampledTrajectory([0.0, 0.1, 0.3], np.zeros((3, 3)), np.zeros((3, 3)),
                           [[0.0, 0.0, 0.0], [1.0, -2.0, 0.0], [1.0, -2.0, 4.0]])
    np.testing.assert_allclose(st.sample(0.05).jerk, [10.0, -20.0, 0.0])
    np.testing.assert_allclose(st.sample(0.2).jerk, [0.0, 0.0, 20.0])
    assert not st.sample(0.3).has_jerk  # the final hover: no feed-forward at all


@pytest.mark.parametrize("steer_deg", [20.0, -35.0])
def test_a_steered_emergency_stop_brakes_as_hard_and_ends_at_rest_aside(steer_deg):
    """Against the closed form (D = v^2 / 2a: D / cos along, D (tan / cos + tan^2) aside), with the
    velocity the derivative of the position and the acceleration magnitude the braking's."""
    import math

    v, decel, th = 5.0, 10.0, math.radians(steer_deg)
    brake = BrakingTrajectory([1.0, 2.0, 1.0], [0.0, v, 0.0], t_start=3.0, decel_mps2=decel, yaw=0.5, steer_rad=th)
    d = v * v / (2.0 * decel)
    a = abs(th)
    along, aside = d / math.cos(a), d * (math.tan(a) / math.cos(a) + math.tan(a) ** 2)
    left = np.array([-1.0, 0.0, 0.0])  # 90 deg left of +y
    np.testing.assert_allclose(brake.stop_position, [1.0, 2.0 + along, 1.0] + math.copysign(aside, th) * left,
                               atol=1e-12)
    assert brake.duration == pytest.approx(v / (decel * math.cos(a)) + v * math.tan(a) / decel)
    h = 1e-6
    for t in np.linspace(3.0 + 1e-3, brake.t_end - 1e-3, 40):
        p, vel, acc = brake.state(t)
        np.testing.assert_allclose((brake.state(t + h)[0] - brake.state(t - h)[0]) / (2 * h), vel, atol=1e-5)
        assert np.linalg.norm(acc) == pytest.approx(decel)
        assert acc[2] == 0.0 and vel[2] == 0.0
    end = brake.sample(brake.t_end + 1.0)
    np.testing.assert_allclose(end.velocity, 0.0, atol=1e-12)
    np.testing.assert_allclose(end.acceleration, 0.0)
    np.testing.assert_allclose(end.position, brake.stop_position)
    assert end.yaw == 0.5
    straight = BrakingTrajectory([1.0, 2.0, 1.0], [0.0, v, 0.0], t_start=3.0, decel_mps2=decel)
    np.testing.assert_allclose(straight.stop_position, [1.0, 2.0 + d, 1.0])
    with pytest.raises(ValueError, match="steer"):
        BrakingTrajectory([0, 0, 1], [1, 0, 0], 0.0, decel_mps2=5.0, steer_rad=math.radians(85.0))
    # straight up or down there is no horizontal side: braking straight whatever the angle
    assert BrakingTrajectory([0, 0, 1], [0, 0, 2.0], 0.0, decel_mps2=5.0, steer_rad=0.5).steer_rad == 0.0


def _integrate_ramped_stop(p0, v0, a0, a1, ramp_s, h=1e-5):
    """Independent truth for a ramped stop: explicit integration of the acceleration turning from
    ``a0`` to ``a1`` linearly over ``ramp_s``, then held at ``a1`` until the speed along v0 is
    gone. Returns (the state where the ramp ends: (t, p, v) or None if the speed went first,
    position and time at rest)."""
    p, v, a = (np.array(x, dtype=np.float64) for x in (p0, v0, a0))
    d = v / np.linalg.norm(v)
    step = (np.asarray(a1) - a) / ramp_s * h
    t, ramp = 0.0, None
    while v @ d > 0.0:
        if ramp is None and t + 0.5 * h >= ramp_s:
            a, ramp = np.asarray(a1, dtype=np.float64), (t, p.copy(), v.copy())
        elif ramp is None:
            a = a + step
        v = v + a * h
        p = p + v * h
        t += h
    return ramp, p, t


@pytest.mark.parametrize("a0", [[5.0, 0.0, 0.0], [2.0, -3.0, 1.0], [-4.0, 0.0, 0.0]])
def test_a_ramped_emergency_stop_is_the_turning_acceleration_integrated(a0):
    """With the vehicle's acceleration and a ramp time, the braking first turns the acceleration
    over that time (a quadrotor accelerating forward pitches back first): the state where the ramp
    ends against an explicit integration, then the braking of before from there (along the
    velocity; the integration's held acceleration is the same when the ramp leaves no speed
    across), the velocity the derivative of the position and the jerk the one sampled."""
    v0, decel, ramp_s = np.array([4.0, 0.0, 0.0]), 11.0, 0.15
    brake = BrakingTrajectory([0.0, 0.0, 1.0], v0, t_start=2.0, decel_mps2=decel, yaw=0.1,
                              acceleration=a0, ramp_s=ramp_s)
    a1 = np.array([-decel, 0.0, 0.0])
    assert brake.ramp_s == ramp_s
    (ramp_t, ramp_p, ramp_v), stop, t_stop = _integrate_ramped_stop([0.0, 0.0, 1.0], v0, a0, a1, ramp_s)
    assert ramp_t == pytest.approx(ramp_s, abs=1e-4)
    p, v, _ = brake.state(2.0 + ramp_s)
    np.testing.assert_allclose(p, ramp_p, atol=1e-3)
    np.testing.assert_allclose(v, ramp_v, atol=1e-3)
    after = BrakingTrajectory(p, v, 2.0 + ramp_s, decel)
    np.testing.assert_allclose(brake.stop_position, after.stop_position, atol=1e-12)
    assert brake.t_end == pytest.approx(after.t_end)
    if np.allclose(a0[1:], 0.0):
        np.testing.assert_allclose(brake.stop_position, stop, atol=2e-3)
        assert brake.duration == pytest.approx(t_stop, abs=1e-3)
    plain = BrakingTrajectory([0.0, 0.0, 1.0], v0, t_start=2.0, decel_mps2=decel)
    assert brake.stop_position[0] > plain.stop_position[0]  # braking later stops farther
    np.testing.assert_allclose(brake.state(2.0)[2], a0)
    np.testing.assert_allclose(brake.sample(2.0 + 0.5 * ramp_s).jerk, (a1 - a0) / ramp_s, atol=1e-9)
    np.testing.assert_array_equal(brake.sample(2.0 + 1.5 * ramp_s).jerk, np.zeros(3))
    h = 1e-6
    for t in np.linspace(2.0 + 1e-3, brake.t_end - 1e-3, 60):
        p, vel, acc = brake.state(t)
        np.testing.assert_allclose((brake.state(t + h)[0] - brake.state(t - h)[0]) / (2 * h), vel, atol=1e-5)
        np.testing.assert_allclose((brake.state(t + h)[1] - brake.state(t - h)[1]) / (2 * h), acc, atol=1e-4)
    end = brake.sample(brake.t_end + 0.5)
    np.testing.assert_allclose(end.velocity, 0.0, atol=1e-9)
    np.testing.assert_allclose(end.position, brake.stop_position)


def test_a_ramp_that_takes_the_speed_away_ends_there_and_never_backs_up():
    """Slow: the speed along v0 is gone within the ramp, so the ramp ends there and nothing is
    left to brake; no motion back along v0."""
    v0 = np.array([0.3, 0.0, 0.0])
    brake = BrakingTrajectory([0.0, 0.0, 1.0], v0, 0.0, decel_mps2=11.0, acceleration=[0.0, 0.0, 0.0], ramp_s=0.22)
    # the acceleration -50 t: the speed 0.3 - 25 t^2 is gone at t = sqrt(0.012), before 0.22 s
    assert brake.ramp_s == pytest.approx(math.sqrt(0.3 / 25.0)) and brake.ramp_s < 0.22
    ts = np.linspace(0.0, brake.t_end, 400)
    along = np.array([brake.state(t)[1] @ [1.0, 0.0, 0.0] for t in ts])
    assert along.min() >= -1e-9
    np.testing.assert_allclose(brake.sample(brake.t_end).velocity, 0.0, atol=1e-9)
    with pytest.raises(ValueError, match="ramp"):
        BrakingTrajectory([0, 0, 1], v0, 0.0, decel_mps2=5.0, acceleration=[0, 0, 0], ramp_s=-0.1)
    with pytest.raises(ValueError, match="acceleration"):
        BrakingTrajectory([0, 0, 1], v0, 0.0, decel_mps2=5.0, acceleration=[math.nan, 0, 0], ramp_s=0.1)
    # no ramp: the stop of before, whatever the acceleration
    a = BrakingTrajectory([0, 0, 1], [4.0, 0, 0], 0.0, 11.0, acceleration=[5.0, 0, 0], ramp_s=0.0)
    b = BrakingTrajectory([0, 0, 1], [4.0, 0, 0], 0.0, 11.0)
    np.testing.assert_array_equal(a.stop_position, b.stop_position)
    assert a.ramp_s == 0.0
