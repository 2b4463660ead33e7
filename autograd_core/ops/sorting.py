"""topk, sort, argsort: values along a dim in order, with their indices (torch's names and rules).

NaN ranks above +inf, as in torch; ties keep their original order.
"""
from ._base import Node, _gs, _wrap, node1, np
from .extra import _axis, _write_out

__all__ = ["topk", "sort", "argsort"]


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


def _lexsort_axis(primary_key, nan_key, axis):
    """Stable sort along `axis` by `nan_key` (False first) then `primary_key`."""
    order = np.argsort(primary_key, axis=axis, kind="stable")
    second = np.argsort(np.take_along_axis(nan_key, order, axis), axis=axis, kind="stable")
    return np.take_along_axis(order, second, axis)
