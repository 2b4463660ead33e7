"""The planner's own limits (issue 16): plans never command more than max_vel anywhere on the curve
(take-off and replans), a replan starts where a lagging vehicle really is, and the distance term
keeps the curve clear of obstacles it merely grazes."""
import math

import numpy as np
import pytest
from scipy.optimize import check_grad

import autograd_core as ac
from autograd_core.autograd import gradcheck
from planner_pkg.planning.bspline import UniformBSpline, fit_cubic
from planner_pkg.planning.costs import CostProblem, CostWeights, DistanceCost, distance_kernel, total_kernel
from planner_pkg.planning.ego_config import EgoConfig
from planner_pkg.planning.ego_planner import EgoPlanner
from planner_pkg.planning.grid_map import GridMapConfig, OccupancyGridMap
from planner_pkg.planning.planner_manager import PlanManager
from planner_pkg.planning.rebound import OptimizerConfig
from planner_pkg.planning.trajectory import BsplineTrajectory
from planner_pkg.types import VehicleState

VEHICLE_RADIUS = 0.19  # the simulated quadrotor's collision ball (GridMapConfig inflates by 0.2, EGO's map by 0.3)
EGO_MAP_20 = EgoConfig().map.with_overrides({"size_m": (20.0, 20.0, 4.0)})  # the planner's shipped map, 20 m wide


def moving(position, velocity, t):
    return VehicleState(t=t, position=np.asarray(position, float), velocity=np.asarray(velocity, float),
                        attitude=np.array([0.0, 0.0, 0.0, 1.0]), angular_velocity=np.zeros(3))


def dense_peak(traj, n=4000):
    """Highest reference speed, m/s, sampled ``n`` times over the whole trajectory."""
    return max(float(np.linalg.norm(traj.state(t)[1])) for t in np.linspace(traj.t_start, traj.t_end, n))


# -- the curve's peak speed ---------------------------------------------------------------------
def test_max_speed_is_the_curve_peak_not_the_control_point_bound():
    rng = np.random.default_rng(4)
    q = np.cumsum(rng.normal(0.0, 0.3, (12, 3)) + [0.4, 0.0, 0.0], axis=0)
    s = UniformBSpline(q, 0.2)
    t = np.linspace(0.0, s.duration, 20001)
    truth = float(np.linalg.norm(s.evaluate_derivatives(t, 1)[1], axis=1).max())
    assert s.max_speed() == pytest.approx(truth, rel=1e-3)
    assert s.max_speed() <= s.max_derivative_norm(1) + 1e-12


# -- the distance term --------------------------------------------------------------------------
def distance_problem(seed=0, n=12, r=0.45):
    rng = np.random.default_rng(seed)
    q = np.column_stack([np.linspace(0.0, 3.3, n), 0.1 * rng.normal(size=n), 1.0 + 0.05 * rng.normal(size=n)])
    obstacles = np.column_stack([rng.uniform(0.0, 3.3, 40), rng.choice([-1, 1], 40) * rng.uniform(0.2, 0.6, 40),
                                 rng.uniform(0.7, 1.3, 40)])
    return q, CostProblem(n, 0.3, 2.0, 3.0, CostWeights(), obstacle_points=obstacles, safe_distance_m=r)


def test_distance_term_value_is_the_shortfall_at_the_knots_and_midpoints():
    q, problem = distance_problem()
    spline = UniformBSpline(q, problem.dt)
    segs = q.shape[0] - 3
    t = np.concatenate([np.arange(segs + 1), np.arange(segs) + 0.5]) * problem.dt
    pts = spline.evaluate(t)
    d = np.sqrt(((pts[:, None, :] - problem.obstacle_points[None]) ** 2).sum(axis=2)).min(axis=1)
    expected = float((np.maximum(problem.safe_distance_m - d, 0.0) ** 2).sum())
    assert expected > 0.1  # the case exercises the term
    assert distance_kernel(q, problem)[0] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_distance_term_gradient_matches_finite_differences(seed):
    q, problem = distance_problem(seed)
    n = q.shape[0]
    err = check_grad(lambda x: distance_kernel(x.reshape(n, 3), problem)[0],
                     lambda x: distance_kernel(x.reshape(n, 3), problem)[1].ravel(), q.ravel(), epsilon=1e-7)
    assert err < 1e-5 * max(1.0, float(np.linalg.norm(distance_kernel(q, problem)[1])))
    t = ac.from_numpy(q.copy())
    t.requires_grad_(True)
    assert gradcheck(lambda x: DistanceCost.apply(x, problem), (t,))


def test_distance_term_is_off_without_obstacles_and_far_from_them():
    q, problem = distance_problem()
    far = CostProblem(q.shape[0], 0.3, 2.0, 3.0, CostWeights(), obstacle_points=[[0.0, 50.0, 1.0]],
                      safe_distance_m=0.45)
    none = CostProblem(q.shape[0], 0.3, 2.0, 3.0, CostWeights())
    for p in (far, none):
        value, grad = distance_kernel(q, p)
        assert value == 0.0 and not grad.any()
    # the total adds it with its weight
    off = CostProblem(q.shape[0], 0.3, 2.0, 3.0, CostWeights(distance=0.0), obstacle_points=problem.obstacle_points,
                      safe_distance_m=0.45)
    w = problem.weights.distance
    assert w > 0
    assert total_kernel(q, problem)[0] == pytest.approx(total_kernel(q, off)[0] + w * distance_kernel(q, problem)[0])


@pytest.mark.parametrize("kwargs", [dict(obstacle_points=[[0.0, 0.0, np.nan]], safe_distance_m=0.4),
                                    dict(obstacle_points=[[0.0, 0.0, 1.0]], safe_distance_m=0.0),
                                    dict(obstacle_points=[[0.0, 0.0, 1.0]], safe_distance_m=math.inf)])
def test_bad_obstacles_are_rejected(kwargs):
    with pytest.raises(ValueError):
        CostProblem(8, 0.3, 2.0, 3.0, CostWeights(), **kwargs)


def test_occupied_points_are_the_occupied_voxel_centres_in_the_box():
    m = OccupancyGridMap(GridMapConfig(size_m=(8.0, 8.0, 3.0)), center=(0.0, 0.0, 1.0))
    hits = np.array([[1.03, 0.51, 1.02], [-2.47, 1.96, 0.74], [3.5, -3.5, 2.2]])
    for _ in range(4):
        m.insert_point_cloud(np.array([0.0, 0.0, 1.0]), hits)
    pts = m.occupied_points([-3.0, -1.0, 0.5], [2.0, 3.0, 1.5])
    expected = np.floor(hits[:2] / 0.1) * 0.1 + 0.05  # the voxel centres of the first two hits
    assert pts.shape == (2, 3)
    np.testing.assert_allclose(pts[np.argsort(pts[:, 0])], expected[np.argsort(expected[:, 0])], atol=1e-9)
    assert m.occupied_points([20.0, 20.0, 0.0], [21.0, 21.0, 1.0]).shape == (0, 3)
    with pytest.raises(ValueError):
        m.occupied_points([0.0, 0.0, np.nan], [1.0, 1.0, 1.0])


# -- the speed limit over the whole curve ---------------------------------------------------------
def trunk_map(trunks, size=(20.0, 20.0, 4.0), center=(3.0, 0.0, 1.0)):
    """A map of vertical trunks ((x, y, r), ...) seen from four sides (each side's facing half)."""
    m = OccupancyGridMap(GridMapConfig(size_m=size), center=center)
    th = np.linspace(0.0, 2 * np.pi, 240, endpoint=False)
    z = np.arange(0.3, 3.2, 0.05)
    T, Z = np.meshgrid(th, z)
    normal = np.stack([np.cos(T).ravel(), np.sin(T).ravel()], axis=1)
    for x, y, r in trunks:
        surface = np.column_stack([np.array([x, y]) + r * normal, Z.ravel()])
        for eye in ([x - 4.0, y + 0.2, 1.0], [x, y - 4.0, 1.0], [x, y + 4.0, 1.0], [x + 4.0, y, 1.0]):
            eye = np.array(eye)
            seen = ((eye[:2] - surface[:, :2]) * normal).sum(axis=1) > 0
            for _ in range(3):
                m.insert_point_cloud(eye, surface[seen])
    return m


def manager(grid_map, v, acc):
    cfg = EgoConfig(max_vel_mps=v, max_acc_mps2=acc)
    opt = OptimizerConfig(max_vel_mps=v, max_acc_mps2=acc, max_time_s=5.0)
    return PlanManager(grid_map, opt, cfg.knot_dt_s)


@pytest.mark.parametrize("v,acc", [(2.0, 3.0), (4.0, 6.0), (6.0, 8.0)])
def test_takeoff_and_replan_plans_never_exceed_max_vel(v, acc):
    # free space and a trunk on the way: plans from rest (every initial guess) and replans at
    # cruise speed, sampled densely: the reference never asks for more than max_vel
    for trunks in ((), ((3.5, 0.1, 0.4),)):
        pm = manager(trunk_map(trunks), v, acc)
        start = np.array([0.0, 0.0, 1.0])
        peaks = []
        for target, tvel in (((7.5, 0.0, 1.0), (v, 0.0, 0.0)), ((7.5, 0.0, 1.0), (0.0, 0.0, 0.0)),
                             ((5.0, 3.0, 1.5), (0.8 * v, 0.6 * v, 0.0))):
            for kw in (dict(), dict(guided=True), dict(via=np.array([3.7, 1.5, 1.0]))):
                out = pm.plan(start, np.zeros(3), np.zeros(3), np.array(target), np.array(tvel), 0.0, 0.0, **kw)
                if out.success:
                    peaks.append(dense_peak(out.trajectory))
        assert len(peaks) >= 6
        first = pm.plan(start, np.zeros(3), np.zeros(3), np.array([7.5, 0.0, 1.0]), np.array([v, 0.0, 0.0]),
                        0.0, 0.0, guided=True).trajectory
        t1 = first.t_start + 0.6 * first.duration
        p, vel, a = first.state(t1)
        for target, kw in ((p + [7.5, 0.5, 0.0], dict(previous=first)), (p + [7.0, 2.5, 0.0], dict()),
                           (p + [7.0, -2.0, 0.0], dict(guided=True))):
            out = pm.plan(p, vel, a, target, np.array([v, 0.0, 0.0]), t1, 0.0, **kw)
            assert out.success, out.message
            peaks.append(dense_peak(out.trajectory))
            np.testing.assert_allclose(out.trajectory.state(t1)[0], p, atol=1e-9)  # starts where asked
        assert max(peaks) <= v * (1.0 + 1e-3), (trunks, np.round(np.array(peaks) / v, 4))


def test_a_start_faster_than_the_limit_only_slows_down():
    pm = manager(trunk_map(()), 2.0, 3.0)
    out = pm.plan(np.array([0.0, 0.0, 1.0]), np.array([2.6, 0.0, 0.0]), np.zeros(3), np.array([7.5, 0.0, 1.0]),
                  np.array([2.0, 0.0, 0.0]), 0.0, 0.0)
    assert out.success, out.message
    assert dense_peak(out.trajectory) <= 2.6 * (1.0 + 1e-3)


# -- a replan starts where the vehicle is, not where the reference got to ----------------------------
def test_a_replan_starts_at_the_point_of_the_reference_the_lagging_vehicle_reached():
    planner = EgoPlanner(EgoConfig(max_vel_mps=4.0, max_acc_mps2=6.0, map=EGO_MAP_20))
    start, goal = np.array([0.0, 0.0, 1.0]), np.array([30.0, 0.0, 1.0])
    planner.reset(start, goal)
    first = planner.update(VehicleState.at_rest(start, t=0.0), None)
    assert isinstance(first, BsplineTrajectory)
    # 0.8 s later (the replan timer is 1 s: the planner just follows the reference) the vehicle
    # is 0.4 m behind its reference, on the path
    t = 1.0
    p_ref = first.state(t)[0]
    lagging = p_ref - np.array([0.4, 0.0, 0.0])
    ts = np.linspace(0.0, t, 10001)
    xs = first.spline.evaluate(ts)[:, 0]
    t_sync = float(ts[np.argmin(np.abs(xs - lagging[0]))])  # where the reference was at the vehicle
    v_sync = first.state(t_sync)[1]
    state = moving(lagging, v_sync, t)
    new = planner.update(state, None)
    assert new is not None and new is not first, planner.fsm.history[-1]
    p0, v0, _ = new.state(t)
    np.testing.assert_allclose(p0, first.state(t_sync)[0], atol=0.02)  # from the vehicle's point ...
    # ... at the speed the reference had there (to within the few per cent a time stretch to the
    # speed limit may take off it, see PlanManager._speed_limited)
    assert np.linalg.norm(v0 - v_sync) <= 0.03 * np.linalg.norm(v_sync)
    assert np.linalg.norm(p0 - p_ref) > 0.35


def test_a_small_lag_keeps_the_reference_continuous():
    planner = EgoPlanner(EgoConfig(map=EGO_MAP_20))
    start = np.array([0.0, 0.0, 1.0])
    planner.reset(start, np.array([30.0, 0.0, 1.0]))
    first = planner.update(VehicleState.at_rest(start, t=0.0), None)
    t = 1.0
    p_ref, v_ref, _ = first.state(t)
    new = planner.update(moving(p_ref - [0.05, 0.0, 0.0], v_ref, t), None)
    assert new is not None and new is not first
    np.testing.assert_allclose(new.state(t)[0], p_ref, atol=1e-6)


@pytest.mark.parametrize("lag, lag_replan_m, replans", [(0.3, 0.2, True), (0.15, 0.2, False), (0.3, 0.0, False)])
def test_a_vehicle_lagging_its_reference_gets_a_new_plan_at_once(lag, lag_replan_m, replans):
    """Half a second after take-off (before the 1 s timer and the 1.5 m progress replan) a vehicle
    more than lag_replan_m behind its reference is replanned from where it is; less, or with
    the rule off, it keeps the trajectory."""
    planner = EgoPlanner(EgoConfig(max_vel_mps=4.0, max_acc_mps2=6.0, lag_replan_m=lag_replan_m,
                                   map=EGO_MAP_20))
    start = np.array([0.0, 0.0, 1.0])
    planner.reset(start, np.array([30.0, 0.0, 1.0]))
    first = planner.update(VehicleState.at_rest(start, t=0.0), None)
    assert isinstance(first, BsplineTrajectory)
    t = 0.5
    p_ref, v_ref, _ = first.state(t)
    assert np.linalg.norm(p_ref - start) - lag < 1.5  # no progress replan
    new = planner.update(moving(p_ref - [lag, 0.0, 0.0], v_ref, t), None)
    if replans:
        assert new is not None and new is not first
        assert "lags the reference" in str(planner.fsm.history[-2:])
        # from the vehicle's point on the reference, not from the reference's point at t
        assert np.linalg.norm(new.state(t)[0] - (p_ref - [lag, 0.0, 0.0])) < 0.05
    else:
        assert new is None and planner.trajectory is first


# -- clearance ------------------------------------------------------------------------------------
def surface_clearance(traj, trunks, n=1500):
    """Smallest gap, m, between the vehicle ball on the reference path and the trunks' surfaces."""
    ts = np.linspace(traj.t_start, traj.t_end, n)
    p = np.array([traj.state(t)[0] for t in ts])
    return min(float((np.hypot(p[:, 0] - x, p[:, 1] - y) - r).min()) for x, y, r in trunks) - VEHICLE_RADIUS


@pytest.mark.parametrize("trunks", [
    # the README forest's 0.04 m case: a trunk whose surface is 0.23 m from the straight line,
    # just outside the 0.2 m inflation (EGO's collision term never sees it)
    ((3.0, -0.588, 0.358),),
    # a corridor whose straight line runs close to one side: 0.24 m from one trunk, 0.84 m from the other
    ((3.0, -0.6, 0.36), (3.2, 1.2, 0.36)),
])
def test_the_plan_keeps_a_tenth_of_a_metre_beyond_the_radius_in_a_known_corridor(trunks):
    m = trunk_map(trunks)
    start, target = np.array([-1.0, 0.0, 1.0]), np.array([7.0, 0.0, 1.0])
    line = np.linspace(start, target, 400)
    assert min(float((np.hypot(line[:, 0] - x, line[:, 1] - y) - r).min()) for x, y, r in trunks) < 0.29
    assert not m.is_blocked(line).any()  # the straight line is collision free: only a clearance term moves it
    pm = manager(m, 2.0, 3.0)
    for kw in (dict(), dict(guided=True)):
        out = pm.plan(start, np.zeros(3), np.zeros(3), target, np.zeros(3), 0.0, 0.0, **kw)
        assert out.success, out.message
        assert surface_clearance(out.trajectory, trunks) >= 0.1, kw



# -- failed plans try the other initial guesses --------------------------------------------------
def test_after_failures_each_tick_starts_from_the_next_initial_guess(monkeypatch):
    # every plan fails and takes longer than the retry budget (a fake clock: 1 s per plan), so
    # each tick tries one guess: the guesses must take turns instead of the first one every time
    import planner_pkg.planning.ego_planner as ego_mod
    from planner_pkg.planning.planner_manager import PlanOutcome

    clock = [0.0]
    monkeypatch.setattr(ego_mod.time, "perf_counter", lambda: clock[0])
    planner = EgoPlanner(EgoConfig(map=EGO_MAP_20))
    start = np.array([0.0, 0.0, 1.0])
    planner.reset(start, np.array([30.0, 0.0, 1.0]))
    tried = []

    def failing_plan(*args, **kwargs):
        clock[0] += 1.0
        tried.append("guided" if kwargs.get("guided") else "via" if kwargs.get("via") is not None else "previous")
        return PlanOutcome(None, "optimisation failed: fake")

    monkeypatch.setattr(planner.manager, "plan", failing_plan)
    for k in range(6):
        planner.update(VehicleState.at_rest(start, t=0.1 * k), None)
    assert len(tried) == 6  # one guess per tick
    assert tried[0] == "guided" and set(tried) == {"guided", "via"}
    assert tried.count("via") >= 3
