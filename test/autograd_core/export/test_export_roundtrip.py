"""Export round trip: trace -> save (one file) -> autograd_core.runtime.load -> same outputs as eager.

MLP, CNN (conv/batch-norm/pool/dropout/...) and the CNN+GRU policy network, each over a 100-step
rollout (the policy's GRU hidden state fed back), to 1e-6.
"""
import importlib.util
import os

import numpy as np
import pytest

import autograd_core as ag
import autograd_core.nn as nn
import autograd_core.nn.functional as F
from autograd_core import export, runtime

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class PolicyNet(nn.Module):
    """The DiffPhysDrone-style policy: depth CNN + state projection -> GRUCell -> action head."""

    def __init__(self, state_dim=10, hidden=192, actions=6):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, 32, 2, 2), nn.LeakyReLU(0.05),
            nn.Conv2d(32, 64, 3), nn.LeakyReLU(0.05),
            nn.Conv2d(64, 128, 3), nn.LeakyReLU(0.05),
            nn.Flatten(), nn.Linear(128 * 2 * 4, hidden))
        self.v_proj = nn.Linear(state_dim, hidden)
        self.gru = nn.GRUCell(hidden, hidden)
        self.fc = nn.Linear(hidden, actions)
        self.act = nn.LeakyReLU(0.05)

    def forward(self, x, v, hx):
        feat = self.act(self.stem(x) + self.v_proj(v))
        hx = self.gru(feat, hx)
        return self.fc(self.act(hx)), hx


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, groups=2)
        self.avg = nn.AvgPool2d(2, padding=1)
        self.c3 = nn.Conv2d(16, 16, 3, padding="same", dilation=2, bias=False)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        y = self.pool(F.relu(self.bn(self.c1(x))))
        y = self.avg(F.elu(self.c2(y)))
        y = F.silu(self.c3(y)) + y
        y = self.drop(self.gap(y).flatten(1))
        return F.log_softmax(self.fc(y), dim=1)


def _np(t):
    return t.detach().numpy()


def _eager(model, *arrays):
    with ag.no_grad():
        out = model(*[ag.tensor(a) for a in arrays])
    return tuple(_np(o) for o in out) if isinstance(out, tuple) else _np(out)


def _save_load(model, inputs, tmp_path, name="model.agc"):
    g = export.trace(model, tuple(ag.tensor(a) for a in inputs))
    path = tmp_path / name
    g.save(path)
    return g, runtime.load(path)


@pytest.fixture
def policy():
    ag.manual_seed(0)
    return PolicyNet()


def policy_inputs(rng, batch=1):
    x = rng.uniform(-0.6, 2.0, (batch, 1, 12, 16)).astype(np.float32)
    v = rng.standard_normal((batch, 10)).astype(np.float32)
    return x, v


def test_mlp_roundtrip_100_steps(tmp_path):
    ag.manual_seed(1)
    mlp = nn.Sequential(nn.Linear(31, 64), nn.Tanh(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((1, 31)).astype(np.float32)
    g, model = _save_load(mlp, (x0,), tmp_path)
    assert [n.op for n in g.nodes] == ["linear", "tanh", "linear", "relu", "linear"]
    assert model.input_names == ["input"] and model.output_names == ["output"]
    for _ in range(100):
        x = rng.standard_normal((1, 31)).astype(np.float32)
        np.testing.assert_allclose(model(x), _eager(mlp, x), rtol=0, atol=1e-6)


def test_cnn_roundtrip_100_steps(tmp_path):
    ag.manual_seed(2)
    cnn = SmallCNN()
    cnn.bn.running_mean.data = ag.randn(8) * 0.1
    cnn.bn.running_var.data = ag.rand(8) + 0.5
    cnn.train()  # trace() must switch to eval (dropout off, running stats) and restore the flag
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    g, model = _save_load(cnn, (x0,), tmp_path)
    assert cnn.training and cnn.drop.training
    ops = {n.op for n in g.nodes}
    assert {"conv2d", "batch_norm", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "log_softmax"} <= ops
    assert "dropout" not in ops
    cnn.eval()
    for _ in range(100):
        x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(model(x), _eager(cnn, x), rtol=0, atol=1e-6)


def test_policy_gru_rollout_100_steps(policy, tmp_path):
    rng = np.random.default_rng(3)
    x, v = policy_inputs(rng)
    h0 = np.zeros((1, 192), np.float32)
    g, model = _save_load(policy, (x, v, h0), tmp_path)
    assert model.input_names == ["x", "v", "hx"]
    assert model.input_shapes == [(1, 1, 12, 16), (1, 10), (1, 192)]
    assert "gru_cell" in g.ops()
    h_rt = h_eager = h0
    for _ in range(100):
        x, v = policy_inputs(rng)
        a_rt, h_rt = model(x, v, h_rt)              # the hidden state fed back, on both sides
        a_e, h_eager = _eager(policy, x, v, h_eager)
        np.testing.assert_allclose(a_rt, a_e, rtol=0, atol=1e-6)
        np.testing.assert_allclose(h_rt, h_eager, rtol=0, atol=1e-6)
    assert np.abs(h_rt).max() > 0.05  # the state really evolved


def test_benchmark_policy_builder_exports(tmp_path):
    path = os.path.join(ROOT, "benchmarks", "nn.py")  # part of the repository: a missing file is a failure
    spec = importlib.util.spec_from_file_location("_bench_nn_for_export_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ours, _ = mod.policy_net_builders(0)
    x, v, h = mod.policy_inputs(1)
    _, model = _save_load(ours, (x, v, h), tmp_path)
    for _ in range(5):
        a, h2 = model(x, v, h)
        ea, eh = _eager(ours, x, v, h)
        np.testing.assert_allclose(a, ea, rtol=0, atol=1e-6)
        np.testing.assert_allclose(h2, eh, rtol=0, atol=1e-6)
        h = h2


def test_recurrent_modules_and_misc_ops(tmp_path):
    from autograd_core.nn.conv import Conv1d

    class R(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTMCell(6, 12)
            self.gru = nn.GRU(6, 10, num_layers=2, batch_first=True)
            self.ln = nn.LayerNorm(12)
            self.c1 = Conv1d(6, 4, 3, padding=1)

        def forward(self, x, seq, hc):
            h2, c2 = self.lstm(x, hc)
            y, hn = self.gru(seq)
            z = self.c1(seq.transpose(1, 2)).amax(dim=-1)
            return self.ln(h2).tanh(), (c2, y[:, -1]), hn, z.softmax(-1)

    ag.manual_seed(4)
    r = R()
    rng = np.random.default_rng(1)
    arrs = [rng.standard_normal(s).astype(np.float32) for s in ((3, 6), (3, 5, 6), (3, 12), (3, 12))]
    g = export.trace(r, (ag.tensor(arrs[0]), ag.tensor(arrs[1]), (ag.tensor(arrs[2]), ag.tensor(arrs[3]))))
    assert len(g.inputs) == 4 and len(g.outputs) == 5  # nested tuples are flattened
    g.save(tmp_path / "r.agc")
    model = runtime.load(tmp_path / "r.agc")
    got = model(*arrs)
    with ag.no_grad():
        e = r(ag.tensor(arrs[0]), ag.tensor(arrs[1]), (ag.tensor(arrs[2]), ag.tensor(arrs[3])))
    flat = [e[0], e[1][0], e[1][1], e[2], e[3]]
    for a, b in zip(got, flat):
        np.testing.assert_allclose(a, _np(b), rtol=0, atol=1e-6)


def test_functional_ops_roundtrip():
    def f(a, b):
        x = a[:, 1:3, None] * b[..., 0:1, :]
        y = x.permute(2, 0, 1, 3).reshape(3, -1)
        z = ag.stack([y.mean(0), y.var(0), y.std(0, unbiased=False)], 1)
        w = ag.where(z > 0.1, z, z * 0.1).clamp(min=-1.0)
        u = w.norm(dim=1) + w.logsumexp(dim=1) + w.max(dim=1).values + w.argmax(dim=1).float()
        q = ag.maximum(u, ag.zeros_like(u)) ** 2 + (1 - u).abs().sqrt() / 3 - u.sigmoid()
        h = ag.cat(u.unsqueeze(0).split(1, dim=1), dim=1)
        k = h.clone()
        k.mul_(2).relu_()  # in-place on a non-view: recorded and re-bound
        return q.unsqueeze(0).expand(2, -1).repeat(1, 2), h.exp().log1p() + k, F.leaky_relu(h, 0.2).softmax(1)

    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4, 2)).astype(np.float32)
    b = rng.standard_normal((1, 1, 2)).astype(np.float32)
    g = export.trace(f, (ag.tensor(a), ag.tensor(b)))
    assert g.input_names == ["a", "b"]
    got = g(a, b)
    want = f(ag.tensor(a), ag.tensor(b))
    for x, y in zip(got, want):
        np.testing.assert_allclose(x, _np(y), rtol=0, atol=1e-6)


def test_call_time_checks_and_output_buffers(policy, tmp_path):
    rng = np.random.default_rng(0)
    x, v = policy_inputs(rng)
    h = np.zeros((1, 192), np.float32)
    _, model = _save_load(policy, (x, v, h), tmp_path)
    with pytest.raises(TypeError, match="takes 3 input"):
        model(x, v)
    with pytest.raises(ValueError, match="'x'.*shape"):
        model(x[:, :, :6], v, h)
    with pytest.raises(TypeError, match="'v'.*dtype.*float32.*float64"):
        model(x, v.astype(np.float64), h)
    a1, h1 = model(x, v, h)
    a2, _ = model(x, v, h1)
    assert not np.shares_memory(a1, a2)  # outputs are copies by default
    fast = runtime.load(tmp_path / "model.agc", copy_outputs=False)
    b1, _ = fast(x, v, h)
    np.testing.assert_array_equal(b1, a1)
    assert "gru_cell" in fast.ops and repr(fast).startswith("runtime.Model(")


def test_trace_restores_patched_entry_points(policy):
    import autograd_core.nn._functional_cnn as FC
    import autograd_core.ops.arith as arith
    before = (ag.Tensor.__mul__, ag.Tensor.reshape, F.linear, FC.conv2d, FC.gru_cell, ag.add, arith.add,
              ag.Tensor.__dict__["T"], ag.Tensor.__dict__["data"])
    rng = np.random.default_rng(0)
    x, v = policy_inputs(rng)
    export.trace(policy, (ag.tensor(x), ag.tensor(v), ag.zeros(1, 192)))
    with pytest.raises(export.TraceError):
        export.trace(lambda t: t * t.sum().item(), (ag.ones(3),))
    after = (ag.Tensor.__mul__, ag.Tensor.reshape, F.linear, FC.conv2d, FC.gru_cell, ag.add, arith.add,
             ag.Tensor.__dict__["T"], ag.Tensor.__dict__["data"])
    assert all(a is b for a, b in zip(before, after))
    assert policy.training  # the training flag came back


def test_graph_file_is_one_safetensors_file(policy, tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(0)
    x, v = policy_inputs(rng)
    g = export.trace(policy, (ag.tensor(x), ag.tensor(v), ag.zeros(1, 192)))
    g.save(tmp_path / "p.agc")
    assert os.listdir(tmp_path) == ["p.agc"]
    tensors = st.load_file(str(tmp_path / "p.agc"))  # the reference reader accepts it
    assert set(tensors) == set(g.constants)
    np.testing.assert_array_equal(tensors["gru.weight_ih"], _np(policy.gru.weight_ih))
    back = export.load_graph(tmp_path / "p.agc")
    assert back.ops() == g.ops() and back.input_names == ["x", "v", "hx"]


_RNG = np.random.default_rng(7)
_W = ag.tensor(_RNG.standard_normal((4, 3, 4, 2)).astype(np.float32))
_B = ag.tensor(_RNG.standard_normal(4).astype(np.float32))
_W3 = ag.tensor(_RNG.standard_normal((4, 3, 3, 3)).astype(np.float32))
KERNEL_VARIANTS = {
    "max_pool ceil+pad": lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
    "max_pool dilation": lambda x: F.max_pool2d(x, 2, 1, 0, dilation=2),
    "avg_pool ceil, no pad count": lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
    "avg_pool divisor": lambda x: F.avg_pool2d(x, 2, divisor_override=3),
    "adaptive non-divisible": lambda x: F.adaptive_avg_pool2d(x, (4, 3)),
    "conv same (even kernel)": lambda x: F.conv2d(x, _W, _B, padding="same"),
    "conv stride+dilation": lambda x: F.conv2d(x, _W, _B, stride=(2, 1), padding=(1, 2), dilation=(2, 1)),
    "conv unbatched": lambda x: F.conv2d(x[0], _W, None, padding=1),
    "batch_norm": lambda x: F.batch_norm(x, ag.zeros(3) + 0.1, ag.ones(3) * 2, None, ag.ones(3), False, 0.1, 1e-3),
    "layer_norm": lambda x: F.layer_norm(x, (11, 9)),
    "gelu tanh": lambda x: F.gelu(x, approximate="tanh"),
    "softplus beta/threshold": lambda x: F.softplus(x, 2.0, 1.0),
    "1-d pools": lambda x: F.avg_pool1d(F.max_pool1d(x.flatten(1, 2), 3, 2), 2),
    "nchw + nhwc add": lambda x: F.conv2d(x, _W3, None, padding=1) * 0.5 + x[:, :1],
}


@pytest.mark.parametrize("name", sorted(KERNEL_VARIANTS))
def test_kernel_variants_match_eager(name):
    fn = KERNEL_VARIANTS[name]
    x = np.random.default_rng(0).standard_normal((2, 3, 11, 9)).astype(np.float32)
    g = export.trace(fn, (ag.tensor(x),))
    np.testing.assert_allclose(g(x), fn(ag.tensor(x)).numpy(), rtol=0, atol=1e-6)
