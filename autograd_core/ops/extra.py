"""tril / triu, narrow, the `Tensor.new_*` factories and torch's `out=` contract (torch's names and
semantics); `sorting.py` has topk/sort/argsort, `scatter.py` the scatter family.

Attached to `Tensor` by `ops/__init__.py` through `attach()`; the functional forms are exported
as `autograd_core.tril`, `.triu`, `.narrow`, `.topk`, `.sort`, `.argsort`, `.scatter`, `.scatter_add`.
"""
from ._base import D, Node, Tensor, _gs, _wrap, node1, np

__all__ = ["tril", "triu", "narrow", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor"]


# -- tril / triu ----------------------------------------------------------------------------------
class TrilBackward0(Node):
    __slots__ = ("k",)

    def backward(self, g):
        return (np.tril(g, self.k),)


class TriuBackward0(Node):
    __slots__ = ("k",)

    def backward(self, g):
        return (np.triu(g, self.k),)


def _tri(self, diagonal, lower, out):
    if not isinstance(self, Tensor):
        raise TypeError(f"{'tril' if lower else 'triu'}(): argument 'input' must be Tensor, not "
                        f"{type(self).__name__}")
    x = self._data
    if x.ndim < 2:
        raise RuntimeError(f"{'tril' if lower else 'triu'}: input tensor must have at least 2 dimensions")
    k = int(diagonal)
    res = np.tril(x, k) if lower else np.triu(x, k)
    if out is not None:
        return _write_out(out, res, self)
    if self._rg and _gs.enabled:
        n = node1(TrilBackward0 if lower else TriuBackward0, self)
        n.k = k
        return _wrap(res, n)
    return _wrap(res)


def tril(input, diagonal=0, *, out=None):  # noqa: A002 - torch's argument name
    """The lower triangle (elements on and below `diagonal`) of the last two dims; the rest zero."""
    return _tri(input, diagonal, True, out)


def triu(input, diagonal=0, *, out=None):  # noqa: A002
    """The upper triangle (elements on and above `diagonal`) of the last two dims; the rest zero."""
    return _tri(input, diagonal, False, out)


def tril_(self, diagonal=0):
    from .inplace import copy_
    return copy_(self, tril(self, diagonal))


def triu_(self, diagonal=0):
    from .inplace import copy_
    return copy_(self, triu(self, diagonal))


def _write_out(out, res, *inputs):
    """torch's `out=` contract: no autograd through it; `out` is resized to the result and written."""
    if not isinstance(out, Tensor):
        raise TypeError(f"argument 'out' must be Tensor, not {type(out).__name__}")
    if _gs.enabled and (out._rg or any(isinstance(t, Tensor) and t._rg for t in inputs)):
        raise RuntimeError("functions with out=... arguments don't support automatic differentiation, but one of "
                           "the arguments requires grad.")
    od = out._data
    if od.dtype != res.dtype:
        if not np.can_cast(res.dtype, od.dtype, casting="same_kind"):
            raise RuntimeError(f"result type {D._BY_NP[res.dtype]} can't be cast to the desired output type "
                               f"{D._BY_NP[od.dtype]}")
    if od.shape != res.shape:
        out._data = np.empty(res.shape, od.dtype)
    out._data[...] = res
    out._vc[0] += 1
    return out


def _axis(dim, nd):
    n = max(nd, 1)
    d = int(dim)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


# -- narrow -------------------------------------------------------------------------------------
def narrow(input, dim, start, length):  # noqa: A002
    """`input[..., start:start+length, ...]` along `dim`: a view, as torch's narrow."""
    x = input._data
    if x.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    axis = _axis(dim, x.ndim)
    start = int(start)
    length = int(length)
    size = x.shape[axis]
    if start < 0:
        start += size
    if not 0 <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return input[(slice(None),) * axis + (slice(start, start + length),)]


# -- new_* factories ---------------------------------------------------------------------------
def _new_args(self, size, dtype, device, requires_grad):
    from ..creation import _check_device, _size
    _check_device(device)
    npd = self._data.dtype if dtype is None else D.to_numpy_dtype(dtype)
    return _size(size), npd


def _finish(arr, requires_grad):
    t = _wrap(arr)
    if requires_grad:
        t.requires_grad = True
    return t


def new_zeros(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """Zeros of `size` with this tensor's dtype (and device) unless given."""
    shape, npd = _new_args(self, size, dtype, device, requires_grad)
    return _finish(np.zeros(shape, npd), requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    shape, npd = _new_args(self, size, dtype, device, requires_grad)
    return _finish(np.ones(shape, npd), requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    # Uninitialised in torch; zeros here (never garbage).
    shape, npd = _new_args(self, size, dtype, device, requires_grad)
    return _finish(np.zeros(shape, npd), requires_grad)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None,
             pin_memory=False):
    shape, npd = _new_args(self, (size,) if isinstance(size, (int, np.integer)) else (tuple(size),), dtype,
                           device, requires_grad)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _finish(np.full(shape, fill_value, npd), requires_grad)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """A new leaf copying `data`, with this tensor's dtype unless `dtype` is given (torch's rule)."""
    from ..creation import _check_device, tensor
    _check_device(device)
    if isinstance(data, Tensor):
        import warnings
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
                      "sourceTensor.detach().clone().requires_grad_(True), rather than tensor.new_tensor(sourceTensor).",
                      UserWarning, stacklevel=2)
        data = data._data
    return tensor(data, dtype=self.dtype if dtype is None else dtype, requires_grad=requires_grad)


def attach(T):
    """Bind the methods of this file, `sorting.py` and `scatter.py` on `Tensor`."""
    from .scatter import scatter, scatter_, scatter_add, scatter_add_
    from .sorting import argsort, sort, topk
    T.tril = tril
    T.triu = triu
    T.tril_ = tril_
    T.triu_ = triu_
    T.topk = topk
    T.sort = sort
    T.argsort = argsort
    T.scatter = scatter
    T.scatter_ = scatter_
    T.scatter_add = scatter_add
    T.scatter_add_ = scatter_add_
    from ..creation import bernoulli, multinomial
    T.multinomial = multinomial
    T.bernoulli = bernoulli
    T.narrow = narrow
    T.new_zeros = new_zeros
    T.new_ones = new_ones
    T.new_full = new_full
    T.new_empty = new_empty
    T.new_tensor = new_tensor
