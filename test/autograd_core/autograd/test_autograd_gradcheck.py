"""gradcheck (float64 central differences) for every differentiable op, incl. broadcasting,
0-d tensors and empty dimensions."""
import numpy as np
import pytest

import autograd_core as ag
from autograd_core.autograd import gradcheck


def T(shape, seed=0, lo=-1.0, hi=1.0, positive=False):
    rng = np.random.default_rng(seed)
    a = rng.uniform(lo, hi, size=shape)
    if positive:
        a = np.abs(a) + 0.5
    return ag.tensor(a, dtype=ag.float64, requires_grad=True)


UNARY = {
    "exp": lambda x: x.exp(), "log": lambda x: (x.abs() + 0.5).log(), "sqrt": lambda x: (x.abs() + 0.5).sqrt(),
    "abs": lambda x: x.abs(), "sin": lambda x: x.sin(), "cos": lambda x: x.cos(), "tanh": lambda x: x.tanh(),
    "sigmoid": lambda x: x.sigmoid(), "relu": lambda x: x.relu(),
    "leaky_relu": lambda x: ag.ops.pointwise.leaky_relu(x, 0.05),
    "softplus": lambda x: ag.ops.pointwise.softplus(x * 3), "elu": lambda x: ag.ops.pointwise.elu(x),
    "clamp": lambda x: x.clamp(-0.3, 0.4), "clamp_min": lambda x: x.clamp(min=0.1),
    "neg": lambda x: -x, "pow3": lambda x: x ** 3, "pow_frac": lambda x: (x.abs() + 0.5) ** 1.7,
    "rpow": lambda x: 2.0 ** x, "rsub": lambda x: 1.5 - x, "rdiv": lambda x: 2.0 / (x.abs() + 0.5),
    "mul_scalar": lambda x: x * 3.0, "add_scalar": lambda x: x + 2, "div_scalar": lambda x: x / 4.0,
    "square": lambda x: x.square(), "reciprocal": lambda x: (x.abs() + 0.5).reciprocal(),
    "rsqrt": lambda x: (x.abs() + 0.5).rsqrt(), "log1p": lambda x: (x.abs()).log1p(), "expm1": lambda x: x.expm1(),
    "atan": lambda x: x.atan(), "tan": lambda x: (x * 0.5).tan(),
    "sum": lambda x: x.sum(), "sum_dim": lambda x: x.sum(-1), "sum_keep": lambda x: x.sum(0, keepdim=True),
    "mean": lambda x: x.mean(), "mean_dim": lambda x: x.mean(dim=(0,), keepdim=False),
    "max": lambda x: x.max(), "max_dim": lambda x: x.max(dim=-1)[0], "min_dim": lambda x: x.min(0, keepdim=True).values,
    "amax": lambda x: x.amax(-1), "amin": lambda x: x.amin(0),
    "norm": lambda x: x.norm(), "norm_dim": lambda x: x.norm(dim=-1), "norm1": lambda x: x.norm(p=1, dim=0),
    "norm3": lambda x: x.norm(p=3), "var": lambda x: x.var(), "var_dim": lambda x: x.var(0, unbiased=False),
    "std_dim": lambda x: x.std(-1, keepdim=True), "prod": lambda x: x.prod(), "prod_dim": lambda x: x.prod(0),
    "cumsum": lambda x: x.cumsum(0), "logsumexp": lambda x: x.logsumexp(-1), "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: x.log_softmax(0),
    "reshape": lambda x: x.reshape(-1), "view": lambda x: x.view(x.numel()), "flatten": lambda x: x.flatten(),
    "transpose": lambda x: x.transpose(0, 1), "t": lambda x: x.t(), "T": lambda x: x.T,
    "permute": lambda x: x.permute(1, 0), "unsqueeze": lambda x: x.unsqueeze(1), "squeeze": lambda x: x[None].squeeze(0),
    "expand": lambda x: x[:1].expand(4, x.shape[1]), "repeat": lambda x: x.repeat(2, 1),
    "index_int": lambda x: x[1], "index_slice": lambda x: x[1:, ::2], "index_none_ellipsis": lambda x: x[None, ..., 0],
    "index_neg": lambda x: x[-1, -2], "index_bool": lambda x: x[x > 0], "index_intarray": lambda x: x[[0, 2, 0]],
    "index_mixed": lambda x: x[[0, 1], 1:], "index_tensor": lambda x: x[ag.tensor([2, 2, 1])],
    "split": lambda x: ag.cat(x.split(1, dim=1)[::-1], dim=1), "chunk": lambda x: x.chunk(2, 0)[1],
    "unbind": lambda x: x.unbind(1)[0] * 2 + x.unbind(1)[2], "clone": lambda x: x.clone(), "flip": lambda x: x.flip(0),
    "to64": lambda x: x.to(ag.float64) * 1, "gather": lambda x: x.gather(1, ag.tensor([[0, 0], [1, 2], [2, 1]])),
    "masked_fill": lambda x: x.masked_fill(x > 0.3, 0.0), "where_scalar": lambda x: ag.where(x > 0, x, 0.5),
    "setitem": lambda x: _setitem(x),
}


def _setitem(x):
    y = x * 1
    y[0] = x[1] * 2
    y[:, 1] = 3.0
    return y


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ops_gradcheck(name):
    x = T((3, 3), seed=hash(name) % 1000)
    assert gradcheck(UNARY[name], (x,))


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / (b.abs() + 0.5),
    "pow": lambda a, b: (a.abs() + 0.5) ** b, "maximum": lambda a, b: ag.maximum(a, b), "minimum": lambda a, b: ag.minimum(a, b),
    "where": lambda a, b: ag.where(a > b, a, b * 2), "atan2": lambda a, b: ag.atan2(a, b + 2.0),
    "clamp_tensor": lambda a, b: a.clamp(min=b - 0.2, max=b + 0.2), "cat": lambda a, b: ag.cat([a, b * 2], dim=0),
    "stack": lambda a, b: ag.stack([a, b], dim=1), "lerp": lambda a, b: a.lerp(b, 0.3),
}

SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((), (3,)), ((3,), ())]


BINARY_CASES = [(n, s) for n in sorted(BINARY) for s in SHAPES
                if n not in ("cat", "stack") or (s[0] == s[1])]  # cat/stack need equal shapes


@pytest.mark.parametrize("name,shapes", BINARY_CASES, ids=lambda c: str(c))
def test_binary_ops_gradcheck_broadcast_and_0d(name, shapes):
    sa, sb = shapes
    a, b = T(sa, 1), T(sb, 2)
    assert gradcheck(BINARY[name], (a, b))


@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 4)),
                                   ((5, 2, 3), (3, 4)), ((5, 2, 3), (5, 3, 4)), ((2, 1, 2, 3), (4, 3, 2))])
def test_matmul_gradcheck(sa, sb):
    assert gradcheck(lambda a, b: a @ b, (T(sa, 3), T(sb, 4)))


@pytest.mark.parametrize("fn", [
    lambda x: x.sum(), lambda x: x.sum(0), lambda x: (x * 2).reshape(0, 4), lambda x: x.exp(),
    lambda x: x.mean(1), lambda x: ag.cat([x, x], 0), lambda x: x.t(), lambda x: x.amax(1),
])
def test_empty_dimensions(fn):
    x = T((0, 4))
    assert gradcheck(fn, (x,))


def test_zero_dim_tensors():
    x = T((), 5)
    y = T((), 6)
    assert gradcheck(lambda a, b: (a * b).exp() + a.sin() / (b.abs() + 1), (x, y))
    assert x.shape == ()


def test_custom_function_gradcheck():
    class Cube(ag.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x ** 3 * k

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * ctx.k * g, None

    x = T((4,), 7)
    assert gradcheck(lambda t: Cube.apply(t, 2.0), (x,))


def test_gradcheck_detects_wrong_backward():
    class Wrong(ag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g  # should be 2 x g

    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        gradcheck(lambda t: Wrong.apply(t), (T((3,), 8),))
    assert gradcheck(lambda t: Wrong.apply(t), (T((3,), 8),), raise_exception=False) is False
