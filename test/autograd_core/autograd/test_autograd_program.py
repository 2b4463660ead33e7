"""The issue's must-show program, run as a user would: `import autograd_core as torch`."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

PROGRAM = textwrap.dedent("""
    import autograd_core as torch

    torch.manual_seed(14)
    w = torch.tensor([1.5], requires_grad=True)
    x = torch.tensor([2.0])
    y = (w * x).pow(2) if w.item() > 1 else w * x
    y.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
    print("grad", round(w.grad.item(), 3))
    print("updated_w", round(w.item(), 3))
    print("grad_fn", type(y.grad_fn).__name__)
""")


def test_must_show_program_prints_exactly_three_lines():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "grad 12.0\nupdated_w 0.3\ngrad_fn PowBackward0\n"


def test_small_training_loop_runs_unchanged():
    """An ordinary hand-written regression loop: loss must fall by orders of magnitude."""
    prog = textwrap.dedent("""
        import autograd_core as torch
        torch.manual_seed(0)
        X = torch.randn(64, 3)
        true_w = torch.tensor([[2.0], [-1.0], [0.5]])
        Y = X @ true_w + 0.3
        w = torch.zeros(3, 1, requires_grad=True)
        b = torch.zeros(1, requires_grad=True)
        first = None
        for step in range(300):
            loss = ((X @ w + b - Y) ** 2).mean()
            if first is None:
                first = loss.item()
            loss.backward()
            with torch.no_grad():
                w -= 0.1 * w.grad
                b -= 0.1 * b.grad
                w.grad.zero_()
                b.grad.zero_()
        print(first, loss.item())
    """)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    first, last = map(float, res.stdout.split())
    assert first > 1.0
    assert last < 1e-6
