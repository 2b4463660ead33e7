"""nn.init: gains and fans equal torch's; sampled distributions match their formulas; seeding."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import autograd_core as ag  # noqa: E402
import autograd_core.nn as nn  # noqa: E402
from autograd_core.nn import init  # noqa: E402


@pytest.mark.parametrize("nl,param", [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                                      ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)])
def test_calculate_gain_equals_torch(nl, param):
    assert init.calculate_gain(nl, param) == pytest.approx(torch.nn.init.calculate_gain(nl, param))


def test_calculate_gain_rejects_unknown():
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")


@pytest.mark.parametrize("shape", [(5, 3), (8, 4, 3, 3), (2, 6, 5)])
def test_fan_in_fan_out_equal_torch(shape):
    assert init._calculate_fan_in_and_fan_out(ag.zeros(*shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.zeros(*shape))


def test_fan_needs_two_dims():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(ag.zeros(5))


def _stats(t):
    a = t.detach().numpy().astype(np.float64)
    return a.mean(), a.std(), a.min(), a.max()


# Large tensors: sample mean/std within a few standard errors of the formulas.
SHAPE = (400, 300)
FAN_IN, FAN_OUT = 300, 400


@pytest.mark.parametrize("fn,kwargs,kind,scale", [
    (init.uniform_, {"a": -2.0, "b": 3.0}, "uniform", (-2.0, 3.0)),
    (init.normal_, {"mean": 1.5, "std": 0.3}, "normal", (1.5, 0.3)),
    (init.xavier_uniform_, {"gain": 2.0}, "uniform0", 2.0 * math.sqrt(6.0 / (FAN_IN + FAN_OUT))),
    (init.xavier_normal_, {"gain": 0.5}, "normal0", 0.5 * math.sqrt(2.0 / (FAN_IN + FAN_OUT))),
    (init.kaiming_uniform_, {"a": math.sqrt(5)}, "uniform0", math.sqrt(3.0) * math.sqrt(2 / 6) / math.sqrt(FAN_IN)),
    (init.kaiming_uniform_, {"mode": "fan_out", "nonlinearity": "relu"}, "uniform0",
     math.sqrt(3.0) * math.sqrt(2.0) / math.sqrt(FAN_OUT)),
    (init.kaiming_normal_, {"nonlinearity": "relu"}, "normal0", math.sqrt(2.0) / math.sqrt(FAN_IN)),
    (init.kaiming_normal_, {"mode": "fan_out", "nonlinearity": "tanh"}, "normal0", (5 / 3) / math.sqrt(FAN_OUT)),
])
def test_random_inits_follow_their_formulas(fn, kwargs, kind, scale):
    ag.manual_seed(0)
    t = ag.empty(*SHAPE)
    assert fn(t, **kwargs) is t
    mean, std, lo, hi = _stats(t)
    n = t.numel()
    if kind == "uniform":
        a, b = scale
        assert a <= lo and hi <= b
        assert abs(mean - (a + b) / 2) < 4 * (b - a) / math.sqrt(12 * n)
        assert std == pytest.approx((b - a) / math.sqrt(12), rel=0.01)
    elif kind == "uniform0":
        bound = scale
        assert -bound <= lo and hi <= bound and hi > 0.99 * bound
        assert abs(mean) < 4 * bound / math.sqrt(3 * n)
        assert std == pytest.approx(bound / math.sqrt(3), rel=0.01)
    elif kind == "normal":
        m, s = scale
        assert abs(mean - m) < 4 * s / math.sqrt(n)
        assert std == pytest.approx(s, rel=0.01)
    else:
        assert abs(mean) < 4 * scale / math.sqrt(n)
        assert std == pytest.approx(scale, rel=0.01)


def test_trunc_normal_respects_bounds_and_moments():
    ag.manual_seed(1)
    t = init.trunc_normal_(ag.empty(200, 200), mean=0.5, std=1.0, a=-0.5, b=2.0)
    mean, std, lo, hi = _stats(t)
    assert -0.5 <= lo and hi <= 2.0
    # Truncated-normal moments: alpha = (a - mu) / s, beta = (b - mu) / s.
    from scipy.stats import truncnorm
    dist = truncnorm(-1.0, 1.5, loc=0.5, scale=1.0)
    assert mean == pytest.approx(dist.mean(), abs=0.01)
    assert std == pytest.approx(dist.std(), rel=0.01)


def test_constant_ones_zeros_eye_dirac():
    t = ag.empty(3, 4)
    np.testing.assert_array_equal(init.constant_(t, 2.5).numpy(), np.full((3, 4), 2.5, np.float32))
    np.testing.assert_array_equal(init.ones_(t).numpy(), np.ones((3, 4)))
    np.testing.assert_array_equal(init.zeros_(t).numpy(), np.zeros((3, 4)))
    np.testing.assert_array_equal(init.eye_(t).numpy(), np.eye(3, 4))
    w = ag.empty(4, 2, 3, 3)
    tw = torch.empty(4, 2, 3, 3)
    np.testing.assert_array_equal(init.dirac_(w).numpy(), torch.nn.init.dirac_(tw).numpy())
    with pytest.raises(ValueError):
        init.eye_(ag.empty(2, 2, 2))


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 2, 3)])
def test_orthogonal_gives_orthonormal_rows_or_columns(shape):
    ag.manual_seed(2)
    t = init.orthogonal_(ag.empty(*shape, dtype=ag.float64), gain=1.5)
    m = t.numpy().reshape(shape[0], -1)
    if m.shape[0] <= m.shape[1]:
        np.testing.assert_allclose(m @ m.T, 2.25 * np.eye(m.shape[0]), atol=1e-12)
    else:
        np.testing.assert_allclose(m.T @ m, 2.25 * np.eye(m.shape[1]), atol=1e-12)


def test_init_runs_on_parameters_without_recording_and_bumps_version():
    lin = nn.Linear(3, 3)
    v = lin.weight._version
    init.xavier_uniform_(lin.weight)
    assert lin.weight.is_leaf and lin.weight.grad_fn is None and lin.weight.requires_grad
    assert lin.weight._version == v + 1


def test_manual_seed_makes_networks_reproducible_and_generator_is_independent():
    def make():
        return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))

    ag.manual_seed(123)
    a = make()
    ag.manual_seed(123)
    b = make()
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    g1, g2 = ag.Generator().manual_seed(5), ag.Generator().manual_seed(5)
    x, y = init.normal_(ag.empty(10), generator=g1), init.normal_(ag.empty(10), generator=g2)
    np.testing.assert_array_equal(x.numpy(), y.numpy())
