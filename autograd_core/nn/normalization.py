"""`BatchNorm1d`, `BatchNorm2d`, `LayerNorm` with torch's parameters, buffers and update rules.

BatchNorm state: weight (ones), bias (zeros), buffers running_mean (zeros), running_var (ones),
num_batches_tracked (int64 0): the same state-dict keys as torch. In training the running
statistics move by `momentum` (or by the cumulative average 1/num_batches_tracked when
momentum is None), with the unbiased batch variance, exactly as torch.
"""
import numpy as np

from ..tensor import _wrap
from . import _functional_normalization as _FC
from . import init
from .linear import _factory_dtype
from .module import Module
from .parameter import Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm"]


class _BatchNorm(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        npd = _factory_dtype(dtype, device)
        self.num_features = int(num_features)
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(_wrap(np.empty((self.num_features,), npd)))
            if bias:
                self.bias = Parameter(_wrap(np.empty((self.num_features,), npd)))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _wrap(np.zeros((self.num_features,), npd)))
            self.register_buffer("running_var", _wrap(np.ones((self.num_features,), npd)))
            self.register_buffer("num_batches_tracked", _wrap(np.zeros((), np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean._data[...] = 0
            self.running_var._data[...] = 1
            self.num_batches_tracked._data[...] = 0
            for b in (self.running_mean, self.running_var, self.num_batches_tracked):
                b._vc[0] += 1

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):  # pragma: no cover - overridden
        raise NotImplementedError

    def forward(self, input):  # noqa: A002
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            nbt = self.num_batches_tracked
            nbt._data += 1
            nbt._vc[0] += 1
            factor = 1.0 / float(nbt._data) if self.momentum is None else self.momentum
        bn_training = True if self.training else (self.running_mean is None and self.running_var is None)
        use_stats = not self.training or self.track_running_stats
        return _FC.batch_norm(input, self.running_mean if use_stats else None,
                              self.running_var if use_stats else None, self.weight, self.bias, bn_training, factor,
                              self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) input."""

    def _check_input_dim(self, input):
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) input."""

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalisation over (N, C, D, H, W) input."""

    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class LayerNorm(Module):
    """Normalise over the trailing `normalized_shape` dims; weight ones, bias zeros (elementwise)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, (int, np.integer)):
            normalized_shape = (int(normalized_shape),)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        npd = _factory_dtype(dtype, device)
        if elementwise_affine:
            self.weight = Parameter(_wrap(np.empty(self.normalized_shape, npd)))
            if bias:
                self.bias = Parameter(_wrap(np.empty(self.normalized_shape, npd)))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):  # noqa: A002
        return _FC.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")
