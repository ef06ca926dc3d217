"""Data-parallel training on this machine: one process against two.

Usage::

    python benchmarks/ddp.py [--steps 150] [--out FILE]

Trains the pretraining section's French language model for ``--steps``
steps (the same global batches of 128 sentences) as one process with
as many threads as this machine has cores, as one process with one
thread, and as two ``torchrun`` processes (gloo) of one thread each,
and prints each run's training tokens per second as a ratio to the
first.  Each run starts from an empty model cache (so it trains) in a
job of its own.  A CPU's cores are shared by every process on it: two
processes on two cores hold the same arithmetic as one process with two
threads, plus an all-reduce of the gradients at every step, so this
measures what data parallelism costs, not what it gains on GPUs.
About 2 minutes on 2 cores.  Writes ``benchmarks/results/ddp.json``.
"""

import argparse
import json
import os
from pathlib import Path

from d2lmini.train import equivalence, throughput
from d2lmini.utils import machine

ROOT = Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"
                                             / "ddp.json"))
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    settings = [(1, cores), (1, 1), (2, 1)]
    runs = []
    for nproc, threads in settings:
        run = throughput(nproc, threads, args.steps)
        runs.append({k: run[k] for k in (
            "processes", "threads", "steps", "seconds", "tokens",
            "tokens_per_second")})
    reference = runs[0]["tokens_per_second"]
    for run in runs:
        run["ratio"] = run["tokens_per_second"] / reference
        print(f"{run['processes']} process(es) x {run['threads']} "
              f"thread(s): {run['tokens_per_second']:,.0f} tokens/s "
              f"({run['ratio']:.2f} x the first)")
    one, two, (gap, name) = equivalence()
    print(f"6 steps, 1 against 2 processes: largest weight gap {gap:.1e} "
          f"({name})")
    result = {"machine": {**machine(), "cores": cores}, "runs": runs,
              "equivalence": {
                  "steps": len(one["train_loss"]), "weight_gap": gap,
                  "at": name, "train_loss_1": one["train_loss"],
                  "train_loss_2": two["train_loss"]}}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
