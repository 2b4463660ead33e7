"""The public `autograd_core` namespace (loaded by `autograd_core/__init__.py` on first use)."""
import builtins as _builtins

from . import _dtype
from ._dtype import (bool, double, dtype, float, float16, float32, float64, get_default_dtype, half,  # noqa: A004
                     int, int8, int16, int32, int64, long, promote_types, set_default_dtype, short, uint8)
from .tensor import Size, Tensor, device, is_tensor
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                        set_grad_enabled)
from . import ops as _ops  # attaches the ops to Tensor
from .ops import arith as _arith, indexing as _indexing, pointwise as _pw, reduction as _red, shape as _shape
from .ops.inplace import addcdiv, addcmul
from .creation import (arange, as_tensor, bernoulli, empty, empty_like, eye, from_numpy, full, full_like,
                       linspace, logspace, multinomial, normal, ones, ones_like, rand, rand_like, randint,
                       randint_like, randn, randn_like, randperm, scalar_tensor, tensor, zeros, zeros_like)
from .random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from . import autograd
from .autograd import Function  # noqa: F401  (torch.autograd.Function is the usual spelling)

__version__ = "0.1.0"

# -- functional forms (torch.<op>) ---------------------------------------------------------------
add, sub, mul, div, neg, pow, matmul = _arith.add, _arith.sub, _arith.mul, _arith.div, _arith.neg, _arith.pow, _arith.matmul  # noqa: A001
mm, bmm, mv, dot, outer, remainder = _arith.mm, _arith.bmm, _arith.mv, _arith.dot, _arith.outer, _arith.remainder
subtract, multiply, divide, true_divide, negative = sub, mul, div, div, neg
(exp, log, log2, log10, log1p, expm1, sqrt, rsqrt, abs, sin, cos, tan, asin, acos, atan, sinh, cosh, tanh,  # noqa: A001
 sigmoid, reciprocal, relu, square, sign, floor, ceil, round, trunc, clamp, clamp_min, clamp_max, maximum,
 minimum, fmax, fmin, where, nonzero, eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor, logical_not,
 isnan, isinf, isfinite, equal, allclose, isclose, atan2, lerp) = (
    _pw.exp, _pw.log, _pw.log2, _pw.log10, _pw.log1p, _pw.expm1, _pw.sqrt, _pw.rsqrt, _pw.abs, _pw.sin, _pw.cos,
    _pw.tan, _pw.asin, _pw.acos, _pw.atan, _pw.sinh, _pw.cosh, _pw.tanh, _pw.sigmoid, _pw.reciprocal, _pw.relu,
    _pw.square, _pw.sign, _pw.floor, _pw.ceil, _pw.round, _pw.trunc, _pw.clamp, _pw.clamp_min, _pw.clamp_max,
    _pw.maximum, _pw.minimum, _pw.fmax, _pw.fmin, _pw.where, _pw.nonzero, _pw.eq, _pw.ne, _pw.lt, _pw.le, _pw.gt,
    _pw.ge, _pw.logical_and, _pw.logical_or, _pw.logical_xor, _pw.logical_not, _pw.isnan, _pw.isinf,
    _pw.isfinite, _pw.equal, _pw.allclose, _pw.isclose, _pw.atan2, _pw.lerp)
absolute, clip, arctan2 = abs, clamp, atan2
(sum, mean, max, min, amax, amin, argmax, argmin, all, any, norm, var, std, prod, cumsum, logsumexp,  # noqa: A001
 softmax, log_softmax) = (
    _red.sum, _red.mean, _red.max, _red.min, _red.amax, _red.amin, _red.argmax, _red.argmin, _red.all, _red.any,
    _red.norm, _red.var, _red.std, _red.prod, _red.cumsum, _red.logsumexp, _red.softmax, _red.log_softmax)
(reshape, flatten, unflatten, squeeze, unsqueeze, transpose, t, permute, movedim, cat, concat, concatenate,
 stack, hstack, vstack, split, chunk, unbind, clone, flip, roll, broadcast_to) = (
    _shape.reshape, _shape.flatten, _shape.unflatten, _shape.squeeze, _shape.unsqueeze, _shape.transpose,
    _shape.t, _shape.permute, _shape.movedim, _shape.cat, _shape.cat, _shape.cat, _shape.stack, _shape.hstack,
    _shape.vstack, _shape.split, _shape.chunk, _shape.unbind, _shape.clone, _shape.flip, _shape.roll,
    _shape.broadcast_to)
swapaxes, moveaxis = transpose, movedim
narrow, select = _shape.narrow, _shape.select
gather, index_select, masked_fill, take = _indexing.gather, _indexing.index_select, _indexing.masked_fill, _indexing.take


def detach(t):
    return t.detach()


def numel(t):
    return t.numel()


def is_floating_point(t):
    return t.is_floating_point()


def broadcast_shapes(*shapes):
    import numpy as _np
    return Size(_np.broadcast_shapes(*shapes))


def broadcast_tensors(*tensors):
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t.expand(shape) for t in tensors)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    import numpy as _np
    kw = {k: v for k, v in dict(precision=precision, threshold=threshold, edgeitems=edgeitems,
                                 linewidth=linewidth).items() if v is not None}
    _np.set_printoptions(**kw)


def get_num_threads():
    """Threads NumPy's BLAS uses for matmul (1 when it cannot be determined)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return 1
    blas = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    return blas[0]["num_threads"] if blas else 1


_thread_limiter = None


def set_num_threads(n):
    """Limit NumPy's BLAS threads (torch.set_num_threads' role).

    Small-network training and onboard inference are usually fastest single-threaded: BLAS
    worker threads cost more to wake than the small matmuls they split. Needs threadpoolctl.
    """
    global _thread_limiter
    n = _builtins.int(n)
    if n < 1:
        raise ValueError(f"set_num_threads expects a positive integer, got {n}")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError as e:
        raise RuntimeError("set_num_threads needs the threadpoolctl package (pip install threadpoolctl)") from e
    _thread_limiter = threadpool_limits(limits=n, user_api="blas")


def is_available():
    return False


class _Cuda:
    """`torch.cuda.is_available()` is False: code that checks it picks the CPU path."""

    @staticmethod
    def is_available():
        return False

    @staticmethod
    def device_count():
        return 0

    @staticmethod
    def manual_seed(seed):
        return None

    @staticmethod
    def manual_seed_all(seed):
        return None


cuda = _Cuda()

# -- spellings of real programs (issue 15): tril/triu/topk/narrow, keyword and out= forms, legacy names
from .ops.extra import narrow, tril, triu  # noqa: E402
from .ops.scatter import scatter, scatter_add  # noqa: E402
from .ops.sorting import argsort, sort, topk  # noqa: E402
from ._compat import get_default_device, matmul, mul, set_default_device  # noqa: E402
from .tensor import DeviceUnavailableError  # noqa: E402,F401
from . import accelerator, utils  # noqa: E402,F401
multiply = mul

# -- optimisers and checkpoints (issue 3) --------------------------------------------------------
from . import nn  # noqa: E402
from . import distributions  # noqa: E402
from . import optim  # noqa: E402
from .serialization import load, save  # noqa: E402
