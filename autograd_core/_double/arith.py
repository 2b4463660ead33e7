"""Double backward of the arithmetic ops (ops/arith.py): + - * / ** and the matrix products."""
import math

import numpy as np

from ..ops import arith as A, pointwise as P, shape as S
from ._base import _c, _inp, _outp, _reg, _zero, sum_to


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

