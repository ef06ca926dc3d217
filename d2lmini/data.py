"""The English-French corpus as batches: splits, Vocab, MTFraEng.

Shape legend for every comment and docstring in this module:
    B  batch size          T  time steps (``num_steps``)

Finding, downloading and reading ``fra-eng.zip`` is ``d2lmini.corpus``;
this module turns its preprocessed pairs into train/val/test splits,
vocabularies and padded id tensors.  It re-exports every public name of
``corpus``, so ``from d2lmini.data import read_pairs, DATA_URL`` works;
``read_pairs`` uses the constants of ``corpus``: change (or monkeypatch)
them there.  The data pipeline knows no model.
"""

from collections import Counter

import torch
from torch.utils import data as tud

from .corpus import (
    ARCHIVE_NAME,
    ARCHIVE_SHA1,
    DATA_URL,
    ENV_VAR,
    FRA_SHA256,
    MEMBER,
    ChecksumError,
    CorpusNotFoundError,
    DownloadError,
    UnsafeArchiveError,
    cache_dir,
    download_archive,
    extract,
    locate_archive,
    parse_pairs,
    preprocess,
    read_pairs,
    tokenize,
)

__all__ = [
    "ARCHIVE_NAME", "ARCHIVE_SHA1", "DATA_URL", "ENV_VAR", "FRA_SHA256",
    "MEMBER", "RESERVED_TOKENS", "BucketBatchSampler", "ChecksumError",
    "CorpusNotFoundError", "DownloadError", "MTFraEng",
    "UnsafeArchiveError", "Vocab", "cache_dir", "download_archive",
    "extract", "locate_archive", "parse_pairs", "preprocess",
    "read_pairs", "tokenize",
]

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
        if isinstance(min_freq, bool) or not isinstance(min_freq, int) \
                or min_freq < 1:
            raise ValueError(f"min_freq must be an int >= 1, got "
                             f"{min_freq!r}")
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


class BucketBatchSampler(tud.Sampler):
    """Batches of examples of similar length, in a seeded random order.

    Each epoch shuffles the examples, cuts them into pools of
    ``pool_batches`` batches, sorts every pool by ``keys`` and cuts it
    into batches, then shuffles the order of all batches.

    Args:
        keys: (N,) sort key of every example, e.g. its length.
        batch_size: examples per batch (the last one may be smaller).
        generator: the ``torch.Generator`` that draws both shuffles.
        pool_batches: batches per sorted pool.
    """

    def __init__(self, keys, batch_size, generator, pool_batches=50):
        self.keys = torch.as_tensor(keys)
        self.batch_size, self.pool_batches = batch_size, pool_batches
        self.generator = generator

    def __len__(self):
        return -(-len(self.keys) // self.batch_size)

    def __iter__(self):
        perm = torch.randperm(len(self.keys), generator=self.generator)
        pool, batches = self.batch_size * self.pool_batches, []
        for start in range(0, len(perm), pool):
            idx = perm[start:start + pool]
            idx = idx[torch.argsort(self.keys[idx], stable=True)]
            batches.extend(idx.split(self.batch_size))
        order = torch.randperm(len(batches), generator=self.generator)
        for b in order.tolist():
            yield batches[b].tolist()


class _Batches(tud.Dataset):
    """A split's tensors, indexed by a list of ids -> one whole batch."""

    def __init__(self, arrays, trim):
        self.arrays, self.trim = arrays, trim

    def __len__(self):
        return len(self.arrays[0])

    def __getitem__(self, ids):
        ids = torch.as_tensor(ids, dtype=torch.long)
        src, tgt_in, src_len, label, tgt_len = (a[ids] for a in self.arrays)
        if self.trim and len(ids):
            # Cut the columns that are padding in every row of the batch.
            src = src[:, :int(src_len.max())]  # (B, T_src)
            t = int(tgt_len.max())
            tgt_in, label = tgt_in[:, :t], label[:, :t]  # (B, T_tgt)
        return src, tgt_in, src_len, label


def _check_count(name, value, minimum, none_ok=False):
    if value is None and none_ok:
        return
    if isinstance(value, bool) or not isinstance(value, int) \
            or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}"
                         f"{' or None' if none_ok else ''}, got {value!r}")


def _clean(sentence):
    """Preprocess one sentence and collapse its whitespace."""
    return " ".join(preprocess(sentence).split())


def _sentences(sentences, name):
    if isinstance(sentences, str) or not all(
            isinstance(s, str) for s in sentences):
        raise TypeError(f"{name} must be a list of strings, e.g. "
                        "['go .'], not one string or other objects")
    return [_clean(s) for s in sentences]


def _split(pairs, num_train, num_val, num_test, by_source, generator):
    """Cut ``pairs`` into train, val and test lists of pairs.

    ``generator`` (or None: corpus order) shuffles the pairs, or the
    English sources when ``by_source``.  Test takes ``num_test``
    sources, each once, none of them in train or val.  With
    ``num_train=None`` test and val come from the end, train is the rest.
    """
    groups = None  # English source -> its French sentences, in order
    if by_source or generator is not None or num_train is None:
        groups = {}
        for eng, fra in pairs:
            groups.setdefault(eng, []).append(fra)
    if by_source:
        units = list(groups.items())
    else:  # one pair at a time, lazily: the book's split reads 640
        units = ((eng, (fra,)) for eng, fra in pairs)
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
            eng, fras = next(it, (None, None))
            if eng is None:
                raise ValueError(f"not enough data for the {name} split"
                                 + need)
            if eng in test_src:
                continue
            if name == "test":  # each source once, unseen in train/val
                if eng not in seen:  # with its first translation
                    out.append((eng, fras[0] if groups is None
                                else groups[eng][0]))
                    test_src.add(eng)
                continue
            # The last group may be cut; by source, its rest is dropped.
            out += [(eng, fra) for fra in fras[:n - len(out)]]
            seen.add(eng)
        splits[name] = out
    if num_train is None:  # undo the reversal
        splits["val"].reverse()
        splits["test"].reverse()
        splits["train"] = [(eng, fra) for eng, fras in list(it)[::-1]
                           if eng not in test_src for fra in fras]
        if not splits["train"]:
            raise ValueError("no pairs are left for training" + need)
    return splits["train"], splits["val"], splits["test"]


class MTFraEng:
    """English->French pairs as padded id tensors, batched as in d2l.

    The defaults reproduce the d2l book's setting: the corpus's first
    512 pairs (its shortest) for training and the next 128 for
    validation, split by position (d2l loads one pair more by an
    off-by-one).  There train and val may share an English source (the
    book's split shares "dogs bark ."); ``split_by_source`` avoids it.
    The test split never shares a source with train or val, and holds
    each source once: ``references`` gives all its translations.
    Vocabularies come from the training split only.

    Args:
        batch_size: B.
        num_steps: T; each sequence, with ``<eos>``, is cut or padded to T.
        num_train: training pairs; None takes all pairs not in val/test.
        num_val: validation pairs.
        num_test: test English sources (0: no test split).
        max_src_len, max_tgt_len: keep only pairs with at most this many
            tokens (without ``<eos>``) on that side.
        shuffle: draw the splits at random (seeded), not in corpus order.
        split_by_source: split by unique English source so that no
            split shares one; defaults to ``shuffle``.
        seed: seeds the split and the order of the training batches.
        min_freq: vocabulary threshold, counted on the training split.
        bucket: batch training examples of similar length and cut every
            batch to its longest source and target (T_src, T_tgt <= T).
        root: where to look for ``fra-eng.zip`` first (``read_pairs``).
        pairs: raw ``(english, french)`` pairs to use instead of the
            corpus (preprocessed here).

    Shape:
        A batch is ``(src, tgt_input, src_valid_len, label)``, int64:
        src (B, T) source ids + ``<eos>`` + ``<pad>``; tgt_input (B, T)
        ``<bos>`` + target ids; src_valid_len (B,) counts ``<eos>``;
        label (B, T) tgt_input shifted left by one.

    Attributes:
        train_pairs, val_pairs, test_pairs: lists of preprocessed
            ``(english, french)`` pairs (test: one per source).
        src_vocab, tgt_vocab: ``Vocab`` of the training split.
        num_skipped: malformed corpus lines skipped when reading.
    """

    def __init__(self, batch_size, num_steps=9, num_train=512, num_val=128,
                 *, num_test=0, max_src_len=None, max_tgt_len=None,
                 shuffle=False, split_by_source=None, seed=0, min_freq=2,
                 bucket=False, root=None, pairs=None):
        for name, value, low, none_ok in (
                ("batch_size", batch_size, 1, False),
                ("num_steps", num_steps, 1, False),
                ("num_train", num_train, 1, True),
                ("num_val", num_val, 0, False),
                ("num_test", num_test, 0, False),
                ("max_src_len", max_src_len, 1, True),
                ("max_tgt_len", max_tgt_len, 1, True),
                ("seed", seed, 0, False)):
            _check_count(name, value, low, none_ok)
        self.batch_size, self.num_steps = batch_size, num_steps
        self.bucket = bool(bucket)
        if pairs is None:
            self._corpus, self.num_skipped = read_pairs(root)
        else:
            if isinstance(pairs, str) or not all(
                    len(p) == 2 and all(isinstance(s, str) for s in p)
                    for p in pairs):
                raise TypeError("pairs must be a list of (english, "
                                "french) string pairs")
            self._corpus = tuple((_clean(e), _clean(f)) for e, f in pairs)
            self.num_skipped = 0
        selected = [
            (e, f) for e, f in self._corpus
            if (max_src_len is None or len(e.split()) <= max_src_len)
            and (max_tgt_len is None or len(f.split()) <= max_tgt_len)
        ] if max_src_len or max_tgt_len else self._corpus
        self._generator = torch.Generator().manual_seed(seed)
        by_source = shuffle if split_by_source is None else split_by_source
        self.train_pairs, self.val_pairs, self.test_pairs = _split(
            selected, num_train, num_val, num_test, bool(by_source),
            self._generator if shuffle else None)
        self.src_vocab = Vocab([tokenize(e) for e, _ in self.train_pairs],
                               min_freq)
        self.tgt_vocab = Vocab([tokenize(f) for _, f in self.train_pairs],
                               min_freq)
        # Tensors are made once per split, not once per batch.
        self._arrays = {name: self._tensors(getattr(self, name + "_pairs"))
                        for name in ("train", "val", "test")}
        self._refs = self._sources = None  # made on first use

    def _encode(self, sentences, vocab, bos=False):
        """(N, T [+1 with bos]) ids of sentences + <eos>, and (N,) lens."""
        T, rows, lens = self.num_steps, [], []
        for s in sentences:
            ids = (vocab[tokenize(s)] + [vocab.eos])[:T]
            lens.append(len(ids))
            rows.append([vocab.bos] * bos + ids + [vocab.pad] * (T - len(ids)))
        return (torch.tensor(rows, dtype=torch.long).reshape(-1, T + bos),
                torch.tensor(lens, dtype=torch.long))

    def _tensors(self, pairs):
        src, src_len = self._encode([e for e, _ in pairs], self.src_vocab)
        tgt, tgt_len = self._encode([f for _, f in pairs], self.tgt_vocab,
                                    bos=True)  # (N, T + 1)
        return src, tgt[:, :-1], src_len, tgt[:, 1:], tgt_len

    def build(self, src_sentences, tgt_sentences=None):
        """A batch from raw sentences, with the training vocabularies.

        Without ``tgt_sentences`` (inference) tgt_input is ``<bos>``
        then ``<pad>`` and label is all ``<pad>``.

        Returns:
            ``(src, tgt_input, src_valid_len, label)`` as for a batch.
        """
        src_sentences = _sentences(src_sentences, "src_sentences")
        src, src_len = self._encode(src_sentences, self.src_vocab)
        if tgt_sentences is None:
            tgt = torch.full((len(src_sentences), self.num_steps + 1),
                             self.tgt_vocab.pad, dtype=torch.long)
            tgt[:, 0] = self.tgt_vocab.bos
        else:
            tgt_sentences = _sentences(tgt_sentences, "tgt_sentences")
            if len(tgt_sentences) != len(src_sentences):
                raise ValueError(
                    f"got {len(src_sentences)} source and "
                    f"{len(tgt_sentences)} target sentences; pass as many")
            tgt, _ = self._encode(tgt_sentences, self.tgt_vocab, bos=True)
        return src, tgt[:, :-1], src_len, tgt[:, 1:]

    def _loader(self, name, train=False):
        arrays = self._arrays[name]
        if len(arrays[0]) == 0:
            raise ValueError(f"the {name} split is empty: pass "
                             f"num_{name} > 0 to MTFraEng")
        batches = _Batches(arrays, trim=self.bucket)
        if train and self.bucket:
            src_len, tgt_len = arrays[2], arrays[4]
            sampler = BucketBatchSampler(
                tgt_len * (self.num_steps + 1) + src_len,
                self.batch_size, self._generator)
        else:
            order = tud.RandomSampler(batches, generator=self._generator) \
                if train else tud.SequentialSampler(batches)
            sampler = tud.BatchSampler(order, self.batch_size, False)
        return tud.DataLoader(batches, sampler=sampler, batch_size=None)

    def train_dataloader(self):
        """Training batches in a seeded random order (each epoch anew)."""
        return self._loader("train", train=True)

    def val_dataloader(self):
        """Validation batches in order."""
        return self._loader("val")

    def test_dataloader(self):
        """Test batches in order (one row per test source)."""
        return self._loader("test")

    def references(self, src_sentence):
        """All French translations of an English source in the corpus
        (preprocessed, in corpus order, ignoring the length limits)."""
        if self._refs is None:
            self._refs = {}
            for eng, fra in self._corpus:
                refs = self._refs.setdefault(eng, [])
                if fra not in refs:
                    refs.append(fra)
        src = _clean(src_sentence)
        if src not in self._refs:
            raise ValueError(f"{src!r} is not an English sentence of the "
                             "corpus, so it has no reference translation")
        return list(self._refs[src])

    def splits_of(self, src_sentence):
        """Names of the splits that hold this English source, e.g.
        ``('train',)``; empty if none does."""
        if self._sources is None:
            self._sources = {name: {e for e, _ in getattr(self, name +
                                                          "_pairs")}
                             for name in ("train", "val", "test")}
        src = _clean(src_sentence)
        return tuple(name for name, srcs in self._sources.items()
                     if src in srcs)

    def describe(self, sentence, side="src"):
        """What the model sees: one ``(token, id, token_of_id)`` row per
        time step; unknown tokens show as ``<unk>`` in the last column.
        ``side`` is "src" (English) or "tgt" (French, as the label)."""
        if side not in ("src", "tgt"):
            raise ValueError(f"side must be 'src' or 'tgt', got {side!r}")
        vocab = self.src_vocab if side == "src" else self.tgt_vocab
        T = self.num_steps
        tokens = (tokenize(_clean(sentence)) + ["<eos>"])[:T]
        tokens += ["<pad>"] * (T - len(tokens))
        return [(t, i, vocab.to_tokens(i))
                for t, i in zip(tokens, vocab[tokens])]

    def __repr__(self):
        return (f"MTFraEng(train={len(self.train_pairs)} pairs, "
                f"val={len(self.val_pairs)} pairs, "
                f"test={len(self.test_pairs)} sources, "
                f"src_vocab={len(self.src_vocab)}, "
                f"tgt_vocab={len(self.tgt_vocab)}, "
                f"num_steps={self.num_steps})")
