"""d2lmini.report.bound: bounds rounded in the direction that keeps
them true (the attention-pooling section prints them)."""

import pytest
import torch

from d2lmini import report


def test_bound_rounds_in_the_safe_direction():
    assert report.bound(0.5836, "at least") == "at least 0.583"
    assert report.bound(0.1741, "at most") == "at most 0.175"
    assert report.bound(-0.5836, "at least") == "at least -0.584"
    assert report.bound(-0.5836, "at most") == "at most -0.583"
    assert report.bound(2, "at most", digits=0) == "at most 2"
    assert report.bound(2.01, "at most", digits=0) == "at most 3"


def test_bound_keeps_numbers_that_print_exactly():
    # 0.29 * 100 is 28.999999999999996 in floats: no spurious 0.28.
    assert report.bound(0.29, "at least", digits=2) == "at least 0.29"
    assert report.bound(0.5, "at most", digits=3) == "at most 0.500"
    assert report.bound(torch.tensor(0.25), "at least", 2) == \
        "at least 0.25"


def test_bound_never_prints_minus_zero():
    assert report.bound(-0.0001, "at most") == "at most 0.000"
    assert report.bound(1e-20, "at least") == "at least 0.000"


@pytest.mark.parametrize("value, side, digits, error", [
    ("0.5", "at least", 3, TypeError),
    (True, "at least", 3, TypeError),
    (float("nan"), "at least", 3, ValueError),
    (float("inf"), "at most", 3, ValueError),
    (0.5, "about", 3, ValueError),
    (0.5, "at least", 2.0, TypeError),
    (0.5, "at least", True, TypeError),
    (0.5, "at least", -1, ValueError),
    (0.5, "at least", 16, ValueError),
])
def test_bound_refuses_bad_input(value, side, digits, error):
    with pytest.raises(error):
        report.bound(value, side, digits)
