"""Tests of d2lmini.vision: the model cache, equal time and the scores.

Every test keeps the cache in its own temporary folder (the autouse
fixture points XDG_CACHE_HOME there), and every recipe is tiny.
"""

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

import d2lmini
from d2lmini import corpus, vision
from d2lmini.cache import _imported_modules, save_checkpoint
from d2lmini.experiment import Recipe
from d2lmini.timing import EqualTime
from d2lmini.vit import VisionRecipe, ViT, accuracy, bootstrap

TINY = VisionRecipe(patch_size=4, num_hiddens=16, mlp_num_hiddens=32,
                    num_heads=2, num_blks=1, dropout=0.0, batch_size=32,
                    max_steps=20)
SOFTMAX = TINY.replace(model="softmax")


@pytest.fixture(autouse=True)
def temporary_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "models"


def _same_weights(a, b):
    a, b = a.state_dict(), b.state_dict()
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# train_or_load -----------------------------------------------------------

def test_trained_once_then_loaded(cache_dir):
    first = vision.train_or_load(TINY, cache_dir)
    assert first.trained and first.reason == "no cached model yet"
    assert vision.checkpoint_path(TINY, cache_dir).is_file()
    assert isinstance(first.model, ViT) and not first.model.training
    assert first.history["steps"] == [20]
    assert first.summary().startswith("trained now (no cached model yet)")
    again = vision.train_or_load(TINY, cache_dir)
    assert not again.trained and again.reason == ""
    assert not again.model.training
    assert _same_weights(first.model, again.model)
    assert again.history == first.history
    assert again.summary().startswith("loaded from the cache: vit, 20 "
                                      "steps")
    assert again.recipe == TINY and again.data is first.data


def test_another_recipe_is_another_file(cache_dir):
    vision.train_or_load(SOFTMAX, cache_dir)
    other = vision.train_or_load(SOFTMAX.replace(seed=1), cache_dir)
    assert other.trained and other.reason == "no cached model yet"
    files = sorted(p.name for p in cache_dir.glob("*.pt"))
    assert len(files) == 2 and vision.checkpoint_path(
        SOFTMAX.replace(seed=1), cache_dir).name in files


def test_changed_code_is_retrained_and_named(monkeypatch, cache_dir):
    first = vision.train_or_load(SOFTMAX, cache_dir)
    monkeypatch.setattr(vision, "code_fingerprint", lambda: "edited")
    again = vision.train_or_load(SOFTMAX, cache_dir)
    assert again.trained
    assert again.reason == ("the cached file was not usable: d2lmini's "
                            "code changed since it was trained")
    assert _same_weights(first.model, again.model)  # same recipe, seed
    # The new file holds the new fingerprint: loaded next time.
    assert not vision.train_or_load(SOFTMAX, cache_dir).trained


@pytest.mark.parametrize("field, words", [
    ("torch", "the torch version"), ("data", "the data"),
    ("device", "the device (now cpu)"), ("recipe", "the recipe")])
def test_a_file_of_another_fingerprint_is_retrained(cache_dir, field,
                                                    words):
    first = vision.train_or_load(SOFTMAX, cache_dir)
    path = vision.checkpoint_path(SOFTMAX, cache_dir)
    saved = torch.load(path, weights_only=True)["extra"]
    fingerprint = {**saved["fingerprint"], field: "something else"}
    save_checkpoint(first.model, path, **{**saved,
                                          "fingerprint": fingerprint})
    again = vision.train_or_load(SOFTMAX, cache_dir)
    assert again.trained and words in again.reason
    assert again.reason.endswith("changed since it was trained")


@pytest.mark.parametrize("damage", ["garbage", "half", "no history",
                                    "another model"])
def test_a_damaged_file_is_retrained(cache_dir, damage):
    first = vision.train_or_load(SOFTMAX, cache_dir)
    path = vision.checkpoint_path(SOFTMAX, cache_dir)
    if damage == "garbage":
        path.write_bytes(b"not a checkpoint")
    elif damage == "half":
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    else:
        saved = torch.load(path, weights_only=True)["extra"]
        if damage == "no history":
            del saved["history"]
            model = first.model
        else:
            model = torch.nn.Linear(2, 2)
        save_checkpoint(model, path, **saved)
    again = vision.train_or_load(SOFTMAX, cache_dir)
    assert again.trained
    assert again.reason.startswith("the cached file was not usable: ")
    assert _same_weights(first.model, again.model)
    assert not vision.train_or_load(SOFTMAX, cache_dir).trained


def test_an_empty_file_is_retrained_with_a_reason(cache_dir):
    vision.train_or_load(SOFTMAX, cache_dir)
    vision.checkpoint_path(SOFTMAX, cache_dir).write_bytes(b"")
    again = vision.train_or_load(SOFTMAX, cache_dir)
    assert again.trained
    assert not again.reason.endswith(": ")


def _draws():
    return (torch.rand(2).tolist(), random.random(), np.random.rand())


def test_the_global_generators_end_as_they_began(cache_dir):
    """Trained or loaded, what a notebook draws next is the same (as
    d2lmini.cache.train_or_load promises for the translators)."""
    for _ in ("trained", "loaded"):
        torch.manual_seed(5), random.seed(5), np.random.seed(5)
        expected = _draws()
        torch.manual_seed(5), random.seed(5), np.random.seed(5)
        vision.train_or_load(SOFTMAX, cache_dir)
        assert _draws() == expected


def test_train_or_load_takes_only_vision_recipes(cache_dir):
    for recipe in (Recipe(max_steps=1), {"model": "vit"}, "vit"):
        with pytest.raises(TypeError, match="recipe must be a "
                           "VisionRecipe"):
            vision.train_or_load(recipe, cache_dir)
    assert not cache_dir.exists()


def test_checkpoint_path_names_model_and_key(cache_dir):
    path = vision.checkpoint_path(SOFTMAX, cache_dir)
    assert path == cache_dir / f"vision-softmax-{SOFTMAX.key()}.pt"
    assert vision.checkpoint_path(SOFTMAX, str(cache_dir)) == path
    default = vision.checkpoint_path(TINY)
    assert default == corpus.cache_dir() / "models" / \
        f"vision-vit-{TINY.key()}.pt"
    assert "xdg" in default.parts  # the test's own folder


# test_scores -------------------------------------------------------------

@pytest.fixture(scope="module")
def runs():
    data = vision._digits()
    history = {"steps": [20], "seconds": 3.0, "loss": [2.0],
               "val_acc": [0.1]}
    return {name: vision.VisionRun(recipe.build().eval(), data, history,
                                   recipe, True)
            for name, recipe in (("vit", TINY), ("softmax", SOFTMAX))}


def test_scores_of_each_run_and_the_paired_differences(runs):
    scores = vision.test_scores(runs, reference="vit")
    assert set(scores) == {"vit", "softmax"}
    correct = {}
    for name, run in runs.items():
        X, y = run.data.test
        value, low, high = scores[name]["acc"]
        assert value == pytest.approx(accuracy(run.model, X, y))
        assert low <= value <= high
        correct[name] = run.model(X).argmax(-1) == y
    assert scores["vit"]["diff"] is None
    assert scores["softmax"]["diff"] == bootstrap(correct["softmax"],
                                                  correct["vit"])
    assert all(s["diff"] is None for s in vision.test_scores(runs).values())


def test_a_run_against_itself_differs_by_nothing(runs):
    twice = {"a": runs["vit"], "b": runs["vit"]}
    scores = vision.test_scores(twice, reference="a")
    assert scores["b"]["diff"] == (0.0, 0.0, 0.0)
    assert scores["a"]["acc"] == scores["b"]["acc"]


def test_scores_need_runs_and_a_known_reference(runs):
    with pytest.raises(ValueError, match="give at least one run"):
        vision.test_scores({})
    with pytest.raises(ValueError, match="reference 'cnn' is not one of "
                       r"\['vit', 'softmax'\]"):
        vision.test_scores(runs, reference="cnn")


def test_score_table_shows_each_run_and_its_difference(runs):
    scores = vision.test_scores(runs, reference="vit")
    lines = vision.score_table(runs, "vit").splitlines()
    assert len(lines) == 4  # header, rule, two runs
    assert "test accuracy % [95 % CI]" in lines[0]
    assert "minus vit, points" in lines[0]
    value, low, high = (100 * x for x in scores["softmax"]["acc"])
    diff = [100 * x for x in scores["softmax"]["diff"]]
    row = lines[3].split()
    assert row[:3] == ["softmax", "20", "3"]
    assert " ".join(row[3:]) == (
        f"{value:.1f} [{low:.1f}, {high:.1f}] "
        f"{diff[0]:+.1f} [{diff[1]:+.1f}, {diff[2]:+.1f}]")
    assert lines[2].split()[0] == "vit" and lines[2].rstrip().endswith("]")
    assert len(lines[2].split()) == 6  # no difference to itself


# equal_time_steps --------------------------------------------------------

def _records():
    return list((corpus.cache_dir() / "timings").glob("*.json"))


def _no_clock(*args, **kwargs):
    raise AssertionError("timed again instead of reusing the measurement")


def _fake_seconds(monkeypatch, values):
    seconds = iter(values)
    monkeypatch.setattr(vision, "seconds_per_step",
                        lambda *a, **k: next(seconds))


def test_equal_time_is_measured_then_reused(monkeypatch):
    first = vision.equal_time_steps(TINY, SOFTMAX, 100, rounds=1, steps=6)
    assert isinstance(first, EqualTime) and not first.reused
    assert first.ratio == first.ms["reference"] / first.ms["other"]
    assert first.steps == round(100 * first.ratio)
    assert first.reference_steps == 100
    [path] = _records()
    assert path.name.startswith("vision-equal-time-")
    assert json.loads(path.read_text())["steps"] == first.steps
    monkeypatch.setattr(vision, "seconds_per_step", _no_clock)
    again = vision.equal_time_steps(TINY, SOFTMAX, 100, rounds=1, steps=6)
    assert again.reused and again.steps == first.steps
    assert again.ms == first.ms


def test_remeasure_times_again(monkeypatch):
    _fake_seconds(monkeypatch, [0.2, 0.1, 0.3, 0.1])
    a = vision.equal_time_steps(TINY, SOFTMAX, 1000, rounds=1, steps=6)
    assert (a.steps, a.ms) == (2000, {"reference": 200.0, "other": 100.0})
    b = vision.equal_time_steps(TINY, SOFTMAX, 1000, rounds=1, steps=6,
                                remeasure=True)
    assert not b.reused and b.steps == 3000
    c = vision.equal_time_steps(TINY, SOFTMAX, 1000, rounds=1, steps=6)
    assert c.reused and c.steps == 3000 and len(_records()) == 1


def test_rounds_take_turns_and_give_the_medians(monkeypatch):
    calls = []

    def seconds(model, batches):
        calls.append(type(model).__name__)
        assert len(batches) == 5 + 6
        assert all(len(y) == 32 for _, y in batches)
        return {"ViT": 0.004, "SoftmaxRegression": 0.001}[calls[-1]] \
            * (1 + len(calls) / 100)

    monkeypatch.setattr(vision, "seconds_per_step", seconds)
    result = vision.equal_time_steps(TINY, SOFTMAX, rounds=3, steps=6)
    assert calls == ["ViT", "SoftmaxRegression", "SoftmaxRegression",
                     "ViT", "ViT", "SoftmaxRegression"]
    # Medians: ViT's 2nd call (4th overall), softmax's 3rd (3rd overall).
    assert result.ms == {"reference": round(4 * 1.04, 3),
                         "other": round(1 * 1.03, 3)}
    assert result.reference_steps == TINY.max_steps  # the default


@pytest.mark.parametrize("field, value", [
    ("steps", -5), ("steps", 7), ("ratio", 0.5), ("reference_steps", 10),
    ("ms", {"reference": -1.0, "other": 1.0}), ("ms", {"reference": 1.0}),
    ("steps", 2000.0), ("date", 3)])
def test_a_record_whose_numbers_do_not_hold_is_measured_again(
        monkeypatch, field, value):
    _fake_seconds(monkeypatch, [0.2, 0.1, 0.2, 0.1])
    first = vision.equal_time_steps(TINY, SOFTMAX, 1000, rounds=1, steps=6)
    assert first.steps == 2000
    [path] = _records()
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, field: value}))
    again = vision.equal_time_steps(TINY, SOFTMAX, 1000, rounds=1, steps=6)
    assert not again.reused and again.steps == 2000


def test_equal_time_needs_one_batch_size():
    with pytest.raises(ValueError, match="same batch_size, got 32 and 64"):
        vision.equal_time_steps(TINY, SOFTMAX.replace(batch_size=64))
    with pytest.raises(ValueError, match="reference_steps must be"):
        vision.equal_time_steps(TINY, SOFTMAX, 0)
    assert not _records()


def test_equal_time_leaves_the_global_generators(monkeypatch):
    _fake_seconds(monkeypatch, [0.2, 0.1])
    torch.manual_seed(5), random.seed(5), np.random.seed(5)
    expected = _draws()
    torch.manual_seed(5), random.seed(5), np.random.seed(5)
    vision.equal_time_steps(TINY, SOFTMAX, 1000, rounds=1, steps=6)
    assert _draws() == expected


# code_fingerprint --------------------------------------------------------

def _edited(monkeypatch, module):
    original = vision._source_that_ran

    def source(name):
        text = original(name)
        return text + b"\n# edited\n" if name == module else text

    monkeypatch.setattr(vision, "_source_that_ran", source)


def test_the_fingerprint_follows_the_vit_code(monkeypatch):
    before = vision.code_fingerprint()
    assert len(before) == 64 and vision.code_fingerprint() == before
    for module in ("vit", "digits", "multihead", "attention"):
        with monkeypatch.context() as patch:
            _edited(patch, module)
            assert vision.code_fingerprint() != before, module
    assert vision.code_fingerprint() == before


def test_the_fingerprint_ignores_the_translators(monkeypatch):
    before = vision.code_fingerprint()
    for module in ("cache", "seq2seq", "transformer", "experiment"):
        with monkeypatch.context() as patch:
            _edited(patch, module)
            assert vision.code_fingerprint() == before, module
    modules = _imported_modules("vit", Path(d2lmini.__file__).parent,
                                vision._source_that_ran)
    assert {"vit", "digits", "multihead", "attention", "utils"} <= modules
    assert not modules & {"cache", "seq2seq", "transformer", "experiment",
                          "vision"}
