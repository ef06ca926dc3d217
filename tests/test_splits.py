"""Tests of d2lmini.splits on small hand-made pairs (the corpus-level
checks of the chapter's split are in test_data.py)."""

import pytest
import torch

from d2lmini.splits import split_pairs

PAIRS = [("go .", "va !"), ("go !", "file !"), ("hi .", "salut ."),
         ("hi .", "bonjour ."), ("run !", "cours !"), ("run .", "courez ."),
         ("wait .", "attends ."), ("stop !", "stop !")]


def sources(pairs):
    return {e for e, _ in pairs}


@pytest.mark.parametrize("seed", range(5))
def test_twins_stay_in_one_split_and_test_is_held_out(seed):
    gen = torch.Generator().manual_seed(seed)
    train, val, test = split_pairs(PAIRS, None, 1, 2, True, gen)
    for a, b in (("go .", "go !"), ("run !", "run .")):
        holders = [i for i, split in enumerate((train, val, test))
                   if {a, b} & sources(split)]
        assert len(holders) == 1, (a, b, holders)
    assert not sources(test) & (sources(train) | sources(val))
    assert len(test) == len(sources(test)) == 2  # each source once
    first = {}
    for e, f in PAIRS:
        first.setdefault(e, f)
    assert all(f == first[e] for e, f in test)  # its first translation


def test_split_by_position_is_the_book_setting():
    train, val, test = split_pairs(PAIRS, 3, 2, 0, False, None)
    assert train == PAIRS[:3] and val == PAIRS[3:5] and test == []


def test_asking_for_too_much_says_how_much_there_is():
    with pytest.raises(ValueError, match="the selection has 8 pairs"):
        split_pairs(PAIRS, 6, 2, 1, True, None)
