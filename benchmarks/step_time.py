"""Training time per step and throughput of the chapter's models, as
ratios.

Usage::

    python benchmarks/step_time.py [--steps 40] [--repeats 5] [--out FILE]

Builds each decoder of the chapter's recipe (additive attention, 8-head
and 1-head multi-head attention, no attention) and the Transformer of
``TRANSFORMER_RECIPE``, and times ``--steps`` training steps (forward,
backward, gradient clipping, Adam step) on the same batches, after 5
warm-up steps.  The kinds take turns, ``--repeats`` rounds, so that a
busy moment of the machine hits all of them; the table gives each
model's parameters, the median milliseconds per step, the target tokens
trained per second (non-pad labels of those batches over the median
time) and each kind's time ratio to the model without attention and to
the additive one, measured in the same run.

The equal-time step counts it prints (1,000 times the additive/none
ratio of the medians, and the same for the Transformer) are this
machine's.  The notebooks do not read them: they time their two models
where they run (``d2lmini.timing.equal_time_steps``), and quote
``benchmarks/results/step_time.json`` as one other machine's numbers.
Needs the corpus (``D2LMINI_DATA_DIR``); about 3 minutes on 2 CPU cores.
"""

import argparse
import itertools
import json
import statistics
from pathlib import Path

import torch

from d2lmini.experiment import (
    CHAPTER_RECIPE,
    TRANSFORMER_RECIPE,
    build_data,
    build_model,
)
from d2lmini.timing import WARMUP, seconds_per_step
from d2lmini.utils import machine, set_seed

RESULTS = Path(__file__).resolve().parent / "results" / "step_time.json"

KINDS = {"additive": CHAPTER_RECIPE,
         "multihead-8": CHAPTER_RECIPE.replace(attention="multihead"),
         "multihead-1": CHAPTER_RECIPE.replace(attention="multihead",
                                               num_heads=1),
         "none": CHAPTER_RECIPE.replace(attention="none"),
         "transformer": TRANSFORMER_RECIPE}
# One training step, timed as d2lmini.timing.equal_time_steps times it.
time_steps = seconds_per_step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    data = build_data(CHAPTER_RECIPE)
    batches = list(itertools.islice(data.train_dataloader(),
                                    WARMUP + args.steps))
    pad = data.tgt_vocab.pad
    tokens = sum(int((b[3] != pad).sum()) for b in batches[WARMUP:])
    times = {kind: [] for kind in KINDS}
    sizes = {}
    for _ in range(args.repeats):
        for kind, recipe in KINDS.items():
            set_seed(0)
            model = build_model(recipe, data)
            sizes[kind] = sum(p.numel() for p in model.parameters())
            times[kind].append(time_steps(model, batches))
    med = {kind: statistics.median(s) for kind, s in times.items()}
    print(f"{args.steps} steps of the chapter's batches ({tokens:,} target "
          f"tokens), median of {args.repeats} interleaved rounds:")
    print(f"{'model':>12} {'params':>10} {'ms/step':>8} {'min':>6} "
          f"{'max':>6} {'tokens/s':>9} {'/ none':>7} {'/ additive':>10}")
    for kind, seconds in times.items():
        print(f"{kind:>12} {sizes[kind]:10,} {1000 * med[kind]:8.1f} "
              f"{1000 * min(seconds):6.1f} {1000 * max(seconds):6.1f} "
              f"{tokens / args.steps / med[kind]:9,.0f} "
              f"{med[kind] / med['none']:7.3f} "
              f"{med[kind] / med['additive']:10.3f}")
    ms = {kind: round(1000 * m, 1) for kind, m in med.items()}
    equal = {kind: round(1000 * ms["additive"] / ms[kind])
             for kind in ("none", "transformer")}
    for kind, steps in equal.items():
        print(f"equal time: 1000 x {ms['additive']} / {ms[kind]} = "
              f"{steps} steps of {kind} take as long as the additive "
              "model's 1000")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "script": "benchmarks/step_time.py", **machine(),
        "steps": args.steps, "repeats": args.repeats,
        "target_tokens": tokens,
        "median_ms": ms,
        "min_ms": {k: round(1000 * min(v), 1) for k, v in times.items()},
        "max_ms": {k: round(1000 * max(v), 1) for k, v in times.items()},
        "params": sizes,
        "equal_time_steps": equal}, indent=1) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
