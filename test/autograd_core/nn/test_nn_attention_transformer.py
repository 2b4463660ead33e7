"""Embedding, PixelShuffle, scaled_dot_product_attention, MultiheadAttention and the Transformer
modules against torch in float64: outputs and gradients from torch's own weights (loaded by
state_dict name, so the names and shapes must be torch's)."""
import warnings

import numpy as np
import pytest

import autograd_core as ac
import autograd_core.nn as nn
import autograd_core.nn.functional as F

torch = pytest.importorskip("torch")

R = np.random.RandomState


def _load_from_torch(tm, am):
    assert list(tm.state_dict()) == list(am.state_dict())
    assert [n for n, _ in tm.named_parameters()] == [n for n, _ in am.named_parameters()]
    res = am.load_state_dict({k: ac.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert not res.missing_keys and not res.unexpected_keys


def _close(a, t, tol=1e-10):
    np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def _grads_close(am, tm, tol=1e-10):
    tp = dict(tm.named_parameters())
    for n, p in am.named_parameters():
        assert (p.grad is None) == (tp[n].grad is None), n
        if p.grad is not None:
            np.testing.assert_allclose(p.grad.numpy(), tp[n].grad.numpy(), rtol=tol, atol=tol, err_msg=n)


# -- Embedding ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, dict(padding_idx=2), dict(padding_idx=-1), dict(scale_grad_by_freq=True),
                                dict(max_norm=1.0), dict(max_norm=0.5, norm_type=1.0)])
def test_embedding_matches_torch(kw):
    tm = torch.nn.Embedding(7, 4, **kw).double()
    am = nn.Embedding(7, 4, **kw).double()
    _load_from_torch(tm, am)
    idx = np.array([[0, 2, 2, 6], [1, 2, 5, 5]])
    to, ao = tm(torch.tensor(idx)), am(ac.tensor(idx))
    _close(ao, to)
    w = R(0).randn(2, 4, 4)
    (to * torch.tensor(w)).sum().backward()
    (ao * ac.tensor(w)).sum().backward()
    _grads_close(am, tm)
    _close(am.weight, tm.weight)  # max_norm renormalises the used rows in place
    assert type(ao.grad_fn).__name__ == type(to.grad_fn).__name__ == "EmbeddingBackward0"


def test_embedding_init_padding_and_from_pretrained():
    ac.manual_seed(0)
    e = nn.Embedding(5, 3, padding_idx=1)
    assert np.all(e.weight.detach().numpy()[1] == 0) and np.all(e.weight.detach().numpy()[0] != 0)
    assert repr(e) == repr(torch.nn.Embedding(5, 3, padding_idx=1))
    w = ac.tensor(R(1).randn(4, 2))
    frozen = nn.Embedding.from_pretrained(w)
    assert not frozen.weight.requires_grad
    np.testing.assert_array_equal(frozen(ac.tensor([3, 0])).numpy(), w.numpy()[[3, 0]])
    assert nn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad
    with pytest.raises(IndexError, match="index out of range"):
        e(ac.tensor([5]))
    with pytest.raises(RuntimeError, match="Long, Int"):
        e(ac.tensor([1.0]))
    with pytest.raises(AssertionError, match="Padding_idx"):
        nn.Embedding(3, 2, padding_idx=3)


# -- PixelShuffle -----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,r", [((2, 8, 3, 5), 2), ((1, 9, 2, 2), 3), ((2, 3, 4, 4, 2), 1), ((18, 2, 3), 3)])
def test_pixel_shuffle_and_unshuffle(shape, r):
    x = R(2).randn(*shape)
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yt = nn.PixelShuffle(r)(a), torch.nn.PixelShuffle(r)(t)
    _close(ya, yt, 0)
    w = R(3).randn(*yt.shape)
    (ya * ac.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    _close(a.grad, t.grad, 0)
    _close(nn.PixelUnshuffle(r)(ya), torch.nn.PixelUnshuffle(r)(yt), 0)
    _close(F.pixel_unshuffle(ac.tensor(x), 1), torch.tensor(x), 0)
    with pytest.raises(RuntimeError, match="divisible"):
        F.pixel_shuffle(ac.ones(1, 3, 2, 2), 2)


# -- scaled_dot_product_attention ---------------------------------------------------------------------
def _qkv(L=4, S=6, E=5, Ev=3, lead=(2, 3), seed=4):
    rng = R(seed)
    return rng.randn(*lead, L, E), rng.randn(*lead, S, E), rng.randn(*lead, S, Ev)


@pytest.mark.parametrize("mask", [None, "bool", "float", "bool_dead_row", "float_dead_row"])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_sdpa_matches_torch(mask, is_causal, scale):
    q, k, v = _qkv()
    m = None
    if mask is not None:
        rng = R(5)
        m = rng.rand(4, 6) > 0.4 if mask.startswith("bool") else rng.randn(2, 1, 4, 6)
        if mask.endswith("dead_row"):
            if m.dtype == bool:
                m[1] = False
            else:
                m[..., 1, :] = -np.inf
    ta = [torch.tensor(x, requires_grad=True) for x in (q, k, v)]
    aa = [ac.tensor(x, requires_grad=True) for x in (q, k, v)]
    if m is not None and is_causal:
        for f, mod in ((torch.nn.functional.scaled_dot_product_attention, torch), (F.scaled_dot_product_attention, ac)):
            with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
                f(*(ta if mod is torch else aa), attn_mask=mod.tensor(m), is_causal=True)
        return
    to = torch.nn.functional.scaled_dot_product_attention(*ta, attn_mask=None if m is None else torch.tensor(m),
                                                          is_causal=is_causal, scale=scale)
    ao = F.scaled_dot_product_attention(*aa, attn_mask=None if m is None else ac.tensor(m), is_causal=is_causal,
                                        scale=scale)
    _close(ao, to)
    w = R(6).randn(*to.shape)
    (to * torch.tensor(w)).sum().backward()
    (ao * ac.tensor(w)).sum().backward()
    for x, y in zip(aa, ta):
        _close(x.grad, y.grad)
        assert np.all(np.isfinite(x.grad.numpy()))


def test_sdpa_gqa_and_dropout():
    rng = R(7)
    q, k, v = rng.randn(1, 4, 3, 2), rng.randn(1, 2, 5, 2), rng.randn(1, 2, 5, 2)
    to = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                                          enable_gqa=True)
    ao = F.scaled_dot_product_attention(ac.tensor(q), ac.tensor(k), ac.tensor(v), enable_gqa=True)
    _close(ao, to)
    # dropout on the weights: each output row is a mix of v's rows with weights summing to 0 or 1/(1-p)
    ac.manual_seed(0)
    ones_v = ac.ones(1, 1, 50, 1, dtype=ac.float64)
    out = F.scaled_dot_product_attention(ac.zeros(1, 1, 200, 2, dtype=ac.float64), ac.zeros(1, 1, 50, 2,
                                         dtype=ac.float64), ones_v, dropout_p=0.5)
    assert 0.8 < out.mean().item() < 1.2 and out.std().item() > 0.05


# -- MultiheadAttention -------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", [dict(), dict(bias=False), dict(kdim=3, vdim=5), dict(add_bias_kv=True),
                                 dict(add_zero_attn=True), dict(batch_first=True)])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("masks", ["none", "attn_bool", "attn_float3d", "kpm", "both"])
def test_multihead_attention_matches_torch(cfg, need_weights, average, masks):
    torch.manual_seed(0)
    E, H, L, S, N = 6, 2, 4, 5, 3
    tm = torch.nn.MultiheadAttention(E, H, **cfg).double()
    am = nn.MultiheadAttention(E, H, **cfg).double()
    _load_from_torch(tm, am)
    rng = R(8)
    bf = cfg.get("batch_first", False)
    qs = (N, L, E) if bf else (L, N, E)
    ks = (N, S, cfg.get("kdim", E)) if bf else (S, N, cfg.get("kdim", E))
    vs = (N, S, cfg.get("vdim", E)) if bf else (S, N, cfg.get("vdim", E))
    q, k, v = rng.randn(*qs), rng.randn(*ks), rng.randn(*vs)
    kw_t, kw_a = {}, {}
    if masks in ("attn_bool", "both"):
        m = rng.rand(L, S) > 0.7
        kw_t["attn_mask"], kw_a["attn_mask"] = torch.tensor(m), ac.tensor(m)
    if masks == "attn_float3d":
        m = rng.randn(N * H, L, S)
        kw_t["attn_mask"], kw_a["attn_mask"] = torch.tensor(m), ac.tensor(m)
    if masks in ("kpm", "both"):
        m = np.zeros((N, S), bool)
        m[0, -2:] = True
        kw_t["key_padding_mask"], kw_a["key_padding_mask"] = torch.tensor(m), ac.tensor(m)
    tq = [torch.tensor(x, requires_grad=True) for x in (q, k, v)]
    aq = [ac.tensor(x, requires_grad=True) for x in (q, k, v)]
    to, tw = tm(*tq, need_weights=need_weights, average_attn_weights=average, **kw_t)
    ao, aw = am(*aq, need_weights=need_weights, average_attn_weights=average, **kw_a)
    _close(ao, to)
    assert (aw is None) == (tw is None)
    if tw is not None:
        _close(aw, tw)
    (to ** 2).sum().backward()
    (ao ** 2).sum().backward()
    _grads_close(am, tm)
    for x, y in zip(aq, tq):
        _close(x.grad, y.grad)


def test_multihead_attention_unbatched_and_causal_hint():
    torch.manual_seed(1)
    tm = torch.nn.MultiheadAttention(4, 2).double()
    am = nn.MultiheadAttention(4, 2).double()
    _load_from_torch(tm, am)
    x = R(9).randn(5, 4)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    amask = nn.Transformer.generate_square_subsequent_mask(5, dtype=ac.float64)
    _close(amask, mask, 0)
    for nw in (True, False):
        to, _ = tm(torch.tensor(x), torch.tensor(x), torch.tensor(x), attn_mask=mask, is_causal=True, need_weights=nw)
        ao, _ = am(ac.tensor(x), ac.tensor(x), ac.tensor(x), attn_mask=amask, is_causal=True, need_weights=nw)
        _close(ao, to)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        am(ac.tensor(x), ac.tensor(x), ac.tensor(x), is_causal=True)


# -- Transformer layers and stacks ----------------------------------------------------------------------
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_decoder_layers_match_torch(norm_first, activation, batch_first):
    torch.manual_seed(2)
    kw = dict(dim_feedforward=12, dropout=0.0, activation=activation, batch_first=batch_first,
              norm_first=norm_first)
    rng = R(10)
    src = rng.randn(3, 5, 8) if batch_first else rng.randn(5, 3, 8)
    tgt = rng.randn(3, 4, 8) if batch_first else rng.randn(4, 3, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's nested-tensor notice
        te = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, **kw), 2,
                                         norm=torch.nn.LayerNorm(8)).double()
    ae = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, **kw), 2, norm=nn.LayerNorm(8)).double()
    _load_from_torch(te, ae)
    kpm = np.zeros((3, 5), bool)
    kpm[1, -1] = True
    smask = rng.randn(5, 5)
    to = te(torch.tensor(src), mask=torch.tensor(smask), src_key_padding_mask=torch.tensor(kpm))
    ao = ae(ac.tensor(src), mask=ac.tensor(smask), src_key_padding_mask=ac.tensor(kpm))
    _close(ao, to)
    td = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(8, 2, **kw), 2).double()
    ad = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, **kw), 2).double()
    _load_from_torch(td, ad)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    yt = td(torch.tensor(tgt), to, tgt_mask=tmask, memory_key_padding_mask=torch.tensor(kpm))
    ya = ad(ac.tensor(tgt), ao, tgt_mask=ac.tensor(tmask.numpy()), memory_key_padding_mask=ac.tensor(kpm))
    _close(ya, yt)
    (yt ** 2).mean().backward()
    (ya ** 2).mean().backward()
    _grads_close(ae, te, 1e-9)
    _grads_close(ad, td, 1e-9)


def test_full_transformer_loads_torch_weights_and_trains_alike():
    torch.manual_seed(3)
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16, dropout=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = torch.nn.Transformer(**kw).double()
    am = nn.Transformer(**kw).double()
    _load_from_torch(tm, am)
    rng = R(11)
    src, tgt = rng.randn(6, 2, 8), rng.randn(5, 2, 8)
    ot = torch.optim.Adam(tm.parameters(), lr=1e-2)
    oa = ac.optim.Adam(am.parameters(), lr=1e-2)
    mt = tm.generate_square_subsequent_mask(5, dtype=torch.float64)
    ma = am.generate_square_subsequent_mask(5, dtype=ac.float64)
    for _ in range(3):
        ot.zero_grad()
        oa.zero_grad()
        lt = tm(torch.tensor(src), torch.tensor(tgt), tgt_mask=mt).pow(2).mean()
        la = am(ac.tensor(src), ac.tensor(tgt), tgt_mask=ma).pow(2).mean()
        lt.backward()
        la.backward()
        ot.step()
        oa.step()
        np.testing.assert_allclose(la.item(), lt.item(), rtol=1e-10)
    with pytest.raises(RuntimeError, match="batch number"):
        am(ac.ones(6, 2, 8, dtype=ac.float64), ac.ones(5, 3, 8, dtype=ac.float64))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


def test_layers_are_independent_copies_and_train_with_dropout():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=8, dropout=0.3)
    enc = nn.TransformerEncoder(layer, 2)
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    np.testing.assert_array_equal(enc.layers[0].linear1.weight.detach().numpy(),
                                  enc.layers[1].linear1.weight.detach().numpy())
    x = ac.randn(4, 2, 8)
    enc.train()
    a, b = enc(x), enc(x)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())  # dropout active
    enc.eval()
    np.testing.assert_array_equal(enc(x).detach().numpy(), enc(x).detach().numpy())
