"""Shared helpers of the fused CNN/RNN kernels: argument normalisation, dtype checks, node building.
"""
import numpy as np

from .. import function as _function
from .. import grad_mode as _gm
from ..function import saved_version

_gs = _gm._state
_new = object.__new__
# The engine orders backward by node creation number when it has one (function.next_seq).
_next_seq = getattr(_function, "next_seq", None)

_TORCH_DTYPE_NAME = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long"}


def _tune_malloc():
    """Keep freed large arrays in the heap instead of handing them back to the OS.

    glibc mmaps every allocation over 128 KiB and unmaps it on free, so each im2col buffer,
    activation and gradient of a conv step page-faults afresh: ~1100 faults and ~3 ms of system
    time per batch-64 policy-CNN training step here (ANCHORS.md, "Performance lessons"). Raising
    the mmap threshold to 32 MiB and the trim threshold to 128 MiB removes them (policy CNN
    fwd+bwd 7.9 -> 4.7 ms). Process-wide, glibc only; AUTOGRAD_CORE_MALLOPT=0 opts out.
    """
    import os
    import platform
    if os.environ.get("AUTOGRAD_CORE_MALLOPT", "1") == "0" or platform.system() != "Linux":
        return False
    try:
        import ctypes
        if platform.libc_ver()[0] != "glibc":
            return False
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) and libc.mallopt(M_TRIM_THRESHOLD, 128 << 20))
    except (OSError, AttributeError):
        return False


_MALLOC_TUNED = _tune_malloc()


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _pair(v, name="argument"):
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return v[0], v[0]
    if len(v) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {v}")
    return v


def _single(v, name="argument"):
    if isinstance(v, (int, np.integer)):
        return int(v)
    v = tuple(int(a) for a in v)
    if len(v) != 1:
        raise ValueError(f"{name} must be an int or a 1-tuple, got {v}")
    return v[0]


def _check_float(x, what="input"):
    if x.dtype.kind != "f":
        raise RuntimeError(f"expected a floating point {what}, got {_TORCH_DTYPE_NAME.get(x.dtype.name, x.dtype.name)}")


def _same_dtype(ref, arr):
    if arr is not None and arr.dtype != ref.dtype:
        raise RuntimeError(f"expected scalar type {_TORCH_DTYPE_NAME.get(ref.dtype.name, ref.dtype.name)} but found "
                           f"{_TORCH_DTYPE_NAME.get(arr.dtype.name, arr.dtype.name)}")


def _data(t):
    return None if t is None else t._data


def _edge(t):
    return None if t is None else t._edge()


def _needs_grad(*ts):
    if not _gs.enabled:
        return False
    for t in ts:
        if t is not None and t._rg:
            return True
    return False


def _node(cls, edges, saved, vc=()):
    n = _new(cls)
    n.next_edges = edges
    n.saved = saved
    n.vc = vc
    if _next_seq is not None:
        n.seq = _next_seq()
    return n


def _vcs(*ts):
    return tuple(saved_version(t) for t in ts if t is not None)


def _sigmoid(x, out=None):
    # sigmoid(x) = 0.5 * (1 + tanh(x / 2)): no overflow for large |x|, one transcendental.
    out = np.multiply(x, 0.5, out=out)
    np.tanh(out, out=out)
    out *= 0.5
    out += 0.5
    return out
