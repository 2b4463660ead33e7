"""The minimum-snap baseline: interpolation, C6 continuity, the thrust limit met with equality,
and a circle's analytic lap time."""
import math

import numpy as np
import pytest

from planner_pkg.racing.baseline import BaselineError, _row, _sample, baseline_lap_time, min_snap_loop
from planner_pkg.racing.config import QuadConfig
from planner_pkg.racing.track import random_track, track_from_dict


def test_spline_interpolates_and_is_c6_continuous_around_the_loop():
    rng = np.random.default_rng(0)
    w = rng.uniform(-5, 5, (5, 3))
    T = rng.uniform(0.5, 2.0, 5)
    c = min_snap_loop(w, T)
    for i in range(5):
        j = (i + 1) % 5
        np.testing.assert_allclose(_row(0, 0.0, T[i]) @ c[i], w[i], atol=1e-9)
        np.testing.assert_allclose(_row(0, 1.0, T[i]) @ c[i], w[j], atol=1e-9)
        for k in range(1, 7):
            np.testing.assert_allclose(_row(k, 1.0, T[i]) @ c[i], _row(k, 0.0, T[j]) @ c[j],
                                       atol=1e-6 * (1 + np.abs(_row(k, 0.0, T[j]) @ c[j]).max()))


def test_thrust_limit_is_reached_and_a_circle_matches_the_analytic_lap():
    quad = QuadConfig(drag_per_s=(0.0, 0.0, 0.0))
    R, n = 8.0, 12
    gates = [{"center": [R * math.cos(a), R * math.sin(a), 3.0], "yaw": a + math.pi / 2, "size": 1.5}
             for a in 2 * math.pi * np.arange(n) / n]
    lap = baseline_lap_time(track_from_dict({"gates": gates}), quad)
    acc = _sample(lap.coeffs, lap.durations_s, 2)
    thrust = np.linalg.norm(acc + [0, 0, quad.gravity_mps2], axis=1)
    assert thrust.max() == pytest.approx(quad.max_thrust_mps2, rel=1e-3)
    # uniform circular motion at the thrust limit: v^2 / R = sqrt(f^2 - g^2)
    v = math.sqrt(R * math.sqrt(quad.max_thrust_mps2 ** 2 - quad.gravity_mps2 ** 2))
    assert lap.lap_time_s == pytest.approx(2 * math.pi * R / v, rel=0.02)
    assert lap.length_m == pytest.approx(2 * math.pi * R, rel=0.01)


def test_drag_makes_the_lap_slower_and_bad_tracks_are_refused():
    t = random_track(np.random.default_rng(3))
    fast = baseline_lap_time(t, QuadConfig(drag_per_s=(0.0, 0.0, 0.0)))
    slow = baseline_lap_time(t, QuadConfig())
    assert slow.lap_time_s > fast.lap_time_s
    with pytest.raises(BaselineError, match="at least 2 gates"):
        baseline_lap_time(track_from_dict({"gates": [{"center": [0, 0, 2], "yaw": 0, "size": 1}]}), QuadConfig())
