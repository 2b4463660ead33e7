"""Double backward of the element-wise ops (ops/pointwise.py): unary functions, activations, clamp,
minimum/maximum, where, atan2, lerp."""
import math

import numpy as np

from ..ops import arith as A, pointwise as P
from ._base import _c, _inp, _outp, _reg, _zero, sum_to


# The generated unary nodes save (x, out).
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
    out = []
    for e, shape, mask in zip(self.next_edges, self.shapes, self.masks()):
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

