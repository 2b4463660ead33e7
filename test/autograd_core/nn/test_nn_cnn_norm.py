"""BatchNorm1d/2d and LayerNorm against torch: outputs, gradients, running statistics over several
training steps, eval mode, momentum=None, buffers and state dicts; gradcheck of the kernels."""
import numpy as np
import pytest

import autograd_core as ac
import autograd_core.nn as nn
from autograd_core.autograd import gradcheck
from autograd_core.nn import _functional_cnn as FC

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {np.float32: 1e-5, np.float64: 1e-10}
ADT = {np.float32: ac.float32, np.float64: ac.float64}
TDT = {np.float32: torch.float32, np.float64: torch.float64}


def close(a, b, dtype, what=""):
    a = a._data if isinstance(a, ac.Tensor) else np.asarray(a)
    b = b.detach().numpy()
    assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL[dtype] * max(1.0, float(np.abs(b).max(initial=0))),
                               err_msg=what)


def sync(m, mt):
    mt.load_state_dict({k: torch.tensor(v._data.copy()) for k, v in m.state_dict().items()})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (8, 4)), ("BatchNorm1d", (5, 4, 7)),
                                       ("BatchNorm2d", (3, 4, 5, 6)), ("BatchNorm2d", (1, 4, 2, 3)),
                                       ("BatchNorm1d", (2, 4))])
@pytest.mark.parametrize("momentum", [0.1, 0.5, None])
def test_batchnorm_training_steps_and_eval_match_torch(cls, shape, momentum, dtype):
    rng = np.random.default_rng(0)
    m = getattr(nn, cls)(4, momentum=momentum, dtype=ADT[dtype])
    mt = getattr(torch.nn, cls)(4, momentum=momentum, dtype=TDT[dtype])
    # non-trivial affine parameters
    m.weight._data[:] = rng.uniform(0.5, 1.5, 4)
    m.bias._data[:] = rng.standard_normal(4)
    sync(m, mt)
    for step in range(4):
        x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
        xa, xt = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yt = m(xa), mt(xt)
        close(ya, yt, dtype, f"y step {step}")
        assert type(ya.grad_fn).__name__ == "NativeBatchNormBackward0"
        g = rng.standard_normal(shape).astype(dtype)
        ya.backward(ac.tensor(g))
        yt.backward(torch.tensor(g))
        close(xa.grad, xt.grad, dtype, "dx")
        close(m.weight.grad, mt.weight.grad, dtype, "dw")
        close(m.bias.grad, mt.bias.grad, dtype, "db")
        close(m.running_mean, mt.running_mean, dtype, "running_mean")
        close(m.running_var, mt.running_var, dtype, "running_var")
        assert int(m.num_batches_tracked.item()) == int(mt.num_batches_tracked) == step + 1
        m.zero_grad()
        mt.zero_grad()
    m.eval()
    mt.eval()
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    xa, xt = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yt = m(xa), mt(xt)
    close(ya, yt, dtype, "eval y")
    g = rng.standard_normal(shape).astype(dtype)
    ya.backward(ac.tensor(g))
    yt.backward(torch.tensor(g))
    close(xa.grad, xt.grad, dtype, "eval dx")
    close(m.weight.grad, mt.weight.grad, dtype, "eval dw")
    close(m.bias.grad, mt.bias.grad, dtype, "eval db")
    rm = m.running_mean._data.copy()
    m(xa)
    np.testing.assert_array_equal(m.running_mean._data, rm)  # eval leaves the statistics alone
    assert int(m.num_batches_tracked.item()) == 4


def test_batchnorm_variants_match_torch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 3, 4, 4)).astype(np.float32)
    for kw in (dict(affine=False), dict(track_running_stats=False), dict(affine=False, track_running_stats=False),
               dict(eps=1e-3), dict(bias=False)):
        m, mt = nn.BatchNorm2d(3, **kw), torch.nn.BatchNorm2d(3, **kw)
        assert list(m.state_dict()) == list(mt.state_dict())
        assert repr(m) == repr(mt)
        for mode in ("train", "eval"):
            getattr(m, mode)()
            getattr(mt, mode)()
            xa, xt = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
            ya, yt = m(xa), mt(xt)
            close(ya, yt, np.float32, f"{kw} {mode}")
            ya.sum().backward()
            yt.sum().backward()
            close(xa.grad, xt.grad, np.float32)


def test_batchnorm_state_dict_interchange_and_buffers():
    m, mt = nn.BatchNorm2d(5), torch.nn.BatchNorm2d(5)
    sd = m.state_dict()
    assert list(sd) == list(mt.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                                 "num_batches_tracked"]
    assert sd["num_batches_tracked"]._data.dtype == np.int64 and sd["num_batches_tracked"].shape == ()
    assert [n for n, _ in m.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    np.testing.assert_array_equal(sd["running_var"]._data, np.ones(5, np.float32))
    mt.train()
    mt(torch.randn(4, 5, 3, 3))
    m.load_state_dict({k: ac.tensor(v.numpy()) for k, v in mt.state_dict().items()})
    np.testing.assert_array_equal(m.running_var._data, mt.running_var.numpy())
    assert int(m.num_batches_tracked.item()) == 1
    m.reset_running_stats()
    assert int(m.num_batches_tracked.item()) == 0 and np.all(m.running_mean._data == 0)


def test_batchnorm_errors():
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        nn.BatchNorm1d(3)(ac.zeros(1, 3))
    with pytest.raises(ValueError, match="expected 4D input \\(got 3D input\\)"):
        nn.BatchNorm2d(3)(ac.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="expected 2D or 3D input \\(got 4D input\\)"):
        nn.BatchNorm1d(3)(ac.zeros(2, 3, 4, 4))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,ns,affine", [((3, 4, 5, 6), (5, 6), True), ((7, 10), 10, True),
                                             ((2, 3, 8), (8,), False), ((1, 5), (5,), "nobias")])
def test_layernorm_matches_torch(shape, ns, affine, dtype):
    rng = np.random.default_rng(2)
    kw = dict(elementwise_affine=bool(affine), bias=affine != "nobias")
    m, mt = nn.LayerNorm(ns, dtype=ADT[dtype], **kw), torch.nn.LayerNorm(ns, dtype=TDT[dtype], **kw)
    assert repr(m) == repr(mt) and list(m.state_dict()) == list(mt.state_dict())
    if affine:
        m.weight._data[...] = rng.uniform(0.5, 1.5, m.weight.shape)
        if m.bias is not None:
            m.bias._data[...] = rng.standard_normal(m.bias.shape)
        sync(m, mt)
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    xa, xt = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yt = m(xa), mt(xt)
    close(ya, yt, dtype)
    assert type(ya.grad_fn).__name__ == "NativeLayerNormBackward0"
    g = rng.standard_normal(shape).astype(dtype)
    ya.backward(ac.tensor(g))
    yt.backward(torch.tensor(g))
    close(xa.grad, xt.grad, dtype)
    for (n, p), (_, pt) in zip(m.named_parameters(), mt.named_parameters()):
        close(p.grad, pt.grad, dtype, n)


def test_norm_gradcheck():
    rng = np.random.default_rng(3)
    x = ac.tensor(rng.standard_normal((4, 3, 2, 2)), requires_grad=True)
    w = ac.tensor(rng.uniform(0.5, 1.5, 3), requires_grad=True)
    b = ac.tensor(rng.standard_normal(3), requires_grad=True)
    assert gradcheck(lambda x, w, b: FC.batch_norm(x, None, None, w, b, training=True), (x, w, b))
    rm, rv = ac.tensor(rng.standard_normal(3)), ac.tensor(rng.uniform(0.5, 2, 3))
    assert gradcheck(lambda x, w, b: FC.batch_norm(x, rm, rv, w, b, training=False), (x, w, b))
    x3 = ac.tensor(rng.standard_normal((5, 3, 4)), requires_grad=True)
    assert gradcheck(lambda x: FC.batch_norm(x, None, None, training=True), (x3,))
    w2 = ac.tensor(rng.uniform(0.5, 1.5, (3, 4)), requires_grad=True)
    b2 = ac.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    assert gradcheck(lambda x, w, b: FC.layer_norm(x, (3, 4), w, b), (x3, w2, b2))
