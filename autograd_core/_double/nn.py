"""Double backward of nn.functional's fused nodes (linear, GELU, SiLU, the losses) and of the
distributions' special functions (erf, erfinv, Normal.log_prob)."""
import math

import numpy as np

from ..ops import arith as A, indexing as I, pointwise as P, reduction as R, shape as S
from ._base import _c, _inp, _outp, _reg, decomposed_grads, index_scatter, sum_to


def _register_nn():
    from ..nn import functional as F, _functional_loss as L

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
            from ..distributions.utils import erf
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

    def _bce_inputs(self, g, xd, td, w):
        """The input, the target and the upstream gradient scaled by the reduction and the weight."""
        gs = _scale(g, self.reduction, xd.size)
        if w is not None:
            gs = A.mul(gs, _c(w))
        return _inp(self, 0, xd), _inp(self, 1, td), gs

    @_reg(L.BinaryCrossEntropyBackward0)
    def _bce(self, g):
        xd, td, w = self.saved
        x, t, gs = _bce_inputs(self, g, xd, td, w)
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
        x, t, gs = _bce_inputs(self, g, xd, td, w)
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
    from ..distributions import utils as DU, normal as DN

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
