"""The repository's benchmark scripts (``benchmarks/*.py``, not a package) loaded as modules for
tests (this folder is on sys.path through test/conftest.py)."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_benchmark(name: str, module_name: str):
    """``benchmarks/<name>.py`` as a fresh module called ``module_name`` (a missing file is a
    failure: the script is part of the repository)."""
    path = os.path.join(ROOT, "benchmarks", name + ".py")
    spec = importlib.util.spec_from_file_location(module_name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
