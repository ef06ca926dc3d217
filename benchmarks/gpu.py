"""The chapter's training and decoding on a CUDA GPU, against the CPU.

Usage::

    python benchmarks/gpu.py [--out FILE] [--quick]

On a machine with a CUDA GPU (at most 8 minutes on one H100):

1. runs the CUDA tests (``tests/test_cuda.py`` and the trainer's);
2. trains the Transformer section's translator (``TRANSFORMER_RECIPE``)
   and the pretraining section's language model (``LMRecipe()``), whole,
   on the GPU in float32 and again under bf16 autocast, and scores them
   (test BLEU, validation perplexity);
3. times training steps per second on the GPU and, for a few steps,
   on the CPU (ratios in the same run);
4. times greedy and beam decoding of the test sources on both;
5. counts the host synchronisations in 10 training steps of each
   model (``torch.cuda.set_sync_debug_mode('warn')``, the trainer
   reading the losses every 50 steps, so once, at the end of the run):
   the trainer's step adds none, the models' own input checks may;

and writes ``benchmarks/results/gpu.json`` with the device's name.
``--quick`` runs every part for a few steps only, on the CPU when
there is no GPU, and writes nothing: a check that the script runs.
Needs the corpus (``D2LMINI_DATA_DIR``).
"""

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch

from d2lmini import experiment, lm
from d2lmini.beam import beam_translate
from d2lmini.decoding import translate
from d2lmini.lm import LMRecipe, SentenceBatches, pretraining_text
from d2lmini.pretraining import perplexity
from d2lmini.recipes import TRANSFORMER_RECIPE
from d2lmini.trainer import Trainer
from d2lmini.utils import machine

ROOT = Path(__file__).resolve().parent.parent
CPU_STEPS = 20  # the CPU's steps per second come from this many steps


def cuda_tests(quick):
    if quick:
        return {"skipped": "--quick"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_cuda.py", "tests/test_trainer.py", "-k", "cuda"],
        cwd=ROOT, capture_output=True, text=True)
    last = done.stdout.strip().splitlines()[-1:] or [""]
    print("CUDA tests:", last[0])
    return {"returncode": done.returncode, "summary": last[0]}


def _translator(recipe, device, precision, steps=None):
    """Train the translator; ``(model, data, history)``."""
    recipe = recipe if steps is None else recipe.replace(max_steps=steps)
    data = experiment.build_data(recipe)
    model = experiment.build_model(recipe, data)
    trainer = experiment._trainer(recipe, False, device=device,
                                  precision=precision)
    history = trainer.fit(model, data)
    return model, data, history


def _lm_data(recipe, device):
    data = lm.translation_data()
    text, _ = pretraining_text(data)
    gen = torch.Generator().manual_seed(recipe.training_seed())
    v = data.tgt_vocab
    return data, SentenceBatches(text, recipe.batch_size, gen, v.bos, v.eos,
                                 v.pad)


def _language_model(recipe, device, precision):
    data, batches = _lm_data(recipe, device)
    model = recipe.build(len(data.tgt_vocab))
    trainer = Trainer(None, 1.0, device, max_steps=recipe.max_steps,
                      progress=False, warmup_steps=recipe.warmup_steps,
                      schedule="cosine-after-warmup", precision=precision)
    history = trainer.fit(model, batches)
    val = lm.split_text(data, "val")
    v = data.tgt_vocab
    return model, history, perplexity(model, val, v.bos, v.eos)


def _rate(history):
    return history.num_steps / history.train_time


def training(device, quick):
    """Steps per second and scores; also returns the fp32 translator
    and its data, which ``decoding`` times."""
    out, kept = {}, None
    t_steps = 30 if quick else None
    lm_recipe = LMRecipe(max_steps=30) if quick else LMRecipe()
    for precision in ("fp32", "bf16"):
        if precision == "bf16" and device.type != "cuda":
            continue
        model, data, h = _translator(TRANSFORMER_RECIPE, device, precision,
                                     t_steps)
        bleu = experiment.evaluate(model.to("cpu"), data, "test").bleu
        kept = kept or (model, data)
        out[f"transformer_{precision}"] = {
            "steps": h.num_steps, "seconds": h.train_time,
            "steps_per_second": _rate(h), "test_bleu": bleu,
            "last_loss": h.steps[-1][1]}
        model, h, ppl = _language_model(lm_recipe, device, precision)
        out[f"lm_{precision}"] = {
            "steps": h.num_steps, "seconds": h.train_time,
            "steps_per_second": _rate(h), "val_ppl": ppl,
            "last_loss": h.steps[-1][1]}
        print(precision, {k: round(v["steps_per_second"], 1)
                          for k, v in out.items()})
    cpu = torch.device("cpu")
    _, _, h = _translator(TRANSFORMER_RECIPE, cpu, "fp32", CPU_STEPS)
    out["transformer_cpu"] = {"steps": h.num_steps,
                              "steps_per_second": _rate(h)}
    _, h, _ = _language_model(lm_recipe.replace(max_steps=CPU_STEPS), cpu,
                              "fp32")
    out["lm_cpu"] = {"steps": h.num_steps, "steps_per_second": _rate(h)}
    for name in ("transformer", "lm"):
        out[f"{name}_speedup"] = (out[f"{name}_fp32"]["steps_per_second"]
                                  / out[f"{name}_cpu"]["steps_per_second"])
    return out, kept


def decoding(device, quick, model, data):
    """Sentences per second of greedy and beam (k = 4) decoding of up to
    1,000 test sources, in batches of 250, on the CPU and the GPU."""
    sources = list(dict.fromkeys(e for e, _ in data.test_pairs))
    sources = sources[:64] if quick else sources[:1000]
    out = {"sentences": len(sources)}
    for where in ("cpu", device.type):
        model.to(where)
        for name, fn in (("greedy", translate), ("beam4", lambda m, d, s:
                         beam_translate(m, d, s, beam_size=4))):
            start = time.perf_counter()
            for i in range(0, len(sources), 250):
                fn(model, data, sources[i:i + 250])
            if where == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            out[f"{name}_{where}_sentences_per_second"] = \
                len(sources) / seconds
    return out


def syncs(device):
    """Host synchronisations in 10 training steps of each model."""
    if device.type != "cuda":
        return {"skipped": "no CUDA device"}
    out = {}
    lm_recipe = LMRecipe(max_steps=10)
    data, batches = _lm_data(lm_recipe, device)
    cases = {
        "lm": (lambda: lm_recipe.build(len(data.tgt_vocab)), batches),
    }
    t_data = experiment.build_data(TRANSFORMER_RECIPE)
    # Its training batches only: a validation reads every batch's loss.
    train_only = type("TrainOnly", (), {
        "train_dataloader": lambda self: t_data.train_dataloader()})()
    cases["transformer"] = (
        lambda: experiment.build_model(TRANSFORMER_RECIPE, t_data),
        train_only)
    for name, (build, loader) in cases.items():
        model = build()
        # 2 steps to warm up, then count over 10 (no callback: a
        # callback makes the trainer read every step).
        trainer = Trainer(None, 1.0, device, max_steps=2, progress=False,
                          sync_every=50)
        trainer.fit(model, loader)
        trainer = Trainer(None, 1.0, device, max_steps=10, progress=False,
                          sync_every=50)
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                trainer.fit(model, loader)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        seen = [str(w.message).splitlines()[0] for w in caught
                if "synchroniz" in str(w.message)]
        out[name] = {"syncs_in_10_steps": len(seen),
                     "first": sorted(set(seen))[:5]}
        print(name, "host syncs in 10 steps:", len(seen))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"
                                             / "gpu.json"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available() and not args.quick:
        sys.exit("no CUDA device here: run this on a machine with a GPU "
                 "(or pass --quick to check that the script runs)")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    start = time.perf_counter()
    result = {"machine": machine(),
              "gpu": torch.cuda.get_device_name() if device.type == "cuda"
              else None,
              "tests": cuda_tests(args.quick)}
    result["training"], (model, data) = training(device, args.quick)
    result["decoding"] = decoding(device, args.quick, model, data)
    result["syncs"] = syncs(device)
    result["seconds"] = time.perf_counter() - start
    print(json.dumps(result, indent=1))
    if not args.quick:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
