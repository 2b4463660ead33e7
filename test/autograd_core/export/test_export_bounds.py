"""The runtime bounds what a file can make it allocate, and refuses non-finite weights.

Every array the runtime makes while loading a graph (buffers, padded copies, im2col matrices,
re-laid-out weights, masks, pooling windows) is charged against `MAX_BUFFER_BYTES` before it is
allocated, so sizes taken from the file (pads, strides, kernels, dilations, output sizes, shapes)
raise `FormatError` instead of a MemoryError. The tests lower the cap to 1 MiB and measure what
loading (and one call) really allocates with tracemalloc, which sees NumPy's array memory.
"""
import json
import os
import tracemalloc

import numpy as np
import pytest

import autograd_core as ag
import autograd_core.nn as nn
import autograd_core.nn.functional as F
from autograd_core import export, runtime
from autograd_core.runtime import _model

CAP = 1 << 20
SLACK = 512 << 10  # the graph JSON, Python objects of the plan: well under this for these graphs


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setattr(_model, "MAX_BUFFER_BYTES", CAP)


def _parts(data):
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    return header, json.loads(header["__metadata__"]["graph"]), data[8 + n:]


def _join(header, graph, body):
    header = dict(header, __metadata__=dict(header["__metadata__"], graph=json.dumps(graph)))
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    return len(hb).to_bytes(8, "little") + hb + body


def _edited(g, edit):
    header, graph, body = _parts(g.to_bytes())
    edit(graph)
    return _join(header, graph, body)


def _declare(graph, value, shape):
    graph["values"][value]["shape"] = list(shape)


def _load_measured(data, call=True):
    """(model or the FormatError, peak bytes traced while loading and calling it once)."""
    tracemalloc.start()
    try:
        try:
            model = runtime.load_bytes(data)
        except runtime.FormatError as e:
            return e, tracemalloc.get_traced_memory()[1]
        if call:
            model(*[np.zeros(s, d) for s, d in zip(model.input_shapes, model.input_dtypes)])
        return model, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


_W1 = ag.tensor(np.random.default_rng(0).standard_normal((1, 1, 3, 3)).astype(np.float32))
_W2 = ag.tensor(np.random.default_rng(1).standard_normal((2, 1, 3, 3)).astype(np.float32))
_LIN = ag.tensor(np.random.default_rng(2).standard_normal((8, 1)).astype(np.float32))


def _conv_pads(pad):
    g = export.trace(lambda x: F.conv2d(x, _W1), (ag.zeros(1, 1, 6, 6),))

    def edit(graph):
        node = graph["nodes"][0]
        node["attrs"]["pads"] = [pad] * 4
        _declare(graph, node["outputs"][0], (1, 1, 4 + 2 * pad, 4 + 2 * pad))
    return _edited(g, edit)


def _grouped_conv_pads(pad):
    g = export.trace(lambda x: F.conv2d(x, _W2, groups=2), (ag.zeros(1, 2, 6, 6),))

    def edit(graph):
        node = graph["nodes"][0]
        node["attrs"]["pads"] = [pad] * 4
        _declare(graph, node["outputs"][0], (1, 2, 4 + 2 * pad, 4 + 2 * pad))
    return _edited(g, edit)


def _expand_then_matmul(rows):
    g = export.trace(lambda x: x.expand(4, 8) @ _LIN, (ag.zeros(1, 8),))

    def edit(graph):
        for node in graph["nodes"]:
            if node["op"] == "expand":
                node["attrs"]["shape"] = [rows, 8]
                _declare(graph, node["outputs"][0], (rows, 8))
            else:
                _declare(graph, node["outputs"][0], (rows, 1))
    return _edited(g, edit)


def _adaptive(out_hw):
    g = export.trace(lambda x: F.adaptive_avg_pool2d(x, (4, 3)), (ag.zeros(1, 1, 7, 7),))

    def edit(graph):
        node = graph["nodes"][0]
        node["attrs"]["output_size"] = list(out_hw)
        _declare(graph, node["outputs"][0], (1, 1) + tuple(out_hw))
    return _edited(g, edit)


def test_huge_conv_padding_is_a_format_error_not_a_memory_error():
    """The issue's file: pads of 1e6 asked for a 14.6 TiB padded copy (MemoryError, exit 1)."""
    with pytest.raises(runtime.FormatError, match="bytes of buffers"):
        runtime.load_bytes(_conv_pads(10 ** 6))


@pytest.mark.parametrize("name, data", [
    ("conv im2col of a padded input", lambda: _conv_pads(150)),          # output 370 KB, im2col 3.7 MB
    ("grouped conv im2col", lambda: _grouped_conv_pads(150)),            # output 740 KB, im2col 7.4 MB
    ("expanded view copied by the GEMM", lambda: _expand_then_matmul(2 ** 17)),  # output 512 KB, view 4 MiB
    ("adaptive pool windows", lambda: _adaptive((10000, 3))),            # output 120 KB, 30 000 windows
])
def test_loading_and_running_never_allocates_past_the_cap(small_cap, name, data):
    result, peak = _load_measured(data())
    assert peak <= CAP + SLACK, f"{name}: {peak} bytes allocated under a {CAP}-byte cap ({result!r})"


def test_degenerate_pool_sizes_are_format_errors():
    with pytest.raises(runtime.FormatError, match="output_size"):
        runtime.load_bytes(_adaptive((0, 3)))


def test_adaptive_pool_general_path_matches_eager():
    """The window-matrix kernel (any output size, also larger than the input) equals eager mode."""
    x = np.random.default_rng(3).standard_normal((2, 3, 7, 5)).astype(np.float32)
    for size in ((4, 3), (9, 11), (1, 5), (7, 2)):
        g = export.trace(lambda t, size=size: F.adaptive_avg_pool2d(t, size), (ag.tensor(x),))
        np.testing.assert_allclose(g(x), F.adaptive_avg_pool2d(ag.tensor(x), size).numpy(), rtol=0, atol=1e-6)


_INT_CHOICES = [0, -1, 1, 2, 3, 5, 100, 1000, 10 ** 6, 2 ** 31, 2 ** 40, 10 ** 18]


def _fuzz_graphs():
    ag.manual_seed(0)
    conv = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.LeakyReLU(0.1), nn.MaxPool2d(2),
                         nn.Conv2d(4, 4, 3, groups=2), nn.AvgPool2d(2, padding=1), nn.Flatten(), nn.Linear(16, 3))
    yield export.trace(conv, (ag.randn(1, 2, 8, 8),))
    yield export.trace(lambda x: F.adaptive_avg_pool2d(F.softplus(x, 2.0, 1.0), (4, 3)).reshape(1, -1)
                       .expand(2, 36).sum(1), (ag.randn(1, 3, 11, 9),))
    yield export.trace(_Recurrent(), (ag.randn(2, 4), ag.zeros(2, 6)))


class _Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.gru = nn.GRUCell(4, 6)

    def forward(self, x, h):
        return self.gru(self.norm(x), h)


def test_fuzzed_sizes_load_within_the_cap_or_are_format_errors(small_cap):
    """Random file-supplied numbers (attributes, declared shapes, input shapes) in real graphs:
    each file loads and runs within the cap, or is refused with FormatError; nothing else."""
    seed = int(os.environ.get("AG_FUZZ_SEED", np.random.SeedSequence().entropy % 2 ** 32))
    print(f"runtime bounds fuzz seed: {seed} (replay with AG_FUZZ_SEED={seed})")
    rng = np.random.default_rng(seed)
    refused = 0
    for graph in _fuzz_graphs():
        header, base, body = _parts(graph.to_bytes())
        targets = [(n["attrs"], k) for n in base["nodes"] for k, v in n.get("attrs", {}).items()
                   if isinstance(v, list) and v and all(type(i) is int for i in v)]
        targets += [(spec, "shape") for spec in list(base["values"].values()) + base["inputs"] if spec["shape"]]
        for case in range(150):
            g = json.loads(json.dumps(base))
            # re-find the same targets in the copy, then change one to three numbers
            copy_targets = [(n["attrs"], k) for n in g["nodes"] for k, v in n.get("attrs", {}).items()
                            if isinstance(v, list) and v and all(type(i) is int for i in v)]
            copy_targets += [(s, "shape") for s in list(g["values"].values()) + g["inputs"] if s["shape"]]
            assert len(copy_targets) == len(targets)
            for _ in range(int(rng.integers(1, 4))):
                obj, key = copy_targets[int(rng.integers(len(copy_targets)))]
                obj[key][int(rng.integers(len(obj[key])))] = int(rng.choice(_INT_CHOICES))
            try:
                result, peak = _load_measured(_join(header, g, body))
            except Exception as e:  # noqa: BLE001 - the assertion names what escaped
                raise AssertionError(f"seed {seed}, case {case}: {type(e).__name__} escaped: {e}") from None
            refused += isinstance(result, runtime.FormatError)
            assert peak <= CAP + SLACK, f"seed {seed}, case {case}: {peak} bytes allocated ({result!r})"
    assert refused > 0


# -- non-finite weights --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def linear_graph():
    ag.manual_seed(0)
    return export.trace(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)), (ag.randn(1, 3),))


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_weights_are_refused(linear_graph, value):
    header, graph, body = _parts(linear_graph.to_bytes())
    info = header["0.weight"]
    a, b = info["data_offsets"]
    w = np.frombuffer(body[a:b], np.float32).copy()
    w[5] = value
    body = body[:a] + w.tobytes() + body[b:]
    with pytest.raises(runtime.FormatError, match=r"'0\.weight' \[4, 3\] holds 1 non-finite value.*index \[1, 2\]"):
        runtime.load_bytes(_join(header, graph, body))


def test_all_nan_weights_are_refused(linear_graph):
    header, graph, body = _parts(linear_graph.to_bytes())
    body = np.full(len(body) // 4, np.nan, np.float32).tobytes()
    with pytest.raises(runtime.FormatError, match="non-finite"):
        runtime.load_bytes(_join(header, graph, body))


def test_an_infinite_scalar_literal_is_not_a_weight():
    """-inf as a fill value is a 0-d constant of the traced code: the model still loads."""
    g = export.trace(lambda x: x.masked_fill(x < 0, float("-inf")), (ag.randn(2, 3),), check=False)
    m = runtime.load_bytes(g.to_bytes())
    out = m(np.array([[1, -1, 2], [0, -3, 1]], np.float32))
    np.testing.assert_array_equal(out, [[1, -np.inf, 2], [0, -np.inf, 1]])
