"""`Parameter`: a leaf tensor that a `Module` registers as one of its learnable weights."""
import numpy as np

from ..tensor import Tensor, _wrap
from .. import _dtype as D

__all__ = ["Parameter", "Buffer"]

_new = object.__new__


class Parameter(Tensor):
    """A `Tensor` that, assigned as a `Module` attribute, is listed in `parameters()`.

    `Parameter(data=None, requires_grad=True)`: `data` (any shape) is shared, not copied, as in
    torch; `None` gives an empty float tensor. A Parameter is always a graph leaf.
    """

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            arr = np.empty((0,), dtype=D.get_default_dtype().np)
            vc = [0]
        elif isinstance(data, Tensor):
            arr, vc = data._data, data._vc
        else:
            raise TypeError(f"Parameter: data must be a Tensor or None, got {type(data).__name__}; "
                            "wrap arrays with autograd_core.tensor(...) first")
        p = _new(cls)
        p._data = arr
        p._fn = None
        p._grad = None
        p._vc = vc
        p._nr = 0
        p._base = None
        p._extra = None
        p._rg = False
        if requires_grad:
            # The Tensor setter rejects integer data with torch's message.
            p.requires_grad = True
        return p

    def __init__(self, data=None, requires_grad=True):
        # All the work happens in __new__; Tensor.__init__ would rebuild the array.
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        out = Parameter(_wrap(self._data.copy()), self._rg)
        if self._grad is not None:
            out._grad = _wrap(self._grad._data.copy())
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol):
        return Tensor.__reduce_ex__(self, protocol)


class Buffer(Tensor):
    """torch.nn.Buffer: marks a tensor to be registered as a buffer when assigned to a Module.

    `Buffer(data, persistent=True)`; assigning `module.name = Buffer(t)` is `register_buffer`.
    """

    __slots__ = ()

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            arr, vc = np.empty((0,), dtype=D.get_default_dtype().np), [0]
        elif isinstance(data, Tensor):
            arr, vc = data._data, data._vc
        else:
            raise TypeError(f"Buffer: data must be a Tensor or None, got {type(data).__name__}")
        b = _new(cls)
        b._data, b._fn, b._grad, b._vc, b._nr, b._base, b._rg = arr, None, None, vc, 0, None, False
        b._extra = {"persistent": bool(persistent)}
        return b

    def __init__(self, data=None, *, persistent=True):
        pass
