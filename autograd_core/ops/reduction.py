"""Reductions (sum, mean, max/min, amax/amin, norm, var/std, prod, logsumexp, cumsum) and softmax."""
from ._base import D, Node, Tensor, _gs, _wrap, as_float, node1, normalize_dims, np, one_dim, saved_version


def _expand_back(g, axes, keepdim, shape):
    """Broadcast a reduced gradient back to the input `shape`."""
    if not keepdim and axes:
        g = np.expand_dims(g, axes)
    return np.broadcast_to(g, shape)


def _reduced(cls, t, x, out, axes, keepdim):
    """The node of a reduction of `t` (data `x`) to `out` over `axes` that saves both."""
    n = node1(cls, t, (x, out), (saved_version(t),))
    n.axes = axes
    n.keepdim = keepdim
    return n


def _axes(dim, ndim):
    if dim.__class__ is int and -ndim <= dim < ndim:
        return (dim % ndim,)
    return normalize_dims(dim, ndim)


class SumBackward0(Node):
    __slots__ = ("shape",)

    def backward(self, g):
        return (np.broadcast_to(g, self.shape),)


class SumBackward1(Node):
    __slots__ = ("shape", "axes", "keepdim")

    def backward(self, g):
        return (_expand_back(g, self.axes, self.keepdim, self.shape),)


def sum(self, dim=None, keepdim=False, *, dtype=None):  # noqa: A001
    x = self._data
    if dtype is not None:
        x = x.astype(D.to_numpy_dtype(dtype))
    elif x.dtype.kind in "bui":
        x = x.astype(np.int64)
    if dim is None:
        out = x.sum()
        if self._rg and _gs.enabled:
            n = node1(SumBackward0, self)
            n.shape = x.shape
            return _wrap(out, n)
        return _wrap(out)
    axes = _axes(dim, x.ndim)
    out = x.sum(axis=axes, keepdims=keepdim)
    if self._rg and _gs.enabled:
        n = node1(SumBackward1, self)
        n.shape, n.axes, n.keepdim = x.shape, axes, keepdim
        return _wrap(out, n)
    return _wrap(out)


class MeanBackward0(Node):
    __slots__ = ("shape",)

    def backward(self, g):
        n = 1
        for s in self.shape:
            n *= s
        return (np.broadcast_to(g / n if n else g * np.nan, self.shape),)


class MeanBackward1(Node):
    __slots__ = ("shape", "axes", "keepdim")

    def backward(self, g):
        n = 1
        for a in self.axes:
            n *= self.shape[a]
        return (_expand_back(g / n if n else g * np.nan, self.axes, self.keepdim, self.shape),)


def mean(self, dim=None, keepdim=False, *, dtype=None):
    x = self._data
    if dtype is not None:
        x = x.astype(D.to_numpy_dtype(dtype))
    if x.dtype.kind != "f":
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point "
                           f"or complex dtype. Got: {D._BY_NP[x.dtype].name.capitalize()}")
    # sum * (1/n): NumPy's mean() is a Python-level wrapper several times slower on small arrays.
    if dim is None:
        n_el = x.size
        out = (x.sum() * x.dtype.type(1.0 / n_el)) if n_el else x.dtype.type(np.nan)
        if self._rg and _gs.enabled:
            n = node1(MeanBackward0, self)
            n.shape = x.shape
            return _wrap(out, n)
        return _wrap(out)
    axes = _axes(dim, x.ndim)
    n_el = 1
    for a in axes:
        n_el *= x.shape[a]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = x.sum(axis=axes, keepdims=keepdim) * x.dtype.type(1.0 / n_el if n_el else np.nan)
    if self._rg and _gs.enabled:
        n = node1(MeanBackward1, self)
        n.shape, n.axes, n.keepdim = x.shape, axes, keepdim
        return _wrap(out, n)
    return _wrap(out)


# ---------------------------------------------------------------------------------------------
class _EvenlyDistributed(Node):
    """max()/min()/amax/amin: the gradient is shared evenly among tied extrema (torch)."""

    __slots__ = ("axes", "keepdim")

    def backward(self, g):
        x, out = self.saved
        axes = self.axes
        o = out if (self.keepdim or not axes) else np.expand_dims(out, axes)
        gg = g if (self.keepdim or not axes) else np.expand_dims(g, axes)
        if self._full:
            # max()/min(): torch's evenly_distribute_backward (NaN-aware mask, masked fill)
            mask = _extremum_mask(x, o)
            return (np.where(mask, gg / mask.sum(), np.zeros((), g.dtype)),)
        # amax/amin: torch's scale_grad_by_count, (g / count) * (x == result)
        mask = (x == o)
        count = mask.sum(axis=axes, keepdims=True) if axes else mask.sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            return ((gg / count) * mask,)


def _extremum_mask(x, o):
    """Elements equal to their reduction's extremum `o`; a NaN extremum picks the NaNs (torch)."""
    mask = (x == o)
    if x.dtype.kind == "f" and np.isnan(o).any():
        mask |= np.isnan(x) & np.isnan(o)
    return mask


class MaxBackward1(_EvenlyDistributed):
    __slots__ = ()
    _full = True


class MinBackward1(_EvenlyDistributed):
    __slots__ = ()
    _full = True


class AmaxBackward0(_EvenlyDistributed):
    __slots__ = ()
    _full = False


class AminBackward0(_EvenlyDistributed):
    __slots__ = ()
    _full = False


class _IndexedExtremum(Node):
    """max(dim)/min(dim): the gradient goes to the returned index."""

    __slots__ = ("axis", "keepdim", "shape")

    def backward(self, g):
        idx = self.saved
        gi = np.zeros(self.shape, dtype=g.dtype)
        if not self.keepdim:
            g = np.expand_dims(g, self.axis)
            idx = np.expand_dims(idx, self.axis)
        np.put_along_axis(gi, idx, g, axis=self.axis)
        return (gi,)


class MaxBackward0(_IndexedExtremum):
    __slots__ = ()


class MinBackward0(_IndexedExtremum):
    __slots__ = ()


class _MinMaxResult(tuple):
    """torch.return_types.max: a (values, indices) tuple with named fields."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def _extremum(self, dim, keepdim, is_max, other=None):
    from .pointwise import maximum, minimum
    if isinstance(dim, Tensor):
        return maximum(self, dim) if is_max else minimum(self, dim)
    x = self._data
    if dim is None:
        if x.size == 0:
            raise RuntimeError(f"{'max' if is_max else 'min'}(): Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument.")
        out = np.asarray(x.max() if is_max else x.min())
        if self._rg and _gs.enabled:
            return _wrap(out, _reduced(MaxBackward1 if is_max else MinBackward1, self, x, out, (), False))
        return _wrap(out)
    axis = one_dim(dim, x.ndim)
    if x.ndim:
        _nonempty(x, (axis,), "max" if is_max else "min", dim)
    if x.ndim == 0:
        idx = np.zeros((), np.int64)
        vals = x.copy()
    else:
        idx = (np.argmax(x, axis=axis, keepdims=True) if is_max else np.argmin(x, axis=axis, keepdims=True))
        vals = np.take_along_axis(x, idx, axis=axis)
        if not keepdim:
            idx = np.squeeze(idx, axis)
            vals = np.squeeze(vals, axis)
    idx = idx.astype(np.int64)
    if self._rg and _gs.enabled and x.ndim:
        n = node1(MaxBackward0 if is_max else MinBackward0, self, idx)
        n.axis, n.keepdim, n.shape = axis, keepdim, x.shape
        v = _wrap(np.asarray(vals), n)
    else:
        v = _wrap(np.asarray(vals))
        if self._rg and _gs.enabled:
            from .shape import clone
            v = clone(self)
    return _MinMaxResult((v, _wrap(idx)))


def max(self, dim=None, keepdim=False):  # noqa: A001
    return _extremum(self, dim, keepdim, True)


def min(self, dim=None, keepdim=False):  # noqa: A001
    return _extremum(self, dim, keepdim, False)


def _nonempty(x, axes, name, dim):
    for a in axes:
        if x.shape[a] == 0:
            d = dim if isinstance(dim, (int, np.integer)) else a
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def amax(self, dim=(), keepdim=False):
    x = self._data
    axes = normalize_dims(dim if dim != () else None, x.ndim)
    _nonempty(x, axes, "amax", dim)
    out = np.asarray(x.max(axis=axes, keepdims=keepdim))
    if self._rg and _gs.enabled:
        return _wrap(out, _reduced(AmaxBackward0, self, x, out, axes, keepdim))
    return _wrap(out)


def amin(self, dim=(), keepdim=False):
    x = self._data
    axes = normalize_dims(dim if dim != () else None, x.ndim)
    _nonempty(x, axes, "amin", dim)
    out = np.asarray(x.min(axis=axes, keepdims=keepdim))
    if self._rg and _gs.enabled:
        return _wrap(out, _reduced(AminBackward0, self, x, out, axes, keepdim))
    return _wrap(out)


def argmax(self, dim=None, keepdim=False):
    x = self._data
    if dim is None:
        return _wrap(np.asarray(np.argmax(x), dtype=np.int64))
    return _wrap(np.asarray(np.argmax(x, axis=dim, keepdims=keepdim), dtype=np.int64))


def argmin(self, dim=None, keepdim=False):
    x = self._data
    if dim is None:
        return _wrap(np.asarray(np.argmin(x), dtype=np.int64))
    return _wrap(np.asarray(np.argmin(x, axis=dim, keepdims=keepdim), dtype=np.int64))


def all(self, dim=None, keepdim=False):  # noqa: A001
    axes = None if dim is None else normalize_dims(dim, self._data.ndim)
    return _wrap(np.asarray(np.all(self._data, axis=axes, keepdims=keepdim)))


def any(self, dim=None, keepdim=False):  # noqa: A001
    axes = None if dim is None else normalize_dims(dim, self._data.ndim)
    return _wrap(np.asarray(np.any(self._data, axis=axes, keepdims=keepdim)))


# ---------------------------------------------------------------------------------------------
class LinalgVectorNormBackward0(Node):
    __slots__ = ("axes", "keepdim", "p")

    def backward(self, g):
        x, out = self.saved
        axes, p = self.axes, self.p
        if not self.keepdim and axes:
            g = np.expand_dims(g, axes)
            out = np.expand_dims(out, axes)
        if p == 2:
            if out.ndim == 0 or out.all():
                return (x * (g / out),)
            with np.errstate(invalid="ignore", divide="ignore"):
                scale = np.where(out == 0, 0.0, g / out)
            return ((x * scale).astype(x.dtype, copy=False),)
        if p == 1:
            return ((np.sign(x) * g).astype(x.dtype, copy=False),)
        if p == np.inf or p == -np.inf:
            mask = (np.abs(x) == out)
            count = mask.sum(axis=axes, keepdims=True)
            return ((np.sign(x) * mask * g / count).astype(x.dtype, copy=False),)
        if p == 0:
            return (np.zeros_like(x),)
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.where(out == 0, 0.0, g / out ** (p - 1))
        return ((x * np.abs(x) ** (p - 2) * scale).astype(x.dtype, copy=False),)


def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norm over `dim` (all elements by default); p in {2, 'fro', 1, inf, -inf, 0, other > 0}."""
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise ValueError(f"norm: unsupported p={p!r}; use a number, inf or 'fro'")
    x = as_float(self._data)
    if dtype is not None:
        x = x.astype(D.to_numpy_dtype(dtype))
    axes = normalize_dims(dim, x.ndim) if dim is not None else tuple(range(x.ndim))
    ax = axes if axes else None
    if p == 2:
        out = np.sqrt(np.sum(x * x, axis=ax, keepdims=keepdim))
        if self._rg and _gs.enabled:
            out = np.asarray(out)
            n = _reduced(LinalgVectorNormBackward0, self, x, out, axes, keepdim)
            n.p = 2
            return _wrap(out, n)
        return _wrap(out)
    a = np.abs(x)
    if p == 1:
        out = np.sum(a, axis=ax, keepdims=keepdim)
    elif p == np.inf:
        out = np.max(a, axis=ax, keepdims=keepdim)
    elif p == -np.inf:
        out = np.min(a, axis=ax, keepdims=keepdim)
    elif p == 0:
        out = np.sum(a != 0, axis=ax, keepdims=keepdim).astype(x.dtype)
    else:
        out = np.sum(a ** p, axis=ax, keepdims=keepdim) ** (1.0 / p)
    out = np.asarray(out, dtype=x.dtype)
    if self._rg and _gs.enabled:
        n = _reduced(LinalgVectorNormBackward0, self, x, out, axes, keepdim)
        n.p = p
        return _wrap(out, n)
    return _wrap(out)


class _VarStdBackward(Node):
    __slots__ = ("axes", "keepdim", "denom", "is_std")

    def backward(self, g):
        x, out = self.saved
        axes = self.axes
        if not self.keepdim:
            g = np.expand_dims(g, axes)
            out = np.expand_dims(out, axes)
        mu = x.mean(axis=axes, keepdims=True)
        gv = g
        if self.is_std:
            with np.errstate(invalid="ignore", divide="ignore"):
                gv = np.where(out == 0, 0.0, g / (2 * out)) if np.any(out == 0) else g / (2 * out)
        return ((2.0 / self.denom) * (x - mu) * gv if self.denom > 0 else (x - mu) * np.nan,)


class VarBackward0(_VarStdBackward):
    __slots__ = ()


class StdBackward0(_VarStdBackward):
    __slots__ = ()


def _var(self, dim, unbiased, keepdim, correction, is_std):
    x = as_float(self._data)
    if correction is None:
        correction = 1 if unbiased in (None, True) else 0
    axes = normalize_dims(dim, x.ndim)
    n = 1
    for a in axes:
        n *= x.shape[a] if x.ndim else 1
    denom = n - correction
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = x.mean(axis=axes, keepdims=True) if axes else x.mean()
        ss = np.sum((x - mu) ** 2, axis=axes if axes else None, keepdims=keepdim)
        out = ss / denom if denom > 0 else ss * np.nan
        if is_std:
            out = np.sqrt(out)
    out = np.asarray(out, dtype=x.dtype)
    if self._rg and _gs.enabled:
        cls = StdBackward0 if is_std else VarBackward0
        n = _reduced(cls, self, x, out, axes, keepdim)
        n.denom, n.is_std = denom, is_std
        return _wrap(out, n)
    return _wrap(out)


def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(unbiased, bool) or unbiased is None:
        return _var(self, dim, unbiased, keepdim, correction, False)
    # var(x, dim, keepdim) positional form where `unbiased` slot holds keepdim is not torch's API.
    raise TypeError("var(): 'unbiased' must be a bool")


def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _var(self, dim, unbiased, keepdim, correction, True)


class ProdBackward0(Node):
    __slots__ = ("axes", "keepdim")

    def backward(self, g):
        x, out = self.saved
        axes = self.axes
        if not self.keepdim and axes:
            g = np.expand_dims(g, axes)
            out = np.expand_dims(out, axes)
        if not np.any(x == 0):
            return (g * out / x,)
        # Zeros: product of the other elements, computed without dividing by zero.
        moved = np.moveaxis(x, axes, tuple(range(-len(axes), 0))) if axes else x.reshape(-1)
        flat = moved.reshape(moved.shape[:moved.ndim - len(axes)] + (-1,)) if axes else moved
        left = np.cumprod(np.concatenate([np.ones_like(flat[..., :1]), flat[..., :-1]], -1), -1)
        right = np.flip(np.cumprod(np.concatenate([np.ones_like(flat[..., :1]), np.flip(flat, -1)[..., :-1]], -1), -1), -1)
        others = (left * right).reshape(moved.shape)
        others = np.moveaxis(others, tuple(range(-len(axes), 0)), axes) if axes else others.reshape(x.shape)
        return (g * others,)


def prod(self, dim=None, keepdim=False, *, dtype=None):
    x = self._data
    if dtype is not None:
        x = x.astype(D.to_numpy_dtype(dtype))
    elif x.dtype.kind in "bui":
        x = x.astype(np.int64)
    axes = normalize_dims(dim, x.ndim) if dim is not None else ()
    out = np.asarray(np.prod(x, axis=axes if dim is not None else None, keepdims=keepdim if dim is not None else False))
    if self._rg and _gs.enabled:
        return _wrap(out, _reduced(ProdBackward0, self, x, out, axes if dim is not None else tuple(range(x.ndim)),
                                   keepdim if dim is not None else False))
    return _wrap(out)


class CumsumBackward0(Node):
    __slots__ = ("axis",)

    def backward(self, g):
        if g.ndim == 0:
            return (g,)
        return (np.flip(np.cumsum(np.flip(g, self.axis), axis=self.axis), self.axis),)


def cumsum(self, dim, *, dtype=None):
    x = self._data
    if dtype is not None:
        x = x.astype(D.to_numpy_dtype(dtype))
    elif x.dtype.kind in "bui":
        x = x.astype(np.int64)
    axis = one_dim(dim, x.ndim)
    out = np.cumsum(x, axis=axis) if x.ndim else x.copy()
    if self._rg and _gs.enabled:
        n = node1(CumsumBackward0, self)
        n.axis = axis
        return _wrap(np.asarray(out), n)
    return _wrap(np.asarray(out))


class LogsumexpBackward0(Node):
    __slots__ = ("axes", "keepdim")

    def backward(self, g):
        x, out = self.saved
        if not self.keepdim:
            g = np.expand_dims(g, self.axes)
            out = np.expand_dims(out, self.axes)
        return (g * np.exp(x - out),)


def logsumexp(self, dim, keepdim=False):
    x = as_float(self._data)
    axes = normalize_dims(dim, x.ndim)
    # initial=-inf: an empty reduction gives log(0) = -inf, as torch
    m = np.max(x, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    if not keepdim:
        out = np.squeeze(out, axes)
    out = np.asarray(out, dtype=x.dtype)
    if self._rg and _gs.enabled:
        return _wrap(out, _reduced(LogsumexpBackward0, self, x, out, axes, keepdim))
    return _wrap(out)


def _saves_output(n, out, axis):
    """`out` wrapped with the node `n` that saved it (softmax, log_softmax) along `axis`."""
    n.axis = axis
    res = _wrap(out, n)
    n.vc = ((res._vc, 0, out, type(n), 0),)
    return res


class SoftmaxBackward0(Node):
    __slots__ = ("axis",)

    def backward(self, g):
        out = self.saved
        return (out * (g - np.sum(g * out, axis=self.axis, keepdims=True)),)


class LogSoftmaxBackward0(Node):
    __slots__ = ("axis",)

    def backward(self, g):
        out = self.saved
        return (g - np.exp(out) * np.sum(g, axis=self.axis, keepdims=True),)


def _softmax_dim(dim, ndim):
    if dim is None:
        # torch's legacy implicit-dim rule.
        dim = 0 if ndim in (0, 1, 3) else 1
    axis = one_dim(dim, ndim)
    return axis


def softmax(self, dim=None, dtype=None):
    x = as_float(self._data) if dtype is None else self._data.astype(D.to_numpy_dtype(dtype))
    axis = _softmax_dim(dim, x.ndim)
    if x.ndim == 0:
        out = np.ones_like(x)
    elif x.size == 0:
        out = x.copy()
    else:
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        out = e / np.sum(e, axis=axis, keepdims=True)
    if self._rg and _gs.enabled:
        return _saves_output(node1(SoftmaxBackward0, self, out), out, axis if x.ndim else None)
    return _wrap(out)


def log_softmax(self, dim=None, dtype=None):
    x = as_float(self._data) if dtype is None else self._data.astype(D.to_numpy_dtype(dtype))
    axis = _softmax_dim(dim, x.ndim)
    if x.ndim == 0:
        out = np.zeros_like(x)
    elif x.size == 0:
        out = x.copy()
    else:
        m = np.max(x, axis=axis, keepdims=True)
        sh = x - m
        out = sh - np.log(np.sum(np.exp(sh), axis=axis, keepdims=True))
    if self._rg and _gs.enabled:
        return _saves_output(node1(LogSoftmaxBackward0, self, out), out, axis if x.ndim else None)
    return _wrap(out)
