"""Adam and AdamW (torch.optim.Adam / AdamW semantics and names)."""
import numpy as np

from ._kernels import ema_sq_, lerp_
from .optimizer import Optimizer

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam (Kingma & Ba): `Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    amsgrad=False, *, maximize=False, decoupled_weight_decay=False)`.

    State per parameter: `step` (0-d), `exp_avg`, `exp_avg_sq`, and `max_exp_avg_sq` with amsgrad.
    Weight decay is L2 (added to the gradient) unless `decoupled_weight_decay` (AdamW).
    """

    _uses_step = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False, decoupled_weight_decay=False):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
        self._check(defaults)
        super().__init__(params, defaults)

    @classmethod
    def _check(cls, o):
        lr, eps, betas, wd = o["lr"], o["eps"], o["betas"], o["weight_decay"]
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= wd:
            raise ValueError(f"Invalid weight_decay value: {wd}")

    def _param_names(self, group):
        return ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if group["amsgrad"] else ("exp_avg", "exp_avg_sq")

    def _needs_param(self, group):
        return group["weight_decay"] != 0 and not group["decoupled_weight_decay"]

    def _param_scale(self, group):
        if group["weight_decay"] != 0 and group["decoupled_weight_decay"]:
            return 1 - group["lr"] * group["weight_decay"]
        return None

    def _kernel(self, group, g, p, st, step, w):
        beta1, beta2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        if group["maximize"]:
            np.negative(g, out=g)
        if p is not None:  # L2 weight decay: grad + wd * param
            np.multiply(p, wd, out=w)
            g += w
        m, v = st["exp_avg"], st["exp_avg_sq"]
        lerp_(m, g, 1 - beta1, w)
        ema_sq_(v, g, beta2, w)
        step_size = lr / (1 - beta1 ** step)
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        if group["amsgrad"]:
            vmax = st["max_exp_avg_sq"]
            np.maximum(vmax, v, out=vmax)
            v = vmax
        denom = w
        np.sqrt(v, out=denom)
        denom /= bias_correction2_sqrt
        denom += eps
        # param.addcdiv_(exp_avg, denom, value=-step_size): param + (-step_size * exp_avg) / denom
        np.multiply(m, -step_size, out=g)
        g /= denom
        return g


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): the parameters are multiplied by
    `1 - lr * weight_decay` before the Adam update. Default `weight_decay=1e-2`."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize, decoupled_weight_decay=True)
