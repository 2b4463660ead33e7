"""Shape kernels: reshape, transpose, expand, tile, basic slicing, concat, stack, split (views where possible).
"""
import math
from functools import partial

import numpy as np

from ._ctx import _out_dtype, _view_or_copy

# ---------------------------------------------------------------------------------------------
# shapes
def _shape_attr(c, name="shape"):
    s = c.attr(name, "ints")
    if any(v < 0 for v in s) or len(s) > 32:
        c.fail(f"bad shape {s}")
    return tuple(s)


def build_reshape(c):
    c.n_in(1)
    x = c.need(0)
    shape = _shape_attr(c)
    if math.prod(shape) != x.size:
        c.fail(f"cannot reshape {x.shape} to {shape}")
    return _view_or_copy(c, 0, x, shape)


def build_transpose(c):
    c.n_in(1)
    x = c.need(0)
    perm = c.attr("perm", "ints")
    if sorted(perm) != list(range(x.ndim)):
        c.fail(f"perm {perm} is not a permutation of {x.ndim} axes")
    c.alias(0, x.transpose(perm))
    return []


def build_expand(c):
    c.n_in(1)
    x = c.need(0)
    shape = _shape_attr(c)
    try:
        v = np.broadcast_to(x, shape)
    except ValueError:
        c.fail(f"cannot expand {x.shape} to {shape}")
    # no memory now, but a consumer may copy the broadcast view (np.dot does): counted as if it did
    c.charge(v.size * v.dtype.itemsize, "an expanded view")
    c.alias(0, v)
    return []


def build_tile(c):
    c.n_in(1)
    x = c.need(0)
    reps = tuple(c.attr("repeats", "ints"))
    if len(reps) < x.ndim or min(reps, default=1) < 0:
        c.fail("bad repeats")
    xs = (1,) * (len(reps) - x.ndim) + x.shape
    o = c.out(0, tuple(a * r for a, r in zip(xs, reps)), x.dtype)
    # o viewed as (r0, s0, r1, s1, ...) receives x broadcast along the r axes
    v = o.reshape(tuple(v for pair in zip(reps, xs) for v in pair))
    src = x.reshape(tuple(v for s in xs for v in (1, s)))
    return [partial(np.copyto, v, src)]


def build_getitem(c):
    """Basic indexing: per-axis [start, stop, step] (step > 0), then a reshape that drops the
    integer-indexed axes and inserts the None axes."""
    c.n_in(1)
    x = c.need(0)
    sl = c.attr("slices", "ints")
    if len(sl) != 3 * x.ndim:
        c.fail("slices must hold start, stop, step for every axis")
    key = []
    for ax in range(x.ndim):
        a, b, s = sl[3 * ax:3 * ax + 3]
        if s < 1 or not (0 <= a <= x.shape[ax]) or not (0 <= b <= x.shape[ax]):
            c.fail(f"bad slice {a}:{b}:{s} on axis {ax} of size {x.shape[ax]}")
        key.append(slice(a, b, s))
    v = x[tuple(key)]
    shape = _shape_attr(c)
    if math.prod(shape) != v.size:
        c.fail(f"cannot reshape {v.shape} to {shape}")
    return _view_or_copy(c, 0, v, shape)


def build_concat(c):
    if len(c.ins) < 1:
        c.fail("needs inputs")
    xs = [c.need(i) for i in range(len(c.ins))]
    axis = c.axis(c.attr("axis", "int"), xs[0].ndim)
    base = xs[0].shape
    for a in xs:
        if a.ndim != len(base) or a.shape[:axis] != base[:axis] or a.shape[axis + 1:] != base[axis + 1:]:
            c.fail(f"shapes {[a.shape for a in xs]} cannot be joined along axis {axis}")
    total = sum(a.shape[axis] for a in xs)
    o = c.out(0, base[:axis] + (total,) + base[axis + 1:], _out_dtype(c, xs[0].dtype))
    th = []
    pos = 0
    for a in xs:
        k = a.shape[axis]
        idx = (slice(None),) * axis + (slice(pos, pos + k),)
        th.append(partial(np.copyto, o[idx], a, casting="unsafe"))
        pos += k
    return th


def build_stack(c):
    if len(c.ins) < 1:
        c.fail("needs inputs")
    xs = [c.need(i) for i in range(len(c.ins))]
    axis = c.axis(c.attr("axis", "int"), xs[0].ndim + 1)
    if any(a.shape != xs[0].shape for a in xs):
        c.fail("stack needs equal shapes")
    shape = xs[0].shape[:axis] + (len(xs),) + xs[0].shape[axis:]
    o = c.out(0, shape, _out_dtype(c, xs[0].dtype))
    return [partial(np.copyto, o[(slice(None),) * axis + (i,)], a, casting="unsafe") for i, a in enumerate(xs)]


def build_split(c):
    c.n_in(1)
    x = c.need(0)
    axis = c.axis(c.attr("axis", "int"), x.ndim)
    sizes = c.attr("sizes", "ints")
    if sum(sizes) != x.shape[axis] or min(sizes, default=0) < 0 or len(sizes) != len(c._outs):
        c.fail(f"split sizes {sizes} do not match axis {axis} of {x.shape} / {len(c._outs)} outputs")
    pos = 0
    for i, k in enumerate(sizes):
        c.alias(i, x[(slice(None),) * axis + (slice(pos, pos + k),)])
        pos += k
    return []


KERNELS = {
    "reshape": build_reshape, "transpose": build_transpose, "expand": build_expand, "tile": build_tile,
    "getitem": build_getitem, "concat": build_concat, "stack": build_stack, "split": build_split,
}
