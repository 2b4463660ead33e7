"""`Normal(loc, scale)`: the univariate Gaussian, element-wise over its batch shape."""
import math

import numpy as np

from .. import grad_mode as _gm
from ..function import Node, reduce_to_shape, saved_version
from ..ops._base import _new
from ..random import rng as _rng
from ..tensor import Size, Tensor, _wrap
from . import constraints
from .distribution import Distribution
from .utils import _size, broadcast_all, erf, erfinv

__all__ = ["Normal"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class NormalLogProbBackward0(Node):
    """log N(v; mu, sigma) = -z^2/2 - log sigma - log sqrt(2 pi), z = (v - mu) / sigma.

    d/dv = -z / sigma, d/dmu = z / sigma, d/dsigma = (z^2 - 1) / sigma. saved = (v, mu, sigma).
    """

    __slots__ = ()

    def backward(self, g):
        v, mu, sigma = self.saved
        z = (v - mu) / sigma
        gz = g * z / sigma
        ev, emu, es = self.next_edges
        return (reduce_to_shape(-gz, v.shape) if ev is not None else None,
                reduce_to_shape(gz, mu.shape) if emu is not None else None,
                reduce_to_shape(g * (z * z - 1.0) / sigma, sigma.shape) if es is not None else None)


class Normal(Distribution):
    """N(loc, scale^2); loc and scale broadcast to the batch shape; event shape ()."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = Normal.__new__(Normal)
        shape = _size(batch_shape)
        new.loc = self.loc.expand(shape)
        new.scale = self.scale.expand(shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def sample(self, sample_shape=Size()):
        """Shape sample_shape + batch_shape; no gradient."""
        shape = self._extended_shape(sample_shape)
        loc, scale = self.loc._data, self.scale._data
        eps = _rng().standard_normal(shape).astype(loc.dtype, copy=False)
        return _wrap(np.asarray(loc + eps * scale, dtype=loc.dtype))

    def rsample(self, sample_shape=Size()):
        """loc + eps * scale with eps ~ N(0, 1): differentiable in loc and scale."""
        shape = self._extended_shape(sample_shape)
        eps = _wrap(_rng().standard_normal(shape).astype(self.loc._data.dtype, copy=False))
        return self.loc + eps * self.scale

    def log_prob(self, value):
        """log density at `value` (broadcastable with batch_shape); one fused node."""
        if self._validate_args:
            self._validate_sample(value)
        v = value._data if isinstance(value, Tensor) else np.asarray(value, dtype=self.loc._data.dtype)
        mu, sigma = self.loc._data, self.scale._data
        z = (v - mu) / sigma
        out = np.asarray(-0.5 * z * z - np.log(sigma) - _HALF_LOG_2PI, dtype=mu.dtype)
        vt = value if isinstance(value, Tensor) else _wrap(v)
        if _gm._state.enabled and (vt._rg or self.loc._rg or self.scale._rg):
            n = _new(NormalLogProbBackward0)
            n.next_edges = (vt._edge(), self.loc._edge(), self.scale._edge())
            n.saved = (v, mu, sigma)
            n.vc = (saved_version(vt), saved_version(self.loc), saved_version(self.scale))
            return _wrap(out, n)
        return _wrap(out)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        """0.5 + 0.5 log(2 pi) + log(scale), shape batch_shape."""
        return self.scale.log() + (0.5 + _HALF_LOG_2PI)
