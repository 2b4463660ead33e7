"""Run a program file with `import autograd_core as torch` and, the import lines swapped, with torch.

A program file `prog_<name>.py` is an ordinary script: it imports autograd_core under torch's names
and defines `main(init=None, **config) -> dict`. The dict holds the results to compare (losses,
outputs, gradients, as floats, lists or NumPy arrays) and "init": the initial weights as NumPy
arrays, which the torch run loads so that both start from the same point.
"""
import os
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = sorted(f[5:-3] for f in os.listdir(HERE) if f.startswith("prog_") and f.endswith(".py"))


def source(name):
    with open(os.path.join(HERE, f"prog_{name}.py")) as f:
        return f.read()


def _import_line(line):
    s = line.lstrip()
    return s.startswith("import autograd_core") or s.startswith("from autograd_core")


def as_torch(src):
    """The same program for real torch: only its import lines change."""
    return "\n".join(line.replace("autograd_core", "torch") if _import_line(line) else line
                     for line in src.splitlines()) + "\n"


def non_import_mentions(src):
    return [line for line in src.splitlines() if "autograd_core" in line and not _import_line(line)]


def load(name, backend):
    src = source(name)
    if backend == "torch":
        src = as_torch(src)
    mod = types.ModuleType(f"prog_{name}_{backend}")
    path = os.path.join(HERE, f"prog_{name}.py")
    mod.__file__ = path
    exec(compile(src, path, "exec"), mod.__dict__)
    return mod


def compare(a, b, rtol, atol, path="result", tolerances=None):
    """Assert that two result trees agree (floats / arrays / lists / dicts / strings).

    tolerances: top-level key -> (rtol, atol), or None to skip a key (a program's TOLERANCES, for
    values where float32 drift over many steps exceeds the default).
    """
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            if k == "init":
                continue
            if tolerances and k in tolerances:
                if tolerances[k] is not None:
                    compare(a[k], b[k], *tolerances[k], f"{path}[{k!r}]")
                continue
            compare(a[k], b[k], rtol, atol, f"{path}[{k!r}]")
        return
    if isinstance(a, str) or isinstance(a, bool) or a is None:
        assert a == b, f"{path}: {a!r} vs {b!r}"
        return
    if isinstance(a, (list, tuple)) and a and not isinstance(a[0], (int, float, np.floating, np.integer)):
        assert len(a) == len(b), f"{path}: lengths {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, rtol, atol, f"{path}[{i}]")
        return
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert x.shape == y.shape, f"{path}: shapes {x.shape} vs {y.shape}"
    np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=path)
