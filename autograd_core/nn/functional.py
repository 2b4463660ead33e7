"""`autograd_core.nn.functional` (torch's `F`): linear, activations, losses, and the CNN/RNN kernels.

Small-tensor speed is decided by Python overhead per autograd node, so the layers that run in
every training step are single fused nodes that compute their gradients directly in NumPy:
`linear` (x @ W.T + b, torch's AddmmBackward0), `gelu`, `silu`, and the losses in
`_functional_loss.py`.
Simple activations reuse the engine's ops (`ops/pointwise.py`, `ops/reduction.py`).
"""
import math

import numpy as np
from scipy import special as _sp

from .. import grad_mode as _gm
from ..ops._base import _new, as_float as _as_float, node1  # nodes stamped with their creation order
from ..function import Node, saved_version
from ..ops import inplace as _inplace, pointwise as _pw, reduction as _red
from ..ops.shape import TBackward0 as _TBackward0
from ..tensor import Tensor, _wrap
from ._functional_loss import (binary_cross_entropy, binary_cross_entropy_with_logits,  # noqa: F401
                               cross_entropy, huber_loss, l1_loss, mse_loss, nll_loss, smooth_l1_loss)

_gs = _gm._state

__all__ = ["linear", "relu", "relu_", "leaky_relu", "leaky_relu_", "tanh", "sigmoid", "elu", "softplus", "gelu",
           "silu", "softmax", "log_softmax", "hardtanh", "relu6", "logsigmoid", "softsign", "one_hot",
           "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "cross_entropy", "nll_loss"]


# ---------------------------------------------------------------------------------------------
# linear
class _LinearNode(Node):
    """y = x @ mat2 (+ b) for 2-D x, mat2 = W.T; saved = (x, W) arrays.

    Edges in torch's order: AddmmBackward0 (bias, input, TBackward0(weight)), MmBackward0
    (input, TBackward0(weight)); the TBackward0 node turns the mat2 gradient into W's.
    """

    __slots__ = ()

    def backward(self, g):
        x, w = self.saved
        edges = self.next_edges
        has_bias = len(edges) == 3
        ex, ewt = edges[-2], edges[-1]
        gx = g @ w if ex is not None else None
        gwt = x.T @ g if ewt is not None else None
        if has_bias:
            return (g.sum(0) if edges[0] is not None else None), gx, gwt
        return gx, gwt


class AddmmBackward0(_LinearNode):
    """2-D input with bias: torch's name for the fused x @ W.T + b node."""

    __slots__ = ()


class MmBackward0(_LinearNode):
    """2-D input, no bias."""

    __slots__ = ()


_DT_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half"}


def linear(input, weight, bias=None):  # noqa: A002 - torch's argument name
    """y = input @ weight.T + bias.

    input (..., in_features); weight (out_features, in_features); bias (out_features,) or None;
    returns (..., out_features). One autograd node computes all three gradients.
    """
    x, w = input._data, weight._data
    if x.dtype != w.dtype or (bias is not None and bias._data.dtype != x.dtype):
        other = w.dtype if x.dtype != w.dtype else bias._data.dtype
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_DT_NAMES.get(x.dtype.name, x.dtype)} "
                           f"and {_DT_NAMES.get(other.name, other)}")
    if w.ndim != 2 or x.ndim == 0 or x.shape[-1] != w.shape[1]:
        # torch reports the input flattened to 2-D: (prod(leading dims), in_features).
        xs = f"{x.size // max(x.shape[-1], 1)}x{x.shape[-1]}" if x.ndim else "scalar"
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({xs} and "
                           f"{'x'.join(map(str, w.shape[::-1]))})")
    if x.ndim != 2:
        # torch: ViewBackward0 -> AddmmBackward0 (or MmBackward0) on the input flattened to 2-D
        from ..ops.shape import reshape
        lead = x.shape[:-1]
        rows = 1
        for s_ in lead:
            rows *= s_
        out2 = linear(reshape(input, (rows, x.shape[-1])), weight, bias)
        return reshape(out2, lead + (w.shape[0],))
    out = x @ w.T
    if bias is not None:
        out += bias._data
    if _gs.enabled and (input._rg or weight._rg or (bias is not None and bias._rg)):
        et = None
        if weight._rg:
            tn = node1(_TBackward0, weight)
            tn.d0, tn.d1 = 0, 1
            et = (tn, 0)
        if bias is None:
            n = _new(MmBackward0)
            n.next_edges = (input._edge(), et)
        else:
            n = _new(AddmmBackward0)
            n.next_edges = (bias._edge(), input._edge(), et)
        n.saved = (x, w)
        n.vc = (saved_version(input), saved_version(weight))
        return _wrap(out, n)
    return _wrap(out)


# ---------------------------------------------------------------------------------------------
# Activations from the engine
def relu(input, inplace=False):  # noqa: A002
    """max(x, 0), element-wise; any shape."""
    return _inplace.relu_(input) if inplace else _pw.relu(input)


def relu_(input):  # noqa: A002
    return _inplace.relu_(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):  # noqa: A002
    """x if x > 0 else negative_slope * x; any shape."""
    if inplace:
        return _inplace.leaky_relu_(input, negative_slope)
    return _pw.leaky_relu(input, negative_slope)


def leaky_relu_(input, negative_slope=0.01):  # noqa: A002
    return _inplace.leaky_relu_(input, negative_slope)


def tanh(input):  # noqa: A002
    return _pw.tanh(input)


def sigmoid(input):  # noqa: A002
    return _pw.sigmoid(input)


_elu_ = _inplace.inplace(_pw.elu)


def elu(input, alpha=1.0, inplace=False):  # noqa: A002
    """x if x > 0 else alpha * (exp(x) - 1); any shape."""
    return _elu_(input, alpha) if inplace else _pw.elu(input, alpha)


def softplus(input, beta=1.0, threshold=20.0):  # noqa: A002
    """log(1 + exp(beta x)) / beta, linear above beta x > threshold; any shape."""
    return _pw.softplus(input, beta, threshold)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):  # noqa: A002
    """clamp(x, min_val, max_val); any shape."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    if input._data.dtype.kind in "iu" and float(min_val).is_integer() and float(max_val).is_integer():
        min_val, max_val = int(min_val), int(max_val)  # torch: an integer input stays integer
    return _inplace.clamp_(input, min_val, max_val) if inplace else _pw.clamp(input, min_val, max_val)


def relu6(input, inplace=False):  # noqa: A002
    return hardtanh(input, 0.0, 6.0, inplace)


def logsigmoid(input):  # noqa: A002
    """log(sigmoid(x)) = -softplus(-x), computed without overflow."""
    return -_pw.softplus(-input)


def softsign(input):  # noqa: A002
    return input / (_pw.abs(input) + 1)


def _softmax_dim_warn(name, dim):
    if dim is None:
        import warnings
        warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
                      "dim=X as an argument.", stacklevel=3)


def softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    """exp(x) / sum(exp(x)) along `dim`; same shape as input."""
    _softmax_dim_warn("softmax", dim)
    return _red.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    """x - logsumexp(x) along `dim`; same shape as input."""
    _softmax_dim_warn("log_softmax", dim)
    return _red.log_softmax(input, dim, dtype=dtype)


# ---------------------------------------------------------------------------------------------
# Fused activations: one node instead of the four or five a composition would record.
_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_C = math.sqrt(2.0 / math.pi)


class GeluBackward0(Node):
    __slots__ = ("approximate",)

    def backward(self, g):
        x = self.saved
        if self.approximate == "tanh":
            inner = _TANH_C * (x + 0.044715 * x ** 3)
            t = np.tanh(inner)
            d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * (_TANH_C * (1.0 + 3 * 0.044715 * x * x))
        else:
            # d/dx [x Phi(x)] = Phi(x) + x phi(x)
            d = 0.5 * (1.0 + _sp.erf(x / _SQRT_2)) + x * (_INV_SQRT_2PI * np.exp(-0.5 * x * x))
        return (g * d.astype(g.dtype, copy=False),)


def gelu(input, approximate="none"):  # noqa: A002
    """x Phi(x) (exact, erf) or its tanh approximation (`approximate="tanh"`); any shape."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate argument must be either none or tanh, got '{approximate}'")
    x = _as_float(input._data)
    if approximate == "tanh":
        out = 0.5 * x * (1.0 + np.tanh(_TANH_C * (x + 0.044715 * x ** 3)))
    else:
        out = 0.5 * x * (1.0 + _sp.erf(x / _SQRT_2))
    out = out.astype(x.dtype, copy=False)
    if input._rg and _gs.enabled:
        n = node1(GeluBackward0, input, x, (saved_version(input),))
        n.approximate = approximate
        return _wrap(out, n)
    return _wrap(out)


class SiluBackward0(Node):
    __slots__ = ()

    def backward(self, g):
        x = self.saved
        s = _pw._sigmoid_np(x)
        return (g * (s * (1.0 + x * (1.0 - s))),)


def silu(input, inplace=False):  # noqa: A002
    """x * sigmoid(x) (swish); any shape."""
    if inplace:
        return _silu_(input)
    x = _as_float(input._data)
    out = x * _pw._sigmoid_np(x)
    if input._rg and _gs.enabled:
        return _wrap(out, node1(SiluBackward0, input, x, (saved_version(input),)))
    return _wrap(out)


_silu_ = _inplace.inplace(silu)


# ---------------------------------------------------------------------------------------------
def one_hot(tensor, num_classes=-1):
    """Integer class indices (...) -> int64 one-hot (..., num_classes)."""
    t = tensor._data
    if t.dtype.kind not in "iu":
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        num_classes = int(t.max()) + 1 if t.size else 0
    if t.size and (t.min() < 0 or t.max() >= num_classes):
        raise RuntimeError("Class values must be smaller than num_classes." if t.min() >= 0 else
                           "Class values must be non-negative.")
    out = np.zeros(t.shape + (num_classes,), dtype=np.int64)
    np.put_along_axis(out, t[..., None].astype(np.intp), 1, axis=-1)
    return _wrap(out)


# ---------------------------------------------------------------------------------------------
# The CNN/RNN kernels live in their own file.
from . import _functional_cnn as _cnn  # noqa: E402
from ._functional_cnn import *  # noqa: F401,F403,E402

__all__ += [n for n in getattr(_cnn, "__all__", ()) if n not in __all__]
from ._functional_extra import (embedding, multi_head_attention_forward, pixel_shuffle,  # noqa: F401,E402
                                pixel_unshuffle, scaled_dot_product_attention)
