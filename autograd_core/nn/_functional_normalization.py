"""`batch_norm`, `layer_norm`: one fused node each with a hand-derived backward.
"""
import numpy as np

from ..function import Node
from ..tensor import _wrap
from ._functional_common import _check_float, _data, _edge, _needs_grad, _node, _same_dtype, _vcs

__all__ = ["batch_norm", "layer_norm"]

# ---------------------------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------------------------
class NativeBatchNormBackward0(Node):
    __slots__ = ("meta", "args")  # args: (eps, bias array), for the double backward

    def backward(self, g):
        ex, ew, eb = self.next_edges
        x3, mean, invstd, w = self.saved
        shape, training = self.meta
        N, C, L = x3.shape
        g3 = g.reshape(N, C, L)
        sum_g = g3.sum(axis=(0, 2))
        # sum(g * xhat) per channel, without materialising xhat
        sum_gx = np.einsum("ncl,ncl->c", g3, x3)
        sum_gxhat = (sum_gx - mean * sum_g) * invstd
        gx = gw = gb = None
        if eb is not None:
            gb = sum_g
        if ew is not None:
            gw = sum_gxhat
        if ex is not None:
            scale = invstd if w is None else w * invstd
            if training:
                M = N * L
                # dx = scale * (g - mean(g) - xhat * mean(g * xhat))
                k1 = (invstd * sum_gxhat / M)[:, None]
                gx = x3 - mean[:, None]
                gx *= k1
                np.subtract(g3, gx, out=gx)
                gx -= (sum_g / M)[:, None]
                gx *= scale[:, None]
            else:
                gx = g3 * scale[:, None]
            gx = gx.reshape(shape)
        return gx, gw, gb


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Batch normalisation over channel dim 1 of (N, C), (N, C, L) or (N, C, H, W) [...] input.

    training: normalise with the batch statistics (biased variance) and, when running stats are
    given, update them in place: r = (1 - momentum) r + momentum * stat, the variance unbiased.
    eval: normalise with the running statistics.
    """
    x = input._data
    _check_float(x)
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2D input (got {x.ndim}D input)")
    shape = x.shape
    N, C = shape[0], shape[1]
    L = 1
    for s in shape[2:]:
        L *= s
    x3 = x.reshape(N, C, L)
    w = _data(weight)
    b = _data(bias)
    for nm, a in (("weight", w), ("bias", b)):
        if a is not None and a.size != C:
            raise RuntimeError(f"running_mean should contain {C} elements not {a.size}" if nm == "running_mean"
                               else f"{nm} should contain {C} elements not {a.size}")
    rm, rv = _data(running_mean), _data(running_var)
    for nm, a in (("running_mean", rm), ("running_var", rv)):
        if a is not None and a.size != C:
            raise RuntimeError(f"{nm} should contain {C} elements not {a.size}")
    if training:
        M = N * L
        if M <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"torch.Size({list(shape)})")
        mean = x3.sum(axis=(0, 2)) / M
        d = x3 - mean[:, None]
        var = np.einsum("ncl,ncl->c", d, d) / M
        invstd = 1.0 / np.sqrt(var + eps)
        scale = invstd if w is None else w * invstd
        d *= scale[:, None]
        if b is not None:
            d += b[:, None]
        y = d
        if rm is not None or rv is not None:
            m = float(momentum) if momentum is not None else 0.0
            if rm is not None:
                rm *= 1.0 - m
                rm += (m * mean).astype(rm.dtype, copy=False)
                running_mean._vc[0] += 1
            if rv is not None:
                rv *= 1.0 - m
                rv += (m * var * (M / (M - 1))).astype(rv.dtype, copy=False)
                running_var._vc[0] += 1
    else:
        if rm is None or rv is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        mean = rm.astype(x.dtype, copy=False)
        invstd = (1.0 / np.sqrt(rv + eps)).astype(x.dtype, copy=False)
        scale = invstd if w is None else w * invstd
        shift = -mean * scale
        if b is not None:
            shift = shift + b
        y = x3 * scale[:, None]
        y += shift[:, None]
    y = y.reshape(shape)
    if _needs_grad(input, weight, bias):
        n = _node(NativeBatchNormBackward0, (input._edge(), _edge(weight), _edge(bias)),
                  (x3, mean.copy() if not training else mean, invstd, w), _vcs(input, weight))
        n.meta = (shape, bool(training))
        n.args = (eps, _data(bias))
        return _wrap(y, n)
    return _wrap(y)


class NativeLayerNormBackward0(Node):
    __slots__ = ("meta", "args")  # args: (x, eps), for the double backward

    def backward(self, g):
        ex, ew, eb = self.next_edges
        xhat, rstd, w = self.saved
        shape, D, ns = self.meta
        g2 = g.reshape(-1, D)
        gx = gw = gb = None
        if eb is not None:
            gb = g2.sum(axis=0).reshape(ns)
        if ew is not None:
            gw = np.einsum("md,md->d", g2, xhat).reshape(ns)
        if ex is not None:
            gxh = g2 * w if w is not None else g2.copy()
            a = gxh.mean(axis=1, keepdims=True)
            c = np.einsum("md,md->m", gxh, xhat)[:, None] / D
            gxh -= a
            gxh -= xhat * c
            gxh *= rstd
            gx = gxh.reshape(shape)
        return gx, gw, gb


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalisation over the trailing `normalized_shape` dims (biased variance)."""
    x = input._data
    _check_float(x)
    if isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (int(normalized_shape),)
    ns = tuple(int(s) for s in normalized_shape)
    if x.shape[x.ndim - len(ns):] != ns or len(ns) > x.ndim:
        raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape [*, "
                           f"{', '.join(str(s) for s in ns)}], but got input of size{list(x.shape)}")
    D = 1
    for s in ns:
        D *= s
    w, b = _data(weight), _data(bias)
    _same_dtype(x, w)
    _same_dtype(x, b)
    shape = x.shape
    x2 = x.reshape(-1, D)
    mean = x2.mean(axis=1, keepdims=True)
    xhat = x2 - mean
    var = np.einsum("md,md->m", xhat, xhat) / D
    rstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype, copy=False)[:, None]
    xhat *= rstd
    wf = None if w is None else w.reshape(D)
    bf = None if b is None else b.reshape(D)
    if wf is not None:
        y = xhat * wf
        if bf is not None:
            y += bf
    elif bf is not None:
        y = xhat + bf
    else:
        y = xhat.copy()
    y = y.reshape(shape)
    if _needs_grad(input, weight, bias):
        n = _node(NativeLayerNormBackward0, (input._edge(), _edge(weight), _edge(bias)), (xhat, rstd, wf),
                  _vcs(weight))
        n.meta = (shape, D, ns)
        n.args = (x, eps)
        return _wrap(y, n)
    return _wrap(y)
