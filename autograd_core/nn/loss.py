"""Loss modules (`nn.MSELoss`, `nn.CrossEntropyLoss`, ...): torch's constructors over the fused
kernels in `_functional_loss.py`. `reduction` is "none" | "mean" | "sum"; class weights are
buffers, so they follow `.to(dtype)` and appear in `state_dict()` as in torch.
"""
from ..tensor import Tensor
from ._functional_loss import (_check_reduction, _legacy_reduction, binary_cross_entropy,
                               binary_cross_entropy_with_logits, cross_entropy, huber_loss, l1_loss, mse_loss,
                               nll_loss, smooth_l1_loss)
from .module import Module

__all__ = ["MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss",
           "NLLLoss"]


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        reduction = _legacy_reduction(size_average, reduce, reduction)
        _check_reduction(reduction)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if weight is not None and not isinstance(weight, Tensor):
            raise TypeError(f"weight must be a Tensor or None, got {type(weight).__name__}")
        # A buffer, as in torch: it follows .to(dtype) and appears in state_dict().
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error; input and target of the same shape; output scalar or input's shape."""

    def forward(self, input, target):  # noqa: A002
        return mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error."""

    def forward(self, input, target):  # noqa: A002
        return l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below `beta`, linear above (torch.nn.SmoothL1Loss)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        if beta < 0:
            raise ValueError(f"SmoothL1Loss: beta must be non-negative, got {beta}")
        self.beta = beta

    def forward(self, input, target):  # noqa: A002
        return smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic below `delta`, linear (slope delta) above."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        if delta <= 0:
            raise ValueError(f"HuberLoss: delta must be positive, got {delta}")
        self.delta = delta

    def forward(self, input, target):  # noqa: A002
        return huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy on probabilities in [0, 1]."""

    def forward(self, input, target):  # noqa: A002
        return binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid + binary cross-entropy, numerically stable; `pos_weight` (C,) weights positives."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):  # noqa: A002
        return binary_cross_entropy_with_logits(input, target, self.weight, pos_weight=self.pos_weight,
                                                reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities (pair with LogSoftmax)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):  # noqa: A002
        return nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Softmax cross-entropy on logits; class-index or class-probability targets."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):  # noqa: A002
        return cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                             reduction=self.reduction, label_smoothing=self.label_smoothing)
