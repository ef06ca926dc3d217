"""The English-French corpus as batches: splits, vocabularies, MTFraEng.

Shape legend for every comment and docstring in this module:
    B  batch size          T  time steps (``num_steps``)

Finding, downloading and reading ``fra-eng.zip`` is ``d2lmini.corpus``
(import its names from there), and cutting the pairs into held-out
splits is ``d2lmini.splits``; this module builds vocabularies on them
(``Vocab``, of ``d2lmini.vocab``, which this module offers too) and
padded id tensors, and serves batches.  The data pipeline knows no
model.
"""

import torch
from torch.utils import data as tud

# read_pairs is looked up here at call time: tests replace data.read_pairs.
from .corpus import preprocess, read_pairs, tokenize
from .splits import split_pairs
from .utils import check_int
from .vocab import RESERVED_TOKENS, Vocab

__all__ = ["RESERVED_TOKENS", "BucketBatchSampler", "MTFraEng", "Vocab"]


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


def _clean(sentence):
    """Preprocess one sentence and collapse its whitespace."""
    return " ".join(tokenize(preprocess(sentence)))


def _sentences(sentences, name):
    if not isinstance(sentences, str) and hasattr(sentences, "__iter__"):
        sentences = list(sentences)  # an iterator is read once
        if all(isinstance(s, str) for s in sentences):
            return [_clean(s) for s in sentences]
    raise TypeError(f"{name} must be a list of strings, e.g. ['go .'], "
                    "not one string or other objects")


def _clean_pairs(pairs):
    """Preprocess raw pairs, any iterable (read once); refuse bad ones."""
    if isinstance(pairs, (str, bytes)) or not hasattr(pairs, "__iter__"):
        raise TypeError("pairs must be a list (or any iterable) of "
                        f"(english, french) string pairs, got {pairs!r}")
    out = []
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                and all(isinstance(s, str) for s in pair)):
            raise TypeError(f"pairs[{i}] is {pair!r}; each of pairs must "
                            "be an (english, french) pair of strings")
        eng, fra = map(_clean, pair)
        if not (eng and fra):
            side = "French" if eng else "English"
            raise ValueError(f"pairs[{i}] is {pair!r}, whose {side} side "
                             "is empty after preprocessing; drop the pair "
                             "or fill it in")
        out.append((eng, fra))
    return tuple(out)


class MTFraEng:
    """English->French pairs as padded id tensors, batched as in d2l.

    The defaults reproduce the d2l book's setting: the corpus's first
    512 pairs (its shortest) for training and the next 128 for
    validation, split by position (d2l loads one pair more by an
    off-by-one).  There train and val may share an English source (the
    book's split shares "dogs bark ."); ``split_by_source`` avoids it,
    and keeps sources that differ only in their final ``. ! ?`` tokens
    ("forget it !", "forget it .") in one split.
    The test split never shares a source with train or val, and holds
    each source once: ``references`` gives all its translations.
    Vocabularies come from the training split only.

    Args:
        batch_size: B.
        num_steps: T; each sequence, with ``<eos>``, is cut or padded to T.
        num_train: training pairs; None takes all pairs not in val/test.
        num_val: validation pairs (0: no validation split, and
            ``val_dataloader()`` returns None).
        num_test: test English sources (0: no test split).
        max_src_len, max_tgt_len: keep only pairs with at most this many
            tokens (without ``<eos>``) on that side.
        shuffle: draw the splits at random (seeded), not in corpus order.
        split_by_source: split by unique English source so that no
            split shares one; defaults to ``shuffle``.
        seed: seeds the split and the order of the training batches,
            both drawn from ``generator``, this object's own
            ``torch.Generator`` (not the global one: ``set_seed`` and
            the model's initialization do not change the data).
        min_freq: vocabulary threshold, counted on the training split.
        bucket: batch training examples of similar length and cut every
            batch to its longest source and target (T_src, T_tgt <= T).
        root: where to look for ``fra-eng.zip`` first (``read_pairs``).
        pairs: raw ``(english, french)`` pairs (any iterable, read once)
            to use instead of the corpus, preprocessed here; neither side
            may be empty.

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
        generator: the ``torch.Generator`` of the split and the batch
            order; every pass over ``train_dataloader()`` advances it.
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
            check_int(name, value, low, none_ok=none_ok)
        self.batch_size, self.num_steps = batch_size, num_steps
        self.bucket = bool(bucket)
        if pairs is None:
            self._corpus, self.num_skipped = read_pairs(root)
        else:
            self._corpus, self.num_skipped = _clean_pairs(pairs), 0
        selected = [
            (e, f) for e, f in self._corpus
            if (max_src_len is None or len(e.split()) <= max_src_len)
            and (max_tgt_len is None or len(f.split()) <= max_tgt_len)
        ] if max_src_len or max_tgt_len else self._corpus
        self.generator = torch.Generator().manual_seed(seed)
        by_source = shuffle if split_by_source is None else split_by_source
        self.train_pairs, self.val_pairs, self.test_pairs = split_pairs(
            selected, num_train, num_val, num_test, bool(by_source),
            self.generator if shuffle else None)
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
                self.batch_size, self.generator)
        else:
            order = tud.RandomSampler(batches, generator=self.generator) \
                if train else tud.SequentialSampler(batches)
            sampler = tud.BatchSampler(order, self.batch_size, False)
        # A loader without a generator draws a seed from the global one
        # each time it is iterated (for worker processes, unused here):
        # a private one keeps validation from moving the dropout masks.
        return tud.DataLoader(batches, sampler=sampler, batch_size=None,
                              generator=torch.Generator())

    def train_dataloader(self):
        """Training batches in a seeded random order (each epoch anew)."""
        return self._loader("train", train=True)

    def val_dataloader(self):
        """Validation batches in order; None when there is no validation
        split (``num_val=0``), which tells the trainer to skip it."""
        return self._loader("val") if self.val_pairs else None

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

    def tokens(self, sentence):
        """The tokens of a raw sentence after preprocessing, before
        ``<eos>`` and the cut at ``num_steps`` (``build`` keeps the
        first ``num_steps`` of ``tokens(s) + ['<eos>']``)."""
        if not isinstance(sentence, str):
            raise TypeError(f"sentence must be a string, got "
                            f"{type(sentence).__name__}")
        return tokenize(_clean(sentence))

    def describe(self, sentence, side="src"):
        """What the model sees: one ``(token, id, token_of_id)`` row per
        time step; unknown tokens show as ``<unk>`` in the last column.
        ``side`` is "src" (English) or "tgt" (French, as the label)."""
        if side not in ("src", "tgt"):
            raise ValueError(f"side must be 'src' or 'tgt', got {side!r}")
        vocab = self.src_vocab if side == "src" else self.tgt_vocab
        T = self.num_steps
        tokens = (self.tokens(sentence) + ["<eos>"])[:T]
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
