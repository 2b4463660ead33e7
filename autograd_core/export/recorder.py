"""The recorder: while one traced forward runs, every op entry point records itself into a graph.

How: every op entry point — the ops attached to `Tensor`, the `autograd_core.*` / `ops.*`
functions, `nn.functional` and the fused CNN/RNN kernels — is temporarily replaced, wherever a
module namespace or the Tensor class refers to it, by a wrapper that runs the original and hands
the call to the active `Recorder` (restored in a `finally`). Only the outermost call records: a
fused kernel is one primitive, whatever it calls inside. What a recorded call becomes is its
rule in the op table (`optable.RULES`); the recorder only checks that a rule emits the graph ops
it declares. Entry points without a rule raise `TraceError` when they touch a traced value.
"""
import functools
import inspect
import sys
import threading

import numpy as np

from ._errors import TraceError
from .graph import Node
from .optable import RECORDER_EMITS, RULES, resolve
from .optable._table import S, TT

__all__ = ["Recorder", "TraceError", "bind", "signature", "plan_wrappers", "install", "Patch"]

ACTIVE = None           # the running Recorder (one trace at a time, process-wide); set by trace()
LOCK = threading.Lock()


class Recorder:
    """The graph under construction while one traced forward runs (see `trace`)."""

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
        self._emits = frozenset()  # graph ops the running rule may emit
        self._label = ""

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
        if op not in self._emits:
            raise TraceError(f"{self._label}: internal error, its trace rule emitted graph op {op!r} that it does "
                             f"not declare (emits={sorted(self._emits)}); declare it in autograd_core.export.optable")
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
    def call(self, orig, sig, kind, rule, label, args, kwargs):
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
            vals = bind(sig, args, kwargs)
            self._emits, self._label = rule.emits | RECORDER_EMITS, label
            try:
                rule.lower(self, vals, out)
            except TraceError:
                raise
            except Exception as e:  # a lowering bug or an argument form it does not handle
                raise TraceError(f"{label}: cannot export this call ({type(e).__name__}: {e})") from e
            for t in _tensors_in(out, self.Tensor):
                if id(t) not in self.vid:
                    raise TraceError(f"{label}: internal error, an output was not recorded")
        finally:
            self.depth -= 1
            self._emits = frozenset()
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


def bind(sig, args, kwargs):
    """Argument values in signature order (the *args tuple and the **kwargs dict included)."""
    if sig is None:
        return list(args) + ([kwargs] if kwargs else [])
    ba = sig.bind(*args, **kwargs)
    ba.apply_defaults()
    return list(ba.arguments.values())




# =============================================================================================
# what the tracer wraps
# =============================================================================================
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

# modules whose public functions are op entry points: unsupported unless a rule records them
_OP_MODULES = ["autograd_core.ops.arith", "autograd_core.ops.pointwise", "autograd_core.ops.reduction",
               "autograd_core.ops.shape", "autograd_core.ops.indexing", "autograd_core.ops.inplace",
               "autograd_core.nn.functional", "autograd_core.nn._functional_cnn", "autograd_core.nn.loss"]
_OP_PREFIXES = ("autograd_core.ops.", "autograd_core.nn._functional", "autograd_core.nn.functional")


# =============================================================================================
# patching
# =============================================================================================
def signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _make_wrapper(orig, kind, rule, label):
    sig = signature(orig) if kind in ("record", "inplace") else None

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        rec = ACTIVE
        if rec is None or rec.depth or threading.get_ident() != rec.tid:
            return orig(*args, **kwargs)
        return rec.call(orig, sig, kind, rule, label, args, kwargs)
    wrapper.__trace_original__ = orig
    return wrapper


def plan_wrappers():
    """id(original function) -> (original, wrapper), for every op entry point."""
    import autograd_core  # noqa: F401  (makes sure the op modules are imported)
    try:
        import autograd_core.nn  # noqa: F401
    except ImportError:
        pass
    plan = {}
    claimed = {}

    def add(fn, kind, rule, label):
        if id(fn) in plan:
            return
        plan[id(fn)] = (fn, _make_wrapper(fn, kind, rule, label))
        claimed[id(fn)] = label

    for key, rule in RULES.items():
        fn = resolve(key)
        if fn is None or not callable(fn):
            continue
        add(fn, "inplace" if rule.inplace else "record", rule, f"{key.rsplit(':', 1)[1].rsplit('.', 1)[-1]}()")
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


class Patch:
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


def install(patch, plan):
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
        getter = _make_wrapper(old.fget, "record", RULES[key], f"Tensor.{prop}")
        patch.set(Tensor, prop, property(getter, old.fset, old.fdel, old.__doc__))
