"""Flatten parameters into one vector and back (torch.nn.utils.parameters_to_vector)."""
import numpy as np

from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """Concatenate the flattened parameters into one 1-D tensor (differentiable, a copy)."""
    from ... import ops  # noqa: F401  (tensor methods)
    from ...ops.shape import cat
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Make each parameter a view of its slice of the 1-D `vec` (torch's `param.data = ...`)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    if vec._data.ndim != 1:
        raise ValueError(f"vector_to_parameters: vec must be 1-D, got shape {list(vec.shape)}")
    ptr = 0
    for p in parameters:
        n = p._data.size
        if ptr + n > vec._data.size:
            raise ValueError(f"vector_to_parameters: vec has {vec._data.size} elements, fewer than the parameters need")
        p._data = vec._data[ptr:ptr + n].reshape(p._data.shape).astype(p._data.dtype, copy=False)
        ptr += n
    if ptr != vec._data.size:
        raise ValueError(f"vector_to_parameters: vec has {vec._data.size} elements but the parameters hold {ptr}")
    return None
