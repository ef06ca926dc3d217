"""The pretraining section's measurements, over seeds.

Usage::

    python benchmarks/pretraining.py [--seeds 0 1 2] [--sizes 1000 4000
        16000] [--steps 500] [--out FILE]

For each seed: trains the section's French language model
(``d2lmini.lm.LMRecipe(seed=seed)``, about 2 minutes) on the French side
of the training split and scores its validation perplexity (the unigram
and bigram baselines, which have no seed, once); generates 100 sentences
per decoding setting (``d2lmini.generation.SETTINGS``) with the seed-0
model and generator seeds drawn from the seed; then, for each number of
training pairs, trains the Transformer section's translator for
``--steps`` steps on that many pairs (drawn with the seed) twice: from
scratch, and with its decoder started from that seed's language model
(``d2lmini.lm.finetune_or_load``).  Both are scored on the 1,000
held-out test sources with multi-reference BLEU, and their difference
gets a paired bootstrap interval.  The seed changes the initial
weights, the pairs drawn, and the order of the batches; the split and
the vocabularies are fixed.  Models go through the cache (seed 0 is the
notebook's own).  About 20 minutes on 2 CPU cores from an empty cache.
The results go to ``benchmarks/results/pretraining.json``, which the
section and its lab quote.
"""

import argparse
import json
import platform
from pathlib import Path

import torch

from d2lmini import generation, lm
from d2lmini.pretraining import NgramLM, perplexity
from d2lmini.recipes import SEED_OFFSET_VARIABLE, seed_offset
from d2lmini.utils import machine

ROOT = Path(__file__).resolve().parent.parent


def baselines(data):
    """Validation perplexity of the unigram and bigram models fitted to
    the language model's training text (add-k smoothing, k = 1 and
    0.1)."""
    vocab = data.tgt_vocab
    text, _ = lm.pretraining_text(data)
    val = lm.split_text(data, "val")
    out = {}
    for name, n, k in (("unigram", 1, 1.0), ("bigram", 2, 0.1)):
        model = NgramLM(n, len(vocab), k).fit(text, vocab.bos, vocab.eos)
        out[name] = perplexity(model, val, vocab.bos, vocab.eos)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[1000, 4000, 16000])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results"
                        / "pretraining.json")
    args = parser.parse_args()
    if seed_offset():
        raise SystemExit(f"unset {SEED_OFFSET_VARIABLE}: the committed "
                         "results are the chapter's own seeds")
    m = machine()
    data = lm.translation_data()
    vocab = data.tgt_vocab
    result = {"script": "benchmarks/pretraining.py",
              "command": "python benchmarks/pretraining.py",
              "cpu": m["cpu"], "threads": m["threads"],
              "torch": str(torch.__version__),
              "python": platform.python_version(),
              "seeds": args.seeds, "sizes": args.sizes,
              "finetune_steps": args.steps,
              "baselines": baselines(data), "lm": [], "finetune": []}
    print(f"baselines: {result['baselines']}", flush=True)
    runs = {}
    for seed in args.seeds:
        run = runs[seed] = lm.train_or_load_lm(lm.LMRecipe(seed=seed))
        h = run.history
        result["lm"].append({"seed": seed, "steps": h["steps"],
                             "val_ppl": h["val_ppl"],
                             "train_loss": h["train_loss"],
                             "seconds": h["seconds"]})
        print(f"seed {seed}: {run.summary()}", flush=True)
    text, _ = lm.pretraining_text(data)
    result["generation"] = generation.sample_study(
        runs[args.seeds[0]].model, vocab.bos, vocab.eos,
        seeds=args.seeds, forbid=lm.forbidden_ids(vocab), known=text)
    for name, rows in result["generation"].items():
        print(name, [(round(r["distinct_2"], 3), round(r["self_ppl"], 2))
                     for r in rows], flush=True)
    for n in args.sizes:
        for seed in args.seeds:
            pre = lm.finetune_or_load(n, args.steps, seed, lm=runs[seed])
            scratch = lm.finetune_or_load(n, args.steps, seed)
            bleu_p, bleu_s, diff = lm.bleu_gain(pre, scratch)
            result["finetune"].append({
                "pairs": n, "seed": seed, "bleu_pretrained": bleu_p,
                "bleu_scratch": bleu_s, "gain": list(diff),
                "seconds": [pre.history["seconds"],
                            scratch.history["seconds"]]})
            print(f"{n} pairs, seed {seed}: pretrained {bleu_p:.1f}, "
                  f"scratch {bleu_s:.1f}, gain {diff[0]:+.1f} "
                  f"[{diff[1]:+.1f}, {diff[2]:+.1f}]", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
