"""`trace(module_or_fn, example_inputs)`: record one forward pass into a static `Graph`.

The recorder (`recorder.py`) wraps every op entry point while the forward runs (modules in eval
mode); what each recorded call becomes is its rule in the op table (`optable`), which also holds
each graph op's ONNX mapping and names its runtime kernel.

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
import inspect
import threading

import numpy as np

from . import recorder as _rec
from ._errors import TraceError
from .graph import Graph
from .optable import RULES

__all__ = ["trace", "TraceError", "supported_ops"]


def supported_ops():
    """The autograd_core functions the tracer records (as 'module:function')."""
    return sorted(RULES)


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
    from ..tensor import Tensor, _wrap
    from .. import grad_mode

    if _rec.ACTIVE is not None and _rec.ACTIVE.tid == threading.get_ident():
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

    rec = _rec.Recorder(strict)
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
    plan = _rec.plan_wrappers()
    patch = _rec.Patch()
    with _rec.LOCK:
        try:
            _rec.install(patch, plan)
            _rec.ACTIVE = rec
            with grad_mode.enable_grad():
                out = fn(*args)
        finally:
            _rec.ACTIVE = None
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
