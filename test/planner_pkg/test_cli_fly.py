"""The CLI as a user runs it: ``python -m planner_pkg`` in a subprocess."""
import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

REPO = Path(__file__).resolve().parents[2]
REQUIRED = {"reached", "collided", "time_s", "path_length_m", "min_clearance_m", "replan_ms_median", "replan_ms_p95"}


def run_cli(*args, cwd, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "planner_pkg", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


@pytest.fixture(scope="module")
def small_forest(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    world = d / "forest.yaml"
    r = run_cli(
        "world", "generate", "--kind", "forest", "--seed", "3", "-o", world,
        "--param", "size_x=16", "--param", "size_y=8", "--param", "count=12",
        "--param", "start=[-6, 0, 1]", "--param", "goal=[6, 0, 1]", "--param", "clear_radius=1.0",
        cwd=d,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "12 obstacles" in r.stdout
    return world


def test_fly_direct_writes_the_contract_files(small_forest, tmp_path):
    log, summary, plot = tmp_path / "out" / "flight.csv", tmp_path / "out" / "summary.json", tmp_path / "flight.png"
    r = run_cli(
        "fly", "--world", small_forest, "--start", "-6,0,1", "--goal", "6,0,1", "--planner", "direct",
        "--seed", "4", "--max-vel", "3", "--log", log, "--summary", summary, "--plot", plot, "--timeout", "20",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "t,x,y,z,vx,vy,vz"
    assert len(lines) > 10 and all(len(row.split(",")) == 7 for row in lines[1:])
    data = json.loads(summary.read_text())
    assert REQUIRED <= set(data)
    assert isinstance(data["reached"], bool) and isinstance(data["collided"], bool)
    assert data["reached"] != data["collided"] or data["reason"] in ("timeout", "out_of_bounds")
    assert data["planner"] == "direct" and data["seed"] == 4 and data["world"] == str(small_forest)
    assert data["max_speed_mps"] < 3.0 * 1.2  # --max-vel reached the planner
    assert json.loads(r.stdout.strip().splitlines()[-1]) == data
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_world_sdf_export(small_forest, tmp_path):
    out = tmp_path / "forest.sdf"
    r = run_cli("world", "sdf", small_forest, "-o", out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    root = ElementTree.parse(out).getroot()  # well-formed XML
    assert root.tag == "sdf" and root.find("world").get("name") == "forest"
    assert out.read_text().count("<cylinder>") >= 12  # every trunk is there (visual and/or collision)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--planner", "policy", "--model", "missing.agm"], "model file 'missing.agm' does not exist"),
        (["--planner", "astar"], "invalid choice: 'astar'"),
        (["--planner", "direct", "--max-vel", "-1"], "expected a positive speed"),
        (["--planner", "direct", "--start", "1,2"], "expected three finite numbers"),
        (["--planner", "direct", "--seed", "x"], "non-negative integer seed"),
        # issue 20 item 7: an absurd speed limit is refused up front (it raised on every planner tick)
        (["--planner", "ego", "--max-vel", "1e308"], "at most 100 (the flight envelope)"),
        (["--planner", "direct", "--goal-tolerance", "1e9"], "--goal-tolerance: expected a positive distance"),
        (["--planner", "direct", "--goal-tolerance", "nan"], "--goal-tolerance: expected a positive distance"),
        (["--planner", "direct", "--timeout", "nan"], "--timeout: expected a positive number of seconds"),
        (["--planner", "direct", "--goal", "1e300,0,1"], "outside the flight envelope"),
        # the start is already within the goal tolerance: nothing to fly, not a success at t = 0
        (["--planner", "direct", "--goal", "-5.8,0,1"], "within the goal tolerance"),
    ],
)
def test_fly_argument_errors_exit_2_with_a_message(small_forest, tmp_path, args, message):
    points = ([] if "--goal" in args else ["--goal", "6,0,1"]) + ([] if "--start" in args else ["--start", "-6,0,1"])
    r = run_cli(
        "fly", "--world", small_forest, *points, *args, "--log", tmp_path / "f.csv", "--summary", tmp_path / "s.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "f.csv").exists()


def test_missing_world_file_and_bad_generator_params(tmp_path):
    r = run_cli(
        "fly", "--world", tmp_path / "nope.yaml", "--start", "0,0,1", "--goal", "1,0,1", "--planner", "direct",
        "--log", tmp_path / "f.csv", "--summary", tmp_path / "s.json", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = run_cli("world", "generate", "--kind", "forest", "-o", tmp_path / "w.yaml", "--param", "trees=5", cwd=tmp_path)
    assert r.returncode == 2 and "trees" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("world", "generate", "--kind", "forest", "-o", tmp_path / "w.yaml", "--param", "count", cwd=tmp_path)
    assert r.returncode == 2 and "KEY=VALUE" in r.stderr
    r = run_cli("world", "sdf", tmp_path / "nope.yaml", "-o", tmp_path / "x.sdf", cwd=tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_non_utf8_world_files_exit_2_naming_the_file(tmp_path):
    """Issue 20 item 4: a binary / Latin-1 world file was a UnicodeDecodeError traceback."""
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("bounds: {min: [0, 0, 0], max: [1, 1, 1]}  # caf\xe9\n".encode("latin-1"))
    out = tmp_path / "out"
    for args in (["fly", "--world", bad, "--start", "0.2,0.2,0.5", "--goal", "0.8,0.8,0.5", "--planner", "direct",
                  "--log", out / "f.csv", "--summary", out / "s.json"],
                 ["world", "sdf", bad, "-o", out / "w.sdf"]):
        r = run_cli(*args, cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        assert "latin1.yaml" in r.stderr and "not UTF-8" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


def test_output_paths_are_checked_before_flying(small_forest, tmp_path):
    """Issue 20 item 6: an output path that cannot be written is refused before the flight."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for flag, bad, words in (("--summary", tmp_path, "is a directory"),
                             ("--log", blocker / "f.csv", "is not a directory")):
        files = {"--log": tmp_path / "f.csv", "--summary": tmp_path / "s.json"}
        files[flag] = bad
        r = run_cli("fly", "--world", small_forest, "--start", "-6,0,1", "--goal", "6,0,1", "--planner", "direct",
                    "--log", files["--log"], "--summary", files["--summary"], cwd=tmp_path)
        assert r.returncode == 2 and flag in r.stderr and words in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert not (tmp_path / "f.csv").exists() and not (tmp_path / "s.json").exists()


def test_world_generate_refuses_unbounded_parameters(tmp_path):
    """Issue 20 item 3: count=100000000 ran unbounded; now refused at once, naming the parameter."""
    for param in ("count=100000000", "density=1e300", "size_x=1e300"):
        r = run_cli("world", "generate", "--kind", "forest", "-o", tmp_path / "w.yaml", "--param", param,
                    cwd=tmp_path)
        assert r.returncode == 2 and param.split("=")[0] in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = run_cli("world", "generate", "--kind", "gates", "-o", tmp_path / "w.yaml", "--param", "num_gates=1000000000",
                cwd=tmp_path)
    assert r.returncode == 2 and "num_gates" in r.stderr
    assert not (tmp_path / "w.yaml").exists()


class _AlwaysFails:
    """A planner whose every update raises, as EGO did with --max-vel 1e308 (OverflowError)."""

    rate_hz = 10.0

    def reset(self, start, goal):
        pass

    def update(self, state, sensors):
        raise ArithmeticError("cannot convert float infinity to integer")


def test_fly_that_never_flew_exits_1_and_still_writes_its_files(small_forest, tmp_path, monkeypatch, capsys):
    """Issue 20 item 7: a run whose planner raised on every tick exited 0 like a real flight."""
    import planner_pkg.app.planners as factory
    from planner_pkg.cli import main

    monkeypatch.setattr(factory, "make_planner", lambda name, options: _AlwaysFails())
    log, summary = tmp_path / "f.csv", tmp_path / "s.json"
    code = main(["fly", "--world", str(small_forest), "--start=-6,0,1", "--goal", "6,0,1", "--planner", "direct",
                 "--timeout", "2", "--log", str(log), "--summary", str(summary)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "nothing was flown" in err and "ArithmeticError" in err
    data = json.loads(summary.read_text())
    assert not data["reached"] and data["bad_setpoints"] == data["planner_calls"] > 0
    assert log.read_text().splitlines()[0] == "t,x,y,z,vx,vy,vz"
    # the same world and points with a planner that works: exit 0
    monkeypatch.undo()
    assert main(["fly", "--world", str(small_forest), "--start=-6,0,1", "--goal", "6,0,1", "--planner", "direct",
                 "--timeout", "2", "--log", str(log), "--summary", str(summary)]) == 0
