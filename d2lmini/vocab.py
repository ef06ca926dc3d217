"""Vocab: the token <-> id maps of one side of the corpus.

``d2lmini.data`` builds one per language from the training split (and
offers the names of this module too); the page's translator reads the
ids the same way, from the tokens the export writes in its manifest.
"""

from collections import Counter

import torch

from .utils import check_int

__all__ = ["RESERVED_TOKENS", "Vocab"]

RESERVED_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")


class Vocab:
    """Token <-> id maps with reserved tokens first.

    Ids are deterministic: the reserved tokens in the given order, then
    the counted tokens by descending frequency, ties alphabetically.

    Args:
        tokens: an iterable of tokens, of token lists (sentences), or a
            mix of both.
        min_freq: tokens seen fewer times map to ``<unk>``.
        reserved_tokens: must contain ``<pad> <bos> <eos> <unk>``; more
            may follow.
    """

    def __init__(self, tokens=(), min_freq=2,
                 reserved_tokens=RESERVED_TOKENS):
        if isinstance(tokens, str):
            raise TypeError("tokens must be a list of tokens or of token "
                            "lists, not one string; pass text.split()")
        check_int("min_freq", min_freq)
        reserved = list(reserved_tokens)
        missing = [t for t in RESERVED_TOKENS if t not in reserved]
        if missing or len(set(reserved)) != len(reserved):
            raise ValueError(f"reserved_tokens {reserved} must hold each "
                             f"of {list(RESERVED_TOKENS)} exactly once")
        counter = Counter()
        for item in tokens:
            counter.update([item] if isinstance(item, str) else item)
        bad = [t for t in counter if not isinstance(t, str)]
        if bad:
            raise TypeError(f"tokens must be strings, got {bad[:3]!r}")
        self.token_freqs = sorted(
            ((t, n) for t, n in counter.items() if t not in reserved),
            key=lambda tn: (-tn[1], tn[0]))
        self.idx_to_token = reserved + [
            t for t, n in self.token_freqs if n >= min_freq]
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}
        self.min_freq = min_freq

    def __len__(self):
        return len(self.idx_to_token)

    def __contains__(self, token):
        return token in self.token_to_idx

    def __getitem__(self, tokens):
        """Id of a token (``<unk>``'s if unknown), or a list of ids."""
        if isinstance(tokens, str):
            return self.token_to_idx.get(tokens, self.unk)
        if isinstance(tokens, (list, tuple)):
            return [self[t] for t in tokens]
        raise TypeError(f"look up a token or a list of tokens, got "
                        f"{type(tokens).__name__}")

    def to_tokens(self, indices):
        """Token of an id, or the tokens of a list or tensor of ids."""
        if torch.is_tensor(indices):
            indices = indices.tolist()
        if isinstance(indices, (list, tuple)):
            return [self.to_tokens(i) for i in indices]
        if isinstance(indices, bool) or not isinstance(indices, int) \
                or not 0 <= indices < len(self):
            raise ValueError(f"id {indices!r} is not in the vocabulary "
                             f"(ids are ints in [0, {len(self)}))")
        return self.idx_to_token[indices]

    pad = property(lambda self: self.token_to_idx["<pad>"])
    bos = property(lambda self: self.token_to_idx["<bos>"])
    eos = property(lambda self: self.token_to_idx["<eos>"])
    unk = property(lambda self: self.token_to_idx["<unk>"])

    def __repr__(self):
        head = ", ".join(self.idx_to_token[:8])
        return f"Vocab(size={len(self)}, min_freq={self.min_freq}: {head}"\
               f"{', ...' if len(self) > 8 else ''})"
