"""Weight initialisation (`torch.nn.init`): in-place fills drawn from autograd_core's seeded RNG.

Every function writes into `tensor` without recording a graph (as torch's run under no_grad),
bumps its version counter, and returns it. `autograd_core.manual_seed(s)` makes a network's
initial weights reproducible; pass `generator=` for an independent stream. The numbers differ
from torch's (a different random stream); the distributions are the same.
"""
import math
import warnings

import numpy as np
from scipy import special as _sp

from ..random import rng as _rng
from ..tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
           "sparse_"]

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for `nonlinearity` (torch's table): linear/conv/sigmoid 1, tanh 5/3,
    relu sqrt(2), leaky_relu sqrt(2 / (1 + slope^2)) (slope `param`, default 0.01), selu 3/4."""
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _check(tensor, fn):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"nn.init.{fn}: expected a Tensor, got {type(tensor).__name__}")


def _write(tensor, values):
    """Store `values` in `tensor`'s own array (cast to its dtype) and bump its version."""
    np.copyto(tensor._data, values, casting="unsafe")
    tensor._vc[0] += 1
    return tensor


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight (out, in, *kernel): in * prod(kernel), out * prod(kernel)."""
    dims = tensor._data.ndim
    if dims < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor._data.shape[2:]:
        receptive *= s
    return tensor._data.shape[1] * receptive, tensor._data.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    _check(tensor, "uniform_")
    return _write(tensor, _rng(generator).uniform(a, b, tensor._data.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2)."""
    _check(tensor, "normal_")
    return _write(tensor, mean + std * _rng(generator).standard_normal(tensor._data.shape))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std^2) truncated to [a, b] (absolute bounds, as torch), by inverse CDF."""
    _check(tensor, "trunc_normal_")
    if std <= 0:
        raise ValueError(f"trunc_normal_: std must be positive, got {std}")
    if a >= b:
        raise ValueError(f"trunc_normal_: the lower bound a ({a}) must be below the upper bound b ({b})")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    lo, hi = _sp.ndtr((a - mean) / std), _sp.ndtr((b - mean) / std)
    u = _rng(generator).uniform(lo, hi, tensor._data.shape)
    vals = mean + std * _sp.ndtri(u)
    return _write(tensor, np.clip(vals, a, b))


def constant_(tensor, val):
    _check(tensor, "constant_")
    return _write(tensor, val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    """Fill a 2-D tensor with the identity (ones on the main diagonal)."""
    _check(tensor, "eye_")
    if tensor._data.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(*tensor._data.shape))


def dirac_(tensor, groups=1):
    """Fill a 3/4/5-D conv weight so the convolution is the identity (per group)."""
    _check(tensor, "dirac_")
    d = tensor._data.ndim
    if d not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    shape = tensor._data.shape
    if shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = shape[0] // groups
    min_dim = min(out_per_group, shape[1])
    vals = np.zeros(shape)
    centre = tuple(s // 2 for s in shape[2:])
    for g in range(groups):
        for k in range(min_dim):
            vals[(g * out_per_group + k, k) + centre] = 1
    return _write(tensor, vals)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio 2010)."""
    _check(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _check(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    if 0 in tensor._data.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b) with b = gain * sqrt(3 / fan) (He et al. 2015); `a` is the leaky-ReLU slope."""
    _check(tensor, "kaiming_uniform_")
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan)."""
    _check(tensor, "kaiming_normal_")
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix (Saxe et al. 2013) over the tensor flattened to (rows, rest)."""
    _check(tensor, "orthogonal_")
    if tensor._data.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor._data.size == 0:
        return tensor
    rows = tensor._data.shape[0]
    cols = tensor._data.size // rows
    flat = _rng(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    # Sign fix makes Q uniformly (Haar) distributed rather than biased by QR's convention.
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, gain * q.reshape(tensor._data.shape))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """2-D: N(0, std^2) with a fraction `sparsity` of each column set to zero."""
    _check(tensor, "sparse_")
    if tensor._data.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor._data.shape
    g = _rng(generator)
    vals = std * g.standard_normal((rows, cols))
    nz = int(math.ceil(sparsity * rows))
    for c in range(cols):
        vals[g.permutation(rows)[:nz], c] = 0
    return _write(tensor, vals)
