"""The onboard runtime imports and runs with NumPy alone: none of autograd_core's training code.

Checked in fresh subprocesses whose import system refuses (a meta-path hook) every training
module — `autograd_core.tensor`, `ops`, `nn`, `optim`, `function`, ... — and torch/onnx/safetensors.
"""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np

import autograd_core as ag
import autograd_core.nn as nn
from autograd_core import export

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PKG = os.path.join(ROOT, "autograd_core")

_HOOK = textwrap.dedent("""
    import sys

    class _Forbid:
        def __init__(self, allowed_prefix):
            self.allowed = allowed_prefix
        def find_spec(self, name, path=None, target=None):
            top = name.split(".")[0]
            if top in ("torch", "onnx", "onnxruntime", "safetensors", "scipy"):
                raise ImportError("forbidden import: " + name)
            if name.startswith("autograd_core.") and not name.startswith(self.allowed):
                raise ImportError("forbidden import: " + name)
            if name == "autograd_core" and "autograd_core" not in sys.modules:
                raise ImportError("forbidden import: autograd_core/__init__ (training code)")
            return None
""")

_RUN = textwrap.dedent("""
    import numpy as np
    data = np.load(sys.argv[2])
    model = rt.load(sys.argv[1])
    action, h = model(data["x"], data["v"], data["h"])
    np.testing.assert_allclose(action, data["action"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(h, data["h_out"], rtol=0, atol=1e-6)
    bad = sorted(m for m in sys.modules if m.startswith(("torch", "safetensors", "scipy"))
                 or (m.startswith("autograd_core") and not m.startswith(ALLOWED) and m != "autograd_core"))
    assert not bad, bad
    print("RUNTIME-OK", type(action).__name__, action.shape)
""")


class _Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 2, 2)
        self.fc = nn.Linear(8 * 6 * 8, 16)
        self.v = nn.Linear(10, 16)
        self.gru = nn.GRUCell(16, 16)
        self.out = nn.Linear(16, 6)

    def forward(self, x, v, h):
        f = nn.functional.leaky_relu(self.fc(self.conv(x).flatten(1)) + self.v(v), 0.05)
        h = self.gru(f, h)
        return self.out(h), h


def _artifacts(tmp_path):
    ag.manual_seed(0)
    net = _Policy()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, 12, 16)).astype(np.float32)
    v = rng.standard_normal((1, 10)).astype(np.float32)
    h = (rng.standard_normal((1, 16)) * 0.1).astype(np.float32)
    g = export.trace(net, (ag.tensor(x), ag.tensor(v), ag.tensor(h)))
    model_path = tmp_path / "policy.agc"
    g.save(model_path)
    with ag.no_grad():
        a, h2 = net(ag.tensor(x), ag.tensor(v), ag.tensor(h))
    data_path = tmp_path / "io.npz"
    np.savez(data_path, x=x, v=v, h=h, action=a.numpy(), h_out=h2.numpy())
    return str(model_path), str(data_path)


def _run(script, tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-I", "-c", script, *args], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_runtime_folder_runs_standalone_without_autograd_core(tmp_path):
    """Deployment: only autograd_core/runtime/ copied to the robot, under another name."""
    model_path, data_path = _artifacts(tmp_path)
    dest = tmp_path / "deploy" / "acrt"
    shutil.copytree(os.path.join(PKG, "runtime"), dest, ignore=shutil.ignore_patterns("__pycache__"))
    script = _HOOK + textwrap.dedent(f"""
        ALLOWED = "autograd_core.runtime"
        sys.meta_path.insert(0, _Forbid(ALLOWED))
        sys.path.insert(0, {str(tmp_path / "deploy")!r})
        import acrt as rt
        assert "autograd_core" not in sys.modules
    """) + _RUN
    assert "RUNTIME-OK ndarray (1, 6)" in _run(script, tmp_path, model_path, data_path)


def test_autograd_core_runtime_imports_no_training_modules(tmp_path):
    """`autograd_core.runtime` as a sub-package, the training modules refused by the import hook.

    (autograd_core/__init__.py itself imports the tensor code, so the parent package is stubbed to
    its bare path, as a deployment that ships the package without the training code would.)"""
    model_path, data_path = _artifacts(tmp_path)
    script = _HOOK + textwrap.dedent(f"""
        import types
        ALLOWED = "autograd_core.runtime"
        pkg = types.ModuleType("autograd_core")
        pkg.__path__ = [{PKG!r}]
        sys.modules["autograd_core"] = pkg
        sys.meta_path.insert(0, _Forbid(ALLOWED))
        import autograd_core.runtime as rt
        for forbidden in ("autograd_core.tensor", "autograd_core.ops", "autograd_core.nn", "autograd_core.optim",
                          "autograd_core.function", "autograd_core.export"):
            assert forbidden not in sys.modules, forbidden
            try:
                __import__(forbidden)
            except ImportError:
                pass
            else:
                raise AssertionError("the hook let " + forbidden + " in")
    """) + _RUN
    assert "RUNTIME-OK" in _run(script, tmp_path, model_path, data_path)
