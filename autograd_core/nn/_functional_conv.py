"""`conv1d`, `conv2d` and the non-zero padding modes: one fused im2col node each (torch.nn.functional's API).

conv2d works internally in channels-last (NHWC): the im2col windows then have contiguous inner
runs of kw*C elements (instead of Wo), which makes the gather ~5x cheaper at 12x16 inputs; one
BLAS GEMM does the MACs; results go back to contiguous NCHW so `.view()` works as in torch.
Backward col2im accumulates the kh*kw strided slices in a loop (no np.add.at).
"""
import numpy as np

from ..function import Node, saved_version
from ..tensor import _wrap
from ._functional_common import _check_float, _data, _edge, _needs_grad, _node, _pair, _same_dtype, _single

__all__ = ["conv1d", "conv2d"]

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
