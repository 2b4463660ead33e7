"""Double backward of the reductions (ops/reduction.py): sum, mean, extrema, norms, var/std,
cumsum, logsumexp, softmax."""
import numpy as np

from ..ops import arith as A, pointwise as P, reduction as R, shape as S
from ._base import _along_key, _c, _expand_back, _inp, _outp, _reg, _unsq, _zero, index_scatter


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

