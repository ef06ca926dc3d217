"""How ``TRANSFORMER_RECIPE`` was chosen: a small grid, scored on val.

Usage::

    python benchmarks/transformer_tuning.py [--steps 1000]

Trains the Transformer of ``d2lmini.experiment.TRANSFORMER_RECIPE`` with
each learning rate and dropout of the grid below for ``--steps`` steps
(the chapter's budget) and scores greedy translations of the
*validation* sources with multi-reference sacreBLEU.  The test split is
never looked at here: the Transformer section reports the test BLEU of
the chosen recipe only, and prints the table that this script writes to
``benchmarks/results/transformer_tuning.json``.  Needs the corpus
(``D2LMINI_DATA_DIR``); about 80 s per run on 2 CPU cores, so the grid
takes about 8 minutes.
"""

import argparse
import json
import time
from pathlib import Path

import torch

from d2lmini.experiment import TRANSFORMER_RECIPE, evaluate, train
from d2lmini.notebook import machine

RESULTS = Path(__file__).parent / "results" / "transformer_tuning.json"
GRID = [dict(lr=lr, dropout=dropout)
        for dropout in (0.0, 0.1) for lr in (0.001, 0.002, 0.004)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    print(f"{'lr':>6} {'dropout':>7} {'train s':>7} {'val loss':>8} "
          f"{'val BLEU':>8}", flush=True)
    rows = []
    for changes in GRID:
        recipe = TRANSFORMER_RECIPE.replace(max_steps=args.steps, **changes)
        start = time.perf_counter()
        model, data, history = train(recipe, progress=False)
        seconds = time.perf_counter() - start
        result = evaluate(model, data, "val")
        rows.append({**changes, "steps": args.steps,
                     "train_seconds": round(seconds, 1),
                     "val_loss": round(history.val_steps[-1][1], 4),
                     "val_bleu": round(result.bleu, 2)})
        print(f"{recipe.lr:6.3f} {recipe.dropout:7.1f} {seconds:7.0f} "
              f"{rows[-1]['val_loss']:8.3f} {rows[-1]['val_bleu']:8.2f}",
              flush=True)
    best = max(rows, key=lambda r: r["val_bleu"])
    print(f"best on val: lr {best['lr']}, dropout {best['dropout']}")
    RESULTS.write_text(json.dumps({
        "what": "Transformer recipes scored on the val split",
        "script": "benchmarks/transformer_tuning.py", **machine(),
        "recipe": "TRANSFORMER_RECIPE with lr and dropout of each row",
        "sacrebleu": result.signature.split(";")[0],
        "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
