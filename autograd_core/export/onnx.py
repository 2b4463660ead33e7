"""Write a traced graph as a standard ONNX model (the `onnx` package builds and checks it).

Each graph op's mapping is its entry in the op table (`optable.OPS[op].to_onnx`); this file holds
the builder those mappings write through and the model assembly. Op mapping: linear -> Gemm
(2-D input) or MatMul + Add; conv2d -> Conv; pools -> MaxPool / AveragePool / GlobalAveragePool;
batch_norm -> BatchNormalization; layer_norm -> LayerNormalization; activations -> Relu /
LeakyRelu / Tanh / Sigmoid / Elu / Softplus / Clip; shapes -> Reshape / Transpose / Expand /
Tile / Slice / Concat / Split / Unsqueeze; reductions -> Reduce*; gru_cell and lstm_cell ->
MatMul / Add / Split / Sigmoid / Tanh / Mul / Sub (no RNN op, so the recurrent state stays an
explicit graph input and output). Constants become initializers.
"""
import numpy as np

from .optable import OPS

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


def _convert(b, n):
    spec = OPS.get(n.op)
    if spec is None:
        raise NotImplementedError(f"op {n.op!r} has no ONNX export (it is not in the op table)")
    return spec.to_onnx(b, n)


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
