"""The shipped racing model (planner_pkg/racing/models/racer_default.agm), when installed: it
loads through the NumPy runtime and flies the example track (never trained on) for 2 laps, every
gate in order, through the same command users run."""
import json
from pathlib import Path

import pytest

from planner_pkg.racing.export import default_model_path

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(default_model_path() is None, reason="no shipped racing model in this checkout")


def test_shipped_model_flies_the_example_track(tmp_path):
    from planner_pkg.cli import main

    summary = tmp_path / "s.json"
    assert main(["race", "fly", "--track", str(REPO / "config/race/track_example.yaml"), "--laps", "2",
                 "--log", str(tmp_path / "f.csv"), "--summary", str(summary)]) == 0
    s = json.loads(summary.read_text())
    assert s["success"] and not s["crash"]
    assert s["gates_passed"] == s["gates_total"] == 12 and len(s["lap_times_s"]) == 2
    assert s["lap_time_ratio"] > 0 and s["baseline_lap_s"] > 0
