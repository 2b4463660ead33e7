"""Real PyTorch programs (re-written: same API use) run with `import autograd_core as torch`,
then, when torch is installed, the same source with only its import lines swapped runs under
torch from the same initial weights and data; losses, outputs and gradients must agree.

Randomness that the two frameworks draw differently (dropout masks, randn_like noise, Categorical
samples) is either switched off through the program's own options (p=0) or, where the algorithm
needs it, fed to both from one NumPy stream by patching the sampling function (`shared=True`).
float32 programs are compared at rtol 2e-4 (float32 drift over a few steps); float64 at 1e-9.
"""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

# name -> (comparison kwargs, rtol, atol, shared randomness)
CASES = {
    "micrograd": ({}, 1e-12, 1e-12, False),
    "tutorial_tensors": ({}, 1e-6, 1e-6, False),
    "tutorial_autograd": ({}, 1e-6, 1e-6, False),
    "tutorial_quickstart": ({}, 2e-4, 1e-5, False),
    "tutorial_buildmodel": ({}, 1e-5, 1e-6, False),
    "tutorial_data": ({}, 1e-6, 1e-6, False),
    "examples_regression": (dict(max_steps=80), 2e-4, 1e-5, False),
    "examples_mnist": (dict(p1=0.0, p2=0.0), 2e-4, 1e-5, False),
    "examples_mnist_rnn": (dict(p1=0.0, p2=0.0), 2e-4, 1e-5, False),
    "examples_vae": ({}, 2e-4, 1e-5, True),
    "examples_time_sequence": ({}, 1e-7, 1e-9, False),
    "examples_time_sequence[strong_wolfe]": (dict(line_search_fn="strong_wolfe"), 1e-7, 1e-9, False),
    "examples_reinforce": (dict(p=0.0), 2e-4, 1e-5, True),
    "examples_word_language_model": (dict(dropout=0.0), 2e-4, 1e-5, False),
    "examples_word_language_model[GRU]": (dict(dropout=0.0, model_type="GRU", tied=False), 2e-4, 1e-5, False),
    "examples_word_language_model[RNN_TANH]": (dict(dropout=0.0, model_type="RNN_TANH"), 2e-4, 1e-5, False),
    "examples_word_language_model_transformer": (dict(dropout=0.0), 2e-4, 1e-5, False),
    "examples_super_resolution": ({}, 2e-4, 1e-5, False),
    "nanogpt": ({}, 2e-4, 1e-5, False),
    "nanogpt[manual_attention]": (dict(flash=False), 2e-4, 1e-5, False),
}


def _program(case):
    return case.split("[")[0]


def test_every_program_file_has_cases_and_only_imports_mention_autograd_core():
    assert len(H.PROGRAMS) >= 15
    assert set(H.PROGRAMS) == {_program(c) for c in CASES}
    for name in H.PROGRAMS:
        src = H.source(name)
        assert H.non_import_mentions(src) == [], name
        assert "import autograd_core as torch" in src, name


def _share_randomness(monkeypatch, backend, seed=0):
    """randn / randn_like / Categorical.sample drawn from one NumPy stream, for either framework."""
    rng = np.random.RandomState(seed)

    def _dt(dtype):
        return backend.float32 if dtype is None else dtype

    def randn(*size, dtype=None, **kw):
        size = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        return backend.tensor(rng.standard_normal(tuple(size)), dtype=_dt(dtype))

    def randn_like(t, dtype=None, **kw):
        return backend.tensor(rng.standard_normal(tuple(t.shape)), dtype=dtype or t.dtype)

    def sample(self, sample_shape=()):
        p = self.probs.detach().numpy().astype(np.float64)
        u = rng.rand(*p.shape[:-1])
        idx = np.minimum((np.cumsum(p, -1) < u[..., None]).sum(-1), p.shape[-1] - 1)
        return backend.tensor(idx, dtype=backend.int64)

    monkeypatch.setattr(backend, "randn", randn)
    monkeypatch.setattr(backend, "randn_like", randn_like)
    monkeypatch.setattr(backend.distributions.Categorical, "sample", sample)


def _run(name, backend_name, kwargs, shared, monkeypatch, init=None):
    threads = None
    if backend_name == "torch":
        import torch as backend
        # torch's intra-op threads cost ~10x on tiny ops when the cores are shared
        threads = backend.get_num_threads()
        backend.set_num_threads(1)
    else:
        import autograd_core as backend
    prog = H.load(name, backend_name)
    try:
        with monkeypatch.context() as m:
            if shared:
                _share_randomness(m, backend)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return prog.main(init=init, **kwargs)
    finally:
        if threads is not None:
            backend.set_num_threads(threads)


@pytest.mark.parametrize("case", list(CASES))
def test_program_matches_torch(case, monkeypatch):
    name = _program(case)
    kwargs, rtol, atol, shared = CASES[case]
    ours = _run(name, "autograd_core", kwargs, shared, monkeypatch)
    pytest.importorskip("torch")
    theirs = _run(name, "torch", kwargs, shared, monkeypatch, init=ours["init"])
    tol = getattr(H.load(name, "autograd_core"), "TOLERANCES", None)
    H.compare(ours, theirs, rtol, atol, tolerances=tol)


@pytest.mark.parametrize("name", ["examples_mnist", "examples_reinforce", "examples_word_language_model",
                                  "examples_word_language_model_transformer", "nanogpt", "examples_vae"])
def test_program_with_its_own_randomness_learns(name):
    """Dropout on and the framework's own sampling: the program runs and its loss stays finite."""
    kwargs = {"nanogpt": dict(dropout=0.1, steps=3)}.get(name, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = H.load(name, "autograd_core").main(**kwargs)
    losses = np.asarray(res["losses"], dtype=np.float64)
    assert losses.size and np.all(np.isfinite(losses))


def test_quickstart_runs_as_a_script():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    path = os.path.join(H.HERE, "prog_tutorial_quickstart.py")
    res = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    first, last = (float(v) for v in res.stdout.split()[2:4])
    assert last < first
