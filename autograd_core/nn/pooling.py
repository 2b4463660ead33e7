"""Pooling modules: `MaxPool2d`, `AvgPool2d`, `AdaptiveAvgPool2d` (and the 1-d forms), torch's API."""
from . import _functional_pooling as _FC
from .module import Module



def _1(v):
    return (v,) if isinstance(v, int) else tuple(v)


__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d"]


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool2d(_MaxPoolNd):
    """Max over kernel windows of (N, C, H, W) / (C, H, W) input; `return_indices` gives torch's
    flat (H * W) argmax indices as well."""

    def forward(self, input):  # noqa: A002
        return _FC.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                              ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool1d(_MaxPoolNd):
    def forward(self, input):  # noqa: A002
        return _FC.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                              ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class _AvgPoolNd(Module):
    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """Mean over kernel windows of (N, C, H, W) / (C, H, W) input, with torch's divisor rules
    (count_include_pad, ceil_mode, divisor_override)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):  # noqa: A002
        return _FC.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                              self.count_include_pad, self.divisor_override)


class AvgPool1d(_AvgPoolNd):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        # torch keeps 1-tuples here (its repr shows them)
        self.kernel_size = _1(kernel_size)
        self.stride = _1(stride if (stride is not None) else kernel_size)
        self.padding = _1(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):  # noqa: A002
        return _FC.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                              self.count_include_pad)


class _AdaptiveAvgPoolNd(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Average over torch's adaptive bins to `output_size` (int or pair; None keeps the input size)."""

    def forward(self, input):  # noqa: A002
        return _FC.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    def forward(self, input):  # noqa: A002
        return _FC.adaptive_avg_pool1d(input, self.output_size)
