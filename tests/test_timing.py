"""Equal training time measured on this machine (d2lmini.timing)."""

import json
import random

import numpy as np
import pytest
import torch
from test_experiment import TINY, synthetic_corpus  # noqa: F401

from d2lmini import corpus, timing
from d2lmini.experiment import build_data, build_model


def test_equal_time_is_measured_then_reused(monkeypatch):
    other = TINY.replace(attention="none")
    first = timing.equal_time_steps(TINY, other, 1000, rounds=1, steps=2)
    assert not first.reused
    assert first.steps == round(1000 * first.ms["reference"]
                                / first.ms["other"])
    assert first.ratio == first.ms["reference"] / first.ms["other"]
    records = list((corpus.cache_dir() / "timings").glob("*.json"))
    assert len(records) == 1
    assert json.loads(records[0].read_text())["steps"] == first.steps
    # The next run on this machine reuses the measurement, not the clock.
    monkeypatch.setattr(timing, "seconds_per_step", _no_clock)
    again = timing.equal_time_steps(TINY, other, 1000, rounds=1, steps=2)
    assert again.reused and again.steps == first.steps
    assert "reused" in str(again) and f"{first.steps:,} steps" in str(again)


def _no_clock(*args, **kwargs):
    raise AssertionError("timed again instead of reusing the measurement")


def test_another_setting_is_measured_apart(monkeypatch):
    other = TINY.replace(attention="none")
    seconds = iter([0.2, 0.1, 0.3, 0.1])  # reference, other, ...
    monkeypatch.setattr(timing, "seconds_per_step",
                        lambda *a, **k: next(seconds))
    a = timing.equal_time_steps(TINY, other, 1000, rounds=1, steps=2)
    assert (a.steps, a.ms) == (2000, {"reference": 200.0, "other": 100.0})
    b = timing.equal_time_steps(TINY, other, 500, rounds=1, steps=2)
    assert not b.reused and b.steps == 1500  # 500 x 300 / 100
    again = timing.equal_time_steps(TINY, other, 1000, rounds=1, steps=2)
    assert again.reused and again.steps == 2000
    monkeypatch.setattr(torch, "get_num_threads", lambda: 97)
    with pytest.raises(StopIteration):  # another thread count: measured
        timing.equal_time_steps(TINY, other, 1000, rounds=1, steps=2)


def test_the_two_models_must_share_their_batches():
    with pytest.raises(ValueError, match="same data settings"):
        timing.equal_time_steps(TINY, TINY.replace(batch_size=4))
    with pytest.raises(ValueError, match="reference_steps must be"):
        timing.equal_time_steps(TINY, TINY, 0)


def test_seconds_per_step_needs_timed_steps():
    data = build_data(TINY)
    model = build_model(TINY, data)
    batches = list(data.train_dataloader())[:timing.WARMUP]
    with pytest.raises(ValueError, match="need more than 5 batches"):
        timing.seconds_per_step(model, batches)
    batches = (batches * 2)[:timing.WARMUP + 1]
    assert timing.seconds_per_step(model, batches) > 0


def test_the_clocks_of_two_runs_are_compared_in_words():
    timed = timing.EqualTime(1200, 1000, {"reference": 120.0,
                                          "other": 100.0}, 1.2,
                             "2026-12-03", "a machine")
    assert timed.clocks(100.0, 104.0).startswith(
        "96% of the reference's time: about as long")
    assert "less than the timing intended" in timed.clocks(73.0, 100.0)
    assert "more than the timing intended" in timed.clocks(120.0, 100.0)


def _draws():
    return (torch.rand(2).tolist(), random.random(), np.random.rand())


def test_the_global_generators_end_as_they_began():
    """Measured or reused, equal_time_steps leaves Python's, NumPy's and
    torch's generators where they were: what a notebook trains next
    does not depend on whether this machine had a record."""
    other = TINY.replace(attention="none")
    for _ in ("measured", "reused"):
        torch.manual_seed(5), random.seed(5), np.random.seed(5)
        expected = _draws()
        torch.manual_seed(5), random.seed(5), np.random.seed(5)
        timing.equal_time_steps(TINY, other, 1000, rounds=1, steps=2)
        assert _draws() == expected


@pytest.mark.parametrize("field, value", [
    ("steps", -5), ("steps", 7), ("ratio", 0.5), ("reference_steps", 10),
    ("ms", {"reference": -1.0, "other": 1.0}), ("ms", {"reference": 1.0}),
    ("steps", 2000.0), ("date", 3)])
def test_a_record_whose_numbers_do_not_hold_is_measured_again(
        monkeypatch, field, value):
    other = TINY.replace(attention="none")
    seconds = iter([0.2, 0.1, 0.2, 0.1])
    monkeypatch.setattr(timing, "seconds_per_step",
                        lambda *a, **k: next(seconds))
    first = timing.equal_time_steps(TINY, other, 1000, rounds=1, steps=2)
    assert first.steps == 2000
    [path] = (corpus.cache_dir() / "timings").glob("*.json")
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, field: value}))
    again = timing.equal_time_steps(TINY, other, 1000, rounds=1, steps=2)
    assert not again.reused and again.steps == 2000
