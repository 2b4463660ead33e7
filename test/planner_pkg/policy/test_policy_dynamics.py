"""The differentiable point mass: analytic solutions, gradients vs finite differences, decay, delay."""
import math

import numpy as np
import pytest

import autograd_core as ag
from autograd_core.gradcheck import gradcheck

from planner_pkg.policy.config import DynamicsConfig
from planner_pkg.policy.dynamics import (EpisodeDynamics, PointMassBatch, point_mass_step, sample_episode_dynamics,
                                         step_coefficients)

G = 9.81


def _coeffs(b, dt=1 / 15, k=12.0, drag=0.35, wind=0.0, dist=0.0, decay=1.0):
    return step_coefficients(np.full((b, 1), dt), np.full((b, 1), k), np.full((b, 3), drag), np.full((b, 3), wind),
                             np.full((b, 3), dist), G, decay)


def _t(a, grad=False):
    return ag.tensor(np.array(a, dtype=np.float64), requires_grad=grad)


def _run(p, v, f, u, coeffs, n):
    p, v, f = _t(p), _t(v), _t(f)
    u = _t(u)
    for _ in range(n):
        p, v, f = point_mass_step(p, v, f, u, coeffs)
    return p.detach().numpy(), v.detach().numpy(), f.detach().numpy()


def test_thrust_lag_is_exact_first_order():
    k, dt, n = 12.0, 1 / 15, 20
    f0 = np.array([[0.0, 0.0, G]])
    u = np.array([[2.0, -1.0, 3.0]])
    _, _, f = _run(np.zeros((1, 3)), np.zeros((1, 3)), f0, u, _coeffs(1, dt, k, drag=1e-9), n)
    uf = u + [0, 0, G]
    expected = uf + (f0 - uf) * math.exp(-k * n * dt)
    np.testing.assert_allclose(f, expected, rtol=0, atol=1e-12)


def test_velocity_under_lag_without_drag_is_exact():
    # v(t) = u t + (f0 - uf)(1 - e^{-kt}) / k  (gravity balanced by the hover thrust in uf)
    k, dt, n = 12.0, 1 / 15, 30
    f0 = np.array([[0.0, 0.0, G]])
    u = np.array([[1.5, 0.0, -0.5]])
    _, v, _ = _run(np.zeros((1, 3)), np.zeros((1, 3)), f0, u, _coeffs(1, dt, k, drag=1e-12), n)
    t = n * dt
    uf = u + [0, 0, G]
    expected = u * t + (f0 - uf) * (1 - math.exp(-k * t)) / k
    np.testing.assert_allclose(v, expected, rtol=0, atol=1e-9)


def test_linear_drag_decay_is_exact_in_velocity():
    d, dt, n = 0.4, 1 / 15, 45
    v0 = np.array([[3.0, -2.0, 1.0]])
    hover = np.array([[0.0, 0.0, G]])
    p, v, _ = _run(np.zeros((1, 3)), v0, hover, np.zeros((1, 3)), _coeffs(1, dt, drag=d), n)
    t = n * dt
    np.testing.assert_allclose(v, v0 * math.exp(-d * t), rtol=1e-12)
    # the trapezoidal position is second-order accurate: ~dt^2 error over the run
    np.testing.assert_allclose(p, v0 * (1 - math.exp(-d * t)) / d, rtol=0, atol=2e-3)


def test_drag_pulls_towards_the_wind():
    d, dt, n = 0.4, 1 / 15, 300  # 20 s: e^{-8} of the gap remains
    wind = 2.0
    hover = np.array([[0.0, 0.0, G]])
    _, v, _ = _run(np.zeros((1, 3)), np.zeros((1, 3)), hover, np.zeros((1, 3)), _coeffs(1, dt, drag=d, wind=wind), n)
    np.testing.assert_allclose(v, wind * (1 - math.exp(-d * n * dt)), rtol=1e-12)


def test_free_fall_with_zero_thrust():
    dt, n = 1 / 15, 15
    z0 = 10.0
    p, v, f = _run([[0.0, 0.0, z0]], np.zeros((1, 3)), np.zeros((1, 3)), [[0.0, 0.0, -G]],
                   _coeffs(1, dt, drag=1e-12), n)
    t = n * dt
    np.testing.assert_allclose(f, 0.0, atol=1e-12)
    np.testing.assert_allclose(v[0, 2], -G * t, rtol=1e-9)
    np.testing.assert_allclose(p[0, 2], z0 - 0.5 * G * t * t, rtol=1e-9)  # trapezoid: exact here


def test_hover_is_an_equilibrium():
    p, v, f = _run([[1.0, 2.0, 3.0]], np.zeros((1, 3)), [[0.0, 0.0, G]], np.zeros((1, 3)), _coeffs(1), 100)
    np.testing.assert_allclose(p, [[1.0, 2.0, 3.0]], atol=1e-12)
    np.testing.assert_allclose(v, 0.0, atol=1e-12)


def _random_coeffs(rng, b, decay):
    return step_coefficients(rng.uniform(0.06, 0.073, (b, 1)), rng.uniform(10, 14, (b, 1)),
                             rng.uniform(0.05, 0.5, (b, 3)), rng.normal(size=(b, 3)), rng.normal(size=(b, 3)), G,
                             decay)


def test_step_gradcheck():
    rng = np.random.default_rng(0)
    c = _random_coeffs(rng, 3, 1.0)
    ins = [ag.tensor(rng.normal(size=(3, 3)), requires_grad=True) for _ in range(4)]
    assert gradcheck(lambda p, v, f, u: point_mass_step(p, v, f, u, c), ins)


def test_short_rollout_gradcheck_with_a_command_per_step():
    rng = np.random.default_rng(1)
    steps = 6
    coeffs = [_random_coeffs(rng, 2, 1.0) for _ in range(steps)]
    p0, v0, f0 = (ag.tensor(rng.normal(size=(2, 3)), requires_grad=True) for _ in range(3))
    u = ag.tensor(rng.normal(size=(steps, 2, 3)), requires_grad=True)

    def rollout(p, v, f, u):
        for k in range(steps):
            p, v, f = point_mass_step(p, v, f, u[k], coeffs[k])
        return p, v

    assert gradcheck(rollout, (p0, v0, f0, u))


def test_fused_step_equals_elementary_ops():
    """The fused node computes exactly what the same formula in plain autograd ops does."""
    rng = np.random.default_rng(2)
    c = _random_coeffs(rng, 4, 0.5)
    data = [rng.normal(size=(4, 3)) for _ in range(4)]
    a = [ag.tensor(x, requires_grad=True) for x in data]
    b = [ag.tensor(x, requires_grad=True) for x in data]
    w = ag.tensor(rng.normal(size=(3, 4, 3)))

    out = point_mass_step(*a, c)
    sum(((o * w[i]).sum() for i, o in enumerate(out)), ag.tensor(0.0)).backward()

    p, v, f, u = b
    g3 = ag.tensor(np.array([0.0, 0.0, G]))
    uf = u + g3
    f_new = uf + (f - uf) * ag.tensor(c.alpha)
    fbar = uf + (f - uf) * ag.tensor(c.gamma) + ag.tensor(c.forcing)
    v_new = ag.tensor(c.beta) * v + ag.tensor(c.eta) * fbar
    p_new = p + ag.tensor(c.half_dt) * (v + v_new)
    ref = (p_new, v_new, f_new)
    sum(((o * w[i]).sum() for i, o in enumerate(ref)), ag.tensor(0.0)).backward()
    for o, r in zip(out, ref):
        np.testing.assert_allclose(o.detach().numpy(), r.detach().numpy(), rtol=1e-12, atol=1e-12)
    # the fused backward applies the decay to the state gradients only
    np.testing.assert_allclose(a[3].grad.numpy(), b[3].grad.numpy(), rtol=1e-12, atol=1e-12)
    for x, y in zip(a[:3], b[:3]):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy() * c.decay, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("decay_per_s", [0.4, 0.8])
def test_gradient_decay_scales_state_gradients_as_configured(decay_per_s):
    rng = np.random.default_rng(3)
    steps = 20
    dts = rng.uniform(0.06, 0.073, steps)

    def grads(decay):
        p0 = ag.tensor(rng_fixed.normal(size=(1, 3)), requires_grad=True)
        v0 = ag.tensor(np.zeros((1, 3)), requires_grad=True)
        f = ag.tensor(np.array([[0.0, 0.0, G]]))
        us = [ag.tensor(np.zeros((1, 3)), requires_grad=True) for _ in range(steps)]
        p, v = p0, v0
        for k in range(steps):
            c = step_coefficients(np.full((1, 1), dts[k]), np.full((1, 1), 12.0), np.full((1, 3), 0.3),
                                  np.zeros((1, 3)), np.zeros((1, 3)), G, decay)
            p, v, f = point_mass_step(p, v, f, us[k], c)
        p.sum().backward()
        return p0.grad.numpy(), v0.grad.numpy(), [u.grad.numpy() for u in us]

    rng_fixed = np.random.default_rng(4)
    gp1, gv1, gu1 = grads(1.0)
    rng_fixed = np.random.default_rng(4)
    gpd, gvd, gud = grads(decay_per_s)
    # d p_T / d p_0 = identity, scaled by decay^dt once per step: decay^(total time)
    np.testing.assert_allclose(gp1, 1.0, rtol=1e-12)
    np.testing.assert_allclose(gpd, decay_per_s ** dts.sum(), rtol=1e-12)
    np.testing.assert_allclose(gvd, gv1 * decay_per_s ** dts.sum(), rtol=1e-12)
    # the command of step k reaches p_T through the states after it: decay^(time after step k)
    for k in range(steps):
        np.testing.assert_allclose(gud[k], gu1[k] * decay_per_s ** dts[k + 1:].sum(), rtol=1e-10, atol=1e-15)


def test_action_delay_applies_the_command_of_k_steps_ago():
    cfg = DynamicsConfig(dt_jitter=0.0, ou_sigma_mps2=0.0, wind_std_mps=0.0)
    ep = EpisodeDynamics(lag_rate=np.full((3, 1), 12.0), drag=np.full((3, 3), 0.3), wind=np.zeros((3, 3)),
                         delay=np.array([0, 1, 2]))
    sim = PointMassBatch(cfg, ep, np.zeros((3, 3)), np.random.default_rng(0))
    pulse = ag.tensor(np.tile([[1.0, 0.0, 0.0]], (3, 1)))
    zero = ag.zeros(3, 3, dtype=ag.float64)
    moved_at = [None, None, None]
    for step in range(4):
        sim.step(pulse if step == 0 else zero)
        fx = sim.thrust.detach().numpy()[:, 0]
        for i in range(3):
            if moved_at[i] is None and abs(fx[i]) > 1e-12:
                moved_at[i] = step
    assert moved_at == [0, 1, 2]


def test_sampled_randomisation_stays_in_range():
    cfg = DynamicsConfig()
    ep = sample_episode_dynamics(cfg, 500, np.random.default_rng(5))
    assert ep.lag_rate.min() >= cfg.lag_rate_per_s[0] and ep.lag_rate.max() <= cfg.lag_rate_per_s[1]
    assert ep.drag[:, 0].min() >= cfg.drag_xy_per_s[0] and ep.drag[:, 0].max() <= cfg.drag_xy_per_s[1]
    assert (ep.drag[:, 0] == ep.drag[:, 1]).all()
    assert set(np.unique(ep.delay)) == set(range(cfg.action_delay_steps[0], cfg.action_delay_steps[1] + 1))
    assert (ep.wind[:, 2] == 0).all() and abs(ep.wind[:, :2].std() - cfg.wind_std_mps) < 0.05
