"""`Conv1d`, `Conv2d`: the fused im2col kernels of `_functional_cnn` behind torch's module API.

Parameters as torch: weight (out, in/groups, *kernel) ~ kaiming_uniform_(a=sqrt(5)), i.e.
U(-1/sqrt(fan_in), 1/sqrt(fan_in)); bias (out,) ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), so that
state dicts move between the two frameworks unchanged.
"""
import math

import numpy as np

from ..tensor import _wrap
from . import _functional_conv as _FC
from . import init
from .linear import _factory_dtype
from .module import Module
from .parameter import Parameter

__all__ = ["Conv1d", "Conv2d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(v, n, name):
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    v = tuple(int(a) for a in v)
    if len(v) != n:
        raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v}")
    return v


class _ConvNd(Module):
    _nd = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        nd = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = int(in_channels)
        self.out_channels = int(out_channels)
        self.kernel_size = _ntuple(kernel_size, nd, "kernel_size")
        self.stride = _ntuple(stride, nd, "stride")
        self.dilation = _ntuple(dilation, nd, "dilation")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _ntuple(padding, nd, "padding")
        self.transposed = False
        self.output_padding = (0,) * nd
        self.groups = int(groups)
        self.padding_mode = padding_mode
        npd = _factory_dtype(dtype, device)
        self.weight = Parameter(_wrap(np.empty((self.out_channels, self.in_channels // self.groups)
                                               + self.kernel_size, dtype=npd)))
        if bias:
            self.bias = Parameter(_wrap(np.empty((self.out_channels,), dtype=npd)))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1.0 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _mode_pads(self):
        """(before, after) per spatial dim for a non-zeros padding_mode."""
        if self.padding == "valid":
            return [(0, 0)] * self._nd
        if self.padding == "same":
            out = []
            for k, d in zip(self.kernel_size, self.dilation):
                tot = d * (k - 1)
                out.append((tot // 2, tot - tot // 2))
            return out
        return [(p, p) for p in self.padding]

    def _conv_forward(self, input, weight, bias):
        conv = _FC.conv2d if self._nd == 2 else _FC.conv1d
        if self.padding_mode != "zeros":
            pads = self._mode_pads()
            if any(a or b for a, b in pads):
                input = _FC._mode_pad(input, pads, self.padding_mode)
            return conv(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):  # noqa: A002 - torch's argument name
        return self._conv_forward(input, self.weight, self.bias)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_ConvNd):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W) input.

    Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode='zeros'); padding may be an int, a pair, 'valid' or 'same'.
    """

    _nd = 2


class Conv1d(_ConvNd):
    """1-D convolution over (N, C_in, L) or (C_in, L) input (the Conv2d kernel with H = 1)."""

    _nd = 1
