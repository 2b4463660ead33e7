"""`autograd_core.autograd.functional`: vjp, jvp, vhp, hvp, jacobian, hessian (torch's API).

Built on `autograd.grad(..., create_graph=True)`. As in torch, inputs are detached copies that
require grad (or, with create_graph=True, views that keep the inputs' graph), results are
detached unless create_graph=True, and a tuple of inputs gives tuples back while a single Tensor
gives Tensors back. `jvp` and `hvp` use the double-vjp trick. `vectorize` and `strategy` are
accepted for compatibility: rows are always computed one backward pass at a time (reverse mode).
"""
import numpy as np

from ..grad_mode import enable_grad
from ..tensor import Tensor, _wrap

__all__ = ["vjp", "jvp", "vhp", "hvp", "jacobian", "hessian"]


def _as_tuple(x, arg_name, fn_name):
    is_tuple = isinstance(x, tuple)
    if not is_tuple:
        x = (x,)
    for i, el in enumerate(x):
        if not isinstance(el, Tensor):
            if is_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                                f"Tensors but the value at index {i} has type {type(el).__name__}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors "
                            f"but the given {arg_name} has type {type(el).__name__}.")
    return is_tuple, x


def _tuple_postprocess(res, is_tuple):
    """Undo `_as_tuple`; `is_tuple` may be a pair (outer, inner) for nested results."""
    if isinstance(is_tuple, tuple):
        if not is_tuple[1]:
            res = tuple(r[0] for r in res)
        if not is_tuple[0]:
            res = res[0]
    elif not is_tuple:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph, need_graph):
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(inp.view_as(inp))
        else:
            t = inp.detach()
            if need_graph and t._data.dtype.kind == "f":
                t.requires_grad_(True)
            res.append(t)
    return tuple(res)


def _grad_postprocess(inputs, create_graph):
    if isinstance(inputs[0] if inputs else None, tuple):
        return tuple(_grad_postprocess(i, create_graph) for i in inputs)
    if create_graph:
        return inputs
    return tuple(None if t is None else t.detach() for t in inputs)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if tuple(el_v.shape) != tuple(el_other.shape):
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {tuple(el_other.shape)} but got "
                               f"{tuple(el_v.shape)}.")


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None or not inp.requires_grad:
            if input_type == "hessian":
                raise RuntimeError(f"The hessian of the user-provided function with respect to input {i} is "
                                   "independent of the input. This is not allowed in strict mode.")
            if input_type == "jacobian":
                raise RuntimeError(f"The jacobian of the user-provided function with respect to input {i} is "
                                   "independent of the input. This is not allowed in strict mode.")
            if input_type == "grad_inputs":
                raise RuntimeError(f"The gradient with respect to input {i} is independent of the inputs of the "
                                   "user-provided function. This is not allowed in strict mode.")
            raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                               "must be computed in a differentiable manner from the input when running in strict "
                               "mode.")


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False):
    """autograd.grad over the outputs that require grad; None for unused inputs."""
    from . import grad
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_out, new_go = [], []
    for out, go in zip(outputs, grad_outputs):
        if out is not None and out.requires_grad:
            new_out.append(out)
            new_go.append(go)
    if not new_out:
        return (None,) * len(inputs)
    return grad(new_out, inputs, new_go, allow_unused=True, create_graph=create_graph, retain_graph=True)


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    res = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                if stage == "back":
                    raise RuntimeError(f"The output of the user-provided function is independent of input {i}. "
                                       "This is not allowed in strict mode.")
                if stage == "back_trick":
                    raise RuntimeError(f"The gradient with respect to the input is independent of entry {i} in "
                                       "the grad_outputs when using the double backward trick to compute forward "
                                       "mode gradients. This is not allowed in strict mode.")
                if stage == "double_back":
                    raise RuntimeError(f"The jacobian of the user-provided function is independent of input {i}. "
                                       "This is not allowed in strict mode.")
                raise RuntimeError(f"The hessian of the user-provided function is independent of entry {i} in "
                                   "the grad_jacobian. This is not allowed in strict mode as it prevents from "
                                   "using the double backward trick to replace forward mode AD.")
            g = _wrap(np.zeros_like(ref._data))
        res.append(g)
    return tuple(res)


def _call(func, inputs, fn_name):
    out = func(*inputs)
    is_tuple, out = _as_tuple(out, "outputs of the user-provided function", fn_name)
    return is_tuple, out


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), v^T J): the vector-Jacobian product at `inputs`."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph, True)
        is_outputs_tuple, outputs = _call(func, inputs, "vjp")
        _check_requires_grad(outputs, "outputs", strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph, False)
            _validate_v(v, outputs, is_outputs_tuple)
        else:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                                   "Tensor with a single element.")
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        vjp_res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    vjp_res = _grad_postprocess(vjp_res, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(vjp_res, is_inputs_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), J v): the Jacobian-vector product, by the double-vjp trick."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph, True)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            v = _grad_preprocess(v, create_graph, False)
            _validate_v(v, inputs, is_inputs_tuple)
        else:
            if len(inputs) != 1 or inputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                                   "single Tensor with a single element.")
        is_outputs_tuple, outputs = _call(func, inputs, "jvp")
        _check_requires_grad(outputs, "outputs", strict)
        # u -> J^T u is linear in u; differentiating it with respect to u at any u gives J.
        grad_outputs = tuple(_wrap(np.zeros_like(o._data)).requires_grad_(True) for o in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
        if create_graph:
            with enable_grad():
                grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
                jvp_res = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
        else:
            grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
            jvp_res = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    jvp_res = _grad_postprocess(jvp_res, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(jvp_res, is_outputs_tuple)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of `func` at `inputs`: out.shape + in.shape per (output, input) pair."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph, True)
        is_outputs_tuple, outputs = _call(func, inputs, "jacobian")
        _check_requires_grad(outputs, "outputs", strict)
        jacobian_rows = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]
            flat_n = out.numel()
            for j in range(flat_n):
                seed = np.zeros(out._data.size, dtype=out._data.dtype)
                seed[j] = 1.0
                if out.requires_grad:
                    vj = _autograd_grad((out,), inputs, (_wrap(seed.reshape(out._data.shape)),),
                                        create_graph=create_graph)
                else:
                    vj = (None,) * len(inputs)
                for el_idx, (vj_el, inp_el) in enumerate(zip(vj, inputs)):
                    if vj_el is not None:
                        if strict and create_graph and not vj_el.requires_grad:
                            raise RuntimeError("The jacobian of the user-provided function is independent of "
                                               f"input {i}. This is not allowed in strict mode when "
                                               "create_graph=True.")
                        rows[el_idx].append(vj_el)
                    else:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is independent of input "
                                               f"{el_idx}. This is not allowed in strict mode.")
                        rows[el_idx].append(_wrap(np.zeros_like(inp_el._data)))
            from ..ops.shape import stack, reshape
            jac_i = []
            for el_idx, inp_el in enumerate(inputs):
                shape = tuple(out._data.shape) + tuple(inp_el._data.shape)
                if rows[el_idx]:
                    jac_i.append(reshape(stack(rows[el_idx], 0), shape))
                else:
                    jac_i.append(_wrap(np.zeros(shape, dtype=inp_el._data.dtype)))
            jacobian_rows.append(tuple(jac_i))
        jacobian_rows = _grad_postprocess(tuple(jacobian_rows), create_graph)
    return _tuple_postprocess(jacobian_rows, (is_outputs_tuple, is_inputs_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar `func` at `inputs`: in_i.shape + in_j.shape blocks."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return out.squeeze()

    def jac_func(*inp):
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_output(outputs, fn_name):
    if len(outputs) != 1 or outputs[0].numel() != 1:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor containing a single "
                           "element" if len(outputs) == 1 else
                           f"The function given to {fn_name} should return a single Tensor")


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), v^T H) for a scalar `func`."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vhp")
        inputs = _grad_preprocess(inputs, create_graph, True)
        if v is not None:
            _, v = _as_tuple(v, "v", "vhp")
            v = _grad_preprocess(v, create_graph, False)
            _validate_v(v, inputs, is_inputs_tuple)
        else:
            if len(inputs) != 1 or inputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                                   "single Tensor with a single element.")
        is_outputs_tuple, outputs = _call(func, inputs, "vhp")
        if is_outputs_tuple:
            raise RuntimeError("The function given to vhp should return a single Tensor")
        _scalar_output(outputs, "vhp")
        _check_requires_grad(outputs, "outputs", strict)
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        vhp_res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")
    outputs = _grad_postprocess(outputs, create_graph)
    vhp_res = _grad_postprocess(vhp_res, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(vhp_res, is_inputs_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), H v) for a scalar `func`, by the double-backward trick (as torch)."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hvp")
        inputs = _grad_preprocess(inputs, create_graph, True)
        if v is not None:
            _, v = _as_tuple(v, "v", "hvp")
            v = _grad_preprocess(v, create_graph, False)
            _validate_v(v, inputs, is_inputs_tuple)
        else:
            if len(inputs) != 1 or inputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                                   "single Tensor with a single element.")
        is_outputs_tuple, outputs = _call(func, inputs, "hvp")
        if is_outputs_tuple:
            raise RuntimeError("The function given to hvp should return a single Tensor")
        _scalar_output(outputs, "hvp")
        _check_requires_grad(outputs, "outputs", strict)
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        grad_jac = tuple(_wrap(np.zeros_like(inp._data)).requires_grad_(True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict)
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        hvp_res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    hvp_res = _grad_postprocess(hvp_res, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(hvp_res, is_inputs_tuple)
