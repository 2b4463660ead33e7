"""Recurrent cells (`gru_cell`, `lstm_cell`, `rnn_tanh_cell`, `rnn_relu_cell`) and the whole-sequence GRU layer.
"""
import numpy as np

from ..function import Node
from ..tensor import _wrap
from ._functional_common import _check_float, _data, _edge, _needs_grad, _node, _same_dtype, _sigmoid, _vcs

__all__ = ["gru_cell", "lstm_cell", "rnn_tanh_cell", "rnn_relu_cell"]

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
