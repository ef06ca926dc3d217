"""Checkpoints that are safe to load, and a cache that is never stale.

``save_checkpoint`` and ``load_checkpoint`` write and read a model's
weights with plain metadata only (``torch.load(weights_only=True)``).
``train_or_load(recipe)`` trains a ``d2lmini.experiment.Recipe`` once
and loads it afterwards.  Each cache file holds a ``fingerprint`` of
everything that can change the trained weights or their evaluation: the
recipe, the source code of the package's modules that train and
evaluate, the torch version, and the data (vocabularies and splits).
``train_or_load`` compares it on load and retrains when any part
differs; the ``Run`` it returns says in ``reason`` what changed.
"""

import ast
import contextlib
import dataclasses
import hashlib
import json
import pickle
import sys
import warnings
from pathlib import Path
from typing import NamedTuple

import torch

from . import SOURCES, corpus, distributed
from .data import MTFraEng
from .experiment import build_data, build_model, train
from .seq2seq import Seq2Seq
from .snapshots import SnapshotRecorder, TrainingSnapshots
from .trainer import History, Trainer
from .utils import atomic_write, keep_random_state

__all__ = ["Run", "checkpoint_path", "code_fingerprint", "data_fingerprint",
           "fingerprint", "load_checkpoint", "processes", "save_checkpoint",
           "save_once", "train_or_load"]

# The module whose functions train and score a recipe: the fingerprint
# covers it and every d2lmini module it imports, directly or not
# (``experiment`` and what it imports, and this module itself, which
# builds the data and calls ``train``).
_TRAINING_ROOT = "cache"


_SAFE_LEAVES = (bool, int, float, complex, str, bytes, type(None),
                torch.Tensor, torch.dtype, torch.device, torch.Size)


def _check_safe(obj, name):
    """Reject metadata that ``torch.load(weights_only=True)`` cannot read."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            _check_safe(key, name)
            _check_safe(value, f"{name}[{key!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            _check_safe(value, f"{name}[{i}]")
    elif not isinstance(obj, _SAFE_LEAVES):
        raise TypeError(f"{name} is a {type(obj).__name__}; checkpoint "
                        "metadata may hold only tensors, numbers, strings, "
                        "None and lists, tuples or dicts of these")


def save_checkpoint(model, path, **extra):
    """Save ``model.state_dict()`` and metadata ``extra`` to ``path``.

    The file is written to a temporary file and renamed, so an interrupted
    save never leaves a half-written checkpoint behind.

    Args:
        model: the ``nn.Module`` whose parameters and buffers are saved.
        path: the file to write; missing folders are created.
        **extra: metadata (numbers, strings, tensors, lists, dicts, e.g.
            ``epoch=3`` or ``optimizer=opt.state_dict()``).
    """
    for key, value in extra.items():
        _check_safe(value, key)
    with atomic_write(path) as f:
        torch.save({"format": "d2lmini-checkpoint", "version": 1,
                    "state_dict": model.state_dict(), "extra": extra}, f)


def load_checkpoint(model, path, check=None):
    """Load a ``save_checkpoint`` file into ``model`` (in place).

    Only tensors and plain data are unpickled (``weights_only=True``), so a
    file that smuggles in arbitrary Python objects is refused.

    Args:
        model: a module of the same architecture as the saved one.
        path: a file written by ``save_checkpoint``.
        check: called with the metadata before the weights are loaded
            (to refuse a stale file for its reason, not for the size
            mismatch a changed vocabulary gives), or None.

    Returns:
        The ``extra`` metadata dict given to ``save_checkpoint``.
    """
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise ValueError(f"{path} holds objects other than tensors and "
                         "plain data; refusing to unpickle it (load only "
                         "files you trust)") from err
    if not isinstance(ckpt, dict) or ckpt.get("format") != \
            "d2lmini-checkpoint":
        raise ValueError(f"{path} is not a d2lmini checkpoint; create one "
                         "with save_checkpoint(model, path)")
    extra = ckpt.get("extra")
    if not isinstance(extra, dict) or not isinstance(
            ckpt.get("state_dict"), dict):
        raise ValueError(f"{path} is damaged: its metadata is a "
                         f"{type(extra).__name__}, not a dict, or it has "
                         "no state_dict; delete it and save it again")
    if check is not None:
        check(extra)
    model.load_state_dict(ckpt["state_dict"])
    return extra


def _package_names(init_source):
    """name -> module of the names ``d2lmini/__init__.py`` offers lazily
    (its ``_NAMES`` table), read with ``ast``."""
    for node in ast.parse(init_source).body:
        if isinstance(node, ast.Assign) and any(
                getattr(t, "id", None) == "_NAMES" for t in node.targets):
            table = ast.literal_eval(node.value)
            return {name: module for module, names in table.items()
                    for name in names}
    return {}


def _d2lmini_imports(tree, is_module, package_names):
    """The d2lmini modules that the parsed module ``tree`` imports:
    ``from .x import``, ``from . import x``, ``from d2lmini import x``
    (a module, or a name that ``d2lmini`` loads from one),
    ``from d2lmini.x import`` and ``import d2lmini.x``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name.split(".")[1] for a in node.names
                      if a.name.startswith("d2lmini.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 1 or node.module == "d2lmini" or (
                    node.module or "").startswith("d2lmini."):
                where = node.module or ""
                if node.level == 0:
                    where = where.removeprefix("d2lmini").lstrip(".")
                if where:
                    found.append(where.split(".")[0])
                else:  # names of the package itself
                    found += [a.name if is_module(a.name)
                              else package_names.get(a.name, "")
                              for a in node.names]
    return [m for m in found if m and is_module(m)]


def _imported_modules(name, package_dir, source=None):
    """``name`` and the d2lmini modules it imports, transitively (read
    from the source with ``ast``, so nothing is imported).

    ``source(module)`` gives a module's source; by default its file in
    ``package_dir`` is read.
    """
    if source is None:
        def source(module):
            return (package_dir / f"{module}.py").read_bytes()

    def is_module(module):
        return (package_dir / f"{module}.py").is_file()

    init = package_dir / "__init__.py"
    package_names = _package_names(init.read_bytes()) if init.is_file() \
        else {}
    seen, todo = set(), [name]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo += _d2lmini_imports(ast.parse(source(module)), is_module,
                                 package_names)
    return seen


def _source_that_ran(module):
    """The bytes ``d2lmini.<module>`` was compiled from in this process
    (d2lmini keeps them), or its file if it is not imported."""
    kept = SOURCES.get(f"{__package__}.{module}")
    if kept is not None:
        return kept
    return (Path(__file__).parent / f"{module}.py").read_bytes()


def _code_digest(source):
    package_dir = Path(__file__).parent
    digest = hashlib.sha256()
    for module in sorted(_imported_modules(_TRAINING_ROOT, package_dir,
                                           source)):
        digest.update(f"{module}.py".encode() + b"\0" + source(module))
    return digest.hexdigest()


def code_fingerprint():
    """sha256 of the source of every ``d2lmini`` module that trains or
    scores a recipe (``cache``, ``experiment`` and what they import,
    transitively), as it was when this process imported it: the code
    that runs, even if a file was edited since.  Editing any other
    module (the explorers, the plots, layers that the recipes do not
    use) keeps the cached models."""
    return _code_digest(_source_that_ran)


def _edited_since_import():
    """The training modules whose file differs from the code running."""
    package_dir = Path(__file__).parent
    return sorted(
        module for module in _imported_modules(
            _TRAINING_ROOT, package_dir, _source_that_ran)
        if (package_dir / f"{module}.py").read_bytes()
        != _source_that_ran(module))


def training_device():
    """The kind of device ``train`` uses here: ``'cuda'``, ``'mps'`` or
    ``'cpu'`` (``Trainer(device='auto')``'s choice)."""
    return Trainer._pick_device("auto").type


def processes():
    """How many processes train together (``torchrun``'s world size;
    1 in a plain process)."""
    return distributed.world()[1]


def save_once(model, path, keep=None, **extra):
    """``save_checkpoint`` by one process: alone, or rank 0 of a
    ``torchrun`` job (under the file's lock, atomically); the others
    wait for it and load the file into ``model``, so that every process
    holds what was written.  ``keep``: a function asked under the lock
    whether the file already there is to be kept (then nothing is
    written).  Returns whether this process wrote the file."""
    path, wrote = Path(path), False
    if distributed.is_main():
        with _locked(path):
            if keep is None or not keep():
                save_checkpoint(model, path, **extra)
                wrote = True
    distributed.barrier()
    if not distributed.is_main():
        load_checkpoint(model, path)
    return wrote


def data_fingerprint(data):
    """sha256 of what a model learns from and is scored on: both
    vocabularies and the train, val and test pairs."""
    text = json.dumps([
        data.src_vocab.idx_to_token, data.tgt_vocab.idx_to_token,
        data.train_pairs, data.val_pairs, data.test_pairs])
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprint(recipe, data):
    """Everything that can change the recipe's trained model or its
    scores, as a dict of strings (stored in each checkpoint).

    ``device`` is the kind of device that trains here: a model trained
    on CUDA or MPS has other weights than the CPU would train (floats
    are summed in another order), so a checkpoint brought from a
    machine with another device is retrained, like one from another
    torch version.  (Two CPUs can differ as well; the cache lives on
    one machine, so that is not recorded.)  ``processes`` is the number
    of data-parallel processes that train it (``torchrun``'s world
    size): N processes sum the gradients in another order than one.
    """
    return {"recipe": recipe.key(), "code": code_fingerprint(),
            "torch": str(torch.__version__),
            "data": data_fingerprint(data), "device": training_device(),
            "processes": processes()}


class Run(NamedTuple):
    """What ``train_or_load`` returns; ``trained`` is False when the
    weights came from the cache, and ``reason`` says, in words, why they
    did not when it is True.  ``snapshots`` are the
    ``d2lmini.snapshots.TrainingSnapshots`` of the run, or None when it
    was trained without them."""

    model: Seq2Seq
    data: MTFraEng
    history: History
    trained: bool
    reason: str = ""
    snapshots: TrainingSnapshots | None = None

    def summary(self):
        """One line for a notebook: trained now (and why) or loaded,
        then the first line of ``History.summary()``."""
        first = self.history.summary().splitlines()[0]
        if not self.trained:
            return f"loaded from the cache: {first}"
        why = f" ({self.reason})" if self.reason else ""
        return f"trained now{why}: {first}"


def checkpoint_path(recipe, cache_dir=None):
    """Where ``train_or_load`` keeps the recipe's model: ``cache_dir``
    (default ``d2lmini.corpus.cache_dir() / 'models'``) / ``<key>.pt``
    (``<key>-ddp<N>.pt`` when N processes train it under ``torchrun``,
    which then keeps one process's file)."""
    folder = corpus.cache_dir() / "models" if cache_dir is None \
        else Path(cache_dir)
    ddp = "" if processes() == 1 else f"-ddp{processes()}"
    return folder / f"seq2seq-{recipe.attention}-{recipe.key()}{ddp}.pt"


def _history_record(history):
    """The History's fields as plain data a checkpoint may hold."""
    record = dataclasses.asdict(history)
    record["steps"] = [list(s) for s in history.steps]
    record["val_steps"] = [list(s) for s in history.val_steps]
    return record


def _stale(saved, current):
    """Why a checkpoint's fingerprint is not the current one, or None."""
    if not isinstance(saved, dict):
        return "it has no fingerprint (written by an older d2lmini)"
    changed = [name for name in current if saved.get(name) != current[name]]
    what = {"recipe": "the recipe", "code": "d2lmini's code",
            "torch": f"the torch version (now {current['torch']})",
            "data": "the data (vocabulary or split)",
            "device": f"the device (now {current.get('device')})",
            "processes": f"the number of processes (now "
                         f"{current.get('processes')})"}
    if changed:
        return " and ".join(what[n] for n in changed) + \
            " changed since it was trained"
    return None


class _StaleCheckpoint(ValueError):
    """A readable checkpoint of other code, data, recipe or device."""


class _NoSnapshots(ValueError):
    """A fresh checkpoint, asked for the snapshots it lacks."""


def _load(recipe, data, path, expected, snapshots):
    """Model, History, generator state and snapshots (or None) of a
    usable cache file; ``snapshots``: refuse a file without them."""
    model = build_model(recipe, data)

    def fresh(extra):
        reason = _stale(extra.get("fingerprint"), expected)
        if reason:
            raise _StaleCheckpoint(reason)
        if snapshots and extra.get("snapshots") is None:
            raise _NoSnapshots("it was trained without snapshots")

    extra = load_checkpoint(model, path, check=fresh)
    record = extra["history"]
    history = History(**{
        **record, "steps": [tuple(s) for s in record["steps"]],
        "val_steps": [tuple(s) for s in record["val_steps"]]})
    snaps = extra.get("snapshots")
    if snaps is not None:
        snaps = TrainingSnapshots.from_record(snaps)
    return model, history, extra["generator_state"], snaps


def _stale_bindings():
    """Names that a training module took from another d2lmini module and
    that no longer are what that module holds: after
    ``importlib.reload(d2lmini.attention)``, ``d2lmini.multihead`` still
    builds the old ``DotProductAttention`` while the fingerprint reads
    the new source.  Returns ``["multihead.DotProductAttention", ...]``."""
    package_dir = Path(__file__).parent
    stale = []
    for module in sorted(_imported_modules(_TRAINING_ROOT, package_dir,
                                           _source_that_ran)):
        loaded = sys.modules.get(f"{__package__}.{module}")
        if loaded is None:
            continue
        for name, obj in vars(loaded).items():
            home = getattr(obj, "__module__", None)
            if not (isinstance(obj, type) or callable(obj)) or \
                    not isinstance(home, str) or home == loaded.__name__ \
                    or not home.startswith(f"{__package__}."):
                continue
            origin = sys.modules.get(home)
            if origin is not None and \
                    getattr(origin, getattr(obj, "__name__", name),
                            obj) is not obj:
                stale.append(f"{module}.{name}")
    return stale


def train_or_load(recipe, cache_dir=None, progress=True, snapshots=False):
    """Load the recipe's trained model from the cache, else train it.

    The cache file is named by ``recipe.key()`` and holds the weights,
    the ``History`` numbers, the ``fingerprint`` of what they were
    trained with and the state of the data's generator after training.
    A file that cannot be read, or whose fingerprint differs from the
    current one, is replaced by a fresh training run (``Run.reason``
    says why, in words).  Either way the returned data's generator is in the
    state training left it in, so what comes next (another model's
    batch order) does not depend on whether the cache was hit; and the
    global generators (Python's, NumPy's, torch's) are left as they
    were before the call, trained or loaded.

    The model is trained and cached under the code running in this
    process; if a training module was edited since it was imported, a
    warning says so (restart the kernel to train the edited code), and
    if one was reloaded with ``importlib.reload`` while another still
    holds its old classes, it raises ``RuntimeError``.

    ``snapshots=True`` also records ``d2lmini.snapshots`` of training
    (a ``SnapshotRecorder``: the attention, output and scores of probe
    sentences at about 40 steps; about a minute more on 2 CPU cores).
    They are stored in the same cache file as the weights, so they are
    always those of the cached model; a cached model trained without
    them is trained again (the same weights: recording changes nothing
    that is trained).  A file that has them gives them either way, and
    a run without them that ends while another process has written
    them keeps that file.

    Returns:
        ``Run(model, data, history, trained, reason, snapshots)``: the
        model on the
        CPU in eval mode, whether it trained (on any device) or loaded;
        ``reason`` says why it trained, in words.
    """
    edited = _edited_since_import()
    if edited:
        warnings.warn(
            f"d2lmini's {', '.join(f'{m}.py' for m in edited)} changed "
            "since this process imported it: the model is trained and "
            "cached for the code that runs, the old one; restart the "
            "kernel (or Python) to use the edited code", stacklevel=2)
    stale = _stale_bindings()
    if stale:
        raise RuntimeError(
            f"d2lmini was partly reloaded: {', '.join(stale)} are not what "
            "their modules now hold, so the model would be built from the "
            "old classes while its fingerprint names the new code; restart "
            "the kernel (or Python) instead of importlib.reload")
    with keep_random_state(training_device()):
        return _train_or_load(recipe, cache_dir, progress, snapshots)


def _train_or_load(recipe, cache_dir, progress, snapshots):
    path = checkpoint_path(recipe, cache_dir)
    data = build_data(recipe)
    expected = fingerprint(recipe, data)
    reason = "no cached model yet"
    if path.exists():
        try:
            model, history, state, snaps = _load(recipe, data, path,
                                                 expected, snapshots)
            data.generator.set_state(state)
        except (ValueError, RuntimeError, KeyError, TypeError, EOFError,
                OSError) as err:
            # Said in words by Run.summary(), not warned: a notebook's
            # output shows what it means, not a path of this machine.
            reason = _unusable(err, path)
        else:
            return Run(model.eval(), data, history, False, "", snaps)
    recorder = [SnapshotRecorder(data)] if snapshots else []
    model, data, history = train(recipe, data, progress, recorder)
    model = model.to("cpu")  # as a load gives it, on any device
    snaps = recorder[0].snapshots if recorder else None
    # Another process may have trained this recipe with snapshots
    # meanwhile: the same weights (recording changes nothing that is
    # trained), so its file, which has more, is kept.
    save_once(model, path,
              keep=lambda: snaps is None and _has_snapshots(path, expected),
              recipe=dataclasses.asdict(recipe), fingerprint=expected,
              generator_state=data.generator.get_state(),
              history=_history_record(history),
              snapshots=None if snaps is None else snaps.to_record())
    return Run(model, data, history, True, reason, snaps)


@contextlib.contextmanager
def _locked(path):
    """Hold an exclusive lock on ``path`` + ``.lock`` for the block, so
    that no other process writes ``path`` between a check and a write
    (on POSIX systems; where ``fcntl`` is missing, nothing is locked)."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _has_snapshots(path, expected):
    """Whether ``path`` is a checkpoint of the ``expected`` fingerprint
    that holds training snapshots."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, ValueError,
            pickle.UnpicklingError):
        return False
    extra = ckpt.get("extra") if isinstance(ckpt, dict) else None
    return (isinstance(extra, dict)
            and _stale(extra.get("fingerprint"), expected) is None
            and extra.get("snapshots") is not None)


def _unusable(err, path):
    """Why the cache file at ``path`` could not be used, in words, with
    the file's name and not its folder (a path of this machine)."""
    detail = (str(err).strip() or type(err).__name__).replace(
        str(path), path.name)
    if isinstance(err, _StaleCheckpoint):
        return f"the cached model is stale: {detail}"
    if isinstance(err, _NoSnapshots):
        return ("the cached model has no training snapshots: it was "
                "trained without them")
    return f"the cached file could not be read: {detail}"
