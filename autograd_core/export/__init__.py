"""Export a trained autograd_core model to a static graph for onboard inference, or to ONNX.

    from autograd_core import export, runtime
    g = export.trace(policy, (depth, state, h0))      # records one eval-mode forward pass
    g.save("policy.agc")                              # one safetensors file: weights + graph JSON
    model = runtime.load("policy.agc")                # NumPy-only interpreter, no autograd
    action, h = model(depth_np, state_np, h_np)
    export.to_onnx(g, None, "policy.onnx")            # standard ONNX (opset 17 by default)

`trace` → `Graph` (see `graph.py` for the IR and file format); `autograd_core.runtime` runs it.
"""
from .graph import Graph, Node, graph_from_bytes, load_graph
from ._errors import TraceError
from .trace import supported_ops, trace
from .onnx import to_onnx

__all__ = ["trace", "Graph", "Node", "TraceError", "load_graph", "graph_from_bytes", "to_onnx", "supported_ops"]
