"""Attention layers: masked softmax, dot-product and additive attention.

Shape legend for every comment and docstring in this module:
    B  batch size          L  number of queries
    S  number of keys      D  num_hiddens; h heads of size d = D // h

The layers know nothing of data, training or plotting.  Each keeps the
attention weights of its last call in ``attention_weights`` for plotting;
a caller that needs the weights of its own call, while other threads
may call the same layer, passes ``return_weights=True`` and gets
``(output, weights)``.
A decoder that attends to the same keys at every step builds their
projections and their mask once, with ``precompute(keys, values,
valid_lens)``, and passes the result to each step as ``memory``.
``MultiHeadAttention``, built on ``DotProductAttention``, is in
``d2lmini.multihead``, which imports this module (not the other way).
"""

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .utils import check_int

__all__ = [
    "AdditiveAttention", "AttentionMemory", "DotProductAttention",
    "masked_softmax", "valid_mask",
]


def _check_valid_lens(valid_lens, shape, device, *, at_most_s=False):
    """Return ``valid_lens`` as a tensor on ``device`` after checking it
    against scores of shape ``(B, ..., L, S)``; with ``at_most_s``, a
    length above S is an error too (otherwise it means "all keys")."""
    if not torch.is_tensor(valid_lens):
        valid_lens = torch.as_tensor(valid_lens, device=device)
    if valid_lens.dtype == torch.bool or valid_lens.is_complex():
        raise TypeError("valid_lens must hold integers or floats, got "
                        f"dtype {valid_lens.dtype}")
    shape = tuple(shape)
    if valid_lens.dim() == 1:
        expected = shape[:1]
    elif valid_lens.dim() == 2 and len(shape) >= 3:
        expected = (shape[0], shape[-2])
    else:
        raise ValueError(
            f"valid_lens must have shape (B,) or (B, L); got "
            f"{tuple(valid_lens.shape)} for scores of shape {shape}")
    if tuple(valid_lens.shape) != expected:
        raise ValueError(
            f"valid_lens of shape {tuple(valid_lens.shape)} does not "
            f"match scores of shape {shape}: expected "
            f"{expected} (batch{', queries' if len(expected) > 1 else ''})")
    if torch.compiler.is_compiling():
        # Checking the values reads them on the host, which a compiled
        # graph cannot do; the shapes above are checked all the same.
        return valid_lens.to(device)
    if valid_lens.is_floating_point():
        if not torch.isfinite(valid_lens).all():
            raise ValueError(f"valid_lens must be finite, got {valid_lens}")
        if (valid_lens != valid_lens.round()).any():
            raise ValueError("valid_lens must be whole numbers, got "
                             f"{valid_lens}")
    if (valid_lens < 0).any():
        raise ValueError("valid_lens must be >= 0, got negative values "
                         f"{valid_lens[valid_lens < 0].tolist()}")
    if at_most_s and (valid_lens > shape[-1]).any():
        raise ValueError(
            f"valid_lens must be at most S = {shape[-1]}, the number of "
            f"keys, got {valid_lens[valid_lens > shape[-1]].tolist()}: "
            f"give each sequence's own length (padding excluded)")
    return valid_lens.to(device)


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
    if valid_lens.dim() not in (1, 2):
        raise ValueError("valid_lens must have shape (B,) or (B, L), got "
                         f"{tuple(valid_lens.shape)}")
    positions = torch.arange(num_keys, device=valid_lens.device)
    mask = positions < valid_lens[..., None]  # (B, S) or (B, L, S)
    return mask if valid_lens.dim() == 2 else mask[:, None, :]


def _scores_mask(valid_lens, mask, shape, device):
    """The (B, 1 or L, S) mask for scores of ``shape`` (B, ..., L, S),
    from ``valid_lens`` or a given ``mask`` (checked); None if neither."""
    if mask is None:
        if valid_lens is None:
            return None
        valid_lens = _check_valid_lens(valid_lens, shape, device)
        return valid_mask(valid_lens, shape[-1])
    if valid_lens is not None:
        raise ValueError("give valid_lens or mask, not both")
    if not torch.is_tensor(mask) or mask.dtype != torch.bool:
        raise TypeError("mask must be a boolean tensor (True = attend), "
                        f"got {getattr(mask, 'dtype', type(mask).__name__)}")
    L = shape[-2] if len(shape) >= 3 else 1
    if mask.dim() != 3 or mask.shape[0] != shape[0] \
            or mask.shape[1] not in (1, L) or mask.shape[2] != shape[-1]:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not match scores of "
            f"shape {tuple(shape)}: expected (B, 1 or L, S) = "
            f"({shape[0]}, 1 or {L}, {shape[-1]})")
    return mask.to(device)


def masked_softmax(X, valid_lens=None, *, mask=None):
    """Softmax over the last axis that ignores keys past a valid length.

    Positions at or beyond the valid length get weight exactly 0; the
    valid positions get the softmax of their own scores, however small
    these are (the mask goes by position, not by a fill value).  A row
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
        mask: instead of ``valid_lens``, a ready boolean mask (B, 1 or
            L, S), True = attend, as ``valid_mask`` builds it.

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
    mask = _scores_mask(valid_lens, mask, X.shape, X.device)
    if mask is None:
        return F.softmax(scores, dim=-1).to(X.dtype)
    # Broadcast over any axes between batch and queries (e.g. heads).
    mask = mask.view(mask.shape[:1] + (1,) * (X.dim() - 3)
                     + mask.shape[1:]) if X.dim() > 2 else mask[:, 0]
    # Masked keys get the dtype's lowest value and valid scores are kept
    # above half of it, so exp gives the masked keys exactly 0 whatever
    # the valid scores are (a valid score equal to a plain fill would
    # share its weight with them), and no inf or nan arises on the way.
    # A row without a valid key comes out uniform: the second fill sets
    # it to exact zeros, which also gives its scores a zero gradient.
    # The softmax itself never branches on the scores' values: a nan in
    # one row cannot change what another row gets.  (Checking valid_lens
    # above does look at values, (valid_lens < 0).any(), and on a GPU
    # that check waits for the device; pass a mask to skip it.)
    low = torch.finfo(scores.dtype).min
    weights = F.softmax(torch.where(mask, scores.clamp_min(low / 2), low),
                        dim=-1)
    weights = weights.masked_fill(~mask, 0.0)
    return weights.to(X.dtype)


class AttentionMemory(NamedTuple):
    """What ``precompute`` returns: keys and values as the scores use
    them, and the (B, 1 or L, S) mask of its ``valid_lens`` or None;
    each with the batch outermost on axis 0 (multi-head: B * h)."""

    keys: torch.Tensor
    values: torch.Tensor
    mask: torch.Tensor | None


def _keys_mask(valid_lens, keys):
    """The mask of the ``valid_lens`` given to ``precompute``, or None."""
    if valid_lens is None:
        return None
    valid_lens = torch.as_tensor(valid_lens, device=keys.device)
    L = valid_lens.shape[1] if valid_lens.dim() == 2 else 1
    return _scores_mask(valid_lens, None, (len(keys), L, keys.shape[1]),
                        keys.device)  # (B, 1 or L, S)


def _check_memory_call(queries, valid_lens):
    """Raise unless a call with ``memory`` has 3-D queries, no lengths."""
    if valid_lens is not None:
        raise ValueError("valid_lens cannot be given with memory: give "
                         "them to precompute(keys, values, valid_lens), "
                         "which builds the mask once")
    if queries.dim() != 3:
        raise ValueError("queries must be 3-D (B, L, features), got "
                         f"shape {tuple(queries.shape)}")


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
        valid_lens (B,) or (B, L), or instead ``mask`` (B, 1 or L, S)
        as ``masked_softmax`` takes it.  Returns (B, L, v).

    With ``need_weights=False`` the call uses PyTorch's fused
    ``F.scaled_dot_product_attention`` and keeps no weights.  With
    ``return_weights=True`` it returns ``(output, weights)``, this
    call's own (B, L, S) weights (None when fused).
    """

    def __init__(self, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.attention_weights = None

    def forward(self, queries, keys, values, valid_lens=None,
                need_weights=True, *, mask=None, return_weights=False):
        _check_qkv(queries, keys, values)
        if queries.shape[-1] != keys.shape[-1]:
            raise ValueError(
                "queries and keys must have the same feature size d, got "
                f"{tuple(queries.shape)} and {tuple(keys.shape)}")
        if not need_weights:
            out = self._fused(queries, keys, values, valid_lens, mask)
            weights = None
        else:
            d = queries.shape[-1]
            # Divide the queries (B, L, d) or the scores (B, L, S) by
            # sqrt(d), whichever holds fewer numbers.
            if d < keys.shape[1]:
                scores = (queries / math.sqrt(d)) @ keys.transpose(1, 2)
            else:
                scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
            weights = masked_softmax(scores, valid_lens, mask=mask)
            out = self.dropout(weights) @ values  # (B, L, v)
        self.attention_weights = weights
        return (out, weights) if return_weights else out

    def _fused(self, queries, keys, values, valid_lens, mask):
        """The same attention through PyTorch's fused kernel."""
        p = self.dropout.p if self.training else 0.0
        scores_shape = queries.shape[:2] + keys.shape[1:2]  # (B, L, S)
        mask = _scores_mask(valid_lens, mask, scores_shape, queries.device)
        if mask is None:
            return F.scaled_dot_product_attention(
                queries.unsqueeze(1), keys.unsqueeze(1), values.unsqueeze(1),
                dropout_p=p).squeeze(1)
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
    ``precompute(keys, values, valid_lens)`` once and passes the result
    as ``memory`` (and no ``valid_lens``): the key projection and the
    mask are then not rebuilt per step.  ``return_weights=True``
    returns ``(output, weights)``, this call's own (B, L, S) weights.
    """

    def __init__(self, num_hiddens, dropout=0.0, *, query_size=None,
                 key_size=None):
        super().__init__()
        check_int("num_hiddens", num_hiddens)
        self.W_k = _linear(key_size, num_hiddens)
        self.W_q = _linear(query_size, num_hiddens)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights = None

    def precompute(self, keys, values, valid_lens=None):
        """Project the keys, build the mask: ``AttentionMemory(W_k keys
        (B, S, H), values (B, S, v), mask (B, 1 or L, S) or None)``."""
        _check_qkv(keys, keys, values)
        return AttentionMemory(self.W_k(keys), values,
                               _keys_mask(valid_lens, keys))

    def forward(self, queries, keys, values, valid_lens=None, *,
                memory=None, return_weights=False):
        if memory is None:
            memory = self.precompute(keys, values)
        else:
            _check_memory_call(queries, valid_lens)
        projected_keys, values, mask = memory  # (B, S, H), (B, S, v)
        _check_qkv(queries, projected_keys, values)
        q = self.W_q(queries)  # (B, L, H)
        # Every query meets every key: (B, L, 1, H) + (B, 1, S, H).
        features = torch.tanh(q.unsqueeze(2) + projected_keys.unsqueeze(1))
        scores = self.w_v(features).squeeze(-1)  # (B, L, S)
        weights = masked_softmax(scores, valid_lens, mask=mask)
        self.attention_weights = weights
        out = self.dropout(weights) @ values  # (B, L, v)
        return (out, weights) if return_weights else out


def _linear(in_features, out_features):
    """A bias-free projection; infers its input size when it is None."""
    if in_features is None:
        return nn.LazyLinear(out_features, bias=False)
    return nn.Linear(in_features, out_features, bias=False)
