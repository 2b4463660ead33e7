"""The rebound optimiser: a straight line through a cylinder is pushed out to the clearance s_f;
refine keeps the start state while meeting the limits; every exit is a result, not an exception."""
import numpy as np
import pytest

from planner_pkg.planning.bspline import UniformBSpline, fit_cubic
from planner_pkg.planning.grid_map import GridMapConfig, OccupancyGridMap
from planner_pkg.planning.rebound import OptimizerConfig, OptimStatus, ReboundOptimizer

RADIUS = 0.5
CENTRE = np.array([0.0, 0.0])


def cylinder_map(viewpoints=((-4.0, 0.3), (0.0, -4.0), (0.0, 4.0), (4.0, 0.0))):
    """Map of a vertical cylinder (r 0.5 m at the origin) seen from a few viewpoints: each view
    contributes the points of the half of the surface facing it, as a depth camera would."""
    m = OccupancyGridMap(GridMapConfig(size_m=(14.0, 14.0, 3.0), inflation_m=0.2, floor_m=0.3, ceiling_m=2.5),
                         center=(0.0, 0.0, 1.0))
    th = np.linspace(0.0, 2 * np.pi, 180, endpoint=False)
    z = np.arange(0.1, 2.5, 0.05)
    T, Z = np.meshgrid(th, z)
    normal = np.stack([np.cos(T).ravel(), np.sin(T).ravel()], axis=1)
    surface = np.column_stack([CENTRE + RADIUS * normal, Z.ravel()])
    for vx, vy in viewpoints:
        eye = np.array([vx, vy, 1.0])
        visible = ((eye[:2] - surface[:, :2]) * normal).sum(axis=1) > 0
        for _ in range(3):
            m.insert_point_cloud(eye, surface[visible])
    return m


def straight_line(y=0.05, speed=1.0, dt=0.24, x0=-3.0, x1=3.0):
    k = int(round((x1 - x0) / (speed * dt))) + 1
    xs = np.linspace(x0, x1, k)
    pts = np.stack([xs, np.full(k, y), np.ones(k)], axis=1)
    v = [(x1 - x0) / ((k - 1) * dt), 0.0, 0.0]
    return fit_cubic(pts, dt, v, v, np.zeros(3), np.zeros(3))


def clearance_to_cylinder(spline, n=600):
    p = spline.evaluate(np.linspace(0.0, spline.duration, n))
    return float((np.hypot(p[:, 0] - CENTRE[0], p[:, 1] - CENTRE[1]) - RADIUS).min())


@pytest.mark.parametrize("y", [0.05, -0.2, 0.0])
def test_straight_line_through_a_cylinder_is_pushed_out_to_the_clearance(y):
    m = cylinder_map()
    line = straight_line(y=y)
    assert clearance_to_cylinder(line) < 0  # it goes through the trunk
    cfg = OptimizerConfig(max_vel_mps=2.0, check_fraction=1.0, max_time_s=1.0)
    result = ReboundOptimizer(m, cfg).optimize(line)
    assert result.success, result.message
    assert result.pairs > 0 and result.astar_calls >= 1
    s_f = cfg.weights.clearance_m
    assert clearance_to_cylinder(result.spline) >= s_f
    # the fixed ends did not move
    np.testing.assert_allclose(result.spline.control_points[:3], line.control_points[:3])
    np.testing.assert_allclose(result.spline.control_points[-3:], line.control_points[-3:])


def test_a_collision_free_line_stays_where_it_is():
    m = cylinder_map()
    line = straight_line(y=2.5)
    result = ReboundOptimizer(m, OptimizerConfig(check_fraction=1.0)).optimize(line)
    assert result.success and result.pairs == 0 and result.astar_calls == 0
    np.testing.assert_allclose(result.spline.control_points, line.control_points, atol=1e-3)


def test_refine_meets_the_limits_and_keeps_the_start_state():
    m = cylinder_map()
    # 3.5 m/s in the middle against a 2 m/s limit, entered and left at 1.5 m/s
    k = 16
    pts = np.stack([np.linspace(-3.0, 3.0, k), np.full(k, 2.5), np.ones(k)], axis=1)
    v = np.array([1.5, 0.0, 0.0])
    fast = fit_cubic(pts, 6.0 / (3.5 * (k - 1)), v, v, np.zeros(3), np.zeros(3))
    opt = ReboundOptimizer(m, OptimizerConfig(max_vel_mps=2.0, max_acc_mps2=3.0))
    assert fast.feasibility_ratio(2.0, 3.0) > 1.5
    result = opt.refine(fast)
    assert result.success, result.message
    refined = result.spline
    assert refined.feasibility_ratio(2.0, 3.0) < 1.1
    assert result.time_ratio > 1.0
    for a, b in zip(fast.evaluate_derivatives(0.0, 2), refined.evaluate_derivatives(0.0, 2)):
        np.testing.assert_allclose(a, b, atol=1e-9)  # continuity with the vehicle's reference
    np.testing.assert_allclose(refined.evaluate(refined.duration), fast.evaluate(fast.duration), atol=1e-9)
    # a feasible curve is returned as is
    assert opt.refine(refined).spline is refined or refined.feasibility_ratio(2.0, 3.0) > 1.05


def test_too_short_and_boxed_in_give_results_not_exceptions():
    m = cylinder_map()
    short = UniformBSpline(np.zeros((5, 3)) + [5.0, 5.0, 1.0], 0.2)
    r = ReboundOptimizer(m).optimize(short)
    assert r.status is OptimStatus.TOO_SHORT and "fixed" in r.message
    # the end of the line is deep inside the trunk: whatever happens is reported, bounded
    into = straight_line(x0=-3.0, x1=0.0)
    r = ReboundOptimizer(m, OptimizerConfig(check_fraction=1.0, max_rebounds=2, max_weight_doublings=1)).optimize(into)
    assert r.status in (OptimStatus.SUCCESS, OptimStatus.COLLISION, OptimStatus.TIME_LIMIT)
    assert r.rebounds <= 2 and r.doublings <= 1


@pytest.mark.parametrize("kwargs", [dict(max_vel_mps=0.0), dict(max_acc_mps2=-3.0), dict(max_iterations=0),
                                    dict(check_fraction=0.0), dict(max_rebounds=-1), dict(max_time_s=0.0),
                                    dict(max_accept_ratio=0.5), dict(preconditioner_damping=-0.1)])
def test_bad_config_names_the_key(kwargs):
    with pytest.raises(ValueError, match=list(kwargs)[0]):
        OptimizerConfig(**kwargs)


def peak_jerk(spline):
    return float((np.linalg.norm(np.diff(spline.control_points, 3, axis=0), axis=1) / spline.dt ** 3).max())


@pytest.mark.parametrize("y", [0.05, -0.2])
def test_the_jerk_limit_softens_a_hard_swerve(y):
    # a trunk 3 m ahead at 5 m/s: without a jerk limit the swerve's jerk peaks near twice what
    # turns a 6 m/s^2 acceleration around in 0.1 s (measured 114-125 m/s^3); with jerk_time_s 0.1
    # the feasibility term holds it near that 60 m/s^3 (soft: measured 70-81) and the curve
    # still keeps out of the map's 0.2 m inflation (measured 0.32-0.36 m from the trunk)
    m = cylinder_map()
    line = straight_line(y=y, speed=5.0, dt=0.1, x0=-3.0, x1=4.5)
    peaks = {}
    for jerk_time_s in (0.0, 0.1):
        cfg = OptimizerConfig(max_vel_mps=5.0, max_acc_mps2=6.0, check_fraction=1.0, max_time_s=10.0,
                              jerk_time_s=jerk_time_s)
        optimizer = ReboundOptimizer(m, cfg)
        assert optimizer.max_jerk_mps3 == (60.0 if jerk_time_s else None)
        result = optimizer.optimize(line)
        assert result.success, result.message
        assert clearance_to_cylinder(result.spline) > 0.25
        peaks[jerk_time_s] = peak_jerk(result.spline)
    assert peaks[0.0] > 1.8 * 60.0
    assert peaks[0.1] < 1.4 * 60.0 and peaks[0.1] < 0.75 * peaks[0.0]


@pytest.mark.parametrize("y", [0.05, 0.3, -0.2])
def test_the_smoothness_preconditioner_pushes_the_line_out_in_fewer_iterations(y):
    # the same rebound problem, plain L-BFGS against L-BFGS in the coordinates that whiten the
    # smoothness term: both leave the trunk, the preconditioned one in a third of the iterations
    # or fewer (measured: 4-5 against 17-26)
    m = cylinder_map()
    line = straight_line(y=y)
    results = {}
    for damping in (0.0, 0.1):
        cfg = OptimizerConfig(max_vel_mps=2.0, check_fraction=1.0, max_time_s=10.0, preconditioner_damping=damping)
        results[damping] = ReboundOptimizer(m, cfg).optimize(line)
        assert results[damping].success and clearance_to_cylinder(results[damping].spline) > 0.3
    assert 3 * results[0.1].iterations <= results[0.0].iterations


def test_an_iteration_budget_is_hard_and_its_result_still_judged():
    # pushing a line out of the trunk takes plain L-BFGS more than a handful of iterations (the
    # preconditioned default needs 4: test below); a smaller budget ends the minimisation where
    # it runs out (not at the next rebound), and the curve it left is accepted only if it is
    # collision free
    m = cylinder_map()
    line = straight_line(y=0.05)
    cfg = OptimizerConfig(max_vel_mps=2.0, check_fraction=1.0, max_time_s=10.0, preconditioner_damping=0.0)
    full = ReboundOptimizer(m, cfg).optimize(line)
    assert full.success and full.iterations > 12
    for budget in (1, 4, 12):
        r = ReboundOptimizer(m, cfg).optimize(line, max_iterations=budget)
        assert 1 <= r.iterations <= budget
        assert r.status in (OptimStatus.SUCCESS, OptimStatus.TIME_LIMIT)
        if r.success:
            assert clearance_to_cylinder(r.spline) > 0
        else:
            assert f"{r.iterations} L-BFGS iterations" in r.message
    with pytest.raises(ValueError, match="max_iterations"):
        ReboundOptimizer(m, cfg).optimize(line, max_iterations=0)
    # the refit of refine() too
    k = 16
    pts = np.stack([np.linspace(-3.0, 3.0, k), np.full(k, 2.5), np.ones(k)], axis=1)
    v = np.array([1.5, 0.0, 0.0])
    fast = fit_cubic(pts, 6.0 / (3.5 * (k - 1)), v, v, np.zeros(3), np.zeros(3))
    opt = ReboundOptimizer(m, OptimizerConfig(max_vel_mps=2.0, max_acc_mps2=3.0))
    assert opt.refine(fast).iterations > 1
    assert opt.refine(fast, max_iterations=1).iterations == 1
    none_left = opt.refine(fast, max_iterations=0)  # returned as is, and said so
    assert none_left.status is OptimStatus.TIME_LIMIT and none_left.spline is fast and none_left.iterations == 0


def test_the_shared_obstacle_set_gives_each_box_the_maps_points_and_reads_the_map_once():
    from planner_pkg.planning import rebound

    m = cylinder_map()
    shared = rebound._ObstacleSet(m, slack_m=0.5)
    lo, hi = np.array([-1.0, -1.0, 0.5]), np.array([1.0, 1.0, 1.5])
    rng = np.random.default_rng(3)
    boxes = [(lo, hi)] + [(lo + d, hi + e) for d, e in rng.uniform(-0.45, 0.45, size=(20, 2, 3))]
    boxes += [(lo + 0.03, hi - 0.97), (lo + 0.05, lo + 0.05)]  # thin and empty boxes
    for a, b in boxes:
        expected = m.occupied_points(a, b)
        np.testing.assert_array_equal(shared.in_box(a, b), expected)
    assert shared.reads == 1 and m.occupied_points(lo, hi).shape[0] > 100
    np.testing.assert_array_equal(shared.in_box(lo + 0.6, hi + 0.6), m.occupied_points(lo + 0.6, hi + 0.6))
    assert shared.reads == 2  # beyond the slack: read again


def test_boxes_with_the_same_points_share_one_kd_tree():
    from scipy.spatial import cKDTree

    from planner_pkg.planning import rebound

    m = cylinder_map()
    shared = rebound._ObstacleSet(m, slack_m=0.5)
    lo, hi = np.array([-1.0, -1.0, 0.5]), np.array([1.0, 1.0, 1.5])
    pts, tree = shared.for_box(lo, hi)
    assert pts.shape[0] > 100 and tree.n == pts.shape[0] and shared.trees_built == 1
    same, same_tree = shared.for_box(lo + 0.01, hi - 0.01)  # the same voxel centres inside
    assert same_tree is tree and shared.trees_built == 1
    np.testing.assert_array_equal(same, pts)
    other, other_tree = shared.for_box(lo + 0.2, hi)
    assert other_tree is not tree and shared.trees_built == 2
    np.testing.assert_array_equal(other, m.occupied_points(lo + 0.2, hi))
    rng = np.random.default_rng(5)
    probe = rng.uniform(lo, hi, size=(50, 3))
    for points, kd in ((pts, tree), (other, other_tree)):
        np.testing.assert_array_equal(kd.query(probe)[0], cKDTree(points).query(probe)[0])
    empty, none = shared.for_box(np.array([5.0, 5.0, 1.0]), np.array([5.5, 5.5, 1.5]))
    assert empty.shape == (0, 3) and none is None


def test_a_plan_reads_its_obstacles_once_for_the_rebound_and_the_refit_and_plans_as_without(monkeypatch):
    from planner_pkg.planning import rebound
    from planner_pkg.planning.planner_manager import PlanManager

    m = cylinder_map()
    reads = []
    original = m.occupied_points
    monkeypatch.setattr(m, "occupied_points", lambda lo, hi: reads.append(1) or original(lo, hi))
    cfg = OptimizerConfig(max_vel_mps=2.0, max_acc_mps2=3.0, max_time_s=10.0)
    args = (np.array([-3.0, 0.05, 1.0]), np.array([1.5, 0.0, 0.0]), np.zeros(3), np.array([3.0, 0.05, 1.0]),
            np.zeros(3), 0.0, 0.0)
    shared = PlanManager(m, cfg, knot_dt=0.24).plan(*args)
    shared_reads = len(reads)

    class PerCall(rebound._ObstacleSet):  # the map read for every box, as a plan without the set did
        def in_box(self, lo, hi):
            return self.map.occupied_points(lo, hi)

    reads.clear()
    monkeypatch.setattr(rebound, "_ObstacleSet", PerCall)
    own = PlanManager(m, cfg, knot_dt=0.24).plan(*args)
    assert shared.success and own.success
    assert shared.refine.iterations > 0  # the refit ran (and read obstacles)
    assert shared_reads == 1 and len(reads) >= 2  # the rebound's and the refit's minimisations
    np.testing.assert_array_equal(shared.trajectory.spline.control_points, own.trajectory.spline.control_points)
    assert shared.message == own.message


def test_an_optimize_call_reads_its_obstacles_once_and_plans_as_with_a_read_per_minimisation(monkeypatch):
    from planner_pkg.planning import rebound
    from planner_pkg.planning.costs import CostWeights

    m = cylinder_map()
    calls, reads = [], []

    class Counting(rebound._ObstacleSet):
        def in_box(self, lo, hi):
            out = super().in_box(lo, hi)
            calls[-1] += 1
            reads[-1] = self.reads
            return out

    class PerBox(rebound._ObstacleSet):  # the map read for each minimisation's box, as before
        def in_box(self, lo, hi):
            return self.map.occupied_points(lo, hi)

    # a weak collision term: the first minimisations leave the line in the trunk, so the weight is
    # doubled and the minimisation restarted (several problems in one call)
    for weight, y in ((1e-4, 0.05), (5e-4, 0.05), (2e-3, -0.2), (5e-4, 0.3)):
        cfg = OptimizerConfig(max_vel_mps=2.0, check_fraction=1.0, max_time_s=10.0, warm_start=False,
                              weights=CostWeights(collision=weight), max_weight_doublings=8)
        monkeypatch.setattr(rebound, "_ObstacleSet", Counting)
        calls.append(0)
        reads.append(0)
        shared = ReboundOptimizer(m, cfg).optimize(straight_line(y=y))
        monkeypatch.setattr(rebound, "_ObstacleSet", PerBox)
        own = ReboundOptimizer(m, cfg).optimize(straight_line(y=y))
        assert shared.status is own.status
        assert (shared.iterations, shared.evaluations, shared.doublings, shared.rebounds) == \
            (own.iterations, own.evaluations, own.doublings, own.rebounds)
        np.testing.assert_array_equal(shared.spline.control_points, own.spline.control_points)
    assert max(calls) >= 3 and sum(reads) < sum(calls)  # several minimisations per call, fewer reads


def test_guide_path_expansions_are_charged_to_the_iteration_budget(monkeypatch):
    # with guide_expansions_per_iteration = k, every k A* expansions of the rebound's guide-path
    # searches count as one L-BFGS iteration against the budget (budget_used says how much was
    # spent): a budget the iterations alone fit is then too small
    from planner_pkg.planning import collision_pairs

    expansions = []
    search = collision_pairs.astar_search

    def counting(grid_map, start, goal, config):
        r = search(grid_map, start, goal, config)
        expansions.append(r.expansions)
        return r

    monkeypatch.setattr(collision_pairs, "astar_search", counting)
    m = cylinder_map()
    line = straight_line(y=0.05)
    # plain L-BFGS from the line as it is: pushing it out takes more than 12 iterations
    kw = dict(max_vel_mps=2.0, check_fraction=1.0, max_time_s=10.0, preconditioner_damping=0.0, warm_start=False)
    assert OptimizerConfig().guide_expansions_per_iteration == 28.0  # charged by default
    free = ReboundOptimizer(m, OptimizerConfig(guide_expansions_per_iteration=0.0, **kw)).optimize(line)  # not charged
    n, searched = free.iterations, sum(expansions)
    assert free.success and free.budget_used == n > 12 and searched > 20
    per = searched / (n - 1.0)  # the searches cost all but one of the iterations it needs
    charged_cfg = OptimizerConfig(guide_expansions_per_iteration=per, **kw)
    expansions.clear()
    enough = ReboundOptimizer(m, charged_cfg).optimize(line, max_iterations=2 * n)
    assert enough.success and enough.iterations == n and sum(expansions) == searched  # the same plan
    assert enough.budget_used == pytest.approx(2 * n - 1)
    expansions.clear()
    short = ReboundOptimizer(m, charged_cfg).optimize(line, max_iterations=n)
    assert short.status is OptimStatus.TIME_LIMIT and short.iterations == 1
    assert short.budget_used == pytest.approx(short.iterations + sum(expansions) / per) and short.budget_used >= n
    assert f"{short.iterations} L-BFGS iterations and {sum(expansions)} guide-path A* expansions" in short.message
    uncharged = ReboundOptimizer(m, OptimizerConfig(guide_expansions_per_iteration=0.0, **kw)).optimize(
        line, max_iterations=n)  # the iterations alone fit
    assert uncharged.success and uncharged.iterations == n
