"""The torch surface real programs use (issue 15): devices, accelerator, Variable, default device,
tril/triu/topk/narrow, new_* factories, keyword/out= argument forms, range indexing,
tensor(deque), dropout2d's rank rules. Each compared with torch where torch is installed."""
import collections
import warnings

import numpy as np
import pytest

import autograd_core as ac

torch = pytest.importorskip("torch")


def _t(a):
    return torch.tensor(a.detach().numpy() if isinstance(a, ac.Tensor) else a)


# -- devices ------------------------------------------------------------------------------------
def test_device_objects_construct_like_torch():
    for spec in ["cpu", "cuda", "cuda:1", "mps", "meta"]:
        d, t = ac.device(spec), torch.device(spec)
        assert (str(d), repr(d), d.type, d.index) == (str(t), repr(t), t.type, t.index)
    assert str(ac.device("cuda", 0)) == str(torch.device("cuda", 0)) == "cuda:0"
    assert ac.device("cpu") == "cpu" and ac.device("cuda") != ac.device("cpu")
    assert ac.zeros(2).device == ac.device("cpu")
    with pytest.raises(RuntimeError):
        ac.device("gpu")
    with pytest.raises(RuntimeError):
        torch.device("gpu")


@pytest.mark.parametrize("use", [lambda d: ac.zeros(2, device=d), lambda d: ac.ones(2).to(d),
                                 lambda d: ac.nn.Linear(2, 2).to(d), lambda d: ac.nn.Linear(2, 2, device=d),
                                 lambda d: ac.tensor([1.0], device=d), lambda d: ac.ones(2).new_zeros(3, device=d)])
def test_placing_tensors_on_cuda_raises_a_clear_error(use):
    with pytest.raises(RuntimeError, match="CUDA") as e:
        use(ac.device("cuda"))
    assert isinstance(e.value, AssertionError)  # torch raises AssertionError("Torch not compiled with CUDA")
    assert "CPU only" in str(e.value)


def test_accelerator_reports_none_as_torch_on_a_cpu_machine():
    assert ac.accelerator.is_available() is torch.accelerator.is_available() is False
    assert ac.accelerator.current_accelerator() is None and torch.accelerator.current_accelerator() is None
    assert ac.accelerator.device_count() == torch.accelerator.device_count() == 0
    for name in ("current_device_index", "synchronize", "empty_cache"):
        with pytest.raises(RuntimeError, match="none is available"):
            getattr(ac.accelerator, name)()
        with pytest.raises(RuntimeError, match="none is available"):
            getattr(torch.accelerator, name)()
    dev = ac.accelerator.current_accelerator() if ac.accelerator.is_available() else "cpu"
    assert ac.ones(1).to(dev).device.type == "cpu"


def test_set_default_device():
    ac.set_default_device("cpu")
    assert ac.get_default_device() == ac.device("cpu")
    ac.set_default_device(ac.device("cpu"))
    with pytest.raises(RuntimeError, match="CUDA"):
        ac.set_default_device("cuda")
    assert ac.get_default_device().type == "cpu"


def test_variable_is_the_legacy_alias():
    a = ac.ones(2)
    v = ac.autograd.Variable(a, requires_grad=True)
    assert v.is_leaf and v.requires_grad and isinstance(a, ac.autograd.Variable)
    v._data[0] = 5.0  # shares a's data, as torch's Variable(tensor)
    assert a[0].item() == 5.0
    w = ac.ones(2, requires_grad=True) * 2
    assert ac.autograd.Variable(w).grad_fn is None and not ac.autograd.Variable(w).requires_grad
    with pytest.raises(TypeError, match="has to be a tensor"):
        ac.autograd.Variable([1.0])
    with pytest.warns(UserWarning, match="volatile"):
        ac.autograd.Variable(a, volatile=True)
    (v * v).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), [10.0, 2.0])


# -- tril / triu / topk / narrow / new_* ----------------------------------------------------------
@pytest.mark.parametrize("fn", ["tril", "triu"])
@pytest.mark.parametrize("diag", [-2, -1, 0, 1, 3])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 3, 4)])
def test_tril_triu_values_and_gradients(fn, diag, shape):
    x = np.random.RandomState(0).randn(*shape)
    a = ac.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    ya, yt = getattr(ac, fn)(a, diag), getattr(torch, fn)(t, diag)
    np.testing.assert_array_equal(ya.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(getattr(a, fn)(diagonal=diag).detach().numpy(), yt.detach().numpy())
    w = np.random.RandomState(1).randn(*ya.shape)
    (ya * ac.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), t.grad.numpy())
    assert type(ya.grad_fn).__name__ == type(yt.grad_fn).__name__


def test_tril_inplace_and_errors():
    x = ac.ones(3, 3)
    assert x.tril_() is x
    np.testing.assert_array_equal(x.numpy(), np.tril(np.ones((3, 3))))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        ac.tril(ac.ones(3))


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("k", [1, 3])
def test_topk_matches_torch(largest, dim, k):
    x = np.random.RandomState(2).permutation(60).reshape(4, 5, 3).astype(np.float64) / 7
    a = ac.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    k = min(k, x.shape[dim])
    ra, rt = ac.topk(a, k, dim=dim, largest=largest), torch.topk(t, k, dim=dim, largest=largest)
    np.testing.assert_array_equal(ra.values.detach().numpy(), rt.values.detach().numpy())
    np.testing.assert_array_equal(ra.indices.numpy(), rt.indices.numpy())
    v, i = a.topk(k, dim, largest, True)
    np.testing.assert_array_equal(i.numpy(), rt[1].numpy())
    w = np.random.RandomState(3).randn(*ra.values.shape)
    (ra.values * ac.tensor(w)).sum().backward()
    (rt.values * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), t.grad.numpy())
    assert type(ra.values.grad_fn).__name__ == type(rt.values.grad_fn).__name__ == "TopkBackward0"


def test_topk_nan_int_zero_d_and_errors():
    x = [1.0, float("nan"), 3.0, float("inf"), 2.0]
    ra, rt = ac.topk(ac.tensor(x), 3), torch.topk(torch.tensor(x), 3)
    np.testing.assert_array_equal(ra.indices.numpy(), rt.indices.numpy())
    ri, rti = ac.topk(ac.tensor([3, 1, 2]), 2), torch.topk(torch.tensor([3, 1, 2]), 2)
    np.testing.assert_array_equal(ri.values.numpy(), rti.values.numpy())
    assert ri.values.dtype == ac.int64
    r0 = ac.topk(ac.tensor(2.5), 1)
    assert r0.values.shape == torch.topk(torch.tensor(2.5), 1).values.shape == ()
    with pytest.raises(RuntimeError, match="out of range"):
        ac.topk(ac.ones(3), 4)


def test_narrow_is_a_view_like_torch():
    x = np.arange(24.0).reshape(4, 6)
    a, t = ac.tensor(x), torch.tensor(x)
    for dim, start, length in [(0, 1, 2), (1, -3, 3), (-1, 0, 6), (0, 4, 0)]:
        np.testing.assert_array_equal(a.narrow(dim, start, length).numpy(), t.narrow(dim, start, length).numpy())
    v = ac.narrow(a, 1, 2, 2)
    v.fill_(-1)
    assert a[0, 2].item() == -1
    with pytest.raises(RuntimeError, match="exceeds"):
        a.narrow(0, 3, 2)


def test_new_factories_take_the_tensors_dtype():
    for dt, tdt in [(ac.float64, torch.float64), (ac.int64, torch.int64), (ac.float32, torch.float32)]:
        a, t = ac.ones(2, dtype=dt), torch.ones(2, dtype=tdt)
        pairs = [(a.new_zeros(2, 3), t.new_zeros(2, 3)), (a.new_ones((3,)), t.new_ones((3,))),
                 (a.new_full((2, 2), 7), t.new_full((2, 2), 7)), (a.new_tensor([1, 2]), t.new_tensor([1, 2])),
                 (a.new_empty(0, 2), t.new_empty(0, 2)), (a.new_zeros(2, dtype=ac.float64),
                                                         t.new_zeros(2, dtype=torch.float64))]
        for x, y in pairs:
            assert str(x.dtype) == str(y.dtype) and tuple(x.shape) == tuple(y.shape)
            if x.numel() and x is not pairs[4][0]:
                np.testing.assert_array_equal(x.numpy(), y.numpy())
    z = ac.ones(1).new_zeros(2, requires_grad=True)
    assert z.requires_grad and z.is_leaf


# -- argument forms ------------------------------------------------------------------------------
def test_matmul_and_mul_keyword_and_out_forms():
    x = np.random.RandomState(4).randn(3, 4)
    y = np.random.RandomState(5).randn(4, 2)
    a, b = ac.tensor(x), ac.tensor(y)
    ref = torch.matmul(input=torch.tensor(x), other=torch.tensor(y)).numpy()
    np.testing.assert_allclose(ac.matmul(input=a, other=b).numpy(), ref, rtol=1e-15)
    np.testing.assert_allclose(ac.matmul(a, other=b).numpy(), ref, rtol=1e-15)
    out = ac.empty(0, dtype=ac.float64)
    r = ac.matmul(a, b, out=out)
    assert r is out and tuple(out.shape) == (3, 2)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-15)
    out2 = ac.zeros(3, 4, dtype=ac.float64)
    ac.mul(a, a, out=out2)
    np.testing.assert_allclose(out2.numpy(), x * x)
    np.testing.assert_allclose(ac.mul(2.0, a).numpy(), 2 * x)
    np.testing.assert_allclose(ac.mul(input=a, other=3).numpy(), 3 * x)
    g = ac.tensor(x, requires_grad=True)
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        ac.mul(g, a, out=out2)
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        torch.mul(torch.tensor(x, requires_grad=True), torch.tensor(x), out=torch.zeros(3, 4, dtype=torch.float64))
    with ac.no_grad():
        ac.mul(g, a, out=out2)  # fine without recording, as torch
    h = ac.matmul(input=g, other=b).sum()
    h.backward()
    np.testing.assert_allclose(g.grad.numpy(), np.ones((3, 2)) @ y.T)


def test_range_index_and_tensor_from_deque():
    x = np.arange(20.0).reshape(5, 4)
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    np.testing.assert_array_equal(a[range(1, 4)].detach().numpy(), t[range(1, 4)].detach().numpy())
    np.testing.assert_array_equal(a[:, range(0, 4, 2)].detach().numpy(), t[:, range(0, 4, 2)].detach().numpy())
    a[range(3)].sum().backward()
    t[range(3)].sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), t.grad.numpy())
    d = collections.deque([1.5, 2.5, 3.5])
    assert ac.tensor(d).tolist() == torch.tensor(d).tolist()
    assert str(ac.tensor(collections.deque([1, 2])).dtype) == str(torch.tensor(collections.deque([1, 2])).dtype)
    assert ac.tensor(range(4)).tolist() == [0, 1, 2, 3]


# -- dropout2d -----------------------------------------------------------------------------------
def _warned(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(m.message) for m in w]


@pytest.mark.parametrize("shape", [(6, 40), (4, 5, 30), (2, 3, 4, 5), (1, 2, 3, 4, 5)])
def test_dropout2d_warns_and_masks_as_torch(shape):
    ours, wa = _warned(lambda: ac.nn.functional.dropout2d(ac.ones(*shape), 0.5, True))
    theirs, wt = _warned(lambda: torch.nn.functional.dropout2d(torch.ones(*shape), 0.5, True))
    assert wa == wt
    # torch's rule for every rank: one mask value per (dim0, dim1) pair
    for y in (ours.numpy(), theirs.numpy()):
        flat = y.reshape(shape[0], shape[1], -1)
        assert np.all((flat == 0).all(-1) | (flat == 2).all(-1))
    if len(shape) == 2:
        assert wa and "Received a 2-D input to dropout2d" in wa[0]
    _, we = _warned(lambda: ac.nn.Dropout2d(0.3).eval()(ac.ones(*shape)))
    assert len(we) == len(wa)  # torch warns in eval mode too


def test_dropout2d_rejects_1d_like_torch():
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ac.nn.functional.dropout2d(ac.ones(4), 0.5, True)


def test_namespaces_resolve_before_anything_else_is_touched():
    import subprocess
    import sys
    code = ("import autograd_core as torch\n"
            "print(torch.accelerator.is_available(), torch.utils.data.DataLoader.__name__, "
            "torch.autograd.Variable.__name__, torch.nn.Transformer.__name__, torch.optim.LBFGS.__name__)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["False", "DataLoader", "Variable", "Transformer", "LBFGS"]




# -- sort / argsort / scatter ------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort_match_torch(dim, descending):
    x = np.random.RandomState(6).permutation(24).reshape(2, 3, 4) / 5.0
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ra, rt = ac.sort(a, dim, descending), torch.sort(t, dim, descending)
    np.testing.assert_array_equal(ra.values.detach().numpy(), rt.values.detach().numpy())
    np.testing.assert_array_equal(ra.indices.numpy(), rt.indices.numpy())
    np.testing.assert_array_equal(a.detach().argsort(dim, descending).numpy(), torch.argsort(t.detach(), dim,
                                                                                          descending).numpy())
    w = np.random.RandomState(7).randn(2, 3, 4)
    (ra.values * ac.tensor(w)).sum().backward()
    (rt.values * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), t.grad.numpy())
    assert type(ra.values.grad_fn).__name__ == type(rt.values.grad_fn).__name__
    nan = [2.0, float("nan"), -1.0]
    for d in (False, True):
        np.testing.assert_array_equal(ac.sort(ac.tensor(nan), descending=d).indices.numpy(),
                                      torch.sort(torch.tensor(nan), descending=d).indices.numpy())


@pytest.mark.parametrize("kind", ["src", "value", "add", "reduce_add", "reduce_multiply"])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_family_matches_torch(kind, dim):
    rng = np.random.RandomState(8)
    inp, src = rng.randn(3, 5), rng.randn(3, 5)
    idx = rng.randint(0, 3 if dim == 0 else 5, size=(2, 4))
    if kind in ("src", "value"):  # distinct targets: torch leaves repeated writes unspecified
        idx = (np.argsort(rng.rand(3, 4), 0)[:2] if dim == 0 else np.argsort(rng.rand(2, 5), 1)[:, :4])
    src = rng.randn(*idx.shape)  # torch's backward needs src shaped like index
    a, s = ac.tensor(inp, requires_grad=True), ac.tensor(src, requires_grad=True)
    t, st = torch.tensor(inp, requires_grad=True), torch.tensor(src, requires_grad=True)
    ia, it = ac.tensor(idx), torch.tensor(idx)
    if kind == "src":
        ya, yt = a.scatter(dim, ia, s), t.scatter(dim, it, st)
    elif kind == "value":
        ya, yt = ac.scatter(a, dim, ia, value=2.5), torch.scatter(t, dim, it, value=2.5)
    elif kind == "add":
        ya, yt = a.scatter_add(dim, ia, s), torch.scatter_add(t, dim, it, st)
    else:
        red = kind.split("_")[1]
        with ac.no_grad(), torch.no_grad():
            ya, yt = a.scatter(dim, ia, s, reduce=red), t.scatter(dim, it, st, reduce=red)
        np.testing.assert_allclose(ya.numpy(), yt.numpy(), rtol=1e-15)
        return
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), rtol=1e-15)
    assert type(ya.grad_fn).__name__ == type(yt.grad_fn).__name__
    w = rng.randn(3, 5)
    (ya * ac.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-15)
    if kind != "value":
        np.testing.assert_allclose(s.grad.numpy(), st.grad.numpy(), rtol=1e-15)


def test_scatter_inplace_one_hot_and_errors():
    oh = ac.zeros(6, dtype=ac.float).scatter_(0, ac.tensor(4), value=1)
    assert oh.tolist() == torch.zeros(6).scatter_(0, torch.tensor(4), value=1).tolist()
    x = ac.zeros(2, 3)
    x.scatter_add_(1, ac.tensor([[0, 0], [2, 1]]), ac.ones(2, 2))
    assert x.tolist() == [[2.0, 0.0, 0.0], [0.0, 1.0, 1.0]]
    with pytest.raises(RuntimeError, match="out of bounds"):
        ac.zeros(2, 3).scatter(1, ac.tensor([[3]]), value=1.0)
    with pytest.raises(RuntimeError, match="int64"):
        ac.zeros(2, 3).scatter(1, ac.tensor([[1.0]]), value=1.0)
    assert tuple(ac.ones(2, 3).multinomial(2).shape) == (2, 2)
    assert set(ac.full((50,), 0.5).bernoulli().tolist()) <= {0.0, 1.0}
