"""``python -m planner_pkg swarm fly`` as a user runs it (subprocess): the contract files, the exit
codes for bad input, and the failure behaviour (a drone whose planner is lost is avoided)."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
RADIUS = 0.19  # QuadrotorParams().collision_radius_m


def run_cli(*args, cwd, timeout=900):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "planner_pkg", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    d = tmp_path_factory.mktemp("swarm")
    empty = d / "empty.yaml"
    r = run_cli("world", "generate", "--kind", "forest", "--seed", "2", "-o", empty, "--param", "count=0",
                "--param", "size_x=24", "--param", "size_y=16", "--param", "start=[-8, 0, 1]",
                "--param", "goal=[8, 0, 1]", cwd=d)
    assert r.returncode == 0, r.stderr
    trunk = d / "trunk.yaml"
    from planner_pkg.world import Cylinder, World, save_world

    save_world(World((-12, -8, 0), (12, 8, 5), [Cylinder((0.0, 4.0), 0.5, 5.0)]), trunk)
    return d, empty, trunk


def write_points(path, pts):
    path.write_text(json.dumps(pts))
    return path


def read_log(path):
    with open(path) as fh:
        rows = list(csv.reader(fh))
    return rows[0], np.array(rows[1:], dtype=float)


def test_two_drones_swap_and_write_the_contract_files(worlds, tmp_path):
    d, empty, _ = worlds
    starts = write_points(tmp_path / "s.json", [[-6, 0, 1], [6, 0, 1]])
    goals = write_points(tmp_path / "g.json", [[6, 0, 1], [-6, 0, 1]])
    out, summary = tmp_path / "logs", tmp_path / "out" / "summary.json"
    r = run_cli("swarm", "fly", "--world", empty, "--starts", starts, "--goals", goals, "--log-dir", out,
                "--summary", summary, "--max-vel", "2", "--timeout", "40", "--time-scale", "4", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.loads(summary.read_text())
    assert s["n_drones"] == 2 and len(s["drones"]) == 2
    for drone in s["drones"]:
        assert drone["reached"] and not drone["collided"], drone
        assert drone["replans"] > 0 and drone["replan_ms_median"] > 0
    assert s["success"] and s["drone_collisions"] == []
    assert s["plan_tick_cpu_ms_median"] > 0
    ts = []
    for k in range(2):
        header, data = read_log(out / f"drone_{k}.csv")
        assert header == ["t", "x", "y", "z", "vx", "vy", "vz"]
        ts.append(data[:, 0])
        np.testing.assert_allclose(data[0, 1:4], [[-6, 0, 1], [6, 0, 1]][k], atol=1e-9)
        assert np.linalg.norm(data[-1, 1:4] - [[6, 0, 1], [-6, 0, 1]][k]) <= 0.5
    np.testing.assert_array_equal(ts[0], ts[1])  # one clock
    # the summary's minimum separation is the logs' (to the distance flown between log samples)
    _, a = read_log(out / "drone_0.csv")
    _, b = read_log(out / "drone_1.csv")
    from_logs = np.linalg.norm(a[:, 1:4] - b[:, 1:4], axis=1).min()
    assert s["min_inter_drone_distance_m"] <= from_logs + 1e-9
    assert s["min_inter_drone_distance_m"] >= from_logs - 2.0 * 2.0 / 50
    # the drones dodged: they were on one line, head on
    assert s["min_inter_drone_distance_m"] > 0.6


@pytest.mark.parametrize("starts, goals, words", [
    ([[-6, 0, 1], [6, 0, 1]], [[6, 0, 1]], "lists 2 drones but --goals lists 1"),
    ([[0, 4, 1], [6, 0, 1]], [[6, 2, 1], [-6, 0, 1]], "drone 0: start 0,4,1 is inside an obstacle"),
    ([[-6, 0, 1], [-6, 0.3, 1]], [[6, 0, 1], [6, 3, 1]], "starts of drones 0 and 1 are 0.300 m apart"),
    ([[-6, 0, 1], [6, 0, 1]], [[6, 2, 1], [6, 2.1, 1]], "goals of drones 0 and 1"),
    ([[-6, 0, 1], [6, 0]], [[6, 0, 1], [-6, 0, 1]], "entry 1 must be [x, y, z]"),
    ([], [], "non-empty JSON list"),
])
def test_bad_swarm_input_exits_2_with_a_clear_message(worlds, tmp_path, starts, goals, words):
    _, _, trunk = worlds
    s = write_points(tmp_path / "s.json", starts)
    g = write_points(tmp_path / "g.json", goals)
    r = run_cli("swarm", "fly", "--world", trunk, "--starts", s, "--goals", g, "--log-dir", tmp_path / "logs",
                "--summary", tmp_path / "sum.json", cwd=tmp_path, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and words in line, line
    assert not (tmp_path / "sum.json").exists()


def test_missing_file_and_bad_fault_exit_2(worlds, tmp_path):
    _, empty, _ = worlds
    g = write_points(tmp_path / "g.json", [[6, 0, 1]])
    r = run_cli("swarm", "fly", "--world", empty, "--starts", tmp_path / "nope.json", "--goals", g,
                "--log-dir", tmp_path / "l", "--summary", tmp_path / "s.json", cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "does not exist" in r.stderr
    s = write_points(tmp_path / "s.json", [[-6, 0, 1]])
    r = run_cli("swarm", "fly", "--world", empty, "--starts", s, "--goals", g, "--log-dir", tmp_path / "l",
                "--summary", tmp_path / "sum.json", "--lose-planner", "3:1", cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "drone index 0..0" in r.stderr


def test_a_drone_that_lost_its_planner_hovers_and_is_avoided(worlds, tmp_path):
    """Drone 1 loses its planner at once and hovers at its start, on drone 0's straight line; its
    broadcasts stop, so after the timeout it is a static obstacle for drone 0 (and seen in its
    depth images), which flies round it."""
    _, empty, _ = worlds
    starts = write_points(tmp_path / "s.json", [[-6, 0, 1], [0, 0, 1]])
    goals = write_points(tmp_path / "g.json", [[6, 0, 1], [0, 6, 1]])
    summary = tmp_path / "sum.json"
    r = run_cli("swarm", "fly", "--world", empty, "--starts", starts, "--goals", goals, "--log-dir", tmp_path / "l",
                "--summary", summary, "--timeout", "30", "--time-scale", "4", "--lose-planner", "1:0", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.loads(summary.read_text())
    d0, d1 = s["drones"]
    assert d0["reached"] and not d0["collided"], d0
    assert not d1["reached"] and not d1["collided"] and d1["planner_calls"] == 0
    _, hover = read_log(tmp_path / "l" / "drone_1.csv")
    assert np.abs(hover[:, 1:4] - [0, 0, 1]).max() < 0.05  # the traj_server held it at its start
    assert s["min_inter_drone_distance_m"] > 2 * RADIUS + 0.2


def test_a_drone_whose_broadcasts_are_lost_is_still_avoided(worlds, tmp_path):
    """Drone 1's broadcasts are all lost (it keeps planning): drone 0 knows it only from its depth
    images (a drone with no fresh broadcast is not masked, so it enters the map); drone 1 still
    hears drone 0. Head on, on one line: both get through without contact."""
    _, empty, _ = worlds
    starts = write_points(tmp_path / "s.json", [[-6, 0, 1], [6, 0, 1]])
    goals = write_points(tmp_path / "g.json", [[6, 0, 1], [-6, 0, 1]])
    summary = tmp_path / "sum.json"
    r = run_cli("swarm", "fly", "--world", empty, "--starts", starts, "--goals", goals, "--log-dir", tmp_path / "l",
                "--summary", summary, "--timeout", "40", "--time-scale", "4", "--mute", "1:0", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.loads(summary.read_text())
    assert s["broadcasts_lost"] > 10
    assert s["drones"][1]["masked_pixels"] > 0 and s["drones"][0]["masked_pixels"] == 0
    assert s["success"], s["drones"]
    assert s["min_inter_drone_distance_m"] > 2 * RADIUS + 0.2
