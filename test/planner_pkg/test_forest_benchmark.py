"""``benchmarks/forest.py``'s split of EGO's replan CPU by kind of plan (what makes the tail)."""
import numpy as np
import pytest
from benchmark_scripts import load_benchmark


def _forest_module():
    return load_benchmark("forest", "_bench_forest_for_split_test")


def test_replan_cpu_is_split_into_flight_ok_flight_failed_and_from_rest():
    forest = _forest_module()
    # 10 plans: 5 in flight that succeeded, 3 in flight that failed, 2 from rest
    cpu = [1.0, 2.0, 3.0, 4.0, 25.0, 30.0, 10.0, 21.0, 5.0, 90.0]
    flying = [True] * 8 + [False] * 2
    ok = [True] * 5 + [False] * 3 + [False, True]
    by = forest.replan_cpu_by_kind(cpu, flying, ok, target_ms=20.0)
    assert list(by) == ["flight ok", "flight failed", "from rest", "in flight"]
    kinds = ["flight ok", "flight failed", "from rest"]
    assert [by[k]["plans"] for k in kinds] == [5, 3, 2]
    assert [by[k]["share"] for k in kinds] == pytest.approx([0.5, 0.3, 0.2])
    assert [by[k]["over"] for k in kinds] == [1, 2, 1]  # 25 | 30, 21 | 90 above 20 ms
    assert [by[k]["over_share"] for k in kinds] == pytest.approx([0.25, 0.5, 0.25])
    assert by["flight ok"]["p50"] == pytest.approx(np.percentile([1, 2, 3, 4, 25], 50))
    assert by["flight failed"]["p95"] == pytest.approx(np.percentile([30, 10, 21], 95))
    assert by["from rest"]["p50"] == pytest.approx(47.5)
    # every replan made while flying, ok or failed: the first 8
    fl = by["in flight"]
    assert (fl["plans"], fl["over"]) == (8, 3)
    assert (fl["share"], fl["over_share"]) == pytest.approx((0.8, 0.75))
    assert fl["p95"] == pytest.approx(np.percentile(cpu[:8], 95))


def test_replan_cpu_split_of_no_plans_and_of_mismatched_lists():
    forest = _forest_module()
    by = forest.replan_cpu_by_kind([], [], [])
    assert all(by[k]["plans"] == 0 and by[k]["over"] == 0 and np.isnan(by[k]["p95"]) for k in by)
    with pytest.raises(ValueError, match="one CPU time"):
        forest.replan_cpu_by_kind([1.0, 2.0], [True], [True, False])


def test_the_tilt_limit_option_reaches_the_simulated_controller(monkeypatch):
    """``--max-tilt-deg`` sets the simulated controller's tilt limit of every flight (in radians),
    and a limit outside (0, 90) deg is refused before anything flies."""
    import math

    forest = _forest_module()
    seen = []

    class Stop(Exception):
        pass

    def run_episode(world, planner, start, goal, config, gains):
        seen.append(gains.max_tilt_rad)
        raise Stop

    monkeypatch.setattr(forest, "run_episode", run_episode)
    case = {"label": "ego", "name": "ego", "max_vel": 6.0, "max_acc": 7.0, "density": 0.2, "time_scale": 1000.0,
            "model": None, "overrides": None, "max_tilt_rad": math.radians(55.0)}
    with pytest.raises(Stop):
        forest.run_forest_episode([case], (0, 0))
    with pytest.raises(Stop):
        forest.run_forest_episode([dict(case, max_tilt_rad=None)], (0, 0))
    assert seen == [pytest.approx(math.radians(55.0)), pytest.approx(math.radians(45.0))]
    for bad in ("95", "0", "nan"):
        with pytest.raises(SystemExit):
            forest.main(["--episodes", "1", "--max-tilt-deg", bad])
