"""d2lmini.report's lines for the Bahdanau section: a seed spread and
the chance level of the diagonal share."""

import pytest
import torch

from d2lmini import report
from d2lmini.alignment import diagonal_share


def test_seed_spread_says_range_and_intervals():
    line = report.seed_spread("a - b", [(4.6, 3.0, 6.2), (6.1, 4.5, 7.9),
                                        (0.5, -1.0, 2.0)])
    assert line == ("a - b over 3 seeds: +0.5 to +6.1 BLEU; interval above "
                    "zero for 2 of 3")
    one = report.seed_spread("x", [(torch.tensor(1.0), 0.5, 1.5)], unit="")
    assert one == "x over 1 seed: +1.0 to +1.0; interval above zero for 1 of 1"


@pytest.mark.parametrize("bad, error", [
    ([], ValueError), ("abc", TypeError), (3, TypeError),
    ([(1, 2)], ValueError), ([(1, 3, 2)], ValueError),
    ([(float("nan"), 0, 1)], ValueError), ([("a", 0, 1)], TypeError)])
def test_seed_spread_rejects_bad_input(bad, error):
    with pytest.raises(error):
        report.seed_spread("a - b", bad)


@pytest.mark.parametrize("T, S", [(1, 1), (1, 5), (3, 3), (4, 9), (10, 4),
                                  (7, 2), (5, 11)])
def test_diagonal_chance_is_the_mean_share_of_random_peaks(T, S):
    # Every peak position j equally likely, row by row: the mean of the
    # diagonal share over the S maps whose rows all peak at j.
    shares = [diagonal_share(torch.eye(S)[[j] * T]) for j in range(S)]
    assert report.diagonal_chance(T, S) == pytest.approx(sum(shares) / S)


def test_diagonal_chance_known_values():
    assert report.diagonal_chance(3, 3) == pytest.approx(7 / 9)
    assert report.diagonal_chance(2, 1) == 1.0


@pytest.mark.parametrize("T, S, error", [(0, 3, ValueError),
                                         (3, 0, ValueError),
                                         (2.0, 3, TypeError),
                                         (True, 3, TypeError)])
def test_diagonal_chance_rejects_bad_input(T, S, error):
    with pytest.raises(error):
        report.diagonal_chance(T, S)
