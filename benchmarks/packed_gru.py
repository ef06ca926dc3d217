"""Speed of a hand-written packed GRU loop against nn.GRU on a PackedSequence.

The no-attention decoder's training path (``forward_packed``) needs the
top-layer GRU features of the non-pad target positions only.  Two ways
to get them, holding the same weights:

- hand-written: ``Seq2SeqDecoder.forward_packed``, a Python loop over
  the steps of each GRU layer (``_gru_layer``) that drops the rows
  whose targets have ended; the context's share of the first layer's
  input projection is computed once per row, not once per step;
- nn.GRU: ``pack_padded_sequence`` of the inputs [embedding; context],
  then ``nn.GRU`` on the ``PackedSequence`` (PyTorch's own loop).

Measures forward + backward (into the embedding, the context and the
initial state, as in a training step; features only, no output layer)
of both, in the same run, interleaved, at the chapter's setting (batch
128, embed 128, hidden 256, 1 and 2 layers, target lengths 2..11 in
length buckets), and prints the ratio hand-written / nn.GRU (below 1
means the hand-written loop is faster).  It first checks that both give
the same features and gradients.  Not a test: numbers depend on the
machine.  Run ``python benchmarks/packed_gru.py`` (``--quick`` to check
that it runs; ``--threads 1`` on cores that another job also uses,
where two threads spin against it and time mostly the waiting).
"""

import argparse
import statistics
import time

import torch
from torch.nn.utils.rnn import pack_padded_sequence

from d2lmini.seq2seq import DecoderState, Seq2SeqDecoder
from d2lmini.utils import set_seed

B, E, D, V = 128, 128, 256, 100  # the chapter's batch, embed, hidden
BATCHES = {  # name: target lengths of each batch timed as one call
    "bucket T=2": [[2] * B],
    "bucket T=6": [[6] * B],
    "bucket T=11": [[11] * B],
    "unbucketed 2..11": ["random"],
    "10 buckets 2..11": [[t] * B for t in range(2, 12)],
}


def hand_written(decoder, X, state, lengths):
    """d2lmini's hand-written packed path: (N, D) features."""
    return decoder.forward_packed(X, state, lengths)


def torch_gru(decoder, X, state, lengths):
    """nn.GRU on a PackedSequence of [embedding; context]: (N, D)."""
    X = X[:, :int(lengths[0])]  # (B, T')
    embs = decoder.embedding(X)  # (B, T', E)
    context = state.context.unsqueeze(1).expand(-1, X.shape[1], -1)
    packed = pack_padded_sequence(torch.cat((embs, context), dim=-1),
                                  lengths, batch_first=True)
    return decoder.rnn(packed, state.hidden)[0].data  # (N, D)


def make_inputs(layers, batches, gen):
    """A decoder and, per batch, (X, state, lengths, output gradient)."""
    decoder = Seq2SeqDecoder(V, E, D, layers)
    inputs = []
    for lens in batches:
        if lens == "random":
            lens = torch.randint(2, 12, (B,), generator=gen).tolist()
        lengths = torch.tensor(sorted(lens, reverse=True))
        X = torch.randint(0, V, (B, 11), generator=gen)
        state = DecoderState(
            torch.randn(B, D, generator=gen).requires_grad_(),
            torch.randn(layers, B, D, generator=gen).requires_grad_())
        grad = torch.randn(int(lengths.sum()), D, generator=gen)
        inputs.append((X, state, lengths, grad))
    return decoder, inputs


def step_fn(path, decoder, inputs):
    """A closure running forward + backward of every batch once."""
    def run():
        for X, state, lengths, grad in inputs:
            path(decoder, X, state, lengths).backward(grad)
    return run


def check_equal(decoder, inputs):
    """Raise unless both paths give the same features and gradients."""
    leaves = [decoder.embedding.weight, *decoder.rnn.parameters()]
    for X, state, lengths, grad in inputs:
        results = []
        for path in (hand_written, torch_gru):
            out = path(decoder, X, state, lengths)
            results.append((out, *torch.autograd.grad(
                out, [*leaves, *state], grad)))
        for a, b in zip(*results):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def seconds_per_call(fn, number):
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def compare(run_a, run_b, rounds, number):
    """Median time per call of each, measured in alternating rounds."""
    for fn in (run_a, run_b):  # warm up allocator and kernels
        seconds_per_call(fn, 2)
    a, b = [], []
    for _ in range(rounds):
        a.append(seconds_per_call(run_a, number))
        b.append(seconds_per_call(run_b, number))
    return statistics.median(a), statistics.median(b)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=3,
                        help="calls per round (of one batch)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quick", action="store_true",
                        help="few rounds, to check that the script runs")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rounds, number = (3, 1) if args.quick else (args.rounds, args.number)
    set_seed(0)
    gen = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"B={B}, E={E}, D={D}, forward + backward, median of {rounds} "
          f"interleaved rounds of {number} calls")
    print(f"{'layers':>6} {'target lengths':18} {'tokens':>6} "
          f"{'hand ms':>8} {'nn.GRU ms':>9} {'ratio':>6}")
    for layers in (1, 2):
        for name, batches in BATCHES.items():
            decoder, inputs = make_inputs(layers, batches, gen)
            check_equal(decoder, inputs)
            hand, ref = compare(step_fn(hand_written, decoder, inputs),
                                step_fn(torch_gru, decoder, inputs),
                                rounds, max(1, number // len(inputs)))
            tokens = sum(int(x[2].sum()) for x in inputs)
            print(f"{layers:6} {name:18} {tokens:6} {hand * 1e3:8.2f} "
                  f"{ref * 1e3:9.2f} {hand / ref:6.2f}")


if __name__ == "__main__":
    main()
