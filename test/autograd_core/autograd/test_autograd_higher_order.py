"""Higher-order autograd: create_graph=True against torch and finite differences.

For every differentiable op: gradcheck and gradgradcheck (float64 central differences), and
d/dx sum(d/dx (f(x) . w)) equal to torch's; `autograd.functional` (vjp, jvp, vhp, hvp, jacobian,
hessian) equal to torch's; the Hessian-vector product of an EGO-style B-spline cost (smoothness
plus a feasibility hinge on the control points) equal to torch's.
"""
import numpy as np
import pytest

import autograd_core as ag
from autograd_core.autograd import gradcheck, gradgradcheck
from autograd_core.autograd import functional as AF

torch = pytest.importorskip("torch")


def F(L):
    return L.nn.functional


# name -> (fn(L, x), domain): inputs of shape (3, 4), kept away from kinks by the wrappers.
UNARY = {
    "exp": lambda L, x: x.exp(), "log": lambda L, x: (x.abs() + 0.5).log(), "log2": lambda L, x: (x * x + 0.5).log2(),
    "log10": lambda L, x: (x * x + 0.5).log10(), "log1p": lambda L, x: (x * x).log1p(), "expm1": lambda L, x: x.expm1(),
    "sqrt": lambda L, x: (x * x + 0.5).sqrt(), "rsqrt": lambda L, x: (x * x + 0.5).rsqrt(), "abs": lambda L, x: x.abs(),
    "sin": lambda L, x: x.sin(), "cos": lambda L, x: x.cos(), "tan": lambda L, x: (x * 0.5).tan(),
    "asin": lambda L, x: (x * 0.5).asin(), "acos": lambda L, x: (x * 0.5).acos(), "atan": lambda L, x: x.atan(),
    "sinh": lambda L, x: x.sinh(), "cosh": lambda L, x: x.cosh(), "tanh": lambda L, x: x.tanh(),
    "sigmoid": lambda L, x: x.sigmoid(), "reciprocal": lambda L, x: (x * x + 0.5).reciprocal(),
    "relu": lambda L, x: x.relu() * x, "square": lambda L, x: x.square(), "sign": lambda L, x: x.sign() * x,
    "floor": lambda L, x: x.floor() + x * x, "neg": lambda L, x: -x * x,
    "pow3": lambda L, x: x ** 3, "pow_frac": lambda L, x: (x.abs() + 0.5) ** 1.7, "pow0": lambda L, x: x ** 0 + x,
    "rpow": lambda L, x: 2.0 ** x, "rsub": lambda L, x: (1.5 - x) * x, "rdiv": lambda L, x: 2.0 / (x * x + 0.5),
    "mul_scalar": lambda L, x: x * 3.0 * x, "add_scalar": lambda L, x: (x + 2) * x, "div_scalar": lambda L, x: x * x / 4.0,
    "leaky_relu": lambda L, x: F(L).leaky_relu(x, 0.05) * x, "softplus": lambda L, x: F(L).softplus(x * 3),
    "elu": lambda L, x: F(L).elu(x), "gelu": lambda L, x: F(L).gelu(x),
    "gelu_tanh": lambda L, x: F(L).gelu(x, approximate="tanh"), "silu": lambda L, x: F(L).silu(x),
    "clamp": lambda L, x: x.clamp(-0.3, 0.4) * x, "sum": lambda L, x: x.sum() * x,
    "sum_dim": lambda L, x: x.sum(-1, keepdim=True) * x, "mean": lambda L, x: x.mean() * x,
    "mean_dim": lambda L, x: x.mean(0) * x, "max": lambda L, x: x.max() * x, "max_dim": lambda L, x: x.max(dim=-1)[0] ** 2,
    "min_dim": lambda L, x: x.min(0, keepdim=True).values * x, "amax": lambda L, x: x.amax(-1) ** 2,
    "amin": lambda L, x: x.amin(0) ** 3, "norm": lambda L, x: x.norm() * x, "norm_dim": lambda L, x: x.norm(dim=-1),
    "norm1": lambda L, x: x.norm(p=1, dim=0) ** 2, "norm3": lambda L, x: x.norm(p=3), "var": lambda L, x: x.var() * x,
    "var_dim": lambda L, x: x.var(0, unbiased=False), "std_dim": lambda L, x: x.std(-1, keepdim=True),
    "prod": lambda L, x: x.prod(), "prod_dim": lambda L, x: x.prod(0), "cumsum": lambda L, x: x.cumsum(0) ** 2,
    "logsumexp": lambda L, x: x.logsumexp(-1), "softmax": lambda L, x: x.softmax(-1),
    "log_softmax": lambda L, x: x.log_softmax(0), "reshape": lambda L, x: x.reshape(-1) ** 2,
    "view": lambda L, x: x.view(12) ** 2, "transpose": lambda L, x: x.transpose(0, 1) ** 2, "t": lambda L, x: x.t() @ x,
    "permute": lambda L, x: x.permute(1, 0).exp(), "unsqueeze": lambda L, x: x.unsqueeze(1).sin(),
    "squeeze": lambda L, x: x[None].squeeze(0).sin(), "expand": lambda L, x: x[:1].expand(4, 4).exp(),
    "repeat": lambda L, x: x.repeat(2, 1).exp(), "index_int": lambda L, x: x[1] ** 2,
    "index_slice": lambda L, x: x[1:, ::2] ** 2, "index_intarray": lambda L, x: x[[0, 2, 0]] ** 2,
    "index_bool": lambda L, x: x[x > 0] ** 2, "split": lambda L, x: L.cat(x.split(1, dim=1)[::-1], dim=1) ** 2,
    "chunk": lambda L, x: x.chunk(2, 0)[1] ** 2, "unbind": lambda L, x: x.unbind(1)[0] * x.unbind(1)[2],
    "clone": lambda L, x: x.clone() ** 2, "flip": lambda L, x: x.flip(0) * x, "roll": lambda L, x: x.roll(1, 0) * x,
    "gather": lambda L, x: x.gather(1, L.tensor([[0, 0], [1, 2], [2, 1]])) ** 2,
    "masked_fill": lambda L, x: x.masked_fill(x > 0.3, 0.0) ** 2, "where": lambda L, x: L.where(x > 0, x * x, x.exp()),
    "stack": lambda L, x: L.stack([x, x * x], 0).sin(), "matmul": lambda L, x: (x @ x.t()).tanh(),
    "mv": lambda L, x: (x @ x[0]).exp(), "dot": lambda L, x: x[0] @ x[1] * x, "bmm": lambda L, x: (x[None] @ x.t()[None]) ** 2,
    "setitem": lambda L, x: _setitem(x), "to64": lambda L, x: x.to(L.float64) ** 2,
    "index_select": lambda L, x: x.index_select(1, L.tensor([3, 0])) ** 2,
    "minimum": lambda L, x: L.minimum(x, x.t()[:3, :3].sum() * 0 + 0.2) * x,
    "mse": lambda L, x: F(L).mse_loss(x * x, _target(L, 0.5)), "l1": lambda L, x: F(L).l1_loss(x, _target(L, 0.3)) * x,
    "smooth_l1": lambda L, x: F(L).smooth_l1_loss(x * 2, _target(L, 0.1)),
    "huber": lambda L, x: F(L).huber_loss(x * 2, _target(L, 0.1)),
    "mse_none": lambda L, x: F(L).mse_loss(x, _target(L, 1.0), reduction="none") * x,
    "bce": lambda L, x: F(L).binary_cross_entropy(x.sigmoid(), (_target(L, 1.0) > 0).double()),
    "bce_logits": lambda L, x: F(L).binary_cross_entropy_with_logits(x * 2, (_target(L, 1.0) > 0).double()),
    "bce_logits_pw": lambda L, x: F(L).binary_cross_entropy_with_logits(
        x * 2, _target(L, 0.5).sigmoid(), pos_weight=L.tensor([1.0, 2.0, 0.5, 3.0], dtype=L.float64)),
    "nll": lambda L, x: F(L).nll_loss(x.log_softmax(1), L.tensor([0, 3, 1])),
    "cross_entropy": lambda L, x: F(L).cross_entropy(x * 2, L.tensor([0, 3, 1])),
    "cross_entropy_sum": lambda L, x: F(L).cross_entropy(x, L.tensor([2, 1, 1]), reduction="sum"),
    "ce_smooth": lambda L, x: F(L).cross_entropy(x * 2, L.tensor([0, 3, 1]), label_smoothing=0.2),
    "ce_prob": lambda L, x: F(L).cross_entropy(x, _target(L, 1.0).softmax(1), reduction="sum"),
    "ce_prob_w": lambda L, x: F(L).cross_entropy(x.t(), _target(L, 2.0).t().softmax(1),
                                               weight=L.tensor([1.0, 2.0, 0.5], dtype=L.float64)),
    "ce_weight_ignore": lambda L, x: F(L).cross_entropy(x, L.tensor([0, -100, 2]),
                                                      weight=L.tensor([1.0, 2.0, 0.5, 3.0], dtype=L.float64)),
    "linear": lambda L, x: F(L).linear(x, x[:2] * 2, x[0, :2]).tanh(),
}


def _target(L, scale):
    return L.tensor(np.random.default_rng(42).uniform(-1, 1, size=(3, 4)) * scale, dtype=L.float64)


def _setitem(x):
    y = x * 1
    y[0] = x[1] * x[2]
    y[:, 1] = 3.0
    return y ** 2


def _x(L, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, size=(3, 4))
    a[np.abs(a) < 0.05] += 0.2  # no ties with 0 (kinks of abs/relu/sign)
    return L.tensor(a, dtype=L.float64, requires_grad=True)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_grad_of_grad_matches_torch(name):
    fn = UNARY[name]
    seed = sum(map(ord, name))
    res = []
    for L in (ag, torch):
        x = _x(L, seed)
        y = fn(L, x)
        w = L.tensor(np.random.default_rng(seed + 1).uniform(0.5, 1.5, size=tuple(y.shape)), dtype=L.float64)
        (g,) = L.autograd.grad((y * w).sum(), x, create_graph=True)
        # torch returns a gradient without history where the derivative is constant (no h then)
        h = L.autograd.grad(g.sum(), x, allow_unused=True)[0] if g.requires_grad else None
        res.append((g.detach().numpy().copy(), None if h is None else h.numpy(force=True).copy()))
    (g_o, h_o), (g_t, h_t) = res
    np.testing.assert_allclose(g_o, g_t, rtol=1e-10, atol=1e-12)
    if h_t is None:
        assert h_o is None or np.allclose(h_o, 0)
    else:
        assert h_o is not None
        np.testing.assert_allclose(h_o, h_t, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_gradcheck_and_gradgradcheck(name):
    fn = UNARY[name]
    x = _x(ag, sum(map(ord, name)) + 7)
    assert gradcheck(lambda t: fn(ag, t), (x,))
    assert gradgradcheck(lambda t: fn(ag, t), (x,), atol=1e-4)


BINARY = {
    "add": lambda L, a, b: (a + b) ** 2, "sub": lambda L, a, b: (a - b) ** 2, "mul": lambda L, a, b: a * b * a,
    "div": lambda L, a, b: a / (b * b + 0.5), "pow": lambda L, a, b: (a.abs() + 0.5) ** b,
    "maximum": lambda L, a, b: L.maximum(a, b) ** 2, "minimum": lambda L, a, b: L.minimum(a, b) ** 2,
    "where": lambda L, a, b: L.where(a > b, a * b, b * 2), "atan2": lambda L, a, b: L.atan2(a, b + 2.0),
    "clamp_tensor": lambda L, a, b: a.clamp(min=b - 0.2, max=b + 0.2) * a, "lerp": lambda L, a, b: a.lerp(b, 0.3) ** 2,
}
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (3,)), ((3,), ())]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_binary_second_order(name, shapes):
    fn = BINARY[name]
    rng = np.random.default_rng(len(name))
    arrays = [rng.uniform(-1, 1, size=s) for s in shapes]
    res = []
    for L in (ag, torch):
        a, b = (L.tensor(v, dtype=L.float64, requires_grad=True) for v in arrays)
        y = fn(L, a, b).sum()
        ga, gb = L.autograd.grad(y, (a, b), create_graph=True)
        hs = L.autograd.grad((ga.sum() + (gb * gb).sum()), (a, b), allow_unused=True)
        res.append([ga.detach().numpy().copy(), gb.detach().numpy().copy()] +
                   [None if h is None else h.numpy().copy() for h in hs])
    for o, t in zip(*res):
        if t is None:
            assert o is None or np.allclose(o, 0)
        else:
            np.testing.assert_allclose(o, t, rtol=1e-9, atol=1e-11)
    a, b = (ag.tensor(v, dtype=ag.float64, requires_grad=True) for v in arrays)
    assert gradgradcheck(lambda s, t: fn(ag, s, t), (a, b), atol=1e-4)


def test_third_order_and_backward_create_graph():
    for L in (ag, torch):
        x = L.tensor([0.3, -0.7, 1.1], dtype=L.float64, requires_grad=True)
        y = (x.tanh() * x.exp() / (x * x + 1)).sum() + x.sigmoid().prod()
        y.backward(create_graph=True)
        g1 = x.grad
        assert g1.requires_grad
        x.grad = None
        (g2,) = L.autograd.grad(g1.sum(), x, create_graph=True)
        (g3,) = L.autograd.grad((g2 * g2).sum(), x)
        if L is ag:
            ours = [g1.detach().numpy().copy(), g2.detach().numpy().copy(), g3.numpy().copy()]
        else:
            theirs = [g1.detach().numpy(), g2.detach().numpy(), g3.numpy()]
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, rtol=1e-10)


def test_gradient_penalty_training_step_matches_torch():
    """WGAN-GP style: a penalty on the input-gradient norm, optimised through double backward."""
    rng = np.random.default_rng(5)
    w0, b0, x0 = rng.standard_normal((4, 3)), rng.standard_normal(4), rng.standard_normal((6, 3))
    out = []
    for L in (ag, torch):
        lin = L.nn.Linear(3, 4).double()
        with L.no_grad():
            lin.weight.copy_(L.tensor(w0))
            lin.bias.copy_(L.tensor(b0))
        x = L.tensor(x0, requires_grad=True)
        y = L.tanh(lin(x)).sum()
        (gx,) = L.autograd.grad(y, x, create_graph=True)
        penalty = ((gx.norm(dim=1) - 1) ** 2).mean()
        penalty.backward()
        out.append((lin.weight.grad.numpy().copy(), lin.bias.grad.numpy().copy()))
    for o, t in zip(*out):
        np.testing.assert_allclose(o, t, rtol=1e-10)


def test_custom_function_double_backward():
    class Cube(ag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    x = ag.tensor([0.5, -2.0], dtype=ag.float64, requires_grad=True)
    (g,) = ag.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    (h,) = ag.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * np.array([0.5, -2.0]))


def test_missing_double_backward_raises_instead_of_zero():
    """A node with a NumPy backward only: its first-order gradient is right, differentiating it again fails loudly."""
    from autograd_core.function import Node
    from autograd_core.ops._base import node1
    from autograd_core.tensor import _wrap

    class TwiceBackward0(Node):
        __slots__ = ()

        def backward(self, g):
            return (g * 2.0,)

    x = ag.tensor(np.random.default_rng(0).standard_normal(4), dtype=ag.float64, requires_grad=True)
    y = _wrap(x.detach().numpy() * 2.0, node1(TwiceBackward0, x))
    (g,) = ag.autograd.grad((y * y).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 8.0 * x.detach().numpy())
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="double backward"):
        ag.autograd.grad((g * x).sum(), x)


def test_first_order_results_unchanged_without_create_graph():
    x = ag.tensor([0.3, -0.7], dtype=ag.float64, requires_grad=True)
    (g,) = ag.autograd.grad((x.exp() * x).sum(), x)
    assert g.grad_fn is None and not g.requires_grad


# ---------------------------------------------------------------------------------------------
# autograd.functional against torch.autograd.functional
def _f_vec(L):
    return lambda a, b: ((a * b).tanh() + a.exp() * b.sum(), (a ** 2).sum() * b)


def _f_scalar(L):
    return lambda a, b: (a.sin() * b ** 2).sum() + (a @ a) * b.prod()


def _inputs(L, seed=0):
    rng = np.random.default_rng(seed)
    return (L.tensor(rng.uniform(-1, 1, 3), dtype=L.float64), L.tensor(rng.uniform(-1, 1, 3), dtype=L.float64))


def _flat(x):
    if isinstance(x, (tuple, list)):
        out = []
        for e in x:
            out += _flat(e)
        return out
    return [x.detach().numpy().copy()]


@pytest.mark.parametrize("what", ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp", "jacobian_single",
                                  "hessian_single", "hvp_create_graph"])
def test_functional_matches_torch(what):
    res = []
    for L in (ag, torch):
        fn = L.autograd.functional
        a, b = _inputs(L)
        v = _inputs(L, 1)
        if what == "vjp":
            r = fn.vjp(_f_vec(L), (a, b), v)
        elif what == "jvp":
            r = fn.jvp(_f_vec(L), (a, b), v)
        elif what == "jacobian":
            r = fn.jacobian(_f_vec(L), (a, b))
        elif what == "hessian":
            r = fn.hessian(_f_scalar(L), (a, b))
        elif what == "hvp":
            r = fn.hvp(_f_scalar(L), (a, b), v)
        elif what == "vhp":
            r = fn.vhp(_f_scalar(L), (a, b), v)
        elif what == "jacobian_single":
            r = fn.jacobian(lambda t: t.exp() * t.sum(), a)
            assert isinstance(r, L.Tensor) and tuple(r.shape) == (3, 3)
        elif what == "hessian_single":
            r = fn.hessian(lambda t: (t.exp() * t.sum()).sum(), a)
            assert isinstance(r, L.Tensor) and tuple(r.shape) == (3, 3)
        else:
            a.requires_grad_(True)
            _, hv = fn.hvp(lambda t: (t.sin() * t.sum()).sum(), a, v[0], create_graph=True)
            assert hv.requires_grad
            r = L.autograd.grad(hv.sum(), a)
        res.append(_flat(r))
    assert len(res[0]) == len(res[1])
    for o, t in zip(*res):
        assert o.shape == t.shape
        np.testing.assert_allclose(o, t, rtol=1e-10, atol=1e-12)


def test_functional_strict_and_errors_like_torch():
    for L in (ag, torch):
        fn = L.autograd.functional
        a = L.tensor([1.0, 2.0], dtype=L.float64)
        with pytest.raises(RuntimeError, match="does not require gradients"):
            fn.vjp(lambda t: L.ones(2, dtype=L.float64) * 1.0, a, L.ones(2, dtype=L.float64), strict=True)
        with pytest.raises(RuntimeError, match="single element"):
            fn.hessian(lambda t: t * 2, a)
        with pytest.raises(RuntimeError, match="invalid size"):
            fn.hvp(lambda t: (t * t).sum(), a, L.ones(3, dtype=L.float64))
        jac = fn.jacobian(lambda t: L.ones(2, dtype=L.float64) * 1.0, a)
        assert jac.abs().sum().item() == 0


# ---------------------------------------------------------------------------------------------
# EGO-style B-spline cost: hvp with respect to the control points
def _bspline_cost(L, q, dt=0.5, v_max=2.0, a_max=3.0, lam_s=1.0, lam_f=10.0):
    """Uniform cubic B-spline: jerk-based smoothness + a squared hinge on velocity/acceleration limits."""
    v = (q[1:] - q[:-1]) / dt
    a = (v[1:] - v[:-1]) / dt
    j = (a[1:] - a[:-1]) / dt
    smooth = (j * j).sum()
    over_v = (v * v - v_max ** 2).clamp(min=0.0)
    over_a = (a * a - a_max ** 2).clamp(min=0.0)
    feas = (over_v ** 2).sum() + (over_a ** 2).sum()
    return lam_s * smooth + lam_f * feas


def test_bspline_cost_hvp_matches_torch():
    rng = np.random.default_rng(3)
    q0 = np.cumsum(rng.uniform(-1.5, 1.5, size=(10, 3)), axis=0)
    v0 = rng.standard_normal((10, 3))
    res = []
    for L in (ag, torch):
        q = L.tensor(q0, dtype=L.float64)
        v = L.tensor(v0, dtype=L.float64)
        val, hv = L.autograd.functional.hvp(lambda t: _bspline_cost(L, t), q, v)
        _, vh = L.autograd.functional.vhp(lambda t: _bspline_cost(L, t), q, v)
        hess = L.autograd.functional.hessian(lambda t: _bspline_cost(L, t), q)
        res.append((val.item(), hv.numpy().copy(), vh.numpy().copy(), hess.numpy().copy()))
    (vo, ho, vho, Ho), (vt, ht, vht, Ht) = res
    assert abs(vo - vt) <= 1e-10 * max(1.0, abs(vt))
    assert np.abs(ht).max() > 0 and np.any(Ht.reshape(30, 30) != Ht.reshape(30, 30)[0, 0])
    np.testing.assert_allclose(ho, ht, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(vho, vht, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(Ho, Ht, rtol=1e-10, atol=1e-10)
    # the feasibility hinge is active somewhere, so its curvature is part of what was compared
    q = ag.tensor(q0, dtype=ag.float64)
    vel = (q[1:] - q[:-1]) / 0.5
    assert ((vel * vel).sum(-1) > 4.0).any().item()


# ---------------------------------------------------------------------------------------------
# CNN kernels: second derivatives against torch, and gradgradcheck
def _cnn_params(L, seed=11):
    rng = np.random.default_rng(seed)
    w = L.tensor(rng.standard_normal((4, 2, 3, 3)) * 0.5, dtype=L.float64, requires_grad=True)
    b = L.tensor(rng.standard_normal(4), dtype=L.float64, requires_grad=True)
    return w, b


def _reflect(L, x):
    if L is ag:  # the padding kernel behind nn.Conv2d(padding_mode="reflect")
        return ag.nn._functional_cnn._mode_pad(x, [(2, 1), (1, 2)], "reflect")
    return F(L).pad(x, (1, 2, 2, 1), mode="reflect")


CNN = {
    "conv2d": lambda L, x, w, b: F(L).conv2d(x, w, b, padding=1).tanh(),
    "conv2d_stride_dil": lambda L, x, w, b: F(L).conv2d(x, w, None, stride=2, dilation=(1, 2), padding=(1, 2)) ** 2,
    "conv2d_groups": lambda L, x, w, b: F(L).conv2d(x, w[:, :1], b, groups=2).sin(),
    "conv1d": lambda L, x, w, b: F(L).conv1d(x[:, :, 0], w[:, :, 0], b, padding=1).tanh(),
    "max_pool2d": lambda L, x, w, b: F(L).max_pool2d(x * x, 2, stride=1, padding=1) * x.sum(),
    "avg_pool2d": lambda L, x, w, b: F(L).avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False) ** 3,
    "adaptive_avg": lambda L, x, w, b: F(L).adaptive_avg_pool2d(x, (2, 3)) ** 2,
    "pad_reflect": lambda L, x, w, b: _reflect(L, x) ** 3,
    "layer_norm": lambda L, x, w, b: F(L).layer_norm(x * x, (4, 5), w.reshape(-1)[:20].reshape(4, 5),
                                                    b.repeat(5).reshape(4, 5)) ** 2,
    "batch_norm_train": lambda L, x, w, b: F(L).batch_norm(x ** 2, None, None, w[:2, 0, 0, 0], b[:2], training=True).tanh(),
    "batch_norm_eval": lambda L, x, w, b: F(L).batch_norm(
        x, L.tensor([0.1, -0.2], dtype=L.float64), L.tensor([1.5, 0.7], dtype=L.float64), w[:2, 0, 0, 0], b[:2]) ** 2,
}


@pytest.mark.parametrize("name", sorted(CNN))
def test_cnn_second_order_matches_torch(name):
    fn = CNN[name]
    rng = np.random.default_rng(len(name))
    x0 = rng.standard_normal((2, 2, 4, 5))
    res = []
    for L in (ag, torch):
        x = L.tensor(x0, dtype=L.float64, requires_grad=True)
        w, b = _cnn_params(L)
        y = fn(L, x, w, b)
        gx, gw, gb = L.autograd.grad(y.sum(), (x, w, b), create_graph=True, allow_unused=True)
        pen = sum((g * g).sum() for g in (gx, gw, gb) if g is not None)
        hs = L.autograd.grad(pen, (x, w, b), allow_unused=True)
        res.append([None if t is None else t.detach().numpy(force=True).copy() for t in (gx, gw, gb) + tuple(hs)])
    for o, t in zip(*res):
        if t is None:
            assert o is None or np.allclose(o, 0)
        else:
            assert o is not None
            np.testing.assert_allclose(o, t, rtol=1e-8, atol=1e-10)


def test_cnn_gradgradcheck_and_dropout():
    x = ag.tensor(np.random.default_rng(1).standard_normal((1, 2, 4, 4)), dtype=ag.float64, requires_grad=True)
    w, b = _cnn_params(ag)
    w = w.detach()[:, :, :2, :2].clone().requires_grad_(True)
    assert gradgradcheck(lambda t, k: ag.nn.functional.conv2d(t, k, None, padding=1).tanh(), (x, w), atol=1e-4)
    assert gradgradcheck(lambda t: ag.nn.functional.max_pool2d(t * t, 2), (x,), atol=1e-4)
    assert gradgradcheck(lambda t: ag.nn.functional.layer_norm(t, (4, 4)) ** 2, (x,), atol=1e-4)

    def drop(t):
        ag.manual_seed(0)
        return ag.nn.functional.dropout(t * t, 0.4)
    assert gradgradcheck(drop, (x,), atol=1e-4)
