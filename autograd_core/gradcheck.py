"""gradcheck: analytic gradients (backward) against float64 central finite differences."""
import numpy as np

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck(raise_exception=True) when analytic and numerical Jacobians differ."""


def _flatten_outputs(out):
    from .tensor import Tensor
    if isinstance(out, Tensor):
        return [out]
    return [o for o in out if isinstance(o, Tensor)]


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, fast_mode=False, **_ignored):
    """Check d(func(*inputs))/d(inputs) computed by backward against central differences.

    Inputs that require grad should be float64 (as torch warns); every output element is
    back-propagated with a one-hot seed, giving the full analytic Jacobian. Returns True, or
    raises GradcheckError (or returns False with raise_exception=False) naming the first
    mismatching output/input pair with the worst element.
    """
    from .tensor import Tensor, _wrap
    from .autograd import grad as _grad
    from .grad_mode import no_grad

    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff_idx:
        raise ValueError("gradcheck expects at least one input tensor to require gradient")
    for i in diff_idx:
        if inputs[i]._data.dtype != np.float64:
            import warnings
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. "
                          "This check will likely fail if all the inputs are not of double precision.",
                          UserWarning, stacklevel=2)

    outs = _flatten_outputs(func(*inputs))
    out_vals = [o._data.copy() for o in outs]

    def evaluate():
        with no_grad():
            return [o._data.astype(np.float64).copy() for o in _flatten_outputs(func(*inputs))]

    # Numerical Jacobians, one column per input element.
    numerical = {}
    for i in diff_idx:
        x = inputs[i]._data
        cols = []
        flat = x.reshape(-1)  # a view: perturb in place, restore after
        for k in range(flat.size):
            orig = flat[k]
            flat[k] = orig + eps
            plus = evaluate()
            flat[k] = orig - eps
            minus = evaluate()
            flat[k] = orig
            cols.append([((p - m) / (2 * eps)).reshape(-1) for p, m in zip(plus, minus)])
        numerical[i] = cols

    # Analytic Jacobians, one row per output element.
    for oi, (o, val) in enumerate(zip(outs, out_vals)):
        if not o.requires_grad:
            for i in diff_idx:
                num = np.array([c[oi] for c in numerical[i]]) if numerical[i] else np.zeros((0, val.size))
                if num.size and np.max(np.abs(num)) > atol:
                    return _fail(raise_exception, f"output {oi} does not require grad but its numerical "
                                 f"gradient w.r.t. input {i} is non-zero")
            continue
        n_out = val.size
        diff_inputs = [inputs[i] for i in diff_idx]
        analytic = {i: np.zeros((n_out, inputs[i]._data.size)) for i in diff_idx}
        for r in range(n_out):
            seed = np.zeros(val.size, dtype=val.dtype)
            seed[r] = 1.0
            gs = _grad([o], diff_inputs, grad_outputs=[_wrap(seed.reshape(val.shape))], retain_graph=True,
                       allow_unused=True)
            for i, g in zip(diff_idx, gs):
                if g is not None:
                    if tuple(g.shape) != tuple(inputs[i]._data.shape):
                        return _fail(raise_exception, f"gradient for input {i} has shape {tuple(g.shape)}, "
                                     f"expected {tuple(inputs[i]._data.shape)}")
                    analytic[i][r] = g._data.reshape(-1)
        for i in diff_idx:
            num = np.array([c[oi] for c in numerical[i]]).T if numerical[i] else np.zeros((n_out, 0))
            ana = analytic[i]
            if num.shape != ana.shape:
                num = num.reshape(ana.shape)
            bad = np.abs(ana - num) > atol + rtol * np.abs(num)
            if np.any(bad):
                r, c = np.argwhere(bad)[0]
                return _fail(raise_exception,
                             f"Jacobian mismatch for output {oi} with respect to input {i},\n"
                             f"numerical:{num}\nanalytical:{ana}\n(first bad element [{r}, {c}]: "
                             f"numerical {num[r, c]!r} vs analytical {ana[r, c]!r})")
    return True


def _fail(raise_exception, msg):
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, gen_non_contig_grad_outputs=False,
                  raise_exception=True, nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
                  check_batched_grad=False, check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=None, **_ignored):
    """Check second derivatives: gradcheck of (inputs, grad_outputs) -> d(func)/d(inputs) . grad_outputs.

    The first-order gradients are computed with create_graph=True, so their own backward is the
    analytic second derivative that gradcheck compares with central differences. `grad_outputs`
    default to random float64 tensors (fixed seed) that require grad, as in torch, so the
    derivative with respect to them is checked too.
    """
    from .tensor import Tensor, _wrap
    from .autograd import grad as _grad

    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    outs = _flatten_outputs(func(*inputs))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(_wrap(rng.standard_normal(o._data.shape).astype(o._data.dtype)).requires_grad_(True)
                             for o in outs if o.requires_grad)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,)
    grad_outputs = tuple(grad_outputs)
    n_in = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def new_func(*args):
        from .grad_mode import enable_grad
        ins = args[:n_in]
        gos = args[n_in:]
        with enable_grad():  # gradcheck evaluates under no_grad; the first derivatives need a graph
            outputs = [o for o in _flatten_outputs(func(*ins)) if o.requires_grad]
            diff_in = [ins[i] for i in diff_idx]
            gs = _grad(outputs, diff_in, grad_outputs=list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(new_func, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol)
