"""Stochastic gradient descent with momentum (torch.optim.SGD semantics and names)."""
import numpy as np

from .optimizer import Optimizer

__all__ = ["SGD"]


class SGD(Optimizer):
    """`SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False)`.

    With momentum, `state[p]["momentum_buffer"]` starts as a copy of the first gradient (after
    weight decay) and then follows `buf = momentum * buf + (1 - dampening) * grad`; nesterov
    steps along `grad + momentum * buf`.
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        self._check(defaults)
        super().__init__(params, defaults)

    @classmethod
    def _check(cls, o):
        if o["lr"] < 0.0:
            raise ValueError(f"Invalid learning rate: {o['lr']}")
        if o["momentum"] < 0.0:
            raise ValueError(f"Invalid momentum value: {o['momentum']}")
        if o["weight_decay"] < 0.0:
            raise ValueError(f"Invalid weight_decay value: {o['weight_decay']}")
        if o["nesterov"] and (o["momentum"] <= 0 or o["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def _kernel(self, group, g, p, st, step, w):
        momentum, lr = group["momentum"], group["lr"]
        if group["maximize"]:
            np.negative(g, out=g)
        if p is not None:
            np.multiply(p, group["weight_decay"], out=w)
            g += w
        if momentum != 0:
            buf = st.get("momentum_buffer")
            if buf is None:
                st["momentum_buffer"] = buf = g.copy()
            else:
                buf *= momentum
                if group["dampening"] == 0:
                    buf += g  # (1 - 0) * g is g exactly: one pass fewer
                else:
                    np.multiply(g, 1 - group["dampening"], out=w)
                    buf += w
            if group["nesterov"]:
                np.multiply(buf, momentum, out=w)
                g += w
            else:
                g = buf
        np.multiply(g, -lr, out=w)
        return w
