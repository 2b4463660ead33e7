"""The static graph IR that `trace` produces, and its file format.

A `Graph` is SSA: every value (a string name) is defined once, by a graph input, a constant (a
parameter, buffer or literal, stored as an array) or exactly one node's output; nodes are in
execution order. Every value carries the shape and dtype seen while tracing (shapes are static).

    node = {"op": "conv2d", "inputs": ["x", "conv1.weight", "conv1.bias"], "outputs": ["v3"],
            "attrs": {"stride": [2, 2], "padding": [0, 0], "dilation": [1, 1], "groups": 1}}

File (`Graph.save`): ONE safetensors file; the constants are its tensors, and its `__metadata__`
holds `format` = "autograd_core.graph", `format_version` = "1" and `graph` = the JSON below. No
pickle, no code: `autograd_core.runtime.load` reads it with NumPy alone.

    {"inputs": [{"name", "shape", "dtype"}], "outputs": [{"name", "value"}], "output_is_tuple": bool,
     "nodes": [node...], "values": {name: {"shape", "dtype"}}, "constants": [names],
     "producer": "autograd_core.export 1"}
"""
import json

from ..runtime._format import FORMAT_NAME, FORMAT_VERSION, dumps, read_file, loads, write_file

__all__ = ["Graph", "Node", "load_graph", "graph_from_bytes"]


class Node:
    __slots__ = ("op", "inputs", "outputs", "attrs")

    def __init__(self, op, inputs, outputs, attrs=None):
        self.op = op
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.attrs = dict(attrs or {})

    def to_json(self):
        d = {"op": self.op, "inputs": self.inputs, "outputs": self.outputs}
        if self.attrs:
            d["attrs"] = self.attrs
        return d

    def __repr__(self):
        attrs = ", ".join(f"{k}={v}" for k, v in self.attrs.items())
        ins = ", ".join("None" if i is None else i for i in self.inputs)
        return f"{', '.join(self.outputs)} = {self.op}({ins}{'; ' + attrs if attrs else ''})"


class Graph:
    """A traced forward pass: inputs -> nodes -> outputs, with constants as named arrays.

    `save(path)` writes the single-file format; `runtime()` builds the NumPy interpreter for it;
    `to_onnx(path)` writes an ONNX model; `__call__(*arrays)` runs it (through the runtime).
    """

    def __init__(self, inputs, outputs, nodes, values, constants, output_is_tuple=False):
        self.inputs = [dict(name=i["name"], shape=list(i["shape"]), dtype=i["dtype"]) for i in inputs]
        self.outputs = [dict(name=o["name"], value=o["value"]) for o in outputs]
        self.nodes = list(nodes)
        self.values = {k: dict(shape=list(v["shape"]), dtype=v["dtype"]) for k, v in values.items()}
        self.constants = dict(constants)  # name -> ndarray, in insertion order
        self.output_is_tuple = bool(output_is_tuple)
        self._rt = None

    # -- introspection -----------------------------------------------------------------------
    @property
    def input_names(self):
        return [i["name"] for i in self.inputs]

    @property
    def output_names(self):
        return [o["name"] for o in self.outputs]

    def shape_of(self, name):
        if name in self.constants:
            return tuple(self.constants[name].shape)
        for i in self.inputs:
            if i["name"] == name:
                return tuple(i["shape"])
        return tuple(self.values[name]["shape"])

    def dtype_of(self, name):
        if name in self.constants:
            return self.constants[name].dtype.name
        for i in self.inputs:
            if i["name"] == name:
                return i["dtype"]
        return self.values[name]["dtype"]

    def ops(self):
        return [n.op for n in self.nodes]

    def num_parameters(self):
        return int(sum(a.size for a in self.constants.values()))

    def __repr__(self):
        sig = ", ".join("%s: %s %s" % (i["name"], i["shape"], i["dtype"]) for i in self.inputs)
        lines = [f"graph({sig}):"]
        for n in self.nodes:
            lines.append("  " + repr(n))
        lines.append(f"  return {', '.join(o['name'] + '=' + o['value'] for o in self.outputs)}")
        lines.append(f"  # {len(self.nodes)} nodes, {len(self.constants)} constants, "
                     f"{self.num_parameters()} constant elements")
        return "\n".join(lines)

    # -- serialisation -----------------------------------------------------------------------
    def to_json(self):
        return {"inputs": self.inputs, "outputs": self.outputs, "output_is_tuple": self.output_is_tuple,
                "nodes": [n.to_json() for n in self.nodes], "values": self.values,
                "constants": list(self.constants), "producer": "autograd_core.export 1"}

    def _metadata(self):
        return {"format": FORMAT_NAME, "format_version": str(FORMAT_VERSION),
                "graph": json.dumps(self.to_json(), separators=(",", ":"))}

    def to_bytes(self):
        return dumps(self.constants, self._metadata())

    def save(self, path, extra_metadata=None):
        """Write graph + weights as one data-only safetensors file. ``extra_metadata``: more
        ``{str: str}`` entries for the file's metadata (an application's own description of the
        model); the graph's own keys cannot be replaced."""
        metadata = self._metadata()
        for key, value in (extra_metadata or {}).items():
            if key in metadata or not isinstance(key, str) or not isinstance(value, str):
                raise ValueError(f"extra metadata must map new str keys to str values; got {key!r}: "
                                 f"{type(value).__name__} (reserved: {sorted(metadata)})")
            metadata[key] = value
        write_file(path, self.constants, metadata)

    @classmethod
    def from_json(cls, g, tensors):
        nodes = [Node(n["op"], n.get("inputs", []), n["outputs"], n.get("attrs", {})) for n in g["nodes"]]
        consts = {name: tensors[name] for name in g["constants"]}
        return cls(g["inputs"], g["outputs"], nodes, g["values"], consts, g.get("output_is_tuple", False))

    # -- running -----------------------------------------------------------------------------
    def runtime(self, copy_outputs=True):
        """A `autograd_core.runtime.Model` for this graph (built in memory, no file)."""
        from ..runtime import Model
        return Model(json.loads(json.dumps(self.to_json())), dict(self.constants), copy_outputs=copy_outputs)

    def __call__(self, *arrays):
        if self._rt is None:
            self._rt = self.runtime()
        arrays = tuple(a.detach().numpy() if hasattr(a, "detach") and hasattr(a, "numpy") else a for a in arrays)
        return self._rt(*arrays)

    def to_onnx(self, path=None, opset=17):
        from .onnx import graph_to_onnx
        return graph_to_onnx(self, path, opset=opset)


def load_graph(path):
    """Read a saved graph file back into a `Graph` (for inspection or ONNX conversion)."""
    g, tensors = read_file(path)
    return Graph.from_json(g, tensors)


def graph_from_bytes(data):
    g, tensors = loads(data)
    return Graph.from_json(g, tensors)
