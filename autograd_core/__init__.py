"""autograd_core: a small PyTorch-shaped reverse-mode autograd engine on NumPy.

`import autograd_core as torch` runs ordinary small PyTorch programs: tensors with
`requires_grad`, a dynamic graph with torch's `grad_fn` names, `backward()`, `no_grad`, custom
`autograd.Function`s, modules (`nn`), optimisers (`optim`), data-only checkpoints (`save`/`load`)
and export (`export.trace`) to a NumPy-only runtime. CPU / NumPy only.

The namespace (`_api.py`) is loaded on first attribute access, so that
`import autograd_core.runtime` on a companion computer loads the inference runtime alone
(NumPy only), not the training code.
"""
import importlib as _importlib
import sys as _sys
import types as _types

__version__ = "0.1.0"


class _Package(_types.ModuleType):
    """The package module: `autograd_core.tensor` stays the factory function (as `torch.tensor`),
    even after the import system binds the `tensor` submodule's name on the package."""

    def __setattr__(self, name, value):
        if name == "tensor" and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package

_loading = False

# Real submodules. `from . import grad_mode` inside the package probes the package for the name
# before importing it: answer with the submodule itself instead of loading the whole namespace.
# (`tensor` is left out on purpose: `autograd_core.tensor` the *function* shadows the module.)
_SUBMODULES = frozenset({"accelerator", "autograd", "creation", "distributions", "export", "function", "gradcheck",
                         "grad_mode", "nn", "ops", "optim", "random", "runtime", "serialization", "utils"})


def _load():
    global _loading
    _loading = True
    try:
        api = _importlib.import_module(__name__ + "._api")
    finally:
        _loading = False
    g = globals()
    for k, v in vars(api).items():
        if not k.startswith("__"):
            g[k] = v  # _api's names win over submodule attributes (torch.tensor is a function)
    return g


def __getattr__(name):
    # Private names and lookups made while the namespace itself is loading are submodule probes
    # by the import system (`from . import x`): answer "absent" so it imports the submodule.
    if name.startswith("_") or _loading:
        raise AttributeError(f"module 'autograd_core' has no attribute '{name}'")
    if name in _SUBMODULES:
        return _importlib.import_module(__name__ + "." + name)
    g = _load()
    try:
        return g[name]
    except KeyError:
        raise AttributeError(f"module 'autograd_core' has no attribute '{name}'") from None


def __dir__():
    return sorted(_load())
