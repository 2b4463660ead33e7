"""What a kernel builder sees of one node (`Ctx`), and the layout helpers the builders share.

See `_kernels.py` for the builder contract.
"""
from functools import partial

import numpy as np

from ._format import FormatError

__all__ = ["Ctx"]

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


def _out_dtype(c, default):
    return c._declared[0][1] if c._declared else np.dtype(default)
