# 649 lines: one op family, each node beside its op; export's op table keys them by module (ops.arith:<op>).
"""Arithmetic: + - * / ** @, negation, their reflected forms, and in-place variants."""
from ._base import (D, Node, Tensor, _gs, _new, _obj_new, _wrap, node1, binary_result_dtype, const, next_seq, np,
                    operand, reduce_to_shape, saved_version)

_SCALARS = (int, float, bool)
_ndarray = np.ndarray
_tnew = object.__new__


def _promote_pair(a, b):
    """NumPy arrays of `a`, `b` (Tensors) cast to torch's result dtype when they differ."""
    ad, bd = a._data, b._data
    if ad.dtype is bd.dtype:
        return ad, bd
    rd = binary_result_dtype(a, b)
    return ad.astype(rd, copy=False), bd.astype(rd, copy=False)


def _promote_scalar(a, s):
    """`a`'s array, cast to the default float when an integer/bool tensor meets a Python float."""
    ad = a._data
    if ad.dtype.kind != "f" and isinstance(s, float):
        return ad.astype(D.get_default_dtype().np)
    return ad


def _make_node(cls, a, b):
    n = _obj_new(cls)
    n.seq = next_seq()
    fa = a._fn
    fb = b._fn
    n.next_edges = ((fa, a._nr) if fa is not None else ((a, 0) if a._rg else None),
                    (fb, b._nr) if fb is not None else ((b, 0) if b._rg else None))
    n.sa = a._data.shape
    n.sb = b._data.shape
    n.vc = ()
    return n


# ---------------------------------------------------------------------------------------------
class AddBackward0(Node):
    __slots__ = ("sa", "sb")

    def backward(self, g):
        ea, eb = self.next_edges
        sh = g.shape
        return (None if ea is None else g if sh == self.sa else reduce_to_shape(g, self.sa),
                None if eb is None else g if sh == self.sb else reduce_to_shape(g, self.sb))


class _ScalarIdentity(Node):
    """Backward of `tensor + scalar` (and `- scalar`): the gradient passes through."""

    __slots__ = ()

    def backward(self, g):
        return (g,)


class _AddScalarBackward(_ScalarIdentity):
    __slots__ = ()


_AddScalarBackward.__name__ = _AddScalarBackward.__qualname__ = "AddBackward0"


class _SubScalarBackward(_ScalarIdentity):
    __slots__ = ()


_SubScalarBackward.__name__ = _SubScalarBackward.__qualname__ = "SubBackward0"


class SubBackward0(Node):
    __slots__ = ("sa", "sb")

    def backward(self, g):
        ea, eb = self.next_edges
        return (reduce_to_shape(g, self.sa) if ea is not None else None,
                reduce_to_shape(-g, self.sb) if eb is not None else None)


class RsubBackward1(Node):
    __slots__ = ()

    def backward(self, g):
        return (-g,)


class NegBackward0(Node):
    __slots__ = ()

    def backward(self, g):
        return (-g,)


class MulBackward0(Node):
    __slots__ = ("sa", "sb")

    def backward(self, g):
        ad, bd = self.saved
        ea, eb = self.next_edges
        sh = g.shape
        ga = gb = None
        if ea is not None:
            ga = g * bd
            if ga.shape != self.sa:
                ga = reduce_to_shape(ga, self.sa)
        if eb is not None:
            gb = g * ad
            if gb.shape != self.sb:
                gb = reduce_to_shape(gb, self.sb)
        return ga, gb


class _MulScalarBackward(Node):
    __slots__ = ()

    def backward(self, g):
        return (g * self.saved,)


_MulScalarBackward.__name__ = _MulScalarBackward.__qualname__ = "MulBackward0"


class DivBackward0(Node):
    __slots__ = ("sa", "sb")

    def backward(self, g):
        ad, bd = self.saved
        ea, eb = self.next_edges
        ga = g / bd
        return (reduce_to_shape(ga, self.sa) if ea is not None else None,
                reduce_to_shape(-ga * ad / bd, self.sb) if eb is not None else None)


class _DivScalarBackward(Node):
    __slots__ = ()

    def backward(self, g):
        return (g / self.saved,)


_DivScalarBackward.__name__ = _DivScalarBackward.__qualname__ = "DivBackward0"


class PowBackward0(Node):
    """tensor ** scalar."""

    __slots__ = ("p",)

    def backward(self, g):
        a = self.saved
        p = self.p
        if p == 2:
            return (g * (2 * a),)
        if p == 0:
            return (np.zeros_like(g),)
        return (g * (p * a ** (p - 1)),)


class PowBackward1(Node):
    """tensor ** tensor."""

    __slots__ = ("sa", "sb")

    def backward(self, g):
        a, b, out = self.saved
        ea, eb = self.next_edges
        ga = gb = None
        if ea is not None:
            ga = reduce_to_shape(g * (b * a ** (b - 1)), self.sa)
        if eb is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                lg = np.log(a)
            # torch masks 0 ** b (b >= 0) to a zero gradient instead of 0 * -inf.
            gb = g * np.where((a == 0) & (b >= 0), 0.0, out * lg)
            gb = reduce_to_shape(gb.astype(out.dtype, copy=False), self.sb)
        return ga, gb


class PowBackward2(Node):
    """scalar ** tensor."""

    __slots__ = ("base",)

    def backward(self, g):
        out = self.saved
        base = self.base
        if base == 0:
            return (np.zeros_like(g),)
        return (g * (out * np.log(base)).astype(out.dtype, copy=False),)


# ---------------------------------------------------------------------------------------------
def add(self, other, *, alpha=1):
    if other.__class__ is Tensor and alpha == 1:
        ad = self._data
        bd = other._data
        if ad.dtype is not bd.dtype:
            ad, bd = _promote_pair(self, other)
        out = ad + bd
        if _gs.enabled and (self._rg or other._rg):
            n = _obj_new(AddBackward0)
            n.seq = next_seq()
            fa = self._fn
            fb = other._fn
            n.next_edges = ((fa, self._nr) if fa is not None else ((self, 0) if self._rg else None),
                            (fb, other._nr) if fb is not None else ((other, 0) if other._rg else None))
            n.sa = ad.shape
            n.sb = bd.shape
            n.vc = ()
            n.saved = None
            if out.__class__ is not _ndarray:
                out = np.asarray(out)
            t = _tnew(Tensor)
            t._data = out
            t._fn = n
            t._rg = True
            t._grad = None
            t._vc = [0]
            t._nr = 0
            t._base = None
            t._extra = None
            return t
        return _wrap(out)
    if alpha != 1:
        other = mul(operand(other), alpha) if isinstance(other, Tensor) else other * alpha
    oc = other.__class__
    if oc is float or oc is int or oc is bool:
        ad = self._data
        dt = ad.dtype
        out = (ad + const(other, dt)) if dt.kind == "f" else (_promote_scalar(self, other) + other)
        if self._rg and _gs.enabled:
            n = _obj_new(_AddScalarBackward)
            n.seq = next_seq()
            fn = self._fn
            n.next_edges = ((fn, self._nr) if fn is not None else (self, 0),)
            n.saved = None
            n.vc = ()
            return _wrap(out, n)
        return _wrap(out)
    other = operand(other)
    if not isinstance(other, Tensor):
        return add(self, other)
    ad, bd = _promote_pair(self, other)
    out = ad + bd
    if _gs.enabled and (self._rg or other._rg):
        n = _make_node(AddBackward0, self, other)
        n.saved = None
        return _wrap(out, n)
    return _wrap(out)


def sub(self, other, *, alpha=1):
    if alpha != 1:
        other = mul(operand(other), alpha) if isinstance(other, Tensor) else other * alpha
    if other.__class__ in _SCALARS:
        if self._data.dtype == np.bool_:
            raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                               "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
        dt = self._data.dtype
        out = (self._data - const(other, dt)) if dt.kind == "f" else (_promote_scalar(self, other) - other)
        if self._rg and _gs.enabled:
            n = node1(_SubScalarBackward, self)
            return _wrap(out, n)
        return _wrap(out)
    other = operand(other)
    if not isinstance(other, Tensor):
        return sub(self, other)
    ad, bd = _promote_pair(self, other)
    if ad.dtype == np.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    out = ad - bd
    if _gs.enabled and (self._rg or other._rg):
        n = _make_node(SubBackward0, self, other)
        n.saved = None
        return _wrap(out, n)
    return _wrap(out)


def rsub(self, other):
    """other - self, for a scalar `other`."""
    other = operand(other)
    if isinstance(other, Tensor):
        return sub(other, self)
    dt = self._data.dtype
    out = (const(other, dt) - self._data) if dt.kind == "f" else (other - _promote_scalar(self, other))
    if self._rg and _gs.enabled:
        n = node1(RsubBackward1, self)
        return _wrap(out, n)
    return _wrap(out)


def neg(self):
    if self._data.dtype == np.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    out = -self._data
    if self._rg and _gs.enabled:
        n = node1(NegBackward0, self)
        return _wrap(out, n)
    return _wrap(out)


def mul(self, other):
    oc = other.__class__
    if oc is Tensor:
        ad = self._data
        bd = other._data
        if ad.dtype is not bd.dtype:
            ad, bd = _promote_pair(self, other)
        out = ad * bd
        if _gs.enabled and (self._rg or other._rg):
            # node and result built inline: this is the hottest op of the planners' cost functions
            n = _obj_new(MulBackward0)
            n.seq = next_seq()
            fa = self._fn
            fb = other._fn
            va = self._vc
            vb = other._vc
            rb = (vb, vb[0], bd, fb, other._nr)
            if self._rg:
                ea = (fa, self._nr) if fa is not None else (self, 0)
                if other._rg:
                    n.next_edges = (ea, (fb, other._nr) if fb is not None else (other, 0))
                    n.vc = (rb, (va, va[0], ad, fa, self._nr))
                else:
                    n.next_edges = (ea, None)
                    n.vc = (rb,)
            else:
                n.next_edges = (None, (fb, other._nr) if fb is not None else (other, 0))
                n.vc = ((va, va[0], ad, fa, self._nr),)
            n.sa = ad.shape
            n.sb = bd.shape
            n.saved = (ad, bd)
            if out.__class__ is not _ndarray:
                out = np.asarray(out)
            t = _tnew(Tensor)
            t._data = out
            t._fn = n
            t._rg = True
            t._grad = None
            t._vc = [0]
            t._nr = 0
            t._base = None
            t._extra = None
            return t
        return _wrap(out)
    if oc is float or oc is int or oc is bool:
        ad = self._data
        dt = ad.dtype
        if dt.kind == "f":
            other = const(other, dt)
        elif oc is float:
            ad = ad.astype(D.get_default_dtype().np)
        out = ad * other
        if self._rg and _gs.enabled:
            n = _obj_new(_MulScalarBackward)
            n.seq = next_seq()
            fn = self._fn
            n.next_edges = ((fn, self._nr) if fn is not None else (self, 0),)
            n.saved = other
            n.vc = ()
            if out.__class__ is not _ndarray:
                out = np.asarray(out)
            t = _tnew(Tensor)
            t._data = out
            t._fn = n
            t._rg = True
            t._grad = None
            t._vc = [0]
            t._nr = 0
            t._base = None
            t._extra = None
            return t
        return _wrap(out)
    other = operand(other)
    if not isinstance(other, Tensor):
        return mul(self, other)
    ad, bd = _promote_pair(self, other)
    out = ad * bd
    if _gs.enabled and (self._rg or other._rg):
        n = _make_node(MulBackward0, self, other)
        n.saved = (ad, bd)
        # torch saves `other` when self needs grad and `self` when other does.
        if self._rg:
            n.vc = (saved_version(other), saved_version(self)) if other._rg else (saved_version(other),)
        else:
            n.vc = (saved_version(self),)
        return _wrap(out, n)
    return _wrap(out)


def div(self, other, *, rounding_mode=None):
    if rounding_mode is not None:
        return _div_rounding(self, other, rounding_mode)
    if other.__class__ in _SCALARS:
        ad = self._data
        if ad.dtype.kind != "f":
            ad = ad.astype(D.get_default_dtype().np)
        other = const(other, ad.dtype)
        out = ad / other
        if self._rg and _gs.enabled:
            n = node1(_DivScalarBackward, self, other)
            return _wrap(out, n)
        return _wrap(out)
    other = operand(other)
    if not isinstance(other, Tensor):
        return div(self, other)
    ad, bd = _promote_pair(self, other)
    if ad.dtype.kind != "f":
        f = D.get_default_dtype().np
        ad, bd = ad.astype(f), bd.astype(f)
    out = ad / bd
    if _gs.enabled and (self._rg or other._rg):
        n = _make_node(DivBackward0, self, other)
        n.saved = (ad, bd)
        n.vc = (saved_version(self), saved_version(other))
        return _wrap(out, n)
    return _wrap(out)


def _div_rounding(self, other, mode):
    if mode not in ("trunc", "floor"):
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{mode}'")
    other = operand(other)
    od = other._data if isinstance(other, Tensor) else other
    if self._data.dtype.kind != "f" and (not isinstance(other, Tensor) or other._data.dtype.kind != "f") \
            and not isinstance(od, float):
        q = np.floor_divide(self._data, od) if mode == "floor" else \
            (np.trunc(np.true_divide(self._data, od))).astype(np.result_type(self._data, od))
        return _wrap(np.asarray(q))
    q = np.true_divide(self._data, od)
    q = np.floor(q) if mode == "floor" else np.trunc(q)
    return _wrap(np.asarray(q, dtype=binary_result_dtype(self, other)))


def rdiv(self, other):
    """other / self for a scalar `other` (torch: reciprocal then multiply)."""
    other = operand(other)
    if isinstance(other, Tensor):
        return div(other, self)
    from .pointwise import reciprocal
    return mul(reciprocal(self), other)


def floordiv(self, other):
    return _div_rounding(self, other, "floor")


def rfloordiv(self, other):
    other = operand(other)
    o = other if isinstance(other, Tensor) else _wrap(np.asarray(other, dtype=binary_result_dtype(self, other)))
    return _div_rounding(o, self, "floor")


def remainder(self, other):
    other = operand(other)
    od = other._data if isinstance(other, Tensor) else other
    out = np.asarray(np.remainder(self._data, od))
    if self._rg and _gs.enabled:
        if isinstance(other, Tensor) and other._rg:
            raise NotImplementedError("the derivative of remainder with respect to its divisor is not implemented")
        n = node1(_ScalarIdentity, self)
        return _wrap(out, n)
    return _wrap(out)


def rremainder(self, other):
    return _wrap(np.asarray(np.remainder(other, self._data)))


def pow(self, exponent):
    if exponent.__class__ in _SCALARS:
        ad = self._data
        if ad.dtype.kind != "f" and isinstance(exponent, float):
            ad = ad.astype(D.get_default_dtype().np)
        elif ad.dtype == np.bool_:
            ad = ad.astype(np.int64)  # torch: bool ** int is int64
        if exponent == 2:
            out = ad * ad
        elif exponent == 0.5:
            out = np.sqrt(ad)
        else:
            out = ad ** exponent
        if self._rg and _gs.enabled:
            n = node1(PowBackward0, self, ad, (saved_version(self),))
            n.p = exponent
            return _wrap(out, n)
        return _wrap(out)
    exponent = operand(exponent)
    if not isinstance(exponent, Tensor):
        return pow(self, exponent)
    ad, bd = _promote_pair(self, exponent)
    out = ad ** bd
    if _gs.enabled and (self._rg or exponent._rg):
        n = _make_node(PowBackward1, self, exponent)
        n.saved = (ad, bd, out)
        res = _wrap(out, n)
        n.vc = (saved_version(self), saved_version(exponent), (res._vc, 0, out, type(n), 0))
        return res
    return _wrap(out)


def rpow(self, base):
    """base ** self for a scalar `base`."""
    base = operand(base)
    if isinstance(base, Tensor):
        return pow(base, self)
    ed = self._data
    if ed.dtype.kind != "f" and isinstance(base, float):
        ed = ed.astype(D.get_default_dtype().np)
    out = np.asarray(base ** ed)
    if out.dtype != ed.dtype and ed.dtype.kind == "f":
        out = out.astype(ed.dtype)
    if self._rg and _gs.enabled:
        n = node1(PowBackward2, self, out)
        n.base = base
        res = _wrap(out, n)
        n.vc = ((res._vc, 0, out, type(n), 0),)
        return res
    return _wrap(out)


# ---------------------------------------------------------------------------------------------
# matmul
class DotBackward0(Node):
    __slots__ = ()

    def backward(self, g):
        a, b = self.saved
        ea, eb = self.next_edges
        return (g * b if ea is not None else None, g * a if eb is not None else None)


class MmBackward0(Node):
    __slots__ = ()

    def backward(self, g):
        a, b = self.saved
        ea, eb = self.next_edges
        return (g @ b.T if ea is not None else None, a.T @ g if eb is not None else None)


class MvBackward0(Node):
    __slots__ = ()

    def backward(self, g):
        a, b = self.saved
        ea, eb = self.next_edges
        return (np.multiply.outer(g, b) if ea is not None else None, a.T @ g if eb is not None else None)


class _MatmulGeneralBackward(Node):
    """Batched / broadcast matmul, including 1-D operands on either side."""

    __slots__ = ()

    def backward(self, g):
        a, b = self.saved
        ea, eb = self.next_edges
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g2 = g
        if a.ndim == 1:
            g2 = np.expand_dims(g2, -2)
        if b.ndim == 1:
            g2 = np.expand_dims(g2, -1)
        ga = gb = None
        if ea is not None:
            ga = reduce_to_shape(g2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
        if eb is not None:
            gb = reduce_to_shape(np.swapaxes(a2, -1, -2) @ g2, b2.shape).reshape(b.shape)
        return ga, gb


_MatmulGeneralBackward.__name__ = _MatmulGeneralBackward.__qualname__ = "UnsafeViewBackward0"


def matmul(self, other):
    if not isinstance(other, Tensor):
        other = operand(other)
        if not isinstance(other, Tensor):
            raise TypeError(f"matmul(): argument 'other' must be Tensor, not {type(other).__name__}")
    ad, bd = _promote_pair(self, other)
    if ad.ndim == 0 or bd.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {ad.ndim}D and {bd.ndim}D")
    try:
        out = ad @ bd
    except ValueError:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_shape_str(ad)} and {_shape_str(bd)})") from None
    if _gs.enabled and (self._rg or other._rg):
        if ad.ndim == 2 and bd.ndim == 2:
            cls = MmBackward0
        elif ad.ndim == 1 and bd.ndim == 1:
            cls = DotBackward0
        elif ad.ndim == 2 and bd.ndim == 1:
            cls = MvBackward0
        else:
            cls = _MatmulGeneralBackward
        n = _new(cls)
        n.next_edges = (self._edge(), other._edge())
        n.saved = (ad, bd)
        n.vc = (saved_version(self), saved_version(other))
        return _wrap(np.asarray(out), n)
    return _wrap(np.asarray(out))


def _shape_str(a):
    return "x".join(str(s) for s in a.shape) if a.ndim else "scalar"


def rmatmul(self, other):
    other = operand(other)
    if not isinstance(other, Tensor):
        raise TypeError("matmul with a Python scalar is not defined")
    return matmul(other, self)


def mm(self, mat2):
    if self.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got {self.ndim}-D and {mat2.ndim}-D")
    return matmul(self, mat2)


def bmm(self, mat2):
    if self.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got {self.ndim}-D and {mat2.ndim}-D")
    return matmul(self, mat2)


def mv(self, vec):
    if self.ndim != 2 or vec.ndim != 1:
        raise RuntimeError("mv: expected a 2-D matrix and a 1-D vector")
    return matmul(self, vec)


def dot(self, other):
    if self.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {self.ndim}D and {other.ndim}D tensors")
    return matmul(self, other)


def outer(self, vec2):
    from .shape import unsqueeze
    return mul(unsqueeze(self, 1), unsqueeze(vec2, 0))
