"""Multi-head attention: h scaled dot-product heads in parallel.

Shape legend for every comment and docstring in this module:
    B  batch size          L  number of queries
    S  number of keys      D  num_hiddens; h heads of size d = D // h

The heads are folded into the batch, (B * h, T, d), and run through one
``d2lmini.attention.DotProductAttention``; the masks, ``precompute`` and
``memory`` work as for the layers of ``d2lmini.attention``.

With ``qk_norm=True`` each head scores by cosine similarity times a
learned scale (query-key normalisation): a score lies in [-g, g] for
the head's scale g, however large the projections grow.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from .attention import (
    AttentionMemory,
    DotProductAttention,
    _check_memory_call,
    _check_qkv,
    _keys_mask,
    _scores_mask,
)
from .utils import check_int

__all__ = ["QK_SCALE_INIT", "MultiHeadAttention"]

# The initial scale g of every head with qk_norm: at g = 5 the weights of
# two keys with cosines 1 and 0 are e^5 : 1, about 150 : 1.
QK_SCALE_INIT = 5.0


class MultiHeadAttention(nn.Module):
    """Multi-head attention: h scaled dot-product heads in parallel.

    Args:
        num_hiddens: D, the size of the projections and of the output.
        num_heads: h; must divide ``num_hiddens``.
        dropout: dropout probability on the attention weights.
        bias: whether the four projections have a bias.
        query_size, key_size, value_size: input sizes (default D).
        qk_norm: score ``g_h * cos(q, k)`` in each head h, with the
            queries and keys of the head scaled to unit length
            (``F.normalize``) and ``g_h`` a learned scale, the parameter
            ``qk_scale`` (h,), initially ``QK_SCALE_INIT``; instead of
            ``q . k / sqrt(d)``.  Off by default, as in
            ``nn.MultiheadAttention``.

    Shape:
        queries (B, L, q); keys (B, S, k); values (B, S, v);
        valid_lens (B,) or (B, L).  Returns (B, L, D).
        ``attention_weights`` is (B, h, L, S), one map per head.

    ``precompute(keys, values, valid_lens)``, ``memory`` and
    ``return_weights`` work as in ``AdditiveAttention``.
    """

    def __init__(self, num_hiddens, num_heads, dropout=0.0, bias=False,
                 *, query_size=None, key_size=None, value_size=None,
                 qk_norm=False):
        super().__init__()
        if not isinstance(qk_norm, bool):
            raise TypeError(f"qk_norm must be True or False, got "
                            f"{qk_norm!r} ({type(qk_norm).__name__})")
        check_int("num_hiddens", num_hiddens)
        check_int("num_heads", num_heads)
        if num_hiddens % num_heads:
            raise ValueError(
                f"num_heads ({num_heads}) must be a positive divisor of "
                f"num_hiddens ({num_hiddens}); try num_heads in "
                f"{[h for h in range(1, 17) if num_hiddens % h == 0]}")
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        D = num_hiddens
        self.W_q = nn.Linear(query_size or D, D, bias=bias)
        self.W_k = nn.Linear(key_size or D, D, bias=bias)
        self.W_v = nn.Linear(value_size or D, D, bias=bias)
        self.W_o = nn.Linear(D, D, bias=bias)
        self.qk_norm = qk_norm
        if qk_norm:
            self.qk_scale = nn.Parameter(
                torch.full((num_heads,), QK_SCALE_INIT))
        self.attention_weights = None

    def extra_repr(self):
        return f"num_heads={self.num_heads}, qk_norm={self.qk_norm}"

    def split_heads(self, X):
        """(B, T, D) -> (B * h, T, d): fold the heads into the batch."""
        B, T, D = X.shape
        X = X.reshape(B, T, self.num_heads, D // self.num_heads)
        return X.transpose(1, 2).reshape(B * self.num_heads, T, -1)

    def merge_heads(self, X):
        """(B * h, T, d) -> (B, T, D): the inverse of ``split_heads``."""
        BH, T, d = X.shape
        X = X.reshape(BH // self.num_heads, self.num_heads, T, d)
        # Permute before the final reshape: reshaping the un-permuted
        # tensor keeps every shape right but mixes query positions.
        return X.transpose(1, 2).reshape(BH // self.num_heads, T, -1)

    def split_mask(self, mask):
        """(B, 1 or L, S) -> (B * h, 1 or L, S), like ``split_heads``."""
        # Every head of an example sees the same valid length.
        return None if mask is None else \
            mask.repeat_interleave(self.num_heads, 0)

    def precompute(self, keys, values, valid_lens=None):
        """Project and split keys and values, build the mask: keys,
        values (B * h, S, d), mask (B * h, 1 or L, S) or None."""
        _check_qkv(keys, keys, values)
        K = self.split_heads(self.W_k(keys))
        if self.qk_norm:
            K = F.normalize(K, dim=-1)
        return AttentionMemory(K,
                               self.split_heads(self.W_v(values)),
                               self.split_mask(_keys_mask(valid_lens, keys)))

    def forward(self, queries, keys, values, valid_lens=None,
                need_weights=True, *, memory=None, return_weights=False):
        if memory is None:
            _check_qkv(queries, keys, values)
            memory = self.precompute(keys, values)
        else:
            _check_memory_call(queries, valid_lens)
        K, V, mask = memory  # (B * h, S, d) each, (B * h, 1 or L, S)
        B, L = queries.shape[:2]
        if K.shape[0] != B * self.num_heads:
            raise ValueError(
                f"queries have batch size {B} but keys have "
                f"{K.shape[0] // self.num_heads}")
        Q = self.split_heads(self.W_q(queries))  # (B * h, L, d)
        if self.qk_norm:  # unit queries times g_h * sqrt(d): the scores
            # DotProductAttention divides by sqrt(d) are g_h * cos(q, k)
            d = Q.shape[-1]
            Q = (F.normalize(Q, dim=-1).reshape(B, self.num_heads, L, d)
                 * self.qk_scale.view(-1, 1, 1) * math.sqrt(d)
                 ).reshape(Q.shape)
        if valid_lens is not None:  # checked against the scores (B, L, S)
            mask = self.split_mask(_scores_mask(
                valid_lens, None, (B, L, K.shape[1]), queries.device))
        out, weights = self.attention(Q, K, V, None, need_weights,
                                      mask=mask, return_weights=True)
        if weights is not None:  # (B * h, L, S) -> (B, h, L, S)
            weights = weights.reshape(B, self.num_heads, L, -1)
        self.attention_weights = weights
        out = self.W_o(self.merge_heads(out))  # (B, L, D)
        return (out, weights) if return_weights else out
