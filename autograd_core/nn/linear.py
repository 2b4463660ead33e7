"""`Linear`: y = x W^T + b; the fused kernel (one autograd node) is `functional.linear`."""
import math

import numpy as np

from .. import _dtype as D
from ..tensor import _wrap, _require_cpu as _device
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Linear"]


def _factory_dtype(dtype, device):
    if device is not None:
        _device(device)  # raises for anything but the CPU
    npd = D.get_default_dtype().np if dtype is None else D.to_numpy_dtype(dtype)
    if npd.kind != "f":
        raise TypeError(f"layers need a floating point dtype, got {dtype}")
    return npd


class Linear(Module):
    """y = x @ weight.T + bias.

    Input (..., in_features) -> output (..., out_features). weight (out_features, in_features)
    ~ U(-1/sqrt(in), 1/sqrt(in)) via kaiming_uniform_(a=sqrt(5)); bias (out_features,) ~ the same
    bound, as torch initialises them.
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise ValueError(f"Linear: {name} must be a positive integer, got {v!r}")
        npd = _factory_dtype(dtype, device)
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.weight = Parameter(_wrap(np.empty((self.out_features, self.in_features), dtype=npd)))
        if bias:
            self.bias = Parameter(_wrap(np.empty((self.out_features,), dtype=npd)))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features)
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
