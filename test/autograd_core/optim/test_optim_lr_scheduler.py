"""Learning-rate schedulers against torch.optim.lr_scheduler: the same lr, float for float, at each
of 100 steps (with two param groups), the same state_dict, and resume from a saved state_dict."""
import math
import warnings

import numpy as np
import pytest

import autograd_core as ag
import autograd_core.optim as optim
from autograd_core.optim import lr_scheduler as sched

torch = pytest.importorskip("torch")
tsched = torch.optim.lr_scheduler

STEPS = 100


def _lam(epoch):
    return 0.97 ** epoch + 0.01 * (epoch % 7)


CASES = [
    ("StepLR", dict(step_size=7, gamma=0.5)),
    ("StepLR", dict(step_size=1, gamma=0.97)),
    ("MultiStepLR", dict(milestones=[10, 30, 30, 75], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.96)),
    ("CosineAnnealingLR", dict(T_max=40)),                # runs past T_max: the lr rises again
    ("CosineAnnealingLR", dict(T_max=100, eta_min=1e-4)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.002)),
    ("LambdaLR", dict(lr_lambda=_lam)),
    ("LinearLR", dict()),
    ("LinearLR", dict(start_factor=0.05, end_factor=0.8, total_iters=30)),
]


def _optimizers(lib, opt_lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0], requires_grad=True)
    return opt_lib.SGD([{"params": [a]}, {"params": [b], "lr": 0.03}], lr=0.1, momentum=0.9)


def _trace(lib, opt_lib, sched_mod, name, kwargs, steps=STEPS):
    opt = _optimizers(lib, opt_lib)
    s = getattr(sched_mod, name)(opt, **kwargs)
    lrs = [list(s.get_last_lr())]
    for _ in range(steps):
        opt.step()
        s.step()
        lrs.append(list(s.get_last_lr()))
        assert lrs[-1] == [g["lr"] for g in opt.param_groups]
    return lrs, s


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_torch_step_by_step(name, kwargs):
    ours, s = _trace(ag, optim, sched, name, kwargs)
    ref, ts = _trace(torch, torch.optim, tsched, name, kwargs)
    assert ours == ref  # exact: same formulas in the same order
    ours_sd, ref_sd = s.state_dict(), ts.state_dict()
    for key in ("last_epoch", "base_lrs", "_last_lr", "_step_count"):
        assert ours_sd[key] == ref_sd[key], key


def test_reduce_lr_on_plateau_matches_torch():
    rng = np.random.default_rng(0)
    metrics = np.cumsum(rng.standard_normal(STEPS)) * 0.1 + np.linspace(3, 0, STEPS)
    for kwargs in (dict(), dict(mode="max", factor=0.5, patience=2, cooldown=3, threshold_mode="abs"),
                   dict(patience=1, min_lr=[0.05, 0.001], threshold=0.05)):
        opt, topt = _optimizers(ag, optim), _optimizers(torch, torch.optim)
        s, ts = sched.ReduceLROnPlateau(opt, **kwargs), tsched.ReduceLROnPlateau(topt, **kwargs)
        for m in metrics:
            s.step(m)
            ts.step(m)
            assert s.get_last_lr() == ts.get_last_lr()
            assert s.num_bad_epochs == ts.num_bad_epochs and s.best == ts.best


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_resume_from_saved_state_dict(tmp_path, name, kwargs):
    """Save optimiser + scheduler at step 37 with autograd_core.save; a fresh pair continues exactly."""
    full, _ = _trace(ag, optim, sched, name, kwargs)
    opt = _optimizers(ag, optim)
    s = getattr(sched, name)(opt, **kwargs)
    for _ in range(37):
        opt.step()
        s.step()
    ag.save({"opt": opt.state_dict(), "sched": s.state_dict()}, tmp_path / "ckpt.safetensors")
    ck = ag.load(tmp_path / "ckpt.safetensors")
    opt2 = _optimizers(ag, optim)
    s2 = getattr(sched, name)(opt2, **kwargs)
    opt2.load_state_dict(ck["opt"])
    s2.load_state_dict(ck["sched"])
    lrs = [list(s2.get_last_lr())]
    for _ in range(STEPS - 37):
        opt2.step()
        s2.step()
        lrs.append(list(s2.get_last_lr()))
    assert lrs == full[37:]


def test_closed_form_with_epoch_argument_warns_and_matches_torch():
    for name, kwargs in CASES[:7]:
        opt, topt = _optimizers(ag, optim), _optimizers(torch, torch.optim)
        s, ts = getattr(sched, name)(opt, **kwargs), getattr(tsched, name)(topt, **kwargs)
        for epoch in (5, 17, 40, 3):
            with pytest.warns(UserWarning, match="deprecated"):
                s.step(epoch)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ts.step(epoch)
            assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)


def test_cosine_reaches_eta_min_and_scheduler_checks():
    opt = optim.AdamW([ag.tensor([1.0], requires_grad=True)], lr=1e-3)
    s = sched.CosineAnnealingLR(opt, T_max=50, eta_min=1e-5)
    for _ in range(50):
        s.step()
    assert math.isclose(s.get_last_lr()[0], 1e-5, rel_tol=1e-9)
    assert opt.param_groups[0]["initial_lr"] == 1e-3
    with pytest.raises(TypeError, match="is not an Optimizer"):
        sched.StepLR(object(), step_size=3)
    fresh = optim.SGD([ag.tensor([1.0], requires_grad=True)], lr=0.1)
    with pytest.raises(KeyError, match="initial_lr"):
        sched.StepLR(fresh, step_size=3, last_epoch=5)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas, but got 2"):
        sched.LambdaLR(fresh, [_lam, _lam])
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        sched.ReduceLROnPlateau(fresh, factor=1.5)
