"""Odometry delay/noise and the planner factory."""
import numpy as np
import pytest

from planner_pkg.sim.odometry import Odometry
from planner_pkg.sim.params import OdometryParams
from planner_pkg.app.planners import (
    PlannerNotAvailableError,
    PlannerOptions,
    available_planners,
    make_planner,
)
from planner_pkg.types import VehicleState


def states(n, dt=0.01):
    return [VehicleState(i * dt, [i * dt, 0, 1], [1, 0, 0], [0, 0, 0, 1], [0, 0, 0]) for i in range(n)]


def test_odometry_without_noise_or_latency_is_the_true_state():
    odo = Odometry()
    for s in states(5):
        assert odo.measure(s) is s


def test_odometry_latency_returns_the_newest_state_old_enough():
    odo = Odometry(OdometryParams(latency_s=0.05))
    seen = [odo.measure(s) for s in states(20)]
    assert seen[0].t == 0.0 and seen[4].t == 0.0  # not enough history yet: the oldest
    assert seen[19].t == pytest.approx(0.14)
    np.testing.assert_allclose([s.t for s in seen[5:]], np.arange(15) * 0.01, atol=1e-12)


def test_odometry_noise_is_seeded_and_needs_an_rng():
    params = OdometryParams(position_noise_std_m=0.1, velocity_noise_std_mps=0.2)
    a = [Odometry(params, np.random.default_rng(3)).measure(s).position for s in states(3)]
    b = [Odometry(params, np.random.default_rng(3)).measure(s).position for s in states(3)]
    np.testing.assert_array_equal(a, b)
    many = Odometry(params, np.random.default_rng(0))
    errs = np.array([many.measure(s).velocity - s.velocity for s in states(2000)])
    assert errs.std() == pytest.approx(0.2, rel=0.05)
    with pytest.raises(ValueError, match="seeded rng"):
        Odometry(params)
    with pytest.raises(ValueError, match="before any state"):
        Odometry().read()


def test_planner_factory():
    planner = make_planner("direct", PlannerOptions(max_vel_mps=3.5))
    assert planner.config.max_vel_mps == 3.5 and planner.rate_hz > 0
    assert available_planners() == ("direct", "ego", "policy")
    ego = make_planner("ego", PlannerOptions(max_vel_mps=2.5))
    assert ego.rate_hz > 0
    with pytest.raises(PlannerNotAvailableError, match="policy"):
        make_planner("policy", PlannerOptions(model_path="/nonexistent/model.agm"))
    with pytest.raises(ValueError, match="unknown planner"):
        make_planner("rrt")
    with pytest.raises(ValueError, match="max_vel_mps must be a positive finite number"):
        PlannerOptions(max_vel_mps=-1.0)
