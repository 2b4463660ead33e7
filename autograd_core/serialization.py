"""`save` / `load`: checkpoints as data only — safetensors plus a JSON structure, never pickle.

A file is a standard safetensors file. Its tensors are named "0", "1", ...; its `__metadata__`
holds three strings:

    format          "autograd_core.save"
    format_version  "1"
    structure       JSON: the saved object as nested type-tagged nodes, e.g.
                    {"type": "dict", "items": [[{"type": "int", "value": 0},
                                                {"type": "tensor", "key": "0"}]]}

Node types: "tensor" (key, optional requires_grad), "none", "bool", "int", "float" (non-finite
values as the strings "inf", "-inf", "nan"), "str", "list", "tuple", "dict", "odict"
(OrderedDict); dict entries are [key node, value node] pairs, so int keys (optimizer state),
tuples and order round-trip exactly. Tensors keep their dtype and shape (0-d included).

Loading parses nothing but JSON and raw little-endian arrays, so a crafted file cannot run
code; anything unexpected (a pickle, torch.save's zip archive, a truncated file, an oversized or
malformed header, an unknown node type, a reference to a missing tensor, an unreferenced tensor)
raises ValueError naming the problem.

Limits, by design: tensors that share storage (views, the same tensor twice) are saved as
separate copies and load as independent tensors; Tensor subclasses (nn.Parameter) load as plain
tensors with their requires_grad flag; other dict subclasses (Counter, defaultdict) load as dict,
namedtuples as tuples and NumPy scalars as Python numbers; any other object type is refused by
`save` with a TypeError naming where it sits in the object.
"""
import json
import math
import os
import secrets
from collections import OrderedDict

import numpy as np

from .tensor import Tensor, _wrap

__all__ = ["save", "load"]

FORMAT = "autograd_core.save"
FORMAT_VERSION = "1"
_MAX_HEADER_BYTES = 100 * 1024 * 1024  # safetensors' own limit
_MAX_DEPTH = 256

# safetensors dtype names <-> NumPy, for the dtypes a tensor can hold.
_ST_TO_NP = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
             "I32": np.int32, "I64": np.int64, "U8": np.uint8, "BOOL": np.bool_}
_NP_OK = {np.dtype(t) for t in _ST_TO_NP.values()}


# -- save --------------------------------------------------------------------------------------------
def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True):
    """Write `obj` (nested dicts/lists/tuples of tensors, numbers, strings, None) to `f`.

    f: a path (written atomically: a temporary file in the same folder, then renamed, so an
    interrupted save never leaves a half-written checkpoint) or a binary file object.
    `pickle_protocol` and `_use_new_zipfile_serialization` are accepted (torch.save's signature)
    and ignored; `pickle_module` must stay unset.
    """
    if pickle_module is not None:
        raise ValueError("autograd_core.save never pickles; pickle_module is not supported")
    tensors = {}
    structure = _Encoder(tensors).encode(obj, "obj", 0)
    metadata = {"format": FORMAT, "format_version": FORMAT_VERSION,
                "structure": json.dumps(structure, allow_nan=False, separators=(",", ":"))}
    from safetensors.numpy import save as st_save  # imported here: `import autograd_core` works without it
    blob = st_save(tensors, metadata=metadata)
    if hasattr(f, "write"):
        f.write(blob)
        return
    path = os.fspath(f)
    folder, base = os.path.split(os.path.abspath(path))
    # open(..., "x") rather than mkstemp: the file gets the usual umask-based mode, not 0600.
    tmp = os.path.join(folder, f".{base}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, "xb") as out:
            out.write(blob)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class _Encoder:
    def __init__(self, tensors):
        self.tensors = tensors
        self.active = set()  # ids of the containers on the current path (cycle detection)

    def encode(self, obj, where, depth, key=False):
        if depth > _MAX_DEPTH:
            raise ValueError(f"cannot save {where}: nesting deeper than {_MAX_DEPTH} levels")
        if obj is None:
            return {"type": "none"}
        if isinstance(obj, (bool, np.bool_)):
            return {"type": "bool", "value": bool(obj)}
        if isinstance(obj, (int, np.integer)):
            return {"type": "int", "value": int(obj)}
        if isinstance(obj, (float, np.floating)):
            v = float(obj)
            return {"type": "float", "value": v if math.isfinite(v) else repr(v)}
        if isinstance(obj, str):
            return {"type": "str", "value": obj}
        if isinstance(obj, Tensor):
            if key:
                raise TypeError(f"cannot save {where}: a tensor cannot be a dict key")
            return self.tensor(obj, where)
        if isinstance(obj, (list, tuple, dict)):
            if id(obj) in self.active:
                raise ValueError(f"cannot save {where}: the object contains itself (a reference cycle)")
            if key and not isinstance(obj, tuple):
                raise TypeError(f"cannot save {where}: dict keys must be str, int, float, bool, None or tuples")
            self.active.add(id(obj))
            try:
                if isinstance(obj, dict):
                    items = [[self.encode(k, f"{where} key {k!r}", depth + 1, key=True),
                              self.encode(v, f"{where}[{k!r}]", depth + 1)] for k, v in obj.items()]
                    return {"type": "odict" if isinstance(obj, OrderedDict) else "dict", "items": items}
                items = [self.encode(v, f"{where}[{i}]", depth + 1, key=key) for i, v in enumerate(obj)]
                return {"type": "tuple" if isinstance(obj, tuple) else "list", "items": items}
            finally:
                self.active.discard(id(obj))
        raise TypeError(f"cannot save {where}: objects of type {type(obj).__name__} are not supported "
                        f"(autograd_core.save stores tensors, numbers, strings, None, lists, tuples and dicts; "
                        f"convert it, e.g. a NumPy array with autograd_core.from_numpy)")

    def tensor(self, t, where):
        arr = t._data
        if arr.dtype not in _NP_OK:
            raise TypeError(f"cannot save {where}: tensor dtype {arr.dtype} is not supported")
        name = str(len(self.tensors))
        # Little-endian and C-contiguous; views and shared storage are written as separate copies.
        self.tensors[name] = np.array(arr, dtype=arr.dtype.newbyteorder("<"), order="C", copy=None)
        node = {"type": "tensor", "key": name}
        if t._rg:
            node["requires_grad"] = True
        return node


# -- load --------------------------------------------------------------------------------------------
def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
    """Read an object written by `save`. `f`: a path or a binary file object.

    The keywords are torch.load's: `map_location` may be None, "cpu" or a device/dict mapping to
    the CPU (the only device); `weights_only` and `mmap` are accepted either way — the format
    holds only data, so weights_only=False does not enable pickle.
    """
    if pickle_module is not None or pickle_load_args:
        raise ValueError("autograd_core.load never unpickles; pickle_module and pickle load arguments are not "
                         "supported")
    _check_map_location(map_location)
    if hasattr(f, "read"):
        name = getattr(f, "name", "<file object>")
        data = f.read()
    else:
        name = os.fspath(f)
        with open(name, "rb") as fh:
            data = fh.read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"{name}: the file object must be opened in binary mode")
    structure, tensors = _read(bytes(data), name)
    return _Decoder(tensors, name).decode_root(structure)


def _check_map_location(map_location):
    if map_location is None:
        return
    if isinstance(map_location, dict):
        targets = list(map_location.values())
    elif callable(map_location):
        raise ValueError("map_location as a function is not supported: autograd_core has only the CPU; use "
                         "map_location='cpu' or None")
    else:
        targets = [map_location]
    for t in targets:
        if str(t).split(":")[0] != "cpu":
            raise RuntimeError(f"map_location {t!r}: autograd_core runs on the CPU only; use 'cpu' or None")


def _read(data, name):
    """Validate the container and return (structure JSON value, {key: ndarray})."""
    def bad(msg):
        return ValueError(f"{name}: not a valid autograd_core checkpoint: {msg}")

    # A safetensors file starts with its header length (u64, little-endian), so its first byte is
    # anything, 0x80 included (8 of 200 ordinary checkpoints). The container is recognised first;
    # only bytes that cannot be one are diagnosed as a zip archive or a pickle.
    if not _framed_like_safetensors(data):
        if data[:4] == b"PK\x03\x04":
            raise bad("it is a zip archive (torch.save's format, which contains a pickle). Pickles can run code, "
                      "so they are refused; re-save the object with autograd_core.save (or safetensors) in a "
                      "trusted environment")
        if _is_pickle(data):
            raise bad("it is a Python pickle. Pickles can run code when loaded, so they are refused; re-save the "
                      "object with autograd_core.save in a trusted environment")
    if len(data) < 8:
        raise bad(f"the file has {len(data)} bytes, fewer than a safetensors header needs (truncated?)")
    n = int.from_bytes(data[:8], "little")
    if n > _MAX_HEADER_BYTES:
        raise bad(f"the header length field says {n} bytes, above the {_MAX_HEADER_BYTES}-byte limit (not a "
                  f"safetensors file, or a corrupted one)")
    if 8 + n > len(data):
        raise bad(f"the header length field says {n} bytes but only {len(data) - 8} bytes follow (truncated file)")
    raw = data[8:8 + n]
    if raw[:1] != b"{":
        raise bad("the header is not a JSON object (not a safetensors file)")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise bad(f"the header is not valid JSON ({type(e).__name__}: {e})") from None
    if not isinstance(header, dict):
        raise bad("the header is not a JSON object")
    meta = header.get("__metadata__")
    if not isinstance(meta, dict):
        raise bad("it has no __metadata__ (a plain safetensors file, not written by autograd_core.save; read it "
                  "with safetensors.numpy.load_file)")
    if meta.get("format") != FORMAT:
        raise bad(f"__metadata__ format is {meta.get('format')!r}, expected {FORMAT!r}")
    if meta.get("format_version") != FORMAT_VERSION:
        raise bad(f"format_version {meta.get('format_version')!r} is not supported by this version of "
                  f"autograd_core (it reads version {FORMAT_VERSION!r})")
    if not isinstance(meta.get("structure"), str):
        raise bad("__metadata__ has no 'structure' string")
    try:
        structure = json.loads(meta["structure"])
    except (ValueError, RecursionError) as e:
        raise bad(f"the structure is not valid JSON ({type(e).__name__}: {e})") from None
    for key, info in header.items():
        if key == "__metadata__":
            continue
        dtype = info.get("dtype") if isinstance(info, dict) else None
        if not isinstance(dtype, str) or dtype not in _ST_TO_NP:
            raise bad(f"tensor {key!r} has dtype {dtype!r}; supported: {', '.join(_ST_TO_NP)}")
    from safetensors import SafetensorError, deserialize
    try:
        entries = deserialize(data)
    except SafetensorError as e:
        raise bad(f"safetensors rejected it: {e}") from None
    tensors = {}
    for key, v in entries:
        dtype = np.dtype(_ST_TO_NP[v["dtype"]]).newbyteorder("<")
        arr = np.frombuffer(v["data"], dtype=dtype).reshape(v["shape"])
        if arr.dtype == np.bool_ and arr.size and arr.view(np.uint8).max() > 1:
            raise bad(f"bool tensor {key!r} holds bytes other than 0 and 1")
        tensors[key] = np.array(arr, dtype=arr.dtype.newbyteorder("="))  # aligned, writable, native order
    return structure, tensors


def _framed_like_safetensors(data):
    """True when the bytes have a safetensors frame: a header length within the limit and the
    file, and a header that opens a JSON object."""
    if len(data) < 9:
        return False
    n = int.from_bytes(data[:8], "little")
    return n <= _MAX_HEADER_BYTES and 8 + n <= len(data) and data[8:9] == b"{"


def _is_pickle(data):
    """A pickle of protocol 2 or later: the PROTO opcode (0x80) followed by its protocol number.
    Older protocols have no signature; they are refused later as "not a safetensors file"."""
    return len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5


class _Decoder:
    _FIELDS = {"none": set(), "bool": {"value"}, "int": {"value"}, "float": {"value"}, "str": {"value"},
               "list": {"items"}, "tuple": {"items"}, "dict": {"items"}, "odict": {"items"},
               "tensor": {"key", "requires_grad"}}

    def __init__(self, tensors, name):
        self.tensors = tensors
        self.used = set()
        self.name = name

    def bad(self, where, msg):
        return ValueError(f"{self.name}: invalid checkpoint structure at {where}: {msg}")

    def decode_root(self, node):
        obj = self.decode(node, "obj", 0)
        unused = set(self.tensors) - self.used
        if unused:
            raise ValueError(f"{self.name}: invalid checkpoint: tensors {sorted(unused)[:5]} are not referenced by "
                             f"the structure")
        return obj

    def decode(self, node, where, depth, key=False):
        if depth > _MAX_DEPTH:
            raise self.bad(where, f"nesting deeper than {_MAX_DEPTH} levels")
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise self.bad(where, "expected an object with a 'type' field")
        kind = node["type"]
        fields = self._FIELDS.get(kind)
        if fields is None:
            raise self.bad(where, f"unknown type tag {kind!r}")
        extra = set(node) - fields - {"type"}
        if extra:
            raise self.bad(where, f"unexpected fields {sorted(extra)} for type {kind!r}")
        if kind == "tensor":
            if key:
                raise self.bad(where, "a tensor cannot be a dict key")
            return self.tensor(node, where)
        if kind == "none":
            return None
        if kind in ("list", "tuple", "dict", "odict"):
            items = node.get("items")
            if not isinstance(items, list):
                raise self.bad(where, f"{kind} needs an 'items' list")
            if kind in ("list", "tuple"):
                if key and kind == "list":
                    raise self.bad(where, "a list cannot be a dict key")
                out = [self.decode(v, f"{where}[{i}]", depth + 1, key=key) for i, v in enumerate(items)]
                return tuple(out) if kind == "tuple" else out
            if key:
                raise self.bad(where, "a dict cannot be a dict key")
            out = OrderedDict() if kind == "odict" else {}
            for i, pair in enumerate(items):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise self.bad(f"{where} entry {i}", "dict entries must be [key, value] pairs")
                k = self.decode(pair[0], f"{where} key {i}", depth + 1, key=True)
                out[k] = self.decode(pair[1], f"{where}[{k!r}]", depth + 1)
            return out
        if "value" not in node:
            raise self.bad(where, f"{kind} needs a 'value'")
        v = node["value"]
        if kind == "bool" and isinstance(v, bool):
            return v
        if kind == "int" and isinstance(v, int) and not isinstance(v, bool):
            return v
        if kind == "str" and isinstance(v, str):
            return v
        if kind == "float":
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
            if v in ("inf", "-inf", "nan"):
                return float(v)
        raise self.bad(where, f"invalid value {v!r} for type {kind!r}")

    def tensor(self, node, where):
        k = node.get("key")
        if not isinstance(k, str) or k not in self.tensors:
            raise self.bad(where, f"references tensor {k!r}, which is not in the file")
        if k in self.used:
            raise self.bad(where, f"tensor {k!r} is referenced twice")
        self.used.add(k)
        t = _wrap(self.tensors[k])
        rg = node.get("requires_grad", False)
        if not isinstance(rg, bool):
            raise self.bad(where, "requires_grad must be true or false")
        if rg:
            if t._data.dtype.kind != "f":
                raise self.bad(where, "requires_grad on a non-floating tensor")
            t.requires_grad = True
        return t

