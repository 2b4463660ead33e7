"""RMSprop (torch.optim.RMSprop semantics and names)."""
import numpy as np

from ._kernels import ema_sq_, lerp_
from .optimizer import Optimizer

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """`RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
    maximize=False)`.

    State per parameter: `step`, `square_avg`, `momentum_buffer` (momentum > 0) and `grad_avg`
    (centered: the square average is centred by the mean gradient's square).
    """

    _uses_step = True

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
                 maximize=False):
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, maximize=maximize)
        self._check(defaults)
        super().__init__(params, defaults)

    @classmethod
    def _check(cls, o):
        if not 0.0 <= o["lr"]:
            raise ValueError(f"Invalid learning rate: {o['lr']}")
        if not 0.0 <= o["eps"]:
            raise ValueError(f"Invalid epsilon value: {o['eps']}")
        if not 0.0 <= o["momentum"]:
            raise ValueError(f"Invalid momentum value: {o['momentum']}")
        if not 0.0 <= o["weight_decay"]:
            raise ValueError(f"Invalid weight_decay value: {o['weight_decay']}")
        if not 0.0 <= o["alpha"]:
            raise ValueError(f"Invalid alpha value: {o['alpha']}")

    def _param_names(self, group):
        names = ["square_avg"]
        if group["momentum"] > 0:
            names.append("momentum_buffer")
        if group["centered"]:
            names.append("grad_avg")
        return names

    def _kernel(self, group, g, p, st, step, w):
        alpha, eps, lr, momentum = group["alpha"], group["eps"], group["lr"], group["momentum"]
        if group["maximize"]:
            np.negative(g, out=g)
        if p is not None:
            np.multiply(p, group["weight_decay"], out=w)
            g += w
        sq = st["square_avg"]
        ema_sq_(sq, g, alpha, w)
        avg = w
        if group["centered"]:
            ga = st["grad_avg"]
            lerp_(ga, g, 1 - alpha, w)
            # square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
            np.negative(ga, out=avg)
            avg *= ga
            avg += sq
            np.sqrt(avg, out=avg)
        else:
            np.sqrt(sq, out=avg)
        avg += eps
        if momentum > 0:
            buf = st["momentum_buffer"]
            buf *= momentum
            g /= avg
            buf += g
            np.multiply(buf, -lr, out=w)
            return w
        g *= -lr
        g /= avg
        return g
