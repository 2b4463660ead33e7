"""Loss kernels behind `nn.functional` and `nn.*Loss`: each loss is a single fused autograd node.

Every loss records one node that returns the gradients for the input and, where torch gives
one, the target; `reduction` is "none" | "mean" | "sum" with torch's meaning. Forward work is
only the loss itself: the gradient factors are computed in backward, so evaluation under
`no_grad` pays nothing extra.
"""
import warnings

import numpy as np

from .. import grad_mode as _gm
from ..ops._base import _new  # stamps each node's creation order (the engine sorts by it)
from ..function import Node, reduce_to_shape, saved_version
from ..tensor import Tensor, _wrap

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "cross_entropy", "nll_loss"]

_gs = _gm._state
_REDUCTIONS = ("none", "mean", "sum")


def _legacy_reduction(size_average, reduce, reduction):
    """torch's mapping of the deprecated `size_average` / `reduce` flags onto `reduction`."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='"
                  f"{'none' if reduce is False else ('mean' if size_average is not False else 'sum')}' instead.",
                  UserWarning, stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(loss, reduction):
    """Apply `reduction` to an elementwise loss array (any shape)."""
    if reduction == "mean":
        return np.asarray(loss.mean(dtype=loss.dtype)) if loss.size else np.asarray(np.nan, loss.dtype)
    if reduction == "sum":
        return np.asarray(loss.sum(dtype=loss.dtype))
    return loss


def _grad_scale(g, reduction, n):
    """The upstream gradient per element: g itself for "none", g (or g / n) as a scalar otherwise."""
    if reduction == "none":
        return g
    return g / n if reduction == "mean" else g


def _float_pair(input, target, fn):  # noqa: A002
    if not isinstance(input, Tensor) or not isinstance(target, Tensor):
        bad = "input" if not isinstance(input, Tensor) else "target"
        raise TypeError(f"{fn}(): argument '{bad}' must be Tensor, not "
                        f"{type(input if bad == 'input' else target).__name__}")
    x, t = input._data, target._data
    if x.dtype.kind != "f":
        if t.dtype.kind != "f":
            raise RuntimeError(f"{fn}: expected a floating point input, got {input.dtype}")
        x = x.astype(t.dtype)  # an integer/bool input meets a float target: torch promotes
    if t.dtype != x.dtype:
        t = t.astype(np.result_type(x.dtype, t.dtype) if t.dtype.kind == "f" else x.dtype)
        if t.dtype != x.dtype:
            x = x.astype(t.dtype)
    return x, t


def _no_grad_args(fn, **tensors):
    """torch treats class/element weights as constants: asking for their gradient is an error."""
    if _gs.enabled:
        for name, t in tensors.items():
            if t is not None and t._rg:
                raise RuntimeError(f"The function '{fn}' is not differentiable with respect to argument '{name}'. "
                                   "This input cannot have requires_grad True.")


def _warn_broadcast(input, target, fn):  # noqa: A002
    if input._data.shape != target._data.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have "
                      "the same size.", UserWarning, stacklevel=3)


# ---------------------------------------------------------------------------------------------
# Pointwise regression losses: one node type, the derivative chosen by `kind`.
class _PointwiseLossBackward(Node):
    """saved = (x, t) broadcast-compatible arrays; grads reduced back to each input's shape/dtype."""

    __slots__ = ("reduction", "param", "sx", "st", "dx", "dt")

    def _dloss(self, d):  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def backward(self, g):
        x, t = self.saved
        d = x - t
        gd = self._dloss(d) * _grad_scale(g, self.reduction, d.size)
        ex, et = self.next_edges
        gx = reduce_to_shape(gd, self.sx).astype(self.dx, copy=False) if ex is not None else None
        gt = reduce_to_shape(-gd, self.st).astype(self.dt, copy=False) if et is not None else None
        return gx, gt


class MseLossBackward0(_PointwiseLossBackward):
    __slots__ = ()

    def _dloss(self, d):
        return 2.0 * d


class L1LossBackward0(_PointwiseLossBackward):
    __slots__ = ()

    def _dloss(self, d):
        return np.sign(d)


class SmoothL1LossBackward0(_PointwiseLossBackward):
    __slots__ = ()

    def _dloss(self, d):
        beta = self.param
        if beta == 0:
            return np.sign(d)
        return np.clip(d / beta, -1.0, 1.0)


class HuberLossBackward0(_PointwiseLossBackward):
    __slots__ = ()

    def _dloss(self, d):
        delta = self.param
        return np.clip(d, -delta, delta)


def _pointwise_loss(cls, input, target, reduction, loss_fn, param, name):  # noqa: A002
    _check_reduction(reduction)
    x, t = _float_pair(input, target, name)
    _warn_broadcast(input, target, name)
    try:
        loss = loss_fn(x - t)
    except ValueError:
        raise RuntimeError(f"The size of tensor a ({list(input.shape)}) must match the size of tensor b "
                           f"({list(target.shape)})") from None
    out = _reduce(loss, reduction).astype(x.dtype, copy=False)
    if _gs.enabled and (input._rg or target._rg):
        n = _new(cls)
        n.next_edges = (input._edge(), target._edge())
        n.saved = (x, t)
        n.vc = (saved_version(input), saved_version(target))
        n.reduction = reduction
        n.param = param
        n.sx = x.shape
        n.st = t.shape
        n.dx = input._data.dtype
        n.dt = target._data.dtype
        return _wrap(out, n)
    return _wrap(out)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):  # noqa: A002
    """(input - target)^2, reduced. input/target broadcastable (same shape expected)."""
    if weight is not None:
        raise NotImplementedError("mse_loss(weight=...) is not supported; multiply a reduction='none' loss instead")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _pointwise_loss(MseLossBackward0, input, target, reduction, lambda d: d * d, None, "mse_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """|input - target|, reduced."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _pointwise_loss(L1LossBackward0, input, target, reduction, np.abs, None, "l1_loss")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):  # noqa: A002
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target); reduced."""
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    reduction = _legacy_reduction(size_average, reduce, reduction)

    def f(d):
        a = np.abs(d)
        if beta == 0:
            return a
        return np.where(a < beta, 0.5 * d * d / beta, a - 0.5 * beta)

    return _pointwise_loss(SmoothL1LossBackward0, input, target, reduction, f, float(beta), "smooth_l1_loss")


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):  # noqa: A002
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); reduced."""
    if weight is not None:
        raise NotImplementedError("huber_loss(weight=...) is not supported; multiply a reduction='none' loss instead")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")

    def f(d):
        a = np.abs(d)
        return np.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))

    return _pointwise_loss(HuberLossBackward0, input, target, reduction, f, float(delta), "huber_loss")


# ---------------------------------------------------------------------------------------------
# Binary cross-entropy
_BCE_EPS = 1e-12  # torch's floor on x(1 - x) in the gradient


class BinaryCrossEntropyBackward0(Node):
    """saved = (x, t, w or None); edges: input, target."""

    __slots__ = ("reduction",)

    def backward(self, g):
        x, t, w = self.saved
        gs = _grad_scale(g, self.reduction, x.size)
        if w is not None:
            gs = gs * w
        ex, et = self.next_edges
        gx = gt = None
        if ex is not None:
            gx = ((x - t) / np.maximum((1.0 - x) * x, _BCE_EPS) * gs).astype(x.dtype, copy=False)
        if et is not None:
            with np.errstate(divide="ignore"):
                gt = (np.maximum(np.log1p(-x), -100.0) - np.maximum(np.log(x), -100.0)) * gs
            gt = gt.astype(t.dtype, copy=False)
        return gx, gt


def _bce(x, t):
    with np.errstate(divide="ignore"):
        # torch clamps each log at -100 so that x = 0 or 1 gives a large finite loss.
        return -(t * np.maximum(np.log(x), -100.0) + (1.0 - t) * np.maximum(np.log1p(-x), -100.0))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """-w [t log x + (1 - t) log(1 - x)] for probabilities x in [0, 1]; input and target same shape."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    x, t = _float_pair(input, target, "binary_cross_entropy")
    if x.shape != t.shape:
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    _no_grad_args("binary_cross_entropy", weight=weight)
    if x.size and (np.any(x < 0) or np.any(x > 1) or np.any(np.isnan(x))):
        raise RuntimeError("all elements of input should be between 0 and 1")
    loss = _bce(x, t)
    w = None
    if weight is not None:
        w = weight._data
        loss = loss * w
        if loss.shape != x.shape:
            raise RuntimeError(f"weight of shape {list(weight.shape)} is not broadcastable to input shape "
                               f"{list(input.shape)}")
    out = _reduce(loss, reduction).astype(x.dtype, copy=False)
    if _gs.enabled and (input._rg or target._rg):
        n = _new(BinaryCrossEntropyBackward0)
        n.next_edges = (input._edge(), target._edge())
        n.saved = (x, t, w)
        n.vc = (saved_version(input), saved_version(target))
        n.reduction = reduction
        return _wrap(out, n)
    return _wrap(out)


def _softplus_neg(x):
    """log(1 + exp(-x)), without overflow for any x."""
    return np.maximum(-x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


class BinaryCrossEntropyWithLogitsBackward0(Node):
    """saved = (x, t, w or None, pos_weight or None); edges: input, target."""

    __slots__ = ("reduction",)

    def backward(self, g):
        x, t, w, pw = self.saved
        gs = _grad_scale(g, self.reduction, x.size)
        if w is not None:
            gs = gs * w
        ex, et = self.next_edges
        gx = gt = None
        if ex is not None:
            if pw is None:
                d = _sigmoid(x) - t
            else:
                d = (1.0 - t) - (1.0 + (pw - 1.0) * t) * _sigmoid(-x)
            gx = (d * gs).astype(x.dtype, copy=False)
        if et is not None:
            d = -x if pw is None else (pw - 1.0) * _softplus_neg(x) - x
            gt = (d * gs).astype(t.dtype, copy=False)
        return gx, gt


def _bce_logits(x, t, pw):
    sp = _softplus_neg(x)
    if pw is None:
        return (1.0 - t) * x + sp
    return (1.0 - t) * x + (1.0 + (pw - 1.0) * t) * sp


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                                     reduction="mean", pos_weight=None):
    """BCE on logits, computed stably as (1 - t) x + lw softplus(-x) with lw = 1 + (pos_weight - 1) t.

    input, target: same shape (..., C); weight broadcastable to it; pos_weight (C,) weights the
    positive term per class (broadcast along the last dimension).
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    x, t = _float_pair(input, target, "binary_cross_entropy_with_logits")
    if x.shape != t.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    _no_grad_args("binary_cross_entropy_with_logits", weight=weight, pos_weight=pos_weight)
    pw = pos_weight._data if pos_weight is not None else None
    w = weight._data if weight is not None else None
    loss = _bce_logits(x, t, pw)
    if w is not None:
        loss = loss * w
    if loss.shape != x.shape:
        raise RuntimeError(f"weight/pos_weight of shapes {None if w is None else list(w.shape)}/"
                           f"{None if pw is None else list(pw.shape)} do not broadcast to input shape "
                           f"{list(input.shape)}")
    out = _reduce(loss, reduction).astype(x.dtype, copy=False)
    if _gs.enabled and (input._rg or target._rg):
        n = _new(BinaryCrossEntropyWithLogitsBackward0)
        n.next_edges = (input._edge(), target._edge())
        n.saved = (x, t, w, pw)
        n.vc = (saved_version(input), saved_version(target))
        n.reduction = reduction
        return _wrap(out, n)
    return _wrap(out)


# ---------------------------------------------------------------------------------------------
# Classification: NLL and cross-entropy (log-softmax fused in).
#
# Both work on a row layout: the class axis (1, or 0 for unbatched (C,) input) is moved last and
# the rest flattened, giving (R, C) rows and (R,) targets; picking and scattering the target
# entries is then one fancy-index with (arange(R), target).
def _rows(x, fn):
    """(R, C) C-contiguous rows of `x` with the class axis last, and that axis' original index."""
    if x.ndim == 0:
        raise ValueError(f"{fn}: input must have at least 1 dimension (C,), got a 0-d tensor")
    axis = 1 if x.ndim >= 2 else 0
    xm = np.moveaxis(x, axis, -1) if axis != x.ndim - 1 else x
    return np.ascontiguousarray(xm).reshape(-1, x.shape[axis]), axis


def _from_rows(g2, shape, axis):
    """Inverse of `_rows` for a gradient (R, C) -> `shape`."""
    moved = shape[:axis] + shape[axis + 1:] + (shape[axis],)
    g = g2.reshape(moved)
    return np.moveaxis(g, -1, axis) if axis != len(shape) - 1 else g


def _row_shape(shape, axis):
    return shape[:axis] + shape[axis + 1:]


def _index_target(target, x_shape, axis, ignore_index, fn):
    """Validate class-index targets: returns (safe indices (R,), valid mask (R,))."""
    t = target._data
    if t.dtype.kind not in "iu":
        raise RuntimeError(f"{fn}: expected target of integer type (class indices) but found {target.dtype}")
    rows = _row_shape(x_shape, axis)
    if t.shape != rows:
        if len(x_shape) >= 2 and t.ndim >= 1 and t.shape[0] != x_shape[0]:
            raise ValueError(f"Expected input batch_size ({x_shape[0]}) to match target batch_size ({t.shape[0]}).")
        raise RuntimeError(f"{fn}: expected target of shape {list(rows)} for input of shape (batch, classes, ...) "
                           f"but got target of shape {list(t.shape)}")
    t = t.reshape(-1)
    valid = t != ignore_index
    safe = np.where(valid, t, 0) if not valid.all() else t
    c = x_shape[axis]
    if safe.size and (safe.min() < 0 or safe.max() >= c):
        raise IndexError(f"Target {safe[(safe < 0) | (safe >= c)][0]} is out of bounds.")
    return safe, valid


def _class_weight(weight, c, dtype, fn):
    if weight is None:
        return None
    w = weight._data
    if w.shape != (c,):
        raise RuntimeError(f"{fn}: weight tensor should be defined either for all {c} classes or no classes but "
                           f"got weight tensor of shape: {list(weight.shape)}")
    return w.astype(dtype, copy=False)


def _finish_rows(loss, denom, reduction, rows_shape, dtype):
    """Reduce per-row losses (R,); "mean" divides by `denom` (summed target weights or row count)."""
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(loss.sum() / denom, dtype=dtype)
    if reduction == "sum":
        return np.asarray(loss.sum(), dtype=dtype)
    return loss.reshape(rows_shape).astype(dtype, copy=False)


def _row_grad(g, reduction, denom):
    """Upstream gradient per row: (R, 1) for "none", a scalar otherwise."""
    if reduction == "none":
        return g.reshape(-1, 1)
    return g / denom if reduction == "mean" else g


class NllLossBackward0(Node):
    """saved = (safe indices (R,), per-row weight wy (R,)); d loss / d input = -wy at the target."""

    __slots__ = ("reduction", "shape", "axis", "denom")

    def backward(self, g):
        safe, wy = self.saved
        coef = _row_grad(g, self.reduction, self.denom)
        coef = wy * (coef[:, 0] if np.ndim(coef) else coef)
        g2 = np.zeros((safe.size, self.shape[self.axis]), dtype=wy.dtype)
        g2[np.arange(safe.size), safe] = -coef
        return (_from_rows(g2, self.shape, self.axis),)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
             reduction="mean"):
    """-weight[t] * input[t] for log-probabilities input (N, C) / (C,) / (N, C, d1, ...) and class
    indices target (N,) / () / (N, d1, ...). "mean" divides by the summed weights of non-ignored
    targets (NaN if all are ignored, as torch)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _no_grad_args("nll_loss_forward", weight=weight)
    x = input._data
    x2, axis = _rows(x, "nll_loss")
    safe, valid = _index_target(target, x.shape, axis, ignore_index, "nll_loss")
    w = _class_weight(weight, x2.shape[1], x.dtype, "nll_loss")
    wy = valid.astype(x.dtype) if w is None else w[safe] * valid
    loss = -wy * x2[np.arange(safe.size), safe]
    denom = wy.sum()
    out = _finish_rows(loss, denom, reduction, _row_shape(x.shape, axis), x.dtype)
    if input._rg and _gs.enabled:
        n = _new(NllLossBackward0)
        n.next_edges = (input._edge(),)
        n.saved = (safe, wy)
        n.vc = ()
        n.reduction = reduction
        n.shape = x.shape
        n.axis = axis
        n.denom = denom
        return _wrap(out, n)
    return _wrap(out)


class CrossEntropyLossBackward0(Node):
    """Fused log_softmax + weighted NLL (or soft-target) loss, on (R, C) rows.

    With Q (R, C) the coefficients such that loss_row = -sum_c Q_c logp_c, the input gradient of
    a row is g_row * (softmax * sum_c Q_c - Q). For index targets Q is (1 - eps) wy at the target
    plus (eps / C) w_c on every class of non-ignored rows; it is never built densely.
    saved = (logp (R, C), safe (R,) or None, valid (R,) or None, wy (R,) or target probs (R, C), w).
    """

    __slots__ = ("reduction", "shape", "axis", "denom", "mode", "eps", "x")

    def backward(self, g):
        logp, safe, valid, b, w = self.saved
        eps = self.eps
        gi = _row_grad(np.asarray(g, dtype=logp.dtype), self.reduction, self.denom)
        edges = self.next_edges
        gx = gt = None
        if self.mode == "index":
            c = logp.shape[1]
            gx = np.exp(logp)
            s = (1.0 - eps) * b  # sum_c Q_c per row
            if eps:
                smooth = (eps / c) * (w if w is not None else np.ones(c, logp.dtype))
                s = s + smooth.sum() * valid
            gx *= s[:, None]
            if eps:
                gx -= smooth * valid[:, None]
            gx[np.arange(safe.size), safe] -= (1.0 - eps) * b
            gx *= gi
            gx = _from_rows(gx, self.shape, self.axis)
        else:
            q = b if w is None else b * w
            if edges[0] is not None:
                gx = _from_rows((np.exp(logp) * q.sum(1, keepdims=True) - q) * gi, self.shape, self.axis)
            if len(edges) == 2 and edges[1] is not None:
                d = -logp if w is None else -logp * w
                gt = _from_rows(d * ((1.0 - eps) * gi), self.shape, self.axis)
        return (gx,) if len(edges) == 1 else (gx, gt)


def _log_softmax_rows(x2):
    m = x2.max(axis=1, keepdims=True)
    sh = x2 - m
    sh -= np.log(np.exp(sh).sum(axis=1, keepdims=True))
    return sh


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
                  reduction="mean", label_smoothing=0.0):
    """Softmax cross-entropy of logits input (N, C) / (C,) / (N, C, d1, ...).

    target: class indices (N,) / () / (N, d1, ...) (int), or class probabilities with the
    input's shape (float). `weight` (C,) rescales classes; `ignore_index` skips index targets;
    `label_smoothing` in [0, 1] mixes the target with the uniform distribution.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    _no_grad_args("nll_loss_forward", weight=weight)
    x = input._data
    if x.dtype.kind != "f":
        raise RuntimeError(f"cross_entropy: expected a floating point input (logits), got {input.dtype}")
    eps = float(label_smoothing)
    if target._data.shape != x.shape and not eps and x.ndim:
        # Index targets: log_softmax then nll_loss, torch's graph (NllLossBackward0 -> LogSoftmaxBackward0).
        from ..ops.reduction import log_softmax
        return nll_loss(log_softmax(input, 1 if x.ndim >= 2 else 0), target, weight, ignore_index=ignore_index,
                        reduction=reduction)
    x2, axis = _rows(x, "cross_entropy")
    c = x2.shape[1]
    w = _class_weight(weight, c, x.dtype, "cross_entropy")
    logp = _log_softmax_rows(x2)
    if target._data.shape == x.shape:
        # Class-probability targets.
        if target._data.dtype.kind != "f":
            raise RuntimeError(f"Expected floating point type for target with class probabilities, got "
                               f"{target.dtype}")
        if ignore_index != -100:
            raise RuntimeError("ignore_index is not supported for floating point target")
        t2, _ = _rows(target._data.astype(x.dtype, copy=False), "cross_entropy")
        tq = t2 * (1.0 - eps) + eps / c if eps else t2
        loss = -((tq if w is None else tq * w) * logp).sum(1)
        denom = float(loss.size)
        mode, safe, valid, b = "prob", None, None, tq
    else:
        safe, valid = _index_target(target, x.shape, axis, ignore_index, "cross_entropy")
        wy = valid.astype(x.dtype) if w is None else w[safe] * valid
        loss = -wy * logp[np.arange(safe.size), safe]
        if eps:
            smooth = -(logp if w is None else logp * w).sum(1) * valid
            loss = (1.0 - eps) * loss + (eps / c) * smooth
        denom = wy.sum()
        mode, b = "index", wy
    out = _finish_rows(loss, denom, reduction, _row_shape(x.shape, axis), x.dtype)
    target_grad = mode == "prob" and target._rg
    if _gs.enabled and (input._rg or target_grad):
        n = _new(CrossEntropyLossBackward0)
        n.next_edges = (input._edge(), target._edge()) if target_grad else (input._edge(),)
        n.saved = (logp, safe, valid, b, w)
        n.x = (x, target._data)
        n.vc = ()
        n.reduction = reduction
        n.shape = x.shape
        n.axis = axis
        n.denom = denom
        n.mode = mode
        n.eps = eps
        return _wrap(out, n)
    return _wrap(out)
