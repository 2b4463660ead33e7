"""The policy's speed calibration (planner_pkg.policy.speed_calibration, calibrate): the table's map and its
checks, the model file round trip, the planner telling the network the calibrated command (read
back through the zero-head velocity prior), and the measurement flying open space."""
import json
import math

import numpy as np
import pytest

import autograd_core as ag

from planner_pkg.policy.config import PolicyConfig
from planner_pkg.policy.export import PolicyModelError, export_policy, load_policy
from planner_pkg.policy.network import PolicyNet
from planner_pkg.policy.planner import PolicyPlanner, PolicyPlannerConfig
from planner_pkg.policy.calibrate import measure_speed_calibration, write_speed_calibration
from planner_pkg.policy.speed_calibration import SpeedCalibration, SpeedCalibrationError, parse_speed_calibration
from planner_pkg.types import VehicleState

GAIN = 2.0
CFG = PolicyConfig().replace(network={"channels": [4, 8, 8], "hidden": 16, "velocity_prior_gain_per_s": GAIN,
                                      "velocity_prior_drag_per_s": 0.375})
TABLE = SpeedCalibration((1.8, 4.5, 8.0), (2.0, 5.0, 10.0))


@pytest.fixture(scope="module")
def zero_head_model(tmp_path_factory):
    ag.manual_seed(0)
    net = PolicyNet(CFG.network, CFG.observation)
    with ag.no_grad():
        net.fc.weight.mul_(0.0)  # the acceleration is the velocity prior alone
    return export_policy(net, CFG, tmp_path_factory.mktemp("cal") / "zero.agm")


def test_the_table_interpolates_scales_below_and_caps_at_the_top_command():
    assert TABLE.network_speed(4.5) == pytest.approx(5.0)
    assert TABLE.network_speed(3.15) == pytest.approx(3.5)  # halfway between 1.8 and 4.5
    assert TABLE.network_speed(6.25) == pytest.approx(7.5)
    assert TABLE.network_speed(0.9) == pytest.approx(1.0)  # below: the first point's ratio
    assert TABLE.network_speed(0.0) == 0.0
    # beyond the fastest measured cruise: never more than the top command (the training range)
    assert TABLE.network_speed(8.0) == TABLE.network_speed(12.0) == 10.0
    for v in (0.5, 2.0, 4.0, 7.0):  # the inverse map undoes it
        assert TABLE.cruise_speed(TABLE.network_speed(v)) == pytest.approx(v)
    with pytest.raises(ValueError, match="speed"):
        TABLE.network_speed(math.nan)


@pytest.mark.parametrize("cruise, network, match", [
    ((1.0,), (1.0,), "at least 2"),
    ((1.0, 2.0), (1.0, 2.0, 3.0), "equally long"),
    ((1.0, math.nan), (1.0, 2.0), "finite"),
    ((0.0, 2.0), (1.0, 2.0), "positive"),
    ((2.0, 1.9), (1.0, 2.0), "increase"),
    ((1.0, 2.0), (2.0, 2.0), "increase"),
])
def test_a_malformed_table_is_refused(cruise, network, match):
    with pytest.raises(SpeedCalibrationError, match=match):
        SpeedCalibration(cruise, network)


def test_parsing_refuses_other_shapes():
    assert parse_speed_calibration(TABLE.to_dict()) == TABLE
    for bad in ([1, 2], {"cruise_mps": [1, 2]}, {"cruise_mps": [1, 2], "network_mps": ["a", 2]},
                {"cruise_mps": [1, 2], "network_mps": [1, 2], "extra": 1}):
        with pytest.raises(SpeedCalibrationError):
            parse_speed_calibration(bad)


def test_the_table_round_trips_through_the_model_file_and_leaves_the_network_alone(zero_head_model, tmp_path):
    plain = load_policy(zero_head_model)
    assert plain.speed_calibration is None  # a model without one flies uncalibrated
    out = write_speed_calibration(zero_head_model, TABLE, tmp_path / "cal.agm")
    cal = load_policy(out)
    assert cal.speed_calibration == TABLE and cal.config == plain.config
    args = (np.random.default_rng(0).random((1, 1, 12, 16), dtype=np.float32), np.ones((1, 10), np.float32),
            np.zeros((1, 16), np.float32))
    for a, b in zip(plain.model(*args), cal.model(*args)):
        np.testing.assert_array_equal(a, b)
    # written over itself, and removed again
    write_speed_calibration(out, SpeedCalibration((2.0, 4.0), (2.0, 5.0)), out)
    assert load_policy(out).speed_calibration.network_mps == (2.0, 5.0)
    write_speed_calibration(out, None, out)
    assert load_policy(out).speed_calibration is None


def test_a_malformed_table_in_a_file_is_refused_naming_it(zero_head_model, tmp_path):
    out = write_speed_calibration(zero_head_model, TABLE, tmp_path / "cal.agm")
    data = out.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    meta = json.loads(header["__metadata__"]["planner_pkg.policy"])
    meta["speed_calibration"]["cruise_mps"] = [4.0, 3.0, 8.0]
    header["__metadata__"]["planner_pkg.policy"] = json.dumps(meta)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    bad = tmp_path / "bad.agm"
    bad.write_bytes(len(hb).to_bytes(8, "little") + hb + data[8 + n:])
    with pytest.raises(PolicyModelError, match=r"bad\.agm.*speed_calibration.*increase"):
        load_policy(bad)


def _target_read_back(planner, d=40.0):
    """The target speed the network was given, read back through the zero-head prior at rest:
    a_x = 8 tanh(gain * (target - 0) / 8) + drag feed-forward * target (before the squash)."""
    planner.set_goal([d, 0.0, 1.5])
    at_rest = VehicleState(0.0, [0.0, 0.0, 1.5], np.zeros(3), [0.0, 0.0, 0.0, 1.0], np.zeros(3))
    sp = planner.step(at_rest, np.full((48, 64), np.inf, dtype=np.float32), 0.0)
    return 8.0 * math.atanh(sp.acceleration[0] / 8.0) / (GAIN + 0.375)


def test_the_planner_tells_the_network_the_calibrated_command(zero_head_model, tmp_path):
    cal = load_policy(write_speed_calibration(zero_head_model, TABLE, tmp_path / "cal.agm"))
    loose = dict(max_accel_mps2=50.0, max_tilt_deg=89.0)
    on = PolicyPlanner(cal, PolicyPlannerConfig(speed_mps=3.15, **loose))
    assert on.speed_mps == 3.15 and on.network_speed_mps == pytest.approx(3.5)
    assert _target_read_back(on) == pytest.approx(3.5, rel=1e-4)
    off = PolicyPlanner(cal, PolicyPlannerConfig(speed_mps=3.15, speed_calibration=False, **loose))
    assert _target_read_back(off) == pytest.approx(3.15, rel=1e-4)
    plain = PolicyPlanner(load_policy(zero_head_model), PolicyPlannerConfig(speed_mps=3.15, **loose))
    assert _target_read_back(plain) == pytest.approx(3.15, rel=1e-4)
    # the speed guard caps the requested cruise first
    capped = PolicyPlanner(cal, PolicyPlannerConfig(speed_mps=6.25, max_speed_mps=4.5, **loose))
    assert capped.speed_mps == 4.5 and capped.network_speed_mps == pytest.approx(5.0)


def test_measuring_flies_open_space_and_inverts_the_cruise(zero_head_model):
    """The zero-head prior with drag feed-forward against the full quadrotor's drag: it cruises at
    a measured fraction of each command; the calibration's command for that cruise is the command."""
    policy = load_policy(zero_head_model)
    cal, rows = measure_speed_calibration(policy, network_speeds=[2.0, 3.0], episodes=1, course_m=30.0)
    assert [r["network_mps"] for r in rows] == [2.0, 3.0] and all(r["reached"] == 1 for r in rows)
    for r in rows:
        assert 0.7 * r["network_mps"] < r["cruise_mps"] < 1.2 * r["network_mps"]
        assert cal.network_speed(r["cruise_mps"]) == pytest.approx(r["network_mps"])
    with pytest.raises(SpeedCalibrationError, match="increasing"):
        measure_speed_calibration(policy, network_speeds=[3.0, 2.0], episodes=1)


def test_the_shipped_model_is_calibrated_and_cruises_at_the_commanded_speed_in_open_space():
    """The shipped model carries its calibration; flown in open space at 5 m/s (a course the
    calibration did not fly: 80 m, another world seed) it cruises within 4 % of 5 m/s, where the
    same network told 5 m/s as it is cruises slower."""
    from planner_pkg.policy.evaluate import evaluate_speeds
    from planner_pkg.policy.export import default_model_path

    policy = load_policy(default_model_path())
    assert policy.speed_calibration is not None
    params = {"count": 0, "size_x": 90.0, "size_y": 20.0, "start": (-40.0, 0.0, 1.0), "goal": (40.0, 0.0, 1.0)}
    on, = evaluate_speeds(policy, [5.0], episodes=1, world_kind="forest", world_params=params, first_world=7)
    off, = evaluate_speeds(policy, [5.0], episodes=1, world_kind="forest", world_params=params, first_world=7,
                           calibrated=False)
    cruise_on, cruise_off = on.episodes[0]["cruise_speed_mps"], off.episodes[0]["cruise_speed_mps"]
    assert on.success_rate == off.success_rate == 1.0
    assert cruise_on == pytest.approx(5.0, rel=0.04), cruise_on
    assert cruise_off < cruise_on


def test_policy_calibrate_command_writes_the_table_and_eval_reports_it(zero_head_model, tmp_path, capsys):
    from planner_pkg.cli import main

    out = tmp_path / "cal.agm"
    assert main(["policy", "calibrate", "--model", str(zero_head_model), "--out", str(out), "--episodes", "1",
                 "--course", "30"]) == 0
    text = capsys.readouterr().out
    assert "cruise / command" in text and f"wrote {out}" in text
    cal = load_policy(out).speed_calibration
    assert cal is not None and cal.network_mps == tuple(np.linspace(*CFG.env.speed_mps, 9))
    assert main(["policy", "eval", "--model", str(out), "--episodes", "1", "--speed", "3"]) == 0
    assert f"3 -> {cal.network_speed(3.0):.2f}" in capsys.readouterr().out
    assert main(["policy", "eval", "--model", str(out), "--episodes", "1", "--speed", "3", "--no-calibration"]) == 0
    assert "off (--no-calibration)" in capsys.readouterr().out
    # a missing model is a usage error (exit 2), before anything flies
    assert main(["policy", "calibrate", "--model", str(tmp_path / "none.agm"), "--out", str(out)]) == 2
