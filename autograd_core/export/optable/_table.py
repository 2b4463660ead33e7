"""The op table's two registries and the decorators that fill them.

`OPS`: graph op name -> `OpSpec`, one per op a graph file may hold. A spec names its NumPy
kernel (looked up by the same name in `autograd_core.runtime`'s kernel table, which stays a
stand-alone package) and its ONNX mapping: a converter `(builder, node) -> output`, an ONNX op
type for a one-to-one mapping, or an explicit reason why the op cannot be written as ONNX.

`RULES`: traced entry point ("module:attr", e.g. "autograd_core.ops.pointwise:exp") -> `Rule`:
the lowering `(recorder, argument values, eager output) -> nodes` and the graph ops it may emit.
The recorder refuses a node whose op the running rule does not declare, and the op-table test
checks that every declared op has a spec with a kernel and an ONNX mapping or reason: an op
cannot be half-added.
"""
import sys

__all__ = ["OpSpec", "Rule", "OPS", "RULES", "RECORDER_EMITS", "op", "onnx_converter", "rule", "resolve", "dt"]

OPS = {}
RULES = {}
# ops the recorder itself emits inside any rule (`Recorder.operand` casts a mismatched operand)
RECORDER_EMITS = frozenset({"cast"})


class OpSpec:
    """One graph op: its name, its ONNX mapping (or why there is none), and its runtime kernel."""

    __slots__ = ("name", "onnx", "not_onnx")

    def __init__(self, name, onnx=None, not_onnx=None):
        if (onnx is None) == (not_onnx is None):
            raise ValueError(f"op {name!r}: give exactly one of an ONNX mapping and a not-exportable reason")
        self.name = name
        self.onnx = _one_to_one(onnx) if isinstance(onnx, str) else onnx
        self.not_onnx = not_onnx

    @property
    def kernel(self):
        """The runtime's builder for this op (None if the runtime lacks it: a broken table)."""
        from ...runtime._kernels import BUILDERS
        return BUILDERS.get(self.name)

    @property
    def traced_by(self):
        """The entry points whose trace rules may emit this op (sorted rule keys)."""
        return sorted(k for k, r in RULES.items() if self.name in r.emits)

    def to_onnx(self, b, node):
        if self.onnx is None:
            raise NotImplementedError(f"op {self.name!r} has no ONNX export: {self.not_onnx}")
        return self.onnx(b, node)

    def __repr__(self):
        return f"OpSpec({self.name!r})"


def _one_to_one(onnx_type):
    def convert(b, n):
        return b.node(onnx_type, n.inputs, n.outputs[0])
    convert.__name__ = f"onnx_{onnx_type}"
    return convert


class Rule:
    """How one traced entry point becomes graph nodes."""

    __slots__ = ("key", "lower", "emits", "inplace")

    def __init__(self, key, lower, emits, inplace=False):
        self.key = key
        self.lower = lower
        self.emits = frozenset(emits)
        self.inplace = bool(inplace)

    def __repr__(self):
        return f"Rule({self.key!r}, emits={sorted(self.emits)})"


def op(name, onnx=None, *, not_onnx=None):
    """Register graph op `name`; `onnx`: an ONNX op type (one-to-one) or a converter."""
    if name in OPS:
        raise RuntimeError(f"graph op {name!r} is registered twice")
    OPS[name] = spec = OpSpec(name, onnx, not_onnx)
    return spec


def onnx_converter(name):
    """Decorator form of `op(name, converter)`."""
    def deco(fn):
        op(name, fn)
        return fn
    return deco


def rule(*keys, emits, inplace=False):
    """Register `lower` as the trace rule of the entry points `keys`, emitting the ops `emits`."""
    def deco(lower):
        for k in keys:
            if k in RULES:
                raise RuntimeError(f"trace rule {k!r} is registered twice")
            RULES[k] = Rule(k, lower, emits, inplace)
        return lower
    return deco


def resolve(key):
    """The object a rule key names ("module:attr.attr"), or None if it is not loaded/defined."""
    mod_name, attr = key.split(":")
    obj = sys.modules.get(mod_name)
    for part in attr.split("."):
        if obj is None:
            return None
        obj = vars(obj).get(part) if isinstance(obj, type) else getattr(obj, part, None)
    return obj


# rule-key prefixes: the modules whose functions the tracer records
A = "autograd_core.ops.arith:"
P = "autograd_core.ops.pointwise:"
R = "autograd_core.ops.reduction:"
S = "autograd_core.ops.shape:"
I = "autograd_core.ops.indexing:"  # noqa: E741
IP = "autograd_core.ops.inplace:"
F = "autograd_core.nn.functional:"
C = "autograd_core.nn._functional_cnn:"
TT = "autograd_core.tensor:Tensor."


def dt(t):
    """The NumPy dtype of a tensor."""
    return t._data.dtype
