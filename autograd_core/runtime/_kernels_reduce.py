"""Reduction kernels: sum / mean / amax / amin / prod, softmax, log-softmax, logsumexp, var / std, argmax / argmin.
"""
import math
from functools import partial

import numpy as np

from ._ctx import _out_dtype

# ---------------------------------------------------------------------------------------------
# reductions
def _axes(c, ndim):
    axes = c.attr("axes", "ints")
    axes = tuple(sorted({c.axis(a, ndim) for a in axes})) if axes else tuple(range(ndim))
    return axes, c.attr("keepdim", "bool", False)


def _red_shape(shape, axes, keep):
    return tuple((1 if i in axes else s) for i, s in enumerate(shape) if keep or i not in axes)


def _reduce_builder(fn):
    def build(c):
        c.n_in(1)
        x = c.need(0)
        axes, keep = _axes(c, x.ndim)
        o = c.out(0, _red_shape(x.shape, axes, keep), _out_dtype(c, x.dtype))
        if x.ndim == 0:
            return [partial(np.copyto, o, x, casting="unsafe")]
        return [partial(fn, x, axis=axes, keepdims=keep, out=o)]
    return build


def _softmax_common(c, log):
    c.n_in(1)
    x = c.need(0)
    ax = c.axis(c.attr("axis", "int"), x.ndim)
    if x.ndim == 0:
        o = c.out(0, (), x.dtype)
        return [partial(np.copyto, o, 0.0 if log else 1.0)]
    o = c.out(0, x.shape, x.dtype)
    rs = x.shape[:ax] + (1,) + x.shape[ax + 1:]
    m = c.tmp(rs, x.dtype)
    s = c.tmp(rs, x.dtype)
    th = [partial(np.max, x, axis=ax, keepdims=True, out=m), partial(np.subtract, x, m, o)]
    if log:
        e = c.tmp(x.shape, x.dtype)
        th += [partial(np.exp, o, e), partial(np.sum, e, axis=ax, keepdims=True, out=s),
               partial(np.log, s, s), partial(np.subtract, o, s, o)]
    else:
        th += [partial(np.exp, o, o), partial(np.sum, o, axis=ax, keepdims=True, out=s),
               partial(np.divide, o, s, o)]
    return th


def build_softmax(c):
    return _softmax_common(c, False)


def build_log_softmax(c):
    return _softmax_common(c, True)


def build_logsumexp(c):
    c.n_in(1)
    x = c.need(0)
    axes, keep = _axes(c, x.ndim)
    o = c.out(0, _red_shape(x.shape, axes, keep), x.dtype)
    ks = _red_shape(x.shape, axes, True)
    m = c.tmp(ks, x.dtype)
    e = c.tmp(x.shape, x.dtype)
    s = c.tmp(ks, x.dtype)
    ov = o.reshape(ks)
    # inf maxima (all -inf rows) -> 0 shift
    return [partial(np.max, x, axis=axes, keepdims=True, out=m), partial(np.nan_to_num, m, copy=False, nan=0.0,
                                                                        posinf=0.0, neginf=0.0),
            partial(np.subtract, x, m, e), partial(np.exp, e, e),
            partial(np.sum, e, axis=axes, keepdims=True, out=s), partial(np.log, s, s),
            partial(np.add, s, m, ov)]


def build_var(c):
    c.n_in(1)
    x = c.need(0)
    axes, keep = _axes(c, x.ndim)
    corr = c.attr("correction", "float")
    std = c.attr("std", "bool", False)
    n = math.prod(x.shape[a] for a in axes) if x.ndim else 1
    o = c.out(0, _red_shape(x.shape, axes, keep), x.dtype)
    ks = _red_shape(x.shape, axes, True)
    m = c.tmp(ks, x.dtype)
    d = c.tmp(x.shape, x.dtype)
    th = [partial(np.mean, x, axis=axes, keepdims=True, out=m), partial(np.subtract, x, m, d),
          partial(np.multiply, d, d, d), partial(np.sum, d, axis=axes, keepdims=keep, out=o),
          partial(np.divide, o, x.dtype.type(max(n - corr, 0)), o)]
    if std:
        th.append(partial(np.sqrt, o, o))
    return th


def _arg_builder(fn):
    def build(c):
        c.n_in(1)
        x = c.need(0)
        ax = c.axis(c.attr("axis", "int"), x.ndim)
        keep = c.attr("keepdim", "bool", False)
        if x.ndim == 0:
            c.fail("arg-reduction of a 0-d value")
        o = c.out(0, _red_shape(x.shape, (ax,), keep), np.int64)
        return [partial(fn, x, axis=ax, keepdims=keep, out=o)]
    return build


KERNELS = {
    "sum": _reduce_builder(np.sum), "mean": _reduce_builder(np.mean), "amax": _reduce_builder(np.max),
    "amin": _reduce_builder(np.min), "prod": _reduce_builder(np.prod), "softmax": build_softmax,
    "log_softmax": build_log_softmax, "logsumexp": build_logsumexp, "var": build_var,
    "argmax": _arg_builder(np.argmax), "argmin": _arg_builder(np.argmin),
}
