"""Containers: `Sequential`, `ModuleList`, `ModuleDict`, `ParameterList`, `ParameterDict`.

Entries are registered under string keys ("0", "1", ... for the list-like ones), so the
parameter names and state-dict keys match torch's (`net.0.weight`).
"""
from collections import OrderedDict
import operator

from ..tensor import Tensor
from .module import Module
from .parameter import Parameter

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _abs_index(idx, n, what):
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return idx % n


def _renumber(container, modules):
    """Re-register ``modules`` under "0", "1", ... (torch keeps list-like keys contiguous)."""
    container._modules.clear()
    for i, m in enumerate(modules):
        container.add_module(str(i), m)


class _ListMixin:
    """The list protocol ModuleList and ParameterList share: entries are attributes "0".."n-1".

    A class provides ``__len__``, ``_values()`` (the entries in order), ``_entry(i)`` and
    ``_store(i, value)`` for ``0 <= i < len``, ``append``, and ``_kind`` (its name in messages).
    """

    _kind = ""
    _not_iterable = (Tensor,)  # what extend() refuses although it has __iter__

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._values())[idx])
        return self._entry(_abs_index(idx, len(self), self._kind))

    def __setitem__(self, idx, value):
        self._store(_abs_index(idx, len(self), self._kind), value)

    def __iter__(self):
        return iter(self._values())

    def __iadd__(self, values):
        return self.extend(values)

    def extend(self, values):
        if isinstance(values, self._not_iterable) or not hasattr(values, "__iter__"):
            raise TypeError(f"{self._kind}.extend should be called with an iterable, but got " + type(values).__name__)
        for v in values:
            self.append(v)
        return self


class Sequential(Module):
    """Modules applied in order: `Sequential(m1, m2, ...)` or `Sequential(OrderedDict(name=m))`."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def forward(self, input):  # noqa: A002
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules)
        return self._modules[keys[_abs_index(idx, len(keys), "Sequential")]]

    def __setitem__(self, idx, module):
        keys = list(self._modules)
        setattr(self, keys[_abs_index(idx, len(keys), "Sequential")], module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        if isinstance(idx, slice):
            for k in keys[idx]:
                del self._modules[k]
        else:
            del self._modules[keys[_abs_index(idx, len(keys), "Sequential")]]
        if all(k.isdigit() for k in keys):
            _renumber(self, list(self._modules.values()))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        out = Sequential()
        for m in list(self) + list(other):
            out.append(m)
        return out

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        items = list(self._modules.values())
        items.insert(index, module)
        _renumber(self, items)
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v


class ModuleList(_ListMixin, Module):
    """A list of modules, registered as "0", "1", ...; has no forward of its own."""

    _kind = "ModuleList"
    _not_iterable = (Module, Tensor)

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _values(self):
        return self._modules.values()

    def _entry(self, i):
        return self._modules[str(i)]

    def _store(self, i, module):
        setattr(self, str(i), module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_abs_index(idx, len(items), "ModuleList")]
        _renumber(self, items)

    def __len__(self):
        return len(self._modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        _renumber(self, items)

    def pop(self, key=-1):
        v = self[key]
        del self[key]
        return v

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]


class ModuleDict(Module):
    """An ordered dict of modules (insertion order), keyed by name."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for j, kv in enumerate(items):
            if not isinstance(kv, (tuple, list)) or len(kv) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} should be a (key, module) pair")
            self[kv[0]] = kv[1]


class ParameterList(_ListMixin, Module):
    """A list of Parameters registered as "0", "1", ...; plain Tensors are wrapped in Parameter."""

    _kind = "ParameterList"

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _values(self):
        return (self._entry(i) for i in range(self._size))

    def _entry(self, i):
        return getattr(self, str(i))

    def _store(self, i, param):
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, str(i), param)

    def __len__(self):
        return self._size

    def append(self, value):
        self._size += 1
        self._store(self._size - 1, value)
        return self

    def extra_repr(self):
        lines = []
        for i, p in enumerate(self):
            if isinstance(p, Tensor):
                size = "x".join(str(s) for s in p.shape)
                kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
                lines.append(f"  ({i}): {kind} containing: [{p.dtype} of size {size}]")
            else:
                lines.append(f"  ({i}): Object of type: {type(p).__name__}")
        return "\n".join(lines)


class ParameterDict(Module):
    """An ordered dict of Parameters; plain Tensors are wrapped in Parameter."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = OrderedDict()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        self._keys[key] = None
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def update(self, parameters):
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for j, kv in enumerate(items):
            if not isinstance(kv, (tuple, list)) or len(kv) != 2:
                raise ValueError(f"ParameterDict update sequence element #{j} should be a (key, parameter) pair")
            self[kv[0]] = kv[1]

    def extra_repr(self):
        lines = []
        for k, p in self.items():
            if isinstance(p, Tensor):
                size = "x".join(str(s) for s in p.shape)
                kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
                lines.append(f"  ({k}): {kind} containing: [{p.type()} of size {size}]")
            else:
                lines.append(f"  ({k}): Object of type: {type(p).__name__}")
        return "\n".join(lines)
