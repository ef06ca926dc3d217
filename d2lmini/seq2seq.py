"""GRU encoder-decoder models for translation, with and without attention.

Shape legend for every comment and docstring in this module:
    B  batch size       S  source steps (the keys)   T  target steps
    E  embed_size       D  num_hiddens               V  vocabulary size
    h  attention heads  N  non-pad target tokens of a batch

Tensors are batch-first, (B, T, ...), unlike d2l's time-major encoder
output; GRU states are (num_layers, B, D) as in PyTorch.  Every decoder
has ``init_state(enc_outputs, enc_valid_lens)``, ``forward(X, state)``
and ``forward_packed(X, state, lengths)``, which computes the top-layer
features of the non-pad target positions only (the fast training path).
"""

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .attention import AdditiveAttention, MultiHeadAttention

__all__ = [
    "AttentionState", "Decoded", "DecoderState", "Seq2Seq",
    "Seq2SeqAttentionDecoder", "Seq2SeqDecoder", "Seq2SeqEncoder",
    "Translation", "greedy_decode", "init_seq2seq", "translate",
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


def _check_lens(valid_len, X, name):
    """Raise unless valid_len is (B,) with values in [1, T] for X (B, T)."""
    if not torch.is_tensor(valid_len) or valid_len.shape != X.shape[:1]:
        raise ValueError(f"{name} must be a tensor of shape "
                         f"{(X.shape[0],)}, got "
                         f"{tuple(getattr(valid_len, 'shape', ()))}")
    if len(valid_len) and not (1 <= valid_len.min()
                               and valid_len.max() <= X.shape[1]):
        raise ValueError(f"{name} must lie in [1, {X.shape[1]}] (every "
                         f"sequence ends with <eos>), got {valid_len}")


class Seq2SeqEncoder(nn.Module):
    """Embedding + multi-layer GRU over the source tokens.

    Args:
        vocab_size, embed_size, num_hiddens, num_layers: V, E, D and the
            number of GRU layers.
        dropout: dropout between GRU layers (as in d2l).
        pack: skip the padding (packed sequences) when ``valid_len`` is
            given.  The final state is then the state after each
            sentence's own last token, so a translation does not depend
            on how much padding its batch has.  ``pack=False`` runs over
            the pads, as d2l does.

    Shape:
        X (B, S) ids; valid_len (B,) or None.  Returns ``(outputs, state)``:
        outputs (B, S, D), zero at padding when packed; state
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

    def forward(self, X, valid_len=None):
        _check_ids(X, "X")
        embs = self.embedding(X)  # (B, S, E)
        if not self.pack or valid_len is None:
            return self.rnn(embs)
        _check_lens(valid_len, X, "valid_len")
        packed = pack_padded_sequence(embs, valid_len.cpu(), batch_first=True,
                                      enforce_sorted=False)
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

    Returns the ids (N,) and their rows (N,), time-major: all rows at
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
        gates_x (N, 3D) = W_ih x + b_ih, packed; h (B, D) initial state;
        sizes: rows per step.  Returns the outputs (N, D), packed.
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
    return torch.cat(outputs)  # (N, D)


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

    def init_state(self, enc_outputs, enc_valid_lens=None):
        """Start from the encoder's final state; ``enc_valid_lens`` unused."""
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
        computed once per row, not once per step.

        Args:
            X: (B, T) input ids.
            state: from ``init_state``.
            lengths: (B,) numbers of steps to run, sorted in decreasing
                order, each in [1, T].

        Returns:
            (N, D) features, time-major: all rows at step 0, then the
            rows still running at step 1, ... (PyTorch's packed order).
        """
        ids, rows, sizes = _pack_ids(X, lengths)
        x = self.embedding(ids)  # (N, E)
        E = x.shape[1]
        for layer, weights in enumerate(self.rnn.all_weights):
            w_ih, w_hh, b_ih, b_hh = weights
            if layer == 0:  # input [x; context], the context fixed per row
                per_row = F.linear(state.context, w_ih[:, E:], b_ih)
                gates_x = F.linear(x, w_ih[:, :E]) \
                    + per_row.index_select(0, rows)  # (N, 3D)
            else:
                x = F.dropout(x, self.rnn.dropout, self.training)
                gates_x = F.linear(x, w_ih, b_ih)
            x = _gru_layer(gates_x, state.hidden[layer], w_hh, b_hh, sizes)
        return x  # (N, D)


class AttentionState(NamedTuple):
    """State of ``Seq2SeqAttentionDecoder``.

    enc_outputs (B, S, D); hidden (num_layers, B, D); valid_lens (B,) or
    None; memory: the attention's ``precompute(enc_outputs, enc_outputs)``.
    """

    enc_outputs: torch.Tensor
    hidden: torch.Tensor
    valid_lens: torch.Tensor
    memory: object


class Seq2SeqAttentionDecoder(nn.Module):
    """GRU decoder with Bahdanau-style attention over the encoder outputs.

    At each step the query is the previous top-layer state; the context
    (attention over the encoder outputs, padding masked) is concatenated
    with the input embedding and fed to the GRU.  Keys and values are
    projected once per sequence, in ``init_state``.

    Args:
        vocab_size, embed_size, num_hiddens, num_layers: V, E, D and the
            number of GRU layers.
        dropout: dropout between GRU layers and, for the default
            attention, on the attention weights.
        attention: a module with ``precompute(keys, values)`` and
            ``forward(queries, keys, values, valid_lens, memory=...)``
            returning D features; None means
            ``AdditiveAttention(num_hiddens, dropout)``.  For example
            ``MultiHeadAttention(num_hiddens, 8, dropout)``.

    Shape:
        ``forward(X, state)``: X (B, T) ids -> logits (B, T, V) and the
        new state.  ``attention_weights`` then lists the T steps'
        weights, each (B, 1, S), or (B, h, 1, S) for multi-head.
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

    def init_state(self, enc_outputs, enc_valid_lens=None):
        outputs, hidden = enc_outputs  # (B, S, D), (num_layers, B, D)
        memory = self.attention.precompute(outputs, outputs)
        return AttentionState(outputs, hidden, enc_valid_lens, memory)

    def _attend(self, query, state):
        """Context (n, D) for the queries (n, D) of the first n rows."""
        memory, valid_lens, n = state.memory, state.valid_lens, len(query)
        if n < len(state.enc_outputs):  # rows whose targets have ended
            memory = _first_rows(memory, n, len(state.enc_outputs))
            valid_lens = None if valid_lens is None else valid_lens[:n]
        context = self.attention(query.unsqueeze(1), None, None,
                                 valid_lens, memory=memory)  # (n, 1, D)
        return context.squeeze(1)

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
        """Decode step by step; embs: per step (n, E), n not increasing."""
        outputs, self._attention_weights = [], []
        for x in embs:
            if len(x) < len(hs[0]):
                hs = [h[:len(x)] for h in hs]  # the rows still running
            context = self._attend(hs[-1], state)  # (n, D)
            hs = self._step(torch.cat((context, x), dim=-1), hs)
            outputs.append(hs[-1])
            self._attention_weights.append(self.attention.attention_weights)
        return outputs, hs

    def forward(self, X, state):
        embs = self.embedding(X).unbind(1)  # T x (B, E)
        outputs, hs = self._run(embs, list(state.hidden.unbind(0)), state)
        logits = self.dense(torch.stack(outputs, dim=1))  # (B, T, V)
        return logits, state._replace(hidden=torch.stack(hs))

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
            outputs, _ = self._run(self.embedding(X).unbind(1),
                                   list(state.hidden.unbind(0)), state)
            return pack_padded_sequence(torch.stack(outputs, dim=1),
                                        lengths.cpu(), batch_first=True).data
        ids, _, sizes = _pack_ids(X, lengths)
        embs = self.embedding(ids).split(sizes)  # T' x (n, E)
        outputs, _ = self._run(embs, list(state.hidden.unbind(0)), state)
        return torch.cat(outputs)  # (N, D)


def _first_rows(memory, n, B):
    """The memory of the first n of B examples.

    Both attention modules of ``d2lmini.attention`` keep tensors whose
    first axis is the batch, or batch x heads with the batch outermost.
    """
    return tuple(m[:n * (len(m) // B)] for m in memory)


class Seq2Seq(nn.Module):
    """Encoder-decoder trained with a cross-entropy that ignores padding.

    Args:
        encoder: e.g. ``Seq2SeqEncoder``; called as ``encoder(src,
            src_valid_len)``.
        decoder: ``Seq2SeqDecoder`` or ``Seq2SeqAttentionDecoder``.
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
        and the output layer only sees the N non-pad positions.
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
                                               lengths[order])  # (N, D)
        targets = label.t()[mask[order].t()]  # (N,) in the same order
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


class Decoded(NamedTuple):
    """Greedy output of one sentence.

    ids: the output ids, cut before the first ``<eos>`` (excluded).
    attention: (steps, S_valid), or (h, steps, S_valid) for multi-head;
        one row per decoding step, including the step that emitted
        ``<eos>``, so ``steps = len(ids) + finished``; the columns are
        the source's valid positions; on the CPU.  None without
        attention.
    finished: whether ``<eos>`` was emitted within ``max_len`` steps.
    """

    ids: list
    attention: torch.Tensor
    finished: bool


def greedy_decode(model, src, src_valid_len, bos, eos, max_len):
    """Translate a batch greedily, stopping each sentence at ``<eos>``.

    Runs in eval mode under ``torch.no_grad()`` and then restores every
    submodule's train/eval mode.  Stops early once every sentence has
    emitted ``<eos>``.

    Args:
        model: a ``Seq2Seq``.
        src: (B, S) source ids; src_valid_len: (B,) or None.
        bos, eos: ids of ``<bos>`` and ``<eos>`` in the target vocab.
        max_len: the most steps to decode (>= 1).

    Returns:
        A list of B ``Decoded``.
    """
    _check_ids(src, "src")
    if isinstance(max_len, bool) or not isinstance(max_len, int) \
            or max_len < 1:
        raise ValueError(f"max_len must be an int >= 1, got {max_len!r}")
    modes = [(m, m.training) for m in model.modules()]
    device = next(model.parameters()).device
    src = src.to(device)
    if src_valid_len is not None:
        src_valid_len = src_valid_len.to(device)
    model.eval()
    try:
        with torch.no_grad():
            state = model.decoder.init_state(
                model.encoder(src, src_valid_len), src_valid_len)
            Y = torch.full((len(src), 1), bos, device=device)  # (B, 1)
            done = torch.zeros(len(src), dtype=torch.bool, device=device)
            outputs, weights = [], []
            for _ in range(max_len):
                logits, state = model.decoder(Y, state)  # (B, 1, V)
                Y = logits.argmax(dim=-1)  # (B, 1)
                outputs.append(Y[:, 0])
                if hasattr(model.decoder, "attention_weights"):
                    # (B, 1, S) or (B, h, 1, S) -> (B, S) or (B, h, S)
                    weights.append(
                        model.decoder.attention_weights[-1].squeeze(-2))
                done |= Y[:, 0] == eos
                if done.all():
                    break
    finally:
        for m, training in modes:
            m.training = training
    ids = torch.stack(outputs, dim=1).tolist()  # (B, steps)
    if weights:  # (B, steps, S) or (B, h, steps, S)
        weights = torch.stack(weights, dim=-2).cpu()
    S = src.shape[1] if src_valid_len is None else src_valid_len.tolist()
    results = []
    for i, row in enumerate(ids):
        finished = eos in row
        n = row.index(eos) if finished else len(row)
        attention = None
        if len(weights):
            s = S if isinstance(S, int) else S[i]
            attention = weights[i, ..., :n + finished, :s]
        results.append(Decoded(row[:n], attention, finished))
    return results


@dataclass
class Translation:
    """One sentence translated by ``translate``.

    ``src_tokens`` are the source tokens the model saw (with ``<eos>``);
    ``tokens`` the output without ``<eos>``; ``out_tokens`` labels the
    rows of ``attention`` (``tokens`` plus ``<eos>`` when emitted), and
    ``src_tokens`` its columns.
    """

    src_tokens: list
    tokens: list
    out_tokens: list
    attention: torch.Tensor

    @property
    def text(self):
        return " ".join(self.tokens)


def translate(model, data, sentences, max_len=None):
    """Translate sentences with greedy decoding.

    Args:
        model: a trained ``Seq2Seq``.
        data: has ``build(sentences)`` returning ``(src, _, src_valid_len,
            _)``, ``src_vocab``, ``tgt_vocab`` and ``num_steps`` (the
            ``MTFraEng`` of ``d2lmini.data``).
        sentences: a list of source strings.
        max_len: the most output steps; default ``data.num_steps``.

    Returns:
        A list of ``Translation``.
    """
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of strings, not a "
                        "string; wrap it: [sentence]")
    src, _, src_valid_len, _ = data.build(list(sentences))
    vocab = data.tgt_vocab
    max_len = data.num_steps if max_len is None else max_len
    decoded = greedy_decode(model, src, src_valid_len, vocab.bos,
                            vocab.eos, max_len)
    results = []
    for row, n, out in zip(src.tolist(), src_valid_len.tolist(), decoded):
        out_ids = out.ids + [vocab.eos] * out.finished
        out_tokens = vocab.to_tokens(out_ids)
        results.append(Translation(data.src_vocab.to_tokens(row[:n]),
                                   out_tokens[:len(out.ids)], out_tokens,
                                   out.attention))
    return results
