"""`Dropout` (and channel-wise `Dropout1d`, `Dropout2d`): inverted dropout in training mode,
identity in eval mode; masks come from the global seeded generator (autograd_core.manual_seed)."""
from . import _functional_dropout as _FC
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d"]


class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability p in training and scale the rest by 1/(1-p)."""

    def forward(self, input):  # noqa: A002
        return _FC.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) input with probability p in training."""

    def forward(self, input):  # noqa: A002
        return _FC.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) input with probability p in training."""

    def forward(self, input):  # noqa: A002
        return _FC.dropout2d(input, self.p, self.training, self.inplace)
