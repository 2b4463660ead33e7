"""max_pool2d / avg_pool2d / adaptive_avg_pool2d (functional and modules) against torch."""
import numpy as np
import pytest

import autograd_core as ac
import autograd_core.nn as nn
from autograd_core.autograd import gradcheck
from autograd_core.nn import _functional_cnn as FC
from autograd_core.nn.pooling import AdaptiveAvgPool1d, AvgPool1d, MaxPool1d

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {np.float32: 1e-5, np.float64: 1e-10}


def pair(shape, dtype, rng):
    a = rng.standard_normal(shape).astype(dtype)
    return ac.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def close(a, b, dtype):
    a = a._data if isinstance(a, ac.Tensor) else np.asarray(a)
    b = b.detach().numpy()
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL[dtype] * max(1.0, float(np.abs(b).max(initial=0))))


def check(fa, ft, shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    xa, xt = pair(shape, dtype, rng)
    ya, yt = fa(xa), ft(xt)
    close(ya, yt, dtype)
    g = rng.standard_normal(tuple(yt.shape)).astype(dtype)
    ya.backward(ac.tensor(g))
    yt.backward(torch.tensor(g))
    close(xa.grad, xt.grad, dtype)
    return ya


MAX_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=1, padding=1, dilation=2),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), ceil_mode=True),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=4, stride=4),        # the observation 4x4 pool
    dict(kernel_size=1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", MAX_CASES)
@pytest.mark.parametrize("shape", [(2, 3, 9, 10), (1, 1, 8, 12), (3, 7, 11)])
def test_max_pool2d_matches_torch(kw, shape, dtype):
    ya = check(lambda x: FC.max_pool2d(x, **kw), lambda x: TF.max_pool2d(x, **kw), shape, dtype)
    assert type(ya.grad_fn).__name__ == "MaxPool2DWithIndicesBackward0"


def test_max_pool2d_ties_and_indices():
    # ties: torch routes the gradient to the first maximum of each window
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 1, 1] = x[0, 0, 0, 1] = 1.0
    xa, xt = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    FC.max_pool2d(xa, 2, 1).sum().backward()
    TF.max_pool2d(xt, 2, 1).sum().backward()
    np.testing.assert_array_equal(xa.grad._data, xt.grad.numpy())
    rng = np.random.default_rng(1)
    for kw in MAX_CASES:
        xa, xt = pair((2, 3, 9, 10), np.float64, rng)
        ya, ia = FC.max_pool2d(xa, return_indices=True, **kw)
        yt, it = TF.max_pool2d(xt, return_indices=True, **kw)
        np.testing.assert_array_equal(ia._data, it.numpy())
        assert ia._data.dtype == np.int64 and not ia.requires_grad
    # no-grad fast path (non-overlapping windows) agrees too
    x = rng.standard_normal((2, 3, 48, 64)).astype(np.float32)
    with ac.no_grad():
        ya = FC.max_pool2d(ac.tensor(x), 4)
    np.testing.assert_array_equal(ya._data, TF.max_pool2d(torch.tensor(x), 4).numpy())


AVG_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), divisor_override=5),
    dict(kernel_size=4, stride=3, ceil_mode=True),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", AVG_CASES)
@pytest.mark.parametrize("shape", [(2, 3, 9, 10), (1, 2, 7, 7), (3, 8, 11)])
def test_avg_pool2d_matches_torch(kw, shape, dtype):
    ya = check(lambda x: FC.avg_pool2d(x, **kw), lambda x: TF.avg_pool2d(x, **kw), shape, dtype)
    assert type(ya.grad_fn).__name__ == "AvgPool2DBackward0"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("out", [1, (3, 5), (4, None), (7, 3), (9, 10), (12, 13), (2, 1)])
@pytest.mark.parametrize("shape", [(2, 3, 9, 10), (1, 4, 6, 10), (2, 9, 10)])
def test_adaptive_avg_pool2d_matches_torch(out, shape, dtype):
    ya = check(lambda x: FC.adaptive_avg_pool2d(x, out), lambda x: TF.adaptive_avg_pool2d(x, out), shape, dtype)
    assert type(ya.grad_fn).__name__ == "AdaptiveAvgPool2DBackward0"


def test_pool1d_and_modules_match_torch():
    for dtype in (np.float32, np.float64):
        pairs = [(nn.MaxPool2d(3, 2, 1), torch.nn.MaxPool2d(3, 2, 1), (2, 3, 9, 8)),
                 (nn.MaxPool2d((2, 3), ceil_mode=True), torch.nn.MaxPool2d((2, 3), ceil_mode=True), (2, 3, 9, 8)),
                 (nn.AvgPool2d(3, 2, 1, count_include_pad=False),
                  torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False), (2, 3, 9, 8)),
                 (nn.AdaptiveAvgPool2d((3, 2)), torch.nn.AdaptiveAvgPool2d((3, 2)), (2, 3, 9, 8)),
                 (nn.AdaptiveAvgPool2d(1), torch.nn.AdaptiveAvgPool2d(1), (1, 3, 5, 5)),
                 (MaxPool1d(3, 2, 1), torch.nn.MaxPool1d(3, 2, 1), (2, 3, 9)),
                 (AvgPool1d(3, 2, 1), torch.nn.AvgPool1d(3, 2, 1), (2, 3, 9)),
                 (AdaptiveAvgPool1d(4), torch.nn.AdaptiveAvgPool1d(4), (2, 3, 9))]
        for i, (m, mt, shape) in enumerate(pairs):
            assert repr(m) == repr(mt)
            check(m, mt, shape, dtype, seed=i)
    ya, ia = nn.MaxPool2d(2, return_indices=True)(ac.ones(1, 1, 4, 4))
    assert ia.shape == (1, 1, 2, 2)
    ya, ia = MaxPool1d(2, return_indices=True)(ac.ones(1, 2, 6))
    assert ia.shape == (1, 2, 3)


@pytest.mark.parametrize("fn", [
    lambda x: FC.max_pool2d(x, 3, 2, 1),
    lambda x: FC.max_pool2d(x, 2, 1, dilation=2, ceil_mode=True),
    lambda x: FC.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
    lambda x: FC.avg_pool2d(x, 2),
    lambda x: FC.adaptive_avg_pool2d(x, (3, 2)),
    lambda x: FC.adaptive_avg_pool2d(x, (2, 1)),
])
def test_pool_gradcheck(fn):
    # distinct values: max pooling is not differentiable at ties
    x = np.random.default_rng(3).permutation(2 * 2 * 5 * 6).reshape(2, 2, 5, 6) / 7.0
    assert gradcheck(fn, (ac.tensor(x, requires_grad=True),))


def test_pool_errors():
    x = ac.zeros(1, 1, 4, 4)
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size"):
        FC.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        FC.max_pool2d(x, 5)
    with pytest.raises(RuntimeError, match="Expected 3D or 4D"):
        FC.avg_pool2d(ac.zeros(4, 4), 2)
