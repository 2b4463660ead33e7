"""Optimizer state_dict: torch's layout, a save/load round trip mid-training that continues on
exactly the uninterrupted trajectory, loading torch's own state, and the mismatch errors."""
import numpy as np
import pytest

import autograd_core as ag
import autograd_core.optim as optim

SHAPES = [(4, 3), (3,), (2, 2, 2)]
CASES = [
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.05)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
]


def _grads(seed, steps=60):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s) for s in SHAPES]
    return init, [[rng.standard_normal(s) for s in SHAPES] for _ in range(steps)]


def _params(init, dtype=ag.float64):
    return [ag.tensor(a.copy(), dtype=dtype, requires_grad=True) for a in init]


def _steps(opt, params, rows):
    for row in rows:
        for p, g in zip(params, row):
            p.grad = ag.tensor(g.copy(), dtype=p.dtype)
        opt.step()


@pytest.mark.parametrize("name,kwargs", CASES, ids=[n + str(i) for i, (n, _) in enumerate(CASES)])
@pytest.mark.parametrize("dtype", [ag.float64, ag.float32])
def test_save_load_resume_is_identical(tmp_path, name, kwargs, dtype):
    init, rows = _grads(0)
    cls = getattr(optim, name)
    ref = _params(init, dtype)
    _steps(cls(ref, **kwargs), ref, rows)

    ps = _params(init, dtype)
    opt = cls(ps, **kwargs)
    _steps(opt, ps, rows[:25])
    path = tmp_path / "ckpt.safetensors"
    ag.save({"params": [p.detach() for p in ps], "optim": opt.state_dict()}, path)
    del opt, ps

    ck = ag.load(path)
    ps2 = [ag.tensor(t.numpy(), requires_grad=True) for t in ck["params"]]
    opt2 = cls(ps2, **kwargs)
    opt2.load_state_dict(ck["optim"])
    _steps(opt2, ps2, rows[25:])
    for a, b in zip(ps2, ref):
        assert a.dtype == dtype
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_state_dict_layout_is_torchs():
    init, rows = _grads(1, steps=2)
    ps = _params(init)
    opt = optim.Adam([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.5}], lr=0.1)
    _steps(opt, ps, rows)
    sd = opt.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1, 2]]
    assert sd["param_groups"][1]["lr"] == 0.5 and sd["param_groups"][0]["betas"] == (0.9, 0.999)
    assert list(sd["state"]) == [0, 1, 2]
    st = sd["state"][2]
    assert list(st) == ["step", "exp_avg", "exp_avg_sq"]
    assert st["step"].shape == () and float(st["step"]) == 2.0 and st["step"].dtype == ag.float32
    assert st["exp_avg"].shape == SHAPES[2]


def test_loaded_state_is_a_copy_and_optimizer_keeps_working():
    init, rows = _grads(2, steps=10)
    ps = _params(init)
    opt = optim.Adam(ps, lr=0.01)
    _steps(opt, ps, rows[:5])
    sd = opt.state_dict()
    ps2 = _params(init)
    opt2 = optim.Adam(ps2, lr=0.01)
    opt2.load_state_dict(sd)
    before = sd["state"][0]["exp_avg"].numpy().copy()
    _steps(opt2, ps2, rows[5:])
    # opt2 never wrote into opt's live state.
    np.testing.assert_array_equal(opt.state[ps[0]]["exp_avg"].numpy(), before)


def test_load_state_dict_mismatches_are_refused():
    init, rows = _grads(3, steps=3)
    ps = _params(init)
    opt = optim.Adam(ps)
    _steps(opt, ps, rows)
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.Adam([{"params": ps[:1]}, {"params": ps[1:]}]).load_state_dict(sd)
    with pytest.raises(ValueError, match="doesn't match the size"):
        optim.Adam(_params(init)[:2]).load_state_dict(sd)
    swapped = _params([init[1], init[0], init[2]])
    with pytest.raises(ValueError, match="not in this optimizer's order"):
        optim.Adam(swapped).load_state_dict(sd)
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        optim.Adam(ps).load_state_dict({"state": {}})


def test_loads_torchs_state_and_continues_like_torch():
    torch = pytest.importorskip("torch")
    init, rows = _grads(4)
    tps = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    topt = torch.optim.Adam(tps, lr=0.01, amsgrad=True)
    for row in rows[:30]:
        for p, g in zip(tps, row):
            p.grad = torch.tensor(g.copy())
        topt.step()
    tsd = topt.state_dict()
    # Convert torch's tensors to ours (what a safetensors export of a torch checkpoint gives).
    sd = {"state": {i: {k: ag.tensor(v.numpy()) for k, v in st.items()} for i, st in tsd["state"].items()},
          "param_groups": tsd["param_groups"]}
    ps = [ag.tensor(p.detach().numpy().copy(), requires_grad=True) for p in tps]
    opt = optim.Adam(ps, lr=0.01, amsgrad=True)
    opt.load_state_dict(sd)
    for row in rows[30:]:
        for p, tp, g in zip(ps, tps, row):
            p.grad, tp.grad = ag.tensor(g.copy()), torch.tensor(g.copy())
        opt.step()
        topt.step()
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=0, atol=1e-10)
