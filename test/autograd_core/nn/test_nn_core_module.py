"""Module API: registration, traversal order, state_dict, load_state_dict errors, hooks, modes, dtype."""
import copy
from collections import OrderedDict

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import autograd_core as ag  # noqa: E402
import autograd_core.nn as nn  # noqa: E402


def _build(lib):
    """The same nested architecture in either library (lib is torch.nn or autograd_core.nn)."""

    class Block(lib.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.Linear(4, 4)
            self.act = lib.Tanh()
            self.register_buffer("running", (torch if lib is torch.nn else ag).zeros(4))
            self.register_buffer("scratch", (torch if lib is torch.nn else ag).zeros(2), persistent=False)

        def forward(self, x):
            return self.act(self.fc(x)) + self.running

    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.scale = lib.Parameter((torch if lib is torch.nn else ag).ones(1))
            self.encoder = lib.Sequential(lib.Linear(3, 4), lib.ReLU(), Block())
            self.heads = lib.ModuleList([lib.Linear(4, 2), lib.Linear(4, 1, bias=False)])
            self.extra = lib.ModuleDict({"b": lib.Linear(2, 2), "a": lib.Identity()})
            self.plist = lib.ParameterList([lib.Parameter((torch if lib is torch.nn else ag).zeros(2, 2))])
            self.pdict = lib.ParameterDict({"gain": lib.Parameter((torch if lib is torch.nn else ag).ones(3))})

        def forward(self, x):
            h = self.encoder(x) * self.scale
            return self.extra["b"](self.heads[0](h)), self.heads[1](h)

    return Net()


def test_named_parameters_buffers_modules_match_torch():
    ours, theirs = _build(nn), _build(torch.nn)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [tuple(p.shape) for p in ours.parameters()] == [tuple(p.shape) for p in theirs.parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert [n for n, _ in ours.encoder.named_parameters(prefix="enc", recurse=False)] == []
    assert [n for n, _ in ours.named_parameters(recurse=False)] == ["scale"]


def test_state_dict_keys_order_and_sharing_match_torch():
    ours, theirs = _build(nn), _build(torch.nn)
    sd = ours.state_dict()
    assert list(sd) == list(theirs.state_dict())
    assert "encoder.2.scratch" not in sd  # non-persistent buffer
    # Values are detached views of the live parameters, as torch's are.
    w = sd["encoder.0.weight"]
    assert not w.requires_grad and w.grad_fn is None
    ours.encoder[0].weight.data.numpy()[0, 0] = 42.0
    assert w.numpy()[0, 0] == 42.0
    assert ours.state_dict(keep_vars=True)["encoder.0.weight"] is ours.encoder[0].weight


def test_load_state_dict_from_torch_gives_identical_outputs():
    ours, theirs = _build(nn), _build(torch.nn)
    with torch.no_grad():
        theirs.encoder[2].running.uniform_()
    result = ours.load_state_dict({k: ag.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    for a, b in zip(ours(ag.tensor(x)), theirs(torch.tensor(x))):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_load_state_dict_strict_errors_are_worded_like_torch():
    def message(model, sd, tensor):
        with pytest.raises(RuntimeError) as exc:
            model.load_state_dict({k: tensor(v) for k, v in sd.items()})
        return str(exc.value)

    for ours, theirs in ((nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1)),
                          torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))),):
        sd = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
        del sd["1.bias"]
        sd["1.extra"] = np.zeros(1, np.float32)
        sd["0.weight"] = np.zeros((4, 2), np.float32)
        ours_msg = message(ours, sd, ag.tensor)
        theirs_msg = message(theirs, sd, torch.tensor)
        assert ours_msg == theirs_msg
        assert 'Missing key(s) in state_dict: "1.bias"' in ours_msg
        assert 'Unexpected key(s) in state_dict: "1.extra"' in ours_msg
        assert "size mismatch for 0.weight" in ours_msg
        # Non-strict: missing/unexpected are reported, not raised (size mismatch still raises).
        sd["0.weight"] = np.zeros((3, 2), np.float32)
        r = ours.load_state_dict({k: ag.tensor(v) for k, v in sd.items()}, strict=False)
        rt = theirs.load_state_dict({k: torch.tensor(v) for k, v in sd.items()}, strict=False)
        assert (r.missing_keys, r.unexpected_keys) == (rt.missing_keys, rt.unexpected_keys)
        assert np.all(ours[0].weight.detach().numpy() == 0)


def test_load_state_dict_copies_in_place_and_casts():
    lin = nn.Linear(2, 2)
    w = lin.weight
    lin.load_state_dict({"weight": ag.ones(2, 2, dtype=ag.float64), "bias": ag.zeros(2)})
    assert lin.weight is w and w.dtype == ag.float32 and np.all(w.detach().numpy() == 1)
    assert w.requires_grad and w.is_leaf


def test_train_eval_flags_propagate():
    ours = _build(nn)
    assert all(m.training for m in ours.modules())
    assert ours.eval() is ours
    assert not any(m.training for m in ours.modules())
    ours.encoder.train()
    assert ours.encoder[2].act.training and not ours.training
    with pytest.raises(ValueError):
        ours.train("yes")


def test_forward_hooks_and_pre_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(tuple(out.shape)) or out + 1)
    out = lin(ag.randn(3, 2))
    np.testing.assert_allclose(out.detach().numpy(), (lin.bias.detach().numpy() + 1)[None].repeat(3, 0), rtol=1e-6)
    assert calls == [(3, 2)]
    h1.remove()
    h2.remove()
    x = ag.randn(3, 2)
    np.testing.assert_allclose(lin(x).detach().numpy(), (x.numpy() @ lin.weight.detach().numpy().T
                                                          + lin.bias.detach().numpy()), rtol=1e-6)
    assert calls == [(3, 2)]
    with lin.register_forward_hook(lambda m, a, kw, o: o * 0, with_kwargs=True):
        assert np.all(lin(x).detach().numpy() == 0)
    assert np.any(lin(x).detach().numpy() != 0)


def test_to_double_float_and_device():
    net = _build(nn)
    p = net.encoder[0].weight
    net(ag.randn(2, 3)).__getitem__(0).sum().backward()
    assert net.double() is net
    assert all(q.dtype == ag.float64 for q in net.parameters())
    assert all(b.dtype == ag.float64 for b in net.buffers())
    assert net.encoder[0].weight is p and p.grad.dtype == ag.float64  # same object, grad converted
    out = net(ag.randn(2, 3, dtype=ag.float64))[0]
    assert out.dtype == ag.float64
    net.to(ag.float32).to("cpu")
    assert p.dtype == ag.float32
    with pytest.raises(RuntimeError, match="CPU only"):
        net.to("cuda")
    with pytest.raises(TypeError):
        net.to(ag.int64)


def test_zero_grad_requires_grad_and_apply():
    lin = nn.Linear(2, 2)
    lin(ag.randn(1, 2)).sum().backward()
    lin.zero_grad(set_to_none=False)
    assert np.all(lin.weight.grad.numpy() == 0)
    lin.zero_grad()
    assert lin.weight.grad is None
    lin.requires_grad_(False)
    assert not any(p.requires_grad for p in lin.parameters())
    seen = []
    nn.Sequential(lin, nn.ReLU()).apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "ReLU", "Sequential"]


def test_setattr_getattr_delattr_dir_and_errors():
    m = nn.Module()
    m.w = nn.Parameter(ag.ones(2))
    m.sub = nn.Linear(1, 1)
    m.register_buffer("buf", ag.zeros(1))
    m.plain = 3
    assert set(dict(m.named_parameters())) == {"w", "sub.weight", "sub.bias"}
    assert {"w", "sub", "buf", "plain"} <= set(dir(m))
    with pytest.raises(TypeError, match="cannot assign"):
        m.w = ag.ones(2)  # a plain tensor cannot replace a Parameter
    with pytest.raises(TypeError, match="cannot assign"):
        m.sub = 5
    m.buf = ag.ones(1)  # buffers accept any tensor
    del m.w
    assert "w" not in dict(m.named_parameters())
    with pytest.raises(AttributeError, match="has no attribute 'w'"):
        m.w  # noqa: B018
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        m.register_buffer("plain", ag.zeros(1))
    with pytest.raises(KeyError, match=r'contain "\."'):
        m.register_parameter("a.b", None)

    class Forgot(nn.Module):
        def __init__(self):
            self.lin = nn.Linear(1, 1)

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Forgot()
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


def test_repr_matches_torch_for_nested_model():
    ours, theirs = _build(nn), _build(torch.nn)
    assert repr(ours) == repr(theirs)
    assert repr(ours.heads) == repr(theirs.heads)
    assert repr(ours.extra) == repr(theirs.extra)


def test_sequential_and_module_list_container_api():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear)
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2 and head[0] is seq[0]
    assert [type(m).__name__ for m in seq] == ["Linear", "ReLU", "Linear"]
    seq.append(nn.Tanh())
    assert list(dict(seq.named_children())) == ["0", "1", "2", "3"]
    del seq[1]
    assert list(dict(seq.named_children())) == ["0", "1", "2"]
    with pytest.raises(IndexError):
        seq[5]
    named = nn.Sequential(OrderedDict(first=nn.Linear(2, 2), act=nn.ReLU()))
    assert list(named.state_dict()) == ["first.weight", "first.bias"]
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml += [nn.ReLU()]
    ml.insert(0, nn.Tanh())
    assert [type(m).__name__ for m in ml] == ["Tanh", "Linear", "ReLU"]
    md = nn.ModuleDict({"x": nn.ReLU()})
    md["y"] = nn.Tanh()
    assert list(md.keys()) == ["x", "y"] and "y" in md and len(md) == 2
    pl = nn.ParameterList([ag.zeros(1)])
    assert isinstance(pl[0], nn.Parameter) and pl[0].requires_grad
    pd = nn.ParameterDict({"a": ag.ones(2)})
    assert isinstance(pd["a"], nn.Parameter) and list(dict(pd.named_parameters())) == ["a"]


def test_parameter_basics_and_deepcopy():
    p = nn.Parameter(ag.ones(2))
    assert p.requires_grad and p.is_leaf and isinstance(p, ag.Tensor)
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert not nn.Parameter(ag.ones(1), requires_grad=False).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(ag.tensor([1, 2]))
    net = _build(nn)
    clone = copy.deepcopy(net)
    assert list(clone.state_dict()) == list(net.state_dict())
    assert isinstance(clone.encoder[0].weight, nn.Parameter)
    assert clone.encoder[0].weight is not net.encoder[0].weight
    np.testing.assert_array_equal(clone.encoder[0].weight.detach().numpy(), net.encoder[0].weight.detach().numpy())


def test_shared_parameters_are_listed_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, lin)
    tseq = torch.nn.Sequential(*(2 * [torch.nn.Linear(2, 2)]))
    assert [n for n, _ in seq.named_parameters()] == [n for n, _ in tseq.named_parameters()]
    assert list(seq.state_dict()) == list(tseq.state_dict())


def test_optional_layer_names_are_exported_when_their_files_exist():
    import importlib.util
    names = {"conv": ["Conv2d"], "pooling": ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d"],
             "normalization": ["BatchNorm1d", "BatchNorm2d", "LayerNorm"], "dropout": ["Dropout"],
             "rnn": ["GRUCell", "GRU", "LSTMCell"]}
    for mod, cls_names in names.items():
        present = importlib.util.find_spec(f"autograd_core.nn.{mod}") is not None
        for c in cls_names:
            assert hasattr(nn, c) == present, (mod, c)
