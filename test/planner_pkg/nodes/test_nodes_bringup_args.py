"""``bringup`` checks what it is given before any node starts (issue 20 items 4-6): the parameter
file, the namespace, the numbers, the start and goal, the output paths. Each problem exits 2 with
one line naming the argument or file and the problem, no traceback, and nothing started."""
from pathlib import Path

import pytest

from planner_pkg.nodes import bringup
from planner_pkg.nodes.params import ParamsFileError, check_params_file, read_params_file

ROOT = Path(__file__).resolve().parents[3]
WORLD = "bounds: {min: [-15.0, -6.0, 0.0], max: [15.0, 6.0, 5.0]}\n" \
        "obstacles:\n- {type: cylinder, center: [-6.0, 3.0], radius: 0.4, height: 4.0}\n"


@pytest.fixture
def run(tmp_path, capsys, monkeypatch):
    world = tmp_path / "open.yaml"
    world.write_text(WORLD)
    started = []
    monkeypatch.setattr(bringup.Supervisor, "start_all", lambda self: started.append(self))

    def go(*argv, world_arg=True):
        args = ["sim"] + (["--world", str(world)] if world_arg else []) + [str(a) for a in argv]
        code = bringup.main(args)
        out = capsys.readouterr()
        assert not started, "a node was started despite the error"
        return code, out.err
    return go


def _params(tmp_path, name, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name,data,words", [
    ("latin1.yaml", "/**/planner:\n  ros__parameters: {planner: caf\xe9}\n".encode("latin-1"), "is not UTF-8 text"),
    ("broken.yaml", b"/**/planner:\n  ros__parameters: [1,\n", "is not valid YAML at line"),
    ("string.yaml", b'"just a string"\n', "must be a mapping of node blocks"),
    ("noblock.yaml", b"/**/planner: 3\n", "must hold exactly 'ros__parameters"),
    ("typo_node.yaml", b"/**/planer:\n  ros__parameters: {rate_hz: 10.0}\n", "unknown node 'planer' (did you mean"),
    ("typo_param.yaml", b"/**/planner:\n  ros__parameters: {max_velocity: 2.0}\n",
     "unknown parameter(s) 'max_velocity' (did you mean 'max_vel_mps'?)"),
    ("int_double.yaml", b"/**/traj_server:\n  ros__parameters: {rate_hz: 100}\n", "write 100.0"),
    ("bad_value.yaml", b"/**/traj_server:\n  ros__parameters: {rate_hz: -5.0}\n", "rate_hz"),
    ("huge_map.yaml", b"/**/planner:\n  ros__parameters:\n    ego:\n      map: {resolution_m: 0.0001}\n",
     "memory cap"),
])
def test_bad_parameter_files_exit_2_naming_the_file_and_problem(run, tmp_path, name, data, words):
    code, err = run("--params", _params(tmp_path, name, data))
    assert code == 2, err
    assert name in err and words in err, err
    assert "Traceback" not in err


def test_the_shipped_parameter_files_pass_the_checks(tmp_path):
    configs = bringup.node_parameter_configs()
    assert all(configs[name] for name in ("sim_bridge", "planner", "traj_server", "policy", "fcu_bridge"))
    for name in ("sim.yaml", "gazebo.yaml", "hardware.yaml", "hardware_px4.yaml", "hardware_ardupilot.yaml"):
        path = ROOT / "config" / name
        check_params_file(read_params_file(path), configs, path)
    odd_key = _params(tmp_path, "odd.yaml", b"3: {ros__parameters: {}}\n")
    with pytest.raises(ParamsFileError, match="not a node name"):
        read_params_file(odd_key)


@pytest.mark.parametrize("argv,words", [
    (["--namespace", "bad name!"], "argument --namespace: expected a ROS namespace"),
    (["--namespace", "drone1//x"], "argument --namespace"),
    (["--namespace", "1drone"], "argument --namespace"),
    (["--goal", "0,0,1", "--timeout", "nan"], "argument --timeout"),
    (["--goal", "0,0,1", "--timeout", "-1"], "argument --timeout"),
    (["--goal", "0,0,1", "--goal-tolerance", "nan"], "argument --goal-tolerance"),
    (["--goal", "0,0,1", "--goal-tolerance", "-1"], "argument --goal-tolerance"),
    (["--goal", "0,0,1", "--goal-tolerance", "1e9"], "argument --goal-tolerance"),
    (["--stop-timeout", "nan"], "argument --stop-timeout"),
    (["--duration", "-1"], "argument --duration"),
    (["--real-time-factor", "nan"], "argument --real-time-factor"),
    (["--goal", "1e300,0,1"], "outside the flight envelope"),
    (["--goal", "100,0,1"], "goal 100,0,1 is outside the world bounds"),
    (["--goal", "-6,3,1"], "goal -6,3,1 is inside an obstacle"),
    (["--goal", "-12.2,0,1"], "within the goal tolerance"),  # the sim.yaml start is (-12, 0, 1)
    (["--start", "-6,3,1", "--goal", "0,0,1"], "start -6,3,1 is inside an obstacle"),
    (["--summary", "s.json"], "--summary is written by a mission: give --goal"),
])
def test_bad_arguments_exit_2_before_anything_starts(run, argv, words):
    code, err = run(*argv)
    assert code == 2, err
    assert words in err, err
    assert "Traceback" not in err


def test_output_paths_are_checked_before_flying(run, tmp_path):
    """Issue 20 item 6: --summary pointing at a directory failed after the whole mission."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for flag, path, words in (("--summary", tmp_path, "is a directory"),
                              ("--log", blocker / "f.csv", "not a directory"),
                              ("--record", tmp_path, "is a directory")):
        code, err = run("--goal", "0,0,1", flag, path)
        assert code == 2 and f"argument {flag}" in err and words in err, err


def test_a_non_utf8_world_file_exits_2(run, tmp_path):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("bounds: {min: [0, 0, 0], max: [1, 1, 1]}  # caf\xe9\n".encode("latin-1"))
    code, err = run("--world", bad, world_arg=False)
    assert code == 2 and "latin1.yaml" in err and "not UTF-8" in err and "Traceback" not in err


def test_good_arguments_pass_the_checks(tmp_path):
    world = tmp_path / "open.yaml"
    world.write_text(WORLD)
    args = bringup.build_parser().parse_args(["sim", "--world", str(world), "--namespace", "drone1", "--goal",
                                              "0,0,1", "--summary", str(tmp_path / "out" / "s.json")])
    assert bringup._prepare(args) is None
    assert args.namespace == "/drone1" and args.ground_truth
    cmd = bringup.node_command("sim", args.specs[0], args)
    assert "__ns:=/drone1" in cmd


def test_a_node_that_cannot_be_imported_is_not_checked_but_a_typo_still_is(tmp_path):
    """An optional node (its extra not installed) has no config classes to check against: its block
    passes as written, while the other nodes' blocks are still checked."""
    configs = dict(bringup.node_parameter_configs(), recorder=[])
    path = _params(tmp_path, "rec.yaml", b"/**/recorder:\n  ros__parameters: {anything: 1}\n"
                                          b"/**/traj_server:\n  ros__parameters: {rate_hz: 50.0}\n")
    check_params_file(read_params_file(path), configs, path)
    path.write_bytes(b"/**/recorder:\n  ros__parameters: {anything: 1}\n"
                     b"/**/traj_server:\n  ros__parameters: {rate: 50.0}\n")
    with pytest.raises(ParamsFileError, match="unknown parameter"):
        check_params_file(read_params_file(path), configs, path)


def test_a_node_that_ends_for_good_fails_the_run():
    """A node without respawn (the simulator) that exits, even with code 0, stops the graph with
    exit code 1: a mission without its simulator is a failed run, not a success."""
    import sys

    spec = bringup.SIM_BRIDGE
    assert not spec.respawn
    logs = []
    sup = bringup.Supervisor({spec.name: [sys.executable, "-c", "pass"]}, {spec.name: spec}, env=None,
                             log=logs.append)
    sup.start_all()
    sup.procs[spec.name].wait(timeout=60)
    sup.poll()
    assert sup.failed == 1 and "not restarting" in logs[-1]
    sup.stop()
    config = bringup.Supervisor({spec.name: [sys.executable, "-c", "raise SystemExit(2)"]}, {spec.name: spec},
                                env=None, log=logs.append)
    config.start_all()
    config.procs[spec.name].wait(timeout=60)
    config.poll()
    assert config.failed == 2 and "refused its configuration" in logs[-1]
    config.stop()


def test_the_mission_waits_longer_than_the_lockstep_fault_timeout():
    """A lockstep fault (the simulator's status, after lockstep_fault_timeout_s) must reach the
    mission before its own "stalled" verdict, which would hide the fault's reason."""
    blocks = {"/**/sim_bridge": {"lockstep_fault_timeout_s": 60.0, "status_rate_hz": 0.5}}
    assert bringup.mission_stall_timeout_s(blocks) == pytest.approx(60.0 + 2 / 0.5 + 5.0)
    quick = {"/**/sim_bridge": {"lockstep_fault_timeout_s": 1.0, "status_rate_hz": 10.0}}
    assert bringup.mission_stall_timeout_s(quick) == bringup.MIN_STALL_TIMEOUT_S


def test_a_parameter_in_exponent_form_is_read_as_the_number_rcl_reads(tmp_path):
    """``ego.optimizer.ftol: 1e-4`` is a double to ROS 2's own parser; the bringup's check of the
    file reads it as one too (PyYAML alone would read the string '1e-4' and refuse the file)."""
    configs = bringup.node_parameter_configs()
    path = _params(tmp_path, "exp.yaml", b"/**/planner:\n  ros__parameters: {ego.optimizer.ftol: 1e-4}\n")
    blocks = read_params_file(path)
    assert blocks["/**/planner"]["ego.optimizer.ftol"] == 1e-4
    check_params_file(blocks, configs, path)
