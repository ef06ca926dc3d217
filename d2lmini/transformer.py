"""The Transformer's layers: positional encoding, encoder and decoder.

Post-norm blocks as in Vaswani et al. (2017) and PyTorch's
``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` with
``norm_first=False``: each sublayer is followed by a residual connection
and layer normalization.  Attention is ``d2lmini.attention``'s
``MultiHeadAttention`` (with biases, as PyTorch's); padding is given by
valid lengths, and the decoder's causal mask is the 2-D ``valid_lens`` of
``masked_softmax`` (query t sees keys 0..t), not a second mechanism.

Shape legend for every comment and docstring in this module:
    B  batch size      T  target steps      S  source steps
    D  num_hiddens     F  ffn_num_hiddens   V  vocabulary size
"""

import math

import torch
from torch import nn

from .attention import MultiHeadAttention
from .utils import check_int

__all__ = ["AddNorm", "PositionWiseFFN", "PositionalEncoding",
           "TransformerDecoder", "TransformerDecoderBlock",
           "TransformerEncoder", "TransformerEncoderBlock", "causal_lens"]


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

    ``forward(X, enc_outputs, enc_valid_lens, cache=None)``: X (B, T, D).
    Without a cache, X is a whole target prefix and query t sees steps
    0..t.  With ``cache`` (the block's inputs at the earlier steps,
    (B, t, D)), X holds the next steps only and attends to the cache
    too.  Returns ``(output, new_cache)``: the new cache is the cache
    followed by X, which the next step passes back.
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

    def forward(self, X, enc_outputs, enc_valid_lens=None, cache=None):
        _check_features(X, self.num_hiddens)
        _check_features(enc_outputs, self.num_hiddens, "enc_outputs")
        past = 0 if cache is None else cache.shape[1]
        if cache is not None:
            _check_features(cache, self.num_hiddens, "cache")
            if cache.shape[0] != X.shape[0]:
                raise ValueError(f"the cache holds {cache.shape[0]} "
                                 f"sequences, X {X.shape[0]}")
        keys = X if cache is None else torch.cat([cache, X], dim=1)
        B, T = X.shape[:2]
        lens = causal_lens(B, T, past, X.device)  # (B, T)
        Y = self.addnorm1(X, self.self_attention(X, keys, keys, lens))
        Z = self.addnorm2(Y, self.cross_attention(Y, enc_outputs,
                                                  enc_outputs,
                                                  enc_valid_lens))
        return self.addnorm3(Z, self.ffn(Z)), keys


class _Stack(nn.Module):
    """Embeddings (times sqrt(D)), positions and ``num_blks`` blocks of
    ``block``: what the encoder and the decoder share."""

    def __init__(self, block, vocab_size, num_hiddens, ffn_num_hiddens,
                 num_heads, num_blks, dropout, max_len):
        super().__init__()
        check_int("num_blks", num_blks)
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout, max_len)
        self.blks = nn.ModuleList(
            block(num_hiddens, ffn_num_hiddens, num_heads, dropout)
            for _ in range(num_blks))

    def _embed(self, X, offset=0):
        if not torch.is_tensor(X) or X.dim() != 2:
            raise ValueError(f"X must be (B, T) token ids, got "
                             f"{getattr(X, 'shape', type(X).__name__)}")
        return self.pos_encoding(self.embedding(X) * math.sqrt(
            self.num_hiddens), offset)


class TransformerEncoder(_Stack):
    """Embeddings, positions and ``num_blks`` encoder blocks.

    ``forward(X, valid_lens)``: ids X (B, S) -> (B, S, D).
    ``attention_weights[i]`` is block i's (B, h, S, S).
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks, dropout=0.0, max_len=1000):
        super().__init__(TransformerEncoderBlock, vocab_size, num_hiddens,
                         ffn_num_hiddens, num_heads, num_blks, dropout,
                         max_len)

    @property
    def attention_weights(self):
        return [blk.attention.attention_weights for blk in self.blks]

    def forward(self, X, valid_lens=None):
        H = self._embed(X)
        for blk in self.blks:
            H = blk(H, valid_lens)
        return H


class TransformerDecoder(_Stack):
    """Embeddings, positions, ``num_blks`` decoder blocks, output layer.

    ``init_state(enc_outputs, enc_valid_lens)`` starts a state with empty
    caches; ``forward(X, state)`` takes the next steps X (B, T) (the whole
    target when training, one step at a time when decoding) and returns
    logits (B, T, V) and the state with the blocks' caches grown by T.
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks, dropout=0.0, max_len=1000):
        super().__init__(TransformerDecoderBlock, vocab_size, num_hiddens,
                         ffn_num_hiddens, num_heads, num_blks, dropout,
                         max_len)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens=None):
        return [enc_outputs, enc_valid_lens, [None] * len(self.blks)]

    @property
    def attention_weights(self):
        """Per block: (self-attention, cross-attention) weights of the
        last call, each (B, h, T, keys)."""
        return [(blk.self_attention.attention_weights,
                 blk.cross_attention.attention_weights)
                for blk in self.blks]

    def forward(self, X, state):
        enc_outputs, enc_valid_lens, caches = state
        past = 0 if caches[0] is None else caches[0].shape[1]
        H = self._embed(X, offset=past)
        new = []
        for blk, cache in zip(self.blks, caches):
            H, cache = blk(H, enc_outputs, enc_valid_lens, cache)
            new.append(cache)
        return self.dense(H), [enc_outputs, enc_valid_lens, new]
