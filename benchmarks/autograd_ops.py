"""Per-op forward+backward cost of autograd_core vs torch, on small tensors (printed table, no asserts).

    python benchmarks/autograd_ops.py [--repeat N]

Measures, for each op, `y = op(x...); y.sum().backward()`-free single-op graphs: the op output is
reduced by backward with an explicit gradient of ones, so one op + one backward() call is timed,
on 3-vectors and on (64, 3) arrays; then 100- and 200-op chains (mixed elementwise ops) forward +
backward. Torch runs single-threaded in the same process. Targets (issue 15): per-op geo-mean
≤ 0.25× torch, ≤ 0.5× torch on the chains. "ratio" is our time / torch's time.
"""
import argparse
import os
import sys
import timeit

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import autograd_core as ag  # noqa: E402

try:
    import torch
    torch.set_num_threads(1)
except ImportError:  # the table still prints our column
    torch = None


def _ops(lib):
    F = getattr(getattr(lib, "nn", None), "functional", None)
    return {
        "add": lambda a, b: a + b,
        "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b,
        "mul_scalar": lambda a, b: a * 2.5,
        "pow2": lambda a, b: a ** 2,
        "exp": lambda a, b: a.exp(),
        "tanh": lambda a, b: a.tanh(),
        "sigmoid": lambda a, b: a.sigmoid(),
        "relu": lambda a, b: a.relu(),
        "clamp": lambda a, b: a.clamp(-0.5, 0.5),
        "maximum": lambda a, b: lib.maximum(a, b),
        "sum": lambda a, b: a.sum(),
        "mean_dim0": lambda a, b: a.mean(0),
        "norm": lambda a, b: a.norm(),
        "index": lambda a, b: a[1:],
        "reshape": lambda a, b: a.reshape(-1),
        "matmul_T": lambda a, b: a @ b.T if a.ndim == 2 else a @ b,
    }


def _time(fn, repeat):
    n = 200
    best = min(timeit.repeat(fn, number=n, repeat=repeat)) / n
    return best * 1e6


def bench_op(lib, name, op, shape, repeat, dtype):
    rng = np.random.default_rng(0)
    a0 = rng.standard_normal(shape).astype(dtype)
    b0 = rng.standard_normal(shape).astype(dtype) + 3.0
    a = lib.tensor(a0, requires_grad=True)
    b = lib.tensor(b0, requires_grad=True)
    out = op(a, b)
    g = lib.ones_like(out)

    def step():
        y = op(a, b)
        y.backward(g)

    return _time(step, repeat)


def bench_chain(lib, shape, repeat, dtype, n_ops=200):
    rng = np.random.default_rng(1)
    x = lib.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)
    w = lib.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)

    def step():
        y = x
        for i in range(n_ops // 4):
            y = y * 0.9
            y = y + w
            y = y.tanh()
            y = y * w
        y.sum().backward()

    return _time(step, repeat)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    dtype = np.float32
    print(f"autograd_core vs torch {'(absent)' if torch is None else torch.__version__} (1 thread), float32, "
          "one op forward + backward(), best of repeats, µs")
    print(f"{'op':<12}{'shape':>8}{'ours':>10}{'torch':>10}{'ratio':>8}")
    ratios = []
    for shape in ((3,), (64, 3)):
        for name, op in _ops(ag).items():
            ours = bench_op(ag, name, op, shape, args.repeat, dtype)
            ref = bench_op(torch, name, _ops(torch)[name], shape, args.repeat, dtype) if torch else float("nan")
            ratios.append(ours / ref)
            print(f"{name:<12}{str(shape):>8}{ours:>10.2f}{ref:>10.2f}{ours / ref:>8.2f}")
    print(f"{'geo-mean per-op ratio':<30}{np.exp(np.mean(np.log(ratios))):>28.2f}")
    for n_ops in (100, 200):
        for shape in ((3,), (64, 3)):
            ours = bench_chain(ag, shape, args.repeat, dtype, n_ops)
            ref = bench_chain(torch, shape, args.repeat, dtype, n_ops) if torch else float("nan")
            print(f"{'chain' + str(n_ops):<12}{str(shape):>8}{ours:>10.1f}{ref:>10.1f}{ours / ref:>8.2f}")


if __name__ == "__main__":
    main()
