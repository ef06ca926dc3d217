"""d2lmini.report.timing_verdict: the words of a timing comparison come
from the spread of repeated timings, never from one timing."""

import pytest
import torch

from d2lmini.report import timing_verdict


def test_every_timing_below_reads_faster():
    line = timing_verdict("attention", [0.030, 0.031, 0.033],
                          "RNN", [0.034, 0.035, 0.036])
    assert line == ("attention 31.0 ms [30.0, 33.0] against RNN 35.0 ms "
                    "[34.0, 36.0] (median [min, max] of 3 timings each): "
                    "faster, every timing below; faster in 3 of 3 pairs")


def test_every_timing_above_reads_slower():
    line = timing_verdict("a", [2.0, 3.0], "b", [1.0, 1.5], unit="s",
                          scale=1)
    assert "a 2.5 s [2.0, 3.0] against b 1.2 s [1.0, 1.5]" in line
    assert "slower, every timing above; faster in 0 of 2 pairs" in line


def test_overlapping_ranges_have_no_order():
    # One timing of a is below all of b's, but the ranges overlap: the
    # 10 % of a single pair must not decide it.
    line = timing_verdict("a", [0.9, 1.2, 1.3], "b", [1.0, 1.1, 1.4],
                          unit="s", scale=1)
    assert line.endswith("no clear order, the ranges overlap; "
                         "faster in 2 of 3 pairs")


def test_unpaired_lists_give_no_pair_count():
    line = timing_verdict("a", [1, 2, 3], "b", [5, 6], unit="s", scale=1,
                          fmt=".0f")
    assert "(median [min, max] of 3 and 2 timings)" in line
    assert "pairs" not in line


def test_tensors_and_numpy_scalars_are_numbers():
    np = pytest.importorskip("numpy")
    line = timing_verdict("a", torch.tensor([1.0, 2.0]), "b",
                          [np.float64(3.0), np.float64(4.0)], unit="s",
                          scale=1)
    assert "faster, every timing below" in line


@pytest.mark.parametrize("times_a, error, match", [
    ([1.0], ValueError, "at least two timings"),
    ([], ValueError, "at least two timings"),
    ([1.0, -1.0], ValueError, "negative"),
    ([1.0, float("nan")], ValueError, "finite"),
    ("12", TypeError, "list of numbers"),
    (3.0, TypeError, "list of numbers"),
    ([1.0, "2"], TypeError, "must be a number"),
    ([1.0, True], TypeError, "must be a number"),
])
def test_bad_timings_are_refused(times_a, error, match):
    with pytest.raises(error, match=match):
        timing_verdict("a", times_a, "b", [1.0, 2.0])


@pytest.mark.parametrize("scale, error", [(0, ValueError),
                                          (-1e3, ValueError),
                                          ("ms", TypeError)])
def test_bad_scale_is_refused(scale, error):
    with pytest.raises(error, match="scale"):
        timing_verdict("a", [1.0, 2.0], "b", [3.0, 4.0], scale=scale)
