"""`default_collate` / `default_convert`: torch's rules for turning samples into a batch.

Tensors are stacked (a new leading dim); NumPy arrays and scalars become tensors first; Python
floats become a float64 tensor, ints an int64 tensor, bools a bool tensor (as torch); strings and
bytes stay a list; mappings collate per key; namedtuples per field (same type); other sequences
are transposed and collated per position, returned as lists (torch returns tuples as lists too).
"""
import collections.abc as _abc

import numpy as np

__all__ = ["default_collate", "default_convert"]

_ERR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _torch():
    import autograd_core
    return autograd_core


def default_convert(data):
    """NumPy arrays / scalars to tensors, recursively through mappings and sequences (no batching)."""
    T = _torch()
    if isinstance(data, T.Tensor):
        return data
    if isinstance(data, np.ndarray):
        if data.dtype.kind in "SUOV":
            return data
        return T.as_tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind in "biuf":
        return T.as_tensor(data)
    if isinstance(data, _abc.Mapping):
        try:
            return type(data)({k: default_convert(v) for k, v in data.items()})
        except TypeError:
            return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, _abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def default_collate(batch):
    """Stack a list of samples into a batch (see the module docstring for the rules)."""
    T = _torch()
    if not isinstance(batch, (list, tuple)) or len(batch) == 0:
        if isinstance(batch, (list, tuple)):
            raise IndexError("default_collate: got an empty batch")
        raise TypeError(_ERR.format(type(batch).__name__))
    elem = batch[0]
    if isinstance(elem, T.Tensor):
        shapes = {tuple(b.shape) for b in batch}
        if len(shapes) != 1:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {sorted(shapes)} in the batch")
        return T.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "SUOV":
            raise TypeError(_ERR.format(elem.dtype))
        return default_collate([T.as_tensor(b) for b in batch])
    if isinstance(elem, np.generic):
        return T.as_tensor(np.array(batch))
    if isinstance(elem, bool):
        return T.tensor(list(batch))
    if isinstance(elem, float):
        return T.tensor(list(batch), dtype=T.float64)
    if isinstance(elem, int):
        return T.tensor(list(batch), dtype=T.int64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, _abc.Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(out)
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, _abc.Sequence):
        n = len(elem)
        if any(len(e) != n for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        cols = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return cols
        try:
            return type(elem)(cols)
        except TypeError:
            return cols
    raise TypeError(_ERR.format(type(elem).__name__))
