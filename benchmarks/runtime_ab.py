"""A/B the onboard runtime against another checkout's runtime, in one process, on the same files.

    OPENBLAS_NUM_THREADS=1 python benchmarks/runtime_ab.py --reference /path/to/other/autograd_core/runtime

The runtime folder is a stand-alone package (NumPy + relative imports), so both copies are
imported side by side under private names. Each model file is loaded by both; calls alternate in
short rounds (so CPU load hits both alike) and the table prints, per side, the fastest round
(the least disturbed: the figure to compare on a loaded machine) and the median round, with the
ratios this checkout / reference (< 1 is faster). Outputs must be bit-identical: the
script fails otherwise. Models: the shipped policy and racer files, plus any --model FILE.
"""
import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
SHIPPED = [os.path.join(ROOT, "planner_pkg", "policy", "models", "policy_default.agm"),
           os.path.join(ROOT, "planner_pkg", "racing", "models", "racer_default.agm")]


def _import_runtime(folder, name, tmp):
    """Import the runtime package in `folder` under the top-level name `name` (a private copy)."""
    dst = os.path.join(tmp, name)
    shutil.copytree(folder, dst, ignore=shutil.ignore_patterns("__pycache__"))
    spec = importlib.util.spec_from_file_location(name, os.path.join(dst, "__init__.py"),
                                                  submodule_search_locations=[dst])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _per_call_us(model, args, n):
    t = time.perf_counter()
    for _ in range(n):
        model(*args)
    return (time.perf_counter() - t) / n * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", required=True, help="another checkout's autograd_core/runtime folder")
    ap.add_argument("--model", action="append", default=[], help="more graph files to compare")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--calls", type=int, default=20, help="calls per round")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        new = _import_runtime(os.path.join(ROOT, "autograd_core", "runtime"), "_rt_this", tmp)
        ref = _import_runtime(os.path.abspath(args.reference), "_rt_reference", tmp)
        print(f"numpy {np.__version__}; {args.rounds} alternating rounds x {args.calls} calls; us per call")
        print(f"  {'model':<24} {'this min':>9} {'ref min':>9} {'ratio':>6}   {'this med':>9} {'ref med':>9} "
              f"{'ratio':>6}")
        for path in SHIPPED + args.model:
            if not os.path.exists(path):
                continue
            a, b = new.load(path), ref.load(path)
            rng = np.random.default_rng(0)
            x = [rng.standard_normal(tuple(s)).astype(d) for s, d in zip(a.input_shapes, a.input_dtypes)]
            ya, yb = a(*x), b(*x)
            ya, yb = (ya if isinstance(ya, tuple) else (ya,)), (yb if isinstance(yb, tuple) else (yb,))
            if not all(np.array_equal(p, q) for p, q in zip(ya, yb)):
                raise SystemExit(f"{path}: outputs differ between this runtime and the reference")
            ta, tb = [], []
            for _ in range(args.rounds):
                ta.append(_per_call_us(a, x, args.calls))
                tb.append(_per_call_us(b, x, args.calls))
            la, lb = min(ta), min(tb)
            ma, mb = float(np.median(ta)), float(np.median(tb))
            print(f"  {os.path.basename(path):<24} {la:9.1f} {lb:9.1f} {la / lb:6.3f}   {ma:9.1f} {mb:9.1f} "
                  f"{ma / mb:6.3f}")


if __name__ == "__main__":
    main()
