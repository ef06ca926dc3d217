"""Beam search against greedy decoding, over training seeds.

Usage::

    python benchmarks/beam_search.py [--offsets 0 1 2] [--out FILE]

For each seed offset (``D2LMINI_SEED_OFFSET``: the same split and
vocabularies, other initial weights and batch order; 0 is the
notebooks' own run, 1 the run of ``make nbval-other-machine``), the
chapter's additive model and ``TRANSFORMER_RECIPE``'s Transformer are
trained (or loaded from the checkpoint cache) and decode the held-out
test split greedily and with beam search of each size.  Each beam size's
length penalty is chosen on the validation split, among ``--alphas``;
then the test split gives multi-reference BLEU, chrF, the length ratio,
the paired bootstrap difference against greedy
(``d2lmini.metrics.paired_bootstrap``), the share of sentences whose
output the model finds more (or less) likely than greedy's, and the
decoding time per sentence against greedy's, measured in the same run
(the fastest of three runs of each, batches of 250 sentences).

The results go to ``benchmarks/results/beam_search.json``, which the
decoding section quotes.  About 15 minutes on 2 CPU cores with the
models of offsets 0 and 1 cached (offset 2 trains two models, about 5
minutes more).  Needs the corpus (``D2LMINI_DATA_DIR``).
"""

import argparse
import json
import os
import platform
from functools import partial
from pathlib import Path

import torch

from d2lmini.beam import beam_evaluate, choose_length_penalty
from d2lmini.cache import train_or_load
from d2lmini.experiment import (
    CHAPTER_RECIPE,
    SEED_OFFSET_VARIABLE,
    TRANSFORMER_RECIPE,
    evaluate,
)
from d2lmini.metrics import paired_bootstrap
from d2lmini.utils import machine

ROOT = Path(__file__).resolve().parent.parent
MODELS = {"additive": CHAPTER_RECIPE, "Transformer": TRANSFORMER_RECIPE}
BEAMS = (1, 2, 4, 8)
ALPHAS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)


def fastest(decode, repeats=3):
    """The least ``decode_time`` of ``repeats`` runs of ``decode()``
    (the run least disturbed by other work on the machine)."""
    return min(decode().decode_time for _ in range(repeats))


def compare(run, beams, alphas):
    """Greedy and every beam size on one model: a dict of JSON rows."""
    model, data = run.model, run.data
    greedy = evaluate(model, data)
    greedy_s = fastest(partial(evaluate, model, data))
    # beam 1 without a penalty is greedy: the same outputs, and their
    # log-probabilities
    base = beam_evaluate(model, data, beam_size=1)
    assert base.hypotheses == greedy.hypotheses, "beam 1 is not greedy"
    rows = {}
    for k in beams:
        if k == 1:
            alpha, val, test = 0.0, {}, base
        else:
            alpha, val = choose_length_penalty(model, data, k, alphas)
            test = beam_evaluate(model, data, beam_size=k,
                                 length_penalty=alpha)
        diff = paired_bootstrap(test.hypotheses, greedy.hypotheses,
                                greedy.references)
        seconds = fastest(partial(beam_evaluate, model, data, beam_size=k,
                                  length_penalty=alpha))
        more = sum(b > g + 1e-6 for b, g in zip(test.log_probs,
                                                base.log_probs))
        less = sum(b < g - 1e-6 for b, g in zip(test.log_probs,
                                                base.log_probs))
        rows[str(k)] = {
            "length_penalty": alpha,
            "val_bleu": {str(a): r.bleu for a, r in val.items()},
            "bleu": test.bleu, "chrf": test.chrf, "exact": test.exact,
            "length_ratio": test.length_ratio,
            "vs_greedy": list(diff),
            "more_likely": more / len(test.sources),
            "less_likely": less / len(test.sources),
            "ms_per_sentence": 1000 * seconds / len(test.sources),
            "time_vs_greedy": seconds / greedy_s}
        r = rows[str(k)]
        print(f"  beam {k} alpha {alpha:.1f}: BLEU {r['bleu']:5.2f} "
              f"({diff[0]:+.2f} [{diff[1]:+.2f}, {diff[2]:+.2f}]) "
              f"ratio {r['length_ratio']:.3f} "
              f"{r['ms_per_sentence']:.2f} ms/sentence "
              f"({r['time_vs_greedy']:.1f}x greedy)", flush=True)
    return {"greedy_bleu": greedy.bleu,
            "greedy_ms_per_sentence": 1000 * greedy_s / len(greedy.sources),
            "beams": rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--offsets", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--beams", nargs="+", type=int, default=list(BEAMS))
    parser.add_argument("--alphas", nargs="+", type=float,
                        default=list(ALPHAS))
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" /
                        "beam_search.json")
    args = parser.parse_args(argv)
    if os.environ.get(SEED_OFFSET_VARIABLE):
        parser.error(f"{SEED_OFFSET_VARIABLE} is set: unset it, the "
                     "offsets given here are the ones run")
    torch.set_num_threads(2)
    rows = []
    try:
        for offset in args.offsets:
            os.environ[SEED_OFFSET_VARIABLE] = str(offset)
            row = {"seed_offset": offset, "models": {}}
            for name, recipe in MODELS.items():
                run = train_or_load(recipe, progress=False)
                print(f"offset {offset} {name}"
                      f"{' (trained)' if run.trained else ''}:", flush=True)
                row["models"][name] = compare(run, args.beams, args.alphas)
            rows.append(row)
    finally:
        os.environ.pop(SEED_OFFSET_VARIABLE, None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "script": "benchmarks/beam_search.py", **machine(),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} "
                   "CPU threads",
        "alphas": args.alphas,
        "offsets": rows}, indent=1) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
