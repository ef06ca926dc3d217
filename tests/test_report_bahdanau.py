"""d2lmini.report for the Bahdanau section: the chance level of the
diagonal share."""

import pytest
import torch

from d2lmini import report
from d2lmini.alignment import diagonal_share


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
