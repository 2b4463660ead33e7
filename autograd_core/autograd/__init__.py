"""`autograd_core.autograd`: backward, grad, Function, gradcheck (torch.autograd's names)."""
import numpy as np

from ..function import Function, FunctionCtx, run_backward, run_backward_graph
from ..grad_mode import enable_grad, no_grad, set_grad_enabled, inference_mode
from ..tensor import Tensor
from ..gradcheck import gradcheck, gradgradcheck
from .._compat import Variable  # noqa: F401  (torch.autograd.Variable, the legacy alias)

__all__ = ["backward", "grad", "Function", "FunctionCtx", "gradcheck", "gradgradcheck", "functional", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode"]


def _seed_grads(outputs, grad_outputs):
    grads = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            if out._data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if out._data.dtype.kind != "f":
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got "
                                   f"{out.dtype}")
            grads.append(np.ones_like(out._data))
        else:
            gd = g._data if isinstance(g, Tensor) else np.asarray(g, dtype=out._data.dtype)
            if gd.shape != out._data.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {tuple(gd.shape)} and "
                                   f"output[{i}] has a shape of {tuple(out._data.shape)}.")
            grads.append(gd)
    return grads


def _as_seq(x):
    if isinstance(x, Tensor):
        return [x]
    return list(x)


def _seed_tensors(outputs, grad_outputs):
    """Seeds as Tensors for the graph-recording engine (a given grad_output keeps its own graph)."""
    from ..tensor import _wrap
    arrays = _seed_grads(outputs, grad_outputs)
    return [g if isinstance(g, Tensor) else _wrap(np.asarray(a))
            for a, g in zip(arrays, list(grad_outputs) + [None] * (len(arrays) - len(grad_outputs)))]


def _capture_keys(ins):
    keys = []
    capture = {}
    for t in ins:
        if not t._rg:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        key = id(t) if t._fn is None else (t._fn, t._nr)
        keys.append(key)
        capture[key] = None
    return keys, capture


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of `tensors` into the `.grad` of graph leaves (or only of `inputs`)."""
    outs = _as_seq(tensors)
    gts = [None] * len(outs) if grad_tensors is None else _as_seq(grad_tensors) if not isinstance(
        grad_tensors, (list, tuple)) else list(grad_tensors)
    if len(gts) != len(outs):
        raise RuntimeError(f"got {len(gts)} gradients for {len(outs)} tensors")
    for o in outs:
        if not o._rg:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if create_graph:
        seeds = _seed_tensors(outs, gts)
        if inputs is None:
            run_backward_graph(outs, seeds)
            return
        ins = _as_seq(inputs)
        if not ins:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        keys, capture = _capture_keys(ins)
        run_backward_graph(outs, seeds, capture=capture, accumulate=False)
        for t, k in zip(ins, keys):
            g = capture[k]
            if g is None:
                continue
            t._grad = g if t._grad is None else t._grad + g
        return
    seeds = _seed_grads(outs, gts)
    retain = bool(retain_graph) if retain_graph is not None else False
    if inputs is None:
        run_backward(outs, seeds, retain_graph=retain)
        return
    ins = _as_seq(inputs)
    if not ins:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    res = _grad_arrays(outs, seeds, ins, retain, allow_unused=True)
    for t, g in zip(ins, res):
        if g is None:
            continue
        if t._grad is None:
            t._grad = Tensor.__new__(Tensor)
            from ..tensor import _wrap
            t._grad = _wrap(np.array(g, dtype=t._data.dtype))
        else:
            t._grad._data += g


def _grad_arrays(outs, seeds, ins, retain, allow_unused):
    capture = {}
    keys = []
    for t in ins:
        if not t._rg:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        key = id(t) if t._fn is None else (t._fn, t._nr)
        keys.append(key)
        capture[key] = None
    run_backward(outs, seeds, retain_graph=retain, capture=capture, accumulate=False)
    res = []
    for i, k in enumerate(keys):
        g = capture[k]
        if g is None and not allow_unused:
            raise RuntimeError(f"One of the differentiated Tensors appears to not have been used in the graph. "
                               f"Set allow_unused=True if this is the desired behavior.")
        res.append(g)
    return res


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of `outputs` with respect to `inputs`, returned (not accumulated into `.grad`)."""
    from ..tensor import _wrap
    outs = _as_seq(outputs)
    ins = _as_seq(inputs)
    gos = [None] * len(outs) if grad_outputs is None else _as_seq(grad_outputs)
    if len(gos) != len(outs):
        raise RuntimeError(f"grad requires one grad_output per output: got {len(gos)} for {len(outs)} outputs")
    for o in outs:
        if not o._rg:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if allow_unused is None:
        allow_unused = materialize_grads
    if create_graph:
        seeds = _seed_tensors(outs, gos)
        keys, capture = _capture_keys(ins)
        run_backward_graph(outs, seeds, capture=capture, accumulate=False)
        out = []
        for t, k in zip(ins, keys):
            g = capture[k]
            if g is None:
                if not allow_unused:
                    raise RuntimeError("One of the differentiated Tensors appears to not have been used in the "
                                       "graph. Set allow_unused=True if this is the desired behavior.")
                out.append(_wrap(np.zeros_like(t._data)) if materialize_grads else None)
            else:
                if g._data.dtype != t._data.dtype:
                    g = g.to(t.dtype)
                out.append(g)
        return tuple(out)
    seeds = _seed_grads(outs, gos)
    res = _grad_arrays(outs, seeds, ins, bool(retain_graph), bool(allow_unused))
    out = []
    for t, g in zip(ins, res):
        if g is None:
            out.append(_wrap(np.zeros_like(t._data)) if materialize_grads else None)
        else:
            out.append(_wrap(np.array(g, dtype=t._data.dtype)))
    return tuple(out)


from . import functional  # noqa: E402  (needs grad, defined above)
