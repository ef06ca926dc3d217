"""GRU encoder-decoder models for translation: d2l's Seq2Seq, faster.

Shape legend for every comment and docstring in this module:
    B  batch size       S  source steps (the keys)   T  target steps
    E  embed_size       D  num_hiddens               V  vocabulary size
    h  attention heads  R  non-pad target tokens of a batch (packed rows)

Tensors are batch-first, (B, T, ...), unlike d2l's time-major encoder
output; GRU states are (num_layers, B, D) as in PyTorch.  Every decoder
has ``init_state(enc_outputs, src_valid_len)``, ``forward(X, state)``
and ``forward_packed(X, state, lengths)``, which computes the top-layer
features of the non-pad target positions only (the fast training path).
The decoder with attention is ``d2lmini.attention_decoder``; greedy
decoding and ``translate`` are in ``d2lmini.decoding``.

One name per role for length tensors: ``src_valid_len`` (B,) is the
number of valid source tokens (``<eos>`` included) everywhere in this
module and in ``d2lmini.decoding``; the attention layers call the same
numbers ``valid_lens``, d2l's name for their own role (how many keys
each query may see); ``lengths`` (B,) are the target steps to run.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

__all__ = [
    "DecoderState", "Seq2Seq", "Seq2SeqDecoder", "Seq2SeqEncoder",
    "init_seq2seq",
]


def init_seq2seq(module):
    """Xavier-initialize nn.Linear and nn.GRU weights, as d2l does."""
    if type(module) is nn.Linear:
        nn.init.xavier_uniform_(module.weight)
    elif type(module) is nn.GRU:
        for name, param in module.named_parameters():
            if name.startswith("weight"):
                nn.init.xavier_uniform_(param)


def _check_ids(X, name):
    """Raise unless X is a (B, T) tensor of integer token ids."""
    if not torch.is_tensor(X) or X.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{name} must be a tensor of integer token ids, got "
                        f"{getattr(X, 'dtype', type(X).__name__)}")
    if X.dim() != 2:
        raise ValueError(f"{name} must be 2-D (B, T), got shape "
                         f"{tuple(X.shape)}")


def _check_lens(lens, X, name):
    """Raise unless lens is (B,) integers in [1, T] for X (B, T): the
    one check of source lengths (the encoder's and ``greedy_decode``'s)."""
    if not torch.is_tensor(lens) or lens.is_floating_point() \
            or lens.is_complex() or lens.dtype == torch.bool:
        raise TypeError(f"{name} must be a tensor of integer lengths (B,), "
                        f"got {getattr(lens, 'dtype', type(lens).__name__)}")
    if lens.shape != X.shape[:1]:
        raise ValueError(f"{name} must have shape {(X.shape[0],)} for "
                         f"{tuple(X.shape)} ids, got {tuple(lens.shape)}")
    if len(lens) and not (1 <= lens.min() and lens.max() <= X.shape[1]):
        raise ValueError(f"{name} must lie in [1, {X.shape[1]}] (every "
                         f"sequence ends with <eos>), got {lens}")


class Seq2SeqEncoder(nn.Module):
    """Embedding + multi-layer GRU over the source tokens.

    Args:
        vocab_size, embed_size, num_hiddens, num_layers: V, E, D and the
            number of GRU layers.
        dropout: dropout between GRU layers (as in d2l).
        pack: skip the padding (packed sequences) when
            ``src_valid_len`` is given.  The final state is then the
            state after each sentence's own last token, so a translation
            does not depend on how much padding its batch has.
            ``pack=False`` runs over the pads, as d2l does.

    Shape:
        X (B, S) ids; src_valid_len (B,) or None.  Returns ``(outputs,
        state)``: outputs (B, S, D), zero at padding when packed; state
        (num_layers, B, D).
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers,
                 dropout=0.0, *, pack=True):
        super().__init__()
        self.pack = pack
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers,
                          dropout=dropout, batch_first=True)
        self.apply(init_seq2seq)

    def forward(self, X, src_valid_len=None):
        _check_ids(X, "X")
        embs = self.embedding(X)  # (B, S, E)
        if not self.pack or src_valid_len is None:
            return self.rnn(embs)
        _check_lens(src_valid_len, X, "src_valid_len")
        packed = pack_padded_sequence(embs, src_valid_len.cpu(),
                                      batch_first=True, enforce_sorted=False)
        outputs, state = self.rnn(packed)  # state: (num_layers, B, D)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True,
                                         total_length=X.shape[1])
        return outputs, state  # (B, S, D)


def _check_sorted(lengths, X):
    """Raise unless lengths (B,) is sorted down, in [1, T] for X (B, T)."""
    if not torch.is_tensor(lengths) or lengths.shape != X.shape[:1] \
            or len(X) == 0 or lengths.min() < 1 \
            or lengths.max() > X.shape[1] \
            or (lengths[1:] > lengths[:-1]).any():
        raise ValueError(f"lengths must be {len(X)} numbers in [1, "
                         f"{X.shape[1]}], sorted in decreasing order, got "
                         f"{lengths}")


def _pack_ids(X, lengths):
    """The ids of the first ``lengths`` steps of each row, packed.

    Returns the ids (R,) and their rows (R,), time-major: all rows at
    step 0, then the rows still running at step 1, ... (PyTorch's packed
    order); and the number of rows at each step.
    """
    _check_sorted(lengths, X)
    steps = torch.arange(int(lengths[0]), device=X.device)
    mask = steps[:, None] < lengths.to(X.device)  # (T', B)
    rows = torch.arange(len(X), device=X.device).expand_as(mask)[mask]
    return X[:, :len(steps)].t()[mask], rows, mask.sum(1).tolist()


def _gru_layer(gates_x, h, w_hh, b_hh, sizes):
    """One GRU layer over packed steps, given its input projections.

    Shape:
        gates_x (R, 3D) = W_ih x + b_ih, packed; h (B, D) initial state;
        sizes: rows per step.  Returns the outputs (R, D), packed.
    """
    outputs = []
    for gx in gates_x.split(sizes):  # (n, 3D)
        if len(gx) < len(h):
            h = h[:len(gx)]  # the rows still running
        r, z, n = gx.chunk(3, dim=1)  # reset, update, new: nn.GRU's order
        hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, dim=1)
        r, z = torch.sigmoid(r + hr), torch.sigmoid(z + hz)
        n = torch.tanh(n + r * hn)
        h = n + z * (h - n)  # (1 - z) * n + z * h
        outputs.append(h)
    return torch.cat(outputs)  # (R, D)


class DecoderState(NamedTuple):
    """State of ``Seq2SeqDecoder``: context (B, D), hidden (layers, B, D)."""

    context: torch.Tensor
    hidden: torch.Tensor


class Seq2SeqDecoder(nn.Module):
    """GRU decoder without attention, as in d2l (for comparison).

    Every step sees the same context, the encoder's final top-layer
    state, concatenated to the embedding of its input token.

    Args:
        vocab_size, embed_size, num_hiddens, num_layers: V, E, D and the
            number of GRU layers.
        dropout: dropout between GRU layers.

    Shape:
        ``forward(X, state)``: X (B, T) ids -> logits (B, T, V) and the
        new state.
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers,
                 dropout=0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers,
                          dropout=dropout, batch_first=True)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.apply(init_seq2seq)

    def init_state(self, enc_outputs, src_valid_len=None):
        """Start from the encoder's final state; ``src_valid_len`` unused."""
        hidden = enc_outputs[1]  # (num_layers, B, D)
        return DecoderState(hidden[-1], hidden)

    def _inputs(self, X, context):
        embs = self.embedding(X)  # (B, T, E)
        context = context.unsqueeze(1).expand(-1, X.shape[1], -1)  # (B, T, D)
        return torch.cat((embs, context), dim=-1)  # (B, T, E + D)

    def forward(self, X, state):
        outputs, hidden = self.rnn(self._inputs(X, state.context),
                                   state.hidden)  # (B, T, D)
        return self.dense(outputs), DecoderState(state.context, hidden)

    def forward_packed(self, X, state, lengths):
        """Top-layer features at the first ``lengths`` steps of each row.

        The same numbers as ``forward`` (before ``dense``) at those steps,
        with less work: the rows whose targets have ended drop out, and
        the context's share of the first layer's input projection is
        computed once per row, not once per step (0.6-0.8 times the time
        of ``nn.GRU`` on a ``PackedSequence``: benchmarks/packed_gru.py).

        Args:
            X: (B, T) input ids.
            state: from ``init_state``.
            lengths: (B,) numbers of steps to run, sorted in decreasing
                order, each in [1, T].

        Returns:
            (R, D) features, time-major: all rows at step 0, then the
            rows still running at step 1, ... (PyTorch's packed order).
        """
        ids, rows, sizes = _pack_ids(X, lengths)
        x = self.embedding(ids)  # (R, E)
        E = x.shape[1]
        for layer, weights in enumerate(self.rnn.all_weights):
            w_ih, w_hh, b_ih, b_hh = weights
            if layer == 0:  # input [x; context], the context fixed per row
                per_row = F.linear(state.context, w_ih[:, E:], b_ih)
                gates_x = F.linear(x, w_ih[:, :E]) \
                    + per_row.index_select(0, rows)  # (R, 3D)
            else:
                x = F.dropout(x, self.rnn.dropout, self.training)
                gates_x = F.linear(x, w_ih, b_ih)
            x = _gru_layer(gates_x, state.hidden[layer], w_hh, b_hh, sizes)
        return x  # (R, D)


class Seq2Seq(nn.Module):
    """Encoder-decoder trained with a cross-entropy that ignores padding.

    Args:
        encoder: e.g. ``Seq2SeqEncoder``; called as ``encoder(src,
            src_valid_len)``.
        decoder: ``Seq2SeqDecoder``, ``Seq2SeqAttentionDecoder`` or
            ``d2lmini.transformer.TransformerDecoder`` (with
            ``TransformerEncoder``).
        tgt_pad: id of ``<pad>`` in the target vocabulary.
        lr: learning rate of the Adam optimizer.

    Shape:
        ``forward(src (B, S), tgt_input (B, T), src_valid_len (B,))``
        returns logits (B, T, V).
    """

    def __init__(self, encoder, decoder, tgt_pad, lr=0.005):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.tgt_pad, self.lr = tgt_pad, lr

    def forward(self, src, tgt_input, src_valid_len=None):
        _check_ids(tgt_input, "tgt_input")
        enc_outputs = self.encoder(src, src_valid_len)
        state = self.decoder.init_state(enc_outputs, src_valid_len)
        return self.decoder(tgt_input, state)[0]

    def loss(self, Y_hat, Y):
        """Mean cross-entropy over the label positions that are not pad.

        Shape:
            Y_hat (B, T, V) logits; Y (B, T) labels.  Returns a scalar.
        """
        if Y_hat.shape[:-1] != Y.shape:
            raise ValueError(f"logits {tuple(Y_hat.shape)} do not match "
                             f"labels {tuple(Y.shape)}: expected (B, T, V) "
                             f"and (B, T)")
        mask = Y != self.tgt_pad  # (B, T)
        if not mask.any():
            raise ValueError("every label is <pad>: nothing to average")
        return F.cross_entropy(Y_hat[mask], Y[mask])

    def training_step(self, batch):
        """Return ``(loss, num_tokens)`` for a batch
        ``(src, tgt_input, src_valid_len, label)``.

        The loss equals ``self.loss(self(src, tgt_input, src_valid_len),
        label)``, but the decoder runs only as far as each label goes
        and the output layer only sees the R non-pad positions.
        """
        src, tgt_input, src_valid_len, label = batch
        _check_ids(label, "label")
        mask = label != self.tgt_pad  # (B, T)
        lengths = mask.sum(dim=1)  # (B,)
        num_tokens = int(lengths.sum())
        if num_tokens == 0:
            raise ValueError("every label is <pad>: nothing to average")
        steps = torch.arange(label.shape[1], device=label.device)
        packable = hasattr(self.decoder, "forward_packed") and \
            torch.equal(mask, steps < lengths[:, None])
        if not packable:  # a pad inside a label, or a custom decoder
            Y_hat = self(src, tgt_input, src_valid_len)
            return self.loss(Y_hat, label), num_tokens
        # Longest label first, empty labels dropped: at step t the rows
        # still inside their label are the first ones (packed order).
        order = lengths.argsort(descending=True)[:int((lengths > 0).sum())]
        src, tgt_input, label = src[order], tgt_input[order], label[order]
        if src_valid_len is not None:
            src_valid_len = src_valid_len[order]
            if getattr(self.encoder, "pack", False):
                # Columns past the longest source are padding in every
                # row: a packed encoder and masked attention ignore them.
                src = src[:, :max(int(src_valid_len.max()), 1)]
        enc_outputs = self.encoder(src, src_valid_len)
        state = self.decoder.init_state(enc_outputs, src_valid_len)
        features = self.decoder.forward_packed(tgt_input, state,
                                               lengths[order])  # (R, D)
        targets = label.t()[mask[order].t()]  # (R,) in the same order
        loss = F.cross_entropy(self.decoder.dense(features), targets)
        return loss, num_tokens

    def validation_step(self, batch):
        """Like ``training_step``, without building a graph."""
        with torch.no_grad():
            return self.training_step(batch)

    def configure_optimizers(self):
        """Adam; the fused kernel (one per tensor) on CPU and CUDA."""
        params = list(self.parameters())
        fused = all(p.device.type in ("cpu", "cuda") for p in params)
        return torch.optim.Adam(params, lr=self.lr, fused=fused)
