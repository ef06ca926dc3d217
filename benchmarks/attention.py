"""Speed of d2lmini's MultiHeadAttention against torch.nn.MultiheadAttention.

Measures forward + backward time of both layers, holding the same weights,
in the same run, interleaved, and prints the ratio d2lmini / PyTorch
(below 1 means d2lmini is faster).  Not a test: numbers depend on the
machine.  Run with ``make benchmark`` or ``python benchmarks/attention.py``.
"""

import argparse
import statistics
import time

import torch
from torch import nn

from d2lmini.attention import valid_mask
from d2lmini.multihead import MultiHeadAttention
from d2lmini.utils import set_seed

SHAPES = {  # name: (B, L, S, D, h)
    "decoder step (B=128, L=1, S=9)": (128, 1, 9, 256, 8),
    "long (B=32, L=S=128)": (32, 128, 128, 256, 8),
}


def make_pair(D, h):
    """d2lmini's layer and PyTorch's, holding the same weights."""
    ours = MultiHeadAttention(D, h, dropout=0.0)
    ref = nn.MultiheadAttention(D, h, bias=False, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat(
            [ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        ref.out_proj.weight.copy_(ours.W_o.weight)
    return ours, ref


def step_fns(B, L, S, D, h, need_weights):
    """Two closures running one forward + backward pass each."""
    ours, ref = make_pair(D, h)
    q = torch.randn(B, L, D, requires_grad=True)
    kv = torch.randn(B, S, D, requires_grad=True)
    lens = torch.randint(1, S + 1, (B,))
    padding = ~valid_mask(lens, S)[:, 0]  # True = ignore, for PyTorch

    def run_ours():
        out = ours(q, kv, kv, lens, need_weights=need_weights)
        out.sum().backward()

    def run_ref():
        out, _ = ref(q, kv, kv, key_padding_mask=padding,
                     need_weights=need_weights, average_attn_weights=False)
        out.sum().backward()

    return run_ours, run_ref


def seconds_per_call(fn, number):
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def compare(run_ours, run_ref, rounds, number):
    """Median time per call of each, measured in alternating rounds."""
    for fn in (run_ours, run_ref):  # warm up allocator and kernels
        seconds_per_call(fn, 3)
    ours, ref = [], []
    for _ in range(rounds):
        ours.append(seconds_per_call(run_ours, number))
        ref.append(seconds_per_call(run_ref, number))
    return statistics.median(ours), statistics.median(ref)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true",
                        help="few rounds, to check that the script runs")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    set_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          "forward + backward, median of "
          f"{rounds} interleaved rounds")
    print(f"{'shape':32} {'weights':>7} {'d2lmini ms':>10} "
          f"{'PyTorch ms':>10} {'ratio':>6}")
    for name, (B, L, S, D, h) in SHAPES.items():
        number = 20 if L == 1 else 3
        for need_weights in (False, True):
            ours, ref = compare(*step_fns(B, L, S, D, h, need_weights),
                                rounds, 1 if args.quick else number)
            print(f"{name:32} {'yes' if need_weights else 'no':>7} "
                  f"{ours * 1e3:10.3f} {ref * 1e3:10.3f} "
                  f"{ours / ref:6.2f}")


if __name__ == "__main__":
    main()
