"""Tests of d2lmini.beam: beam search for every decoder of the chapter.

Models are untrained (random weights, made peaky so that scores differ
clearly), built with the helpers of ``test_seq2seq.py``; the
translation wrapper runs on ``test_live.py``'s toy corpus.
"""

import itertools

import pytest
import torch
from test_seq2seq import BOS, EOS, PAD, make_model

from d2lmini.beam import (
    BeamTranslation,
    beam_decode,
    beam_translate,
    length_penalty_of,
)
from d2lmini.data import MTFraEng
from d2lmini.decoding import greedy_decode, translate
from d2lmini.seq2seq import Seq2Seq
from d2lmini.transformer import TransformerDecoder, TransformerEncoder

KINDS = ["none", "additive", "multihead", "transformer"]


def peaky_model(kind, vocab, seed=0, eos_bias=1.0):
    """An untrained model of ``kind`` whose output scores spread widely
    (its output layer scaled up) and that emits ``<eos>`` now and then."""
    if kind == "transformer":
        torch.manual_seed(seed)
        model = Seq2Seq(TransformerEncoder(vocab, 16, 24, 4, 2),
                        TransformerDecoder(vocab, 16, 24, 4, 2), tgt_pad=PAD)
    else:
        model = make_model(kind, seed=seed, vocab=vocab, embed=8, hidden=16)
    with torch.no_grad():
        model.decoder.dense.weight.mul_(4.0)
        model.decoder.dense.bias[EOS] += eos_bias
    return model.eval()


def sources(B, T, vocab, seed=0):
    """B random sources of 1 to T - 1 symbols plus <eos>, padded."""
    gen = torch.Generator().manual_seed(seed)
    lens = torch.randint(2, T + 1, (B,), generator=gen)
    src = torch.randint(3, vocab, (B, T), generator=gen)
    steps = torch.arange(T)
    src[steps == lens[:, None] - 1] = EOS
    src[steps >= lens[:, None]] = PAD
    return src, lens


@pytest.mark.parametrize("kind", KINDS)
def test_beam_of_one_is_greedy(kind):
    """beam_size=1 (no length penalty) gives greedy's tokens, attention
    and stopping, sentence by sentence."""
    src, lens = sources(16, 6, 12)
    seen = set()
    for eos_bias in (1.0, 6.0):  # some sentences stop, some do not
        model = peaky_model(kind, 12, eos_bias=eos_bias)
        greedy = greedy_decode(model, src, lens, BOS, EOS, max_len=9)
        beam = beam_decode(model, src, lens, BOS, EOS, 9, beam_size=1)
        for g, b in zip(greedy, beam):
            assert (b.ids, b.finished) == (g.ids, g.finished)
            if g.attention is None:
                assert b.attention is None
            else:
                torch.testing.assert_close(b.attention, g.attention)
            assert b.hypotheses[0].ids == b.ids and len(b.hypotheses) == 1
            seen.add(g.finished)
    assert seen == {True, False}, "the test needs both kinds of sentence"


def log_probs(model, src, valid, outputs, forbid=()):
    """log P(ids | src) of every output ids, by teacher forcing: one
    forward over all of them at once (the decoders are causal: a
    prefix's probability does not depend on what follows it); the
    ``forbid`` tokens' logits are -inf, as beam search sets them."""
    T = max(len(ids) for ids in outputs)
    X = torch.tensor([[BOS, *ids, *[PAD] * (T - len(ids))][:T]
                      for ids in outputs])
    n = len(outputs)
    with torch.no_grad():
        enc = model.encoder(src.expand(n, -1), valid.expand(n))
        state = model.decoder.init_state(enc, valid.expand(n))
        logits = model.decoder(X, state)[0].double()
        logits[..., list(forbid)] = -torch.inf
        logp = torch.log_softmax(logits, -1)
    return [float(sum(logp[i, t, tok] for t, tok in enumerate(ids)))
            for i, ids in enumerate(outputs)]


def every_output(V, T, forbid=()):
    """Every output of at most T steps without the ``forbid`` tokens:
    (ids, ended with <eos>)."""
    symbols = [t for t in range(V) if t != EOS and t not in forbid]
    found = [([*body, EOS], True) for n in range(1, T + 1)
             for body in itertools.product(symbols, repeat=n - 1)]
    return found + [(list(body), False)
                    for body in itertools.product(symbols, repeat=T)]


@pytest.mark.parametrize("forbid", [(), (PAD, BOS)])
@pytest.mark.parametrize("kind", KINDS)
def test_a_beam_as_wide_as_every_output_finds_the_best(kind, forbid):
    """With V = 5 and max_len = 3 there are 5 + 20 + 80 + 64 outputs
    (1 + 2 + 4 + 8 without <pad> and <bos>, whose logits are then -inf,
    so that the others' log-probabilities are renormalised); a beam of
    5 ** 3 keeps them all, so for every length penalty it must return
    the one an exhaustive search scores best, with that score, and rank
    every hypothesis it returns by its true score."""
    V, T = 5, 3
    model = peaky_model(kind, V, seed=1, eos_bias=0.5)
    src, lens = sources(3, 4, V, seed=2)
    outputs = every_output(V, T, forbid)
    for i in range(len(src)):
        one, valid = src[i:i + 1, :int(lens[i])], lens[i:i + 1]
        true = dict(zip((tuple(ids) for ids, _ in outputs),
                        log_probs(model, one, valid,
                                  [ids for ids, _ in outputs], forbid)))
        for alpha in (0.0, 0.6, 2.0):
            got = beam_decode(model, src[i:i + 1], lens[i:i + 1], BOS, EOS,
                              T, beam_size=V ** T, length_penalty=alpha,
                              forbid=forbid)[0]
            scored = sorted(((true[tuple(ids)] / length_penalty_of(
                len(ids), alpha), ids, done) for ids, done in outputs),
                reverse=True)
            best_score, best_ids, best_done = scored[0]
            assert scored[1][0] < best_score - 1e-4, "a near tie: reseed"
            assert got.ids == (best_ids[:-1] if best_done else best_ids)
            assert got.finished == best_done
            assert got.score == pytest.approx(best_score, abs=1e-4)
            scores = [h.score for h in got.hypotheses]
            assert scores == sorted(scores, reverse=True)
            for h in got.hypotheses:
                ids = tuple(h.ids + [EOS] * h.finished)
                assert h.log_prob == pytest.approx(true[ids], abs=1e-4)
                assert h.score == pytest.approx(true[ids] / length_penalty_of(
                    len(ids), alpha), abs=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_a_sentence_decodes_the_same_alone_or_in_a_batch(kind):
    model = peaky_model(kind, 12)
    src, lens = sources(6, 7, 12, seed=3)
    together = beam_decode(model, src, lens, BOS, EOS, 8, beam_size=4,
                           length_penalty=0.6)
    for i, got in enumerate(together):
        n = int(lens[i])
        alone = beam_decode(model, src[i:i + 1, :n], lens[i:i + 1], BOS,
                            EOS, 8, beam_size=4, length_penalty=0.6)[0]
        assert [h.ids for h in alone.hypotheses] == \
            [h.ids for h in got.hypotheses]
        assert alone.score == pytest.approx(got.score, abs=1e-5)
        if got.attention is not None:
            torch.testing.assert_close(alone.attention, got.attention,
                                       atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", KINDS)
def test_every_step_is_one_decoder_call_on_every_hypothesis(kind,
                                                            monkeypatch):
    """All hypotheses of all sentences go through the decoder together,
    one new token each (the Transformer's cache is reordered, its steps
    are not run again)."""
    model = peaky_model(kind, 12, eos_bias=-5.0)  # no early stop
    src, lens = sources(3, 5, 12)
    shapes = []
    real = model.decoder.forward

    def forward(X, state, **kwargs):
        shapes.append(tuple(X.shape))
        return real(X, state, **kwargs)

    monkeypatch.setattr(model.decoder, "forward", forward)
    beam_decode(model, src, lens, BOS, EOS, 6, beam_size=4)
    assert shapes == [(12, 1)] * 6


def test_a_larger_penalty_gives_longer_outputs_on_average():
    """GNMT's alpha divides by a length that grows with alpha: the
    outputs found with a large alpha are at least as long on average."""
    model = peaky_model("additive", 12, eos_bias=2.0)
    src, lens = sources(32, 6, 12, seed=4)
    mean = {}
    for alpha in (0.0, 3.0):
        out = beam_decode(model, src, lens, BOS, EOS, 10, beam_size=4,
                          length_penalty=alpha)
        mean[alpha] = sum(len(o.ids) for o in out) / len(out)
    assert mean[3.0] >= mean[0.0]


def test_beam_decode_restores_train_mode():
    model = peaky_model("additive", 12).train()
    src, lens = sources(2, 5, 12)
    beam_decode(model, src, lens, BOS, EOS, 4, beam_size=3)
    assert all(m.training for m in model.modules())


@pytest.mark.parametrize("kwargs, error, words", [
    ({"beam_size": 0}, ValueError, "beam_size"),
    ({"beam_size": 2.5}, ValueError, "beam_size must be an int"),
    ({"beam_size": True}, ValueError, "beam_size must be an int"),
    ({"length_penalty": -0.5}, ValueError, "finite number >= 0"),
    ({"length_penalty": float("nan")}, ValueError, "finite number >= 0"),
    ({"length_penalty": "0.6"}, TypeError, "must be a number"),
    ({"length_penalty": True}, TypeError, "must be a number"),
])
def test_beam_decode_rejects_bad_arguments(kwargs, error, words):
    model = peaky_model("additive", 12)
    src, lens = sources(2, 5, 12)
    with pytest.raises(error, match=words):
        beam_decode(model, src, lens, BOS, EOS, 4, **kwargs)
    with pytest.raises(ValueError, match="max_len"):
        beam_decode(model, src, lens, BOS, EOS, 0)


def test_beam_translate_labels_its_best_and_its_hypotheses():
    from test_live import HELD_OUT, TOY_PAIRS, tiny_transformer

    from d2lmini.experiment import build_model

    data = MTFraEng(2, num_steps=6, num_train=8, num_val=0, num_test=1,
                    pairs=TOY_PAIRS + [HELD_OUT], min_freq=1)
    torch.manual_seed(0)
    model = build_model(tiny_transformer(), data).eval()  # untrained
    sentences = ["go .", "i'm home .", "he's calm ."]
    greedy = translate(model, data, sentences)
    one = beam_translate(model, data, sentences, beam_size=1)
    for g, b in zip(greedy, one):
        assert isinstance(b, BeamTranslation)
        assert (b.src_tokens, b.tokens, b.out_tokens) == \
            (g.src_tokens, g.tokens, g.out_tokens)
        torch.testing.assert_close(b.attention, g.attention)
    wide = beam_translate(model, data, sentences, beam_size=4,
                          length_penalty=0.6)
    for w in wide:
        assert w.hypotheses[0] == (w.tokens, w.score)
        assert len(w.hypotheses) <= 4
        assert w.attention.shape[-2:] == (len(w.out_tokens),
                                          len(w.src_tokens))
    with pytest.raises(TypeError, match="wrap it"):
        beam_translate(model, data, "go .")


def test_beam_evaluate_scores_as_evaluate_and_chooses_on_val():
    from test_live import HELD_OUT, TOY_PAIRS, tiny_transformer

    from d2lmini.beam import beam_evaluate, choose_length_penalty
    from d2lmini.experiment import build_model, evaluate

    more = [("he's home .", "il est chez lui ."), ("i'm lost .",
            "je suis perdu ."), ("go home .", "rentre !")]
    data = MTFraEng(2, num_steps=6, num_train=4, num_val=2, num_test=2,
                    pairs=TOY_PAIRS + [HELD_OUT] + more, min_freq=1)
    torch.manual_seed(0)
    model = build_model(tiny_transformer(), data).eval()  # untrained
    greedy = evaluate(model, data, "test")
    one = beam_evaluate(model, data, "test", beam_size=1)
    assert (one.sources, one.hypotheses, one.references) == (
        greedy.sources, greedy.hypotheses, greedy.references)
    assert (one.bleu, one.chrf, one.exact) == (
        greedy.bleu, greedy.chrf, greedy.exact)
    outs = beam_translate(model, data, one.sources, beam_size=1)
    assert one.log_probs == [t.log_prob for t in outs]
    assert all(lp <= 0 for lp in one.log_probs)
    def closest(n, refs):  # sacreBLEU's: the nearest, then the shortest
        return min((len(r.split()) for r in refs),
                   key=lambda m: (abs(m - n), m))

    lens = [len(h.split()) for h in one.hypotheses]
    assert one.length_ratio == pytest.approx(sum(lens) / sum(
        closest(n, refs) for n, refs in zip(lens, one.references)))
    alpha, runs = choose_length_penalty(model, data, 2, (0.0, 1.0, 3.0))
    assert set(runs) == {0.0, 1.0, 3.0}
    assert all(r.split == "val" and r.beam_size == 2 for r in runs.values())
    best = max(r.bleu for r in runs.values())
    assert runs[alpha].bleu == best
    assert alpha == min(a for a, r in runs.items() if r.bleu == best)
    with pytest.raises(ValueError, match="alphas is empty"):
        choose_length_penalty(model, data, 2, [])
