"""Speed changes measured against d2lmini's code, side by side.

Usage::

    python benchmarks/speedups.py [--rounds 20] [--threads 2]

Each candidate is kept here, next to the code of d2lmini it would
replace, so that both run in the same process on the same inputs and
weights; a candidate that lands leaves the code it replaced here.  A
change to the package's training code retrains every model of the
chapter (the checkpoint cache fingerprints that code), so a candidate
earns its place by what it saves a reader, not by a micro-benchmark
alone.

- ``encoder``: a packed encoder that runs its own GRU loop (one input
  projection per layer over every valid token, the steps on the rows
  still inside their source, as ``Seq2SeqDecoder.forward_packed``
  does), against ``Seq2SeqEncoder``, which runs ``nn.GRU`` on a
  ``PackedSequence``; at the book's sizes (embed 256, 2 layers, dropout
  0.2) and the chapter's (embed 128, 1 layer); batch 128, hidden 256,
  sources of 2 to 9 tokens.  It handles the encoder's own GRU only (one
  direction, with biases): in the package, any other module put in
  ``rnn`` (the Bahdanau section's exercises use an ``nn.LSTM`` and a
  bidirectional GRU) would keep the ``PackedSequence`` path.
- ``attention`` (landed in d2lmini, timed against the code it
  replaced): ``MultiHeadAttention`` returning its weights, whose
  ``masked_softmax`` runs the same steps whatever the scores are
  (clamp, where, softmax, a zero fill of every masked key: no
  device-to-host sync, one graph for ``torch.compile``), against the
  code of b84d3fc, which read the scores on the host to skip the clamp
  and the zero fill when they were not needed; both divide the smaller
  of queries and scores by sqrt(d).  At B=32, L=S=128, D=256, 8 heads,
  and at a decoder step (B=128, L=1, S=9).

Each case times forward + backward, the two versions taking turns (the
first of a pair alternating), and prints the median time of each and
the median and quartiles of the per-pair ratio new / old (below 1 means
the new code is faster; new is the candidate, or the package's code
where the change has landed).  It first checks that both give the
same numbers.  Not a test: numbers depend on the machine.
"""

import argparse
import copy
import math
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

from d2lmini.attention import (
    DotProductAttention,
    _check_qkv,
    _scores_mask,
)
from d2lmini.multihead import MultiHeadAttention
from d2lmini.seq2seq import Seq2SeqEncoder, _gru_layer, _pack_ids
from d2lmini.utils import set_seed

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention import seconds_per_call  # noqa: E402  (attention.py)


def packed_loop_encoder(encoder, X, src_valid_len):
    """The candidate: ``encoder``'s GRU run by hand on the valid
    tokens, longest source first; returns what ``encoder`` returns."""
    rnn = encoder.rnn
    order = src_valid_len.argsort(descending=True, stable=True)
    lens = src_valid_len[order]
    ids, _, sizes = _pack_ids(X[order], lens)
    x = encoder.embedding(ids)  # (N, E), time-major
    h0 = x.new_zeros(len(X), rnn.hidden_size)
    # Step t starts at offsets[t]; row i of the sorted batch is the
    # i-th row of each of its steps, so its last output is here:
    steps = torch.tensor(sizes)
    offsets = steps.cumsum(0) - steps
    last = offsets[lens - 1] + torch.arange(len(X))
    finals = []
    for layer, (w_ih, w_hh, b_ih, b_hh) in enumerate(rnn.all_weights):
        if layer:
            x = F.dropout(x, rnn.dropout, encoder.training)
        x = _gru_layer(F.linear(x, w_ih, b_ih), h0, w_hh, b_hh, sizes)
        finals.append(x[last])  # (B, D), sorted
    unsort = order.argsort()
    packed = PackedSequence(x, steps, order, unsort)
    outputs, _ = pad_packed_sequence(packed, batch_first=True,
                                     total_length=X.shape[1])
    return outputs, torch.stack(finals)[:, unsort]


def previous_masked_softmax(X, valid_lens=None, *, mask=None):
    """``masked_softmax`` as it was at b84d3fc, with two branches on the
    scores' values (its checks of ``X`` left out: the inputs here are
    valid)."""
    mask = _scores_mask(valid_lens, mask, X.shape, X.device)
    if mask is None:
        return F.softmax(X, dim=-1)
    mask = mask.view(mask.shape[:1] + (1,) * (X.dim() - 3)
                     + mask.shape[1:]) if X.dim() > 2 else mask[:, 0]
    low = torch.finfo(X.dtype).min
    masked = ~mask
    if (X < low / 2).any():  # a device-to-host sync on a GPU
        X = X.clamp_min(low / 2)
    weights = F.softmax(X.masked_fill(masked, low), dim=-1)
    if masked.all(dim=-1).any():  # and another
        weights = weights.masked_fill(masked, 0.0)
    return weights


class PreviousDotProductAttention(DotProductAttention):
    """``DotProductAttention`` with weights, as it was at b84d3fc."""

    def forward(self, queries, keys, values, valid_lens=None,
                need_weights=True, *, mask=None, return_weights=False):
        _check_qkv(queries, keys, values)
        d = queries.shape[-1]
        if d < keys.shape[1]:
            scores = (queries / math.sqrt(d)) @ keys.transpose(1, 2)
        else:
            scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
        weights = previous_masked_softmax(scores, valid_lens, mask=mask)
        out = self.dropout(weights) @ values
        self.attention_weights = weights
        return (out, weights) if return_weights else out


def encoder_case(embed, layers):
    set_seed(0)
    B, S = 128, 9
    encoder = Seq2SeqEncoder(2000, embed, 256, layers,
                             dropout=0.2 if layers > 1 else 0.0)
    X = torch.randint(3, 2000, (B, S))
    lens = torch.randint(2, S + 1, (B,))

    def run(forward):
        def step():
            outputs, state = forward(X, lens)
            (outputs.square().sum() + state.sum()).backward()
        return step

    encoder.eval()  # the same numbers: no dropout while checking
    with torch.no_grad():
        for a, b in zip(packed_loop_encoder(encoder, X, lens),
                        encoder(X, lens)):
            torch.testing.assert_close(a, b)
    encoder.train()
    return (run(lambda X, lens: packed_loop_encoder(encoder, X, lens)),
            run(encoder))


def attention_case(B, L, S):
    set_seed(0)
    D, h = 256, 8
    new = MultiHeadAttention(D, h)
    old = copy.deepcopy(new)
    old.attention = PreviousDotProductAttention()
    q = torch.randn(B, L, D, requires_grad=True)
    kv = torch.randn(B, S, D, requires_grad=True)
    lens = torch.randint(1, S + 1, (B,))  # no row without a valid key
    torch.testing.assert_close(new(q, kv, kv, lens), old(q, kv, kv, lens))

    def run(layer):
        def step():
            layer(q, kv, kv, lens).sum().backward()
        return step

    return run(new), run(old)


CASES = {
    "encoder, book (embed 256, 2 layers)": lambda: encoder_case(256, 2),
    "encoder, chapter (embed 128, 1 layer)": lambda: encoder_case(128, 1),
    "attention with weights, B=32, L=S=128":
        lambda: attention_case(32, 128, 128),
    "attention with weights, decoder step": lambda: attention_case(128, 1, 9),
}


def compare(new, old, rounds, number):
    """Median ms of each and the per-pair ratios new / old."""
    for fn in (new, old):
        seconds_per_call(fn, 2)
    times, ratios = {"new": [], "old": []}, []
    for i in range(rounds):
        pair = (("new", new), ("old", old)) if i % 2 else \
            (("old", old), ("new", new))
        got = {name: seconds_per_call(fn, number)
               for name, fn in pair}
        for name, t in got.items():
            times[name].append(t)
        ratios.append(got["new"] / got["old"])
    return ({k: 1000 * statistics.median(v) for k, v in times.items()},
            ratios)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"forward + backward, {args.rounds} pairs of runs")
    print(f"{'case':40} {'new ms':>8} {'old ms':>8} "
          f"{'new / old':>9} {'quartiles':>13}")
    for name, case in CASES.items():
        new, old = case()
        number = 2 if "L=S=128" in name else 5
        ms, ratios = compare(new, old, args.rounds, number)
        q1, med, q3 = statistics.quantiles(ratios, n=4)
        print(f"{name:40} {ms['new']:8.2f} {ms['old']:8.2f} "
              f"{statistics.median(ratios):9.3f} {q1:6.3f}-{q3:.3f}")


if __name__ == "__main__":
    main()
