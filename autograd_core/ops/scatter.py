"""scatter / scatter_add (and the in-place forms): write or add values at index positions along a dim."""
from ._base import Node, Tensor, _gs, _wrap, node, node1, np
from .extra import _axis

__all__ = ["scatter", "scatter_add", "scatter_", "scatter_add_"]


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
