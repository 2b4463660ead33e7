"""The exported-graph file: one safetensors file, weights as tensors, the graph as JSON metadata.

Layout (the public safetensors format, read and written here with the standard library and NumPy
only, so that the onboard runtime needs no other package):

    u64 little-endian N | N bytes of JSON header (space-padded to 8 bytes) | raw tensor bytes

The header maps tensor names to `{"dtype", "shape", "data_offsets"}` and carries
`"__metadata__": {"format": FORMAT_NAME, "format_version": "1", "graph": <graph JSON>}`.
Nothing in the file is ever executed: the loader parses JSON and copies bytes into arrays, and
every field is checked (a crafted, truncated or unknown file raises `FormatError`).
"""
import json
import os

import numpy as np

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "FormatError", "DTYPES", "write_file", "dumps", "read_file",
           "loads"]

FORMAT_NAME = "autograd_core.graph"
FORMAT_VERSION = 1

MAX_HEADER_BYTES = 64 << 20          # a header larger than this is refused (the lib uses 100 MB)
MAX_RANK = 8


class FormatError(ValueError):
    """The file is not a valid exported graph (truncated, crafted, unknown version or op, ...)."""


# safetensors dtype codes <-> NumPy (little-endian)
_ST_TO_NP = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
             "U8": "u1", "BOOL": "?"}
_NAME_TO_ST = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32",
               "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}
DTYPES = tuple(_NAME_TO_ST)  # the dtype names the graph may use


def dumps(tensors, metadata):
    """The file's bytes: `tensors` (name -> ndarray, in order) and `metadata` (str -> str)."""
    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("safetensors metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    blobs = []
    offset = 0
    for name, arr in tensors.items():
        if name == "__metadata__":
            raise ValueError("'__metadata__' cannot name a tensor")
        arr = np.asarray(arr)
        st = _NAME_TO_ST.get(arr.dtype.name)
        if st is None:
            raise TypeError(f"tensor {name!r}: dtype {arr.dtype} cannot be stored")
        raw = np.ascontiguousarray(arr, dtype=np.dtype(_ST_TO_NP[st])).tobytes()
        header[name] = {"dtype": st, "shape": [int(s) for s in arr.shape],
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hb = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("utf-8")
    hb += b" " * (-len(hb) % 8)
    return len(hb).to_bytes(8, "little") + hb + b"".join(blobs)


def write_file(path, tensors, metadata):
    """Write atomically (a temporary file renamed over `path`)."""
    data = dumps(tensors, metadata)
    path = os.fspath(path)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _fail(msg):
    raise FormatError(msg)


def loads(data):
    """Parse file bytes -> (metadata dict, tensors dict name -> ndarray). Checks every field."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("expected bytes")
    data = bytes(data)
    if len(data) < 8:
        _fail(f"not an exported graph: the file is {len(data)} bytes long, shorter than the 8-byte header "
              "length (truncated or empty file)")
    n = int.from_bytes(data[:8], "little")
    if n > MAX_HEADER_BYTES:
        _fail(f"not an exported graph: header length {n} exceeds the {MAX_HEADER_BYTES}-byte limit "
              "(not a safetensors file, or a crafted one)")
    if 8 + n > len(data):
        _fail(f"truncated file: the header claims {n} bytes but only {len(data) - 8} follow")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        _fail(f"not an exported graph: the header is not valid JSON ({e})")
    if not isinstance(header, dict):
        _fail("not an exported graph: the header is not a JSON object")
    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        _fail("not an exported graph: no string '__metadata__' in the safetensors header "
              "(a plain weights file, not a graph saved by autograd_core.export)")
    body = memoryview(data)[8 + n:]
    spans = []
    tensors = {}
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            _fail(f"tensor {name!r}: malformed entry in the header")
        st, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if st not in _ST_TO_NP:
            _fail(f"tensor {name!r}: unsupported dtype {st!r}")
        if (not isinstance(shape, list) or len(shape) > MAX_RANK
                or not all(type(s) is int and 0 <= s < 2 ** 40 for s in shape)):
            _fail(f"tensor {name!r}: malformed shape {shape!r}")
        if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int for o in offs)
                and 0 <= offs[0] <= offs[1]):
            _fail(f"tensor {name!r}: malformed data_offsets {offs!r}")
        dt = np.dtype(_ST_TO_NP[st])
        count = 1
        for s in shape:
            count *= s
        if offs[1] - offs[0] != count * dt.itemsize:
            _fail(f"tensor {name!r}: data_offsets span {offs[1] - offs[0]} bytes but shape {shape} of {st} "
                  f"needs {count * dt.itemsize}")
        if offs[1] > len(body):
            _fail(f"truncated file: tensor {name!r} ends at byte {offs[1]} of a {len(body)}-byte data section")
        spans.append((offs[0], offs[1], name))
        arr = np.frombuffer(body, dtype=dt, count=count, offset=offs[0]).reshape(shape)
        tensors[name] = arr.astype(dt.newbyteorder("="), copy=True)  # owned, aligned, native, writable
    spans.sort()
    pos = 0
    for a, b, name in spans:
        if a != pos:
            _fail(f"tensor {name!r}: overlapping or non-contiguous data (starts at {a}, expected {pos})")
        pos = b
    if pos != len(body):
        _fail(f"the data section is {len(body)} bytes but the tensors cover {pos} (trailing or missing bytes)")
    fmt = meta.get("format")
    if fmt != FORMAT_NAME:
        _fail(f"not an exported graph: format {fmt!r}, expected {FORMAT_NAME!r}")
    try:
        version = int(meta.get("format_version", ""))
    except ValueError:
        _fail(f"malformed format_version {meta.get('format_version')!r}")
    if version > FORMAT_VERSION or version < 1:
        _fail(f"unsupported format_version {version}: this runtime reads version(s) 1..{FORMAT_VERSION}; "
              "update the runtime")
    try:
        graph = json.loads(meta.get("graph", ""))
    except ValueError as e:
        _fail(f"the graph metadata is not valid JSON ({e})")
    if not isinstance(graph, dict):
        _fail("the graph metadata is not a JSON object")
    return graph, tensors


def read_file(path):
    with open(path, "rb") as f:
        return loads(f.read())
