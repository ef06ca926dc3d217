"""Tests of d2lmini.live_training: the training scrubber's output.

The page's drawing is tested in tests/test_site_live.py; these check the
data it is given.  They use test_experiment.py's synthetic corpus (its
autouse fixture is imported here) and tiny recipe.
"""

import base64
import math
from decimal import ROUND_HALF_UP, Decimal

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


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_quantize_refuses_nan_and_inf(bad):
    # NaN used to pass the range check and travel as byte 0
    with pytest.raises(ValueError, match=f"must be finite, got {bad}"):
        quantize(torch.tensor([0.5, bad, 0.5]))


def test_two_decimal_labels_of_the_bytes_agree_with_the_page():
    """What the module says of the rounding: every byte's q / 255, with
    two decimals, reads the same in Python and in JavaScript (toFixed
    rounds the exact binary value, a tie away from zero), and lies
    within 0.005 + 1/510 of the weight; three decimals show the
    rounding."""
    for q in range(256):
        x = q / 255
        js = str(Decimal(x).quantize(Decimal("0.01"), ROUND_HALF_UP))
        assert f"{x:.2f}" == js, q
    w = torch.cat([torch.rand(10_000), torch.arange(1000) / 1000 + 5e-4])
    w = w.clamp(0, 1)
    shown = torch.tensor([float(f"{q / 255:.2f}")
                          for q in quantize(w).tolist()])
    assert (shown - w).abs().max() <= 0.005 + 1 / 510 + 1e-6
    assert f"{quantize(torch.tensor(0.125)).item() / 255:.2f}" == "0.13"
    assert f"{quantize(torch.tensor(0.5)).item() / 255:.3f}" == "0.502"


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


@pytest.mark.parametrize("attention", ["multihead", "transformer"])
def test_the_scrubber_carries_a_one_head_run(tmp_path, attention):
    # one head records (1, T, S) maps, which the scrubber used to refuse
    run = cache.train_or_load(
        TINY.replace(max_steps=3, attention=attention, num_heads=1),
        tmp_path, progress=False, snapshots=True)
    snaps = run.snapshots
    assert snaps.attention[0][0].dim() == 3
    assert snaps.attention[0][0].shape[0] == 1
    data = training_scrubber(run).data
    assert data["heads"] == 1
    raw = np.frombuffer(base64.b64decode(data["attention"]), np.uint8)
    want = torch.cat([quantize(w).reshape(-1) for maps in snaps.attention
                      for w in maps])
    assert raw.tolist() == want.tolist()
    # a map that is not one head's (T, S) is still refused
    snaps.attention[1][0] = snaps.attention[1][0].expand(2, -1, -1)
    with pytest.raises(ValueError, match="snapshot 1, probe 0: attention"):
        training_scrubber(run)


def test_the_scrubber_refuses_a_nan_snapshot(run):
    w = run.snapshots.attention[2][1].clone()
    w[0, 0] = math.nan
    run.snapshots.attention[2][1] = w
    with pytest.raises(ValueError,
                       match="snapshot 2, probe 1: .*must be finite"):
        training_scrubber(run)
