"""L-BFGS (torch.optim.LBFGS semantics): limited-memory BFGS over all parameters as one flat
vector, with a fixed step or a strong-Wolfe line search (`line_search_fn="strong_wolfe"`).

`step(closure)` needs the closure (zero the grads, compute the loss, backward, return the loss);
it may call it several times per step. Directions, curvature pairs and counters persist in
`state[params[0]]` between steps, as in torch, so a step continues the previous one's history.
Arithmetic runs in the parameters' dtype on flat NumPy vectors.
"""
import numpy as np

from ..grad_mode import enable_grad
from ..tensor import Tensor, _wrap
from .optimizer import Optimizer

__all__ = ["LBFGS", "strong_wolfe"]


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic through (x1, f1, g1), (x2, f2, g2), clipped to `bounds` (default the
    interval); the bounds' midpoint when the cubic has no real minimiser."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc >= 0:
        d2 = np.sqrt(disc)
        if x1 <= x2:
            m = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            m = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return float(min(max(m, lo), hi))
    return (lo + hi) / 2.0


def strong_wolfe(evaluate, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25, first=None):
    """Step length t along d satisfying the strong Wolfe conditions (bracketing, then zoom).

    evaluate(x, t, d) -> (loss, flat grad) at x + t d. Returns (f_new, g_new, t, evaluations).
    first: (loss, flat grad) at x + t d when the caller has already evaluated it (not counted in
    the returned evaluations).
    """
    d_norm = float(np.abs(d).max())
    g = g.copy()
    if first is None:
        f_new, g_new = evaluate(x, t, d)
        evals = 1
    else:
        f_new, g_new = first
        evals = 0
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    it = 0
    bracket = bracket_f = bracket_g = bracket_gtd = None
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        lo, hi = t + 0.01 * (t - t_prev), t * 10
        t_old = t
        t = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(lo, hi))
        t_prev, f_prev, g_prev, gtd_prev = t_old, f_new, g_new.copy(), gtd_new
        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = float(g_new @ d)
        it += 1
    if it == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]
        bracket_gtd = [gtd, gtd_new]

    # zoom into the bracket
    insufficient = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and it < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        bmax, bmin = max(bracket), min(bracket)
        eps = 0.1 * (bmax - bmin)
        if min(bmax - t, t - bmin) < eps:
            if insufficient or t >= bmax or t <= bmin:
                t = bmax - eps if abs(t - bmax) < abs(t - bmin) else bmin + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = float(g_new @ d)
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new.copy(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new.copy(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """`LBFGS(params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
    history_size=100, line_search_fn=None)`; one parameter group only, as torch."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size, line_search_fn=line_search_fn)
        self._check(defaults)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    @classmethod
    def _check(cls, o):
        if not 0.0 <= o["lr"]:
            raise ValueError(f"Invalid learning rate: {o['lr']}")
        if o["line_search_fn"] not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")
        if int(o["max_iter"]) < 1 or int(o["history_size"]) < 1:
            raise ValueError("LBFGS: max_iter and history_size must be positive")

    # -- the flat vector ----------------------------------------------------------------------
    def _dtype(self):
        return self._params[0]._data.dtype

    def _gather_flat_grad(self):
        parts = []
        for p in self._params:
            g = p._grad
            parts.append(np.zeros(p._data.size, p._data.dtype) if g is None else g._data.reshape(-1))
        return np.concatenate(parts).astype(self._dtype(), copy=False)

    def _add_grad(self, t, d):
        off = 0
        for p in self._params:
            n = p._data.size
            p._data += (t * d[off:off + n]).reshape(p._data.shape).astype(p._data.dtype, copy=False)
            p._vc[0] += 1
            off += n

    def _clone_param(self):
        return [p._data.copy() for p in self._params]

    def _set_param(self, values):
        for p, v in zip(self._params, values):
            p._data[...] = v
            p._vc[0] += 1

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    # -- the step -----------------------------------------------------------------------------
    def step(self, closure=None):
        """Up to `max_iter` L-BFGS iterations; returns the loss of the first closure call."""
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure that re-evaluates the model and returns the loss")
        closure = enable_grad()(closure)
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if np.abs(flat_grad).max() <= tol_grad:
            return orig_loss

        un = _unwrap
        d, t = un(state.get("d")), state.get("t")
        old_dirs = [un(v) for v in state.get("old_dirs", [])]
        old_stps = [un(v) for v in state.get("old_stps", [])]
        ro = list(state.get("ro", []))
        H_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = un(state.get("prev_flat_grad")), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y @ s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(y @ y)
                # two-loop recursion: d = -H g
                al = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = float(old_stps[i] @ q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                r = q * H_diag
                for i in range(len(old_dirs)):
                    be_i = float(old_dirs[i] @ r) * ro[i]
                    r = r + (al[i] - be_i) * old_stps[i]
                d = r
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(np.abs(flat_grad).sum())) * lr
            else:
                t = lr
            gtd = float(flat_grad @ d)
            if gtd > -tol_change:
                break

            ls_evals = 0
            if line_search_fn is not None:
                x_init = self._clone_param()

                def evaluate(x, step, direction):
                    return self._directional_evaluate(closure, x, step, direction)
                loss, flat_grad, t, ls_evals = strong_wolfe(evaluate, x_init, t, d, loss, flat_grad, gtd)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tol_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tol_grad
                    ls_evals = 1
            current_evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tol_change:
                break
            if abs(loss - prev_loss) < tol_change:
                break

        w = _wrap_opt
        state["d"], state["t"] = w(d), t
        state["old_dirs"], state["old_stps"] = [w(v) for v in old_dirs], [w(v) for v in old_stps]
        state["ro"], state["H_diag"] = ro, H_diag
        state["prev_flat_grad"], state["prev_loss"] = w(prev_flat_grad), prev_loss
        return orig_loss


def _unwrap(v):
    return v._data if isinstance(v, Tensor) else v


def _wrap_opt(v):
    return None if v is None else _wrap(np.asarray(v))
