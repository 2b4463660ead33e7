"""Optimiser step cost of autograd_core.optim vs torch.optim (printed table, no asserts).

    python benchmarks/optim.py [--repeat N] [--batch B]

Parameter set: the policy MLP 198→256→256→4 (weights and biases, float32, 117,764 values in 6
tensors). Each row times `opt.step()` with the gradients already set (nothing else), median of
`--repeat` runs of 200 steps; both sides single-threaded (torch and BLAS), same process. "ours/tensor"
forces the per-tensor path, to show what the flat buffers buy. When autograd_core.nn is
available, a last table times a whole training step (batch 64: zero_grad, forward, MSE,
backward, Adam) against torch; the stated target is ≤ 1.0× torch.
"""
import argparse
import os
import sys
import time

# Single-threaded on both sides: idle OpenBLAS threads spinning after a matmul otherwise slow
# the optimiser's element-wise passes ~3x on a 2-core machine. Set before NumPy loads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import autograd_core as ag  # noqa: E402

try:
    import torch
    torch.set_num_threads(1)
except ImportError:  # our column still prints
    torch = None

SIZES = [198, 256, 256, 4]
CASES = [
    ("Adam", dict(lr=1e-3)),
    ("Adam amsgrad", dict(lr=1e-3, amsgrad=True)),
    ("AdamW wd=1e-2", dict(lr=1e-3, weight_decay=1e-2)),
    ("SGD momentum", dict(lr=1e-2, momentum=0.9)),
    ("RMSprop", dict(lr=1e-3)),
]


def _params(lib, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i, o in zip(SIZES[:-1], SIZES[1:]):
        for shape in ((o, i), (o,)):
            p = lib.tensor(rng.standard_normal(shape).astype(np.float32) * 0.05, requires_grad=True)
            p.grad = lib.tensor(rng.standard_normal(shape).astype(np.float32))
            out.append(p)
    return out


def _ag_nn():
    try:
        import autograd_core.nn as nn
    except ImportError:
        return None
    return nn


def _median_us(fn, repeat, inner=200):
    for _ in range(20):
        fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        runs.append((time.perf_counter() - t0) / inner * 1e6)
    return float(np.median(runs))


def bench_step(lib, name, kwargs, repeat, flat=True):
    opt_mod = ag.optim if lib is ag else torch.optim
    cls = getattr(opt_mod, name.split()[0])
    opt = cls(_params(lib), **kwargs)
    if lib is ag:
        opt._use_flat = flat
    return _median_us(opt.step, repeat)


def bench_training_step(lib, repeat, batch):
    nn = _ag_nn() if lib is ag else torch.nn
    lib.manual_seed(0)
    layers = []
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(SIZES) - 2:
            layers.append(nn.ReLU())
    net = nn.Sequential(*layers)
    opt = (ag.optim if lib is ag else torch.optim).Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(1)
    x = lib.tensor(rng.standard_normal((batch, SIZES[0])).astype(np.float32))
    y = lib.tensor(rng.standard_normal((batch, SIZES[-1])).astype(np.float32))

    def step():
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()

    return _median_us(step, repeat, inner=50)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args(argv)
    n = sum(p.numel() for p in _params(ag))
    print(f"optimizer.step() on the {'→'.join(map(str, SIZES))} MLP's parameters ({n} float32 values, 6 tensors); "
          f"torch {'(absent)' if torch is None else torch.__version__} 1 thread; median µs per step")
    print(f"{'optimizer':<16}{'ours/flat':>11}{'ours/tensor':>13}{'torch':>9}{'flat/torch':>12}{'tensor/torch':>14}")
    for name, kwargs in CASES:
        flat = bench_step(ag, name, kwargs, args.repeat)
        per = bench_step(ag, name, kwargs, args.repeat, flat=False)
        ref = bench_step(torch, name, kwargs, args.repeat) if torch else float("nan")
        print(f"{name:<16}{flat:>11.1f}{per:>13.1f}{ref:>9.1f}{flat / ref:>12.2f}{per / ref:>14.2f}")
    nn = _ag_nn()
    if nn is None or not all(hasattr(nn, k) for k in ("Linear", "ReLU", "Sequential")) or torch is None:
        print("(training-step table skipped: autograd_core.nn not available)")
        return
    ours = bench_training_step(ag, args.repeat, args.batch)
    ref = bench_training_step(torch, args.repeat, args.batch)
    print(f"\nwhole training step, batch {args.batch} (zero_grad + forward + MSE + backward + Adam), median µs")
    print(f"{'':<16}{'ours':>11}{'torch':>9}{'ratio':>8}")
    print(f"{'MLP + Adam':<16}{ours:>11.1f}{ref:>9.1f}{ours / ref:>8.2f}")


if __name__ == "__main__":
    main()
