"""Linear-algebra and NN graph ops (matmul, linear, conv2d, the pools, batch/layer norm, GRU and
LSTM cells) and the trace rules of the matrix products, nn.functional and the fused kernels."""
import numpy as np

from .._errors import TraceError
from ._table import A, C, F, dt, onnx_converter, op, rule

# ---------------------------------------------------------------------------------------------
# graph ops: ONNX mappings (the kernels are the runtime's `_kernels_nn`)
op("matmul", "MatMul")


@onnx_converter("linear")
def _onnx_linear(b, n):
    x, ins, out = n.inputs[0], n.inputs, n.outputs[0]
    w = ins[1]
    bias = ins[2] if len(ins) > 2 else None
    if len(b.shape(x)) == 2:
        return b.node("Gemm", [x, w] + ([bias] if bias else []), out, transB=1)
    m = b.node("MatMul", [x, b.transposed_weight(w)], None if bias else out)
    return b.node("Add", [m, bias], out) if bias else m


@onnx_converter("conv2d")
def _onnx_conv2d(b, n):
    a = n.attrs
    w = b.shape(n.inputs[1])
    return b.node("Conv", n.inputs, n.outputs[0], kernel_shape=list(w[2:]), strides=list(a["stride"]),
                  pads=list(a["pads"]), dilations=list(a["dilation"]), group=int(a["groups"]))


@onnx_converter("max_pool2d")
def _onnx_max_pool2d(b, n):
    a = n.attrs
    p = list(a["padding"])
    return b.node("MaxPool", [n.inputs[0]], n.outputs[0], kernel_shape=list(a["kernel_size"]),
                  strides=list(a["stride"]), pads=p + p, dilations=list(a.get("dilation", [1, 1])),
                  ceil_mode=int(a.get("ceil_mode", False)))


@onnx_converter("avg_pool2d")
def _onnx_avg_pool2d(b, n):
    x, a, out = n.inputs[0], n.attrs, n.outputs[0]
    p = list(a["padding"])
    k = list(a["kernel_size"])
    div = a.get("divisor_override")
    y = b.node("AveragePool", [x], None if div is not None else out, kernel_shape=k, strides=list(a["stride"]),
               pads=p + p, ceil_mode=int(a.get("ceil_mode", False)),
               count_include_pad=int(a.get("count_include_pad", True) or div is not None))
    if div is not None:
        return b.node("Mul", [y, b.const(k[0] * k[1] / float(div), b.dtype(x))], out)
    return y


@onnx_converter("adaptive_avg_pool2d")
def _onnx_adaptive_avg_pool2d(b, n):
    x, out = n.inputs[0], n.outputs[0]
    d = b.dtype(x)
    oh, ow = n.attrs["output_size"]
    h, w = b.shape(x)[-2:]
    if (oh, ow) == (1, 1):
        return b.node("GlobalAveragePool", [x], out)
    if h % oh == 0 and w % ow == 0:
        return b.node("AveragePool", [x], out, kernel_shape=[h // oh, w // ow], strides=[h // oh, w // ow])
    # torch's overlapping bins [floor(i h / oh), ceil((i + 1) h / oh)) as two averaging matrices
    y = b.node("MatMul", [x, b.const(_bins(w, ow, d).T)])
    return b.node("MatMul", [b.const(_bins(h, oh, d)), y], out)


def _bins(n, k, d):
    m = np.zeros((k, n), d)
    for i in range(k):
        s, e = (i * n) // k, -(-((i + 1) * n) // k)
        m[i, s:e] = 1.0 / (e - s)
    return m


@onnx_converter("batch_norm")
def _onnx_batch_norm(b, n):
    x, ins = n.inputs[0], n.inputs
    d = b.dtype(x)
    c = b.shape(x)[1]
    scale = ins[3] if len(ins) > 3 and ins[3] else b.const(np.ones(c, d))
    shift = ins[4] if len(ins) > 4 and ins[4] else b.const(np.zeros(c, d))
    return b.node("BatchNormalization", [x, scale, shift, ins[1], ins[2]], n.outputs[0], epsilon=float(n.attrs["eps"]))


@onnx_converter("layer_norm")
def _onnx_layer_norm(b, n):
    x, ins = n.inputs[0], n.inputs
    ns = list(n.attrs["normalized_shape"])
    scale = ins[1] if len(ins) > 1 and ins[1] else b.const(np.ones(ns, b.dtype(x)))
    bias = ins[2] if len(ins) > 2 and ins[2] else None
    if b.opset < 17:
        raise NotImplementedError("layer_norm needs opset >= 17 (LayerNormalization)")
    return b.node("LayerNormalization", [x, scale, bias], n.outputs[0], axis=-len(ns), epsilon=float(n.attrs["eps"]))


def _gates(b, x, h, w_ih, w_hh, b_ih, b_hh):
    gi = b.node("MatMul", [x, b.transposed_weight(w_ih)])
    if b_ih:
        gi = b.node("Add", [gi, b_ih])
    gh = b.node("MatMul", [h, b.transposed_weight(w_hh)])
    if b_hh:
        gh = b.node("Add", [gh, b_hh])
    return gi, gh


@onnx_converter("gru_cell")  # no RNN op: the recurrent state stays an explicit graph input and output
def _onnx_gru(b, n):
    ins, out = n.inputs, n.outputs[0]
    x, h, w_ih, w_hh = ins[:4]
    b_ih = ins[4] if len(ins) > 4 else None
    b_hh = ins[5] if len(ins) > 5 else None
    H = b.shape(w_hh)[1]
    gi, gh = _gates(b, x, h, w_ih, w_hh, b_ih, b_hh)
    sizes = b.ints([H, H, H])
    ir, iz, in_ = b.node("Split", [gi, sizes], [b.name("ir"), b.name("iz"), b.name("in")], axis=-1)
    hr, hz, hn = b.node("Split", [gh, sizes], [b.name("hr"), b.name("hz"), b.name("hn")], axis=-1)
    r = b.node("Sigmoid", [b.node("Add", [ir, hr])])
    z = b.node("Sigmoid", [b.node("Add", [iz, hz])])
    nn = b.node("Tanh", [b.node("Add", [in_, b.node("Mul", [r, hn])])])
    # h' = (1 - z) n + z h = n + z (h - n)
    return b.node("Add", [nn, b.node("Mul", [z, b.node("Sub", [h, nn])])], out)


@onnx_converter("lstm_cell")
def _onnx_lstm(b, n):
    ins, outs = n.inputs, n.outputs
    x, h, c, w_ih, w_hh = ins[:5]
    b_ih = ins[5] if len(ins) > 5 else None
    b_hh = ins[6] if len(ins) > 6 else None
    H = b.shape(w_hh)[1]
    gi, gh = _gates(b, x, h, w_ih, w_hh, b_ih, b_hh)
    g = b.node("Add", [gi, gh])
    i, f, gg, o = b.node("Split", [g, b.ints([H] * 4)], [b.name("gi"), b.name("gf"), b.name("gg"), b.name("go")],
                         axis=-1)
    c2 = b.node("Add", [b.node("Mul", [b.node("Sigmoid", [f]), c]),
                        b.node("Mul", [b.node("Sigmoid", [i]), b.node("Tanh", [gg])])], outs[1])
    b.node("Mul", [b.node("Sigmoid", [o]), b.node("Tanh", [c2])], outs[0])


# ---------------------------------------------------------------------------------------------
# trace rules: matrix products and linear
@rule(A + "matmul", A + "mm", A + "bmm", A + "mv", A + "dot", emits={"matmul"})
def _matmul(rec, v, out):
    d = dt(out)
    rec.emit("matmul", [rec.operand(v[0], d), rec.operand(v[1], d)], {}, [out])


@rule(A + "rmatmul", emits={"matmul"})
def _rmatmul(rec, v, out):
    d = dt(out)
    rec.emit("matmul", [rec.operand(v[1], d), rec.operand(v[0], d)], {}, [out])


@rule(A + "outer", emits={"reshape", "mul"})
def _outer(rec, v, out):
    a, b = v[0], v[1]
    d = dt(out)
    an = rec.tmp("reshape", [rec.operand(a, d)], {"shape": [a._data.size, 1]}, (a._data.size, 1), d)
    bn = rec.tmp("reshape", [rec.operand(b, d)], {"shape": [1, b._data.size]}, (1, b._data.size), d)
    rec.emit("mul", [an, bn], {}, [out])


@rule(F + "linear", emits={"linear", "transpose", "matmul", "add"})
def _linear(rec, v, out):
    x, w, b = v[0], v[1], v[2]
    d = dt(out)
    xn, wn = rec.v(x), rec.v(w)
    bn = None if b is None else rec.v(b)
    if wn in rec.const_names and (bn is None or bn in rec.const_names):
        rec.emit("linear", [xn, wn] + ([bn] if bn is not None else []), {}, [out])
        return
    wt = rec.tmp("transpose", [wn], {"perm": [1, 0]}, w._data.shape[::-1], d)
    if bn is None:
        rec.emit("matmul", [xn, wt], {}, [out])
    else:
        m = rec.tmp("matmul", [xn, wt], {}, out._data.shape, d)
        rec.emit("add", [m, bn], {}, [out])


# ---------------------------------------------------------------------------------------------
# trace rules: convolution and pooling (the graph ops are 4-D; unbatched and 1-d calls reshape)
def _with_batch(rec, x, out, gop, ins, attrs):
    """Emit `gop` on a 4-D view when x is unbatched (3-D)."""
    if x._data.ndim == 4:
        rec.emit(gop, [rec.v(x)] + ins, attrs, [out])
        return
    xs = (1,) + x._data.shape
    xn = rec.tmp("reshape", [rec.v(x)], {"shape": list(xs)}, xs, dt(x))
    y = rec.tmp(gop, [xn] + ins, attrs, (1,) + out._data.shape, dt(x))
    rec.emit("reshape", [y], {"shape": list(out._data.shape)}, [out])


@rule(C + "conv2d", emits={"conv2d", "reshape"})
def _conv2d(rec, v, out):
    from ...nn import _functional_cnn as FC
    x, w, b, stride, padding, dilation, groups = v[:7]
    s, d = list(FC._pair(stride)), list(FC._pair(dilation))
    (pt, pb), (pl, pr) = FC._conv_padding(padding, w._data.shape[2:], d, s)
    attrs = {"stride": s, "pads": [pt, pl, pb, pr], "dilation": d, "groups": int(groups)}
    _with_batch(rec, x, out, "conv2d", [rec.v(w)] + ([] if b is None else [rec.v(b)]), attrs)


@rule(C + "conv1d", emits={"conv2d", "reshape"})
def _conv1d(rec, v, out):
    from ...nn import _functional_cnn as FC
    x, w, b, stride, padding, dilation, groups = v[:7]
    k = w._data.shape[2]
    s, d = FC._single(stride), FC._single(dilation)
    ((pl, pr),) = FC._conv_padding(padding, (k,), (d,), (s,))
    t = dt(x)
    xs = (x._data.shape[:-1] if x._data.ndim == 3 else (1,) + x._data.shape[:-1]) + (1, x._data.shape[-1])
    xn = rec.tmp("reshape", [rec.v(x)], {"shape": list(xs)}, xs, t)
    ws = w._data.shape[:2] + (1, k)
    wn = rec.tmp("reshape", [rec.v(w)], {"shape": list(ws)}, ws, t)
    os = (xs[0], w._data.shape[0], 1, out._data.shape[-1])
    y = rec.tmp("conv2d", [xn, wn] + ([] if b is None else [rec.v(b)]),
                {"stride": [1, s], "pads": [0, pl, 0, pr], "dilation": [1, d], "groups": int(groups)}, os, t)
    rec.emit("reshape", [y], {"shape": list(out._data.shape)}, [out])


def _pool_attrs(kernel_size, stride, padding, dilation):
    from ...nn import _functional_cnn as FC
    k = list(FC._pair(kernel_size))
    if stride is None or (not isinstance(stride, (int, np.integer)) and len(stride) == 0):
        s = list(k)
    else:
        s = list(FC._pair(stride))
    return k, s, list(FC._pair(padding)), list(FC._pair(dilation))


@rule(C + "max_pool2d", emits={"max_pool2d", "reshape"})
def _max_pool2d(rec, v, out):
    x, kernel_size, stride, padding, dilation, ceil_mode, return_indices = v[:7]
    if return_indices:
        raise TraceError("max_pool2d(return_indices=True) is not supported by autograd_core.export")
    k, s, p, d = _pool_attrs(kernel_size, stride, padding, dilation)
    attrs = {"kernel_size": k, "stride": s, "padding": p, "dilation": d, "ceil_mode": bool(ceil_mode)}
    _with_batch(rec, x, out, "max_pool2d", [], attrs)


@rule(C + "avg_pool2d", emits={"avg_pool2d", "reshape"})
def _avg_pool2d(rec, v, out):
    x, kernel_size, stride, padding, ceil_mode, cip, div = v[:7]
    k, s, p, _ = _pool_attrs(kernel_size, stride, padding, 1)
    attrs = {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": bool(ceil_mode),
             "count_include_pad": bool(cip), "divisor_override": None if div is None else float(div)}
    _with_batch(rec, x, out, "avg_pool2d", [], attrs)


@rule(C + "adaptive_avg_pool2d", emits={"adaptive_avg_pool2d", "reshape"})
def _adaptive_avg_pool2d(rec, v, out):
    _with_batch(rec, v[0], out, "adaptive_avg_pool2d", [],
                {"output_size": [int(s) for s in out._data.shape[-2:]]})


def _pool1d(gop, fixup):
    def lower(rec, v, out):
        x = v[0]
        t = dt(x)
        xs = x._data.shape[:-1] + (1, x._data.shape[-1])
        xn = rec.tmp("reshape", [rec.v(x)], {"shape": list(xs)}, xs, t)
        os = out._data.shape[:-1] + (1, out._data.shape[-1])
        attrs = fixup(v)
        if len(xs) == 3:
            xs4 = (1,) + xs
            xn = rec.tmp("reshape", [xn], {"shape": list(xs4)}, xs4, t)
            os = (1,) + os
        y = rec.tmp(gop, [xn], attrs, os, t)
        rec.emit("reshape", [y], {"shape": list(out._data.shape)}, [out])
    return lower


def _stride1d(FC, k, stride):
    if stride is None or (not isinstance(stride, (int, np.integer)) and len(stride) == 0):
        return k
    return FC._single(stride)


def _mp1d_attrs(v):
    from ...nn import _functional_cnn as FC
    _, kernel_size, stride, padding, dilation, ceil_mode, return_indices = v[:7]
    if return_indices:
        raise TraceError("max_pool1d(return_indices=True) is not supported by autograd_core.export")
    k = FC._single(kernel_size)
    return {"kernel_size": [1, k], "stride": [1, _stride1d(FC, k, stride)], "padding": [0, FC._single(padding)],
            "dilation": [1, FC._single(dilation)], "ceil_mode": bool(ceil_mode)}


def _ap1d_attrs(v):
    from ...nn import _functional_cnn as FC
    _, kernel_size, stride, padding, ceil_mode, cip = v[:6]
    k = FC._single(kernel_size)
    return {"kernel_size": [1, k], "stride": [1, _stride1d(FC, k, stride)], "padding": [0, FC._single(padding)],
            "ceil_mode": bool(ceil_mode), "count_include_pad": bool(cip), "divisor_override": None}


rule(C + "max_pool1d", emits={"max_pool2d", "reshape"})(_pool1d("max_pool2d", _mp1d_attrs))
rule(C + "avg_pool1d", emits={"avg_pool2d", "reshape"})(_pool1d("avg_pool2d", _ap1d_attrs))
rule(C + "adaptive_avg_pool1d", emits={"adaptive_avg_pool2d", "reshape"})(_pool1d(
    "adaptive_avg_pool2d", lambda v: {"output_size": [1, int(v[1] if not isinstance(v[1], (tuple, list))
                                                             else v[1][0])]}))


# ---------------------------------------------------------------------------------------------
# trace rules: normalisation, dropout, recurrent cells
def _optional_tail(ins):
    while ins[-1] is None:
        ins.pop()
    return ins


@rule(C + "batch_norm", emits={"batch_norm"})
def _batch_norm(rec, v, out):
    x, rm, rv, w, b, training, momentum, eps = v[:8]
    if training:
        raise TraceError("batch_norm(training=True) cannot be exported: trace the module in eval mode "
                         "(trace() calls .eval()) or pass training=False")
    if rm is None or rv is None:
        raise TraceError("batch_norm without running statistics cannot be exported")
    ins = [rec.v(x), rec.v(rm), rec.v(rv), None if w is None else rec.v(w), None if b is None else rec.v(b)]
    rec.emit("batch_norm", _optional_tail(ins), {"eps": float(eps)}, [out])


@rule(C + "layer_norm", emits={"layer_norm"})
def _layer_norm(rec, v, out):
    x, ns, w, b, eps = v[:5]
    ns = [int(ns)] if isinstance(ns, (int, np.integer)) else [int(s) for s in ns]
    ins = [rec.v(x), None if w is None else rec.v(w), None if b is None else rec.v(b)]
    rec.emit("layer_norm", _optional_tail(ins), {"normalized_shape": ns, "eps": float(eps)}, [out])


@rule(C + "dropout", C + "dropout1d", C + "dropout2d", emits=())
def _dropout(rec, v, out):
    x, p, training = v[0], v[1], v[2]
    if training and p > 0:
        raise TraceError("dropout in training mode cannot be exported (it is random); trace in eval mode")
    if out is not x:
        rec.alias(out, rec.v(x))


def _cell_ins(rec, x, hs, w_ih, w_hh, b_ih, b_hh):
    ins = _optional_tail([rec.v(x)] + [rec.v(h) for h in hs] + [
        rec.v(w_ih), rec.v(w_hh), None if b_ih is None else rec.v(b_ih), None if b_hh is None else rec.v(b_hh)])
    for n in ins[1 + len(hs):]:
        if n is not None and n not in rec.const_names:
            raise TraceError("recurrent-cell weights computed from traced values are not supported by "
                             "autograd_core.export (they must be parameters)")
    return ins


@rule(C + "gru_cell", emits={"gru_cell"})
def _gru_cell(rec, v, out):
    x, h, w_ih, w_hh, b_ih, b_hh = v[:6]
    rec.emit("gru_cell", _cell_ins(rec, x, [h], w_ih, w_hh, b_ih, b_hh), {}, [out])


@rule(C + "lstm_cell", emits={"lstm_cell"})
def _lstm_cell(rec, v, out):
    x, hx, w_ih, w_hh, b_ih, b_hh = v[:6]
    h, c = hx
    rec.emit("lstm_cell", _cell_ins(rec, x, [h, c], w_ih, w_hh, b_ih, b_hh), {}, list(out))


def _rnn_cell(act):
    def lower(rec, v, out):
        x, h, w_ih, w_hh, b_ih, b_hh = v[:6]
        d = dt(out)
        sh = out._data.shape
        a = rec.tmp("linear", [rec.v(x), rec.v(w_ih)] + ([] if b_ih is None else [rec.v(b_ih)]), {}, sh, d)
        bb = rec.tmp("linear", [rec.v(h), rec.v(w_hh)] + ([] if b_hh is None else [rec.v(b_hh)]), {}, sh, d)
        s = rec.tmp("add", [a, bb], {}, sh, d)
        rec.emit(act, [s], {}, [out])
    return lower


rule(C + "rnn_tanh_cell", emits={"linear", "add", "tanh"})(_rnn_cell("tanh"))
rule(C + "rnn_relu_cell", emits={"linear", "add", "relu"})(_rnn_cell("relu"))


@rule(C + "_gru_layer", emits={"getitem", "gru_cell", "stack"})
def _gru_layer(rec, v, out):
    """A whole GRU layer over (T, B, I): unrolled into T gru_cell nodes (T is static)."""
    x, h0, w_ih, w_hh, b_ih, b_hh = v[:6]
    reverse = bool(v[6]) if len(v) > 6 else False
    Y, hlast = out
    T, B, _ = x._data.shape
    H = h0._data.shape[-1]
    t = dt(x)
    wins = _optional_tail([rec.v(w_ih), rec.v(w_hh), None if b_ih is None else rec.v(b_ih),
                           None if b_hh is None else rec.v(b_hh)])
    xn = rec.v(x)
    steps = [None] * T
    h = rec.v(h0)
    order = range(T - 1, -1, -1) if reverse else range(T)
    for i in order:
        sl = [i, i + 1, 1, 0, B, 1, 0, x._data.shape[2], 1]
        xt = rec.tmp("getitem", [xn], {"slices": sl, "shape": [B, x._data.shape[2]]}, (B, x._data.shape[2]), t)
        h = rec.tmp("gru_cell", [xt, h] + wins, {}, (B, H), t)
        steps[i] = h
    rec.emit("stack", steps, {"axis": 0}, [Y])
    rec.alias(hlast, h)
