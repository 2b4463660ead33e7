"""Losses (modules and functional) against the torch oracle: values and input/target gradients."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import autograd_core as ag  # noqa: E402
import autograd_core.nn as nn  # noqa: E402
import autograd_core.nn.functional as F  # noqa: E402

DTYPES = [("float32", 1e-5), ("float64", 1e-10)]
REDUCTIONS = ["mean", "sum", "none"]


def _pair(arr, requires_grad=True):
    return ag.tensor(arr, requires_grad=requires_grad), torch.tensor(arr, requires_grad=requires_grad)


def _close(ours, theirs, tol):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)


def _check(ours_fn, torch_fn, inputs, tol, grad_of):
    """Run both, compare the loss and the gradients of the inputs listed in `grad_of`."""
    rng = np.random.default_rng(7)
    pairs = [_pair(a, requires_grad=i in grad_of) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
             else (ag.tensor(a), torch.tensor(a)) for i, a in enumerate(inputs)]
    la = ours_fn(*[p[0] for p in pairs])
    lt = torch_fn(*[p[1] for p in pairs])
    assert tuple(la.shape) == tuple(lt.shape)
    _close(la, lt, tol)
    w = rng.standard_normal(tuple(lt.shape)).astype(inputs[0].dtype)
    (la * ag.tensor(w)).sum().backward()
    (lt * torch.tensor(w)).sum().backward()
    for i in grad_of:
        _close(pairs[i][0].grad, pairs[i][1].grad, tol)


REGRESSION = [("MSELoss", "mse_loss", {}), ("L1Loss", "l1_loss", {}),
              ("SmoothL1Loss", "smooth_l1_loss", {"beta": 0.5}), ("SmoothL1Loss", "smooth_l1_loss", {"beta": 0.0}),
              ("HuberLoss", "huber_loss", {"delta": 0.7})]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("cls,fname,kw", REGRESSION, ids=[f"{r[0]}-{i}" for i, r in enumerate(REGRESSION)])
def test_regression_losses_match_torch(dtype, tol, reduction, cls, fname, kw):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 5)) * 2).astype(dtype)
    t = (rng.standard_normal((4, 5)) * 2).astype(dtype)
    _check(getattr(nn, cls)(reduction=reduction, **kw), getattr(torch.nn, cls)(reduction=reduction, **kw),
           [x, t], tol, grad_of=(0, 1))
    _check(lambda a, b: getattr(F, fname)(a, b, reduction=reduction, **kw),
           lambda a, b: getattr(torch.nn.functional, fname)(a, b, reduction=reduction, **kw), [x, t], tol, (0, 1))


def test_mse_broadcast_warns_and_reduces_gradient_shapes():
    x, t = np.ones((3, 2)), np.zeros((1, 2))
    with pytest.warns(UserWarning, match="different to the input size"):
        _check(lambda a, b: F.mse_loss(a, b), lambda a, b: torch.nn.functional.mse_loss(a, b), [x, t], 1e-12, (0, 1))


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_matches_torch(dtype, tol, reduction, weighted):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.02, 0.98, (6, 3)).astype(dtype)
    t = rng.uniform(0, 1, (6, 3)).astype(dtype)
    w = rng.uniform(0.5, 2, (3,)).astype(dtype) if weighted else None
    kw_o = {"weight": ag.tensor(w)} if weighted else {}
    kw_t = {"weight": torch.tensor(w)} if weighted else {}
    _check(nn.BCELoss(reduction=reduction, **kw_o), torch.nn.BCELoss(reduction=reduction, **kw_t), [x, t], tol,
           grad_of=(0, 1))


def test_bce_input_checks_and_log_clamp():
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(ag.tensor([1.5]), ag.tensor([1.0]))
    with pytest.raises(ValueError, match="different to the input size"):
        F.binary_cross_entropy(ag.tensor([0.5, 0.5]), ag.tensor([1.0]))
    # x = 0 with t = 1: torch clamps log(0) at -100.
    assert F.binary_cross_entropy(ag.tensor([0.0]), ag.tensor([1.0])).item() == pytest.approx(100.0)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("pos_weight,weight", [(False, False), (True, False), (True, True), (False, True)])
def test_bce_with_logits_matches_torch(dtype, tol, reduction, pos_weight, weight):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((5, 3)) * 6).astype(dtype)  # wide: exercises the stable form
    t = rng.uniform(0, 1, (5, 3)).astype(dtype)
    pw = rng.uniform(0.5, 3, (3,)).astype(dtype)
    w = rng.uniform(0.5, 2, (5, 1)).astype(dtype)
    kwo, kwt = {}, {}
    if weight:
        kwo["weight"], kwt["weight"] = ag.tensor(w), torch.tensor(w)
    if pos_weight:
        kwo["pos_weight"], kwt["pos_weight"] = ag.tensor(pw), torch.tensor(pw)
    _check(nn.BCEWithLogitsLoss(reduction=reduction, **kwo), torch.nn.BCEWithLogitsLoss(reduction=reduction, **kwt),
           [x, t], tol, (0, 1))


def test_class_weights_are_not_differentiable_as_in_torch():
    x = ag.randn(3, 4, requires_grad=True)
    w = ag.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'pos_weight'"):
        F.binary_cross_entropy_with_logits(x, ag.zeros(3, 4), pos_weight=w)
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
        F.cross_entropy(x, ag.tensor([0, 1, 2]), weight=w)
    with ag.no_grad():
        F.cross_entropy(x, ag.tensor([0, 1, 2]), weight=w)


def test_bce_with_logits_is_stable_for_huge_logits():
    x = ag.tensor([1000.0, -1000.0], requires_grad=True)
    loss = nn.BCEWithLogitsLoss()(x, ag.tensor([0.0, 1.0]))
    assert np.isfinite(loss.item()) and loss.item() == pytest.approx(1000.0)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.5, -0.5])
    with pytest.raises(ValueError, match="must be the same as input size"):
        nn.BCEWithLogitsLoss()(ag.zeros(3), ag.zeros(2))
    m = nn.BCEWithLogitsLoss(pos_weight=ag.ones(3))
    assert list(m.state_dict()) == list(torch.nn.BCEWithLogitsLoss(pos_weight=torch.ones(3)).state_dict())


CE_CASES = [
    # (input shape, target kind, kwargs)
    ((6, 4), "index", {}),
    ((6, 4), "index", {"weight": True}),
    ((6, 4), "index", {"ignore_index": 2}),
    ((6, 4), "index", {"weight": True, "ignore_index": 1, "label_smoothing": 0.2}),
    ((6, 4), "index", {"label_smoothing": 0.1}),
    ((4,), "index", {}),
    ((3, 4, 2, 5), "index", {"weight": True, "label_smoothing": 0.3}),
    ((6, 4), "prob", {}),
    ((6, 4), "prob", {"weight": True, "label_smoothing": 0.15}),
    ((3, 4, 5), "prob", {"label_smoothing": 0.1}),
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,kind,kw", CE_CASES, ids=[f"ce{i}" for i in range(len(CE_CASES))])
def test_cross_entropy_matches_torch(dtype, tol, reduction, shape, kind, kw):
    rng = np.random.default_rng(3)
    c = shape[1] if len(shape) > 1 else shape[0]
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    if kind == "index":
        tshape = shape[:1] + shape[2:] if len(shape) > 1 else ()
        t = rng.integers(0, c, tshape).astype(np.int64)
        grad_of = (0,)
    else:
        t = rng.uniform(0, 1, shape).astype(dtype)
        t /= t.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
        grad_of = (0, 1)
    w = rng.uniform(0.5, 2, (c,)).astype(dtype)
    kwo = dict(kw)
    kwt = dict(kw)
    if kw.get("weight"):
        kwo["weight"], kwt["weight"] = ag.tensor(w), torch.tensor(w)
    _check(nn.CrossEntropyLoss(reduction=reduction, **kwo), torch.nn.CrossEntropyLoss(reduction=reduction, **kwt),
           [x, t], tol, grad_of)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,kw", [((5, 3), {}), ((5, 3), {"weight": True, "ignore_index": 0}),
                                       ((3,), {}), ((2, 3, 4), {"weight": True})])
def test_nll_loss_matches_torch(dtype, tol, reduction, shape, kw):
    rng = np.random.default_rng(4)
    c = shape[1] if len(shape) > 1 else shape[0]
    x = rng.standard_normal(shape).astype(dtype)
    t = rng.integers(0, c, shape[:1] + shape[2:] if len(shape) > 1 else ()).astype(np.int64)
    w = rng.uniform(0.5, 2, (c,)).astype(dtype)
    kwo, kwt = dict(kw), dict(kw)
    if kw.get("weight"):
        kwo["weight"], kwt["weight"] = ag.tensor(w), torch.tensor(w)
    _check(nn.NLLLoss(reduction=reduction, **kwo), torch.nn.NLLLoss(reduction=reduction, **kwt), [x, t], tol, (0,))


def test_log_softmax_plus_nll_equals_cross_entropy():
    rng = np.random.default_rng(5)
    x = ag.tensor(rng.standard_normal((4, 3)))
    t = ag.tensor(np.array([0, 2, 1, 2]))
    a = F.nll_loss(F.log_softmax(x, dim=1), t)
    b = F.cross_entropy(x, t)
    assert a.item() == pytest.approx(b.item(), rel=1e-12)


def test_classification_errors():
    x = ag.randn(3, 4)
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(x, ag.tensor([0, 1, 4]))
    with pytest.raises(RuntimeError, match="integer type"):
        F.nll_loss(x, ag.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)"):
        F.cross_entropy(x, ag.tensor([0, 1]))
    with pytest.raises(ValueError, match="label_smoothing"):
        nn.CrossEntropyLoss(label_smoothing=1.5)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        nn.MSELoss(reduction="avg")
    # All targets ignored: mean is 0/0 = NaN, as torch.
    assert np.isnan(F.cross_entropy(x, ag.tensor([-100, -100, -100])).item())


def test_legacy_size_average_reduce_flags():
    with pytest.warns(UserWarning):
        assert nn.MSELoss(size_average=False).reduction == "sum"
    with pytest.warns(UserWarning):
        assert nn.L1Loss(reduce=False).reduction == "none"


def test_loss_modules_have_torch_state_dict_and_repr():
    w = np.ones(3, np.float32)
    assert list(nn.CrossEntropyLoss(weight=ag.tensor(w)).state_dict()) == \
        list(torch.nn.CrossEntropyLoss(weight=torch.tensor(w)).state_dict())
    assert repr(nn.MSELoss()) == repr(torch.nn.MSELoss())
    m = nn.CrossEntropyLoss(weight=ag.tensor(w)).double()
    assert m.weight.dtype == ag.float64


def test_losses_record_one_node():
    x = ag.randn(4, 3, requires_grad=True)
    for out in (F.mse_loss(x, ag.zeros(4, 3)), F.binary_cross_entropy_with_logits(x, ag.zeros(4, 3)),
                F.cross_entropy(x, ag.tensor([0, 1, 2, 0]), label_smoothing=0.1)):
        assert out.grad_fn.next_functions[0][0].variable is x


def test_cross_entropy_graph_is_torchs():
    """Index targets: NllLossBackward0 -> LogSoftmaxBackward0 -> AccumulateGrad, as torch records it."""
    for L in (ag, torch):
        x = L.randn(4, 3, requires_grad=True)
        out = L.nn.functional.cross_entropy(x, L.tensor([0, 1, 2, 0]))
        assert type(out.grad_fn).__name__ == "NllLossBackward0"
        ls = out.grad_fn.next_functions[0][0]
        assert type(ls).__name__ == "LogSoftmaxBackward0"
        assert ls.next_functions[0][0].variable is x
