"""`dropout`, `dropout1d`, `dropout2d`: a float32 uniform turned into a scaled mask by arithmetic (no np.where).
"""
import numpy as np

from ..function import Node
from ..tensor import _wrap
from ._functional_common import _check_float, _needs_grad, _node

__all__ = ["dropout", "dropout1d", "dropout2d"]

# ---------------------------------------------------------------------------------------------
# dropout
# ---------------------------------------------------------------------------------------------
class _DropoutBackward(Node):
    __slots__ = ()

    def backward(self, g):
        return (g * self.saved,)


_DropoutBackward.__name__ = _DropoutBackward.__qualname__ = "MulBackward0"  # torch's name for dropout's node


def _dropout_mask(shape, p, dtype):
    from ..random import rng
    u = rng().random(shape, dtype=np.float32 if dtype == np.float32 else np.float64)
    # keep with probability 1 - p, scaled by 1 / (1 - p): (u >= p) as 0/1 times the scale
    mask = np.greater_equal(u, p, out=np.empty(shape, np.bool_)).astype(dtype)
    mask *= 1.0 / (1.0 - p)
    return mask


def _apply_mask(input, mask, inplace):
    x = input._data
    if inplace:
        from ..ops.inplace import check_inplace, _write_back
        if _needs_grad(input):
            check_inplace(input)
            n = _node(_DropoutBackward, (input._edge(),), mask)
            return _write_back(input, _wrap(x * mask, n))
        np.multiply(x, mask, out=x, casting="unsafe")
        input._vc[0] += 1
        return input
    y = x * mask
    if y.dtype != x.dtype:
        y = y.astype(x.dtype)
    if _needs_grad(input):
        return _wrap(y, _node(_DropoutBackward, (input._edge(),), mask))
    return _wrap(y)


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input, p=0.5, training=True, inplace=False):
    """Inverted dropout: in training, zero each element with probability p and scale the rest
    by 1/(1-p); identity otherwise. Uses the global seeded generator (autograd_core.manual_seed)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    x = input._data
    _check_float(x)
    if p == 1.0:
        mask = np.zeros(x.shape, x.dtype)
    else:
        mask = _dropout_mask(x.shape, p, x.dtype)
    return _apply_mask(input, mask, inplace)


def _feature_dropout(input, p, training, inplace, spatial, name):
    _check_p(p)
    if not training or p == 0.0:
        return input
    x = input._data
    _check_float(x)
    if x.ndim not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"{name}: Expected {spatial + 1}D or {spatial + 2}D input, but received a {x.ndim}D input")
    lead = x.shape[:x.ndim - spatial]
    mshape = lead + (1,) * spatial
    mask = np.zeros(mshape, x.dtype) if p == 1.0 else _dropout_mask(mshape, p, x.dtype)
    mask = np.broadcast_to(mask, x.shape)
    return _apply_mask(input, mask, inplace)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) / (C, L) input."""
    return _feature_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) input, as torch: dims 0 and 1 are (N, C) whatever the rank.

    torch warns for ranks other than 4 and 3, and for 3-D input (read as (N, C, L)); so do we.
    """
    from ._functional_extra import _warn_dropout2d_dim
    nd = input.dim()
    _warn_dropout2d_dim(nd)
    if nd == 3:
        import warnings
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", UserWarning, stacklevel=2)
    if nd < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return _feature_dropout(input, p, training, inplace, nd - 2, "dropout2d")
