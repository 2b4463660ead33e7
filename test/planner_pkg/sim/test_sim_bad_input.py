"""Bad input never crashes the simulator or yields silent garbage."""
import logging
import math

import numpy as np
import pytest

from planner_pkg.cli import main
from planner_pkg.sim import ClosedLoopRunner, RunnerConfig, run_episode
from planner_pkg.sim.dynamics import RigidBodyQuadrotor
from planner_pkg.types import Setpoint
from planner_pkg.world import World

EMPTY = World([-5, -5, 0], [15, 5, 5], [])
START = [0.0, 0.0, 1.5]


class Scripted:
    """Returns ``good`` until ``t_bad``, then whatever ``bad()`` gives (or raises)."""

    rate_hz = 10.0

    def __init__(self, bad, t_bad=0.5, good=None):
        self.bad, self.t_bad = bad, t_bad
        self.good = good or Setpoint.from_velocity([1.0, 0.0, 0.0], yaw=0.0)

    def reset(self, start, goal):
        pass

    def update(self, state, sensors):
        return self.good if state.t < self.t_bad - 1e-9 else self.bad()


def partially_nan():
    return Setpoint(velocity=[1.0, math.nan, 0.0])  # raises ValueError inside the planner


class RaisingTrajectory:
    def sample(self, t):
        raise ValueError("t beyond the last knot")


@pytest.mark.parametrize(
    "bad, why",
    [
        (lambda: Setpoint(), "empty setpoint"),
        (lambda: Setpoint(yaw=0.3), "empty setpoint"),
        (partially_nan, "partially NaN"),
        (lambda: RaisingTrajectory(), "beyond the last knot"),
        (lambda: "fly north", "not a Setpoint"),
        (lambda: np.full(3, np.nan), "not a Setpoint"),
    ],
    ids=["all-nan", "yaw-only", "partially-nan", "raising-trajectory", "string", "bare-array"],
)
def test_bad_setpoints_make_the_vehicle_hold_position_and_are_logged(bad, why, caplog):
    with caplog.at_level(logging.WARNING, logger="planner_pkg.sim.runner"):
        res = run_episode(EMPTY, Scripted(bad), START, [10, 0, 1.5], RunnerConfig(timeout_s=3.0))
    s = res.summary
    assert s.reason == "timeout" and not s.collided  # it ran to the end, no crash
    assert s.bad_setpoints >= 1
    assert len(res.events) == 1 and why in res.events[0]  # one warning per streak, not per call
    assert any(why in r.getMessage() and "holding position" in r.getMessage() for r in caplog.records)
    # it was moving at ~1 m/s when the bad setpoint came at t = 0.5 s; it then stops and holds
    pos, vel = res.log.positions, res.log.velocities
    late = res.log.t > 2.5
    assert np.abs(vel[late]).max() < 0.05
    assert np.ptp(pos[late], axis=0).max() < 0.02
    assert 0.2 < pos[-1, 0] < 1.2 and abs(pos[-1, 2] - 1.5) < 0.05


def test_a_good_setpoint_after_bad_ones_resumes_control():
    calls = []

    class Recovering(Scripted):
        def update(self, state, sensors):
            calls.append(state.t)
            if 0.5 <= state.t < 1.0:
                return Setpoint()
            return Setpoint.hold([3.0, 0.0, 1.5], 0.0)

    res = run_episode(EMPTY, Recovering(None), START, [10, 0, 1.5], RunnerConfig(timeout_s=5.0))
    assert res.summary.bad_setpoints == 5 and len(res.events) == 1
    assert res.log.positions[-1, 0] == pytest.approx(3.0, abs=0.05)


def test_non_finite_state_ends_the_episode_with_a_reason():
    class Diverging(RigidBodyQuadrotor):
        """A vehicle model that blows up at t = 1 s (as a broken integrator would)."""

        def step(self, cmd, dt):
            super().step(cmd, dt)
            if self.t >= 1.0:
                self._s[3] = math.inf
                self._s[0] = math.nan

    class Runner(ClosedLoopRunner):
        def make_vehicle(self):
            vehicle, controller, radius, bound = super().make_vehicle()
            return Diverging(vehicle.params), controller, radius, bound

    res = Runner(EMPTY, Scripted(lambda: Setpoint.hold(START), t_bad=0.0), RunnerConfig(timeout_s=5.0)).run(
        START, [10, 0, 1.5]
    )
    s = res.summary
    assert s.reason == "non_finite_state" and not s.reached and not s.collided
    assert s.time_s == pytest.approx(1.0, abs=0.003)
    assert "non-finite" in s.message
    assert np.isfinite(res.log.as_array()).all()  # the log holds no garbage rows
    d = s.to_dict()
    assert all(v is None or not isinstance(v, float) or math.isfinite(v) for v in d.values())


def test_start_inside_an_obstacle_or_outside_bounds_is_a_clear_cli_error(tmp_path, capsys):
    world = tmp_path / "w.yaml"
    world.write_text(
        "bounds: {min: [-5, -5, 0], max: [15, 5, 5]}\n"
        "obstacles:\n  - {type: cylinder, center: [5, 0], radius: 0.5, height: 4}\n"
    )
    common = ["--planner", "direct", "--log", str(tmp_path / "f.csv"), "--summary", str(tmp_path / "s.json")]
    cases = [
        (["--start", "5,0,1", "--goal", "10,0,1"], "start 5,0,1 is inside an obstacle"),
        (["--start", "5.6,0,1", "--goal", "10,0,1"], "within 0.19 m"),
        (["--start", "0,0,1", "--goal", "20,0,1"], "goal 20,0,1 is outside the world bounds"),
        (["--start", "0,0,0.1", "--goal", "10,0,1"], "within 0.19 m"),
    ]
    for args, message in cases:
        assert main(["fly", "--world", str(world), *args, *common]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "f.csv").exists()


@pytest.mark.parametrize(
    "text, message",
    [
        ("bounds: {min: [0, 0, 0], max: [1, 1]}\nobstacles: []\n", "bounds"),
        ("bounds: {min: [0, 0, 0], max: [10, 10, 5]}\nobstacles:\n  - {type: cylinder, center: [1, 1], radius: -1, height: 2}\n", "radius"),
        ("bounds: {min: [0, 0, 0], max: [10, 10, 5]}\nobstacles:\n  - {type: cone, center: [1, 1, 1]}\n", "cone"),
        ("bounds: {min: [0, 0, 0], max: [10, 10, 5]\nobstacles: [\n", "malformed YAML"),
        ("obstacles: []\n", "bounds"),
    ],
    ids=["short-bounds", "negative-radius", "unknown-type", "broken-yaml", "no-bounds"],
)
def test_malformed_world_files_give_an_error_message_and_exit_2(tmp_path, capsys, text, message):
    world = tmp_path / "bad.yaml"
    world.write_text(text)
    code = main([
        "fly", "--world", str(world), "--start", "1,1,1", "--goal", "2,2,1", "--planner", "direct",
        "--log", str(tmp_path / "f.csv"), "--summary", str(tmp_path / "s.json"),
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: invalid world file") and message in err
    assert "Traceback" not in err
