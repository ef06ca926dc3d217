"""The vision section's comparisons, repeated over seeds.

Usage::

    python benchmarks/vision_seeds.py [--seeds 0 1 2] [--out FILE]

For each seed, trains the section's ViT (``VisionRecipe()``: patches of
2 x 2, sixteen tokens and ``<cls>``), the same ViT with patches of
4 x 4 (four tokens) for the same steps, and three baselines (softmax
regression, an MLP, a small CNN) for as many steps as take as long as
the ViT's on this machine (``d2lmini.vision.equal_time_steps``,
measured for each seed, as the notebook measures its own).  Each model
is scored on the 360 held-out test images: accuracy with a 95 %
bootstrap interval, and its paired difference to the ViT (the same
resampled images for both).  The seed changes the initial weights, the
dropout masks and the order of the batches; the split is fixed.  The
models go through the cache (seed 0 is the notebook's own), so a
second run only evaluates.  About 5 minutes on 2 CPU cores from an
empty cache.  The results go to ``benchmarks/results/vision_seeds.json``,
which the section and its lab quote.
"""

import argparse
import json
import platform
from pathlib import Path

import torch

from d2lmini.recipes import SEED_OFFSET_VARIABLE, seed_offset
from d2lmini.utils import machine
from d2lmini.vision import equal_time_steps, test_scores, train_or_load
from d2lmini.vit import VisionRecipe

ROOT = Path(__file__).resolve().parent.parent
BASELINES = ("softmax", "mlp", "cnn")


def one_seed(seed):
    vit = VisionRecipe(seed=seed)
    recipes = {"vit": vit, "vit, 4 x 4 patches": vit.replace(patch_size=4)}
    steps = {}
    for name in BASELINES:
        other = vit.replace(model=name)
        equal = equal_time_steps(vit, other)
        steps[name] = equal.steps
        recipes[name] = other.replace(max_steps=equal.steps)
    runs = {name: train_or_load(r) for name, r in recipes.items()}
    scores = test_scores(runs, reference="vit")
    out = {"seed": seed, "equal_time_steps": steps, "models": {}}
    for name, run in runs.items():
        s = scores[name]
        out["models"][name] = {
            "steps": run.history["steps"][-1],
            "seconds": run.history["seconds"],
            "accuracy": list(s["acc"]),
            "minus_vit": None if s["diff"] is None else list(s["diff"])}
        print(f"seed {seed} {name}: {s['acc'][0]:.4f} "
              f"[{s['acc'][1]:.4f}, {s['acc'][2]:.4f}], "
              f"{run.history['seconds']:.1f} s, "
              f"{run.history['steps'][-1]} steps", flush=True)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results"
                        / "vision_seeds.json")
    args = parser.parse_args()
    if seed_offset():
        raise SystemExit(f"unset {SEED_OFFSET_VARIABLE}: the committed "
                         "results are the chapter's own seeds")
    m = machine()
    result = {"script": "benchmarks/vision_seeds.py",
              "command": "python benchmarks/vision_seeds.py",
              "cpu": m["cpu"], "threads": m["threads"],
              "torch": str(torch.__version__),
              "python": platform.python_version(),
              "recipe": VisionRecipe().__dict__,
              "test_images": 360, "bootstrap": "95 % percentile, 2000",
              "seeds": [one_seed(s) for s in args.seeds]}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
