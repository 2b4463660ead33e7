"""tril / triu, topk, sort / argsort, scatter / scatter_add, narrow and the `Tensor.new_*` factories
(torch's names and semantics).

Attached to `Tensor` by `ops/__init__.py` through `attach()`; the functional forms are exported
as `autograd_core.tril`, `autograd_core.triu`, `autograd_core.topk`, `autograd_core.narrow`.
"""
from ._base import D, Node, Tensor, _gs, _wrap, node1, np

__all__ = ["tril", "triu", "topk", "sort", "argsort", "scatter", "scatter_add", "narrow", "new_zeros", "new_ones",
           "new_full", "new_empty", "new_tensor"]


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


# -- topk ---------------------------------------------------------------------------------------
class TopkBackward0(Node):
    __slots__ = ("axis", "shape")

    def backward(self, g):
        gi = np.zeros(self.shape, dtype=g.dtype)
        np.put_along_axis(gi, self.saved, g, axis=self.axis)
        return (gi,)


class _TopkResult(tuple):
    """torch.return_types.topk: (values, indices) with named fields."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):  # noqa: A002
    """The `k` largest (or smallest) elements along `dim`, as (values, indices).

    NaN counts as larger than any number, as in torch. The order among equal values is not
    specified by torch either; with `sorted=False` the elements still come sorted here.
    """
    x = input._data
    nd = x.ndim
    axis = _axis(dim, nd)
    k = int(k)
    if nd == 0:
        if k not in (0, 1):
            raise RuntimeError("selected index k out of range")
        v, i = topk(input.reshape(1), k, 0, largest, sorted)
        return _TopkResult((v.reshape(()), i.reshape(()))) if k else _TopkResult((v, i))
    if not 0 <= k <= x.shape[axis]:
        raise RuntimeError("selected index k out of range")
    order = _order(x, axis, largest)
    idx = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    vals = np.take_along_axis(x, idx, axis)
    if out is not None:
        _write_out(out[0], vals, input)
        _write_out(out[1], idx)
        return _TopkResult((out[0], out[1]))
    if input._rg and _gs.enabled:
        n = node1(TopkBackward0, input)
        n.saved = idx
        n.axis = axis
        n.shape = x.shape
        return _TopkResult((_wrap(vals, n), _wrap(idx)))
    return _TopkResult((_wrap(vals), _wrap(idx)))


def _order(x, axis, descending):
    """Stable sorting permutation along `axis`; NaN ranks above +inf (last ascending, first descending)."""
    if descending and x.dtype.kind == "f":
        nan = np.isnan(x)
        return _lexsort_axis(np.where(nan, 0.0, -x), ~nan, axis)
    if descending:
        return np.argsort(-(x.astype(np.int64)) if x.dtype.kind in "biu" else -x, axis=axis, kind="stable")
    return np.argsort(x, axis=axis, kind="stable")


class SortBackward0(TopkBackward0):
    __slots__ = ()


class _SortResult(_TopkResult):
    """torch.return_types.sort: (values, indices) with named fields."""


def sort(input, dim=-1, descending=False, stable=False, *, out=None):  # noqa: A002
    """Values along `dim` in order, with the indices they came from (ties keep their order)."""
    x = input._data
    if x.ndim == 0:
        return _SortResult((input.clone() if input._rg else _wrap(x.copy()), _wrap(np.zeros((), np.int64))))
    axis = _axis(dim, x.ndim)
    idx = _order(x, axis, descending).astype(np.int64)
    vals = np.take_along_axis(x, idx, axis)
    if input._rg and _gs.enabled:
        n = node1(SortBackward0, input)
        n.saved = idx
        n.axis = axis
        n.shape = x.shape
        return _SortResult((_wrap(vals, n), _wrap(idx)))
    return _SortResult((_wrap(vals), _wrap(idx)))


def argsort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    x = input._data
    if x.ndim == 0:
        return _wrap(np.zeros((), np.int64))
    return _wrap(_order(x, _axis(dim, x.ndim), descending).astype(np.int64))


# -- scatter -------------------------------------------------------------------------------------
def _scatter_key(index, axis):
    """Full NumPy index tuple addressing out[..., index[i,j,..], ...] for every element of `index`."""
    grids = list(np.indices(index.shape, sparse=True))
    grids[axis] = index
    return tuple(grids)


def _check_scatter(self, dim, index, src):
    x = self._data
    if not isinstance(index, Tensor) or index._data.dtype.kind not in "iu":
        raise RuntimeError("scatter(): Expected dtype int64 for index")
    idx = index._data.astype(np.int64, copy=False)
    if x.ndim == 0:
        raise RuntimeError("scatter on a 0-d tensor is not supported by autograd_core: reshape it to (1,)")
    if idx.ndim == 0:  # torch takes a scalar index as one position
        idx = idx.reshape((1,) * x.ndim)
    if idx.ndim != x.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    axis = _axis(dim, x.ndim)
    if idx.size and (idx.min() < -x.shape[axis] or idx.max() >= x.shape[axis]):
        raise RuntimeError(f"index {int(idx.max())} is out of bounds for dimension {axis} with size "
                           f"{x.shape[axis]}")
    for d in range(idx.ndim):
        if d != axis and idx.shape[d] > x.shape[d]:
            raise RuntimeError(f"Expected index {list(idx.shape)} to be smaller than self {list(x.shape)} apart "
                               f"from dimension {axis}")
        if isinstance(src, Tensor) and idx.shape[d] > src._data.shape[d]:
            raise RuntimeError(f"Expected index {list(idx.shape)} to be smaller than src {list(src.shape)}")
    return idx, axis


class ScatterBackward0(Node):
    """out = input with src written at index: input's gradient is zero where written, src's gathers."""

    __slots__ = ("key", "sshape", "ishape")

    def backward(self, g):
        ei, es = self.next_edges
        gi = gs = None
        if ei is not None:
            gi = g.copy()
            gi[self.key] = 0
        if es is not None:
            gs = np.zeros(self.sshape, g.dtype)
            gs[tuple(slice(0, n) for n in self.ishape)] = g[self.key]
        return gi, gs


class ScatterBackward1(Node):
    __slots__ = ("key",)

    def backward(self, g):
        gi = g.copy()
        gi[self.key] = 0
        return (gi,)


class ScatterAddBackward0(Node):
    __slots__ = ("key", "sshape", "ishape")

    def backward(self, g):
        ei, es = self.next_edges
        gs = None
        if es is not None:
            gs = np.zeros(self.sshape, g.dtype)
            gs[tuple(slice(0, n) for n in self.ishape)] = g[self.key]
        return (g if ei is not None else None), gs


def _edge(t):
    return t._edge() if isinstance(t, Tensor) else None


def scatter(input, dim, index, src=None, *, value=None, reduce=None):  # noqa: A002
    """A copy of `input` with `src[i][j]` (or the scalar `value`) written at `index` along `dim`.

    `reduce="add"` / `"multiply"` combine with the existing values instead (torch's legacy form).
    """
    if src is None and value is None:
        raise TypeError("scatter() needs `src` (a tensor) or `value` (a number)")
    if src is not None and not isinstance(src, Tensor):
        value, src = src, None
    x = input._data
    idx, axis = _check_scatter(input, dim, index, src)
    key = _scatter_key(idx, axis)
    out = x.copy()
    if src is not None:
        vals = src._data[tuple(slice(0, n) for n in idx.shape)].astype(x.dtype, copy=False)
    else:
        vals = np.asarray(value, x.dtype)
    if reduce is None:
        out[key] = vals
    elif reduce == "add":
        np.add.at(out, key, np.broadcast_to(vals, idx.shape))
    elif reduce == "multiply":
        np.multiply.at(out, key, np.broadcast_to(vals, idx.shape))
    else:
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce!r}")
    needs = _gs.enabled and (input._rg or (src is not None and src._rg))
    if not needs:
        return _wrap(out)
    if reduce is not None:
        raise RuntimeError("scatter(reduce=...) is not differentiable in autograd_core; use scatter_add")
    if src is None:
        n = node1(ScatterBackward1, input)
        n.key = key
        return _wrap(out, n)
    from ._base import node
    n = node(ScatterBackward0, (_edge(input), _edge(src)))
    n.key, n.sshape, n.ishape = key, src._data.shape, idx.shape
    return _wrap(out, n)


def scatter_add(input, dim, index, src):  # noqa: A002
    """A copy of `input` plus `src` summed into the positions `index` along `dim` (repeats add up)."""
    x = input._data
    idx, axis = _check_scatter(input, dim, index, src)
    key = _scatter_key(idx, axis)
    out = x.copy()
    np.add.at(out, key, src._data[tuple(slice(0, n) for n in idx.shape)].astype(x.dtype, copy=False))
    if _gs.enabled and (input._rg or src._rg):
        from ._base import node
        n = node(ScatterAddBackward0, (_edge(input), _edge(src)))
        n.key, n.sshape, n.ishape = key, src._data.shape, idx.shape
        return _wrap(out, n)
    return _wrap(out)


def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
    from .inplace import copy_
    return copy_(self, scatter(self, dim, index, src, value=value, reduce=reduce))


def scatter_add_(self, dim, index, src):
    from .inplace import copy_
    return copy_(self, scatter_add(self, dim, index, src))


def _lexsort_axis(primary_key, nan_key, axis):
    """Stable sort along `axis` by `nan_key` (False first) then `primary_key`."""
    order = np.argsort(primary_key, axis=axis, kind="stable")
    second = np.argsort(np.take_along_axis(nan_key, order, axis), axis=axis, kind="stable")
    return np.take_along_axis(order, second, axis)


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
    """Bind the methods on `Tensor`."""
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
