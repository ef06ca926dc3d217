"""The Transformer's encoder and decoder: embeddings, positions and a
stack of blocks (``d2lmini.transformer_blocks``), as a translation
model's encoder and decoder.

Greedy decoding runs one new token per step: each decoder block keeps
the projected keys and values of the earlier steps (a key/value cache),
and the encoder outputs are projected for the cross-attention once, in
``TransformerDecoder.init_state``.  The blocks are importable from here
too.

Shape legend for every comment and docstring in this module:
    B  batch size      T  target steps      S  source steps
    D  num_hiddens     F  ffn_num_hiddens   V  vocabulary size
"""

import math
from typing import NamedTuple

import torch
from torch import nn

from .attention import _check_valid_lens
from .seq2seq import _check_sorted
from .transformer_blocks import (
    AddNorm,
    PositionalEncoding,
    PositionWiseFFN,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
    _check_features,
    causal_lens,
    copy_from_pytorch,
)
from .utils import check_int

__all__ = ["AddNorm", "PositionWiseFFN", "PositionalEncoding",
           "TransformerDecoder", "TransformerDecoderBlock",
           "TransformerEncoder", "TransformerEncoderBlock",
           "TransformerState", "causal_lens",
           "copy_from_pytorch"]


class TransformerState(NamedTuple):
    """State of ``TransformerDecoder``: the encoder's outputs (B, S, D)
    and valid lengths (B,) or None; per block, the cross-attention's
    projected encoder outputs and the self-attention cache (None before
    the first step)."""

    enc_outputs: torch.Tensor
    enc_valid_lens: torch.Tensor
    memories: list
    caches: list


class _Stack(nn.Module):
    """Embeddings (times sqrt(D)), positions and ``num_blks`` blocks of
    ``block``: what the encoder and the decoder share."""

    def __init__(self, block, vocab_size, num_hiddens, ffn_num_hiddens,
                 num_heads, num_blks, dropout, max_len):
        super().__init__()
        check_int("num_blks", num_blks)
        self.num_hiddens, self.num_heads = num_hiddens, num_heads
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        # N(0, 1/D), so that the embedding times sqrt(D) has unit scale,
        # like the positions it is added to (as in Vaswani et al.);
        # nn.Embedding's N(0, 1) would be 16 times larger at D = 256.
        nn.init.normal_(self.embedding.weight, std=num_hiddens ** -0.5)
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

    ``forward(X, valid_lens)``: ids X (B, S) -> (B, S, D); valid_lens
    (B,) or None, each at most S (a ValueError otherwise).
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
        if valid_lens is not None:  # checked once, as the attention does
            B, S = X.shape
            valid_lens = _check_valid_lens(valid_lens, (B, S, S), H.device,
                                           at_most_s=True)
        for blk in self.blks:
            H = blk(H, valid_lens)
        return H


class TransformerDecoder(_Stack):
    """Embeddings, positions, ``num_blks`` decoder blocks, output layer.

    ``init_state(enc_outputs, enc_valid_lens)`` projects the encoder
    outputs for every block's cross-attention once and starts a
    ``TransformerState`` with empty caches; ``forward(X, state)`` takes
    the next steps X (B, T) (the whole target when training, one step at
    a time when decoding) and returns logits (B, T, V) and the state
    with the blocks' caches grown by T; with ``return_attention=True``
    also this call's own attention to the source, the last block's
    cross-attention (B, h, T, S), which no other thread's call changes.
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks, dropout=0.0, max_len=1000):
        super().__init__(TransformerDecoderBlock, vocab_size, num_hiddens,
                         ffn_num_hiddens, num_heads, num_blks, dropout,
                         max_len)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens=None):
        _check_features(enc_outputs, self.num_hiddens, "enc_outputs")
        if enc_valid_lens is not None:  # as the cross-attention, and <= S
            lens = torch.as_tensor(enc_valid_lens)
            B, S = enc_outputs.shape[:2]
            L = lens.shape[1] if lens.dim() == 2 else 1
            enc_valid_lens = _check_valid_lens(
                lens, (B, L, S), enc_outputs.device, at_most_s=True)
        memories = [blk.cross_attention.precompute(
            enc_outputs, enc_outputs, enc_valid_lens) for blk in self.blks]
        return TransformerState(enc_outputs, enc_valid_lens, memories,
                                [None] * len(self.blks))

    @property
    def attention_weights(self):
        """Per block: (self-attention, cross-attention) weights of the
        last call, each (B, h, T, keys)."""
        return [(blk.self_attention.attention_weights,
                 blk.cross_attention.attention_weights)
                for blk in self.blks]

    @property
    def cross_attention_weights(self):
        """The last block's attention to the source, (B, h, T, S): what
        greedy decoding reports as the model's attention."""
        return self.blks[-1].cross_attention.attention_weights

    def _features(self, X, state):
        """The top block's features (B, T, D) and the new state."""
        H, state, _ = self._blocks(X, state)
        return H, state

    def _blocks(self, X, state):
        """``_features`` and this call's last cross-attention weights
        (B, h, T, S)."""
        first = state.caches[0]
        H = self._embed(X, offset=0 if first is None else
                        first.keys.shape[1])
        caches = []
        for blk, memory, cache in zip(self.blks, state.memories,
                                      state.caches):
            H, cache, weights = blk(H, None, cache=cache, memory=memory,
                                    return_weights=True)
            caches.append(cache)
        return H, state._replace(caches=caches), weights

    def forward(self, X, state, *, return_attention=False):
        H, state, weights = self._blocks(X, state)
        if return_attention:
            return self.dense(H), state, weights
        return self.dense(H), state

    def forward_packed(self, X, state, lengths):
        """Top-block features at the first ``lengths`` steps of each row.

        The contract of ``Seq2SeqDecoder.forward_packed`` (rows sorted by
        decreasing length), so that ``Seq2Seq.training_step`` applies the
        output layer to the N non-pad positions only.  Every step of a
        row runs at once; the steps after the longest row are cut.

        Returns:
            (N, D) features, time-major: all rows at step 0, then the
            rows still running at step 1, ... (PyTorch's packed order).
        """
        _check_sorted(lengths, X)
        T = int(lengths[0])
        H, _ = self._features(X[:, :T], state)  # (B, T, D)
        steps = torch.arange(T, device=X.device)
        mask = steps[:, None] < lengths.to(X.device)  # (T, B)
        return H.transpose(0, 1)[mask]  # (N, D)
