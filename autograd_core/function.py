"""User-defined `Function`s, and the public home of the graph nodes and the backward engine.

The nodes (`Node`, `AccumulateGrad`, `reduce_to_shape`, ...) live in `_node.py`, the engine
(`run_backward`, `run_backward_graph`, ...) in `_engine.py`; they are re-exported here, where
the package and its users import them from.
"""
import numpy as np

from . import grad_mode as _gm
from ._engine import backward_from, run_backward, run_backward_graph  # noqa: F401  (re-exported)
from ._node import (_FREED, AccumulateGrad, Node, _freed_error, _RemovableHandle, next_seq,  # noqa: F401
                    reduce_to_shape, saved_version)

__all__ = ["Node", "Function", "FunctionCtx", "run_backward", "reduce_to_shape", "AccumulateGrad"]

_wrap = None  # autograd_core.tensor._wrap, bound by tensor.py once it is defined


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

