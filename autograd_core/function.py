"""Graph nodes, the backward engine, and user-defined `Function`s.

A node (`grad_fn`) is created by every differentiable op. It holds
- `next_edges`: one entry per differentiable input, `(target, output_nr)` or None, where the
  target is the input's node or, for a leaf that requires grad, the leaf tensor itself;
- whatever the backward needs (`saved`), with the version of each saved tensor so that an
  in-place modification is caught at backward time, as torch does.

`backward(self, grad)` works on NumPy arrays and returns one array (or None) per edge.
Un-broadcasting happens in exactly one place: `reduce_to_shape`.
"""
import itertools
import weakref
from heapq import heappop, heappush

import numpy as np

from . import grad_mode as _gm

__all__ = ["Node", "Function", "FunctionCtx", "run_backward", "reduce_to_shape", "AccumulateGrad"]

_FREED = object()  # marks saved values released after a backward without retain_graph


def reduce_to_shape(grad, shape):
    """Sum `grad` over the axes that broadcasting expanded so that it has `shape`.

    The one place un-broadcasting lives. `shape` is a tuple.
    """
    gshape = grad.shape
    if gshape == shape:
        return grad
    nlead = len(gshape) - len(shape)
    if nlead:
        grad = grad.sum(axis=tuple(range(nlead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    if grad.shape != shape:
        # A 0-d target from a (1,)-shaped sum, or numpy scalar results.
        grad = np.reshape(grad, shape)
    return grad


def _type_string(arr):
    names = {"float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor",
             "bool": "BoolTensor", "int32": "IntTensor", "float16": "HalfTensor"}
    return f"torch.{names.get(arr.dtype.name, arr.dtype.name)} {list(arr.shape)}"


class Node:
    """Base class of every `grad_fn`. Subclasses set `saved` and implement `backward(grad)`."""

    __slots__ = ("next_edges", "saved", "vc", "seq", "__weakref__")
    _is_node = True
    _multi = False  # True for nodes with several outputs (split, chunk, custom Functions)

    def __init__(self):
        # Ops on the hot path build nodes with __new__ and assign the three slots directly.
        self.next_edges = ()
        self.saved = None
        self.vc = ()
        self.seq = next_seq()

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"

    @property
    def next_functions(self):
        out = []
        for e in self.next_edges:
            if e is None:
                out.append((None, 0))
            elif e[0]._is_node:
                out.append(e)
            else:
                out.append((AccumulateGrad.of(e[0]), 0))
        return tuple(out)

    @property
    def metadata(self):
        return {}

    def register_hook(self, fn):
        """`fn(grad_inputs, grad_outputs)` after this node's backward (return value ignored)."""
        hooks = _node_hooks.setdefault(self, ([], []))[1]
        _hooks_registered[0] += 1
        hooks.append(fn)
        return _RemovableHandle(hooks, fn)

    def register_prehook(self, fn):
        """`fn(grad_outputs)` before this node's backward; may return replacement grads."""
        return self._add_pre_hook(None, fn)

    def _add_pre_hook(self, output_nr, fn):
        hooks = _node_hooks.setdefault(self, ([], []))[0]
        _hooks_registered[0] += 1
        entry = (output_nr, fn)
        hooks.append(entry)
        return _RemovableHandle(hooks, entry)

    def backward(self, grad):  # pragma: no cover - every subclass overrides
        raise NotImplementedError(type(self).__name__)

    # -- saved tensors ----------------------------------------------------------------------
    def _check_versions(self):
        for counter, version, arr, fn, nr in self.vc:
            if counter[0] != version:
                # a node's own saved output is recorded with the node's class (no reference cycle)
                name = fn.__name__ if isinstance(fn, type) else type(fn).__name__
                origin = (f", which is output {nr} of {name}," if fn is not None and fn._is_node else "")
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: [{_type_string(arr)}]{origin} is at version "
                    f"{counter[0]}; expected version {version} instead. Hint: the backtrace further "
                    "above shows the operation that failed to compute its gradient. The variable in "
                    "question was changed in there or anywhere later. Good luck!")



# Hooks live outside the nodes (few nodes ever have one): node -> (pre_hooks, post_hooks).
# Pre-hook entries are (output_nr or None, fn).
_node_hooks = weakref.WeakKeyDictionary()
_hooks_registered = [0]  # >0 once any node hook was registered: lets the engine skip the lookup

# Node creation order; see the engine notes below.
next_seq = itertools.count(1).__next__


class _RemovableHandle:
    def __init__(self, container, item):
        self._container = container
        self._item = item

    def remove(self):
        try:
            self._container.remove(self._item)
        except ValueError:
            pass


def saved_version(t):
    """The record `(counter, version, array, node, output_nr)` kept for a tensor saved for backward.

    A node that saves its own output records its class instead of itself: a node referring to
    itself would be a reference cycle, freed only by the cyclic GC (whose pauses then land in
    the middle of planners' optimisation loops).
    """
    vc = t._vc
    return (vc, vc[0], t._data, t._fn, t._nr)


class AccumulateGrad:
    """The node torch shows for a leaf in `next_functions`; holds the leaf as `variable`."""

    __slots__ = ("variable",)
    _is_node = False

    @staticmethod
    def of(leaf):
        acc = leaf._extra_get("accumulate_grad")
        if acc is None:
            acc = AccumulateGrad()
            acc.variable = leaf
            leaf._extra_set("accumulate_grad", acc)
        return acc

    @property
    def next_functions(self):
        return ()

    def name(self):
        return "torch::autograd::AccumulateGrad"

    def __repr__(self):
        return f"<AccumulateGrad object at {id(self):#x}>"


# ---------------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------------
#
# Every node gets a sequence number when it is created. A node consumes only tensors made before
# it, so every edge points from a higher to a lower sequence number: running the nodes that hold
# a gradient in decreasing sequence order is a valid reverse topological order (torch's engine
# uses the same rule). No dependency-counting pass, no recursion, a heap of pending nodes.

_wrap = None  # autograd_core.tensor._wrap, bound by tensor.py once it is defined


def _accumulate_leaf(leaf, g):
    ex = leaf._extra
    if ex is not None:
        hooks = ex.get("hooks")
        if hooks:
            for fn in list(hooks):
                r = fn(_wrap(g))
                if r is not None:
                    g = r._data
    dt = leaf._data.dtype
    cur = leaf._grad
    if cur is None:
        # Copy: a node may hand the same array to several inputs (AddBackward0) or keep it.
        leaf._grad = _wrap(np.array(g, dtype=dt))
    else:
        if g.dtype is not dt:
            g = g.astype(dt)
        cur._data += g
        cur._vc[0] += 1


def _freed_error():
    return RuntimeError(
        "Trying to backward through the graph a second time (or directly access saved "
        "tensors after they have already been freed). Saved intermediate values of the graph "
        "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if "
        "you need to backward through the graph a second time or if you need to access saved "
        "tensors after calling backward.")


def run_backward(roots, root_grads, retain_graph=False, capture=None, accumulate=True):
    """Reverse-mode sweep from `roots` (tensors) seeded with `root_grads` (arrays).

    With `capture` (a dict of capture keys -> None), gradients reaching those keys are stored
    there; a key is a leaf tensor's id or `(node, output_nr)` for a non-leaf. With
    `accumulate=False` leaves' `.grad` are left alone (autograd.grad).
    """
    buffers = {}
    heap = []
    for t, g in zip(roots, root_grads):
        fn = t._fn
        if fn is None:
            if not t._rg:
                raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
            if capture is not None and id(t) in capture:
                prev = capture[id(t)]
                capture[id(t)] = g if prev is None else prev + g
            if accumulate:
                _accumulate_leaf(t, g)
            continue
        if fn not in buffers:
            heappush(heap, (-fn.seq, fn))
        if fn._multi:
            buf = buffers.get(fn)
            if buf is None:
                buf = buffers[fn] = [None] * fn.n_outputs
            nr = t._nr
            buf[nr] = g if buf[nr] is None else buf[nr] + g
        else:
            prev = buffers.get(fn)
            buffers[fn] = g if prev is None else prev + g
    _execute(heap, buffers, retain_graph, capture, accumulate)


def backward_from(node, nr, grad, retain_graph):
    """Fast path of Tensor.backward(): one root, accumulate into leaves."""
    if node._multi:
        buf = [None] * node.n_outputs
        buf[nr] = grad
        grad = buf
    _execute([(-node.seq, node)], {node: grad}, retain_graph, None, True)


def _route(e, g, buffers, heap, leaf_grads):
    """Deliver gradient `g` along edge `e` (rare cases: multi-output targets)."""
    tgt = e[0]
    buf = buffers.get(tgt)
    if buf is None:
        buf = buffers[tgt] = [None] * tgt.n_outputs
        heappush(heap, (-tgt.seq, tgt))
    nr = e[1]
    buf[nr] = g if buf[nr] is None else buf[nr] + g


def _execute(heap, buffers, retain_graph, capture, accumulate):
    pop = heappop
    push = heappush
    bget = buffers.get
    bpop = buffers.pop
    leaf_grads = {}  # leaf -> summed gradient; accumulated into .grad once, after the sweep
    lget = leaf_grads.get
    freed = _FREED
    hooks_registered = _hooks_registered
    node = pop(heap)[1] if heap else None
    while node is not None:
        grad = bpop(node)
        saved = node.saved
        if saved is freed:
            raise _freed_error()
        if hooks_registered[0] or capture is not None:
            hooks = _node_hooks.get(node)
            grad = _apply_pre_hooks(node, grad, hooks[0] if hooks else None, capture, _wrap)
        else:
            hooks = None
        for rec in node.vc:
            if rec[0][0] != rec[1]:
                node._check_versions()
        grads = node.backward(grad)
        if hooks and hooks[1]:
            for fn in list(hooks[1]):
                fn(tuple(None if x is None else _wrap(x) for x in grads),
                   tuple(_wrap(x) for x in (grad if node._multi else (grad,)) if x is not None))
        if saved is not None and not retain_graph:
            node.saved = freed
        # Chains: when the only pending node is the one this node feeds, run it next without
        # going through the heap (it is then the highest-sequence pending node by definition).
        nxt = None
        for e, g in zip(node.next_edges, grads):
            if e is None or g is None:
                continue
            tgt = e[0]
            if tgt._is_node:
                if tgt._multi:
                    if nxt is not None:
                        push(heap, (-nxt.seq, nxt))
                        nxt = None
                    _route(e, g, buffers, heap, leaf_grads)
                    continue
                prev = bget(tgt)
                if prev is None:
                    buffers[tgt] = g
                    if nxt is None and not heap:
                        nxt = tgt
                    else:
                        if nxt is not None:
                            push(heap, (-nxt.seq, nxt))
                            nxt = None
                        push(heap, (-tgt.seq, tgt))
                else:
                    buffers[tgt] = prev + g
            else:
                prev = lget(tgt)
                leaf_grads[tgt] = g if prev is None else prev + g
        if nxt is not None:
            node = nxt
        else:
            node = pop(heap)[1] if heap else None
    for leaf, g in leaf_grads.items():
        if capture is not None and id(leaf) in capture:
            prev = capture[id(leaf)]
            capture[id(leaf)] = g if prev is None else prev + g
        if accumulate:
            _accumulate_leaf(leaf, g)


def _apply_pre_hooks(node, grad, pre, capture, wrap):
    multi = node._multi
    grads = list(grad) if multi else [grad]
    if pre:
        for nr, fn in list(pre):
            if nr is None:  # node-level prehook: sees all output grads
                r = fn(tuple(None if g is None else wrap(g) for g in grads))
                if r is not None:
                    grads = [None if g is None else g._data for g in r]
            elif grads[nr] is not None:
                r = fn(wrap(grads[nr]))
                if r is not None:
                    grads[nr] = r._data
    if capture is not None:
        for nr, g in enumerate(grads):
            key = (node, nr)
            if g is not None and key in capture:
                prev = capture[key]
                capture[key] = g if prev is None else prev + g
    return grads if multi else grads[0]


# ---------------------------------------------------------------------------------------------
# The graph-recording engine (create_graph=True)
# ---------------------------------------------------------------------------------------------
#
# Same sweep as `_execute`, but gradients are Tensors and every node runs `backward_t`, its
# backward formula written in differentiable autograd_core ops (see `_double.py`), with grad
# recording on: the gradients carry a graph and can be differentiated again, to any order.
# The NumPy path above stays untouched for ordinary first-order backward passes.

def run_backward_graph(roots, root_grads, capture=None, accumulate=True, stop=False):
    """`run_backward` with Tensor gradients that record their own graph.

    `capture` maps capture keys (leaf id, or (node, output_nr)) to None and receives Tensors.
    With `stop`, captured non-leaf outputs are not propagated further (partial derivatives with
    respect to intermediate tensors, used by decomposed backward formulas).
    """
    from . import _double  # noqa: F401  (attaches backward_t to every node class)
    buffers = {}
    heap = []
    leaf_grads = {}
    for t, g in zip(roots, root_grads):
        fn = t._fn
        if fn is None:
            if not t._rg:
                raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
            prev = leaf_grads.get(t)
            leaf_grads[t] = g if prev is None else prev + g
            continue
        if fn not in buffers:
            heappush(heap, (-fn.seq, fn))
        if fn._multi:
            buf = buffers.get(fn)
            if buf is None:
                buf = buffers[fn] = [None] * fn.n_outputs
            nr = t._nr
            buf[nr] = g if buf[nr] is None else buf[nr] + g
        else:
            prev = buffers.get(fn)
            buffers[fn] = g if prev is None else prev + g
    prev_mode = _gm._state.enabled
    _gm._state.enabled = True
    try:
        _execute_graph(heap, buffers, leaf_grads, capture, stop)
    finally:
        _gm._state.enabled = prev_mode
    for leaf, g in leaf_grads.items():
        if capture is not None and id(leaf) in capture:
            prev = capture[id(leaf)]
            capture[id(leaf)] = g if prev is None else prev + g
        if accumulate:
            _accumulate_leaf_graph(leaf, g)


def _accumulate_leaf_graph(leaf, g):
    ex = leaf._extra
    if ex is not None:
        hooks = ex.get("hooks")
        if hooks:
            for fn in list(hooks):
                r = fn(g)
                if r is not None:
                    g = r
    if g._data.dtype != leaf._data.dtype:
        g = g.to(leaf.dtype)
    cur = leaf._grad
    if cur is None:
        # torch keeps the graph of a create_graph gradient in .grad
        leaf._grad = g if g._fn is not None else _wrap(np.array(g._data, dtype=leaf._data.dtype))
    else:
        leaf._grad = cur + g  # out of place, so that the old .grad (and its graph) stays valid


def _execute_graph(heap, buffers, leaf_grads, capture, stop):
    while heap:
        node = heappop(heap)[1]
        grad = buffers.pop(node)
        if node.saved is _FREED:
            raise _freed_error()
        multi = node._multi
        grads_in = list(grad) if multi else [grad]
        hooks = _node_hooks.get(node) if _hooks_registered[0] else None
        if hooks and hooks[0]:
            for nr, fn in list(hooks[0]):
                if nr is None:
                    r = fn(tuple(grads_in))
                    if r is not None:
                        grads_in = list(r)
                elif grads_in[nr] is not None:
                    r = fn(grads_in[nr])
                    if r is not None:
                        grads_in[nr] = r
        if capture is not None:
            hit = False
            for nr, g in enumerate(grads_in):
                key = (node, nr)
                if g is not None and key in capture:
                    prev = capture[key]
                    capture[key] = g if prev is None else prev + g
                    hit = True
            if hit and stop:
                continue
        for rec in node.vc:
            if rec[0][0] != rec[1]:
                node._check_versions()
        grads = node.backward_t(grads_in if multi else grads_in[0])
        if hooks and hooks[1]:
            for fn in list(hooks[1]):
                fn(tuple(grads), tuple(x for x in grads_in if x is not None))
        i = 0
        for e in node.next_edges:
            g = grads[i]
            i += 1
            if e is None or g is None:
                continue
            tgt = e[0]
            if tgt._is_node:
                if tgt._multi:
                    buf = buffers.get(tgt)
                    if buf is None:
                        buf = buffers[tgt] = [None] * tgt.n_outputs
                        heappush(heap, (-tgt.seq, tgt))
                    nr = e[1]
                    buf[nr] = g if buf[nr] is None else buf[nr] + g
                    continue
                prev = buffers.get(tgt)
                if prev is None:
                    buffers[tgt] = g
                    heappush(heap, (-tgt.seq, tgt))
                else:
                    buffers[tgt] = prev + g
            else:
                prev = leaf_grads.get(tgt)
                leaf_grads[tgt] = g if prev is None else prev + g


# ---------------------------------------------------------------------------------------------
# User-defined Functions
# ---------------------------------------------------------------------------------------------

class FunctionCtx:
    """The `ctx` handed to `Function.forward`/`backward`."""

    def save_for_backward(self, *tensors):
        self._to_save = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tensors

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def set_materialize_grads(self, value):
        self._materialize = bool(value)


class BackwardCFunction(Node):
    """Node of a user `Function`: the ctx and the node are one object, as in torch."""

    __slots__ = ("_fn_cls", "n_outputs", "needs_input_grad", "_saved_tensors", "_to_save",
                 "_non_differentiable", "_dirty", "_materialize", "_out_meta", "_in_specs", "__dict__")
    _multi = True

    # FunctionCtx API on the node itself
    save_for_backward = FunctionCtx.save_for_backward
    mark_non_differentiable = FunctionCtx.mark_non_differentiable
    mark_dirty = FunctionCtx.mark_dirty
    set_materialize_grads = FunctionCtx.set_materialize_grads

    def name(self):
        return type(self).__name__

    @property
    def saved_tensors(self):
        if self.saved is _FREED:
            raise _freed_error()
        if self.vc:
            self._check_versions()
        return self._saved_tensors

    def backward(self, grads):
        from .grad_mode import no_grad
        gs = []
        for g, (shape, dt) in zip(grads, self._out_meta):
            if g is None:
                gs.append(_wrap(np.zeros(shape, dt)) if self._materialize else None)
            else:
                gs.append(_wrap(g))
        with no_grad():
            res = self._fn_cls.backward(self, *gs)
        if not isinstance(res, tuple):
            res = (res,)
        n_in = len(self.needs_input_grad)
        if len(res) < n_in:
            raise RuntimeError(f"function {self._fn_cls.__name__}Backward returned an incorrect number "
                               f"of gradients (expected {n_in}, got {len(res)})")
        out = []
        for r, spec in zip(res[:n_in], self._in_specs):
            if spec is None or r is None:
                out.append(None)
                continue
            arr = r._data if hasattr(r, "_data") else np.asarray(r)
            shape, dt = spec
            if arr.shape != shape:
                try:
                    arr = reduce_to_shape(np.broadcast_to(arr, np.broadcast_shapes(arr.shape, shape)), shape)
                except ValueError:
                    raise RuntimeError(f"Function {self._fn_cls.__name__}Backward returned an invalid gradient "
                                       f"at index {len(out)} - got {list(arr.shape)} but expected shape "
                                       f"compatible with {list(shape)}") from None
            out.append(arr)
        # Edges exist only for differentiable tensor inputs; drop the rest.
        return tuple(g for g, spec in zip(out, self._in_specs) if spec is not None)


def _function_backward_t(self, grads):
    """create_graph=True: the user's backward runs with grad recording on, on Tensor grads."""
    gs = []
    for g, (shape, dt) in zip(grads, self._out_meta):
        gs.append(_wrap(np.zeros(shape, dt)) if g is None and self._materialize else g)
    res = self._fn_cls.backward(self, *gs)
    if not isinstance(res, tuple):
        res = (res,)
    n_in = len(self.needs_input_grad)
    if len(res) < n_in:
        raise RuntimeError(f"function {self._fn_cls.__name__}Backward returned an incorrect number "
                           f"of gradients (expected {n_in}, got {len(res)})")
    from ._double import sum_to
    out = []
    for r, spec in zip(res[:n_in], self._in_specs):
        if spec is None:
            continue
        if r is None:
            out.append(None)
            continue
        if not hasattr(r, "_data"):
            r = _wrap(np.asarray(r))
        shape, dt = spec
        if r._data.shape != shape:
            try:
                np.broadcast_shapes(r._data.shape, shape)
            except ValueError:
                raise RuntimeError(f"Function {self._fn_cls.__name__}Backward returned an invalid gradient "
                                   f"- got {list(r._data.shape)} but expected shape compatible with "
                                   f"{list(shape)}") from None
            r = sum_to(r.expand(np.broadcast_shapes(r._data.shape, shape)), shape)
        out.append(r)
    return tuple(out)


BackwardCFunction.backward_t = _function_backward_t


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        # Each Function gets its own node class named like torch's (`<Name>Backward`).
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,), {"__slots__": ()})


class Function(metaclass=_FunctionMeta):
    """Base class for custom autograd operations, with torch's API.

    ```
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x
        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g
    y = Square.apply(x)
    ```
    `forward` runs with grad recording off; `backward` receives and returns Tensors.
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        from .tensor import Tensor, _wrap
        node = cls._backward_cls.__new__(cls._backward_cls)
        node.seq = next_seq()
        node.saved = None
        node.vc = ()
        node._fn_cls = cls
        node._to_save = ()
        node._non_differentiable = ()
        node._dirty = ()
        node._materialize = True
        tensor_args = [a for a in args if isinstance(a, Tensor)]
        node.needs_input_grad = tuple(isinstance(a, Tensor) and a._rg for a in args)
        prev = _gm._state.enabled
        _gm._state.enabled = False
        try:
            out = cls.forward(node, *args, **kwargs)
        finally:
            _gm._state.enabled = prev
        is_tuple = isinstance(out, tuple)
        outs = out if is_tuple else (out,)
        record = prev and any(a._rg for a in tensor_args)
        results = []
        input_ids = {id(a) for a in tensor_args}
        for o in outs:
            if isinstance(o, Tensor):
                # An input returned as-is becomes a view-like alias with its own history.
                if id(o) in input_ids and id(o) not in {id(d) for d in node._dirty}:
                    o = _wrap(o._data, vc=o._vc)
                results.append(o)
            else:
                results.append(o)
        if record:
            specs = []
            edges = []
            for a in args:
                if isinstance(a, Tensor) and a._rg:
                    specs.append((a._data.shape, a._data.dtype))
                    edges.append(a._edge())
                elif isinstance(a, Tensor):
                    specs.append(None)
                else:
                    specs.append(None)
            node._in_specs = specs
            node.next_edges = tuple(edges)
            tensor_outs = [o for o in results if isinstance(o, Tensor)]
            node.n_outputs = len(tensor_outs)
            node._out_meta = [(o._data.shape, o._data.dtype) for o in tensor_outs]
            nondiff = {id(t) for t in node._non_differentiable}
            nr = 0
            for o in results:
                if isinstance(o, Tensor):
                    if id(o) not in nondiff and o._data.dtype.kind == "f":
                        o._fn = node
                        o._rg = True
                        o._nr = nr
                    nr += 1
            saved = []
            vcs = []
            for t in node._to_save:
                if t is None:
                    saved.append(None)
                    continue
                saved.append(t)
                vcs.append(saved_version(t))
            node._saved_tensors = tuple(saved)
            node.saved = True if saved else None
            node.vc = tuple(vcs)
        else:
            node._saved_tensors = tuple(node._to_save)
        return tuple(results) if is_tuple else results[0]

