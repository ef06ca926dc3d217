"""Equal training time, measured on the machine that runs the comparison.

A comparison "at equal training time" trains one model for as many steps
as take as long as another model's steps.  How many that is depends on
the machine: another CPU, thread count or device changes the ratio of
the two models' step times.  ``equal_time_steps`` therefore times both
models here, on the same batches, before they train, and keeps the
measurement in the cache folder under a key of the two recipes, the
code, torch, the CPU, the thread count and the device: the next run on
this machine (nbval, a reader's "Run All") reuses it, so it trains, or
loads, the same baseline; another machine measures its own.
"""

import dataclasses
import datetime
import hashlib
import json
import math
import statistics
import time

import torch

from . import corpus
from .cache import code_fingerprint, training_device
from .experiment import build_data, build_model
from .utils import (
    atomic_write,
    check_int,
    keep_random_state,
    machine,
    set_seed,
)

__all__ = ["EqualTime", "equal_time_steps", "seconds_per_step"]

WARMUP = 5  # steps run before the clock starts (allocations, caches)
METHOD = 2  # part of a measurement's key: bump when the timing changes


def seconds_per_step(model, batches, device=None):
    """Seconds per training step (forward, backward, clipping at 1, Adam)
    over ``batches``, after ``WARMUP`` of them that are not timed."""
    if len(batches) <= WARMUP:
        raise ValueError(f"need more than {WARMUP} batches (the first "
                         f"{WARMUP} warm up), got {len(batches)}")
    device = torch.device("cpu") if device is None else device
    model.to(device).train()
    batches = [[t.to(device) for t in b] for b in batches]
    optimizer = model.configure_optimizers()
    start = None
    for i, batch in enumerate(batches):
        if i == WARMUP:
            _sync(device)
            start = time.perf_counter()
        loss, _ = model.training_step(batch)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    _sync(device)
    return (time.perf_counter() - start) / (len(batches) - WARMUP)


def _spread_batches(data, n):
    """``n`` training batches spread evenly over one epoch, in its order.

    Bucketing puts sentences of similar length together, so a run of
    consecutive batches can be shorter or longer than the epoch's
    average, and the two models' costs do not grow alike with length (a
    GRU steps through the sentence, a Transformer does not).  The data's
    generator is left as it was."""
    state = data.generator.get_state()
    epoch = list(data.train_dataloader())
    data.generator.set_state(state)
    if len(epoch) < n:
        raise ValueError(f"one epoch has {len(epoch)} batches, fewer than "
                         f"the {n} to time")
    return [epoch[i * len(epoch) // n] for i in range(n)]


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


@dataclasses.dataclass(frozen=True)
class EqualTime:
    """How many steps of ``other`` take as long as ``reference_steps``
    of the reference, as measured on ``machine``.

    ``ms`` holds the median milliseconds per step of ``"reference"`` and
    ``"other"``; ``steps`` = round(reference_steps * ms reference /
    ms other); ``reused`` is True when the measurement came from an
    earlier run on this machine (``date`` says when).
    """

    steps: int
    reference_steps: int
    ms: dict
    ratio: float
    date: str
    machine: str
    reused: bool = False

    def clocks(self, seconds, reference_seconds):
        """In words, how two training runs' own clocks compare with this
        measurement: ``seconds`` of the run of ``steps`` steps against
        ``reference_seconds`` of the reference's run.  Within 10 % is
        "about as long"; otherwise the words say which way it missed."""
        share = seconds / reference_seconds
        if 0.9 <= share <= 1.1:
            return (f"{share:.0%} of the reference's time: about as long, "
                    "as the timing intended")
        side = "less" if share < 0.9 else "more"
        return (f"{share:.0%} of the reference's time, {side} than the "
                "timing intended: here the timing of a few steps, the two "
                "models taking turns, and the clocks of two whole training "
                "runs disagree by that much")

    def __str__(self):
        when = (f"measured on this machine on {self.date}, reused"
                if self.reused else "measured now, on this machine")
        return (f"step time {when} ({self.machine}): "
                f"{self.ms['reference']:.1f} ms against "
                f"{self.ms['other']:.1f} ms, a ratio of {self.ratio:.3f}; "
                f"{self.steps:,} steps take as long as "
                f"{self.reference_steps:,}")


def _read_record(path, reference_steps):
    """The ``EqualTime`` that ``path`` records, or None when the file
    cannot be read or its numbers do not hold together (positive
    milliseconds, the ratio of them, the step count they give)."""
    try:
        record = json.loads(path.read_text())
        result = EqualTime(**record, reused=True)
    except (OSError, ValueError, TypeError):
        return None
    ms = result.ms
    if not (isinstance(ms, dict) and set(ms) == {"reference", "other"}):
        return None
    numbers = (ms["reference"], ms["other"], result.ratio)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool)
               and math.isfinite(x) and x > 0 for x in numbers):
        return None
    ratio = ms["reference"] / ms["other"]
    if not (math.isclose(result.ratio, ratio)
            and result.reference_steps == reference_steps
            and type(result.steps) is int and result.steps >= 1
            and result.steps == round(reference_steps * ratio)
            and isinstance(result.date, str)
            and isinstance(result.machine, str)):
        return None
    return result


def _machine_words():
    m = machine()
    return f"{m['cpu']}, {m['threads']} threads, {training_device()}"


def _record_path(reference, other, reference_steps, rounds, steps):
    m = machine()
    key = json.dumps([METHOD, reference.key(), other.key(), reference_steps,
                      rounds, steps, code_fingerprint(), m["cpu"],
                      m["threads"], m["torch"], training_device()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return corpus.cache_dir() / "timings" / f"equal-time-{digest}.json"


def equal_time_steps(reference, other, reference_steps=None, *, rounds=3,
                     steps=20, remeasure=False):
    """The number of steps of recipe ``other`` that take as long, on this
    machine, as ``reference_steps`` steps of recipe ``reference``.

    Both models are built from their recipes (seeded) and trained for
    ``steps`` timed steps on the same batches of the reference's data
    (spread evenly over an epoch, so that their lengths are the epoch's),
    taking turns for ``rounds`` rounds so that a busy moment of the
    machine slows both; the medians give the ratio.  The result is kept
    in the cache folder and reused by later calls on this machine with
    the same recipes, code, torch, CPU, thread count and device (pass
    ``remeasure=True`` to time again; a record whose numbers do not
    hold together is measured again too).  Python's, NumPy's and
    torch's global generators end as they began, measured or reused.

    Args:
        reference, other: ``Recipe``s with the same data settings.
        reference_steps: the reference's step count; defaults to its
            ``max_steps``.
        rounds, steps: how many turns, and timed steps per turn.

    Returns:
        ``EqualTime``; ``str()`` of it is a sentence for a notebook.
    """
    if reference_steps is None:
        reference_steps = reference.max_steps
    check_int("reference_steps", reference_steps)
    check_int("rounds", rounds)
    check_int("steps", steps)
    if _data_fields(reference) != _data_fields(other):
        raise ValueError(
            "equal_time_steps times two models on the same batches: the "
            "recipes must have the same data settings, got "
            f"{_data_fields(reference)} and {_data_fields(other)}")
    path = _record_path(reference, other, reference_steps, rounds, steps)
    if path.is_file() and not remeasure:
        record = _read_record(path, reference_steps)
        if record is not None:  # else unreadable or nonsense: measure
            return record
    device = torch.device(training_device())
    seconds = {"reference": [], "other": []}
    # The global generators end as they began, measured or reused.
    with keep_random_state(device.type):
        data = build_data(reference)
        batches = _spread_batches(data, WARMUP + steps)
        for i in range(rounds):
            # The first of a pair alternates from round to round.
            order = (("reference", reference), ("other", other))
            for name, recipe in (order if i % 2 == 0 else order[::-1]):
                set_seed(recipe.training_seed())
                model = build_model(recipe, data)
                seconds[name].append(seconds_per_step(model, batches,
                                                      device))
    return _record(path, reference_steps, _median_ms(seconds))


def _median_ms(seconds):
    """name -> the median of its seconds per step, in ms to 3 decimals."""
    return {name: round(1000 * statistics.median(s), 3)
            for name, s in seconds.items()}


def _record(path, reference_steps, ms):
    """The ``EqualTime`` of the medians ``ms``, written to ``path`` for
    later runs on this machine.  The step count follows from the
    milliseconds as recorded, so the numbers a notebook prints give its
    step count again."""
    ratio = ms["reference"] / ms["other"]
    result = EqualTime(steps=round(reference_steps * ratio),
                       reference_steps=reference_steps, ms=ms,
                       ratio=ratio,
                       date=datetime.date.today().isoformat(),
                       machine=_machine_words())
    record = dataclasses.asdict(result)
    del record["reused"]
    with atomic_write(path) as f:
        f.write((json.dumps(record, indent=1) + "\n").encode())
    return result


_DATA_FIELDS = ("batch_size", "num_steps", "num_train", "num_val",
                "num_test", "max_src_len", "max_tgt_len", "shuffle",
                "min_freq", "bucket", "seed")


def _data_fields(recipe):
    return {name: getattr(recipe, name) for name in _DATA_FIELDS
            if hasattr(recipe, name)}
