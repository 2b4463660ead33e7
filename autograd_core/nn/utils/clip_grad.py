"""Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_), in place on `.grad`."""
import math

import numpy as np

from ...tensor import Tensor, _wrap

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p._grad for p in parameters if p._grad is not None]


def _tensors(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The `norm_type`-norm of all `tensors` together (as if concatenated); a 0-d tensor."""
    ts = [t for t in _tensors(tensors) if t is not None]
    norm_type = float(norm_type)
    if not ts:
        return _wrap(np.asarray(0.0, dtype=np.float32))
    dtype = np.result_type(*[t._data.dtype for t in ts])
    if math.isinf(norm_type):
        # max |g| (inf) or min |g| (-inf) over all elements.
        vals = [np.abs(t._data).max() if norm_type > 0 else np.abs(t._data).min() for t in ts if t._data.size]
        total = (max(vals) if norm_type > 0 else min(vals)) if vals else 0.0
    else:
        # One norm per tensor, then the norm of norms: the same value torch computes.
        per = np.array([np.linalg.norm(t._data.ravel(), ord=norm_type) if t._data.size else 0.0 for t in ts],
                       dtype=dtype)
        total = np.linalg.norm(per, ord=norm_type)
    total = np.asarray(total, dtype=dtype)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    return _wrap(total)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale every `.grad` by min(1, max_norm / (total_norm + 1e-6))."""
    grads = _grads(parameters)
    if not grads:
        return
    tn = float(total_norm._data) if isinstance(total_norm, Tensor) else float(total_norm)
    coef = min(float(max_norm) / (tn + 1e-6), 1.0)
    for g in grads:
        g._data *= g._data.dtype.type(coef)
        g._vc[0] += 1


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Rescale gradients so that their joint `norm_type`-norm is at most `max_norm`.

    parameters: a Tensor or iterable of Tensors (those with `.grad` None are skipped).
    Returns the total norm before clipping (0-d tensor), as torch.
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        parameters = list(parameters)  # may be a generator: it is read twice
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    if grads:
        clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element to [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        np.clip(g._data, -clip_value, clip_value, out=g._data)
        g._vc[0] += 1
