"""Tests of d2lmini.snapshots and the trainer's callbacks.

The translation tests use test_experiment.py's synthetic corpus (its
autouse fixture is imported here) and tiny recipe.
"""

import copy
import random

import numpy as np
import pytest
import torch
from test_experiment import TINY, synthetic_corpus  # noqa: F401
from test_trainer import Data, Regression

from d2lmini import cache, decoding, experiment, metrics
from d2lmini.data import MTFraEng
from d2lmini.snapshots import (
    Probe,
    SnapshotRecorder,
    TrainingSnapshots,
    choose_probes,
    snapshot_steps,
)
from d2lmini.trainer import Trainer


def test_snapshot_steps_are_denser_early():
    steps = snapshot_steps(1000)
    assert len(steps) == 40 and steps[:7] == [0, 1, 3, 6, 11, 16, 24]
    assert steps[-1] == 1000 and steps == sorted(set(steps))
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    assert gaps == sorted(gaps)  # never closer together later on
    assert snapshot_steps(3) == [0, 1, 2, 3]  # repeats dropped
    assert snapshot_steps(10, num=2) == [0, 10]
    for bad in (0, 2.5, True, None):
        with pytest.raises(ValueError, match="last_step"):
            snapshot_steps(bad)
    with pytest.raises(ValueError, match="num"):
        snapshot_steps(10, num=1)


class Log:
    """A callback that writes down its calls."""

    def __init__(self):
        self.calls = []

    def on_fit_start(self, trainer, model, last_step):
        self.calls.append(("start", last_step, trainer.history.num_steps))

    def on_step_end(self, trainer, model, step):
        assert model.training  # called inside the training loop
        self.calls.append(("step", step, trainer.history.num_steps))


class Validates:
    """A callback that evaluates the model at every step."""

    def on_step_end(self, trainer, model, step):
        trainer.validate(model, Data().val_dataloader(), step)
        assert all(m.training for m in model.modules())


def _fit(callbacks, model_class=None, data=None, **kw):
    torch.manual_seed(0)
    model = (model_class or Regression)()
    kw = {"max_steps": 5, **kw}
    trainer = Trainer(progress=False, seed=0, callbacks=callbacks, **kw)
    trainer.fit(model, data or Data())
    return model, trainer


def test_trainer_calls_callbacks_in_order():
    log = Log()
    _fit([log])
    assert log.calls == [("start", 5, 0)] + [
        ("step", s, s) for s in range(1, 6)]
    log = Log()
    _fit([log], max_steps=None, max_epochs=2)
    assert log.calls[0] == ("start", 16, 0) and len(log.calls) == 17
    log = Log()
    _fit([log], max_steps=None, max_epochs=None, max_time=0.05)
    assert log.calls[0] == ("start", None, 0)
    log = Log()  # a time limit may stop it earlier than the bound
    _fit([log], max_steps=None, max_time=0.05)
    assert log.calls[0] == ("start", 8, 0)


def test_callbacks_change_nothing_that_is_trained():
    plain, t1 = _fit([])
    watched, t2 = _fit([Validates(), Log()])
    for a, b in zip(plain.state_dict().values(),
                    watched.state_dict().values()):
        assert torch.equal(a, b)
    assert t1.history.steps == t2.history.steps
    assert t1.history.val_steps == t2.history.val_steps


def test_trainer_refuses_an_object_that_is_no_callback():
    with pytest.raises(TypeError, match="neither on_fit_start nor"):
        Trainer(max_steps=1, callbacks=[object()])


def _toy_data():
    pairs = [("i like red wine .", "j'aime le vin rouge ."),
             ("i like white wine .", "j'aime le vin blanc ."),
             ("we speak french at home .", "on parle français chez nous ."),
             ("go .", "va !"), ("i see .", "je vois ."),
             ("he is calm .", "il est calme ."),
             ("i like the dog .", "j'aime le chien ."),
             ("we like the cat .", "nous aimons le chat ."),
             ("you see the red car .", "tu vois la voiture rouge .")]
    # the vocabulary comes from the train split: words of the probes
    # that only the val split has are unknown
    return MTFraEng(2, num_steps=8, num_train=None, num_val=14,
                    num_test=0, pairs=pairs * 2, min_freq=1, seed=0)


def test_choose_probes_follows_its_rule():
    data = _toy_data()
    val = list(dict.fromkeys(e for e, _ in data.val_pairs))
    probes = choose_probes(data, num=4, num_reorder=2)
    assert probes == choose_probes(data, num=4, num_reorder=2)
    assert len(probes) == 4 and {p.sentence for p in probes} <= set(val)
    lengths = [len(data.tokens(p.sentence)) for p in probes]
    assert lengths == sorted(lengths)
    reorder = [p for p in probes if p.pair is not None]
    assert 1 <= len(reorder) <= 2
    for p in reorder:  # an adjective of POSTNOMINAL, then its noun
        tokens = data.tokens(p.sentence)
        adjective, noun = p.pair
        assert noun == adjective + 1
        assert tokens[adjective] in ("red", "white")
    # "french at": no noun follows, so no pair
    assert all(p.pair is None for p in probes
               if p.sentence.startswith("we speak"))
    known = [s for s in val
             if all(t in data.src_vocab for t in data.tokens(s))]
    assert 0 < len(known) < len(val)
    assert {p.sentence for p in choose_probes(data, num=50)} == set(known)
    with pytest.raises(ValueError, match="split must be"):
        choose_probes(data, split="dev")


class SaveAt:
    """Keeps the model's weights after one step."""

    def __init__(self, step):
        self.step, self.state = step, None

    def on_step_end(self, trainer, model, step):
        if step == self.step:
            self.state = copy.deepcopy(model.state_dict())


def test_recorder_records_what_the_model_produced_at_that_step():
    recipe = TINY.replace(max_steps=4)
    data = experiment.build_data(recipe)
    recorder, saved = SnapshotRecorder(data), SaveAt(3)
    model, data, history = experiment.train(recipe, data, False,
                                            [recorder, saved])
    snaps = recorder.snapshots
    assert snaps.steps == [0, 1, 2, 3, 4] and snaps.last_step == 4
    assert len(snaps.probes) == len(snaps.src_tokens) > 0
    k = snaps.steps.index(3)
    again = experiment.build_model(recipe, experiment.build_data(recipe))
    again.load_state_dict(saved.state)
    sentences = [p.sentence for p in snaps.probes]
    out = decoding.translate(again, data, sentences)
    assert snaps.out_tokens[k] == [t.out_tokens for t in out]
    assert snaps.src_tokens == [t.src_tokens for t in out]
    for recorded, t in zip(snaps.attention[k], out):
        assert recorded.shape == t.attention.shape
        torch.testing.assert_close(recorded, t.attention)
    assert snaps.probe_bleu[k] == [
        metrics.sentence_bleu(t.text, data.references(s))
        for t, s in zip(out, sentences)]
    val_loss = Trainer(progress=False).validate(again,
                                                data.val_dataloader())
    assert snaps.val_loss[k] == pytest.approx(val_loss, rel=1e-6)
    assert snaps.val_bleu[k] == experiment.evaluate(again, data,
                                                    "val").bleu
    batch = [loss for s, loss in history.steps if s == 3]
    assert snaps.train_loss[0] is None and snaps.train_loss[k] == batch[0]
    # the last snapshot is the trained model
    final = decoding.translate(model, data, sentences)
    assert snaps.out_tokens[-1] == [t.out_tokens for t in final]


@pytest.mark.parametrize("recipe", [
    TINY, TINY.replace(dropout=0.5, max_steps=4)])
def test_recording_changes_nothing_that_is_trained(recipe):
    """With dropout too (the chapter's snapshot recipes use none; a
    reader's may): the recorder iterates the val loader and must move
    no mask."""
    plain, _, h1 = experiment.train(recipe, progress=False)
    data = experiment.build_data(recipe)
    watched, data, h2 = experiment.train(recipe, data, False,
                                         [SnapshotRecorder(data)])
    for a, b in zip(plain.state_dict().values(),
                    watched.state_dict().values()):
        assert torch.equal(a, b)
    assert h1.steps == h2.steps and h1.val_steps == h2.val_steps


def test_recorder_needs_a_last_step_and_a_val_split():
    data = experiment.build_data(TINY)
    with pytest.raises(ValueError, match="set max_steps"):
        experiment.train(TINY.replace(max_steps=None, max_time=0.5),
                         data, False, [SnapshotRecorder(data)])
    empty = experiment.build_data(TINY.replace(num_val=0))
    with pytest.raises(ValueError, match="num_val > 0"):
        SnapshotRecorder(empty)


def test_record_round_trip():
    snaps = TrainingSnapshots(
        10, [Probe("a b .", (0, 1)), Probe("c .")], [["a"], ["c"]],
        steps=[0], out_tokens=[[["x"], ["y"]]],
        attention=[[torch.ones(1, 1), torch.ones(1, 1)]],
        probe_bleu=[[0.0, 1.0]], train_loss=[None], val_loss=[2.0],
        val_bleu=[0.5])
    back = TrainingSnapshots.from_record(snaps.to_record())
    assert back == snaps and len(back) == 1


def test_snapshots_are_part_of_the_cache_entry(tmp_path):
    first = cache.train_or_load(TINY, tmp_path, progress=False,
                                snapshots=True)
    assert first.trained and len(first.snapshots) == 4
    again = cache.train_or_load(TINY, tmp_path, progress=False,
                                snapshots=True)
    assert not again.trained
    assert again.snapshots.steps == first.snapshots.steps
    assert again.snapshots.out_tokens == first.snapshots.out_tokens
    for a, b in zip(again.snapshots.attention[-1],
                    first.snapshots.attention[-1]):
        assert torch.equal(a, b)
    # asked without them, the entry still gives them
    plain = cache.train_or_load(TINY, tmp_path, progress=False)
    assert not plain.trained and plain.snapshots is not None
    # a changed recipe is another entry: trained, with its snapshots
    other = cache.train_or_load(TINY.replace(lr=0.02), tmp_path,
                                progress=False, snapshots=True)
    assert other.trained and other.snapshots is not None


def test_a_model_cached_without_snapshots_is_retrained(tmp_path):
    plain = cache.train_or_load(TINY, tmp_path, progress=False)
    assert plain.trained and plain.snapshots is None
    run = cache.train_or_load(TINY, tmp_path, progress=False,
                              snapshots=True)
    assert run.trained and "no training snapshots" in run.reason
    assert run.snapshots is not None
    for a, b in zip(plain.model.state_dict().values(),
                    run.model.state_dict().values()):
        assert torch.equal(a, b)


def test_changed_code_retrains_model_and_snapshots(tmp_path, monkeypatch):
    first = cache.train_or_load(TINY, tmp_path, progress=False,
                                snapshots=True)
    monkeypatch.setattr(cache, "code_fingerprint", lambda: "other code")
    run = cache.train_or_load(TINY, tmp_path, progress=False,
                              snapshots=True)
    assert run.trained and "d2lmini's code" in run.reason
    assert run.snapshots.steps == first.snapshots.steps


class Dropout(Regression):
    """The regression with dropout on its input: training draws masks
    from torch's global generator."""

    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, X):
        return super().forward(self.drop(X))


class Draws:
    """A callback that draws from every global generator."""

    def on_step_end(self, trainer, model, step):
        torch.rand(3), random.random(), np.random.rand()


@pytest.mark.parametrize("callbacks", [[Validates()], [Draws()]])
def test_callbacks_change_nothing_even_with_dropout(callbacks):
    """A callback that iterates a DataLoader (which draws a seed from the
    global generator) or draws numbers itself moves no dropout mask."""
    plain, _ = _fit([], Dropout, Data(val=False), max_steps=6)
    watched, _ = _fit(callbacks, Dropout, Data(val=False), max_steps=6)
    for a, b in zip(plain.state_dict().values(),
                    watched.state_dict().values()):
        assert torch.equal(a, b)


def test_a_run_without_snapshots_keeps_a_file_with_them(tmp_path,
                                                         monkeypatch):
    """Two processes train one recipe, with and without snapshots; the
    one with them writes first: the other one's write must not drop
    them (the weights are the same)."""
    real, nested = experiment.train, []

    def train_while_another_writes(recipe, data=None, progress=True,
                                   callbacks=()):
        out = real(recipe, data, progress, callbacks)
        if not callbacks and not nested:  # the run without snapshots
            nested.append(True)
            other = cache.train_or_load(TINY, tmp_path, progress=False,
                                        snapshots=True)
            assert other.trained and other.snapshots is not None
        return out

    monkeypatch.setattr(cache, "train", train_while_another_writes)
    plain = cache.train_or_load(TINY, tmp_path, progress=False)
    assert plain.trained and nested
    again = cache.train_or_load(TINY, tmp_path, progress=False,
                                snapshots=True)
    assert not again.trained and again.snapshots is not None


def test_probe_pairs_lie_within_the_attention():
    """A postnominal pair beyond the first num_steps tokens has no
    column in the attention: it is not chosen as a pair."""
    pairs = [("you see the big red car .", "tu vois la grosse voiture "
              "rouge ."), ("i see .", "je vois ."),
             ("he is calm .", "il est calme .")]
    for num_steps, expect in ((5, None), (6, (4, 5))):
        data = MTFraEng(2, num_steps=num_steps, num_train=None, num_val=6,
                        num_test=0, pairs=pairs * 3, min_freq=1, seed=0,
                        max_src_len=None)
        probes = choose_probes(data, num=3, num_reorder=1)
        car = [p for p in probes if "car" in p.sentence]
        assert car and car[0].pair == expect
