"""PolicyPlanner: the runner protocol, the node-facing step(), the guards, and closed-loop flight."""
import math

import numpy as np
import pytest

import autograd_core as ag

from planner_pkg.policy.config import PolicyConfig
from planner_pkg.policy.export import export_policy, load_policy
from planner_pkg.policy.network import PolicyNet
from planner_pkg.policy.planner import PolicyPlanner, PolicyPlannerConfig
from planner_pkg.app.planners import PlannerNotAvailableError, PlannerOptions, make_planner
from planner_pkg.sim.runner import ClosedLoopRunner, RunnerConfig
from planner_pkg.types import Setpoint, VehicleState
from planner_pkg.world import Cylinder, World

CFG = PolicyConfig().replace(network={"channels": [4, 8, 8], "hidden": 16, "velocity_prior_gain_per_s": 1.5})


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    ag.manual_seed(0)
    net = PolicyNet(CFG.network, CFG.observation)
    return export_policy(net, CFG, tmp_path_factory.mktemp("policy") / "p.agm")


def _state(t=0.0, p=(0.0, 0.0, 1.5), v=(0.0, 0.0, 0.0), yaw=0.0):
    return VehicleState(t, p, v, [0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)], np.zeros(3))


def _depth(value=5.0):
    return np.full((48, 64), value, dtype=np.float32)


def test_step_outputs_an_acceleration_setpoint_towards_the_goal(model_path):
    planner = PolicyPlanner(model_path, PolicyPlannerConfig(speed_mps=3.0))
    planner.reset(np.array([0.0, 0.0, 1.5]), np.array([0.0, 10.0, 1.5]))
    sp = planner.step(_state(), _depth(np.inf), 0.0)
    assert isinstance(sp, Setpoint) and sp.mode == "acceleration"
    assert not sp.has_position and not sp.has_velocity
    assert sp.yaw == pytest.approx(math.pi / 2)  # heading to the goal
    assert sp.acceleration[1] > 0.5  # the velocity prior pulls towards the goal (+y)
    assert planner.last_status == "ok"


def test_gru_state_is_kept_between_calls_and_reset(model_path):
    planner = PolicyPlanner(model_path)
    planner.reset(np.zeros(3), np.array([10.0, 0.0, 1.5]))
    a = planner.step(_state(0.0), _depth(), 0.0).acceleration
    b = planner.step(_state(0.066), _depth(), 0.066).acceleration
    planner.reset(np.zeros(3), np.array([10.0, 0.0, 1.5]))
    c = planner.step(_state(0.0), _depth(), 0.0).acceleration
    np.testing.assert_allclose(a, c)
    assert not np.allclose(a, b)


def test_guards(model_path):
    planner = PolicyPlanner(model_path, PolicyPlannerConfig(stale_after_s=0.2))
    # no goal: hold
    sp = planner.step(_state(), None)
    assert sp.mode == "position" and "no goal" in planner.last_status
    planner.set_goal([10.0, 0.0, 1.5])
    # no image yet: hold where it is
    sp = planner.step(_state(p=(1.0, 2.0, 1.5)), None)
    assert sp.mode == "position" and np.allclose(sp.position, [1.0, 2.0, 1.5])
    # fresh image: fly; the same image 0.3 s later is stale: hold
    assert planner.step(_state(1.0), _depth(), 1.0).mode == "acceleration"
    assert planner.step(_state(1.1), None).mode == "acceleration"
    assert planner.step(_state(1.3), None).mode == "position" and "fresh depth" in planner.last_status
    # an all-NaN image is not used
    assert planner.step(_state(1.4), np.full((48, 64), np.nan, np.float32), 1.4).mode == "position"
    # non-finite odometry: zero acceleration (hover thrust)
    bad = VehicleState(2.0, [np.nan, 0, 1], np.zeros(3), [0, 0, 0, 1], np.zeros(3))
    sp = planner.step(bad, _depth(), 2.0)
    assert sp.mode == "acceleration" and np.allclose(sp.acceleration, 0.0)
    # at the goal: hold the goal
    sp = planner.step(_state(3.0, p=(9.5, 0.0, 1.5)), _depth(), 3.0)
    assert sp.mode == "position" and np.allclose(sp.position, [10.0, 0.0, 1.5])


def test_acceleration_is_clamped(model_path):
    planner = PolicyPlanner(model_path, PolicyPlannerConfig(max_accel_mps2=6.0, max_tilt_deg=20.0))
    a = planner._clamp(np.array([30.0, 0.0, -20.0]))
    assert a[2] >= -planner.config.max_descent_accel_mps2 - 1e-12
    assert math.hypot(a[0], a[1]) <= math.tan(math.radians(20.0)) * (a[2] + 9.81) + 1e-9
    assert np.linalg.norm(planner._clamp(np.array([0.0, 0.0, 50.0]))) <= 6.0 + 1e-9


def test_wrong_camera_size_is_refused(model_path):
    planner = PolicyPlanner(model_path)
    planner.set_goal([5.0, 0.0, 1.5])
    with pytest.raises(ValueError, match="integer multiple"):
        planner.step(_state(), np.ones((50, 64), np.float32), 0.0)


def test_factory_builds_the_policy_and_passes_the_speed(model_path):
    planner = make_planner("policy", PlannerOptions(max_vel_mps=4.5, model_path=str(model_path)))
    assert isinstance(planner, PolicyPlanner) and planner.speed_mps == 4.5 and planner.rate_hz == 15.0
    with pytest.raises(PlannerNotAvailableError, match="cannot read"):
        make_planner("policy", PlannerOptions(model_path=str(model_path) + ".missing"))


def test_closed_loop_episode_in_the_simulator(model_path):
    world = World((-2, -4, 0), (12, 4, 4), [Cylinder((6.0, 2.5), 0.3, 3.0)])
    planner = PolicyPlanner(load_policy(model_path), PolicyPlannerConfig(speed_mps=2.0))
    runner = ClosedLoopRunner(world, planner, RunnerConfig(timeout_s=2.0, seed=1), planner_name="policy")
    result = runner.run(np.array([0.0, 0.0, 1.5]), np.array([10.0, 0.0, 1.5]))
    s = result.summary
    assert s.planner_calls == pytest.approx(2.0 * 15, abs=2) and s.bad_setpoints == 0
    assert s.replan_ms_median is not None and s.replan_ms_median < 20.0
    assert result.final_state.position[0] > 0.3  # it flew towards the goal


def test_shipped_model_loads_and_is_the_default():
    from planner_pkg.policy.export import default_model_path

    path = default_model_path()
    assert path is not None, "the package must ship planner_pkg/policy/models/policy_default.agm"
    assert path.stat().st_size < 5 * 1024 * 1024
    policy = load_policy(path)
    planner = make_planner("policy", PlannerOptions(max_vel_mps=3.0))  # no --model: the shipped one
    assert isinstance(planner, PolicyPlanner) and planner.policy.config == policy.config
