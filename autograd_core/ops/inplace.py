"""In-place ops (`add_`, `mul_`, `x += y`, `clamp_`, `copy_`, ...) with torch's autograd rules.

Outside graph recording an in-place op is one NumPy ufunc with `out=` plus a version bump. While
recording, the result is computed out of place from a snapshot of the old value (so nodes saved
earlier keep their data) and written back; the tensor takes the new history. Every in-place op
bumps the version counter that views share, so backward detects a saved tensor that changed.
"""
from ._base import Node, Tensor, _gs, _new, _wrap, np, operand, reduce_to_shape
from . import arith, pointwise


def check_inplace(t):
    if t._fn is None and t._rg:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if t._base is not None and t._base._fn is None and t._base._rg and _gs.enabled:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")


def _snapshot(t):
    """A copy of `t`'s value carrying `t`'s current history."""
    s = _wrap(t._data.copy())
    s._fn, s._rg, s._nr = t._fn, t._rg, t._nr
    return s


def _remake(parent, kind, arg):
    """The view `kind`/`arg` of `parent`, made again (a fresh node on parent's current history)."""
    from . import shape as S
    from .indexing import getitem
    if kind == "index":
        return getitem(parent, arg)
    if kind == "reshape":
        return S.reshape(parent, arg)
    if kind == "transpose":
        return S.transpose(parent, *arg)
    if kind == "t":
        return S.t(parent)
    if kind == "permute":
        return S.permute(parent, arg)
    return S.expand(parent, arg)


def _undo(kind, arg, new, parent):
    """The value of `parent` whose view `kind`/`arg` is `new` (views that cover all of parent)."""
    from . import shape as S
    if kind == "reshape":
        return S.reshape(new, parent._data.shape)
    if kind == "transpose":
        return S.transpose(new, *arg)
    if kind == "t":
        return S.t(new)
    if kind == "permute":
        return S.permute(new, tuple(int(i) for i in np.argsort(arg)))
    raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a single "
                       "memory location. Please clone() the tensor before performing the operation.")


def rewrite_view(view, compute):
    """In-place op on a view while recording: torch's view + in-place semantics.

    The new value of the view is computed out of place from a snapshot (so nodes that saved the
    old value keep it), then written into the parent: for an indexing view as `parent[key] = new`
    (a CopySlices node), for a view covering all of its parent (reshape/view/transpose/t/permute/
    squeeze/unsqueeze) as the inverse view of `new`, recursively up to the base. The base is
    written in place once (one version bump, shared by all its views) and every view of it made
    while recording gets its history re-made from the base's new one.
    """
    from .indexing import setitem
    recipe = view._extra_get("view_of")
    if recipe is None:
        fn = view._fn
        if fn is not None and fn._multi:
            op = type(fn).__name__.replace("Backward0", "")  # torch names the op: "Output 0 of Split ..."
            raise RuntimeError(f"Output {view._nr} of {op} is a view and is being modified inplace. "
                               "This view is the output of a function that returns multiple views. Such functions "
                               "do not allow the output views to be modified inplace. You should replace the "
                               "inplace operation by an out-of-place one.")
        raise RuntimeError("in-place modification of this view (made by split/chunk/unbind or outside autograd_core) "
                           "is not supported while recording; work out of place (y = x.clone()).")
    parent, kind, arg = recipe
    if kind == "expand":
        _undo(kind, arg, None, parent)  # raises: overlapping memory, as torch
    new = compute(_snapshot(view))
    if kind == "index":
        setitem(parent, arg, new)
    else:
        pnew = _undo(kind, arg, new, parent)
        if parent._base is not None:
            rewrite_view(parent, lambda snap: pnew)
        else:
            _write_back(parent, pnew)
    fresh = _remake(parent, kind, arg)
    view._fn, view._rg, view._nr = fresh._fn, fresh._rg, 0
    return view


def refresh_views(base):
    """After an in-place op changed `base`'s history: re-make the history of its live views."""
    ex = base._extra
    views = ex.get("views") if ex is not None else None
    if not views:
        return
    live = []
    for ref in views:  # creation order: a view's parent is re-made before the view
        v = ref()
        if v is None:
            continue
        live.append(ref)
        recipe = v._extra_get("view_of")
        if recipe is None:
            continue
        parent, kind, arg = recipe
        prev = _gs.enabled
        _gs.enabled = True
        try:
            fresh = _remake(parent, kind, arg)
        finally:
            _gs.enabled = prev
        v._fn, v._rg, v._nr = fresh._fn, fresh._rg, 0
    # the re-made views registered themselves again; keep the originals only
    ex["views"] = live


def _write_back(self, new):
    nd = new._data
    if nd.shape != self._data.shape:
        raise RuntimeError(f"output with shape {list(self._data.shape)} doesn't match the broadcast shape "
                           f"{list(np.broadcast_shapes(nd.shape, self._data.shape))}")
    _check_cast(nd.dtype, self._data.dtype)
    np.copyto(self._data, nd, casting="unsafe")
    self._vc[0] += 1
    self._fn, self._rg, self._nr = new._fn, new._rg, new._nr
    if self._base is None:
        refresh_views(self)
    return self


def _check_cast(src, dst):
    if src != dst and not np.can_cast(src, dst, casting="same_kind"):
        raise RuntimeError(f"result type {_torch_name(src)} can't be cast to the desired output type {_torch_name(dst)}")


def _torch_name(dt):
    return {"float32": "Float", "float64": "Double", "int64": "Long", "bool": "Bool",
            "int32": "Int", "float16": "Half"}.get(dt.name, dt.name)


def inplace(outofplace, ufunc=None):
    """Build an in-place method from an out-of-place op (and an optional fast NumPy ufunc)."""

    def op(self, *args, **kwargs):
        recording = _gs.enabled and (self._rg or any(isinstance(a, Tensor) and a._rg for a in args)
                                     or any(isinstance(a, Tensor) and a._rg for a in kwargs.values()))
        if not recording:
            if ufunc is not None and not kwargs and len(args) == 1:
                other = args[0]
                od = other._data if isinstance(other, Tensor) else other
                x = self._data
                try:
                    ufunc(x, od, out=x, casting="same_kind")
                except TypeError:  # NumPy's UFuncTypeError (a TypeError): the result cannot be cast
                    raise RuntimeError(f"result type {_torch_name(np.result_type(x, od))} can't be cast to the "
                                       f"desired output type {_torch_name(x.dtype)}") from None
                except ValueError:
                    raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape "
                                       f"{list(np.broadcast_shapes(np.shape(od), x.shape))}") from None
                self._vc[0] += 1
                return self
            prev = _gs.enabled
            _gs.enabled = False
            try:
                new = outofplace(self, *args, **kwargs)
            finally:
                _gs.enabled = prev
            nd = new._data
            if nd.shape != self._data.shape:
                raise RuntimeError(f"output with shape {list(self._data.shape)} doesn't match the broadcast "
                                   f"shape {list(nd.shape)}")
            _check_cast(nd.dtype, self._data.dtype)
            np.copyto(self._data, nd, casting="unsafe")
            self._vc[0] += 1
            return self
        check_inplace(self)
        if self._base is not None:
            return rewrite_view(self, lambda snap: outofplace(snap, *args, **kwargs))
        return _write_back(self, outofplace(_snapshot(self), *args, **kwargs))

    op.__name__ = outofplace.__name__ + "_"
    return op


add_ = inplace(arith.add, np.add)
sub_ = inplace(arith.sub, np.subtract)
mul_ = inplace(arith.mul, np.multiply)
div_ = inplace(arith.div, np.true_divide)
pow_ = inplace(arith.pow, np.power)
neg_ = inplace(arith.neg)
exp_ = inplace(pointwise.exp)
log_ = inplace(pointwise.log)
sqrt_ = inplace(pointwise.sqrt)
abs_ = inplace(pointwise.abs)
tanh_ = inplace(pointwise.tanh)
sigmoid_ = inplace(pointwise.sigmoid)
relu_ = inplace(pointwise.relu)
sin_ = inplace(pointwise.sin)
cos_ = inplace(pointwise.cos)
floor_ = inplace(pointwise.floor)
ceil_ = inplace(pointwise.ceil)
round_ = inplace(pointwise.round)
clamp_ = inplace(pointwise.clamp)
clamp_min_ = inplace(pointwise.clamp_min)
clamp_max_ = inplace(pointwise.clamp_max)
leaky_relu_ = inplace(pointwise.leaky_relu)
lerp_ = inplace(pointwise.lerp)


def _masked_fill(self, mask, value):
    from .indexing import masked_fill
    return masked_fill(self, mask, value)


masked_fill_ = inplace(_masked_fill)


def _addcmul(self, t1, t2, value=1):
    return arith.add(self, arith.mul(arith.mul(t1, t2), value))


def _addcdiv(self, t1, t2, value=1):
    return arith.add(self, arith.mul(arith.div(t1, t2), value))


addcmul = _addcmul
addcdiv = _addcdiv
addcmul_ = inplace(_addcmul)
addcdiv_ = inplace(_addcdiv)


class CopyBackwards(Node):
    """copy_/fill_: the old value gets no gradient; the source gets the (reduced) gradient."""

    __slots__ = ("ss", "dtype")

    def backward(self, g):
        es, esrc = self.next_edges
        gs = np.zeros_like(g) if es is not None else None
        gsrc = reduce_to_shape(g, self.ss).astype(self.dtype, copy=False) if esrc is not None else None
        return gs, gsrc


def _replace(self, src):
    """Out-of-place 'copy of src in self's shape and dtype' with CopyBackwards."""
    src = operand(src)
    st = src if isinstance(src, Tensor) else None
    sd = st._data if st is not None else src
    try:
        out = np.empty_like(self._data)
        np.copyto(out, sd, casting="unsafe")
    except ValueError:
        raise RuntimeError(f"The size of tensor a ({list(self._data.shape)}) must match the size of tensor b "
                           f"({list(np.shape(sd))})") from None
    if _gs.enabled and (self._rg or (st is not None and st._rg)):
        n = _new(CopyBackwards)
        n.next_edges = (self._edge(), st._edge() if st is not None else None)
        n.saved = None
        n.vc = ()
        n.ss = st._data.shape if st is not None else ()
        n.dtype = st._data.dtype if st is not None else out.dtype
        return _wrap(out, n)
    return _wrap(out)


_copy_inplace = inplace(_replace)


def copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {type(src).__name__}")
    if not (_gs.enabled and (self._rg or src._rg)):
        try:
            np.copyto(self._data, src._data, casting="unsafe")
        except ValueError:
            raise RuntimeError(f"output with shape {list(self._data.shape)} doesn't match the broadcast shape "
                               f"{list(src._data.shape)}") from None
        self._vc[0] += 1
        return self
    return _copy_inplace(self, src)


def fill_(self, value):
    if isinstance(value, Tensor) and value._data.ndim != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value._data.ndim} dimensions.")
    if not (_gs.enabled and (self._rg or (isinstance(value, Tensor) and value._rg))):
        self._data[...] = value._data if isinstance(value, Tensor) else value
        self._vc[0] += 1
        return self
    return _copy_inplace(self, value)


def zero_(self):
    return fill_(self, 0)
