# 630 lines: one op family sharing `_view`; export's op table keys them by module (ops.shape:<op>).
"""Shape ops (views share data and the version counter with their base), joins and splits, copies."""
from weakref import ref as _weakref

from ._base import D, Node, Tensor, _gs, _new, _wrap, node1, normalize_dims, np, one_dim


def _view(t, out, cls, shape=None, recipe=None, **attrs):
    """`out` is a NumPy view of `t`'s data: share the version counter, remember the base.

    The node of class `cls` gets `shape` (most views keep the input's) and `attrs` as fields.
    `recipe` = (kind, arg) says how to re-make the view from `t` (see ops/inplace.py: in-place
    ops on views, and views whose base changed in place).
    """
    base = t._base
    if base is None:
        base = t
    if t._rg and _gs.enabled:
        n = node1(cls, t)
        if shape is not None:
            n.shape = shape
        if attrs:
            for k, v in attrs.items():
                setattr(n, k, v)
        r = _wrap(out, n, t._vc)
        if recipe is not None:
            r._extra = {"view_of": (t, recipe[0], recipe[1])}
            if base._fn is not None:
                register_view(base, r)
    else:
        r = _wrap(out, None, t._vc)
        if recipe is not None:
            r._extra = {"view_of": (t, recipe[0], recipe[1])}
    r._base = base
    return r


def _reshape_view(t, out, in_shape):
    """`_view` for reshape/view (the hot one): a ViewBackward0 node, recipe ("reshape", out.shape)."""
    base = t._base
    if base is None:
        base = t
    if t._rg and _gs.enabled:
        n = node1(ViewBackward0, t)
        n.shape = in_shape
        r = _wrap(out, n, t._vc)
        r._extra = {"view_of": (t, "reshape", out.shape)}
        if base._fn is not None:
            register_view(base, r)
    else:
        r = _wrap(out, None, t._vc)
        r._extra = {"view_of": (t, "reshape", out.shape)}
    r._base = base
    return r


def register_view(base, view):
    """Remember a view made while recording, so that an in-place op on `base` re-makes its history.

    Only non-leaf bases: an in-place op on a leaf that requires grad is an error while recording,
    so views of leaves (parameters sliced in a cost function) never need it and cost nothing.
    """
    if base._fn is None:
        return
    ex = base._extra
    if ex is None:
        base._extra = {"views": [_weakref(view)]}
        return
    views = ex.get("views")
    if views is None:
        ex["views"] = [_weakref(view)]
        return
    if len(views) >= 64:
        views[:] = [w for w in views if w() is not None]
    views.append(_weakref(view))


class _ReshapeBack(Node):
    __slots__ = ("shape",)

    def backward(self, g):
        return (g.reshape(self.shape),)


class ViewBackward0(_ReshapeBack):
    __slots__ = ()


class SqueezeBackward0(_ReshapeBack):
    __slots__ = ()


class SqueezeBackward1(_ReshapeBack):
    __slots__ = ()


class UnsqueezeBackward0(_ReshapeBack):
    __slots__ = ()


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def reshape(self, *shape):
    shape = _shape_arg(shape)
    x = self._data
    try:
        out = x.reshape(shape)
    except ValueError:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {x.size}") from None
    if np.may_share_memory(out, x) or not out.size:
        return _reshape_view(self, out, x.shape)
    return _copy_result(self, out, ViewBackward0, shape=x.shape)


def view(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], D.dtype):
        raise NotImplementedError("view(dtype) reinterpretation is not supported; use .to(dtype)")
    shape = _shape_arg(shape)
    x = self._data
    try:
        out = x.view()
        out.shape = shape  # raises instead of silently copying when the layout is incompatible
    except (AttributeError, ValueError):
        if np.prod(shape if -1 not in shape else (1,)) and x.size and -1 not in shape and int(np.prod(shape)) != x.size:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {x.size}") from None
        try:
            x.reshape(shape)
        except ValueError:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {x.size}") from None
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") from None
    return _reshape_view(self, out, x.shape)


def view_as(self, other):
    return view(self, other.shape)


def reshape_as(self, other):
    return reshape(self, other.shape)


def _copy_result(t, out, cls, shape=None, **attrs):
    """`out` is a new array computed from `t`'s data (fields of the node as in `_view`)."""
    if t._rg and _gs.enabled:
        n = node1(cls, t)
        if shape is not None:
            n.shape = shape
        for k, v in attrs.items():
            setattr(n, k, v)
        return _wrap(out, n)
    return _wrap(out)


def flatten(self, start_dim=0, end_dim=-1):
    x = self._data
    if x.ndim == 0:
        return reshape(self, 1)
    s = start_dim % x.ndim
    e = end_dim % x.ndim
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = x.shape[:s] + (-1 if x.size else int(np.prod(x.shape[s:e + 1])),) + x.shape[e + 1:]
    return reshape(self, shape)


def unflatten(self, dim, sizes):
    x = self._data
    d = dim % x.ndim
    return reshape(self, x.shape[:d] + tuple(sizes) + x.shape[d + 1:])


def squeeze(self, dim=None):
    x = self._data
    if dim is None:
        out = np.squeeze(x)
        return _view(self, out, SqueezeBackward0, shape=x.shape, recipe=("reshape", out.shape))
    axes = normalize_dims(dim, x.ndim)
    axes = tuple(a for a in axes if x.ndim and x.shape[a] == 1)
    out = np.squeeze(x, axis=axes) if axes else x.view()
    return _view(self, out, SqueezeBackward1, shape=x.shape, recipe=("reshape", out.shape))


def unsqueeze(self, dim):
    x = self._data
    n = x.ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    out = np.expand_dims(x, dim % n)
    return _view(self, out, UnsqueezeBackward0, shape=x.shape, recipe=("reshape", out.shape))


class TransposeBackward0(Node):
    __slots__ = ("d0", "d1")

    def backward(self, g):
        return (np.swapaxes(g, self.d0, self.d1),)


class TBackward0(TransposeBackward0):
    __slots__ = ()


def transpose(self, dim0, dim1):
    x = self._data
    if x.ndim == 0:
        return _view(self, x.view(), ViewBackward0, shape=(), recipe=("reshape", ()))
    d0, d1 = dim0 % x.ndim, dim1 % x.ndim
    return _view(self, np.swapaxes(x, d0, d1), TransposeBackward0, recipe=("transpose", (d0, d1)), d0=d0, d1=d1)


def t(self):
    x = self._data
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    if x.ndim < 2:
        return _view(self, x.view(), ViewBackward0, shape=x.shape, recipe=("reshape", x.shape))
    return _view(self, x.T, TBackward0, recipe=("t", None), d0=0, d1=1)


def _T(self):
    x = self._data
    if x.ndim == 2:
        return t(self)
    return permute(self, tuple(range(x.ndim - 1, -1, -1)))


def _mT(self):
    return transpose(self, -2, -1)


class PermuteBackward0(Node):
    __slots__ = ("inv",)

    def backward(self, g):
        return (np.transpose(g, self.inv),)


def permute(self, *dims):
    dims = _shape_arg(dims)
    x = self._data
    if len(dims) != x.ndim:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {x.ndim} is not equal "
                           f"to len(dims) = {len(dims)}")
    dims = tuple(d % x.ndim for d in dims) if x.ndim else dims
    return _view(self, np.transpose(x, dims), PermuteBackward0, recipe=("permute", dims),
                 inv=tuple(int(i) for i in np.argsort(dims)))


def movedim(self, source, destination):
    """Move dims `source` to positions `destination` (ints or sequences), the rest keep their order."""
    x = self._data
    n = x.ndim
    src = (source,) if isinstance(source, (int, np.integer)) else tuple(source)
    dst = (destination,) if isinstance(destination, (int, np.integer)) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
                           f"contain the same number of dims as destination ({list(dst)} dims)")
    src = [one_dim(s, n) for s in src]
    dst = [one_dim(d, n) for d in dst]
    if n == 0:
        return _view(self, x.view(), ViewBackward0, shape=())
    order = [None] * n
    for s_, d_ in zip(src, dst):
        order[d_] = s_
    rest = iter(i for i in range(n) if i not in src)
    order = [next(rest) if o is None else o for o in order]
    return permute(self, tuple(order))


def narrow(self, dim, start, length):
    """The `length` entries from `start` along `dim` (a view)."""
    from .indexing import getitem
    x = self._data
    axis = one_dim(dim, x.ndim)
    start = int(start)
    if start < 0:
        start += x.shape[axis]
    if not (0 <= start and start + int(length) <= x.shape[axis]):
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({x.shape[axis]}).")
    return getitem(self, (slice(None),) * axis + (slice(start, start + int(length)),))


def select(self, dim, index):
    """Entry `index` along `dim`, that dim removed (a view)."""
    from .indexing import getitem
    x = self._data
    if x.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    axis = one_dim(dim, x.ndim)
    return getitem(self, (slice(None),) * axis + (int(index),))


class ExpandBackward0(Node):
    __slots__ = ("shape",)

    def backward(self, g):
        from ..function import reduce_to_shape
        return (reduce_to_shape(g, self.shape),)


def expand(self, *sizes):
    sizes = _shape_arg(sizes)
    x = self._data
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
                           f"the number of dimensions in the tensor ({x.ndim})")
    target = tuple(x.shape[i - lead] if (s == -1 and i >= lead) else s for i, s in enumerate(sizes))
    try:
        out = np.broadcast_to(x, target)
    except ValueError:
        raise RuntimeError(f"The expanded size of the tensor must match the existing size at non-singleton "
                           f"dimensions. Target sizes: {list(sizes)}. Tensor sizes: {list(x.shape)}") from None
    return _view(self, out, ExpandBackward0, shape=x.shape, recipe=("expand", target))


def expand_as(self, other):
    return expand(self, other.shape)


def broadcast_to(self, shape):
    return expand(self, tuple(shape))


class RepeatBackward0(Node):
    __slots__ = ("shape", "reps")

    def split_axes(self):
        """The gradient's shape with each axis split into (repetitions, size), and the repetition axes."""
        reps, shape = self.reps, self.shape
        lead = len(reps) - len(shape)
        full = (1,) * lead + tuple(shape)
        inter = []
        for r, s in zip(reps, full):
            inter += [r, s]
        return tuple(inter), tuple(range(0, 2 * len(reps), 2))

    def backward(self, g):
        inter, axes = self.split_axes()
        gs = g.reshape(inter).sum(axis=axes)
        return (gs.reshape(self.shape),)


def repeat(self, *sizes):
    sizes = _shape_arg(sizes)
    x = self._data
    if len(sizes) < x.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    out = np.tile(x, sizes)
    return _copy_result(self, out, RepeatBackward0, shape=x.shape, reps=sizes)


class CloneBackward0(Node):
    __slots__ = ()

    def backward(self, g):
        return (g,)


def clone(self, *, memory_format=None):
    return _copy_result(self, self._data.copy(), CloneBackward0)


def contiguous(self, memory_format=None):
    if self._data.flags.c_contiguous:
        return self
    return _copy_result(self, np.ascontiguousarray(self._data), CloneBackward0)


class ToCopyBackward0(Node):
    __slots__ = ("dtype",)

    def backward(self, g):
        return (g.astype(self.dtype, copy=False),)


def to(self, *args, **kwargs):
    """`.to(dtype)`, `.to("cpu")`, `.to(other_tensor)`, `.to(device, dtype)`; `copy=` honoured."""
    dtype = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    dev = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, D.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype = a.dtype
        elif a is not None:
            dev = a
    if dev is not None:
        from ..tensor import _require_cpu as device
        device(dev)  # raises for anything but the CPU
    if dtype is None or D.to_numpy_dtype(dtype) == self._data.dtype:
        return clone(self) if copy else self
    npd = D.to_numpy_dtype(dtype)
    out = self._data.astype(npd)
    if self._rg and _gs.enabled and npd.kind == "f":
        return _copy_result(self, out, ToCopyBackward0, dtype=self._data.dtype)
    return _wrap(out)


def type_as(self, other):
    return to(self, other.dtype)


def _caster(d):
    def op(self, memory_format=None):
        return to(self, d)
    return op


float_ = _caster(D.float32)
double = _caster(D.float64)
half = _caster(D.float16)
long = _caster(D.int64)
int_ = _caster(D.int32)
bool_ = _caster(D.bool)


def type_(self, dtype=None):
    if dtype is None:
        names = {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor", "int64": "torch.LongTensor",
                 "bool": "torch.BoolTensor", "int32": "torch.IntTensor", "float16": "torch.HalfTensor",
                 "uint8": "torch.ByteTensor", "int8": "torch.CharTensor", "int16": "torch.ShortTensor"}
        return names[self._data.dtype.name]
    return to(self, dtype)


# ---------------------------------------------------------------------------------------------
# Joins and splits
class CatBackward0(Node):
    __slots__ = ("axis", "bounds")

    def backward(self, g):
        parts = np.split(g, self.bounds, axis=self.axis)
        return tuple(p if e is not None else None for p, e in zip(parts, self.next_edges))


def cat(tensors, dim=0, *, out=None):
    if out is not None:
        raise NotImplementedError("cat(out=...) is not supported")
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    # torch skips legacy empty 1-D tensors of shape (0,) when the others have more dimensions.
    ref = next((t for t in tensors if not (t._data.ndim == 1 and t._data.size == 0)), tensors[0])
    if ref._data.ndim == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    axis = one_dim(dim, ref._data.ndim)
    kept = [t for t in tensors if not (t._data.ndim == 1 and t._data.size == 0 and ref._data.ndim > 1)]
    datas = [t._data for t in kept]
    rd = datas[0].dtype
    for d in datas[1:]:
        if d.dtype is not rd:
            rd = np.promote_types(rd, d.dtype)
    try:
        out = np.concatenate(datas, axis=axis, dtype=rd)
    except ValueError as e:
        raise RuntimeError(f"torch.cat(): Sizes of tensors must match except in dimension {axis}: {e}") from None
    if _gs.enabled and any(t._rg for t in kept):
        n = _new(CatBackward0)
        n.next_edges = tuple(t._edge() for t in kept)
        n.saved = None
        n.vc = ()
        n.axis = axis
        n.bounds = np.cumsum([d.shape[axis] for d in datas])[:-1]
        return _wrap(out, n)
    return _wrap(out)


class StackBackward0(Node):
    __slots__ = ("axis",)

    def backward(self, g):
        return tuple(np.take(g, i, axis=self.axis) if e is not None else None
                     for i, e in enumerate(self.next_edges))


def stack(tensors, dim=0, *, out=None):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shapes = {t._data.shape for t in tensors}
    if len(shapes) != 1:
        raise RuntimeError(f"stack expects each tensor to be equal size, but got {[list(t.shape) for t in tensors]}")
    nd = tensors[0]._data.ndim + 1
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    axis = dim % nd
    datas = [t._data for t in tensors]
    rd = datas[0].dtype
    for d in datas[1:]:
        if d.dtype is not rd:
            rd = np.promote_types(rd, d.dtype)
    res = np.stack(datas, axis=axis).astype(rd, copy=False)
    if _gs.enabled and any(t._rg for t in tensors):
        n = _new(StackBackward0)
        n.next_edges = tuple(t._edge() for t in tensors)
        n.saved = None
        n.vc = ()
        n.axis = axis
        return _wrap(res, n)
    return _wrap(res)


def hstack(tensors):
    tensors = list(tensors)
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([t if t.ndim >= 2 else unsqueeze(t, 0) for t in tensors], 0)


class _MultiOutput(Node):
    __slots__ = ("n_outputs", "axis", "shapes", "dtype")
    _multi = True


class SplitBackward0(_MultiOutput):
    __slots__ = ()

    def backward(self, grads):
        parts = [g if g is not None else np.zeros(s, self.dtype) for g, s in zip(grads, self.shapes)]
        return (np.concatenate(parts, axis=self.axis),)


class UnbindBackward0(_MultiOutput):
    __slots__ = ()

    def backward(self, grads):
        parts = [g if g is not None else np.zeros(s, self.dtype) for g, s in zip(grads, self.shapes)]
        return (np.stack(parts, axis=self.axis),)


def _multi_views(self, pieces, cls, axis):
    x = self._data
    if self._rg and _gs.enabled:
        n = node1(cls, self)
        n.n_outputs = len(pieces)
        n.axis = axis
        n.shapes = [p.shape for p in pieces]
        n.dtype = x.dtype
        outs = []
        for i, p in enumerate(pieces):
            o = _wrap(p, n, vc=self._vc)
            o._nr = i
            o._base = self if self._base is None else self._base
            outs.append(o)
        return tuple(outs)
    outs = []
    for p in pieces:
        o = _wrap(p, vc=self._vc)
        o._base = self if self._base is None else self._base
        outs.append(o)
    return tuple(outs)


def split(self, split_size_or_sections, dim=0):
    x = self._data
    axis = one_dim(dim, x.ndim)
    size = x.shape[axis]
    if isinstance(split_size_or_sections, (int, np.integer)):
        step = int(split_size_or_sections)
        if step <= 0 and size:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}")
        bounds = list(range(step, size, step)) if step else []
    else:
        secs = [int(s) for s in split_size_or_sections]
        if sum(secs) != size:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size "
                               f"at dimension {axis}), but got split_sizes={secs}")
        bounds = list(np.cumsum(secs)[:-1])
    pieces = np.split(x, bounds, axis=axis)
    return _multi_views(self, pieces, SplitBackward0, axis)


def chunk(self, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0")
    x = self._data
    axis = one_dim(dim, x.ndim)
    size = x.shape[axis]
    step = -(-size // chunks) if size else 1
    return split(self, step, dim)


def unbind(self, dim=0):
    x = self._data
    if x.ndim == 0:
        raise RuntimeError("unbind() on a 0-d tensor")
    axis = one_dim(dim, x.ndim)
    pieces = [x[(slice(None),) * axis + (i,)] for i in range(x.shape[axis])]
    return _multi_views(self, pieces, UnbindBackward0, axis)


class FlipBackward0(Node):
    __slots__ = ("axes",)

    def backward(self, g):
        return (np.flip(g, self.axes),)


def flip(self, dims):
    axes = normalize_dims(dims, self._data.ndim)
    return _copy_result(self, np.flip(self._data, axes).copy(), FlipBackward0, axes=axes)


class RollBackward0(Node):
    __slots__ = ("shifts", "axes")

    def backward(self, g):
        return (np.roll(g, tuple(-s for s in self.shifts), self.axes),)


def roll(self, shifts, dims=None):
    if dims is None:
        flat = flatten(self)
        return reshape(roll(flat, shifts, 0), self.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return _copy_result(self, np.roll(self._data, shifts, dims), RollBackward0, shifts=shifts, axes=dims)
