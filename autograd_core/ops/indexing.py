"""Indexing: `x[key]` (views for basic keys, scatter-add backward for advanced keys), `x[key] = v`,
gather, index_select, masked_fill."""
from ._base import Node, Tensor, _gs, _new, _wrap, node1, np, operand, reduce_to_shape
from .shape import register_view

_BASIC = (int, slice, type(None), type(Ellipsis))


def _component(k):
    if isinstance(k, Tensor):
        d = k._data
        if d.dtype.kind == "f":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if d.ndim == 0 and d.dtype.kind in "iu":
            return int(d)
        return d
    if isinstance(k, (list, tuple, range)):
        arr = np.asarray([c._data if isinstance(c, Tensor) else c for c in k]) if k else np.zeros(0, np.int64)
        if arr.dtype.kind == "f":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return arr
    if isinstance(k, np.ndarray):
        return k
    if isinstance(k, (bool, np.bool_)):
        return np.asarray(k)
    if isinstance(k, (np.integer,)):
        return int(k)
    if isinstance(k, _BASIC):
        return k
    raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
                     f"indices (got {type(k).__name__})")


def normalize_key(key):
    """NumPy key for `key`, and whether it uses advanced (array) indexing."""
    if isinstance(key, tuple):
        k = tuple(_component(c) for c in key)
        adv = any(isinstance(c, np.ndarray) for c in k)
    else:
        k = _component(key)
        adv = isinstance(k, np.ndarray)
    return k, adv


def _basic_name(k):
    last = k[-1] if isinstance(k, tuple) and k else k
    if isinstance(last, int):
        return SelectBackward0
    if isinstance(last, slice):
        return SliceBackward0
    if last is None:
        return _UnsqueezeIndexBackward
    return AliasBackward0


class _BasicIndexBackward(Node):
    __slots__ = ("shape", "dtype", "key")

    def backward(self, g):
        gi = np.zeros(self.shape, dtype=g.dtype)
        gi[self.key] = g
        return (gi,)


class SelectBackward0(_BasicIndexBackward):
    __slots__ = ()


class SliceBackward0(_BasicIndexBackward):
    __slots__ = ()


class AliasBackward0(_BasicIndexBackward):
    __slots__ = ()


class _UnsqueezeIndexBackward(_BasicIndexBackward):
    __slots__ = ()


_UnsqueezeIndexBackward.__name__ = _UnsqueezeIndexBackward.__qualname__ = "UnsqueezeBackward0"


class IndexBackward0(Node):
    __slots__ = ("shape", "key", "dup")

    def backward(self, g):
        gi = np.zeros(self.shape, dtype=g.dtype)
        if self.dup:
            np.add.at(gi, self.key, g)
        else:
            gi[self.key] = g
        return (gi,)


def _may_repeat(k):
    """True if an advanced key can address the same element twice (integer arrays)."""
    comps = k if isinstance(k, tuple) else (k,)
    return any(isinstance(c, np.ndarray) and c.dtype.kind in "iu" and c.size > 1 for c in comps)


def getitem(self, key):
    k, adv = normalize_key(key)
    x = self._data
    try:
        out = x[k]
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None
    if not adv:
        rec = self._rg and _gs.enabled
        if rec:
            n = node1(_basic_name(k), self)
            n.shape = x.shape
            n.key = k
            r = _wrap(out, n, vc=self._vc)
        else:
            r = _wrap(out, vc=self._vc)
        base = self if self._base is None else self._base
        r._base = base
        # Recipe for in-place ops on this view while recording (see ops/inplace.py).
        r._extra = {"view_of": (self, "index", k)}
        if rec:
            register_view(base, r)
        return r
    out = np.array(out, copy=True) if np.may_share_memory(out, x) else out
    if self._rg and _gs.enabled:
        n = node1(IndexBackward0, self)
        n.shape = x.shape
        n.key = k
        n.dup = _may_repeat(k)
        return _wrap(out, n)
    return _wrap(out)


class CopySlices(Node):
    """`base[key] = value` recorded: the overwritten region takes no gradient from base."""

    __slots__ = ("key", "vshape", "dtype")

    def backward(self, g):
        eb, ev = self.next_edges
        gb = gv = None
        if eb is not None:
            gb = g.copy()
            gb[self.key] = 0
        if ev is not None:
            gv = reduce_to_shape(np.asarray(g[self.key]), self.vshape).astype(self.dtype, copy=False)
        return gb, gv


def setitem(self, key, value):
    from .inplace import check_inplace
    k, _ = normalize_key(key)
    value = operand(value)
    vt = value if isinstance(value, Tensor) else None
    recording = _gs.enabled and (self._rg or (vt is not None and vt._rg))
    if recording:
        check_inplace(self)
        if self._base is not None:
            from .inplace import rewrite_view
            return rewrite_view(self, lambda snap: _setitem_out_of_place(snap, k, value))
    vd = vt._data if vt is not None else value
    try:
        self._data[k] = vd
    except ValueError as e:
        raise RuntimeError(f"shape mismatch: value tensor cannot be broadcast to indexing result: {e}") from None
    self._vc[0] += 1
    if recording:
        n = _new(CopySlices)
        n.next_edges = (self._edge(), vt._edge() if vt is not None else None)
        n.saved = None
        n.vc = ()
        n.key = k
        n.vshape = vt._data.shape if vt is not None else ()
        n.dtype = vt._data.dtype if vt is not None else self._data.dtype
        self._fn = n
        self._rg = True
        self._nr = 0
        from .inplace import refresh_views
        refresh_views(self)


def _setitem_out_of_place(snap, k, value):
    """A copy of `snap` with `snap[k] = value`, recorded (used for views)."""
    setitem(snap, k, value)
    return snap


class GatherBackward0(Node):
    __slots__ = ("shape", "axis")

    def backward(self, g):
        idx = self.saved
        gi = np.zeros(self.shape, dtype=g.dtype)
        # put_along_axis would drop duplicate contributions; add.at accumulates them.
        full = list(np.indices(idx.shape, sparse=True))
        full[self.axis] = idx
        np.add.at(gi, tuple(full), g)
        return (gi,)


def gather(self, dim, index):
    x = self._data
    idx = index._data if isinstance(index, Tensor) else np.asarray(index)
    if x.ndim == 0:
        # torch: a 0-d input and a 0-d index (of value 0) give the input back
        from .shape import reshape
        return reshape(gather(reshape(self, 1), 0, _wrap(np.reshape(idx, (1,)))), ())
    axis = dim % x.ndim
    out = np.take_along_axis(x, idx, axis=axis)
    if self._rg and _gs.enabled:
        n = node1(GatherBackward0, self, idx)
        n.shape = x.shape
        n.axis = axis
        return _wrap(out, n)
    return _wrap(out)


def index_select(self, dim, index):
    idx = index._data if isinstance(index, Tensor) else np.asarray(index)
    x = self._data
    if x.ndim == 0:
        from .shape import reshape
        return reshape(index_select(reshape(self, 1), 0, index), ())
    axis = dim % max(x.ndim, 1)
    key = (slice(None),) * axis + (idx.reshape(-1).astype(np.int64),)
    return getitem(self, key)


class MaskedFillBackward0(Node):
    __slots__ = ("sv",)

    def backward(self, g):
        mask = self.saved
        es, ev = self.next_edges
        gs = np.where(mask, np.zeros((), g.dtype), g) if es is not None else None
        gv = None
        if ev is not None:
            gv = np.where(mask, g, np.zeros((), g.dtype)).sum().reshape(self.sv)
        return gs, gv


def masked_fill(self, mask, value):
    m = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype != np.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {m.dtype}")
    value = operand(value)
    vt = value if isinstance(value, Tensor) else None
    vd = vt._data if vt is not None else value
    out = np.where(m, np.asarray(vd, dtype=self._data.dtype), self._data)
    if out.shape != self._data.shape:
        out = np.broadcast_to(out, np.broadcast_shapes(out.shape, self._data.shape)).copy()
    if _gs.enabled and (self._rg or (vt is not None and vt._rg)):
        n = _new(MaskedFillBackward0)
        n.next_edges = (self._edge(), vt._edge() if vt is not None else None)
        n.saved = np.broadcast_to(m, out.shape)
        n.vc = ()
        n.sv = vt._data.shape if vt is not None else ()
        return _wrap(out, n)
    return _wrap(out)


def take(self, index):
    from .shape import reshape
    idx = index._data if isinstance(index, Tensor) else np.asarray(index)
    return getitem(reshape(self, -1), _wrap(idx))

