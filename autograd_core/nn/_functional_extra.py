"""Functional ops real programs use beyond the CNN/loss kernels: `embedding`, `pixel_shuffle`,
`pixel_unshuffle`, `scaled_dot_product_attention`, `multi_head_attention_forward`.

Attention is composed of differentiable tensor ops (matmul, softmax, masked_fill, dropout), so
its gradients are the engine's; `embedding` has its own node (torch's `EmbeddingBackward0`).
"""
import math
import warnings

import numpy as np

from .. import grad_mode as _gm
from ..function import Node
from ..ops._base import node1
from ..tensor import Tensor, _wrap

__all__ = ["embedding", "pixel_shuffle", "pixel_unshuffle", "scaled_dot_product_attention",
           "multi_head_attention_forward"]

_gs = _gm._state


# -- embedding ----------------------------------------------------------------------------------
class EmbeddingBackward0(Node):
    __slots__ = ("num", "padding_idx", "scale_by_freq")

    def backward(self, g):
        idx = self.saved
        flat = idx.reshape(-1)
        gr = g.reshape(flat.size, -1)
        if self.scale_by_freq:
            counts = np.bincount(flat, minlength=self.num)
            gr = gr / counts[flat][:, None]
        gw = np.zeros((self.num, gr.shape[1]), dtype=g.dtype)
        np.add.at(gw, flat, gr)
        if self.padding_idx is not None:
            gw[self.padding_idx] = 0
        return (gw,)


def _norm_padding_idx(padding_idx, num):
    if padding_idx is None:
        return None
    p = int(padding_idx)
    if p >= 0:
        if p >= num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        return p
    if p < -num:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return p + num


def _renorm_(weight, idx, max_norm, norm_type):
    """torch's embedding_renorm_: rows used by `idx` with norm > max_norm are scaled down in place."""
    w = weight._data
    rows = np.unique(idx)
    norms = np.linalg.norm(w[rows], ord=norm_type, axis=1) if norm_type not in (np.inf,) else \
        np.abs(w[rows]).max(axis=1)
    big = norms > max_norm
    if np.any(big):
        scale = max_norm / (norms[big] + 1e-7)
        w[rows[big]] *= scale[:, None].astype(w.dtype)
        weight._vc[0] += 1


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,  # noqa: A002
              sparse=False):
    """Rows of `weight` (num_embeddings, dim) at the integer indices `input` (any shape)."""
    if not isinstance(input, Tensor) or input._data.dtype.kind not in "iu":
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           "Long, Int; but got " + (str(input.dtype) if isinstance(input, Tensor) else
                                                    type(input).__name__) + " instead (while checking arguments "
                           "for embedding)")
    w = weight._data
    if w.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if sparse:
        raise RuntimeError("sparse gradients are not supported by autograd_core: use sparse=False")
    idx = input._data.astype(np.int64, copy=False)
    num = w.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= num):
        raise IndexError("index out of range in self")
    pad = _norm_padding_idx(padding_idx, num)
    if max_norm is not None:
        _renorm_(weight, idx, float(max_norm), float(norm_type))
        w = weight._data
    out = w[idx]
    if weight._rg and _gs.enabled:
        n = node1(EmbeddingBackward0, weight)
        n.saved = idx
        n.num = num
        n.padding_idx = pad
        n.scale_by_freq = bool(scale_grad_by_freq)
        return _wrap(out, n)
    return _wrap(out)


# -- pixel shuffle ------------------------------------------------------------------------------
def pixel_shuffle(input, upscale_factor):  # noqa: A002
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    r = int(upscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                           f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    oc = c // (r * r)
    nl = len(lead)
    x = input.reshape(*lead, oc, r, r, h, w)
    perm = list(range(nl)) + [nl, nl + 3, nl + 1, nl + 4, nl + 2]
    return x.permute(*perm).reshape(*lead, oc, h * r, w * r)


def pixel_unshuffle(input, downscale_factor):  # noqa: A002
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    r = int(downscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but "
                           f"got {h}x{w} and {r}")
    nl = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    perm = list(range(nl)) + [nl, nl + 2, nl + 4, nl + 1, nl + 3]
    return x.permute(*perm).reshape(*lead, c * r * r, h // r, w // r)


# -- attention ----------------------------------------------------------------------------------
def _safe_softmax(scores):
    """softmax over the last dim; rows that are -inf everywhere give zeros (torch's math SDPA)."""
    from ..ops import reduction as _red
    dead = np.all(np.isneginf(scores._data), axis=-1, keepdims=True)
    if not dead.any():
        return _red.softmax(scores, -1)
    dead_t = _wrap(np.broadcast_to(dead, scores._data.shape))
    return _red.softmax(scores.masked_fill(dead_t, 0.0), -1).masked_fill(dead_t, 0.0)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q k^T * scale + mask) v over the last two dims, as torch's math implementation.

    attn_mask: bool (True = may attend) or float (added), broadcast to (..., L, S); is_causal uses
    the lower-triangular (top-left) mask instead (not both, as torch); dropout_p drops attention weights whenever > 0 (the
    function has no training flag, as in torch); scale defaults to 1/sqrt(E). Rows with nothing
    to attend to give zeros.
    """
    from ..ops import pointwise as _pw
    from ._functional_dropout import dropout
    L, E = query.shape[-2], query.shape[-1]
    S = key.shape[-2]
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        hq, hk = query.shape[-3], key.shape[-3]
        if hq % hk:
            raise RuntimeError(f"enable_gqa: the number of query heads ({hq}) must be a multiple of the number of "
                               f"key/value heads ({hk})")
        rep = hq // hk

        def _rep(t):
            lead = t.shape[:-3]
            return t.unsqueeze(-3).expand(*lead, hk, rep, t.shape[-2], t.shape[-1]).reshape(
                *lead, hq, t.shape[-2], t.shape[-1])
        key, value = _rep(key), _rep(value)
    s = 1.0 / math.sqrt(E) if scale is None else float(scale)
    scores = (query @ key.transpose(-2, -1)) * s
    if is_causal:
        if attn_mask is not None:
            # torch raises this too (its math kernel, when it runs with autograd)
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                               "is_causal=True")
        attn_mask = _wrap(np.tril(np.ones((L, S), dtype=bool)))
    if attn_mask is not None:
        if attn_mask._data.dtype == np.bool_:
            scores = scores.masked_fill(_pw.logical_not(attn_mask), float("-inf"))
        else:
            scores = scores + attn_mask
    attn = _safe_softmax(scores)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True)
    return attn @ value


def _canonical_mask(mask, name, target_dtype):
    """bool masks (True = masked out) -> float masks with -inf; float masks pass; None stays None."""
    if mask is None:
        return None
    d = mask._data
    if d.dtype == np.bool_:
        return _wrap(np.where(d, -np.inf, 0.0).astype(target_dtype))
    if d.dtype.kind != "f":
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """torch.nn.functional.multi_head_attention_forward on (L, N, E) / unbatched (L, E) inputs.

    Masks: bool True = not allowed (the opposite of scaled_dot_product_attention's), float added.
    Returns (output, weights or None); weights are averaged over heads unless
    `average_attn_weights=False`.
    """
    from ..ops import reduction as _red
    from ._functional_dropout import dropout
    from .functional import linear
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k/static_v are not supported by "
                                  "autograd_core")
    unbatched = query.dim() == 2
    if unbatched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if key.shape[:2] != value.shape[:2]:
        raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)}")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    dt = query._data.dtype
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", dt)
    sdpa_causal = False
    if is_causal and key_padding_mask is None and not need_weights and bias_k is None and not add_zero_attn:
        attn_mask = None  # torch trusts the hint: the mask is the causal one
        sdpa_causal = True
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", dt)

    # in-projection
    if not use_separate_proj_weight:
        b = [None] * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
        w = in_proj_weight.chunk(3)
        q, k, v = linear(query, w[0], b[0]), linear(key, w[1], b[1]), linear(value, w[2], b[2])
    else:
        b = [None] * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = linear(query, q_proj_weight, b[0]), linear(key, k_proj_weight, b[1]), linear(value, v_proj_weight,
                                                                                              b[2])
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
    from ..ops.shape import cat
    from ..creation import zeros
    if bias_k is not None and bias_v is not None:
        k = cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = cat([v, bias_v.expand(1, bsz, embed_dim)])
        if attn_mask is not None:
            attn_mask = cat([attn_mask, _wrap(np.zeros(attn_mask.shape[:-1] + (1,), dt))], -1)
        if key_padding_mask is not None:
            key_padding_mask = cat([key_padding_mask, _wrap(np.zeros((bsz, 1), dt))], -1)
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must both be given or both be None")
    # (L, N, E) -> (N*H, L, hd)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if add_zero_attn:
        k = cat([k, zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype)], 1)
        v = cat([v, zeros(bsz * num_heads, 1, head_dim, dtype=v.dtype)], 1)
        if attn_mask is not None:
            attn_mask = cat([attn_mask, _wrap(np.zeros(attn_mask.shape[:-1] + (1,), dt))], -1)
        if key_padding_mask is not None:
            key_padding_mask = cat([key_padding_mask, _wrap(np.zeros((bsz, 1), dt))], -1)
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len).reshape(
            bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        scores = (q * math.sqrt(1.0 / head_dim)) @ k.transpose(-2, -1)
        if attn_mask is not None:
            scores = scores + attn_mask
        w = _red.softmax(scores, -1)
        if dropout_p > 0.0:
            w = dropout(w, dropout_p)
        out = w @ v
        out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
        w = w.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            w = w.mean(1)
        if unbatched:
            out, w = out.squeeze(1), w.squeeze(0)
        return out, w
    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, sdpa_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
    if unbatched:
        out = out.squeeze(1)
    return out, None


def _warn_dropout2d_dim(ndim):
    if ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {ndim}-D input to dropout2d, which is deprecated and will result in "
                      f"an error in a future release. To retain the behavior and silence this warning, please use "
                      f"dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      f"spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      f"inputs).", UserWarning, stacklevel=3)
