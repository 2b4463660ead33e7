"""The interpreter: a graph file becomes a flat list of in-place NumPy thunks over fixed buffers."""
import math
import operator

import numpy as np

from ._format import DTYPES, FormatError, loads, read_file
from ._kernels import BUILDERS, Ctx

__all__ = ["Model", "load", "load_bytes"]

MAX_NODES = 1_000_000
# Everything the runtime allocates for a graph (buffers, padded copies, im2col matrices, re-laid-out
# weights, masks, expanded views a GEMM could copy) together, charged before allocating: sizes
# read from a file beyond this raise FormatError, never MemoryError.
MAX_BUFFER_BYTES = 1 << 30
_NAME_MAX = 512


def _fail(msg):
    raise FormatError(msg)


def _name(v, what):
    if not isinstance(v, str) or not v or len(v) > _NAME_MAX:
        _fail(f"{what}: bad name {v!r}")
    return v


def _spec(d, what):
    if not isinstance(d, dict):
        _fail(f"{what}: expected an object")
    shape, dt = d.get("shape"), d.get("dtype")
    if not isinstance(shape, list) or len(shape) > 32 or not all(type(s) is int and 0 <= s < 2 ** 40 for s in shape):
        _fail(f"{what}: bad shape {shape!r}")
    if dt not in DTYPES:
        _fail(f"{what}: unsupported dtype {dt!r}")
    return tuple(shape), np.dtype(dt)


def _check_finite(name, arr):
    """Weights must be finite: a NaN or infinite weight (a diverged training run, a corrupted
    file) would make every output NaN while the model looks loaded. 0-d constants may be
    infinite: they are literals of the traced code (a -inf fill value), not trained weights."""
    if arr.dtype.kind != "f" or arr.size == 0:
        return
    finite = np.isfinite(arr)
    if finite.all():
        return
    nan = np.isnan(arr)
    if arr.ndim == 0 and not nan.any():
        return
    bad = int(arr.size - np.count_nonzero(finite))
    first = tuple(int(i) for i in np.argwhere(~finite)[0])
    _fail(f"constant {name!r} {list(arr.shape)} holds {bad} non-finite value(s) (NaN or infinity; "
          f"{arr[first] if first else arr[()]} at index {list(first)}): the model's training diverged or the file "
          "is corrupted; refusing to run it")


class Model:
    """A loaded graph: call it with NumPy arrays (positional, in `input_names` order).

    Returns one array, or a tuple when the graph has several outputs. Arrays are checked for
    shape and dtype against the traced ones. Every intermediate lives in a buffer allocated once;
    a call copies the inputs in, runs the thunks, and returns copies of the outputs (or, with
    `copy_outputs=False`, the output buffers themselves, overwritten by the next call). Not
    re-entrant: use one Model per thread.
    """

    def __init__(self, graph, tensors, copy_outputs=True):
        self.copy_outputs = bool(copy_outputs)
        self._allocated = 0
        try:
            self._build(graph, tensors)
        except FormatError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as e:  # malformed
            raise FormatError(f"malformed graph: {type(e).__name__}: {e}") from None
        except MemoryError:  # a backstop only: every allocation is charged against the cap first
            raise FormatError(f"the graph needs more memory than this machine has ({self._allocated} bytes of "
                              "buffers counted so far)") from None

    def __reduce__(self):
        # Pickling (and deepcopy) would copy the preallocated buffers apart from the kernels that
        # read and write them: the copy would run, but compute something else. Refuse instead.
        raise TypeError("an autograd_core.runtime Model cannot be pickled or deep-copied (its kernels share "
                        "buffers that a copy would separate); send the model file's bytes and load them with "
                        "runtime.load_bytes")

    # -- construction ------------------------------------------------------------------------
    def _charge(self, nbytes, what="buffers"):
        """Count `nbytes` against MAX_BUFFER_BYTES before they are allocated; every array the
        runtime makes while loading (buffers, padded copies, im2col matrices, re-laid-out weights,
        masks) goes through here, so file-supplied sizes cannot make it allocate more."""
        self._allocated += int(nbytes)
        if self._allocated > MAX_BUFFER_BYTES:
            _fail(f"the graph needs more than {MAX_BUFFER_BYTES} bytes of buffers ({what} of {int(nbytes)} bytes "
                  f"brings the total to {self._allocated}); a crafted or corrupted file?")

    def _alloc(self, shape, dtype, fill=0, what="buffers"):
        """A new array of `shape` filled with `fill`, charged first (see `_charge`)."""
        shape = tuple(operator.index(s) for s in shape)
        if min(shape, default=0) < 0:
            _fail(f"bad buffer shape {shape}")
        dtype = np.dtype(dtype)
        self._charge(math.prod(shape) * dtype.itemsize, what)
        if fill == 0:
            return np.zeros(shape, dtype)
        return np.full(shape, fill, dtype)

    def _build(self, graph, tensors):
        if not isinstance(graph, dict):
            _fail("graph: expected an object")
        for key in ("inputs", "outputs", "nodes", "values", "constants"):
            if key not in graph:
                _fail(f"graph: missing {key!r}")
        env = {}
        const = set()
        consts = graph["constants"]
        if not isinstance(consts, list):
            _fail("graph: 'constants' must be a list")
        for cname in consts:
            _name(cname, "constant")
            if cname not in tensors:
                _fail(f"constant {cname!r} is not stored in the file")
            _check_finite(cname, tensors[cname])
            env[cname] = tensors[cname]
            const.add(cname)
        extra = set(tensors) - set(consts)
        if extra:
            _fail(f"the file stores tensors the graph does not list: {sorted(extra)[:5]}")

        values = graph["values"]
        if not isinstance(values, dict):
            _fail("graph: 'values' must be an object")
        self.input_names, self.input_shapes, self.input_dtypes, self._in_bufs = [], [], [], []
        if not isinstance(graph["inputs"], list) or not graph["inputs"]:
            _fail("graph: 'inputs' must be a non-empty list")
        for spec in graph["inputs"]:
            nm = _name(spec.get("name") if isinstance(spec, dict) else None, "input")
            if nm in env:
                _fail(f"input {nm!r} is defined twice")
            shape, dt = _spec(spec, f"input {nm!r}")
            buf = self._alloc(shape, dt)
            env[nm] = buf
            self.input_names.append(nm)
            self.input_shapes.append(shape)
            self.input_dtypes.append(dt)
            self._in_bufs.append(buf)

        nodes = graph["nodes"]
        if not isinstance(nodes, list) or len(nodes) > MAX_NODES:
            _fail("graph: 'nodes' must be a list")
        plan = []
        self.ops = []
        for k, node in enumerate(nodes):
            if not isinstance(node, dict) or not isinstance(node.get("op"), str):
                _fail(f"node {k}: malformed")
            op = node["op"]
            builder = BUILDERS.get(op)
            if builder is None:
                _fail(f"node {k}: unknown op {op!r} (this runtime supports: {', '.join(sorted(BUILDERS))})")
            ins, outs = node.get("inputs"), node.get("outputs")
            attrs = node.get("attrs", {})
            if not isinstance(ins, list) or not isinstance(outs, list) or not outs or not isinstance(attrs, dict):
                _fail(f"node {k} ({op}): malformed inputs/outputs/attrs")
            arrays, is_const = [], []
            for nm in ins:
                if nm is None:
                    arrays.append(None)
                    is_const.append(True)
                    continue
                if not isinstance(nm, str) or nm not in env:
                    _fail(f"node {k} ({op}): input {nm!r} is not defined before use")
                arrays.append(env[nm])
                is_const.append(nm in const)
            declared = []
            for nm in outs:
                _name(nm, f"node {k} output")
                if nm in env:
                    _fail(f"node {k} ({op}): value {nm!r} is defined twice")
                if nm not in values:
                    _fail(f"node {k} ({op}): value {nm!r} has no declared shape")
                declared.append(_spec(values[nm], f"value {nm!r}"))
            ctx = Ctx(node, arrays, is_const, declared, self._alloc, self._charge)
            thunks = builder(ctx)
            results = ctx.outputs()
            folded = all(is_const)
            if folded:  # constant folding: run once now
                for f in thunks:
                    f()
            else:
                plan.extend(thunks)
                self.ops.append(op)
            for nm, arr in zip(outs, results):
                env[nm] = arr
                if folded:
                    const.add(nm)

        self.output_names, self._out_arrays = [], []
        if not isinstance(graph["outputs"], list) or not graph["outputs"]:
            _fail("graph: 'outputs' must be a non-empty list")
        for spec in graph["outputs"]:
            if not isinstance(spec, dict):
                _fail("graph: malformed output")
            nm = _name(spec.get("name"), "output")
            val = spec.get("value")
            if val not in env:
                _fail(f"output {nm!r} refers to an undefined value {val!r}")
            self.output_names.append(nm)
            self._out_arrays.append(env[val])
        self.output_shapes = [a.shape for a in self._out_arrays]
        self.output_dtypes = [a.dtype for a in self._out_arrays]
        self._plan = tuple(plan)
        self._n_in = len(self._in_bufs)
        self._single = len(self._out_arrays) == 1 and not graph.get("output_is_tuple", False)
        self._in_meta = tuple(zip(self._in_bufs, self.input_names, self.input_shapes, self.input_dtypes))

    # -- calling -----------------------------------------------------------------------------
    def _bad(self, a, name, shape, dt):
        a = np.asarray(a)
        if a.shape != shape:
            raise ValueError(f"input {name!r}: expected shape {shape}, got {a.shape} (the graph was "
                             "traced with fixed shapes)")
        raise TypeError(f"input {name!r}: expected dtype {dt}, got {a.dtype}; convert with .astype(np.{dt})")

    def __call__(self, *arrays):
        if len(arrays) != self._n_in:
            raise TypeError(f"the model takes {self._n_in} input(s) {self.input_names}, got {len(arrays)}")
        for a, (buf, name, shape, dt) in zip(arrays, self._in_meta):
            if a.__class__ is not np.ndarray:
                a = np.asarray(a, dtype=dt)
            if a.shape != shape or a.dtype != dt:
                self._bad(a, name, shape, dt)
            np.copyto(buf, a)
        for f in self._plan:
            f()
        if self.copy_outputs:
            if self._single:
                return self._out_arrays[0].copy()
            return tuple(o.copy() for o in self._out_arrays)
        if self._single:
            return self._out_arrays[0]
        return tuple(self._out_arrays)

    run = __call__

    def __repr__(self):
        ins = ", ".join(f"{n}: {list(s)} {d}" for n, s, d in zip(self.input_names, self.input_shapes,
                                                                 self.input_dtypes))
        outs = ", ".join(f"{n}: {list(s)} {d}" for n, s, d in zip(self.output_names, self.output_shapes,
                                                                  self.output_dtypes))
        return f"runtime.Model(({ins}) -> ({outs}), {len(self.ops)} ops, {len(self._plan)} kernels)"


def load_bytes(data, copy_outputs=True):
    """A `Model` from the bytes of a saved graph file."""
    graph, tensors = loads(data)
    return Model(graph, tensors, copy_outputs=copy_outputs)


def load(path, copy_outputs=True):
    """Load a graph saved by `autograd_core.export` (`Traced.save`) and return a callable `Model`."""
    graph, tensors = read_file(path)
    return Model(graph, tensors, copy_outputs=copy_outputs)
