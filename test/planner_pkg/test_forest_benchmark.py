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

    def run_episode(world, planner, start, goal, config, gains, camera):
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


def test_the_camera_size_option_reaches_the_simulated_camera(monkeypatch):
    """``--camera-px W H`` flies EGO and direct with a W x H depth image (the default camera
    otherwise); the policy (its network reads 64 x 48) and a bad size are refused before anything
    flies."""
    forest = _forest_module()
    seen = []

    class Stop(Exception):
        pass

    def run_episode(world, planner, start, goal, config, gains, camera):
        seen.append((camera.width_px, camera.height_px, camera.hfov_deg))
        raise Stop

    monkeypatch.setattr(forest, "run_episode", run_episode)
    case = {"label": "ego", "name": "ego", "max_vel": 6.0, "max_acc": 7.0, "density": 0.2, "time_scale": 1000.0,
            "model": None, "overrides": None, "camera_px": [128, 96]}
    for c in (case, dict(case, camera_px=None)):
        with pytest.raises(Stop):
            forest.run_forest_episode([c], (0, 0))
    assert seen == [(128, 96, 90.0), (64, 48, 90.0)]
    for bad in (["--camera-px", "0", "96"], ["--camera-px", "128", "96", "--planners", "ego", "policy"]):
        with pytest.raises(SystemExit):
            forest.main(["--episodes", "1"] + bad)


def test_the_true_occupancy_is_every_voxel_within_half_a_voxel_of_a_trunk():
    """``true_occupancy`` against the world's own signed distance at every voxel centre of a
    window below the trunks' tops (the forest's case: trunks taller than the map's ceiling), and
    the trunk tops where the window reaches above them; anything but a trunk is refused."""
    from planner_pkg.planning.grid_map import GridMapConfig, OccupancyGridMap
    from planner_pkg.world import Box, Cylinder, World

    forest = _forest_module()
    world = World((-5.0, -5.0, 0.0), (5.0, 5.0, 6.0), [Cylinder((1.02, 0.33), 0.41, 6.0), Cylinder((-2.5, -1.1), 0.27, 5.5),
                                                      Cylinder((2.0, 3.9), 0.5, 6.0)])
    m = OccupancyGridMap(GridMapConfig(size_m=(6.0, 6.0, 2.0)), center=(0.0, 0.0, 1.5))
    occ = forest.true_occupancy(world, m)
    idx = np.argwhere(np.ones(tuple(m.dims), dtype=bool))
    want = (world.signed_distance(m.index_to_position(idx)) <= 0.5 * m.res).reshape(tuple(m.dims))
    np.testing.assert_array_equal(occ, want)
    assert 0 < occ.sum() < occ.size
    # a short trunk inside the window: its voxels end half a voxel above its top
    short = World((-5.0, -5.0, 0.0), (5.0, 5.0, 6.0), [Cylinder((0.0, 0.0), 0.3, 1.2)])
    occ = forest.true_occupancy(short, m)
    column = occ[m.local_index(np.array([[0.05, 0.05, 1.0]]))[0][0], m.local_index(np.array([[0.05, 0.05, 1.0]]))[0][1]]
    z = (np.arange(m.dims[2]) + m.origin[2] + 0.5) * m.res
    np.testing.assert_array_equal(column, z <= 1.25)
    with pytest.raises(ValueError, match="trunks only"):
        forest.true_occupancy(World((-5.0, -5.0, 0.0), (5.0, 5.0, 6.0), [Box((1.0, 0.0, 1.0), (0.5, 0.5, 2.0))]), m)


def test_the_truth_map_planner_sets_its_map_to_the_world_and_again_when_it_moves():
    """``TruthMapPlanner``: after the first update the EGO planner's map is the true occupancy
    (every voxel observed); when the window moves with the vehicle it is set again (the new
    voxels are known too); the planner's stats and config are its own."""
    from planner_pkg.planning.ego_planner import EgoConfig, EgoPlanner
    from planner_pkg.types import VehicleState

    forest = _forest_module()
    world = forest.forest_world(3)
    inner = EgoPlanner(EgoConfig())
    planner = forest.TruthMapPlanner(inner, world)
    start = np.array(forest.START)
    planner.reset(start, np.array(forest.GOAL))
    planner.update(VehicleState.at_rest(start, t=0.0), None)
    m = inner.map
    np.testing.assert_array_equal(m.occupied, forest.true_occupancy(world, m))
    assert (m.log_odds >= m._known_min).all() and m.occupied.any()
    assert planner.stats is inner.stats and planner.config is inner.config
    origin = m.origin.copy()
    moved = start + np.array([5.0, 0.0, 0.0])
    planner.update(VehicleState(0.1, moved, np.zeros(3), [0.0, 0.0, 0.0, 1.0], np.zeros(3)), None)
    assert (m.origin != origin).any()
    np.testing.assert_array_equal(m.occupied, forest.true_occupancy(world, m))
    assert m.is_known(moved[None] + np.array([[11.0, 0.0, 0.0], [-1.0, 11.0, 0.5]])).all()
