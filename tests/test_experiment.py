"""Tests of d2lmini.experiment: recipes, build, train, evaluate.

No test reads the corpus: ``read_pairs`` is replaced by a small
synthetic English-French corpus, and every model is tiny.
"""

import dataclasses
import itertools
import re

import pytest
import torch

from d2lmini import (
    attention,
    data,
    decoding,
    experiment,
    metrics,
    multihead,
    recipes,
    seq2seq,
    transformer,
)
from d2lmini.experiment import BOOK_RECIPE, CHAPTER_RECIPE, Recipe
from d2lmini.utils import set_seed

SUBJECTS = [("i", "je"), ("you", "tu"), ("we", "nous"), ("they", "ils")]
VERBS = [("see", ("vois", "regarde")), ("like", ("aime", "adore")),
         ("want", ("veux", "désire"))]
OBJECTS = [("the cat", "le chat"), ("the dog", "le chien"),
           ("a book", "un livre"), ("the car", "la voiture"),
           ("some bread", "du pain")]


def _pairs():
    """180 pairs: 60 English sources, each with 3 French references."""
    pairs = []
    for (se, sf), (ve, vfs), (oe, of) in itertools.product(
            SUBJECTS, VERBS, OBJECTS):
        eng = f"{se} {ve} {oe} ."
        pairs += [(eng, f"{sf} {vf} {of} .") for vf in vfs]
        pairs.append((eng, f"{sf} {vfs[0]} {of} !"))
    return pairs


TINY = Recipe(batch_size=8, num_steps=7, num_train=None, num_val=12,
              num_test=6, min_freq=1, embed_size=8, num_hiddens=8,
              num_layers=1, dropout=0.0, lr=0.01, max_steps=3)


@pytest.fixture(autouse=True)
def synthetic_corpus(monkeypatch, tmp_path):
    """MTFraEng reads the synthetic pairs; the cache is in tmp_path."""
    monkeypatch.setattr(data, "read_pairs",
                        lambda root=None: (tuple(_pairs()), 0))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


# Recipe -------------------------------------------------------------------

def test_book_recipe_matches_d2l():
    r = BOOK_RECIPE
    assert (r.batch_size, r.num_steps, r.num_train, r.num_val) == \
        (128, 9, 512, 128)
    assert (r.min_freq, r.shuffle, r.bucket, r.num_test) == \
        (2, False, False, 0)
    assert (r.embed_size, r.num_hiddens, r.num_layers, r.dropout) == \
        (256, 256, 2, 0.2)
    assert (r.attention, r.lr, r.gradient_clip_val, r.max_epochs) == \
        ("additive", 0.005, 1.0, 30)
    assert r.max_steps is None and r.max_time is None


def test_chapter_recipe_is_reproducible_and_held_out():
    r = CHAPTER_RECIPE
    assert r.max_steps is not None and r.max_time is None
    assert r.shuffle and r.num_test > 0 and r.attention == "additive"


def test_chapter_recipe_warms_up_and_decays():
    # the cure of the 8-head collapse (benchmarks/robustness.py)
    r = CHAPTER_RECIPE
    assert r.warmup_steps > 0 and r.schedule == "cosine"


def test_train_hands_the_schedule_to_the_trainer(monkeypatch):
    seen = {}

    class Spy(experiment.Trainer):
        def __init__(self, *args, **kwargs):
            seen.update(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(experiment, "Trainer", Spy)
    experiment.train(TINY.replace(warmup_steps=2, schedule="cosine"),
                     progress=False)
    assert (seen["warmup_steps"], seen["schedule"]) == (2, "cosine")


def test_key_is_stable_and_sees_every_field():
    key = TINY.key()
    assert re.fullmatch("[0-9a-f]{16}", key)
    assert Recipe(**dataclasses.asdict(TINY)).key() == key
    assert TINY.replace(lr=TINY.lr).key() == key
    changes = {"batch_size": 9, "num_steps": 8, "num_train": 50,
               "num_val": 11, "num_test": 5, "max_src_len": 6,
               "max_tgt_len": 6, "shuffle": False, "min_freq": 2,
               "bucket": False, "embed_size": 16, "num_hiddens": 16,
               "num_layers": 2, "dropout": 0.1, "attention": "none",
               "num_heads": 4, "ffn_num_hiddens": 64, "lr": 0.02,
               "warmup_steps": 2, "schedule": "cosine",
               "gradient_clip_val": 0.5,
               "max_epochs": 2, "max_steps": 4, "max_time": 9.0,
               "val_every_n_steps": 2, "seed": 1}
    # qk_norm needs a multi-head decoder: checked against one
    assert set(changes) | {"qk_norm"} == {
        f.name for f in dataclasses.fields(Recipe)}
    keys = {TINY.replace(**{name: v}).key() for name, v in changes.items()}
    assert key not in keys and len(keys) == len(changes)
    multihead = TINY.replace(attention="multihead", num_heads=2)
    assert multihead.replace(qk_norm=True).key() not in {
        multihead.key(), *keys}


def test_key_depends_on_the_cache_format(monkeypatch):
    key = TINY.key()
    monkeypatch.setattr(recipes, "CACHE_FORMAT", -1)
    assert TINY.key() != key


def test_recipe_is_frozen_and_checked():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TINY.lr = 1.0
    with pytest.raises(ValueError, match="attention must be one of"):
        TINY.replace(attention="dot")
    with pytest.raises(ValueError, match="num_heads=3 must divide"):
        TINY.replace(attention="multihead", num_heads=3)
    with pytest.raises(ValueError, match="num_heads=3 must divide"):
        TINY.replace(attention="transformer", num_heads=3)
    with pytest.raises(ValueError, match="set embed_size=8"):
        TINY.replace(attention="transformer", embed_size=6)
    with pytest.raises(ValueError, match="must be even"):
        TINY.replace(attention="transformer", embed_size=7, num_hiddens=7,
                     num_heads=7)
    with pytest.raises(ValueError, match="never stops"):
        TINY.replace(max_steps=None)
    with pytest.raises(TypeError):
        TINY.replace(learning_rate=0.1)


@pytest.mark.parametrize("changes, words", [
    ({"num_heads": 0}, "num_heads must be an int >= 1"),
    ({"num_heads": 2.0}, "num_heads must be an int"),
    ({"ffn_num_hiddens": 0}, "ffn_num_hiddens must be an int >= 1"),
    ({"max_steps": 0}, "max_steps must be an int >= 1"),
    ({"batch_size": True}, "batch_size must be an int"),
    ({"num_val": -1}, "num_val must be an int >= 0"),
    ({"warmup_steps": -1}, "warmup_steps must be an int >= 0"),
    ({"schedule": "linear"}, "schedule must be one of"),
    ({"lr": 0.0}, "lr must be > 0"),
    ({"lr": float("nan")}, "lr must be > 0"),
    ({"dropout": 1.0}, "dropout must be in"),
    ({"gradient_clip_val": -1.0}, "gradient_clip_val must be >= 0"),
    ({"max_time": 0.0}, "max_time must be > 0"),
    ({"max_tgt_len": 7}, "max_tgt_len=7 needs num_steps >= 8"),
])
def test_recipe_rejects_bad_values(changes, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        TINY.replace(**changes)


# build and train ------------------------------------------------------------

@pytest.mark.parametrize("kind", experiment.ATTENTIONS)
def test_build_model_follows_the_recipe(kind):
    r = TINY.replace(attention=kind, num_heads=2, ffn_num_hiddens=12)
    d = experiment.build_data(r)
    model = experiment.build_model(r, d)
    assert model.lr == r.lr and model.tgt_pad == d.tgt_vocab.pad
    assert model.encoder.embedding.weight.shape == (len(d.src_vocab), 8)
    dec = model.decoder
    assert dec.dense.out_features == len(d.tgt_vocab)
    assert decoding.attention_heads(model) == \
        {"none": None, "additive": 1}.get(kind, 2)
    if kind == "transformer":
        assert isinstance(model.encoder, transformer.TransformerEncoder)
        assert isinstance(dec, transformer.TransformerDecoder)
        assert len(dec.blks) == r.num_layers and dec.num_heads == 2
        assert dec.blks[0].ffn.dense1.out_features == 12
    elif kind == "none":
        assert isinstance(dec, seq2seq.Seq2SeqDecoder)
    else:
        expected = {"additive": attention.AdditiveAttention,
                    "multihead": multihead.MultiHeadAttention}[kind]
        assert isinstance(dec.attention, expected)
    if kind == "multihead":
        assert dec.attention.num_heads == 2


def test_train_is_reproducible():
    m1, d1, h1 = experiment.train(TINY, progress=False)
    m2, _, h2 = experiment.train(TINY, progress=False)
    assert h1.num_steps == 3 and not m1.training
    assert [loss for _, loss in h1.steps] == [loss for _, loss in h2.steps]
    for (name, a), b in zip(m1.state_dict().items(),
                            m2.state_dict().values()):
        assert torch.equal(a, b), name
    assert len(d1.test_pairs) == 6


def test_a_seed_offset_trains_other_weights_on_the_same_split(monkeypatch):
    m0, d0, h0 = experiment.train(TINY, progress=False)
    key0 = TINY.key()
    monkeypatch.setenv(experiment.SEED_OFFSET_VARIABLE, "3")
    assert TINY.training_seed() == TINY.seed + 3
    assert TINY.key() != key0  # cached apart from the chapter's run
    assert TINY.replace(seed=TINY.seed + 3).key() != TINY.key()
    m3, d3, h3 = experiment.train(TINY, progress=False)
    assert (d3.train_pairs, d3.val_pairs, d3.test_pairs) == (
        d0.train_pairs, d0.val_pairs, d0.test_pairs)
    assert d3.src_vocab.idx_to_token == d0.src_vocab.idx_to_token
    assert not torch.equal(m0.state_dict()["encoder.embedding.weight"],
                           m3.state_dict()["encoder.embedding.weight"])
    assert [loss for _, loss in h0.steps] != [loss for _, loss in h3.steps]
    # The batch order moved too, not only the initial weights.
    b0 = next(iter(experiment.build_data(TINY.replace(seed=0))
                   .train_dataloader()))
    monkeypatch.setenv(experiment.SEED_OFFSET_VARIABLE, "0")
    assert TINY.key() == key0
    b_plain = next(iter(experiment.build_data(TINY).train_dataloader()))
    assert not all(torch.equal(a, b) for a, b in zip(b0, b_plain))


def test_a_negative_zero_is_zero_in_the_key():
    """-0.0 == 0.0, so the two recipes are one, with one key."""
    for name in ("dropout", "gradient_clip_val"):
        a, b = TINY.replace(**{name: -0.0}), TINY.replace(**{name: 0.0})
        assert a == b and a.key() == b.key(), name


def test_the_largest_seed_offset_seeds(monkeypatch):
    monkeypatch.setenv(experiment.SEED_OFFSET_VARIABLE, str(2**31 - 1))
    assert experiment.seed_offset() == 2**31 - 1
    set_seed(TINY.training_seed())  # within what set_seed takes


@pytest.mark.parametrize("text", [
    "-1", "two", "1.5", "\u0661", "\uff11", "1_0", "4294967296",
    str(2**31)])
def test_a_bad_seed_offset_says_what_to_do(monkeypatch, text):
    """Negative, not a number, not ASCII digits ('١', '１' and '1_0' are
    whole numbers to int()) or too large for a seed: a clear error."""
    monkeypatch.setenv(experiment.SEED_OFFSET_VARIABLE, text)
    with pytest.raises(ValueError, match="D2LMINI_SEED_OFFSET must be a "
                       "whole number from 0 to 2147483647 in ASCII digits, "
                       "got"):
        experiment.seed_offset()


def test_the_transformer_trains_decodes_and_evaluates():
    r = TINY.replace(attention="transformer", num_heads=2, num_layers=2,
                     max_steps=30, lr=0.01, warmup_steps=5)
    model, d, history = experiment.train(r, progress=False)
    assert history.steps[-1][1] < history.steps[0][1]  # it learns
    res = experiment.evaluate(model, d, "test")
    assert len(res.hypotheses) == len(res.sources) == 6
    out = decoding.translate(model, d, [res.sources[0]])[0]
    # The last block's attention to the source: (h, rows, valid source).
    assert out.attention.shape == (2, len(out.out_tokens),
                                   len(out.src_tokens))
    torch.testing.assert_close(out.attention.sum(-1),
                               torch.ones(2, len(out.out_tokens)))


def test_a_recipe_without_validation_trains():
    recipe = TINY.replace(num_val=0)
    model, d, history = experiment.train(recipe, progress=False)
    assert d.val_pairs == [] and history.num_steps == 3
    assert history.val_loss == [] and history.val_steps == []
    with pytest.raises(ValueError, match="the val split is empty"):
        experiment.evaluate(model, d, "val")


# evaluate -------------------------------------------------------------------

def test_evaluate_returns_sane_fields():
    model, d, _ = experiment.train(TINY, progress=False)
    res = experiment.evaluate(model, d, "test", batch_size=4)
    assert res.split == "test" and len(res.sources) == 6
    assert res.sources == [e for e, _ in d.test_pairs]
    assert len(res.hypotheses) == len(res.references) == 6
    assert all(len(refs) == 3 for refs in res.references)
    assert all(d.splits_of(s) == ("test",) for s in res.sources)
    assert 0 <= res.bleu <= 100 and 0 <= res.chrf <= 100
    assert 0 <= res.bleu_single <= res.bleu + 1e-9
    assert 0 <= res.book_bleu <= 1 and 0 <= res.exact <= 6
    assert res.decode_time >= 0 and res.details.startswith("BLEU")
    assert res.bleu == pytest.approx(
        metrics.corpus_bleu(res.hypotheses, res.references).score)


def test_evaluate_scores_a_perfect_translator(monkeypatch):
    model, d, _ = experiment.train(TINY, progress=False)
    sources = [e for e, _ in d.test_pairs]
    translate = decoding.translate

    def perfect(model, data, sentences):
        outs = translate(model, data, sentences)
        for out, s in zip(outs, sentences):
            out.tokens = data.references(s)[0].split()
        return outs

    monkeypatch.setattr(decoding, "translate", perfect)
    res = experiment.evaluate(model, d, sources=sources)
    assert res.split == "sources"
    assert res.bleu == pytest.approx(100) and res.exact == 6
    assert res.bleu_single == pytest.approx(100)
    assert res.book_bleu == pytest.approx(1)


def test_evaluate_val_uses_unique_sources():
    model, d, _ = experiment.train(TINY, progress=False)
    res = experiment.evaluate(model, d, "val")
    assert res.sources == list(dict.fromkeys(e for e, _ in d.val_pairs))
    assert len(res.sources) < len(d.val_pairs)


def test_evaluate_rejects_bad_splits():
    model, d, _ = experiment.train(TINY.replace(num_test=0),
                                   progress=False)
    with pytest.raises(ValueError, match="the test split is empty"):
        experiment.evaluate(model, d, "test")
    with pytest.raises(ValueError, match="split must be"):
        experiment.evaluate(model, d, "dev")


@pytest.mark.parametrize("field, a, b", [
    ("dropout", 0, 0.0), ("max_time", 60, 60.0), ("lr", 1, 1.0),
    ("gradient_clip_val", 1, 1.0)])
def test_a_number_spelt_two_ways_is_one_recipe(field, a, b):
    one, two = TINY.replace(**{field: a}), TINY.replace(**{field: b})
    assert one == two and one.key() == two.key()
    assert type(getattr(one, field)) is float


@pytest.mark.parametrize("value", [True, "0.1", None])
def test_a_recipe_number_that_is_not_a_number_is_refused(value):
    with pytest.raises(TypeError, match=r"lr must be a number, got"):
        TINY.replace(lr=value)


def test_qk_norm_builds_a_normalised_multihead_decoder():
    r = TINY.replace(attention="multihead", num_heads=2, qk_norm=True)
    model = experiment.build_model(r, experiment.build_data(r))
    attention = model.decoder.attention
    assert attention.qk_norm is True and attention.qk_scale.shape == (2,)
    assert r.key() != r.replace(qk_norm=False).key()
    plain = experiment.build_model(r.replace(qk_norm=False),
                                   experiment.build_data(r))
    assert plain.decoder.attention.qk_norm is False


@pytest.mark.parametrize("attention", ["additive", "none", "transformer"])
def test_qk_norm_is_refused_where_there_is_no_multihead_decoder(attention):
    with pytest.raises(ValueError, match="qk_norm=True is an option of"):
        TINY.replace(attention=attention, num_heads=2, qk_norm=True)


@pytest.mark.parametrize("name", ["qk_norm", "shuffle", "bucket"])
def test_a_recipe_switch_that_is_not_a_bool_is_refused(name):
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        TINY.replace(**{name: 1})


@pytest.fixture(scope="module")
def offset_seen_by_a_module_fixture():
    return experiment.seed_offset()


def test_module_fixtures_see_no_seed_offset(offset_seen_by_a_module_fixture):
    """With D2LMINI_SEED_OFFSET=1 in the shell (as `make
    nbval-other-machine` sets it), module-scoped fixtures, set up before
    any function-scoped one, train with the recipes' own seeds too."""
    assert offset_seen_by_a_module_fixture == 0
