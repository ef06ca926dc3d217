"""Held-out splits: cut the corpus's pairs into train, val and test.

The chapter's protocol: split by English source, so that no test source
is ever seen in training; keep sources that differ only in their final
``. ! ?`` ("forget it !", "forget it .") in one split, since the model
would otherwise have seen the test sentence with another full stop; and
score each test source once, against all its translations.  The book's
setting splits by position instead (``by_source=False``).
"""

import re

import torch

__all__ = ["split_pairs"]


_END_PUNCT = re.compile(r"( [.!?])+$")


def _twin_key(eng):
    """What a split by source keeps together: ``eng`` without its final
    run of ``. ! ?`` tokens, so that near-duplicates such as "forget it
    !" and "forget it ." (117 pairs of sources in the corpus) share a
    split.  A source of such tokens only is its own key."""
    return _END_PUNCT.sub("", eng) or eng


def split_pairs(pairs, num_train, num_val, num_test, by_source, generator):
    """Cut ``pairs`` into train, val and test lists of pairs.

    ``generator`` (or None: corpus order) shuffles the pairs or, when
    ``by_source``, the groups of English sources of one ``_twin_key``.
    Test takes ``num_test`` sources, each once with its first
    translation, none of them in train or val.  With ``num_train=None``
    test and val come from the end, train is the rest.
    """
    first = {}  # English source -> its first French translation
    if by_source or generator is not None or num_train is None:
        for eng, fra in pairs:
            first.setdefault(eng, fra)
    if by_source:
        groups = {}
        for eng, fra in pairs:
            groups.setdefault(_twin_key(eng), []).append((eng, fra))
        units = list(groups.values())
    else:  # one pair at a time, lazily: the book's split reads 640
        units = ([pair] for pair in pairs)
    if generator is not None:
        units = list(units)
        units = [units[i] for i in
                 torch.randperm(len(units), generator=generator).tolist()]
    if num_train is None:
        units = reversed(list(units))
    need = (f"; the selection has {len(pairs)} pairs, asked for "
            f"num_train={num_train}, num_val={num_val}, "
            f"num_test={num_test} (ask for fewer, or loosen the length "
            "limits)")
    it, seen, test_src, splits = iter(units), set(), set(), {}
    quotas = (("test", num_test), ("val", num_val)) if num_train is None \
        else (("train", num_train), ("val", num_val), ("test", num_test))
    for name, n in quotas:
        out = []
        while len(out) < n:
            unit = next(it, None)
            if unit is None:
                raise ValueError(f"not enough data for the {name} split"
                                 + need)
            for eng, fra in unit:
                if len(out) == n:  # the last unit may be cut: drop the rest
                    break
                if eng in test_src:
                    continue
                if name == "test":  # each source once, unseen in train/val
                    if eng not in seen:  # with its first translation
                        out.append((eng, first.get(eng, fra)))
                        test_src.add(eng)
                    continue
                out.append((eng, fra))
                seen.add(eng)
        splits[name] = out
    if num_train is None:  # undo the reversal
        splits["val"].reverse()
        splits["test"].reverse()
        splits["train"] = [(eng, fra) for unit in list(it)[::-1]
                           for eng, fra in unit if eng not in test_src]
        if not splits["train"]:
            raise ValueError("no pairs are left for training" + need)
    return splits["train"], splits["val"], splits["test"]
