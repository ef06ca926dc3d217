"""Train the chapter's models from the command line, on one process or
data-parallel on many under ``torchrun``.

    python -m d2lmini.train lm --size medium
    torchrun --nproc-per-node 4 -m d2lmini.train lm --size medium
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint HOST:29500 -m d2lmini.train lm --size large

``lm`` pretrains a French language model (``--size``: one of
``d2lmini.lm.LM_SIZES``; ``section`` is the pretraining section's),
``transformer`` the Transformer section's translator and ``vit`` the
vision section's ViT.  Every process joins the job (gloo on CPUs, NCCL
with one GPU per process), reads its share of every global batch, and
process 0 writes the model into the model cache (``--cache-dir``,
default ``d2lmini.corpus.cache_dir() / 'models'``), where the
notebooks' ``*_or_load`` functions find it when their fingerprint
matches (the number of processes is part of it).  ``--max-steps``,
``--batch-size`` and ``--lr`` change the recipe; ``--batch-size`` is the
global batch, shared by the processes.  Process 0 prints one line about
the run, and a JSON line with ``--json``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from . import distributed
from .utils import check_int

__all__ = ["compare_checkpoints", "equivalence", "job", "main", "parse",
           "throughput"]

MODELS = ("lm", "transformer", "vit")


def parse(argv=None):
    """The command line's arguments (``argparse.Namespace``)."""
    from .lm import LM_SIZES

    parser = argparse.ArgumentParser(
        prog="python -m d2lmini.train",
        description="Train one of the chapter's models, on one process "
                    "or under torchrun on many.")
    parser.add_argument("model", choices=MODELS)
    parser.add_argument("--size", choices=sorted(LM_SIZES),
                        default="section",
                        help="the language model's size (lm only)")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="the global batch, shared by the processes")
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--val-every", type=int, default=None,
                        help="validate every n steps (lm only)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"),
                        default="auto",
                        help="lm only; the translator trains where "
                             "Trainer(device='auto') does, the ViT on "
                             "the CPU")
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--json", action="store_true",
                        help="also print the run's numbers as JSON")
    args = parser.parse_args(argv)
    for name in ("max_steps", "batch_size", "val_every"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, "
                         f"got {value}")
    if args.lr is not None and not args.lr > 0:
        parser.error(f"--lr must be positive, got {args.lr}")
    return args


def _progress():
    """A progress bar on process 0, in a terminal."""
    return distributed.is_main() and sys.stderr.isatty()


def _changes(args, names):
    return {name: getattr(args, name) for name in names
            if getattr(args, name) is not None}


def _lm(args, device):
    from .lm import LM_SIZES, train_or_load_lm

    recipe = LM_SIZES[args.size].replace(**_changes(
        args, ("max_steps", "batch_size", "lr", "val_every")))
    run = train_or_load_lm(recipe, args.cache_dir, device=device,
                           progress=_progress())
    h = run.history
    return run.summary(), {
        "model": "lm", "size": args.size, "recipe": recipe.key(),
        "trained": run.trained, "steps": h["steps"][-1],
        "seconds": h["seconds"], "tokens": h.get("tokens"),
        "train_loss": h["train_loss"], "val_ppl": h["val_ppl"]}


def _transformer(args, device):
    from .cache import train_or_load
    from .recipes import TRANSFORMER_RECIPE

    recipe = TRANSFORMER_RECIPE.replace(**_changes(
        args, ("max_steps", "batch_size", "lr")))
    run = train_or_load(recipe, args.cache_dir, progress=_progress())
    h = run.history
    return run.summary(), {
        "model": "transformer", "recipe": recipe.key(),
        "trained": run.trained, "steps": h.num_steps,
        "seconds": h.train_time, "tokens": h.num_tokens,
        "train_loss": h.train_loss, "val_loss": h.val_loss}


def _vit(args, device):
    from .vision import train_or_load
    from .vit import VisionRecipe

    recipe = VisionRecipe().replace(**_changes(
        args, ("max_steps", "batch_size", "lr")))
    run = train_or_load(recipe, args.cache_dir)
    h = run.history
    return run.summary(), {
        "model": "vit", "recipe": recipe.key(), "trained": run.trained,
        "steps": h["steps"][-1], "seconds": h["seconds"],
        "val_acc": h["val_acc"]}


def main(argv=None):
    """Run the command line; returns the run's numbers (a dict)."""
    args = parse(argv)
    device = distributed.init(args.device)
    rank, world_size = distributed.world()
    try:
        line, numbers = {"lm": _lm, "transformer": _transformer,
                         "vit": _vit}[args.model](args, device)
        numbers.update(processes=world_size, device=device.type)
        if rank == 0:
            print(f"{world_size} process{'es' if world_size > 1 else ''} "
                  f"on {device.type}: {line}", flush=True)
            if args.json:
                print(json.dumps(numbers), flush=True)
        return numbers
    finally:
        if world_size > 1:
            distributed.barrier()
            torch.distributed.destroy_process_group()


def job(args, nproc=1, threads=1, timeout=600):
    """Run ``python -m d2lmini.train <args> --json`` as its own job: one
    plain process when ``nproc`` is 1, else ``nproc`` processes under
    ``torchrun``, each with ``threads`` intra-op threads; returns the
    run's numbers (the JSON line's dict).  A job that fails raises
    ``RuntimeError`` with the end of its output; one that runs past
    ``timeout`` seconds is killed."""
    check_int("nproc", nproc)
    args = ["-m", "d2lmini.train", *args, "--json"]
    if nproc == 1:
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        done = subprocess.run([sys.executable, *args], text=True,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=env,
                              timeout=timeout)
    else:
        done = distributed.launch(args, nproc, timeout, threads=threads)
    if done.returncode != 0:
        raise RuntimeError(f"the job failed ({done.returncode}):\n"
                           f"{done.stdout[-2000:]}")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1])


def compare_checkpoints(a, b):
    """The largest difference between two checkpoints' weights, and the
    name of the tensor where it is: ``(gap, name)``; the attention's
    key biases are left out (their gradient is zero in exact
    arithmetic, so Adam's update of them is rounding noise divided by
    its own size), as in ``tests/test_distributed.py``."""
    sa, sb = (torch.load(p, weights_only=True)["state_dict"]
              for p in (a, b))
    if sa.keys() != sb.keys():
        raise ValueError("the checkpoints hold other tensors: not the "
                         "same model")
    gaps = {k: (sa[k] - sb[k]).abs().max().item() for k in sa
            if not k.endswith("W_k.bias")}
    name = max(gaps, key=gaps.get)
    return gaps[name], name


def throughput(nproc, threads, steps=100, size="section"):
    """Training tokens per second of the language model's first
    ``steps`` steps on the CPU as ``nproc`` processes (gloo) of
    ``threads`` threads each
    (a fresh model cache, so it trains; validation once, at the end,
    and not timed): ``job``'s numbers plus ``tokens_per_second``."""
    with tempfile.TemporaryDirectory() as tmp:
        run = job(["lm", "--size", size, "--max-steps", str(steps),
                   "--val-every", str(steps), "--device", "cpu",
                   "--cache-dir", tmp], nproc, threads=threads)
    run["tokens_per_second"] = run["tokens"] / run["seconds"]
    run["threads"] = threads
    return run


def equivalence(steps=6, size="section", nproc=2):
    """Train the language model for ``steps`` steps on the CPU as one
    process and as ``nproc`` gloo processes on the same global batches
    (the section's model has no dropout; each in a fresh
    model cache): their numbers (``job``'s dicts) and
    ``compare_checkpoints`` of the two models."""
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1, nproc):
            folder = Path(tmp) / f"n{n}"
            runs[n] = job(["lm", "--size", size, "--max-steps", str(steps),
                           "--val-every", "1", "--device", "cpu",
                           "--cache-dir", str(folder)], n, threads=1)
            runs[n]["file"] = next(folder.glob("lm-french-*.pt"))
        gap = compare_checkpoints(runs[1].pop("file"),
                                  runs[nproc].pop("file"))
    return runs[1], runs[nproc], gap


if __name__ == "__main__":
    main(sys.argv[1:])
