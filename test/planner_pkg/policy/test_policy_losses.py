"""Loss terms on hand-made cases, and the differentiable world distance."""
import math

import numpy as np
import pytest

import autograd_core as ag
from autograd_core.gradcheck import gradcheck

from planner_pkg.policy import losses as L
from planner_pkg.policy.config import LossConfig
from planner_pkg.policy.distance import world_distance
from planner_pkg.world import Box, Cylinder, Sphere, World


def _t(a, grad=False):
    return ag.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def test_moving_average_is_a_trailing_window():
    x = _t(np.arange(1.0, 7.0).reshape(6, 1))
    np.testing.assert_allclose(L.moving_average(x, 3).detach().numpy()[:, 0], [1, 1.5, 2, 3, 4, 5])
    np.testing.assert_allclose(L.moving_average(x, 1).detach().numpy()[:, 0], np.arange(1.0, 7.0))
    np.testing.assert_allclose(L.moving_average(x, 100).detach().numpy()[:, 0], [1, 1.5, 2, 2.5, 3, 3.5])


def test_velocity_loss_uses_the_window_mean():
    target = np.tile([2.0, 0.0, 0.0], (4, 1, 1))
    v = np.tile([2.0, 0.0, 0.0], (4, 1, 1))
    assert L.velocity_loss(_t(v), target, 2).item() == 0.0
    # a swerve that averages out over the window costs less than the same error held
    swerve = v.copy()
    swerve[2, 0, 1], swerve[3, 0, 1] = 0.4, -0.4
    held = v.copy()
    held[2:, 0, 1] = 0.4
    assert L.velocity_loss(_t(swerve), target, 2).item() < L.velocity_loss(_t(held), target, 2).item()
    # smooth-L1 per element (beta 1): 0.5 e^2 below 1, |e| - 0.5 above; mean over T x B x 3
    slow = np.zeros((1, 1, 3))
    np.testing.assert_allclose(L.velocity_loss(_t(slow), np.array([[[3.0, 0.5, 0.0]]]), 1).item(),
                               (2.5 + 0.125 + 0.0) / 3)


def test_velocity_loss_knee_sets_the_pull_of_a_small_error():
    """beta (LossConfig.velocity_beta_mps): 0.5 e^2 / beta below the knee, |e| - beta / 2 above it;
    a 0.4 m/s shortfall pulls with e / beta = 0.4 at the default knee of 1 m/s and with the full
    unit slope at 0.25 m/s, where a quadratic penalty would barely push."""
    target = np.array([[[5.0, 0.0, 0.0]]])
    short = _t(np.array([[[4.6, 0.0, 0.0]]]), grad=True)
    assert L.velocity_loss(short, target, 1, beta=1.0).item() == pytest.approx(0.5 * 0.16 / 3)
    assert L.velocity_loss(short, target, 1, beta=0.25).item() == pytest.approx((0.4 - 0.125) / 3)
    assert L.velocity_loss(short, target, 1).item() == L.velocity_loss(short, target, 1, beta=1.0).item()
    for beta, slope in ((1.0, -0.4), (0.25, -1.0), (0.8, -0.5)):
        short.grad = None
        L.velocity_loss(short, target, 1, beta=beta).backward()
        np.testing.assert_allclose(short.grad.numpy()[0, 0], [slope / 3, 0.0, 0.0])
    assert LossConfig().velocity_beta_mps == 1.0


def test_velocity_estimate_is_mean_squared_error():
    est = _t(np.array([[[1.0, 2.0, 3.0]]]))
    assert L.velocity_estimate_loss(est, np.array([[[1.0, 0.0, 3.0]]])).item() == pytest.approx(4.0 / 3)


def test_collision_is_a_softplus_barrier():
    clear = _t([[0.0, 0.5, -0.1]])
    expected = np.mean([math.log(2.0), math.log1p(math.exp(-16.0)), math.log1p(math.exp(3.2))])
    assert L.collision_loss(clear, 32.0).item() == pytest.approx(expected)


def test_avoidance_weights_the_squared_hinge_by_closing_speed():
    dt = np.full((2, 2), 0.1)
    # agent 0 approaches at 5 m/s to 0.5 m; agent 1 recedes to 0.5 m; range 1 m
    clear = _t([[1.0, 0.4], [0.5, 0.5]])
    got = L.avoidance_loss(clear, dt, 1.0).item()
    assert got == pytest.approx((5.0 * 0.25 + 1.0 * 0.25) / 2)  # closing speed clamped below at 1
    far = _t([[3.0, 3.0], [2.0, 2.5]])
    assert L.avoidance_loss(far, dt, 1.0).item() == 0.0
    # the gradient pushes the clearance up
    c = _t([[1.0], [0.5]], grad=True)
    L.avoidance_loss(c, np.full((2, 1), 0.1), 1.0).backward()
    assert c.grad.numpy()[1, 0] < 0


def test_acceleration_jerk_and_altitude_terms():
    cmd = _t([[[1.0, 2.0, 2.0]], [[1.0, 2.0, 0.0]]])
    assert L.acceleration_loss(cmd).item() == pytest.approx((9.0 + 5.0) / 2)
    assert L.jerk_loss(cmd).item() == pytest.approx(4.0)
    pos = _t([[[0, 0, 0.2]], [[0, 0, 2.0]], [[0, 0, 5.0]]])
    assert L.altitude_loss(pos, (0.5, 4.0)).item() == pytest.approx((0.09 + 0.0 + 1.0) / 3)


def test_total_loss_uses_the_configured_weights():
    terms = {name: _t(1.0) for name in L.LOSS_TERMS}
    cfg = LossConfig(velocity=1.0, velocity_estimate=2.0, avoidance=0.0, collision=3.0, acceleration=0.5,
                     jerk=0.25, altitude=1.0)
    assert L.total_loss(terms, cfg).item() == pytest.approx(1 + 2 + 3 + 0.5 + 0.25 + 1)


def test_world_distance_value_and_gradient():
    world = World((-5, -5, 0), (5, 5, 5), [Sphere((1.0, 0.0, 2.0), 0.5), Box((-2.0, 1.0, 2.0), (1, 1, 1), 0.3)],
                  ground=True)
    p = _t([[2.0, 0.5, 2.5], [0.0, 0.0, 0.3], [-2.0, 2.5, 2.2]], grad=True)
    d = world_distance(p, [world], np.zeros(3, dtype=int))
    np.testing.assert_allclose(d.detach().numpy(), world.signed_distance(p.detach().numpy()))
    d.sum().backward()
    g = p.grad.numpy()
    to_sphere = np.array([1.0, 0.5, 0.5]) / np.linalg.norm([1.0, 0.5, 0.5])
    np.testing.assert_allclose(g[0], to_sphere, atol=1e-6)  # nearest: the sphere
    np.testing.assert_allclose(g[1], [0.0, 0.0, 1.0], atol=1e-6)  # nearest: the ground
    assert np.linalg.norm(g[2]) == pytest.approx(1.0, abs=1e-5)
    p64 = _t([[2.0, 0.5, 2.5], [-2.0, 2.5, 2.2]], grad=True)
    assert gradcheck(lambda q: world_distance(q, [world], np.zeros(2, dtype=int)), (p64,), eps=1e-6, atol=1e-4)


def test_world_distance_keeps_each_agent_in_its_own_world():
    a = World((-5, -5, 0), (5, 5, 5), [Sphere((1.0, 0.0, 2.0), 0.5)], ground=False)
    b = World((-5, -5, 0), (5, 5, 5), [Sphere((-1.0, 0.0, 2.0), 0.5)], ground=False)
    p = _t([[0.0, 0.0, 2.0], [0.0, 0.0, 2.0], [3.0, 0.0, 2.0]])
    d = world_distance(p, [a, b], np.array([0, 1, 1]))
    np.testing.assert_allclose(d.detach().numpy(), [0.5, 0.5, 3.5])


def test_avoidance_constant_weight_drops_only_the_closing_speed_gradient():
    """Same value; the gradient of the constant-weight form is the hinge's alone (the weight
    frozen at its value), checked against central differences of that frozen-weight function."""
    c0 = np.array([[0.9, 0.7], [0.6, 0.8], [0.2, 0.75], [0.3, 0.1]])
    dt = np.full(c0.shape, 0.1)
    closing = (c0[:-1] - c0[1:]) / dt[1:]
    w0 = np.maximum(closing, 1.0)

    def frozen(c):  # w0 relu(1 - c[1:])^2, mean
        return float(np.mean(w0 * np.maximum(1.0 - c[1:], 0.0) ** 2))

    both = {}
    for constant in (False, True):
        c = _t(c0, grad=True)
        value = L.avoidance_loss(c, dt, 1.0, constant_weight=constant)
        value.backward()
        both[constant] = (value.item(), c.grad.numpy().copy())
    assert both[True][0] == pytest.approx(both[False][0]) == pytest.approx(frozen(c0))
    fd = np.zeros_like(c0)
    for idx in np.ndindex(*c0.shape):
        e = np.zeros_like(c0)
        e[idx] = 1e-6
        fd[idx] = (frozen(c0 + e) - frozen(c0 - e)) / 2e-6
    np.testing.assert_allclose(both[True][1], fd, atol=1e-6)
    # the differentiated weight adds a term: the clearance at the step before an approach is
    # pushed down (lower closing speed), which the constant weight does not do
    assert not np.allclose(both[False][1], fd, atol=1e-3)
    assert both[True][1][0].tolist() == [0.0, 0.0]  # step 0 enters only through the weight
    assert np.abs(both[False][1][0]).max() > 0


def test_ray_probes_lie_ahead_along_the_horizontal_direction():
    p = _t([[0.0, 0.0, 1.0], [1.0, 2.0, 1.5], [0.0, 0.0, 1.0]])
    v = _t([[3.0, 4.0, 2.0], [0.0, -0.2, 0.0], [0.0, 0.0, -1.0]])
    probes, weights = L.ray_probes(p, v, (1.0, 2.5))
    got = probes.detach().numpy()
    np.testing.assert_allclose(got[:, 0], [[0.6, 0.8, 1.0], [1.5, 2.0, 1.0]], atol=1e-6)  # climb ignored
    np.testing.assert_allclose(got[:, 1], [[1.0, 2.0 - 1.0 * 0.2 / math.sqrt(0.04 + 1e-6), 1.5],
                                           [1.0, 2.0 - 2.5 * 0.2 / math.sqrt(0.04 + 1e-6), 1.5]], atol=1e-9)
    np.testing.assert_allclose(got[:, 2], [[0.0, 0.0, 1.0]] * 2, atol=1e-9)  # no horizontal motion: at p
    np.testing.assert_allclose(weights, [1.0, 0.4, 0.0])


def _ray_value(p, v, world, probes_m=(1.5, 3.0), range_m=0.5):
    probes, w = L.ray_probes(p, v, probes_m)
    k, b = probes.shape[0], p.shape[0]
    d = world_distance(probes.reshape(k * b, 3), [world], np.zeros(k * b, dtype=int)).reshape(k, b)
    return L.ray_clearance_loss(d[None], w[None], range_m)


def test_ray_clearance_asks_for_a_turn_and_never_for_less_speed():
    """A trunk 2 m ahead, 0.3 m left of the path: the term's gradient on the velocity is
    perpendicular to it (a faster or slower flight on the same heading costs the same), points
    right (away from the trunk), matches central differences, and the position gets none."""
    world = World((-10, -10, 0), (10, 10, 5), [Cylinder((2.0, 0.3), 0.4, 5.0)], ground=False)
    v0 = np.array([[4.0, 0.0, 0.0]])
    p = _t([[0.0, 0.0, 1.0]], grad=True)
    v = _t(v0, grad=True)
    value = _ray_value(p, v, world)
    assert value.item() > 0
    value.backward()
    g = v.grad.numpy()[0]
    assert p.grad is None or np.abs(p.grad.numpy()).max() == 0.0
    # no along-track (speed) part, up to the 1e-6 m^2/s^2 regulariser of the direction
    assert abs(g[0]) < 1e-6 * np.abs(g).max() and g[2] == 0.0
    assert g[1] > 0  # descending the loss (-g) turns the flight right, away from the trunk at +y
    for speed in (2.0, 8.0):
        assert _ray_value(p, _t(v0 * speed / 4.0), world).item() == pytest.approx(value.item(), rel=1e-5)
    fd = np.zeros(3)
    for i in range(3):
        e = np.zeros((1, 3))
        e[0, i] = 1e-6
        fd[i] = (_ray_value(p, _t(v0 + e), world).item() - _ray_value(p, _t(v0 - e), world).item()) / 2e-6
    np.testing.assert_allclose(g, fd, atol=1e-7)
    # a heading that already clears the trunk costs nothing
    assert _ray_value(p, _t([[4.0, -2.0, 0.0]]), world).item() == 0.0


def test_ray_clearance_weight_zero_leaves_the_loss_as_before():
    assert LossConfig().ray_clearance == 0.0
    terms = {"velocity": _t(1.0), "ray_clearance": _t(5.0)}
    assert L.total_loss(terms, LossConfig(velocity=1.0)).item() == pytest.approx(1.0)
    assert L.total_loss(terms, LossConfig(velocity=1.0, ray_clearance=0.5)).item() == pytest.approx(3.5)


def test_ray_probes_with_lookahead_times_reach_further_at_speed():
    """Probe k at max(distance_k, speed x lookahead_k): 1.5 / 3 m below 4.3 m/s, 2.8 / 5.6 m at 8 m/s
    (0.35 / 0.7 s); the weights are as without; a time per probe is required."""
    p = _t([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    v = _t([[2.0, 0.0, 0.0], [0.0, 8.0, 0.0], [-6.0, 0.0, 3.0]])
    probes, weights = L.ray_probes(p, v, (1.5, 3.0), lookahead_s=(0.35, 0.7))
    got = probes.detach().numpy()
    np.testing.assert_allclose(got[:, 0], [[1.5, 0.0, 1.0], [3.0, 0.0, 1.0]], atol=1e-6)
    np.testing.assert_allclose(got[:, 1], [[0.0, 2.8, 1.0], [0.0, 5.6, 1.0]], atol=1e-5)
    np.testing.assert_allclose(got[:, 2], [[1.0 - 2.1, 1.0, 1.0], [1.0 - 4.2, 1.0, 1.0]], atol=1e-5)  # climb ignored
    np.testing.assert_allclose(weights, L.ray_probes(p, v, (1.5, 3.0))[1])
    with pytest.raises(ValueError, match="one look-ahead time per probe"):
        L.ray_probes(p, v, (1.5, 3.0), lookahead_s=(0.35,))


def test_ray_clearance_with_lookahead_still_only_turns():
    """A trunk 4.5 m ahead, 0.3 m left: at 7 m/s only the look-ahead probe (4.9 m) sees it; the
    gradient on the velocity has no along-track part (the reach is not differentiated), points
    away from the trunk and matches central differences across the track. Fixed probes at 1.5 / 3
    m see nothing there."""
    world = World((-10, -10, 0), (10, 10, 5), [Cylinder((4.5, 0.3), 0.4, 5.0)], ground=False)
    p = _t([[0.0, 0.0, 1.0]])

    def value(vel, lookahead=(0.35, 0.7)):
        probes, w = L.ray_probes(p, vel, (1.5, 3.0), lookahead_s=lookahead)
        k = probes.shape[0]
        d = world_distance(probes.reshape(k, 3), [world], np.zeros(k, dtype=int)).reshape(k, 1)
        return L.ray_clearance_loss(d[None], w[None], 0.5)

    v0 = np.array([[7.0, 0.0, 0.0]])
    v = _t(v0, grad=True)
    out = value(v)
    assert out.item() > 0
    assert value(_t(v0), lookahead=None).item() == 0.0
    out.backward()
    g = v.grad.numpy()[0]
    assert abs(g[0]) < 1e-6 * np.abs(g).max() and g[2] == 0.0 and g[1] > 0
    e = np.array([[0.0, 1e-6, 0.0]])
    fd = (value(_t(v0 + e)).item() - value(_t(v0 - e)).item()) / 2e-6
    assert g[1] == pytest.approx(fd, rel=1e-4)
