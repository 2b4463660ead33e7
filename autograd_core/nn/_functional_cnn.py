"""Convolution, pooling, normalisation, dropout and recurrent-cell kernels (torch.nn.functional's API).

Every kernel is ONE fused autograd node with a hand-derived NumPy backward: Python overhead per
node, not FLOPs, decides small-network speed, so a conv is one node, not an unfold + matmul +
reshape chain, and a GRU layer over a whole sequence is one node.

Layout notes (measured on the 2-vCPU box, see /work/shared/ANCHORS.md):
- conv2d works internally in channels-last (NHWC): the im2col windows then have contiguous inner
  runs of kw*C elements (instead of Wo), which makes the gather ~5x cheaper at 12x16 inputs; one
  BLAS GEMM does the MACs; results go back to contiguous NCHW so `.view()` works as in torch.
- backward col2im accumulates the kh*kw strided slices in a loop (no np.add.at).
- pooling loops over the kh*kw kernel offsets with strided slices as well.
- dropout draws a float32 uniform and builds the scaled mask by arithmetic (no np.where).
"""

import numpy as np

from .. import function as _function
from .. import grad_mode as _gm
from ..function import Node, saved_version
from ..tensor import _wrap

__all__ = ["conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "batch_norm", "layer_norm", "dropout", "dropout1d", "dropout2d", "gru_cell",
           "lstm_cell", "rnn_tanh_cell", "rnn_relu_cell"]

_gs = _gm._state
_new = object.__new__
# The engine orders backward by node creation number when it has one (function.next_seq).
_next_seq = getattr(_function, "next_seq", None)

_TORCH_DTYPE_NAME = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long"}


def _tune_malloc():
    """Keep freed large arrays in the heap instead of handing them back to the OS.

    glibc mmaps every allocation over 128 KiB and unmaps it on free, so each im2col buffer,
    activation and gradient of a conv step page-faults afresh: ~1100 faults and ~3 ms of system
    time per batch-64 policy-CNN training step here (ANCHORS.md, "Performance lessons"). Raising
    the mmap threshold to 32 MiB and the trim threshold to 128 MiB removes them (policy CNN
    fwd+bwd 7.9 -> 4.7 ms). Process-wide, glibc only; AUTOGRAD_CORE_MALLOPT=0 opts out.
    """
    import os
    import platform
    if os.environ.get("AUTOGRAD_CORE_MALLOPT", "1") == "0" or platform.system() != "Linux":
        return False
    try:
        import ctypes
        if platform.libc_ver()[0] != "glibc":
            return False
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) and libc.mallopt(M_TRIM_THRESHOLD, 128 << 20))
    except (OSError, AttributeError):
        return False


_MALLOC_TUNED = _tune_malloc()


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _pair(v, name="argument"):
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return v[0], v[0]
    if len(v) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {v}")
    return v


def _single(v, name="argument"):
    if isinstance(v, (int, np.integer)):
        return int(v)
    v = tuple(int(a) for a in v)
    if len(v) != 1:
        raise ValueError(f"{name} must be an int or a 1-tuple, got {v}")
    return v[0]


def _check_float(x, what="input"):
    if x.dtype.kind != "f":
        raise RuntimeError(f"expected a floating point {what}, got {_TORCH_DTYPE_NAME.get(x.dtype.name, x.dtype.name)}")


def _same_dtype(ref, arr):
    if arr is not None and arr.dtype != ref.dtype:
        raise RuntimeError(f"expected scalar type {_TORCH_DTYPE_NAME.get(ref.dtype.name, ref.dtype.name)} but found "
                           f"{_TORCH_DTYPE_NAME.get(arr.dtype.name, arr.dtype.name)}")


def _data(t):
    return None if t is None else t._data


def _edge(t):
    return None if t is None else t._edge()


def _needs_grad(*ts):
    if not _gs.enabled:
        return False
    for t in ts:
        if t is not None and t._rg:
            return True
    return False


def _node(cls, edges, saved, vc=()):
    n = _new(cls)
    n.next_edges = edges
    n.saved = saved
    n.vc = vc
    if _next_seq is not None:
        n.seq = _next_seq()
    return n


def _vcs(*ts):
    return tuple(saved_version(t) for t in ts if t is not None)


def _sigmoid(x, out=None):
    # sigmoid(x) = 0.5 * (1 + tanh(x / 2)): no overflow for large |x|, one transcendental.
    out = np.multiply(x, 0.5, out=out)
    np.tanh(out, out=out)
    out *= 0.5
    out += 0.5
    return out


# ---------------------------------------------------------------------------------------------
# convolution
# ---------------------------------------------------------------------------------------------
class ConvolutionBackward0(Node):
    __slots__ = ("meta", "args")  # args: (x, w, b arrays, output shape) for the double backward

    def backward(self, g):
        ex, ew, eb = self.next_edges
        cols, w2 = self.saved
        (N, C, H, W, O, G, Ho, Wo, kh, kw, sh, sw, dh, dw, pt, pl, Hp, Wp, squeeze, wshape, nchw) = self.meta
        if squeeze:
            g = g.reshape((N, O, Ho, Wo))
        Cg, Og = C // G, O // G
        M = N * Ho * Wo
        he, we = sh * (Ho - 1) + 1, sw * (Wo - 1) + 1
        gb = gw = gx = None
        if eb is not None:
            gb = g.sum(axis=(0, 2, 3))
        if nchw:  # columns (M, C*kh*kw), weight view (O, K)
            gmT = None
            if N == 1:
                gmT = g.reshape(O, M)
                gm = gmT.T
            else:
                gm = np.ascontiguousarray(g.transpose(0, 2, 3, 1)).reshape(M, O)
                gmT = gm.T
            if ew is not None:
                gw = (gmT @ cols).reshape(wshape)
            if ex is not None:
                d6 = (gm @ w2).reshape(N, Ho, Wo, C, kh, kw)
                dxp = np.zeros((N, C, Hp, Wp), g.dtype)
                for i in range(kh):
                    for j in range(kw):
                        dxp[:, :, i * dh:i * dh + he:sh, j * dw:j * dw + we:sw] += \
                            d6[:, :, :, :, i, j].transpose(0, 3, 1, 2)
                gx = dxp[:, :, pt:pt + H, pl:pl + W]
                if Hp != H or Wp != W:
                    gx = np.ascontiguousarray(gx)
                if squeeze:
                    gx = gx.reshape(squeeze)
            return gx, gw, gb
        if G == 1:
            gm = np.ascontiguousarray(g.transpose(0, 2, 3, 1)).reshape(M, O)
        else:
            gm = np.ascontiguousarray(g.reshape(N, G, Og, Ho, Wo).transpose(1, 0, 3, 4, 2)).reshape(G, M, Og)
        if ew is not None:
            if G == 1:
                gw2 = cols.T @ gm  # (K, O)
                gw = np.ascontiguousarray(gw2.reshape(kh, kw, Cg, O).transpose(3, 2, 0, 1))
            else:
                gw2 = np.matmul(cols.transpose(0, 2, 1), gm)  # (G, K, Og)
                gw = np.ascontiguousarray(gw2.reshape(G, kh, kw, Cg, Og).transpose(0, 4, 3, 1, 2)).reshape(
                    O, Cg, kh, kw)
            if gw.shape != wshape:
                gw = gw.reshape(wshape)
        if ex is not None:
            if G == 1:
                # One (M, O) x (O, C) GEMM per kernel offset (a single batched matmul): each
                # offset's column block comes out contiguous, so the col2im adds below stream
                # runs of Wo*C elements instead of C (~2x cheaper than slicing one big dcols).
                wk = w2.reshape(kh * kw, C, O).transpose(0, 2, 1)  # (kh*kw, O, C) view
                d = np.matmul(gm, wk).reshape(kh, kw, N, Ho, Wo, C)
                dxp = np.zeros((N, Hp, Wp, C), g.dtype)
                for i in range(kh):
                    for j in range(kw):
                        dxp[:, i * dh:i * dh + he:sh, j * dw:j * dw + we:sw, :] += d[i, j]
                gx = np.ascontiguousarray(dxp[:, pt:pt + H, pl:pl + W, :].transpose(0, 3, 1, 2))
            else:
                d7 = np.matmul(gm, w2.transpose(0, 2, 1)).reshape(G, N, Ho, Wo, kh, kw, Cg)
                dxp = np.zeros((N, Hp, Wp, G, Cg), g.dtype)
                for i in range(kh):
                    for j in range(kw):
                        dxp[:, i * dh:i * dh + he:sh, j * dw:j * dw + we:sw] += \
                            d7[:, :, :, :, i, j, :].transpose(1, 2, 3, 0, 4)
                gx = np.ascontiguousarray(dxp[:, pt:pt + H, pl:pl + W].reshape(N, H, W, C).transpose(0, 3, 1, 2))
            if squeeze:
                gx = gx.reshape(squeeze)
        return gx, gw, gb


def _conv_padding(padding, k, d, s):
    """(top/left, bottom/right) padding per spatial dim for int/tuple/'valid'/'same'."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0) for _ in k]
        if padding == "same":
            if any(si != 1 for si in s):
                raise ValueError("padding='same' is not supported for strided convolutions")
            out = []
            for ki, di in zip(k, d):
                tot = di * (ki - 1)
                out.append((tot // 2, tot - tot // 2))
            return out
        raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
    p = _pair(padding, "padding") if len(k) == 2 else (_single(padding, "padding"),)
    if any(pi < 0 for pi in p):
        raise RuntimeError("negative padding is not supported")
    return [(pi, pi) for pi in p]


def _conv2d_core(x, w, b, sh, sw, pads, dh, dw, groups, squeeze, in_shape, wshape):
    """x: (N, C, H, W) array. Returns the output array and the backward record (cols, w2, meta)."""
    N, C, H, W = x.shape
    O, Cg, kh, kw = w.shape
    G = int(groups)
    if G < 1:
        raise RuntimeError("non-positive groups is not supported")
    if C != Cg * G:
        raise RuntimeError(f"Given groups={G}, weight of size {list(w.shape)}, expected input{list(in_shape)} to have "
                           f"{Cg * G} channels, but got {C} channels instead")
    if O % G:
        raise RuntimeError(f"Given groups={G}, expected weight to be divisible by {G} at dimension 0, but got weight "
                           f"of size {list(w.shape)} instead")
    if sh < 1 or sw < 1:
        raise RuntimeError("non-positive stride is not supported")
    if dh < 1 or dw < 1:
        raise RuntimeError("dilation should be greater than zero")
    (pt, pb), (pl, pr) = pads
    Hp, Wp = H + pt + pb, W + pl + pr
    ekh, ekw = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    if Hp < ekh or Wp < ekw:
        raise RuntimeError(f"Calculated padded input size per channel: ({Hp} x {Wp}). Kernel size: ({ekh} x {ekw}). "
                           "Kernel size can't be greater than actual input size")
    Ho, Wo = (Hp - ekh) // sh + 1, (Wp - ekw) // sw + 1
    dt = x.dtype
    M = N * Ho * Wo
    Og = O // G
    K = kh * kw * Cg
    he, we = sh * (Ho - 1) + 1, sw * (Wo - 1) + 1
    padded = pt or pb or pl or pr
    # Two im2col layouts. Channels-first columns (C, kh, kw order) pair with the weight as it is
    # stored (a free (O, K) view) and, at N = 1, give NCHW output straight from the GEMM: best
    # when the columns are small (M <= O, e.g. batch-1 inference). Channels-last columns
    # (kh, kw, C order) have long contiguous inner runs: best for the big training batches.
    nchw = G == 1 and M <= O
    if nchw:
        if padded:
            xp = np.zeros((N, C, Hp, Wp), dt)
            xp[:, :, pt:pt + H, pl:pl + W] = x
        else:
            xp = x if x.flags.c_contiguous else np.ascontiguousarray(x)
        sN, sC, sH, sW = xp.strides
        cols = np.ndarray((N, Ho, Wo, C, kh, kw), dt, xp, 0,
                          (sN, sH * sh, sW * sw, sC, sH * dh, sW * dw)).reshape(M, K)
        w2 = w.reshape(O, K)
        if N == 1:
            out = w2 @ cols.T  # (O, Ho*Wo): already NCHW
            if b is not None:
                out += b[:, None]
            y = out.reshape(1, O, Ho, Wo)
        else:
            out = cols @ w2.T
            if b is not None:
                out += b
            y = np.ascontiguousarray(out.reshape(N, Ho, Wo, O).transpose(0, 3, 1, 2))
    else:
        # Channels-last, zero-padded copy of the input (one pass: transpose and pad together).
        xt = x.transpose(0, 2, 3, 1)
        if padded:
            xp = np.zeros((N, Hp, Wp, C), dt)
            xp[:, pt:pt + H, pl:pl + W, :] = xt
        elif xt.flags.c_contiguous:
            xp = xt
        else:
            xp = np.ascontiguousarray(xt)
        sN, sH, sW, sC = xp.strides
        if G == 1:
            if kw * C >= 16:
                cols = np.ndarray((N, Ho, Wo, kh, kw, C), dt, xp, 0,
                                  (sN, sH * sh, sW * sw, sH * dh, sW * dw, sC)).reshape(M, K)
            else:  # short inner runs: a copy per kernel offset is faster than the strided gather
                c6 = np.empty((N, Ho, Wo, kh, kw, C), dt)
                for i in range(kh):
                    for j in range(kw):
                        c6[:, :, :, i, j, :] = xp[:, i * dh:i * dh + he:sh, j * dw:j * dw + we:sw, :]
                cols = c6.reshape(M, K)
            w2 = w.transpose(2, 3, 1, 0).reshape(K, O)
            out = cols @ w2
            if b is not None:
                out += b
            y = np.ascontiguousarray(out.reshape(N, Ho, Wo, O).transpose(0, 3, 1, 2))
        else:
            cols = np.ndarray((G, N, Ho, Wo, kh, kw, Cg), dt, xp, 0,
                              (sC * Cg, sN, sH * sh, sW * sw, sH * dh, sW * dw, sC)).reshape(G, M, K)
            w2 = w.reshape(G, Og, Cg, kh, kw).transpose(0, 3, 4, 2, 1).reshape(G, K, Og)
            out = np.matmul(cols, w2)  # (G, M, Og)
            if b is not None:
                out += b.reshape(G, 1, Og)
            y = np.ascontiguousarray(out.reshape(G, N, Ho, Wo, Og).transpose(1, 0, 4, 2, 3)).reshape(N, O, Ho, Wo)
    meta = (N, C, H, W, O, G, Ho, Wo, kh, kw, sh, sw, dh, dw, pt, pl, Hp, Wp, squeeze, wshape, nchw)
    return y, cols, w2, meta


_ARGS_CACHE = {}


def _conv_args(stride, padding, dilation, kshape, nd):
    """(stride pair, dilation pair, [(top, bottom), (left, right)]), memoised: argument parsing
    costs more than a batch-1 convolution's arithmetic."""
    key = (stride, padding, dilation, kshape, nd)
    try:
        return _ARGS_CACHE[key]
    except (KeyError, TypeError):  # TypeError: list arguments are not hashable
        pass
    if nd == 1:
        s = (1, _single(stride, "stride"))
        d = (1, _single(dilation, "dilation"))
        pads = [(0, 0)] + _conv_padding(padding, kshape, d[1:], s[1:])
    else:
        s = _pair(stride, "stride")
        d = _pair(dilation, "dilation")
        pads = _conv_padding(padding, kshape, d, s)
    res = (s, d, tuple(pads))
    try:
        if len(_ARGS_CACHE) < 4096:
            _ARGS_CACHE[key] = res
    except TypeError:
        pass
    return res


def _conv_nd(input, weight, bias, stride, padding, dilation, groups, nd):
    x, w = input._data, weight._data
    b = _data(bias)
    _check_float(x)
    _same_dtype(x, w)
    _same_dtype(x, b)
    batched_dim = nd + 2
    if x.ndim not in (batched_dim, batched_dim - 1):
        raise RuntimeError(f"Expected {batched_dim - 1}D (unbatched) or {batched_dim}D (batched) input to "
                           f"conv{nd}d, but got input of size: {list(x.shape)}")
    if w.ndim != batched_dim:
        raise RuntimeError(f"weight should have at least three dimensions; expected {batched_dim}-D weight for "
                           f"conv{nd}d, got {list(w.shape)}")
    in_shape = x.shape
    if x.ndim == batched_dim - 1:
        x = x[None]
    s, d, pads = _conv_args(stride, padding, dilation, w.shape[2:], nd)
    if nd == 1:
        x = x[:, :, None, :]
        w = w[:, :, None, :]
    if b is not None and b.shape != (w.shape[0],):
        raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional with "
                           f"{w.shape[0]} elements, but got bias of size {list(b.shape)} instead")
    # `squeeze` (the input shape) marks an unbatched or 1-d call: the gradient goes back to it.
    squeeze = in_shape if (x.shape != in_shape) else None
    y, cols, w2, meta = _conv2d_core(x, w, b, s[0], s[1], pads, d[0], d[1], groups, squeeze, in_shape,
                                     weight._data.shape)
    if nd == 1:
        y = y.reshape(y.shape[0], y.shape[1], y.shape[3])
    if len(in_shape) == batched_dim - 1:
        y = y[0]
    if _needs_grad(input, weight, bias):
        n = _node(ConvolutionBackward0, (input._edge(), weight._edge(), _edge(bias)), (cols, w2),
                  (saved_version(input), saved_version(weight)))
        n.meta = meta
        n.args = (input._data, weight._data, b, y.shape)
        return _wrap(y, n)
    return _wrap(y)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution over (N, C, H, W) or unbatched (C, H, W) input; weight (O, C/groups, kh, kw).

    padding: int, pair, 'valid' or 'same' (stride 1). One GEMM forward, two backward.
    """
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 2)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution over (N, C, L) or (C, L) input, through the conv2d kernel with H = 1."""
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 1)


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


# ---------------------------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------------------------
class NativeBatchNormBackward0(Node):
    __slots__ = ("meta", "args")  # args: (eps, bias array), for the double backward

    def backward(self, g):
        ex, ew, eb = self.next_edges
        x3, mean, invstd, w = self.saved
        shape, training = self.meta
        N, C, L = x3.shape
        g3 = g.reshape(N, C, L)
        sum_g = g3.sum(axis=(0, 2))
        # sum(g * xhat) per channel, without materialising xhat
        sum_gx = np.einsum("ncl,ncl->c", g3, x3)
        sum_gxhat = (sum_gx - mean * sum_g) * invstd
        gx = gw = gb = None
        if eb is not None:
            gb = sum_g
        if ew is not None:
            gw = sum_gxhat
        if ex is not None:
            scale = invstd if w is None else w * invstd
            if training:
                M = N * L
                # dx = scale * (g - mean(g) - xhat * mean(g * xhat))
                k1 = (invstd * sum_gxhat / M)[:, None]
                gx = x3 - mean[:, None]
                gx *= k1
                np.subtract(g3, gx, out=gx)
                gx -= (sum_g / M)[:, None]
                gx *= scale[:, None]
            else:
                gx = g3 * scale[:, None]
            gx = gx.reshape(shape)
        return gx, gw, gb


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Batch normalisation over channel dim 1 of (N, C), (N, C, L) or (N, C, H, W) [...] input.

    training: normalise with the batch statistics (biased variance) and, when running stats are
    given, update them in place: r = (1 - momentum) r + momentum * stat, the variance unbiased.
    eval: normalise with the running statistics.
    """
    x = input._data
    _check_float(x)
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2D input (got {x.ndim}D input)")
    shape = x.shape
    N, C = shape[0], shape[1]
    L = 1
    for s in shape[2:]:
        L *= s
    x3 = x.reshape(N, C, L)
    w = _data(weight)
    b = _data(bias)
    for nm, a in (("weight", w), ("bias", b)):
        if a is not None and a.size != C:
            raise RuntimeError(f"running_mean should contain {C} elements not {a.size}" if nm == "running_mean"
                               else f"{nm} should contain {C} elements not {a.size}")
    rm, rv = _data(running_mean), _data(running_var)
    for nm, a in (("running_mean", rm), ("running_var", rv)):
        if a is not None and a.size != C:
            raise RuntimeError(f"{nm} should contain {C} elements not {a.size}")
    if training:
        M = N * L
        if M <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"torch.Size({list(shape)})")
        mean = x3.sum(axis=(0, 2)) / M
        d = x3 - mean[:, None]
        var = np.einsum("ncl,ncl->c", d, d) / M
        invstd = 1.0 / np.sqrt(var + eps)
        scale = invstd if w is None else w * invstd
        d *= scale[:, None]
        if b is not None:
            d += b[:, None]
        y = d
        if rm is not None or rv is not None:
            m = float(momentum) if momentum is not None else 0.0
            if rm is not None:
                rm *= 1.0 - m
                rm += (m * mean).astype(rm.dtype, copy=False)
                running_mean._vc[0] += 1
            if rv is not None:
                rv *= 1.0 - m
                rv += (m * var * (M / (M - 1))).astype(rv.dtype, copy=False)
                running_var._vc[0] += 1
    else:
        if rm is None or rv is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        mean = rm.astype(x.dtype, copy=False)
        invstd = (1.0 / np.sqrt(rv + eps)).astype(x.dtype, copy=False)
        scale = invstd if w is None else w * invstd
        shift = -mean * scale
        if b is not None:
            shift = shift + b
        y = x3 * scale[:, None]
        y += shift[:, None]
    y = y.reshape(shape)
    if _needs_grad(input, weight, bias):
        n = _node(NativeBatchNormBackward0, (input._edge(), _edge(weight), _edge(bias)),
                  (x3, mean.copy() if not training else mean, invstd, w), _vcs(input, weight))
        n.meta = (shape, bool(training))
        n.args = (eps, _data(bias))
        return _wrap(y, n)
    return _wrap(y)


class NativeLayerNormBackward0(Node):
    __slots__ = ("meta", "args")  # args: (x, eps), for the double backward

    def backward(self, g):
        ex, ew, eb = self.next_edges
        xhat, rstd, w = self.saved
        shape, D, ns = self.meta
        g2 = g.reshape(-1, D)
        gx = gw = gb = None
        if eb is not None:
            gb = g2.sum(axis=0).reshape(ns)
        if ew is not None:
            gw = np.einsum("md,md->d", g2, xhat).reshape(ns)
        if ex is not None:
            gxh = g2 * w if w is not None else g2.copy()
            a = gxh.mean(axis=1, keepdims=True)
            c = np.einsum("md,md->m", gxh, xhat)[:, None] / D
            gxh -= a
            gxh -= xhat * c
            gxh *= rstd
            gx = gxh.reshape(shape)
        return gx, gw, gb


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalisation over the trailing `normalized_shape` dims (biased variance)."""
    x = input._data
    _check_float(x)
    if isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (int(normalized_shape),)
    ns = tuple(int(s) for s in normalized_shape)
    if x.shape[x.ndim - len(ns):] != ns or len(ns) > x.ndim:
        raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape [*, "
                           f"{', '.join(str(s) for s in ns)}], but got input of size{list(x.shape)}")
    D = 1
    for s in ns:
        D *= s
    w, b = _data(weight), _data(bias)
    _same_dtype(x, w)
    _same_dtype(x, b)
    shape = x.shape
    x2 = x.reshape(-1, D)
    mean = x2.mean(axis=1, keepdims=True)
    xhat = x2 - mean
    var = np.einsum("md,md->m", xhat, xhat) / D
    rstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype, copy=False)[:, None]
    xhat *= rstd
    wf = None if w is None else w.reshape(D)
    bf = None if b is None else b.reshape(D)
    if wf is not None:
        y = xhat * wf
        if bf is not None:
            y += bf
    elif bf is not None:
        y = xhat + bf
    else:
        y = xhat.copy()
    y = y.reshape(shape)
    if _needs_grad(input, weight, bias):
        n = _node(NativeLayerNormBackward0, (input._edge(), _edge(weight), _edge(bias)), (xhat, rstd, wf),
                  _vcs(weight))
        n.meta = (shape, D, ns)
        n.args = (x, eps)
        return _wrap(y, n)
    return _wrap(y)


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


# ---------------------------------------------------------------------------------------------
# recurrent cells
# ---------------------------------------------------------------------------------------------
def _cell_args(input, hx, w_ih, w_hh, b_ih, b_hh, gates, name):
    x, h = input._data, hx._data
    _check_float(x)
    for a in (h, w_ih._data, w_hh._data, _data(b_ih), _data(b_hh)):
        _same_dtype(x, a)
    unbatched = x.ndim == 1
    if x.ndim not in (1, 2):
        raise ValueError(f"{name}: Expected input to be 1D or 2D, got {x.ndim}D instead")
    if h.ndim != x.ndim:
        raise ValueError(f"{name}: Expected hidden to be {x.ndim}D, got {h.ndim}D instead")
    if unbatched:
        x, h = x[None], h[None]
    Hs = w_hh._data.shape[1]
    if w_ih._data.shape[0] != gates * Hs or x.shape[1] != w_ih._data.shape[1]:
        raise RuntimeError(f"input has inconsistent input_size: got {x.shape[1]} expected {w_ih._data.shape[1]}")
    if h.shape[1] != Hs or h.shape[0] != x.shape[0]:
        raise RuntimeError(f"hidden has inconsistent size: got {list(h.shape)}, expected [{x.shape[0]}, {Hs}]")
    return x, h, unbatched


def _gru_forward(gi, gh, h, H):
    """Gate math of one GRU step. gi, gh: (B, 3H) pre-activations (gi is overwritten).

    Returns h_new, r, z, n, ghn (ghn = W_hn h + b_hn).
    """
    rz = gi[:, :2 * H]
    rz += gh[:, :2 * H]
    _sigmoid(rz, out=rz)
    r = rz[:, :H]
    z = rz[:, H:]
    ghn = gh[:, 2 * H:]
    n = gi[:, 2 * H:]
    n += r * ghn
    np.tanh(n, out=n)
    hn = h - n
    hn *= z
    hn += n
    return hn, r, z, n, ghn


def _gru_gate_grads(gh_, h, r, z, n, ghn, dgi, dgh, H):
    """Fill dgi, dgh (B, 3H) with the pre-activation gradients of one GRU step.

    gh_: dL/dh_new. Returns dL/dh through the z*h path (the W_hh path is added by the caller).
    """
    # h' = n + z * (h - n)
    dz = h - n
    dz *= gh_
    dn = gh_ - gh_ * z  # (1 - z) * g
    dn *= 1.0 - n * n  # through tanh
    dgi[:, 2 * H:] = dn
    np.multiply(dn, r, out=dgh[:, 2 * H:])
    dr = dn * ghn
    dr *= r * (1.0 - r)
    dz *= z * (1.0 - z)
    dgi[:, :H] = dr
    dgi[:, H:2 * H] = dz
    dgh[:, :2 * H] = dgi[:, :2 * H]
    return gh_ * z


class GRUCellBackward0(Node):
    __slots__ = ("unbatched",)

    def backward(self, g):
        ex, eh, ewi, ewh, ebi, ebh = self.next_edges
        x, h, w_ih, w_hh, r, z, n, ghn = self.saved
        H = h.shape[1]
        if self.unbatched:
            g = g.reshape(1, H)
        B = g.shape[0]
        dgi = np.empty((B, 3 * H), g.dtype)
        dgh = np.empty((B, 3 * H), g.dtype)
        dh = _gru_gate_grads(g, h, r, z, n, ghn, dgi, dgh, H)
        gx = gh = gwi = gwh = gbi = gbh = None
        if ex is not None:
            gx = dgi @ w_ih
            if self.unbatched:
                gx = gx.reshape(-1)
        if eh is not None:
            gh = dgh @ w_hh
            gh += dh
            if self.unbatched:
                gh = gh.reshape(-1)
        if ewi is not None:
            gwi = dgi.T @ x
        if ewh is not None:
            gwh = dgh.T @ h
        if ebi is not None:
            gbi = dgi.sum(axis=0)
        if ebh is not None:
            gbh = dgh.sum(axis=0)
        return gx, gh, gwi, gwh, gbi, gbh


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step (torch.gru_cell): gates r, z, n in that order along dim 0 of the weights.

    r = σ(W_ir x + b_ir + W_hr h + b_hr), z = σ(... z ...), n = tanh(W_in x + b_in + r (W_hn h + b_hn)),
    h' = (1 - z) n + z h. One fused node: two GEMMs forward, four backward.
    """
    x, h, unbatched = _cell_args(input, hx, w_ih, w_hh, b_ih, b_hh, 3, "GRUCell")
    wi, wh = w_ih._data, w_hh._data
    H = wh.shape[1]
    gi = x @ wi.T
    if b_ih is not None:
        gi += b_ih._data
    gh = h @ wh.T
    if b_hh is not None:
        gh += b_hh._data
    hn, r, z, n, ghn = _gru_forward(gi, gh, h, H)
    y = hn.reshape(-1) if unbatched else hn
    if _needs_grad(input, hx, w_ih, w_hh, b_ih, b_hh):
        nd = _node(GRUCellBackward0, (input._edge(), hx._edge(), w_ih._edge(), w_hh._edge(), _edge(b_ih),
                                      _edge(b_hh)),
                   (x, h, wi, wh, r, z, n, ghn), _vcs(input, hx, w_ih, w_hh))
        nd.unbatched = unbatched
        return _wrap(y, nd)
    return _wrap(y)


class GRUBackward0(Node):
    """A whole GRU layer over a (T, B, I) sequence: outputs (Y (T, B, H), h_last (B, H))."""

    __slots__ = ("reverse",)
    _multi = True
    n_outputs = 2

    def backward(self, grads):
        gY, ghT = grads
        ex, eh, ewi, ewh, ebi, ebh = self.next_edges
        x, h0, w_ih, w_hh, Y, R, Z, Nn, GHN = self.saved
        T, B, H = Y.shape
        dt = Y.dtype
        dGI = np.empty((T, B, 3 * H), dt)
        dGH = np.empty((T, B, 3 * H), dt)
        dh = np.zeros((B, H), dt) if ghT is None else ghT.copy()
        order = range(T) if self.reverse else range(T - 1, -1, -1)
        prev = 1 if self.reverse else -1  # offset of the previous step in processing order
        for t in order:
            if gY is not None:
                dh += gY[t]
            tp = t + prev
            hp = h0 if (tp < 0 or tp >= T) else Y[tp]
            dz = _gru_gate_grads(dh, hp, R[t], Z[t], Nn[t], GHN[t], dGI[t], dGH[t], H)
            dh = dGH[t] @ w_hh
            dh += dz
        gx = gh0 = gwi = gwh = gbi = gbh = None
        dGI2 = dGI.reshape(T * B, 3 * H)
        dGH2 = dGH.reshape(T * B, 3 * H)
        if ex is not None:
            gx = (dGI2 @ w_ih).reshape(T, B, -1)
        if eh is not None:
            gh0 = dh
        if ewi is not None:
            gwi = dGI2.T @ x.reshape(T * B, -1)
        if ewh is not None:
            Hp = np.empty_like(Y)
            if self.reverse:
                Hp[:T - 1] = Y[1:]
                Hp[T - 1] = h0
            else:
                Hp[1:] = Y[:T - 1]
                Hp[0] = h0
            gwh = dGH2.T @ Hp.reshape(T * B, H)
        if ebi is not None:
            gbi = dGI2.sum(axis=0)
        if ebh is not None:
            gbh = dGH2.sum(axis=0)
        return gx, gh0, gwi, gwh, gbi, gbh


def _gru_layer(input, h0, w_ih, w_hh, b_ih, b_hh, reverse=False):
    """One GRU layer (one direction) over a time-major (T, B, I) sequence; h0 (B, H).

    Returns (Y (T, B, H), h_last (B, H)) as tensors of one fused node. The input projection of
    all steps is one GEMM; each step then costs one (B, H) x (H, 3H) GEMM plus the gate math.
    """
    x, h = input._data, h0._data
    wi, wh = w_ih._data, w_hh._data
    T, B, I = x.shape
    H = wh.shape[1]
    dt = x.dtype
    GI = (x.reshape(T * B, I) @ wi.T)
    if b_ih is not None:
        GI += b_ih._data
    GI = GI.reshape(T, B, 3 * H)
    Y = np.empty((T, B, H), dt)
    track = _needs_grad(input, h0, w_ih, w_hh, b_ih, b_hh)
    if track:
        R = np.empty((T, B, H), dt)
        Z = np.empty((T, B, H), dt)
        Nn = np.empty((T, B, H), dt)
        GHN = np.empty((T, B, H), dt)
    bh = _data(b_hh)
    hc = h
    order = range(T - 1, -1, -1) if reverse else range(T)
    for t in order:
        gh = hc @ wh.T
        if bh is not None:
            gh += bh
        hn, r, z, n, ghn = _gru_forward(GI[t], gh, hc, H)
        Y[t] = hn
        if track:
            R[t] = r
            Z[t] = z
            Nn[t] = n
            GHN[t] = ghn
        hc = Y[t]
    hlast = hc.copy()
    if track:
        nd = _node(GRUBackward0, (input._edge(), h0._edge(), w_ih._edge(), w_hh._edge(), _edge(b_ih), _edge(b_hh)),
                   (x, h, wi, wh, Y, R, Z, Nn, GHN), _vcs(input, h0, w_ih, w_hh))
        nd.reverse = reverse
        yt = _wrap(Y, nd)
        ht = _wrap(hlast, nd)
        ht._nr = 1
        return yt, ht
    return _wrap(Y), _wrap(hlast)


class LstmCellBackward0(Node):
    __slots__ = ("unbatched",)
    _multi = True
    n_outputs = 2

    def backward(self, grads):
        gh_, gc_ = grads
        ex, eh, ec, ewi, ewh, ebi, ebh = self.next_edges
        x, h, c, w_ih, w_hh, gates, tc = self.saved
        H = h.shape[1]
        B = h.shape[0]
        i, f, gg, o = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]
        if gh_ is not None:
            gh_ = gh_.reshape(B, H)
        if gc_ is not None:
            gc_ = gc_.reshape(B, H)
        # c' = f c + i g, h' = o tanh(c')
        dgates = np.empty((B, 4 * H), h.dtype)
        if gh_ is not None:
            dc = gh_ * o
            dc *= 1.0 - tc * tc
            if gc_ is not None:
                dc += gc_
            do = gh_ * tc
            do *= o * (1.0 - o)
        else:
            dc = gc_.copy() if gc_ is not None else np.zeros((B, H), h.dtype)
            do = np.zeros((B, H), h.dtype)
        dgates[:, 3 * H:] = do
        np.multiply(dc, gg * (i * (1.0 - i)), out=dgates[:, :H])
        np.multiply(dc, c * (f * (1.0 - f)), out=dgates[:, H:2 * H])
        np.multiply(dc, i * (1.0 - gg * gg), out=dgates[:, 2 * H:3 * H])
        gx = ghh = gcc = gwi = gwh = gbi = gbh = None
        if ex is not None:
            gx = dgates @ w_ih
        if eh is not None:
            ghh = dgates @ w_hh
        if ec is not None:
            gcc = dc * f
        if ewi is not None:
            gwi = dgates.T @ x
        if ewh is not None:
            gwh = dgates.T @ h
        if ebi is not None or ebh is not None:
            s = dgates.sum(axis=0)
            gbi = s if ebi is not None else None
            gbh = s if ebh is not None else None
        if self.unbatched:
            gx = None if gx is None else gx.reshape(-1)
            ghh = None if ghh is None else ghh.reshape(-1)
            gcc = None if gcc is None else gcc.reshape(-1)
        return gx, ghh, gcc, gwi, gwh, gbi, gbh


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step (torch.lstm_cell): hx = (h, c); gates i, f, g, o. Returns (h', c')."""
    h_t, c_t = hx
    x, h, unbatched = _cell_args(input, h_t, w_ih, w_hh, b_ih, b_hh, 4, "LSTMCell")
    c = c_t._data
    _same_dtype(x, c)
    if unbatched:
        c = c[None]
    if c.shape != h.shape:
        raise RuntimeError(f"cell state has inconsistent size: got {list(c.shape)}, expected {list(h.shape)}")
    wi, wh = w_ih._data, w_hh._data
    H = wh.shape[1]
    gates = x @ wi.T
    gates += h @ wh.T
    if b_ih is not None:
        gates += b_ih._data
    if b_hh is not None:
        gates += b_hh._data
    _sigmoid(gates[:, :2 * H], out=gates[:, :2 * H])
    np.tanh(gates[:, 2 * H:3 * H], out=gates[:, 2 * H:3 * H])
    _sigmoid(gates[:, 3 * H:], out=gates[:, 3 * H:])
    i, f, gg, o = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]
    c2 = f * c
    c2 += i * gg
    tc = np.tanh(c2)
    h2 = o * tc
    if unbatched:
        h2, c2o = h2.reshape(-1), c2.reshape(-1)
    else:
        c2o = c2
    if _needs_grad(input, h_t, c_t, w_ih, w_hh, b_ih, b_hh):
        nd = _node(LstmCellBackward0, (input._edge(), h_t._edge(), c_t._edge(), w_ih._edge(), w_hh._edge(),
                                       _edge(b_ih), _edge(b_hh)),
                   (x, h, c, wi, wh, gates, tc), _vcs(input, h_t, c_t, w_ih, w_hh))
        nd.unbatched = unbatched
        ht = _wrap(h2, nd)
        ct = _wrap(c2o, nd)
        ct._nr = 1
        return ht, ct
    return _wrap(h2), _wrap(c2o)


class _RNNCellBackward(Node):
    __slots__ = ("unbatched", "relu")

    def backward(self, g):
        ex, eh, ewi, ewh, ebi, ebh = self.next_edges
        x, h, w_ih, w_hh, out = self.saved
        if self.unbatched:
            g = g.reshape(1, -1)
        d = g * (out > 0) if self.relu else g * (1.0 - out * out)
        gx = gh = gwi = gwh = gbi = gbh = None
        if ex is not None:
            gx = d @ w_ih
            gx = gx.reshape(-1) if self.unbatched else gx
        if eh is not None:
            gh = d @ w_hh
            gh = gh.reshape(-1) if self.unbatched else gh
        if ewi is not None:
            gwi = d.T @ x
        if ewh is not None:
            gwh = d.T @ h
        if ebi is not None or ebh is not None:
            s = d.sum(axis=0)
            gbi = s if ebi is not None else None
            gbh = s if ebh is not None else None
        return gx, gh, gwi, gwh, gbi, gbh


_RNNCellBackward.__name__ = _RNNCellBackward.__qualname__ = "RNNCellBackward0"


def _rnn_cell(input, hx, w_ih, w_hh, b_ih, b_hh, relu):
    x, h, unbatched = _cell_args(input, hx, w_ih, w_hh, b_ih, b_hh, 1, "RNNCell")
    out = x @ w_ih._data.T
    out += h @ w_hh._data.T
    if b_ih is not None:
        out += b_ih._data
    if b_hh is not None:
        out += b_hh._data
    if relu:
        np.maximum(out, 0, out=out)
    else:
        np.tanh(out, out=out)
    y = out.reshape(-1) if unbatched else out
    if _needs_grad(input, hx, w_ih, w_hh, b_ih, b_hh):
        nd = _node(_RNNCellBackward, (input._edge(), hx._edge(), w_ih._edge(), w_hh._edge(), _edge(b_ih),
                                      _edge(b_hh)), (x, h, w_ih._data, w_hh._data, out), _vcs(input, hx, w_ih, w_hh))
        nd.unbatched = unbatched
        nd.relu = relu
        return _wrap(y, nd)
    return _wrap(y)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """h' = tanh(W_ih x + b_ih + W_hh h + b_hh)."""
    return _rnn_cell(input, hx, w_ih, w_hh, b_ih, b_hh, False)


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """h' = relu(W_ih x + b_ih + W_hh h + b_hh)."""
    return _rnn_cell(input, hx, w_ih, w_hh, b_ih, b_hh, True)


# ---------------------------------------------------------------------------------------------
# non-zero padding modes for the conv modules (reflect / replicate / circular)
# ---------------------------------------------------------------------------------------------
def _pad_index(L, before, after, mode):
    p = np.arange(-before, L + after)
    if mode == "reflect":
        if before >= L or after >= L:
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, but "
                               f"got: padding ({before}, {after}) at dimension of input of size {L}")
        p = np.abs(p)
        p = np.where(p >= L, 2 * (L - 1) - p, p)
    elif mode == "replicate":
        p = np.clip(p, 0, L - 1)
    elif mode == "circular":
        if before > L or after > L:
            raise RuntimeError("Padding value causes wrapping around more than once.")
        p = p % L
    else:
        raise NotImplementedError(f"padding mode '{mode}' is not supported")
    return p


class _ModePadBackward(Node):
    __slots__ = ()

    def backward(self, g):
        Ph, Pw = self.saved
        t = g @ Pw  # (..., Hp, W)
        if Ph is not None:
            t = np.matmul(Ph.T, t)  # (..., H, W)
        return (t,)


_ModePadBackward.__name__ = _ModePadBackward.__qualname__ = "ReflectionPad2DBackward0"


def _mode_pad(input, pads, mode):
    """Pad the trailing 1 or 2 dims: pads = [(before, after)] per padded dim, leading dim first."""
    x = input._data
    if len(pads) == 2:
        (pt, pb), (pl, pr) = pads
        H, W = x.shape[-2:]
        ih, iw = _pad_index(H, pt, pb, mode), _pad_index(W, pl, pr, mode)
        y = x[..., ih[:, None], iw[None, :]]
    else:
        ((pl, pr),) = pads
        W = x.shape[-1]
        ih, iw = None, _pad_index(W, pl, pr, mode)
        y = x[..., iw]
    if _needs_grad(input):
        Pw = np.zeros((iw.size, W), x.dtype)
        Pw[np.arange(iw.size), iw] = 1.0
        Ph = None
        if ih is not None:
            Ph = np.zeros((ih.size, H), x.dtype)
            Ph[np.arange(ih.size), ih] = 1.0
        return _wrap(y, _node(_ModePadBackward, (input._edge(),), (Ph, Pw)))
    return _wrap(y)
