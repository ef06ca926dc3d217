"""Tests of d2lmini.live_training: the training scrubber's output.

The page's drawing is tested in tests/test_site_live.py; these check the
data it is given.  They use test_experiment.py's synthetic corpus (its
autouse fixture is imported here) and tiny recipe.
"""

import base64

import numpy as np
import pytest
import torch
from test_experiment import TINY, synthetic_corpus  # noqa: F401

from d2lmini import cache
from d2lmini.alignment import snapshot_measures
from d2lmini.live import payloads, training_scrubber
from d2lmini.live_training import quantize


@pytest.fixture
def run(tmp_path):
    return cache.train_or_load(TINY.replace(max_steps=5), tmp_path,
                               progress=False, snapshots=True)


def test_quantize_rounds_to_the_nearest_of_256_levels():
    w = torch.tensor([0.0, 1 / 510 - 1e-4, 0.5, 1.0])
    assert quantize(w).tolist() == [0, 0, 128, 255]
    x = torch.rand(1000)
    assert (quantize(x).float() / 255 - x).abs().max() <= 1 / 510 + 1e-7
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        quantize(torch.tensor([0.5, 1.5]))


def test_the_scrubber_carries_the_recorded_snapshots(run):
    snaps = run.snapshots
    out = training_scrubber(run)
    data = payloads(out.html, "training")[0]
    assert data == out.data  # what the page reads
    assert data["steps"] == snaps.steps and data["heads"] == 1
    assert data["outputs"] == snaps.out_tokens
    assert [p["src"] for p in data["probes"]] == snaps.src_tokens
    assert [p["sentence"] for p in data["probes"]] == [
        p.sentence for p in snaps.probes]
    for p in data["probes"]:
        assert p["references"] == run.data.references(p["sentence"])[:3]
    raw = np.frombuffer(base64.b64decode(data["attention"]), np.uint8)
    at = 0
    for maps in snaps.attention:
        for w in maps:
            n = w.numel()
            got = raw[at:at + n].reshape(w.shape) / 255
            assert np.abs(got - w.numpy()).max() <= 1 / 510 + 1e-7
            at += n
    assert at == len(raw)
    assert data["val_bleu"] == [round(v, 2) for v in snaps.val_bleu]
    measures = snapshot_measures(snaps)
    for name in ("concentration", "diagonal"):
        assert data[name] == [round(v, 4) for v in measures[name]]
    steps = data["train_curve"]["steps"]
    assert steps[-1] == run.history.num_steps and steps == sorted(steps)


def test_the_scrubber_refuses_a_run_without_snapshots(run, tmp_path):
    plain = cache.train_or_load(TINY.replace(max_steps=2), tmp_path,
                                progress=False)
    with pytest.raises(TypeError, match="snapshots=True"):
        training_scrubber(plain)
    for bad in (-1, len(run.snapshots.probes), True, "0"):
        with pytest.raises(ValueError, match="probe must be an index"):
            training_scrubber(run, probe=bad)
    assert training_scrubber(run, probe=1).data["probe"] == 1
