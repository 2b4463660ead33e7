"""Linear algebra and the fused NN kernels: matmul, linear, conv2d, pooling, normalisation, recurrent cells.
"""
from functools import partial

import numpy as np

from ._ctx import _as_strided, _ew, _gemm, _lead, _nhwc, _out_dtype, _strict_view

# ---------------------------------------------------------------------------------------------
# linear algebra and the fused NN kernels
def build_matmul(c):
    c.n_in(2)
    a, b = c.need(0), c.need(1)
    if a.ndim == 0 or b.ndim == 0:
        c.fail("matmul needs 1-D or higher operands")
    try:
        shape = _matmul_shape(c, a.shape, b.shape)
    except ValueError:
        c.fail(f"shapes {a.shape} and {b.shape} cannot be multiplied")
    o = c.out(0, shape, _out_dtype(c, np.result_type(a, b)))
    if c.const[1] and b.ndim == 2 and not b.flags.c_contiguous:
        b = c.copy_of(b)
    return [_gemm(a, b, o)]


def _matmul_shape(c, sa, sb):
    a1, b1 = len(sa) == 1, len(sb) == 1
    sa2 = (1,) + tuple(sa) if a1 else tuple(sa)
    sb2 = tuple(sb) + (1,) if b1 else tuple(sb)
    if sa2[-1] != sb2[-2]:
        raise ValueError
    batch = np.broadcast_shapes(sa2[:-2], sb2[:-2])
    shape = batch + (sa2[-2], sb2[-1])
    if a1:
        shape = shape[:-2] + shape[-1:]
    if b1:
        shape = shape[:-1]
    return shape


def build_linear(c):
    """y = x W^T + b, W (out, in) a constant: stored transposed and contiguous once."""
    c.n_in(2, 3)
    x = c.need(0)
    w = c.need_const(1)
    b = c.x(2)
    if w.ndim != 2 or x.ndim < 1 or x.shape[-1] != w.shape[1]:
        c.fail(f"input {x.shape} does not match weight {w.shape}")
    wt = c.copy_of(w.T)
    o = c.out(0, x.shape[:-1] + (w.shape[0],), x.dtype)
    th = [_gemm(x, wt, o)]
    if b is not None:
        if b.shape != (w.shape[0],):
            c.fail(f"bias shape {b.shape} does not match weight {w.shape}")
        th.append(partial(np.add, o, _lead(b, o.ndim), o))
    return th


def _pair(c, name, default=None):
    v = c.attr(name, "ints", default)
    if v is None or len(v) != 2:
        c.fail(f"attribute {name!r} must be two ints")
    return v


def _pad_input(c, x, top, left, bottom, right, value):
    """A fixed padded copy of NCHW `x`: returns (array to read, thunks refilling it)."""
    if min(top, left, bottom, right) < 0:
        c.fail("negative padding")
    if not (top or left or bottom or right):
        return x, []
    n, ch, h, w = x.shape
    xp = c.tmp((n, ch, h + top + bottom, w + left + right), x.dtype, value)
    return xp, [partial(np.copyto, xp[:, :, top:top + h, left:left + w], x)]


def build_conv2d(c):
    """Convolution as im2col + one GEMM. groups == 1 (the common case) works channels-last: the
    output buffer is (N, OH, OW, OC) exposed as an NCHW-shaped view, element-wise consumers keep
    that layout, and the next conv gathers its windows in contiguous runs of kw * C values. The
    im2col buffer's last column is ones and the weight's last row the bias: the bias rides in the
    GEMM."""
    c.n_in(2, 3)
    x = c.need(0)
    w = c.need_const(1)
    b = c.x(2)
    if b is not None and not c.const[2]:
        c.fail("bias must be a constant")
    sh, sw = _pair(c, "stride")
    pads = c.attr("pads", "ints")
    if len(pads) != 4:
        c.fail("pads must be [top, left, bottom, right]")
    dh, dw = _pair(c, "dilation")
    g = c.attr("groups", "int")
    if x.ndim != 4 or w.ndim != 4:
        c.fail(f"expects a 4-D input and weight, got {x.shape} and {w.shape}")
    if min(sh, sw, dh, dw, g) < 1 or min(pads) < 0:
        c.fail("bad stride/padding/dilation/groups")
    n, ch, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    if ch != cg * g or oc % g:
        c.fail(f"input channels {ch} / weight {w.shape} / groups {g} do not match")
    if b is not None and b.shape != (oc,):
        c.fail(f"bias shape {b.shape} does not match {oc} output channels")
    top, left, bottom, right = pads
    hp, wp = h + top + bottom, wd + left + right
    oh = (hp - dh * (kh - 1) - 1) // sh + 1
    ow = (wp - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        c.fail("the kernel is larger than the (padded) input")
    dt = x.dtype
    if g == 1:
        return _conv2d_nhwc(c, x, w, b, (sh, sw), pads, (dh, dw), (oh, ow))
    # grouped: NCHW im2col, one batched GEMM over the groups
    xp, th = _pad_input(c, x, top, left, bottom, right, 0)
    L = oh * ow
    K = cg * kh * kw
    o = c.out(0, (n, oc, oh, ow), dt)
    ocg = oc // g
    kb = K + (1 if b is not None else 0)
    w2 = c.tmp((g, ocg, kb), dt)
    w2[:, :, :K] = w.reshape(g, ocg, K)
    if b is not None:
        w2[:, :, K] = b.reshape(g, ocg)
    col = c.tmp((n, g, kb, L), dt, 1)
    s0, s1, s2, s3 = xp.strides
    src = _as_strided(xp, (n, g, cg, kh, kw, oh, ow), (s0, s1 * cg, s1, s2 * dh, s3 * dw, s2 * sh, s3 * sw),
                      writeable=False)
    dst = _strict_view(col[:, :, :K, :], (n, g, cg, kh, kw, oh, ow))  # the bias row stays ones
    o4 = o.reshape(n, g, ocg, L)
    return th + [partial(np.copyto, dst, src), partial(np.matmul, w2, col, o4)]


def _conv2d_nhwc(c, x, w, b, stride, pads, dil, out_hw):
    n, ch, h, wd = x.shape
    oc, _, kh, kw = w.shape
    (sh, sw), (dh, dw), (oh, ow) = stride, dil, out_hw
    top, left, bottom, right = pads
    dt = x.dtype
    xv = _nhwc(x)
    th = []
    if top or left or bottom or right or xv is None:
        xp = c.tmp((n, h + top + bottom, wd + left + right, ch), dt)
        th.append(partial(np.copyto, xp[:, top:top + h, left:left + wd, :], x.transpose(0, 2, 3, 1)))
    else:
        xp = xv
    K = kh * kw * ch
    kb = K + (1 if b is not None else 0)
    M = n * oh * ow
    w2 = c.tmp((kb, oc), dt)
    w2[:K] = w.transpose(2, 3, 1, 0).reshape(K, oc)
    if b is not None:
        w2[K] = b
    ob = c.tmp((n, oh, ow, oc), dt)
    c.alias(0, ob.transpose(0, 3, 1, 2))
    o2 = ob.reshape(M, oc)
    if kh == kw == sh == sw == 1 and b is None:  # 1x1: the input is already the im2col matrix
        return th + [_gemm(xp.reshape(M, ch), w2, o2)]
    col = c.tmp((M, kb), dt, 1)
    s0, s1, s2, s3 = xp.strides
    src = _as_strided(xp, (n, oh, ow, kh, kw, ch), (s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3), writeable=False)
    dst = _strict_view(col[:, :K], (n, oh, ow, kh, kw, ch))
    return th + [partial(np.copyto, dst, src), _gemm(col, w2, o2)]


def _pool_geometry(c, x, k, s, p, d, ceil_mode):
    n, ch, h, w = x.shape
    out = []
    extra = []
    for size, kk, ss, pp, dd in ((h, k[0], s[0], p[0], d[0]), (w, k[1], s[1], p[1], d[1])):
        span = dd * (kk - 1) + 1
        if pp > kk // 2:
            c.fail("pad should be at most half of the kernel size")
        num = size + 2 * pp - span
        if num < 0:
            c.fail("the kernel is larger than the (padded) input")
        if ceil_mode:
            o = -(-num // ss) + 1
            if (o - 1) * ss >= size + pp:  # the last window must start inside the input or left pad
                o -= 1
        else:
            o = num // ss + 1
        out.append(o)
        extra.append(max(0, (o - 1) * ss + span - (size + 2 * pp)))
    return out, extra


def _pool_attrs(c):
    k = _pair(c, "kernel_size")
    s = _pair(c, "stride")
    p = _pair(c, "padding")
    if min(k) < 1 or min(s) < 1 or min(p) < 0:
        c.fail("bad kernel/stride/padding")
    return k, s, p, c.attr("ceil_mode", "bool", False)


def build_max_pool2d(c):
    c.n_in(1)
    x = c.need(0)
    if x.ndim != 4:
        c.fail(f"expects NCHW input, got {x.shape}")
    k, s, p, ceil_mode = _pool_attrs(c)
    d = _pair(c, "dilation", [1, 1])
    (oh, ow), extra = _pool_geometry(c, x, k, s, p, d, ceil_mode)
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp, th = _pad_input(c, x, p[0], p[1], p[0] + extra[0], p[1] + extra[1], fill)
    n, ch = x.shape[:2]
    o = c.out(0, (n, ch, oh, ow), x.dtype)
    s0, s1, s2, s3 = xp.strides
    if k[0] == s[0] and k[1] == s[1] and d == [1, 1] and xp.shape[2] == oh * k[0] and xp.shape[3] == ow * k[1] \
            and xp.flags.c_contiguous:
        v = xp.reshape(n, ch, oh, k[0], ow, k[1])
        return th + [partial(np.max, v, axis=(3, 5), out=o)]
    v = _as_strided(xp, (n, ch, oh, ow, k[0], k[1]), (s0, s1, s2 * s[0], s3 * s[1], s2 * d[0], s3 * d[1]),
                    writeable=False)
    return th + [partial(np.max, v, axis=(4, 5), out=o)]


def build_avg_pool2d(c):
    c.n_in(1)
    x = c.need(0)
    if x.ndim != 4:
        c.fail(f"expects NCHW input, got {x.shape}")
    k, s, p, ceil_mode = _pool_attrs(c)
    cip = c.attr("count_include_pad", "bool", True)
    div = c.attr("divisor_override", "float?", None)
    (oh, ow), extra = _pool_geometry(c, x, k, s, p, [1, 1], ceil_mode)
    xp, th = _pad_input(c, x, p[0], p[1], p[0] + extra[0], p[1] + extra[1], 0)
    n, ch, h, w = x.shape
    o = c.out(0, (n, ch, oh, ow), x.dtype)
    s0, s1, s2, s3 = xp.strides
    v = _as_strided(xp, (n, ch, oh, ow, k[0], k[1]), (s0, s1, s2 * s[0], s3 * s[1], s2, s3), writeable=False)
    th.append(partial(np.sum, v, axis=(4, 5), out=o))
    if div is not None:
        th.append(partial(np.divide, o, x.dtype.type(div), o))
        return th
    # torch's divisor: window clipped to the padded input (count_include_pad) or to the input;
    # separable, so (rows' counts) x (columns' counts)
    counts = []
    for size, kk, ss, pp, num in ((h, k[0], s[0], p[0], oh), (w, k[1], s[1], p[1], ow)):
        a0 = np.arange(num, dtype=np.int64) * ss - pp
        a1 = np.minimum(a0 + kk, size + pp)
        counts.append(a1 - a0 if cip else np.minimum(a1, size) - np.maximum(a0, 0))
    cnt = c.tmp((oh, ow), np.float64)
    np.multiply.outer(counts[0], counts[1], out=cnt, casting="unsafe")
    if np.all(cnt == cnt.flat[0]):
        th.append(partial(np.multiply, o, x.dtype.type(1.0 / cnt.flat[0]), o))
    else:
        th.append(partial(np.divide, o, c.copy_of(cnt, x.dtype), o))
    return th


def _window_means(c, size, out_size, dtype, transposed=False):
    """(out_size, size) matrix (or its transpose, contiguous) whose row i averages torch's adaptive
    window [floor(i size / out_size), ceil((i + 1) size / out_size)); vectorised, counted buffers."""
    i = np.arange(out_size, dtype=np.int64)
    a, b = (i * size) // out_size, -(-((i + 1) * size) // out_size)
    j = np.arange(size, dtype=np.int64)
    shape = (size, out_size) if transposed else (out_size, size)
    if transposed:
        a, b, inv, j = a[None, :], b[None, :], 1.0 / (b - a)[None, :], j[:, None]
    else:
        a, b, inv, j = a[:, None], b[:, None], 1.0 / (b - a)[:, None], j[None, :]
    inside, below = c.tmp(shape, bool), c.tmp(shape, bool)
    np.less_equal(a, j, out=inside)
    np.less(j, b, out=below)
    np.logical_and(inside, below, out=inside)
    m = c.tmp(shape, dtype)
    np.multiply(inside, inv, out=m, casting="unsafe")
    return m


def build_adaptive_avg_pool2d(c):
    c.n_in(1)
    x = c.need(0)
    if x.ndim != 4:
        c.fail(f"expects NCHW input, got {x.shape}")
    oh, ow = _pair(c, "output_size")
    if oh < 1 or ow < 1:
        c.fail(f"output_size {[oh, ow]} must be positive")
    n, ch, h, w = x.shape
    if h < 1 or w < 1:
        c.fail(f"expects a non-empty image, got {x.shape}")
    o = c.out(0, (n, ch, oh, ow), x.dtype)
    if h % oh == 0 and w % ow == 0:
        v = x.reshape(n, ch, oh, h // oh, ow, w // ow) if x.flags.c_contiguous else None
        if v is not None and np.shares_memory(v, x):
            return [partial(np.mean, v, axis=(3, 5), out=o)]
    # general: the window means are separable, o = Rows @ x @ Cols^T (two GEMMs, any output size)
    rows = _window_means(c, h, oh, x.dtype)
    cols_t = _window_means(c, w, ow, x.dtype, transposed=True)
    t = c.tmp((n, ch, h, ow), x.dtype)
    return [partial(np.matmul, x, cols_t, t), partial(np.matmul, rows, t, o)]


def build_batch_norm(c):
    """Inference batch norm over dim 1: y = x * scale + shift, folded once from the statistics."""
    c.n_in(3, 5)
    x = c.need(0)
    mean, var = c.need_const(1), c.need_const(2)
    w, b = c.x(3), c.x(4)
    for i in (3, 4):
        if c.x(i) is not None and not c.const[i]:
            c.fail("batch-norm weight and bias must be constants")
    eps = c.attr("eps", "float")
    if x.ndim < 2:
        c.fail("expects at least 2-D input")
    ch = x.shape[1]
    for a in (mean, var, w, b):
        if a is not None and a.shape != (ch,):
            c.fail(f"parameter shape {a.shape} does not match {ch} channels")
    scale = 1.0 / np.sqrt(var.astype(np.float64) + eps)
    if w is not None:
        scale = scale * w
    shift = -mean * scale
    if b is not None:
        shift = shift + b
    bshape = (ch,) + (1,) * (x.ndim - 2)
    scale = scale.astype(x.dtype).reshape(bshape)
    shift = shift.astype(x.dtype).reshape(bshape)
    o = c.out(0, x.shape, x.dtype, like=x)
    o, x, scale, shift = _ew(o, x, scale, shift)
    return [partial(np.multiply, x, scale, o), partial(np.add, o, shift, o)]


def build_layer_norm(c):
    c.n_in(1, 3)
    x = c.need(0)
    shape = tuple(c.attr("normalized_shape", "ints"))
    eps = c.attr("eps", "float")
    k = len(shape)
    if k == 0 or x.shape[-k:] != shape:
        c.fail(f"normalized_shape {shape} does not match input {x.shape}")
    axes = tuple(range(x.ndim - k, x.ndim))
    rshape = x.shape[:x.ndim - k] + (1,) * k
    o = c.out(0, x.shape, x.dtype)
    mu = c.tmp(rshape, x.dtype)
    var = c.tmp(rshape, x.dtype)
    sq = c.tmp(x.shape, x.dtype)
    th = [partial(np.mean, x, axis=axes, keepdims=True, out=mu), partial(np.subtract, x, mu, o),
          partial(np.multiply, o, o, sq), partial(np.mean, sq, axis=axes, keepdims=True, out=var),
          partial(np.add, var, x.dtype.type(eps), var), partial(np.sqrt, var, var),
          partial(np.divide, o, var, o)]
    if c.x(1) is not None:
        th.append(partial(np.multiply, o, c.x(1), o))
    if c.x(2) is not None:
        th.append(partial(np.add, o, c.x(2), o))
    return th


def _rnn_weights(c, first_w, n_gates):
    x, h = c.need(0), c.need(1)
    w_ih, w_hh = c.need_const(first_w), c.need_const(first_w + 1)
    b_ih, b_hh = c.x(first_w + 2), c.x(first_w + 3)
    for i in (first_w + 2, first_w + 3):
        if c.x(i) is not None and not c.const[i]:
            c.fail("biases must be constants")
    hid = h.shape[-1] if h.ndim else -1
    if (x.ndim not in (1, 2) or h.ndim != x.ndim or w_ih.shape != (n_gates * hid, x.shape[-1])
            or w_hh.shape != (n_gates * hid, hid) or (x.ndim == 2 and x.shape[0] != h.shape[0])):
        c.fail(f"shapes input {x.shape}, hidden {h.shape}, w_ih {w_ih.shape}, w_hh {w_hh.shape} do not match")
    for bb in (b_ih, b_hh):
        if bb is not None and bb.shape != (n_gates * hid,):
            c.fail(f"bias shape {bb.shape} does not match")
    zeros = np.zeros(n_gates * hid, x.dtype)
    return x, h, w_ih, w_hh, (zeros if b_ih is None else b_ih), (zeros if b_hh is None else b_hh), hid


def build_gru_cell(c):
    """torch's GRUCell: r, z = σ(.), n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = n + z (h - n).

    σ(a) = (1 + tanh(a / 2)) / 2: the r, z rows of the weights and biases are pre-scaled by 1/2 so the
    GEMMs emit a / 2 directly."""
    c.n_in(4, 6)
    x, h, w_ih, w_hh, b_ih, b_hh, H = _rnn_weights(c, 2, 3)
    dt = x.dtype
    half = np.ones(3 * H)
    half[:2 * H] = 0.5
    wi = c.copy_of((w_ih * half[:, None]).T, dt)
    wh = c.copy_of((w_hh * half[:, None]).T, dt)
    bi = (b_ih * half).astype(dt)
    bi[:2 * H] += (b_hh[:2 * H] * 0.5).astype(dt)
    bhn = b_hh[2 * H:].astype(dt)
    lead = x.shape[:-1]
    gi = c.tmp(lead + (3 * H,), dt)
    gh = c.tmp(lead + (3 * H,), dt)
    t = c.tmp(lead + (H,), dt)
    o = c.out(0, h.shape, dt)
    rz, ghrz = gi[..., :2 * H], gh[..., :2 * H]
    r, z = gi[..., :H], gi[..., H:2 * H]
    gin, ghn = gi[..., 2 * H:], gh[..., 2 * H:]
    bi, bhn = _lead(bi, gi.ndim), _lead(bhn, gi.ndim)
    return [_gemm(x, wi, gi), partial(np.add, gi, bi, gi),
            _gemm(h, wh, gh), partial(np.add, ghn, bhn, ghn),
            partial(np.add, rz, ghrz, rz), partial(np.tanh, rz, rz),       # tanh(a/2)
            partial(np.multiply, rz, dt.type(0.5), rz), partial(np.add, rz, dt.type(0.5), rz),  # σ(a)
            partial(np.multiply, r, ghn, t), partial(np.add, t, gin, t), partial(np.tanh, t, t),
            partial(np.subtract, h, t, o), partial(np.multiply, o, z, o), partial(np.add, o, t, o)]


def build_lstm_cell(c):
    """torch's LSTMCell (gate order i, f, g, o): c' = f c + i g, h' = o tanh(c')."""
    c.n_in(5, 7)
    x, h, w_ih, w_hh, b_ih, b_hh, H = _rnn_weights(c, 3, 4)
    cx = c.need(2)
    if cx.shape != h.shape:
        c.fail(f"cell state {cx.shape} does not match hidden state {h.shape}")
    dt = x.dtype
    sc = np.full(4 * H, 0.5)
    sc[2 * H:3 * H] = 1.0  # the g gate is a tanh: not halved
    wi = c.copy_of((w_ih * sc[:, None]).T, dt)
    wh = c.copy_of((w_hh * sc[:, None]).T, dt)
    bias = ((b_ih + b_hh) * sc).astype(dt)
    lead = x.shape[:-1]
    gates = c.tmp(lead + (4 * H,), dt)
    gh = c.tmp(lead + (4 * H,), dt)
    t = c.tmp(lead + (H,), dt)
    ho = c.out(0, h.shape, dt)
    co = c.out(1, h.shape, dt)
    i, f, g, og = (gates[..., k * H:(k + 1) * H] for k in range(4))
    ifo = [i, f, og]
    th = [_gemm(x, wi, gates), _gemm(h, wh, gh),
          partial(np.add, gates, gh, gates), partial(np.add, gates, _lead(bias, gates.ndim), gates),
          partial(np.tanh, gates, gates)]
    for a in ifo:
        th += [partial(np.multiply, a, dt.type(0.5), a), partial(np.add, a, dt.type(0.5), a)]
    th += [partial(np.multiply, f, cx, co), partial(np.multiply, i, g, t), partial(np.add, co, t, co),
           partial(np.tanh, co, t), partial(np.multiply, og, t, ho)]
    return th


KERNELS = {
    "matmul": build_matmul, "linear": build_linear, "conv2d": build_conv2d, "max_pool2d": build_max_pool2d,
    "avg_pool2d": build_avg_pool2d, "adaptive_avg_pool2d": build_adaptive_avg_pool2d,
    "batch_norm": build_batch_norm, "layer_norm": build_layer_norm, "gru_cell": build_gru_cell,
    "lstm_cell": build_lstm_cell,
}
