"""Attention layers: masked softmax, dot-product, additive, multi-head.

Shape legend for every comment and docstring in this module:
    B  batch size          L  number of queries
    S  number of keys      D  num_hiddens; h heads of size d = D // h

The layers know nothing of data, training or plotting.  Each keeps the
attention weights of its last call in ``attention_weights`` for plotting.
"""

import math
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "AdditiveAttention", "DotProductAttention", "MultiHeadAttention",
    "check_shape", "masked_softmax", "set_seed", "valid_mask",
]


def set_seed(seed):
    """Seed Python's, NumPy's and PyTorch's random generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def check_shape(tensor, shape):
    """Raise ``ValueError`` unless ``tensor.shape`` equals ``shape``."""
    if tuple(tensor.shape) != tuple(shape):
        raise ValueError(f"expected shape {tuple(shape)}, "
                         f"got {tuple(tensor.shape)}")


def _check_valid_lens(valid_lens, X):
    """Return ``valid_lens`` as a tensor after checking it against X."""
    if not torch.is_tensor(valid_lens):
        valid_lens = torch.as_tensor(valid_lens, device=X.device)
    if valid_lens.dtype == torch.bool or valid_lens.is_complex():
        raise TypeError("valid_lens must hold integers or floats, got "
                        f"dtype {valid_lens.dtype}")
    B = X.shape[0]
    if valid_lens.dim() == 1:
        expected = (B,)
    elif valid_lens.dim() == 2 and X.dim() >= 3:
        expected = (B, X.shape[-2])
    else:
        raise ValueError(
            f"valid_lens must have shape (B,) or (B, L); got "
            f"{tuple(valid_lens.shape)} for scores of shape "
            f"{tuple(X.shape)}")
    if tuple(valid_lens.shape) != expected:
        raise ValueError(
            f"valid_lens of shape {tuple(valid_lens.shape)} does not "
            f"match scores of shape {tuple(X.shape)}: expected "
            f"{expected} (batch{', queries' if len(expected) > 1 else ''})")
    if valid_lens.is_floating_point():
        if not torch.isfinite(valid_lens).all():
            raise ValueError(f"valid_lens must be finite, got {valid_lens}")
        if (valid_lens != valid_lens.round()).any():
            raise ValueError("valid_lens must be whole numbers, got "
                             f"{valid_lens}")
    if (valid_lens < 0).any():
        raise ValueError("valid_lens must be >= 0, got negative values "
                         f"{valid_lens[valid_lens < 0].tolist()}")
    return valid_lens.to(X.device)


def valid_mask(valid_lens, num_keys):
    """Boolean mask, True where a key may be attended to.

    Args:
        valid_lens: (B,) or (B, L) numbers of valid keys.
        num_keys: S.

    Returns:
        (B, 1, S) for 1-D ``valid_lens``, (B, L, S) for 2-D: the
        ``attn_mask`` convention of ``F.scaled_dot_product_attention``
        (True = attend); ``nn.MultiheadAttention``'s
        ``key_padding_mask`` is its negation.
    """
    valid_lens = torch.as_tensor(valid_lens)
    positions = torch.arange(num_keys, device=valid_lens.device)
    mask = positions < valid_lens[..., None]  # (B, S) or (B, L, S)
    return mask if valid_lens.dim() == 2 else mask[:, None, :]


def masked_softmax(X, valid_lens=None):
    """Softmax over the last axis that ignores keys past a valid length.

    Positions at or beyond the valid length get weight exactly 0.  A row
    whose valid length is 0 attends to nothing: its weights are all 0
    (not NaN, and not uniform over padding).  ``X`` is never modified.
    Float16 and bfloat16 scores are normalized in float32 and returned
    in their own dtype.

    Args:
        X: (B, ..., S) scores, at least 2-D, floating point.
        valid_lens: None (no mask), (B,) one length per example, or
            (B, L) one length per query (X must then be (B, ..., L, S)).
            Integers or whole-valued floats; lengths above S mean
            "all keys".

    Returns:
        Weights with the shape and dtype of ``X``.
    """
    if not torch.is_tensor(X) or not X.is_floating_point():
        raise TypeError("X must be a floating-point tensor, got "
                        f"{getattr(X, 'dtype', type(X).__name__)}")
    if X.dim() < 2:
        raise ValueError("X must have at least 2 dimensions (B, ..., S), "
                         f"got shape {tuple(X.shape)}")
    # Half precision overflows easily: normalize in float32.
    low_precision = X.dtype in (torch.float16, torch.bfloat16)
    scores = X.float() if low_precision else X
    if valid_lens is None:
        return F.softmax(scores, dim=-1).to(X.dtype)
    valid_lens = _check_valid_lens(valid_lens, X)
    mask = valid_mask(valid_lens, X.shape[-1])  # (B, 1 or L, S)
    # Broadcast over any axes between batch and queries (e.g. heads).
    mask = mask.view(mask.shape[:1] + (1,) * (X.dim() - 3)
                     + mask.shape[1:]) if X.dim() > 2 else mask[:, 0]
    # The smallest finite value, not -inf: a fully masked row then stays
    # finite (uniform), and the second fill sets it to exact zeros.
    fill = torch.finfo(scores.dtype).min
    weights = F.softmax(scores.masked_fill(~mask, fill), dim=-1)
    return weights.masked_fill(~mask, 0.0).to(X.dtype)


def _check_qkv(queries, keys, values):
    """Check the batch, key and feature sizes of an attention call."""
    for name, t in (("queries", queries), ("keys", keys),
                    ("values", values)):
        if t.dim() != 3:
            raise ValueError(f"{name} must be 3-D (B, T, features), got "
                             f"shape {tuple(t.shape)}")
    if not queries.shape[0] == keys.shape[0] == values.shape[0]:
        raise ValueError(
            "queries, keys and values must have the same batch size, got "
            f"{queries.shape[0]}, {keys.shape[0]} and {values.shape[0]}")
    if keys.shape[1] != values.shape[1]:
        raise ValueError(
            f"keys and values must have the same length S, got keys "
            f"{tuple(keys.shape)} and values {tuple(values.shape)}")


class DotProductAttention(nn.Module):
    """Scaled dot-product attention, softmax(Q K^T / sqrt(d)) V.

    Args:
        dropout: dropout probability on the attention weights.

    Shape:
        queries (B, L, d); keys (B, S, d); values (B, S, v);
        valid_lens (B,) or (B, L).  Returns (B, L, v).

    With ``need_weights=False`` the call uses PyTorch's fused
    ``F.scaled_dot_product_attention`` and keeps no weights.
    """

    def __init__(self, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.attention_weights = None

    def forward(self, queries, keys, values, valid_lens=None,
                need_weights=True):
        _check_qkv(queries, keys, values)
        if queries.shape[-1] != keys.shape[-1]:
            raise ValueError(
                "queries and keys must have the same feature size d, got "
                f"{tuple(queries.shape)} and {tuple(keys.shape)}")
        if not need_weights:
            self.attention_weights = None
            return self._fused(queries, keys, values, valid_lens)
        d = queries.shape[-1]
        scores = queries @ keys.transpose(1, 2) / math.sqrt(d)  # (B, L, S)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return self.dropout(self.attention_weights) @ values  # (B, L, v)

    def _fused(self, queries, keys, values, valid_lens):
        """The same attention through PyTorch's fused kernel."""
        p = self.dropout.p if self.training else 0.0
        if valid_lens is None:
            return F.scaled_dot_product_attention(
                queries.unsqueeze(1), keys.unsqueeze(1), values.unsqueeze(1),
                dropout_p=p).squeeze(1)
        scores_shape = queries.shape[:2] + keys.shape[1:2]  # (B, L, S)
        valid_lens = _check_valid_lens(valid_lens,
                                       queries.new_empty(scores_shape))
        mask = valid_mask(valid_lens, keys.shape[1])  # (B, 1 or L, S)
        # A query with no valid key attends to nothing and returns zeros;
        # let it see every key inside the kernel, then zero its output.
        empty = ~mask.any(dim=-1, keepdim=True)  # (B, 1 or L, 1)
        # PyTorch's CPU flash kernel needs 4-D inputs: add a head axis.
        out = F.scaled_dot_product_attention(
            queries.unsqueeze(1), keys.unsqueeze(1), values.unsqueeze(1),
            attn_mask=(mask | empty).unsqueeze(1), dropout_p=p)
        return out.squeeze(1).masked_fill(empty, 0.0)


class AdditiveAttention(nn.Module):
    """Additive (Bahdanau) attention, w_v^T tanh(W_q q + W_k k).

    Args:
        num_hiddens: H, the size of the hidden layer of the score MLP.
        dropout: dropout probability on the attention weights.
        query_size, key_size: sizes of queries and keys; None infers
            them on the first call (as in d2l).

    Shape:
        queries (B, L, q); keys (B, S, k); values (B, S, v);
        valid_lens (B,) or (B, L).  Returns (B, L, v).

    A decoder that attends to the same keys at every step calls
    ``precompute(keys, values)`` once and passes the result as
    ``memory``: the key projection is then not recomputed per step.
    """

    def __init__(self, num_hiddens, dropout=0.0, *, query_size=None,
                 key_size=None):
        super().__init__()
        self.W_k = _linear(key_size, num_hiddens)
        self.W_q = _linear(query_size, num_hiddens)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights = None

    def precompute(self, keys, values):
        """Project the keys once: returns (W_k keys (B, S, H), values)."""
        _check_qkv(keys, keys, values)
        return self.W_k(keys), values

    def forward(self, queries, keys, values, valid_lens=None, *,
                memory=None):
        if memory is None:
            memory = self.precompute(keys, values)
        projected_keys, values = memory  # (B, S, H), (B, S, v)
        _check_qkv(queries, projected_keys, values)
        q = self.W_q(queries)  # (B, L, H)
        # Every query meets every key: (B, L, 1, H) + (B, 1, S, H).
        features = torch.tanh(q.unsqueeze(2) + projected_keys.unsqueeze(1))
        scores = self.w_v(features).squeeze(-1)  # (B, L, S)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return self.dropout(self.attention_weights) @ values  # (B, L, v)


def _linear(in_features, out_features):
    """A bias-free projection; infers its input size when it is None."""
    if in_features is None:
        return nn.LazyLinear(out_features, bias=False)
    return nn.Linear(in_features, out_features, bias=False)


class MultiHeadAttention(nn.Module):
    """Multi-head attention: h scaled dot-product heads in parallel.

    Args:
        num_hiddens: D, the size of the projections and of the output.
        num_heads: h; must divide ``num_hiddens``.
        dropout: dropout probability on the attention weights.
        bias: whether the four projections have a bias.
        query_size, key_size, value_size: input sizes (default D).

    Shape:
        queries (B, L, q); keys (B, S, k); values (B, S, v);
        valid_lens (B,) or (B, L).  Returns (B, L, D).
        ``attention_weights`` is (B, h, L, S), one map per head.
    """

    def __init__(self, num_hiddens, num_heads, dropout=0.0, bias=False,
                 *, query_size=None, key_size=None, value_size=None):
        super().__init__()
        if num_heads < 1 or num_hiddens % num_heads:
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
        self.attention_weights = None

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

    def precompute(self, keys, values):
        """Project and split keys and values once: (B * h, S, d) each."""
        _check_qkv(keys, keys, values)
        return self.split_heads(self.W_k(keys)), \
            self.split_heads(self.W_v(values))

    def forward(self, queries, keys, values, valid_lens=None,
                need_weights=True, *, memory=None):
        if memory is None:
            memory = self.precompute(keys, values)
        K, V = memory  # (B * h, S, d) each
        B, L = queries.shape[:2]
        if K.shape[0] != B * self.num_heads:
            raise ValueError(
                f"queries have batch size {B} but keys have "
                f"{K.shape[0] // self.num_heads}")
        Q = self.split_heads(self.W_q(queries))  # (B * h, L, d)
        if valid_lens is not None:
            scores_shape = (B, L, K.shape[1])
            valid_lens = _check_valid_lens(
                valid_lens, queries.new_empty(scores_shape))
            # Every head of an example sees the same valid length.
            valid_lens = valid_lens.repeat_interleave(self.num_heads, 0)
        out = self.attention(Q, K, V, valid_lens, need_weights)
        weights = self.attention.attention_weights  # (B * h, L, S)
        self.attention_weights = None if weights is None else \
            weights.reshape(B, self.num_heads, L, -1)
        return self.W_o(self.merge_heads(out))  # (B, L, D)
