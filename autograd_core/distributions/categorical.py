"""`Categorical(probs=None, logits=None)`: a distribution over {0, ..., K-1} per batch element."""
import numpy as np

from .. import grad_mode as _gm
from ..function import Node, reduce_to_shape
from ..ops._base import _new
from ..random import rng as _rng
from ..tensor import Size, Tensor, _wrap
from . import constraints
from .distribution import Distribution
from .utils import _size, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Categorical"]


class CategoricalLogProbBackward0(Node):
    """Picks logits[..., value]: the gradient is scattered back to the picked entries."""

    __slots__ = ("lshape",)

    def backward(self, g):
        idx = self.saved  # (S..., B...) int, broadcast shape of the output
        k = self.lshape[-1]
        full = np.zeros(idx.shape + (k,), dtype=g.dtype)
        np.put_along_axis(full, idx[..., None], np.asarray(g)[..., None], axis=-1)
        return (reduce_to_shape(full, self.lshape),)


class Categorical(Distribution):
    """Categorical over K events; `probs` (..., K) non-negative (normalised here) or unnormalised
    `logits` (..., K). batch_shape = param.shape[:-1]; samples are int64 indices."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if not isinstance(probs, Tensor) or probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if not isinstance(logits, Tensor) or logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            # Normalised so that logits.exp() sums to one (log-probabilities).
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch_shape = self._param.shape[:-1] if self._param.dim() > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        shape = tuple(_size(batch_shape)) + (self._num_events,)
        if "probs" in self.__dict__:
            return Categorical(probs=self.probs.expand(shape), validate_args=False)
        return Categorical(logits=self.logits.expand(shape), validate_args=False)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def mean(self):
        return _wrap(np.full(tuple(self._extended_shape()), np.nan, dtype=self._param._data.dtype))

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return self.mean

    def sample(self, sample_shape=Size()):
        """int64 indices of shape sample_shape + batch_shape, by inverse-CDF draws."""
        sample_shape = _size(sample_shape)
        n = sample_shape.numel()
        p2 = self.probs._data.reshape(-1, self._num_events)
        cdf = np.cumsum(p2, axis=-1)
        u = _rng().random((n, p2.shape[0], 1)) * cdf[:, -1:]
        idx = np.minimum((u >= cdf).sum(-1), self._num_events - 1)
        return _wrap(idx.astype(np.int64).reshape(tuple(self._extended_shape(sample_shape))))

    def log_prob(self, value):
        """log p(value) for integer `value` broadcastable with batch_shape; one node."""
        if self._validate_args:
            self._validate_sample(value)
        lg = self.logits
        v = value._data.astype(np.intp, copy=False)
        shape = np.broadcast_shapes(v.shape, lg._data.shape[:-1])
        idx = np.broadcast_to(v, shape)
        lgb = np.broadcast_to(lg._data, shape + (self._num_events,))
        out = np.take_along_axis(lgb, idx[..., None], axis=-1)[..., 0]
        if lg._rg and _gm._state.enabled:
            n = _new(CategoricalLogProbBackward0)
            n.next_edges = (lg._edge(),)
            n.saved = idx
            n.vc = ()
            n.lshape = lg._data.shape
            return _wrap(out, n)
        return _wrap(out)

    def entropy(self):
        """-sum p log p over the events; shape batch_shape."""
        min_real = float(np.finfo(self.logits._data.dtype).min)
        logits = self.logits.clamp(min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        k = self._num_events
        values = np.arange(k, dtype=np.int64).reshape((k,) + (1,) * len(self._batch_shape))
        if expand:
            values = np.broadcast_to(values, (k,) + tuple(self._batch_shape))
        return _wrap(np.ascontiguousarray(values))
