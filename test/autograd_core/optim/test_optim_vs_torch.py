"""Every optimiser and option combination against torch.optim over 100 steps of the same seeded
gradient sequence (float64): parameters equal to 1e-10, on the flat path and the per-tensor path."""
import numpy as np
import pytest

import autograd_core as ag
import autograd_core.optim as optim

torch = pytest.importorskip("torch")

SHAPES = [(5, 3), (3,), (2, 4, 2), ()]
STEPS = 100

CASES = [
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, maximize=True)),
    ("SGD", dict(lr=0.02, momentum=0.9)),
    ("SGD", dict(lr=0.02, momentum=0.9, dampening=0.3)),
    ("SGD", dict(lr=0.02, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.02, momentum=0.8, nesterov=True, weight_decay=0.05, maximize=True)),
    ("SGD", dict(lr=0.02, momentum=0.5, dampening=0.5, weight_decay=0.01)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6)),
    ("Adam", dict(lr=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.05, maximize=True)),
    ("Adam", dict(lr=0.01, betas=(0.3, 0.4))),  # weights >= 0.5 take lerp's other branch
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.01, weight_decay=0.2, amsgrad=True)),
    ("AdamW", dict(lr=0.01, maximize=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.005, alpha=0.9, eps=1e-6)),
    ("RMSprop", dict(lr=0.005, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.005, momentum=0.9)),
    ("RMSprop", dict(lr=0.005, centered=True)),
    ("RMSprop", dict(lr=0.005, centered=True, momentum=0.7, weight_decay=0.05, maximize=True)),
    ("RMSprop", dict(lr=0.005, alpha=0.3, centered=True)),
]


def _sequence(seed, shapes=SHAPES, steps=STEPS, missing=False):
    """Initial values and a gradient sequence; with `missing`, some gradients are None."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s) for s in shapes]
    grads = []
    for k in range(steps):
        row = [rng.standard_normal(s) for s in shapes]
        if missing and k % 3 == 1:
            row[k % len(shapes)] = None
        grads.append(row)
    return init, grads


def _run(lib, name, kwargs, init, grads, groups=None):
    if lib is ag:
        params = [ag.tensor(a.copy(), dtype=ag.float64, requires_grad=True) for a in init]
        cls = getattr(optim, name)
    else:
        params = [torch.tensor(a.copy(), dtype=torch.float64, requires_grad=True) for a in init]
        cls = getattr(torch.optim, name)
    spec = params if groups is None else [dict(g, params=[params[i] for i in g["params"]]) for g in groups]
    opt = cls(spec, **kwargs)
    for row in grads:
        for p, g in zip(params, row):
            p.grad = None if g is None else lib.tensor(g.copy(), dtype=lib.float64)
        opt.step()
    return [np.array(p.detach().numpy()) for p in params], opt


def _assert_close(ours, ref, tol=1e-10):
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=0, atol=tol)


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}"
                                                    for n, kw in CASES])
def test_matches_torch_flat_path(name, kwargs):
    init, grads = _sequence(1)
    ours, opt = _run(ag, name, kwargs, init, grads)
    ref, topt = _run(torch, name, kwargs, init, grads)
    _assert_close(ours, ref)
    assert opt._layouts, "every parameter had a gradient: the flat path should have run"
    # Same state names and values as torch, per parameter.
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["state"].keys() == tsd["state"].keys()
    for i in tsd["state"]:
        assert list(sd["state"][i]) == list(tsd["state"][i])
        for k, v in tsd["state"][i].items():
            np.testing.assert_allclose(sd["state"][i][k].numpy(), v.numpy(), rtol=0, atol=1e-10)
            assert sd["state"][i][k].shape == tuple(v.shape)
    ours_keys = set(sd["param_groups"][0]) - {"decoupled_weight_decay"}
    assert ours_keys <= set(tsd["param_groups"][0])
    for k in ours_keys - {"params"}:
        assert sd["param_groups"][0][k] == tsd["param_groups"][0][k], k


@pytest.mark.parametrize("name,kwargs", CASES[::2], ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES[::2])])
def test_matches_torch_with_missing_grads(name, kwargs):
    # A None gradient skips that parameter (and its step count), as in torch: per-tensor path.
    init, grads = _sequence(2, missing=True)
    ours, _ = _run(ag, name, kwargs, init, grads)
    ref, _ = _run(torch, name, kwargs, init, grads)
    _assert_close(ours, ref)


@pytest.mark.parametrize("name,kwargs", [("Adam", dict(amsgrad=True)), ("SGD", dict(momentum=0.9)),
                                         ("RMSprop", dict(centered=True, momentum=0.5)), ("SGD", dict())])
def test_flat_layout_is_built_once(name, kwargs):
    init, grads = _sequence(7, steps=6)
    ps = [ag.tensor(a.copy(), requires_grad=True) for a in init]
    opt = getattr(optim, name)(ps, **kwargs)
    seen = []
    for row in grads:
        for p, g in zip(ps, row):
            p.grad = ag.tensor(g)
        opt.step()
        seen.append((list(opt._layouts.values()), [dict(opt.state[p]) for p in ps]))
    # From the second step on (SGD's momentum buffer appears at the first), nothing is rebuilt.
    for lays, states in seen[2:]:
        assert len(lays) == 1 and lays[0] is seen[1][0][0]
        for st, st1 in zip(states, seen[1][1]):
            assert st.keys() == st1.keys() and all(st[k] is st1[k] for k in st)


@pytest.mark.parametrize("name,kwargs", CASES[::3], ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES[::3])])
def test_flat_and_per_tensor_paths_agree_bit_for_bit(name, kwargs):
    init, grads = _sequence(8, steps=30)
    results = []
    for flat in (True, False):
        ps = [ag.tensor(a.astype(np.float32), requires_grad=True) for a in init]
        opt = getattr(optim, name)(ps, **kwargs)
        opt._use_flat = flat
        for row in grads:
            for p, g in zip(ps, row):
                p.grad = ag.tensor(g.astype(np.float32))
            opt.step()
        assert bool(opt._layouts) == flat
        results.append(([p.detach().numpy() for p in ps], opt.state_dict()["state"]))
    for a, b in zip(results[0][0], results[1][0]):
        np.testing.assert_array_equal(a, b)
    for i, st in results[0][1].items():
        for k, v in st.items():
            np.testing.assert_array_equal(v.numpy(), results[1][1][i][k].numpy())


def test_deepcopy_gives_an_independent_optimizer():
    import copy
    init, grads = _sequence(9, steps=10)
    ps = [ag.tensor(a.copy(), requires_grad=True) for a in init]
    opt = optim.Adam(ps, lr=0.01)
    for row in grads[:5]:
        for p, g in zip(ps, row):
            p.grad = ag.tensor(g)
        opt.step()
    twin = copy.deepcopy({"opt": opt, "ps": ps})
    for o, qs in ((opt, ps), (twin["opt"], twin["ps"])):
        for row in grads[5:]:
            for p, g in zip(qs, row):
                p.grad = ag.tensor(g)
            o.step()
    for a, b in zip(ps, twin["ps"]):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert opt.state[ps[0]]["exp_avg"] is not twin["opt"].state[twin["ps"][0]]["exp_avg"]


def test_param_groups_with_own_options_match_torch():
    init, grads = _sequence(3)
    groups = [{"params": [0, 2], "lr": 0.03}, {"params": [1, 3], "betas": (0.5, 0.9), "weight_decay": 0.1}]
    ours, opt = _run(ag, "Adam", dict(lr=0.01), init, grads, groups)
    ref, _ = _run(torch, "Adam", dict(lr=0.01), init, grads, groups)
    _assert_close(ours, ref)
    assert len(opt._layouts) == 2


def test_mixed_dtypes_take_the_per_tensor_path():
    rng = np.random.default_rng(4)
    a32 = rng.standard_normal((3, 2)).astype(np.float32)
    a64 = rng.standard_normal(4)
    ps = [ag.tensor(a32.copy(), requires_grad=True), ag.tensor(a64.copy(), requires_grad=True)]
    tps = [torch.tensor(a32.copy(), requires_grad=True), torch.tensor(a64.copy(), requires_grad=True)]
    opt, topt = optim.Adam(ps, lr=0.01), torch.optim.Adam(tps, lr=0.01)
    for _ in range(20):
        g32, g64 = rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal(4)
        ps[0].grad, ps[1].grad = ag.tensor(g32), ag.tensor(g64)
        tps[0].grad, tps[1].grad = torch.tensor(g32), torch.tensor(g64)
        opt.step()
        topt.step()
    assert not opt._layouts
    np.testing.assert_allclose(ps[0].detach().numpy(), tps[0].detach().numpy(), rtol=0, atol=1e-6)
    np.testing.assert_allclose(ps[1].detach().numpy(), tps[1].detach().numpy(), rtol=0, atol=1e-10)
    assert ps[0].dtype == ag.float32 and opt.state[ps[0]]["exp_avg"].dtype == ag.float32


def test_float32_parameters_match_torch_to_1e6():
    init, grads = _sequence(5)
    ps = [ag.tensor(a.astype(np.float32), requires_grad=True) for a in init]
    tps = [torch.tensor(a.astype(np.float32), requires_grad=True) for a in init]
    opt, topt = optim.Adam(ps, lr=0.01, amsgrad=True), torch.optim.Adam(tps, lr=0.01, amsgrad=True)
    for row in grads:
        for p, tp, g in zip(ps, tps, row):
            p.grad, tp.grad = ag.tensor(g.astype(np.float32)), torch.tensor(g.astype(np.float32))
        opt.step()
        topt.step()
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=0, atol=1e-6)
    assert opt.state[ps[0]]["step"].dtype == ag.float32  # torch's scalar dtype for `step`


def test_layout_survives_user_changes():
    """Replacing p.data, p.grad objects, a state tensor or the whole state keeps results torch-equal."""
    init, grads = _sequence(6, steps=12)
    ps = [ag.tensor(a.copy(), dtype=ag.float64, requires_grad=True) for a in init]
    tps = [torch.tensor(a.copy(), dtype=torch.float64, requires_grad=True) for a in init]
    opt, topt = optim.Adam(ps, lr=0.02, amsgrad=True), torch.optim.Adam(tps, lr=0.02, amsgrad=True)
    alias = ps[0].detach()  # shares data: must see every update (parameters are never moved)
    for k, row in enumerate(grads):
        if k == 3:  # replace a parameter's data with a new array of the same shape
            ps[1].data = ag.tensor(ps[1].detach().numpy() * 0.5)
            with torch.no_grad():
                tps[1].data = tps[1].data * 0.5
        if k == 5:  # assign a state tensor
            opt.state[ps[2]]["exp_avg"] = ag.zeros(*SHAPES[2], dtype=ag.float64)
            topt.state[tps[2]]["exp_avg"] = torch.zeros(SHAPES[2], dtype=torch.float64)
        if k == 7:  # in-place edit of a state view
            opt.state[ps[0]]["exp_avg_sq"].mul_(2.0)
            topt.state[tps[0]]["exp_avg_sq"].mul_(2.0)
        if k == 9:  # reset the optimiser state
            opt.state.clear()
            topt.state.clear()
        for p, tp, g in zip(ps, tps, row):
            p.grad, tp.grad = ag.tensor(g.copy(), dtype=ag.float64), torch.tensor(g.copy(), dtype=torch.float64)
        opt.step()
        topt.step()
        for p, tp in zip(ps, tps):
            np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(alias.numpy(), ps[0].detach().numpy())


def test_grads_accumulated_in_place_and_zero_grad():
    p = ag.tensor([1.0, -2.0, 3.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    (p * p).sum().backward()
    g_arr = p.grad._data
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [0.8, -1.6, 2.4])
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and p.grad._data is g_arr and not p.grad.detach().numpy().any()
    (p * p).sum().backward()  # accumulates into the same array
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [0.64, -1.28, 1.92])
    opt.zero_grad()
    assert p.grad is None
    opt.step()  # no gradient: nothing moves
    np.testing.assert_allclose(p.detach().numpy(), [0.64, -1.28, 1.92])


def test_step_bumps_version_counters_and_records_no_graph():
    p = ag.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([p])
    p.grad = ag.tensor([0.5, -0.5])
    v0 = p._version
    opt.step()
    assert p._version > v0
    assert p.grad_fn is None and p.is_leaf
    st = opt.state[p]["exp_avg"]
    v1 = st._version
    p.grad = ag.tensor([0.5, -0.5])
    opt.step()
    assert st._version > v1


def test_closure_is_evaluated_with_grad_enabled():
    p = ag.tensor([3.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with ag.no_grad():
        loss = opt.step(closure)
    assert float(loss) == 9.0
    np.testing.assert_allclose(p.detach().numpy(), [1.5])


@pytest.mark.parametrize("make,msg", [
    (lambda ps: optim.SGD(ps, lr=-1.0), "Invalid learning rate: -1.0"),
    (lambda ps: optim.SGD(ps, momentum=-0.1), "Invalid momentum value: -0.1"),
    (lambda ps: optim.SGD(ps, weight_decay=-1), "Invalid weight_decay value: -1"),
    (lambda ps: optim.SGD(ps, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    (lambda ps: optim.Adam(ps, lr=-1.0), "Invalid learning rate: -1.0"),
    (lambda ps: optim.Adam(ps, eps=-1e-8), "Invalid epsilon value: -1e-08"),
    (lambda ps: optim.Adam(ps, betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
    (lambda ps: optim.Adam(ps, betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (lambda ps: optim.AdamW(ps, weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    (lambda ps: optim.RMSprop(ps, alpha=-0.5), "Invalid alpha value: -0.5"),
    (lambda ps: optim.RMSprop(ps, momentum=-1), "Invalid momentum value: -1"),
    (lambda ps: optim.Adam([{"params": ps, "lr": -2.0}]), "Invalid learning rate: -2.0"),
])
def test_argument_checks(make, msg):
    ps = [ag.tensor([1.0], requires_grad=True)]
    with pytest.raises(ValueError) as e:
        make(ps)
    assert str(e.value) == msg


def test_parameter_lists_are_checked():
    p, q = ag.tensor([1.0], requires_grad=True), ag.tensor([2.0], requires_grad=True)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.Adam([])
    with pytest.raises(ValueError, match="duplicate parameters"):
        optim.Adam([p, q, p])
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [q, p]}], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD({p, q}, lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        optim.SGD([p, 3.0], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)
    opt = optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [p]})
    opt.add_param_group({"params": q, "lr": 0.5})
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["momentum"] == 0


def test_named_parameters_and_repr():
    p = ag.tensor([1.0], requires_grad=True)
    opt = optim.Adam([("w", p)], lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["w"] and opt.param_groups[0]["params"][0] is p
    text = repr(opt)
    assert text.startswith("Adam (") and "lr: 0.1" in text and "Parameter Group 0" in text


def test_works_with_nn_linear():
    from autograd_core import nn

    ag.manual_seed(0)
    lin = nn.Linear(4, 2)
    opt = optim.Adam(lin.parameters(), lr=0.05)
    x = ag.randn(16, 4)
    y = ag.randn(16, 2)
    first = None
    for _ in range(50):
        opt.zero_grad()
        loss = ((lin(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        first = float(loss) if first is None else first
    assert float(loss) < first
