"""The CLI as a user runs it: ``python -m planner_pkg`` in a subprocess."""
import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

REPO = Path(__file__).resolve().parents[1]
REQUIRED = {"reached", "collided", "time_s", "path_length_m", "min_clearance_m", "replan_ms_median", "replan_ms_p95"}


def run_cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "planner_pkg", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=120,
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
        (["--planner", "direct", "--max-vel", "-1"], "expected a positive number"),
        (["--planner", "direct", "--start", "1,2"], "expected three finite numbers"),
        (["--planner", "direct", "--seed", "x"], "non-negative integer seed"),
    ],
)
def test_fly_argument_errors_exit_2_with_a_message(small_forest, tmp_path, args, message):
    points = ["--goal", "6,0,1"] + ([] if "--start" in args else ["--start", "-6,0,1"])
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
