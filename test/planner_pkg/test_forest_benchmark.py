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
