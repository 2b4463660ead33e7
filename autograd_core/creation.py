"""Tensor creation: tensor, zeros, ones, full, arange, linspace, eye, *_like, rand, randn, randint,
and in-place random fills."""
import builtins
import math
from collections import deque as _deque

import numpy as np

from . import _dtype as D
from .random import rng
from .tensor import Tensor, _wrap

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange", "linspace",
           "logspace", "eye", "zeros_like", "ones_like", "full_like", "empty_like", "rand", "randn",
           "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal", "bernoulli",
           "multinomial", "scalar_tensor"]


def _infer_np_dtype(data):
    """torch.tensor's dtype inference for Python data: bool → bool, int → int64, float → default."""
    kinds = set()

    def walk(x):
        if isinstance(x, Tensor):
            kinds.add(x._data.dtype.kind if x._data.dtype.kind != "u" else "i")
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif isinstance(x, (bool, np.bool_)):
            kinds.add("b")
        elif isinstance(x, (int, np.integer)):
            kinds.add("i")
        elif isinstance(x, (float, np.floating)):
            kinds.add("f")
        elif isinstance(x, complex):
            raise TypeError("complex tensors are not supported by autograd_core")
        else:
            raise TypeError(f"Could not infer dtype of {type(x).__name__}")

    walk(data)
    if "f" in kinds:
        return D.get_default_dtype().np
    if "i" in kinds:
        return np.dtype(np.int64)
    if "b" in kinds:
        return np.dtype(np.bool_)
    return D.get_default_dtype().np  # empty list → float


def _to_array(data, dtype):
    if isinstance(data, (_deque, range)):  # torch.tensor takes any sequence
        data = list(data)
    if isinstance(data, Tensor):
        arr = data._data
        return arr.astype(D.to_numpy_dtype(dtype)) if dtype is not None else arr.copy()
    if isinstance(data, np.ndarray):
        if dtype is not None:
            return data.astype(D.to_numpy_dtype(dtype))
        if data.dtype == np.float16 or data.dtype.kind in "fbiu":
            return np.array(data, copy=True)
        raise TypeError(f"can't convert np.ndarray of type {data.dtype}")
    if isinstance(data, np.generic):
        return np.array(data, dtype=D.to_numpy_dtype(dtype) if dtype is not None else data.dtype)
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat(data)):
        data = _untensor(data)
    npd = D.to_numpy_dtype(dtype) if dtype is not None else _infer_np_dtype(data)
    try:
        return np.array(data, dtype=npd)
    except ValueError as e:
        raise ValueError(f"expected a rectangular nested sequence of numbers: {e}") from None


def _flat(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flat(y)
    else:
        yield x


def _untensor(x):
    if isinstance(x, (list, tuple)):
        return [_untensor(y) for y in x]
    if isinstance(x, Tensor):
        if x._data.size != 1 and x._data.ndim:
            return x._data.tolist()
        return x.item()
    return x


def _finish(arr, requires_grad):
    t = _wrap(arr)
    if requires_grad:
        t.requires_grad = True
    return t


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new leaf tensor copying `data` (nested lists, numbers, NumPy arrays, tensors)."""
    _check_device(device)
    return _finish(_to_array(data, dtype), requires_grad)


def scalar_tensor(s, dtype=None, device=None, requires_grad=False):
    return tensor(float(s) if dtype is None else s, dtype=dtype, requires_grad=requires_grad)


def as_tensor(data, dtype=None, device=None):
    _check_device(device)
    if isinstance(data, Tensor) and (dtype is None or D.to_numpy_dtype(dtype) == data._data.dtype):
        return data
    if isinstance(data, np.ndarray) and (dtype is None or D.to_numpy_dtype(dtype) == data.dtype):
        return _wrap(data)
    return tensor(data, dtype=dtype)


def from_numpy(arr):
    """A tensor sharing memory with `arr`."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    D.from_numpy_dtype(arr.dtype)
    return _wrap(arr)


def _check_device(device):
    if device is not None:
        from .tensor import _require_cpu as _device
        _device(device)


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = tuple(int(s) for s in size)
    if any(s < 0 for s in out):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(out)}")
    return out


def _dt(dtype, default=None):
    if dtype is None:
        return (default or D.get_default_dtype()).np
    return D.to_numpy_dtype(dtype)


def zeros(*size, dtype=None, device=None, requires_grad=False, out=None):
    _check_device(device)
    return _finish(np.zeros(_size(size), _dt(dtype)), requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, out=None):
    _check_device(device)
    return _finish(np.ones(_size(size), _dt(dtype)), requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False, memory_format=None):
    # Zero-filled: uninitialised memory would make runs irreproducible.
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    if dtype is None:
        dtype = D.bool if isinstance(fill_value, bool) else (D.int64 if isinstance(fill_value, int) else None)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _finish(np.full(_size((size,) if isinstance(size, int) else (tuple(size),)), fill_value, _dt(dtype)),
                   requires_grad)


def _like(t, dtype):
    return t._data.dtype if dtype is None else D.to_numpy_dtype(dtype)


def zeros_like(t, dtype=None, device=None, requires_grad=False, memory_format=None):
    return _finish(np.zeros(t._data.shape, _like(t, dtype)), requires_grad)


def ones_like(t, dtype=None, device=None, requires_grad=False, memory_format=None):
    return _finish(np.ones(t._data.shape, _like(t, dtype)), requires_grad)


def empty_like(t, dtype=None, device=None, requires_grad=False, memory_format=None):
    return zeros_like(t, dtype=dtype, requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, device=None, requires_grad=False, memory_format=None):
    return _finish(np.full(t._data.shape, fill_value, _like(t, dtype)), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if dtype is None:
        dtype = D.int64 if builtins.all(isinstance(v, (int, np.integer)) for v in vals) else None
    npd = _dt(dtype)
    n = builtins.max(int(math.ceil((vals[1] - vals[0]) / vals[2])), 0)
    arr = (vals[0] + np.arange(n, dtype=np.float64 if npd.kind == "f" else np.int64) * vals[2]).astype(npd)
    return _finish(arr, requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    return _finish(np.linspace(start, end, int(steps), dtype=np.float64).astype(_dt(dtype)), requires_grad)


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False):
    return _finish(np.logspace(start, end, int(steps), base=base).astype(_dt(dtype)), requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    return _finish(np.eye(int(n), None if m is None else int(m), dtype=_dt(dtype)), requires_grad)


# -- random ---------------------------------------------------------------------------------------
def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    npd = _dt(dtype)
    return _finish(rng(generator).random(_size(size), dtype=np.float64).astype(npd), requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    npd = _dt(dtype)
    return _finish(rng(generator).standard_normal(_size(size)).astype(npd), requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint() missing required argument 'size'")
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if isinstance(size, int):
        size = (size,)
    return _finish(rng(generator).integers(low, high, size=tuple(size)).astype(_dt(dtype, D.int64)), requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None):
    return _wrap(rng(generator).permutation(int(n)).astype(_dt(dtype, D.int64)))


def rand_like(t, dtype=None, **kw):
    return rand(*t._data.shape, dtype=dtype or t.dtype)


def randn_like(t, dtype=None, **kw):
    return randn(*t._data.shape, dtype=dtype or t.dtype)


def randint_like(t, low, high=None, dtype=None, **kw):
    return randint(low, high, tuple(t._data.shape), dtype=dtype or t.dtype)


def normal(mean, std=1.0, size=None, *, generator=None):
    r = rng(generator)
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        m = mean._data if isinstance(mean, Tensor) else mean
        s = std._data if isinstance(std, Tensor) else std
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
        dt = (mean if isinstance(mean, Tensor) else std)._data.dtype
        return _wrap((m + s * r.standard_normal(shape)).astype(dt))
    return _wrap((mean + std * r.standard_normal(_size((size,) if isinstance(size, int) else (tuple(size),))))
                 .astype(D.get_default_dtype().np))


def bernoulli(t, p=None, *, generator=None):
    probs = t._data if p is None else np.full(t._data.shape, p)
    return _wrap((rng(generator).random(t._data.shape) < probs).astype(t._data.dtype))


def multinomial(t, num_samples, replacement=False, *, generator=None):
    probs = np.asarray(t._data, dtype=np.float64)
    r = rng(generator)

    def draw(p):
        p = p / p.sum()
        return r.choice(p.size, size=num_samples, replace=replacement, p=p)

    if probs.ndim == 1:
        return _wrap(draw(probs).astype(np.int64))
    return _wrap(np.stack([draw(row) for row in probs]).astype(np.int64))


# In-place random fills (methods on Tensor); they bump the version like any in-place op.
def _fill_random(t, values):
    from .ops.inplace import check_inplace
    from . import grad_mode
    if grad_mode._state.enabled:
        check_inplace(t)
    t._data[...] = values
    t._vc[0] += 1
    return t


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    return _fill_random(self, mean + std * rng(generator).standard_normal(self._data.shape))


def uniform_(self, a=0.0, b=1.0, *, generator=None):
    return _fill_random(self, rng(generator).uniform(a, b, self._data.shape))


def bernoulli_(self, p=0.5, *, generator=None):
    return _fill_random(self, rng(generator).random(self._data.shape) < p)


def exponential_(self, lambd=1.0, *, generator=None):
    return _fill_random(self, rng(generator).exponential(1.0 / lambd, self._data.shape))


def random_(self, low=0, high=None, *, generator=None):
    if high is None:
        low, high = 0, low if low else 2 ** 24
    return _fill_random(self, rng(generator).integers(low, high, self._data.shape))
