"""Element-wise kernels: unary / binary ufuncs, casts, activations, clamp, where.
"""
from functools import partial

import numpy as np

from ._ctx import _ew, _lead, _out_dtype

# ---------------------------------------------------------------------------------------------
# element-wise
_UNARY = {
    "neg": np.negative, "exp": np.exp, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "expm1": np.expm1, "sqrt": np.sqrt, "abs": np.abs, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "reciprocal": np.reciprocal, "square": np.square, "sign": np.sign, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "round": np.rint, "logical_not": np.logical_not, "isnan": np.isnan, "isinf": np.isinf,
    "isfinite": np.isfinite,
}
_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "atan2": np.arctan2, "eq": np.equal, "ne": np.not_equal,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}


def _unary_builder(name):
    uf = _UNARY[name]

    def build(c):
        c.n_in(1)
        x = c.need(0)
        dt = _out_dtype(c, x.dtype)
        o = c.out(0, x.shape, dt, like=x)
        o, x = _ew(o, x)
        return [partial(uf, x, o)]
    build.__name__ = "build_" + name
    return build


def _binary_builder(name):
    uf = _BINARY[name]

    def build(c):
        c.n_in(2)
        a, b = c.need(0), c.need(1)
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            c.fail(f"shapes {a.shape} and {b.shape} do not broadcast")
        dt = _out_dtype(c, np.result_type(a, b))
        o = c.out(0, shape, dt, like=a if a.shape == shape else b)
        o, a, b = _ew(o, _lead(a, o.ndim), _lead(b, o.ndim))
        if name == "pow" and c.const[1] and b.ndim == 0 and o.dtype.kind == "f":
            p = float(b)
            if p == 2.0:
                return [partial(np.square, a, o)]
            if p == 1.0:
                return [partial(np.copyto, o, a)]
            if p == 0.5:
                return [partial(np.sqrt, a, o)]
        if name in ("maximum", "minimum"):  # NumPy 2.4 deprecates their positional `out`
            return [partial(uf, a, b, out=o)]
        return [partial(uf, a, b, o)]
    build.__name__ = "build_" + name
    return build


def build_identity(c):
    c.n_in(1)
    c.alias(0, c.need(0))
    return []


def build_cast(c):
    c.n_in(1)
    x = c.need(0)
    dt = c.attr("dtype", "str")
    if dt not in _DTYPE_NAMES:
        c.fail(f"unknown dtype {dt!r}")
    o = c.out(0, x.shape, np.dtype(dt))
    return [partial(np.copyto, o, x, casting="unsafe")]


_DTYPE_NAMES = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")


def _sigmoid_thunks(x, o):
    """o = sigmoid(x) = 0.5 * tanh(x / 2) + 0.5: no overflow, no warnings, four ufuncs."""
    return [partial(np.multiply, x, 0.5, o), partial(np.tanh, o, o),
            partial(np.multiply, o, 0.5, o), partial(np.add, o, 0.5, o)]


def build_sigmoid(c):
    c.n_in(1)
    x = c.need(0)
    o = c.out(0, x.shape, x.dtype, like=x)
    o, x = _ew(o, x)
    return _sigmoid_thunks(x, o)


def build_relu(c):
    c.n_in(1)
    x = c.need(0)
    o = c.out(0, x.shape, x.dtype, like=x)
    o, x = _ew(o, x)
    return [partial(np.maximum, x, x.dtype.type(0), out=o)]


def _leaky_thunks(c, x, o, slope, tmp):
    s = x.dtype.type(slope)
    if 0 <= slope <= 1:  # max(x, s x) == where(x > 0, x, s x)
        # fmax with a positional out is the fastest spelling; NaN in -> NaN out, as both operands are NaN
        return [partial(np.multiply, x, s, tmp), partial(np.fmax, x, tmp, o)]
    # slope > 1 or < 0: select explicitly
    mask = c.tmp(x.shape, bool)
    return [partial(np.multiply, x, s, tmp), partial(np.greater, x, 0, mask),
            partial(np.copyto, tmp, x, where=mask), partial(np.copyto, o, tmp)]


def build_leaky_relu(c):
    c.n_in(1)
    x = c.need(0)
    slope = c.attr("negative_slope", "float")
    o = c.out(0, x.shape, x.dtype, like=x)
    o, x = _ew(o, x)
    return _leaky_thunks(c, x, o, slope, c.tmp(x.shape, x.dtype))


def build_elu(c):
    c.n_in(1)
    x = c.need(0)
    alpha = c.attr("alpha", "float")
    o = c.out(0, x.shape, x.dtype, like=x)
    o, x = _ew(o, x)
    t = c.tmp(x.shape, x.dtype)
    # x > 0: x; else alpha * expm1(x)   ==  max(x, 0) + alpha * expm1(min(x, 0))
    return [partial(np.minimum, x, 0, out=t), partial(np.expm1, t, t), partial(np.multiply, t, alpha, t),
            partial(np.maximum, x, 0, out=o), partial(np.add, o, t, o)]


def build_softplus(c):
    c.n_in(1)
    x = c.need(0)
    beta = c.attr("beta", "float")
    thr = c.attr("threshold", "float")
    o = c.out(0, x.shape, x.dtype, like=x)
    o, x = _ew(o, x)
    z = c.tmp(x.shape, x.dtype)
    t = c.tmp(x.shape, x.dtype)
    mask = c.tmp(x.shape, bool)
    # (max(z, 0) + log1p(exp(-|z|))) / beta, and x where z > threshold
    return [partial(np.multiply, x, beta, z), partial(np.abs, z, t), partial(np.negative, t, t),
            partial(np.exp, t, t), partial(np.log1p, t, t), partial(np.maximum, z, 0, out=o),
            partial(np.add, o, t, o), partial(np.divide, o, beta, o), partial(np.greater, z, thr, mask),
            partial(np.copyto, o, x, where=mask)]


def build_clamp(c):
    c.n_in(1)
    x = c.need(0)
    lo = c.attr("min", "float?", None)
    hi = c.attr("max", "float?", None)
    if lo is None and hi is None:
        c.fail("clamp needs min or max")
    dt = _out_dtype(c, x.dtype)
    o = c.out(0, x.shape, dt, like=x)
    o, x = _ew(o, x)
    th = []
    src = x
    if lo is not None:
        th.append(partial(np.maximum, src, dt.type(lo), out=o))
        src = o
    if hi is not None:
        th.append(partial(np.minimum, src, dt.type(hi), out=o))
    return th


def build_where(c):
    c.n_in(3)
    cond, a, b = c.need(0), c.need(1), c.need(2)
    if cond.dtype != np.bool_:
        c.fail("condition must be bool")
    try:
        shape = np.broadcast_shapes(cond.shape, a.shape, b.shape)
    except ValueError:
        c.fail("operands do not broadcast")
    o = c.out(0, shape, _out_dtype(c, np.result_type(a, b)))
    return [partial(np.copyto, o, b, casting="unsafe"), partial(np.copyto, o, a, casting="unsafe", where=cond)]


KERNELS = {name: _unary_builder(name) for name in _UNARY}
KERNELS.update({name: _binary_builder(name) for name in _BINARY})
KERNELS.update({
    "identity": build_identity, "cast": build_cast, "sigmoid": build_sigmoid, "relu": build_relu,
    "leaky_relu": build_leaky_relu, "elu": build_elu, "softplus": build_softplus, "clamp": build_clamp,
    "where": build_where,
})
