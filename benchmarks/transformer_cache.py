"""Greedy decoding with the Transformer decoder: with and without the
key/value cache.

Usage::

    python benchmarks/transformer_cache.py [--repeats 5]

An untrained ``d2lmini.transformer`` model of the sizes of
``TRANSFORMER_RECIPE`` (D = 128, 4 heads, 2 blocks, FFN 512), with
vocabularies of 4,000, decodes a
batch of 32 source sentences of 10 tokens for 10 and for 40 steps: once
feeding only the new token to ``TransformerDecoder`` with its cache of
projected keys and values, once recomputing the whole prefix at every
step (both project the encoder outputs once).  The two give the same
tokens (checked here, and in tests/test_transformer.py); the table gives
the median seconds of ``--repeats`` runs, measured in the same process,
and their ratio.
"""

import argparse
import statistics
import time

import torch

from d2lmini.experiment import TRANSFORMER_RECIPE as R
from d2lmini.transformer import TransformerDecoder, TransformerEncoder

D, FFN, HEADS, BLOCKS = (R.num_hiddens, R.ffn_num_hiddens, R.num_heads,
                         R.num_layers)
V = 4000


def decode(dec, memory, lens, steps, cached):
    Y = torch.zeros(len(memory), 1, dtype=torch.long)  # <bos> = 0
    # Both ways project the encoder outputs once (init_state); they
    # differ in the decoder's self-attention only.
    start = state = dec.init_state(memory, lens)
    out = []
    for _ in range(steps):
        if cached:
            logits, state = dec(Y[:, -1:], state)
        else:
            logits, _ = dec(Y, start)  # the whole prefix again
        Y = torch.cat([Y, logits[:, -1:].argmax(-1)], dim=1)
        out.append(Y[:, -1])
    return torch.stack(out, 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    torch.manual_seed(0)
    enc = TransformerEncoder(V, D, FFN, HEADS, BLOCKS).eval()
    dec = TransformerDecoder(V, D, FFN, HEADS, BLOCKS, max_len=64).eval()
    src = torch.randint(0, V, (32, 10))
    lens = torch.full((32,), 10)
    with torch.no_grad():
        memory = enc(src, lens)
        print(f"{'steps':>5} {'cache s':>8} {'recompute s':>11} {'ratio':>6}")
        for steps in (10, 40):
            times = {True: [], False: []}
            for _ in range(args.repeats):
                for cached in (True, False):
                    start = time.perf_counter()
                    tokens = decode(dec, memory, lens, steps, cached)
                    times[cached].append(time.perf_counter() - start)
                    if cached:
                        with_cache = tokens
                    else:
                        assert torch.equal(tokens, with_cache)
            a, b = (statistics.median(times[c]) for c in (True, False))
            print(f"{steps:5d} {a:8.3f} {b:11.3f} {b / a:6.2f}")


if __name__ == "__main__":
    main()
