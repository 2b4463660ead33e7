"""`kl_divergence(p, q)` for the pairs implemented here (Normal, Categorical, Independent)."""

from .categorical import Categorical
from .independent import Independent
from .normal import Normal
from .utils import sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL = {}


def register_kl(type_p, type_q):
    """Decorator registering `fn(p, q)` as KL(p || q) for that pair of distribution types."""
    def deco(fn):
        _KL[(type_p, type_q)] = fn
        return fn
    return deco


def kl_divergence(p, q):
    """KL(p || q), shape batch_shape."""
    for tp in type(p).__mro__:
        for tq in type(q).__mro__:
            fn = _KL.get((tp, tq))
            if fn is not None:
                return fn(p, q)
    raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                              f"{type(q).__name__}")


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    from ..ops.pointwise import where
    t = p.probs * (p.logits - q.logits)
    # torch's conventions: q = 0 where p > 0 gives inf; p = 0 contributes nothing.
    t = where(q.probs == 0, float("inf"), t)
    t = where(p.probs == 0, 0.0, t)
    return t.sum(-1)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independent distributions with different reinterpreted_batch_ndims")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


