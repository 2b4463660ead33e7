"""Tensor dtypes with PyTorch's names (`autograd_core.float32` prints as `torch.float32`)."""
import builtins

import numpy as np

__all__ = ["dtype", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
           "half", "float", "double", "short", "int", "long", "get_default_dtype", "set_default_dtype",
           "to_numpy_dtype", "from_numpy_dtype", "promote_types", "result_type"]


class dtype:
    """A tensor element type; wraps a NumPy dtype."""

    __slots__ = ("name", "np", "is_floating_point", "is_signed", "itemsize", "_category")

    def __init__(self, name, np_dtype):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = self.np.kind == "f"
        self.is_signed = self.np.kind in "if"
        self.itemsize = self.np.itemsize
        # Type-promotion category, as torch: bool < integer < floating.
        self._category = {"b": 0, "u": 1, "i": 1, "f": 2}[self.np.kind]

    @property
    def is_complex(self):
        return False

    def __repr__(self):
        return "torch." + self.name

    def __reduce__(self):
        # Never pickled by this library; keep the default protocol from exposing internals.
        return (_lookup_name, (self.name,))


float16 = dtype("float16", np.float16)
float32 = dtype("float32", np.float32)
float64 = dtype("float64", np.float64)
int8 = dtype("int8", np.int8)
int16 = dtype("int16", np.int16)
int32 = dtype("int32", np.int32)
int64 = dtype("int64", np.int64)
uint8 = dtype("uint8", np.uint8)
bool = dtype("bool", np.bool_)  # noqa: A001 - torch.bool
half, float, double = float16, float32, float64  # noqa: A001
short, int, long = int16, int32, int64  # noqa: A001

_ALL = (float16, float32, float64, int8, int16, int32, int64, uint8, bool)
_BY_NP = {d.np: d for d in _ALL}
_BY_NAME = {d.name: d for d in _ALL}
_default_float = float32


def _lookup_name(name):
    return _BY_NAME[name]


def from_numpy_dtype(np_dtype):
    """The tensor dtype for a NumPy dtype; TypeError for types a tensor cannot hold."""
    d = _BY_NP.get(np.dtype(np_dtype))
    if d is None:
        raise TypeError(f"can't convert NumPy arrays of type {np.dtype(np_dtype)}; supported: "
                        + ", ".join(x.name for x in _ALL))
    return d


def to_numpy_dtype(d):
    """NumPy dtype for a tensor dtype, a NumPy dtype, a Python type or a name."""
    if isinstance(d, dtype):
        return d.np
    if d is builtins.float:
        return _default_float.np
    if d is builtins.int:
        return int64.np
    if d is builtins.bool:
        return bool.np
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d].np
    return from_numpy_dtype(d).np


def get_default_dtype():
    return _default_float


def set_default_dtype(d):
    global _default_float
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d!r}")
    _default_float = d


def promote_types(a, b):
    """The smallest dtype both `a` and `b` convert to safely (torch.promote_types)."""
    return _BY_NP[np.promote_types(a.np, b.np)]


def result_type(operands):
    """torch's type promotion for a binary/n-ary op.

    `operands` is a sequence of (dtype_or_None, kind) with kind 2 = dimensioned tensor,
    1 = zero-dim tensor, 0 = Python scalar (its dtype gives only the category:
    bool/int64/default float). Within the highest category present, the highest-priority
    operands decide the dtype; a Python float promotes integer tensors to the default float.
    """
    best_cat = max(d._category for d, _ in operands)
    for prio in (2, 1, 0):
        ds = [d for d, k in operands if k == prio and d._category == best_cat]
        if ds:
            if prio == 0:
                return _default_float if best_cat == 2 else (int64 if best_cat == 1 else bool)
            out = ds[0]
            for d in ds[1:]:
                out = promote_types(out, d)
            return out
    raise AssertionError("unreachable: empty operand list")
