"""Shape graph ops (reshape, transpose, expand, tile, getitem, concat, stack, split) and the
trace rules of the view / cast / join / split / basic-indexing entry points."""
import numpy as np

from .._errors import TraceError
from ._table import I, S, TT, dt, onnx_converter, rule

# ---------------------------------------------------------------------------------------------
# graph ops: ONNX mappings (the kernels are the runtime's `_kernels_shape`)
@onnx_converter("reshape")
def _onnx_reshape(b, n):
    return b.node("Reshape", [n.inputs[0], b.ints(n.attrs["shape"])], n.outputs[0])


@onnx_converter("transpose")
def _onnx_transpose(b, n):
    return b.node("Transpose", [n.inputs[0]], n.outputs[0], perm=list(n.attrs["perm"]))


@onnx_converter("expand")
def _onnx_expand(b, n):
    return b.node("Expand", [n.inputs[0], b.ints(n.attrs["shape"])], n.outputs[0])


@onnx_converter("tile")
def _onnx_tile(b, n):
    x = n.inputs[0]
    reps = list(n.attrs["repeats"])
    xs = b.shape(x)
    if len(reps) > len(xs):
        x = b.node("Reshape", [x, b.ints([1] * (len(reps) - len(xs)) + list(xs))])
    return b.node("Tile", [x, b.ints(reps)], n.outputs[0])


@onnx_converter("getitem")
def _onnx_getitem(b, n):
    x = n.inputs[0]
    sl = n.attrs["slices"]
    nd = len(sl) // 3
    xs = b.shape(x)
    axes = [i for i in range(nd) if (sl[3 * i], sl[3 * i + 1], sl[3 * i + 2]) != (0, xs[i], 1)]
    y = x
    if axes:
        y = b.node("Slice", [x, b.ints([sl[3 * i] for i in axes]), b.ints([sl[3 * i + 1] for i in axes]),
                             b.ints(axes), b.ints([sl[3 * i + 2] for i in axes])])
    return b.node("Reshape", [y, b.ints(n.attrs["shape"])], n.outputs[0])


@onnx_converter("concat")
def _onnx_concat(b, n):
    return b.node("Concat", n.inputs, n.outputs[0], axis=int(n.attrs["axis"]))


@onnx_converter("stack")
def _onnx_stack(b, n):
    ax = int(n.attrs["axis"])
    parts = [b.node("Unsqueeze", [i, b.ints([ax])]) for i in n.inputs]
    return b.node("Concat", parts, n.outputs[0], axis=ax)


@onnx_converter("split")
def _onnx_split(b, n):
    return b.node("Split", [n.inputs[0], b.ints(n.attrs["sizes"])], n.outputs, axis=int(n.attrs["axis"]))


# ---------------------------------------------------------------------------------------------
# trace rules
@rule(*(S + k for k in ("reshape", "view", "view_as", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze")),
      emits={"reshape"})
def _reshape_like_out(rec, v, out):
    x = v[0]
    if out is x:
        return
    rec.emit("reshape", [rec.v(x)], {"shape": list(out._data.shape)}, [out])


@rule(S + "clone", S + "contiguous", TT + "detach", emits=())
def _identity(rec, v, out):
    x = v[0]
    if out is x:
        return
    rec.alias(out, rec.v(x))


@rule(TT + "detach_", emits=())
def _detach_(rec, v, out):
    return None


@rule(*(S + k for k in ("to", "type_as", "float_", "double", "half", "long", "int_", "bool_", "type_")),
      emits={"cast"})
def _cast_like_out(rec, v, out):
    x = v[0]
    if not rec.is_tensor(out) or out is x:
        return
    if dt(out) == dt(x):
        rec.alias(out, rec.v(x))
    else:
        rec.emit("cast", [rec.v(x)], {"dtype": dt(out).name}, [out])


def _perm_lower(perm_fn):
    def lower(rec, v, out):
        x = v[0]
        nd = x._data.ndim
        perm = [int(p) for p in perm_fn(v, nd)]
        if perm == list(range(nd)):
            rec.alias(out, rec.v(x))
        else:
            rec.emit("transpose", [rec.v(x)], {"perm": perm}, [out])
    return lower


def _swap(nd, a, b):
    p = list(range(nd))
    if nd:
        a, b = a % nd, b % nd
        p[a], p[b] = p[b], p[a]
    return p


def _permute_dims(v, nd):
    dims = v[1]
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    return [int(d) % nd for d in dims]


def _movedim_perm(v, nd):
    src, dst = v[1], v[2]
    src = [src] if isinstance(src, (int, np.integer)) else list(src)
    dst = [dst] if isinstance(dst, (int, np.integer)) else list(dst)
    src = [int(s) % nd for s in src]
    dst = [int(d) % nd for d in dst]
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return order


_T = {"transpose"}
rule(S + "transpose", emits=_T)(_perm_lower(lambda v, nd: _swap(nd, int(v[1]), int(v[2]))))
rule(S + "t", emits=_T)(_perm_lower(lambda v, nd: _swap(nd, 0, 1) if nd == 2 else list(range(nd))))
rule(S + "_T", emits=_T)(_perm_lower(lambda v, nd: list(range(nd))[::-1]))
rule(S + "_mT", emits=_T)(_perm_lower(lambda v, nd: _swap(nd, -2, -1)))
rule(S + "permute", emits=_T)(_perm_lower(_permute_dims))
rule(S + "movedim", emits=_T)(_perm_lower(_movedim_perm))


@rule(S + "expand", S + "expand_as", S + "broadcast_to", emits={"expand"})
def _expand(rec, v, out):
    x = v[0]
    if out._data.shape == x._data.shape:
        if out is not x:
            rec.alias(out, rec.v(x))
        return
    rec.emit("expand", [rec.v(x)], {"shape": list(out._data.shape)}, [out])


@rule(S + "repeat", emits={"tile"})
def _repeat(rec, v, out):
    x, sizes = v[0], v[1]
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    rec.emit("tile", [rec.v(x)], {"repeats": [int(s) for s in sizes]}, [out])


def _join(fname, gop, skip_empty_1d):
    def lower(rec, v, out):
        tensors, dim = v[0], v[1]
        if len(v) > 2 and v[2] is not None:
            raise TraceError(f"{fname}(out=...) is not supported by autograd_core.export")
        d = dt(out)
        if skip_empty_1d:  # torch's cat skips empty 1-D tensors
            tensors = [t for t in tensors if not (t._data.ndim == 1 and t._data.size == 0)]
        rec.emit(gop, [rec.operand(t, d) for t in tensors], {"axis": int(dim) % out._data.ndim}, [out])
    return lower


rule(S + "cat", emits={"concat"})(_join("cat", "concat", True))
rule(S + "stack", emits={"stack"})(_join("stack", "stack", False))


@rule(S + "hstack", emits={"concat"})
def _hstack(rec, v, out):
    tensors = v[0]
    d = dt(out)
    axis = 0 if tensors[0]._data.ndim == 1 else 1
    rec.emit("concat", [rec.operand(t, d) for t in tensors], {"axis": axis}, [out])


@rule(S + "vstack", emits={"reshape", "concat"})
def _vstack(rec, v, out):
    d = dt(out)
    names = []
    for t in v[0]:
        n = rec.operand(t, d)
        if t._data.ndim < 2:
            shp = (1, t._data.size)
            n = rec.tmp("reshape", [n], {"shape": list(shp)}, shp, d)
        names.append(n)
    rec.emit("concat", names, {"axis": 0}, [out])


@rule(S + "split", S + "chunk", emits={"split"})
def _split(rec, v, out):
    x, dim = v[0], v[2]
    axis = int(dim) % x._data.ndim
    sizes = [int(o._data.shape[axis]) for o in out]
    rec.emit("split", [rec.v(x)], {"axis": axis, "sizes": sizes}, list(out))


@rule(S + "unbind", emits={"split", "reshape"})
def _unbind(rec, v, out):
    x, dim = v[0], v[1]
    axis = int(dim) % x._data.ndim
    shp = list(x._data.shape)
    shp[axis] = 1
    pieces = rec.tmp("split", [rec.v(x)], {"axis": axis, "sizes": [1] * len(out)}, shp, dt(x), n_out=len(out))
    if len(out) == 1:
        pieces = [pieces]
    for p, o in zip(pieces, out):
        rec.emit("reshape", [p], {"shape": list(o._data.shape)}, [o])


@rule(I + "getitem", emits={"getitem"})
def _getitem(rec, v, out):
    from ...ops.indexing import normalize_key
    x, key = v[0], v[1]
    comps = key if isinstance(key, tuple) else (key,)
    for k in comps:
        if rec.is_tensor(k) and rec.traced(k):
            raise TraceError("indexing with a traced tensor (data-dependent indexing) is not supported by "
                             "autograd_core.export")
    k, adv = normalize_key(key)
    if adv:
        raise TraceError("advanced indexing (integer/bool arrays, lists, tensors) is not supported by "
                         "autograd_core.export; use basic slicing")
    comps = k if isinstance(k, tuple) else (k,)
    shape = x._data.shape
    n_real = sum(1 for c in comps if c is not None and c is not Ellipsis)
    if n_real > len(shape):
        raise TraceError(f"too many indices for a tensor of dimension {len(shape)}")
    sl = []
    ax = 0
    for c in comps:
        if c is None:
            continue
        if c is Ellipsis:
            for _ in range(len(shape) - n_real):
                sl += [0, shape[ax], 1]
                ax += 1
            continue
        size = shape[ax]
        if isinstance(c, (int, np.integer)):
            i = int(c) + (size if c < 0 else 0)
            sl += [i, i + 1, 1]
        elif isinstance(c, slice):
            a, b, s = c.indices(size)
            if s < 1:
                raise TraceError("slicing with a negative step is not supported by autograd_core.export")
            sl += [a, max(a, b), s]
        else:
            raise TraceError(f"index {c!r} is not supported by autograd_core.export")
        ax += 1
    while ax < len(shape):
        sl += [0, shape[ax], 1]
        ax += 1
    rec.emit("getitem", [rec.v(x)], {"slices": sl, "shape": list(out._data.shape)}, [out])
