"""Training time per step of the chapter's decoders, as ratios.

Usage::

    python benchmarks/step_time.py [--steps 40] [--repeats 5]

Builds each decoder of the chapter's recipe (additive attention, 8-head
and 1-head multi-head attention, no attention), and times ``--steps``
training steps (forward, backward, gradient clipping, Adam step) on the
same batches, after 5 warm-up steps.  The kinds take turns, ``--repeats``
rounds, so that a busy moment of the machine hits all of them; the table
gives the median milliseconds per step and each kind's ratio to the
model without attention, measured in the same run.

The Bahdanau section trains its no-attention baseline for the number of
steps that takes as long as the attention model's 1,000: 1,000 times the
additive/none ratio printed here (``EQUAL_TIME_STEPS`` there).
Needs the corpus (``D2LMINI_DATA_DIR``); about 2 minutes on 2 CPU cores.
"""

import argparse
import itertools
import statistics
import time

import torch

from d2lmini.experiment import CHAPTER_RECIPE, build_data, build_model
from d2lmini.utils import set_seed

KINDS = {"additive": CHAPTER_RECIPE,
         "multihead-8": CHAPTER_RECIPE.replace(attention="multihead"),
         "multihead-1": CHAPTER_RECIPE.replace(attention="multihead",
                                               num_heads=1),
         "none": CHAPTER_RECIPE.replace(attention="none")}
WARMUP = 5


def time_steps(model, batches):
    """Seconds per step over ``batches`` (after the warm-up ones)."""
    model.train()
    optimizer = model.configure_optimizers()
    start = None
    for i, batch in enumerate(batches):
        if i == WARMUP:
            start = time.perf_counter()
        loss, _ = model.training_step(batch)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return (time.perf_counter() - start) / (len(batches) - WARMUP)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    data = build_data(CHAPTER_RECIPE)
    batches = list(itertools.islice(data.train_dataloader(),
                                    WARMUP + args.steps))
    times = {kind: [] for kind in KINDS}
    for _ in range(args.repeats):
        for kind, recipe in KINDS.items():
            set_seed(0)
            times[kind].append(time_steps(build_model(recipe, data),
                                          batches))
    base = statistics.median(times["none"])
    print(f"{args.steps} steps of the chapter's recipe, median of "
          f"{args.repeats} interleaved rounds:")
    print(f"{'decoder':>12} {'ms/step':>8} {'min':>6} {'max':>6} "
          f"{'/ none':>7}")
    for kind, seconds in times.items():
        med = statistics.median(seconds)
        print(f"{kind:>12} {1000 * med:8.1f} {1000 * min(seconds):6.1f} "
              f"{1000 * max(seconds):6.1f} {med / base:7.3f}")
    add_ms = round(1000 * statistics.median(times["additive"]), 1)
    none_ms = round(1000 * base, 1)
    print(f"equal time: 1000 x {add_ms} / {none_ms} = "
          f"{round(1000 * add_ms / none_ms)} steps without attention take "
          "as long as the additive model's 1000 (the printed medians, as "
          "the Bahdanau section computes it)")


if __name__ == "__main__":
    main()
