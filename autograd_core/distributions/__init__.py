"""`autograd_core.distributions`: Normal, Categorical, Independent and KL, with torch's API.

Sampling uses autograd_core's seeded RNG (`manual_seed`); `rsample` is reparameterised and
differentiable; `log_prob` of Normal and Categorical are single fused autograd nodes.
"""
from . import constraints  # noqa: F401
from .categorical import Categorical  # noqa: F401
from .distribution import Distribution  # noqa: F401
from .independent import Independent  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from .normal import Normal  # noqa: F401

__all__ = ["Distribution", "Normal", "Categorical", "Independent", "kl_divergence", "register_kl", "constraints"]
