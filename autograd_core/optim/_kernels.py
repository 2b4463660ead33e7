"""In-place NumPy building blocks shared by the optimiser kernels, in torch's rounding order."""
import numpy as np


def lerp_(a, end, weight, w):
    """a.lerp_(end, weight) as ATen computes it; `w` is scratch (same shape)."""
    np.subtract(end, a, out=w)
    if abs(weight) < 0.5:
        w *= weight
        a += w
    else:
        w *= 1 - weight
        np.subtract(end, w, out=a)


def ema_sq_(v, g, beta, w):
    """v.mul_(beta).addcmul_(g, g, value=1 - beta); `w` is scratch."""
    v *= beta
    np.multiply(g, 1 - beta, out=w)
    w *= g
    v += w
