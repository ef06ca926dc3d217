"""Tests of d2lmini.alignment: the measures of when attention forms."""

import math

import pytest
import torch

from d2lmini.alignment import (
    concentration,
    diagonal_share,
    formation,
    half_rise,
    pair_rows,
    reorder_steps,
    settled_from,
    snapshot_measures,
)
from d2lmini.snapshots import Probe, TrainingSnapshots


def test_concentration_is_0_for_uniform_and_1_for_one_hot():
    assert concentration(torch.full((3, 4), 0.25)) == pytest.approx(0.0,
                                                                   abs=1e-6)
    assert concentration(torch.eye(4)) == pytest.approx(1.0)
    half = torch.tensor([[0.5, 0.5, 0.0, 0.0]])
    assert concentration(half) == pytest.approx(1 - math.log(2)
                                                / math.log(4))
    # per head: the mean over every head's rows
    both = torch.stack([torch.eye(4), torch.full((4, 4), 0.25)])
    assert concentration(both) == pytest.approx(0.5)
    assert concentration(torch.ones(2, 1)) == 1.0


def test_measures_refuse_what_is_not_attention():
    for bad in (torch.ones(4), torch.ones(2, 2), -torch.eye(2),
                torch.ones(1, 2, 2, 2) / 2, [[1.0]]):
        with pytest.raises(ValueError, match="weights|rows"):
            concentration(bad)
    with pytest.raises(ValueError, match="no row"):
        diagonal_share(torch.ones(0, 3))


def test_diagonal_share_reads_the_source_in_order():
    assert diagonal_share(torch.eye(5)) == 1.0
    flipped = torch.eye(5).flip(0)  # reading the source backwards
    assert diagonal_share(flipped) == pytest.approx(1 / 5)
    eos = torch.zeros(6, 4)
    eos[:, -1] = 1  # every row on the last source token
    assert diagonal_share(eos) == pytest.approx(3 / 6)


def test_half_rise():
    steps = [0, 1, 3, 6, 11]
    assert half_rise(steps, [0, 1, 4, 9, 10]) == 6
    assert half_rise(steps, [10, 9, 6, 1, 0]) == 6  # falling
    # from when it stays past half way, not a passing spike
    assert half_rise(steps, [0, 6, 4, 9, 10]) == 6
    assert half_rise(steps, [0, 9, 9, 1, 10]) == 11
    assert half_rise(steps, [2, 2, 2, 2, 2]) is None
    with pytest.raises(ValueError, match="one value per step"):
        half_rise(steps, [1, 2])


def _snapshots(maps, pair=(1, 2)):
    return TrainingSnapshots(
        len(maps), [Probe("x a b .", pair)], [["x", "a", "b", "."]],
        steps=list(range(len(maps))), out_tokens=[[["t"] * 3]] * len(maps),
        attention=[[m] for m in maps], probe_bleu=[[0.0]] * len(maps),
        train_loss=[None] * len(maps), val_loss=[0.0] * len(maps),
        val_bleu=[0.0] * len(maps))


def test_reorder_steps_follow_the_noun_adjective_order():
    same = torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]])
    swapped = torch.tensor([[1.0, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0]])
    snaps = _snapshots([same, swapped, same, swapped, swapped])
    assert reorder_steps(snaps, 0) == [False, True, False, True, True]
    assert settled_from(snaps.steps, reorder_steps(snaps, 0)) == 3
    assert settled_from([0, 1], [True, False]) is None
    # "a" (the adjective, source 1) is read most by row 2, "b" by row 1
    assert pair_rows(snaps, 0, k=1) == (1, 2)
    assert pair_rows(snaps, 0) == (1, 2)  # the last snapshot
    # heads are averaged
    heads = _snapshots([torch.stack([swapped, swapped, same])])
    assert reorder_steps(heads, 0) == [True]
    with pytest.raises(ValueError, match="no adjective-noun pair"):
        reorder_steps(_snapshots([same], pair=None), 0)


def test_snapshot_measures_one_value_per_snapshot():
    uniform = torch.full((3, 4), 0.25)
    one_hot = torch.eye(4)[:3]
    got = snapshot_measures(_snapshots([uniform, one_hot]))
    assert got["concentration"] == pytest.approx([0.0, 1.0], abs=1e-6)
    assert len(got["diagonal"]) == 2
    heads = _snapshots([torch.stack([one_hot, uniform])])
    assert snapshot_measures(heads, head=0)["concentration"] == \
        pytest.approx([1.0])
    assert snapshot_measures(heads, head=1)["concentration"] == \
        pytest.approx([0.0], abs=1e-6)


def test_formation_finds_the_steps_and_the_early_sharp_phase():
    uniform = torch.full((3, 4), 0.25)
    on_last = torch.zeros(3, 4)
    on_last[:, 3] = 1.0  # every row on the final token: sharp, not aligned
    diagonal = torch.tensor([[1.0, 0, 0, 0], [0, 0.1, 0.9, 0],
                             [0, 0, 0, 1.0]])
    snaps = _snapshots([uniform, on_last, uniform, diagonal, diagonal])
    snaps.val_bleu = [0.0, 0.0, 1.0, 2.0, 10.0]
    snaps.val_loss = [8.0, 4.0, 3.0, 2.0, 1.0]
    found = formation(snaps)
    assert found["steps"] == [0, 1, 2, 3, 4]
    assert found["diagonal_step"] == 3
    assert found["val_bleu_step"] == 4
    assert found["val_loss_step"] == 1
    k, top, token, share = found["peak"]
    assert (k, token, share) == (1, ".", 1.0)
    assert top == pytest.approx(1.0)
    assert formation(_snapshots([diagonal, diagonal]))["peak"] is None


def test_formation_has_no_peak_unless_the_diagonal_share_rises():
    on_first, on_last = torch.zeros(3, 4), torch.zeros(3, 4)
    on_first[:, 0] = 1.0  # diagonal share 1/3
    on_last[:, 3] = 1.0  # diagonal share 2/3
    diagonal = torch.eye(4)[:3]  # diagonal share 1
    falling = formation(_snapshots([diagonal, diagonal, on_last, on_last]))
    assert falling["diagonal"] == pytest.approx([1, 1, 2 / 3, 2 / 3])
    assert falling["diagonal_step"] == 2  # the step of its fall
    assert falling["peak"] is None
    flat = formation(_snapshots([on_last, on_last, on_last]))
    assert flat["diagonal_step"] is None and flat["peak"] is None
    # up, then down below where it started: no rise either
    back = formation(_snapshots([on_last, diagonal, on_first]))
    assert back["diagonal"] == pytest.approx([2 / 3, 1, 1 / 3])
    assert back["peak"] is None
    # a rise still has its peak
    rising = formation(_snapshots([on_last, on_last, diagonal]))
    assert rising["diagonal_step"] == 2 and rising["peak"][0] == 0


def test_the_measures_build_their_tensors_on_the_attention_device():
    """Attention on a GPU must not meet a helper tensor on the CPU: with
    the default device set to "meta", a tensor built without the
    input's device lands there and the measure raises."""
    maps = [torch.full((3, 4), 0.25), torch.eye(4)[:3],
            torch.stack([torch.eye(4)[:3], torch.full((3, 4), 0.25)])]
    snaps = _snapshots([maps[0], maps[1], maps[1]])
    want = ([concentration(m) for m in maps],
            [diagonal_share(m) for m in maps], formation(snaps))
    double = torch.eye(5, dtype=torch.float64)
    with torch.device("meta"):
        got = ([concentration(m) for m in maps],
               [diagonal_share(m) for m in maps], formation(snaps))
        # float64 attention too: the helpers follow the rows
        assert diagonal_share(double) == 1.0
        assert concentration(double) == pytest.approx(1.0)
    assert got == want
