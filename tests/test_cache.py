"""Tests of d2lmini.cache: safe checkpoints and the fingerprinted cache.

The cache tests use test_experiment.py's synthetic corpus (its autouse
fixture is imported here) and tiny recipe.
"""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from test_experiment import TINY, synthetic_corpus  # noqa: F401
from test_trainer import Regression

from d2lmini import cache, corpus, experiment, utils
from d2lmini.cache import load_checkpoint, save_checkpoint
from d2lmini.trainer import History


def _touch(path):
    """Called only if an unsafe unpickler runs the payload below."""
    open(path, "w").close()


class Payload:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return _touch, (self.path,)


def test_checkpoint_round_trip(tmp_path):
    torch.manual_seed(0)
    model, X = Regression(), torch.randn(5, 3)
    path = tmp_path / "sub" / "model.pt"
    save_checkpoint(model, path, epoch=3, vocab=["a", "b"], lr=0.05)
    assert os.listdir(tmp_path / "sub") == ["model.pt"]  # no temp file left
    other = Regression()
    assert not torch.equal(other(X), model(X))
    extra = load_checkpoint(other, path)
    assert extra == {"epoch": 3, "vocab": ["a", "b"], "lr": 0.05}
    model.eval(), other.eval()
    assert torch.equal(other(X), model(X))


def test_checkpoint_refuses_unsafe_content(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(TypeError, match="Payload"):
        save_checkpoint(Regression(), tmp_path / "a.pt", x=Payload(marker))
    assert not (tmp_path / "a.pt").exists()
    evil = tmp_path / "evil.pt"
    torch.save({"format": "d2lmini-checkpoint", "state_dict": {},
                "extra": {"x": Payload(str(marker))}}, evil)
    with pytest.raises(ValueError, match="refusing to unpickle"):
        load_checkpoint(Regression(), evil)
    assert not marker.exists()  # the payload never ran
    plain = tmp_path / "plain.pt"
    torch.save(Regression().state_dict(), plain)
    with pytest.raises(ValueError, match="not a d2lmini checkpoint"):
        load_checkpoint(Regression(), plain)


def test_train_or_load_trains_then_loads(tmp_path):
    first = cache.train_or_load(TINY, tmp_path, progress=False)
    path = cache.checkpoint_path(TINY, tmp_path)
    assert first.trained and path.exists()
    assert TINY.key() in path.name
    again = cache.train_or_load(TINY, tmp_path, progress=False)
    assert not again.trained and not again.model.training
    for (name, a), b in zip(first.model.state_dict().items(),
                            again.model.state_dict().values()):
        assert torch.equal(a, b), name
    h1, h2 = first.history, again.history
    assert (h2.num_steps, h2.train_time, h2.num_tokens, h2.epochs) == \
        (h1.num_steps, h1.train_time, h1.num_tokens, h1.epochs)
    assert h2.steps == h1.steps and h2.val_loss == h1.val_loss
    assert h2.tokens_per_second == h1.tokens_per_second
    other = cache.train_or_load(TINY.replace(seed=1), tmp_path,
                                     progress=False)
    assert other.trained


def test_train_or_load_default_folder_is_the_cache():
    path = cache.checkpoint_path(TINY)
    assert path.parent == corpus.cache_dir() / "models"
    assert cache.train_or_load(TINY, progress=False).trained
    assert path.exists()


def _save_with(path, model, **extra):
    """Overwrite a cache file with other metadata, same weights."""
    cache.save_checkpoint(model, path, **extra)


def test_train_or_load_retrains_when_the_code_changes(tmp_path,
                                                     monkeypatch):
    first = cache.train_or_load(TINY, tmp_path, progress=False)
    monkeypatch.setattr(cache, "code_fingerprint",
                        lambda: "code of another version")
    again = cache.train_or_load(TINY, tmp_path, progress=False)
    assert again.trained and first.trained
    assert "d2lmini's code changed" in again.reason, again.reason
    assert again.summary().startswith("trained now (the cached model is "
                                      "stale: d2lmini's code changed")
    # the new fingerprint was stored: the next call is a cache hit
    assert not cache.train_or_load(TINY, tmp_path,
                                        progress=False).trained


@pytest.mark.parametrize("part, words", [
    ("torch", "the torch version"), ("data", "the data"),
    ("recipe", "the recipe"), ("device", "the device (now cpu)")])
def test_train_or_load_retrains_on_any_stale_part(tmp_path, part, words):
    run = cache.train_or_load(TINY, tmp_path, progress=False)
    path = cache.checkpoint_path(TINY, tmp_path)
    fp = dict(cache.fingerprint(TINY, run.data), **{part: "old"})
    _save_with(path, run.model, fingerprint=fp,
               generator_state=run.data.generator.get_state(),
               history=cache._history_record(run.history))
    again = cache.train_or_load(TINY, tmp_path, progress=False)
    assert again.trained
    assert re.search(re.escape(words) + ".* changed", again.reason), (
        again.reason)


def test_train_or_load_retrains_an_old_or_damaged_file(tmp_path):
    run = cache.train_or_load(TINY, tmp_path, progress=False)
    path = cache.checkpoint_path(TINY, tmp_path)
    _save_with(path, run.model, history={})  # no fingerprint: older
    again = cache.train_or_load(TINY, tmp_path, progress=False)
    assert again.trained and "no fingerprint" in again.reason
    torch.save({"format": "d2lmini-checkpoint", "version": 1,
                "state_dict": run.model.state_dict(), "extra": [1, 2]},
               path)  # metadata that is not a dict
    again = cache.train_or_load(TINY, tmp_path, progress=False)
    assert again.trained and "not a dict" in again.reason
    assert str(tmp_path) not in again.reason, "a path of this machine"


@pytest.mark.parametrize("cut", [0, 100, -100])
def test_a_truncated_or_empty_checkpoint_is_retrained(tmp_path, cut):
    """An empty file or one cut short (torch raises OSError for a zip
    cut short) retrains, and the reason says so in words."""
    run = cache.train_or_load(TINY, tmp_path, progress=False)
    path = cache.checkpoint_path(TINY, tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole[:cut] if cut else b"")
    again = cache.train_or_load(TINY, tmp_path, progress=False)
    assert again.trained and run.trained
    assert again.reason.startswith("the cached file could not be read: ")
    assert len(again.reason) > len("the cached file could not be read: ")
    assert str(tmp_path) not in again.reason, "a path of this machine"


def test_a_cache_hit_or_a_first_training_says_so():
    run = cache.Run(None, None, History(), True,
                    "no cached model yet")
    assert run.summary().startswith("trained now (no cached model yet): ")
    assert run._replace(trained=False).summary().startswith(
        "loaded from the cache: ")


def test_a_partial_reload_is_refused(tmp_path, monkeypatch):
    """importlib.reload(d2lmini.attention) gives the module new classes
    while d2lmini.multihead keeps the old ones: build_model would build
    the old code under the new code's fingerprint.  Here the module's
    class is replaced as a reload replaces it."""
    from d2lmini import attention

    class DotProductAttention(attention.DotProductAttention):
        pass

    DotProductAttention.__module__ = attention.__name__
    monkeypatch.setattr(attention, "DotProductAttention",
                        DotProductAttention)
    assert "multihead.DotProductAttention" in cache._stale_bindings()
    with pytest.raises(RuntimeError, match="partly reloaded: .*multihead"
                       r"\.DotProductAttention"):
        cache.train_or_load(TINY, tmp_path, progress=False)
    monkeypatch.undo()
    assert cache._stale_bindings() == []


@pytest.mark.parametrize("device, devices", [
    ("cpu", []), ("mps", [0])])
def test_the_training_devices_generator_is_kept(monkeypatch, device,
                                                devices):
    """A cache hit leaves the generator of the device that trains where
    a fresh run leaves it: fork_rng saves that device's state (the
    Apple GPU's too, not only CUDA's)."""
    calls = []
    real = torch.random.fork_rng

    def spy(devices=None, device_type="cuda", **kwargs):
        calls.append((list(devices), device_type))
        return real(devices=[], device_type="cuda")

    monkeypatch.setattr(torch.random, "fork_rng", spy)
    with utils.keep_random_state(device):
        pass
    assert calls == [(devices, "mps" if device == "mps" else "cuda")]


def test_the_model_is_on_the_cpu_trained_or_loaded(tmp_path, monkeypatch):
    """Run.model is on the CPU whether it trained (on any device) or was
    loaded.  This machine has no GPU: the trained model records the
    device it is moved to, as one trained on CUDA would need moving."""
    real, moved = experiment.train, []

    def train_elsewhere(recipe, data=None, progress=True, callbacks=()):
        model, data, history = real(recipe, data, progress,
                                     callbacks)
        to = model.to
        model.to = lambda *a, **k: moved.append((a, k)) or to(*a, **k)
        return model, data, history

    monkeypatch.setattr(cache, "train", train_elsewhere)
    trained = cache.train_or_load(TINY, tmp_path, progress=False)
    assert [torch.device(*a, **k) for a, k in moved] == [
        torch.device("cpu")], moved
    loaded = cache.train_or_load(TINY, tmp_path, progress=False)
    for run in (trained, loaded):
        assert {p.device.type for p in run.model.parameters()} == {"cpu"}
        assert not run.model.training


def test_the_data_dependence_is_in_the_fingerprint():
    d = experiment.build_data(TINY)
    fp = cache.fingerprint(TINY, d)
    assert set(fp) == {"recipe", "code", "torch", "data", "device",
                       "processes"}
    assert fp["processes"] == 1
    assert fp == cache.fingerprint(TINY, experiment.build_data(TINY))
    other = experiment.build_data(TINY.replace(seed=1))  # another split
    assert cache.data_fingerprint(other) != fp["data"]
    assert cache.data_fingerprint(
        experiment.build_data(TINY.replace(min_freq=30))) != fp["data"]


def test_a_cache_hit_leaves_the_data_as_training_does(tmp_path):
    def next_batches(d):  # what the data draws next, e.g. for a model
        return [b[0].tolist() for b in d.train_dataloader()]

    fresh = cache.train_or_load(TINY, tmp_path, progress=False)
    hit = cache.train_or_load(TINY, tmp_path, progress=False)
    assert fresh.trained and not hit.trained
    assert torch.equal(fresh.data.generator.get_state(),
                       hit.data.generator.get_state())
    assert next_batches(fresh.data) == next_batches(hit.data)
    # training did advance the generator, so the check above can fail
    untouched = experiment.build_data(TINY)
    assert next_batches(untouched) != next_batches(
        cache.train_or_load(TINY, tmp_path, progress=False).data)


def test_train_or_load_replaces_a_bad_file(tmp_path):
    path = cache.checkpoint_path(TINY, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a checkpoint")
    run = cache.train_or_load(TINY, tmp_path, progress=False)
    assert run.trained and "could not be read" in run.reason, run.reason
    assert not cache.train_or_load(TINY, tmp_path,
                                        progress=False).trained


def test_the_code_fingerprint_covers_what_training_imports(tmp_path):
    package = Path(cache.__file__).parent
    used = cache._imported_modules(cache._TRAINING_ROOT, package)
    assert {"cache", "experiment", "attention", "attention_decoder",
            "seq2seq", "data", "corpus", "splits", "trainer", "decoding",
            "distributed",
            "metrics", "multihead", "recipes", "snapshots", "tokenizer",
            "transformer",
            "transformer_blocks", "utils", "vocab"} == used
    # nothing that only shows or explores (plot, notebook, live,
    # widgets, pooling)
    (tmp_path / "__init__.py").write_text(
        '_NAMES = {"f": ("lazy",), "g": ("unused",)}\n')
    for name, text in {
            "a": "from .b import x\nimport d2lmini.e\n",
            "b": "from . import c\nfrom d2lmini import h, lazy\nx = 1\n",
            "c": "from d2lmini.i import y\n", "d": "from .a import x\n",
            "e": "", "f": "", "g": "", "h": "", "i": ""}.items():
        (tmp_path / f"{name}.py").write_text(text)
    assert cache._imported_modules("a", tmp_path) == {
        "a", "b", "c", "e", "f", "h", "i"}


def test_the_cache_module_itself_is_in_the_fingerprint():
    # train_or_load builds the data and calls train: an edit there
    # (say, train(recipe.replace(lr=2 * recipe.lr))) must retrain.
    assert "cache" in cache._imported_modules(
        cache._TRAINING_ROOT, Path(cache.__file__).parent)


def test_d2lmini_keeps_the_source_each_module_was_compiled_from():
    import d2lmini
    from d2lmini import trainer
    kept = d2lmini.SOURCES["d2lmini.trainer"]
    assert kept == Path(trainer.__file__).read_bytes()
    assert type(trainer.__spec__.loader).__name__ == "_KeepSource"


EDIT_AFTER_IMPORT = textwrap.dedent("""
    import json, sys, warnings
    from pathlib import Path
    import d2lmini.cache as cache
    assert cache.__file__.startswith(sys.argv[1]), cache.__file__
    before = cache.code_fingerprint()
    path = Path(cache.__file__).with_name("trainer.py")
    path.write_text(path.read_text() + "\\nEDITED = True\\n")
    print(json.dumps({"same": cache.code_fingerprint() == before,
                      "edited": cache._edited_since_import()}))
    """)


@pytest.mark.slow
def test_the_fingerprint_is_of_the_code_that_ran_not_the_file(tmp_path):
    # A copy of the package, imported by another Python, then edited.
    shutil.copytree(Path(cache.__file__).parent, tmp_path / "d2lmini",
                    ignore=shutil.ignore_patterns("__pycache__"))
    script = tmp_path / "edit.py"
    script.write_text(EDIT_AFTER_IMPORT)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, str(script), str(tmp_path)],
                          capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {"same": True, "edited": ["trainer"]}


def test_train_or_load_says_when_the_code_was_edited_since_import(
        tmp_path, monkeypatch):
    import d2lmini
    monkeypatch.setitem(d2lmini.SOURCES, "d2lmini.trainer",
                        b"# the trainer this process compiled\n")
    assert cache._edited_since_import() == ["trainer"]
    with pytest.warns(UserWarning, match=r"trainer\.py changed since"):
        cache.train_or_load(TINY, tmp_path, progress=False)


def _draws():
    return (random.random(), np.random.rand(), torch.rand(3).tolist())


def test_train_or_load_leaves_the_global_generators_as_it_found_them(
        tmp_path):
    draws = []
    for _ in range(2):  # a fresh run, then a cache hit
        torch.manual_seed(5), random.seed(5), np.random.seed(5)
        cache.train_or_load(TINY, tmp_path, progress=False)
        draws.append(_draws())
    torch.manual_seed(5), random.seed(5), np.random.seed(5)
    assert draws[0] == draws[1] == _draws()


def test_the_fingerprint_records_the_device_that_trains():
    fp = cache.fingerprint(TINY, experiment.build_data(TINY))
    assert fp["device"] == cache.training_device() == (
        experiment._trainer(TINY, False).device.type)


def test_a_changed_vocabulary_is_called_a_data_change(tmp_path):
    """A checkpoint whose vocabulary is another size is stale because its
    data changed: the warning says so, not load_state_dict's size
    mismatch."""
    run = cache.train_or_load(TINY, tmp_path, progress=False)
    path = cache.checkpoint_path(TINY, tmp_path)
    bigger = experiment.build_model(TINY, run.data)
    state = bigger.state_dict()
    state["decoder.dense.weight"] = torch.zeros(
        state["decoder.dense.weight"].shape[0] + 3,
        state["decoder.dense.weight"].shape[1])
    fp = dict(cache.fingerprint(TINY, run.data), data="old")
    torch.save({"format": "d2lmini-checkpoint", "version": 1,
                "state_dict": state,
                "extra": {"fingerprint": fp,
                          "generator_state": run.data.generator.get_state(),
                          "history": cache._history_record(run.history)}},
               path)
    again = cache.train_or_load(TINY, tmp_path, progress=False)
    assert again.trained
    said = again.reason
    assert "the data (vocabulary or split) changed" in said
    assert "size mismatch" not in said
