"""Spellings real PyTorch programs use that the core ops do not take directly.

- `torch.autograd.Variable` (the legacy wrapper: a Tensor sharing the data, detached),
- `torch.set_default_device` / `torch.get_default_device` (the CPU is the only device),
- `torch.matmul(input=, other=, out=)`, `torch.mul(input, other, out=)` keyword forms.

The fast paths (`a @ b`, `a * b`, `a.matmul(b)`) stay the ops in `ops/arith.py`; these wrappers
only serve the functional `torch.<op>(...)` calls.
"""
import warnings

from . import grad_mode as _gm
from .ops import arith as _arith
from .ops.extra import _write_out
from .tensor import Tensor, _require_cpu, _wrap, device

__all__ = ["Variable", "set_default_device", "get_default_device", "matmul", "mul"]

_default_device = [device("cpu")]


def set_default_device(dev):
    """Accepts the CPU (the only device that holds tensors here); anything else raises at once."""
    if dev is None:
        _default_device[0] = device("cpu")
        return
    _default_device[0] = _require_cpu(dev)


def get_default_device():
    return _default_device[0]


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """`Variable(tensor, requires_grad=False)`: a leaf sharing `tensor`'s data (torch's legacy API).

    Every Tensor is a Variable (`isinstance(t, Variable)` holds), as in torch since 0.4.
    """

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if data is None:
            import numpy as np
            from ._dtype import get_default_dtype
            data = _wrap(np.zeros((0,), get_default_dtype().np))
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad = True
        return out


def _binary(name, fn, args, kwargs):
    out = kwargs.pop("out", None)
    names = ("input", "other")
    vals = list(args)
    for n in names[len(vals):]:
        if n not in kwargs:
            raise TypeError(f"{name}() missing required argument '{n}'")
        vals.append(kwargs.pop(n))
    if kwargs:
        raise TypeError(f"{name}() got unexpected keyword arguments {sorted(kwargs)}")
    if len(vals) != 2:
        raise TypeError(f"{name}() takes 2 positional arguments but {len(vals)} were given")
    a, b = vals
    if not isinstance(a, Tensor):
        if name == "matmul":
            raise TypeError(f"matmul(): argument 'input' must be Tensor, not {type(a).__name__}")
        a, b = b, a  # torch.mul(2, t)
        if not isinstance(a, Tensor):
            raise TypeError(f"{name}(): expected a Tensor argument")
    if out is None:
        return fn(a, b)
    with _gm.no_grad():
        res = fn(a, b)
    return _write_out(out, res._data, a, b)


def matmul(*args, **kwargs):
    """torch.matmul(input, other, *, out=None): `input=`/`other=` keywords and `out=` accepted."""
    if len(args) == 2 and not kwargs:
        return _arith.matmul(*args)
    return _binary("matmul", _arith.matmul, args, kwargs)


def mul(*args, **kwargs):
    """torch.mul(input, other, *, out=None)."""
    if len(args) == 2 and not kwargs:
        a, b = args
        return _arith.mul(a, b) if isinstance(a, Tensor) else _arith.mul(b, a)
    return _binary("mul", _arith.mul, args, kwargs)
