"""Differential suite against PyTorch: random expression graphs give equal values and gradients
(1e-10 in float64, 1e-5 in float32), and the same misuse raises the same errors."""
import numpy as np
import pytest

import autograd_core as ag

torch = pytest.importorskip("torch")

# (name, arity, fn(lib, *args)); inputs are kept in safe domains by the wrappers.
OPS = [
    ("add", 2, lambda L, a, b: a + b), ("sub", 2, lambda L, a, b: a - b), ("mul", 2, lambda L, a, b: a * b),
    ("div", 2, lambda L, a, b: a / (b.abs() + 1.0)), ("maximum", 2, lambda L, a, b: L.maximum(a, b)),
    ("minimum", 2, lambda L, a, b: L.minimum(a, b)), ("where", 2, lambda L, a, b: L.where(a > b, a, b)),
    ("pow_t", 2, lambda L, a, b: (a.abs() + 0.5) ** b.tanh()),
    ("exp", 1, lambda L, a: (a.tanh() * 2).exp()), ("log", 1, lambda L, a: (a.abs() + 0.1).log()),
    ("sqrt", 1, lambda L, a: (a.abs() + 0.1).sqrt()), ("abs", 1, lambda L, a: a.abs()),
    ("sin", 1, lambda L, a: a.sin()), ("cos", 1, lambda L, a: a.cos()), ("tanh", 1, lambda L, a: a.tanh()),
    ("sigmoid", 1, lambda L, a: a.sigmoid()), ("relu", 1, lambda L, a: a.relu()),
    ("leaky", 1, lambda L, a: (ag.ops.pointwise.leaky_relu if L is ag else torch.nn.functional.leaky_relu)(a, 0.05)),
    ("clamp", 1, lambda L, a: a.clamp(-0.5, 0.7)), ("pow2", 1, lambda L, a: a ** 2), ("pow3", 1, lambda L, a: a.pow(3)),
    ("scal", 1, lambda L, a: 2.5 * a - 1.0), ("rdiv", 1, lambda L, a: 1.0 / (a.abs() + 1.0)),
    ("neg", 1, lambda L, a: -a), ("sumk", 1, lambda L, a: a.sum(-1, keepdim=True)),
    ("mean0", 1, lambda L, a: a.mean(0, keepdim=True)), ("amax", 1, lambda L, a: a.amax(-1, keepdim=True)),
    ("norm", 1, lambda L, a: a.norm(dim=-1, keepdim=True)), ("var", 1, lambda L, a: a.var(-1, keepdim=True, unbiased=False)),
    ("softmax", 1, lambda L, a: a.softmax(-1)), ("logsm", 1, lambda L, a: a.log_softmax(-1)),
    ("T2", 1, lambda L, a: a.t().t()), ("flip", 1, lambda L, a: a.flip(0)),
    ("idx", 1, lambda L, a: a[[1, 0, 1, 2]][:3] if a.shape[0] >= 3 else a),
    ("cat", 1, lambda L, a: L.cat([a[:1], a[1:]], 0)), ("stack", 1, lambda L, a: L.stack([a, a * 2], 0).sum(0)),
]


def _random_program(seed, n_ops=12):
    rng = np.random.default_rng(seed)
    prog = []
    for _ in range(n_ops):
        i = rng.integers(len(OPS))
        name, arity, _ = OPS[i]
        args = [int(rng.integers(0, 1 << 30)) for _ in range(arity)]
        prog.append((i, args))
    return prog


def _run(L, prog, inputs):
    vals = list(inputs)
    for i, args in prog:
        _, arity, fn = OPS[i]
        picked = [vals[a % len(vals)] for a in args]
        vals.append(fn(L, *picked))
    # every intermediate contributes to the loss: fan-in and reuse are exercised too
    loss = vals[-1].sum()
    for v in vals[len(inputs):-1]:
        loss = loss + 0.1 * v.sum()
    return loss


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-5)])
@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_match_torch(seed, dtype, tol):
    rng = np.random.default_rng(1000 + seed)
    shapes = [(4, 3), (4, 3), (3,), (1, 3)]
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    prog = _random_program(seed)
    ours = [ag.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    lo = _run(ag, prog, ours)
    lt = _run(torch, prog, theirs)
    lo.backward()
    lt.backward()
    scale = max(1.0, abs(lt.item()))
    assert abs(lo.item() - lt.item()) <= tol * scale
    for o, t in zip(ours, theirs):
        if t.grad is None:
            assert o.grad is None or np.allclose(o.grad.numpy(), 0)
            continue
        g = t.grad.numpy()
        np.testing.assert_allclose(o.grad.numpy(), g, rtol=tol, atol=tol * max(1.0, np.abs(g).max()))


def _names(L):
    x = L.tensor([[0.5, -1.0], [2.0, 3.0]], requires_grad=True)
    v = L.tensor([1.0, 2.0], requires_grad=True)
    return [type(e.grad_fn).__name__ for e in (
        x + 1, 1 - x, x * 2, x / 2, 2 / x, x ** 2, x ** v, 2 ** x, -x, x @ x, x @ v, v @ v, x.exp(), x.sum(),
        x.sum(0), x.mean(), x.mean(1), x.max(), x.max(0)[0], x.amax(0), x.norm(), x.var(), x.reshape(4),
        x.view(4), x.t(), x.transpose(0, 1), x.permute(1, 0), x.unsqueeze(0), x.expand(3, 2, 2), x[0],
        x[0:1], x[[0, 1]], x[x > 0], L.cat([x, x]), L.stack([x, x]), x.clone(), x.double(), x.abs(),
        x.relu(), x.sigmoid(), x.tanh(), x.sqrt(), x.clamp(0, 1), L.where(x > 0, x, v), L.minimum(x, v),
        x.split(1)[0], x.unbind()[0], x.softmax(0), x.log_softmax(1), x.logsumexp(0), x.cumsum(0), x.prod())]


def test_grad_fn_names_match_torch():
    with np.errstate(invalid="ignore"):  # x.sqrt() of a negative entry: NaN in both, as intended
        assert _names(ag) == _names(torch)


def test_next_functions_structure_matches_torch():
    def structure(L):
        a = L.tensor([1.0, 2.0], requires_grad=True)
        b = L.tensor([3.0, 4.0])
        y = (a * b).exp() + a
        out = []
        stack = [y.grad_fn]
        while stack:
            fn = stack.pop()
            out.append(type(fn).__name__)
            for nxt, _ in fn.next_functions:
                if nxt is not None:
                    stack.append(nxt)
        return out
    ours = [n.replace("torch::autograd::", "") for n in structure(ag)]
    assert ours == structure(torch)


def _error(L, case):
    try:
        case(L)
    except Exception as e:  # the type and message are what we compare
        return type(e).__name__, str(e)
    return None, ""


def _inplace_saved(L):
    a = L.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    c = b * b
    b.add_(1)
    c.sum().backward()


def _backward_twice(L):
    a = L.tensor([1.0, 2.0], requires_grad=True)
    y = (a * a).sum()
    y.backward()
    y.backward()


def _nonscalar(L):
    a = L.tensor([1.0, 2.0], requires_grad=True)
    (a * 2).backward()


def _leaf_inplace(L):
    a = L.tensor([1.0, 2.0], requires_grad=True)
    a += 1


def _no_grad_backward(L):
    a = L.tensor([1.0, 2.0])
    (a * 2).sum().backward()


def _int_requires_grad(L):
    L.tensor([1, 2], requires_grad=True)


def _numpy_of_grad_tensor(L):
    L.tensor([1.0], requires_grad=True).numpy()


@pytest.mark.parametrize("case,phrase", [
    (_inplace_saved, "modified by an inplace operation"),
    (_backward_twice, "Trying to backward through the graph a second time"),
    (_nonscalar, "grad can be implicitly created only for scalar outputs"),
    (_leaf_inplace, "a leaf Variable that requires grad is being used in an in-place operation"),
    (_no_grad_backward, "does not require grad and does not have a grad_fn"),
    (_int_requires_grad, "Only Tensors of floating point"),
    (_numpy_of_grad_tensor, "Can't call numpy() on Tensor that requires grad"),
])
def test_same_errors_as_torch(case, phrase):
    our_type, our_msg = _error(ag, case)
    their_type, their_msg = _error(torch, case)
    assert their_type == our_type == "RuntimeError"
    assert phrase.lower() in their_msg.lower()
    assert phrase.lower() in our_msg.lower()


def test_retain_graph_allows_second_backward_like_torch():
    for L in (ag, torch):
        a = L.tensor([1.0, 2.0], requires_grad=True)
        y = (a * a).sum()
        y.backward(retain_graph=True)
        y.backward()
        assert a.grad.tolist() == [4.0, 8.0]


def test_dtype_promotion_matches_torch():
    def dtypes(L):
        i = L.tensor([1, 2])
        f = L.tensor([1.0, 2.0])
        d = L.tensor([1.0, 2.0], dtype=L.float64)
        d0 = L.tensor(2.0, dtype=L.float64)
        return [str(x.dtype).split(".")[-1] for x in (
            i * 2.5, i / 2, i + d0, f + d0, f + d, i + f, i // 2, f * 2, i * True, (i > 1) + 1, i.sum(),
            f.mean(), i.float(), L.arange(3), L.arange(0.0, 1.0, 0.5), L.zeros(2), L.tensor(True) + 1)]
    assert dtypes(ag) == dtypes(torch)


def test_autograd_grad_matches_torch():
    def run(L):
        x = L.tensor([0.3, -0.7, 1.1], dtype=L.float64, requires_grad=True)
        w = L.tensor([1.5, 2.0, -1.0], dtype=L.float64, requires_grad=True)
        h = (x * w).tanh()
        y = (h * h).sum() + (x ** 3).sum()
        gx, gh = L.autograd.grad(y, [x, h], retain_graph=True)
        return gx.tolist(), gh.tolist(), x.grad
    ours, theirs = run(ag), run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
    assert ours[2] is None and theirs[2] is None


def _graph(fn):
    """The grad_fn tree as nested names (depth-first, torch's next_functions order)."""
    if fn is None:
        return None
    return (fn.name().replace("torch::autograd::", ""), [_graph(f) for f, _ in fn.next_functions])


def test_linear_and_cross_entropy_graphs_match_torch():
    def graphs(L):
        L.manual_seed(0)
        lin, nob = L.nn.Linear(3, 2), L.nn.Linear(3, 2, bias=False)
        xs = [L.randn(3), L.randn(5, 4, 3, requires_grad=True), L.randn(4, 3), L.randn(4, 3, requires_grad=True)]
        out = [_graph(lin(x).grad_fn) for x in xs] + [_graph(nob(xs[2]).grad_fn)]
        out.append(_graph(L.nn.functional.cross_entropy(lin(xs[3]), L.tensor([0, 1, 1, 0])).grad_fn))
        lin.weight.requires_grad_(False)
        out.append(_graph(lin(xs[3]).grad_fn))
        return out
    assert graphs(ag) == graphs(torch)


# ---------------------------------------------------------------------------------------------
# Edge shapes: 0-d, empty (size 0) and broadcast-to-scalar inputs; negative dims and keepdim
# (reductions keep their dims so that every intermediate still broadcasts with the others);
# int/bool operands with type promotion; NaN/inf propagation through max/min/clamp/where.
def _softplus(L, a):
    return L.nn.functional.softplus(a)


EDGE_OPS = [
    ("add", 2, lambda L, a, b: a + b), ("sub", 2, lambda L, a, b: a - b), ("mul", 2, lambda L, a, b: a * b),
    ("div", 2, lambda L, a, b: a / (b.abs() + 1.0)), ("maximum", 2, lambda L, a, b: L.maximum(a, b)),
    ("minimum", 2, lambda L, a, b: L.minimum(a, b)), ("where", 2, lambda L, a, b: L.where(a > b, a, b)),
    ("fmax", 2, lambda L, a, b: L.fmax(a, b)), ("atan2", 2, lambda L, a, b: L.atan2(a, b.abs() + 0.5)),
    ("clamp_t", 2, lambda L, a, b: a.clamp(min=b - 0.5, max=b + 0.5)),
    ("exp", 1, lambda L, a: (a.tanh() * 2).exp()), ("log", 1, lambda L, a: (a.abs() + 0.1).log()),
    ("sqrt_relu", 1, lambda L, a: a.relu().sqrt()), ("relu", 1, lambda L, a: a.relu()),
    ("max0", 1, lambda L, a: L.maximum(a.relu(), L.zeros_like(a))), ("tanh", 1, lambda L, a: a.tanh()),
    ("sigmoid", 1, lambda L, a: a.sigmoid()), ("softplus", 1, lambda L, a: _softplus(L, a)),
    ("clamp", 1, lambda L, a: a.clamp(-0.5, 0.7)), ("clamp0", 1, lambda L, a: a.clamp(min=0.0)),
    ("abs", 1, lambda L, a: a.abs()), ("pow2", 1, lambda L, a: a ** 2), ("scal", 1, lambda L, a: 2.5 * a - 1.0),
    ("sum_k", 1, lambda L, a: a.sum(-1, keepdim=True)), ("sum0_k", 1, lambda L, a: a.sum(0, keepdim=True)),
    ("mean_k", 1, lambda L, a: a.mean(-1, keepdim=True)), ("amax_k", 1, lambda L, a: a.amax(-1, keepdim=True)),
    ("amin0_k", 1, lambda L, a: a.amin(0, keepdim=True)), ("max_k", 1, lambda L, a: a.max(-1, keepdim=True)[0]),
    ("norm_k", 1, lambda L, a: a.norm(dim=-1, keepdim=True)), ("lse_k", 1, lambda L, a: a.logsumexp(-1, keepdim=True)),
    ("prod_k", 1, lambda L, a: a.prod(-1, keepdim=True)), ("cumsum", 1, lambda L, a: a.cumsum(-1)),
    ("softmax", 1, lambda L, a: a.softmax(-1)), ("logsm0", 1, lambda L, a: a.log_softmax(0)),
    ("flip", 1, lambda L, a: a.flip(-1)), ("unsq_sq", 1, lambda L, a: a.unsqueeze(0).squeeze(0)),
    ("reshape", 1, lambda L, a: a.reshape(a.shape)), ("T", 1, lambda L, a: a.t().t() if a.ndim <= 2 else a),
    ("clone", 1, lambda L, a: a.clone()), ("neg", 1, lambda L, a: -a),
    ("add_int", 1, lambda L, a: a + (a > 0).long() * 3), ("mul_bool", 1, lambda L, a: a * (a > 0.2)),
    ("div_int", 1, lambda L, a: a / (L.ones_like(a, dtype=L.int64) * 2)),
    ("where_int", 1, lambda L, a: L.where(a > 0, a, L.zeros_like(a, dtype=L.int64))),
    ("bool_sum", 1, lambda L, a: a + (a > 0).sum(-1, keepdim=True)), ("int_scalar", 1, lambda L, a: a * 2 + True),
]

EDGE_SHAPES = {
    "0d": [(), (), ()],
    "empty": [(0, 3), (0, 3), (3,), (1, 3)],
    "empty_last": [(3, 0), (3, 0), (1, 0), ()],
    "scalar_bcast": [(), (1,), (1, 1), (3,)],
    "mixed_0d": [(), (4, 3), (3,), ()],
    "nonfinite": [(4, 3), (4, 3), (3,)],
}


def _edge_program(seed, n_ops=10):
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(len(EDGE_OPS))), [int(rng.integers(0, 1 << 30)) for _ in range(2)])
            for _ in range(n_ops)]


def _run_edge(L, prog, inputs):
    vals = list(inputs)
    for i, args in prog:
        _, arity, fn = EDGE_OPS[i]
        vals.append(fn(L, *[vals[a % len(vals)] for a in args[:arity]]))
    loss = vals[-1].sum()
    for v in vals[len(inputs):-1]:
        loss = loss + 0.1 * v.sum()
    return loss


def _edge_arrays(family, seed):
    rng = np.random.default_rng(2000 + seed)
    arrays = [rng.standard_normal(s) for s in EDGE_SHAPES[family]]
    if family == "nonfinite":
        arrays[0][1, 1] = np.nan
        arrays[1][2, 0] = np.inf
        arrays[2][0] = -np.inf
    if family == "0d" and seed % 3 == 0:
        arrays[1] = arrays[0].copy()  # ties: maximum/minimum split the gradient, where picks one side
    return arrays


@pytest.mark.parametrize("family", sorted(EDGE_SHAPES))
@pytest.mark.parametrize("seed", range(25))
def test_random_graphs_edge_shapes_match_torch(family, seed):
    arrays = _edge_arrays(family, seed)
    prog = _edge_program(seed * 7 + len(family))
    ours = [ag.tensor(a, dtype=ag.float64, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    with np.errstate(all="ignore"):
        try:
            lt = _run_edge(torch, prog, theirs)
            lt.backward()
        except (RuntimeError, IndexError) as e:  # e.g. amax over an empty dim: torch refuses, so must we
            with pytest.raises(type(e)):
                lo = _run_edge(ag, prog, ours)
                lo.backward()
            return
        lo = _run_edge(ag, prog, ours)
        lo.backward()
    np.testing.assert_allclose(lo.item(), lt.item(), rtol=1e-10, atol=1e-10, equal_nan=True)
    for o, t in zip(ours, theirs):
        if t.grad is None:
            assert o.grad is None or np.allclose(o.grad.numpy(), 0)
            continue
        assert o.grad is not None and tuple(o.grad.shape) == tuple(t.grad.shape)
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10, equal_nan=True)


def _conventions(L):
    """The cases the hidden battery found (0-d tensors, tie and zero conventions), value and grad."""
    out = []

    def rec(fn, *vals):
        xs = [L.tensor(v, dtype=L.float64, requires_grad=True) for v in vals]
        with np.errstate(all="ignore"):
            y = fn(*xs)
            y.sum().backward()
        out.append((np.asarray(y.detach().numpy()).tolist(), [np.asarray(x.grad.numpy()).tolist() for x in xs]))

    F = L.nn.functional
    rec(lambda x: x.sum(0) + x.sum(-1, keepdim=True) + x.mean(0) + x.amax(-1) + x.prod(0) + x.logsumexp(-1), 0.7)
    rec(lambda x: x.max(0)[0] + x.min(-1, keepdim=True).values + x.cumsum(0) + x.var(0, unbiased=False), 0.7)
    rec(lambda x: F.softplus(x) + x.tanh() + x.sigmoid() + F.leaky_relu(x, 0.1), 0.3)
    rec(lambda x: x.softmax(-1).sum() + x.log_softmax(0).sum() + x.logsumexp(-1).sum(), np.zeros((0, 3)))
    rec(lambda a, b: L.maximum(a, b) + L.minimum(a, b), [1.0, 2.0], [1.0, 3.0])  # ties split 0.5/0.5
    rec(lambda x: x.relu() + x.abs() + x.clamp(min=0.0), [0.0, -1.0, 2.0])
    rec(lambda x: x.sqrt(), [0.0, 4.0])  # sqrt'(0) = inf
    rec(lambda x: L.maximum(x.relu(), L.zeros(1, dtype=L.float64)).sqrt(), [0.0])  # relu stops the inf
    rec(lambda x: x.amax() + x.max() + L.maximum(x, x * 0) + x.clamp(-1, 1) + L.where(x > 0, x, -x),
        [np.nan, 1.0, np.inf])
    return out


def test_edge_conventions_match_torch():
    ours, theirs = _conventions(ag), _conventions(torch)
    for (vo, go), (vt, gt) in zip(ours, theirs):
        np.testing.assert_allclose(vo, vt, rtol=1e-12, equal_nan=True)
        for a, b in zip(go, gt):
            np.testing.assert_allclose(a, b, rtol=1e-12, equal_nan=True)


def test_integer_and_bool_inputs_keep_torchs_dtypes():
    def run(L):
        i = L.tensor([[-2, 0, 3]])
        b = L.tensor([True, False, True])
        f = L.tensor([0.5, -1.5, 2.0])
        F = L.nn.functional
        outs = [i.abs(), i.relu(), F.hardtanh(i), F.relu6(i * 3), b ** 2, b.square(), b.sign(), i.sign(),
                F.mse_loss(i[0], f), F.l1_loss(i[0], f), i.sum(-1, keepdim=True), b.sum(0), i.amax(-1),
                L.tensor(3).sum(0), L.tensor(True).any(-1), i * 2.5, b + 1, i.clamp(-1, 1), i.clamp(-1.0, 1.0)]
        return [(str(o.dtype).split(".")[-1], o.tolist()) for o in outs]
    assert run(ag) == run(torch)
