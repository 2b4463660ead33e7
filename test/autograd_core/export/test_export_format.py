"""The graph file is data only: crafted, truncated or unknown files are refused with a clear error
(`runtime.FormatError`) and nothing in them is ever executed."""
import json
import os
import pickle

import numpy as np
import pytest

import autograd_core as ag
import autograd_core.nn as nn
from autograd_core import export, runtime
from autograd_core.runtime import _format


@pytest.fixture(scope="module")
def good():
    ag.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    g = export.trace(net, (ag.randn(1, 1, 6, 6),))
    return g, g.to_bytes()


def _split(data):
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    return header, data[8 + n:]


def _join(header, body):
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    return len(hb).to_bytes(8, "little") + hb + body


def _with_graph(data, edit):
    header, body = _split(data)
    g = json.loads(header["__metadata__"]["graph"])
    edit(g)
    header["__metadata__"]["graph"] = json.dumps(g)
    return _join(header, body)


def test_good_file_loads_from_bytes_and_path(good, tmp_path):
    g, data = good
    m = runtime.load_bytes(data)
    x = np.random.default_rng(0).standard_normal((1, 1, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(m(x), g(x), rtol=0, atol=0)
    (tmp_path / "m.agc").write_bytes(data)
    np.testing.assert_allclose(runtime.load(tmp_path / "m.agc")(x), g(x), rtol=0, atol=0)


@pytest.mark.parametrize("cut", [0, 3, 8, 40, -1, -100])
def test_truncated_files_are_refused(good, cut):
    _, data = good
    with pytest.raises(runtime.FormatError, match="truncated|shorter|not an exported graph|data section"):
        runtime.load_bytes(data[:cut] if cut >= 0 else data[:len(data) + cut])


def test_trailing_garbage_is_refused(good):
    _, data = good
    with pytest.raises(runtime.FormatError, match="data section"):
        runtime.load_bytes(data + b"\0" * 8)


def test_not_a_graph_file(good):
    with pytest.raises(runtime.FormatError, match="header length"):
        runtime.load_bytes(b"\xff" * 64)
    with pytest.raises(runtime.FormatError, match="not valid JSON"):
        runtime.load_bytes((16).to_bytes(8, "little") + b"{not json at all")
    header, body = _split(good[1])
    del header["__metadata__"]
    with pytest.raises(runtime.FormatError, match="__metadata__"):
        runtime.load_bytes(_join(header, body))
    header, body = _split(good[1])
    header["__metadata__"]["format"] = "something.else"
    with pytest.raises(runtime.FormatError, match="format"):
        runtime.load_bytes(_join(header, body))


def test_future_version_is_refused(good):
    header, body = _split(good[1])
    header["__metadata__"]["format_version"] = str(_format.FORMAT_VERSION + 1)
    with pytest.raises(runtime.FormatError, match="unsupported format_version"):
        runtime.load_bytes(_join(header, body))


def test_unknown_op_is_refused(good):
    def edit(g):
        g["nodes"][1]["op"] = "os.system"
    with pytest.raises(runtime.FormatError, match="unknown op 'os.system'"):
        runtime.load_bytes(_with_graph(good[1], edit))


@pytest.mark.parametrize("edit, msg", [
    (lambda g: g["nodes"][0]["attrs"].update(stride="2"), "stride"),
    (lambda g: g["nodes"][0]["attrs"].update(groups=0), "groups"),
    (lambda g: g["nodes"][1]["inputs"].__setitem__(0, "nowhere"), "not defined before use"),
    (lambda g: g["nodes"].reverse(), "not defined before use"),
    (lambda g: g["values"][g["nodes"][0]["outputs"][0]].update(shape=[1, 4, 5, 5]), "declares"),
    (lambda g: g["values"][g["nodes"][0]["outputs"][0]].update(dtype="object"), "dtype"),
    (lambda g: g["inputs"][0].update(shape=[1, 1, 2 ** 20, 2 ** 20]), "bytes of buffers"),
    (lambda g: g["outputs"][0].update(value="v999"), "undefined value"),
    (lambda g: g["constants"].append("missing.weight"), "not stored"),
    (lambda g: g["nodes"][1]["outputs"].__setitem__(0, g["nodes"][0]["outputs"][0]), "defined twice"),
    (lambda g: g.pop("nodes"), "missing 'nodes'"),
])
def test_crafted_graphs_are_refused(good, edit, msg):
    with pytest.raises(runtime.FormatError, match=msg):
        runtime.load_bytes(_with_graph(good[1], edit))


def test_crafted_tensor_entries_are_refused(good):
    header, body = _split(good[1])
    name = next(k for k in header if k != "__metadata__")
    for patch, msg in ((dict(dtype="O"), "unsupported dtype"), (dict(shape=[-1]), "malformed shape"),
                       (dict(data_offsets=[0, 10 ** 12]), "data_offsets|truncated"),
                       (dict(shape=[1, 2, 3, 4, 5, 6, 7, 8, 9]), "malformed shape")):
        h = json.loads(json.dumps(header))
        h[name].update(patch)
        with pytest.raises(runtime.FormatError, match=msg):
            runtime.load_bytes(_join(h, body))
    h = json.loads(json.dumps(header))
    names = [k for k in h if k != "__metadata__"]
    h[names[1]]["data_offsets"] = list(h[names[0]]["data_offsets"])  # overlapping data
    h[names[1]]["shape"] = h[names[0]]["shape"]
    h[names[1]]["dtype"] = h[names[0]]["dtype"]
    with pytest.raises(runtime.FormatError, match="overlapping|cover|does not list|declares|match"):
        runtime.load_bytes(_join(h, body))


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch BOOM_MARKER",))


def test_pickle_payloads_never_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    payload = pickle.dumps(_Boom())
    (tmp_path / "evil.agc").write_bytes(payload)
    with pytest.raises(runtime.FormatError):
        runtime.load(tmp_path / "evil.agc")
    # a pickle smuggled into the metadata or a tensor is just bytes
    header = {"__metadata__": {"format": _format.FORMAT_NAME, "format_version": "1", "graph": payload.hex()},
              "w": {"dtype": "U8", "shape": [len(payload)], "data_offsets": [0, len(payload)]}}
    with pytest.raises(runtime.FormatError):
        runtime.load_bytes(_join(header, payload))
    assert not (tmp_path / "BOOM_MARKER").exists()


def test_safetensors_library_files_interoperate(good, tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    g, data = good
    header, _ = _split(data)
    tensors = {k: np.ascontiguousarray(v) for k, v in g.constants.items()}
    st.save_file(tensors, str(tmp_path / "lib.agc"), metadata=header["__metadata__"])
    x = np.ones((1, 1, 6, 6), np.float32)
    np.testing.assert_allclose(runtime.load(tmp_path / "lib.agc")(x), g(x), rtol=0, atol=0)
    # and the reference library reads ours
    (tmp_path / "ours.agc").write_bytes(data)
    back = st.load_file(str(tmp_path / "ours.agc"))
    for k, v in g.constants.items():
        np.testing.assert_array_equal(back[k], v)


def test_plain_weights_file_is_not_a_graph(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    st.save_file({"w": np.zeros(3, np.float32)}, str(tmp_path / "w.safetensors"))
    with pytest.raises(runtime.FormatError, match="__metadata__"):
        runtime.load(tmp_path / "w.safetensors")


def test_save_adds_application_metadata_but_never_replaces_the_graphs_own(good, tmp_path):
    g, _ = good
    path = tmp_path / "m.agc"
    g.save(str(path), {"my_app": '{"version": 1}'})
    header, _ = _split(path.read_bytes())
    assert header["__metadata__"]["my_app"] == '{"version": 1}'
    x = np.random.default_rng(0).standard_normal((1, 1, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(runtime.load(path)(x), g(x), rtol=0, atol=0)
    for bad in ({"graph": "{}"}, {"format": "x"}, {"my_app": 3}, {1: "x"}):
        with pytest.raises(ValueError, match="extra metadata"):
            g.save(str(tmp_path / "bad.agc"), bad)
