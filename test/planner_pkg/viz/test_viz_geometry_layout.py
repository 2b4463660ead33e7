"""The ROS-free drawing geometry (planner_pkg/viz/geometry.py), the live-view config and the shipped
Foxglove layout, without a server."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from planner_pkg.types import Setpoint, quaternion_to_matrix
from planner_pkg.viz.config import LiveViewConfig
from planner_pkg.viz.geometry import FlownPath, bounds_edges, obstacle_shapes, sample_trajectory, thin_points
from planner_pkg.world import Box, Cylinder, Sphere, World

REPO = Path(__file__).resolve().parents[3]


def test_shapes_cover_each_obstacle_exactly():
    world = World((-5, -5, 0), (5, 5, 5), [Cylinder((1.0, 2.0), 0.5, 3.0), Box((0.0, 0.0, 1.0), (2.0, 1.0, 0.5), 0.7),
                                           Sphere((-2.0, 1.0, 2.0), 0.25)])
    cyl, box, sph = obstacle_shapes(world)
    assert (cyl.kind, cyl.position, cyl.size) == ("cylinder", (1.0, 2.0, 1.5), (1.0, 1.0, 3.0))
    assert (sph.kind, sph.position, sph.size) == ("sphere", (-2.0, 1.0, 2.0), (0.5, 0.5, 0.5))
    # the box's corners, rotated by its orientation, are where the world says the box is solid
    r = quaternion_to_matrix(box.orientation)
    half = 0.5 * np.array(box.size)
    for sx in (-1, 1):
        for sy in (-1, 1):
            corner = np.array(box.position) + r @ (half * [sx, sy, 1]) * 0.999
            assert world.signed_distance(corner) <= 1e-9
            outside = np.array(box.position) + r @ (half * [sx, sy, 1]) * 1.01
            assert world.signed_distance(outside) > 0


def test_bounds_edges_are_the_twelve_box_edges():
    world = World((-1, -2, 0), (3, 4, 5))
    e = bounds_edges(world).reshape(12, 2, 3)
    lengths = sorted(np.linalg.norm(e[:, 1] - e[:, 0], axis=1).round(12).tolist())
    assert lengths == [4.0] * 4 + [5.0] * 4 + [6.0] * 4
    assert len({tuple(sorted(map(tuple, pair))) for pair in e.tolist()}) == 12


class Line:
    def __init__(self, t0, t_end=None):
        self.t0 = t0
        if t_end is not None:
            self.t_end = t_end

    def sample(self, t):
        if t > 50:
            raise ValueError("no plan that far")
        return Setpoint(position=[t - self.t0, 0.0, 1.0])


def test_trajectory_sampling_uses_the_end_time_or_the_horizon():
    pts = sample_trajectory(Line(0.0, t_end=10.0), 2.0, 5, 4.0)
    np.testing.assert_allclose(pts[:, 0], [2.0, 4.0, 6.0, 8.0, 10.0])
    pts = sample_trajectory(Line(0.0), 2.0, 3, 4.0)  # no end: the horizon
    np.testing.assert_allclose(pts[:, 0], [2.0, 4.0, 6.0])
    pts = sample_trajectory(Line(0.0), 48.0, 5, 4.0)  # sample raises past 50 s: the line stops there
    np.testing.assert_allclose(pts[:, 0], [48.0, 49.0, 50.0])
    velocity_only = type("V", (), {"sample": lambda self, t: Setpoint.from_velocity([1.0, 0.0, 0.0])})()
    assert sample_trajectory(velocity_only, 0.0, 5, 1.0).shape == (0, 3)


def test_flown_path_keeps_spacing_and_stays_bounded():
    path = FlownPath(spacing_m=0.5, max_points=8)
    kept = [path.add(0.1 * i, (0.2 * i, 0.0, 1.0)) for i in range(100)]
    assert kept[0] and not kept[1] and not kept[2] and kept[3]  # 0.6 m after the first
    assert len(path) <= 8
    pts = path.points()
    assert pts[0].tolist() == [0.0, 0.0, 1.0]  # the start survives decimation
    assert pts[-1][0] == pytest.approx(0.2 * 99)  # so does the newest point
    assert np.all(np.diff(path.times()) > 0)
    assert not path.add(20.0, (math.nan, 0.0, 0.0))
    with pytest.raises(ValueError):
        FlownPath(spacing_m=0.0)


def test_thin_points_drops_non_finite_rows_and_caps_the_count():
    pts = np.arange(300, dtype=np.float32).reshape(100, 3)
    pts[5] = np.inf
    out = thin_points(pts, 10)
    assert out.dtype == np.float32 and len(out) <= 10 and np.isfinite(out).all()
    assert out[0].tolist() == pts[0].tolist()


def test_config_refuses_bad_values_by_name():
    for kwargs, key in (({"port": -1}, "port"), ({"image_rate_hz": 0.0}, "image_rate_hz"),
                        ({"queue_size": 0}, "queue_size"), ({"map_frame": "base_link"}, "map_frame"),
                        ({"host": ""}, "host")):
        with pytest.raises(ValueError, match=key):
            LiveViewConfig(**kwargs)


def test_the_shipped_layout_is_the_generated_one_and_names_only_served_topics():
    pytest.importorskip("foxglove.layouts")
    from planner_pkg.viz.foxglove_live import TOPICS
    from planner_pkg.viz.layout import layout_json

    shipped = (REPO / "config" / "foxglove" / "planner_live.json").read_text()
    assert shipped == layout_json(), "regenerate: python -m planner_pkg.viz.layout > config/foxglove/planner_live.json"
    named = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "topics":
                    named.update(value)
                elif key in ("imageTopic",):
                    named.add(value)
                elif key == "value" and isinstance(value, str):
                    named.add(value.split(".")[0])
                walk(value)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(json.loads(shipped))
    assert named and named <= set(TOPICS), named - set(TOPICS)
    assert {"/world", "/camera/depth", "/vehicle/state", "/planner/replan"} <= named
