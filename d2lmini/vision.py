"""Training the vision section's models once: a cache, equal time, and
the held-out scores.

``train_or_load(recipe)`` trains a ``d2lmini.vit.VisionRecipe`` on the
digits once and loads it afterwards, like ``d2lmini.cache`` does for the
translators: each file holds a fingerprint of the recipe, the source of
this module, of ``d2lmini.vit`` and of every d2lmini module that it
imports (the code that builds, trains and scores the model), torch, the
data split and the device, and a file whose fingerprint differs is
retrained.
``equal_time_steps`` is ``d2lmini.timing``'s helper for these models:
both timed here, taking turns on the same batches, with the result kept
for this machine.  ``test_scores`` gives each model's test accuracy
with a bootstrap interval, and the paired difference to a reference.
"""

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import NamedTuple

import torch

from . import corpus
from .cache import (
    _imported_modules,
    _source_that_ran,
    _stale,
    load_checkpoint,
    processes,
    save_once,
)
from .digits import Digits
from .timing import (
    WARMUP,
    _median_ms,
    _read_record,
    _record,
    seconds_per_step,
)
from .utils import check_int, keep_random_state, machine
from .vit import VisionRecipe, bootstrap, fit, predict

__all__ = ["VisionRun", "code_fingerprint", "equal_time_steps",
           "score_table", "test_scores", "train_or_load"]

_ROOT = "vit"  # the module that builds, trains and scores the models
METHOD = 1  # part of an equal-time record's key: bump when timing changes


def code_fingerprint():
    """sha256 of the source of this module, of ``d2lmini.vit`` and of
    every d2lmini module that ``vit`` imports, transitively, as this
    process runs them."""
    package_dir = Path(__file__).parent
    digest = hashlib.sha256()
    # This module too (it runs the fit and writes the history), but not
    # the cache's and the timing's modules that it imports.
    modules = _imported_modules(_ROOT, package_dir, _source_that_ran)
    for module in sorted(modules | {"vision"}):
        digest.update(f"{module}.py".encode() + b"\0"
                      + _source_that_ran(module))
    return digest.hexdigest()


def _data_digest(data):
    text = json.dumps([[data.counts[n][0].tolist(),
                        data.counts[n][1].tolist()]
                       for n in ("train", "val", "test")])
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprint(recipe, data):
    """What can change a trained model: recipe, code, torch, data,
    device and processes (``d2lmini.cache.fingerprint``'s fields)."""
    return {"recipe": recipe.key(), "code": code_fingerprint(),
            "torch": str(torch.__version__), "data": _data_digest(data),
            "device": "cpu",  # train_or_load fits on the CPU: small models
            "processes": processes()}


class VisionRun(NamedTuple):
    """What ``train_or_load`` returns; ``trained`` is False when the
    weights came from the cache, ``reason`` says why they did not."""

    model: torch.nn.Module
    data: Digits
    history: dict
    recipe: VisionRecipe
    trained: bool
    reason: str = ""

    def summary(self):
        """One line: trained now (and why) or loaded, steps and time."""
        h = self.history
        what = (f"{self.recipe.model}, {h['steps'][-1]:,} steps in "
                f"{h['seconds']:.1f} s, final validation accuracy "
                f"{h['val_acc'][-1]:.3f}")
        if not self.trained:
            return f"loaded from the cache: {what}"
        return f"trained now ({self.reason}): {what}"


def checkpoint_path(recipe, cache_dir=None):
    """``cache_dir`` (default ``corpus.cache_dir() / 'models'``) /
    ``vision-<model>-<key>.pt``."""
    folder = corpus.cache_dir() / "models" if cache_dir is None \
        else Path(cache_dir)
    return folder / f"vision-{recipe.model}-{recipe.key()}.pt"


_DATA = []


def _digits():
    """The digits, loaded once per process."""
    if not _DATA:
        _DATA.append(Digits())
    return _DATA[0]


def train_or_load(recipe=None, cache_dir=None):
    """The recipe's trained model (default ``VisionRecipe()``: the
    section's ViT), from the cache when its fingerprint matches, else
    trained now on the CPU and saved.  Returns a ``VisionRun``."""
    recipe = VisionRecipe() if recipe is None else recipe
    if not isinstance(recipe, VisionRecipe):
        raise TypeError(f"recipe must be a VisionRecipe, got "
                        f"{type(recipe).__name__}")
    data = _digits()
    path = checkpoint_path(recipe, cache_dir)
    expected = fingerprint(recipe, data)
    reason = "no cached model yet"
    if path.exists():
        with keep_random_state():  # a load draws nothing, as a fit
            model = recipe.build()

        def check(extra):
            why = _stale(extra.get("fingerprint"), expected)
            if why:
                raise ValueError(why)

        try:
            extra = load_checkpoint(model, path, check)
            history = extra["history"]
        except (ValueError, RuntimeError, KeyError, TypeError, EOFError,
                OSError) as err:
            reason = ("the cached file was not usable: "
                      f"{str(err) or type(err).__name__}")
        else:
            return VisionRun(model.eval(), data, history, recipe, False)
    with keep_random_state():
        model, history = fit(recipe, data)
    save_once(model, path, recipe=dataclasses.asdict(recipe),
              fingerprint=expected, history=history)
    return VisionRun(model, data, history, recipe, True, reason)


def test_scores(runs, reference=None, seed=0):
    """Each run's test accuracy and bootstrap interval, and its paired
    difference to ``runs[reference]`` (resampling the same images):
    name -> ``{"acc": (value, low, high), "diff": (...) or None}``."""
    if not runs:
        raise ValueError("give at least one run")
    correct = {}
    for name, run in runs.items():
        X, y = run.data.test
        correct[name] = predict(run.model, X).argmax(-1) == y
    if reference is not None and reference not in correct:
        raise ValueError(f"reference {reference!r} is not one of "
                         f"{list(correct)}")
    return {name: {"acc": bootstrap(c, seed=seed),
                   "diff": None if reference in (None, name) else
                   bootstrap(c, correct[reference], seed=seed)}
            for name, c in correct.items()}


def score_table(runs, reference):
    """A table (text) of each run's steps, training seconds, test
    accuracy in percent with its 95 % interval and its difference to
    ``runs[reference]`` in points (``test_scores``)."""
    from .report import table
    scores = test_scores(runs, reference)
    rows = []
    for name, s in scores.items():
        acc, diff = (None if v is None else [100 * x for x in v]
                     for v in (s["acc"], s["diff"]))
        rows.append([name, f"{runs[name].history['steps'][-1]:,}",
                     f"{runs[name].history['seconds']:.0f}",
                     f"{acc[0]:.1f} [{acc[1]:.1f}, {acc[2]:.1f}]",
                     "" if diff is None else
                     f"{diff[0]:+.1f} [{diff[1]:+.1f}, {diff[2]:+.1f}]"])
    return table(rows, ["model", "steps", "seconds",
                        "test accuracy % [95 % CI]",
                        f"minus {reference}, points"])


def equal_time_steps(reference, other, reference_steps=None, *, rounds=3,
                     steps=20, remeasure=False):
    """How many steps of recipe ``other`` take as long, on this machine,
    as ``reference_steps`` (default its ``max_steps``) of ``reference``:
    ``d2lmini.timing.equal_time_steps`` for the vision models.  Both
    train on the same batches of ``batch_size`` images, taking turns for
    ``rounds`` rounds of ``steps`` timed steps; the medians give the
    ratio.  The record is kept in the cache folder for this machine
    (recipes, code, torch, CPU, threads) and reused."""
    if reference_steps is None:
        reference_steps = reference.max_steps
    check_int("reference_steps", reference_steps)
    check_int("rounds", rounds)
    check_int("steps", steps)
    if reference.batch_size != other.batch_size:
        raise ValueError(f"both recipes must have the same batch_size, "
                         f"got {reference.batch_size} and "
                         f"{other.batch_size}")
    m = machine()
    key = json.dumps([METHOD, reference.key(), other.key(),
                      reference_steps, rounds, steps, code_fingerprint(),
                      m["cpu"], m["threads"], m["torch"]])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    path = corpus.cache_dir() / "timings" / f"vision-equal-time-{digest}.json"
    if path.is_file() and not remeasure:
        record = _read_record(path, reference_steps)
        if record is not None:
            return record
    data = _digits()
    seconds = {"reference": [], "other": []}
    with keep_random_state():
        gen = torch.Generator().manual_seed(0)
        batches = list(data.batches(WARMUP + steps, reference.batch_size,
                                    gen))
        for i in range(rounds):
            order = (("reference", reference), ("other", other))
            for name, recipe in (order if i % 2 == 0 else order[::-1]):
                seconds[name].append(seconds_per_step(recipe.build(),
                                                      batches))
    ms = _median_ms(seconds)
    if round(reference_steps * ms["reference"] / ms["other"]) < 1:
        raise ValueError(
            f"{reference_steps} reference steps take less time than one "
            f"step of the other model ({ms['reference']} ms against "
            f"{ms['other']} ms): give more reference_steps")
    return _record(path, reference_steps, ms)

