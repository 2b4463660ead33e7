"""ONNX export: standard ONNX (checker passes), outputs through onnxruntime equal eager to 1e-5."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import autograd_core as ag  # noqa: E402
import autograd_core.nn as nn  # noqa: E402
import autograd_core.nn.functional as F  # noqa: E402
from autograd_core import export  # noqa: E402


class PolicyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, 32, 2, 2), nn.LeakyReLU(0.05), nn.Conv2d(32, 64, 3), nn.LeakyReLU(0.05),
            nn.Conv2d(64, 128, 3), nn.LeakyReLU(0.05), nn.Flatten(), nn.Linear(1024, 192))
        self.v_proj = nn.Linear(10, 192)
        self.gru = nn.GRUCell(192, 192)
        self.fc = nn.Linear(192, 6)
        self.act = nn.LeakyReLU(0.05)

    def forward(self, x, v, hx):
        hx = self.gru(self.act(self.stem(x) + self.v_proj(v)), hx)
        return self.fc(self.act(hx)), hx


def _session(model_proto):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model_proto.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _eager(model, *arrays):
    with ag.no_grad():
        out = model(*[ag.tensor(a) for a in arrays])
    return tuple(o.numpy() for o in out) if isinstance(out, tuple) else (out.numpy(),)


def test_policy_onnx_rollout_100_steps(tmp_path):
    ag.manual_seed(0)
    net = PolicyNet()
    rng = np.random.default_rng(0)
    x = rng.uniform(-0.6, 2.0, (1, 1, 12, 16)).astype(np.float32)
    v = rng.standard_normal((1, 10)).astype(np.float32)
    h = np.zeros((1, 192), np.float32)
    path = tmp_path / "policy.onnx"
    proto = export.to_onnx(net, (ag.tensor(x), ag.tensor(v), ag.tensor(h)), path, opset=17)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    ops = {n.op_type for n in proto.graph.node}
    assert {"Conv", "LeakyRelu", "Gemm", "MatMul", "Sigmoid", "Tanh", "Split", "Sub", "Mul"} <= ops
    assert not ops & {"GRU", "LSTM", "RNN"}  # the cell is spelled out; the state is a graph input/output
    assert [i.name for i in proto.graph.input] == ["x", "v", "hx"]
    sess = _session(proto)
    h_o = h_e = h
    for _ in range(100):
        x = rng.uniform(-0.6, 2.0, (1, 1, 12, 16)).astype(np.float32)
        v = rng.standard_normal((1, 10)).astype(np.float32)
        a_o, h_o = sess.run(None, {"x": x, "v": v, "hx": h_o})
        a_e, h_e = _eager(net, x, v, h_e)
        np.testing.assert_allclose(a_o, a_e, rtol=0, atol=1e-5)
        np.testing.assert_allclose(h_o, h_e, rtol=0, atol=1e-5)


def test_mlp_and_cnn_onnx(tmp_path):
    ag.manual_seed(1)
    mlp = nn.Sequential(nn.Linear(31, 64), nn.Tanh(), nn.Linear(64, 4), nn.Sigmoid())
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 8, 3, groups=2), nn.AvgPool2d(2, padding=1), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Dropout(0.2), nn.Linear(8, 3))
    cnn[1].running_mean.data = ag.randn(8) * 0.1
    cnn[1].running_var.data = ag.rand(8) + 0.5
    rng = np.random.default_rng(1)
    for model, shape in ((mlp, (4, 31)), (cnn, (2, 3, 16, 16))):
        x = rng.standard_normal(shape).astype(np.float32)
        proto = export.to_onnx(model, (ag.tensor(x),))
        sess = _session(proto)
        model.eval()  # eager reference in eval mode, as traced
        for _ in range(10):
            x = rng.standard_normal(shape).astype(np.float32)
            (got,) = sess.run(None, {"input": x})
            np.testing.assert_allclose(got, _eager(model, x)[0], rtol=0, atol=1e-5)
    assert "BatchNormalization" in {n.op_type for n in export.to_onnx(cnn, (ag.tensor(x),)).graph.node}


def test_sequence_modules_and_functional_ops_onnx():
    from autograd_core.nn.conv import Conv1d

    class R(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTMCell(6, 12)
            self.gru = nn.GRU(6, 10, num_layers=2, batch_first=True)
            self.ln = nn.LayerNorm(12)
            self.c1 = Conv1d(6, 4, 3, padding=1)

        def forward(self, x, seq, h, c):
            h2, c2 = self.lstm(x, (h, c))
            y, hn = self.gru(seq)
            z = self.c1(seq.transpose(1, 2)).amax(dim=-1)
            w = ag.where(z > 0, z, z * 0.1).clamp(-1.0, 1.0)
            return self.ln(h2).tanh(), c2, y[:, -1], hn, F.log_softmax(w, -1), (w ** 2).mean(0, keepdim=True)

    ag.manual_seed(2)
    r = R()
    rng = np.random.default_rng(2)
    arrs = [rng.standard_normal(s).astype(np.float32) for s in ((3, 6), (3, 5, 6), (3, 12), (3, 12))]
    g = export.trace(r, tuple(ag.tensor(a) for a in arrs))
    sess = _session(export.to_onnx(g, None, opset=18))
    got = sess.run(None, dict(zip(g.input_names, arrs)))
    want = _eager(r, *arrs)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


def test_kernel_variants_onnx():
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location(
        "_export_roundtrip_variants", os.path.join(os.path.dirname(__file__), "test_export_roundtrip.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = np.random.default_rng(0).standard_normal((2, 3, 11, 9)).astype(np.float32)
    for name, fn in sorted(mod.KERNEL_VARIANTS.items()):
        g = export.trace(fn, (ag.tensor(x),))
        (got,) = _session(export.to_onnx(g)).run(None, {"x": x})
        np.testing.assert_allclose(got, fn(ag.tensor(x)).numpy(), rtol=0, atol=1e-5, err_msg=name)
