"""Tests of d2lmini.lm: the pretraining section's text, language model
cache, few-pair subsets, decoder initialization and fine-tuning.

Every test runs on a made-up corpus of a few dozen pairs (``MTFraEng``
with ``pairs=``), keeps its models in a temporary folder, and trains
for a few steps only: tiny language models where the size is free, and
the Transformer section's width where a translator must be started from
one.
"""

import math
import random
from collections import Counter

import numpy as np
import pytest
import torch

from d2lmini import experiment, lm
from d2lmini.cache import save_checkpoint
from d2lmini.data import MTFraEng
from d2lmini.pretraining import LanguageModel, perplexity
from d2lmini.recipes import SEED_OFFSET_VARIABLE, TRANSFORMER_RECIPE
from d2lmini.vocab import Vocab

SUBJECTS = [("i am", "je suis"), ("you are", "tu es"), ("he is", "il est"),
            ("she is", "elle est"), ("we are", "nous sommes"),
            ("they are", "ils sont")]
ADJECTIVES = [("here", "ici"), ("tall", "grand"), ("late", "en retard"),
              ("sad", "triste")]
# Already preprocessed.  Some French sentences have two English sources
# ("i am here ." and "i'm here ."), some sources two translations ("you
# are here ." is "tu es ici ." and "vous êtes ici ."): a held-out pair's
# French, or another reference of its source, can then be a training
# pair's French.
PAIRS = ([(f"{e} {a} .", f"{f} {b} .") for e, f in SUBJECTS
          for a, b in ADJECTIVES]
         + [(f"i'm {a} .", f"je suis {b} .") for a, b in ADJECTIVES]
         + [(f"you're {a} .", f"vous êtes {b} .") for a, b in ADJECTIVES]
         + [(f"you are {a} .", f"vous êtes {b} .") for a, b in ADJECTIVES])

TINY = lm.LMRecipe(num_hiddens=8, ffn_num_hiddens=16, num_heads=2,
                   num_blks=1, batch_size=8, warmup_steps=1, max_steps=3,
                   val_every=2, max_len=16)
# The Transformer section's width, heads and blocks (LMRecipe's
# defaults), trained for one step: a language model that can start its
# translator's decoder.
SECTION = lm.LMRecipe(batch_size=8, warmup_steps=0, max_steps=1,
                      val_every=1)


def make_data(seed=0):
    return MTFraEng(4, 8, None, 4, num_test=4, shuffle=True, seed=seed,
                    min_freq=1, pairs=PAIRS)


@pytest.fixture(autouse=True)
def temporary_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@pytest.fixture(scope="module")
def data():
    return make_data()


@pytest.fixture(scope="module")
def section_lm(data, tmp_path_factory):
    """A section-sized ``LMRun`` of ``data``, cached in its own folder."""
    return lm.train_or_load_lm(SECTION, tmp_path_factory.mktemp("lm"),
                               data)


def _held_out(data):
    """Every French side of a val/test pair and every translation of a
    val/test source, from PAIRS (not from ``data.references``)."""
    sources = {e for e, _ in data.val_pairs + data.test_pairs}
    return ({f for _, f in data.val_pairs + data.test_pairs}
            | {f for e, f in PAIRS if e in sources})


def _sentences(data, id_lists):
    return [" ".join(data.tgt_vocab.to_tokens(ids)) for ids in id_lists]


def _same_weights(a, b):
    a, b = a.state_dict(), b.state_dict()
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _random_states():
    return (torch.random.get_rng_state(), random.getstate(),
            np.random.get_state()[1].copy())


def _same_states(a, b):
    return torch.equal(a[0], b[0]) and a[1] == b[1] and \
        np.array_equal(a[2], b[2])


def _cache_file(folder, pattern="lm-french-*.pt"):
    files = sorted(folder.glob(pattern))
    assert len(files) == 1, files
    return files[0]


# pretraining_text and split_text -----------------------------------------

def test_the_corpus_has_held_out_french_in_its_training_split(data):
    """The premise of the next tests: the split at seed 0 puts French
    sentences of held-out pairs, and a reference that is no held-out
    pair's French, in the training split."""
    assert [e for e, _ in PAIRS] == [" ".join(data.tokens(e))
                                     for e, _ in PAIRS]
    train = {f for _, f in data.train_pairs}
    pair_french = {f for _, f in data.val_pairs + data.test_pairs}
    assert train & pair_french
    assert (train & _held_out(data)) - pair_french


def test_pretraining_text_leaves_out_every_held_out_sentence(data):
    text, left_out = lm.pretraining_text(data)
    sentences = _sentences(data, text)
    held = _held_out(data)
    assert not held & set(sentences)
    for e, _ in data.val_pairs + data.test_pairs:
        assert not set(data.references(e)) & set(sentences)
    unique_train = list(dict.fromkeys(f for _, f in data.train_pairs))
    assert sentences == [f for f in unique_train if f not in held]
    assert left_out == len(set(unique_train) & held) > 0
    assert len(sentences) == len(set(sentences))
    assert len(sentences) + left_out == len(unique_train)


def test_pretraining_text_is_ids_of_the_target_vocabulary(data):
    text, _ = lm.pretraining_text(data)
    vocab = data.tgt_vocab
    for ids, sentence in zip(text, _sentences(data, text)):
        assert ids == [vocab.token_to_idx[t] for t in sentence.split()]
        assert not {vocab.bos, vocab.eos, vocab.pad, vocab.unk} & set(ids)


def test_split_text_is_the_unique_sentences_in_order(data):
    for split in ("train", "val", "test"):
        pairs = getattr(data, split + "_pairs")
        want = list(dict.fromkeys(f for _, f in pairs))
        got = lm.split_text(data, split)
        assert _sentences(data, got) == want
        assert got == [data.tgt_vocab[f.split()] for f in want]
    # The training split repeats French sentences (two sources each).
    french = [f for _, f in data.train_pairs]
    assert len(lm.split_text(data, "train")) < len(french)


@pytest.mark.parametrize("split", ["dev", "Train", "", None])
def test_split_text_refuses_other_split_names(data, split):
    with pytest.raises(ValueError, match="'train', 'val' or 'test'"):
        lm.split_text(data, split)


def test_forbidden_ids_are_pad_bos_and_unk():
    vocab = Vocab([["a", "b"]], min_freq=1,
                  reserved_tokens=("<unk>", "<eos>", "<bos>", "<pad>"))
    ids = lm.forbidden_ids(vocab)
    assert ids == [3, 2, 0]
    assert vocab.to_tokens(ids) == ["<pad>", "<bos>", "<unk>"]


def test_forbidden_ids_of_the_data(data):
    vocab = data.tgt_vocab
    assert vocab.to_tokens(lm.forbidden_ids(vocab)) == [
        "<pad>", "<bos>", "<unk>"]


# LMRecipe ------------------------------------------------------------------

@pytest.mark.parametrize("changes, field", [
    ({"dropout": 1.0}, "dropout"),
    ({"dropout": -0.1}, "dropout"),
    ({"num_heads": 3}, "num_heads"),
    ({"num_hiddens": 10, "num_heads": 4}, "num_heads"),
    ({"num_blks": True}, "num_blks"),
    ({"batch_size": False}, "batch_size"),
    ({"dropout": False}, "dropout"),
    ({"lr": True}, "lr"),
    ({"lr": math.nan}, "lr"),
    ({"lr": math.inf}, "lr"),
    ({"weight_decay": -math.inf}, "weight_decay"),
    ({"lr": "0.1"}, "lr"),
    ({"seed": -1}, "seed"),
    ({"warmup_steps": -1}, "warmup_steps"),
    ({"max_steps": 0}, "max_steps"),
    ({"val_every": 0}, "val_every"),
    ({"max_len": 2.0}, "max_len"),
    ({"num_hiddens": None}, "num_hiddens"),
])
def test_lm_recipe_refuses_bad_fields(changes, field):
    with pytest.raises(ValueError, match=field):
        lm.LMRecipe(**changes)


@pytest.mark.parametrize("lr", [0.0, -0.01])
def test_lm_recipe_refuses_a_learning_rate_that_is_not_positive(lr):
    with pytest.raises(ValueError, match="lr"):
        lm.LMRecipe(lr=lr)


def test_lm_recipe_refuses_an_odd_width():
    with pytest.raises(ValueError, match="num_hiddens"):
        lm.LMRecipe(num_hiddens=9, num_heads=3)


def test_lm_recipe_defaults_match_the_transformer_section():
    r = lm.LMRecipe()
    assert (r.num_hiddens, r.ffn_num_hiddens, r.num_heads, r.num_blks) == (
        TRANSFORMER_RECIPE.num_hiddens, TRANSFORMER_RECIPE.ffn_num_hiddens,
        TRANSFORMER_RECIPE.num_heads, TRANSFORMER_RECIPE.num_layers)


def test_lm_recipe_key_names_every_field():
    assert lm.LMRecipe().key() == lm.LMRecipe().key()
    assert TINY.key() == TINY.replace().key()
    assert len(TINY.key()) == 16 and int(TINY.key(), 16) >= 0
    other = {"num_hiddens": 16, "ffn_num_hiddens": 32, "num_heads": 4,
             "num_blks": 2, "dropout": 0.1, "batch_size": 4, "lr": 0.01,
             "weight_decay": 0.0, "warmup_steps": 2, "max_steps": 4,
             "val_every": 3, "max_len": 8, "seed": 1}
    assert set(other) == {f for f in TINY.__dataclass_fields__}
    keys = {TINY.key()}
    for name, value in other.items():
        assert getattr(TINY, name) != value
        keys.add(TINY.replace(**{name: value}).key())
    assert len(keys) == len(other) + 1


def test_lm_recipe_zero_and_zero_point_zero_are_one_key():
    a = lm.LMRecipe(dropout=0, weight_decay=0, lr=1)
    b = lm.LMRecipe(dropout=0.0, weight_decay=-0.0, lr=1.0)
    assert a == b and a.key() == b.key()
    assert type(a.dropout) is float and type(a.lr) is float
    assert math.copysign(1, b.weight_decay) == 1


def test_a_seed_offset_trains_another_model(monkeypatch):
    """D2LMINI_SEED_OFFSET=1 draws the weights of seed + 1 and names
    another cache file."""
    key, weights = TINY.key(), TINY.build(12)
    next_seed = TINY.replace(seed=1).build(12)
    monkeypatch.setenv(SEED_OFFSET_VARIABLE, "1")
    assert TINY.training_seed() == 1
    assert TINY.key() != key
    assert _same_weights(TINY.build(12), next_seed)
    assert not _same_weights(TINY.build(12), weights)


def test_lm_recipe_build_is_seeded():
    a, b = TINY.build(12), TINY.build(12)
    assert isinstance(a, LanguageModel) and a.vocab_size == 12
    assert _same_weights(a, b)
    assert not _same_weights(a, TINY.replace(seed=1).build(12))


# fit_lm and train_or_load_lm -----------------------------------------------

def test_fit_lm_history(data):
    recipe = TINY.replace(max_steps=5, val_every=2)
    model, history = lm.fit_lm(recipe, data)
    assert not model.training
    assert set(history) == {"steps", "train_loss", "val_ppl", "seconds",
                            "tokens", "sentences", "left_out"}
    assert history["steps"] == [2, 4, 5]
    assert len(history["train_loss"]) == len(history["val_ppl"]) == 3
    assert all(math.isfinite(x) and x > 0 for x in history["train_loss"])
    assert all(math.isfinite(x) and x > 1 for x in history["val_ppl"])
    text, left_out = lm.pretraining_text(data)
    assert (history["sentences"], history["left_out"]) == (len(text),
                                                           left_out)
    assert 0 < history["seconds"] < 60
    vocab = data.tgt_vocab
    assert history["val_ppl"][-1] == pytest.approx(perplexity(
        model, lm.split_text(data, "val"), vocab.bos, vocab.eos))


def test_fit_lm_loss_goes_down_on_a_repetitive_corpus(data):
    recipe = TINY.replace(lr=0.02, warmup_steps=5, max_steps=60,
                          val_every=20)
    _, history = lm.fit_lm(recipe, data)
    first, *_, last = history["train_loss"]
    assert last < 0.7 * first, history["train_loss"]
    assert history["val_ppl"][-1] < history["val_ppl"][0]


def test_fit_lm_cuts_training_sentences_at_max_len(data, monkeypatch):
    """A sentence longer than ``max_len - 2`` tokens is cut, so that it
    and ``<bos>``, ``<eos>`` fit the positions (the validation is
    stubbed out: see the next test)."""
    monkeypatch.setattr(lm, "perplexity", lambda *args, **kwargs: 7.0)
    recipe = TINY.replace(max_len=5, max_steps=4, val_every=2)
    longest = max(len(s) for s in lm.pretraining_text(data)[0])
    assert longest + 2 > recipe.max_len
    model, history = lm.fit_lm(recipe, data)
    assert model.max_len == 5
    assert history["steps"] == [2, 4] and history["val_ppl"] == [7.0, 7.0]
    assert all(math.isfinite(x) for x in history["train_loss"])


def test_fit_lm_validates_sentences_longer_than_max_len(data):
    recipe = TINY.replace(max_len=5, max_steps=2, val_every=10)
    assert max(len(s) for s in lm.split_text(data, "val")) + 2 > 5
    _, history = lm.fit_lm(recipe, data)
    assert math.isfinite(history["val_ppl"][-1])


def test_trained_once_then_loaded(data, tmp_path):
    first = lm.train_or_load_lm(TINY, tmp_path, data)
    assert first.trained and first.reason == "no cached model yet"
    assert first.recipe == TINY and first.data is data
    assert not first.model.training
    assert first.summary().startswith("trained now (no cached model yet)")
    path = _cache_file(tmp_path)
    assert TINY.key() in path.name
    again = lm.train_or_load_lm(TINY, tmp_path, data)
    assert not again.trained and again.reason == ""
    assert not again.model.training
    assert _same_weights(first.model, again.model)
    assert again.history == first.history
    assert again.summary().startswith("loaded from the cache: 3 steps")
    assert again.data is data and again.recipe == TINY


def test_the_weights_depend_on_the_recipe_not_the_global_rng(data,
                                                             tmp_path):
    torch.manual_seed(1)
    a = lm.train_or_load_lm(TINY, tmp_path / "a", data)
    torch.manual_seed(2)
    random.random()
    b = lm.train_or_load_lm(TINY, tmp_path / "b", data)
    assert a.trained and b.trained
    assert _same_weights(a.model, b.model)


def test_a_changed_recipe_is_trained_anew(data, tmp_path):
    first = lm.train_or_load_lm(TINY, tmp_path, data)
    other = lm.train_or_load_lm(TINY.replace(seed=1), tmp_path, data)
    assert other.trained and other.reason == "no cached model yet"
    assert not _same_weights(first.model, other.model)
    assert len(list(tmp_path.glob("lm-french-*.pt"))) == 2
    assert not lm.train_or_load_lm(TINY, tmp_path, data).trained


def test_other_data_retrains(data, tmp_path):
    lm.train_or_load_lm(TINY, tmp_path, data)
    run = lm.train_or_load_lm(TINY, tmp_path, make_data(seed=1))
    assert run.trained
    assert "the data (vocabulary or split) changed" in run.reason


@pytest.mark.parametrize("content", [b"", b"not a checkpoint",
                                     "zip-cut", "foreign"])
def test_an_unusable_cache_file_is_retrained(data, tmp_path, content):
    first = lm.train_or_load_lm(TINY, tmp_path, data)
    path = _cache_file(tmp_path)
    if content == "zip-cut":
        content = path.read_bytes()[:200]
    if content == "foreign":  # a d2lmini checkpoint of another model
        torch.save({"weights": torch.zeros(3)}, path)
    else:
        path.write_bytes(content)
    again = lm.train_or_load_lm(TINY, tmp_path, data)
    assert again.trained
    assert again.reason.startswith("the cached file was not usable: ")
    assert len(again.reason) > len("the cached file was not usable: ")
    assert _same_weights(first.model, again.model)
    assert not lm.train_or_load_lm(TINY, tmp_path, data).trained


def _fingerprint_of(path):
    return torch.load(path, weights_only=True)["extra"]["fingerprint"]


def test_a_checkpoint_of_other_code_is_retrained(data, tmp_path):
    run = lm.train_or_load_lm(TINY, tmp_path, data)
    path = _cache_file(tmp_path)
    fingerprint = _fingerprint_of(path)
    assert fingerprint["recipe"] == TINY.key()
    assert fingerprint["code"] == lm.code_fingerprint()
    save_checkpoint(run.model, path, history=run.history,
                    fingerprint=dict(fingerprint, code="0" * 64))
    again = lm.train_or_load_lm(TINY, tmp_path, data)
    assert again.trained and "d2lmini's code changed" in again.reason
    save_checkpoint(run.model, path, history=run.history)
    again = lm.train_or_load_lm(TINY, tmp_path, data)
    assert again.trained and "no fingerprint" in again.reason
    assert _fingerprint_of(path) == fingerprint


def test_a_checkpoint_of_another_architecture_is_retrained(data, tmp_path):
    """A file with the right fingerprint but the weights of a wider
    model is refused by its shapes, and the model trained anew."""
    first = lm.train_or_load_lm(TINY, tmp_path, data)
    path = _cache_file(tmp_path)
    wide = TINY.replace(num_hiddens=16).build(len(data.tgt_vocab))
    save_checkpoint(wide, path, history={"steps": [1]},
                    fingerprint=_fingerprint_of(path))
    again = lm.train_or_load_lm(TINY, tmp_path, data)
    assert again.trained and "size mismatch" in again.reason
    assert _same_weights(first.model, again.model)


def test_the_reason_names_no_path_of_this_machine(data, tmp_path):
    lm.train_or_load_lm(TINY, tmp_path, data)
    _cache_file(tmp_path).write_bytes(b"not a checkpoint")
    again = lm.train_or_load_lm(TINY, tmp_path, data)
    assert again.trained
    assert str(tmp_path) not in again.reason, again.reason


def test_training_and_loading_keep_the_global_random_state(data, tmp_path):
    torch.manual_seed(123)
    random.seed(123)
    np.random.seed(123)
    before = _random_states()
    assert lm.train_or_load_lm(TINY, tmp_path, data).trained
    assert _same_states(before, _random_states())
    assert not lm.train_or_load_lm(TINY, tmp_path, data).trained
    assert _same_states(before, _random_states())


@pytest.mark.parametrize("recipe", [TRANSFORMER_RECIPE, {"max_steps": 3},
                                    "tiny"])
def test_train_or_load_lm_refuses_other_recipes(data, tmp_path, recipe):
    with pytest.raises(TypeError, match="LMRecipe"):
        lm.train_or_load_lm(recipe, tmp_path, data)
    assert not list(tmp_path.iterdir())


# few_pairs -----------------------------------------------------------------

def _snapshot(data):
    return (list(data.train_pairs), list(data.val_pairs),
            list(data.test_pairs),
            {k: [t.clone() for t in v] for k, v in data._arrays.items()},
            data.generator.get_state().clone())


def _same_snapshot(a, b):
    return a[:3] == b[:3] and a[3].keys() == b[3].keys() and all(
        torch.equal(x, y) for k in a[3] for x, y in zip(a[3][k], b[3][k])
    ) and torch.equal(a[4], b[4])


def _loader_rows(loader):
    """Every (src, tgt_input, label) row of a loader's batches, sorted."""
    rows = []
    for src, tgt_in, _, label in loader:
        rows += [tuple(map(tuple, r)) for r in zip(src.tolist(),
                                                   tgt_in.tolist(),
                                                   label.tolist())]
    return sorted(rows)


def test_few_pairs_draws_n_training_pairs(data):
    before = _snapshot(data)
    subset = lm.few_pairs(data, 5, seed=0)
    assert len(subset.train_pairs) == 5
    assert not Counter(subset.train_pairs) - Counter(data.train_pairs)
    assert subset.src_vocab.idx_to_token == data.src_vocab.idx_to_token
    assert subset.tgt_vocab.idx_to_token == data.tgt_vocab.idx_to_token
    assert subset.test_pairs == data.test_pairs
    for e, _ in data.test_pairs:
        assert subset.references(e) == data.references(e)
        assert subset.splits_of(e) == ("test",)
    assert subset.val_pairs == [] and subset.val_dataloader() is None
    # The training batches are those of the chosen pairs, the test
    # batches those of the original.
    eng, fra = zip(*subset.train_pairs)
    src, tgt_in, _, label = data.build(list(eng), list(fra))
    assert _loader_rows(subset.train_dataloader()) == sorted(
        tuple(map(tuple, r)) for r in zip(src.tolist(), tgt_in.tolist(),
                                          label.tolist()))
    assert _loader_rows(subset.test_dataloader()) == _loader_rows(
        data.test_dataloader())
    for e, _ in subset.train_pairs:
        assert subset.splits_of(e) == ("train",)
    # Neither drawing the subset nor iterating it changed the original.
    assert _same_snapshot(before, _snapshot(data))
    assert data.val_dataloader() is not None


def test_few_pairs_seeds(data):
    def drawn(seed):
        return lm.few_pairs(data, 5, seed).train_pairs

    assert drawn(0) == drawn(0)
    assert drawn(0) != drawn(1)
    assert drawn(1) == drawn(1)
    everything = lm.few_pairs(data, len(data.train_pairs), seed=3)
    assert sorted(everything.train_pairs) == sorted(data.train_pairs)


@pytest.mark.parametrize("n, seed, message", [
    (10_000, 0, "more than the"),
    (0, 0, "n must be an int"),
    (True, 0, "n must be an int"),
    (2.0, 0, "n must be an int"),
    (3, -1, "seed must be an int"),
    (3, False, "seed must be an int"),
])
def test_few_pairs_refuses(data, n, seed, message):
    before = _snapshot(data)
    with pytest.raises(ValueError, match=message):
        lm.few_pairs(data, n, seed)
    assert _same_snapshot(before, _snapshot(data))


# init_decoder_from_lm ------------------------------------------------------

COPIED_BLOCK = {"self_attention": "attention", "addnorm1": "addnorm1",
                "ffn": "ffn", "addnorm3": "addnorm2"}


def _translator(data):
    return experiment.build_model(TRANSFORMER_RECIPE, data)


def _clone(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _unchanged(model, before):
    now = model.state_dict()
    return now.keys() == before.keys() and all(
        torch.equal(now[k], before[k]) for k in now)


def _noisy_lm(data, seed=5, **changes):
    """A section-sized LM whose every parameter, the layer norms' too,
    differs from a fresh translator's."""
    model = SECTION.replace(seed=seed, **changes).build(len(data.tgt_vocab))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=generator))
    return model


def _copied_names(model, language_model):
    """{translator parameter name: LM parameter name} of the copy."""
    theirs = language_model.state_dict()
    copied = {f"decoder.{k}": k for k in theirs
              if k.split(".")[0] in ("embedding", "dense")}
    for i in range(len(model.decoder.blks)):
        for mine, lms in COPIED_BLOCK.items():
            prefix = f"blks.{i}.{lms}."
            copied.update({f"decoder.blks.{i}.{mine}.{k[len(prefix):]}": k
                           for k in theirs if k.startswith(prefix)})
    return copied


def test_init_decoder_copies_the_language_model(data):
    model = _translator(data)
    language_model = _noisy_lm(data)
    before = _clone(model)
    assert lm.init_decoder_from_lm(model, language_model) is model
    ours, theirs = model.state_dict(), language_model.state_dict()
    copied = _copied_names(model, language_model)
    assert len(copied) == len(theirs) == len(set(copied.values()))
    assert "decoder.blks.1.addnorm3.ln.weight" in copied
    for k, source in copied.items():
        assert torch.equal(ours[k], theirs[source]), k
        assert not torch.equal(before[k], theirs[source]), k
    # Everything else keeps its initialization: the encoder, the
    # cross-attention and its AddNorm.
    rest = [k for k in ours if k not in copied]
    assert any(".cross_attention." in k for k in rest)
    assert any(k.startswith("encoder.") for k in rest)
    for k in rest:
        assert torch.equal(ours[k], before[k]), k
    # The copy is a copy: training the translator leaves the LM alone.
    assert ours["decoder.embedding.weight"].data_ptr() != \
        theirs["embedding.weight"].data_ptr()


def test_init_decoder_gives_the_decoder_the_language_models_function(
        data):
    """With the cross-attention's output zeroed and its AddNorm the
    identity, a decoder block is the LM's block: the started decoder
    predicts what the LM predicts."""
    model = _translator(data)
    language_model = SECTION.replace(seed=5).build(len(data.tgt_vocab))
    lm.init_decoder_from_lm(model, language_model)
    assert not _same_weights(model.decoder.blks[0].ffn,
                             _translator(data).decoder.blks[0].ffn)
    with torch.no_grad():
        for blk in model.decoder.blks:
            blk.cross_attention.W_o.weight.zero_()
            blk.cross_attention.W_o.bias.zero_()
    X = torch.tensor([[data.tgt_vocab.bos, 5, 6, 7]])
    enc = torch.randn(1, 3, SECTION.num_hiddens,
                      generator=torch.Generator().manual_seed(0))
    model.eval()
    with torch.no_grad():
        want = language_model.eval()(X)
        # LayerNorm(Y + 0) of a normalized Y is Y up to rounding.
        got, _ = model.decoder(X, model.decoder.init_state(enc))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("changes, message", [
    ({"num_hiddens": 64}, "shapes differ"),
    ({"num_blks": 1}, "blocks"),
    ({"num_blks": 3}, "blocks"),
    # A mismatch found part way (the first block's FFN) must not leave
    # the embedding, output layer and self-attention copied.
    ({"ffn_num_hiddens": 256}, "shapes differ"),
    # Same shapes, another function: refused too.
    ({"num_heads": 8}, "heads"),
])
def test_init_decoder_refuses_another_size_and_changes_nothing(
        data, changes, message):
    model = _translator(data)
    before = _clone(model)
    language_model = _noisy_lm(data, **changes)
    with pytest.raises(ValueError, match=message):
        lm.init_decoder_from_lm(model, language_model)
    assert _unchanged(model, before)


def test_init_decoder_refuses_another_vocabulary(data):
    model = _translator(data)
    before = _clone(model)
    with pytest.raises(ValueError, match="shapes differ"):
        lm.init_decoder_from_lm(model, SECTION.build(
            len(data.tgt_vocab) + 1))  # its embedding, the first copied
    assert _unchanged(model, before)


# finetune_or_load and bleu_gain ---------------------------------------------

@pytest.fixture(scope="module")
def finetuned(data, section_lm, tmp_path_factory):
    """One-step runs from scratch and from ``section_lm`` on 6 pairs."""
    folder = tmp_path_factory.mktemp("finetune")
    scratch = lm.finetune_or_load(6, 1, seed=0, cache_dir=folder, data=data)
    pretrained = lm.finetune_or_load(6, 1, seed=0, lm=section_lm,
                                     cache_dir=folder, data=data)
    return folder, scratch, pretrained


def test_section_lm(section_lm, data):
    assert section_lm.trained and section_lm.data is data
    assert section_lm.history["steps"] == [1]


def test_finetune_starts_the_decoder_from_the_language_model(
        finetuned, section_lm):
    """After one step at the warm-up's first learning rate (2e-5) the
    pretrained run's copied weights are still the LM's, the scratch
    run's are not; the rest starts alike in both."""
    folder, scratch, pretrained = finetuned
    assert scratch.trained and pretrained.trained
    assert (scratch.pretrained, pretrained.pretrained) == (False, True)
    theirs = section_lm.model.state_dict()
    p, s = pretrained.model.state_dict(), scratch.model.state_dict()
    copied = _copied_names(pretrained.model, section_lm.model)
    for name, lm_name in copied.items():
        torch.testing.assert_close(p[name], theirs[lm_name], atol=1e-4,
                                   rtol=0, msg=name)
    for name in ("decoder.embedding.weight", "decoder.dense.bias",
                 "decoder.blks.1.self_attention.W_q.weight",
                 "decoder.blks.0.ffn.dense2.weight"):
        assert (s[name] - theirs[copied[name]]).abs().max() > 1e-2, name
    for name in p.keys() - copied.keys():
        torch.testing.assert_close(p[name], s[name], atol=1e-4, rtol=0,
                                   msg=name)
    names = sorted(f.name for f in folder.glob("finetune-*.pt"))
    assert len(names) == 2
    assert names[0].startswith("finetune-pretrained-")
    assert names[1].startswith("finetune-scratch-")
    blobs = {f.read_bytes() for f in folder.glob("finetune-*.pt")}
    assert len(blobs) == 2


def test_finetune_history_and_data(finetuned, data):
    _, scratch, pretrained = finetuned
    for run in (scratch, pretrained):
        assert not run.model.training
        assert len(run.data.train_pairs) == 6
        assert run.data.train_pairs == lm.few_pairs(data, 6, 0).train_pairs
        assert run.data.val_pairs == [] and run.data.test_pairs == \
            data.test_pairs
        assert run.recipe == TRANSFORMER_RECIPE.replace(max_steps=1, seed=0)
        assert set(run.history) == {"seconds", "loss"}
        assert len(run.history["loss"]) == 1
        assert math.isfinite(run.history["loss"][0])
        assert run.reason == "no cached model yet"


def test_finetune_loads_from_the_cache(finetuned, section_lm, data):
    folder, scratch, pretrained = finetuned
    before = _random_states()
    again = lm.finetune_or_load(6, 1, seed=0, cache_dir=folder, data=data)
    again_p = lm.finetune_or_load(6, 1, seed=0, lm=section_lm,
                                  cache_dir=folder, data=data)
    assert _same_states(before, _random_states())
    assert not again.trained and not again_p.trained
    assert (again.pretrained, again_p.pretrained) == (False, True)
    assert _same_weights(again.model, scratch.model)
    assert _same_weights(again_p.model, pretrained.model)
    assert again.history == scratch.history
    assert not again.model.training


def test_finetune_other_settings_train_anew(finetuned, data):
    folder, scratch, _ = finetuned
    for n, steps, seed in ((5, 1, 0), (6, 2, 0), (6, 1, 1)):
        run = lm.finetune_or_load(n, steps, seed=seed, cache_dir=folder,
                                  data=data)
        assert run.trained, (n, steps, seed)
        assert len(run.data.train_pairs) == n
    assert len(list(folder.glob("finetune-scratch-*.pt"))) == 4


def test_finetune_refuses_an_lm_of_other_data(section_lm, tmp_path):
    other = make_data()  # equal, but not the LM's object
    with pytest.raises(ValueError, match="same data"):
        lm.finetune_or_load(6, 1, lm=section_lm, cache_dir=tmp_path,
                            data=other)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("n, steps", [(6, 0), (6, True), (0, 1),
                                      (10_000, 1)])
def test_finetune_refuses_bad_counts(data, tmp_path, n, steps):
    with pytest.raises(ValueError):
        lm.finetune_or_load(n, steps, cache_dir=tmp_path, data=data)
    assert not list(tmp_path.iterdir())


def test_bleu_gain(finetuned):
    _, scratch, pretrained = finetuned
    bleu_p, bleu_s, (diff, low, high) = lm.bleu_gain(pretrained, scratch)
    for x in (bleu_p, bleu_s, diff, low, high):
        assert isinstance(x, float) and math.isfinite(x)
    assert 0 <= bleu_p <= 100 and 0 <= bleu_s <= 100
    assert low <= diff <= high
    assert diff == pytest.approx(bleu_p - bleu_s, abs=1e-9)
    assert bleu_p == experiment.evaluate(pretrained.model, pretrained.data,
                                         "test").bleu
    assert lm.bleu_gain(pretrained, scratch) == (bleu_p, bleu_s,
                                                 (diff, low, high))
    swapped = lm.bleu_gain(scratch, pretrained)
    assert swapped[2][0] == pytest.approx(-diff, abs=1e-9)


def test_finetune_fingerprint_names_the_device_that_trains(
        data, tmp_path, monkeypatch):
    """The fingerprint's device is the trainer's (a GPU's run says
    'cuda'; f1e0c15 wrote 'cpu' whatever trained), and the model comes
    back on the CPU whether it trained or loaded."""
    devices, made = [], []
    fingerprint, trainer = lm._fingerprint, experiment._trainer

    def spy(key, data, device=None):
        devices.append(device)
        return fingerprint(key, data, device)

    def recorded(*args, **kwargs):
        made.append(trainer(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(lm, "_fingerprint", spy)
    monkeypatch.setattr(experiment, "_trainer", recorded)
    first = lm.finetune_or_load(6, 1, cache_dir=tmp_path, data=data)
    again = lm.finetune_or_load(6, 1, cache_dir=tmp_path, data=data)
    assert first.trained and not again.trained
    assert devices == [t.device.type for t in made] == ["cpu", "cpu"]
    for run in (first, again):
        assert {p.device.type for p in run.model.parameters()} == {"cpu"}
    saved = torch.load(next(tmp_path.glob("finetune-*.pt")))
    assert saved["extra"]["fingerprint"]["device"] == "cpu"
    assert saved["extra"]["fingerprint"]["processes"] == 1
