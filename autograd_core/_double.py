"""Backward formulas in differentiable ops, used when the graph of the backward pass is recorded.

`backward(create_graph=True)` and `autograd.grad(..., create_graph=True)` run the engine's
graph-recording sweep (`function.run_backward_graph`), which calls `node.backward_t(grad)`
instead of `node.backward(grad)`: the same formula, on Tensors, with autograd_core's own ops, so
the gradients it returns have a history and can be differentiated again, to any order (each op
used here has a `backward_t` itself). The NumPy `backward` stays the fast first-order path.

A node's inputs are rebuilt from its saved arrays and its edges (`_inp`): a leaf input is the
leaf itself, a non-leaf input a Tensor on the saved array whose `grad_fn` is the input's node, so
gradients of a saved input flow where the input's would. A saved output is rebuilt on the node
itself (`_outp`), as torch's SavedVariable does for outputs.

Nodes without a formula here get `_no_double_backward`: first-order gradients are right, and
differentiating them again raises a clear error instead of silently returning zeros.
"""
import math

import numpy as np

from . import grad_mode as _gm
from .function import Node, reduce_to_shape
from .tensor import Tensor, _wrap
from .ops import arith as A, indexing as I, pointwise as P, reduction as R, shape as S
from .ops._base import _obj_new, next_seq, node1

_gs = _gm._state


# ---------------------------------------------------------------------------------------------
# Helpers
def _inp(node, i, arr):
    """Input `i` of `node` as a Tensor on `arr` (its saved data) that carries the input's history."""
    e = node.next_edges[i]
    if e is None:
        return _wrap(arr)
    tgt, nr = e
    if not tgt._is_node:  # a leaf that requires grad
        if arr.dtype != tgt._data.dtype:
            return S.to(tgt, arr.dtype)
        return tgt
    t = _wrap(arr, tgt)
    t._nr = nr
    return t


def _outp(node, arr):
    """The (single) output of `node` on its saved array, with `node` as grad_fn."""
    return _wrap(arr, node)


def _c(arr, dt=None):
    """A constant Tensor (no history)."""
    a = np.asarray(arr)
    if dt is not None and a.dtype != dt:
        a = a.astype(dt)
    return _wrap(a)


class SumToSizeBackward(Node):
    """Backward of `sum_to` (the differentiable un-broadcast): broadcast back."""

    __slots__ = ("shape",)

    def backward(self, g):
        return (np.broadcast_to(g, self.shape),)

    def backward_t(self, g):
        return (S.expand(g, self.shape),)


SumToSizeBackward.__name__ = SumToSizeBackward.__qualname__ = "SumBackward1"


def sum_to(t, shape):
    """`t` summed over broadcast axes down to `shape` (recorded); `reduce_to_shape` does the work."""
    shape = tuple(shape)
    if t._data.shape == shape:
        return t
    out = np.asarray(reduce_to_shape(t._data, shape))
    if t._rg and _gs.enabled:
        n = node1(SumToSizeBackward, t)
        n.shape = t._data.shape
        return _wrap(out, n)
    return _wrap(out)


class IndexPutBackward(Node):
    """Backward of `index_scatter`: pick the scattered entries again."""

    __slots__ = ("key",)

    def backward(self, g):
        return (np.array(g[self.key]),)

    def backward_t(self, g):
        return (I.getitem(g, self.key),)


IndexPutBackward.__name__ = IndexPutBackward.__qualname__ = "IndexPutBackward0"


def index_scatter(g, shape, key, dup):
    """zeros(shape) with g placed (dup: added) at NumPy key `key`; recorded."""
    d = g._data
    out = np.zeros(shape, dtype=d.dtype)
    if dup:
        np.add.at(out, key, d)
    else:
        out[key] = d
    if g._rg and _gs.enabled:
        n = node1(IndexPutBackward, g)
        n.key = key
        return _wrap(out, n)
    return _wrap(out)


def _expand_back(g, axes, keepdim, shape):
    if not keepdim and axes:
        for a in sorted(axes):
            g = S.unsqueeze(g, a)
    return S.expand(g, shape)


def _unsq(t, axes, keepdim):
    if not keepdim and axes:
        for a in sorted(axes):
            t = S.unsqueeze(t, a)
    return t


class _AliasBackward(Node):
    __slots__ = ()

    def backward(self, g):
        return (g,)

    def backward_t(self, g):
        return (g,)


_AliasBackward.__name__ = _AliasBackward.__qualname__ = "AliasBackward0"


def decomposed_grads(inputs, f, grad):
    """Partial derivatives of `f(*inputs)` (Tensor ops) with respect to each input, times `grad`.

    The backward formula of a fused node written as its forward decomposition: each input gets
    its own alias node (so two inputs on the same tensor stay apart) and the sweep stops there.
    """
    from .function import run_backward_graph
    aliases = []
    capture = {}
    for x in inputs:
        if x is None or not x._rg:
            aliases.append(x)
            continue
        a = _wrap(x._data, node1(_AliasBackward, x))
        aliases.append(a)
        capture[(a._fn, 0)] = None
    out = f(*aliases)
    if capture and out._rg:
        run_backward_graph([out], [grad], capture=capture, accumulate=False, stop=True)
    res = []
    for a in aliases:
        if a is None or not a._rg:
            res.append(None)
        else:
            res.append(capture.get((a._fn, 0)))
    return tuple(res)


class NotImplementedBackward(Node):
    """Stands for a first-order gradient whose own derivative is not implemented."""

    __slots__ = ("what",)

    def backward(self, g):
        raise RuntimeError(f"the derivative of {self.what}'s backward (double backward) is not implemented "
                           "in autograd_core")

    backward_t = backward


def _no_double_backward(self, g):
    """Fallback `backward_t`: NumPy gradients wrapped so that differentiating them again raises."""
    multi = self._multi
    gd = [None if x is None else x._data for x in g] if multi else g._data
    res = self.backward(gd)
    srcs = [x for x in (g if multi else [g]) if x is not None and x._rg]
    edges = tuple(x._edge() for x in srcs) + tuple(e for e in self.next_edges if e is not None)
    out = []
    for r in res:
        if r is None:
            out.append(None)
            continue
        r = np.asarray(r)
        if edges:
            n = _obj_new(NotImplementedBackward)
            n.seq = next_seq()
            n.saved = None
            n.vc = ()
            n.next_edges = edges
            n.what = type(self).__name__
            out.append(_wrap(r, n))
        else:
            out.append(_wrap(r))
    return tuple(out)


Node.backward_t = _no_double_backward


def _reg(cls):
    def deco(fn):
        cls.backward_t = fn
        return fn
    return deco


def _zero(g):
    return A.mul(g, 0.0)


# ---------------------------------------------------------------------------------------------
# arith
@_reg(A.AddBackward0)
def _add(self, g):
    ea, eb = self.next_edges
    return (None if ea is None else sum_to(g, self.sa), None if eb is None else sum_to(g, self.sb))


@_reg(A._ScalarIdentity)
def _ident(self, g):
    return (g,)


@_reg(A.SubBackward0)
def _sub(self, g):
    ea, eb = self.next_edges
    return (None if ea is None else sum_to(g, self.sa), None if eb is None else sum_to(A.neg(g), self.sb))


@_reg(A.RsubBackward1)
def _rsub(self, g):
    return (A.neg(g),)


A.NegBackward0.backward_t = _rsub


@_reg(A.MulBackward0)
def _mul(self, g):
    ad, bd = self.saved
    ea, eb = self.next_edges
    a, b = _inp(self, 0, ad), _inp(self, 1, bd)
    return (None if ea is None else sum_to(A.mul(g, b), self.sa),
            None if eb is None else sum_to(A.mul(g, a), self.sb))


@_reg(A._MulScalarBackward)
def _mul_s(self, g):
    return (A.mul(g, _c(self.saved)),)


@_reg(A.DivBackward0)
def _div(self, g):
    ad, bd = self.saved
    ea, eb = self.next_edges
    a, b = _inp(self, 0, ad), _inp(self, 1, bd)
    ga = A.div(g, b)
    return (None if ea is None else sum_to(ga, self.sa),
            None if eb is None else sum_to(A.div(A.mul(A.neg(ga), a), b), self.sb))


@_reg(A._DivScalarBackward)
def _div_s(self, g):
    return (A.div(g, _c(self.saved)),)


@_reg(A.PowBackward0)
def _pow0(self, g):
    a = _inp(self, 0, self.saved)
    p = self.p
    if p == 0:
        return (_zero(g),)
    if p == 2:
        return (A.mul(g, A.mul(a, 2)),)
    if p == 1:
        return (g,)
    return (A.mul(g, A.mul(A.pow(a, p - 1), p)),)


@_reg(A.PowBackward1)
def _pow1(self, g):
    ad, bd, od = self.saved
    ea, eb = self.next_edges
    a, b = _inp(self, 0, ad), _inp(self, 1, bd)
    ga = gb = None
    if ea is not None:
        ga = sum_to(A.mul(g, A.mul(b, A.pow(a, A.sub(b, 1)))), self.sa)
    if eb is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            mask = np.broadcast_to((ad == 0) & (bd >= 0), od.shape)
            lg = P.log(a)
        term = A.mul(_outp(self, od), lg)
        term = P.where(_c(mask), _c(np.zeros((), od.dtype)), term)
        gb = sum_to(A.mul(g, term), self.sb)
    return ga, gb


@_reg(A.PowBackward2)
def _pow2(self, g):
    if self.base == 0:
        return (_zero(g),)
    return (A.mul(g, A.mul(_outp(self, self.saved), math.log(self.base))),)


@_reg(A.DotBackward0)
def _dot(self, g):
    ad, bd = self.saved
    ea, eb = self.next_edges
    return (None if ea is None else A.mul(g, _inp(self, 1, bd)),
            None if eb is None else A.mul(g, _inp(self, 0, ad)))


@_reg(A.MmBackward0)
def _mm(self, g):
    ad, bd = self.saved
    ea, eb = self.next_edges
    return (None if ea is None else A.matmul(g, S.t(_inp(self, 1, bd))),
            None if eb is None else A.matmul(S.t(_inp(self, 0, ad)), g))


@_reg(A.MvBackward0)
def _mv(self, g):
    ad, bd = self.saved
    ea, eb = self.next_edges
    return (None if ea is None else A.mul(S.unsqueeze(g, 1), S.unsqueeze(_inp(self, 1, bd), 0)),
            None if eb is None else A.matmul(S.t(_inp(self, 0, ad)), g))


@_reg(A._MatmulGeneralBackward)
def _matmul(self, g):
    ad, bd = self.saved
    ea, eb = self.next_edges
    a, b = _inp(self, 0, ad), _inp(self, 1, bd)
    a2 = S.unsqueeze(a, 0) if ad.ndim == 1 else a
    b2 = S.unsqueeze(b, 1) if bd.ndim == 1 else b
    g2 = g
    if ad.ndim == 1:
        g2 = S.unsqueeze(g2, -2 % (g2.ndim + 1))
    if bd.ndim == 1:
        g2 = S.unsqueeze(g2, g2.ndim)
    ga = gb = None
    if ea is not None:
        ga = S.reshape(sum_to(A.matmul(g2, S.transpose(b2, -1, -2)), a2._data.shape), ad.shape)
    if eb is not None:
        gb = S.reshape(sum_to(A.matmul(S.transpose(a2, -1, -2), g2), b2._data.shape), bd.shape)
    return ga, gb


# ---------------------------------------------------------------------------------------------
# pointwise (the generated unary nodes save (x, out))
def _unary_t(formula):
    def backward_t(self, g):
        xd, od = self.saved
        return (formula(g, lambda: _inp(self, 0, xd), lambda: _outp(self, od), xd, od),)
    return backward_t


_LN2, _LN10 = math.log(2.0), math.log(10.0)
_UNARY = {
    "ExpBackward0": lambda g, x, o, xd, od: A.mul(g, o()),
    "LogBackward0": lambda g, x, o, xd, od: A.div(g, x()),
    "Log2Backward0": lambda g, x, o, xd, od: A.div(g, A.mul(x(), _LN2)),
    "Log10Backward0": lambda g, x, o, xd, od: A.div(g, A.mul(x(), _LN10)),
    "Log1PBackward0": lambda g, x, o, xd, od: A.div(g, A.add(x(), 1)),
    "Expm1Backward0": lambda g, x, o, xd, od: A.mul(g, A.add(o(), 1)),
    "SqrtBackward0": lambda g, x, o, xd, od: A.div(g, A.mul(o(), 2)),
    "RsqrtBackward0": lambda g, x, o, xd, od: A.mul(g, A.mul(A.pow(o(), 3), -0.5)),
    "AbsBackward0": lambda g, x, o, xd, od: A.mul(g, P.sign(x())),
    "SinBackward0": lambda g, x, o, xd, od: A.mul(g, P.cos(x())),
    "CosBackward0": lambda g, x, o, xd, od: A.mul(A.neg(g), P.sin(x())),
    "TanBackward0": lambda g, x, o, xd, od: A.mul(g, A.add(A.mul(o(), o()), 1)),
    "AsinBackward0": lambda g, x, o, xd, od: A.div(g, P.sqrt(A.rsub(A.mul(x(), x()), 1))),
    "AcosBackward0": lambda g, x, o, xd, od: A.div(A.neg(g), P.sqrt(A.rsub(A.mul(x(), x()), 1))),
    "AtanBackward0": lambda g, x, o, xd, od: A.div(g, A.add(A.mul(x(), x()), 1)),
    "SinhBackward0": lambda g, x, o, xd, od: A.mul(g, P.cosh(x())),
    "CoshBackward0": lambda g, x, o, xd, od: A.mul(g, P.sinh(x())),
    "TanhBackward0": lambda g, x, o, xd, od: A.mul(g, A.rsub(A.mul(o(), o()), 1)),
    "SigmoidBackward0": lambda g, x, o, xd, od: A.mul(g, A.mul(A.rsub(o(), 1), o())),
    "ReciprocalBackward0": lambda g, x, o, xd, od: A.mul(A.neg(g), A.mul(o(), o())),
    "ReluBackward0": lambda g, x, o, xd, od: P.where(_c(~(od <= 0)), g, _c(np.zeros((), g._data.dtype))),
}
for _name, _f in _UNARY.items():
    getattr(P, _name).backward_t = _unary_t(_f)


@_reg(P._ZeroGrad)
def _zero_grad(self, g):
    return (_zero(g),)


@_reg(P.LeakyReluBackward0)
def _leaky(self, g):
    x = self.saved
    return (A.mul(g, _c(np.where(x > 0, 1.0, self.slope), g._data.dtype)),)


@_reg(P.SoftplusBackward0)
def _softplus(self, g):
    xd = self.saved
    x = _inp(self, 0, xd)
    s = P.sigmoid(A.mul(x, self.beta))
    return (P.where(_c(xd * self.beta > self.threshold), g, A.mul(g, s)),)


@_reg(P.EluBackward0)
def _elu(self, g):
    xd, od = self.saved
    o = _inp(self, 0, xd)
    # d = exp(x) * alpha for x <= 0, written on the input (the saved output's node is this one)
    d = A.mul(P.exp(P.minimum(o, _c(np.zeros((), xd.dtype)))), self.alpha)
    return (P.where(_c(xd > 0), g, A.mul(g, d)),)


@_reg(P.ClampBackward1)
def _clamp1(self, g):
    x = self.saved
    mask = np.ones(x.shape, dtype=bool)
    if self.lo is not None:
        mask &= x >= self.lo
    if self.hi is not None:
        mask &= x <= self.hi
    return (P.where(_c(mask), g, _c(np.zeros((), g._data.dtype))),)


@_reg(P.ClampBackward0)
def _clamp0(self, g):
    x, lo, hi = self.saved
    sx, slo, shi = self.shapes
    x_mask = np.ones((), bool)
    lo_mask = hi_mask = None
    if lo is not None:
        x_mask = x_mask & (x >= lo)
        lo_mask = x < lo
        if hi is not None:
            lo_mask = lo_mask & (lo < hi)
    if hi is not None:
        x_mask = x_mask & (x <= hi)
        hi_mask = x > hi
        if lo is not None:
            hi_mask = hi_mask | (hi < lo)
    out = []
    for e, shape, mask in zip(self.next_edges, (sx, slo, shi), (x_mask, lo_mask, hi_mask)):
        out.append(None if e is None else sum_to(P.where(_c(mask), g, _c(np.zeros((), g._data.dtype))), shape))
    return tuple(out)


@_reg(P._MinMaxBackward)
def _minmax(self, g):
    a, b = self.saved
    ea, eb = self.next_edges
    wa, wb = P._minmax_weights(a, b, self.is_max, type(self) in (P.FmaxBackward0, P.FminBackward0))
    dt = g._data.dtype
    z = _c(np.zeros((), dt))
    return (None if ea is None else sum_to(P.where(_c(wa != 0), A.mul(g, _c(wa, dt)), z), self.sa),
            None if eb is None else sum_to(P.where(_c(wb != 0), A.mul(g, _c(wb, dt)), z), self.sb))


@_reg(P.WhereBackward0)
def _where(self, g):
    cond = _c(self.saved)
    ea, eb = self.next_edges
    z = _c(np.zeros((), g._data.dtype))
    return (None if ea is None else sum_to(P.where(cond, g, z), self.sa),
            None if eb is None else sum_to(P.where(cond, z, g), self.sb))


@_reg(P.Atan2Backward0)
def _atan2(self, g):
    ad, bd = self.saved
    ea, eb = self.next_edges
    a, b = _inp(self, 0, ad), _inp(self, 1, bd)
    den = A.add(A.mul(a, a), A.mul(b, b))
    return (None if ea is None else sum_to(A.div(A.mul(g, b), den), self.sa),
            None if eb is None else sum_to(A.div(A.mul(A.neg(g), a), den), self.sb))


@_reg(P.LerpBackward0)
def _lerp(self, g):
    ea, eb = self.next_edges
    w = self.w
    return (None if ea is None else sum_to(A.mul(g, 1 - w), self.sa),
            None if eb is None else sum_to(A.mul(g, w), self.sb))


# ---------------------------------------------------------------------------------------------
# reductions
@_reg(R.SumBackward0)
def _sum0(self, g):
    return (S.expand(g, self.shape),)


@_reg(R.SumBackward1)
def _sum1(self, g):
    return (_expand_back(g, self.axes, self.keepdim, self.shape),)


@_reg(R.MeanBackward0)
def _mean0(self, g):
    n = int(np.prod(self.shape)) if self.shape else 1
    return (S.expand(A.div(g, n) if n else A.mul(g, float("nan")), self.shape),)


@_reg(R.MeanBackward1)
def _mean1(self, g):
    n = 1
    for a in self.axes:
        n *= self.shape[a]
    return (_expand_back(A.div(g, n) if n else A.mul(g, float("nan")), self.axes, self.keepdim, self.shape),)


@_reg(R._EvenlyDistributed)
def _evenly(self, g):
    x, out = self.saved
    axes = self.axes
    o = out if (self.keepdim or not axes) else np.expand_dims(out, axes)
    gg = _unsq(g, axes, self.keepdim)
    dt = g._data.dtype
    if self._full:
        mask = R._extremum_mask(x, o)
        return (P.where(_c(mask), A.div(gg, float(mask.sum())), _c(np.zeros((), dt))),)
    mask = (x == o)
    count = mask.sum(axis=axes, keepdims=True) if axes else mask.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        return (A.mul(A.div(gg, _c(count, dt)), _c(mask, dt)),)


def _along_key(idx, axis):
    full = list(np.indices(idx.shape, sparse=True))
    full[axis] = idx
    return tuple(full)


@_reg(R._IndexedExtremum)
def _indexed(self, g):
    idx = self.saved
    if not self.keepdim:
        g = S.unsqueeze(g, self.axis)
        idx = np.expand_dims(idx, self.axis)
    return (index_scatter(g, self.shape, _along_key(idx, self.axis), False),)


@_reg(R.LinalgVectorNormBackward0)
def _norm(self, g):
    xd, od = self.saved
    axes, p = self.axes, self.p
    x = _inp(self, 0, xd)
    o = _unsq(_outp(self, od), axes, self.keepdim)
    g = _unsq(g, axes, self.keepdim)
    odk = o._data
    if p == 2:
        if odk.ndim == 0 or odk.all():
            return (A.mul(x, A.div(g, o)),)
        safe = P.where(_c(odk == 0), _c(np.ones((), odk.dtype)), o)
        return (A.mul(x, P.where(_c(odk == 0), _c(np.zeros((), odk.dtype)), A.div(g, safe))),)
    if p == 1:
        return (A.mul(g, P.sign(x)),)
    if p == np.inf or p == -np.inf:
        mask = (np.abs(xd) == odk)
        count = mask.sum(axis=axes, keepdims=True)
        return (A.mul(g, _c(np.sign(xd) * mask / count, xd.dtype)),)
    if p == 0:
        return (_zero(S.expand(g, xd.shape)),)
    safe = P.where(_c(odk == 0), _c(np.ones((), odk.dtype)), o)
    scale = P.where(_c(odk == 0), _c(np.zeros((), odk.dtype)), A.div(g, A.pow(safe, p - 1)))
    return (A.mul(A.mul(x, A.pow(P.abs(x), p - 2)), scale),)


@_reg(R._VarStdBackward)
def _varstd(self, g):
    xd, od = self.saved
    axes = self.axes
    x = _inp(self, 0, xd)
    g = _unsq(g, axes, self.keepdim)
    mu = R.mean(x, axes, True) if axes else R.mean(x)
    gv = g
    if self.is_std:
        o = _unsq(_outp(self, od), axes, self.keepdim)
        gv = A.div(g, A.mul(o, 2))
    if self.denom <= 0:
        return (A.mul(A.sub(x, mu), float("nan")),)
    return (A.mul(A.mul(A.sub(x, mu), gv), 2.0 / self.denom),)


@_reg(R.CumsumBackward0)
def _cumsum(self, g):
    ax = self.axis
    return (S.flip(R.cumsum(S.flip(g, ax), ax), ax),)


@_reg(R.LogsumexpBackward0)
def _lse(self, g):
    xd, od = self.saved
    x = _inp(self, 0, xd)
    o = _unsq(_outp(self, od), self.axes, self.keepdim)
    g = _unsq(g, self.axes, self.keepdim)
    return (A.mul(g, P.exp(A.sub(x, o))),)


@_reg(R.SoftmaxBackward0)
def _softmax(self, g):
    o = _outp(self, self.saved)
    if self.axis is None:
        return (A.mul(g, 0.0),)
    return (A.mul(o, A.sub(g, R.sum(A.mul(g, o), self.axis, True))),)


@_reg(R.LogSoftmaxBackward0)
def _logsoftmax(self, g):
    o = _outp(self, self.saved)
    if self.axis is None:
        return (A.mul(g, 0.0),)
    return (A.sub(g, A.mul(P.exp(o), R.sum(g, self.axis, True))),)


# ---------------------------------------------------------------------------------------------
# shape
@_reg(S._ReshapeBack)
def _reshape(self, g):
    return (S.reshape(g, self.shape),)


@_reg(S.TransposeBackward0)
def _transpose(self, g):
    return (S.transpose(g, self.d0, self.d1),)


@_reg(S.PermuteBackward0)
def _permute(self, g):
    return (S.permute(g, self.inv),)


@_reg(S.ExpandBackward0)
def _expand(self, g):
    return (sum_to(g, self.shape),)


@_reg(S.RepeatBackward0)
def _repeat(self, g):
    reps, shape = self.reps, self.shape
    lead = len(reps) - len(shape)
    full = (1,) * lead + tuple(shape)
    inter = []
    for r, s in zip(reps, full):
        inter += [r, s]
    gs = R.sum(S.reshape(g, tuple(inter)), tuple(range(0, 2 * len(reps), 2)))
    return (S.reshape(gs, shape),)


@_reg(S.CloneBackward0)
def _clone(self, g):
    return (g,)


@_reg(S.ToCopyBackward0)
def _tocopy(self, g):
    return (S.to(g, self.dtype),)


@_reg(S.CatBackward0)
def _cat(self, g):
    ax = self.axis
    starts = [0] + [int(b) for b in self.bounds]
    ends = [int(b) for b in self.bounds] + [g._data.shape[ax]]
    out = []
    for s, e, edge in zip(starts, ends, self.next_edges):
        out.append(None if edge is None else I.getitem(g, (slice(None),) * ax + (slice(s, e),)))
    return tuple(out)


@_reg(S.StackBackward0)
def _stack(self, g):
    ax = self.axis
    return tuple(None if e is None else I.getitem(g, (slice(None),) * ax + (i,))
                 for i, e in enumerate(self.next_edges))


def _fill_parts(self, grads):
    return [g if g is not None else _c(np.zeros(s, self.dtype)) for g, s in zip(grads, self.shapes)]


@_reg(S.SplitBackward0)
def _split(self, grads):
    return (S.cat(_fill_parts(self, grads), self.axis),)


@_reg(S.UnbindBackward0)
def _unbind(self, grads):
    return (S.stack(_fill_parts(self, grads), self.axis),)


@_reg(S.FlipBackward0)
def _flip(self, g):
    return (S.flip(g, self.axes),)


@_reg(S.RollBackward0)
def _roll(self, g):
    return (S.roll(g, tuple(-s for s in self.shifts), self.axes),)


# ---------------------------------------------------------------------------------------------
# indexing and in-place
@_reg(I._BasicIndexBackward)
def _basic_index(self, g):
    return (index_scatter(g, self.shape, self.key, False),)


@_reg(I.IndexBackward0)
def _index(self, g):
    return (index_scatter(g, self.shape, self.key, self.dup),)


@_reg(I.CopySlices)
def _copyslices(self, g):
    eb, ev = self.next_edges
    gb = gv = None
    if eb is not None:
        mask = np.ones(g._data.shape, g._data.dtype)
        mask[self.key] = 0
        gb = A.mul(g, _c(mask))
    if ev is not None:
        gv = sum_to(I.getitem(g, self.key), self.vshape)
        if gv._data.dtype != self.dtype:
            gv = S.to(gv, self.dtype)
    return gb, gv


@_reg(I.GatherBackward0)
def _gather(self, g):
    return (index_scatter(g, self.shape, _along_key(self.saved, self.axis), True),)


@_reg(I.MaskedFillBackward0)
def _masked_fill(self, g):
    mask = _c(self.saved)
    es, ev = self.next_edges
    z = _c(np.zeros((), g._data.dtype))
    gs = P.where(mask, z, g) if es is not None else None
    gv = None
    if ev is not None:
        gv = S.reshape(R.sum(P.where(mask, g, z)), self.sv)
    return gs, gv


def _register_inplace():
    from .ops import inplace as IP

    @_reg(IP.CopyBackwards)
    def _copy(self, g):
        es, esrc = self.next_edges
        gsrc = None
        if esrc is not None:
            gsrc = sum_to(g, self.ss)
            if gsrc._data.dtype != self.dtype:
                gsrc = S.to(gsrc, self.dtype)
        return (_zero(g) if es is not None else None), gsrc


_register_inplace()


# ---------------------------------------------------------------------------------------------
# nn.functional fused nodes
def _register_nn():
    from .nn import functional as F, _functional_loss as L

    @_reg(F._LinearNode)
    def _linear(self, g):
        xd, wd = self.saved
        edges = self.next_edges
        ex, ewt = edges[-2], edges[-1]
        n = len(edges)
        gx = A.matmul(g, S.t(_inp(self, n - 1, wd.T))) if ex is not None else None
        gwt = A.matmul(S.t(_inp(self, n - 2, xd)), g) if ewt is not None else None
        if n == 3:
            return (R.sum(g, 0) if edges[0] is not None else None), gx, gwt
        return gx, gwt

    @_reg(F.GeluBackward0)
    def _gelu(self, g):
        xd = self.saved
        x = _inp(self, 0, xd)
        if self.approximate == "tanh":
            c = math.sqrt(2.0 / math.pi)
            inner = A.mul(A.add(x, A.mul(A.pow(x, 3), 0.044715)), c)
            t = P.tanh(inner)
            d1 = A.mul(A.add(t, 1.0), 0.5)
            dinner = A.mul(A.add(A.mul(A.mul(x, x), 3 * 0.044715), 1.0), c)
            d = A.add(d1, A.mul(A.mul(A.mul(x, A.rsub(A.mul(t, t), 1.0)), dinner), 0.5))
        else:
            from .distributions.utils import erf
            cdf = A.mul(A.add(erf(A.mul(x, 1.0 / math.sqrt(2.0))), 1.0), 0.5)
            pdf = A.mul(P.exp(A.mul(A.mul(x, x), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
            d = A.add(cdf, A.mul(x, pdf))
        return (A.mul(g, d),)

    @_reg(F.SiluBackward0)
    def _silu(self, g):
        x = _inp(self, 0, self.saved)
        s = P.sigmoid(x)
        return (A.mul(g, A.mul(s, A.add(A.mul(x, A.rsub(s, 1.0)), 1.0))),)

    def _scale(g, reduction, n):
        if reduction == "none":
            return g
        return A.div(g, n) if reduction == "mean" else g

    def _dloss(self, d, dd):
        name = type(self).__name__
        if name == "MseLossBackward0":
            return A.mul(d, 2.0)
        if name == "L1LossBackward0":
            return P.sign(d)
        if name == "SmoothL1LossBackward0":
            beta = self.param
            if beta == 0:
                return P.sign(d)
            return P.clamp(A.div(d, beta), -1.0, 1.0)
        return P.clamp(d, -self.param, self.param)  # Huber

    @_reg(L._PointwiseLossBackward)
    def _ploss(self, g):
        xd, td = self.saved
        x, t = _inp(self, 0, xd), _inp(self, 1, td)
        d = A.sub(x, t)
        gd = A.mul(_dloss(self, d, xd - td), _scale(g, self.reduction, (xd - td).size))
        ex, et = self.next_edges
        gx = sum_to(gd, self.sx) if ex is not None else None
        gt = sum_to(A.neg(gd), self.st) if et is not None else None
        return gx, gt

    @_reg(L.BinaryCrossEntropyBackward0)
    def _bce(self, g):
        xd, td, w = self.saved
        x, t = _inp(self, 0, xd), _inp(self, 1, td)
        gs = _scale(g, self.reduction, xd.size)
        if w is not None:
            gs = A.mul(gs, _c(w))
        ex, et = self.next_edges
        gx = gt = None
        if ex is not None:
            den = A.mul(A.rsub(x, 1.0), x)
            den = P.where(_c((1.0 - xd) * xd < L._BCE_EPS), _c(np.asarray(L._BCE_EPS, xd.dtype)), den)
            gx = A.mul(A.div(A.sub(x, t), den), gs)
        if et is not None:
            with np.errstate(divide="ignore"):
                lo = P.clamp(P.log1p(A.neg(x)), min=-100.0)
                lx = P.clamp(P.log(x), min=-100.0)
            gt = A.mul(A.sub(lo, lx), gs)
        return gx, gt

    @_reg(L.BinaryCrossEntropyWithLogitsBackward0)
    def _bcel(self, g):
        xd, td, w, pw = self.saved
        x, t = _inp(self, 0, xd), _inp(self, 1, td)
        gs = _scale(g, self.reduction, xd.size)
        if w is not None:
            gs = A.mul(gs, _c(w))
        ex, et = self.next_edges
        gx = gt = None
        if ex is not None:
            if pw is None:
                d = A.sub(P.sigmoid(x), t)
            else:
                pwt = _c(pw)
                d = A.sub(A.rsub(t, 1.0), A.mul(A.add(A.mul(A.sub(pwt, 1.0), t), 1.0), P.sigmoid(A.neg(x))))
            gx = A.mul(d, gs)
        if et is not None:
            if pw is None:
                d = A.neg(x)
            else:
                spn = P.softplus(A.neg(x))
                d = A.sub(A.mul(A.sub(_c(pw), 1.0), spn), x)
            gt = A.mul(d, gs)
        return gx, gt

    @_reg(L.NllLossBackward0)
    def _nll(self, g):
        safe, wy = self.saved
        if self.reduction == "none":
            coef = A.mul(S.reshape(g, (-1,)), _c(wy))
        else:
            gg = A.div(g, self.denom) if self.reduction == "mean" else g
            coef = A.mul(_c(wy), gg)
        c = self.shape[self.axis]
        g2 = index_scatter(A.neg(coef), (safe.size, c), (np.arange(safe.size), safe), False)
        return (_from_rows_t(g2, self.shape, self.axis),)

    @_reg(L.CrossEntropyLossBackward0)
    def _ce(self, g):
        # Class-probability targets or label smoothing: the loss re-written in ops, differentiated.
        logp_rows, safe, valid, b, w = self.saved
        axis, shape, eps, red, denom = self.axis, self.shape, self.eps, self.reduction, self.denom
        c = shape[axis]
        edges = self.next_edges
        xd, tdata = self.x
        x = _inp(self, 0, xd)
        t = None
        if self.mode == "prob":
            t = _inp(self, 1, tdata.astype(xd.dtype, copy=False)) if len(edges) == 2 else _c(tdata, xd.dtype)

        def rows(v):
            v = S.movedim(v, axis, -1) if axis != len(shape) - 1 else v
            return S.reshape(v, (-1, c))

        def f(xx, tt=t):
            lp = R.log_softmax(rows(xx), 1)
            if self.mode == "prob":
                tt = rows(tt)
                q = tt if not eps else A.add(A.mul(tt, 1.0 - eps), eps / c)
                if w is not None:
                    q = A.mul(q, _c(w))
                loss = A.neg(R.sum(A.mul(q, lp), 1))
            else:
                pick = I.getitem(lp, (np.arange(safe.size), safe))
                loss = A.mul(A.neg(pick), _c(b))
                sm = lp if w is None else A.mul(lp, _c(w))
                smooth = A.mul(A.neg(R.sum(sm, 1)), _c(valid, b.dtype))
                loss = A.add(A.mul(loss, 1.0 - eps), A.mul(smooth, eps / c))
            if red == "mean":
                return A.div(R.sum(loss), float(denom))
            if red == "sum":
                return R.sum(loss)
            return S.reshape(loss, shape[:axis] + shape[axis + 1:])

        if self.mode == "prob" and len(edges) == 2:
            return decomposed_grads([x, t], f, g)
        return decomposed_grads([x], f, g)[:1] if len(edges) == 1 else decomposed_grads([x], f, g) + (None,)


def _from_rows_t(g2, shape, axis):
    moved = tuple(shape[:axis]) + tuple(shape[axis + 1:]) + (shape[axis],)
    g = S.reshape(g2, moved)
    return S.movedim(g, -1, axis) if axis != len(shape) - 1 else g


_register_nn()


def _register_distributions():
    from .distributions import utils as DU, normal as DN

    @_reg(DU.ErfBackward0)
    def _erf(self, g):
        x = _inp(self, 0, self.saved)
        return (A.mul(g, A.mul(P.exp(A.neg(A.mul(x, x))), 2.0 / math.sqrt(math.pi))),)

    @_reg(DU.ErfinvBackward0)
    def _erfinv(self, g):
        o = _outp(self, self.saved)
        return (A.mul(g, A.mul(P.exp(A.mul(o, o)), math.sqrt(math.pi) / 2.0)),)

    @_reg(DN.NormalLogProbBackward0)
    def _normal(self, g):
        vd, mud, sd = self.saved
        v, mu, sigma = _inp(self, 0, vd), _inp(self, 1, mud), _inp(self, 2, sd)
        z = A.div(A.sub(v, mu), sigma)
        gz = A.div(A.mul(g, z), sigma)
        ev, emu, es = self.next_edges
        return (sum_to(A.neg(gz), vd.shape) if ev is not None else None,
                sum_to(gz, mud.shape) if emu is not None else None,
                sum_to(A.div(A.mul(g, A.sub(A.mul(z, z), 1.0)), sigma), sd.shape) if es is not None else None)


_register_distributions()


# ---------------------------------------------------------------------------------------------
# CNN kernels. Pooling/padding backward passes are linear maps with constant coefficients: a
# pair (map, adjoint) of NumPy functions makes them differentiable to any order. Convolution and
# the normalisations are differentiated through their forward written in ops.
class LinearMapBackward(Node):
    """Backward of `linear_map(x, fwd, adj)`: the adjoint map; its own backward is `fwd` again."""

    __slots__ = ("fwd", "adj")

    def backward(self, g):
        return (self.adj(g),)

    def backward_t(self, g):
        return (linear_map(g, self.adj, self.fwd),)


def linear_map(x, fwd, adj):
    """fwd(x) for a linear NumPy map `fwd` whose adjoint is `adj`; recorded."""
    out = np.asarray(fwd(x._data))
    if x._rg and _gs.enabled:
        n = node1(LinearMapBackward, x)
        n.fwd, n.adj = fwd, adj
        return _wrap(out, n)
    return _wrap(out)


def _register_cnn():
    from .nn import _functional_cnn as C

    @_reg(C._DropoutBackward)
    def _dropout(self, g):
        return (A.mul(g, _c(self.saved)),)

    def _bound(self):
        return lambda gg: self.backward(gg)[0]

    @_reg(C.MaxPool2DWithIndicesBackward0)
    def _maxpool_bound(self, g):
        self_backward = _bound(self)
        arg = self.saved
        in_shape, N, Cc, kh, kw, sh, sw, ph, pw, dh, dw, H, W, Hp, Wp, Ho, Wo = self.meta
        out_shape = g._data.shape
        he, we = sh * (Ho - 1) + 1, sw * (Wo - 1) + 1

        def pick(gx):
            xp = np.zeros((N, Cc, Hp, Wp), gx.dtype)
            xp[:, :, ph:ph + H, pw:pw + W] = gx.reshape(N, Cc, H, W)
            out = np.zeros((N, Cc, Ho, Wo), gx.dtype)
            for i in range(kh):
                for j in range(kw):
                    sl = xp[:, :, i * dh:i * dh + he:sh, j * dw:j * dw + we:sw]
                    np.copyto(out, sl, where=(arg == i * kw + j))
            return out.reshape(out_shape)

        return (linear_map(g, self_backward, pick),)

    @_reg(C.AvgPool2DBackward0)
    def _avgpool(self, g):
        args = self.args

        def pool(gx):
            with _gm.no_grad():
                return C.avg_pool2d(_wrap(gx), *args)._data
        return (linear_map(g, _bound(self), pool),)

    @_reg(C.AdaptiveAvgPool2DBackward0)
    def _adaptive(self, g):
        size = self.args

        def pool(gx):
            with _gm.no_grad():
                return C.adaptive_avg_pool2d(_wrap(gx), size)._data
        return (linear_map(g, _bound(self), pool),)

    @_reg(C._ModePadBackward)
    def _modepad(self, g):
        Ph, Pw = self.saved

        def pad(gx):
            t = gx @ Pw.T
            return t if Ph is None else np.matmul(Ph, t)
        return (linear_map(g, _bound(self), pad),)

    @_reg(C.ConvolutionBackward0)
    def _conv(self, g):
        (N, Cc, H, W, O, G, Ho, Wo, kh, kw, sh, sw, dh, dw, pt, pl, Hp, Wp, squeeze, wshape, nchw) = self.meta
        xd, wd, bd, out_shape = self.args
        x, w = _inp(self, 0, xd), _inp(self, 1, wd)
        b = None if bd is None else _inp(self, 2, bd)
        Cg, Og = Cc // G, O // G
        he, we = sh * (Ho - 1) + 1, sw * (Wo - 1) + 1

        def conv(xx, ww, bb=None):
            x4 = S.reshape(xx, (N, Cc, H, W))
            w4 = S.reshape(ww, (O, Cg, kh, kw))
            xp = index_scatter(x4, (N, Cc, Hp, Wp), (slice(None), slice(None), slice(pt, pt + H),
                                                     slice(pl, pl + W)), False)
            outs = []
            for gi in range(G):
                acc = None
                for i in range(kh):
                    for j in range(kw):
                        sl = I.getitem(xp, (slice(None), slice(gi * Cg, (gi + 1) * Cg),
                                            slice(i * dh, i * dh + he, sh), slice(j * dw, j * dw + we, sw)))
                        wij = I.getitem(w4, (slice(gi * Og, (gi + 1) * Og), slice(None), i, j))  # (Og, Cg)
                        term = A.matmul(S.permute(sl, (0, 2, 3, 1)), S.t(wij))  # (N, Ho, Wo, Og)
                        acc = term if acc is None else A.add(acc, term)
                outs.append(acc)
            y = S.permute(outs[0] if G == 1 else S.cat(outs, 3), (0, 3, 1, 2))
            if bb is not None:
                y = A.add(y, S.reshape(bb, (1, O, 1, 1)))
            return S.reshape(y, out_shape)

        grads = decomposed_grads([x, w] + ([b] if b is not None else []), conv, g)
        return tuple(grads) + ((None,) if b is None else ())

    @_reg(C.NativeLayerNormBackward0)
    def _layernorm(self, g):
        xhat, rstd, wf = self.saved
        shape, D, ns = self.meta
        xd, eps = self.args
        ex, ew, eb = self.next_edges
        ins = [_inp(self, 0, xd)]
        if wf is not None:
            ins.append(_inp(self, 1, wf.reshape(ns)))
        has_b = eb is not None

        def ln(xx, ww=None, bb=None):
            x2 = S.reshape(xx, (-1, D))
            mu = R.mean(x2, 1, True)
            d = A.sub(x2, mu)
            var = R.mean(A.mul(d, d), 1, True)
            y = A.mul(d, P.rsqrt(A.add(var, eps)))
            if ww is not None:
                y = A.mul(y, S.reshape(ww, (D,)))
            if bb is not None:
                y = A.add(y, S.reshape(bb, (D,)))
            return S.reshape(y, shape)

        if has_b:  # the bias gradient is the summed upstream gradient; it needs no decomposition
            gb = S.reshape(R.sum(S.reshape(g, (-1, D)), 0), ns)
        grads = decomposed_grads(ins, ln, g)
        gx = grads[0]
        gw = grads[1] if wf is not None else None
        return gx, gw, (gb if has_b else None)

    @_reg(C.NativeBatchNormBackward0)
    def _batchnorm(self, g):
        x3d, mean, invstd, wd = self.saved
        shape, training = self.meta
        eps, _ = self.args
        ex, ew, eb = self.next_edges
        Nn, Cc, L = x3d.shape
        ins = [_inp(self, 0, x3d.reshape(shape))]
        if wd is not None:
            ins.append(_inp(self, 1, wd))

        def bn(xx, ww=None):
            x3 = S.reshape(xx, (Nn, Cc, L))
            if training:
                mu = R.mean(x3, (0, 2), True)
                d = A.sub(x3, mu)
                var = R.mean(A.mul(d, d), (0, 2), True)
                y = A.mul(d, P.rsqrt(A.add(var, eps)))
            else:
                y = A.mul(A.sub(x3, _c(mean.reshape(1, Cc, 1))), _c(invstd.reshape(1, Cc, 1)))
            if ww is not None:
                y = A.mul(y, S.reshape(ww, (1, Cc, 1)))
            return S.reshape(y, shape)

        gb = R.sum(S.reshape(g, (Nn, Cc, L)), (0, 2)) if eb is not None else None
        grads = decomposed_grads(ins, bn, g)
        return grads[0], (grads[1] if wd is not None else None), gb


_register_cnn()

# RNN cells, prod, tril/triu, topk/sort, scatter, embedding, Categorical: in their own file
from . import _double_extra  # noqa: E402,F401
