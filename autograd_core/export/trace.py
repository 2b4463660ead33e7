"""`trace(module_or_fn, example_inputs)`: record one forward pass into a static `Graph`.

How: while the forward runs (modules in eval mode), every op entry point — the ops attached to
`Tensor`, the `autograd_core.*` / `ops.*` functions, `nn.functional` and the fused CNN/RNN kernels
— is temporarily replaced, wherever a module namespace or the Tensor class refers to it, by a
wrapper that runs the original and appends the op to the graph (restored in a `finally`). Only the
outermost call records: a fused kernel is one primitive, whatever it calls inside.

Safety: the example inputs are traced as tensors that require grad, so every value computed from
them carries a `grad_fn`. A tensor reaching a recorded op must be a graph input, a value an
earlier recorded op produced, a parameter/buffer/tensor attribute of the module, or a tensor made
by a factory (zeros, ones, tensor(...)) during the trace, or an all-zero tensor without history (the
initial state the recurrent layers create for hx=None); anything else — in particular a tensor with
a `grad_fn` that no recorded op produced — raises `TraceError` naming the op (strict=False bakes
unknown history-free tensors in as constants instead). Ops the exporter
cannot express (item(), numpy(), advanced indexing, random ops, dropout in training, ...) raise
`TraceError` as soon as they touch a traced value; a traced value is never baked into a constant.
"""
import functools
import inspect
import sys
import threading

import numpy as np

from .graph import Graph, Node

__all__ = ["trace", "TraceError"]


class TraceError(RuntimeError):
    """The forward pass cannot be expressed as a static graph (the message names the op)."""


_ACTIVE = None          # the running _Recorder (one trace at a time, process-wide)
_LOCK = threading.Lock()


# =============================================================================================
# the recorder
# =============================================================================================
class _Recorder:
    def __init__(self, strict):
        from ..tensor import Tensor
        self.Tensor = Tensor
        self.tid = threading.get_ident()
        self.depth = 0
        self.strict = strict
        self.vid = {}            # id(tensor) -> value name
        self.keep = []           # tensors kept alive so that ids stay unique
        self.const_names = set()  # value names that are constants or computed from constants only
        self.constants = {}      # name -> ndarray
        self.known = {}          # id(tensor) -> name, for parameters / buffers / attributes (lazy)
        self.nodes = []
        self.values = {}
        self.inputs = []
        self._n = 0
        self._scalars = {}

    # -- names -------------------------------------------------------------------------------
    def fresh(self, prefix="v"):
        while True:
            self._n += 1
            name = f"{prefix}{self._n}"
            if not any(i["name"] == name for i in self.inputs):
                return name

    def _unique(self, base):
        name = base
        k = 1
        while name in self.constants or name in self.values or any(i["name"] == name for i in self.inputs):
            k += 1
            name = f"{base}.{k}"
        return name

    # -- values ------------------------------------------------------------------------------
    def is_tensor(self, x):
        return isinstance(x, self.Tensor)

    def traced(self, t):
        """True if tensor t depends on the graph inputs (or on untraced computation)."""
        name = self.vid.get(id(t))
        if name is not None:
            return name not in self.const_names
        return t._fn is not None

    def any_traced(self, obj, depth=0):
        if isinstance(obj, self.Tensor):
            return self.traced(obj)
        if depth < 4:
            if isinstance(obj, (list, tuple)):
                return any(self.any_traced(o, depth + 1) for o in obj)
            if isinstance(obj, dict):
                return any(self.any_traced(o, depth + 1) for o in obj.values())
        return False

    def add_const(self, base, arr, tensor=None):
        name = self._unique(base)
        self.constants[name] = np.array(arr, copy=True)
        self.const_names.add(name)
        if tensor is not None:
            self.vid[id(tensor)] = name
            self.keep.append(tensor)
        return name

    def v(self, t):
        """The value name of tensor t (registering a parameter/buffer constant on first use)."""
        name = self.vid.get(id(t))
        if name is not None:
            return name
        if t._fn is not None:
            raise TraceError(
                f"a tensor reaching a traced op was produced by an operation the exporter did not record "
                f"(grad_fn={type(t._fn).__name__}): the op is not supported by autograd_core.export, or the "
                f"tensor was computed outside the traced call from values that require grad (pass it as an "
                f"input, or .detach() it outside the trace)")
        kname = self.known.get(id(t))
        if kname is not None:
            return self.add_const(kname, t._data, t)
        if self.strict and t._data.any():
            raise TraceError(
                f"a tensor of unknown origin (shape {list(t._data.shape)}, {t._data.dtype}) reaches a traced op: "
                f"it is not a graph input, a value computed by a recorded op, a parameter/buffer of the module "
                f"or a tensor created by a factory function during the trace. Register it as a buffer, pass it "
                f"as an input, or trace with strict=False to bake it in as a constant")
        # strict=False, or an all-zero tensor without history: the default initial state that the
        # recurrent layers create for hx=None (zeros carry no traced information)
        return self.add_const("zeros" if not t._data.any() else "const", t._data, t)

    def c(self, value, dtype):
        """A constant (Python scalar or array) as a value of `dtype`."""
        arr = np.asarray(value, dtype=dtype)
        if arr.ndim == 0:
            key = (arr.item(), arr.dtype.str, type(arr.item()).__name__)
            name = self._scalars.get(key)
            if name is None:
                name = self._scalars[key] = self.add_const("scalar", arr)
            return name
        return self.add_const("const", arr)

    def operand(self, x, dtype):
        """Tensor or scalar `x` as a value of `dtype` (a cast node when a tensor's dtype differs)."""
        dtype = np.dtype(dtype)
        if isinstance(x, self.Tensor):
            name = self.v(x)
            if x._data.dtype != dtype:
                name = self.tmp("cast", [name], {"dtype": dtype.name}, x._data.shape, dtype)
            return name
        if isinstance(x, np.ndarray):
            return self.c(x, dtype)
        if isinstance(x, (bool, int, float, np.generic)):
            return self.c(x, dtype)
        raise TraceError(f"unsupported operand of type {type(x).__name__} in a traced op")

    def alias(self, out, name):
        """`out` (a tensor) is the value `name` (identity ops: contiguous, detach, dropout in eval...)."""
        if isinstance(out, self.Tensor) and id(out) not in self.vid:
            self.vid[id(out)] = name
            self.keep.append(out)

    def _declare(self, name, shape, dtype):
        self.values[name] = {"shape": [int(s) for s in shape], "dtype": np.dtype(dtype).name}

    def tmp(self, op, inputs, attrs, shape, dtype, n_out=1):
        names = [self.fresh() for _ in range(n_out)]
        for nm in names:
            self._declare(nm, shape, dtype)
        self._node(op, inputs, attrs, names)
        return names[0] if n_out == 1 else names

    def _node(self, op, inputs, attrs, outs):
        self.nodes.append(Node(op, inputs, outs, attrs))
        if all(i is None or i in self.const_names for i in inputs):
            self.const_names.update(outs)

    def emit(self, op, inputs, attrs, outs):
        """Append a node producing the tensors `outs` (they are bound to fresh value names; a tensor
        already bound was modified in place and is re-bound)."""
        names = []
        for t in outs:
            if id(t) in self.vid:
                self._check_inplace(t, op)
            nm = self.fresh()
            self._declare(nm, t._data.shape, t._data.dtype)
            names.append(nm)
        self._node(op, inputs, attrs, names)
        for t, nm in zip(outs, names):
            self.vid[id(t)] = nm
            self.keep.append(t)
        return names

    def _check_inplace(self, t, what):
        if t._base is not None:
            raise TraceError(f"in-place {what} on a view of another tensor cannot be traced (the base would "
                             "change too); work out of place")
        for other in self.keep:
            if other is not t and getattr(other, "_base", None) is t:
                raise TraceError(f"in-place {what} on a tensor that has views cannot be traced (the views would "
                                 "change too); work out of place")

    # -- dispatch ----------------------------------------------------------------------------
    def call(self, orig, sig, kind, lower, label, args, kwargs):
        if kind == "forbidden":
            raise TraceError(f"{label}: random or stateful ops cannot be exported (the graph would bake one "
                             "sample in as a constant); pass random values in as inputs")
        if kind in ("unsupported", "factory", "factory_like"):
            if kind != "factory_like" and (self.any_traced(args) or self.any_traced(kwargs)):
                raise TraceError(f"{label} is not supported by autograd_core.export (it touches a traced value; "
                                 "supported ops: see autograd_core.export.supported_ops())")
            self.depth += 1
            try:
                out = orig(*args, **kwargs)
                if kind != "unsupported":
                    for t in _tensors_in(out, self.Tensor):
                        if id(t) not in self.vid:
                            self.add_const("const", t._data, t)
            finally:
                self.depth -= 1
            return out
        # kind == "record"
        if kind == "inplace":
            target = args[0] if args else None
            if isinstance(target, self.Tensor):
                self.depth += 1
                try:
                    self.v(target)
                    self._check_inplace(target, label)
                finally:
                    self.depth -= 1
        self.depth += 1
        try:
            out = orig(*args, **kwargs)
            vals = _bind(sig, args, kwargs)
            try:
                lower(self, vals, out)
            except TraceError:
                raise
            except Exception as e:  # a lowering bug or an argument form it does not handle
                raise TraceError(f"{label}: cannot export this call ({type(e).__name__}: {e})") from e
            for t in _tensors_in(out, self.Tensor):
                if id(t) not in self.vid:
                    raise TraceError(f"{label}: internal error, an output was not recorded")
        finally:
            self.depth -= 1
        return out


def _tensors_in(obj, Tensor):
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        out = []
        for o in obj:
            out += _tensors_in(o, Tensor)
        return out
    return []


def _bind(sig, args, kwargs):
    """Argument values in signature order (the *args tuple and the **kwargs dict included)."""
    if sig is None:
        return list(args) + ([kwargs] if kwargs else [])
    ba = sig.bind(*args, **kwargs)
    ba.apply_defaults()
    return list(ba.arguments.values())


# =============================================================================================
# lowerings: (recorder, argument values, eager output) -> nodes
# =============================================================================================
_LOWER = {}        # "module:attr" -> lowering
_KIND = {}         # "module:attr" -> "inplace" for in-place ops (else "record")


def _reg(*keys, inplace=False):
    def deco(fn):
        for k in keys:
            _LOWER[k] = fn
            if inplace:
                _KIND[k] = "inplace"
        return fn
    return deco


def _dt(t):
    return t._data.dtype


A = "autograd_core.ops.arith:"
P = "autograd_core.ops.pointwise:"
R = "autograd_core.ops.reduction:"
S = "autograd_core.ops.shape:"
I = "autograd_core.ops.indexing:"  # noqa: E741
IP = "autograd_core.ops.inplace:"
F = "autograd_core.nn.functional:"
C = "autograd_core.nn._functional_cnn:"
TT = "autograd_core.tensor:Tensor."


def _binary(op, swap=False, cmp=False):
    def lower(rec, v, out):
        x, y = v[0], v[1]
        if swap:
            x, y = y, x
        dt = _cmp_dtype(rec, x, y) if cmp else _dt(out)
        rec.emit(op, [rec.operand(x, dt), rec.operand(y, dt)], {}, [out])
    return lower


def _cmp_dtype(rec, x, y):
    ts = [a for a in (x, y) if rec.is_tensor(a)]
    dts = [_dt(a) for a in ts]
    dt = dts[0] if len(dts) == 1 else np.promote_types(*dts)
    other = y if rec.is_tensor(x) else x
    if len(ts) == 1 and dt.kind in "biu" and isinstance(other, float):
        dt = np.dtype(np.float32)
    return dt


def _scaled(rec, y, alpha, dt):
    name = rec.operand(y, dt)
    if alpha != 1:
        name = rec.tmp("mul", [name, rec.c(alpha, dt)], {}, np.shape(y._data) if rec.is_tensor(y) else (), dt)
    return name


@_reg(A + "add")
def _add(rec, v, out):
    x, y, alpha = v[0], v[1], v[2]
    dt = _dt(out)
    if not rec.is_tensor(y) and alpha != 1:
        y, alpha = y * alpha, 1
    rec.emit("add", [rec.operand(x, dt), _scaled(rec, y, alpha, dt)], {}, [out])


@_reg(A + "sub")
def _sub(rec, v, out):
    x, y, alpha = v[0], v[1], v[2]
    dt = _dt(out)
    if not rec.is_tensor(y) and alpha != 1:
        y, alpha = y * alpha, 1
    rec.emit("sub", [rec.operand(x, dt), _scaled(rec, y, alpha, dt)], {}, [out])


_reg(A + "rsub")(_binary("sub", swap=True))
_reg(A + "mul", A + "multiply")(_binary("mul"))
_reg(A + "rdiv")(_binary("div", swap=True))
_reg(A + "pow")(_binary("pow"))
_reg(A + "rpow")(_binary("pow", swap=True))


@_reg(A + "div")
def _div(rec, v, out):
    if len(v) > 2 and v[2] is not None:
        raise TraceError(f"div(rounding_mode={v[2]!r}) is not supported by autograd_core.export")
    _binary("div")(rec, v, out)


@_reg(A + "matmul", A + "mm", A + "bmm", A + "mv", A + "dot")
def _matmul(rec, v, out):
    dt = _dt(out)
    rec.emit("matmul", [rec.operand(v[0], dt), rec.operand(v[1], dt)], {}, [out])


@_reg(A + "rmatmul")
def _rmatmul(rec, v, out):
    dt = _dt(out)
    rec.emit("matmul", [rec.operand(v[1], dt), rec.operand(v[0], dt)], {}, [out])


@_reg(A + "outer")
def _outer(rec, v, out):
    a, b = v[0], v[1]
    dt = _dt(out)
    an = rec.tmp("reshape", [rec.operand(a, dt)], {"shape": [a._data.size, 1]}, (a._data.size, 1), dt)
    bn = rec.tmp("reshape", [rec.operand(b, dt)], {"shape": [1, b._data.size]}, (1, b._data.size), dt)
    rec.emit("mul", [an, bn], {}, [out])


_UNARY_OPS = ["neg", "exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "abs", "sin", "cos", "tan", "asin",
              "acos", "atan", "sinh", "cosh", "tanh", "sigmoid", "reciprocal", "relu", "square", "sign", "floor",
              "ceil", "trunc", "logical_not", "isnan", "isinf", "isfinite"]


def _unary(op):
    def lower(rec, v, out):
        x = v[0]
        src = rec.operand(x, _dt(out)) if _dt(out).kind == "f" else rec.v(x)
        rec.emit(op, [src], {}, [out])
    return lower


for _op in _UNARY_OPS:
    _mod = A if _op == "neg" else P
    _reg(_mod + _op)(_unary(_op))
_reg(F + "tanh")(_unary("tanh"))
_reg(F + "sigmoid")(_unary("sigmoid"))


@_reg(P + "round")
def _round(rec, v, out):
    if len(v) > 1 and v[1]:
        raise TraceError("round(decimals != 0) is not supported by autograd_core.export")
    rec.emit("round", [rec.v(v[0])], {}, [out])


@_reg(P + "rsqrt")
def _rsqrt(rec, v, out):
    x = v[0]
    dt = _dt(out)
    s = rec.tmp("sqrt", [rec.operand(x, dt)], {}, x._data.shape, dt)
    rec.emit("reciprocal", [s], {}, [out])


@_reg(P + "leaky_relu", F + "leaky_relu", F + "leaky_relu_")
def _leaky(rec, v, out):
    rec.emit("leaky_relu", [rec.v(v[0])], {"negative_slope": float(v[1])}, [out])


@_reg(F + "relu", F + "relu_")
def _frelu(rec, v, out):
    rec.emit("relu", [rec.v(v[0])], {}, [out])


@_reg(P + "softplus", F + "softplus")
def _softplus(rec, v, out):
    rec.emit("softplus", [rec.operand(v[0], _dt(out))], {"beta": float(v[1]), "threshold": float(v[2])}, [out])


@_reg(P + "elu", F + "elu")
def _elu(rec, v, out):
    rec.emit("elu", [rec.operand(v[0], _dt(out))], {"alpha": float(v[1])}, [out])


def _clamp_impl(rec, x, lo, hi, out):
    dt = _dt(out)
    if rec.is_tensor(lo) or rec.is_tensor(hi):
        cur = rec.operand(x, dt)
        steps = [(op, b) for op, b in (("maximum", lo), ("minimum", hi)) if b is not None]
        for k, (op, b) in enumerate(steps):
            if k == len(steps) - 1:
                rec.emit(op, [cur, rec.operand(b, dt)], {}, [out])
            else:
                cur = rec.tmp(op, [cur, rec.operand(b, dt)], {}, out._data.shape, dt)
        return
    rec.emit("clamp", [rec.operand(x, dt)], {"min": None if lo is None else float(lo),
                                             "max": None if hi is None else float(hi)}, [out])


@_reg(P + "clamp")
def _clamp(rec, v, out):
    _clamp_impl(rec, v[0], v[1], v[2], out)


@_reg(P + "clamp_min")
def _clamp_min(rec, v, out):
    _clamp_impl(rec, v[0], v[1], None, out)


@_reg(P + "clamp_max")
def _clamp_max(rec, v, out):
    _clamp_impl(rec, v[0], None, v[1], out)


@_reg(F + "hardtanh")
def _hardtanh(rec, v, out):
    _clamp_impl(rec, v[0], v[1], v[2], out)


@_reg(F + "relu6")
def _relu6(rec, v, out):
    _clamp_impl(rec, v[0], 0.0, 6.0, out)


_reg(P + "maximum")(_binary("maximum"))
_reg(P + "minimum")(_binary("minimum"))
_reg(P + "atan2")(_binary("atan2"))
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    _reg(P + _op)(_binary(_op, cmp=True))
for _op in ("logical_and", "logical_or", "logical_xor"):
    _reg(P + _op)(_binary(_op, cmp=True))


@_reg(P + "where")
def _where(rec, v, out):
    cond, a, b = v[0], v[1], v[2]
    if a is None or b is None:
        raise TraceError("where(condition) (the nonzero form) is not supported by autograd_core.export")
    dt = _dt(out)
    cn = rec.operand(cond, np.bool_)
    rec.emit("where", [cn, rec.operand(a, dt), rec.operand(b, dt)], {}, [out])


@_reg(P + "lerp")
def _lerp(rec, v, out):
    start, end, w = v[0], v[1], v[2]
    dt = _dt(out)
    shape = out._data.shape
    d = rec.tmp("sub", [rec.operand(end, dt), rec.operand(start, dt)], {}, np.broadcast_shapes(
        start._data.shape, end._data.shape if rec.is_tensor(end) else ()), dt)
    m = rec.tmp("mul", [d, rec.operand(w, dt)], {}, shape, dt)
    rec.emit("add", [rec.operand(start, dt), m], {}, [out])


@_reg(I + "masked_fill")
def _masked_fill(rec, v, out):
    x, mask, value = v[0], v[1], v[2]
    dt = _dt(out)
    rec.emit("where", [rec.operand(mask, np.bool_), rec.operand(value, dt), rec.operand(x, dt)], {}, [out])


@_reg(F + "silu")
def _silu(rec, v, out):
    x = v[0]
    xn = rec.v(x)
    s = rec.tmp("sigmoid", [xn], {}, x._data.shape, _dt(x))
    rec.emit("mul", [xn, s], {}, [out])


@_reg(F + "logsigmoid")
def _logsigmoid(rec, v, out):
    x = v[0]
    sh, dt = x._data.shape, _dt(x)
    n = rec.tmp("neg", [rec.v(x)], {}, sh, dt)
    s = rec.tmp("softplus", [n], {"beta": 1.0, "threshold": 20.0}, sh, dt)
    rec.emit("neg", [s], {}, [out])


@_reg(F + "softsign")
def _softsign(rec, v, out):
    x = v[0]
    sh, dt = x._data.shape, _dt(x)
    a = rec.tmp("abs", [rec.v(x)], {}, sh, dt)
    d = rec.tmp("add", [a, rec.c(1, dt)], {}, sh, dt)
    rec.emit("div", [rec.v(x), d], {}, [out])


@_reg(F + "gelu")
def _gelu(rec, v, out):
    x, approximate = v[0], v[1]
    if approximate != "tanh":
        raise TraceError("gelu(approximate='none') needs erf, which autograd_core.runtime does not provide; "
                         "use approximate='tanh'")
    sh, dt = x._data.shape, _dt(x)
    xn = rec.v(x)
    x3 = rec.tmp("mul", [xn, rec.tmp("square", [xn], {}, sh, dt)], {}, sh, dt)
    inner = rec.tmp("add", [xn, rec.tmp("mul", [x3, rec.c(0.044715, dt)], {}, sh, dt)], {}, sh, dt)
    t = rec.tmp("tanh", [rec.tmp("mul", [inner, rec.c(np.sqrt(2.0 / np.pi), dt)], {}, sh, dt)], {}, sh, dt)
    h = rec.tmp("mul", [rec.tmp("add", [t, rec.c(1.0, dt)], {}, sh, dt), rec.c(0.5, dt)], {}, sh, dt)
    rec.emit("mul", [xn, h], {}, [out])


# -- reductions --------------------------------------------------------------------------------
def _axes_of(dim, ndim):
    if dim is None or dim == ():
        return []
    if isinstance(dim, (int, np.integer)):
        dim = [int(dim)]
    return sorted({int(d) % max(ndim, 1) for d in dim})


def _reduction(op):
    def lower(rec, v, out):
        x, dim, keep = v[0], v[1], v[2]
        dt = _dt(out)
        src = rec.operand(x, dt)
        rec.emit(op, [src], {"axes": _axes_of(dim, x._data.ndim), "keepdim": bool(keep)}, [out])
    return lower


_reg(R + "sum")(_reduction("sum"))
_reg(R + "mean")(_reduction("mean"))
_reg(R + "amax")(_reduction("amax"))
_reg(R + "amin")(_reduction("amin"))
_reg(R + "prod")(_reduction("prod"))


def _extremum(is_max):
    def lower(rec, v, out):
        x, dim, keep = v[0], v[1], v[2]
        op = "amax" if is_max else "amin"
        if rec.is_tensor(dim):
            rec.emit("maximum" if is_max else "minimum", [rec.v(x), rec.operand(dim, _dt(x))], {}, [out])
            return
        if dim is None:
            rec.emit(op, [rec.v(x)], {"axes": [], "keepdim": False}, [out])
            return
        vals, idx = out[0], out[1]
        ax = int(dim) % max(x._data.ndim, 1)
        rec.emit(op, [rec.v(x)], {"axes": [ax], "keepdim": bool(keep)}, [vals])
        rec.emit("argmax" if is_max else "argmin", [rec.v(x)], {"axis": ax, "keepdim": bool(keep)}, [idx])
    return lower


_reg(R + "max")(_extremum(True))
_reg(R + "min")(_extremum(False))


def _arg(is_max):
    def lower(rec, v, out):
        x, dim, keep = v[0], v[1], v[2]
        src = rec.v(x)
        if dim is None:
            src = rec.tmp("reshape", [src], {"shape": [x._data.size]}, (x._data.size,), _dt(x))
            rec.emit("argmax" if is_max else "argmin", [src], {"axis": 0, "keepdim": False}, [out])
            if keep:
                raise TraceError("argmax(dim=None, keepdim=True) is not supported by autograd_core.export")
            return
        rec.emit("argmax" if is_max else "argmin", [src], {"axis": int(dim) % max(x._data.ndim, 1),
                                                          "keepdim": bool(keep)}, [out])
    return lower


_reg(R + "argmax")(_arg(True))
_reg(R + "argmin")(_arg(False))


def _softmax(op):
    def lower(rec, v, out):
        from ..ops.reduction import _softmax_dim
        x, dim = v[0], v[1]
        dt = _dt(out)
        src = rec.operand(x, dt)
        rec.emit(op, [src], {"axis": int(_softmax_dim(dim, x._data.ndim))}, [out])
    return lower


_reg(R + "softmax", F + "softmax")(_softmax("softmax"))
_reg(R + "log_softmax", F + "log_softmax")(_softmax("log_softmax"))


@_reg(R + "logsumexp")
def _logsumexp(rec, v, out):
    x, dim, keep = v[0], v[1], v[2]
    rec.emit("logsumexp", [rec.operand(x, _dt(out))], {"axes": _axes_of(dim, x._data.ndim), "keepdim": bool(keep)},
             [out])


def _var(is_std):
    def lower(rec, v, out):
        x, dim, unbiased, keep, corr = v[0], v[1], v[2], v[3], v[4]
        if corr is None:
            corr = 0 if unbiased is False else 1
        rec.emit("var", [rec.v(x)], {"axes": _axes_of(dim, x._data.ndim), "keepdim": bool(keep),
                                     "correction": float(corr), "std": is_std}, [out])
    return lower


_reg(R + "var")(_var(False))
_reg(R + "std")(_var(True))


@_reg(R + "norm")
def _norm(rec, v, out):
    x, p, dim, keep = v[0], v[1], v[2], v[3]
    dt = _dt(out)
    axes = _axes_of(dim, x._data.ndim)
    src = rec.operand(x, dt)
    sh = x._data.shape
    red = {"axes": axes, "keepdim": bool(keep)}
    rshape = out._data.shape
    if p in ("fro", 2, 2.0):
        s = rec.tmp("sum", [rec.tmp("square", [src], {}, sh, dt)], red, rshape, dt)
        rec.emit("sqrt", [s], {}, [out])
    elif p in (1, 1.0):
        rec.emit("sum", [rec.tmp("abs", [src], {}, sh, dt)], red, [out])
    elif p == float("inf"):
        rec.emit("amax", [rec.tmp("abs", [src], {}, sh, dt)], red, [out])
    else:
        raise TraceError(f"norm(p={p!r}) is not supported by autograd_core.export")


# -- shapes ------------------------------------------------------------------------------------
def _reshape_like_out(rec, v, out):
    x = v[0]
    if out is x:
        return
    rec.emit("reshape", [rec.v(x)], {"shape": list(out._data.shape)}, [out])


for _n in ("reshape", "view", "view_as", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze"):
    _reg(S + _n)(_reshape_like_out)


def _identity(rec, v, out):
    x = v[0]
    if out is x:
        return
    rec.alias(out, rec.v(x))


_reg(S + "clone", S + "contiguous", TT + "detach")(_identity)


@_reg(TT + "detach_")
def _detach_(rec, v, out):
    return None


def _cast_like_out(rec, v, out):
    x = v[0]
    if not rec.is_tensor(out) or out is x:
        return
    if _dt(out) == _dt(x):
        rec.alias(out, rec.v(x))
    else:
        rec.emit("cast", [rec.v(x)], {"dtype": _dt(out).name}, [out])


_reg(S + "to", S + "type_as", S + "float_", S + "double", S + "half", S + "long", S + "int_", S + "bool_",
     S + "type_")(_cast_like_out)


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


_reg(S + "transpose")(_perm_lower(lambda v, nd: _swap(nd, int(v[1]), int(v[2]))))
_reg(S + "t")(_perm_lower(lambda v, nd: _swap(nd, 0, 1) if nd == 2 else list(range(nd))))
_reg(S + "_T")(_perm_lower(lambda v, nd: list(range(nd))[::-1]))
_reg(S + "_mT")(_perm_lower(lambda v, nd: _swap(nd, -2, -1)))
_reg(S + "permute")(_perm_lower(_permute_dims))
_reg(S + "movedim")(_perm_lower(_movedim_perm))


@_reg(S + "expand", S + "expand_as", S + "broadcast_to")
def _expand(rec, v, out):
    x = v[0]
    if out._data.shape == x._data.shape:
        if out is not x:
            rec.alias(out, rec.v(x))
        return
    rec.emit("expand", [rec.v(x)], {"shape": list(out._data.shape)}, [out])


@_reg(S + "repeat")
def _repeat(rec, v, out):
    x, sizes = v[0], v[1]
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    rec.emit("tile", [rec.v(x)], {"repeats": [int(s) for s in sizes]}, [out])


@_reg(S + "cat")
def _cat(rec, v, out):
    tensors, dim = v[0], v[1]
    if len(v) > 2 and v[2] is not None:
        raise TraceError("cat(out=...) is not supported by autograd_core.export")
    dt = _dt(out)
    ts = [t for t in tensors if not (t._data.ndim == 1 and t._data.size == 0)]  # torch skips empty 1-D
    rec.emit("concat", [rec.operand(t, dt) for t in ts], {"axis": int(dim) % out._data.ndim}, [out])


@_reg(S + "stack")
def _stack(rec, v, out):
    tensors, dim = v[0], v[1]
    if len(v) > 2 and v[2] is not None:
        raise TraceError("stack(out=...) is not supported by autograd_core.export")
    dt = _dt(out)
    rec.emit("stack", [rec.operand(t, dt) for t in tensors], {"axis": int(dim) % out._data.ndim}, [out])


@_reg(S + "hstack")
def _hstack(rec, v, out):
    tensors = v[0]
    dt = _dt(out)
    axis = 0 if tensors[0]._data.ndim == 1 else 1
    rec.emit("concat", [rec.operand(t, dt) for t in tensors], {"axis": axis}, [out])


@_reg(S + "vstack")
def _vstack(rec, v, out):
    dt = _dt(out)
    names = []
    for t in v[0]:
        n = rec.operand(t, dt)
        if t._data.ndim < 2:
            shp = (1, t._data.size)
            n = rec.tmp("reshape", [n], {"shape": list(shp)}, shp, dt)
        names.append(n)
    rec.emit("concat", names, {"axis": 0}, [out])


def _split_common(rec, x, axis, outs):
    sizes = [int(o._data.shape[axis]) for o in outs]
    rec.emit("split", [rec.v(x)], {"axis": axis, "sizes": sizes}, list(outs))


@_reg(S + "split", S + "chunk")
def _split(rec, v, out):
    x, dim = v[0], v[2]
    _split_common(rec, x, int(dim) % x._data.ndim, out)


@_reg(S + "unbind")
def _unbind(rec, v, out):
    x, dim = v[0], v[1]
    axis = int(dim) % x._data.ndim
    shp = list(x._data.shape)
    shp[axis] = 1
    pieces = rec.tmp("split", [rec.v(x)], {"axis": axis, "sizes": [1] * len(out)}, shp, _dt(x), n_out=len(out))
    if len(out) == 1:
        pieces = [pieces]
    for p, o in zip(pieces, out):
        rec.emit("reshape", [p], {"shape": list(o._data.shape)}, [o])


@_reg(I + "getitem")
def _getitem(rec, v, out):
    from ..ops.indexing import normalize_key
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


# -- in-place ops: the out-of-place lowering, the tensor re-bound to the result -----------------
_INPLACE = {"add_": A + "add", "sub_": A + "sub", "mul_": A + "mul", "div_": A + "div", "pow_": A + "pow",
            "neg_": A + "neg", "exp_": P + "exp", "log_": P + "log", "sqrt_": P + "sqrt", "abs_": P + "abs",
            "tanh_": P + "tanh", "sigmoid_": P + "sigmoid", "relu_": P + "relu", "sin_": P + "sin",
            "cos_": P + "cos", "floor_": P + "floor", "ceil_": P + "ceil", "round_": P + "round",
            "clamp_": P + "clamp", "clamp_min_": P + "clamp_min", "clamp_max_": P + "clamp_max",
            "leaky_relu_": P + "leaky_relu", "lerp_": P + "lerp", "_masked_fill_": I + "masked_fill"}


def _inplace_lower(target_key):
    def lower(rec, v, out):
        base = _LOWER[target_key]
        sig = _SIGS.get(target_key)
        if sig is not None:  # re-bind the raw values to the out-of-place signature (fills its defaults)
            args = v[1] if len(v) > 1 and isinstance(v[1], tuple) else ()
            kw = v[2] if len(v) > 2 and isinstance(v[2], dict) else {}
            v = _bind(sig, (v[0],) + tuple(args), kw)
        base(rec, v, out)
    return lower


for _n, _t in _INPLACE.items():
    _reg(IP + _n, inplace=True)(_inplace_lower(_t))


@_reg(IP + "_addcmul", IP + "_addcdiv")
def _addc(rec, v, out):
    raise TraceError("addcmul/addcdiv are not supported by autograd_core.export")


# -- nn.functional and the fused kernels --------------------------------------------------------
@_reg(F + "linear")
def _linear(rec, v, out):
    x, w, b = v[0], v[1], v[2]
    dt = _dt(out)
    xn, wn = rec.v(x), rec.v(w)
    bn = None if b is None else rec.v(b)
    if wn in rec.const_names and (bn is None or bn in rec.const_names):
        rec.emit("linear", [xn, wn] + ([bn] if bn is not None else []), {}, [out])
        return
    wt = rec.tmp("transpose", [wn], {"perm": [1, 0]}, w._data.shape[::-1], dt)
    if bn is None:
        rec.emit("matmul", [xn, wt], {}, [out])
    else:
        m = rec.tmp("matmul", [xn, wt], {}, out._data.shape, dt)
        rec.emit("add", [m, bn], {}, [out])


def _with_batch(rec, x, out, build):
    """Run `build(input_name, out_or_spec)` on a 4-D view when x is unbatched (3-D)."""
    if x._data.ndim == 4:
        build(rec.v(x), out)
        return
    xs = (1,) + x._data.shape
    xn = rec.tmp("reshape", [rec.v(x)], {"shape": list(xs)}, xs, _dt(x))
    os = (1,) + out._data.shape
    tmp = build(xn, os)
    rec.emit("reshape", [tmp], {"shape": list(out._data.shape)}, [out])


def _pads_of(padding, w_shape, dil, stride):
    from ..nn import _functional_cnn as FC
    (pt, pb), (pl, pr) = FC._conv_padding(padding, w_shape[2:], dil, stride)
    return [pt, pl, pb, pr]


@_reg(C + "conv2d")
def _conv2d(rec, v, out):
    from ..nn import _functional_cnn as FC
    x, w, b, stride, padding, dilation, groups = v[:7]
    s, d = list(FC._pair(stride)), list(FC._pair(dilation))
    attrs = {"stride": s, "pads": _pads_of(padding, w._data.shape, d, s), "dilation": d, "groups": int(groups)}
    ins = [rec.v(w)] + ([] if b is None else [rec.v(b)])

    def build(xn, o):
        if isinstance(o, tuple):
            return rec.tmp("conv2d", [xn] + ins, attrs, o, _dt(x))
        rec.emit("conv2d", [xn] + ins, attrs, [o])
    _with_batch(rec, x, out, build)


@_reg(C + "conv1d")
def _conv1d(rec, v, out):
    from ..nn import _functional_cnn as FC
    x, w, b, stride, padding, dilation, groups = v[:7]
    k = w._data.shape[2]
    s, d = FC._single(stride), FC._single(dilation)
    ((pl, pr),) = FC._conv_padding(padding, (k,), (d,), (s,))
    dt = _dt(x)
    xs = (x._data.shape[:-1] if x._data.ndim == 3 else (1,) + x._data.shape[:-1]) + (1, x._data.shape[-1])
    xn = rec.tmp("reshape", [rec.v(x)], {"shape": list(xs)}, xs, dt)
    ws = w._data.shape[:2] + (1, k)
    wn = rec.tmp("reshape", [rec.v(w)], {"shape": list(ws)}, ws, dt)
    os = (xs[0], w._data.shape[0], 1, out._data.shape[-1])
    y = rec.tmp("conv2d", [xn, wn] + ([] if b is None else [rec.v(b)]),
                {"stride": [1, s], "pads": [0, pl, 0, pr], "dilation": [1, d], "groups": int(groups)}, os, dt)
    rec.emit("reshape", [y], {"shape": list(out._data.shape)}, [out])


def _pool_attrs(kernel_size, stride, padding, dilation):
    from ..nn import _functional_cnn as FC
    k = list(FC._pair(kernel_size))
    if stride is None or (not isinstance(stride, (int, np.integer)) and len(stride) == 0):
        s = list(k)
    else:
        s = list(FC._pair(stride))
    return k, s, list(FC._pair(padding)), list(FC._pair(dilation))


@_reg(C + "max_pool2d")
def _max_pool2d(rec, v, out):
    x, kernel_size, stride, padding, dilation, ceil_mode, return_indices = v[:7]
    if return_indices:
        raise TraceError("max_pool2d(return_indices=True) is not supported by autograd_core.export")
    k, s, p, d = _pool_attrs(kernel_size, stride, padding, dilation)
    attrs = {"kernel_size": k, "stride": s, "padding": p, "dilation": d, "ceil_mode": bool(ceil_mode)}

    def build(xn, o):
        if isinstance(o, tuple):
            return rec.tmp("max_pool2d", [xn], attrs, o, _dt(x))
        rec.emit("max_pool2d", [xn], attrs, [o])
    _with_batch(rec, x, out, build)


@_reg(C + "avg_pool2d")
def _avg_pool2d(rec, v, out):
    x, kernel_size, stride, padding, ceil_mode, cip, div = v[:7]
    k, s, p, _ = _pool_attrs(kernel_size, stride, padding, 1)
    attrs = {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": bool(ceil_mode),
             "count_include_pad": bool(cip), "divisor_override": None if div is None else float(div)}

    def build(xn, o):
        if isinstance(o, tuple):
            return rec.tmp("avg_pool2d", [xn], attrs, o, _dt(x))
        rec.emit("avg_pool2d", [xn], attrs, [o])
    _with_batch(rec, x, out, build)


@_reg(C + "adaptive_avg_pool2d")
def _adaptive_avg_pool2d(rec, v, out):
    x = v[0]
    attrs = {"output_size": [int(s) for s in out._data.shape[-2:]]}

    def build(xn, o):
        if isinstance(o, tuple):
            return rec.tmp("adaptive_avg_pool2d", [xn], attrs, o, _dt(x))
        rec.emit("adaptive_avg_pool2d", [xn], attrs, [o])
    _with_batch(rec, x, out, build)


def _pool1d(op_key, fixup):
    def lower(rec, v, out):
        x = v[0]
        dt = _dt(x)
        xs = x._data.shape[:-1] + (1, x._data.shape[-1])
        xn = rec.tmp("reshape", [rec.v(x)], {"shape": list(xs)}, xs, dt)
        os = out._data.shape[:-1] + (1, out._data.shape[-1])
        attrs = fixup(v)
        if len(xs) == 3:
            xs4 = (1,) + xs
            xn = rec.tmp("reshape", [xn], {"shape": list(xs4)}, xs4, dt)
            os = (1,) + os
        y = rec.tmp(op_key, [xn], attrs, os, dt)
        rec.emit("reshape", [y], {"shape": list(out._data.shape)}, [out])
    return lower


def _mp1d_attrs(v):
    from ..nn import _functional_cnn as FC
    _, kernel_size, stride, padding, dilation, ceil_mode, return_indices = v[:7]
    if return_indices:
        raise TraceError("max_pool1d(return_indices=True) is not supported by autograd_core.export")
    k = FC._single(kernel_size)
    s = k if stride is None or (not isinstance(stride, (int, np.integer)) and len(stride) == 0) else \
        FC._single(stride)
    return {"kernel_size": [1, k], "stride": [1, s], "padding": [0, FC._single(padding)],
            "dilation": [1, FC._single(dilation)], "ceil_mode": bool(ceil_mode)}


def _ap1d_attrs(v):
    from ..nn import _functional_cnn as FC
    _, kernel_size, stride, padding, ceil_mode, cip = v[:6]
    k = FC._single(kernel_size)
    s = k if stride is None or (not isinstance(stride, (int, np.integer)) and len(stride) == 0) else \
        FC._single(stride)
    return {"kernel_size": [1, k], "stride": [1, s], "padding": [0, FC._single(padding)],
            "ceil_mode": bool(ceil_mode), "count_include_pad": bool(cip), "divisor_override": None}


_reg(C + "max_pool1d")(_pool1d("max_pool2d", _mp1d_attrs))
_reg(C + "avg_pool1d")(_pool1d("avg_pool2d", _ap1d_attrs))
_reg(C + "adaptive_avg_pool1d")(_pool1d("adaptive_avg_pool2d",
                                        lambda v: {"output_size": [1, int(v[1] if not isinstance(v[1], (tuple, list))
                                                                          else v[1][0])]}))


@_reg(C + "batch_norm")
def _batch_norm(rec, v, out):
    x, rm, rv, w, b, training, momentum, eps = v[:8]
    if training:
        raise TraceError("batch_norm(training=True) cannot be exported: trace the module in eval mode "
                         "(trace() calls .eval()) or pass training=False")
    if rm is None or rv is None:
        raise TraceError("batch_norm without running statistics cannot be exported")
    ins = [rec.v(x), rec.v(rm), rec.v(rv), None if w is None else rec.v(w), None if b is None else rec.v(b)]
    while ins[-1] is None:
        ins.pop()
    rec.emit("batch_norm", ins, {"eps": float(eps)}, [out])


@_reg(C + "layer_norm")
def _layer_norm(rec, v, out):
    x, ns, w, b, eps = v[:5]
    ns = [int(ns)] if isinstance(ns, (int, np.integer)) else [int(s) for s in ns]
    ins = [rec.v(x), None if w is None else rec.v(w), None if b is None else rec.v(b)]
    while ins[-1] is None:
        ins.pop()
    rec.emit("layer_norm", ins, {"normalized_shape": ns, "eps": float(eps)}, [out])


def _dropout(rec, v, out):
    x, p, training = v[0], v[1], v[2]
    if training and p > 0:
        raise TraceError("dropout in training mode cannot be exported (it is random); trace in eval mode")
    if out is not x:
        rec.alias(out, rec.v(x))


_reg(C + "dropout", C + "dropout1d", C + "dropout2d")(_dropout)


def _cell_ins(rec, x, hs, w_ih, w_hh, b_ih, b_hh):
    ins = [rec.v(x)] + [rec.v(h) for h in hs] + [rec.v(w_ih), rec.v(w_hh),
                                                  None if b_ih is None else rec.v(b_ih),
                                                  None if b_hh is None else rec.v(b_hh)]
    while ins[-1] is None:
        ins.pop()
    for n in ins[1 + len(hs):]:
        if n is not None and n not in rec.const_names:
            raise TraceError("recurrent-cell weights computed from traced values are not supported by "
                             "autograd_core.export (they must be parameters)")
    return ins


@_reg(C + "gru_cell")
def _gru_cell(rec, v, out):
    x, h, w_ih, w_hh, b_ih, b_hh = v[:6]
    rec.emit("gru_cell", _cell_ins(rec, x, [h], w_ih, w_hh, b_ih, b_hh), {}, [out])


@_reg(C + "lstm_cell")
def _lstm_cell(rec, v, out):
    x, hx, w_ih, w_hh, b_ih, b_hh = v[:6]
    h, c = hx
    rec.emit("lstm_cell", _cell_ins(rec, x, [h, c], w_ih, w_hh, b_ih, b_hh), {}, list(out))


def _rnn_cell(act):
    def lower(rec, v, out):
        x, h, w_ih, w_hh, b_ih, b_hh = v[:6]
        dt = _dt(out)
        sh = out._data.shape
        a = rec.tmp("linear", [rec.v(x), rec.v(w_ih)] + ([] if b_ih is None else [rec.v(b_ih)]), {}, sh, dt)
        bb = rec.tmp("linear", [rec.v(h), rec.v(w_hh)] + ([] if b_hh is None else [rec.v(b_hh)]), {}, sh, dt)
        s = rec.tmp("add", [a, bb], {}, sh, dt)
        rec.emit(act, [s], {}, [out])
    return lower


_reg(C + "rnn_tanh_cell")(_rnn_cell("tanh"))
_reg(C + "rnn_relu_cell")(_rnn_cell("relu"))


@_reg(C + "_gru_layer")
def _gru_layer(rec, v, out):
    """A whole GRU layer over (T, B, I): unrolled into T gru_cell nodes (T is static)."""
    x, h0, w_ih, w_hh, b_ih, b_hh = v[:6]
    reverse = bool(v[6]) if len(v) > 6 else False
    Y, hlast = out
    T, B, _ = x._data.shape
    H = h0._data.shape[-1]
    dt = _dt(x)
    wins = [rec.v(w_ih), rec.v(w_hh), None if b_ih is None else rec.v(b_ih), None if b_hh is None else rec.v(b_hh)]
    while wins[-1] is None:
        wins.pop()
    xn = rec.v(x)
    steps = [None] * T
    h = rec.v(h0)
    order = range(T - 1, -1, -1) if reverse else range(T)
    for t in order:
        sl = [t, t + 1, 1, 0, B, 1, 0, x._data.shape[2], 1]
        xt = rec.tmp("getitem", [xn], {"slices": sl, "shape": [B, x._data.shape[2]]}, (B, x._data.shape[2]), dt)
        h = rec.tmp("gru_cell", [xt, h] + wins, {}, (B, H), dt)
        steps[t] = h
    rec.emit("stack", steps, {"axis": 0}, [Y])
    rec.alias(hlast, h)


# Tensor properties (getters) recorded like methods
_PROPS = {"T": S + "_T", "mT": S + "_mT", "data": TT + "detach"}

# Tensor methods that stay untouched (metadata, hooks, printing) — everything else public is wrapped
_SAFE_TENSOR = {"__init__", "__repr__", "__str__", "__format__", "__hash__", "__len__", "__iter__", "__deepcopy__",
                "__reduce_ex__", "size", "dim", "ndimension", "numel", "nelement", "element_size",
                "is_floating_point", "is_contiguous", "requires_grad_", "retain_grad", "register_hook", "cpu",
                "cuda", "where", "__pos__", "backward"}

# factories: create constants (refuse traced arguments); random ones are refused outright
_FACTORIES = ["tensor", "as_tensor", "scalar_tensor", "from_numpy"]
_FACTORIES_LIKE = ["zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like", "arange",
                   "linspace", "logspace", "eye"]
_RANDOM = ["rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal", "bernoulli",
           "multinomial", "normal_", "uniform_", "bernoulli_", "exponential_", "random_"]

# modules whose public functions are op entry points: unsupported unless lowered above
_OP_MODULES = ["autograd_core.ops.arith", "autograd_core.ops.pointwise", "autograd_core.ops.reduction",
               "autograd_core.ops.shape", "autograd_core.ops.indexing", "autograd_core.ops.inplace",
               "autograd_core.nn.functional", "autograd_core.nn._functional_cnn", "autograd_core.nn.loss"]
_OP_PREFIXES = ("autograd_core.ops.", "autograd_core.nn._functional", "autograd_core.nn.functional")

_SIGS = {}


def supported_ops():
    """The autograd_core functions the tracer records (as 'module:function')."""
    return sorted(_LOWER)


# =============================================================================================
# patching
# =============================================================================================
def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _make_wrapper(orig, kind, lower, label):
    sig = _signature(orig) if kind in ("record", "inplace") else None

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        rec = _ACTIVE
        if rec is None or rec.depth or threading.get_ident() != rec.tid:
            return orig(*args, **kwargs)
        return rec.call(orig, sig, kind, lower, label, args, kwargs)
    wrapper.__trace_original__ = orig
    return wrapper


def _plan_wrappers():
    """id(original function) -> (original, wrapper), for every op entry point."""
    import autograd_core  # noqa: F401  (makes sure the op modules are imported)
    try:
        import autograd_core.nn  # noqa: F401
    except ImportError:
        pass
    plan = {}
    claimed = {}

    def add(fn, kind, lower, label):
        if id(fn) in plan:
            return
        plan[id(fn)] = (fn, _make_wrapper(fn, kind, lower, label))
        claimed[id(fn)] = label

    for key, lower in _LOWER.items():
        mod_name, attr = key.split(":")
        obj = sys.modules.get(mod_name)
        for part in attr.split("."):
            obj = (vars(obj).get(part) if isinstance(obj, type) else getattr(obj, part, None)) \
                if obj is not None else None
        fn = obj
        if fn is None or not callable(fn):
            continue
        attr = attr.rsplit(".", 1)[-1]
        if key not in _SIGS:
            _SIGS[key] = _signature(fn)
        add(fn, _KIND.get(key, "record"), lower, f"{attr}()")
    creation = sys.modules.get("autograd_core.creation")
    for name in _RANDOM:
        fn = getattr(creation, name, None)
        if fn is not None:
            add(fn, "forbidden", None, f"{name}()")
    for names, kind in ((_FACTORIES, "factory"), (_FACTORIES_LIKE, "factory_like")):
        for name in names:
            fn = getattr(creation, name, None)
            if fn is not None:
                add(fn, kind, None, f"{name}()")
    for mod_name in sorted(m for m in sys.modules if m in _OP_MODULES or m.startswith(_OP_PREFIXES)):
        mod = sys.modules.get(mod_name)
        if mod is None:
            continue
        for name, fn in list(vars(mod).items()):
            if (name.startswith("_") or not inspect.isfunction(fn) or getattr(fn, "__module__", None) != mod_name):
                continue
            add(fn, "unsupported", None, f"{name}()")
    from ..tensor import Tensor
    for name, fn in list(vars(Tensor).items()):
        if not inspect.isfunction(fn) or name in _SAFE_TENSOR:
            continue
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            continue
        add(fn, "unsupported", None, f"Tensor.{name}()")
    return plan


class _Patch:
    def __init__(self):
        self.undo = []

    def set(self, owner, name, value):
        self.undo.append((owner, name, owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)))
        setattr(owner, name, value)

    def restore(self):
        for owner, name, old in reversed(self.undo):
            try:
                setattr(owner, name, old)
            except Exception:  # pragma: no cover - best effort, keep restoring the rest
                pass
        self.undo.clear()


def _install(patch, plan):
    from ..tensor import Tensor
    skip = ("autograd_core.export", "autograd_core.runtime")
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or mod_name.startswith(skip):
            continue
        try:
            items = list(vars(mod).items())
        except TypeError:
            continue
        for name, val in items:
            if callable(val) and id(val) in plan and plan[id(val)][0] is val:
                try:
                    patch.set(mod, name, plan[id(val)][1])
                except (AttributeError, TypeError):
                    pass
    for name, val in list(vars(Tensor).items()):
        if inspect.isfunction(val) and id(val) in plan and plan[id(val)][0] is val:
            patch.set(Tensor, name, plan[id(val)][1])
    for prop, key in _PROPS.items():
        old = vars(Tensor).get(prop)
        if not isinstance(old, property):
            continue
        lower = _LOWER[key]
        getter = _make_wrapper(old.fget, "record", lower, f"Tensor.{prop}")
        patch.set(Tensor, prop, property(getter, old.fset, old.fdel, old.__doc__))


# =============================================================================================
# trace()
# =============================================================================================
def _flatten(obj, Tensor, path, leaves):
    """Flatten nested tuples/lists of tensors; returns a rebuild spec."""
    if isinstance(obj, Tensor) or isinstance(obj, np.ndarray):
        leaves.append((path, obj))
        return ("leaf",)
    if isinstance(obj, (tuple, list)):
        return (type(obj), [_flatten(o, Tensor, f"{path}_{i}", leaves) for i, o in enumerate(obj)])
    return ("const", obj)


def _rebuild(spec, it):
    if spec[0] == "leaf":
        return next(it)
    if spec[0] == "const":
        return spec[1]
    typ, parts = spec
    return typ(_rebuild(p, it) for p in parts)


def _input_names(fn, n, given):
    if given is not None:
        given = list(given)
        if len(given) != n or len(set(given)) != n:
            raise ValueError(f"input_names needs {n} distinct names, got {given}")
        return given
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in params[:n]]
        if len(names) == n and len(set(names)) == n:
            return names
    except (TypeError, ValueError):
        pass
    return [f"input_{i}" for i in range(n)]


def trace(module_or_fn, example_inputs, *, input_names=None, output_names=None, strict=True, check=True,
          check_tol=1e-4):
    """Run `module_or_fn(*example_inputs)` once (modules in eval mode) and return its `Graph`.

    example_inputs: a tensor/array or a tuple/list of them (nested tuples/lists allowed; other
    Python values are passed through and baked in). Every tensor leaf becomes a graph input, in
    order; the graph returns the output tensors flattened in order (a tuple when the function
    returns a tuple/list). Recurrent state is just another input/output. `check` runs the graph on
    the example inputs through `autograd_core.runtime` and compares with the eager result.
    """
    global _ACTIVE
    from ..tensor import Tensor, _wrap
    from .. import grad_mode

    if _ACTIVE is not None and _ACTIVE.tid == threading.get_ident():
        raise TraceError("trace() cannot be called while tracing")

    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    leaves = []
    spec = _flatten(tuple(example_inputs), Tensor, "in", leaves)
    if not leaves:
        raise TraceError("trace() needs at least one tensor input")
    fn = module_or_fn
    is_module = hasattr(module_or_fn, "named_parameters") and hasattr(module_or_fn, "train")
    fwd = getattr(module_or_fn, "forward", module_or_fn) if is_module else module_or_fn
    names = _input_names(fwd, len(leaves), input_names) if len(leaves) == len(example_inputs) else \
        _input_names(None, len(leaves), input_names)

    rec = _Recorder(strict)
    # parameters, buffers and plain tensor attributes of the module: named constants
    if is_module:
        for n, t in list(module_or_fn.named_parameters()) + list(module_or_fn.named_buffers()):
            rec.known.setdefault(id(t), n)
            rec.keep.append(t)
        for mname, m in module_or_fn.named_modules():
            for k, val in vars(m).items():
                if isinstance(val, Tensor) and id(val) not in rec.known:
                    rec.known[id(val)] = f"{mname}.{k}" if mname else k
                    rec.keep.append(val)
    for name, t in _closure_tensors(fwd, Tensor):
        if id(t) not in rec.known:
            rec.known[id(t)] = name
            rec.keep.append(t)

    # traced inputs: fresh tensors that require grad (non-leaf, so in-place ops on them work)
    traced_leaves = []
    eager_leaves = []
    for (path, a), nm in zip(leaves, names):
        arr = a._data if isinstance(a, Tensor) else np.asarray(a)
        eager_leaves.append(arr)
        if arr.dtype.kind == "f":
            leaf = _wrap(np.array(arr, copy=True))
            leaf.requires_grad = True
            with grad_mode.enable_grad():
                t = leaf * 1  # noqa: the wrappers are not installed yet
        else:
            t = _wrap(np.array(arr, copy=True))
        rec.vid[id(t)] = nm
        rec.keep.append(t)
        rec.inputs.append({"name": nm, "shape": list(arr.shape), "dtype": arr.dtype.name})
        traced_leaves.append(t)
    args = _rebuild(spec, iter(traced_leaves))

    modes = []
    if is_module:
        modes = [(m, m.training) for m in module_or_fn.modules()]
        module_or_fn.eval()
    plan = _plan_wrappers()
    patch = _Patch()
    with _LOCK:
        try:
            _install(patch, plan)
            _ACTIVE = rec
            with grad_mode.enable_grad():
                out = fn(*args)
        finally:
            _ACTIVE = None
            patch.restore()
            for m, mode in modes:
                m.training = mode

    # outputs
    is_tuple = isinstance(out, (tuple, list))
    outs = []
    _flatten(out, Tensor, "out", outs)
    if not outs:
        raise TraceError("the traced function returned no tensor")
    for _, o in outs:
        if not isinstance(o, Tensor):
            raise TraceError("the traced function must return tensors (or tuples/lists of tensors)")
    onames = list(output_names) if output_names is not None else \
        ([f"output_{i}" for i in range(len(outs))] if len(outs) > 1 or is_tuple else ["output"])
    if len(onames) != len(outs) or len(set(onames)) != len(onames):
        raise ValueError(f"output_names needs {len(outs)} distinct names, got {onames}")
    clash = set(onames) & (set(names) | set(rec.constants) | set(rec.values))
    if clash:
        raise ValueError(f"output names {sorted(clash)} clash with input or value names")
    out_specs = []
    for nm, (_, o) in zip(onames, outs):
        vname = rec.vid.get(id(o))
        if vname is None:
            rec.depth += 1
            vname = rec.v(o)  # raises with the reason
        out_specs.append({"name": nm, "value": vname})
    used = _used_constants(rec, out_specs)
    consts = {k: a for k, a in rec.constants.items() if k in used}
    g = Graph(rec.inputs, out_specs, rec.nodes, rec.values, consts, output_is_tuple=is_tuple)
    _prune(g)
    if check:
        _check(g, eager_leaves, [o._data for _, o in outs], check_tol)
    return g


def _closure_tensors(fn, Tensor):
    """Tensors a plain function reads from its closure or its module globals: (name, tensor)."""
    out = []
    f = getattr(fn, "__func__", fn)
    code = getattr(f, "__code__", None)
    cells = getattr(f, "__closure__", None) or ()
    names = code.co_freevars if code is not None else ()
    for name, cell in zip(names, cells):
        try:
            val = cell.cell_contents
        except ValueError:
            continue
        if isinstance(val, Tensor):
            out.append((name, val))
        elif isinstance(val, (list, tuple)):
            out += [(f"{name}.{i}", v) for i, v in enumerate(val) if isinstance(v, Tensor)]
    glb = getattr(f, "__globals__", None)
    if code is not None and isinstance(glb, dict):
        seen = set()
        stack = [code]
        while stack:
            co = stack.pop()
            for name in co.co_names:
                val = glb.get(name)
                if isinstance(val, Tensor) and name not in seen:
                    seen.add(name)
                    out.append((name, val))
            stack += [c for c in co.co_consts if hasattr(c, "co_names")]
    return out


def _used_constants(rec, out_specs):
    used = {o["value"] for o in out_specs}
    for n in rec.nodes:
        used.update(i for i in n.inputs if i is not None)
    return used


def _prune(g):
    """Drop nodes whose outputs nobody uses (dead code), then unused constants and values."""
    live = {o["value"] for o in g.outputs}
    keep = []
    for n in reversed(g.nodes):
        if any(o in live for o in n.outputs):
            keep.append(n)
            live.update(i for i in n.inputs if i is not None)
    g.nodes = keep[::-1]
    g.constants = {k: a for k, a in g.constants.items() if k in live}
    defined = set()
    for n in g.nodes:
        defined.update(n.outputs)
    g.values = {k: s for k, s in g.values.items() if k in defined}


def _check(g, inputs, expected, tol):
    from ..runtime import FormatError
    try:
        rt = g.runtime()
    except FormatError as e:
        raise TraceError(f"the traced graph cannot run in autograd_core.runtime: {e}") from None
    got = rt(*inputs)
    if not isinstance(got, tuple):
        got = (got,)
    for i, (a, b) in enumerate(zip(got, expected)):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise TraceError(f"export check: output {i} is {a.shape} {a.dtype} in the runtime but {b.shape} "
                             f"{b.dtype} in eager mode")
        if a.dtype.kind == "f":
            scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
            err = float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
            if not err <= tol * scale:
                raise TraceError(f"export check: output {i} differs from eager by {err:.3g} (tolerance "
                                 f"{tol * scale:.3g}); please report this op mix")
        elif not np.array_equal(a, b):
            raise TraceError(f"export check: output {i} differs from eager mode")
