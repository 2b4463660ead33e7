"""NumPy kernels of the graph ops, built once per graph into preallocated-buffer thunks.

A builder `build_<op>(c)` receives a `Ctx` (the node's input arrays, which are fixed objects:
constants, or buffers that the model refills in place on every call), validates the node's
attributes, allocates its output buffers (`c.out`) or declares an output a view of an input
(`c.alias`), and returns a list of zero-argument thunks that recompute the outputs in place
(`out=` everywhere). Views (reshape, transpose, slicing, expand, split) therefore cost nothing
at run time. Shapes are inferred here from the input arrays and checked against the shapes the
file declares; a mismatch, a bad attribute or an unknown op raises `FormatError`.
"""
import math
from functools import partial

import numpy as np

from ._format import FormatError

__all__ = ["BUILDERS"]

_as_strided = np.lib.stride_tricks.as_strided


class Ctx:
    """What a builder sees of one node."""

    __slots__ = ("node", "op", "ins", "const", "attrs", "_outs", "_declared", "_alloc", "_charge")

    def __init__(self, node, ins, const, declared, alloc, charge):
        self.node = node
        self.op = node["op"]
        self.ins = ins
        self.const = const
        self.attrs = node.get("attrs", {})
        self._outs = [None] * len(node["outputs"])
        self._declared = declared  # list of (shape, dtype) per output, from the file
        self._alloc = alloc    # (shape, dtype, fill, what) -> array, counted against the model's cap
        self._charge = charge  # (nbytes, what): count an allocation made otherwise (a weight copy)

    def fail(self, msg):
        raise FormatError(f"node {self.node.get('outputs')} ({self.op}): {msg}")

    # -- inputs ------------------------------------------------------------------------------
    def n_in(self, lo, hi=None):
        n = len(self.ins)
        if n < lo or n > (lo if hi is None else hi):
            self.fail(f"expects {lo}{'' if hi is None else '..' + str(hi)} inputs, got {n}")

    def x(self, i):
        if i >= len(self.ins):
            return None
        return self.ins[i]

    def need(self, i):
        a = self.x(i)
        if a is None:
            self.fail(f"input {i} is required")
        return a

    def need_const(self, i):
        a = self.need(i)
        if not self.const[i]:
            self.fail(f"input {i} must be a constant (a weight) in this runtime")
        return a

    # -- attributes --------------------------------------------------------------------------
    def attr(self, name, kind, default=KeyError):
        if name not in self.attrs:
            if default is KeyError:
                self.fail(f"missing attribute {name!r}")
            return default
        v = self.attrs[name]
        ok = {
            "int": lambda v: type(v) is int,
            "bool": lambda v: type(v) is bool,
            "float": lambda v: type(v) in (int, float) and type(v) is not bool,
            "float?": lambda v: v is None or (type(v) in (int, float) and type(v) is not bool),
            "ints": lambda v: isinstance(v, list) and all(type(i) is int for i in v) and len(v) <= 64,
            "str": lambda v: isinstance(v, str),
        }[kind](v)
        if not ok:
            self.fail(f"attribute {name!r} has a bad value {v!r} (expected {kind})")
        return v

    def axis(self, a, ndim):
        if not -max(ndim, 1) <= a < max(ndim, 1):
            self.fail(f"axis {a} out of range for rank {ndim}")
        return a % max(ndim, 1)

    # -- outputs -----------------------------------------------------------------------------
    def _check(self, i, shape, dtype):
        if i >= len(self._outs):
            self.fail(f"produces {i + 1}+ outputs but the file lists {len(self._outs)}")
        dshape, ddt = self._declared[i]
        if tuple(shape) != tuple(dshape) or np.dtype(dtype) != ddt:
            self.fail(f"output {i}: computed shape {tuple(shape)} {np.dtype(dtype)}, the file declares "
                      f"{tuple(dshape)} {ddt}")

    def out(self, i, shape, dtype, like=None):
        """Output buffer i. With `like` (an input of the same shape stored channels-last, as conv2d
        outputs are), the buffer gets the same memory layout so element-wise chains stay NHWC."""
        shape = tuple(int(s) for s in shape)
        self._check(i, shape, dtype)
        if like is not None and like.shape == shape and _nhwc(like) is not None and not like.flags.c_contiguous:
            n, ch, h, w = shape
            buf = self._alloc((n, h, w, ch), dtype, 0, "an output buffer").transpose(0, 3, 1, 2)
        else:
            buf = self._alloc(shape, dtype, 0, "an output buffer")
        self._outs[i] = buf
        return buf

    def alias(self, i, arr):
        self._check(i, arr.shape, arr.dtype)
        self._outs[i] = arr
        return arr

    def tmp(self, shape, dtype, fill=0):
        """A work buffer (padded input, im2col matrix, mask, ...), counted against the cap."""
        return self._alloc(tuple(int(s) for s in shape), dtype, fill, "a work buffer")

    def charge(self, nbytes, what):
        """Count an allocation that is not a fresh buffer (a re-laid-out copy of a weight)."""
        self._charge(nbytes, what)

    def copy_of(self, a, dtype=None):
        """A contiguous copy of `a` (of `dtype`), counted against the cap."""
        dt = a.dtype if dtype is None else np.dtype(dtype)
        self._charge(a.size * dt.itemsize, "a weight copy")
        return np.array(a, dtype=dt, order="C", copy=True)

    def outputs(self):
        if any(o is None for o in self._outs):
            self.fail("the kernel did not produce every declared output")
        return self._outs


def _nhwc(x):
    """The channels-last (N, H, W, C) view of a 4-D NCHW-shaped array if that view is contiguous."""
    if x.ndim != 4:
        return None
    v = x.transpose(0, 2, 3, 1)
    return v if v.flags.c_contiguous else None


def _ew(o, *ins):
    """Element-wise operands in memory order: when the output is a channels-last buffer seen as
    NCHW, every operand is viewed as NHWC (broadcast operands too) so the ufunc loops contiguously."""
    if o.ndim != 4 or o.flags.c_contiguous or _nhwc(o) is None:
        return (o,) + ins
    out = [o.transpose(0, 2, 3, 1)]
    for a in ins:
        a = np.asarray(a)
        if a.ndim > 4:
            return (o,) + ins
        a4 = a.reshape((1,) * (4 - a.ndim) + a.shape)
        out.append(a4.transpose(0, 2, 3, 1))
    return tuple(out)


def _lead(a, ndim):
    """`a` with leading size-1 axes up to `ndim` (a same-shape ufunc call skips NumPy's slower
    broadcasting path, ~0.5 µs per call on small arrays)."""
    if isinstance(a, np.ndarray) and a.ndim < ndim:
        return a.reshape((1,) * (ndim - a.ndim) + a.shape)
    return a


def _strict_view(x, shape):
    """x reshaped without a copy (raises instead of copying)."""
    v = x.view()
    v.shape = shape
    return v


def _gemm(a, b, o):
    """A thunk computing o = a @ b: np.dot (less call overhead) when it applies, else np.matmul.
    np.dot copies an operand that BLAS cannot read in place (a broadcast or strided view) on every
    call; np.matmul loops over such views without a copy, so those go to np.matmul."""
    if (a.ndim <= 2 and b.ndim == 2 and o.flags.c_contiguous and o.dtype == np.result_type(a, b)
            and a.dtype == b.dtype and _blas_ready(a) and _blas_ready(b)):
        return partial(np.dot, a, b, o)
    return partial(np.matmul, a, b, o)


def _blas_ready(a):
    return a.flags.c_contiguous or a.flags.f_contiguous


def _view_or_copy(c, i, x, shape):
    """Output i = x reshaped: a view when the layout allows, else a buffer refilled by a copy."""
    v = x.view()
    try:
        v.shape = shape
        c.alias(i, v)
        return []
    except (AttributeError, ValueError):
        pass
    o = c.out(i, shape, x.dtype)
    return [partial(np.copyto, o.reshape(x.shape), x)]


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
_FLOAT_UNARY = {"exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "asin", "acos",
                "atan", "sinh", "cosh", "tanh", "reciprocal"}


def _out_dtype(c, default):
    return c._declared[0][1] if c._declared else np.dtype(default)


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


# ---------------------------------------------------------------------------------------------
# linear algebra and the fused NN kernels
def build_matmul(c):
    c.n_in(2)
    a, b = c.need(0), c.need(1)
    if a.ndim == 0 or b.ndim == 0:
        c.fail("matmul needs 1-D or higher operands")
    try:
        shape = _matmul_shape(c, a.shape, b.shape)
    except ValueError:
        c.fail(f"shapes {a.shape} and {b.shape} cannot be multiplied")
    o = c.out(0, shape, _out_dtype(c, np.result_type(a, b)))
    if c.const[1] and b.ndim == 2 and not b.flags.c_contiguous:
        b = c.copy_of(b)
    return [_gemm(a, b, o)]


def _matmul_shape(c, sa, sb):
    a1, b1 = len(sa) == 1, len(sb) == 1
    sa2 = (1,) + tuple(sa) if a1 else tuple(sa)
    sb2 = tuple(sb) + (1,) if b1 else tuple(sb)
    if sa2[-1] != sb2[-2]:
        raise ValueError
    batch = np.broadcast_shapes(sa2[:-2], sb2[:-2])
    shape = batch + (sa2[-2], sb2[-1])
    if a1:
        shape = shape[:-2] + shape[-1:]
    if b1:
        shape = shape[:-1]
    return shape


def build_linear(c):
    """y = x W^T + b, W (out, in) a constant: stored transposed and contiguous once."""
    c.n_in(2, 3)
    x = c.need(0)
    w = c.need_const(1)
    b = c.x(2)
    if w.ndim != 2 or x.ndim < 1 or x.shape[-1] != w.shape[1]:
        c.fail(f"input {x.shape} does not match weight {w.shape}")
    wt = c.copy_of(w.T)
    o = c.out(0, x.shape[:-1] + (w.shape[0],), x.dtype)
    th = [_gemm(x, wt, o)]
    if b is not None:
        if b.shape != (w.shape[0],):
            c.fail(f"bias shape {b.shape} does not match weight {w.shape}")
        th.append(partial(np.add, o, _lead(b, o.ndim), o))
    return th


def _pair(c, name, default=None):
    v = c.attr(name, "ints", default)
    if v is None or len(v) != 2:
        c.fail(f"attribute {name!r} must be two ints")
    return v


def _pad_input(c, x, top, left, bottom, right, value):
    """A fixed padded copy of NCHW `x`: returns (array to read, thunks refilling it)."""
    if min(top, left, bottom, right) < 0:
        c.fail("negative padding")
    if not (top or left or bottom or right):
        return x, []
    n, ch, h, w = x.shape
    xp = c.tmp((n, ch, h + top + bottom, w + left + right), x.dtype, value)
    return xp, [partial(np.copyto, xp[:, :, top:top + h, left:left + w], x)]


def build_conv2d(c):
    """Convolution as im2col + one GEMM. groups == 1 (the common case) works channels-last: the
    output buffer is (N, OH, OW, OC) exposed as an NCHW-shaped view, element-wise consumers keep
    that layout, and the next conv gathers its windows in contiguous runs of kw * C values. The
    im2col buffer's last column is ones and the weight's last row the bias: the bias rides in the
    GEMM."""
    c.n_in(2, 3)
    x = c.need(0)
    w = c.need_const(1)
    b = c.x(2)
    if b is not None and not c.const[2]:
        c.fail("bias must be a constant")
    sh, sw = _pair(c, "stride")
    pads = c.attr("pads", "ints")
    if len(pads) != 4:
        c.fail("pads must be [top, left, bottom, right]")
    dh, dw = _pair(c, "dilation")
    g = c.attr("groups", "int")
    if x.ndim != 4 or w.ndim != 4:
        c.fail(f"expects a 4-D input and weight, got {x.shape} and {w.shape}")
    if min(sh, sw, dh, dw, g) < 1 or min(pads) < 0:
        c.fail("bad stride/padding/dilation/groups")
    n, ch, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    if ch != cg * g or oc % g:
        c.fail(f"input channels {ch} / weight {w.shape} / groups {g} do not match")
    if b is not None and b.shape != (oc,):
        c.fail(f"bias shape {b.shape} does not match {oc} output channels")
    top, left, bottom, right = pads
    hp, wp = h + top + bottom, wd + left + right
    oh = (hp - dh * (kh - 1) - 1) // sh + 1
    ow = (wp - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        c.fail("the kernel is larger than the (padded) input")
    dt = x.dtype
    if g == 1:
        return _conv2d_nhwc(c, x, w, b, (sh, sw), pads, (dh, dw), (oh, ow))
    # grouped: NCHW im2col, one batched GEMM over the groups
    xp, th = _pad_input(c, x, top, left, bottom, right, 0)
    L = oh * ow
    K = cg * kh * kw
    o = c.out(0, (n, oc, oh, ow), dt)
    ocg = oc // g
    kb = K + (1 if b is not None else 0)
    w2 = c.tmp((g, ocg, kb), dt)
    w2[:, :, :K] = w.reshape(g, ocg, K)
    if b is not None:
        w2[:, :, K] = b.reshape(g, ocg)
    col = c.tmp((n, g, kb, L), dt, 1)
    s0, s1, s2, s3 = xp.strides
    src = _as_strided(xp, (n, g, cg, kh, kw, oh, ow), (s0, s1 * cg, s1, s2 * dh, s3 * dw, s2 * sh, s3 * sw),
                      writeable=False)
    dst = _strict_view(col[:, :, :K, :], (n, g, cg, kh, kw, oh, ow))  # the bias row stays ones
    o4 = o.reshape(n, g, ocg, L)
    return th + [partial(np.copyto, dst, src), partial(np.matmul, w2, col, o4)]


def _conv2d_nhwc(c, x, w, b, stride, pads, dil, out_hw):
    n, ch, h, wd = x.shape
    oc, _, kh, kw = w.shape
    (sh, sw), (dh, dw), (oh, ow) = stride, dil, out_hw
    top, left, bottom, right = pads
    dt = x.dtype
    xv = _nhwc(x)
    th = []
    if top or left or bottom or right or xv is None:
        xp = c.tmp((n, h + top + bottom, wd + left + right, ch), dt)
        th.append(partial(np.copyto, xp[:, top:top + h, left:left + wd, :], x.transpose(0, 2, 3, 1)))
    else:
        xp = xv
    K = kh * kw * ch
    kb = K + (1 if b is not None else 0)
    M = n * oh * ow
    w2 = c.tmp((kb, oc), dt)
    w2[:K] = w.transpose(2, 3, 1, 0).reshape(K, oc)
    if b is not None:
        w2[K] = b
    ob = c.tmp((n, oh, ow, oc), dt)
    c.alias(0, ob.transpose(0, 3, 1, 2))
    o2 = ob.reshape(M, oc)
    if kh == kw == sh == sw == 1 and b is None:  # 1x1: the input is already the im2col matrix
        return th + [_gemm(xp.reshape(M, ch), w2, o2)]
    col = c.tmp((M, kb), dt, 1)
    s0, s1, s2, s3 = xp.strides
    src = _as_strided(xp, (n, oh, ow, kh, kw, ch), (s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3), writeable=False)
    dst = _strict_view(col[:, :K], (n, oh, ow, kh, kw, ch))
    return th + [partial(np.copyto, dst, src), _gemm(col, w2, o2)]


def _pool_geometry(c, x, k, s, p, d, ceil_mode):
    n, ch, h, w = x.shape
    out = []
    extra = []
    for size, kk, ss, pp, dd in ((h, k[0], s[0], p[0], d[0]), (w, k[1], s[1], p[1], d[1])):
        span = dd * (kk - 1) + 1
        if pp > kk // 2:
            c.fail("pad should be at most half of the kernel size")
        num = size + 2 * pp - span
        if num < 0:
            c.fail("the kernel is larger than the (padded) input")
        if ceil_mode:
            o = -(-num // ss) + 1
            if (o - 1) * ss >= size + pp:  # the last window must start inside the input or left pad
                o -= 1
        else:
            o = num // ss + 1
        out.append(o)
        extra.append(max(0, (o - 1) * ss + span - (size + 2 * pp)))
    return out, extra


def _pool_attrs(c):
    k = _pair(c, "kernel_size")
    s = _pair(c, "stride")
    p = _pair(c, "padding")
    if min(k) < 1 or min(s) < 1 or min(p) < 0:
        c.fail("bad kernel/stride/padding")
    return k, s, p, c.attr("ceil_mode", "bool", False)


def build_max_pool2d(c):
    c.n_in(1)
    x = c.need(0)
    if x.ndim != 4:
        c.fail(f"expects NCHW input, got {x.shape}")
    k, s, p, ceil_mode = _pool_attrs(c)
    d = _pair(c, "dilation", [1, 1])
    (oh, ow), extra = _pool_geometry(c, x, k, s, p, d, ceil_mode)
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp, th = _pad_input(c, x, p[0], p[1], p[0] + extra[0], p[1] + extra[1], fill)
    n, ch = x.shape[:2]
    o = c.out(0, (n, ch, oh, ow), x.dtype)
    s0, s1, s2, s3 = xp.strides
    if k[0] == s[0] and k[1] == s[1] and d == [1, 1] and xp.shape[2] == oh * k[0] and xp.shape[3] == ow * k[1] \
            and xp.flags.c_contiguous:
        v = xp.reshape(n, ch, oh, k[0], ow, k[1])
        return th + [partial(np.max, v, axis=(3, 5), out=o)]
    v = _as_strided(xp, (n, ch, oh, ow, k[0], k[1]), (s0, s1, s2 * s[0], s3 * s[1], s2 * d[0], s3 * d[1]),
                    writeable=False)
    return th + [partial(np.max, v, axis=(4, 5), out=o)]


def build_avg_pool2d(c):
    c.n_in(1)
    x = c.need(0)
    if x.ndim != 4:
        c.fail(f"expects NCHW input, got {x.shape}")
    k, s, p, ceil_mode = _pool_attrs(c)
    cip = c.attr("count_include_pad", "bool", True)
    div = c.attr("divisor_override", "float?", None)
    (oh, ow), extra = _pool_geometry(c, x, k, s, p, [1, 1], ceil_mode)
    xp, th = _pad_input(c, x, p[0], p[1], p[0] + extra[0], p[1] + extra[1], 0)
    n, ch, h, w = x.shape
    o = c.out(0, (n, ch, oh, ow), x.dtype)
    s0, s1, s2, s3 = xp.strides
    v = _as_strided(xp, (n, ch, oh, ow, k[0], k[1]), (s0, s1, s2 * s[0], s3 * s[1], s2, s3), writeable=False)
    th.append(partial(np.sum, v, axis=(4, 5), out=o))
    if div is not None:
        th.append(partial(np.divide, o, x.dtype.type(div), o))
        return th
    # torch's divisor: window clipped to the padded input (count_include_pad) or to the input;
    # separable, so (rows' counts) x (columns' counts)
    counts = []
    for size, kk, ss, pp, num in ((h, k[0], s[0], p[0], oh), (w, k[1], s[1], p[1], ow)):
        a0 = np.arange(num, dtype=np.int64) * ss - pp
        a1 = np.minimum(a0 + kk, size + pp)
        counts.append(a1 - a0 if cip else np.minimum(a1, size) - np.maximum(a0, 0))
    cnt = c.tmp((oh, ow), np.float64)
    np.multiply.outer(counts[0], counts[1], out=cnt, casting="unsafe")
    if np.all(cnt == cnt.flat[0]):
        th.append(partial(np.multiply, o, x.dtype.type(1.0 / cnt.flat[0]), o))
    else:
        th.append(partial(np.divide, o, c.copy_of(cnt, x.dtype), o))
    return th


def _window_means(c, size, out_size, dtype, transposed=False):
    """(out_size, size) matrix (or its transpose, contiguous) whose row i averages torch's adaptive
    window [floor(i size / out_size), ceil((i + 1) size / out_size)); vectorised, counted buffers."""
    i = np.arange(out_size, dtype=np.int64)
    a, b = (i * size) // out_size, -(-((i + 1) * size) // out_size)
    j = np.arange(size, dtype=np.int64)
    shape = (size, out_size) if transposed else (out_size, size)
    if transposed:
        a, b, inv, j = a[None, :], b[None, :], 1.0 / (b - a)[None, :], j[:, None]
    else:
        a, b, inv, j = a[:, None], b[:, None], 1.0 / (b - a)[:, None], j[None, :]
    inside, below = c.tmp(shape, bool), c.tmp(shape, bool)
    np.less_equal(a, j, out=inside)
    np.less(j, b, out=below)
    np.logical_and(inside, below, out=inside)
    m = c.tmp(shape, dtype)
    np.multiply(inside, inv, out=m, casting="unsafe")
    return m


def build_adaptive_avg_pool2d(c):
    c.n_in(1)
    x = c.need(0)
    if x.ndim != 4:
        c.fail(f"expects NCHW input, got {x.shape}")
    oh, ow = _pair(c, "output_size")
    if oh < 1 or ow < 1:
        c.fail(f"output_size {[oh, ow]} must be positive")
    n, ch, h, w = x.shape
    if h < 1 or w < 1:
        c.fail(f"expects a non-empty image, got {x.shape}")
    o = c.out(0, (n, ch, oh, ow), x.dtype)
    if h % oh == 0 and w % ow == 0:
        v = x.reshape(n, ch, oh, h // oh, ow, w // ow) if x.flags.c_contiguous else None
        if v is not None and np.shares_memory(v, x):
            return [partial(np.mean, v, axis=(3, 5), out=o)]
    # general: the window means are separable, o = Rows @ x @ Cols^T (two GEMMs, any output size)
    rows = _window_means(c, h, oh, x.dtype)
    cols_t = _window_means(c, w, ow, x.dtype, transposed=True)
    t = c.tmp((n, ch, h, ow), x.dtype)
    return [partial(np.matmul, x, cols_t, t), partial(np.matmul, rows, t, o)]


def build_batch_norm(c):
    """Inference batch norm over dim 1: y = x * scale + shift, folded once from the statistics."""
    c.n_in(3, 5)
    x = c.need(0)
    mean, var = c.need_const(1), c.need_const(2)
    w, b = c.x(3), c.x(4)
    for i in (3, 4):
        if c.x(i) is not None and not c.const[i]:
            c.fail("batch-norm weight and bias must be constants")
    eps = c.attr("eps", "float")
    if x.ndim < 2:
        c.fail("expects at least 2-D input")
    ch = x.shape[1]
    for a in (mean, var, w, b):
        if a is not None and a.shape != (ch,):
            c.fail(f"parameter shape {a.shape} does not match {ch} channels")
    scale = 1.0 / np.sqrt(var.astype(np.float64) + eps)
    if w is not None:
        scale = scale * w
    shift = -mean * scale
    if b is not None:
        shift = shift + b
    bshape = (ch,) + (1,) * (x.ndim - 2)
    scale = scale.astype(x.dtype).reshape(bshape)
    shift = shift.astype(x.dtype).reshape(bshape)
    o = c.out(0, x.shape, x.dtype, like=x)
    o, x, scale, shift = _ew(o, x, scale, shift)
    return [partial(np.multiply, x, scale, o), partial(np.add, o, shift, o)]


def build_layer_norm(c):
    c.n_in(1, 3)
    x = c.need(0)
    shape = tuple(c.attr("normalized_shape", "ints"))
    eps = c.attr("eps", "float")
    k = len(shape)
    if k == 0 or x.shape[-k:] != shape:
        c.fail(f"normalized_shape {shape} does not match input {x.shape}")
    axes = tuple(range(x.ndim - k, x.ndim))
    rshape = x.shape[:x.ndim - k] + (1,) * k
    o = c.out(0, x.shape, x.dtype)
    mu = c.tmp(rshape, x.dtype)
    var = c.tmp(rshape, x.dtype)
    sq = c.tmp(x.shape, x.dtype)
    th = [partial(np.mean, x, axis=axes, keepdims=True, out=mu), partial(np.subtract, x, mu, o),
          partial(np.multiply, o, o, sq), partial(np.mean, sq, axis=axes, keepdims=True, out=var),
          partial(np.add, var, x.dtype.type(eps), var), partial(np.sqrt, var, var),
          partial(np.divide, o, var, o)]
    if c.x(1) is not None:
        th.append(partial(np.multiply, o, c.x(1), o))
    if c.x(2) is not None:
        th.append(partial(np.add, o, c.x(2), o))
    return th


def _rnn_weights(c, first_w, n_gates):
    x, h = c.need(0), c.need(1)
    w_ih, w_hh = c.need_const(first_w), c.need_const(first_w + 1)
    b_ih, b_hh = c.x(first_w + 2), c.x(first_w + 3)
    for i in (first_w + 2, first_w + 3):
        if c.x(i) is not None and not c.const[i]:
            c.fail("biases must be constants")
    hid = h.shape[-1] if h.ndim else -1
    if (x.ndim not in (1, 2) or h.ndim != x.ndim or w_ih.shape != (n_gates * hid, x.shape[-1])
            or w_hh.shape != (n_gates * hid, hid) or (x.ndim == 2 and x.shape[0] != h.shape[0])):
        c.fail(f"shapes input {x.shape}, hidden {h.shape}, w_ih {w_ih.shape}, w_hh {w_hh.shape} do not match")
    for bb in (b_ih, b_hh):
        if bb is not None and bb.shape != (n_gates * hid,):
            c.fail(f"bias shape {bb.shape} does not match")
    zeros = np.zeros(n_gates * hid, x.dtype)
    return x, h, w_ih, w_hh, (zeros if b_ih is None else b_ih), (zeros if b_hh is None else b_hh), hid


def build_gru_cell(c):
    """torch's GRUCell: r, z = σ(.), n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = n + z (h - n).

    σ(a) = (1 + tanh(a / 2)) / 2: the r, z rows of the weights and biases are pre-scaled by 1/2 so the
    GEMMs emit a / 2 directly."""
    c.n_in(4, 6)
    x, h, w_ih, w_hh, b_ih, b_hh, H = _rnn_weights(c, 2, 3)
    dt = x.dtype
    half = np.ones(3 * H)
    half[:2 * H] = 0.5
    wi = c.copy_of((w_ih * half[:, None]).T, dt)
    wh = c.copy_of((w_hh * half[:, None]).T, dt)
    bi = (b_ih * half).astype(dt)
    bi[:2 * H] += (b_hh[:2 * H] * 0.5).astype(dt)
    bhn = b_hh[2 * H:].astype(dt)
    lead = x.shape[:-1]
    gi = c.tmp(lead + (3 * H,), dt)
    gh = c.tmp(lead + (3 * H,), dt)
    t = c.tmp(lead + (H,), dt)
    o = c.out(0, h.shape, dt)
    rz, ghrz = gi[..., :2 * H], gh[..., :2 * H]
    r, z = gi[..., :H], gi[..., H:2 * H]
    gin, ghn = gi[..., 2 * H:], gh[..., 2 * H:]
    bi, bhn = _lead(bi, gi.ndim), _lead(bhn, gi.ndim)
    return [_gemm(x, wi, gi), partial(np.add, gi, bi, gi),
            _gemm(h, wh, gh), partial(np.add, ghn, bhn, ghn),
            partial(np.add, rz, ghrz, rz), partial(np.tanh, rz, rz),       # tanh(a/2)
            partial(np.multiply, rz, dt.type(0.5), rz), partial(np.add, rz, dt.type(0.5), rz),  # σ(a)
            partial(np.multiply, r, ghn, t), partial(np.add, t, gin, t), partial(np.tanh, t, t),
            partial(np.subtract, h, t, o), partial(np.multiply, o, z, o), partial(np.add, o, t, o)]


def build_lstm_cell(c):
    """torch's LSTMCell (gate order i, f, g, o): c' = f c + i g, h' = o tanh(c')."""
    c.n_in(5, 7)
    x, h, w_ih, w_hh, b_ih, b_hh, H = _rnn_weights(c, 3, 4)
    cx = c.need(2)
    if cx.shape != h.shape:
        c.fail(f"cell state {cx.shape} does not match hidden state {h.shape}")
    dt = x.dtype
    sc = np.full(4 * H, 0.5)
    sc[2 * H:3 * H] = 1.0  # the g gate is a tanh: not halved
    wi = c.copy_of((w_ih * sc[:, None]).T, dt)
    wh = c.copy_of((w_hh * sc[:, None]).T, dt)
    bias = ((b_ih + b_hh) * sc).astype(dt)
    lead = x.shape[:-1]
    gates = c.tmp(lead + (4 * H,), dt)
    gh = c.tmp(lead + (4 * H,), dt)
    t = c.tmp(lead + (H,), dt)
    ho = c.out(0, h.shape, dt)
    co = c.out(1, h.shape, dt)
    i, f, g, og = (gates[..., k * H:(k + 1) * H] for k in range(4))
    ifo = [i, f, og]
    th = [_gemm(x, wi, gates), _gemm(h, wh, gh),
          partial(np.add, gates, gh, gates), partial(np.add, gates, _lead(bias, gates.ndim), gates),
          partial(np.tanh, gates, gates)]
    for a in ifo:
        th += [partial(np.multiply, a, dt.type(0.5), a), partial(np.add, a, dt.type(0.5), a)]
    th += [partial(np.multiply, f, cx, co), partial(np.multiply, i, g, t), partial(np.add, co, t, co),
           partial(np.tanh, co, t), partial(np.multiply, og, t, ho)]
    return th


# ---------------------------------------------------------------------------------------------
# shapes
def _shape_attr(c, name="shape"):
    s = c.attr(name, "ints")
    if any(v < 0 for v in s) or len(s) > 32:
        c.fail(f"bad shape {s}")
    return tuple(s)


def build_reshape(c):
    c.n_in(1)
    x = c.need(0)
    shape = _shape_attr(c)
    if math.prod(shape) != x.size:
        c.fail(f"cannot reshape {x.shape} to {shape}")
    return _view_or_copy(c, 0, x, shape)


def build_transpose(c):
    c.n_in(1)
    x = c.need(0)
    perm = c.attr("perm", "ints")
    if sorted(perm) != list(range(x.ndim)):
        c.fail(f"perm {perm} is not a permutation of {x.ndim} axes")
    c.alias(0, x.transpose(perm))
    return []


def build_expand(c):
    c.n_in(1)
    x = c.need(0)
    shape = _shape_attr(c)
    try:
        v = np.broadcast_to(x, shape)
    except ValueError:
        c.fail(f"cannot expand {x.shape} to {shape}")
    # no memory now, but a consumer may copy the broadcast view (np.dot does): counted as if it did
    c.charge(v.size * v.dtype.itemsize, "an expanded view")
    c.alias(0, v)
    return []


def build_tile(c):
    c.n_in(1)
    x = c.need(0)
    reps = tuple(c.attr("repeats", "ints"))
    if len(reps) < x.ndim or min(reps, default=1) < 0:
        c.fail("bad repeats")
    xs = (1,) * (len(reps) - x.ndim) + x.shape
    o = c.out(0, tuple(a * r for a, r in zip(xs, reps)), x.dtype)
    # o viewed as (r0, s0, r1, s1, ...) receives x broadcast along the r axes
    v = o.reshape(tuple(v for pair in zip(reps, xs) for v in pair))
    src = x.reshape(tuple(v for s in xs for v in (1, s)))
    return [partial(np.copyto, v, src)]


def build_getitem(c):
    """Basic indexing: per-axis [start, stop, step] (step > 0), then a reshape that drops the
    integer-indexed axes and inserts the None axes."""
    c.n_in(1)
    x = c.need(0)
    sl = c.attr("slices", "ints")
    if len(sl) != 3 * x.ndim:
        c.fail("slices must hold start, stop, step for every axis")
    key = []
    for ax in range(x.ndim):
        a, b, s = sl[3 * ax:3 * ax + 3]
        if s < 1 or not (0 <= a <= x.shape[ax]) or not (0 <= b <= x.shape[ax]):
            c.fail(f"bad slice {a}:{b}:{s} on axis {ax} of size {x.shape[ax]}")
        key.append(slice(a, b, s))
    v = x[tuple(key)]
    shape = _shape_attr(c)
    if math.prod(shape) != v.size:
        c.fail(f"cannot reshape {v.shape} to {shape}")
    return _view_or_copy(c, 0, v, shape)


def build_concat(c):
    if len(c.ins) < 1:
        c.fail("needs inputs")
    xs = [c.need(i) for i in range(len(c.ins))]
    axis = c.axis(c.attr("axis", "int"), xs[0].ndim)
    base = xs[0].shape
    for a in xs:
        if a.ndim != len(base) or a.shape[:axis] != base[:axis] or a.shape[axis + 1:] != base[axis + 1:]:
            c.fail(f"shapes {[a.shape for a in xs]} cannot be joined along axis {axis}")
    total = sum(a.shape[axis] for a in xs)
    o = c.out(0, base[:axis] + (total,) + base[axis + 1:], _out_dtype(c, xs[0].dtype))
    th = []
    pos = 0
    for a in xs:
        k = a.shape[axis]
        idx = (slice(None),) * axis + (slice(pos, pos + k),)
        th.append(partial(np.copyto, o[idx], a, casting="unsafe"))
        pos += k
    return th


def build_stack(c):
    if len(c.ins) < 1:
        c.fail("needs inputs")
    xs = [c.need(i) for i in range(len(c.ins))]
    axis = c.axis(c.attr("axis", "int"), xs[0].ndim + 1)
    if any(a.shape != xs[0].shape for a in xs):
        c.fail("stack needs equal shapes")
    shape = xs[0].shape[:axis] + (len(xs),) + xs[0].shape[axis:]
    o = c.out(0, shape, _out_dtype(c, xs[0].dtype))
    return [partial(np.copyto, o[(slice(None),) * axis + (i,)], a, casting="unsafe") for i, a in enumerate(xs)]


def build_split(c):
    c.n_in(1)
    x = c.need(0)
    axis = c.axis(c.attr("axis", "int"), x.ndim)
    sizes = c.attr("sizes", "ints")
    if sum(sizes) != x.shape[axis] or min(sizes, default=0) < 0 or len(sizes) != len(c._outs):
        c.fail(f"split sizes {sizes} do not match axis {axis} of {x.shape} / {len(c._outs)} outputs")
    pos = 0
    for i, k in enumerate(sizes):
        c.alias(i, x[(slice(None),) * axis + (slice(pos, pos + k),)])
        pos += k
    return []


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


BUILDERS = {name: _unary_builder(name) for name in _UNARY}
BUILDERS.update({name: _binary_builder(name) for name in _BINARY})
BUILDERS.update({
    "identity": build_identity, "cast": build_cast, "sigmoid": build_sigmoid, "relu": build_relu,
    "leaky_relu": build_leaky_relu, "elu": build_elu, "softplus": build_softplus, "clamp": build_clamp,
    "where": build_where, "matmul": build_matmul, "linear": build_linear, "conv2d": build_conv2d,
    "max_pool2d": build_max_pool2d, "avg_pool2d": build_avg_pool2d,
    "adaptive_avg_pool2d": build_adaptive_avg_pool2d, "batch_norm": build_batch_norm,
    "layer_norm": build_layer_norm, "gru_cell": build_gru_cell, "lstm_cell": build_lstm_cell,
    "reshape": build_reshape, "transpose": build_transpose, "expand": build_expand, "tile": build_tile,
    "getitem": build_getitem, "concat": build_concat, "stack": build_stack, "split": build_split,
    "sum": _reduce_builder(np.sum), "mean": _reduce_builder(np.mean), "amax": _reduce_builder(np.max),
    "amin": _reduce_builder(np.min), "prod": _reduce_builder(np.prod), "softmax": build_softmax,
    "log_softmax": build_log_softmax, "logsumexp": build_logsumexp, "var": build_var,
    "argmax": _arg_builder(np.argmax), "argmin": _arg_builder(np.argmin),
})
