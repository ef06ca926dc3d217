"""Generation: sampling the next token, one pseudo-random generator
that JavaScript repeats exactly, and measures of what was generated.

``Mulberry32``, ``next_token_distribution`` and ``sample`` are written
so that a JavaScript port, step for step the same float64 operations,
draws the same tokens from the same logits and seed; ``generate`` runs
them on a ``d2lmini.pretraining.LanguageModel`` (or an ``NgramLM``).

Shape legend for every comment and docstring in this module:
    V  vocabulary size      K  kept candidate tokens      T  time steps
"""

import math

import torch

from .pretraining import (
    NgramLM,
    _check_id_list,
    _check_setting,
    _device,
    perplexity,
)
from .utils import check_int

__all__ = ["SETTINGS", "Mulberry32", "distinct_n", "exp64", "generate",
           "next_token_distribution", "sample", "sample_study",
           "self_perplexity"]

# The decoding settings that the section compares (keyword arguments of
# ``generate``).
SETTINGS = {"greedy": {"temperature": 0},
            "temperature 0.7": {"temperature": 0.7},
            "temperature 1": {"temperature": 1.0},
            "temperature 1.5": {"temperature": 1.5},
            "top-k 10": {"top_k": 10},
            "top-p 0.9": {"top_p": 0.9}}


class Mulberry32:
    """The mulberry32 pseudo-random generator: 32 bits of state, one
    float in [0, 1) per ``random()``, the same in Python and JavaScript.

    Each call, with every intermediate kept to 32 bits (& 0xFFFFFFFF)::

        state = (state + 0x6D2B79F5) mod 2^32;  z = state
        z = (z ^ (z >>> 15)) * (z | 1)            mod 2^32
        z = z ^ ((z + (z ^ (z >>> 7)) * (z | 61)) mod 2^32)
        return (z ^ (z >>> 14)) / 2^32

    The JavaScript, with ``a = seed >>> 0``::

        a = (a + 0x6D2B79F5) >>> 0; let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;

    Args:
        seed: an int in [0, 2^32).
    """

    def __init__(self, seed=0):
        if isinstance(seed, bool) or not isinstance(seed, int) \
                or not 0 <= seed < 2 ** 32:
            raise ValueError(f"seed must be an int in [0, 2**32), "
                             f"got {seed!r}")
        self.state = seed

    def random(self):
        M = 0xFFFFFFFF
        self.state = (self.state + 0x6D2B79F5) & M
        z = self.state
        z = ((z ^ (z >> 15)) * (z | 1)) & M
        z ^= (z + (((z ^ (z >> 7)) * (z | 61)) & M)) & M
        return (z ^ (z >> 14)) / 2 ** 32


# exp64: Cody and Waite's reduction x = k ln 2 + r (ln 2 in two parts,
# fdlibm's), e^r by its Taylor polynomial of degree 13 (|r| <= 0.35:
# the first term left out is below 1e-17 of the sum), times 2^k.  Every
# step is one IEEE operation, in the same order in the page's
# ``exp64`` (js/lm.js), so the two give the same bits; ``math.exp`` and
# ``Math.exp`` may differ by an ulp, which can decide a top-p cut.
_LN2_HI, _LN2_LO = 0.6931471803691238, 1.9082149292705877e-10
_INV_LN2 = 1.4426950408889634
_EXP_COEFFS = (1.6059043836821613e-10, 2.08767569878681e-09,
               2.505210838544172e-08, 2.755731922398589e-07,
               2.7557319223985893e-06, 2.48015873015873e-05,
               0.0001984126984126984, 0.001388888888888889,
               0.008333333333333333, 0.041666666666666664,
               0.16666666666666666, 0.5, 1.0, 1.0)  # 1/13!, ..., 1/0!


def exp64(x):
    """e^x for float64 ``x <= 0`` (a tensor; -inf gives 0), computed as
    the page's ``exp64`` computes it, bit for bit, within 2 ulp of the
    exact value (0 below -746)."""
    x = torch.as_tensor(x, dtype=torch.float64)
    if (x > 0).any() or x.isnan().any():
        raise ValueError("exp64 takes numbers <= 0 (shifted logits), "
                         "no NaN")
    ok = x > -746.0
    x = torch.where(ok, x, 0.0)
    k = torch.floor(x * _INV_LN2 + 0.5)
    r = (x - k * _LN2_HI) - k * _LN2_LO
    y = torch.full_like(r, _EXP_COEFFS[0])
    for c in _EXP_COEFFS[1:]:  # Horner: a product, then a sum
        y = y * r
        y = y + c
    return torch.where(ok, y * torch.pow(2.0, k), 0.0)


def next_token_distribution(logits, temperature=1.0, top_k=None,
                            top_p=None):
    """The candidates and probabilities that ``sample`` draws from.

    In float64, step by step as a JavaScript port repeats it:
    e_i = exp64((logit_i - max logit) / temperature); candidates sorted by e
    descending, ties by lower id, those with e = 0 left out; ``top_k``
    keeps the first k; ``top_p`` keeps the shortest prefix whose running
    sum of e_i / (sum of the kept e, added in that order) reaches p;
    probabilities e_i / (sum of the kept e).  Temperature 0 is greedy:
    the highest logit (the lowest such id) with probability 1.

    Args:
        logits: (V,) scores; -inf rules an id out; no NaN or +inf.
        temperature: >= 0.  top_k: None or an int >= 1.
        top_p: None or a number in (0, 1].

    Returns:
        ``(ids, probs)``: (K,) int64 and (K,) float64, in that order.
    """
    _check_setting("temperature", temperature,
                   lambda t: isinstance(t, (int, float)) and
                   0 <= t < math.inf, "a finite number >= 0")
    _check_setting("top_k", top_k, lambda k: k is None or
                   isinstance(k, int) and k >= 1, "None or an int >= 1")
    _check_setting("top_p", top_p, lambda p: p is None or
                   isinstance(p, (int, float)) and 0 < p <= 1,
                   "None or a number in (0, 1]")
    z = torch.as_tensor(logits).detach().to("cpu", torch.float64)
    if z.dim() != 1 or not len(z):
        raise ValueError(f"logits must be a non-empty (V,) vector, got "
                         f"shape {tuple(z.shape)}")
    if z.isnan().any() or (z == math.inf).any():
        bad = torch.nonzero(z.isnan() | (z == math.inf)).flatten()
        raise ValueError(f"logits must not be NaN or +inf; ids "
                         f"{bad.tolist()[:8]} are")
    if (z == -math.inf).all():
        raise ValueError("every logit is -inf: no token may be drawn")
    z = z.tolist()
    top = max(z)
    if temperature == 0:
        return torch.tensor([z.index(top)]), torch.tensor([1.0],
                                                          dtype=torch.float64)
    e = exp64((torch.tensor(z, dtype=torch.float64) - top)
              / temperature).tolist()
    order = sorted((i for i in range(len(e)) if e[i] > 0),
                   key=lambda i: (-e[i], i))
    order = order[:top_k]
    if top_p is not None:
        total, running = _sum(e[i] for i in order), 0.0
        for n, i in enumerate(order, 1):
            running += e[i] / total
            if running >= top_p:
                order = order[:n]
                break
    total = _sum(e[i] for i in order)
    return (torch.tensor(order),
            torch.tensor([e[i] / total for i in order], dtype=torch.float64))


def _sum(values):
    """A float sum in the given order (as a JavaScript loop adds)."""
    total = 0.0
    for v in values:
        total += v
    return total


def sample(ids, probs, rng):
    """One id: u = rng.random(), then the first id at which the running
    sum of ``probs`` (float64, in the given order) exceeds u; the last
    id if rounding leaves the sum at or below u.

    ``rng`` is a ``Mulberry32`` (or anything with ``random()``).
    """
    ids, probs = list(map(int, ids)), [float(p) for p in probs]
    if not ids or len(ids) != len(probs) \
            or not all(p >= 0 for p in probs):  # NaN fails too
        raise ValueError(f"ids and probs must be non-empty, of the same "
                         f"length, probs >= 0; got {len(ids)} ids and "
                         f"probs {probs[:8]}")
    u, running = rng.random(), 0.0
    for i, p in zip(ids, probs):
        running += p
        if running > u:
            return i
    return ids[-1]


def generate(model, prefix_ids, max_new_tokens, eos_id, temperature=1.0,
             top_k=None, top_p=None, seed=0, forbid=()):
    """Continue ``prefix_ids`` one sampled token at a time.

    Every step runs the model on the whole sequence so far, sets the
    logits of ``forbid`` (e.g. pad, bos) to -inf and draws with
    ``next_token_distribution`` and ``sample`` from one
    ``Mulberry32(seed)``; it stops after ``eos_id`` or
    ``max_new_tokens`` tokens.  ``model`` is a ``LanguageModel`` (run in
    eval mode without gradients; its mode is restored) or an
    ``NgramLM`` (which conditions on the last id only).

    Returns:
        The new ids (a list, without the prefix), ending with ``eos_id``
        if it was drawn.
    """
    check_int("max_new_tokens", max_new_tokens, 0)
    V = model.vocab_size
    ids = list(prefix_ids)
    if not ids:
        raise ValueError("prefix_ids must hold at least one id (<bos>)")
    _check_id_list(ids + [eos_id] + list(forbid), V,
                   "prefix_ids, eos_id and forbid")
    longest = getattr(model, "max_len", math.inf)
    if len(ids) + max_new_tokens - 1 > longest:
        raise ValueError(f"{len(ids)} prefix ids + {max_new_tokens} new "
                         f"ones exceed the model's max_len={longest}")
    rng, new = Mulberry32(seed), []
    ngram = isinstance(model, NgramLM)
    was_training = not ngram and model.training
    if not ngram:
        model.eval()
    try:
        with torch.no_grad():
            for _ in range(max_new_tokens):
                logits = model.probs(ids[-1]).log() if ngram else \
                    model(torch.tensor([ids], device=_device(model)))[0, -1]
                logits = logits.double().clone()
                logits[list(forbid)] = -math.inf
                token = sample(*next_token_distribution(
                    logits, temperature, top_k, top_p), rng)
                ids.append(token)
                new.append(token)
                if token == eos_id:
                    break
    finally:
        if not ngram:
            model.train(was_training)
    return new


def distinct_n(sequences, n):
    """Distinct n-grams / all n-grams, over every sequence together
    (Li et al., 2016): 1 when nothing repeats, small for a model that
    says the same thing again and again."""
    check_int("n", n)
    grams = [tuple(s[i:i + n]) for s in sequences
             for i in range(len(s) - n + 1)]
    if not grams:
        raise ValueError(f"no {n}-gram: every sequence is shorter than {n}")
    return len(set(grams)) / len(grams)


def self_perplexity(model, sequences, bos, eos):
    """The perplexity of generated ``sequences`` (as ``generate`` returns
    them from the prefix [bos]) under the model itself: low for the
    model's favourite, often repetitive, text.  A final ``eos`` is the
    one ``perplexity`` adds; a sequence cut at ``max_new_tokens`` is
    scored as if it ended there."""
    return perplexity(model, [s[:-1] if s and s[-1] == eos else s
                              for s in sequences], bos, eos)


def sample_study(model, bos, eos, settings=None, seeds=(0,), n=100,
                 max_new_tokens=20, forbid=(), known=()):
    """What each decoding setting writes, measured.

    For every named setting (``generate``'s keyword arguments, default
    ``SETTINGS``) and seed, ``n`` sentences are generated from ``[bos]``
    with the generator seeds ``seed * n`` to ``seed * n + n - 1``.

    Returns:
        name -> one dict per seed: ``distinct_1`` and ``distinct_2``
        over its ``n`` sentences, ``self_ppl`` (``self_perplexity``),
        ``mean_len`` (new tokens, ``eos`` included), ``copied`` (the
        share of sentences, without ``eos``, that are in ``known``: id
        tuples of the training text) and the first three ``samples``.
    """
    settings = SETTINGS if settings is None else settings
    check_int("n", n)
    known = set(map(tuple, known))
    study = {}
    for name, kwargs in settings.items():
        study[name] = []
        for seed in seeds:
            out = [generate(model, [bos], max_new_tokens, eos, seed=seed * n
                            + i, forbid=forbid, **kwargs) for i in range(n)]
            words = [s[:-1] if s and s[-1] == eos else s for s in out]
            study[name].append({
                "seed": seed, "distinct_1": distinct_n(words, 1),
                "distinct_2": distinct_n(words, 2),
                "self_ppl": self_perplexity(model, out, bos, eos),
                "mean_len": sum(map(len, out)) / n,
                "copied": sum(tuple(w) in known for w in words) / n,
                "samples": out[:3]})
    return study
