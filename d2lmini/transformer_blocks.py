"""The Transformer's blocks: positional encoding, the position-wise
network, add & norm, and the encoder and decoder blocks.

Post-norm blocks as in Vaswani et al. (2017) and PyTorch's
``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` with
``norm_first=False``: each sublayer is followed by a residual connection
and layer normalization, and ``copy_from_pytorch`` gives a block the
weights of PyTorch's layer, so that tests compare the two.  Attention is
``d2lmini.multihead``'s ``MultiHeadAttention`` (with biases, as
PyTorch's); padding is given by valid lengths, and the decoder's causal
mask is the 2-D ``valid_lens`` of ``masked_softmax`` (query t sees keys
0..t), not a second mechanism.  A decoder block keeps the projected keys
and values of the earlier steps (a key/value cache) for decoding one
token at a time.  ``d2lmini.transformer`` stacks these blocks into the
encoder and the decoder of a translation model.

Shape legend for every comment and docstring in this module:
    B  batch size      T  target steps      S  source steps
    D  num_hiddens     F  ffn_num_hiddens
"""

import torch
from torch import nn

from .attention import AttentionMemory, valid_mask
from .multihead import MultiHeadAttention
from .utils import check_int

__all__ = ["AddNorm", "PositionWiseFFN", "PositionalEncoding",
           "TransformerDecoderBlock", "TransformerEncoderBlock",
           "causal_lens", "copy_from_pytorch"]


def _check_features(X, D, name="X"):
    if not torch.is_tensor(X) or X.dim() != 3 or X.shape[-1] != D:
        shape = tuple(X.shape) if torch.is_tensor(X) else type(X).__name__
        raise ValueError(f"{name} must be (B, T, {D}) features, got {shape}")


def causal_lens(B, T, offset=0, device=None):
    """(B, T) valid lengths of a causal mask: query t sees keys 0..t
    (``offset`` earlier keys too, when they come from a cache)."""
    lens = torch.arange(1, T + 1, device=device) + offset
    return lens.expand(B, T)


class PositionalEncoding(nn.Module):
    """Adds sinusoidal positions: P[i, 2j] = sin(i / 10000^(2j/D)),
    P[i, 2j+1] = cos(i / 10000^(2j/D)); then dropout.

    ``forward(X, offset=0)`` adds rows ``offset .. offset + T - 1``
    (``offset`` is the number of steps decoded before, with a cache).
    """

    def __init__(self, num_hiddens, dropout=0.0, max_len=1000):
        super().__init__()
        check_int("num_hiddens", num_hiddens)
        check_int("max_len", max_len)
        if num_hiddens % 2:
            raise ValueError(f"num_hiddens must be even for sine/cosine "
                             f"pairs, got {num_hiddens}")
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len
        i = torch.arange(max_len, dtype=torch.float32)[:, None]
        freq = torch.pow(10000, torch.arange(0, num_hiddens, 2,
                                             dtype=torch.float32)
                         / num_hiddens)
        P = torch.zeros(max_len, num_hiddens)
        P[:, 0::2], P[:, 1::2] = torch.sin(i / freq), torch.cos(i / freq)
        self.register_buffer("P", P, persistent=False)  # (max_len, D)

    def forward(self, X, offset=0):
        _check_features(X, self.P.shape[1])
        end = offset + X.shape[1]
        if end > self.max_len:
            raise ValueError(
                f"positions up to {end} exceed max_len={self.max_len}; "
                f"build PositionalEncoding(..., max_len={end}) or longer")
        return self.dropout(X + self.P[offset:end].to(X.dtype))


class PositionWiseFFN(nn.Module):
    """The same two-layer network at every position: D -> F -> D."""

    def __init__(self, num_hiddens, ffn_num_hiddens, dropout=0.0):
        super().__init__()
        self.dense1 = nn.Linear(num_hiddens, ffn_num_hiddens)
        self.dense2 = nn.Linear(ffn_num_hiddens, num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        return self.dense2(self.dropout(torch.relu(self.dense1(X))))


class AddNorm(nn.Module):
    """Residual connection and layer norm: LayerNorm(X + dropout(Y)).

    Layer norm normalizes each position over its D features, so a
    position's output does not depend on the padding or the other
    examples of the batch (batch norm's statistics would)."""

    def __init__(self, num_hiddens, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(num_hiddens)

    def forward(self, X, Y):
        if X.shape != Y.shape:
            raise ValueError(f"X {tuple(X.shape)} and Y {tuple(Y.shape)} "
                             "must have the same shape to be added")
        return self.ln(X + self.dropout(Y))


class TransformerEncoderBlock(nn.Module):
    """Self-attention and a position-wise FFN, each with AddNorm.

    ``forward(X, valid_lens)``: X (B, S, D), valid_lens (B,) or None.
    """

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads,
                 dropout=0.0):
        super().__init__()
        self.attention = MultiHeadAttention(num_hiddens, num_heads,
                                            dropout, bias=True)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(num_hiddens, ffn_num_hiddens, dropout)
        self.addnorm2 = AddNorm(num_hiddens, dropout)
        self.num_hiddens = num_hiddens

    def forward(self, X, valid_lens=None):
        _check_features(X, self.num_hiddens)
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class TransformerDecoderBlock(nn.Module):
    """Masked self-attention, attention to the encoder, and an FFN.

    ``forward(X, enc_outputs, enc_valid_lens, cache=None, *,
    memory=None)``: X (B, T, D).  Without a cache, X is a whole target
    prefix and query t sees steps 0..t.  With ``cache``, the projected
    keys and values of the earlier steps (an ``AttentionMemory`` of
    (B * h, t, D / h) tensors), X holds the next steps only and attends
    to the cached steps too.  ``memory``, the cross-attention's
    ``precompute(enc_outputs, enc_outputs, enc_valid_lens)``, saves
    projecting the encoder outputs again at every step (then
    ``enc_outputs`` and ``enc_valid_lens`` are not used).  Returns
    ``(output, new_cache)``: the cache grown by X's steps, which the
    next step passes back; with ``return_weights=True`` also this
    call's cross-attention weights (B, h, T, S).
    """

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads,
                 dropout=0.0):
        super().__init__()
        self.self_attention = MultiHeadAttention(num_hiddens, num_heads,
                                                 dropout, bias=True)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.cross_attention = MultiHeadAttention(num_hiddens, num_heads,
                                                  dropout, bias=True)
        self.addnorm2 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(num_hiddens, ffn_num_hiddens, dropout)
        self.addnorm3 = AddNorm(num_hiddens, dropout)
        self.num_hiddens = num_hiddens

    def _self_memory(self, X, cache):
        """Keys and values of the cached steps and of X, with the causal
        mask of X's queries: (B * h, T, t + T)."""
        new = self.self_attention.precompute(X, X)  # (B * h, T, D / h)
        B, T = X.shape[:2]
        if cache is not None:
            h = self.self_attention.num_heads
            keys = getattr(cache, "keys", cache)
            ok = isinstance(cache, AttentionMemory) and (
                keys.shape[0] == B * h
                and keys.shape[2:] == new.keys.shape[2:])
            if not ok:
                got = tuple(keys.shape) if torch.is_tensor(keys) else \
                    type(cache).__name__
                raise ValueError(
                    f"the cache must hold the keys of {B} sequences x {h} "
                    f"heads, {(B * h, 't', *new.keys.shape[2:])}, got "
                    f"{got}: pass back the cache the last step returned")
            new = AttentionMemory(torch.cat([cache.keys, new.keys], 1),
                                  torch.cat([cache.values, new.values], 1),
                                  None)
        S = new.keys.shape[1]
        lens = causal_lens(B, T, S - T, X.device)  # (B, T)
        mask = self.self_attention.split_mask(valid_mask(lens, S))
        return new, new._replace(mask=mask)

    def forward(self, X, enc_outputs, enc_valid_lens=None, cache=None, *,
                memory=None, return_weights=False):
        _check_features(X, self.num_hiddens)
        if memory is None:
            _check_features(enc_outputs, self.num_hiddens, "enc_outputs")
            memory = self.cross_attention.precompute(
                enc_outputs, enc_outputs, enc_valid_lens)
        cache, masked = self._self_memory(X, cache)
        Y = self.addnorm1(X, self.self_attention(X, None, None,
                                                 memory=masked))
        attended, weights = self.cross_attention(Y, None, None, memory=memory,
                                                 return_weights=True)
        Z = self.addnorm2(Y, attended)
        out = self.addnorm3(Z, self.ffn(Z))
        return (out, cache, weights) if return_weights else (out, cache)


def copy_from_pytorch(block, layer):
    """Give ``block`` the weights of PyTorch's equivalent layer.

    ``block`` is a ``TransformerEncoderBlock`` (``layer`` an
    ``nn.TransformerEncoderLayer``) or a ``TransformerDecoderBlock``
    (``nn.TransformerDecoderLayer``); the layer must be post-norm
    (``norm_first=False``) with ReLU, the block's sizes and its layer
    norm's eps.  Then both compute the same function, which is how the
    tests and the Transformer section check this module.  A layer built
    with ``bias=False`` has no biases: the block's are set to zeros.
    """
    pairs = {TransformerEncoderBlock: (nn.TransformerEncoderLayer,
                                       ("attention", "self_attn")),
             TransformerDecoderBlock: (nn.TransformerDecoderLayer,
                                       ("self_attention", "self_attn"),
                                       ("cross_attention", "multihead_attn"))}
    kind, *attentions = pairs.get(type(block), (None,))
    if kind is None or not isinstance(layer, kind):
        raise TypeError(f"copy an nn.TransformerEncoderLayer into a "
                        f"TransformerEncoderBlock, or a decoder layer into "
                        f"a decoder block; got {type(layer).__name__} and "
                        f"{type(block).__name__}")
    want = (block.num_hiddens, block.ffn.dense1.out_features,
            getattr(block, attentions[0][0]).num_heads)
    sizes = (layer.linear1.in_features, layer.linear1.out_features,
             layer.self_attn.num_heads)
    relu = layer.activation is torch.nn.functional.relu or \
        isinstance(layer.activation, nn.ReLU)
    norms = [m.ln for m in block.children() if isinstance(m, AddNorm)]
    eps, their_eps = norms[0].eps, layer.norm1.eps
    if layer.norm_first or not relu or sizes != want or their_eps != eps:
        raise ValueError(
            f"the layer must be post-norm (norm_first=False) with ReLU, "
            f"(d_model, dim_feedforward, nhead) = {want} and "
            f"layer_norm_eps {eps}, got norm_first={layer.norm_first}, "
            f"ReLU {relu}, {sizes}, layer_norm_eps {their_eps}")
    copies = [(block.ffn.dense1, layer.linear1),
              (block.ffn.dense2, layer.linear2),
              *((norm, getattr(layer, f"norm{i}"))
                for i, norm in enumerate(norms, 1))]
    with torch.no_grad():
        for ours, theirs in attentions:
            a, t = getattr(block, ours), getattr(layer, theirs)
            biases = [None] * 3 if t.in_proj_bias is None else \
                t.in_proj_bias.chunk(3)
            for lin, w, b in zip((a.W_q, a.W_k, a.W_v),
                                 t.in_proj_weight.chunk(3), biases):
                _copy_affine(lin, w, b)
            _copy_affine(a.W_o, t.out_proj.weight, t.out_proj.bias)
        for ours, theirs in copies:
            _copy_affine(ours, theirs.weight, theirs.bias)
    return block


def _copy_affine(ours, weight, bias):
    """Copy into ``ours`` (an ``nn.Linear`` or ``nn.LayerNorm`` with a
    bias) ``weight`` and ``bias``; no bias (None) is a zero bias."""
    if ours.weight.shape != weight.shape:
        raise ValueError(f"cannot copy a {tuple(weight.shape)} weight into "
                         f"{tuple(ours.weight.shape)}")
    ours.weight.copy_(weight)
    if bias is None:
        ours.bias.zero_()
    else:
        ours.bias.copy_(bias)
