"""d2lmini.report: the lines a notebook prints about its own run."""

import pytest
import torch

from d2lmini import report


def test_verdict_says_where_the_interval_lies():
    assert report.verdict("attention - none", 3.1, 1.2, 5.0) == (
        "attention - none: +3.1 BLEU [95 % CI +1.2, +5.0], above zero")
    assert report.verdict("a - b", -2, -3, -0.5, unit="") == (
        "a - b: -2.0 [95 % CI -3.0, -0.5], below zero")
    assert report.verdict("a - b", 0.2, -0.1, 0.4).endswith("includes zero")
    # A bootstrap interval need not hold the value; zero at an end counts.
    assert report.verdict("a - b", 0.0, 0.0, 1.0).endswith("includes zero")
    assert "[90 % CI" in report.verdict("x", 1, 0.5, 2, level=90)


def test_verdict_takes_tensors_and_refuses_what_it_cannot_word():
    assert report.verdict("x", torch.tensor(1.0), 0.5, 2).startswith(
        "x: +1.0 BLEU")
    with pytest.raises(ValueError, match="low <= high"):
        report.verdict("x", 1, 2, 0.5)
    with pytest.raises(ValueError, match="finite"):
        report.verdict("x", float("nan"), 0, 1)
    with pytest.raises(TypeError, match="must be a number"):
        report.verdict("x", "3.1", 0, 1)
    with pytest.raises(TypeError, match="must be a number"):
        report.verdict("x", True, 0, 1)


def test_higher_or_lower_compares_as_printed():
    assert report.higher_or_lower("additive", 26.14, "none", 21.0) == (
        "additive 26.1 is higher than none 21.0")
    assert report.higher_or_lower("a", 1.0, "b", 2.0) == (
        "a 1.0 is lower than b 2.0")
    assert report.higher_or_lower("a", 1.04, "b", 1.01) == (
        "a 1.0 is the same as b 1.0")


def test_share_counts_and_refuses_impossible_counts():
    assert report.share(9999, 10000, "x") == "9,999 of 10,000 x (> 99.9 %)"
    assert report.share(1, 10000, "x") == "1 of 10,000 x (< 0.1 %)"
    assert report.share(3, 3, "x") == "3 of 3 x (100.0 %)"
    assert report.share(0, 3, "x") == "0 of 3 x (0.0 %)"
    assert report.share(12, 1000, "sentences") == (
        "12 of 1,000 sentences (1.2 %)")
    with pytest.raises(ValueError, match="count <= total"):
        report.share(5, 3, "x")
    with pytest.raises(TypeError, match="integers"):
        report.share(1.5, 3, "x")


def test_table_aligns_numbers_right_and_text_left():
    text = report.table([["additive", "26.1"], ["none", "9.0"]],
                        ["model", "BLEU"])
    assert text.splitlines() == ["model     BLEU",
                                 "--------  ----",
                                 "additive  26.1",
                                 "none       9.0"]
    with pytest.raises(ValueError, match="row 0 has 1 cells"):
        report.table([["only"]], ["a", "b"])


def test_check_says_pass_or_not_yet_and_never_raises_for_the_reader():
    assert report.check(True, "masked loss") == "pass: masked loss"
    assert report.check(lambda: False, "x") == "not yet: x"

    def unwritten():
        raise NotImplementedError("write your function above")

    assert report.check(unwritten, "x") == (
        "not yet: x (NotImplementedError: write your function above)")
    assert report.check(torch.tensor(True), "x") == "pass: x"


def test_a_tensor_of_several_numbers_is_refused_with_its_shape():
    import torch
    two = torch.tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="must be a number.*reduce"):
        report.higher_or_lower("a", two, "b", 1.0)
    with pytest.raises(TypeError, match="must be a number"):
        report.bound(two, "lower")
    with pytest.raises(TypeError, match=r"shape \(2,\)"):
        report.table([[two]], ["a"])
    # one element is its number, right-aligned like one
    assert report.table([[torch.tensor(2.5)], [10]], ["x"]).splitlines() \
        == ["  x", "---", "2.5", " 10"]
