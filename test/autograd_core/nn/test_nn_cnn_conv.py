"""Conv2d / Conv1d (functional and modules) against torch: outputs, input/weight/bias gradients,
torch's default initialisation and state-dict interchange, gradcheck, error messages."""
import math

import numpy as np
import pytest

import autograd_core as ac
import autograd_core.nn as nn
from autograd_core.autograd import gradcheck
from autograd_core.nn import _functional_cnn as FC
from autograd_core.nn.conv import Conv1d  # not (yet) exported by autograd_core.nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {np.float32: 1e-5, np.float64: 1e-10}


def pair(shape, dtype, rng, scale=1.0):
    a = (rng.standard_normal(shape) * scale).astype(dtype)
    return ac.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def close(a, b, dtype, rel=True):
    a = a._data if isinstance(a, ac.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    tol = TOL[dtype]
    scale = max(1.0, float(np.abs(b).max())) if rel and b.size else 1.0
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * scale)


def backward_both(ours, theirs, rng):
    g = rng.standard_normal(tuple(theirs.shape)).astype(ours._data.dtype)
    ours.backward(ac.tensor(g))
    theirs.backward(torch.tensor(g))


CONV_CASES = [
    # N, C, H, W, O, kernel, stride, padding, dilation, groups
    (2, 3, 7, 9, 4, 3, 1, 0, 1, 1),
    (2, 3, 7, 9, 4, 3, 2, 1, 1, 1),
    (1, 4, 8, 6, 6, (2, 3), (2, 1), (1, 0), (2, 1), 2),
    (3, 1, 12, 16, 5, 2, 2, 0, 1, 1),          # the policy net's first layer shape family
    (2, 6, 5, 5, 6, 3, 1, 1, 1, 6),            # depthwise
    (1, 5, 11, 13, 7, (3, 5), (3, 2), (2, 1), (1, 2), 1),
    (2, 2, 5, 4, 3, 1, 1, 0, 1, 1),            # 1x1 kernel
    (1, 32, 6, 8, 64, 3, 1, 0, 1, 1),          # wide channels: the strided-gather im2col path
    (2, 3, 4, 4, 2, 4, 3, 2, 1, 1),            # kernel == input, stride > remaining
    (2, 2, 9, 7, 4, 2, 3, 0, 1, 1),            # stride larger than the kernel: unused rows
    # few output positions, many channels (M <= O): the channels-first im2col layout
    (1, 3, 4, 4, 16, 3, 1, 0, 1, 1),
    (2, 3, 5, 6, 32, 3, 2, 1, 2, 1),
    (1, 32, 6, 8, 64, 3, 1, 0, 1, 1),          # the policy net's second layer at batch 1
    (1, 4, 3, 5, 16, (2, 3), (1, 2), (1, 1), 1, 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_matches_torch(case, dtype):
    N, C, H, W, O, k, s, p, d, g = case
    rng = np.random.default_rng(hash(case) % 2**32)
    kk = (k, k) if isinstance(k, int) else k
    xa, xt = pair((N, C, H, W), dtype, rng)
    wa, wt = pair((O, C // g) + kk, dtype, rng, 0.3)
    ba, bt = pair((O,), dtype, rng)
    ya = FC.conv2d(xa, wa, ba, s, p, d, g)
    yt = TF.conv2d(xt, wt, bt, s, p, d, g)
    close(ya, yt, dtype)
    assert ya._data.flags.c_contiguous
    assert type(ya.grad_fn).__name__ == "ConvolutionBackward0"
    backward_both(ya, yt, rng)
    close(xa.grad, xt.grad, dtype)
    close(wa.grad, wt.grad, dtype)
    close(ba.grad, bt.grad, dtype)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("O", [4, 40])  # both im2col layouts
def test_conv2d_no_bias_weight_only_grad_and_unbatched(dtype, O):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 7, 6)).astype(dtype)
    wa, wt = pair((O, 3, 3, 2), dtype, rng)
    ya = FC.conv2d(ac.tensor(x), wa, None, 1, "same")
    yt = TF.conv2d(torch.tensor(x), wt, None, 1, "same")
    close(ya, yt, dtype)
    backward_both(ya, yt, rng)
    close(wa.grad, wt.grad, dtype)
    # input-only gradient, unbatched, 'valid'
    xa, xt = pair((3, 7, 6), dtype, rng)
    w = rng.standard_normal((O, 3, 2, 2)).astype(dtype)
    ya = FC.conv2d(xa, ac.tensor(w), padding="valid", stride=(1, 2))
    yt = TF.conv2d(xt, torch.tensor(w), padding="valid", stride=(1, 2))
    close(ya, yt, dtype)
    backward_both(ya, yt, rng)
    close(xa.grad, xt.grad, dtype)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("args", [dict(stride=2), dict(padding=2, dilation=2), dict(padding="same"),
                                  dict(groups=2, stride=3, padding=1)])
@pytest.mark.parametrize("N,O", [(3, 6), (1, 24)])
def test_conv1d_matches_torch(args, dtype, N, O):
    rng = np.random.default_rng(2)
    xa, xt = pair((N, 4, 13), dtype, rng)
    g = args.get("groups", 1)
    wa, wt = pair((O, 4 // g, 3), dtype, rng)
    ba, bt = pair((O,), dtype, rng)
    ya, yt = FC.conv1d(xa, wa, ba, **args), TF.conv1d(xt, wt, bt, **args)
    close(ya, yt, dtype)
    backward_both(ya, yt, rng)
    for a, t in ((xa, xt), (wa, wt), (ba, bt)):
        close(a.grad, t.grad, dtype)


def _copy_params(ours, theirs):
    theirs.load_state_dict({k: torch.tensor(v._data.copy()) for k, v in ours.state_dict().items()})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv2d_module_padding_modes(mode, dtype):
    rng = np.random.default_rng(3)
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    m = nn.Conv2d(3, 5, (3, 2), stride=(1, 2), padding=(1, 1), padding_mode=mode, dtype=ac.float64 if dtype ==
                  np.float64 else ac.float32)
    mt = torch.nn.Conv2d(3, 5, (3, 2), stride=(1, 2), padding=(1, 1), padding_mode=mode, dtype=tdt)
    _copy_params(m, mt)
    xa, xt = pair((2, 3, 6, 7), dtype, rng)
    ya, yt = m(xa), mt(xt)
    close(ya, yt, dtype)
    backward_both(ya, yt, rng)
    close(xa.grad, xt.grad, dtype)
    close(m.weight.grad, mt.weight.grad, dtype)
    close(m.bias.grad, mt.bias.grad, dtype)


def test_conv_modules_parameters_init_and_state_dict():
    ac.manual_seed(0)
    m = nn.Conv2d(4, 8, 3)
    mt = torch.nn.Conv2d(4, 8, 3)
    assert list(m.state_dict()) == list(mt.state_dict()) == ["weight", "bias"]
    assert m.weight.shape == mt.weight.shape and m.bias.shape == mt.bias.shape
    bound = 1 / math.sqrt(4 * 9)
    for p in (m.weight, m.bias):
        assert np.abs(p._data).max() <= bound
        assert p._data.dtype == np.float32 and p.requires_grad
    # spread: kaiming_uniform(a=sqrt(5)) on the weight is U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    big = nn.Conv2d(16, 64, 3)
    assert np.abs(big.weight._data).max() > 0.9 / math.sqrt(16 * 9)
    assert abs(big.weight._data.std() - (2 / math.sqrt(16 * 9)) / math.sqrt(12)) < 0.01
    # torch -> ours -> torch
    m.load_state_dict({k: ac.tensor(v.numpy()) for k, v in mt.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 4, 5, 6)).astype(np.float32)
    close(m(ac.tensor(x)), mt(torch.tensor(x)), np.float32)
    assert repr(m) == repr(mt)
    for kw in (dict(stride=2, padding=1), dict(padding="same", dilation=2, bias=False), dict(groups=2),
               dict(padding_mode="reflect", padding=1)):
        assert repr(nn.Conv2d(4, 8, 3, **kw)) == repr(torch.nn.Conv2d(4, 8, 3, **kw))
    c1 = Conv1d(3, 4, 5, stride=2)
    assert repr(c1) == repr(torch.nn.Conv1d(3, 4, 5, stride=2))
    assert c1.weight.shape == (4, 3, 5)
    assert not nn.Conv2d(2, 2, 1, bias=False).state_dict().keys() - {"weight"}


def test_conv1d_module_matches_torch():
    rng = np.random.default_rng(4)
    m, mt = Conv1d(3, 4, 3, padding=1, bias=True), torch.nn.Conv1d(3, 4, 3, padding=1)
    _copy_params(m, mt)
    xa, xt = pair((2, 3, 10), np.float32, rng)
    ya, yt = m(xa), mt(xt)
    close(ya, yt, np.float32)
    backward_both(ya, yt, rng)
    close(xa.grad, xt.grad, np.float32)
    close(m.weight.grad, mt.weight.grad, np.float32)


@pytest.mark.parametrize("args", [dict(), dict(stride=2, padding=1), dict(dilation=2, padding=1),
                                  dict(groups=2, stride=(2, 1))])
@pytest.mark.parametrize("N,O", [(2, 2), (1, 12)])  # channels-last and channels-first im2col
def test_conv2d_gradcheck(args, N, O):
    rng = np.random.default_rng(5)
    x = ac.tensor(rng.standard_normal((N, 4, 5, 4)), requires_grad=True)
    w = ac.tensor(rng.standard_normal((O, 4 // args.get("groups", 1), 2, 3)), requires_grad=True)
    b = ac.tensor(rng.standard_normal(O), requires_grad=True)
    assert gradcheck(lambda x, w, b: FC.conv2d(x, w, b, **args), (x, w, b))


def test_conv1d_gradcheck():
    rng = np.random.default_rng(6)
    x = ac.tensor(rng.standard_normal((2, 3, 7)), requires_grad=True)
    w = ac.tensor(rng.standard_normal((2, 3, 3)), requires_grad=True)
    assert gradcheck(lambda x, w: FC.conv1d(x, w, stride=2, padding=1), (x, w))


def test_mode_pad_gradcheck():
    rng = np.random.default_rng(7)
    x = ac.tensor(rng.standard_normal((1, 2, 4, 3)), requires_grad=True)
    for mode in ("reflect", "replicate", "circular"):
        assert gradcheck(lambda x: FC._mode_pad(x, [(2, 1), (1, 2)], mode), (x,))


def test_conv_errors_match_torch():
    x = ac.zeros(2, 3, 8, 8)
    with pytest.raises(RuntimeError, match="expected input\\[2, 3, 8, 8\\] to have 2 channels, but got 3"):
        FC.conv2d(x, ac.zeros(4, 2, 3, 3))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        FC.conv2d(ac.zeros(1, 3, 2, 2), ac.zeros(4, 3, 3, 3))
    with pytest.raises(RuntimeError, match="expected scalar type"):
        FC.conv2d(x.double(), ac.zeros(4, 3, 3, 3))
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        FC.conv2d(x, ac.zeros(4, 3, 3, 3), stride=2, padding="same")
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\) input"):
        FC.conv2d(ac.zeros(8, 8), ac.zeros(4, 3, 3, 3))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)


def test_conv_no_grad_and_saved_input_modified():
    rng = np.random.default_rng(8)
    x = ac.tensor(rng.standard_normal((1, 2, 5, 5)).astype(np.float32))
    w = ac.tensor(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), requires_grad=True)
    with ac.no_grad():
        y = FC.conv2d(x, w)
    assert y.grad_fn is None and not y.requires_grad
    y = FC.conv2d(x, w)
    x.add_(1.0)  # torch: the saved input changed in place -> backward refuses
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_functional_namespace_exports_cnn_kernels():
    import autograd_core.nn.functional as F
    for name in ("conv1d", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "batch_norm", "layer_norm",
                 "dropout"):
        assert getattr(F, name) is getattr(FC, name), name
