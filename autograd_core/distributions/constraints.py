"""Parameter and support constraints (torch.distributions.constraints): `check(value)` -> bool Tensor."""
import numpy as np

from ..tensor import Tensor, _wrap

__all__ = ["Constraint", "real", "positive", "greater_than", "simplex", "integer_interval", "independent",
           "nonnegative_integer", "dependent", "is_dependent"]


def _arr(value):
    return value._data if isinstance(value, Tensor) else np.asarray(value)


class Constraint:
    """A region of valid values; `event_dim` rightmost dims are checked jointly."""

    is_discrete = False
    event_dim = 0

    def check(self, value):  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__[1:] + "()"


class _Dependent(Constraint):
    """Placeholder for a constraint that depends on other parameters (never checked)."""

    def check(self, value):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    return isinstance(constraint, _Dependent)


class _Real(Constraint):
    def check(self, value):
        a = _arr(value)
        return _wrap(a == a)  # False exactly at NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return _wrap(np.asarray(self.lower_bound < _arr(value)))

    def __repr__(self):
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        a = _arr(value)
        return _wrap(np.all(a >= 0, axis=-1) & (np.abs(a.sum(-1) - 1) < 1e-6))


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value):
        a = _arr(value)
        return _wrap((a % 1 == 0) & (self.lower_bound <= a) & (a <= self.upper_bound))

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        a = _arr(value)
        return _wrap((a % 1 == 0) & (a >= self.lower_bound))

    def __repr__(self):
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _IndependentConstraint(Constraint):
    """`base_constraint` over the rightmost `reinterpreted_batch_ndims` dims jointly."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        r = self.base_constraint.check(value)._data
        n = self.reinterpreted_batch_ndims
        if n:
            r = r.reshape(r.shape[:r.ndim - n] + (-1,)).all(-1)
        return _wrap(np.asarray(r))

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


dependent = _Dependent()
real = _Real()
positive = _GreaterThan(0.0)
greater_than = _GreaterThan
simplex = _Simplex()
integer_interval = _IntegerInterval
nonnegative_integer = _IntegerGreaterThan(0)
independent = _IndependentConstraint
