"""The exporter's op table: ONE entry per graph op, from which tracing, the runtime kernel and
the ONNX mapping are looked up (no per-op if-chains anywhere else).

    from autograd_core.export.optable import OPS, RULES
    OPS["conv2d"].kernel      # the NumPy builder in autograd_core.runtime (by the same name)
    OPS["conv2d"].to_onnx(b, node)                 # ONNX nodes for one graph node
    OPS["conv2d"].traced_by   # the entry points whose rules emit it (conv1d, conv2d)
    RULES["autograd_core.nn._functional_cnn:conv2d"].emits   # {"conv2d", "reshape"}

Files by family, each holding its graph ops' ONNX mappings and the trace rules that emit them:
`_elementwise`, `_reduce`, `_shape`, `_nn`; `_table` defines the spec types and registries.
Adding an op: a kernel in `runtime/_kernels_<family>.py`, an `op(...)` here (with its ONNX
mapping or `not_onnx=` reason), and a `@rule(..., emits=...)` for the entry point that produces
it; test/autograd_core/export/test_export_optable.py fails until all three exist.
"""
from ._table import OPS, RECORDER_EMITS, RULES, OpSpec, Rule, resolve
from . import _elementwise, _reduce, _shape, _nn  # noqa: F401,E402  (fill the tables)

__all__ = ["OPS", "RULES", "RECORDER_EMITS", "OpSpec", "Rule", "resolve", "emittable_ops"]


def emittable_ops():
    """Every graph op the tracer can emit: the union of the rules' declared ops and the recorder's own."""
    out = set(RECORDER_EMITS)
    for r in RULES.values():
        out |= r.emits
    return out
