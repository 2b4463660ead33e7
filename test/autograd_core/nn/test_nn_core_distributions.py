"""autograd_core.distributions against torch.distributions: log_prob, entropy, gradients, validation."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import autograd_core as ag  # noqa: E402
from autograd_core import distributions as D  # noqa: E402

TD = torch.distributions
DTYPES = [("float32", 1e-5), ("float64", 1e-10)]


def _pair(arr, requires_grad=True):
    return ag.tensor(arr, requires_grad=requires_grad), torch.tensor(arr, requires_grad=requires_grad)


def _close(ours, theirs, tol):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_normal_log_prob_entropy_cdf_icdf_and_grads_match_torch(dtype, tol):
    rng = np.random.default_rng(0)
    loc, scale = rng.standard_normal((2, 3)).astype(dtype), rng.uniform(0.5, 2, (1, 3)).astype(dtype)
    value = rng.standard_normal((4, 2, 3)).astype(dtype)
    (la, lt), (sa, st), (va, vt) = _pair(loc), _pair(scale), _pair(value)
    do, dt = D.Normal(la, sa), TD.Normal(lt, st)
    assert tuple(do.batch_shape) == tuple(dt.batch_shape) and tuple(do.event_shape) == ()
    for fo, ft in ((lambda d, v: d.log_prob(v), lambda d, v: d.log_prob(v)),
                   (lambda d, v: d.cdf(v), lambda d, v: d.cdf(v)),
                   (lambda d, v: d.entropy() * 1.0, lambda d, v: d.entropy() * 1.0)):
        for t in (la, sa, va, lt, st, vt):
            t.grad = None
        yo, yt = fo(do, va), ft(dt, vt)
        _close(yo, yt, tol)
        yo.sum().backward()
        yt.sum().backward()
        for a, b in ((la, lt), (sa, st), (va, vt)):
            if b.grad is not None:
                _close(a.grad, b.grad, tol)
    p = rng.uniform(0.05, 0.95, (2, 3)).astype(dtype)
    _close(do.icdf(ag.tensor(p)), dt.icdf(torch.tensor(p)), tol * 10)
    for prop in ("mean", "mode", "stddev", "variance"):
        _close(getattr(do, prop), getattr(dt, prop), tol)


def test_normal_rsample_is_reparameterised_and_sample_is_not():
    ag.manual_seed(0)
    loc = ag.tensor([1.0, -2.0], requires_grad=True)
    scale = ag.tensor([0.5, 2.0], requires_grad=True)
    d = D.Normal(loc, scale)
    x = d.rsample((5000,))
    assert tuple(x.shape) == (5000, 2) and x.requires_grad
    # d/dloc sum(x) = N; d/dscale sum(x) = sum(eps) = sum((x - loc) / scale).
    x.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [5000, 5000])
    eps = (x.detach().numpy() - loc.detach().numpy()) / scale.detach().numpy()
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0), rtol=1e-4)
    s = d.sample((20000,))
    assert not s.requires_grad
    np.testing.assert_allclose(s.numpy().mean(0), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(s.numpy().std(0), [0.5, 2.0], rtol=0.03)
    ag.manual_seed(0)
    np.testing.assert_array_equal(d.rsample((5000,)).detach().numpy(), x.detach().numpy())


def test_normal_scalar_params_and_repr():
    d, t = D.Normal(0.0, 1.0), TD.Normal(0.0, 1.0)
    assert repr(d) == repr(t)
    assert repr(D.Normal(ag.zeros(3), ag.ones(3))) == repr(TD.Normal(torch.zeros(3), torch.ones(3)))
    assert d.log_prob(ag.tensor(0.5)).item() == pytest.approx(t.log_prob(torch.tensor(0.5)).item())


def test_normal_validation_errors_like_torch():
    with pytest.raises(ValueError, match=r"Expected parameter scale .* to satisfy the constraint "
                                         r"GreaterThan\(lower_bound=0.0\)"):
        D.Normal(ag.zeros(2), ag.tensor([1.0, -1.0]))
    D.Normal(ag.zeros(2), ag.tensor([1.0, -1.0]), validate_args=False)
    d = D.Normal(ag.zeros(3), ag.ones(3))
    with pytest.raises(ValueError, match="must be a Tensor"):
        d.log_prob(1.0)
    with pytest.raises(ValueError, match="not broadcastable with batch_shape"):
        d.log_prob(ag.zeros(4))
    with pytest.raises(ValueError, match=r"to be within the support \(Real\(\)\)"):
        d.log_prob(ag.tensor([0.0, float("nan"), 0.0]))


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("use_logits", [True, False])
def test_categorical_log_prob_entropy_and_grads_match_torch(dtype, tol, use_logits):
    rng = np.random.default_rng(1)
    raw = (rng.standard_normal((3, 5)) if use_logits else rng.uniform(0.1, 1, (3, 5))).astype(dtype)
    value = rng.integers(0, 5, (4, 3))
    pa, pt = _pair(raw)
    kw_o = {"logits": pa} if use_logits else {"probs": pa}
    kw_t = {"logits": pt} if use_logits else {"probs": pt}
    do, dt = D.Categorical(**kw_o), TD.Categorical(**kw_t)
    assert tuple(do.batch_shape) == (3,) and tuple(do.event_shape) == ()
    _close(do.probs, dt.probs, tol)
    _close(do.logits, dt.logits, tol)
    for fo, ft in ((lambda d: d.log_prob(ag.tensor(value)), lambda d: d.log_prob(torch.tensor(value))),
                   (lambda d: d.entropy(), lambda d: d.entropy())):
        pa.grad, pt.grad = None, None
        yo, yt = fo(do), ft(dt)
        _close(yo, yt, tol)
        w = rng.standard_normal(tuple(yt.shape)).astype(dtype)
        # The normalised parameters are one graph shared by both queries: keep it for the second.
        (yo * ag.tensor(w)).sum().backward(retain_graph=True)
        (yt * torch.tensor(w)).sum().backward(retain_graph=True)
        _close(pa.grad, pt.grad, tol)
    np.testing.assert_array_equal(do.mode.numpy(), dt.mode.numpy())


def test_categorical_sampling_frequencies_and_shapes():
    ag.manual_seed(3)
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]])
    d = D.Categorical(probs=ag.tensor(probs))
    s = d.sample((20000,))
    assert tuple(s.shape) == (20000, 2) and s.dtype == ag.int64
    freq = np.stack([(s.numpy() == k).mean(0) for k in range(3)], axis=-1)
    np.testing.assert_allclose(freq, probs, atol=0.015)
    assert np.all(s.numpy()[:, 1] != 2)  # zero-probability class never drawn
    assert tuple(D.Categorical(logits=ag.zeros(4)).sample().shape) == ()
    np.testing.assert_array_equal(d.enumerate_support().numpy(),
                                  TD.Categorical(probs=torch.tensor(probs)).enumerate_support().numpy())


def test_categorical_argument_errors():
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both"):
        D.Categorical()
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Categorical(probs=ag.ones(3), logits=ag.ones(3))
    with pytest.raises(ValueError, match="Simplex"):
        D.Categorical(probs=ag.tensor([0.5, -0.2, 0.7]))
    d = D.Categorical(logits=ag.zeros(2, 4))
    with pytest.raises(ValueError, match=r"IntegerInterval\(lower_bound=0, upper_bound=3\)"):
        d.log_prob(ag.tensor([0, 4]))


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_independent_normal_matches_torch(dtype, tol):
    rng = np.random.default_rng(4)
    (la, lt), (sa, st) = _pair(rng.standard_normal((2, 3)).astype(dtype)), \
        _pair(rng.uniform(0.5, 1.5, (2, 3)).astype(dtype))
    do, dt = D.Independent(D.Normal(la, sa), 1), TD.Independent(TD.Normal(lt, st), 1)
    assert tuple(do.batch_shape) == (2,) and tuple(do.event_shape) == (3,)
    assert repr(do) == repr(dt)
    v = rng.standard_normal((5, 2, 3)).astype(dtype)
    yo, yt = do.log_prob(ag.tensor(v)), dt.log_prob(torch.tensor(v))
    _close(yo, yt, tol)
    (yo.sum() + do.entropy().sum()).backward()
    (yt.sum() + dt.entropy().sum()).backward()
    _close(la.grad, lt.grad, tol)
    _close(sa.grad, st.grad, tol)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        D.Independent(D.Normal(la, sa), 3)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_kl_divergence_matches_torch(dtype, tol):
    rng = np.random.default_rng(5)
    a = [rng.standard_normal(3).astype(dtype), rng.uniform(0.5, 2, 3).astype(dtype),
         rng.standard_normal(3).astype(dtype), rng.uniform(0.5, 2, 3).astype(dtype)]
    ours = D.kl_divergence(D.Normal(ag.tensor(a[0]), ag.tensor(a[1])), D.Normal(ag.tensor(a[2]), ag.tensor(a[3])))
    theirs = TD.kl_divergence(TD.Normal(torch.tensor(a[0]), torch.tensor(a[1])),
                              TD.Normal(torch.tensor(a[2]), torch.tensor(a[3])))
    _close(ours, theirs, tol)
    p, q = rng.standard_normal((2, 4)).astype(dtype), rng.standard_normal((2, 4)).astype(dtype)
    _close(D.kl_divergence(D.Categorical(logits=ag.tensor(p)), D.Categorical(logits=ag.tensor(q))),
           TD.kl_divergence(TD.Categorical(logits=torch.tensor(p)), TD.Categorical(logits=torch.tensor(q))), tol)
    ind = D.kl_divergence(D.Independent(D.Normal(ag.tensor(a[0]), ag.tensor(a[1])), 1),
                          D.Independent(D.Normal(ag.tensor(a[2]), ag.tensor(a[3])), 1))
    assert ind.item() == pytest.approx(float(theirs.sum()), rel=1e-5)
