"""Double backward of the recurrent kernels, prod at exact zeros, and the ops whose first backward is
NumPy only (tril/triu, topk/sort, scatter, embedding, Categorical.log_prob).

Each op: first gradients and the gradient of a penalty on them equal torch's (float64, rtol 1e-9),
and gradgradcheck (central differences of the first-order gradient) passes; 0-d and empty inputs
match torch too. Recurrent layers: a Hessian-vector product over the input and every parameter on
a small sequence, and third derivatives, equal torch's.
"""
import numpy as np
import pytest

import autograd_core as ag
from autograd_core.autograd import gradgradcheck

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-9, 1e-11


def _f(L):
    return L.nn.functional


def _idx(L, a):
    return L.tensor(np.asarray(a, dtype=np.int64))


def _with_zeros(shape, zeros, seed=0):
    a = np.random.default_rng(seed).uniform(0.5, 1.5, size=shape) * np.where(
        np.random.default_rng(seed + 1).random(shape) < 0.5, -1.0, 1.0)
    for z in zeros:
        a[z] = 0.0
    return a


# name -> (fn(L, *tensors), input arrays)
_R = np.random.default_rng(7)
OPS = {
    "tril": (lambda L, x: L.tril(x * x, -1).sin(), [_R.standard_normal((3, 4))]),
    "tril_batched": (lambda L, x: (x * x).tril(1).sin(), [_R.standard_normal((2, 3, 3))]),
    "triu": (lambda L, x: L.triu(x * x).sin(), [_R.standard_normal((4, 3))]),
    "triu_neg": (lambda L, x: (x * x).triu(-1).sin(), [_R.standard_normal((2, 4, 3))]),
    "topk": (lambda L, x: L.topk(x * x, 2, dim=1)[0].sin(), [_R.standard_normal((3, 4))]),
    "topk_smallest": (lambda L, x: (x * x).topk(2, dim=0, largest=False).values.sin(), [_R.standard_normal((3, 4))]),
    "sort": (lambda L, x: L.sort(x * x, dim=0, descending=True)[0].sin(), [_R.standard_normal((3, 4))]),
    "sort_last": (lambda L, x: (x * x).sort().values.sin() * x, [_R.standard_normal((3, 4))]),
    "scatter": (lambda L, a, b: L.scatter(a * a, 1, _idx(L, [[0, 2], [1, 0], [3, 1]]), b * b).sin(),
                [_R.standard_normal((3, 4)), _R.standard_normal((3, 2))]),
    "scatter_value": (lambda L, a: (a * a).scatter(0, _idx(L, [[2, 0, 1, 1]]), 0.5).sin(),
                      [_R.standard_normal((3, 4))]),
    "scatter_add": (lambda L, a, b: L.scatter_add(a * a, 1, _idx(L, [[0, 0], [1, 1], [3, 1]]), b * b).sin(),
                    [_R.standard_normal((3, 4)), _R.standard_normal((3, 2))]),
    "scatter_add_dim0": (lambda L, a, b: (a * a).scatter_add(0, _idx(L, [[0, 1, 2, 0], [0, 0, 2, 2]]),
                                                             b.exp()).sin(),
                         [_R.standard_normal((3, 4)), _R.standard_normal((2, 4))]),
    "gather": (lambda L, x: (x * x).gather(0, _idx(L, [[0, 2, 1, 0], [0, 0, 2, 1]])).sin(),
               [_R.standard_normal((3, 4))]),
    "embedding": (lambda L, w: _f(L).embedding(_idx(L, [[0, 2, 2], [3, 0, 1]]), w * w).sin(),
                  [_R.standard_normal((4, 3))]),
    "embedding_padding": (lambda L, w: _f(L).embedding(_idx(L, [[1, 4, 0], [4, 4, 2]]), w.exp(), padding_idx=1).tanh(),
                          [_R.standard_normal((5, 2))]),
    "categorical": (lambda L, z: L.distributions.Categorical(logits=z * z).log_prob(
        _idx(L, [[0, 3, 1], [2, 2, 0]])).sin(),
                    [_R.standard_normal((3, 4))]),
    "categorical_probs": (lambda L, z: L.distributions.Categorical(probs=z.exp()).log_prob(_idx(L, [1, 0])).sin(),
                          [_R.standard_normal((2, 3))]),
    "prod_one_zero": (lambda L, x: x.prod() * x, [_with_zeros((3, 4), [(1, 2)])]),
    "prod_two_zeros": (lambda L, x: x.prod() + (x * x).sum(), [_with_zeros((3, 4), [(1, 2), (0, 0)])]),
    "prod_dim_zero": (lambda L, x: x.prod(1).sin(), [_with_zeros((3, 4), [(1, 2), (0, 0), (0, 3)])]),
    "prod_dim0_keepdim": (lambda L, x: x.prod(0, keepdim=True) * x, [_with_zeros((3, 4), [(1, 2), (2, 2)])]),
    "prod_3d_zero": (lambda L, x: (x.prod(-2) ** 2).sum() * x, [_with_zeros((2, 3, 2), [(0, 1, 1), (1, 0, 0)])]),
    "prod_all_zero_slice": (lambda L, x: x.prod(1).exp(), [_with_zeros((2, 3), [(0, 0), (0, 1), (0, 2)])]),
    "prod_len1_zero": (lambda L, x: x.prod(1) * x.sum(), [_with_zeros((3, 1), [(1, 0)])]),
}


def _grads_and_hessian_penalty(L, fn, arrays, seed):
    ts = [L.tensor(a, dtype=L.float64, requires_grad=True) for a in arrays]
    y = fn(L, *ts)
    w = L.tensor(np.random.default_rng(seed).uniform(0.5, 1.5, size=tuple(y.shape)), dtype=L.float64)
    gs = L.autograd.grad((y * w).sum(), ts, create_graph=True, allow_unused=True)
    pen = sum((g * g * (i + 1.0)).sum() for i, g in enumerate(gs) if g is not None and g.requires_grad)
    hs = L.autograd.grad(pen, ts, allow_unused=True) if isinstance(pen, L.Tensor) else [None] * len(ts)
    return [None if t is None else t.detach().numpy().copy() for t in list(gs) + list(hs)]


def _assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        if t is None:
            assert o is None or np.allclose(o, 0)
        else:
            assert o is not None
            np.testing.assert_allclose(o, t, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_second_order_matches_torch(name):
    fn, arrays = OPS[name]
    seed = sum(map(ord, name))
    ours = _grads_and_hessian_penalty(ag, fn, arrays, seed)
    theirs = _grads_and_hessian_penalty(torch, fn, arrays, seed)
    assert any(h is not None and np.abs(h).max() > 0 for h in theirs[len(arrays):])
    _assert_same(ours, theirs)


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_gradgradcheck(name):
    fn, arrays = OPS[name]
    ts = [ag.tensor(a, dtype=ag.float64, requires_grad=True) for a in arrays]
    assert gradgradcheck(lambda *t: fn(ag, *t), ts, atol=1e-5)


# 0-d and empty inputs: the same numbers (and the same empty shapes) as torch
EDGE = {
    "prod_0d_zero": (lambda L, x: x.prod() * x, [np.array(0.0)]),
    "prod_empty_dim": (lambda L, x: x.prod(1) * 2, [np.zeros((3, 0))]),
    "prod_empty": (lambda L, x: x.prod() * x.sum(), [np.zeros((0,))]),
    "topk_0d": (lambda L, x: L.topk(x * x, 1)[0] * x, [np.array(0.7)]),
    "topk_k0": (lambda L, x: L.topk(x * x, 0)[0], [np.ones((2, 3))]),
    "sort_0d": (lambda L, x: L.sort(x * x)[0] * x, [np.array(0.7)]),
    "sort_empty": (lambda L, x: L.sort(x * x, 0)[0] * 2, [np.zeros((0, 3))]),
    "tril_empty": (lambda L, x: L.tril(x * x), [np.zeros((0, 3))]),
}


@pytest.mark.parametrize("name", sorted(EDGE))
def test_edge_shapes_second_order_match_torch(name):
    fn, arrays = EDGE[name]
    _assert_same(_grads_and_hessian_penalty(ag, fn, arrays, 1), _grads_and_hessian_penalty(torch, fn, arrays, 1))


@pytest.mark.parametrize("op", ["scatter", "scatter_add"])
def test_scatter_src_larger_than_index_gradgradcheck(op):
    """src may be larger than index (only its leading block is read); torch's own backward rejects
    the src gradient's shape here, so the reference is central differences."""
    a = ag.tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
    b = ag.tensor(np.random.default_rng(1).standard_normal((3, 2)), requires_grad=True)
    idx = ag.tensor(np.array([[0], [2]]))

    def f(x, s):
        return getattr(ag, op)(x * x, 1, idx, s * s).sin()
    assert gradgradcheck(f, (a, b), atol=1e-5)
    (gb,) = ag.autograd.grad(f(a, b).sum(), b)
    assert gb.shape == (3, 2) and np.all(gb.numpy()[:, 1] == 0) and np.all(gb.numpy()[2] == 0)


def test_prod_at_zeros_third_order_matches_torch():
    x0 = _with_zeros((5,), [(1,), (3,)])
    out = []
    for L in (ag, torch):
        x = L.tensor(x0, requires_grad=True)
        (g1,) = L.autograd.grad(x.prod(), x, create_graph=True)
        (g2,) = L.autograd.grad((g1 * L.arange(1, 6, dtype=L.float64)).sum(), x, create_graph=True)
        (g3,) = L.autograd.grad((g2 * g2).sum(), x)
        out.append([g.detach().numpy().copy() for g in (g1, g2, g3)])
    _assert_same(*out)
    assert np.abs(out[1][2]).max() > 0


def test_embedding_scale_grad_by_freq_double_backward_is_the_adjoint():
    """With scale_grad_by_freq the first backward divides each row's gradient by its count.

    Its derivative with respect to the upstream gradient is that same scaled map's adjoint; torch's
    embedding double backward drops the scaling (the comment in its source says the first backward
    took care of it), so here the reference is central differences, not torch.
    """
    idx = ag.tensor(np.array([[0, 2, 2], [3, 0, 0]]))
    w = ag.tensor(np.random.default_rng(2).standard_normal((4, 3)), requires_grad=True)
    v0 = np.random.default_rng(3).standard_normal((2, 3, 3))
    u = np.random.default_rng(4).standard_normal((4, 3))

    def first_grad(v):
        y = ag.nn.functional.embedding(idx, w * 1.0, scale_grad_by_freq=True)
        return ag.autograd.grad(y, w, ag.tensor(v), create_graph=True)[0]

    vt = ag.tensor(v0, requires_grad=True)
    y = ag.nn.functional.embedding(idx, w * 1.0, scale_grad_by_freq=True)
    (g,) = ag.autograd.grad(y, w, vt, create_graph=True)
    (dv,) = ag.autograd.grad((g * ag.tensor(u)).sum(), vt)
    num = np.zeros_like(v0)
    for k in np.ndindex(v0.shape):
        e = np.zeros_like(v0)
        e[k] = 1e-6
        num[k] = ((first_grad(v0 + e).detach().numpy() - first_grad(v0 - e).detach().numpy()) * u).sum() / 2e-6
    np.testing.assert_allclose(dv.numpy(), num, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dv.numpy()[1, 1], u[0] / 3)  # index 0 occurs three times


# ---------------------------------------------------------------------------------------------
# recurrent cells
def _copy_params(dst, src):
    with torch.no_grad():
        for p, q in zip(dst.parameters(), src.parameters()):
            p.copy_(torch.tensor(q.detach().numpy()))


CELLS = {
    "gru": ("GRUCell", {}), "gru_nobias": ("GRUCell", {"bias": False}), "lstm": ("LSTMCell", {}),
    "lstm_nobias": ("LSTMCell", {"bias": False}), "rnn_tanh": ("RNNCell", {}),
    "rnn_relu": ("RNNCell", {"nonlinearity": "relu"}), "rnn_tanh_nobias": ("RNNCell", {"bias": False}),
}


def _cell_loss(L, kind, cell, x, h, c, use):
    if kind == "LSTMCell":
        h2, c2 = cell(x, (h, c))
        parts = {"both": [h2, c2], "h": [h2], "c": [c2]}[use]
        return sum((p.sin() * (i + 1.0)).sum() for i, p in enumerate(parts))
    return (cell(x, h).sin() ** 2).sum()


CELL_CASES = [(n, u) for n in sorted(CELLS) for u in (("both", "h", "c") if CELLS[n][0] == "LSTMCell" else ("both",))]


@pytest.mark.parametrize("name,use", CELL_CASES, ids=[f"{n}-{u}" for n, u in CELL_CASES])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_cell_second_order_matches_torch(name, use, batched):
    kind, kw = CELLS[name]
    rng = np.random.default_rng(len(name) + 3 * batched)
    lead = (2,) if batched else ()
    x0, h0, c0 = (rng.standard_normal(lead + (n,)) for n in (3, 4, 4))
    mine = getattr(ag.nn, kind)(3, 4, **kw).double()
    ref = getattr(torch.nn, kind)(3, 4, **kw).double()
    _copy_params(ref, mine)
    res = []
    for L, cell in ((ag, mine), (torch, ref)):
        x, h, c = (L.tensor(a, requires_grad=True) for a in (x0, h0, c0))
        ins = [x, h] + ([c] if kind == "LSTMCell" else []) + list(cell.parameters())
        gs = L.autograd.grad(_cell_loss(L, kind, cell, x, h, c, use), ins, create_graph=True, allow_unused=True)
        pen = sum((g * g).sum() * (0.5 + 0.25 * i) for i, g in enumerate(gs) if g is not None and g.requires_grad)
        hs = L.autograd.grad(pen, ins, allow_unused=True)
        res.append([None if t is None else t.detach().numpy().copy() for t in list(gs) + list(hs)])
    _assert_same(*res)


@pytest.mark.parametrize("fn", ["gru_cell", "lstm_cell", "rnn_tanh_cell", "rnn_relu_cell"])
def test_cell_gradgradcheck(fn):
    from autograd_core.nn import _functional_rnn as RN
    gates = {"gru_cell": 3, "lstm_cell": 4}.get(fn, 1)
    rng = np.random.default_rng(1)
    H, I = 2, 3
    G = gates * H
    arrs = [rng.standard_normal(s) * 0.7 for s in [(2, I), (2, H), (G, I), (G, H), (G,), (G,)]]
    if fn == "rnn_relu_cell":  # keep pre-activations away from the kink at 0
        arrs[4] += 2.0
    ts = [ag.tensor(a, requires_grad=True) for a in arrs]
    if fn == "lstm_cell":
        c = ag.tensor(rng.standard_normal((2, H)), requires_grad=True)

        def f(x, h, c, *p):
            return ag.stack(list(RN.lstm_cell(x, (h, c), *p)), 0)
        assert gradgradcheck(f, [ts[0], ts[1], c] + ts[2:], atol=1e-5)
    else:
        assert gradgradcheck(lambda x, h, *p: getattr(RN, fn)(x, h, *p), ts, atol=1e-5)


def test_lstm_cell_third_order_matches_torch():
    rng = np.random.default_rng(9)
    mine = ag.nn.LSTMCell(2, 3).double()
    ref = torch.nn.LSTMCell(2, 3).double()
    _copy_params(ref, mine)
    x0 = rng.standard_normal((2, 2))
    out = []
    for L, cell in ((ag, mine), (torch, ref)):
        x = L.tensor(x0, requires_grad=True)
        h, c = cell(x)
        (g1,) = L.autograd.grad((h * c).sum(), x, create_graph=True)
        (g2,) = L.autograd.grad((g1 ** 2).sum(), x, create_graph=True)
        (g3,) = L.autograd.grad(g2.sin().sum(), x)
        out.append([g.detach().numpy().copy() for g in (g1, g2, g3)])
    _assert_same(*out)


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
def test_layer_third_order_matches_torch(kind):
    mine = getattr(ag.nn, kind)(2, 3).double()
    ref = getattr(torch.nn, kind)(2, 3).double()
    _copy_params(ref, mine)
    x0 = np.random.default_rng(1).standard_normal((4, 1, 2))
    out = []
    for L, m in ((ag, mine), (torch, ref)):
        x = L.tensor(x0, requires_grad=True)
        (g1,) = L.autograd.grad((m(x)[0] ** 2).sum(), x, create_graph=True)
        (g2,) = L.autograd.grad((g1 ** 2).sum(), x, create_graph=True)
        (g3,) = L.autograd.grad(g2.sin().sum(), x)
        out.append([g.detach().numpy().copy() for g in (g1, g2, g3)])
    _assert_same(*out)


# ---------------------------------------------------------------------------------------------
# recurrent layers: Hessian-vector products over the input and every parameter
LAYERS = {
    "gru": ("GRU", {}), "gru_2layer_bidir": ("GRU", {"num_layers": 2, "bidirectional": True}),
    "gru_batch_first_nobias": ("GRU", {"batch_first": True, "bias": False}),
    "lstm": ("LSTM", {}), "lstm_2layer_bidir": ("LSTM", {"num_layers": 2, "bidirectional": True}),
    "rnn_tanh": ("RNN", {}), "rnn_relu_bidir": ("RNN", {"nonlinearity": "relu", "bidirectional": True}),
}


def _layer_loss(L, kind, m, x, h0, c0, use):
    if kind == "LSTM":
        out, (hn, cn) = m(x, (h0, c0))
        last = (hn * cn).sum()
    else:
        out, hn = m(x, h0)
        last = (hn ** 3).sum()
    seq = (out.sin() ** 2).sum()
    return {"both": seq + last, "output": seq, "final": last}[use]


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("use", ["both", "output", "final"])
def test_layer_hessian_vector_product_matches_torch(name, use):
    kind, kw = LAYERS[name]
    D = 2 if kw.get("bidirectional") else 1
    nl = kw.get("num_layers", 1)
    rng = np.random.default_rng(len(name))
    T, B, I, H = 4, 2, 3, 3
    x0 = rng.standard_normal((B, T, I) if kw.get("batch_first") else (T, B, I))
    h00, c00 = rng.standard_normal((nl * D, B, H)), rng.standard_normal((nl * D, B, H))
    mine = getattr(ag.nn, kind)(I, H, **kw).double()
    ref = getattr(torch.nn, kind)(I, H, **kw).double()
    _copy_params(ref, mine)
    vs = None
    res = []
    for L, m in ((ag, mine), (torch, ref)):
        x, h0, c0 = (L.tensor(a, requires_grad=True) for a in (x0, h00, c00))
        ins = [x, h0] + ([c0] if kind == "LSTM" else []) + list(m.parameters())
        if vs is None:
            vs = [np.random.default_rng(50 + i).standard_normal(tuple(t.shape)) for i, t in enumerate(ins)]
        gs = L.autograd.grad(_layer_loss(L, kind, m, x, h0, c0, use), ins, create_graph=True)
        hv = L.autograd.grad(sum((g * L.tensor(v)).sum() for g, v in zip(gs, vs)), ins)
        res.append([t.detach().numpy().copy() for t in list(gs) + list(hv)])
    assert all(np.abs(h).max() > 0 for h in res[1][len(vs):][2:])
    _assert_same(*res)


def test_lstm_hvp_with_autograd_functional_matches_torch():
    """hvp of a sequence loss with respect to the input sequence, through autograd.functional."""
    rng = np.random.default_rng(4)
    mine = ag.nn.LSTM(2, 3).double()
    ref = torch.nn.LSTM(2, 3).double()
    _copy_params(ref, mine)
    x0, v0 = rng.standard_normal((5, 1, 2)), rng.standard_normal((5, 1, 2))
    res = []
    for L, m in ((ag, mine), (torch, ref)):
        val, hv = L.autograd.functional.hvp(lambda t: (m(t)[0] ** 2).sum(), L.tensor(x0), L.tensor(v0))
        res.append([val.detach().numpy().copy(), hv.numpy().copy()])
    _assert_same(*res)


def test_gru_layer_gradgradcheck():
    from autograd_core.nn import _functional_rnn as RN
    rng = np.random.default_rng(6)
    T, B, I, H = 3, 1, 2, 2
    arrs = [rng.standard_normal(s) * 0.8 for s in [(T, B, I), (B, H), (3 * H, I), (3 * H, H), (3 * H,), (3 * H,)]]
    ts = [ag.tensor(a, requires_grad=True) for a in arrs]
    for reverse in (False, True):
        def f(x, h0, *p):
            y, hl = RN._gru_layer(x, h0, *p, reverse=reverse)
            return y.sum(0) * hl
        assert gradgradcheck(f, ts, atol=1e-5)


def test_plain_backward_keeps_numpy_path():
    """Without create_graph the cells' gradients carry no graph (the NumPy first-order path)."""
    cell = ag.nn.GRUCell(3, 2).double()
    x = ag.tensor(np.ones((1, 3)), requires_grad=True)
    (g,) = ag.autograd.grad(cell(x).sum(), x)
    assert g.grad_fn is None and not g.requires_grad


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
def test_layer_parameter_hessian_with_frozen_weights_matches_torch(kind):
    """The usual training case: a constant input sequence, some parameters frozen, h0 defaulted."""
    mine = getattr(ag.nn, kind)(3, 4).double()
    ref = getattr(torch.nn, kind)(3, 4).double()
    _copy_params(ref, mine)
    x0 = np.random.default_rng(8).standard_normal((5, 2, 3))
    res = []
    for L, m in ((ag, mine), (torch, ref)):
        for n, p in m.named_parameters():
            p.requires_grad_(n not in ("weight_hh_l0", "bias_ih_l0"))
        ps = [p for p in m.parameters() if p.requires_grad]
        gs = L.autograd.grad((m(L.tensor(x0))[0].sin() ** 2).sum(), ps, create_graph=True)
        hs = L.autograd.grad(sum((g * g).sum() for g in gs), ps)
        res.append([t.detach().numpy().copy() for t in list(gs) + list(hs)])
    _assert_same(*res)
