"""EGO-Swarm's planning side: the swarm and terminal cost (value against a brute-force evaluation
of the other drones' B-splines, gradient against finite differences and torch), the broadcast
table (timeout, stale drones as static obstacles, malformed broadcasts), the committed-trajectory
check, and the optimiser keeping its distance from another drone."""
import math

import numpy as np
import pytest

from planner_pkg.planning.bspline import UniformBSpline, fit_cubic
from planner_pkg.planning.costs import (CostProblem, CostWeights, FreeObjective, TotalCost, smoothness_preconditioner,
                                        total_kernel, value_and_grad)
from planner_pkg.planning.grid_map import GridMapConfig, OccupancyGridMap
from planner_pkg.planning.rebound import OptimizerConfig, ReboundOptimizer
from planner_pkg.planning.swarm import (LocalBroadcast, SwarmConfig, SwarmCost, SwarmPlanContext, SwarmTrajectoryTable,
                                        SwarmView, broadcast_spline, hover_spline, swarm_kernel)
from planner_pkg.planning.trajectory import BsplineTrajectory

import autograd_core as ac

W = CostWeights()


def line_spline(p0, p1, duration, dt=0.2):
    """A cubic B-spline from p0 to p1 at constant velocity over ``duration`` s."""
    k = int(round(duration / dt)) + 1
    pts = np.linspace(p0, p1, k)
    v = (np.asarray(p1, float) - np.asarray(p0, float)) / ((k - 1) * dt)
    return fit_cubic(pts, dt, v, v, np.zeros(3), np.zeros(3))


def random_problem(seed=0, n=12, dt=0.25, t0=3.0):
    """A wiggly plan near two moving drones and one stale one, with a terminal target."""
    rng = np.random.default_rng(seed)
    q = np.cumsum(rng.normal(0.0, 0.25, (n, 3)), axis=0) + np.array([0.0, 0.0, 1.0])
    table = SwarmTrajectoryTable(timeout_s=1.0)
    centre = q.mean(axis=0)
    table.update(1, line_spline(centre + [-2, 0.3, 0], centre + [2, -0.3, 0.2], 4.0).control_points, 0.2, 2.0, t0)
    table.update(2, line_spline(centre + [0.5, -2, 0.1], centre + [-0.5, 2, -0.1], 3.0).control_points, 0.2, 2.5, t0)
    table.update(3, line_spline(q[4] + [0.3, 0.2, 0], q[7] + [-0.2, 0.3, 0], 1.0).control_points, 0.2, 0.0, t0 - 5.0)
    view = SwarmView(0, table)
    ctx = view.plan_context(n, dt, t0, q[-1] + [0.7, -0.4, 0.2])
    return q, ctx, table


def brute_force_swarm(q, dt, t0, table, weights=W, now=None):
    """The swarm cost from its definition, one curve sample and one drone at a time."""
    now = t0 if now is None else now
    own = UniformBSpline(q, dt)
    scale = np.array([1.0, 1.0, weights.swarm_z_scale])
    total = 0.0
    for tau in np.arange(0.0, own.duration + 1e-9, dt / 2):
        p = own.evaluate(tau)
        for k in table.ids():
            if k == 0:
                continue
            tr = table.get(k)
            if now - tr.received_t <= table.timeout_s:  # fresh: at the same time
                d = np.linalg.norm((p - tr.spline.evaluate(t0 + tau - tr.t_start)) * scale)
            else:  # stale: anywhere on the rest of its last trajectory
                ts = np.linspace(tr.received_t, tr.t_end, 400)
                d = min(np.linalg.norm((p - tr.spline.evaluate(t - tr.t_start)) * scale) for t in ts)
            total += max(weights.swarm_clearance_m - d, 0.0) ** 3
    return total


def test_swarm_cost_matches_its_definition():
    q, ctx, table = random_problem()
    assert ctx is not None and ctx.moving.shape[0] == 2 and len(ctx.tubes) == 1
    value, _ = swarm_kernel(q, ctx, W)
    assert value > 0.1  # the drones are close: the term is active
    # the tube is sampled every tube_step_s (0.1 s) here, densely in the brute force
    assert value == pytest.approx(brute_force_swarm(q, 0.25, 3.0, table), rel=0.05)


def test_swarm_cost_without_the_stale_drone_is_exact():
    q, _, table = random_problem()
    table.remove(3)
    ctx = SwarmView(0, table).plan_context(q.shape[0], 0.25, 3.0, None)
    assert swarm_kernel(q, ctx, W)[0] == pytest.approx(brute_force_swarm(q, 0.25, 3.0, table), rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fused_total_cost_with_swarm_terms_matches_finite_differences(seed):
    q, ctx, _ = random_problem(seed)
    problem = CostProblem(q.shape[0], 0.25, 2.0, 3.0, W)
    problem.swarm = ctx
    f, g = value_and_grad(q, problem)  # through autograd_core's fused TotalCost node
    assert f == pytest.approx(total_kernel(q, problem)[0])
    num = np.zeros_like(q)
    eps = 1e-6
    for i in range(q.shape[0]):
        for j in range(3):
            qp, qm = q.copy(), q.copy()
            qp[i, j] += eps
            qm[i, j] -= eps
            num[i, j] = (total_kernel(qp, problem)[0] - total_kernel(qm, problem)[0]) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(num).max()))
    # the swarm + terminal part alone is non-zero and is what the swarm adds
    problem_alone = CostProblem(q.shape[0], 0.25, 2.0, 3.0, W)
    assert f - value_and_grad(q, problem_alone)[0] == pytest.approx(ctx.kernel(q, W)[0])
    assert ctx.kernel(q, W)[0] > 0


@pytest.mark.parametrize("preconditioned", [False, True])
@pytest.mark.parametrize("hi_from_end", [3, 0])  # fixed end, free end (EGO-Swarm with other drones near)
def test_free_objective_adds_the_swarm_terms(hi_from_end, preconditioned):
    q, ctx, _ = random_problem(1)
    n = q.shape[0]
    problem = CostProblem(n, 0.25, 2.0, 3.0, W)
    problem.swarm = ctx
    hi = n - hi_from_end
    basis = smoothness_preconditioner(problem, 3, hi, 0.1) if preconditioned else None
    objective = FreeObjective(problem, q, 3, hi, basis)
    moved = q.copy()
    moved[3:hi] += 0.05
    f_ref, g_ref = total_kernel(moved, problem)
    x = moved[3:hi] if basis is None else np.linalg.solve(basis, moved[3:hi] - q[3:hi])
    f, g = objective(x.ravel())
    assert ctx.kernel(moved, W)[0] > 0 and f == pytest.approx(f_ref, rel=1e-12)
    expected = g_ref[3:hi] if basis is None else basis.T @ g_ref[3:hi]
    np.testing.assert_allclose(g, expected.ravel(), rtol=1e-10, atol=1e-12)


def test_swarm_cost_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    q, ctx, _ = random_problem(4)
    qt = torch.tensor(q, requires_grad=True)
    pts = torch.tensor(ctx.samples) @ qt
    scale = torch.tensor([1.0, 1.0, W.swarm_z_scale], dtype=torch.float64)
    cost = 0.0
    for j in range(ctx.moving.shape[0]):
        d = torch.linalg.norm((pts - torch.tensor(ctx.moving[j])) * scale, dim=1)
        cost = cost + torch.clamp(W.swarm_clearance_m - d, min=0.0).pow(3).sum()
    for tube in ctx.tubes:
        tt = torch.tensor(tube)
        d = torch.linalg.norm((pts[:, None, :] - tt[None]) * scale, dim=2).min(dim=1).values
        cost = cost + torch.clamp(W.swarm_clearance_m - d, min=0.0).pow(3).sum()
    end = (qt[-3] + 4 * qt[-2] + qt[-1]) / 6 - torch.tensor(ctx.target)
    total = W.swarm * cost + W.terminal * (end @ end)
    total.backward()
    f, g = ctx.kernel(q, W)
    assert f == pytest.approx(float(total.detach()), rel=1e-10)
    np.testing.assert_allclose(g, qt.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_swarm_cost_function_backward_scales_the_gradient():
    q, ctx, _ = random_problem(5)
    problem = CostProblem(q.shape[0], 0.25, 2.0, 3.0, W)
    problem.swarm = ctx
    t = ac.from_numpy(q)
    t.requires_grad_(True)
    out = SwarmCost.apply(t, problem)
    out.backward()
    np.testing.assert_allclose(t._grad._data, ctx.kernel(q, W)[1])


def test_far_drones_and_no_drones_leave_the_cost_alone():
    table = SwarmTrajectoryTable()
    view = SwarmView(0, table)
    q = np.stack([np.linspace(0, 5, 10), np.zeros(10), np.ones(10)], axis=1)
    assert view.plan_context(10, 0.2, 0.0, q[-1], q_hint=q) is None  # nobody else
    table.update(0, hover_spline([1, 0, 1]).control_points, 0.5, 0.0, 0.0)
    assert view.plan_context(10, 0.2, 0.0, q[-1], q_hint=q) is None  # only itself
    table.update(4, hover_spline([100, 0, 1]).control_points, 0.5, 0.0, 0.0)
    assert view.plan_context(10, 0.2, 0.0, q[-1], q_hint=q) is None  # beyond influence_m
    problem = CostProblem(10, 0.2, 2.0, 3.0, W)
    assert problem.swarm is None


def test_vertical_offsets_count_half():
    """A drone 1.2 m straight above is inside the 1 m ellipsoidal clearance (1.2 x 0.5 = 0.6 m),
    one 1.2 m beside it is not."""
    n, dt = 8, 0.2
    q = np.tile([0.0, 0.0, 1.0], (n, 1))
    for where, active in (([0, 0, 2.2], True), ([1.2, 0, 1.0], False)):
        table = SwarmTrajectoryTable()
        table.update(1, hover_spline(where).control_points, 0.5, 0.0, 0.0)
        ctx = SwarmView(0, table).plan_context(n, dt, 0.0, None)
        value = swarm_kernel(q, ctx, W)[0]
        expected = (2 * (n - 3) + 1) * (1.0 - 0.6) ** 3 if active else 0.0
        assert value == pytest.approx(expected)


def test_table_timeout_and_ordering():
    table = SwarmTrajectoryTable(timeout_s=1.0)
    s = hover_spline([0, 0, 1])
    assert table.update(1, s.control_points, s.dt, 5.0, 5.0)
    assert not table.update(1, s.control_points, s.dt, 4.0, 5.5)  # an older plan arriving late
    fresh, stale = table.split(5.9)
    assert [t.drone_id for t in fresh] == [1] and stale == []
    fresh, stale = table.split(6.01)
    assert fresh == [] and [t.drone_id for t in stale] == [1]
    # malformed broadcasts are refused, never raised
    for bad in (dict(drone_id=-1), dict(control_points=np.full((4, 3), np.nan)), dict(dt=0.0),
                dict(control_points=np.zeros((4, 2))), dict(t_start=math.inf), dict(control_points=np.zeros((2, 3)))):
        kw = dict(drone_id=2, control_points=s.control_points, dt=s.dt, t_start=1.0, received_t=1.0)
        kw.update(bad)
        assert not table.update(**kw)
    assert table.rejected == 6 and table.ids() == [1]


def test_collision_check_finds_the_crossing_time():
    """Two drones on crossing straight lines meet at t = 5 s: the check reports the first time the
    distance drops below check_distance_m, which is analytic here."""
    table = SwarmTrajectoryTable(timeout_s=10.0)
    # drone 1: along y through the origin at 1 m/s, at the origin at t = 5 s
    other = line_spline([0, -5, 1], [0, 5, 1], 10.0)
    table.update(1, other.control_points, other.dt, 0.0, 0.0)
    own = BsplineTrajectory(line_spline([-5, 0, 1], [5, 0, 1], 10.0), 0.0)
    view = SwarmView(0, table, SwarmConfig(check_distance_m=0.6, check_step_s=0.01))
    t, drone, d = view.collision_time(own, 0.0, 10.0)
    # distance at time t: sqrt(2) |t - 5| < 0.6  ->  t > 5 - 0.6 / sqrt(2)
    assert drone == 1 and t == pytest.approx(5 - 0.6 / math.sqrt(2), abs=0.011) and d < 0.6
    assert view.collision_time(own, 6.0, 4.0) is None  # after the crossing: clear
    # the same drone stale (no broadcast since t = 0): anywhere on the rest of its path, so a
    # trajectory crossing that path even much later is refused
    late = BsplineTrajectory(line_spline([-5, 3, 1], [5, 3, 1], 10.0), 20.0)
    stale_view = SwarmView(0, SwarmTrajectoryTable(timeout_s=1.0), SwarmConfig(check_step_s=0.01))
    stale_view.table.update(1, other.control_points, other.dt, 0.0, 0.0)
    hit = stale_view.collision_time(late, 20.0, 10.0)
    # it reaches x = -0.6 (0.6 m from the tube point (0, 3, 1)) at t = 20 + 4.4 s
    assert hit is not None and hit[1] == 1 and hit[0] == pytest.approx(24.4, abs=0.02)
    # fresh, it would already be at its end (0, 5, 1), far from the late crossing at y = 3
    fresh_view = SwarmView(0, SwarmTrajectoryTable(timeout_s=100.0), SwarmConfig(check_step_s=0.01))
    fresh_view.table.update(1, other.control_points, other.dt, 0.0, 0.0)
    assert fresh_view.collision_time(late, 20.0, 10.0) is None


def test_broadcast_of_a_bspline_trajectory_is_exact_and_others_are_fitted():
    spline = line_spline([0, 0, 1], [4, 0, 1], 4.0)
    traj = BsplineTrajectory(spline, 2.0)
    sent, t0 = broadcast_spline(traj, 3.0)
    assert sent is spline and t0 == 2.0

    class Braking:  # any trajectory with state(t): a straight stop from 2 m/s at 1 m/s^2
        t_end = 2.0

        def state(self, t):
            t = min(max(t, 0.0), 2.0)
            return np.array([2 * t - 0.5 * t * t, 0, 1]), np.array([2 - t, 0, 0]), np.array([-1.0, 0, 0])

    fitted, t0 = broadcast_spline(Braking(), 0.0, dt=0.1)
    ts = np.linspace(0, 2.0, 21)
    np.testing.assert_allclose(fitted.evaluate(ts), [Braking().state(t)[0] for t in ts], atol=2e-3)


def test_bus_delivers_to_the_others_and_mute_loses_broadcasts():
    bus = LocalBroadcast(3, timeout_s=1.0)
    s = hover_spline([1, 2, 1])
    bus.publish(0, s, 0.0, 0.0)
    assert bus.tables[0].ids() == [] and bus.tables[1].ids() == [0] and bus.tables[2].ids() == [0]
    bus.mute(0, 1.0)
    bus.publish(0, s, 2.0, 2.0)
    assert bus.tables[1].get(0).received_t == 0.0 and bus.lost == 1 and bus.sent == 1


def empty_map():
    m = OccupancyGridMap(GridMapConfig(size_m=(20.0, 20.0, 3.0), inflation_m=0.2, floor_m=0.3, ceiling_m=2.5),
                         center=(0.0, 0.0, 1.0))
    return m


def min_distance_at_same_times(spline, t0, other_traj, scale=(1, 1, 0.5)):
    ts = np.linspace(0, spline.duration, 400)
    own = spline.evaluate(ts)
    theirs = other_traj.positions(t0 + ts)
    return float(np.linalg.norm((own - theirs) * np.asarray(scale), axis=1).min())


@pytest.mark.parametrize("case", ["hovering", "head_on"])
def test_optimiser_keeps_clear_of_another_drone(case):
    """A straight plan through another drone (hovering on the line, or flying the reverse line)
    is bent to keep about the swarm clearance at the same times; without the swarm it is not."""
    line = line_spline([-4, 0.0, 1.0], [4, 0.0, 1.0], 8.0, dt=0.25)
    table = SwarmTrajectoryTable(timeout_s=5.0)
    if case == "hovering":
        table.update(1, hover_spline([0, 0.05, 1.0]).control_points, 0.5, 0.0, 0.0)
    else:
        rev = line_spline([4, 0.05, 1.0], [-4, 0.05, 1.0], 8.0)
        table.update(1, rev.control_points, rev.dt, 0.0, 0.0)
    other = table.get(1)
    assert min_distance_at_same_times(line, 0.0, other) < 0.1
    opt = ReboundOptimizer(empty_map(), OptimizerConfig(max_vel_mps=2.0, max_time_s=5.0))
    view = SwarmView(0, table)
    opt.swarm_plan = view.plan_maker(0.0, [4, 0.0, 1.0])
    result = opt.optimize(line)
    assert result.success, result.message
    assert min_distance_at_same_times(result.spline, 0.0, other) >= 0.8
    # the start state is kept; the end, free with another drone near, stays near the target
    np.testing.assert_allclose(result.spline.control_points[:3], line.control_points[:3])
    end = result.spline.evaluate(result.spline.duration)
    assert np.linalg.norm(end - [4, 0, 1]) < 0.5
    # alone: nothing bends it
    opt.swarm_plan = None
    alone = opt.optimize(line)
    assert min_distance_at_same_times(alone.spline, 0.0, other) < 0.1


def test_free_end_gives_way_to_a_drone_hovering_at_the_target():
    line = line_spline([-4, 0.0, 1.0], [0.0, 0.0, 1.0], 4.0, dt=0.25)
    table = SwarmTrajectoryTable(timeout_s=5.0)
    table.update(1, hover_spline([0.0, 0.0, 1.0]).control_points, 0.5, 0.0, 0.0)
    opt = ReboundOptimizer(empty_map(), OptimizerConfig(max_vel_mps=2.0, max_time_s=5.0))
    opt.swarm_plan = SwarmView(0, table).plan_maker(0.0, [0.0, 0.0, 1.0])
    result = opt.optimize(line)
    end = result.spline.evaluate(result.spline.duration)
    assert np.linalg.norm(end - [0, 0, 1]) > 0.5  # the end moved off the occupied target
    np.testing.assert_allclose(result.spline.control_points[:3], line.control_points[:3])


def test_depth_pixels_on_a_known_drone_are_masked_and_the_rest_kept():
    from planner_pkg.planning.swarm import mask_depth
    from planner_pkg.sim.camera import DepthCamera
    from planner_pkg.sim.multi import _WorldWithDrones
    from planner_pkg.types import VehicleState
    from planner_pkg.world import Cylinder, World

    world = World((-10, -10, 0), (10, 10, 5), [Cylinder((5.0, 1.5), 0.4, 5.0)])
    drone = np.array([[3.0, 0.0, 2.0]])
    frame = DepthCamera().render(_WorldWithDrones(world, drone, 0.19), VehicleState.at_rest([0, 0, 2], 0.0))
    out = mask_depth(frame, drone, 0.45)
    masked = np.isnan(out.depth) & ~np.isnan(frame.depth)
    assert masked.sum() > 10
    # exactly the pixels whose point lies on the drone's ball were masked; the trunk is kept
    h, w = frame.depth.shape
    assert masked[h // 2, w // 2] and np.isfinite(out.depth).sum() == np.isfinite(frame.depth).sum() - masked.sum()
    alone = DepthCamera().render(world, VehicleState.at_rest([0, 0, 2], 0.0))
    trunk = np.isfinite(alone.depth) & (alone.depth < 6.0)
    assert trunk.any() and np.isfinite(out.depth[trunk]).all()
    assert out.points.shape[0] == frame.points.shape[0] - masked.sum()


def test_broadcast_of_a_stop_limited_trajectory_follows_it():
    """A trajectory re-timed to stop before unobserved space is not one B-spline: its broadcast is
    a fit through its positions, which it follows to a few mm, brake and stop included."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_planning_frontier import limited_case

    from planner_pkg.planning.frontier import StopLimitedTrajectory

    _, traj, _, _ = limited_case()
    assert isinstance(traj, StopLimitedTrajectory)
    t_now = traj.t_start + 0.3
    spline, t0 = broadcast_spline(traj, t_now)
    assert t0 == t_now
    ts = np.linspace(t_now, traj.t_end + 1.0, 300)
    want = np.array([traj.state(float(t))[0] for t in ts])
    np.testing.assert_allclose(spline.evaluate(ts - t0), want, atol=5e-3)


def test_swarm_planners_get_the_acceleration_limit_for_their_speed():
    from planner_pkg.app.swarm import build_swarm
    from planner_pkg.planning.ego_config import speed_scaled_max_acc

    for v in (2.0, 3.0, 6.0):
        agents, _ = build_swarm(2, max_vel=v, seed_value=5)
        assert [a.planner.config.seed for a in agents] == [5, 6]
        assert all(a.planner.config.max_vel_mps == v for a in agents)
        assert all(a.planner.config.max_acc_mps2 == speed_scaled_max_acc(v) for a in agents)


def test_swarm_ego_overrides_take_dotted_keys_and_are_validated():
    from planner_pkg.app.swarm import build_swarm
    from planner_pkg.config_schema import ConfigError
    from planner_pkg.planning.grid_map_config import InflationShape

    agents, _ = build_swarm(3, max_vel=4.0, seed_value=2, ego_overrides={
        "map.inflation_shape": "cylinder", "map.inflation_m": 0.3, "replan_iterations": 40})
    for k, a in enumerate(agents):
        c = a.planner.config
        assert c.seed == 2 + k and c.max_vel_mps == 4.0 and c.replan_iterations == 40
        assert c.map.inflation_shape is InflationShape.CYLINDER and c.map.inflation_m == 0.3
        a.planner.reset(np.array([0.0, 0.0, 1.0]), np.array([5.0, 0.0, 1.0]))
        assert a.planner.map.config.inflation_shape is InflationShape.CYLINDER
    with pytest.raises(ConfigError):
        build_swarm(2, ego_overrides={"map.inflation_shape": "sphere"})
