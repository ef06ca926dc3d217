"""Does the chapter's recipe train every decoder, at two length ranges?

Trains ``CHAPTER_RECIPE`` with each attention kind (additive, 8-head,
none), on the chapter's sentences (at most 8 English and 10 French
tokens) and on slightly longer ones (10 and 12), with three seeds each,
and prints the held-out multi-reference BLEU of every run.  A run counts
as collapsed when its BLEU is below ``COLLAPSE_BLEU`` or when one output
sentence makes up more than ``COLLAPSE_SHARE`` of all test outputs (the
failure this benchmark was written for: the 8-head decoder, without a
learning-rate warm-up, answered "." to every sentence of the longer
range).  ``rise`` is how far the training loss climbed back from its
best: the mean of the last 50 batch losses minus the lowest mean of 50
consecutive ones (0 when training ends at its best; the diverged run
rose by over 1).  Not a test: each run takes about 2-3 minutes on 2 CPU cores
(all 18 about an hour); models go through the checkpoint cache, so the
chapter's own three (seed 0, short range) are shared with the notebooks.

    python benchmarks/robustness.py              # the whole table
    python benchmarks/robustness.py --seeds 0 --ranges 10,12
    # the failure: no warm-up, constant learning rate
    python benchmarks/robustness.py --kinds multihead --seeds 2 \
        --ranges 10,12 --constant-lr
"""

import argparse
import collections
import statistics
import time

import torch

from d2lmini import cache
from d2lmini.experiment import CHAPTER_RECIPE, evaluate

COLLAPSE_BLEU = 5.0
COLLAPSE_SHARE = 0.2
KINDS = ("additive", "multihead", "none")


def recipe_for(kind, seed, src_len, tgt_len, constant_lr=False):
    """The chapter's recipe at another length range, kind and seed."""
    recipe = CHAPTER_RECIPE.replace(
        attention=kind, seed=seed, max_src_len=src_len,
        max_tgt_len=tgt_len,
        num_steps=max(CHAPTER_RECIPE.num_steps, src_len + 1, tgt_len + 1))
    if constant_lr:  # the recipe before the fix
        recipe = recipe.replace(warmup_steps=0, schedule="constant")
    return recipe


def run(recipe):
    """Train (or load) a recipe; return its test score and a verdict."""
    out = cache.train_or_load(recipe, progress=False)
    result = evaluate(out.model, out.data, "test")
    common, count = collections.Counter(result.hypotheses).most_common(1)[0]
    share = count / len(result.hypotheses)
    collapsed = result.bleu < COLLAPSE_BLEU or share > COLLAPSE_SHARE
    return {"bleu": result.bleu, "share": share, "common": common,
            "collapsed": collapsed, "trained": out.trained,
            "time": out.history.train_time,
            "rise": rise(out.history)}


def rise(history, window=50):
    """Last ``window`` batch losses' mean minus the lowest such mean."""
    losses = torch.tensor([loss for _, loss in history.steps])
    means = losses.unfold(0, window, 1).mean(1)
    return float(means[-1] - means.min())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", nargs="+", default=KINDS, choices=KINDS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--ranges", nargs="+", default=["8,10", "10,12"],
                        help="max English,French tokens per range")
    parser.add_argument("--constant-lr", action="store_true",
                        help="no warm-up and no decay (the old recipe)")
    args = parser.parse_args()
    ranges = [tuple(int(n) for n in r.split(",")) for r in args.ranges]
    shown = recipe_for("additive", 0, 8, 10, args.constant_lr)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"recipe lr {shown.lr}, warm-up {shown.warmup_steps} steps, "
          f"schedule {shown.schedule!r}, {shown.max_steps} steps")
    start, results = time.perf_counter(), {}
    header = (f"{'range':>6} {'attention':>9} {'seed':>4} {'BLEU':>6} "
              f"{'top share':>9} {'rise':>6} {'train s':>7}  "
              "most common output")
    print(header, flush=True)
    for src_len, tgt_len in ranges:
        for kind in args.kinds:
            for seed in args.seeds:
                r = run(recipe_for(kind, seed, src_len, tgt_len,
                                   args.constant_lr))
                results[src_len, tgt_len, kind, seed] = r
                flag = "  COLLAPSED" if r["collapsed"] else ""
                print(f"{src_len:>3},{tgt_len:<2} {kind:>9} {seed:>4} "
                      f"{r['bleu']:>6.2f} {r['share']:>9.1%} "
                      f"{r['rise']:>6.3f} {r['time']:>7.1f}  "
                      f"{r['common'][:30]!r}{flag}", flush=True)
    print("\nHeld-out BLEU, mean ± sd over seeds (min):")
    for src_len, tgt_len in ranges:
        for kind in args.kinds:
            scores = [results[src_len, tgt_len, kind, s]["bleu"]
                      for s in args.seeds]
            sd = statistics.stdev(scores) if len(scores) > 1 else 0.0
            print(f"  {src_len},{tgt_len} {kind:>9}: "
                  f"{statistics.mean(scores):.2f} ± {sd:.2f} "
                  f"(min {min(scores):.2f})")
    collapsed = [k for k, r in results.items() if r["collapsed"]]
    print(f"\ncollapsed runs: {len(collapsed)} of {len(results)}"
          + "".join(f"\n  {k}" for k in collapsed))
    print(f"total wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
