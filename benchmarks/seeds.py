"""The chapter's comparisons, repeated over seeds.

Usage::

    python benchmarks/seeds.py [--seeds 0 1 2] [--out FILE]

The notebooks train one seed of each model.  This script trains, with
each seed, the seven models that the Bahdanau, multi-head and
Transformer sections compare (the chapter's recipe with additive
attention, with no attention at equal steps and at equal time, with one
head and with eight heads of dot-product attention with query-key
normalisation, as the multi-head section trains them; and
``TRANSFORMER_RECIPE`` at equal steps and at equal time, the step counts
of equal time measured on this machine for each seed by
``d2lmini.timing.equal_time_steps``, as the notebooks measure theirs),
scores each on
the held-out test split, and gives for each seed the six paired
differences of BLEU with their 95 % bootstrap intervals
(``d2lmini.metrics.paired_bootstrap``):

- additive - none, equal steps;
- additive - none, equal time (as many steps of the model without
  attention as take as long as the additive model's 1,000);
- 8 heads - 1 head;
- 1 head - additive;
- Transformer - additive, equal steps;
- Transformer - additive, equal time (as many Transformer steps as take
  as long as the additive model's 1,000).

The seed changes the initialization, the order of the batches and the
split: each seed has its own 1,000 test sentences and its own
vocabularies (``MTFraEng(seed=)`` draws the split too).  The models go
through the checkpoint cache (seed 0 is the notebooks' own recipe), so a
second run only evaluates.  The results go to
``benchmarks/results/seeds.json``, which the notebooks quote.  About 35
minutes on 2 CPU cores from an empty cache.  Needs the corpus
(``D2LMINI_DATA_DIR``).
"""

import argparse
import json
import platform
import statistics
from pathlib import Path

import torch

from d2lmini.cache import train_or_load
from d2lmini.experiment import (
    CHAPTER_RECIPE,
    SEED_OFFSET_VARIABLE,
    TRANSFORMER_RECIPE,
    evaluate,
    seed_offset,
)
from d2lmini.metrics import paired_bootstrap
from d2lmini.timing import equal_time_steps
from d2lmini.utils import machine

ROOT = Path(__file__).resolve().parent.parent
R = CHAPTER_RECIPE
MODELS = {
    "additive": R,
    "none": R.replace(attention="none"),
    "1 head": R.replace(attention="multihead", num_heads=1, qk_norm=True),
    "8 heads": R.replace(attention="multihead", num_heads=8, qk_norm=True),
    "Transformer": TRANSFORMER_RECIPE,
}
# Trained for as long as the additive model's steps take on this machine.
EQUAL_TIME = {"none, equal time": "none",
              "Transformer, equal time": "Transformer"}
COMPARISONS = {
    "additive - none, equal steps": ("additive", "none"),
    "additive - none, equal time": ("additive", "none, equal time"),
    "8 heads - 1 head": ("8 heads", "1 head"),
    "1 head - additive": ("1 head", "additive"),
    "Transformer - additive, equal steps": ("Transformer", "additive"),
    "Transformer - additive, equal time": ("Transformer, equal time",
                                           "additive"),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" /
                        "seeds.json")
    args = parser.parse_args(argv)
    if seed_offset():
        parser.error(f"{SEED_OFFSET_VARIABLE} is set: unset it, the seeds "
                     "given here are the seeds trained")
    torch.set_num_threads(2)
    rows = []
    for seed in args.seeds:
        scored = {}
        models = {name: r.replace(seed=seed) for name, r in MODELS.items()}
        equal = {}
        for name, kind in EQUAL_TIME.items():
            timed = equal_time_steps(models["additive"], models[kind])
            print(f"seed {seed} {name}: {timed}", flush=True)
            equal[name] = timed.steps
            models[name] = models[kind].replace(max_steps=timed.steps)
        for name, recipe in models.items():
            run = train_or_load(recipe, progress=False)
            scored[name] = evaluate(run.model, run.data)
            print(f"seed {seed} {name:23} BLEU {scored[name].bleu:5.2f}"
                  f"{'  (trained)' if run.trained else ''}", flush=True)
        row = {"seed": seed, "equal_time_steps": equal,
               "bleu": {n: r.bleu for n, r in scored.items()},
               "comparisons": {}}
        for label, (a, b) in COMPARISONS.items():
            diff, low, high = paired_bootstrap(
                scored[a].hypotheses, scored[b].hypotheses,
                scored[a].references)
            row["comparisons"][label] = [diff, low, high]
        rows.append(row)
    signature = scored["additive"].signature
    print(f"\nHeld-out BLEU by seed ({signature}):")
    for label in COMPARISONS:
        diffs = [r["comparisons"][label] for r in rows]
        cells = "  ".join(f"{d:+6.2f} [{lo:+.2f}, {hi:+.2f}]"
                          for d, lo, hi in diffs)
        print(f"{label:36} {cells}  mean "
              f"{statistics.mean(d for d, _, _ in diffs):+.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "script": "benchmarks/seeds.py", **machine(),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} "
                   "CPU threads",
        "signature": signature,
        "seeds": rows}, indent=1)
        + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
