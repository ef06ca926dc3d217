"""The GRU decoder with attention over the encoder outputs (Bahdanau).

Shape legend for every comment and docstring in this module:
    B  batch size       S  source steps (the keys)   T  target steps
    E  embed_size       D  num_hiddens               V  vocabulary size
    h  attention heads  R  non-pad target tokens of a batch (packed rows)

It plugs into ``d2lmini.seq2seq.Seq2Seq`` like ``Seq2SeqDecoder`` does,
with the same methods; the attention is a module of
``d2lmini.attention`` (additive by default) or ``d2lmini.multihead``.
``src_valid_len`` (B,) is the number of valid source tokens, as in
``d2lmini.seq2seq``.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from .attention import AdditiveAttention
from .multihead import MultiHeadAttention
from .seq2seq import _pack_ids, init_seq2seq

__all__ = ["AttentionState", "Seq2SeqAttentionDecoder"]


class AttentionState(NamedTuple):
    """State of ``Seq2SeqAttentionDecoder``.

    enc_outputs (B, S, D); hidden (num_layers, B, D); src_valid_len
    (B,) or None; memory: the attention's ``precompute(enc_outputs,
    enc_outputs, src_valid_len)``, which holds the source mask.
    """

    enc_outputs: torch.Tensor
    hidden: torch.Tensor
    src_valid_len: torch.Tensor
    memory: object


class Seq2SeqAttentionDecoder(nn.Module):
    """GRU decoder with Bahdanau-style attention over the encoder outputs.

    At each step the query is the previous top-layer state; the context
    (attention over the encoder outputs, padding masked) is concatenated
    with the input embedding and fed to the GRU.  Keys and values are
    projected, and the padding mask built, once per sequence, in
    ``init_state``.

    Args:
        vocab_size, embed_size, num_hiddens, num_layers: V, E, D and the
            number of GRU layers.
        dropout: dropout between GRU layers and, for the default
            attention, on the attention weights.
        attention: a module with ``precompute(keys, values,
            valid_lens)`` and ``forward(queries, keys, values,
            memory=...)`` returning D features; None means
            ``AdditiveAttention(num_hiddens, dropout)``.  For example
            ``MultiHeadAttention(num_hiddens, 8, dropout)``.

    Shape:
        ``forward(X, state)``: X (B, T) ids -> logits (B, T, V) and the
        new state.  ``attention_weights`` then lists the T steps'
        weights, each (B, 1, S), or (B, h, 1, S) for multi-head: those
        of the last call, whichever thread made it.  ``forward(X, state,
        return_attention=True)`` returns a third value, this call's own
        attention to the source, (B, T, S) or (B, h, T, S) (None for an
        attention that keeps no weights).
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers,
                 dropout=0.0, attention=None):
        super().__init__()
        if attention is None:
            attention = AdditiveAttention(num_hiddens, dropout,
                                          query_size=num_hiddens,
                                          key_size=num_hiddens)
        elif isinstance(attention, MultiHeadAttention):
            a = attention
            sizes = (a.W_q.in_features, a.W_k.in_features,
                     a.W_v.in_features, a.W_o.out_features)
            if set(sizes) != {num_hiddens}:
                raise ValueError(
                    f"the attention's query, key, value and output sizes "
                    f"are {sizes}; the decoder needs num_hiddens="
                    f"{num_hiddens} for all four: build "
                    f"MultiHeadAttention({num_hiddens}, {a.num_heads})")
        self.attention = attention
        self.embedding = nn.Embedding(vocab_size, embed_size)
        # Run one step at a time with torch.gru_cell on these weights.
        self.rnn = nn.GRU(num_hiddens + embed_size, num_hiddens, num_layers,
                          dropout=dropout, batch_first=True)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        init_seq2seq(self.rnn)
        init_seq2seq(self.dense)
        self._attention_weights = []

    @property
    def attention_weights(self):
        """The attention weights of each step of the last ``forward``."""
        return self._attention_weights

    def init_state(self, enc_outputs, src_valid_len=None):
        outputs, hidden = enc_outputs  # (B, S, D), (num_layers, B, D)
        # Keys projected and padding mask built once, for every step.
        memory = self.attention.precompute(outputs, outputs, src_valid_len)
        return AttentionState(outputs, hidden, src_valid_len, memory)

    def _attend(self, query, state):
        """Context (n, D) and weights (n, 1, S), or (n, h, 1, S), for the
        queries (n, D) of the first n rows."""
        memory, n = state.memory, len(query)
        if n < len(state.enc_outputs):  # rows whose targets have ended
            memory = _first_rows(memory, n, len(state.enc_outputs))
        context, weights = _attention_call(
            self.attention, query.unsqueeze(1), memory)  # (n, 1, D)
        return context.squeeze(1), weights

    def _step(self, x, hs):
        """One GRU step through every layer, like nn.GRU does."""
        new = []
        for layer, h in enumerate(hs):  # h: (n, D)
            if layer:
                x = F.dropout(x, self.rnn.dropout, self.training)
            x = torch.gru_cell(x, h, *self.rnn.all_weights[layer])
            new.append(x)
        return new

    def _run(self, embs, hs, state):
        """Decode step by step; embs: per step (n, E), n not increasing.
        Returns the top-layer outputs, the final states and the
        attention weights of every step."""
        outputs, weights = [], []
        for x in embs:
            if len(x) < len(hs[0]):
                hs = [h[:len(x)] for h in hs]  # the rows still running
            context, step_weights = self._attend(hs[-1], state)  # (n, D)
            hs = self._step(torch.cat((context, x), dim=-1), hs)
            outputs.append(hs[-1])
            weights.append(step_weights)
        self._attention_weights = weights  # for plotting
        return outputs, hs, weights

    def forward(self, X, state, *, return_attention=False):
        embs = self.embedding(X).unbind(1)  # T x (B, E)
        outputs, hs, weights = self._run(embs, list(state.hidden.unbind(0)),
                                         state)
        logits = self.dense(torch.stack(outputs, dim=1))  # (B, T, V)
        state = state._replace(hidden=torch.stack(hs))
        if not return_attention:
            return logits, state
        if any(w is None for w in weights):
            return logits, state, None
        return logits, state, torch.cat(weights, dim=-2)  # (B, [h,] T, S)

    def forward_packed(self, X, state, lengths):
        """Top-layer features at the first ``lengths`` steps of each row.

        Same contract as ``Seq2SeqDecoder.forward_packed``: the rows
        whose targets have ended drop out of the GRU and the attention.
        ``attention_weights`` then holds (n, 1, S) or (n, h, 1, S) per
        step, n the rows still running.
        """
        if not isinstance(self.attention,
                          (AdditiveAttention, MultiHeadAttention)):
            # Unknown memory layout: run every row, keep the valid steps.
            outputs, _, _ = self._run(self.embedding(X).unbind(1),
                                      list(state.hidden.unbind(0)), state)
            return pack_padded_sequence(torch.stack(outputs, dim=1),
                                        lengths.cpu(), batch_first=True).data
        ids, _, sizes = _pack_ids(X, lengths)
        embs = self.embedding(ids).split(sizes)  # T' x (n, E)
        outputs, _, _ = self._run(embs, list(state.hidden.unbind(0)),
                                  state)
        return torch.cat(outputs)  # (R, D)


def _attention_call(attention, queries, memory):
    """The output of ``attention`` for ``queries`` and this call's
    weights: d2lmini's layers return them; an attention of another kind
    gives its ``attention_weights`` after the call (None if it has none),
    which another thread's call may overwrite."""
    if isinstance(attention, (AdditiveAttention, MultiHeadAttention)):
        return attention(queries, None, None, memory=memory,
                         return_weights=True)
    out = attention(queries, None, None, memory=memory)
    return out, getattr(attention, "attention_weights", None)


def _first_rows(memory, n, B):
    """The ``AttentionMemory`` of the first n of B examples.

    Its keys, values and mask (None without ``src_valid_len``) have the
    batch, or batch x heads with the batch outermost, as first axis.
    """
    return memory._make(None if m is None else m[:n * (len(m) // B)]
                        for m in memory)
