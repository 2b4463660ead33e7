"""`Distribution`: the base class, with torch's shapes, argument validation and sampling API.

Shapes: `sample(sample_shape)` returns sample_shape + batch_shape + event_shape; `log_prob`
takes values of that shape (broadcastable) and returns sample_shape + batch_shape.
"""
import numpy as np

from .. import grad_mode as _gm
from ..tensor import Size, Tensor
from . import constraints
from .utils import _size, lazy_property

__all__ = ["Distribution"]


class Distribution:
    """Base class for probability distributions."""

    has_rsample = False
    has_enumerate_support = False
    # Validation is on by default, as torch (`__debug__`); `set_default_validate_args(False)` for speed.
    _validate_args = __debug__
    arg_constraints = {}
    support = None

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError("set_default_validate_args expects True or False")
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # not computed yet: checking would force the conversion
                value = getattr(self, param)
                if not bool(constraint.check(value)._data.all()):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError(f"{type(self).__name__} does not implement expand()")

    # -- moments ----------------------------------------------------------------------------------
    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    # -- sampling ---------------------------------------------------------------------------------
    def sample(self, sample_shape=Size()):
        """A sample (no gradient) of shape sample_shape + batch_shape + event_shape."""
        with _gm.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        raise NotImplementedError(f"{type(self).__name__} does not implement rsample (has_rsample is False)")

    def sample_n(self, n):
        return self.sample(Size((n,)))

    # -- densities --------------------------------------------------------------------------------
    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self):
        return self.entropy().exp()

    def enumerate_support(self, expand=True):
        raise NotImplementedError(f"{type(self).__name__} does not implement enumerate_support")

    # -- helpers ----------------------------------------------------------------------------------
    def _extended_shape(self, sample_shape=Size()):
        return Size(tuple(_size(sample_shape)) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        vshape = tuple(value.shape)
        ev = tuple(self._event_shape)
        if vshape[len(vshape) - len(ev):] != ev:
            raise ValueError(f"The right-most size of value must match event_shape: {value.shape} vs "
                             f"{self._event_shape}.")
        expected = tuple(self._batch_shape) + ev
        for i, j in zip(reversed(vshape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {Size(vshape)} vs "
                                 f"{Size(expected)}.")
        support = self.support
        if support is None:
            return
        if not bool(np.all(support.check(value)._data)):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {vshape}) to be within the "
                             f"support ({support!r}) of the distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self):
        parts = []
        for p in self.arg_constraints:
            if p not in self.__dict__:
                continue
            v = self.__dict__[p]
            if v._data.ndim == 0:
                parts.append(f"{p}: {v._data.item()}")
            elif v._data.size == 1:
                parts.append(f"{p}: {v}")
            else:
                parts.append(f"{p}: {v.shape}")
        return type(self).__name__ + "(" + ", ".join(parts) + ")"
