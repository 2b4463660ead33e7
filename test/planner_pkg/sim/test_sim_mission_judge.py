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


def test_odometry_of_the_flight_that_arrives_after_the_deciding_report_completes_the_log():
    """The simulator's status (ground truth) says the goal is reached at 2.0 s; odometry up to then is
    still on its way on its own topic. Those samples belong to the flight: the log reaches the end
    (a loaded run's log stopped 0.9 m short of the goal its summary said was reached); later ones
    and ones going back are not logged, and nothing after the end decides anything."""
    from planner_pkg.sim.mission_judge import GroundTruth

    judge = MissionJudge(World([-5.0, -5.0, 0.0], [5.0, 5.0, 5.0], []), (4.0, 0.0, 1.0), 0.5, 10.0, 0.2,
                         ground_truth_expected=True)
    judge.odometry(0.0, (0.0, 0.0, 1.0), (0.0, 0.0, 0.0))
    judge.start()
    for k in range(1, 11):  # 0.1 .. 1.0 s, 2 m/s along x
        judge.odometry(0.1 * k, (0.2 * k, 0.0, 1.0), (2.0, 0.0, 0.0))
    assert judge.log_reaches_end()  # not over: nothing to wait for
    judge.ground_truth(GroundTruth(t=2.0, position=np.array([3.9, 0.0, 1.0])))
    assert judge.reason == "goal_reached" and judge.t_end == 2.0
    assert not judge.log_reaches_end()  # the odometry of 1.1 .. 2.0 s is still on its way
    for k in range(11, 22):  # 1.1 .. 2.1 s arrive late
        assert judge.odometry(0.1 * k, (0.2 * k, 0.0, 1.0), (2.0, 0.0, 0.0)) is None
    assert judge.odometry(1.5, (3.0, 0.0, 1.0), (2.0, 0.0, 0.0)) is None  # a repeat going back: not logged
    assert judge.log_reaches_end() and judge.reason == "goal_reached"
    flown = judge.flight_log().as_array()
    np.testing.assert_allclose(flown[:, 0], 0.1 * np.arange(0, 21))  # up to the end at 2.0 s, not beyond
    assert np.linalg.norm(flown[-1, 1:4] - judge.goal) <= 0.5
    summary = judge.summary("ego", "w")
    assert summary.reached and summary.time_s == 2.0 and abs(summary.path_length_m - 4.0) < 1e-9
