"""Graph nodes: the `grad_fn` objects every differentiable op creates, and what they save.

A node (`grad_fn`) is created by every differentiable op. It holds
- `next_edges`: one entry per differentiable input, `(target, output_nr)` or None, where the
  target is the input's node or, for a leaf that requires grad, the leaf tensor itself;
- whatever the backward needs (`saved`), with the version of each saved tensor so that an
  in-place modification is caught at backward time, as torch does.

`backward(self, grad)` works on NumPy arrays and returns one array (or None) per edge.
Un-broadcasting happens in exactly one place: `reduce_to_shape`.
The engine that runs the nodes is `_engine.py`; user-defined Functions are `function.py`.
"""
import itertools
import weakref

import numpy as np

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

# Node creation order; see the notes at the top of _engine.py.
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


def _freed_error():
    return RuntimeError(
        "Trying to backward through the graph a second time (or directly access saved "
        "tensors after they have already been freed). Saved intermediate values of the graph "
        "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if "
        "you need to backward through the graph a second time or if you need to access saved "
        "tensors after calling backward.")
