"""A small, model-agnostic training loop with a learning-rate schedule.

The trainer works with any ``nn.Module`` that has these methods:

* ``training_step(batch)`` returns a scalar loss, or ``(loss, num_tokens)``
  where ``loss`` is the mean over ``num_tokens`` items (an int or a 0-d
  tensor); the counts weight the averages and give tokens per second.
* ``validation_step(batch)`` (optional; ``training_step`` is used if it is
  missing), called under ``torch.no_grad()`` in eval mode, same return.
* ``configure_optimizers()`` returns a ``torch.optim.Optimizer``.

The data object has ``train_dataloader()`` and, optionally,
``val_dataloader()`` (which may return None: no validation); a batch is a
tuple or list whose tensors are moved to the device.

Callbacks (``Trainer(callbacks=[...])``) watch training without
changing it: an object with
``on_fit_start(trainer, model, last_step)`` (``last_step`` is the step
training stops at, at the latest, or None when only a time limit
bounds it) and ``on_step_end(trainer, model, step)`` (after the
update of that step, counted from 1), either optional.  Their time
is not part of ``History.train_time``.  The trainer restores the
global random generators after each callback and each validation
(``d2lmini.utils.keep_random_state``), so that what they draw (a
``DataLoader`` draws a seed from the global generator each time it is
iterated) changes no dropout mask: a run trains the same weights with
or without them.  A callback that puts the model in eval mode must put
it back (``d2lmini.snapshots.SnapshotRecorder`` does).

The trainer owns the learning-rate schedule: a linear warm-up over
``warmup_steps`` and, optionally, a cosine decay to zero at the last
step (``'cosine'``: the cosine runs from step 0 and multiplies the
warm-up; ``'cosine-after-warmup'``: it starts when the warm-up ends).
Adam's first updates move every weight by about the learning rate
whatever the gradient's size (gradient clipping does not shrink them);
the warm-up keeps those first, poorly estimated steps small.

The same code trains on one process or on N under ``torchrun``
(``d2lmini.distributed``): each process keeps its share of every
global batch, its model is wrapped in ``DistributedDataParallel``, and
the loss it back-propagates is weighted by its share of the global
batch's tokens, so that N processes take the update that one process
takes on the whole batch (the module docstring of
``d2lmini.distributed`` says how).  ``History`` then holds the global
batch's losses and tokens, the same on every process.

A step reads nothing back from the device: its loss and token count
stay tensors until the trainer reads ``sync_every`` steps' worth at
once (every step on the CPU, where reading costs nothing; every 50 on
a GPU), then checks them and records them.  On a GPU a NaN loss is
therefore caught up to ``sync_every`` steps late, and ``train_time``
is measured over those windows (the batches' loading included).
"""

import contextlib
import math
import time
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from . import distributed
from .utils import check_int, keep_random_state, set_seed

__all__ = ["PRECISIONS", "SCHEDULES", "Every", "History", "Trainer"]

SCHEDULES = ("constant", "cosine", "cosine-after-warmup")
PRECISIONS = ("fp32", "bf16")


@dataclass(repr=False)
class History:
    """What ``Trainer.fit`` measured; ``print(history)`` shows a table.

    Per-epoch lists have one entry per epoch started (the last may be
    partial when ``max_steps`` or ``max_time`` stops training); losses are
    token-weighted means. ``steps`` holds ``(step, batch train loss)`` for
    every step and ``val_steps`` holds ``(step, val loss)`` for every
    validation, ready for plotting curves.
    """

    train_loss: list = field(default_factory=list)
    val_loss: list = field(default_factory=list)
    epoch_time: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    val_steps: list = field(default_factory=list)
    num_steps: int = 0
    num_tokens: int = 0
    train_time: float = 0.0  # seconds of forward, backward and update
    epochs: float = 0.0  # epochs done, fractional when stopped mid-epoch

    @property
    def tokens_per_second(self):
        """Training tokens (or items) per second of ``train_time``."""
        return self.num_tokens / self.train_time if self.train_time else 0.0

    def means_between(self, marks):
        """The plain mean of the step losses after each of the steps
        ``marks`` (increasing) up to the next: the training loss since
        the last validation, one per mark."""
        means, losses, marks = [], [], list(marks)
        for step, loss in self.steps:
            losses.append(loss)
            if marks and step == marks[0]:
                means.append(sum(losses) / len(losses))
                losses = []
                marks.pop(0)
        return means

    def summary(self):
        """A readable multi-line report, one row per epoch."""
        lines = [f"{self.epochs:.2f} epochs, {self.num_steps} steps, "
                 f"{self.train_time:.2f} s of training, "
                 f"{self.tokens_per_second:,.0f} tokens/s",
                 f"{'epoch':>5} {'train loss':>10} {'val loss':>9} "
                 f"{'time (s)':>9}"]
        for i, (loss, sec) in enumerate(zip(self.train_loss,
                                            self.epoch_time)):
            val = self.val_loss[i] if i < len(self.val_loss) else math.nan
            lines.append(f"{i + 1:>5} {loss:>10.4f} {val:>9.4f} {sec:>9.2f}")
        return "\n".join(lines)

    def __repr__(self):
        return "History: " + self.summary()


def _unpack(out, batch, where):
    """Split a step's return into ``(loss, num_tokens)``, checking both."""
    loss, num = out if isinstance(out, (tuple, list)) else (out, None)
    if not torch.is_tensor(loss) or loss.dim() != 0:
        shape = tuple(loss.shape) if torch.is_tensor(loss) else type(loss)
        raise TypeError(f"{where} must return a scalar loss tensor (or "
                        f"(loss, num_tokens)), got {shape}; reduce the loss "
                        "with .mean() or .sum() / num_tokens")
    if num is None:  # a bare loss counts the examples of the batch
        num = _batch_size(batch)
    if torch.is_tensor(num):  # checked when read (see _check_count)
        if num.dim() != 0:
            raise TypeError(f"{where} must return num_tokens as an int or "
                            f"a 0-d tensor, got shape {tuple(num.shape)}")
        return loss, num
    return loss, _check_count(int(num), where)


def _check_count(num, where):
    if num <= 0:
        raise ValueError(f"{where} returned num_tokens={num}; the count of "
                         "items the loss averages over must be positive")
    return num


class _Step(torch.nn.Module):
    """The model's ``training_step`` as a module's ``forward``, so that
    ``DistributedDataParallel`` sees the step (it synchronises the
    gradients of what its ``forward`` ran)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, batch):
        return self.model.training_step(batch)


class Every:
    """A callback that calls ``fn(model, step)`` every ``n`` steps and
    at the last step, and keeps ``records``: ``[(step, fn's value)]``.
    (Validation by any measure, e.g. a perplexity or an accuracy; as
    every callback, its time is not training time and its random draws
    change no training draw.)"""

    def __init__(self, n, fn):
        check_int("n", n)
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        self.n, self.fn, self.records, self.last = n, fn, [], None

    def on_fit_start(self, trainer, model, last_step):
        self.records, self.last = [], last_step

    def on_step_end(self, trainer, model, step):
        if step % self.n == 0 or step == self.last:
            self.records.append((step, self.fn(model, step)))


def _batch_size(batch):
    """Length of the first tensor of ``batch`` (1 if it has none)."""
    batch = [batch] if torch.is_tensor(batch) else batch
    first = next((t for t in batch if torch.is_tensor(t)), None)
    return len(first) if first is not None and first.dim() else 1


def _check_finite(value, where, step):
    """Stop at once on a NaN or infinite loss, saying what to try."""
    if not math.isfinite(value):
        at = "" if step is None else f" at step {step}"
        raise FloatingPointError(
            f"{where} loss is {value}{at}; lower the learning rate, clip "
            "gradients (gradient_clip_val=1.0) or check the data")


class Trainer:
    """Train a model for a number of epochs, steps or seconds.

    Args:
        max_epochs: passes over the training data (None: no epoch limit,
            then ``max_steps`` or ``max_time`` must be given).
        gradient_clip_val: clip the global gradient norm to this value;
            0 turns clipping off.
        device: ``'auto'`` (cuda, then mps, else cpu), ``'cpu'``,
            ``'cuda'`` or a ``torch.device``.
        max_steps: stop after this many optimizer steps.
        max_time: stop once the measured training time (forward, backward
            and update; validation excluded) reaches this many seconds.
        val_every_n_steps: also validate every n steps (besides at the end
            of each epoch), for runs shorter than an epoch.
        progress: show a tqdm progress bar (notebook or terminal).
        seed: if given, ``d2lmini.utils.set_seed(seed)`` at the start of
            ``fit``: it fixes dropout and any other use of the global
            generators during training.  The batch order is the data's
            (``MTFraEng(seed=)`` has a generator of its own), and the
            initial weights are fixed by seeding before building the model.
        warmup_steps: raise the learning rate linearly from
            ``lr / warmup_steps`` to the optimizer's ``lr`` over the first
            ``warmup_steps`` steps (0: no warm-up).
        schedule: ``'constant'`` after the warm-up, or ``'cosine'``: decay
            to 0 at the last step (needs ``max_steps``, or ``max_epochs``
            and a loader with a length).
        clock: the timer, ``time.perf_counter`` by default.
        callbacks: objects with ``on_fit_start`` and/or ``on_step_end``
            (see the module docstring), called in order.
        val_at_epoch_end: validate at the end of every epoch (the
            default); False: only every ``val_every_n_steps`` steps and
            at the last step (for runs counted in steps).
        precision: ``'fp32'``, or ``'bf16'``: the training step's
            forward pass under ``torch.autocast`` in bfloat16 (on CUDA;
            the weights and the optimizer stay in float32).
        sync_every: read the losses back from the device every this many
            steps (default: 1 on the CPU, 50 elsewhere; see the module
            docstring).
    """

    def __init__(self, max_epochs=1, gradient_clip_val=0, device="auto", *,
                 max_steps=None, max_time=None, val_every_n_steps=None,
                 progress=True, seed=None, warmup_steps=0,
                 schedule="constant", clock=time.perf_counter,
                 callbacks=(), val_at_epoch_end=True, precision="fp32",
                 sync_every=None):
        for name, v in (("max_epochs", max_epochs), ("max_steps", max_steps),
                        ("val_every_n_steps", val_every_n_steps),
                        ("sync_every", sync_every)):
            check_int(name, v, 1, none_ok=True)
        check_int("seed", seed, 0, none_ok=True)
        check_int("warmup_steps", warmup_steps, 0)
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got "
                             f"{schedule!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got "
                             f"{precision!r}")
        if not gradient_clip_val >= 0:  # also rejects NaN
            raise ValueError(f"gradient_clip_val must be >= 0 (0 means no "
                             f"clipping), got {gradient_clip_val}")
        if max_time is not None and not max_time > 0:
            raise ValueError(f"max_time must be > 0 seconds, got {max_time}")
        if max_epochs is None and max_steps is None and max_time is None:
            raise ValueError("max_epochs=None needs max_steps or max_time, "
                             "otherwise training never stops")
        self.max_epochs, self.gradient_clip_val = max_epochs, gradient_clip_val
        self.max_steps, self.max_time = max_steps, max_time
        self.val_every_n_steps, self.progress = val_every_n_steps, progress
        self.seed, self.clock = seed, clock
        self.warmup_steps, self.schedule = warmup_steps, schedule
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            if not any(callable(getattr(cb, name, None))
                       for name in ("on_fit_start", "on_step_end")):
                raise TypeError(
                    f"callback {cb!r} has neither on_fit_start nor "
                    "on_step_end; give an object with one of them")
        self.val_at_epoch_end, self.precision = val_at_epoch_end, precision
        self.device = self._pick_device(device)
        self.sync_every = sync_every or (
            1 if self.device.type == "cpu" else 50)
        self.optimizer = self.scheduler = self.history = None
        self._pending = []

    @staticmethod
    def _pick_device(device):
        if device == "auto":
            if distributed.world()[1] > 1:  # torchrun: this process's
                return distributed.init()
            if torch.cuda.is_available():
                return torch.device("cuda")
            if torch.backends.mps.is_available():
                return torch.device("mps")
            return torch.device("cpu")
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError) as err:
            raise ValueError(f"unknown device {device!r}; use 'auto', "
                             "'cpu', 'cuda' or 'mps'") from err
        available = {"cuda": torch.cuda.is_available,
                     "mps": torch.backends.mps.is_available}
        if not available.get(device.type, lambda: True)():
            raise ValueError(f"device {device.type!r} is not available on "
                             "this machine; use device='auto' or 'cpu'")
        return device

    def _to_device(self, batch):
        """Move the tensors of a batch to the device, leave the rest."""
        if torch.is_tensor(batch):
            return batch.to(self.device)
        if isinstance(batch, (tuple, list)):
            items = [self._to_device(t) for t in batch]
            if hasattr(batch, "_fields"):  # a namedtuple
                return type(batch)(*items)
            return type(batch)(items)
        return batch

    def _sync(self):
        """Wait for queued GPU work so that the clock measures it."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def validate(self, model, loader, step=None):
        """Token-weighted mean loss over ``loader``, without gradients.

        Under ``torchrun`` each process scores its share of each batch
        and the sums are reduced: every process returns the same loss.

        Args:
            model: has ``validation_step`` (or ``training_step``).
            loader: an iterable of batches, e.g. ``data.val_dataloader()``.
            step: the training step, named in the error on a NaN loss.

        Returns:
            The mean loss (a float); the model's train/eval mode and the
            global random generators are kept.
        """
        step_fn = getattr(model, "validation_step", model.training_step)
        rank, world_size = distributed.world()
        modes = [(m, m.training) for m in model.modules()]
        model.eval()
        total, count = 0.0, 0
        try:
            with torch.no_grad(), keep_random_state(self.device.type):
                for batch in loader:
                    batch = distributed.shard(batch, rank, world_size)
                    if world_size > 1 and distributed.rows(batch) == 0:
                        continue  # fewer rows than processes
                    batch = self._to_device(batch)
                    loss, num = _unpack(step_fn(batch), batch,
                                        "validation_step")
                    num = _check_count(int(num), "validation_step")
                    total, count = total + loss.item() * num, count + num
        finally:  # also when a step raises: training may go on
            for m, training in modes:
                m.training = training
        if world_size > 1:
            sums = distributed.all_reduce_sum(torch.tensor(
                [total, count], dtype=torch.float64, device=self.device))
            total, count = sums[0].item(), int(sums[1].item())
        if count == 0:
            raise ValueError("the validation loader yielded no batches")
        _check_finite(total / count, "validation", step)
        return total / count

    def _autocast(self):
        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _train_step(self, runner, model, batch):
        """One update; returns the global batch's mean loss and number
        of tokens, as read now (an int and a float) or as tensors to read
        later (``sync_every`` > 1)."""
        world_size = distributed.world()[1]
        share = distributed.shard(batch)
        empty = world_size > 1 and distributed.rows(share) == 0
        if empty:  # computes on one row, weighted zero (see distributed)
            share = distributed.first_row(batch)
        share = self._to_device(share)
        with self._autocast():
            loss, num = _unpack(runner(share), share, "training_step")
        if world_size > 1:
            # One all-reduce: the global loss sum and token count.
            local = torch.as_tensor(0 if empty else num,
                                    dtype=torch.float64, device=loss.device)
            sums = distributed.all_reduce_sum(torch.stack(
                [loss.detach().double() * local, local]))
            value, num = sums[0] / sums[1], sums[1]
            # DDP averages the W gradients: weighting each by
            # W n_r / N leaves the gradient of the global token mean.
            loss = loss * (local * world_size / sums[1]).to(loss.dtype)
        else:
            value = loss.detach()
        if self.sync_every == 1:  # read now, before any update
            value = value.item()
            _check_finite(value, "training", self.history.num_steps + 1)
            if torch.is_tensor(num):
                num = _check_count(int(num), "training_step")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.gradient_clip_val > 0:  # rescale if the global norm is larger
            torch.nn.utils.clip_grad_norm_(model.parameters(),
                                           self.gradient_clip_val)
        self.optimizer.step()
        self.scheduler.step()
        return value, num

    def _lr_factor(self, total):
        """The schedule: step -> factor of the optimizer's ``lr``."""
        warmup, schedule = self.warmup_steps, self.schedule

        def factor(step):  # step = number of updates done so far
            if schedule == "cosine-after-warmup":
                if step < warmup:
                    return (step + 1) / warmup
                return 0.5 * (1 + math.cos(math.pi * (step - warmup)
                                           / max(1, total - warmup)))
            f = min(1.0, (step + 1) / warmup) if warmup else 1.0
            if schedule == "cosine":
                f *= 0.5 * (1.0 + math.cos(math.pi * min(step, total)
                                           / total))
            return f
        return factor

    def _runner(self, model):
        """What runs a training step: the model's ``training_step``,
        inside ``DistributedDataParallel`` under ``torchrun``."""
        step = _Step(model)
        if distributed.world()[1] == 1:
            return step
        from torch.nn.parallel import DistributedDataParallel
        ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(step, device_ids=ids)

    def fit(self, model, data):
        """Train ``model`` on ``data``; the optimizer is ``self.optimizer``.

        Args:
            model: an ``nn.Module`` with the methods in the module docstring;
                it is moved to ``self.device`` and left in eval mode.
            data: has ``train_dataloader()`` and maybe ``val_dataloader()``.

        Returns:
            The ``History`` of the run, also kept as ``self.history``.
        """
        rank, world_size = distributed.world()
        if self.seed is not None:
            set_seed(self.seed)
        if world_size > 1:
            # Every process its own dropout masks; the initial weights
            # are rank 0's (DistributedDataParallel broadcasts them).
            torch.manual_seed(torch.initial_seed() + rank)
        model.to(self.device)
        self.optimizer = model.configure_optimizers()
        if not isinstance(self.optimizer, torch.optim.Optimizer):
            raise TypeError("configure_optimizers() must return a torch "
                            f"optimizer, got {type(self.optimizer).__name__}")
        runner = self._runner(model)
        train = data.train_dataloader()
        val = getattr(data, "val_dataloader", lambda: None)()
        try:
            per_epoch = len(train)
        except TypeError:  # an iterable-style loader has no length
            per_epoch = None
        bounds = [n for n in (self.max_steps, per_epoch and self.max_epochs
                              and per_epoch * self.max_epochs) if n]
        if self.schedule != "constant" and not bounds:
            raise ValueError(f"schedule={self.schedule!r} needs to know "
                             "the last step: set max_steps (or max_epochs "
                             "with a loader that has a length)")
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, self._lr_factor(min(bounds) if bounds else 1))
        self.history = hist = History()
        self._pending = []
        last_step = min(bounds) if bounds else None
        self._call("on_fit_start", model, last_step)
        bar = tqdm(total=min(bounds) if bounds else None, unit="step",
                   disable=not self.progress or rank != 0)
        try:
            epoch = 0
            while self.max_epochs is None or epoch < self.max_epochs:
                epoch += 1
                bar.set_description(f"epoch {epoch}")
                start, stop = self.clock(), False
                self._epoch = [0.0, 0]  # token-weighted loss sum, tokens
                first_step = hist.num_steps
                model.train()
                for batch in train:
                    if not self._pending:
                        self._window = self.clock()
                    value, num = self._train_step(runner, model, batch)
                    hist.num_steps += 1
                    self._pending.append((hist.num_steps, value, num))
                    if len(self._pending) >= self.sync_every or \
                            self.callbacks or hist.num_steps == last_step:
                        self._flush(bar)
                    self._call("on_step_end", model, hist.num_steps)
                    bar.update()
                    stop = self._should_stop()
                    if stop:
                        break
                    if val is not None and self.val_every_n_steps and \
                            hist.num_steps % self.val_every_n_steps == 0:
                        self._record_val(model, val, bar)
                self._flush(bar)
                if hist.num_steps == first_step:
                    raise ValueError("train_dataloader() yielded no batches")
                hist.train_loss.append(self._epoch[0] / self._epoch[1])
                if val is not None and (self.val_at_epoch_end or (
                        stop and self.val_every_n_steps)):
                    hist.val_loss.append(self._record_val(model, val, bar))
                hist.epoch_time.append(self.clock() - start)
                done = hist.num_steps - first_step
                hist.epochs += done / per_epoch if per_epoch else 1.0
                if stop:
                    break
        finally:
            bar.close()
        model.eval()
        return hist

    def _flush(self, bar):
        """Read the pending steps' losses and counts (one read from the
        device), check them, record them and add their time."""
        if not self._pending:
            return
        steps, values, nums = zip(*self._pending)
        self._pending = []
        if any(torch.is_tensor(v) for v in values):
            values = torch.stack([torch.as_tensor(v, dtype=torch.float64)
                                  for v in values]).tolist()
        if any(torch.is_tensor(n) for n in nums):
            nums = [int(n) for n in torch.stack(
                [torch.as_tensor(n).double().cpu() for n in nums])]
        self._sync()
        hist = self.history
        hist.train_time += self.clock() - self._window
        for step, value, num in zip(steps, values, nums):
            _check_finite(value, "training", step)
            num = _check_count(num, "training_step")
            hist.num_tokens += num
            hist.steps.append((step, value))
            self._epoch[0] += value * num
            self._epoch[1] += num
        self._show(bar)

    def _call(self, name, model, step):
        """Call every callback's ``name`` method that it has, keeping
        the global random generators as they were."""
        for cb in self.callbacks:
            method = getattr(cb, name, None)
            if callable(method):
                with keep_random_state(self.device.type):
                    method(self, model, step)

    def _should_stop(self):
        hist = self.history
        return (self.max_steps is not None
                and hist.num_steps >= self.max_steps) or (
            self.max_time is not None and hist.train_time >= self.max_time)

    def _record_val(self, model, val, bar):
        """Validate now unless this step was validated already."""
        self._flush(bar)
        hist = self.history
        if hist.val_steps and hist.val_steps[-1][0] == hist.num_steps:
            return hist.val_steps[-1][1]
        loss = self.validate(model, val, hist.num_steps)
        hist.val_steps.append((hist.num_steps, loss))
        self._show(bar)
        return loss

    def _show(self, bar):
        """Put the last losses and the speed on the progress bar."""
        hist = self.history
        if not hist.steps:
            return
        post = {"loss": f"{hist.steps[-1][1]:.3f}"}
        if hist.val_steps:
            post["val"] = f"{hist.val_steps[-1][1]:.3f}"
        post["tok/s"] = f"{hist.tokens_per_second:,.0f}"
        bar.set_postfix(post, refresh=False)
