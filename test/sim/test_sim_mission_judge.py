"""MissionJudge without ROS: repeated and backward odometry stamps."""
import numpy as np

from planner_pkg.sim.mission_judge import MissionJudge
from planner_pkg.world import World


def test_a_repeated_instant_is_logged_once_and_a_backward_one_is_refused():
    judge = MissionJudge(World([-5.0, -5.0, 0.0], [5.0, 5.0, 5.0], []), (4.0, 0.0, 1.0), 0.5, 10.0, 0.2)
    for _ in range(3):  # a lockstep simulator waiting for the goal re-sends the start odometry
        assert judge.odometry(0.0, (0.0, 0.0, 1.0), (0.0, 0.0, 0.0)) is None
    assert judge.odometry(0.01, (0.01, 0.0, 1.0), (1.0, 0.0, 0.0)) is None
    assert "goes back" in judge.odometry(0.005, (0.0, 0.0, 1.0), (0.0, 0.0, 0.0))
    data = judge.log.as_array()
    np.testing.assert_array_equal(data[:, 0], [0.0, 0.01])
