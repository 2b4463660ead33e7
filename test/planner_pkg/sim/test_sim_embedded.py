"""EmbeddedSim (the sim bridge's simulator): the jerk it estimates for setpoints that carry none."""
import numpy as np
import pytest

from planner_pkg.sim.embedded import JERK_ESTIMATE_MAX_GAP_S, JERK_ESTIMATE_MAX_MPS3, EmbeddedSim
from planner_pkg.types import Setpoint
from planner_pkg.world import World

START = np.array([0.0, 0.0, 2.0])


def _sim():
    world = World((-20, -20, 0), (20, 20, 10), [], ground=True)
    sim = EmbeddedSim(world, START, 0.0, camera_rate_hz=0.0, setpoint_extrapolation_s=0.05)
    sim.advance_steps(sim.steps_until(0.2))
    return sim


def _sp(a, jerk=None):
    kw = {} if jerk is None else {"jerk": jerk}
    return Setpoint(START, np.zeros(3), np.asarray(a, dtype=float), yaw=0.0, **kw)


def test_a_setpoint_without_jerk_gets_the_backward_difference_of_the_accelerations():
    sim = _sim()
    sim.set_setpoint(_sp([1.0, 0.0, 0.0]), stamp=0.17)
    assert not sim.reference.has_jerk  # the first after the start's own hold: nothing to difference
    sim.set_setpoint(_sp([1.5, -1.0, 0.0]), stamp=0.19)
    np.testing.assert_allclose(sim.reference.jerk, [25.0, -50.0, 0.0])
    np.testing.assert_allclose(sim._reference_at(sim.t).jerk, [25.0, -50.0, 0.0])  # kept when followed forward
    # a given jerk is kept as it is
    sim.set_setpoint(_sp([1.5, -1.0, 0.0], jerk=[1.0, 2.0, 3.0]), stamp=0.2)
    np.testing.assert_array_equal(sim.reference.jerk, [1.0, 2.0, 3.0])


def test_a_jump_is_capped_and_gaps_or_holds_give_no_estimate():
    sim = _sim()
    sim.set_setpoint(_sp([0.0, 0.0, 0.0]), stamp=0.19)
    sim.set_setpoint(_sp([0.0, -12.0, 0.0]), stamp=0.2)  # an emergency stop: 1200 m/s^3 as a difference
    assert np.linalg.norm(sim.reference.jerk) == pytest.approx(JERK_ESTIMATE_MAX_MPS3)
    np.testing.assert_allclose(sim.reference.jerk / JERK_ESTIMATE_MAX_MPS3, [0.0, -1.0, 0.0])
    sim.advance_steps(sim.steps_until(0.2 + 2 * JERK_ESTIMATE_MAX_GAP_S))
    sim.set_setpoint(_sp([1.0, 0.0, 0.0]), stamp=sim.t)  # too long after the last one
    assert not sim.reference.has_jerk
    sim.hold()
    sim.set_setpoint(_sp([2.0, 0.0, 0.0]), stamp=sim.t)  # after a hold of its own
    assert not sim.reference.has_jerk
