"""Reduction graph ops (sum, mean, amax, amin, prod, logsumexp, softmax, log-softmax, var/std,
argmax/argmin) and the trace rules of the reductions, max/min, norm."""
import numpy as np

from .._errors import TraceError
from ._table import R, F, dt, onnx_converter, op, rule

# ---------------------------------------------------------------------------------------------
# graph ops: ONNX mappings (the kernels are the runtime's `_kernels_reduce`)
def _onnx_reduce(onnx_type):
    def convert(b, n):
        return b.reduce(onnx_type, n.inputs[0], n.attrs.get("axes", []), n.attrs.get("keepdim", False), n.outputs[0])
    return convert


for _name, _onnx in (("sum", "ReduceSum"), ("mean", "ReduceMean"), ("amax", "ReduceMax"), ("amin", "ReduceMin"),
                     ("prod", "ReduceProd"), ("logsumexp", "ReduceLogSumExp")):
    op(_name, _onnx_reduce(_onnx))


def _onnx_softmax(onnx_type):
    def convert(b, n):
        return b.node(onnx_type, [n.inputs[0]], n.outputs[0], axis=int(n.attrs["axis"]))
    return convert


op("softmax", _onnx_softmax("Softmax"))
op("log_softmax", _onnx_softmax("LogSoftmax"))


def _onnx_arg(onnx_type):
    def convert(b, n):
        return b.node(onnx_type, [n.inputs[0]], n.outputs[0], axis=int(n.attrs["axis"]),
                      keepdims=int(n.attrs.get("keepdim", False)))
    return convert


op("argmax", _onnx_arg("ArgMax"))
op("argmin", _onnx_arg("ArgMin"))


@onnx_converter("var")
def _onnx_var(b, n):
    x, a, out = n.inputs[0], n.attrs, n.outputs[0]
    axes = a.get("axes") or list(range(len(b.shape(x))))
    xs = b.shape(x)
    n_el = int(np.prod([xs[i] for i in axes])) if xs else 1
    m = b.reduce("ReduceMean", x, axes, True, None)
    d = b.node("Sub", [x, m])
    s = b.reduce("ReduceSum", b.node("Mul", [d, d]), axes, a.get("keepdim", False), None)
    v = b.node("Div", [s, b.const(max(n_el - float(a["correction"]), 0.0), b.dtype(x))], None if a.get("std") else out)
    return b.node("Sqrt", [v], out) if a.get("std") else v


# ---------------------------------------------------------------------------------------------
# trace rules
def _axes_of(dim, ndim):
    if dim is None or dim == ():
        return []
    if isinstance(dim, (int, np.integer)):
        dim = [int(dim)]
    return sorted({int(d) % max(ndim, 1) for d in dim})


def _reduction(gop):
    def lower(rec, v, out):
        x, dim, keep = v[0], v[1], v[2]
        src = rec.operand(x, dt(out))
        rec.emit(gop, [src], {"axes": _axes_of(dim, x._data.ndim), "keepdim": bool(keep)}, [out])
    return lower


for _op in ("sum", "mean", "amax", "amin", "prod"):
    rule(R + _op, emits={_op})(_reduction(_op))


def _extremum(is_max):
    def lower(rec, v, out):
        x, dim, keep = v[0], v[1], v[2]
        gop = "amax" if is_max else "amin"
        if rec.is_tensor(dim):
            rec.emit("maximum" if is_max else "minimum", [rec.v(x), rec.operand(dim, dt(x))], {}, [out])
            return
        if dim is None:
            rec.emit(gop, [rec.v(x)], {"axes": [], "keepdim": False}, [out])
            return
        vals, idx = out[0], out[1]
        ax = int(dim) % max(x._data.ndim, 1)
        rec.emit(gop, [rec.v(x)], {"axes": [ax], "keepdim": bool(keep)}, [vals])
        rec.emit("argmax" if is_max else "argmin", [rec.v(x)], {"axis": ax, "keepdim": bool(keep)}, [idx])
    return lower


rule(R + "max", emits={"amax", "maximum", "argmax"})(_extremum(True))
rule(R + "min", emits={"amin", "minimum", "argmin"})(_extremum(False))


def _arg(is_max):
    def lower(rec, v, out):
        x, dim, keep = v[0], v[1], v[2]
        src = rec.v(x)
        if dim is None:
            src = rec.tmp("reshape", [src], {"shape": [x._data.size]}, (x._data.size,), dt(x))
            rec.emit("argmax" if is_max else "argmin", [src], {"axis": 0, "keepdim": False}, [out])
            if keep:
                raise TraceError("argmax(dim=None, keepdim=True) is not supported by autograd_core.export")
            return
        rec.emit("argmax" if is_max else "argmin", [src], {"axis": int(dim) % max(x._data.ndim, 1),
                                                          "keepdim": bool(keep)}, [out])
    return lower


rule(R + "argmax", emits={"reshape", "argmax"})(_arg(True))
rule(R + "argmin", emits={"reshape", "argmin"})(_arg(False))


def _softmax(gop):
    def lower(rec, v, out):
        from ...ops.reduction import _softmax_dim
        x, dim = v[0], v[1]
        src = rec.operand(x, dt(out))
        rec.emit(gop, [src], {"axis": int(_softmax_dim(dim, x._data.ndim))}, [out])
    return lower


rule(R + "softmax", F + "softmax", emits={"softmax"})(_softmax("softmax"))
rule(R + "log_softmax", F + "log_softmax", emits={"log_softmax"})(_softmax("log_softmax"))


@rule(R + "logsumexp", emits={"logsumexp"})
def _logsumexp(rec, v, out):
    x, dim, keep = v[0], v[1], v[2]
    rec.emit("logsumexp", [rec.operand(x, dt(out))], {"axes": _axes_of(dim, x._data.ndim), "keepdim": bool(keep)},
             [out])


def _var(is_std):
    def lower(rec, v, out):
        x, dim, unbiased, keep, corr = v[0], v[1], v[2], v[3], v[4]
        if corr is None:
            corr = 0 if unbiased is False else 1
        rec.emit("var", [rec.v(x)], {"axes": _axes_of(dim, x._data.ndim), "keepdim": bool(keep),
                                     "correction": float(corr), "std": is_std}, [out])
    return lower


rule(R + "var", emits={"var"})(_var(False))
rule(R + "std", emits={"var"})(_var(True))


@rule(R + "norm", emits={"sum", "square", "sqrt", "abs", "amax"})
def _norm(rec, v, out):
    x, p, dim, keep = v[0], v[1], v[2], v[3]
    d = dt(out)
    axes = _axes_of(dim, x._data.ndim)
    src = rec.operand(x, d)
    sh = x._data.shape
    red = {"axes": axes, "keepdim": bool(keep)}
    rshape = out._data.shape
    if p in ("fro", 2, 2.0):
        s = rec.tmp("sum", [rec.tmp("square", [src], {}, sh, d)], red, rshape, d)
        rec.emit("sqrt", [s], {}, [out])
    elif p in (1, 1.0):
        rec.emit("sum", [rec.tmp("abs", [src], {}, sh, d)], red, [out])
    elif p == float("inf"):
        rec.emit("amax", [rec.tmp("abs", [src], {}, sh, d)], red, [out])
    else:
        raise TraceError(f"norm(p={p!r}) is not supported by autograd_core.export")
