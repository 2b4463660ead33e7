"""Double backward of the shape, indexing and in-place ops (ops/shape.py, ops/indexing.py,
ops/inplace.py): views, joins and splits, copies, indexing, gather, masked fill, copy_."""
import numpy as np

from ..ops import arith as A, indexing as I, pointwise as P, reduction as R, shape as S
from ._base import _along_key, _c, _reg, _zero, index_scatter, sum_to


@_reg(S._ReshapeBack)
def _reshape(self, g):
    return (S.reshape(g, self.shape),)


@_reg(S.TransposeBackward0)
def _transpose(self, g):
    return (S.transpose(g, self.d0, self.d1),)


@_reg(S.PermuteBackward0)
def _permute(self, g):
    return (S.permute(g, self.inv),)


@_reg(S.ExpandBackward0)
def _expand(self, g):
    return (sum_to(g, self.shape),)


@_reg(S.RepeatBackward0)
def _repeat(self, g):
    inter, axes = self.split_axes()
    return (S.reshape(R.sum(S.reshape(g, inter), axes), self.shape),)


@_reg(S.CloneBackward0)
def _clone(self, g):
    return (g,)


@_reg(S.ToCopyBackward0)
def _tocopy(self, g):
    return (S.to(g, self.dtype),)


@_reg(S.CatBackward0)
def _cat(self, g):
    ax = self.axis
    starts = [0] + [int(b) for b in self.bounds]
    ends = [int(b) for b in self.bounds] + [g._data.shape[ax]]
    out = []
    for s, e, edge in zip(starts, ends, self.next_edges):
        out.append(None if edge is None else I.getitem(g, (slice(None),) * ax + (slice(s, e),)))
    return tuple(out)


@_reg(S.StackBackward0)
def _stack(self, g):
    ax = self.axis
    return tuple(None if e is None else I.getitem(g, (slice(None),) * ax + (i,))
                 for i, e in enumerate(self.next_edges))


def _fill_parts(self, grads):
    return [g if g is not None else _c(np.zeros(s, self.dtype)) for g, s in zip(grads, self.shapes)]


@_reg(S.SplitBackward0)
def _split(self, grads):
    return (S.cat(_fill_parts(self, grads), self.axis),)


@_reg(S.UnbindBackward0)
def _unbind(self, grads):
    return (S.stack(_fill_parts(self, grads), self.axis),)


@_reg(S.FlipBackward0)
def _flip(self, g):
    return (S.flip(g, self.axes),)


@_reg(S.RollBackward0)
def _roll(self, g):
    return (S.roll(g, tuple(-s for s in self.shifts), self.axes),)



# indexing and in-place
@_reg(I._BasicIndexBackward)
def _basic_index(self, g):
    return (index_scatter(g, self.shape, self.key, False),)


@_reg(I.IndexBackward0)
def _index(self, g):
    return (index_scatter(g, self.shape, self.key, self.dup),)


@_reg(I.CopySlices)
def _copyslices(self, g):
    eb, ev = self.next_edges
    gb = gv = None
    if eb is not None:
        mask = np.ones(g._data.shape, g._data.dtype)
        mask[self.key] = 0
        gb = A.mul(g, _c(mask))
    if ev is not None:
        gv = sum_to(I.getitem(g, self.key), self.vshape)
        if gv._data.dtype != self.dtype:
            gv = S.to(gv, self.dtype)
    return gb, gv


@_reg(I.GatherBackward0)
def _gather(self, g):
    return (index_scatter(g, self.shape, _along_key(self.saved, self.axis), True),)


@_reg(I.MaskedFillBackward0)
def _masked_fill(self, g):
    mask = _c(self.saved)
    es, ev = self.next_edges
    z = _c(np.zeros((), g._data.dtype))
    gs = P.where(mask, z, g) if es is not None else None
    gv = None
    if ev is not None:
        gv = S.reshape(R.sum(P.where(mask, g, z)), self.sv)
    return gs, gv


def _register_inplace():
    from ..ops import inplace as IP

    @_reg(IP.CopyBackwards)
    def _copy(self, g):
        es, esrc = self.next_edges
        gsrc = None
        if esrc is not None:
            gsrc = sum_to(g, self.ss)
            if gsrc._data.dtype != self.dtype:
                gsrc = S.to(gsrc, self.dtype)
        return (_zero(g) if es is not None else None), gsrc


_register_inplace()
