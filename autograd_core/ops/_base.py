"""Shared helpers for op implementations (internal)."""
import numbers

import numpy as np

from .. import _dtype as D
from .. import grad_mode as _gm
from ..function import Node, next_seq, reduce_to_shape, saved_version
from ..tensor import Tensor, _wrap

__all__ = ["np", "D", "Node", "Tensor", "_wrap", "reduce_to_shape", "saved_version", "_gs", "_new", "_obj_new",
           "next_seq", "const", "node1",
           "operand", "binary_result_dtype", "as_float", "normalize_dims", "one_dim", "node"]

_gs = _gm._state
_obj_new = object.__new__


def _new(cls):
    """A node without running __init__ (the hot path); stamped with its creation order."""
    n = _obj_new(cls)
    n.seq = next_seq()
    return n


def node1(cls, t, saved=None, vc=()):
    """A node of `cls` whose one input is `t` (which requires grad), without running __init__.

    The shared builder of single-input ops: callers set the class's own fields on the result
    (`n.axes = axes`), which is cheaper than passing them as keyword arguments.
    """
    n = _obj_new(cls)
    n.seq = next_seq()
    fn = t._fn
    n.next_edges = ((fn, t._nr) if fn is not None else (t, 0),)
    n.saved = saved
    n.vc = vc
    return n


def node(cls, edges, saved=None, vc=()):
    """Build a node without running __init__ (the hot path)."""
    n = _new(cls)
    n.next_edges = edges
    n.saved = saved
    n.vc = vc
    return n


_CONSTS = {}


def const(value, dt):
    """`value` as a read-only 0-d array of float dtype `dt`, cached.

    NumPy converts a Python scalar operand on every call (~0.25 µs more per op on small arrays
    than a 0-d array of the right dtype); planners multiply by the same few constants over and over.
    """
    key = (value, dt)
    c = _CONSTS.get(key)
    if c is None:
        if len(_CONSTS) > 1024:
            _CONSTS.clear()
        c = np.array(value, dtype=dt)
        c.flags.writeable = False
        _CONSTS[key] = c
    return c


def operand(x):
    """Normalise the other operand of a binary op: a Tensor, or a Python scalar (weakly typed)."""
    if isinstance(x, Tensor):
        return x
    xc = x.__class__
    if xc is float or xc is int or xc is bool:
        return x
    if isinstance(x, np.ndarray):
        return _wrap(np.asarray(x))
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, numbers.Number):
        if isinstance(x, complex):
            raise TypeError("complex numbers are not supported by autograd_core")
        return float(x)
    raise TypeError(f"unsupported operand type for a tensor op: {type(x).__name__}")


def _kind(t):
    return 2 if t._data.ndim else 1


def _scalar_dtype(s):
    if isinstance(s, bool):
        return D.bool
    if isinstance(s, int):
        return D.int64
    return D.get_default_dtype()


def binary_result_dtype(a, b):
    """torch's result dtype for `a op b` (Tensor, Tensor-or-scalar), as a NumPy dtype."""
    ops = [(D._BY_NP[a._data.dtype], _kind(a))]
    if isinstance(b, Tensor):
        ops.append((D._BY_NP[b._data.dtype], _kind(b)))
    else:
        ops.append((_scalar_dtype(b), 0))
    return D.result_type(ops).np


def as_float(arr):
    """Integer/bool data promoted to the default float dtype, as torch's float-only ops do."""
    if arr.dtype.kind == "f":
        return arr
    return arr.astype(D.get_default_dtype().np)


def normalize_dims(dim, ndim):
    """int / sequence / None → a sorted tuple of non-negative axes (None → all axes).

    A 0-d tensor accepts dim 0 and -1, as torch does, and has no axes to reduce: ().
    """
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)):
        dim = (int(dim),)
    out = []
    n = max(ndim, 1)
    for d in dim:
        d = int(d)
        if not -n <= d < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
        out.append(d % n)
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {out} appears multiple times in the list of dims")
    if not ndim:
        return ()
    return tuple(sorted(out))


def one_dim(dim, ndim):
    """A single dim → a non-negative axis (0 for a 0-d tensor, which accepts 0 and -1)."""
    n = max(ndim, 1)
    d = int(dim)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n
