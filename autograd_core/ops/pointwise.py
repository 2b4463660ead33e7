# 628 lines: one op family, each node beside its op; export's op table keys them by module (ops.pointwise:<op>).
"""Element-wise functions, activations, clamp, minimum/maximum, where, comparisons."""
from ._base import (D, Node, Tensor, _gs, _new, _obj_new, _wrap, as_float, binary_result_dtype, const, next_seq, node1,
                    np, operand, reduce_to_shape, saved_version)


def _unary(cls, t, out, saved, save_out=False):
    """Wrap `out` and attach a node of `cls` if `t` needs grad."""
    if t._rg and _gs.enabled:
        n = node1(cls, t, saved)
        res = _wrap(out, n)
        n.vc = ((res._vc, 0, out, type(n), 0),) if save_out else (saved_version(t),)
        return res
    return _wrap(out)


def _def_unary(name, fwd, bwd, save="input", doc="", keeps_int=False):
    """Define a unary op `name` with NumPy forward `fwd(x)` and backward `bwd(g, x, out)`."""
    node_name = name[0].upper() + name[1:] + "Backward0"

    def backward(self, g):
        x, out = self.saved
        return (bwd(g, x, out),)

    cls = type(node_name, (Node,), {"__slots__": (), "backward": backward})
    save_out = save == "output"
    default_float = D.get_default_dtype
    ndarray = np.ndarray
    tnew = object.__new__

    def op(self):
        x = self._data
        if x.dtype.kind != "f":
            if keeps_int and x.dtype.kind in "iu":  # abs/relu of an integer tensor stay integer (torch)
                return _wrap(np.asarray(fwd(x)))
            x = x.astype(default_float().np)
        out = fwd(x)
        if self._rg and _gs.enabled:
            n = _obj_new(cls)
            n.seq = next_seq()
            fn = self._fn
            n.next_edges = ((fn, self._nr) if fn is not None else (self, 0),)
            if out.__class__ is not ndarray:
                out = np.asarray(out)
            res = tnew(Tensor)
            res._data = out
            res._fn = n
            res._rg = True
            res._grad = None
            res._vc = vc = [0]
            res._nr = 0
            res._base = None
            res._extra = None
            n.saved = (x, out)
            n.vc = ((vc, 0, out, cls, 0),) if save_out else ((self._vc, self._vc[0], x, fn, self._nr),)
            return res
        return _wrap(out)

    op.__name__ = name
    op.__doc__ = doc or f"Element-wise {name}."
    return cls, op


def _sigmoid_np(x):
    # 0.5 * (1 + tanh(x / 2)) is exact, never overflows, and costs three ufunc passes.
    half = const(0.5, x.dtype)
    h = np.tanh(x * half)
    h += const(1.0, x.dtype)
    h *= half
    return h


ExpBackward0, exp = _def_unary("exp", np.exp, lambda g, x, o: g * o, save="output")
LogBackward0, log = _def_unary("log", np.log, lambda g, x, o: g / x)
Log2Backward0, log2 = _def_unary("log2", np.log2, lambda g, x, o: g / (x * np.log(2.0)).astype(x.dtype))
Log10Backward0, log10 = _def_unary("log10", np.log10, lambda g, x, o: g / (x * np.log(10.0)).astype(x.dtype))
Log1PBackward0, log1p = _def_unary("log1p", np.log1p, lambda g, x, o: g / (1 + x))
Expm1Backward0, expm1 = _def_unary("expm1", np.expm1, lambda g, x, o: g * (o + 1), save="output")
SqrtBackward0, sqrt = _def_unary("sqrt", np.sqrt, lambda g, x, o: g / (2 * o), save="output")
RsqrtBackward0, rsqrt = _def_unary("rsqrt", lambda x: 1 / np.sqrt(x), lambda g, x, o: g * (-0.5 * o ** 3), save="output")
AbsBackward0, abs = _def_unary("abs", np.abs, lambda g, x, o: g * np.sign(x), keeps_int=True)  # noqa: A001
SinBackward0, sin = _def_unary("sin", np.sin, lambda g, x, o: g * np.cos(x))
CosBackward0, cos = _def_unary("cos", np.cos, lambda g, x, o: -g * np.sin(x))
TanBackward0, tan = _def_unary("tan", np.tan, lambda g, x, o: g * (1 + o * o), save="output")
AsinBackward0, asin = _def_unary("asin", np.arcsin, lambda g, x, o: g / np.sqrt(1 - x * x))
AcosBackward0, acos = _def_unary("acos", np.arccos, lambda g, x, o: -g / np.sqrt(1 - x * x))
AtanBackward0, atan = _def_unary("atan", np.arctan, lambda g, x, o: g / (1 + x * x))
SinhBackward0, sinh = _def_unary("sinh", np.sinh, lambda g, x, o: g * np.cosh(x))
CoshBackward0, cosh = _def_unary("cosh", np.cosh, lambda g, x, o: g * np.sinh(x))
def _one(dt):
    return const(1.0, dt)


def _tanh_backward(g, x, o):
    if o.ndim == 0:
        return g * (_one(o.dtype) - o * o)
    t = o * o
    np.subtract(_one(t.dtype), t, out=t)
    t *= g
    return t


def _sigmoid_backward(g, x, o):
    t = _one(o.dtype) - o
    t *= o
    t *= g
    return t


TanhBackward0, tanh = _def_unary("tanh", np.tanh, _tanh_backward, save="output")
SigmoidBackward0, sigmoid = _def_unary("sigmoid", _sigmoid_np, _sigmoid_backward, save="output")
ReciprocalBackward0, reciprocal = _def_unary("reciprocal", lambda x: 1 / x, lambda g, x, o: -g * o * o, save="output")
def _relu_backward(g, x, o):
    # torch's threshold_backward: 0 where out <= 0, g elsewhere (a NaN output passes its gradient)
    return np.where(o <= 0, np.zeros((), g.dtype), g)


def _masked(g, mask):
    """g where mask, else 0: unlike g * mask, an inf/NaN gradient does not leak through (torch)."""
    return np.where(mask, g, np.zeros((), g.dtype))


ReluBackward0, relu = _def_unary("relu", lambda x: np.maximum(x, x.dtype.type(0)),
                                 _relu_backward, save="output", keeps_int=True)


def square(self):
    from .arith import pow as _pow
    return _pow(self, 2)


def sign(self):
    if self._data.dtype == np.bool_:
        return _wrap(self._data.copy())  # torch: sign of a bool tensor is itself
    return _zero_grad_unary(self, np.sign, "SignBackward0")


def floor(self):
    return _zero_grad_unary(self, np.floor, "FloorBackward0")


def ceil(self):
    return _zero_grad_unary(self, np.ceil, "CeilBackward0")


def round(self, decimals=0):  # noqa: A001
    return _zero_grad_unary(self, lambda x: np.round(x, decimals), "RoundBackward0")


def trunc(self):
    return _zero_grad_unary(self, np.trunc, "TruncBackward0")


class _ZeroGrad(Node):
    __slots__ = ()

    def backward(self, g):
        return (np.zeros_like(g),)


_ZERO_GRAD_CLASSES = {}


def _zero_grad_unary(t, fn, name):
    out = np.asarray(fn(t._data))
    if t._rg and _gs.enabled and out.dtype.kind == "f":
        cls = _ZERO_GRAD_CLASSES.get(name)
        if cls is None:
            cls = _ZERO_GRAD_CLASSES[name] = type(name, (_ZeroGrad,), {"__slots__": ()})
        n = node1(cls, t)
        return _wrap(out, n)
    return _wrap(out)


# ---------------------------------------------------------------------------------------------
# Parameterised activations
class LeakyReluBackward0(Node):
    __slots__ = ("slope",)

    def backward(self, g):
        x = self.saved
        s = self.slope
        dt = g.dtype
        # Mask arithmetic instead of np.where on a data-dependent mask (~15x faster): the factor is
        # (x > 0) * (1 - s) + s, i.e. exactly 1 or s whenever fl(fl(1 - s) + s) == 1.
        if dt.kind == "f" and g.ndim and dt.type(dt.type(1 - s) + dt.type(s)) == 1:
            m = np.greater(x, 0).astype(dt)
            m *= 1 - s
            m += s
            m *= g
            return (m,)
        return (g * np.where(x > 0, 1.0, s).astype(dt, copy=False),)


def leaky_relu(self, negative_slope=0.01):
    x = self._data
    if x.dtype.kind == "f" and 0 < negative_slope <= 1 and x.ndim:
        # max(x, s x) == (x if x > 0 else s x) for 0 < s <= 1; no np.where on a random mask
        out = np.multiply(x, negative_slope)
        np.maximum(out, x, out=out)
        out = out.astype(x.dtype, copy=False)
    else:
        out = np.where(x > 0, x, x * negative_slope).astype(x.dtype, copy=False)
    if self._rg and _gs.enabled:
        n = node1(LeakyReluBackward0, self, x, (saved_version(self),))
        n.slope = negative_slope
        return _wrap(out, n)
    return _wrap(out)


class SoftplusBackward0(Node):
    __slots__ = ("beta", "threshold")

    def backward(self, g):
        x = self.saved
        z = x * self.beta
        s = _sigmoid_np(z)
        return (g * np.where(z > self.threshold, 1.0, s).astype(g.dtype, copy=False),)


def softplus(self, beta=1.0, threshold=20.0):
    x = as_float(self._data)
    z = x * beta
    # log1p(exp(z)) overflows for large z; torch switches to the identity above `threshold`.
    soft = (np.maximum(z, 0) + np.log1p(np.exp(-np.abs(z)))) / beta
    out = np.where(z > threshold, x, soft).astype(x.dtype, copy=False)
    if self._rg and _gs.enabled:
        n = node1(SoftplusBackward0, self, x, (saved_version(self),))
        n.beta = beta
        n.threshold = threshold
        return _wrap(out, n)
    return _wrap(out)


class EluBackward0(Node):
    __slots__ = ("alpha",)

    def backward(self, g):
        x, out = self.saved
        return (g * np.where(x > 0, 1.0, out + self.alpha).astype(g.dtype, copy=False),)


def elu(self, alpha=1.0):
    x = as_float(self._data)
    out = np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))).astype(x.dtype, copy=False)
    if self._rg and _gs.enabled:
        n = node1(EluBackward0, self, (x, out), (saved_version(self),))
        n.alpha = alpha
        return _wrap(out, n)
    return _wrap(out)


# ---------------------------------------------------------------------------------------------
# clamp, minimum, maximum, where
class ClampBackward1(Node):
    """clamp with scalar bounds."""

    __slots__ = ("lo", "hi")

    def backward(self, g):
        x = self.saved
        lo, hi = self.lo, self.hi
        if lo is not None:
            mask = x >= lo
            if hi is not None:
                mask &= x <= hi
        elif hi is not None:
            mask = x <= hi
        else:
            mask = np.ones(x.shape, dtype=bool)
        return (np.where(mask, g, np.zeros((), g.dtype)),)


class ClampBackward0(Node):
    """clamp with tensor bounds; masks follow torch's clamp_backward / clamp_backward_min_max."""

    __slots__ = ("shapes",)

    def masks(self):
        """Where the gradient goes to x, to the lower and to the upper bound (None: no bound)."""
        x, lo, hi = self.saved
        x_mask = True
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
        return x_mask, lo_mask, hi_mask

    def backward(self, g):
        out = []
        for e, shape, mask in zip(self.next_edges, self.shapes, self.masks()):
            out.append(None if e is None else reduce_to_shape(_masked(g, mask), shape))
        return tuple(out)


def clamp(self, min=None, max=None):  # noqa: A002 - torch's names
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensor(self, min, max)
    x = self._data
    if x.dtype.kind != "f" and (isinstance(min, float) or isinstance(max, float)):
        x = x.astype(D.get_default_dtype().np)
    out = x
    if min is not None:
        out = np.maximum(out, min)
    if max is not None:
        out = np.minimum(out, max)
    out = np.asarray(out).astype(x.dtype, copy=False)
    if self._rg and _gs.enabled:
        n = node1(ClampBackward1, self, x, (saved_version(self),))
        n.lo = min
        n.hi = max
        return _wrap(out, n)
    return _wrap(out)


def _clamp_tensor(self, lo, hi):
    lo = operand(lo) if lo is not None else None
    hi = operand(hi) if hi is not None else None
    lo_t = lo if isinstance(lo, Tensor) else (None if lo is None else _wrap(np.asarray(lo, self._data.dtype)))
    hi_t = hi if isinstance(hi, Tensor) else (None if hi is None else _wrap(np.asarray(hi, self._data.dtype)))
    x = self._data
    out = x
    if lo_t is not None:
        out = np.maximum(out, lo_t._data)
    if hi_t is not None:
        out = np.minimum(out, hi_t._data)
    out = np.asarray(out)
    parts = [t for t in (self, lo_t, hi_t) if t is not None]
    if _gs.enabled and any(t._rg for t in parts):
        n = _new(ClampBackward0)
        n.saved = (x, None if lo_t is None else lo_t._data, None if hi_t is None else hi_t._data)
        n.shapes = (x.shape, None if lo_t is None else lo_t._data.shape, None if hi_t is None else hi_t._data.shape)
        n.vc = tuple(saved_version(t) for t in parts)
        # One edge slot per operand (None when absent), so backward can zip masks with edges.
        n.next_edges = tuple(None if t is None else t._edge() for t in (self, lo_t, hi_t))
        return _wrap(out, n)
    return _wrap(out)


def clamp_min(self, min):  # noqa: A002
    return clamp(self, min=min)


def clamp_max(self, max):  # noqa: A002
    return clamp(self, max=max)


class _MinMaxBackward(Node):
    __slots__ = ("sa", "sb", "is_max")

    def backward(self, g):
        # torch: ga = where(a == b, g / 2, g).masked_fill(a < b, 0) (for max; mirrored for b and
        # for min), so a NaN pair passes g to both sides and a masked side gets an exact 0.
        a, b = self.saved
        ea, eb = self.next_edges
        z = np.zeros((), g.dtype)
        if self._fnan:
            wa = (a >= b) if self.is_max else (a <= b)
            wa |= np.isnan(b)
            ga = np.where(wa, g, z)
            gb = np.where(wa, z, g)
        else:
            tie = a == b
            h = np.where(tie, g * g.dtype.type(0.5), g) if np.count_nonzero(tie) else g
            ga = np.where((a < b) if self.is_max else (a > b), z, h)
            gb = np.where((b < a) if self.is_max else (b > a), z, h)
        return (reduce_to_shape(ga, self.sa) if ea is not None else None,
                reduce_to_shape(gb, self.sb) if eb is not None else None)


def _minmax_weights(a, b, is_max, ignore_nan):
    """Share of the gradient for a and for b, with torch's formulas.

    maximum/minimum: the winner gets 1, ties split 0.5/0.5, a NaN pair gives both the gradient.
    fmax/fmin: `a` gets it where it is the result (a >= b, or b is NaN), `b` elsewhere; no split.
    """
    if ignore_nan:
        wa = (a >= b) if is_max else (a <= b)
        if a.dtype.kind == "f":
            wa |= np.isnan(b)
        return wa.astype(np.float64), (~wa).astype(np.float64)
    tie = 0.5 * (a == b)
    if a.dtype.kind != "f" or not (np.isnan(a).any() or np.isnan(b).any()):
        wa = ((a > b) if is_max else (a < b)) + tie
        wb = ((a < b) if is_max else (a > b)) + tie
        return wa, wb
    # NaN somewhere: masked_fill(self < other, 0) leaves the gradient on both sides of a NaN pair
    wa = np.where((a < b) if is_max else (a > b), 0.0, 1.0) - tie
    wb = np.where((a > b) if is_max else (a < b), 0.0, 1.0) - tie
    return wa, wb


class MaximumBackward0(_MinMaxBackward):
    __slots__ = ()
    _fnan = False


class MinimumBackward0(_MinMaxBackward):
    __slots__ = ()
    _fnan = False


class FmaxBackward0(_MinMaxBackward):
    __slots__ = ()
    _fnan = True


class FminBackward0(_MinMaxBackward):
    __slots__ = ()
    _fnan = True


def _minmax(self, other, is_max, ignore_nan=False):
    other = operand(other)
    if not isinstance(other, Tensor):
        other = _wrap(np.asarray(other, dtype=binary_result_dtype(self, other)))
    a, b = self._data, other._data
    if a.dtype is not b.dtype:
        rd = binary_result_dtype(self, other)
        a, b = a.astype(rd), b.astype(rd)
    if ignore_nan:
        out = np.asarray(np.fmax(a, b) if is_max else np.fmin(a, b))
        cls = FmaxBackward0 if is_max else FminBackward0
    else:
        out = np.asarray(np.maximum(a, b) if is_max else np.minimum(a, b))
        cls = MaximumBackward0 if is_max else MinimumBackward0
    if _gs.enabled and (self._rg or other._rg):
        n = _new(cls)
        n.next_edges = (self._edge(), other._edge())
        n.saved = (a, b)
        n.vc = (saved_version(self), saved_version(other))
        n.sa, n.sb, n.is_max = a.shape, b.shape, is_max
        return _wrap(out, n)
    return _wrap(out)


def maximum(self, other):
    return _minmax(self, other, True)


def minimum(self, other):
    return _minmax(self, other, False)


def fmax(self, other):
    return _minmax(self, other, True, ignore_nan=True)


def fmin(self, other):
    return _minmax(self, other, False, ignore_nan=True)


class WhereBackward0(Node):
    __slots__ = ("sa", "sb")

    def backward(self, g):
        cond = self.saved
        ea, eb = self.next_edges
        zero = np.zeros((), g.dtype)
        ga = reduce_to_shape(np.where(cond, g, zero), self.sa) if ea is not None else None
        gb = reduce_to_shape(np.where(cond, zero, g), self.sb) if eb is not None else None
        return ga, gb


def where(condition, input=None, other=None):  # noqa: A002
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    c = condition._data if isinstance(condition, Tensor) else np.asarray(condition)
    if c.dtype != np.bool_:
        c = c.astype(bool)
    a = operand(input)
    b = operand(other)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = _wrap(np.asarray(a, dtype=D.get_default_dtype().np if isinstance(a, float) else None))
    if not isinstance(a, Tensor):
        a = _wrap(np.asarray(a, dtype=binary_result_dtype(b, a)))
    if not isinstance(b, Tensor):
        b = _wrap(np.asarray(b, dtype=binary_result_dtype(a, b)))
    ad, bd = a._data, b._data
    if ad.dtype is not bd.dtype:
        rd = binary_result_dtype(a, b)
        ad, bd = ad.astype(rd), bd.astype(rd)
    out = np.where(c, ad, bd)
    if _gs.enabled and (a._rg or b._rg):
        n = _new(WhereBackward0)
        n.next_edges = (a._edge(), b._edge())
        n.saved = c
        n.vc = ()
        n.sa, n.sb = ad.shape, bd.shape
        return _wrap(out, n)
    return _wrap(out)


def nonzero(self, as_tuple=False):
    d = self._data if isinstance(self, Tensor) else np.asarray(self)
    idx = np.nonzero(d)
    if as_tuple:
        return tuple(_wrap(i.astype(np.int64)) for i in idx)
    return _wrap(np.stack(idx, axis=1).astype(np.int64) if idx else np.zeros((0, 0), np.int64))


# ---------------------------------------------------------------------------------------------
# Comparisons and logic (no gradient)
def _no_grad_binary(ufunc):
    """A binary op without gradient (comparisons, logical and bitwise ops): `ufunc` on the data."""
    def op(self, other):
        other = operand(other)
        od = other._data if isinstance(other, Tensor) else other
        return _wrap(np.asarray(ufunc(self._data, od)))
    op.__name__ = ufunc.__name__
    return op


eq = _no_grad_binary(np.equal)
ne = _no_grad_binary(np.not_equal)
lt = _no_grad_binary(np.less)
le = _no_grad_binary(np.less_equal)
gt = _no_grad_binary(np.greater)
ge = _no_grad_binary(np.greater_equal)
logical_and = _no_grad_binary(np.logical_and)
logical_or = _no_grad_binary(np.logical_or)
logical_xor = _no_grad_binary(np.logical_xor)
bitwise_and = _no_grad_binary(np.bitwise_and)
bitwise_or = _no_grad_binary(np.bitwise_or)
bitwise_xor = _no_grad_binary(np.bitwise_xor)


def rbitwise_and(self, other):
    return bitwise_and(self, other)


def logical_not(self):
    return _wrap(np.logical_not(self._data))


def invert(self):
    d = self._data
    if d.dtype.kind == "f":
        raise TypeError("~ (bitwise_not) is only supported for integer and bool tensors")
    return _wrap(np.invert(d))


def isnan(self):
    return _wrap(np.isnan(self._data))


def isinf(self):
    return _wrap(np.isinf(self._data))


def isfinite(self):
    return _wrap(np.isfinite(self._data))


def equal(self, other):
    return bool(self._data.shape == other._data.shape and np.array_equal(self._data, other._data))


def allclose(self, other, rtol=1e-5, atol=1e-8, equal_nan=False):
    return bool(np.allclose(self._data, other._data, rtol=rtol, atol=atol, equal_nan=equal_nan))


def isclose(self, other, rtol=1e-5, atol=1e-8, equal_nan=False):
    od = other._data if isinstance(other, Tensor) else other
    return _wrap(np.isclose(self._data, od, rtol=rtol, atol=atol, equal_nan=equal_nan))


class Atan2Backward0(Node):
    __slots__ = ("sa", "sb")

    def backward(self, g):
        a, b = self.saved
        ea, eb = self.next_edges
        den = a * a + b * b
        ga = reduce_to_shape(g * b / den, self.sa) if ea is not None else None
        gb = reduce_to_shape(-g * a / den, self.sb) if eb is not None else None
        return ga, gb


def atan2(self, other):
    other = operand(other)
    if not isinstance(other, Tensor):
        other = _wrap(np.asarray(other, dtype=self._data.dtype))
    a, b = as_float(self._data), as_float(other._data)
    out = np.arctan2(a, b)
    if _gs.enabled and (self._rg or other._rg):
        n = _new(Atan2Backward0)
        n.next_edges = (self._edge(), other._edge())
        n.saved = (a, b)
        n.vc = (saved_version(self), saved_version(other))
        n.sa, n.sb = a.shape, b.shape
        return _wrap(out, n)
    return _wrap(out)


class LerpBackward0(Node):
    __slots__ = ("sa", "sb", "w")

    def backward(self, g):
        ea, eb = self.next_edges
        w = self.w
        return (reduce_to_shape(g * (1 - w), self.sa) if ea is not None else None,
                reduce_to_shape(g * w, self.sb) if eb is not None else None)


def lerp(self, end, weight):
    """self + weight * (end - self) for a scalar weight."""
    if isinstance(weight, Tensor):
        from .arith import add, mul, sub
        return add(self, mul(weight, sub(end, self)))
    out = self._data + weight * (end._data - self._data)
    if _gs.enabled and (self._rg or end._rg):
        n = _new(LerpBackward0)
        n.next_edges = (self._edge(), end._edge())
        n.saved = None
        n.vc = ()
        n.sa, n.sb, n.w = self._data.shape, end._data.shape, weight
        return _wrap(np.asarray(out, dtype=self._data.dtype), n)
    return _wrap(np.asarray(out, dtype=self._data.dtype))
