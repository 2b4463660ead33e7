"""Element-wise graph ops (unary and binary ufuncs, activations, clamp, where, cast) and their
trace rules, including the in-place variants and the activations traced as small decompositions."""
import numpy as np

from .._errors import TraceError
from ._table import A, F, I, IP, P, RULES, Rule, dt, onnx_converter, op, resolve, rule

# ---------------------------------------------------------------------------------------------
# graph ops: ONNX mappings (the kernels are the runtime's `_kernels_elementwise`)
_ONNX_UNARY = {"neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "abs": "Abs", "sin": "Sin", "cos": "Cos",
               "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
               "tanh": "Tanh", "sigmoid": "Sigmoid", "reciprocal": "Reciprocal", "relu": "Relu", "sign": "Sign",
               "floor": "Floor", "ceil": "Ceil", "round": "Round", "logical_not": "Not", "isnan": "IsNaN",
               "isinf": "IsInf", "identity": "Identity"}
_ONNX_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max",
                "minimum": "Min", "eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
                "ge": "GreaterOrEqual"}
for _name, _onnx in list(_ONNX_UNARY.items()) + list(_ONNX_BINARY.items()):
    op(_name, _onnx)
op("where", "Where")
op("atan2", not_onnx="ONNX has no two-argument arctangent operator")


def _logical(onnx_type):
    def convert(b, n):
        ins = [i if b.dtype(i) == np.bool_ else b.node("Cast", [i], to=b.onnx.TensorProto.BOOL) for i in n.inputs]
        return b.node(onnx_type, ins, n.outputs[0])
    return convert


for _name, _onnx in (("logical_and", "And"), ("logical_or", "Or"), ("logical_xor", "Xor")):
    op(_name, _logical(_onnx))


@onnx_converter("ne")
def _onnx_ne(b, n):
    return b.node("Not", [b.node("Equal", n.inputs)], n.outputs[0])


@onnx_converter("square")
def _onnx_square(b, n):
    x = n.inputs[0]
    return b.node("Mul", [x, x], n.outputs[0])


@onnx_converter("log1p")
def _onnx_log1p(b, n):
    x = n.inputs[0]
    return b.node("Log", [b.node("Add", [x, b.const(1, b.dtype(x))])], n.outputs[0])


@onnx_converter("expm1")
def _onnx_expm1(b, n):
    x = n.inputs[0]
    return b.node("Sub", [b.node("Exp", [x]), b.const(1, b.dtype(x))], n.outputs[0])


def _log_base(base):
    def convert(b, n):
        x = n.inputs[0]
        return b.node("Div", [b.node("Log", [x]), b.const(np.log(base), b.dtype(x))], n.outputs[0])
    return convert


op("log2", _log_base(2.0))
op("log10", _log_base(10.0))


@onnx_converter("trunc")
def _onnx_trunc(b, n):
    x = n.inputs[0]
    return b.node("Mul", [b.node("Sign", [x]), b.node("Floor", [b.node("Abs", [x])])], n.outputs[0])


@onnx_converter("isfinite")
def _onnx_isfinite(b, n):
    x = n.inputs[0]
    return b.node("Not", [b.node("Or", [b.node("IsNaN", [x]), b.node("IsInf", [x])])], n.outputs[0])


@onnx_converter("cast")
def _onnx_cast(b, n):
    return b.node("Cast", [n.inputs[0]], n.outputs[0], to=b.helper.np_dtype_to_tensor_dtype(np.dtype(n.attrs["dtype"])))


@onnx_converter("leaky_relu")
def _onnx_leaky_relu(b, n):
    return b.node("LeakyRelu", [n.inputs[0]], n.outputs[0], alpha=float(n.attrs["negative_slope"]))


@onnx_converter("elu")
def _onnx_elu(b, n):
    return b.node("Elu", [n.inputs[0]], n.outputs[0], alpha=float(n.attrs["alpha"]))


@onnx_converter("softplus")
def _onnx_softplus(b, n):  # log(1 + exp(beta x)) / beta, and x itself where beta x > threshold
    x, a = n.inputs[0], n.attrs
    d = b.dtype(x)
    beta = float(a["beta"])
    z = x if beta == 1.0 else b.node("Mul", [x, b.const(beta, d)])
    sp = b.node("Softplus", [z])
    if beta != 1.0:
        sp = b.node("Div", [sp, b.const(beta, d)])
    return b.node("Where", [b.node("Greater", [z, b.const(float(a["threshold"]), d)]), x, sp], n.outputs[0])


@onnx_converter("clamp")
def _onnx_clamp(b, n):
    x, a = n.inputs[0], n.attrs
    d = b.dtype(x)
    lo = None if a.get("min") is None else b.const(a["min"], d)
    hi = None if a.get("max") is None else b.const(a["max"], d)
    return b.node("Clip", [x, lo, hi], n.outputs[0])


# ---------------------------------------------------------------------------------------------
# trace rules
def _binary(gop, swap=False, cmp=False):
    def lower(rec, v, out):
        x, y = v[0], v[1]
        if swap:
            x, y = y, x
        d = _cmp_dtype(rec, x, y) if cmp else dt(out)
        rec.emit(gop, [rec.operand(x, d), rec.operand(y, d)], {}, [out])
    return lower


def _cmp_dtype(rec, x, y):
    ts = [a for a in (x, y) if rec.is_tensor(a)]
    dts = [dt(a) for a in ts]
    d = dts[0] if len(dts) == 1 else np.promote_types(*dts)
    other = y if rec.is_tensor(x) else x
    if len(ts) == 1 and d.kind in "biu" and isinstance(other, float):
        d = np.dtype(np.float32)
    return d


def _scaled(rec, y, alpha, d):
    name = rec.operand(y, d)
    if alpha != 1:
        name = rec.tmp("mul", [name, rec.c(alpha, d)], {}, np.shape(y._data) if rec.is_tensor(y) else (), d)
    return name


def _additive(gop):
    def lower(rec, v, out):
        x, y, alpha = v[0], v[1], v[2]
        d = dt(out)
        if not rec.is_tensor(y) and alpha != 1:
            y, alpha = y * alpha, 1
        rec.emit(gop, [rec.operand(x, d), _scaled(rec, y, alpha, d)], {}, [out])
    return lower


rule(A + "add", emits={"add", "mul"})(_additive("add"))
rule(A + "sub", emits={"sub", "mul"})(_additive("sub"))
rule(A + "rsub", emits={"sub"})(_binary("sub", swap=True))
rule(A + "mul", emits={"mul"})(_binary("mul"))  # ag.multiply is the same function
rule(A + "rdiv", emits={"div"})(_binary("div", swap=True))
rule(A + "pow", emits={"pow"})(_binary("pow"))
rule(A + "rpow", emits={"pow"})(_binary("pow", swap=True))


@rule(A + "div", emits={"div"})
def _div(rec, v, out):
    if len(v) > 2 and v[2] is not None:
        raise TraceError(f"div(rounding_mode={v[2]!r}) is not supported by autograd_core.export")
    _binary("div")(rec, v, out)


_UNARY_OPS = ["neg", "exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "abs", "sin", "cos", "tan", "asin",
              "acos", "atan", "sinh", "cosh", "tanh", "sigmoid", "reciprocal", "relu", "square", "sign", "floor",
              "ceil", "trunc", "logical_not", "isnan", "isinf", "isfinite"]


def _unary(gop):
    def lower(rec, v, out):
        x = v[0]
        src = rec.operand(x, dt(out)) if dt(out).kind == "f" else rec.v(x)
        rec.emit(gop, [src], {}, [out])
    return lower


for _op in _UNARY_OPS:
    rule((A if _op == "neg" else P) + _op, emits={_op})(_unary(_op))
rule(F + "tanh", emits={"tanh"})(_unary("tanh"))
rule(F + "sigmoid", emits={"sigmoid"})(_unary("sigmoid"))


@rule(P + "round", emits={"round"})
def _round(rec, v, out):
    if len(v) > 1 and v[1]:
        raise TraceError("round(decimals != 0) is not supported by autograd_core.export")
    rec.emit("round", [rec.v(v[0])], {}, [out])


@rule(P + "rsqrt", emits={"sqrt", "reciprocal"})
def _rsqrt(rec, v, out):
    x = v[0]
    d = dt(out)
    s = rec.tmp("sqrt", [rec.operand(x, d)], {}, x._data.shape, d)
    rec.emit("reciprocal", [s], {}, [out])


@rule(P + "leaky_relu", F + "leaky_relu", F + "leaky_relu_", emits={"leaky_relu"})
def _leaky(rec, v, out):
    rec.emit("leaky_relu", [rec.v(v[0])], {"negative_slope": float(v[1])}, [out])


@rule(F + "relu", F + "relu_", emits={"relu"})
def _frelu(rec, v, out):
    rec.emit("relu", [rec.v(v[0])], {}, [out])


@rule(P + "softplus", F + "softplus", emits={"softplus"})
def _softplus(rec, v, out):
    rec.emit("softplus", [rec.operand(v[0], dt(out))], {"beta": float(v[1]), "threshold": float(v[2])}, [out])


@rule(P + "elu", F + "elu", emits={"elu"})
def _elu(rec, v, out):
    rec.emit("elu", [rec.operand(v[0], dt(out))], {"alpha": float(v[1])}, [out])


_CLAMP_EMITS = {"clamp", "maximum", "minimum"}


def _clamp_impl(rec, x, lo, hi, out):
    d = dt(out)
    if rec.is_tensor(lo) or rec.is_tensor(hi):
        cur = rec.operand(x, d)
        steps = [(gop, b) for gop, b in (("maximum", lo), ("minimum", hi)) if b is not None]
        for k, (gop, b) in enumerate(steps):
            if k == len(steps) - 1:
                rec.emit(gop, [cur, rec.operand(b, d)], {}, [out])
            else:
                cur = rec.tmp(gop, [cur, rec.operand(b, d)], {}, out._data.shape, d)
        return
    rec.emit("clamp", [rec.operand(x, d)], {"min": None if lo is None else float(lo),
                                            "max": None if hi is None else float(hi)}, [out])


rule(P + "clamp", F + "hardtanh", emits=_CLAMP_EMITS)(lambda rec, v, out: _clamp_impl(rec, v[0], v[1], v[2], out))
rule(P + "clamp_min", emits=_CLAMP_EMITS)(lambda rec, v, out: _clamp_impl(rec, v[0], v[1], None, out))
rule(P + "clamp_max", emits=_CLAMP_EMITS)(lambda rec, v, out: _clamp_impl(rec, v[0], None, v[1], out))
rule(F + "relu6", emits=_CLAMP_EMITS)(lambda rec, v, out: _clamp_impl(rec, v[0], 0.0, 6.0, out))

for _op in ("maximum", "minimum", "atan2"):
    rule(P + _op, emits={_op})(_binary(_op))
for _op in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"):
    rule(P + _op, emits={_op})(_binary(_op, cmp=True))


@rule(P + "where", emits={"where"})
def _where(rec, v, out):
    cond, a, b = v[0], v[1], v[2]
    if a is None or b is None:
        raise TraceError("where(condition) (the nonzero form) is not supported by autograd_core.export")
    d = dt(out)
    cn = rec.operand(cond, np.bool_)
    rec.emit("where", [cn, rec.operand(a, d), rec.operand(b, d)], {}, [out])


@rule(P + "lerp", emits={"sub", "mul", "add"})
def _lerp(rec, v, out):
    start, end, w = v[0], v[1], v[2]
    d = dt(out)
    shape = out._data.shape
    diff = rec.tmp("sub", [rec.operand(end, d), rec.operand(start, d)], {}, np.broadcast_shapes(
        start._data.shape, end._data.shape if rec.is_tensor(end) else ()), d)
    m = rec.tmp("mul", [diff, rec.operand(w, d)], {}, shape, d)
    rec.emit("add", [rec.operand(start, d), m], {}, [out])


@rule(I + "masked_fill", emits={"where"})
def _masked_fill(rec, v, out):
    x, mask, value = v[0], v[1], v[2]
    d = dt(out)
    rec.emit("where", [rec.operand(mask, np.bool_), rec.operand(value, d), rec.operand(x, d)], {}, [out])


@rule(F + "silu", emits={"sigmoid", "mul"})
def _silu(rec, v, out):
    x = v[0]
    xn = rec.v(x)
    s = rec.tmp("sigmoid", [xn], {}, x._data.shape, dt(x))
    rec.emit("mul", [xn, s], {}, [out])


@rule(F + "logsigmoid", emits={"neg", "softplus"})
def _logsigmoid(rec, v, out):
    x = v[0]
    sh, d = x._data.shape, dt(x)
    n = rec.tmp("neg", [rec.v(x)], {}, sh, d)
    s = rec.tmp("softplus", [n], {"beta": 1.0, "threshold": 20.0}, sh, d)
    rec.emit("neg", [s], {}, [out])


@rule(F + "softsign", emits={"abs", "add", "div"})
def _softsign(rec, v, out):
    x = v[0]
    sh, d = x._data.shape, dt(x)
    a = rec.tmp("abs", [rec.v(x)], {}, sh, d)
    s = rec.tmp("add", [a, rec.c(1, d)], {}, sh, d)
    rec.emit("div", [rec.v(x), s], {}, [out])


@rule(F + "gelu", emits={"mul", "square", "add", "tanh"})
def _gelu(rec, v, out):
    x, approximate = v[0], v[1]
    if approximate != "tanh":
        raise TraceError("gelu(approximate='none') needs erf, which autograd_core.runtime does not provide; "
                         "use approximate='tanh'")
    sh, d = x._data.shape, dt(x)
    xn = rec.v(x)
    x3 = rec.tmp("mul", [xn, rec.tmp("square", [xn], {}, sh, d)], {}, sh, d)
    inner = rec.tmp("add", [xn, rec.tmp("mul", [x3, rec.c(0.044715, d)], {}, sh, d)], {}, sh, d)
    t = rec.tmp("tanh", [rec.tmp("mul", [inner, rec.c(np.sqrt(2.0 / np.pi), d)], {}, sh, d)], {}, sh, d)
    h = rec.tmp("mul", [rec.tmp("add", [t, rec.c(1.0, d)], {}, sh, d), rec.c(0.5, d)], {}, sh, d)
    rec.emit("mul", [xn, h], {}, [out])


# -- in-place ops: the out-of-place rule, the tensor re-bound to the result ---------------------
_INPLACE = {"add_": A + "add", "sub_": A + "sub", "mul_": A + "mul", "div_": A + "div", "pow_": A + "pow",
            "neg_": A + "neg", "exp_": P + "exp", "log_": P + "log", "sqrt_": P + "sqrt", "abs_": P + "abs",
            "tanh_": P + "tanh", "sigmoid_": P + "sigmoid", "relu_": P + "relu", "sin_": P + "sin",
            "cos_": P + "cos", "floor_": P + "floor", "ceil_": P + "ceil", "round_": P + "round",
            "clamp_": P + "clamp", "clamp_min_": P + "clamp_min", "clamp_max_": P + "clamp_max",
            "leaky_relu_": P + "leaky_relu", "lerp_": P + "lerp", "masked_fill_": I + "masked_fill"}
_SIGS = {}


def _inplace_lower(target_key):
    def lower(rec, v, out):
        from ..recorder import bind, signature
        if target_key not in _SIGS:
            fn = resolve(target_key)
            _SIGS[target_key] = None if fn is None else signature(getattr(fn, "__trace_original__", fn))
        sig = _SIGS[target_key]
        if sig is not None:  # re-bind the raw values to the out-of-place signature (fills its defaults)
            args = v[1] if len(v) > 1 and isinstance(v[1], tuple) else ()
            kw = v[2] if len(v) > 2 and isinstance(v[2], dict) else {}
            v = bind(sig, (v[0],) + tuple(args), kw)
        RULES[target_key].lower(rec, v, out)
    return lower


for _n, _t in _INPLACE.items():
    RULES[IP + _n] = Rule(IP + _n, _inplace_lower(_t), RULES[_t].emits, inplace=True)


@rule(IP + "_addcmul", IP + "_addcdiv", emits=())
def _addc(rec, v, out):
    raise TraceError("addcmul/addcdiv are not supported by autograd_core.export")


