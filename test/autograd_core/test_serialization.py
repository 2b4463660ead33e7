"""autograd_core.save / load: exact round trips of nested structures and every dtype, and refusal
of crafted files (pickles, torch.save archives, truncated or malformed files) without running code."""
import io
import json
import os
import pickle
import struct
from collections import OrderedDict

import numpy as np
import pytest

import autograd_core as ag
from autograd_core.serialization import FORMAT, FORMAT_VERSION

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_]


def _roundtrip(obj, tmp_path):
    path = tmp_path / "obj.safetensors"
    ag.save(obj, path)
    return ag.load(path)


def _same(a, b):
    """Structural equality: types, dtypes, shapes and values (tensors bit for bit)."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, ag.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys())
        for k in a:
            assert type(k) is type(next(x for x in b if x == k))
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3, 4), (3, 0, 2)])
def test_every_dtype_and_shape_round_trips(tmp_path, dtype, shape):
    rng = np.random.default_rng(0)
    arr = (rng.standard_normal(shape) * 50).astype(dtype) if dtype != np.bool_ else rng.random(shape) > 0.5
    t = ag.tensor(arr)
    back = _roundtrip({"t": t}, tmp_path)["t"]
    _same(t, back)
    assert back._data.flags.writeable and back._data.flags.c_contiguous


def test_nested_structure_round_trips_exactly(tmp_path):
    obj = {
        "state": {0: {"step": ag.tensor(3.0), "exp_avg": ag.zeros(2, 2)}, 7: {}},
        "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "amsgrad": False, "params": [0, 7], "name": None}],
        "odict": OrderedDict([("b.weight", ag.ones(3, dtype=ag.float64)), ("a", ag.tensor([1, 2]))]),
        "scalars": [0, -1, 2 ** 70, 1.5, -0.0, 1e-300, float("inf"), float("-inf"), float("nan"), True, False,
                    "", "ünïcødé ✓", "\x00\n\"quoted\""],
        "tuple_keys": {(1, "a"): "x", 2.5: "y", True: "z", None: "n"},
        "empty": ([], (), {}),
        "nested": [[[[[ag.tensor([[1.0]], requires_grad=True)]]]]],
        "numpy_scalars": [np.float32(0.5), np.int64(3), np.bool_(True)],
    }
    back = _roundtrip(obj, tmp_path)
    expect = dict(obj, numpy_scalars=[0.5, 3, True])  # NumPy scalars come back as Python numbers
    _same(expect, back)
    assert back["nested"][0][0][0][0][0].requires_grad
    assert str(back["scalars"][4]) == "-0.0"


def test_views_and_shared_storage_are_saved_as_copies(tmp_path):
    base = ag.arange(12, dtype=ag.float32).reshape(3, 4)
    view = base[:, 1:3].t()  # non-contiguous view
    back = _roundtrip([base, view, base], tmp_path)
    np.testing.assert_array_equal(back[1].numpy(), view.numpy())
    back[0].add_(1.0)
    np.testing.assert_array_equal(back[2].numpy(), base.numpy())  # independent copies


def test_file_objects_and_torch_keywords():
    buf = io.BytesIO()
    ag.save({"w": ag.ones(2)}, buf)
    for kw in (dict(), dict(map_location="cpu"), dict(map_location=ag.device("cpu"), weights_only=False),
               dict(map_location={"cuda:0": "cpu"}, weights_only=True, mmap=False)):
        buf.seek(0)
        assert ag.load(buf, **kw)["w"].tolist() == [1.0, 1.0]
    buf.seek(0)
    with pytest.raises(RuntimeError, match="CPU only"):
        ag.load(buf, map_location="cuda:0")
    with pytest.raises(ValueError, match="never unpickles"):
        ag.load(buf, pickle_module=pickle)


def test_save_refuses_unsupported_objects(tmp_path):
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match=r"obj\['a'\]\[1\].*ndarray"):
        ag.save({"a": [1, np.zeros(3)]}, path)
    with pytest.raises(TypeError, match="object"):
        ag.save({"f": object()}, path)
    with pytest.raises(TypeError, match="dict key"):
        ag.save({ag.ones(1): 1}, path)
    loop = []
    loop.append(loop)
    with pytest.raises(ValueError, match="contains itself"):
        ag.save(loop, path)
    assert not path.exists()
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]  # no temporary left behind


def test_save_replaces_atomically(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    ag.save({"v": 1}, path)
    ag.save({"v": 2}, path)
    assert ag.load(path) == {"v": 2}
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask  # a normal file mode, not mkstemp's 0600


# -- crafted files ----------------------------------------------------------------------------------
class _Evil:
    """Unpickling this creates the marker file (what a malicious checkpoint would do)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickle_is_refused_and_never_executed(tmp_path):
    marker = tmp_path / "PWNED"
    path = tmp_path / "evil.pt"
    with open(path, "wb") as f:
        pickle.dump({"state_dict": _Evil(str(marker))}, f)
    # Sanity: the file is live — unpickling it would create the marker.
    assert b"PWNED" in path.read_bytes()
    for kw in (dict(), dict(weights_only=False)):
        with pytest.raises(ValueError, match="pickle"):
            ag.load(path, **kw)
    assert not marker.exists()
    # An old-protocol pickle (no 0x80 prefix) is refused too.
    with open(path, "wb") as f:
        pickle.dump(_Evil(str(marker)), f, protocol=0)
    with pytest.raises(ValueError, match="not a valid autograd_core checkpoint"):
        ag.load(path)
    assert not marker.exists()


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickles_of_every_protocol_are_refused(tmp_path, protocol):
    marker = tmp_path / "PWNED"
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"state_dict": _Evil(str(marker)), "w": list(range(50))}, protocol=protocol))
    with pytest.raises(ValueError, match="pickle" if protocol >= 2 else "not a valid autograd_core checkpoint"):
        ag.load(path, weights_only=False)
    assert not marker.exists()


def test_header_length_with_low_byte_0x80_is_not_a_pickle(tmp_path):
    # The reproducer: this header is 0x180 bytes long, so the file starts 80 01 00 ...
    path = tmp_path / "c.pt"
    ag.save({"name": "x" * 62, "w": ag.ones(2)}, path)
    assert path.read_bytes()[:2] == b"\x80\x01"
    back = ag.load(path)
    assert back["name"] == "x" * 62 and back["w"].tolist() == [1.0, 1.0]
    # A header length whose first two bytes read like a protocol-2..5 pickle's PROTO opcode.
    for pad in range(1200):
        data = _valid_bytes({"n": "y" * pad})
        if data[0] == 0x80 and 2 <= data[1] <= 5:
            assert ag.load(io.BytesIO(data)) == {"n": "y" * pad}
            break
    else:
        raise AssertionError("no header length 0x280..0x580 within 1200 paddings")


def test_torch_save_archive_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(3)}, path)
    with pytest.raises(ValueError, match="zip archive"):
        ag.load(path)
    torch.save({"w": torch.ones(3)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match="pickle"):
        ag.load(path)


def _valid_bytes(obj):
    buf = io.BytesIO()
    ag.save(obj, buf)
    return buf.getvalue()


def _with_header(header, body=b""):
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body


def _meta(structure, fmt=FORMAT, version=FORMAT_VERSION):
    return {"format": fmt, "format_version": version, "structure": json.dumps(structure)}


def _load_bytes(data, tmp_path):
    path = tmp_path / "crafted.safetensors"
    path.write_bytes(data)
    return ag.load(path)


T0 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
BODY = np.ones(2, np.float32).tobytes()


@pytest.mark.parametrize("data,match", [
    (b"", "fewer than a safetensors header"),
    (b"\x05\x00", "fewer than a safetensors header"),
    (struct.pack("<Q", 1 << 40) + b"{}", "above the"),
    (struct.pack("<Q", 500) + b"{}", "only 2 bytes follow"),
    (struct.pack("<Q", 4) + b"abcd", "not a JSON object"),
    (struct.pack("<Q", 4) + b"{abc", "not valid JSON"),
    (_with_header({"t": T0}, BODY), "no __metadata__"),
    (_with_header({"__metadata__": _meta({"type": "none"}, fmt="other")}), "format is 'other'"),
    (_with_header({"__metadata__": _meta({"type": "none"}, version="99")}), "format_version '99'"),
    (_with_header({"__metadata__": {"format": FORMAT, "format_version": FORMAT_VERSION}}), "no 'structure'"),
    (_with_header({"__metadata__": _meta({"type": "tensor", "key": "9"}), "t": T0}, BODY), "not in the file"),
    (_with_header({"__metadata__": _meta({"type": "list", "items": []}), "t": T0}, BODY), "not referenced"),
    (_with_header({"__metadata__": _meta({"type": "list", "items": [{"type": "tensor", "key": "t"}] * 2}),
                   "t": T0}, BODY), "referenced twice"),
    (_with_header({"__metadata__": _meta({"type": "pickle", "value": "gASV"})}), "unknown type tag 'pickle'"),
    (_with_header({"__metadata__": _meta({"type": "int", "value": "3"})}), "invalid value"),
    (_with_header({"__metadata__": _meta({"type": "float", "value": "1e3"})}), "invalid value"),
    (_with_header({"__metadata__": _meta({"type": "dict", "items": [[{"type": "list", "items": []},
                                                                     {"type": "none"}]]})}), "cannot be a dict key"),
    (_with_header({"__metadata__": _meta({"type": "dict", "items": [[{"type": "none"}]]})}), "pairs"),
    (_with_header({"__metadata__": _meta({"type": "none", "code": "x"})}), "unexpected fields"),
    (_with_header({"__metadata__": _meta([1, 2])}), "expected an object"),
    (_with_header({"__metadata__": _meta({"type": "none"}), "t": {"dtype": "BF16", "shape": [1],
                                                                  "data_offsets": [0, 2]}}, b"\0\0"), "dtype 'BF16'"),
    (_with_header({"__metadata__": _meta({"type": "tensor", "key": "t"}), "t": T0}, BODY[:5]), "safetensors rejected"),
    (_with_header({"__metadata__": _meta({"type": "tensor", "key": "t"}),
                   "t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, BODY), "safetensors rejected"),
    (_with_header({"__metadata__": _meta({"type": "tensor", "key": "t"}),
                   "t": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\x01\x07"), "other than 0 and 1"),
])
def test_crafted_files_are_refused(tmp_path, data, match):
    with pytest.raises(ValueError, match=match):
        _load_bytes(data, tmp_path)


def test_truncated_real_checkpoint_is_refused(tmp_path):
    data = _valid_bytes({"w": ag.ones(100), "b": [1, 2]})
    for cut in (3, 8, 20, len(data) // 2, len(data) - 1):
        with pytest.raises(ValueError, match="not a valid autograd_core checkpoint"):
            _load_bytes(data[:cut], tmp_path)


def test_deeply_nested_structure_is_refused(tmp_path):
    node = {"type": "none"}
    for _ in range(300):
        node = {"type": "list", "items": [node]}
    with pytest.raises(ValueError, match="nesting deeper"):
        _load_bytes(_with_header({"__metadata__": _meta(node)}), tmp_path)
    deep = None
    for _ in range(300):
        deep = [deep]
    with pytest.raises(ValueError, match="nesting deeper"):
        ag.save(deep, tmp_path / "deep.safetensors")


def test_model_and_optimizer_checkpoint_round_trips(tmp_path):
    from autograd_core import nn

    ag.manual_seed(0)
    net = nn.Linear(3, 2)
    opt = ag.optim.Adam(net.parameters(), lr=0.01)
    net(ag.randn(4, 3)).sum().backward()
    opt.step()
    ag.save({"model": net.state_dict(), "optim": opt.state_dict()}, tmp_path / "ck.safetensors")
    ck = ag.load(tmp_path / "ck.safetensors")
    net2 = nn.Linear(3, 2)
    net2.load_state_dict(ck["model"])
    opt2 = ag.optim.Adam(net2.parameters(), lr=0.01)
    opt2.load_state_dict(ck["optim"])
    for a, b in zip(net.parameters(), net2.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert float(opt2.state[next(iter(net2.parameters()))]["step"]) == 1.0


# -- round-trip fuzz --------------------------------------------------------------------------------
_FUZZ_CHARS = "abcxyz_.0123456789 ÄéжΩ✓\U0001F681\x00\n\"\\"


def _fuzz_str(rng):
    n = int(rng.choice([0, 1, 3, 8, 20, 61, 62, 63, 64, 130])) + int(rng.integers(0, 9))
    return "".join(_FUZZ_CHARS[i] for i in rng.integers(0, len(_FUZZ_CHARS), n))


def _fuzz_tensor(rng):
    dtype = np.dtype(DTYPES[rng.integers(len(DTYPES))])
    shape = tuple(int(s) for s in rng.integers(0, 4, int(rng.integers(0, 4))))  # 0-d, empty and small
    if dtype == np.bool_:
        arr = rng.random(shape) > 0.5
    elif dtype.kind == "f":
        arr = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)).astype(dtype)
        if arr.size and rng.random() < 0.2:
            arr.flat[int(rng.integers(arr.size))] = rng.choice([np.inf, -np.inf, np.nan, -0.0])
    else:
        info = np.iinfo(dtype)
        arr = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return ag.tensor(np.asarray(arr, dtype=dtype), requires_grad=bool(dtype.kind == "f" and rng.random() < 0.3))


def _fuzz_key(rng):
    kind = rng.integers(0, 6)
    if kind <= 2:
        return _fuzz_str(rng)
    if kind == 3:
        return int(rng.integers(-10 ** 6, 10 ** 6))
    if kind == 4:
        return float(rng.standard_normal())
    return (int(rng.integers(0, 9)), _fuzz_str(rng))


def _fuzz_leaf(rng):
    kind = rng.integers(0, 8)
    if kind <= 2:
        return _fuzz_tensor(rng)
    if kind == 3:
        return _fuzz_str(rng)
    if kind == 4:
        return int(rng.integers(-2 ** 62, 2 ** 62)) * int(rng.choice([1, 2 ** 10]))
    if kind == 5:
        return float(rng.choice([rng.standard_normal() * 1e3, np.inf, -np.inf, np.nan, -0.0, 5e-324]))
    return [None, True, False][int(rng.integers(0, 3))]


def _fuzz_obj(rng, depth=0):
    kind = rng.integers(0, 6) if depth < 4 else 5
    n = int(rng.integers(0, 5))
    if kind == 0:
        return {_fuzz_key(rng): _fuzz_obj(rng, depth + 1) for _ in range(n)}
    if kind == 1:
        return OrderedDict((_fuzz_key(rng), _fuzz_obj(rng, depth + 1)) for _ in range(n))
    if kind == 2:
        return [_fuzz_obj(rng, depth + 1) for _ in range(n)]
    if kind == 3:
        return tuple(_fuzz_obj(rng, depth + 1) for _ in range(n))
    return _fuzz_leaf(rng)


def test_round_trip_fuzz_of_random_checkpoints():
    """5 000 random checkpoints (nested dicts/lists/tuples, names, every dtype, 0-d and empty
    shapes) all load back exactly. The seed is printed; set AG_FUZZ_SEED to replay one."""
    seed = int(os.environ.get("AG_FUZZ_SEED", np.random.SeedSequence().entropy % 2 ** 32))
    print(f"serialization fuzz seed: {seed} (replay with AG_FUZZ_SEED={seed})")
    rng = np.random.default_rng(seed)
    first_bytes = set()
    for i in range(5000):
        obj = {"name": _fuzz_str(rng), "body": _fuzz_obj(rng)}
        buf = io.BytesIO()
        ag.save(obj, buf)
        first_bytes.add(buf.getvalue()[0])
        buf.seek(0)
        try:
            back = ag.load(buf)
        except ValueError as e:
            raise AssertionError(f"fuzz seed {seed}, case {i}: a valid checkpoint was refused: {e}") from None
        _same(obj, back)
    assert 0x80 in first_bytes, f"seed {seed}: the fuzz never produced a header length with low byte 0x80"
