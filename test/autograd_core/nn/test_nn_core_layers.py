"""Linear, activations and shape layers against the torch oracle: outputs and gradients."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import autograd_core as ag  # noqa: E402
import autograd_core.nn as nn  # noqa: E402
import autograd_core.nn.functional as F  # noqa: E402

DTYPES = [("float32", 1e-5), ("float64", 1e-10)]


def _pair(arr, requires_grad=True):
    """The same array as an autograd_core tensor and a torch tensor (both leaves)."""
    a = ag.tensor(arr, requires_grad=requires_grad)
    t = torch.tensor(arr, requires_grad=requires_grad)
    return a, t


def _close(ours, theirs, tol):
    o = ours.detach().numpy() if hasattr(ours, "detach") else np.asarray(ours)
    np.testing.assert_allclose(o, theirs.detach().numpy(), rtol=tol, atol=tol)


def _copy_params(ours, theirs):
    """Load torch's weights into our module (same architecture), via state_dict."""
    ours.load_state_dict({k: ag.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3,), (2, 4, 3), (2, 1, 4, 3)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(dtype, tol, shape, bias):
    rng = np.random.default_rng(0)
    tl = torch.nn.Linear(3, 4, bias=bias, dtype=getattr(torch, dtype))
    ol = nn.Linear(3, 4, bias=bias, dtype=getattr(ag, dtype))
    _copy_params(ol, tl)
    xa, xt = _pair(rng.standard_normal(shape).astype(dtype))
    ya, yt = ol(xa), tl(xt)
    _close(ya, yt, tol)
    w = rng.standard_normal(yt.shape).astype(dtype)
    (ya * ag.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    _close(xa.grad, xt.grad, tol)
    _close(ol.weight.grad, tl.weight.grad, tol)
    if bias:
        _close(ol.bias.grad, tl.bias.grad, tol)


def test_linear_is_one_fused_node():
    lin = nn.Linear(3, 2)
    x = ag.randn(4, 3, requires_grad=True)
    y = lin(x)
    assert type(y.grad_fn).__name__ == "AddmmBackward0"
    assert len(y.grad_fn.next_functions) == 3
    assert type(nn.Linear(3, 2, bias=False)(x).grad_fn).__name__ == "MmBackward0"
    with ag.no_grad():
        assert lin(x).grad_fn is None


def test_linear_default_init_bounds_and_repr():
    ag.manual_seed(0)
    lin = nn.Linear(50, 40)
    bound = 1 / np.sqrt(50)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    # U(-bound, bound) has std bound / sqrt(3).
    assert abs(w.std() - bound / np.sqrt(3)) < 0.05 * bound
    assert repr(lin) == repr(torch.nn.Linear(50, 40))
    assert lin.weight.dtype == ag.float32
    ag.manual_seed(0)
    assert np.array_equal(nn.Linear(50, 40).weight.detach().numpy(), w)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_linear_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="in_features"):
        nn.Linear(bad, 3)
    with pytest.raises(ValueError, match="out_features"):
        nn.Linear(3, bad)


def test_linear_shape_and_dtype_errors_match_torch_wording():
    lin = nn.Linear(3, 2)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(4x5 and 3x2\)"):
        lin(ag.randn(4, 5))
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype"):
        lin(ag.randn(4, 3, dtype=ag.float64))


ACTIVATIONS = [
    ("ReLU", {}, "relu"),
    ("LeakyReLU", {"negative_slope": 0.05}, "leaky_relu"),
    ("Tanh", {}, "tanh"),
    ("Sigmoid", {}, "sigmoid"),
    ("ELU", {"alpha": 0.7}, "elu"),
    ("Softplus", {"beta": 2.0, "threshold": 5.0}, "softplus"),
    ("GELU", {}, "gelu"),
    ("GELU", {"approximate": "tanh"}, "gelu"),
    ("SiLU", {}, "silu"),
    ("Softmax", {"dim": 1}, "softmax"),
    ("LogSoftmax", {"dim": -1}, "log_softmax"),
    ("Hardtanh", {"min_val": -0.5, "max_val": 0.8}, "hardtanh"),
    ("ReLU6", {}, "relu6"),
    ("LogSigmoid", {}, "logsigmoid"),
    ("Softsign", {}, "softsign"),
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("name,kwargs,fname", ACTIVATIONS, ids=[f"{a[0]}-{i}" for i, a in enumerate(ACTIVATIONS)])
def test_activation_modules_and_functional_match_torch(dtype, tol, name, kwargs, fname):
    rng = np.random.default_rng(1)
    # Spread wide enough to cross every branch (softplus threshold, tanh saturation, ...).
    x = (rng.standard_normal((4, 6)) * 4).astype(dtype)
    w = rng.standard_normal((4, 6)).astype(dtype)
    mod_ours, mod_torch = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    assert repr(mod_ours) == repr(mod_torch)
    for ours_fn, torch_fn in ((mod_ours, mod_torch),
                              (lambda t: getattr(F, fname)(t, **kwargs),
                               lambda t: getattr(torch.nn.functional, fname)(t, **kwargs))):
        xa, xt = _pair(x)
        ya, yt = ours_fn(xa), torch_fn(xt)
        _close(ya, yt, tol)
        (ya * ag.tensor(w)).sum().backward()
        (yt * torch.tensor(w)).sum().backward()
        _close(xa.grad, xt.grad, tol)


@pytest.mark.parametrize("name,kwargs", [("ReLU", {}), ("LeakyReLU", {"negative_slope": 0.2}), ("ELU", {}),
                                         ("SiLU", {}), ("Hardtanh", {})])
def test_inplace_activations_modify_input_and_keep_gradient(name, kwargs):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4))
    xa, xt = _pair(x)
    ha, ht = xa * 2, xt * 2
    ya = getattr(nn, name)(inplace=True, **kwargs)(ha)
    yt = getattr(torch.nn, name)(inplace=True, **kwargs)(ht)
    assert ya is ha and yt is ht
    _close(ha, ht, 1e-12)
    ya.sum().backward()
    yt.sum().backward()
    _close(xa.grad, xt.grad, 1e-12)
    assert "inplace=True" in repr(getattr(nn, name)(inplace=True))


def test_gelu_and_silu_are_single_nodes():
    x = ag.randn(3, requires_grad=True)
    assert type(F.gelu(x).grad_fn).__name__ == "GeluBackward0"
    assert type(F.silu(x).grad_fn).__name__ == "SiluBackward0"
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU(approximate="fast")


def test_flatten_unflatten_identity_match_torch():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4, 5))
    for ours, theirs in ((nn.Flatten(), torch.nn.Flatten()), (nn.Flatten(0, 2), torch.nn.Flatten(0, 2)),
                         (nn.Unflatten(1, (3, 1)), torch.nn.Unflatten(1, (3, 1))),
                         (nn.Identity(54, unused=1), torch.nn.Identity(54, unused=1))):
        xa, xt = _pair(x)
        ya, yt = ours(xa), theirs(xt)
        assert tuple(ya.shape) == tuple(yt.shape)
        _close(ya, yt, 0)
        ya.pow(2).sum().backward()
        yt.pow(2).sum().backward()
        _close(xa.grad, xt.grad, 1e-12)
        assert repr(ours) == repr(theirs)


def test_one_hot_matches_torch():
    idx = np.array([[0, 2], [1, 3]])
    np.testing.assert_array_equal(F.one_hot(ag.tensor(idx), 5).numpy(),
                                  torch.nn.functional.one_hot(torch.tensor(idx), 5).numpy())
    assert F.one_hot(ag.tensor(idx)).shape == (2, 2, 4)


def test_linear_detects_in_place_weight_change_before_backward():
    lin = nn.Linear(3, 2)
    x = ag.randn(4, 3, requires_grad=True)
    y = lin(x)
    with ag.no_grad():
        lin.weight.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("needs", [(True, False, False), (False, True, False), (False, False, True)])
def test_linear_gradients_only_for_inputs_that_need_them(needs):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((5, 3)), rng.standard_normal((2, 3)), rng.standard_normal(2)]
    ours = [ag.tensor(a, requires_grad=r) for a, r in zip(arrays, needs)]
    theirs = [torch.tensor(a, requires_grad=r) for a, r in zip(arrays, needs)]
    F.linear(*ours).pow(2).sum().backward()
    torch.nn.functional.linear(*theirs).pow(2).sum().backward()
    for a, b in zip(ours, theirs):
        assert (a.grad is None) == (b.grad is None)
        if b.grad is not None:
            _close(a.grad, b.grad, 1e-12)
