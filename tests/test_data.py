"""Tests of d2lmini.data: Vocab, splits and batches of MTFraEng.

No test touches the corpus but the last ones, which read the real one
when ``D2LMINI_DATA_DIR`` points at it; the others use small synthetic
pairs.  Finding, downloading and reading the archive: test_corpus.py.
"""

import hashlib
import os
import zipfile
from pathlib import Path

import pytest
import torch

from d2lmini import corpus, data

REAL_DIR = os.environ.get(corpus.ENV_VAR)  # read before tests clear it


# Every test runs offline: see the `offline` fixture in conftest.py.
pytestmark = pytest.mark.usefixtures("offline")


# MTFraEng on a small synthetic corpus --------------------------------------

def synthetic_pairs(num_sources=40):
    """Raw pairs: source i has 1 + i % 3 translations, 1 to 5 words."""
    pairs = []
    for i in range(num_sources):
        eng = " ".join(["Tom"] * (i % 5)) + f" Word{i}."
        pairs += [(eng, f"Mot{i} v{k}!") for k in range(1 + i % 3)]
    return pairs


def sources(pairs):
    return {eng for eng, _ in pairs}


def test_batches_look_like_d2l():
    pairs = synthetic_pairs()
    d = data.MTFraEng(4, num_steps=5, num_train=8, num_val=4, pairs=pairs)
    clean = [(corpus.preprocess(e).strip(), corpus.preprocess(f))
             for e, f in pairs]
    assert d.train_pairs == clean[:8] and d.val_pairs == clean[8:12]
    src, tgt_in, src_len, label = next(iter(d.val_dataloader()))
    for x, shape in ((src, (4, 5)), (tgt_in, (4, 5)), (src_len, (4,)),
                     (label, (4, 5))):
        assert x.shape == shape and x.dtype == torch.long
    v, w = d.src_vocab, d.tgt_vocab
    for row, n, (eng, _) in zip(src, src_len, d.val_pairs):
        tokens = eng.split()
        assert n == min(len(tokens) + 1, 5)  # counts <eos>, cut at T
        assert row.tolist() == (v[tokens] + [v.eos] + [v.pad] * 5)[:5]
    assert (tgt_in[:, 0] == w.bos).all()
    assert torch.equal(tgt_in[:, 1:], label[:, :-1])  # shifted by one
    assert label[0].tolist() == w[d.val_pairs[0][1].split()] + [w.eos, 0]
    assert (src_len == 5).any() and not (src == v.eos).all(1).all()


def test_train_loader_is_seeded_and_covers_the_split():
    def epoch(seed):
        d = data.MTFraEng(3, num_train=10, num_val=2, seed=seed,
                          pairs=synthetic_pairs())
        return torch.cat([b[0] for b in d.train_dataloader()])
    a, b = epoch(0), epoch(0)
    assert torch.equal(a, b) and a.shape[0] == 10
    d = data.MTFraEng(3, num_train=10, num_val=2, pairs=synthetic_pairs())
    everything = d._arrays["train"][0]
    assert sorted(map(tuple, a.tolist())) == \
        sorted(map(tuple, everything.tolist()))


def test_shuffled_split_shares_no_english_source():
    pairs = synthetic_pairs(60)
    d = data.MTFraEng(4, num_train=30, num_val=12, num_test=10,
                      shuffle=True, seed=3, pairs=pairs)
    train, val, test = map(sources, (d.train_pairs, d.val_pairs,
                                     d.test_pairs))
    assert len(d.train_pairs) == 30 and len(d.val_pairs) == 12
    assert len(d.test_pairs) == len(test) == 10  # each source once
    assert not (train & val or train & test or val & test)
    again = data.MTFraEng(4, num_train=30, num_val=12, num_test=10,
                          shuffle=True, seed=3, pairs=pairs)
    assert again.train_pairs == d.train_pairs
    other = data.MTFraEng(4, num_train=30, num_val=12, num_test=10,
                          shuffle=True, seed=4, pairs=pairs)
    assert other.train_pairs != d.train_pairs


def test_book_split_is_by_position_but_test_is_disjoint():
    pairs = synthetic_pairs()  # source 1 has pairs 1-2, source 2 3-5
    d = data.MTFraEng(2, num_train=2, num_val=2, num_test=3, pairs=pairs)
    assert sources(d.train_pairs) & sources(d.val_pairs)  # as d2l
    assert not sources(d.test_pairs) & sources(d.train_pairs
                                               + d.val_pairs)
    fair = data.MTFraEng(2, num_train=2, num_val=2, split_by_source=True,
                         pairs=pairs)
    assert not sources(fair.train_pairs) & sources(fair.val_pairs)
    # num_train=None: test, then val, come from the end of the corpus.
    clean = [(corpus.preprocess(e).strip(), corpus.preprocess(f))
             for e, f in pairs]  # ..., 36 (1 pair), 37 (2), 38 (3), 39 (1)
    rest = data.MTFraEng(2, num_train=None, num_val=3, num_test=2,
                         pairs=pairs)
    assert rest.test_pairs == [clean[-4], clean[-1]]  # sources 38, 39
    assert rest.val_pairs == clean[-7:-4] and rest.train_pairs == clean[:-7]


def test_all_remaining_pairs_and_length_limits():
    pairs = synthetic_pairs(60)
    d = data.MTFraEng(4, num_train=None, num_val=10, num_test=5,
                      max_src_len=3, shuffle=True, pairs=pairs)
    kept = [(corpus.preprocess(e).strip(), corpus.preprocess(f))
            for e, f in pairs if len(corpus.preprocess(e).split()) <= 3]
    used = d.train_pairs + d.val_pairs + d.test_pairs
    assert all(len(e.split()) <= 3 for e, _ in used)
    held_out = sources(d.val_pairs) | sources(d.test_pairs)
    assert len(d.val_pairs) == 10 and len(d.test_pairs) == 5
    # Train is everything else (the val group cut at 10 loses its rest).
    assert sorted(d.train_pairs) == sorted(p for p in kept
                                           if p[0] not in held_out)
    with pytest.raises(ValueError, match="not enough data"):
        data.MTFraEng(4, num_train=500, pairs=pairs)


def test_vocab_comes_from_train_only():
    pairs = synthetic_pairs() + [("Tom Word0.", "Mot0 v0!")] * 2
    d = data.MTFraEng(2, num_train=6, num_val=4, num_test=2, min_freq=1,
                      shuffle=True, pairs=pairs)
    train_words = {t for e, _ in d.train_pairs for t in e.split()}
    assert set(d.src_vocab.idx_to_token) == \
        train_words | set(data.RESERVED_TOKENS)
    unseen = (sources(d.val_pairs) | sources(d.test_pairs)).pop().split()
    assert d.src_vocab.unk in d.src_vocab[unseen]


def test_build_references_and_describe():
    d = data.MTFraEng(2, num_steps=6, num_train=12, num_val=2,
                      pairs=synthetic_pairs())
    src, tgt_in, src_len, label = d.build(["Tom Tom Word2.", "nope"])
    assert torch.equal(d.build(s for s in ["Tom Tom Word2.", "nope"])[0],
                       src)  # any iterable
    w = d.tgt_vocab
    assert src.shape == tgt_in.shape == label.shape == (2, 6)
    assert src_len.tolist() == [5, 2]
    assert (tgt_in[:, 0] == w.bos).all() and (tgt_in[:, 1:] == 0).all()
    assert (label == w.pad).all()
    _, tgt_in, _, label = d.build(["Tom Word1."], ["Mot1 v1!"])
    assert d.tgt_vocab.to_tokens(label[0, :4]) == ["mot1", "v1", "!",
                                                   "<eos>"]
    with pytest.raises(TypeError, match="list of strings"):
        d.build("Tom Word1.")
    with pytest.raises(ValueError, match="as many"):
        d.build(["a ."], ["b .", "c ."])
    assert d.references("Tom Tom Word2.") == ["mot2 v0 !", "mot2 v1 !",
                                              "mot2 v2 !"]
    with pytest.raises(ValueError, match="no reference"):
        d.references("Unknown.")
    assert d.splits_of("tom word1 .") == ("train",)
    rows = d.describe("Tom Zebra!")
    assert [r[0] for r in rows] == ["tom", "zebra", "!", "<eos>",
                                    "<pad>", "<pad>"]
    assert rows[1][1:] == (d.src_vocab.unk, "<unk>")


def test_typed_sentences_are_read_as_the_corpus_writes_them():
    """Point 12: a phone's apostrophe, a combining accent and a pasted
    byte-order mark give the corpus's tokens, in build (what
    d2lmini.decoding.translate encodes), tokens and references."""
    d = data.MTFraEng(2, num_steps=6, num_train=2, num_val=0, min_freq=1,
                      pairs=[("I'm home.", "Je suis chez moi."),
                             ("Caf\xe9!", "Caf\xe9 !")])
    typed = ["\ufeffI\u2019m home.", "Cafe\u0301!"]
    assert [d.tokens(s) for s in typed] == [["i'm", "home", "."],
                                            ["caf\xe9", "!"]]
    assert torch.equal(d.build(typed)[0],
                       d.build(["i'm home .", "caf\xe9 !"])[0])
    assert d.src_vocab.unk not in d.build(typed)[0].tolist()
    assert d.references("I\u2019m home.") == ["je suis chez moi ."]
    assert d.splits_of("Cafe\u0301!") == ("train",)


def test_bucketed_batches_are_trimmed_and_cover_the_split():
    d = data.MTFraEng(4, num_steps=8, num_train=40, num_val=4,
                      bucket=True, pairs=synthetic_pairs())
    seen = []
    for src, tgt_in, src_len, label in d.train_dataloader():
        assert src.shape[1] == src_len.max() <= 8
        assert tgt_in.shape == label.shape
        assert (label[:, -1] != d.tgt_vocab.pad).any()  # no pad column
        seen += [tuple(r[:n].tolist()) for r, n in zip(src, src_len)]
    full = d._arrays["train"]
    assert sorted(seen) == sorted(tuple(r[:n].tolist())
                                  for r, n in zip(full[0], full[2]))


def test_bad_arguments_and_empty_splits():
    with pytest.raises(ValueError, match="batch_size"):
        data.MTFraEng(0, pairs=synthetic_pairs())
    with pytest.raises(TypeError, match=r"pairs\[0\] is \('only one',\)"):
        data.MTFraEng(2, pairs=[("only one",)])
    with pytest.raises(TypeError, match="pairs must be"):
        data.MTFraEng(2, pairs=5)
    d = data.MTFraEng(2, num_train=4, num_val=0, pairs=synthetic_pairs())
    with pytest.raises(ValueError, match="num_test"):
        d.test_dataloader()
    assert d.val_dataloader() is None  # no val split: the trainer skips it
    assert len(list(d.train_dataloader())) == 2


def test_pairs_may_be_any_iterable():
    pairs = synthetic_pairs()
    d = data.MTFraEng(2, num_train=8, num_val=4, num_test=2,
                      pairs=(p for p in pairs))  # read once, not twice
    same = data.MTFraEng(2, num_train=8, num_val=4, num_test=2, pairs=pairs)
    assert (d.train_pairs, d.val_pairs, d.test_pairs) == \
        (same.train_pairs, same.val_pairs, same.test_pairs)


@pytest.mark.parametrize("pair, side", [(("  ", "Va !"), "English"),
                                        (("Go.", "\u202f \xa0"), "French")])
def test_pairs_with_an_empty_side_are_refused(pair, side):
    pairs = synthetic_pairs(2) + [pair]
    with pytest.raises(ValueError,
                       match=rf"pairs\[3\] is .*{side} side is empty"):
        data.MTFraEng(2, num_train=2, num_val=1, pairs=pairs)


def twin_key(eng):
    """A source without its final punctuation tokens."""
    return eng.rstrip(" .!?")


def twin_pairs():
    """Sources word0-29 each with "!", "." and "?" endings, far apart in
    corpus order as in the real corpus; "word29 ." has 2 translations."""
    return [(f"Word{i}{end}", f"Mot{i}{end}") for end in "!.?"
            for i in range(30)] + [("Word29.", "Mot29 bis.")]


@pytest.mark.parametrize("seed", range(3))
def test_sources_differing_in_final_punctuation_share_a_split(seed):
    d = data.MTFraEng(2, num_train=None, num_val=10, num_test=10,
                      shuffle=True, seed=seed, pairs=twin_pairs())
    train, val, test = ({twin_key(e) for e in sources(split)} for split in
                        (d.train_pairs, d.val_pairs, d.test_pairs))
    assert not (train & val or train & test or val & test)
    assert len(d.test_pairs) == len(sources(d.test_pairs)) == 10


def test_twins_in_test_each_appear_once_with_their_first_translation():
    d = data.MTFraEng(2, num_train=None, num_val=3, num_test=3,
                      split_by_source=True, pairs=twin_pairs())
    assert sorted(d.test_pairs) == [("word29 !", "mot29 !"),
                                    ("word29 .", "mot29 ."),
                                    ("word29 ?", "mot29 ?")]
    assert {twin_key(e) for e in sources(d.val_pairs)} == {"word28"}
    assert d.references("Word29.") == ["mot29 .", "mot29 bis ."]
    assert d.references("Word29!") == ["mot29 !"]  # per exact source


# The real corpus, when available -------------------------------------------

needs_real_corpus = pytest.mark.skipif(
    not REAL_DIR or not (Path(REAL_DIR) / corpus.ARCHIVE_NAME).is_file(),
    reason=f"{corpus.ENV_VAR} does not point at fra-eng.zip")


@pytest.mark.slow
@needs_real_corpus
def test_real_corpus_book_setting():
    with zipfile.ZipFile(Path(REAL_DIR) / corpus.ARCHIVE_NAME) as zf:
        text = zf.read(corpus.MEMBER)
    assert hashlib.sha256(text).hexdigest() == corpus.FRA_SHA256
    d = data.MTFraEng(128, root=REAL_DIR)
    assert (len(d.train_pairs), len(d.val_pairs)) == (512, 128)
    assert d.train_pairs[0] == ("go .", "va !") and d.num_skipped == 0
    assert d.splits_of("dogs bark .") == ("train", "val")


@pytest.mark.slow
@needs_real_corpus
def test_real_corpus_chapter_setting_keeps_twins_together(monkeypatch):
    from d2lmini import experiment  # the chapter's recipe, as it is now

    monkeypatch.setenv(corpus.ENV_VAR, REAL_DIR)
    d = experiment.build_data(experiment.CHAPTER_RECIPE)
    train, val, test = ({twin_key(e) for e in sources(split)} for split in
                        (d.train_pairs, d.val_pairs, d.test_pairs))
    assert not (train & val or train & test or val & test)
    assert "forget it" in train | val | test  # a twin pair of the corpus
    assert len(d.test_pairs) == len(sources(d.test_pairs)) == 1000
