"""Tests of d2lmini.pretraining: masks, the masked-token and next-token
objectives, the decoder-only language model, n-gram baselines and
perplexity (d2lmini.generation has tests/test_generation.py)."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from d2lmini.attention import masked_softmax
from d2lmini.pretraining import (
    IGNORE_INDEX,
    LanguageModel,
    NgramLM,
    attention_mask,
    mask_tokens,
    mask_valid_lens,
    masked_lm_loss,
    next_token_loss,
    perplexity,
)
from d2lmini.transformer import copy_from_pytorch
from d2lmini.vocab import RESERVED_TOKENS, Vocab

V, D, FFN, H, BLKS = 11, 8, 12, 2, 2
PAD, BOS, EOS, UNK, MASK = 0, 1, 2, 3, 4
RESERVED_TOKENS_IDS = (PAD, BOS, EOS, UNK)


def tiny_model(seed=0, **kwargs):
    torch.manual_seed(seed)
    return LanguageModel(V, D, FFN, H, BLKS, max_len=32, **kwargs).eval()


def random_ids(gen, B, T, low=5):
    return torch.randint(low, V, (B, T), generator=gen)


# ---- masks ----------------------------------------------------------------

def test_attention_mask_by_hand():
    assert attention_mask("causal", 3).tolist() == [
        [True, False, False], [True, True, False], [True, True, True]]
    assert attention_mask("bidirectional", 2, 2).all()
    cross = attention_mask("cross", 2, 4)
    assert cross.shape == (2, 4) and cross.dtype == torch.bool and cross.all()


@pytest.mark.parametrize("args, message", [
    (("sideways", 3), "kind must be one of"),
    (("causal", 3, 4), "T=3, S=4"),
    (("bidirectional", 3, 2), "T=3, S=2"),
    (("cross", 3), "S .the number of source steps. must be an int"),
    (("causal", 0), "T must be an int >= 1, got 0"),
])
def test_attention_mask_refuses(args, message):
    with pytest.raises(ValueError, match=message):
        attention_mask(*args)


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["bidirectional", "causal", "cross"]),
       T=st.integers(1, 5), S=st.integers(1, 5), padded=st.booleans(),
       data=st.data())
def test_masked_softmax_weights_are_zero_exactly_where_masked(
        kind, T, S, padded, data):
    S = S if kind == "cross" else T
    B = 3
    lens = torch.tensor(data.draw(st.lists(st.integers(0, S), min_size=B,
                                           max_size=B))) if padded else None
    valid_lens = mask_valid_lens(kind, B, T, lens, S=S)
    allowed = attention_mask(kind, T, S).expand(B, T, S)
    if padded:  # keys past each sequence's length are padding
        allowed = allowed & (torch.arange(S) < lens[:, None])[:, None, :]
    scores = torch.randn(B, T, S, generator=torch.Generator().manual_seed(0))
    weights = masked_softmax(scores, valid_lens)
    assert (weights[~allowed] == 0).all()
    assert (weights[allowed] > 0).all()


def test_mask_valid_lens_values_and_no_aliasing():
    lens = torch.tensor([3, 1])
    assert mask_valid_lens("causal", 2, 3, lens).tolist() == [
        [1, 2, 3], [1, 1, 1]]
    assert mask_valid_lens("causal", 1, 2).tolist() == [[1, 2]]
    assert mask_valid_lens("bidirectional", 2, 3) is None
    out = mask_valid_lens("bidirectional", 2, 3, lens)
    out[0] = 0  # the result is a new tensor
    assert lens.tolist() == [3, 1]
    assert mask_valid_lens("cross", 2, 3, [5, 7]).tolist() == [5, 7]


@pytest.mark.parametrize("lens, error, message", [
    ([1, 4], ValueError, r"lens must lie in \[0, 3\].*\[1, 4\]"),
    ([-1, 2], ValueError, r"\[-1, 2\]"),
    ([1, 2, 3], ValueError, r"shape \(2,\).*got \(3,\)"),
    ([1.0, 2.0], TypeError, "integers, got dtype torch.float32"),
])
def test_mask_valid_lens_refuses(lens, error, message):
    with pytest.raises(error, match=message):
        mask_valid_lens("causal", 2, 3, lens)


def test_mask_valid_lens_cross_checks_against_s():
    with pytest.raises(ValueError, match=r"\[0, 4\]"):
        mask_valid_lens("cross", 2, 3, [5, 1], S=4)
    with pytest.raises(ValueError, match="T=3, S=4"):
        mask_valid_lens("causal", 2, 3, S=4)


# ---- masked tokens (BERT) -------------------------------------------------

def corpus_ids(B=200, T=40):
    gen = torch.Generator().manual_seed(1)
    tokens = random_ids(gen, B, T)
    tokens[:, 0], tokens[:, -1] = BOS, EOS
    tokens[::3, -5:] = PAD
    tokens[-1, 1] = UNK
    return tokens


def test_mask_tokens_chooses_non_specials_with_80_10_10():
    tokens = corpus_ids()
    before = tokens.clone()
    gen = torch.Generator().manual_seed(0)
    inputs, labels = mask_tokens(tokens, V, [PAD, BOS, EOS, UNK], 0.15,
                                 gen, mask_id=MASK)
    assert torch.equal(tokens, before)  # not modified
    chosen = labels != IGNORE_INDEX
    special = (tokens <= UNK)
    assert not chosen[special].any()
    assert torch.equal(labels[chosen], tokens[chosen])
    assert torch.equal(inputs[~chosen], tokens[~chosen])

    def near(count, n, p):  # within 4 standard errors of n * p
        assert abs(count - n * p) < 4 * math.sqrt(n * p * (1 - p)), \
            (count, n, p)

    n, c = int((~special).sum()), int(chosen.sum())
    near(c, n, 0.15)
    masked = inputs[chosen] == MASK
    others = inputs[chosen][~masked]
    assert (others > MASK).all()  # random ids are never special
    near(int(masked.sum()), c, 0.8)
    changed = int((others != tokens[chosen][~masked]).sum())
    near(changed, c, 0.1 * (1 - 1 / (V - 5)))  # a random id may be the same


def test_a_mask_token_comes_after_the_reserved_ones():
    vocab = Vocab(["le", "chat", "le"], min_freq=1,
                  reserved_tokens=RESERVED_TOKENS + ("<mask>",))
    mask_id = vocab["<mask>"]
    tokens = torch.tensor([vocab[["<bos>", "le", "chat", "<eos>"]]])
    inputs, labels = mask_tokens(tokens, len(vocab), RESERVED_TOKENS_IDS,
                                 1.0, torch.Generator().manual_seed(0),
                                 mask_id=mask_id)
    assert mask_id == 4 and labels.tolist() == [[-100, 5, 6, -100]]
    assert set(inputs[0, 1:3].tolist()) <= {mask_id, 5, 6}


def test_mask_tokens_is_deterministic_given_the_generator():
    tokens = corpus_ids(8, 10)

    def run(seed):
        return mask_tokens(tokens, V, [PAD], 0.5,
                           torch.Generator().manual_seed(seed), mask_id=MASK)

    a, b, c = run(0), run(0), run(1)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


def test_mask_tokens_p_zero_and_one():
    tokens = corpus_ids(4, 10)
    gen = torch.Generator().manual_seed(0)
    inputs, labels = mask_tokens(tokens, V, [PAD, BOS, EOS], 0.0, gen,
                                 mask_id=MASK)
    assert torch.equal(inputs, tokens) and (labels == IGNORE_INDEX).all()
    _, labels = mask_tokens(tokens, V, [PAD, BOS, EOS], 1.0, gen,
                            mask_id=MASK)
    assert torch.equal(labels != IGNORE_INDEX, tokens > EOS)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(p=1.5), ValueError, "p must be a probability in .0, 1., got 1.5"),
    (dict(p=True), ValueError, "got True"),
    (dict(mask_id=V), ValueError, rf"ids in \[0, {V}\), got \[{V}\]"),
    (dict(specials=range(V)), ValueError, "no token to mask"),
    (dict(tokens=torch.ones(2, 3)), TypeError, "integer ids"),
    (dict(tokens=torch.tensor([[1, V]])), ValueError, f"from 1 to {V}"),
])
def test_mask_tokens_refuses(kwargs, error, message):
    args = dict(tokens=corpus_ids(2, 5), vocab_size=V, specials=[PAD],
                mask_id=MASK) | kwargs
    with pytest.raises(error, match=message):
        mask_tokens(**args)


def test_masked_lm_loss_counts_chosen_positions_only():
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 4, V, generator=gen)
    labels = torch.full((2, 4), IGNORE_INDEX)
    labels[0, 1], labels[1, 3] = 7, 9
    expected = -(logits[0, 1].log_softmax(-1)[7]
                 + logits[1, 3].log_softmax(-1)[9]) / 2
    torch.testing.assert_close(masked_lm_loss(logits, labels), expected)
    with pytest.raises(ValueError, match="every label is -100"):
        masked_lm_loss(logits, torch.full((2, 4), IGNORE_INDEX))
    with pytest.raises(ValueError, match=r"\(B, T, V\).*\(2, 3\)"):
        masked_lm_loss(logits, labels[:, :3])


# ---- the language model ---------------------------------------------------

def test_language_model_shapes_and_causal_attention():
    model = tiny_model()
    X = random_ids(torch.Generator().manual_seed(0), 3, 5)
    assert model(X).shape == (3, 5, V)
    weights = model.attention_weights
    assert len(weights) == BLKS
    for w in weights:
        assert w.shape == (3, H, 5, 5)
        assert (w.triu(1) == 0).all()  # no weight on a later token


@pytest.mark.parametrize("t", [0, 2, 4])
def test_language_model_is_causal_exactly(t):
    model = tiny_model()
    gen = torch.Generator().manual_seed(t)
    X = random_ids(gen, 2, 6)
    Y = X.clone()
    Y[:, t + 1:] = random_ids(gen, 2, 6 - t - 1, low=0)
    a, b = model(X), model(Y)
    assert torch.equal(a[:, :t + 1], b[:, :t + 1])
    if t < 5:
        assert not torch.equal(a, b)


def test_padding_does_not_change_the_logits_of_real_tokens():
    model = tiny_model()
    gen = torch.Generator().manual_seed(5)
    long, short = random_ids(gen, 1, 6), random_ids(gen, 1, 3)
    alone = model(short)
    for filler in (PAD, 7):
        X = torch.cat([long, F.pad(short, (0, 3), value=filler)])
        logits = model(X, torch.tensor([6, 3]))
        # the lengths keep padded queries off padded keys as well
        for w in model.attention_weights:
            assert (w[1, :, :, 3:] == 0).all()
        torch.testing.assert_close(logits[1, :3], alone[0], rtol=0,
                                   atol=1e-6)
        torch.testing.assert_close(logits[0], model(long)[0], rtol=0,
                                   atol=1e-6)


def test_tied_output_layer_shares_the_embedding():
    tied, untied = tiny_model(), tiny_model(tie_weights=False)
    assert tied.dense.weight is tied.embedding.weight
    assert untied.dense.weight is not untied.embedding.weight
    n = sum(p.numel() for p in untied.parameters()) \
        - sum(p.numel() for p in tied.parameters())
    assert n == V * D


def sinusoids(T, D):
    """Positions written out again: P[i, 2j], P[i, 2j + 1]."""
    P = torch.zeros(T, D)
    for i in range(T):
        for j in range(0, D, 2):
            P[i, j] = math.sin(i / 10000 ** (j / D))
            P[i, j + 1] = math.cos(i / 10000 ** (j / D))
    return P


def test_language_model_equals_pytorch_layers():
    ours = tiny_model(1)
    ours.train()  # dropout is 0; gradients are compared too
    torch.manual_seed(1)
    layers = [nn.TransformerEncoderLayer(D, H, FFN, dropout=0.0,
                                         batch_first=True)
              for _ in range(BLKS)]
    for blk, layer in zip(ours.blks, layers):
        copy_from_pytorch(blk, layer)
    X = random_ids(torch.Generator().manual_seed(2), 2, 7, low=0)
    T = X.shape[1]
    embedding = ours.embedding.weight.detach().clone().requires_grad_()
    Hs = F.embedding(X, embedding) * math.sqrt(D) + sinusoids(T, D)
    mask = nn.Transformer.generate_square_subsequent_mask(T)
    for layer in layers:
        Hs = layer(Hs, src_mask=mask, is_causal=True)
    expected = Hs @ embedding.T + ours.dense.bias.detach()
    logits = ours(X)
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    logits.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(ours.embedding.weight.grad, embedding.grad,
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("X, valid_lens, error, message", [
    (torch.ones(2, 3), None, TypeError, "integer ids, got torch.float32"),
    (torch.ones(3, dtype=torch.long), None, ValueError, r"2-D.*\(3,\)"),
    (torch.full((1, 3), V), None, ValueError, rf"ids in \[0, {V}\)"),
    (torch.ones(1, 33, dtype=torch.long), None, ValueError, "max_len=32"),
    (torch.ones(2, 3, dtype=torch.long), [3, 4], ValueError, r"\[3, 4\]"),
])
def test_language_model_refuses(X, valid_lens, error, message):
    with pytest.raises(error, match=message):
        tiny_model()(X, valid_lens)


def test_next_token_loss_is_shifted_and_ignores_padding():
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(2, 4, V, generator=gen)
    X = torch.tensor([[BOS, 5, 6, EOS], [BOS, 7, EOS, PAD]])
    terms = [-logits[b, t].log_softmax(-1)[X[b, t + 1]]
             for b in range(2) for t in range(3) if X[b, t + 1] != PAD]
    loss = next_token_loss(logits, X, PAD)
    torch.testing.assert_close(loss, torch.stack(terms).mean())
    changed = logits.clone()
    changed[1, 2] += 5  # predicts padding: does not count
    changed[:, 3] += 5  # the last step predicts nothing
    torch.testing.assert_close(next_token_loss(changed, X, PAD), loss)
    with pytest.raises(ValueError, match="every token after the first"):
        next_token_loss(logits, torch.tensor([[BOS] + [PAD] * 3] * 2), PAD)
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        next_token_loss(logits, X[:, :3], PAD)


# ---- n-gram baselines and perplexity --------------------------------------

A, B_, C = 5, 6, 7  # a three-word corpus: "a b", "a c", "a"
TOY = [[A, B_], [A, C], [A]]


def ppl(*probs):
    return math.exp(-sum(map(math.log, probs)) / len(probs))


def test_unigram_by_hand():
    # after <bos>: a 3, b 1, c 1, <eos> 3; N = 8; add-1 over V = 11
    model = NgramLM(1, V, k=1).fit(TOY, BOS, EOS)
    assert model.log_prob(A) == pytest.approx(math.log(4 / 19))
    assert model.log_prob(UNK) == pytest.approx(math.log(1 / 19))
    assert perplexity(model, [[A, B_]], BOS, EOS) == pytest.approx(
        ppl(4 / 19, 2 / 19, 4 / 19))


def test_bigram_by_hand():
    # pairs: (bos a) 3, (a b) (a c) (a eos) (b eos) (c eos) 1 each
    model = NgramLM(2, V, k=1).fit(TOY, BOS, EOS)
    assert model.log_prob(A, BOS) == pytest.approx(math.log(4 / 14))
    assert perplexity(model, [[A, B_]], BOS, EOS) == pytest.approx(
        ppl(4 / 14, 2 / 14, 2 / 12))
    mle = NgramLM(2, V, k=0).fit(TOY, BOS, EOS)
    assert perplexity(mle, [[A, B_], [A]], BOS, EOS) == pytest.approx(
        ppl(1, 1 / 3, 1, 1, 1 / 3))
    assert perplexity(mle, [[B_]], BOS, EOS) == math.inf  # unseen pair
    with pytest.raises(ValueError, match="context 0 was never seen"):
        mle.log_prob(A, PAD)


@pytest.mark.parametrize("n", [1, 2])
def test_ngram_probabilities_sum_to_one(n):
    model = NgramLM(n, V, k=0.5).fit(TOY, BOS, EOS)
    for prev in (BOS, A, PAD):
        assert float(model.probs(prev).sum()) == pytest.approx(1.0)


def test_uniform_models_have_perplexity_v():
    assert perplexity(NgramLM(1, V), TOY, BOS, EOS) == pytest.approx(V)
    model = tiny_model()
    with torch.no_grad():
        model.dense.weight.zero_()  # the tied embedding too: all logits 0
        model.dense.bias.zero_()
    assert perplexity(model, TOY, BOS, EOS) == pytest.approx(V, rel=1e-9)


def test_model_perplexity_equals_sentence_by_sentence_sum():
    model = tiny_model(2).train()
    sentences = [[5, 6, 7, 8], [9], [10, 5]]
    total, count = 0.0, 0
    with torch.no_grad():
        for s in sentences:
            X = torch.tensor([[BOS, *s, EOS]])
            logp = model.eval()(X)[0, :-1].double().log_softmax(-1)
            total += float(logp.gather(-1, X[0, 1:, None]).sum())
            count += len(s) + 1
    model.train()
    got = perplexity(model, sentences, BOS, EOS, batch_size=2)
    assert got == pytest.approx(math.exp(-total / count), rel=1e-6)
    assert model.training  # its mode is restored


@pytest.mark.parametrize("call, message", [
    (lambda: NgramLM(3, V), "n must be 1 .unigram. or 2 .bigram., got 3"),
    (lambda: NgramLM(1, V, k=-1), "k must be a finite number >= 0, got -1"),
    (lambda: NgramLM(1, V).fit([[V]], BOS, EOS), rf"\[{V}\]"),
    (lambda: perplexity(NgramLM(1, V), [], BOS, EOS), "no sentences"),
    (lambda: perplexity(tiny_model(), [[99]], BOS, EOS), r"\[99\]"),
])
def test_ngram_and_perplexity_refuse(call, message):
    with pytest.raises(ValueError, match=message):
        call()
