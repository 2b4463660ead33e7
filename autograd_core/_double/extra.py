"""Differentiable backward formulas (`backward_t`, see the package docstring) for the recurrent cell kernels,
`prod` at exact zeros, and the ops that came with NumPy-only backwards: tril/triu, topk/sort, the
scatter family, embedding and Categorical.log_prob.

Imported by the package `__init__`, so they are attached whenever the graph-recording sweep runs; the NumPy
`backward` of each node (the first-order fast path) is untouched.

The recurrent formulas mirror the NumPy ones in `nn/_functional_rnn.py` on Tensors. The gate
activations are rebuilt from their saved values as sigmoid/tanh nodes whose input is the gate's
pre-activation written in ops (x W_ih^T + h W_hh^T + biases): only the pre-activation's graph is
used, never its value, so the biases (not saved by the kernels) are needed only as graph inputs.
"""
import numpy as np

from ..ops import arith as A, indexing as I, pointwise as P, reduction as R, shape as S
from ..ops._base import node1
from ..ops.extra import TrilBackward0, TriuBackward0, tril, triu
from ..ops.scatter import ScatterAddBackward0, ScatterBackward0, ScatterBackward1
from ..ops.sorting import SortBackward0, TopkBackward0
from ..tensor import _wrap
from ._base import _AliasBackward, _along_key, _c, _inp, _outp, _reg, _unsq, index_scatter, sum_to


# ---------------------------------------------------------------------------------------------
# helpers
def _act(cls, pre, val):
    """The activation `cls` (a sigmoid/tanh node that saves its output) of `pre`, valued `val`."""
    if not pre._rg:
        return _wrap(val)
    return _wrap(val, node1(cls, pre, (None, val)))


def _relabel(expr, val):
    """`expr`'s graph with the value `val` (the saved value of the same quantity)."""
    if not expr._rg:
        return _wrap(val)
    return _wrap(val, node1(_AliasBackward, expr))


def _cols(t, a, b):
    return I.getitem(t, (slice(None), slice(a, b)))


def _in2(node, i, arr, unbatched):
    """Input `i` (saved as a 2-D (1, n) array when the call was unbatched) as a 2-D Tensor."""
    if not unbatched:
        return _inp(node, i, arr)
    return S.reshape(_inp(node, i, arr.reshape(-1)), arr.shape)


def _bias(node, i, size, dt):
    """Bias input `i` as a graph input (its value is never used; see the module docstring)."""
    if node.next_edges[i] is None:
        return None
    return _inp(node, i, np.zeros(size, dt))


def _lin(x, w, b=None):
    y = A.matmul(x, S.t(w))
    return y if b is None else A.add(y, b)


def _dsig(s):
    return A.mul(s, A.rsub(s, 1.0))  # s (1 - s)


def _dtanh(t):
    return A.rsub(A.mul(t, t), 1.0)  # 1 - t^2


def _param_grads(node, d_in, d_hid, x, h, wi, wh, first):
    """Gradients of x W_ih^T + b_ih (pre-activation gradient d_in) and h W_hh^T + b_hh (d_hid).

    `first` is the edge index of w_ih; w_hh, b_ih, b_hh follow it.
    """
    e = node.next_edges
    gwi = A.matmul(S.t(d_in), x) if e[first] is not None else None
    gwh = A.matmul(S.t(d_hid), h) if e[first + 1] is not None else None
    gbi = R.sum(d_in, 0) if e[first + 2] is not None else None
    gbh = None
    if e[first + 3] is not None:
        gbh = gbi if (d_hid is d_in and gbi is not None) else R.sum(d_hid, 0)
    return gwi, gwh, gbi, gbh


def _flat1(t, unbatched):
    return t if (t is None or not unbatched) else S.reshape(t, (-1,))


# ---------------------------------------------------------------------------------------------
# recurrent cells
def _gru_step(gi, gh, hp, r, z, n, ghn, dh, H):
    """One GRU step's backward in ops. gi, gh: pre-activation graphs (B, 3H); r, z, n, ghn: saved
    values; hp: the previous hidden state; dh: dL/dh'. Returns (d gi, d gh, dL/dh via z h)."""
    rz = A.add(_cols(gi, 0, 2 * H), _cols(gh, 0, 2 * H))
    r_t = _act(P.SigmoidBackward0, _cols(rz, 0, H), r)
    z_t = _act(P.SigmoidBackward0, _cols(rz, H, 2 * H), z)
    ghn_t = _relabel(_cols(gh, 2 * H, 3 * H), ghn)
    n_t = _act(P.TanhBackward0, A.add(_cols(gi, 2 * H, 3 * H), A.mul(r_t, ghn_t)), n)
    # h' = n + z (h - n)
    dz = A.mul(A.mul(dh, A.sub(hp, n_t)), _dsig(z_t))
    dn = A.mul(A.mul(dh, A.rsub(z_t, 1.0)), _dtanh(n_t))
    dr = A.mul(A.mul(dn, ghn_t), _dsig(r_t))
    dgi = S.cat([dr, dz, dn], 1)
    dgh = S.cat([dr, dz, A.mul(dn, r_t)], 1)
    return dgi, dgh, A.mul(dh, z_t)


def _register_rnn():
    from ..nn import _functional_rnn as RN

    @_reg(RN.GRUCellBackward0)
    def _gru_cell(self, g):
        x, h, wi, wh, r, z, n, ghn = self.saved
        ub = self.unbatched
        H = h.shape[1]
        e = self.next_edges
        xt, ht = _in2(self, 0, x, ub), _in2(self, 1, h, ub)
        Wi, Wh = _inp(self, 2, wi), _inp(self, 3, wh)
        gi = _lin(xt, Wi, _bias(self, 4, 3 * H, x.dtype))
        gh = _lin(ht, Wh, _bias(self, 5, 3 * H, x.dtype))
        g2 = S.reshape(g, (1, H)) if ub else g
        dgi, dgh, dzh = _gru_step(gi, gh, ht, r, z, n, ghn, g2, H)
        gx = A.matmul(dgi, Wi) if e[0] is not None else None
        ghh = A.add(A.matmul(dgh, Wh), dzh) if e[1] is not None else None
        return (_flat1(gx, ub), _flat1(ghh, ub)) + _param_grads(self, dgi, dgh, xt, ht, Wi, Wh, 2)

    @_reg(RN.GRUBackward0)
    def _gru_layer(self, grads):
        gY, ghT = grads
        x, h0, wi, wh, Y, Rs, Zs, Ns, GHN = self.saved
        T, B, H = Y.shape
        e = self.next_edges
        xt, h0t = _inp(self, 0, x), _inp(self, 1, h0)
        Wi, Wh = _inp(self, 2, wi), _inp(self, 3, wh)
        bh = _bias(self, 5, 3 * H, x.dtype)
        x2 = S.reshape(xt, (T * B, x.shape[2]))
        GI = S.reshape(_lin(x2, Wi, _bias(self, 4, 3 * H, x.dtype)), (T, B, 3 * H))
        Yt = _outp(self, Y)  # earlier hidden states: this node's own output (its gradient comes back here)
        dh = ghT if ghT is not None else _c(np.zeros((B, H), Y.dtype))
        order = range(T) if self.reverse else range(T - 1, -1, -1)
        prev = 1 if self.reverse else -1
        dGI, dGH, HP = [None] * T, [None] * T, [None] * T
        for t in order:
            if gY is not None:
                dh = A.add(dh, I.getitem(gY, t))
            tp = t + prev
            hp = h0t if (tp < 0 or tp >= T) else I.getitem(Yt, tp)
            gh = _lin(hp, Wh, bh)
            dgi, dgh, dzh = _gru_step(I.getitem(GI, t), gh, hp, Rs[t], Zs[t], Ns[t], GHN[t], dh, H)
            dGI[t], dGH[t], HP[t] = dgi, dgh, hp
            dh = A.add(A.matmul(dgh, Wh), dzh)
        dGI2 = S.reshape(S.stack(dGI, 0), (T * B, 3 * H))
        dGH2 = S.reshape(S.stack(dGH, 0), (T * B, 3 * H))
        HP2 = S.reshape(S.stack(HP, 0), (T * B, H))
        gx = S.reshape(A.matmul(dGI2, Wi), x.shape) if e[0] is not None else None
        gh0 = dh if e[1] is not None else None
        return (gx, gh0) + _param_grads(self, dGI2, dGH2, x2, HP2, Wi, Wh, 2)

    @_reg(RN.LstmCellBackward0)
    def _lstm_cell(self, grads):
        gh_, gc_ = grads
        x, h, c, wi, wh, gates, tc = self.saved
        ub = self.unbatched
        B, H = h.shape
        e = self.next_edges
        xt, ht, ct = _in2(self, 0, x, ub), _in2(self, 1, h, ub), _in2(self, 2, c, ub)
        Wi, Wh = _inp(self, 3, wi), _inp(self, 4, wh)
        pre = A.add(_lin(xt, Wi, _bias(self, 5, 4 * H, x.dtype)), _lin(ht, Wh, _bias(self, 6, 4 * H, x.dtype)))
        i_t = _act(P.SigmoidBackward0, _cols(pre, 0, H), gates[:, :H])
        f_t = _act(P.SigmoidBackward0, _cols(pre, H, 2 * H), gates[:, H:2 * H])
        g_t = _act(P.TanhBackward0, _cols(pre, 2 * H, 3 * H), gates[:, 2 * H:3 * H])
        o_t = _act(P.SigmoidBackward0, _cols(pre, 3 * H, 4 * H), gates[:, 3 * H:])
        # c' = f c + i g (the same float operations as the forward), h' = o tanh(c')
        tc_t = _act(P.TanhBackward0, A.add(A.mul(f_t, ct), A.mul(i_t, g_t)), tc)
        zero = _c(np.zeros((B, H), x.dtype))
        gc2 = S.reshape(gc_, (B, H)) if gc_ is not None else None
        if gh_ is not None:
            gh2 = S.reshape(gh_, (B, H))
            dc = A.mul(A.mul(gh2, o_t), _dtanh(tc_t))
            if gc2 is not None:
                dc = A.add(dc, gc2)
            do = A.mul(A.mul(gh2, tc_t), _dsig(o_t))
        else:
            dc = gc2 if gc2 is not None else zero
            do = zero
        di = A.mul(A.mul(dc, g_t), _dsig(i_t))
        df = A.mul(A.mul(dc, ct), _dsig(f_t))
        dg = A.mul(A.mul(dc, i_t), _dtanh(g_t))
        dgates = S.cat([di, df, dg, do], 1)
        gx = A.matmul(dgates, Wi) if e[0] is not None else None
        ghh = A.matmul(dgates, Wh) if e[1] is not None else None
        gcc = A.mul(dc, f_t) if e[2] is not None else None
        return (_flat1(gx, ub), _flat1(ghh, ub), _flat1(gcc, ub)) + _param_grads(
            self, dgates, dgates, xt, ht, Wi, Wh, 3)

    @_reg(RN._RNNCellBackward)
    def _rnn_cell(self, g):
        x, h, wi, wh, out = self.saved
        ub = self.unbatched
        H = h.shape[1]
        e = self.next_edges
        xt, ht = _in2(self, 0, x, ub), _in2(self, 1, h, ub)
        Wi, Wh = _inp(self, 2, wi), _inp(self, 3, wh)
        g2 = S.reshape(g, (-1, H)) if ub else g
        if self.relu:
            d = P.where(_c(out > 0), g2, _c(np.zeros((), out.dtype)))
        else:
            pre = A.add(_lin(xt, Wi, _bias(self, 4, H, x.dtype)), _lin(ht, Wh, _bias(self, 5, H, x.dtype)))
            d = A.mul(g2, _dtanh(_act(P.TanhBackward0, pre, out)))
        gx = A.matmul(d, Wi) if e[0] is not None else None
        ghh = A.matmul(d, Wh) if e[1] is not None else None
        return (_flat1(gx, ub), _flat1(ghh, ub)) + _param_grads(self, d, d, xt, ht, Wi, Wh, 2)


_register_rnn()


# ---------------------------------------------------------------------------------------------
# prod: at exact zeros, the product of the other elements from exclusive prefix/suffix products
def _exclusive_cumprod(t):
    """Exclusive cumulative product along the last axis in ops (log-depth doubling scan)."""
    m = t._data.shape[-1]
    lead = t._data.shape[:-1]
    dt = t._data.dtype

    def shift(y, d):  # y moved d places along the last axis, ones coming in
        return S.cat([_c(np.ones(lead + (d,), dt)), I.getitem(y, (Ellipsis, slice(0, m - d)))], -1)

    y = shift(t, 1)
    d = 1
    while d < m:
        y = A.mul(y, shift(y, d))
        d *= 2
    return y


def _others_product(x, axes):
    """For each element of `x`, the product of the other elements of its slice over `axes`."""
    shape = x._data.shape
    rest = [a for a in range(len(shape)) if a not in axes]
    perm = rest + list(axes)
    xt = S.permute(x, tuple(perm)) if perm != list(range(len(shape))) else x
    moved = xt._data.shape
    m = int(np.prod([shape[a] for a in axes]))
    flat = S.reshape(xt, tuple(shape[a] for a in rest) + (m,))
    last = flat._data.ndim - 1
    left = _exclusive_cumprod(flat)
    right = S.flip(_exclusive_cumprod(S.flip(flat, (last,))), (last,))
    others = S.reshape(A.mul(left, right), moved)
    return S.permute(others, tuple(int(i) for i in np.argsort(perm))) if xt is not x else others


@_reg(R.ProdBackward0)
def _prod(self, g):
    xd, od = self.saved
    if xd.ndim == 0:
        return (g,)
    x = _inp(self, 0, xd)
    gg = _unsq(g, self.axes, self.keepdim)
    if not np.any(xd == 0):
        o = _unsq(_outp(self, od), self.axes, self.keepdim)
        return (A.div(A.mul(gg, o), x),)
    return (A.mul(gg, _others_product(x, self.axes)),)


# ---------------------------------------------------------------------------------------------
# tril / triu, topk / sort, scatter, embedding, Categorical.log_prob
@_reg(TrilBackward0)
def _tril(self, g):
    return (tril(g, self.k),)


@_reg(TriuBackward0)
def _triu(self, g):
    return (triu(g, self.k),)


@_reg(TopkBackward0)
def _topk(self, g):
    return (index_scatter(g, self.shape, _along_key(self.saved, self.axis), False),)


SortBackward0.backward_t = _topk


def _zero_at(g, key):
    """g with the entries at `key` set to zero (where, so that inf/NaN elsewhere stay as they are)."""
    mask = np.zeros(g._data.shape, bool)
    mask[key] = True
    return P.where(_c(mask), _c(np.zeros((), g._data.dtype)), g)


def _src_grad(self, g):
    """The gradient of a scatter's `src`: g gathered at the index, placed in src's leading block."""
    picked = I.getitem(g, self.key)
    if tuple(self.ishape) == tuple(self.sshape):
        return picked
    return index_scatter(picked, self.sshape, tuple(slice(0, n) for n in self.ishape), False)


@_reg(ScatterBackward0)
def _scatter(self, g):
    ei, es = self.next_edges
    return (_zero_at(g, self.key) if ei is not None else None), (_src_grad(self, g) if es is not None else None)


@_reg(ScatterBackward1)
def _scatter_value(self, g):
    return (_zero_at(g, self.key),)


@_reg(ScatterAddBackward0)
def _scatter_add(self, g):
    ei, es = self.next_edges
    return (g if ei is not None else None), (_src_grad(self, g) if es is not None else None)


def _register_embedding_categorical():
    from ..nn._functional_extra import EmbeddingBackward0
    from ..distributions.categorical import CategoricalLogProbBackward0

    @_reg(EmbeddingBackward0)
    def _embedding(self, g):
        flat = self.saved.reshape(-1)
        dt = g._data.dtype
        gr = S.reshape(g, (flat.size, g._data.shape[-1]))
        if self.scale_by_freq:
            counts = np.bincount(flat, minlength=self.num)
            gr = A.div(gr, _c(counts[flat][:, None], dt))
        if self.padding_idx is not None:
            gr = P.where(_c((flat == self.padding_idx)[:, None]), _c(np.zeros((), dt)), gr)
        return (index_scatter(gr, (self.num, gr._data.shape[1]), (flat,), True),)

    @_reg(CategoricalLogProbBackward0)
    def _categorical(self, g):
        idx = self.saved
        nd = idx.ndim
        full = index_scatter(S.unsqueeze(g, nd), idx.shape + (self.lshape[-1],),
                             _along_key(idx[..., None], nd), False)
        return (sum_to(full, self.lshape),)


_register_embedding_categorical()
