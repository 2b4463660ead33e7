"""GRUCell / LSTMCell / RNNCell and the GRU / LSTM / RNN sequence layers against torch with the
same weights (state dicts copied across): outputs, h_n, input/state/parameter gradients."""
import math

import numpy as np
import pytest

import autograd_core as ac
import autograd_core.nn as nn
from autograd_core.autograd import gradcheck
from autograd_core.nn import _functional_cnn as FC
from autograd_core.nn.rnn import LSTM, RNN, RNNCell

torch = pytest.importorskip("torch")

TOL = {np.float32: 1e-5, np.float64: 1e-10}
ADT = {np.float32: ac.float32, np.float64: ac.float64}
TDT = {np.float32: torch.float32, np.float64: torch.float64}


def close(a, b, dtype, what=""):
    a = a._data if isinstance(a, ac.Tensor) else np.asarray(a)
    b = b.detach().numpy()
    assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL[dtype] * max(1.0, float(np.abs(b).max(initial=0))),
                               err_msg=what)


def sync(m, mt):
    """Copy our (randomly initialised) parameters into torch's module: state dicts are interchangeable."""
    assert list(m.state_dict()) == list(mt.state_dict())
    for (k, v), (kt, vt) in zip(m.state_dict().items(), mt.state_dict().items()):
        assert tuple(v.shape) == tuple(vt.shape), k
    mt.load_state_dict({k: torch.tensor(v._data.copy()) for k, v in m.state_dict().items()})


def both(shape, dtype, rng):
    a = rng.standard_normal(shape).astype(dtype)
    return ac.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def backward(outs_a, outs_t, rng):
    la, lt = 0, 0
    for a, t in zip(outs_a, outs_t):
        g = rng.standard_normal(tuple(t.shape)).astype(a._data.dtype)
        la = la + (a * ac.tensor(g)).sum()
        lt = lt + (t * torch.tensor(g)).sum()
    la.backward()
    lt.backward()


def check_params(m, mt, dtype):
    for (n, p), (nt, pt) in zip(m.named_parameters(), mt.named_parameters()):
        assert n == nt
        close(p.grad, pt.grad, dtype, n)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch", [4, 1, None])
@pytest.mark.parametrize("cell", ["GRUCell", "LSTMCell", "RNNCell", "RNNCell-relu"])
def test_cells_match_torch(cell, batch, bias, dtype):
    rng = np.random.default_rng(0)
    name, _, nl = cell.partition("-")
    kw = dict(nonlinearity=nl) if nl else {}
    ours_cls = RNNCell if name == "RNNCell" else getattr(nn, name)
    m = ours_cls(5, 7, bias=bias, dtype=ADT[dtype], **kw)
    mt = getattr(torch.nn, name)(5, 7, bias=bias, dtype=TDT[dtype], **kw)
    sync(m, mt)
    assert repr(m) == repr(mt)
    lead = () if batch is None else (batch,)
    xa, xt = both(lead + (5,), dtype, rng)
    ha, ht = both(lead + (7,), dtype, rng)
    if name == "LSTMCell":
        ca, ct = both(lead + (7,), dtype, rng)
        oa, ot = m(xa, (ha, ca)), mt(xt, (ht, ct))
        states = [(ha, ht), (ca, ct)]
    else:
        oa, ot = (m(xa, ha),), (mt(xt, ht),)
        states = [(ha, ht)]
    for a, t in zip(oa, ot):
        close(a, t, dtype, "out")
    backward(oa, ot, rng)
    close(xa.grad, xt.grad, dtype, "dx")
    for a, t in states:
        close(a.grad, t.grad, dtype, "dh")
    check_params(m, mt, dtype)
    # hx=None means zeros
    oa, ot = m(xa), mt(xt)
    for a, t in zip(oa if name == "LSTMCell" else (oa,), ot if name == "LSTMCell" else (ot,)):
        close(a, t, dtype, "zero state")


def test_cell_init_distribution_and_state_dict_keys():
    ac.manual_seed(0)
    m = nn.GRUCell(192, 192)
    assert [n for n, _ in m.named_parameters()] == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert m.weight_ih.shape == (576, 192) and m.bias_hh.shape == (576,)
    b = 1 / math.sqrt(192)
    for p in m.parameters():
        assert np.abs(p._data).max() <= b and np.abs(p._data).max() > 0.95 * b
    assert abs(m.weight_hh._data.std() - 2 * b / math.sqrt(12)) < 0.002
    # torch -> ours loads and gives torch's numbers
    mt = torch.nn.GRUCell(192, 192)
    m.load_state_dict({k: ac.tensor(v.numpy()) for k, v in mt.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((3, 192)).astype(np.float32)
    close(m(ac.tensor(x)), mt(torch.tensor(x)), np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("layers,bidir", [(1, False), (2, False), (2, True)])
@pytest.mark.parametrize("h0", [True, False])
def test_gru_sequence_matches_torch(batch_first, layers, bidir, h0, dtype):
    rng = np.random.default_rng(1)
    kw = dict(num_layers=layers, batch_first=batch_first, bidirectional=bidir)
    m, mt = nn.GRU(5, 6, dtype=ADT[dtype], **kw), torch.nn.GRU(5, 6, dtype=TDT[dtype], **kw)
    sync(m, mt)
    assert repr(m) == repr(mt)
    T, B, D = 7, 3, 2 if bidir else 1
    xa, xt = both((B, T, 5) if batch_first else (T, B, 5), dtype, rng)
    if h0:
        ha, ht = both((layers * D, B, 6), dtype, rng)
        (ya, hna), (yt, hnt) = m(xa, ha), mt(xt, ht)
    else:
        (ya, hna), (yt, hnt) = m(xa), mt(xt)
    close(ya, yt, dtype, "output")
    close(hna, hnt, dtype, "h_n")
    backward([ya, hna], [yt, hnt], rng)
    close(xa.grad, xt.grad, dtype, "dx")
    if h0:
        close(ha.grad, ht.grad, dtype, "dh0")
    check_params(m, mt, dtype)


def test_gru_unbatched_single_step_and_loss_on_h_n_only():
    rng = np.random.default_rng(2)
    m, mt = nn.GRU(4, 3, num_layers=2), torch.nn.GRU(4, 3, num_layers=2)
    sync(m, mt)
    xa, xt = both((5, 4), np.float32, rng)  # unbatched (T, I)
    (ya, ha), (yt, ht) = m(xa), mt(xt)
    close(ya, yt, np.float32)
    close(ha, ht, np.float32)
    ha.sum().backward()  # gradient through h_n alone
    ht.sum().backward()
    close(xa.grad, xt.grad, np.float32)
    check_params(m, mt, np.float32)
    xa, xt = both((2, 1, 4), np.float32, rng)  # T = 1
    (ya, ha), (yt, ht) = m(xa), mt(xt)
    close(ya, yt, np.float32)
    close(ha, ht, np.float32)


def test_gru_dropout_between_layers_and_eval():
    ac.manual_seed(0)
    m = nn.GRU(4, 8, num_layers=2, dropout=0.5)
    x = ac.randn(6, 2, 4)
    m.eval()
    y1, _ = m(x)
    y2, _ = m(x)
    np.testing.assert_array_equal(y1._data, y2._data)
    m.train()
    y3, _ = m(x)
    assert not np.allclose(y3._data, y1._data)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls,kw", [("LSTM", dict(num_layers=2, batch_first=True)),
                                    ("LSTM", dict(bidirectional=True)),
                                    ("RNN", dict(num_layers=2, nonlinearity="relu")),
                                    ("RNN", dict(batch_first=True, bidirectional=True))])
def test_lstm_and_rnn_sequences_match_torch(cls, kw, dtype):
    rng = np.random.default_rng(3)
    ours = {"LSTM": LSTM, "RNN": RNN}[cls]
    m, mt = ours(4, 5, dtype=ADT[dtype], **kw), getattr(torch.nn, cls)(4, 5, dtype=TDT[dtype], **kw)
    sync(m, mt)
    assert repr(m) == repr(mt)
    xa, xt = both((3, 6, 4), dtype, rng)
    ya, sa = m(xa)
    yt, st = mt(xt)
    sa = sa if isinstance(sa, tuple) else (sa,)
    st = st if isinstance(st, tuple) else (st,)
    close(ya, yt, dtype)
    for a, t in zip(sa, st):
        close(a, t, dtype, "state")
    backward([ya, *sa], [yt, *st], rng)
    close(xa.grad, xt.grad, dtype)
    check_params(m, mt, dtype)


def test_recurrent_gradcheck():
    rng = np.random.default_rng(4)
    B, I, H = 2, 3, 2

    def t(*shape):
        return ac.tensor(rng.standard_normal(shape) * 0.7, requires_grad=True)

    x, h, c = t(B, I), t(B, H), t(B, H)
    wi3, wh3, bi3, bh3 = t(3 * H, I), t(3 * H, H), t(3 * H), t(3 * H)
    assert gradcheck(FC.gru_cell, (x, h, wi3, wh3, bi3, bh3))
    wi4, wh4, bi4, bh4 = t(4 * H, I), t(4 * H, H), t(4 * H), t(4 * H)
    assert gradcheck(lambda x, h, c, a, b, d, e: FC.lstm_cell(x, (h, c), a, b, d, e), (x, h, c, wi4, wh4, bi4, bh4))
    wi1, wh1, bi1, bh1 = t(H, I), t(H, H), t(H), t(H)
    assert gradcheck(FC.rnn_tanh_cell, (x, h, wi1, wh1, bi1, bh1))
    xs = t(4, B, I)
    for rev in (False, True):
        assert gradcheck(lambda *a: FC._gru_layer(*a, reverse=rev), (xs, h, wi3, wh3, bi3, bh3))


def test_rnn_errors():
    with pytest.raises(ValueError, match="Expected input to be 1D or 2D"):
        nn.GRUCell(3, 4)(ac.zeros(2, 2, 3))
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        nn.GRU(3, 4)(ac.zeros(5, 2, 2))
    with pytest.raises(RuntimeError, match="Expected hidden size \\(2, 2, 4\\)"):
        nn.GRU(3, 4, num_layers=2)(ac.zeros(5, 2, 3), ac.zeros(1, 2, 4))
