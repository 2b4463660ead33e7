"""Double backward of the CNN kernels (nn/_functional_cnn.py): dropout, pooling, padding,
convolution, layer and batch norm."""
import numpy as np

from .. import grad_mode as _gm
from .._node import Node
from ..grad_mode import _state as _gs
from ..ops import arith as A, indexing as I, pointwise as P, reduction as R, shape as S
from ..ops._base import node1
from ..tensor import _wrap
from ._base import _c, _inp, _reg, decomposed_grads, index_scatter


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
    from ..nn import _functional_cnn as C

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
