"""Neural-network layer cost of autograd_core.nn vs torch (printed table, never asserts on time).

    python benchmarks/nn.py [--repeat N] [--quick]

(a) MLP training step: batch 64, 198→256→256→4, tanh, MSE, Adam (zero_grad + forward + loss +
    backward + step). Target ≤ 1.0× torch single-threaded.
(b) The policy CNN forward + backward at batch 64 on 1×12×16 depth inputs:
    Conv2d(1,32,k2,s2)+LeakyReLU(0.05) → Conv2d(32,64,k3)+LeakyReLU → Conv2d(64,128,k3)+LeakyReLU
    → Flatten → Linear(1024,192), plus Linear(10,192) on the state vector, LeakyReLU,
    GRUCell(192,192), LeakyReLU, Linear(192,6). Target ≤ 1.2× torch single-threaded.
(c) The same network's batch-1 inference step (no_grad): ours eager vs torch eager vs
    torch.jit.trace.

torch runs in the same process, once with `torch.set_num_threads(1)` and once with its default
thread count. NumPy's BLAS (OpenBLAS) runs with its default thread count ("ours") and, when the
OpenBLAS library exposes the call, pinned to one thread ("ours 1T"), the like-for-like comparison
with single-threaded torch. Ratios are ours / torch (lower is better for us). The columns are
timed in turn within every repeat, so load from other processes on the shared cores hits all
alike. Note: OpenBLAS's kernel family decides the GEMM rate: on this AVX-512 machine the
'SkylakeX' kernels run float32 GEMM ~1.9x faster than 'Haswell' (OPENBLAS_CORETYPE selects).

`policy_net_builders()` builds the identical network (same weights) in both frameworks; the
export benchmark reuses it.
"""
import argparse
import contextlib
import ctypes
import glob
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import autograd_core as ag  # noqa: E402
import autograd_core.nn as agnn  # noqa: E402

try:
    import torch
except ImportError:  # our columns still print
    torch = None

STATE_DIM, HIDDEN, ACTIONS = 10, 192, 6
IMG_SHAPE = (1, 12, 16)


# ---------------------------------------------------------------------------------------------
# the policy network, written once against a torch-like namespace
# ---------------------------------------------------------------------------------------------
def _policy_class(lib):
    nn = lib.nn

    class PolicyNet(nn.Module):
        """DiffPhysDrone-style policy: depth CNN + state projection → GRUCell → action head."""

        def __init__(self, state_dim=STATE_DIM, hidden=HIDDEN, actions=ACTIONS):
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(1, 32, 2, 2, bias=False), nn.LeakyReLU(0.05),
                nn.Conv2d(32, 64, 3, bias=False), nn.LeakyReLU(0.05),
                nn.Conv2d(64, 128, 3, bias=False), nn.LeakyReLU(0.05),
                nn.Flatten(),
                nn.Linear(128 * 2 * 4, hidden, bias=False))
            self.v_proj = nn.Linear(state_dim, hidden)
            self.gru = nn.GRUCell(hidden, hidden)
            self.fc = nn.Linear(hidden, actions, bias=False)
            self.act = nn.LeakyReLU(0.05)

        def forward(self, x, v, hx):
            feat = self.act(self.stem(x) + self.v_proj(v))
            hx = self.gru(feat, hx)
            return self.fc(self.act(hx)), hx

    return PolicyNet


def policy_net_builders(seed=0):
    """(ours, theirs): the policy network in autograd_core and in torch with identical weights.

    torch builds first (torch.manual_seed(seed), torch's default init); its state dict is then
    loaded into ours, so both produce the same outputs. `theirs` is None without torch.
    Inputs: x (B, 1, 12, 16), v (B, 10), hx (B, 192); outputs (action (B, 6), hx (B, 192)).
    """
    ag.manual_seed(seed)
    ours = _policy_class(ag)()
    if torch is None:
        return ours, None
    torch.manual_seed(seed)
    theirs = _policy_class(torch)()
    ours.load_state_dict({k: ag.tensor(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def policy_inputs(batch, seed=0, dtype=np.float32):
    """NumPy inputs (x, v, hx) for the policy network."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-0.6, 2.0, (batch,) + IMG_SHAPE).astype(dtype)
    v = rng.standard_normal((batch, STATE_DIM)).astype(dtype)
    hx = (rng.standard_normal((batch, HIDDEN)) * 0.1).astype(dtype)
    return x, v, hx


def _mlp(lib, seed=0):
    nn = lib.nn
    lib.manual_seed(seed)
    return nn.Sequential(nn.Linear(198, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 4))


# ---------------------------------------------------------------------------------------------
# timing helpers
# ---------------------------------------------------------------------------------------------
def _interleaved_us(cells, repeat, inner):
    """Median µs per call of each cell; cells = {name: (fn, context_factory)}.

    The cells are timed in turn within every repeat (rotating the order), so a load change on
    the shared cores hits all columns alike and the ratios stay meaningful.
    """
    names = list(cells)
    for name in names:
        fn, ctx = cells[name]
        with ctx():
            for _ in range(max(5, inner // 4)):
                fn()
    runs = {n: [] for n in names}
    for r in range(repeat):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            fn, ctx = cells[name]
            with ctx():
                t0 = time.perf_counter()
                for _ in range(inner):
                    fn()
                runs[name].append((time.perf_counter() - t0) / inner * 1e6)
    return {n: float(np.median(v)) for n, v in runs.items()}


def _openblas_set_threads():
    """The OpenBLAS `set_num_threads` entry point NumPy links against, or None."""
    libdir = os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs")
    for path in glob.glob(os.path.join(libdir, "*openblas*")):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                     "openblas_set_num_threads64_", "openblas_set_num_threads"):
            fn = getattr(lib, name, None)
            if fn is not None:
                getter = getattr(lib, name.replace("set_", "get_"), None)
                return fn, getter
    return None, None


_SET_BLAS, _GET_BLAS = _openblas_set_threads()


def _blas_corename():
    """OpenBLAS's kernel family (e.g. 'Haswell', 'SkylakeX'); OPENBLAS_CORETYPE overrides it."""
    libdir = os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs")
    for path in glob.glob(os.path.join(libdir, "*openblas*")):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return "?"


@contextlib.contextmanager
def _blas_threads(n):
    if _SET_BLAS is None or n is None:
        yield False
        return
    prev = _GET_BLAS() if _GET_BLAS is not None else None
    _SET_BLAS(int(n))
    try:
        yield True
    finally:
        if prev is not None:
            _SET_BLAS(int(prev))


@contextlib.contextmanager
def _torch_threads(n):
    prev = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


# ---------------------------------------------------------------------------------------------
# the three workloads
# ---------------------------------------------------------------------------------------------
def mlp_step_fns():
    """{'ours': fn, 'torch': fn}; says in 'note' when ours stops at backward (no optim yet)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 198)).astype(np.float32)
    y = rng.standard_normal((64, 4)).astype(np.float32)
    fns, note = {}, ""
    net = _mlp(ag)
    xa, ya = ag.tensor(x), ag.tensor(y)
    loss_fn = agnn.MSELoss()
    try:
        from autograd_core.optim import Adam
        opt = Adam(net.parameters(), lr=1e-3)
    except ImportError:
        opt = None
        note = "autograd_core.optim missing: ours times zero_grad + forward + backward only"

    def ours():
        if opt is not None:
            opt.zero_grad()
        else:
            net.zero_grad()
        loss = loss_fn(net(xa), ya)
        loss.backward()
        if opt is not None:
            opt.step()
    fns["ours"] = ours
    if torch is not None:
        tnet = _mlp(torch)
        xt, yt = torch.tensor(x), torch.tensor(y)
        topt = torch.optim.Adam(tnet.parameters(), lr=1e-3)
        tloss = torch.nn.MSELoss()

        def theirs():
            topt.zero_grad()
            tloss(tnet(xt), yt).backward()
            topt.step()
        fns["torch"] = theirs
    return fns, note


def policy_train_fns(batch=64):
    ours, theirs = policy_net_builders(0)
    x, v, hx = policy_inputs(batch)
    xa, va, ha = ag.tensor(x), ag.tensor(v), ag.tensor(hx)

    def ours_fn():
        ours.zero_grad()
        act, h = ours(xa, va, ha)
        loss = (act * act).mean() + (h * h).mean()
        loss.backward()
    fns = {"ours": ours_fn}
    if theirs is not None:
        xt, vt, htt = torch.tensor(x), torch.tensor(v), torch.tensor(hx)

        def theirs_fn():
            theirs.zero_grad()
            act, h = theirs(xt, vt, htt)
            loss = (act * act).mean() + (h * h).mean()
            loss.backward()
        fns["torch"] = theirs_fn
    return fns


def policy_infer_fns():
    ours, theirs = policy_net_builders(0)
    x, v, hx = policy_inputs(1)
    xa, va, ha = ag.tensor(x), ag.tensor(v), ag.tensor(hx)

    def ours_fn():
        with ag.no_grad():
            return ours(xa, va, ha)
    fns = {"ours": ours_fn}
    if theirs is not None:
        xt, vt, htt = torch.tensor(x), torch.tensor(v), torch.tensor(hx)
        theirs.eval()

        def theirs_fn():
            with torch.no_grad():
                return theirs(xt, vt, htt)
        fns["torch"] = theirs_fn
        with torch.no_grad():
            traced = torch.jit.trace(theirs, (xt, vt, htt))

        def traced_fn():
            with torch.no_grad():
                return traced(xt, vt, htt)
        fns["torch.jit.trace"] = traced_fn
    return fns


def _check_policy_agreement():
    """Max |ours - torch| of the batch-64 forward and of the parameter gradients (sanity)."""
    if torch is None:
        return None
    ours, theirs = policy_net_builders(0)
    x, v, hx = policy_inputs(64)
    act, h = ours(ag.tensor(x), ag.tensor(v), ag.tensor(hx))
    ((act * act).mean() + (h * h).mean()).backward()
    tact, th = theirs(torch.tensor(x), torch.tensor(v), torch.tensor(hx))
    ((tact * tact).mean() + (th * th).mean()).backward()
    out_err = max(float(np.abs(act._data - tact.detach().numpy()).max()),
                  float(np.abs(h._data - th.detach().numpy()).max()))
    grad_err = max(float(np.abs(p.grad._data - pt.grad.numpy()).max())
                   for p, pt in zip(ours.parameters(), theirs.parameters()))
    return out_err, grad_err


# ---------------------------------------------------------------------------------------------
def _fmt(us):
    if us != us:
        return "        n/a"
    return f"{us / 1000:8.3f} ms" if us >= 1000 else f"{us:8.1f} µs"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7, help="timed runs per cell (median reported)")
    ap.add_argument("--quick", action="store_true", help="fewer iterations (smoke test)")
    args = ap.parse_args(argv)
    scale = 0.2 if args.quick else 1.0
    repeat = max(3, args.repeat if not args.quick else 3)
    default_threads = torch.get_num_threads() if torch is not None else None

    rows = []
    mlp, note = mlp_step_fns()
    rows.append(("(a) MLP train step, batch 64", mlp, int(200 * scale) or 10, 1.0))
    rows.append(("(b) policy CNN fwd+bwd, batch 64", policy_train_fns(64), int(60 * scale) or 5, 1.2))
    rows.append(("(c) policy batch-1 inference", policy_infer_fns(), int(1000 * scale) or 50, None))

    blas_default = _GET_BLAS() if _GET_BLAS is not None else "?"
    from autograd_core.nn import _functional_cnn
    print(f"autograd_core.nn vs torch {torch.__version__ if torch else '(absent)'}; NumPy {np.__version__}, "
          f"OpenBLAS threads {blas_default}, kernels {_blas_corename()} (OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', 'unset')}); torch default threads {default_threads}; "
          f"malloc tuned {_functional_cnn._MALLOC_TUNED}; median of {repeat}")
    if note:
        print("NOTE:", note)
    agree = _check_policy_agreement()
    if agree:
        print(f"policy net agreement (batch 64, float32): max |Δout| {agree[0]:.1e}, max |Δgrad| {agree[1]:.1e}")
    tdef_name = f"torch {default_threads}T"
    hdr = (f"{'workload':34s} {'ours':>11s} {'ours 1T':>11s} {'torch 1T':>11s} {tdef_name:>11s}"
           f" {'jit.trace 1T':>12s} {'ours/t1T':>9s} {'1T/1T':>7s} {'target':>7s}")
    print(hdr)
    print("-" * len(hdr))
    nan = float("nan")
    for name, fns, inner, target in rows:
        cells = {"ours": (fns["ours"], contextlib.nullcontext)}
        if _SET_BLAS is not None:
            cells["ours1"] = (fns["ours"], lambda: _blas_threads(1))
        if "torch" in fns:
            cells["t1"] = (fns["torch"], lambda: _torch_threads(1))
            cells["tdef"] = (fns["torch"], lambda: _torch_threads(default_threads))
        if "torch.jit.trace" in fns:
            cells["tj"] = (fns["torch.jit.trace"], lambda: _torch_threads(1))
        res = _interleaved_us(cells, repeat, inner)
        ours, ours1 = res["ours"], res.get("ours1", nan)
        t1, tdef, tj = res.get("t1", nan), res.get("tdef", nan), res.get("tj", nan)
        tgt = f"≤{target:.1f}×" if target else "-"
        na = "n/a"
        print(f"{name:34s} {_fmt(ours)} {_fmt(ours1) if ours1 == ours1 else na:>11s} "
              f"{_fmt(t1)} {_fmt(tdef)} {_fmt(tj) if tj == tj else '-':>12s} "
              f"{ours / t1:8.2f}× {ours1 / t1:6.2f}× {tgt:>7s}")
    print("ours: NumPy/OpenBLAS default threads; ours 1T: OpenBLAS pinned to 1 thread; torch 1T: "
          "torch.set_num_threads(1). ours/t1T = ours ÷ torch 1T; 1T/1T = ours 1T ÷ torch 1T.")


if __name__ == "__main__":
    main()


# =============================================================================================
# (c, export column) batch-1 policy inference through the exported NumPy runtime.
# Owned by the export work (autograd_core.export / autograd_core.runtime); appended as a separate
# section so the table above stays as it is. Run as a script, it prints after main()'s table:
#     python benchmarks/nn.py [--repeat N] [--quick]
# Target (issue 3): exported runtime ≤ 0.5× torch eager, both single-threaded.
# =============================================================================================
def export_runtime_infer_fns():
    """Batch-1 policy inference callables: {'ours eager', 'runtime', 'torch', 'torch.jit.trace'}.

    'runtime' is the network traced by `autograd_core.export.trace`, saved to one file and loaded
    with `autograd_core.runtime.load` (NumPy only, preallocated buffers, no autograd).
    """
    import tempfile

    from autograd_core import export, runtime
    ours, theirs = policy_net_builders(0)
    x, v, hx = policy_inputs(1)
    xa, va, ha = ag.tensor(x), ag.tensor(v), ag.tensor(hx)
    graph = export.trace(ours, (xa, va, ha))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "policy.agc")
        graph.save(path)
        model = runtime.load(path)
    fns = {}

    def ours_fn():
        with ag.no_grad():
            return ours(xa, va, ha)
    fns["ours eager"] = ours_fn
    fns["runtime"] = lambda: model(x, v, hx)
    for k, f in policy_infer_fns().items():
        if k != "ours":
            fns[k] = f
    return fns, model


def export_main(argv=None):
    ap = argparse.ArgumentParser(description="exported-runtime column of case (c)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    args, _ = ap.parse_known_args(argv)
    repeat = 3 if args.quick else max(3, args.repeat)
    inner = 200 if args.quick else 1000
    fns, model = export_runtime_infer_fns()
    one_blas = (lambda: _blas_threads(1))
    cells = {"ours eager": (fns["ours eager"], one_blas), "runtime": (fns["runtime"], one_blas),
             "runtime default": (fns["runtime"], contextlib.nullcontext)}
    if torch is not None:
        cells["torch"] = (fns["torch"], lambda: _torch_threads(1))
        cells["torch.jit.trace"] = (fns["torch.jit.trace"], lambda: _torch_threads(1))
    res = _interleaved_us(cells, repeat, inner)
    nan = float("nan")
    t1, tj = res.get("torch", nan), res.get("torch.jit.trace", nan)
    print()
    print(f"(c) policy batch-1 inference, exported runtime ({len(model.ops)} ops, {len(model._plan)} NumPy "
          f"kernels); OpenBLAS 1 thread, torch 1 thread, interleaved medians of {repeat}:")
    hdr = (f"  {'ours eager':>11s} {'runtime':>11s} {'runtime dT':>11s} {'torch 1T':>11s} {'jit.trace 1T':>12s}"
           f" {'rt/torch':>9s} {'rt/jit':>7s} {'target':>7s}")
    print(hdr)
    print(f"  {_fmt(res['ours eager'])} {_fmt(res['runtime'])} {_fmt(res['runtime default'])} {_fmt(t1)} "
          f"{_fmt(tj):>12s} {res['runtime'] / t1:8.2f}× {res['runtime'] / tj:6.2f}× {'≤0.5×':>7s}")
    print("  runtime: autograd_core.runtime.load(...) of the traced graph (NumPy only); runtime dT: OpenBLAS "
          "default threads; rt/torch = runtime ÷ torch eager 1T.")


if __name__ == "__main__":
    export_main()
