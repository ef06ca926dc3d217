"""Tests of d2lmini.metrics: the book's BLEU and corpus sacreBLEU."""

import collections
import copy
import math

import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from d2lmini.metrics import (
    LengthBucket,
    bleu,
    bleu_by_length,
    bleu_of_stats,
    corpus_bleu,
    corpus_chrf,
    paired_bootstrap,
    sentence_stats,
)


def d2l_bleu(pred_seq, label_seq, k):
    """d2l 1.0.3's ``bleu``, verbatim, as the reference."""
    pred_tokens, label_tokens = pred_seq.split(' '), label_seq.split(' ')
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    score = math.exp(min(0, 1 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        num_matches, label_subs = 0, collections.defaultdict(int)
        for i in range(len_label - n + 1):
            label_subs[' '.join(label_tokens[i: i + n])] += 1
        for i in range(len_pred - n + 1):
            if label_subs[' '.join(pred_tokens[i: i + n])] > 0:
                num_matches += 1
                label_subs[' '.join(pred_tokens[i: i + n])] -= 1
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


@pytest.mark.parametrize("pred, label, k, expected", [
    # the two values printed by d2l 1.0.3
    ("a b c d", "a b c e", 2, 0.782542),
    ("je suis", "je suis chez moi .", 2, 0.223130),
    # d2l.ai (MXNet tab) prints 0.512 for this pair:
    # exp(1 - 5/4) * (3/4)**0.5 * (1/3)**0.25
    ("je suis certain .", "je suis chez moi .", 2, 0.512480),
    # clipping: 'the' and 'cat' match once each; sqrt(2/4) * (1/3)**0.25
    ("the cat the cat", "the cat sat", 2, 0.537285),
    ("a b c d", "a b c e", 1, math.sqrt(3 / 4)),
    ("a b c", "a b c", 4, 1.0),
    ("il court .", "il est calme .", 2, 0.0),  # no bigram matches
    ("a b", "a", 2, 0.0),  # the label has no bigram at all
    ("", "a b", 2, 0.0),  # empty prediction: no crash, score 0
])
def test_bleu_known_values(pred, label, k, expected):
    assert bleu(pred, label, k) == pytest.approx(expected, abs=1e-6)


words = st.lists(st.sampled_from(["a", "b", "c", "d", "."]), max_size=8)


@settings(max_examples=60, deadline=None)
@given(words, words, st.integers(1, 4))
def test_bleu_equals_d2l_and_is_in_unit_interval(pred, label, k):
    pred, label = " ".join(pred), " ".join(label)
    score = bleu(pred, label, k)
    assert score == d2l_bleu(pred, label, k)
    assert 0.0 <= score <= 1.0


def test_bleu_bad_input():
    with pytest.raises(TypeError, match="join"):
        bleu(["a", "b"], "a b", 2)
    with pytest.raises(ValueError, match="k must be"):
        bleu("a b", "a b", 0)


HYPS = ["the cat is on the mat", "there is a cat here", "hello world"]
REFS = [["the cat is on the mat"],
        ["a cat is here", "there is a cat here too", "look a cat"],
        ["hello there world", "hi world"]]


def test_corpus_bleu_multi_reference_equals_sacrebleu():
    refs = copy.deepcopy(REFS)
    got = corpus_bleu(HYPS, refs)
    streams = [[r[j] if j < len(r) else None for r in REFS]
               for j in range(3)]
    want = sacrebleu.corpus_bleu(HYPS, streams, tokenize="none")
    assert got.score == pytest.approx(want.score, abs=1e-9)
    assert got.precisions == pytest.approx(want.precisions)
    assert (got.bp, got.sys_len, got.ref_len) == (
        want.bp, want.sys_len, want.ref_len)
    assert refs == REFS  # the inputs are not mutated
    # more references can only help: compare with the first ones only
    single = corpus_bleu(HYPS, [r[:1] for r in REFS])
    assert got.score > single.score


def test_corpus_bleu_13a_and_chrf_equal_sacrebleu():
    hyps = ["il a un <unk> .", "je suis là ."]
    refs = [["il a un chien ."], ["je suis là .", "j'y suis ."]]
    streams = [["il a un chien .", "je suis là ."], [None, "j'y suis ."]]
    got = corpus_bleu(hyps, refs, tokenize="13a")
    assert got.score == pytest.approx(
        sacrebleu.corpus_bleu(hyps, streams, tokenize="13a").score)
    assert corpus_chrf(hyps, refs).score == pytest.approx(
        sacrebleu.corpus_chrf(hyps, streams).score)


def test_corpus_bleu_identical_is_100():
    sents = ["je suis chez moi .", "il est calme .", "va !  ok"]
    assert corpus_bleu(sents, [[s] for s in sents]).score == \
        pytest.approx(100.0)
    assert corpus_chrf(sents, [[s] for s in sents]).score == \
        pytest.approx(100.0)


@pytest.mark.parametrize("hyps, refs, err, match", [
    (["a", "b"], [["a"]], ValueError, "2 hypotheses but 1"),
    (["a", "b"], [["a"], []], ValueError, "hypothesis 1 has no reference"),
    ([], [], ValueError, "empty"),
    (["a"], ["a"], TypeError, r"references\[0\] is a string"),
    (["a"], [["a", None]], TypeError, r"references\[0\] contains"),
    (["a", 3], [["a"], ["b"]], TypeError, r"hypotheses\[1\]"),
    ("a b", [["a b"]], TypeError, "not single strings"),
])
def test_corpus_bleu_validation(hyps, refs, err, match):
    with pytest.raises(err, match=match):
        corpus_bleu(hyps, refs)
    with pytest.raises(err, match=match):
        corpus_chrf(hyps, refs)


def test_bleu_by_length_buckets():
    srcs = ["go .", "i lost .", "he is calm .", "a b c d e f g"]
    hyps = ["va !", "j'ai perdu .", "il est calme .", "x y z"]
    refs = [["va !", "bouge !"], ["j'ai gagné ."],
            ["il est calme aujourd'hui ."], ["a b c"]]
    buckets = bleu_by_length(srcs, hyps, refs, [1, 3, 5, 7, math.inf])
    assert [(b.low, b.high, b.count) for b in buckets] == [
        (1, 3, 1), (3, 5, 2), (5, 7, 0), (7, math.inf, 1)]
    assert isinstance(buckets[0], LengthBucket)
    assert buckets[0].score == pytest.approx(
        corpus_bleu(hyps[:1], refs[:1]).score)
    assert buckets[1].score == pytest.approx(
        corpus_bleu(hyps[1:3], refs[1:3]).score)
    assert 0.0 < buckets[1].score < 100.0
    assert math.isnan(buckets[2].score)
    assert buckets[3].score == 0.0


def test_bleu_by_length_validation():
    with pytest.raises(ValueError, match="source 1 has 3 tokens"):
        bleu_by_length(["a", "a b c"], ["x", "y"], [["x"], ["y"]], [0, 3])
    with pytest.raises(ValueError, match="strictly increasing"):
        bleu_by_length(["a"], ["x"], [["x"]], [5, 2])
    with pytest.raises(ValueError, match="1 source sentences but 2"):
        bleu_by_length(["a"], ["x", "y"], [["x"], ["y"]], [0, 9])


def test_scores_carry_sacrebleu_signatures():
    hyps = ["il a un chien .", "va !"]
    refs = [["il a un chien .", "il a un chat ."], ["va !"]]
    bleu = corpus_bleu(hyps, refs)
    assert bleu.signature.startswith("nrefs:var|case:mixed|eff:no|tok:none")
    assert "version:" + sacrebleu.__version__ in bleu.signature
    assert "tok:13a" in corpus_bleu(hyps, refs, tokenize="13a").signature
    assert corpus_chrf(hyps, refs).signature.startswith("nrefs:var|")


def test_sentence_stats_add_up_to_corpus_bleu():
    hyps = ["il a un chien .", "je suis là .", "va !", "<unk> ."]
    refs = [["il a un chat ."], ["je suis ici .", "je suis là ."],
            ["va !"], ["c'est ça ."]]
    total = sentence_stats(hyps, refs).sum(0)
    assert bleu_of_stats(total) == pytest.approx(
        corpus_bleu(hyps, refs).score)


def test_paired_bootstrap_of_a_system_against_itself_is_zero():
    hyps = ["il a un chien .", "je suis là .", "va !", "<unk> ."] * 5
    refs = [["il a un chat ."], ["je suis là ."], ["va !"],
            ["c'est ça ."]] * 5
    assert paired_bootstrap(hyps, hyps, refs, num_draws=50) == (0, 0, 0)
    worse = ["non ." if h == "je suis là ." else h for h in hyps]
    diff, low, high = paired_bootstrap(hyps, worse, refs, num_draws=200)
    assert diff == pytest.approx(corpus_bleu(hyps, refs).score
                                 - corpus_bleu(worse, refs).score)
    assert 0 < low <= diff <= high
    assert paired_bootstrap(hyps, worse, refs, 200) == (diff, low, high)
    with pytest.raises(ValueError, match="one per source"):
        paired_bootstrap(hyps, worse[:-1], refs)
