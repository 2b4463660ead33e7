"""Adadelta (torch.optim.Adadelta semantics and state names)."""
import numpy as np

from .optimizer import Optimizer

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """`Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, *, maximize=False)`.

    State per parameter: `step`, `square_avg` (running mean of g^2) and `acc_delta` (running mean
    of the squared updates); the update is sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g.
    """

    _param_state = ("square_avg", "acc_delta")
    _uses_step = True

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        self._check(defaults)
        super().__init__(params, defaults)

    @classmethod
    def _check(cls, o):
        if not 0.0 <= o["lr"]:
            raise ValueError(f"Invalid learning rate: {o['lr']}")
        if not 0.0 <= o["rho"] <= 1.0:
            raise ValueError(f"Invalid rho value: {o['rho']}")
        if not 0.0 <= o["eps"]:
            raise ValueError(f"Invalid epsilon value: {o['eps']}")
        if not 0.0 <= o["weight_decay"]:
            raise ValueError(f"Invalid weight_decay value: {o['weight_decay']}")
        if o.get("differentiable"):
            raise ValueError("Adadelta(differentiable=True) is not supported by autograd_core")

    def _kernel(self, group, g, p, st, step, w):
        rho, eps, lr = group["rho"], group["eps"], group["lr"]
        if group["maximize"]:
            np.negative(g, out=g)
        if p is not None:
            np.multiply(p, group["weight_decay"], out=w)
            g += w
        sq, acc = st["square_avg"], st["acc_delta"]
        sq *= rho
        np.multiply(g, g, out=w)
        w *= 1 - rho
        sq += w
        np.add(sq, eps, out=w)
        np.sqrt(w, out=w)  # std
        delta = np.add(acc, eps)
        np.sqrt(delta, out=delta)
        delta /= w
        delta *= g
        acc *= rho
        np.multiply(delta, delta, out=w)
        w *= 1 - rho
        acc += w
        delta *= -lr
        return delta
