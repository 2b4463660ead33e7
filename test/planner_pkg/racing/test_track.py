"""Track files: loading (JSON and YAML), validation with clear errors, saving, random tracks."""
import json
import math

import numpy as np
import pytest

from planner_pkg.racing.config import TrackGenConfig
from planner_pkg.racing.track import TrackError, load_track, random_track, save_track, track_from_dict

GATES = [{"center": [0.0, 0.0, 2.0], "yaw": 0.0, "size": 1.5},
         {"center": [8.0, 3.0, 2.5], "yaw": math.pi / 2, "size": 1.5}]


def test_json_and_yaml_load_the_same_track(tmp_path):
    pj = tmp_path / "t.json"
    pj.write_text(json.dumps({"gates": GATES}))
    py = tmp_path / "t.yaml"
    py.write_text("gates:\n" + "".join(f"  - {{center: {g['center']}, yaw: {g['yaw']}, size: {g['size']}}}\n"
                                       for g in GATES))
    a, b = load_track(pj), load_track(py)
    assert a == b
    assert len(a) == 2
    np.testing.assert_allclose(a.gates[1].normal, [0.0, 1.0, 0.0], atol=1e-12)
    # default start: 3 m before the first gate, against its normal
    np.testing.assert_allclose(a.start, [-3.0, 0.0, 2.0])


def test_round_trip(tmp_path):
    t = track_from_dict({"gates": GATES, "start": [-2, 1, 1.5]})
    for name in ("r.json", "r.yaml"):
        assert load_track(save_track(t, tmp_path / name)) == t


@pytest.mark.parametrize("data, words", [
    ({}, "'gates' must be a non-empty list"),
    ({"gates": []}, "non-empty"),
    ({"gates": GATES, "extra": 1}, "unknown key(s) ['extra']"),
    ({"gates": [{"center": [0, 0, 2], "yaw": 0}]}, "gates[0]: missing ['size']"),
    ({"gates": [{"center": [0, 0], "yaw": 0, "size": 1}]}, "gates[0].center: must be a list of 3 numbers"),
    ({"gates": [{"center": [0, 0, 2], "yaw": "north", "size": 1}]}, "gates[0].yaw: must be a finite number"),
    ({"gates": [{"center": [0, 0, 2], "yaw": 0, "size": -1}]}, "gates[0].size: must be in (0"),
    ({"gates": [{"center": [0, 0, 2], "yaw": 0, "size": float("nan")}]}, "finite"),
    ({"gates": [{"center": [0, 0, 0.5], "yaw": 0, "size": 1.5}]}, "below the ground"),
    ({"gates": [{"center": [0, 0, 2], "yaw": 0, "size": 1, "colour": "red"}]}, "unknown key(s) ['colour']"),
    ({"gates": GATES + [GATES[0]]}, "same center"),
    ([1, 2], "must be a mapping"),
])
def test_bad_tracks_name_the_problem(data, words):
    with pytest.raises(TrackError) as exc:
        track_from_dict(data, "t.json")
    assert words in str(exc.value)


def test_bad_files(tmp_path):
    with pytest.raises(TrackError, match="cannot read"):
        load_track(tmp_path / "missing.json")
    p = tmp_path / "t.txt"
    p.write_text("{}")
    with pytest.raises(TrackError, match="unknown extension"):
        load_track(p)
    p = tmp_path / "t.yaml"
    p.write_text("gates: [unclosed")
    with pytest.raises(TrackError, match="not valid YAML"):
        load_track(p)
    p = tmp_path / "t.json"
    p.write_text("{'gates': 1}")
    with pytest.raises(TrackError, match="not valid JSON"):
        load_track(p)
    p = tmp_path / "evil.yaml"
    p.write_text("!!python/object/apply:os.system ['echo hi']")
    with pytest.raises(TrackError):  # safe_load refuses the tag: loading never runs code
        load_track(p)


def test_random_tracks_are_loops_of_6_to_8_gates_in_the_area():
    cfg = TrackGenConfig()
    counts = set()
    for seed in range(40):
        t = random_track(np.random.default_rng(seed), cfg)
        counts.add(len(t))
        c, n, _, h = t.arrays()
        assert 6 <= len(t) <= 8
        assert np.all(np.abs(c[:, 0]) <= 11.0 + 1e-9) and np.all(np.abs(c[:, 1]) <= 7.0 + 1e-9)
        assert np.all(c[:, 2] - h > 0)
        d = np.linalg.norm(c[:, None] - c[None], axis=-1) + np.eye(len(t)) * 1e9
        assert d.min() >= cfg.min_spacing_m - 1e-9
        # each gate faces roughly towards the next (the loop is flown along the normals)
        to_next = np.roll(c, -1, axis=0) - c
        cos = np.sum(to_next[:, :2] * n[:, :2], axis=1) / np.linalg.norm(to_next[:, :2], axis=1)
        assert np.median(cos) > 0.3
        track_from_dict(t.to_dict())  # a generated track is a valid track file
    assert counts == {6, 7, 8}
    a = random_track(np.random.default_rng(5), cfg)
    assert a == random_track(np.random.default_rng(5), cfg)
