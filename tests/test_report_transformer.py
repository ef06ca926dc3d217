"""d2lmini.report.spread_over_seeds: the seeds' range in one line."""

import pytest
import torch

from d2lmini.report import spread_over_seeds


def test_every_interval_above_zero():
    line = spread_over_seeds("Transformer - additive",
                             [(9.0, 7.5, 10.7), (8.05, 6.5, 9.6),
                              (9.16, 7.4, 10.8)])
    assert line == ("Transformer - additive, 3 seeds: +8.1 to +9.2 BLEU, "
                    "every 95 % interval above zero")


def test_mixed_and_below():
    line = spread_over_seeds("a - b", [(1.0, 0.2, 2.0), (-0.5, -1.0, 0.1),
                                       (-2.0, -3.0, -1.0)], unit="")
    assert line == ("a - b, 3 seeds: -2.0 to +1.0, intervals: 1 above "
                    "zero, 1 below zero, 1 including zero")
    assert spread_over_seeds("x", [(-1, -2, -0.5), (-1, -3, -0.1)]).endswith(
        "every 95 % interval below zero")


def test_one_seed_and_tensors():
    line = spread_over_seeds("x", [(torch.tensor(1.0), 0.5, 2.0)],
                             fmt=".2f")
    assert line == "x, 1 seed: 1.00 to 1.00 BLEU, its 95 % interval above zero"


@pytest.mark.parametrize("bad, error", [
    ("abc", TypeError), (5, TypeError), ([], ValueError),
    ([(1.0, 2.0)], ValueError), ([(1.0, 2.0, 1.0)], ValueError),
    ([(1.0, "a", 2.0)], TypeError), ([(1.0, float("nan"), 2.0)], ValueError),
])
def test_bad_input(bad, error):
    with pytest.raises(error):
        spread_over_seeds("x", bad)
