"""Dropout: eval is the identity, training zeroes about p of the elements and scales the rest by
1/(1-p), the gradient uses the same mask, the seeded generator makes masks reproducible."""
import numpy as np
import pytest

import autograd_core as ac
import autograd_core.nn as nn
from autograd_core.nn import _functional_cnn as FC
from autograd_core.nn.dropout import Dropout1d, Dropout2d

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", [ac.float32, ac.float64])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_train_statistics_scaling_and_gradient_mask(p, dtype):
    ac.manual_seed(0)
    m = nn.Dropout(p)
    x = ac.rand(200, 500, dtype=dtype) + 0.5
    x.requires_grad_(True)
    y = m(x)
    assert y._data.dtype == x._data.dtype
    zero = y._data == 0
    assert abs(zero.mean() - p) < 0.01
    np.testing.assert_allclose(y._data[~zero], x._data[~zero] / (1 - p), rtol=1e-6)
    g = np.random.default_rng(0).standard_normal(x.shape).astype(x._data.dtype)
    y.backward(ac.tensor(g))
    np.testing.assert_array_equal(x.grad._data == 0, zero)
    np.testing.assert_allclose(x.grad._data[~zero], g[~zero] / (1 - p), rtol=1e-6)
    # expectation is preserved
    assert abs(y._data.mean() / x._data.mean() - 1) < 0.02


def test_dropout_eval_identity_and_edge_probabilities():
    x = ac.randn(4, 5, requires_grad=True)
    m = nn.Dropout(0.5)
    m.eval()
    assert m(x) is x
    assert FC.dropout(x, 0.5, training=False) is x
    assert FC.dropout(x, 0.0, training=True) is x
    y = FC.dropout(x, 1.0, training=True)
    assert np.all(y._data == 0)
    y.sum().backward()
    assert np.all(x.grad._data == 0)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)
    assert repr(nn.Dropout(0.2)) == repr(torch.nn.Dropout(0.2))


def test_dropout_reproducible_with_seed_and_inplace():
    ac.manual_seed(123)
    a = FC.dropout(ac.ones(1000), 0.3)._data
    ac.manual_seed(123)
    b = FC.dropout(ac.ones(1000), 0.3)._data
    np.testing.assert_array_equal(a, b)
    c = FC.dropout(ac.ones(1000), 0.3)._data
    assert not np.array_equal(a, c)
    # inplace on a non-leaf while recording: the tensor takes the dropout's history
    w = ac.ones(50, requires_grad=True)
    h = w * 2
    ac.manual_seed(5)
    out = FC.dropout(h, 0.5, True, inplace=True)
    assert out is h
    out.sum().backward()
    np.testing.assert_allclose(w.grad._data, np.where(h._data != 0, 4.0, 0.0))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        FC.dropout(w, 0.5, True, inplace=True)
    t = ac.ones(10)
    assert FC.dropout(t, 0.5, True, inplace=True) is t and set(np.unique(t._data)) <= {0.0, 2.0}


def test_channel_dropout():
    ac.manual_seed(1)
    x = ac.ones(8, 16, 3, 4, requires_grad=True)
    y = Dropout2d(0.5)(x)
    per_channel = y._data.reshape(8, 16, -1)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
    assert 0.3 < (per_channel[..., 0] == 0).mean() < 0.7
    y.sum().backward()
    np.testing.assert_array_equal(x.grad._data, y._data)
    z = Dropout1d(0.5)(ac.ones(4, 6, 5))
    zz = z._data
    assert np.all((zz == 0).all(-1) | (zz == 2).all(-1))


def test_dropout_gradcheck_with_fixed_mask():
    from autograd_core.autograd import gradcheck
    x = ac.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)

    def f(x):
        ac.manual_seed(7)  # the same mask on every evaluation
        return FC.dropout(x, 0.4, True)
    assert gradcheck(f, (x,))

    def g(x):
        ac.manual_seed(7)
        return FC.dropout2d(x.reshape(1, 3, 2, 2), 0.5, True)
    assert gradcheck(g, (x,))
