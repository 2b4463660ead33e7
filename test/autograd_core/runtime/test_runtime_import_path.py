"""`import autograd_core.runtime` through the normal package path loads no training code."""
import subprocess
import sys


def test_runtime_import_loads_only_numpy_and_the_runtime():
    code = (
        "import sys\n"
        "import autograd_core.runtime\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('autograd_core.tensor', 'autograd_core.nn',\n"
        "    'autograd_core.optim', 'autograd_core.ops', 'autograd_core.function', 'autograd_core.export',\n"
        "    'scipy', 'torch', 'safetensors', 'onnx')))\n"
        "print(','.join(bad))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ""


def test_namespace_still_behaves_like_torch_after_submodule_imports():
    code = (
        "from autograd_core.tensor import Tensor\n"
        "import autograd_core as torch\n"
        "t = torch.tensor([1.0, 2.0], requires_grad=True)\n"
        "assert isinstance(t, Tensor) and callable(torch.tensor)\n"
        "assert torch.nn.Linear(2, 1)(t).shape == (1,)\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"
