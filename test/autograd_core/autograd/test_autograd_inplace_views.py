"""In-place ops through views against torch: values, gradients, grad_fn presence and version
counters (torch's view + in-place semantics: the base is rewritten, views re-derive their history)."""
import numpy as np
import pytest

import autograd_core as ag

torch = pytest.importorskip("torch")


def _setup(L):
    rng = np.random.default_rng(0)
    a = L.tensor(rng.standard_normal((2, 3)), dtype=L.float64, requires_grad=True)
    w = L.tensor(rng.standard_normal(3), dtype=L.float64, requires_grad=True)
    c = L.tensor(rng.standard_normal((2, 3)), dtype=L.float64)
    return a, w, c


def case_view_setitem(L):
    a, w, c = _setup(L)
    x = a * 1.5
    v = x.view(3, 2)
    v[1] = w[:2] * 2
    return [a, w], (x * c).sum() + (v ** 2).sum(), [x._version, v._version]


def case_t_add(L):
    a, w, c = _setup(L)
    x = a.sin() * 2  # (not exp: it saves its output, which an in-place op may not change)
    v = x.t()
    v.add_(w[:, None])
    return [a, w], (x * c).sum() + (v * v).sum(), [x._version]


def case_reshape_mul(L):
    a, w, c = _setup(L)
    x = a * a
    y = x.reshape(6)
    y.mul_(w.repeat(2))
    return [a, w], (x * c).sum() + y.sum(), [x._version, y._version]


def case_transpose_view_chain(L):
    a, w, c = _setup(L)
    x = a + 0
    v = x.transpose(0, 1)[1:]  # (2, 2) view of a view
    v.mul_(3).add_(w[:2, None])
    return [a, w], (x * c).sum() + v.sum(), [x._version]


def case_permute_unsqueeze(L):
    a, w, c = _setup(L)
    x = (a * 2).unsqueeze(0)  # (1, 2, 3), a view of a*2
    p = x.permute(2, 1, 0)
    p.sub_(w[:, None, None])
    q = x.squeeze(0)
    q.clamp_(-1.0, 1.0)
    return [a, w], (q * c).sum() + (p ** 2).sum(), [x._version, p._version, q._version]


def case_base_changed_after_view(L):
    a, w, c = _setup(L)
    x = a * 2
    v = x[0]  # made before the base changes: its history must follow the base's new one
    x.mul_(w)
    return [a, w], (v * v).sum() + (x * c).sum(), [v._version]


def case_sibling_views(L):
    a, w, c = _setup(L)
    x = a.sin() + 1
    v1 = x[:, 0]
    v2 = x.view(6)
    v1.add_(w[:2])  # v2 shares the memory: it sees the change, with gradients
    return [a, w], (v2 * v2).sum() + v1.sum(), [v2._version]


def case_no_grad_base(L):
    a, w, c = _setup(L)
    x = L.zeros(2, 3, dtype=L.float64)
    x.t()[1].add_(w[:2])
    x.view(6)[5:] = a[0, :1]
    return [a, w], (x * c).sum(), [x._version]


def case_setitem_through_view_of_view(L):
    a, w, c = _setup(L)
    x = a * 1.0
    x.view(6).view(3, 2)[:, 1] = w
    return [a, w], (x * x * c).sum(), [x._version]


CASES = [case_view_setitem, case_t_add, case_reshape_mul, case_transpose_view_chain, case_permute_unsqueeze,
         case_base_changed_after_view, case_sibling_views, case_no_grad_base, case_setitem_through_view_of_view]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_inplace_through_views_matches_torch(case):
    res = []
    for L in (ag, torch):
        leaves, loss, versions = case(L)
        loss.backward()
        res.append((loss.item(), [None if t.grad is None else t.grad.numpy().copy() for t in leaves], versions))
    (lo, go, vo), (lt, gt, vt) = res
    assert abs(lo - lt) <= 1e-12 * max(1.0, abs(lt))
    for o, t in zip(go, gt):
        assert (o is None) == (t is None)
        if t is not None:
            np.testing.assert_allclose(o, t, rtol=1e-12, atol=1e-12)
    assert vo == vt


def _errors(L):
    out = []
    a = L.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    for fn in (lambda: a.view(4).add_(1),  # view of a leaf
               lambda: (a * 1)[0].expand(2, 2).add_(1),  # overlapping memory
               lambda: (a * 1).split(1)[0].add_(1)):  # output of a multi-view op
        try:
            fn()
            out.append(None)
        except RuntimeError as e:
            out.append(str(e).split(".")[0])
    b = a * 2
    c = b * b
    b.view(4).add_(1)  # c saved b: backward must notice
    try:
        c.sum().backward()
        out.append(None)
    except RuntimeError as e:
        out.append("modified by an inplace operation" in str(e))
    return out


def test_inplace_view_errors_match_torch():
    ours, theirs = _errors(ag), _errors(torch)
    assert ours[3] is True and theirs[3] is True
    for o, t in zip(ours[:3], theirs[:3]):
        assert o is not None and t is not None
    assert "leaf" in ours[0] and "leaf" in theirs[0]
    assert ours[1] == theirs[1]
    assert ours[2] == theirs[2]
