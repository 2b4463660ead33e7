"""`Tensor`: a NumPy array with an autograd history.

Slots are kept few and assignment cheap: onboard planners live on small tensors, where Python
overhead per op, not FLOPs, decides speed. Ops (in `ops/`) are plain functions attached to the
class at import time, so `a * b` costs one Python call plus the NumPy kernel and one node.
"""
import numpy as np

from . import _dtype as D
from . import grad_mode as _gm

__all__ = ["Tensor", "is_tensor"]

_new = object.__new__


class Tensor:
    """A multi-dimensional array that records the operations applied to it for `backward()`.

    Attributes users know from torch: `requires_grad`, `grad`, `grad_fn`, `is_leaf`, `shape`,
    `dtype`, `data`, `device` (always "cpu").
    """

    __slots__ = ("_data", "_rg", "_fn", "_grad", "_vc", "_nr", "_base", "_extra", "__weakref__")
    _is_node = False
    __array_priority__ = 1000  # ndarray (op) Tensor defers to Tensor's reflected operators

    def __init__(self, *args, dtype=None, requires_grad=False):
        # torch.Tensor(list) / torch.Tensor(2, 3) (uninitialised → zeros here) / torch.Tensor(ndarray)
        if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
            src = args[0]
            if isinstance(src, Tensor):
                src = src._data
            arr = np.array(src, dtype=D.to_numpy_dtype(dtype) if dtype is not None else D.get_default_dtype().np)
        else:
            shape = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
            arr = np.zeros(tuple(int(s) for s in shape), dtype=D.get_default_dtype().np)
        self._data = arr
        self._fn = None
        self._grad = None
        self._vc = [0]
        self._nr = 0
        self._base = None
        self._extra = None
        self._rg = False
        if requires_grad:
            self.requires_grad = True

    # -- autograd attributes ------------------------------------------------------------------
    @property
    def requires_grad(self):
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value):
        value = bool(value)
        if self._fn is not None and not value:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want "
                               "to use a computed variable in a subgraph that doesn't require "
                               "differentiation use var_no_grad = var.detach().")
        if value and self._data.dtype.kind != "f":
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        self._rg = value

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def grad_fn(self):
        return self._fn

    @property
    def is_leaf(self):
        return self._fn is None

    @property
    def grad(self):
        if self._fn is not None and self._grad is None and not self._extra_get("retains_grad"):
            import warnings
            warnings.warn("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                          "Its .grad attribute won't be populated during autograd.backward(). If you "
                          "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                          ".retain_grad() on the non-leaf Tensor.", UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError(f"assigned grad has data of a different size: {list(value.shape)} vs "
                                   f"{list(self.shape)}")
            if value._data.dtype != self._data.dtype:
                raise RuntimeError(f"assigned grad has data of a different type: {value.dtype} vs {self.dtype}")
        self._grad = value

    @property
    def retains_grad(self):
        return bool(self._extra_get("retains_grad"))

    def retain_grad(self):
        """Populate `.grad` of this non-leaf tensor during backward."""
        if self._fn is None:
            if not self._rg:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        if self._extra_get("retains_grad"):
            return
        import weakref
        ref = weakref.ref(self)

        def _store(g):
            t = ref()
            if t is not None:
                if t._grad is None:
                    t._grad = _wrap(np.array(g._data))
                else:
                    t._grad._data = t._grad._data + g._data
            return None

        self._fn._add_pre_hook(self._nr, _store)
        self._extra_set("retains_grad", True)

    def register_hook(self, hook):
        """`hook(grad) -> Tensor or None`, called when this tensor's gradient is computed."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._fn is not None:
            return self._fn._add_pre_hook(self._nr, hook)
        hooks = self._extra_get("hooks")
        if hooks is None:
            hooks = []
            self._extra_set("hooks", hooks)
        hooks.append(hook)
        from ._node import _RemovableHandle
        return _RemovableHandle(hooks, hook)

    def _extra_get(self, key):
        ex = self._extra
        return None if ex is None else ex.get(key)

    def _extra_set(self, key, value):
        if self._extra is None:
            self._extra = {}
        self._extra[key] = value

    def _edge(self):
        fn = self._fn
        if fn is not None:
            return (fn, self._nr)
        return (self, 0) if self._rg else None

    @property
    def _version(self):
        return self._vc[0]

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) into every leaf's `.grad`."""
        fn = self._fn
        if fn is None or create_graph or inputs is not None:
            from .autograd import backward as _backward
            return _backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)
        d = self._data
        if gradient is None:
            if d.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            seed = np.ones_like(d)
        else:
            seed = gradient._data if isinstance(gradient, Tensor) else np.asarray(gradient, dtype=d.dtype)
            if seed.shape != d.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {tuple(seed.shape)} and "
                                   f"output[0] has a shape of {tuple(d.shape)}.")
        _engine.backward_from(fn, self._nr, seed, bool(retain_graph))

    def detach(self):
        """A tensor sharing data and version counter, cut from the graph."""
        return _wrap(self._data, vc=self._vc)

    def detach_(self):
        if self._base is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._fn = None
        self._rg = False
        return self

    # -- array attributes ---------------------------------------------------------------------
    @property
    def data(self):
        # torch: an alias without history and with its own version counter.
        return _wrap(self._data)

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError("data must be a Tensor")
        self._data = value._data

    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[dim]

    @property
    def dtype(self):
        return D._BY_NP[self._data.dtype]

    @property
    def device(self):
        return _CPU

    @property
    def is_cuda(self):
        return False

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    def ndimension(self):
        return self._data.ndim

    def numel(self):
        return self._data.size

    def nelement(self):
        return self._data.size

    def element_size(self):
        return self._data.itemsize

    def is_floating_point(self):
        return self._data.dtype.kind == "f"

    def is_contiguous(self, memory_format=None):
        return self._data.flags.c_contiguous

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self):
        return id(self)

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.reshape(()))

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._data.reshape(()))

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.reshape(()).item()

    def tolist(self):
        return self._data.tolist()

    def numpy(self, *, force=False):
        if self._rg and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        if self._rg:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        return self._data if dtype is None else self._data.astype(dtype)

    def cpu(self):
        return self

    def cuda(self, *args, **kwargs):
        raise RuntimeError("autograd_core runs on the CPU only (NumPy); there is no CUDA device")

    def __repr__(self):
        return _format(self)

    __str__ = __repr__

    def __format__(self, spec):
        if self._data.ndim == 0:
            return format(self._data.item(), spec)
        return repr(self) if not spec else format(str(self), spec)

    def __reduce_ex__(self, protocol):
        raise TypeError("autograd_core tensors are not picklable by design (loading a pickle can run "
                        "code); use autograd_core.save / autograd_core.load")

    def __deepcopy__(self, memo):
        if self._fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the "
                               "deepcopy protocol at the moment.")
        out = _wrap(self._data.copy())
        out._rg = self._rg
        if self._grad is not None:
            out._grad = _wrap(self._grad._data.copy())
        memo[id(self)] = out
        return out


class Size(tuple):
    """torch.Size: a tuple of ints with `numel()`."""

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"torch.Size({list(self)})"


_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "meta", "hpu", "mtia", "xla", "ipu", "privateuseone")


class DeviceUnavailableError(RuntimeError, AssertionError):
    """Raised when a tensor or module is placed on a device other than the CPU.

    A RuntimeError, and an AssertionError as torch's "Torch not compiled with CUDA enabled" is.
    """


class device:
    """`torch.device`: any of torch's device types can be named (`device("cuda:0")`), as torch allows
    the object without the hardware; only the CPU can hold tensors (`_require_cpu`)."""

    def __init__(self, type="cpu", index=None):  # noqa: A002 - torch's name
        if isinstance(type, device):
            type, index = type.type, type.index
        elif isinstance(type, (int, np.integer)) and not isinstance(type, bool):
            type, index = "cuda", int(type)  # torch.device(0) is cuda:0
        if not isinstance(type, str):
            raise TypeError(f"device() received an invalid argument: {type!r}")
        name, sep, idx = type.partition(":")
        if name not in _DEVICE_TYPES:
            raise RuntimeError(f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start of device "
                               f"string: {type}")
        if sep:
            if index is not None:
                raise RuntimeError(f"type (string) must not include an index because index was passed "
                                   f"explicitly: {type}")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(idx)
        if index is not None:
            index = int(index)
            if index < 0:
                raise RuntimeError(f"Device index must not be negative, got {index}")
        self.type = name
        self.index = index

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except RuntimeError:
                return False
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


def _require_cpu(dev):
    """`dev` as a device; raises DeviceUnavailableError unless it is the CPU (where tensors live)."""
    d = dev if isinstance(dev, device) else device(dev)
    if d.type != "cpu":
        raise DeviceUnavailableError(f"Torch not compiled with {d.type.upper()} enabled: autograd_core runs on "
                                     f"the CPU only (NumPy); device '{d}' cannot hold tensors")
    return d


_CPU = device("cpu")


def _wrap(data, node=None, vc=None):
    """Fast internal constructor: a Tensor around `data` (made an ndarray if it is a NumPy scalar)."""
    if data.__class__ is not np.ndarray:
        data = np.asarray(data)
    t = _new(Tensor)
    t._data = data
    t._fn = node
    t._rg = node is not None
    t._grad = None
    t._vc = [0] if vc is None else vc
    t._nr = 0
    t._base = None
    t._extra = None
    return t


from . import _engine, function as _F  # noqa: E402  (the engine and function.py need _wrap, defined above)

_engine._wrap = _F._wrap = _wrap


def is_tensor(obj):
    return isinstance(obj, Tensor)


def _format(t):
    a = t._data
    if a.dtype.kind == "f":
        finite = a[np.isfinite(a)]
        if finite.size and np.all(finite == np.round(finite)) and np.abs(finite).max() < 1e8:
            body = np.array2string(a, separator=", ", formatter={"float_kind": lambda v: f"{v:.0f}."},
                                   prefix="tensor(")
        else:
            big = finite.size and (np.abs(finite).max() >= 1e8 or
                                   (np.abs(finite[finite != 0]).min(initial=1.0) < 1e-4))
            fmt = (lambda v: f"{v:.4e}") if big else (lambda v: f"{v:.4f}")
            body = np.array2string(a, separator=", ", formatter={"float_kind": fmt}, prefix="tensor(")
    else:
        body = np.array2string(a, separator=", ", prefix="tensor(")
        if a.dtype == np.bool_:
            body = body.replace("True", "True").replace("False", "False")
    extras = []
    if a.dtype not in (np.float32, np.int64, np.bool_):
        extras.append(f"dtype={D._BY_NP[a.dtype]!r}")
    if t._fn is not None:
        extras.append(f"grad_fn=<{type(t._fn).__name__}>")
    elif t._rg:
        extras.append("requires_grad=True")
    if a.size == 0:
        body = "[]" if a.ndim == 1 else f"[], size={tuple(a.shape)}"
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"


# Attach the ops (methods, operators) to Tensor whichever module of the package is imported first.
from . import ops as _ops  # noqa: E402,F401
