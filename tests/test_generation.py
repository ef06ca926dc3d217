"""Tests of d2lmini.generation: mulberry32, next-token distributions,
sampling, generation and its measures."""

import math
import re

import numpy as np
import pytest
import torch

# The tiny language model and the ids of tests/test_pretraining.py.
from test_pretraining import B_, BOS, EOS, PAD, TOY, A, C, V, tiny_model

from d2lmini.generation import (
    Mulberry32,
    distinct_n,
    generate,
    next_token_distribution,
    sample,
    self_perplexity,
)
from d2lmini.pretraining import NgramLM, perplexity

# ---- mulberry32 -----------------------------------------------------------

def mulberry32_numpy(seed, n):
    """An independent mulberry32 in numpy uint32 arithmetic (wraps)."""
    out, a = [], np.uint32(seed)
    with np.errstate(over="ignore"):
        for _ in range(n):
            a = a + np.uint32(0x6D2B79F5)
            t = (a ^ (a >> np.uint32(15))) * (a | np.uint32(1))
            t = t ^ (t + (t ^ (t >> np.uint32(7))) * (t | np.uint32(61)))
            out.append(int(t ^ (t >> np.uint32(14))) / 4294967296)
    return out


@pytest.mark.parametrize("seed", [0, 1, 12345, 2 ** 32 - 1])
def test_mulberry32_equals_an_independent_implementation(seed):
    rng = Mulberry32(seed)
    assert [rng.random() for _ in range(20)] == mulberry32_numpy(seed, 20)


def test_mulberry32_known_values_and_range():
    # The first draws of seed 0 as JavaScript's mulberry32 gives them.
    rng = Mulberry32(0)
    assert [rng.random() for _ in range(3)] == [
        0.26642920868471265, 0.0003297457005828619, 0.2232720274478197]
    draws = np.array([rng.random() for _ in range(20000)])
    assert draws.min() >= 0 and draws.max() < 1
    assert abs(draws.mean() - 0.5) < 4 * math.sqrt(1 / 12 / len(draws))


@pytest.mark.parametrize("seed", [-1, 2 ** 32, 1.5, True])
def test_mulberry32_refuses_bad_seeds(seed):
    with pytest.raises(ValueError, match=re.escape(f"got {seed!r}")):
        Mulberry32(seed)


# ---- next-token distributions and sampling --------------------------------

LOGITS = torch.tensor([1.0, 3.0, 3.0, 0.5, -math.inf, 2.0])


def test_greedy_is_argmax_lowest_id_on_a_tie():
    for kwargs in (dict(temperature=0), dict(top_k=1),
                   dict(top_p=1e-9), dict(temperature=0, top_k=3)):
        ids, probs = next_token_distribution(LOGITS, **kwargs)
        assert ids.tolist() == [1] and probs.tolist() == [1.0]
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        logits = torch.randn(V, generator=gen)
        ids, _ = next_token_distribution(logits, temperature=0)
        assert ids.tolist() == [int(logits.argmax())]


def test_kept_sets_by_hand():
    def kept(**kwargs):
        return next_token_distribution(LOGITS, **kwargs)[0].tolist()

    assert kept() == [1, 2, 5, 0, 3]  # -inf left out; ties by lower id
    assert kept(top_k=2) == [1, 2]
    assert kept(top_k=100) == [1, 2, 5, 0, 3]
    # four equal logits: 0.25 each, exactly; 0.25 + 0.25 reaches 0.5
    uniform = torch.zeros(4)
    assert next_token_distribution(uniform, top_p=0.5)[0].tolist() == [0, 1]
    # e = 1, .5, .5 (in float64), divided by 2: exactly .5, .25, .25
    logits = torch.tensor([0.0, math.log(2), 0.0], dtype=torch.float64)
    assert next_token_distribution(logits, top_p=0.75)[0].tolist() == [1, 0]
    assert next_token_distribution(logits, top_p=0.76)[0].tolist() == [
        1, 0, 2]
    assert next_token_distribution(logits, top_p=0.5)[0].tolist() == [1]
    # top_k first, then top_p on the renormalised k: .5 / .75 >= .6
    ids, probs = next_token_distribution(logits, top_k=2, top_p=0.6)
    assert ids.tolist() == [1] and probs.tolist() == [1.0]


@pytest.mark.parametrize("temperature", [0.5, 1.0, 3.0])
def test_probabilities_are_the_tempered_softmax(temperature):
    ids, probs = next_token_distribution(LOGITS, temperature=temperature)
    assert probs.dtype == torch.float64
    expected = (LOGITS.double() / temperature).softmax(-1)[ids]
    torch.testing.assert_close(probs, expected, rtol=1e-12, atol=0)
    assert (probs[:-1] >= probs[1:]).all()
    for kwargs in (dict(top_k=3), dict(top_p=0.7)):
        p = next_token_distribution(LOGITS, temperature, **kwargs)[1]
        assert float(p.sum()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("kwargs, message", [
    (dict(temperature=-1), "temperature must be a finite number >= 0, "
                           "got -1"),
    (dict(temperature=math.nan), "temperature .*got nan"),
    (dict(top_k=0), r"top_k must be None or an int >= 1, got 0"),
    (dict(top_k=2.0), r"top_k .*got 2\.0"),
    (dict(top_p=0), r"top_p must be None or a number in \(0, 1\], got 0"),
    (dict(top_p=1.5), r"top_p .*got 1\.5"),
    (dict(logits=[1.0, math.nan, math.inf]), r"NaN or \+inf; ids \[1, 2\]"),
    (dict(logits=[-math.inf] * 3), "every logit is -inf"),
    (dict(logits=torch.ones(2, 3)), r"\(V,\).*\(2, 3\)"),
])
def test_bad_settings_are_refused_by_name(kwargs, message):
    args = dict(logits=LOGITS) | kwargs
    with pytest.raises(ValueError, match=message):
        next_token_distribution(**args)


class FixedDraws:
    def __init__(self, *values):
        self.values = list(values)

    def random(self):
        return self.values.pop(0)


def test_sample_takes_the_first_running_sum_above_u():
    ids, probs = [7, 3, 9], [0.5, 0.25, 0.25]
    draws = FixedDraws(0.0, 0.4999, 0.5, 0.75, 0.99)
    assert [sample(ids, probs, draws) for _ in range(5)] == [7, 7, 3, 9, 9]
    # rounding can leave the sum below u: then the last id
    assert sample([1, 2], [0.3, 0.6999], FixedDraws(0.99995)) == 2
    for probs in ([1.0], [0.5, math.nan], [1.5, -0.5]):
        with pytest.raises(ValueError, match="same length, probs >= 0"):
            sample([1, 2], probs, Mulberry32(0))


def test_sampling_frequencies_match_the_distribution():
    logits = torch.tensor([0.0, 1.0, 2.0, -1.0, 0.5])
    ids, probs = next_token_distribution(logits, temperature=0.8)
    rng, n = Mulberry32(7), 20000
    counts = dict.fromkeys(ids.tolist(), 0)
    for _ in range(n):
        counts[sample(ids, probs, rng)] += 1
    for i, p in zip(ids.tolist(), probs.tolist()):
        assert abs(counts[i] - n * p) < 4 * math.sqrt(n * p * (1 - p)), \
            (i, counts[i], n * p)


# ---- generate and its measures --------------------------------------------

def test_generate_is_reproducible_and_respects_forbid_and_eos():
    model = tiny_model(3)
    kwargs = dict(max_new_tokens=12, eos_id=EOS, forbid=(PAD, BOS, 8))
    runs = [generate(model, [BOS], seed=s, **kwargs) for s in range(6)]
    assert runs[0] == generate(model, [BOS], seed=0, **kwargs)
    assert len({tuple(r) for r in runs}) > 1
    for r in runs:
        assert not {PAD, BOS, 8} & set(r)
        assert EOS not in r[:-1] and 1 <= len(r) <= 12
    assert generate(model, [BOS], 0, EOS) == []


def test_greedy_generation_is_repeated_argmax():
    model = tiny_model(4).train()
    got = generate(model, [BOS, 5], 6, EOS, temperature=0, forbid=[PAD])
    assert model.training  # its mode is restored
    model.eval()
    ids, expected = [BOS, 5], []
    with torch.no_grad():
        for _ in range(6):
            logits = model(torch.tensor([ids]))[0, -1]
            logits[PAD] = -math.inf
            expected.append(int(logits.argmax()))
            ids.append(expected[-1])
            if expected[-1] == EOS:
                break
    assert got == expected


def test_generate_draws_with_one_generator_per_call():
    model = tiny_model(5)
    knobs = dict(temperature=1.3, top_k=5, top_p=0.9)
    got = generate(model, [BOS], 10, EOS, seed=11, forbid=[PAD], **knobs)
    rng, ids = Mulberry32(11), [BOS]
    with torch.no_grad():
        while len(ids) <= 10 and ids[-1] != EOS:
            logits = model(torch.tensor([ids]))[0, -1]
            logits[PAD] = -math.inf
            ids.append(sample(*next_token_distribution(logits, **knobs),
                              rng))
    assert got == ids[1:]


def test_generate_from_a_bigram_model():
    model = NgramLM(2, V, k=0).fit(TOY, BOS, EOS)
    for seed in range(5):
        out = generate(model, [BOS], 5, EOS, seed=seed)
        assert out in ([A, B_, EOS], [A, C, EOS], [A, EOS])


def test_generate_refuses():
    model = tiny_model()
    with pytest.raises(ValueError, match="exceed the model's max_len=32"):
        generate(model, [BOS] * 30, 5, EOS)
    with pytest.raises(ValueError, match=rf"\[{V}\]"):
        generate(model, [BOS], 5, EOS, forbid=[V])
    with pytest.raises(ValueError, match="at least one id"):
        generate(model, [], 5, EOS)
    with pytest.raises(ValueError, match="every logit is -inf"):
        generate(model, [BOS], 5, EOS, forbid=range(V))


def test_distinct_n_by_hand():
    assert distinct_n([[1, 2, 1, 2]], 1) == 2 / 4
    assert distinct_n([[1, 2, 1, 2]], 2) == 2 / 3
    assert distinct_n([[1, 2], [2, 1], [3]], 2) == 1.0
    assert distinct_n([["a", "b"], ["a", "b"]], 2) == 1 / 2
    with pytest.raises(ValueError, match="no 3-gram"):
        distinct_n([[1, 2], [3]], 3)


def test_self_perplexity_scores_the_generated_text():
    model = NgramLM(2, V, k=1).fit(TOY, BOS, EOS)
    generated = [[A, B_, EOS], [A, C]]  # the second was cut short
    assert self_perplexity(model, generated, BOS, EOS) == pytest.approx(
        perplexity(model, [[A, B_], [A, C]], BOS, EOS))
