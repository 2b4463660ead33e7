# 642 lines: one class (torch's Module API on three ordered dicts); a split would scatter its methods.
"""`Module`: the base class of every layer, with torch's registration, traversal and state API.

Parameters, buffers and submodules live in three ordered dicts (`_parameters`, `_buffers`,
`_modules`) filled by `__setattr__`; `__getattr__` reads them back. The order of these dicts
is the order torch reports in `named_parameters()` and `state_dict()`, so checkpoints line up
key by key with a torch model of the same architecture.
"""
from collections import OrderedDict, namedtuple
import itertools

import numpy as np

from .. import _dtype as D
from .. import grad_mode as _gm
from ..tensor import Tensor, _wrap, _require_cpu as _device
from .parameter import Buffer, Parameter

__all__ = ["Module", "RemovableHandle"]


class RemovableHandle:
    """Returned by the `register_*_hook` methods; `remove()` unregisters the hook.

    Also a context manager: `with m.register_forward_hook(fn): ...` removes it on exit.
    """

    _next_id = itertools.count()

    def __init__(self, hooks_dict, extra_dicts=()):
        self._dicts = (hooks_dict,) + tuple(extra_dicts)
        self.id = next(RemovableHandle._next_id)

    def remove(self):
        for d in self._dicts:
            if isinstance(d, set):
                d.discard(self.id)
            else:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.remove()
        return False


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """`load_state_dict`'s result: `(missing_keys, unexpected_keys)`, lists of str."""

    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s, num_spaces):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * num_spaces + line for line in lines)


def _call_with_hooks(self, args, kwargs):
    """`__call__` with hooks: pre-hooks may replace the input, forward hooks the output."""
    for hid, hook in list(self._forward_pre_hooks.items()):
        if hid in self._forward_pre_hooks_with_kwargs:
            res = hook(self, args, kwargs)
            if res is not None:
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {res}.")
                args, kwargs = res
        else:
            res = hook(self, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
    out = self.forward(*args, **kwargs)
    for hid, hook in list(self._forward_hooks.items()):
        if hid in self._forward_hooks_with_kwargs:
            res = hook(self, args, kwargs, out)
        else:
            res = hook(self, args, out)
        if res is not None:
            out = res
    return out


class Module:
    """Base class for all neural-network modules; subclass it and define `forward`.

    ```
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)
        def forward(self, x):
            return self.fc(x).relu()
    ```
    """

    training: bool
    _version = 1  # torch's state-dict format version, kept for `_metadata` compatibility

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments: "
                            f"{args} {sorted(kwargs)}; Module.__init__ takes none")
        # object.__setattr__ avoids our own __setattr__, which needs these dicts to exist.
        sa = object.__setattr__
        sa(self, "training", True)
        sa(self, "_parameters", OrderedDict())
        sa(self, "_buffers", OrderedDict())
        sa(self, "_non_persistent_buffers_set", set())
        sa(self, "_modules", OrderedDict())
        sa(self, "_forward_hooks", OrderedDict())
        sa(self, "_forward_hooks_with_kwargs", set())
        sa(self, "_forward_pre_hooks", OrderedDict())
        sa(self, "_forward_pre_hooks_with_kwargs", set())
        sa(self, "_has_hooks", False)

    # -- forward --------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        # The common case (no hooks) costs one attribute test on top of forward().
        if self._has_hooks:
            return _call_with_hooks(self, args, kwargs)
        return self.forward(*args, **kwargs)

    def _update_has_hooks(self):
        object.__setattr__(self, "_has_hooks", bool(self._forward_hooks or self._forward_pre_hooks))

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """`hook(module, args) -> None | new_args` (or `(module, args, kwargs) -> None | (args, kwargs)`
        with `with_kwargs=True`), run before `forward`."""
        handle = _HookHandle(self, self._forward_pre_hooks, (self._forward_pre_hooks_with_kwargs,))
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        self._update_has_hooks()
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """`hook(module, args, output) -> None | new_output` (or `(module, args, kwargs, output)` with
        `with_kwargs=True`), run after `forward`."""
        handle = _HookHandle(self, self._forward_hooks, (self._forward_hooks_with_kwargs,))
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        self._update_has_hooks()
        return handle

    # -- registration ---------------------------------------------------------------------------
    def register_parameter(self, name, param):
        """Add `param` (a Parameter, or None) under `name`."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        elif param._fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                             f"created explicitly. To express '{name}' as a function of another Tensor, compute "
                             "the value in the forward() method.")
        else:
            self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a non-learnable tensor (or None) under `name`; `persistent=False` keeps it out of
        `state_dict()`."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        if isinstance(tensor, Buffer):
            persistent = tensor._extra_get("persistent") if tensor._extra else persistent
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add a child module (or None) under `name`."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if "_modules" not in self.__dict__:
            raise AttributeError("cannot assign module before Module.__init__() call")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        """The submodule at dotted path `target` ("" is self)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if item not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer `{name}`")
        return mod._buffers[name]

    # -- attribute protocol -----------------------------------------------------------------------
    def __getattr__(self, name):
        # Only reached when normal lookup fails; `__dict__` access avoids recursion during
        # unpickling/deepcopy, when the three dicts may not exist yet.
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            _remove_from(d, name, "_buffers", "_modules", "_non_persistent_buffers_set")
            d.pop(name, None)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            _remove_from(d, name, "_parameters", "_buffers", "_non_persistent_buffers_set")
            d.pop(name, None)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if isinstance(value, Buffer):
            if buffers is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            _remove_from(d, name, "_parameters", "_modules")
            d.pop(name, None)
            self.register_buffer(name, value)
            return
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                "(torch.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                del s[name]
                if store == "_buffers":
                    self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        attrs = list(object.__dir__(self))
        keys = attrs + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # -- traversal ------------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """`(dotted_name, module)` for self and every descendant, pre-order, each module once."""
        if memo is None:
            memo = set()
        stack = [(prefix, self)]
        # Explicit stack, children pushed in reverse so the walk is pre-order like torch's recursion.
        while stack:
            name, mod = stack.pop()
            if remove_duplicate:
                if id(mod) in memo:
                    continue
                memo.add(id(mod))
            yield name, mod
            kids = [(name + ("." if name else "") + k, m) for k, m in mod._modules.items() if m is not None]
            stack.extend(reversed(kids))

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, store, prefix, recurse, remove_duplicate=True):
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        seen = set()
        for mod_prefix, mod in mods:
            for k, v in getattr(mod, store).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield (mod_prefix + "." + k if mod_prefix else k), v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """`(dotted_name, Parameter)` pairs, module by module in pre-order; shared ones once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        """Call `fn(module)` on every child (recursively) and then on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- modes ----------------------------------------------------------------------------------
    def train(self, mode=True):
        """Set `training` on self and all descendants (dropout, batch norm read it); returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset parameter gradients: to None (default), or zeroed in place."""
        for p in self.parameters():
            g = p._grad
            if g is None:
                continue
            if set_to_none:
                p._grad = None
            else:
                g._fn = None
                g._rg = False
                g._data[...] = 0
                g._vc[0] += 1

    # -- dtype / device -------------------------------------------------------------------------
    def _apply(self, fn):
        """Replace every parameter's and buffer's array by `fn(array)`, keeping the objects.

        Parameters stay the same Python objects (optimisers built before `.to()` keep working);
        a gradient is converted alongside its parameter.
        """
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                new = fn(p._data)
                if new is not p._data:
                    p._data = new
                    if p._grad is not None:
                        p._grad._data = fn(p._grad._data)
            for k, b in m._buffers.items():
                if b is not None:
                    new = fn(b._data)
                    if new is not b._data:
                        b._data = new
        return self

    def to(self, *args, **kwargs):
        """`to(dtype)`, `to("cpu")`, `to(device, dtype)`, `to(tensor)`: casts floating parameters and
        buffers in place (integer buffers such as counters are left alone); returns self."""
        dtype = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() received an invalid combination of arguments: {sorted(kwargs)}")
        for a in args:
            if isinstance(a, D.dtype):
                dtype = a
            elif isinstance(a, Tensor):
                dtype = a.dtype
            elif a is not None:
                dev = a
        if dev is not None:
            _device(dev)  # raises for anything but the CPU
        if dtype is None:
            return self
        npd = D.to_numpy_dtype(dtype)
        if npd.kind != "f":
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")
        return self._apply(lambda a: a.astype(npd) if a.dtype.kind == "f" and a.dtype != npd else a)

    def type(self, dst_type):
        return self.to(dst_type)

    def double(self):
        return self.to(D.float64)

    def float(self):  # noqa: A003 - torch's name
        return self.to(D.float32)

    def half(self):
        return self.to(D.float16)

    def cpu(self):
        return self

    def cuda(self, device=None):
        raise RuntimeError("autograd_core runs on the CPU only (NumPy); there is no CUDA device")

    # -- state dict -----------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Ordered `{dotted_name: tensor}`: per module its parameters then persistent buffers,
        then its children recursively (torch's order). Values share storage with the model and
        are detached unless `keep_vars=True`."""
        if args:
            raise TypeError("state_dict() takes keyword arguments only (destination=, prefix=, keep_vars=)")
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        meta = getattr(destination, "_metadata", None)
        if meta is not None:
            meta[prefix[:-1]] = {"version": self._version}
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Copy this module's own entries from `state_dict`; subclasses may override (torch's hook)."""
        persistent = [(k, v) for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set]
        local = {k: v for k, v in itertools.chain(self._parameters.items(), persistent) if v is not None}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            src = state_dict[key]
            if not isinstance(src, Tensor):
                if isinstance(src, np.ndarray):
                    src = _wrap(src)
                else:
                    error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or '
                                      f"Tensor-like object from checkpoint but received {type(src)}")
                    continue
            if src._data.shape != param._data.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {src.shape} from "
                                  f"checkpoint, the shape in current model is {param.shape}.")
                continue
            if src._data is param._data:
                continue
            np.copyto(param._data, src._data, casting="unsafe")
            param._vc[0] += 1
        if strict:
            for key in state_dict.keys():
                if not key.startswith(prefix):
                    continue
                head, dot, _ = key[len(prefix):].partition(".")
                # A dotted remainder must belong to a child; its own keys are checked when we get there.
                if (dot and head not in self._modules) or (not dot and head not in local):
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values from `state_dict` into this model's parameters and buffers (in place).

        Returns `(missing_keys, unexpected_keys)`. With `strict=True` (default) any missing or
        unexpected key raises RuntimeError; a shape mismatch always does.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        if assign:
            raise NotImplementedError("load_state_dict(assign=True) is not supported; parameters are "
                                      "always copied in place so optimisers keep their references")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        # Explicit stack instead of recursion: deep Sequential stacks stay within Python's limit.
        stack = [(self, "")]
        with _gm.no_grad():
            while stack:
                mod, prefix = stack.pop()
                local_meta = {} if metadata is None else metadata.get(prefix[:-1], {})
                mod._load_from_state_dict(state_dict, prefix, local_meta, True, missing, unexpected, errors)
                kids = [(m, prefix + n + ".") for n, m in mod._modules.items() if m is not None]
                stack.extend(reversed(kids))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # -- printing -------------------------------------------------------------------------------
    def extra_repr(self):
        """One line of constructor arguments shown inside `ClassName(...)`; override in layers."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = []
        for key, m in self._modules.items():
            child_lines.append("(" + key + "): " + _addindent(repr(m), 2))
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    # -- copying --------------------------------------------------------------------------------
    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)


class _HookHandle(RemovableHandle):
    """A handle that also refreshes the module's fast-path flag when removed."""

    def __init__(self, module, hooks_dict, extra_dicts=()):
        super().__init__(hooks_dict, extra_dicts)
        self._module = module

    def remove(self):
        super().remove()
        self._module._update_has_hooks()


def _check_name(name, what):
    if not isinstance(name, str):
        raise TypeError(f"{what} name should be a string. Got {_typename(name)}")
    if "." in name:
        raise KeyError(f'{what} name can\'t contain "."')
    if name == "":
        raise KeyError(f'{what} name can\'t be empty string ""')


def _remove_from(d, name, *stores):
    for s in stores:
        c = d.get(s)
        if c is not None:
            if isinstance(c, set):
                c.discard(name)
            elif name in c:
                del c[name]


def _typename(obj):
    if isinstance(obj, Tensor):
        return "torch." + type(obj).__name__ if type(obj) is Tensor else type(obj).__name__
    return type(obj).__name__
