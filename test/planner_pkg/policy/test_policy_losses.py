"""Loss terms on hand-made cases, and the differentiable world distance."""
import math

import numpy as np
import pytest

import autograd_core as ag
from autograd_core.gradcheck import gradcheck

from planner_pkg.policy import losses as L
from planner_pkg.policy.config import LossConfig
from planner_pkg.policy.distance import world_distance
from planner_pkg.world import Box, Sphere, World


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
