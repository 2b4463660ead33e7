"""Write a traced graph as a standard ONNX model (the `onnx` package builds and checks it).

Op mapping: linear -> Gemm (2-D input) or MatMul + Add; conv2d -> Conv; pools -> MaxPool /
AveragePool / GlobalAveragePool; batch_norm -> BatchNormalization; layer_norm ->
LayerNormalization; activations -> Relu / LeakyRelu / Tanh / Sigmoid / Elu / Softplus / Clip;
shapes -> Reshape / Transpose / Expand / Tile / Slice / Concat / Split / Unsqueeze; reductions ->
Reduce*; gru_cell and lstm_cell -> MatMul / Add / Split / Sigmoid / Tanh / Mul / Sub (no RNN op, so
the recurrent state stays an explicit graph input and output). Constants become initializers.
"""
import numpy as np

__all__ = ["to_onnx", "graph_to_onnx"]


def to_onnx(traced_or_module, example_inputs=None, path=None, opset=17, **trace_kwargs):
    """Write `traced_or_module` as ONNX to `path` (if given) and return the `onnx.ModelProto`.

    traced_or_module: a `Graph` from `trace` (then example_inputs may be None), or a module /
    function, traced here with `example_inputs`.
    """
    from .graph import Graph
    if isinstance(traced_or_module, Graph):
        g = traced_or_module
    else:
        if example_inputs is None:
            raise ValueError("to_onnx needs example_inputs to trace a module or function")
        from .trace import trace
        g = trace(traced_or_module, example_inputs, **trace_kwargs)
    return graph_to_onnx(g, path, opset=opset)


class _Builder:
    def __init__(self, g, opset):
        import onnx
        from onnx import helper, numpy_helper
        self.onnx, self.helper, self.nph = onnx, helper, numpy_helper
        self.g = g
        self.opset = opset
        self.nodes = []
        self.inits = {}
        self._n = 0
        self._used = set(g.constants) | set(g.values) | set(g.input_names) | set(g.output_names)

    def name(self, hint="t"):
        while True:
            self._n += 1
            n = f"_{hint}{self._n}"
            if n not in self._used:
                self._used.add(n)
                return n

    def node(self, op, inputs, outputs=None, **attrs):
        if outputs is None:
            outputs = [self.name(op.lower())]
        elif isinstance(outputs, str):
            outputs = [outputs]
        inputs = list(inputs)
        while inputs and inputs[-1] is None:  # omit trailing optional inputs (ORT crashes on a trailing "")
            inputs.pop()
        self.nodes.append(self.helper.make_node(op, [("" if i is None else i) for i in inputs], outputs,
                                                **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, value, dtype=None, hint="c"):
        arr = np.asarray(value, dtype=dtype)
        n = self.name(hint)
        self.inits[n] = self.nph.from_array(np.ascontiguousarray(arr), n)
        return n

    def ints(self, values):
        return self.const(np.asarray(values, np.int64), hint="i")

    def init_array(self, name):
        """The array of an initializer (a graph constant), or None for a computed value."""
        return self.g.constants.get(name)

    def transposed_weight(self, name):
        # a Transpose node on the initializer (ONNX Runtime folds it at load; no duplicate weights)
        return self.node("Transpose", [name], perm=[1, 0])

    def shape(self, name):
        return self.g.shape_of(name)

    def dtype(self, name):
        return np.dtype(self.g.dtype_of(name))

    def reduce(self, op, x, axes, keep, out):
        axes = list(axes)
        if op == "ReduceSum" or self.opset >= 18:
            ins = [x] + ([self.ints(axes)] if axes else [])
            return self.node(op, ins, out, keepdims=int(keep))
        if axes:
            return self.node(op, [x], out, axes=axes, keepdims=int(keep))
        return self.node(op, [x], out, keepdims=int(keep))


_UNARY = {"neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "abs": "Abs", "sin": "Sin", "cos": "Cos",
          "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
          "tanh": "Tanh", "sigmoid": "Sigmoid", "reciprocal": "Reciprocal", "relu": "Relu", "sign": "Sign",
          "floor": "Floor", "ceil": "Ceil", "round": "Round", "logical_not": "Not", "isnan": "IsNaN",
          "isinf": "IsInf", "identity": "Identity"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max",
           "minimum": "Min", "eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
           "ge": "GreaterOrEqual", "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}
_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin",
           "prod": "ReduceProd", "logsumexp": "ReduceLogSumExp"}


def _convert(b, n):
    op, ins, outs, a = n.op, n.inputs, n.outputs, n.attrs
    out = outs[0]
    x = ins[0] if ins else None
    if op in _UNARY:
        return b.node(_UNARY[op], [x], out)
    if op in _BINARY:
        if op.startswith("logical_"):
            ins = [i if b.dtype(i) == np.bool_ else b.node("Cast", [i], to=b.onnx.TensorProto.BOOL) for i in ins]
        return b.node(_BINARY[op], ins, out)
    dt = b.dtype(x) if x is not None else None
    if op == "ne":
        return b.node("Not", [b.node("Equal", ins)], out)
    if op == "square":
        return b.node("Mul", [x, x], out)
    if op == "log1p":
        return b.node("Log", [b.node("Add", [x, b.const(1, dt)])], out)
    if op == "expm1":
        return b.node("Sub", [b.node("Exp", [x]), b.const(1, dt)], out)
    if op in ("log2", "log10"):
        return b.node("Div", [b.node("Log", [x]), b.const(np.log(2.0 if op == "log2" else 10.0), dt)], out)
    if op == "trunc":
        return b.node("Mul", [b.node("Sign", [x]), b.node("Floor", [b.node("Abs", [x])])], out)
    if op == "isfinite":
        return b.node("Not", [b.node("Or", [b.node("IsNaN", [x]), b.node("IsInf", [x])])], out)
    if op == "cast":
        return b.node("Cast", [x], out, to=b.helper.np_dtype_to_tensor_dtype(np.dtype(a["dtype"])))
    if op == "leaky_relu":
        return b.node("LeakyRelu", [x], out, alpha=float(a["negative_slope"]))
    if op == "elu":
        return b.node("Elu", [x], out, alpha=float(a["alpha"]))
    if op == "softplus":  # log(1 + exp(beta x)) / beta, and x itself where beta x > threshold
        beta = float(a["beta"])
        z = x if beta == 1.0 else b.node("Mul", [x, b.const(beta, dt)])
        sp = b.node("Softplus", [z])
        if beta != 1.0:
            sp = b.node("Div", [sp, b.const(beta, dt)])
        return b.node("Where", [b.node("Greater", [z, b.const(float(a["threshold"]), dt)]), x, sp], out)
    if op == "clamp":
        lo = None if a.get("min") is None else b.const(a["min"], dt)
        hi = None if a.get("max") is None else b.const(a["max"], dt)
        return b.node("Clip", [x, lo, hi], out)
    if op == "where":
        return b.node("Where", ins, out)
    if op == "matmul":
        return b.node("MatMul", ins, out)
    if op == "linear":
        w = ins[1]
        bias = ins[2] if len(ins) > 2 else None
        if len(b.shape(x)) == 2:
            return b.node("Gemm", [x, w] + ([bias] if bias else []), out, transB=1)
        m = b.node("MatMul", [x, b.transposed_weight(w)], None if bias else out)
        return b.node("Add", [m, bias], out) if bias else m
    if op == "conv2d":
        w = b.shape(ins[1])
        return b.node("Conv", ins, out, kernel_shape=list(w[2:]), strides=list(a["stride"]), pads=list(a["pads"]),
                      dilations=list(a["dilation"]), group=int(a["groups"]))
    if op == "max_pool2d":
        p = list(a["padding"])
        return b.node("MaxPool", [x], out, kernel_shape=list(a["kernel_size"]), strides=list(a["stride"]),
                      pads=p + p, dilations=list(a.get("dilation", [1, 1])), ceil_mode=int(a.get("ceil_mode", False)))
    if op == "avg_pool2d":
        p = list(a["padding"])
        k = list(a["kernel_size"])
        div = a.get("divisor_override")
        y = b.node("AveragePool", [x], None if div is not None else out, kernel_shape=k, strides=list(a["stride"]),
                   pads=p + p, ceil_mode=int(a.get("ceil_mode", False)),
                   count_include_pad=int(a.get("count_include_pad", True) or div is not None))
        if div is not None:
            return b.node("Mul", [y, b.const(k[0] * k[1] / float(div), dt)], out)
        return y
    if op == "adaptive_avg_pool2d":
        oh, ow = a["output_size"]
        h, w = b.shape(x)[-2:]
        if (oh, ow) == (1, 1):
            return b.node("GlobalAveragePool", [x], out)
        if h % oh == 0 and w % ow == 0:
            return b.node("AveragePool", [x], out, kernel_shape=[h // oh, w // ow], strides=[h // oh, w // ow])
        # torch's overlapping bins [floor(i h / oh), ceil((i + 1) h / oh)) as two averaging matrices
        y = b.node("MatMul", [x, b.const(_bins(w, ow, dt).T)])
        return b.node("MatMul", [b.const(_bins(h, oh, dt)), y], out)
    if op == "batch_norm":
        c = b.shape(x)[1]
        scale = ins[3] if len(ins) > 3 and ins[3] else b.const(np.ones(c, dt))
        shift = ins[4] if len(ins) > 4 and ins[4] else b.const(np.zeros(c, dt))
        return b.node("BatchNormalization", [x, scale, shift, ins[1], ins[2]], out, epsilon=float(a["eps"]))
    if op == "layer_norm":
        ns = list(a["normalized_shape"])
        scale = ins[1] if len(ins) > 1 and ins[1] else b.const(np.ones(ns, dt))
        bias = ins[2] if len(ins) > 2 and ins[2] else None
        if b.opset < 17:
            raise NotImplementedError("layer_norm needs opset >= 17 (LayerNormalization)")
        return b.node("LayerNormalization", [x, scale, bias], out, axis=-len(ns), epsilon=float(a["eps"]))
    if op == "gru_cell":
        return _gru(b, ins, out)
    if op == "lstm_cell":
        return _lstm(b, ins, outs)
    if op == "reshape":
        return b.node("Reshape", [x, b.ints(a["shape"])], out)
    if op == "transpose":
        return b.node("Transpose", [x], out, perm=list(a["perm"]))
    if op == "expand":
        return b.node("Expand", [x, b.ints(a["shape"])], out)
    if op == "tile":
        reps = list(a["repeats"])
        xs = b.shape(x)
        if len(reps) > len(xs):
            x = b.node("Reshape", [x, b.ints([1] * (len(reps) - len(xs)) + list(xs))])
        return b.node("Tile", [x, b.ints(reps)], out)
    if op == "getitem":
        sl = a["slices"]
        nd = len(sl) // 3
        xs = b.shape(x)
        axes = [i for i in range(nd) if (sl[3 * i], sl[3 * i + 1], sl[3 * i + 2]) != (0, xs[i], 1)]
        y = x
        if axes:
            y = b.node("Slice", [x, b.ints([sl[3 * i] for i in axes]), b.ints([sl[3 * i + 1] for i in axes]),
                                 b.ints(axes), b.ints([sl[3 * i + 2] for i in axes])])
        return b.node("Reshape", [y, b.ints(a["shape"])], out)
    if op == "concat":
        return b.node("Concat", ins, out, axis=int(a["axis"]))
    if op == "stack":
        ax = int(a["axis"])
        parts = [b.node("Unsqueeze", [i, b.ints([ax])]) for i in ins]
        return b.node("Concat", parts, out, axis=ax)
    if op == "split":
        return b.node("Split", [x, b.ints(a["sizes"])], outs, axis=int(a["axis"]))
    if op in _REDUCE:
        return b.reduce(_REDUCE[op], x, a.get("axes", []), a.get("keepdim", False), out)
    if op in ("softmax", "log_softmax"):
        return b.node("Softmax" if op == "softmax" else "LogSoftmax", [x], out, axis=int(a["axis"]))
    if op in ("argmax", "argmin"):
        return b.node("ArgMax" if op == "argmax" else "ArgMin", [x], out, axis=int(a["axis"]),
                      keepdims=int(a.get("keepdim", False)))
    if op == "var":
        axes = a.get("axes") or list(range(len(b.shape(x))))
        xs = b.shape(x)
        n_el = int(np.prod([xs[i] for i in axes])) if xs else 1
        m = b.reduce("ReduceMean", x, axes, True, None)
        d = b.node("Sub", [x, m])
        s = b.reduce("ReduceSum", b.node("Mul", [d, d]), axes, a.get("keepdim", False), None)
        v = b.node("Div", [s, b.const(max(n_el - float(a["correction"]), 0.0), dt)], None if a.get("std") else out)
        return b.node("Sqrt", [v], out) if a.get("std") else v
    raise NotImplementedError(f"op {op!r} has no ONNX export")


def _bins(n, k, dt):
    m = np.zeros((k, n), dt)
    for i in range(k):
        s, e = (i * n) // k, -(-((i + 1) * n) // k)
        m[i, s:e] = 1.0 / (e - s)
    return m


def _gates(b, x, h, w_ih, w_hh, b_ih, b_hh):
    gi = b.node("MatMul", [x, b.transposed_weight(w_ih)])
    if b_ih:
        gi = b.node("Add", [gi, b_ih])
    gh = b.node("MatMul", [h, b.transposed_weight(w_hh)])
    if b_hh:
        gh = b.node("Add", [gh, b_hh])
    return gi, gh


def _gru(b, ins, out):
    x, h, w_ih, w_hh = ins[:4]
    b_ih = ins[4] if len(ins) > 4 else None
    b_hh = ins[5] if len(ins) > 5 else None
    H = b.shape(w_hh)[1]
    gi, gh = _gates(b, x, h, w_ih, w_hh, b_ih, b_hh)
    sizes = b.ints([H, H, H])
    ir, iz, in_ = b.node("Split", [gi, sizes], [b.name("ir"), b.name("iz"), b.name("in")], axis=-1)
    hr, hz, hn = b.node("Split", [gh, sizes], [b.name("hr"), b.name("hz"), b.name("hn")], axis=-1)
    r = b.node("Sigmoid", [b.node("Add", [ir, hr])])
    z = b.node("Sigmoid", [b.node("Add", [iz, hz])])
    n = b.node("Tanh", [b.node("Add", [in_, b.node("Mul", [r, hn])])])
    # h' = (1 - z) n + z h = n + z (h - n)
    return b.node("Add", [n, b.node("Mul", [z, b.node("Sub", [h, n])])], out)


def _lstm(b, ins, outs):
    x, h, c, w_ih, w_hh = ins[:5]
    b_ih = ins[5] if len(ins) > 5 else None
    b_hh = ins[6] if len(ins) > 6 else None
    H = b.shape(w_hh)[1]
    gi, gh = _gates(b, x, h, w_ih, w_hh, b_ih, b_hh)
    g = b.node("Add", [gi, gh])
    i, f, gg, o = b.node("Split", [g, b.ints([H] * 4)], [b.name("gi"), b.name("gf"), b.name("gg"), b.name("go")],
                         axis=-1)
    c2 = b.node("Add", [b.node("Mul", [b.node("Sigmoid", [f]), c]),
                        b.node("Mul", [b.node("Sigmoid", [i]), b.node("Tanh", [gg])])], outs[1])
    b.node("Mul", [b.node("Sigmoid", [o]), b.node("Tanh", [c2])], outs[0])


def _ir_version(helper, opset):
    best = None
    for row in getattr(helper, "VERSION_TABLE", []):
        ir, ai_onnx = row[1], row[2]
        if ai_onnx >= opset and (best is None or ir < best):
            best = ir
    return best


def graph_to_onnx(g, path=None, opset=17):
    """Convert a `Graph` to an `onnx.ModelProto`; check it; save it to `path` if given."""
    try:
        import onnx
    except ImportError as e:  # pragma: no cover
        raise ImportError("ONNX export needs the `onnx` package (pip install onnx)") from e
    from onnx import helper, numpy_helper
    if not 13 <= opset <= 21:
        raise ValueError("opset must be between 13 and 21")
    b = _Builder(g, opset)
    for name, arr in g.constants.items():
        b.inits[name] = numpy_helper.from_array(np.ascontiguousarray(arr), name)
    for n in g.nodes:
        _convert(b, n)
    for o in g.outputs:
        b.node("Identity", [o["value"]], o["name"])

    def vi(name, shape, dtype):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(shape))

    inputs = [vi(i["name"], i["shape"], i["dtype"]) for i in g.inputs]
    outputs = [vi(o["name"], g.shape_of(o["value"]), g.dtype_of(o["value"])) for o in g.outputs]
    graph = helper.make_graph(b.nodes, "autograd_core_export", inputs, outputs, list(b.inits.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="autograd_core.export", producer_version="1")
    ir = _ir_version(helper, opset)
    if ir is not None:
        model.ir_version = ir
    onnx.checker.check_model(model, full_check=True)
    if path is not None:
        onnx.save(model, path)
    return model
