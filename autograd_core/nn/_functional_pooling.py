"""Max / average / adaptive-average pooling (1-d through the 2-d kernels): one fused node each.

Pooling loops over the kh*kw kernel offsets with strided slices.
"""
import numpy as np

from ..function import Node
from ..tensor import _wrap
from ._functional_common import _check_float, _needs_grad, _node, _pair, _single

__all__ = ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d"]

# ---------------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------------
def _pool_out(L, k, s, p, d, ceil_mode):
    num = L + 2 * p - d * (k - 1) - 1
    if ceil_mode:
        o = -(-num // s) + 1
        if (o - 1) * s >= L + p:  # the last window must start inside the input or left padding
            o -= 1
    else:
        o = num // s + 1
    return o


def _pool_args(x, kernel_size, stride, padding, dilation, ceil_mode, name):
    if x.ndim not in (3, 4):
        raise RuntimeError(f"{name}: Expected 3D or 4D (batch mode) tensor for input, but got: {list(x.shape)}")
    kh, kw = _pair(kernel_size, "kernel_size")
    if stride is None or (not isinstance(stride, (int, np.integer)) and len(stride) == 0):
        sh, sw = kh, kw
    else:
        sh, sw = _pair(stride, "stride")
    ph, pw = _pair(padding, "padding")
    dh, dw = _pair(dilation, "dilation")
    if kh <= 0 or kw <= 0:
        raise RuntimeError(f"{name}: kernel_size must be greater than zero, but got kH: {kh} kW: {kw}")
    if sh <= 0 or sw <= 0:
        raise RuntimeError(f"{name}: stride must be greater than zero, but got dH: {sh} dW: {sw}")
    if dh <= 0 or dw <= 0:
        raise RuntimeError(f"{name}: dilation must be greater than zero, but got dilationH: {dh} dilationW: {dw}")
    H, W = x.shape[-2:]
    Ho = _pool_out(H, kh, sh, ph, dh, ceil_mode)
    Wo = _pool_out(W, kw, sw, pw, dw, ceil_mode)
    if Ho < 1 or Wo < 1:
        raise RuntimeError(f"Given input size: ({x.shape[-3]}x{H}x{W}). Calculated output size: "
                           f"({x.shape[-3]}x{Ho}x{Wo}). Output size is too small")
    return kh, kw, sh, sw, ph, pw, dh, dw, H, W, Ho, Wo


def _padded(x, ph, pw, Hneed, Wneed, fill):
    """x (N, C, H, W) padded left/top by ph/pw and right/bottom up to (Hneed, Wneed)."""
    N, C, H, W = x.shape
    if ph == 0 and pw == 0 and Hneed <= H and Wneed <= W:
        return x, H, W
    Hp, Wp = max(H + ph, Hneed), max(W + pw, Wneed)
    xp = np.full((N, C, Hp, Wp), fill, x.dtype)
    xp[:, :, ph:ph + H, pw:pw + W] = x
    return xp, Hp, Wp


class MaxPool2DWithIndicesBackward0(Node):
    __slots__ = ("meta",)

    def backward(self, g):
        arg = self.saved
        in_shape, N, C, kh, kw, sh, sw, ph, pw, dh, dw, H, W, Hp, Wp, Ho, Wo = self.meta
        g = g.reshape(N, C, Ho, Wo)
        dxp = np.zeros((N, C, Hp, Wp), g.dtype)
        he, we = sh * (Ho - 1) + 1, sw * (Wo - 1) + 1
        if kh * kw == 1:
            dxp[:, :, 0:he:sh, 0:we:sw] += g
        else:
            for i in range(kh):
                for j in range(kw):
                    v = dxp[:, :, i * dh:i * dh + he:sh, j * dw:j * dw + we:sw]
                    np.add(v, g, out=v, where=(arg == i * kw + j))
        return (dxp[:, :, ph:ph + H, pw:pw + W].reshape(in_shape),)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max pooling over (N, C, H, W) or (C, H, W); ties go to the first element, as in torch."""
    x = input._data
    _check_float(x)
    kh, kw, sh, sw, ph, pw, dh, dw, H, W, Ho, Wo = _pool_args(x, kernel_size, stride, padding, dilation, ceil_mode,
                                                              "max_pool2d")
    ekh, ekw = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    if ph > ekh // 2 or pw > ekw // 2 or ph > kh // 2 or pw > kw // 2:
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={max(ph, pw)}, "
                           f"kernel_size={max(kh, kw)} and dilation={max(dh, dw)}")
    in_shape = x.shape
    x4 = x if x.ndim == 4 else x[None]
    N, C = x4.shape[:2]
    he, we = sh * (Ho - 1) + 1, sw * (Wo - 1) + 1
    track = return_indices or _needs_grad(input)
    if (not track and ph == 0 and pw == 0 and sh == kh and sw == kw and dh == 1 and dw == 1
            and Ho * kh <= H and Wo * kw <= W):
        # Non-overlapping windows: one reshape and one reduction.
        out = x4[:, :, :Ho * kh, :Wo * kw].reshape(N, C, Ho, kh, Wo, kw).max(axis=(3, 5))
        return _wrap(out.reshape(in_shape[:-2] + (Ho, Wo)))
    xp, Hp, Wp = _padded(x4, ph, pw, (Ho - 1) * sh + ekh, (Wo - 1) * sw + ekw, -np.inf)
    out = None
    arg = None
    for i in range(kh):
        for j in range(kw):
            sl = xp[:, :, i * dh:i * dh + he:sh, j * dw:j * dw + we:sw]
            if out is None:
                out = sl.copy()
                if track:
                    arg = np.zeros(out.shape, np.int16 if kh * kw < 32000 else np.int64)
            elif track:
                m = sl > out
                np.copyto(out, sl, where=m)
                np.copyto(arg, i * kw + j, where=m)
            else:
                np.maximum(out, sl, out=out)
    out_shape = in_shape[:-2] + (Ho, Wo)
    y = out.reshape(out_shape)
    res = None
    if _needs_grad(input):
        n = _node(MaxPool2DWithIndicesBackward0, (input._edge(),), arg)
        n.meta = (in_shape, N, C, kh, kw, sh, sw, ph, pw, dh, dw, H, W, Hp, Wp, Ho, Wo)
        res = _wrap(y, n)
    else:
        res = _wrap(y)
    if return_indices:
        a = arg.astype(np.int64)
        rows = (np.arange(Ho) * sh - ph)[:, None] + (a // kw) * dh
        colz = (np.arange(Wo) * sw - pw)[None, :] + (a % kw) * dw
        idx = rows * W + colz
        return res, _wrap(idx.reshape(out_shape))
    return res


class AvgPool2DBackward0(Node):
    __slots__ = ("meta", "args")  # args: avg_pool2d's arguments, for the double backward

    def backward(self, g):
        in_shape, N, C, kh, kw, sh, sw, ph, pw, H, W, Hp, Wp, Ho, Wo, div = self.meta
        g = g.reshape(N, C, Ho, Wo)
        gd = (g / div).astype(g.dtype, copy=False)
        dxp = np.zeros((N, C, Hp, Wp), g.dtype)
        he, we = sh * (Ho - 1) + 1, sw * (Wo - 1) + 1
        for i in range(kh):
            for j in range(kw):
                dxp[:, :, i:i + he:sh, j:j + we:sw] += gd
        return (dxp[:, :, ph:ph + H, pw:pw + W].reshape(in_shape),)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Average pooling over (N, C, H, W) or (C, H, W), with torch's divisor rules."""
    x = input._data
    _check_float(x)
    kh, kw, sh, sw, ph, pw, _, _, H, W, Ho, Wo = _pool_args(x, kernel_size, stride, padding, 1, ceil_mode,
                                                            "avg_pool2d")
    if ph > kh // 2 or pw > kw // 2:
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={max(ph, pw)}, "
                           f"kernel_size={max(kh, kw)} and dilation=1")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    in_shape = x.shape
    x4 = x if x.ndim == 4 else x[None]
    N, C = x4.shape[:2]
    he, we = sh * (Ho - 1) + 1, sw * (Wo - 1) + 1
    xp, Hp, Wp = _padded(x4, ph, pw, (Ho - 1) * sh + kh, (Wo - 1) * sw + kw, 0)
    if divisor_override is not None:
        div = float(divisor_override)
    else:
        hs = np.arange(Ho) * sh - ph
        ws = np.arange(Wo) * sw - pw
        he_ = np.minimum(hs + kh, H + ph)
        we_ = np.minimum(ws + kw, W + pw)
        if count_include_pad:
            dh_ = he_ - hs
            dw_ = we_ - ws
        else:
            dh_ = np.minimum(he_, H) - np.maximum(hs, 0)
            dw_ = np.minimum(we_, W) - np.maximum(ws, 0)
        div = np.multiply.outer(dh_, dw_)
        div = float(div.flat[0]) if np.all(div == div.flat[0]) else div.astype(x.dtype)
    out = None
    for i in range(kh):
        for j in range(kw):
            sl = xp[:, :, i:i + he:sh, j:j + we:sw]
            if out is None:
                out = sl.copy()
            else:
                out += sl
    out /= div
    y = out.reshape(in_shape[:-2] + (Ho, Wo))
    if _needs_grad(input):
        n = _node(AvgPool2DBackward0, (input._edge(),), None)
        n.meta = (in_shape, N, C, kh, kw, sh, sw, ph, pw, H, W, Hp, Wp, Ho, Wo, div)
        n.args = (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        return _wrap(y, n)
    return _wrap(y)


def _adaptive_matrix(L, Lo, dtype):
    """(Lo, L) averaging matrix with torch's bins [floor(i*L/Lo), ceil((i+1)*L/Lo))."""
    A = np.zeros((Lo, L), dtype)
    for i in range(Lo):
        s = (i * L) // Lo
        e = -(-((i + 1) * L) // Lo)
        A[i, s:e] = 1.0 / (e - s)
    return A


class AdaptiveAvgPool2DBackward0(Node):
    __slots__ = ("meta", "args")

    def backward(self, g):
        in_shape, N, C, H, W, Ho, Wo, mode = self.meta
        g = g.reshape(N, C, Ho, Wo)
        if mode == "block":
            kh, kw = H // Ho, W // Wo
            gx = np.empty((N, C, Ho, kh, Wo, kw), g.dtype)
            gx[...] = (g / (kh * kw))[:, :, :, None, :, None]
            return (gx.reshape(in_shape),)
        Ah, Aw = self.saved
        # gx = Ah^T g Aw: contract Wo first, then Ho.
        t = (g.reshape(-1, Wo) @ Aw).reshape(N * C, Ho, W)
        t = t.transpose(0, 2, 1).reshape(-1, Ho) @ Ah  # (N*C*W, H)
        return (np.ascontiguousarray(t.reshape(N, C, W, H).transpose(0, 1, 3, 2)).reshape(in_shape),)


def adaptive_avg_pool2d(input, output_size):
    """Adaptive average pooling to `output_size` (int, pair; None keeps that input size)."""
    x = input._data
    _check_float(x)
    if x.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(x.shape)}")
    H, W = x.shape[-2:]
    if isinstance(output_size, (int, np.integer)):
        Ho = Wo = int(output_size)
    else:
        os_ = tuple(output_size)
        if len(os_) == 1:
            os_ = (os_[0], os_[0])
        Ho = H if os_[0] is None else int(os_[0])
        Wo = W if os_[1] is None else int(os_[1])
    if Ho < 0 or Wo < 0:
        raise RuntimeError("adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0")
    in_shape = x.shape
    x4 = x if x.ndim == 4 else x[None]
    N, C = x4.shape[:2]
    saved = None
    if Ho and Wo and H % Ho == 0 and W % Wo == 0:
        mode = "block"
        out = x4.reshape(N, C, Ho, H // Ho, Wo, W // Wo).mean(axis=(3, 5))
        if out.dtype != x.dtype:
            out = out.astype(x.dtype)
    else:
        mode = "matrix"
        Ah = _adaptive_matrix(H, Ho, x.dtype)
        Aw = _adaptive_matrix(W, Wo, x.dtype)
        t = (x4.reshape(-1, W) @ Aw.T).reshape(N * C, H, Wo)
        t = t.transpose(0, 2, 1).reshape(-1, H) @ Ah.T  # (N*C*Wo, Ho)
        out = np.ascontiguousarray(t.reshape(N, C, Wo, Ho).transpose(0, 1, 3, 2))
        saved = (Ah, Aw)
    y = out.reshape(in_shape[:-2] + (Ho, Wo))
    if _needs_grad(input):
        n = _node(AdaptiveAvgPool2DBackward0, (input._edge(),), saved)
        n.meta = (in_shape, N, C, H, W, Ho, Wo, mode)
        n.args = output_size
        return _wrap(y, n)
    return _wrap(y)


# 1-d pooling through the 2-d kernels (H = 1), as thin wrappers.
def _unsqueeze_h(t):
    from ..ops.shape import unsqueeze
    return unsqueeze(t, -2)


def _squeeze_h(t):
    from ..ops.shape import squeeze
    return squeeze(t, -2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    k = _single(kernel_size, "kernel_size")
    s = k if stride is None or (not isinstance(stride, (int, np.integer)) and len(stride) == 0) else _single(stride)
    r = max_pool2d(_unsqueeze_h(input), (1, k), (1, s), (0, _single(padding)), (1, _single(dilation)), ceil_mode,
                   return_indices)
    if return_indices:
        return _squeeze_h(r[0]), _squeeze_h(r[1])
    return _squeeze_h(r)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    k = _single(kernel_size, "kernel_size")
    s = k if stride is None or (not isinstance(stride, (int, np.integer)) and len(stride) == 0) else _single(stride)
    return _squeeze_h(avg_pool2d(_unsqueeze_h(input), (1, k), (1, s), (0, _single(padding)), ceil_mode,
                                 count_include_pad))


def adaptive_avg_pool1d(input, output_size):
    return _squeeze_h(adaptive_avg_pool2d(_unsqueeze_h(input), (1, _single(output_size, "output_size"))))
