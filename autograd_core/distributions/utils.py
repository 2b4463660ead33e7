"""Helpers shared by the distributions: broadcasting parameters, lazy properties, erf nodes."""
import math
import numbers

import numpy as np
from scipy import special as _sp

from .. import _dtype as D
from .. import grad_mode as _gm
from ..function import Node, saved_version
from ..ops._base import _new
from ..tensor import Size, Tensor, _wrap

__all__ = ["broadcast_all", "lazy_property", "clamp_probs", "probs_to_logits", "logits_to_probs", "erf", "erfinv",
           "sum_rightmost"]


def broadcast_all(*values):
    """Tensors and Python numbers -> tensors of one broadcast shape (numbers take the tensors' dtype,
    or the default float dtype when all are numbers)."""
    dtype = None
    for v in values:
        if isinstance(v, Tensor):
            dtype = v._data.dtype
            break
        if not isinstance(v, numbers.Number):
            raise ValueError("Input arguments must all be instances of numbers.Number, torch.Tensor or objects "
                             "implementing __torch_function__.")
    if dtype is None:
        dtype = D.get_default_dtype().np
    ts = [v if isinstance(v, Tensor) else _wrap(np.asarray(v, dtype=dtype)) for v in values]
    shape = np.broadcast_shapes(*(t._data.shape for t in ts))
    return tuple(t if t._data.shape == shape else t.expand(shape) for t in ts)


class lazy_property:
    """A property computed on first access and then stored in the instance (non-data descriptor)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


def clamp_probs(probs):
    eps = np.finfo(probs._data.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    ps = clamp_probs(probs)
    if is_binary:
        return ps.log() - (-ps).log1p()
    return ps.log()


def logits_to_probs(logits, is_binary=False):
    return logits.sigmoid() if is_binary else logits.softmax(-1)


def sum_rightmost(value, dim):
    """Sum the rightmost `dim` dimensions (none when dim == 0)."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.ndim - dim]) + (-1,)).sum(-1)


def _size(shape):
    if isinstance(shape, (int, np.integer)):
        return Size((int(shape),))
    return Size(tuple(int(s) for s in shape))


class ErfBackward0(Node):
    __slots__ = ()

    def backward(self, g):
        x = self.saved
        return (g * (2.0 / math.sqrt(math.pi)) * np.exp(-x * x),)


class ErfinvBackward0(Node):
    __slots__ = ()

    def backward(self, g):
        out = self.saved
        return (g * (math.sqrt(math.pi) / 2.0) * np.exp(out * out),)


def _unary(x, fn, cls, save_out):
    a = x._data if x._data.dtype.kind == "f" else x._data.astype(D.get_default_dtype().np)
    out = np.asarray(fn(a), dtype=a.dtype)
    if x._rg and _gm._state.enabled:
        n = _new(cls)
        n.next_edges = (x._edge(),)
        n.saved = out if save_out else a
        n.vc = () if save_out else (saved_version(x),)
        return _wrap(out, n)
    return _wrap(out)


def erf(x):
    """Element-wise error function, differentiable."""
    return _unary(x, _sp.erf, ErfBackward0, False)


def erfinv(x):
    """Element-wise inverse error function, differentiable."""
    return _unary(x, _sp.erfinv, ErfinvBackward0, True)
