"""The helpers every backward formula uses: saved inputs and outputs as Tensors, recorded
un-broadcast and scatter, decomposed gradients, the registration decorator and the fallback
`backward_t` of nodes without a formula (see the package docstring)."""
import numpy as np

from .._engine import run_backward_graph
from .._node import Node, next_seq, reduce_to_shape
from ..grad_mode import _state as _gs
from ..ops import arith as A, indexing as I, shape as S
from ..ops._base import _obj_new, node1
from ..tensor import _wrap


def _inp(node, i, arr):
    """Input `i` of `node` as a Tensor on `arr` (its saved data) that carries the input's history."""
    e = node.next_edges[i]
    if e is None:
        return _wrap(arr)
    tgt, nr = e
    if not tgt._is_node:  # a leaf that requires grad
        if arr.dtype != tgt._data.dtype:
            return S.to(tgt, arr.dtype)
        return tgt
    t = _wrap(arr, tgt)
    t._nr = nr
    return t


def _outp(node, arr):
    """The (single) output of `node` on its saved array, with `node` as grad_fn."""
    return _wrap(arr, node)


def _c(arr, dt=None):
    """A constant Tensor (no history)."""
    a = np.asarray(arr)
    if dt is not None and a.dtype != dt:
        a = a.astype(dt)
    return _wrap(a)


class SumToSizeBackward(Node):
    """Backward of `sum_to` (the differentiable un-broadcast): broadcast back."""

    __slots__ = ("shape",)

    def backward(self, g):
        return (np.broadcast_to(g, self.shape),)

    def backward_t(self, g):
        return (S.expand(g, self.shape),)


SumToSizeBackward.__name__ = SumToSizeBackward.__qualname__ = "SumBackward1"


def sum_to(t, shape):
    """`t` summed over broadcast axes down to `shape` (recorded); `reduce_to_shape` does the work."""
    shape = tuple(shape)
    if t._data.shape == shape:
        return t
    out = np.asarray(reduce_to_shape(t._data, shape))
    if t._rg and _gs.enabled:
        n = node1(SumToSizeBackward, t)
        n.shape = t._data.shape
        return _wrap(out, n)
    return _wrap(out)


class IndexPutBackward(Node):
    """Backward of `index_scatter`: pick the scattered entries again."""

    __slots__ = ("key",)

    def backward(self, g):
        return (np.array(g[self.key]),)

    def backward_t(self, g):
        return (I.getitem(g, self.key),)


IndexPutBackward.__name__ = IndexPutBackward.__qualname__ = "IndexPutBackward0"


def index_scatter(g, shape, key, dup):
    """zeros(shape) with g placed (dup: added) at NumPy key `key`; recorded."""
    d = g._data
    out = np.zeros(shape, dtype=d.dtype)
    if dup:
        np.add.at(out, key, d)
    else:
        out[key] = d
    if g._rg and _gs.enabled:
        n = node1(IndexPutBackward, g)
        n.key = key
        return _wrap(out, n)
    return _wrap(out)


def _expand_back(g, axes, keepdim, shape):
    if not keepdim and axes:
        for a in sorted(axes):
            g = S.unsqueeze(g, a)
    return S.expand(g, shape)


def _unsq(t, axes, keepdim):
    if not keepdim and axes:
        for a in sorted(axes):
            t = S.unsqueeze(t, a)
    return t




def _along_key(idx, axis):
    full = list(np.indices(idx.shape, sparse=True))
    full[axis] = idx
    return tuple(full)



class _AliasBackward(Node):
    __slots__ = ()

    def backward(self, g):
        return (g,)

    def backward_t(self, g):
        return (g,)


_AliasBackward.__name__ = _AliasBackward.__qualname__ = "AliasBackward0"


def decomposed_grads(inputs, f, grad):
    """Partial derivatives of `f(*inputs)` (Tensor ops) with respect to each input, times `grad`.

    The backward formula of a fused node written as its forward decomposition: each input gets
    its own alias node (so two inputs on the same tensor stay apart) and the sweep stops there.
    """
    aliases = []
    capture = {}
    for x in inputs:
        if x is None or not x._rg:
            aliases.append(x)
            continue
        a = _wrap(x._data, node1(_AliasBackward, x))
        aliases.append(a)
        capture[(a._fn, 0)] = None
    out = f(*aliases)
    if capture and out._rg:
        run_backward_graph([out], [grad], capture=capture, accumulate=False, stop=True)
    res = []
    for a in aliases:
        if a is None or not a._rg:
            res.append(None)
        else:
            res.append(capture.get((a._fn, 0)))
    return tuple(res)


class NotImplementedBackward(Node):
    """Stands for a first-order gradient whose own derivative is not implemented."""

    __slots__ = ("what",)

    def backward(self, g):
        raise RuntimeError(f"the derivative of {self.what}'s backward (double backward) is not implemented "
                           "in autograd_core")

    backward_t = backward


def _no_double_backward(self, g):
    """Fallback `backward_t`: NumPy gradients wrapped so that differentiating them again raises."""
    multi = self._multi
    gd = [None if x is None else x._data for x in g] if multi else g._data
    res = self.backward(gd)
    srcs = [x for x in (g if multi else [g]) if x is not None and x._rg]
    edges = tuple(x._edge() for x in srcs) + tuple(e for e in self.next_edges if e is not None)
    out = []
    for r in res:
        if r is None:
            out.append(None)
            continue
        r = np.asarray(r)
        if edges:
            n = _obj_new(NotImplementedBackward)
            n.seq = next_seq()
            n.saved = None
            n.vc = ()
            n.next_edges = edges
            n.what = type(self).__name__
            out.append(_wrap(r, n))
        else:
            out.append(_wrap(r))
    return tuple(out)


Node.backward_t = _no_double_backward


def _reg(cls):
    def deco(fn):
        cls.backward_t = fn
        return fn
    return deco


def _zero(g):
    return A.mul(g, 0.0)

