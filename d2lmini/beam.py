"""Beam search: translate a batch, or a list of sentences, keeping the
``k`` most likely partial translations at each step instead of greedy's
one.

A hypothesis y = y_1 ... y_t scores log P(y | x) = sum_i log p(y_i |
y_<i, x), divided by GNMT's length penalty lp(t) = ((5 + t) / 6) **
alpha (Wu et al., 2016); alpha = 0 compares plain log-probabilities,
which favour short outputs, and a larger alpha favours longer ones.
t counts the tokens emitted, ``<eos>`` included; a hypothesis cut at
``max_len`` without ``<eos>`` competes with its ``max_len`` tokens.

Every step runs the decoder once on the k hypotheses of every sentence
(B * k rows); the decoder's state follows each hypothesis's parent
(the GRU's hidden state; a Transformer's key/value cache, reordered,
not recomputed).  Of the 2k best continuations, those that end in
``<eos>`` among the first k are finished and the first k others go
on.  A sentence stops when no running hypothesis can still beat its
best finished one (log-probabilities only fall; the penalty is bounded
by lp(max_len)), or at ``max_len``.  With ``beam_size=1`` and
``length_penalty=0`` this is greedy decoding, token for token; with a
beam as large as the number of outputs, the exact most likely output.

Shape legend: B sentences, k beam size, S source steps, h heads, V
target vocabulary.  This module takes no part in training, so the
cached models do not depend on it (``d2lmini.cache``).
"""

import math
import numbers
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from . import metrics
from .attention import AttentionMemory
from .attention_decoder import AttentionState
from .decoding import Translation, _check_decode_args, _eval_mode, _stepper
from .experiment import _sources
from .seq2seq import DecoderState
from .transformer import TransformerState
from .utils import check_int

__all__ = ["BeamDecoded", "BeamEval", "BeamTranslation", "Hypothesis",
           "beam_decode", "beam_evaluate", "beam_translate",
           "choose_length_penalty", "length_penalty_of", "reorder_state"]


def length_penalty_of(length, alpha):
    """GNMT's lp(length) = ((5 + length) / 6) ** alpha (1 when alpha is
    0)."""
    return ((5 + length) / 6) ** alpha


class Hypothesis(NamedTuple):
    """One finished hypothesis of a sentence.

    ids: output ids without ``<eos>``; log_prob: the sum of the log
    probabilities of its tokens (``<eos>`` included when emitted);
    score: ``log_prob / length_penalty_of(steps, alpha)``, what the
    search ranks by; finished: whether it ended with ``<eos>`` (not cut
    at ``max_len``); attention: (steps, S_valid) or (h, steps,
    S_valid), as ``Decoded.attention``, or None.
    """

    ids: list
    log_prob: float
    score: float
    finished: bool
    attention: torch.Tensor


class BeamDecoded(NamedTuple):
    """Beam search's output for one sentence: the fields of greedy's
    ``Decoded`` for the best hypothesis, its ``score`` and ``log_prob``,
    and ``hypotheses``: every finished hypothesis the search kept (at
    most ``beam_size``), best first; the first is the best."""

    ids: list
    attention: torch.Tensor
    finished: bool
    score: float
    log_prob: float
    hypotheses: list


def _check_beam_args(beam_size, length_penalty):
    check_int("beam_size", beam_size)
    if isinstance(length_penalty, bool) or not isinstance(
            length_penalty, numbers.Real):
        raise TypeError(f"length_penalty must be a number (GNMT's alpha, "
                        f"e.g. 0.6), got {length_penalty!r}")
    if not math.isfinite(length_penalty) or length_penalty < 0:
        raise ValueError(f"length_penalty must be a finite number >= 0 "
                         f"(0: plain log-probabilities), got "
                         f"{length_penalty!r}")


def _expand_encoding(enc, k):
    """The encoder's outputs with each sentence repeated k times (rows
    b * k ... b * k + k - 1): a tensor (B, S, D), or a GRU encoder's
    (outputs (B, S, D), hidden (layers, B, D))."""
    if torch.is_tensor(enc):
        return enc.repeat_interleave(k, 0)
    outputs, hidden = enc
    return outputs.repeat_interleave(k, 0), hidden.repeat_interleave(k, 1)


def reorder_state(state, index):
    """The decoder state of the rows ``index`` (N,): each hypothesis
    takes its parent's state.  What the encoder gave is the same for
    every row of a sentence, and a row's parent is a row of the same
    sentence, so only what the steps changed is gathered."""
    if isinstance(state, (DecoderState, AttentionState)):
        return state._replace(hidden=state.hidden.index_select(1, index))
    if isinstance(state, TransformerState):
        caches = []
        for cache in state.caches:
            if cache is None:
                caches.append(None)
                continue
            h = cache.keys.shape[0] // len(index)  # heads, folded inner
            rows = (index[:, None] * h + torch.arange(
                h, device=index.device)).reshape(-1)
            caches.append(AttentionMemory(
                cache.keys.index_select(0, rows),
                cache.values.index_select(0, rows), cache.mask))
        return state._replace(caches=caches)
    raise TypeError(f"beam search reorders the states of d2lmini's "
                    f"decoders (DecoderState, AttentionState, "
                    f"TransformerState), not {type(state).__name__}")


@dataclass
class _Sentence:
    """The finished hypotheses of one sentence, and whether its search
    is over."""

    found: list = field(default_factory=list)  # (score, log_prob, ...)
    best: float = -math.inf  # the best score found
    done: bool = False

    def add(self, score, *rest):
        self.found.append((score, *rest))
        self.best = max(self.best, score)


def beam_decode(model, src, src_valid_len, bos, eos, max_len, *,
                beam_size=4, length_penalty=0.0):
    """Translate a batch with beam search (see the module's docstring).

    Runs in eval mode under ``torch.no_grad()`` and restores every
    submodule's mode, like ``greedy_decode``.  A sentence's result does
    not depend on the other sentences of the batch.

    Args:
        model: a ``Seq2Seq`` of d2lmini (GRU decoder with or without
            attention, or Transformer).
        src, src_valid_len, bos, eos, max_len: as for ``greedy_decode``.
        beam_size: k, the hypotheses kept per sentence (an int >= 1).
        length_penalty: GNMT's alpha >= 0.

    Returns:
        A list of B ``BeamDecoded``.
    """
    _check_decode_args(src, src_valid_len, bos, eos, max_len)
    _check_beam_args(beam_size, length_penalty)
    device = next(model.parameters()).device
    src = src.to(device)
    if src_valid_len is not None:
        src_valid_len = src_valid_len.to(device)
    B, k = len(src), beam_size
    N = B * k
    valid = None if src_valid_len is None else \
        src_valid_len.repeat_interleave(k)
    sentences = [_Sentence() for _ in range(B)]
    lp = lambda t: length_penalty_of(t, length_penalty)  # noqa: E731
    with _eval_mode(model), torch.no_grad():
        enc = _expand_encoding(model.encoder(src, src_valid_len), k)
        state = model.decoder.init_state(enc, valid)
        step = _stepper(model.decoder)
        # Row b * k + j is hypothesis j of sentence b; at first one per
        # sentence (the others, -inf, are empty slots).
        scores = torch.full((B, k), -math.inf, device=device)
        scores[:, 0] = 0.0
        Y = torch.full((N, 1), bos, device=device)
        tokens = torch.zeros((N, 0), dtype=torch.long, device=device)
        attention = None  # (N, t, [h,] S)
        base = torch.arange(B, device=device)[:, None] * k  # (B, 1)
        for t in range(1, max_len + 1):
            logits, state, weights = step(Y, state)  # (N, 1, V)
            V = logits.shape[-1]
            logp = torch.log_softmax(logits[:, 0].float(), dim=-1)
            cand = (scores.reshape(N, 1) + logp).reshape(B, k * V)
            top, where = cand.topk(min(2 * k, k * V), dim=-1)  # (B, 2k)
            parent, token = where // V, where % V
            if weights is not None:  # (N, [h,] 1, S) -> (N, 1, [h,] S)
                w = weights.squeeze(-2).unsqueeze(1).float()
                attention = w if attention is None else \
                    torch.cat([attention, w], 1)
            is_eos = (token == eos) & torch.isfinite(top)
            ranks = torch.arange(top.shape[1], device=device)
            # Finished: <eos> among the first k continuations.
            ended = (is_eos & (ranks < k)).nonzero().tolist()
            if ended:  # as lists once: item by item, tensors are slow
                rows_l = (base + parent).tolist()
                top_l, tokens_l = top.tolist(), tokens.tolist()
            for b, j in ended:
                if sentences[b].done:  # its search is over: keep it so
                    continue
                row, raw = rows_l[b][j], top_l[b][j]
                sentences[b].add(
                    raw / lp(t), raw, tokens_l[row], True,
                    None if attention is None else attention[row])
            # Running: the first k continuations that are not <eos>.
            keep = (~is_eos).float().cumsum(-1) <= k
            keep &= ~is_eos
            pick = torch.sort(keep.float(), dim=-1, descending=True,
                              stable=True).indices[:, :k]  # (B, k)
            scores = torch.where(keep.gather(1, pick), top.gather(1, pick),
                                 -math.inf)
            rows = (base + parent.gather(1, pick)).reshape(N)
            tokens = torch.cat([tokens.index_select(0, rows),
                                token.gather(1, pick).reshape(N, 1)], 1)
            if attention is not None:
                attention = attention.index_select(0, rows)
            # A sentence is over when none of its running hypotheses can
            # beat its best finished one: a score only falls, and
            # dividing it by lp(max_len) is the most it can gain.
            best_running = (scores.max(-1).values / lp(max_len)).tolist()
            for b, s in enumerate(sentences):
                if s.found and not s.done:
                    s.done = s.best >= best_running[b]
                if best_running[b] == -math.inf:
                    s.done = True
            if all(s.done for s in sentences) or t == max_len:
                break
            state = reorder_state(state, rows)
            Y = tokens[:, -1:]
        if not all(s.done for s in sentences):  # cut at max_len
            tokens_l = tokens.tolist()
            for row, raw in enumerate(scores.reshape(N).tolist()):
                s = sentences[row // k]
                if raw > -math.inf and not s.done:
                    s.add(raw / lp(max_len), raw, tokens_l[row], False,
                          None if attention is None else attention[row])
    return [_result(s.found, k, src_valid_len, i, eos)
            for i, s in enumerate(sentences)]


def _result(found, k, src_valid_len, i, eos):
    """The ``BeamDecoded`` of one sentence's finished hypotheses."""
    found = sorted(found, key=lambda f: -f[0])[:k]
    hyps = []
    for score, raw, ids, finished, attention in found:
        if attention is not None:
            steps = len(ids) + finished
            attention = attention[:steps]  # (steps, [h,] S)
            if attention.dim() == 3:  # -> (h, steps, S)
                attention = attention.transpose(0, 1)
            if src_valid_len is not None:
                attention = attention[..., :int(src_valid_len[i])]
            attention = attention.cpu()
        hyps.append(Hypothesis(ids, raw, score, finished, attention))
    best = hyps[0]
    return BeamDecoded(best.ids, best.attention, best.finished, best.score,
                       best.log_prob, hyps)


@dataclass
class BeamTranslation(Translation):
    """``Translation`` of the best hypothesis, with its ``score`` and
    ``log_prob`` and the finished ``hypotheses`` as (tokens, score)
    pairs, best first."""

    score: float = 0.0
    log_prob: float = 0.0
    finished: bool = True
    hypotheses: list = field(default_factory=list)


def beam_translate(model, data, sentences, *, beam_size=4,
                   length_penalty=0.0, max_len=None):
    """Translate sentences with beam search (``beam_decode``).

    Args:
        model, data, sentences, max_len: as for ``d2lmini.translate``.
        beam_size: k >= 1; 1 (with ``length_penalty=0``) is greedy.
        length_penalty: GNMT's alpha >= 0.

    Returns:
        A list of ``BeamTranslation``.
    """
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of strings, not a "
                        "string; wrap it: [sentence]")
    _check_beam_args(beam_size, length_penalty)
    src, _, src_valid_len, _ = data.build(list(sentences))
    vocab = data.tgt_vocab
    max_len = data.num_steps if max_len is None else max_len
    decoded = beam_decode(model, src, src_valid_len, vocab.bos, vocab.eos,
                          max_len, beam_size=beam_size,
                          length_penalty=length_penalty)
    results = []
    for row, n, out in zip(src.tolist(), src_valid_len.tolist(), decoded):
        out_tokens = vocab.to_tokens(out.ids + [vocab.eos] * out.finished)
        results.append(BeamTranslation(
            data.src_vocab.to_tokens(row[:n]), out_tokens[:len(out.ids)],
            out_tokens, out.attention, score=out.score,
            log_prob=out.log_prob, finished=out.finished,
            hypotheses=[(vocab.to_tokens(h.ids), h.score)
                        for h in out.hypotheses]))
    return results


class BeamEval(NamedTuple):
    """What ``beam_evaluate`` measured; BLEU and chrF are in 0-100, as
    ``d2lmini.experiment.evaluate`` gives them (multi-reference,
    tokenize='none')."""

    split: str
    beam_size: int
    length_penalty: float
    bleu: float
    chrf: float
    exact: int  # outputs equal to one of their references
    length_ratio: float  # output tokens / closest reference's, summed
    log_probs: list  # log P(output | source) of each output
    sources: list
    hypotheses: list
    references: list
    decode_time: float  # seconds of decoding the split


def beam_evaluate(model, data, split="test", *, beam_size=4,
                  length_penalty=0.0, batch_size=250):
    """Beam-translate the unique English sources of a split and score
    them as ``d2lmini.experiment.evaluate`` does.

    Args:
        model, data, split, batch_size: as for ``evaluate``.
        beam_size, length_penalty: as for ``beam_translate``.

    Returns:
        A ``BeamEval``.
    """
    _check_beam_args(beam_size, length_penalty)
    check_int("batch_size", batch_size)
    sources = _sources(data, split)
    references = [data.references(s) for s in sources]
    outputs, start = [], time.perf_counter()
    for i in range(0, len(sources), batch_size):
        outputs += beam_translate(model, data, sources[i:i + batch_size],
                                  beam_size=beam_size,
                                  length_penalty=length_penalty)
    decode_time = time.perf_counter() - start
    hypotheses = [t.text for t in outputs]
    bleu = metrics.corpus_bleu(hypotheses, references)
    return BeamEval(
        split, beam_size, float(length_penalty), bleu.score,
        metrics.corpus_chrf(hypotheses, references).score,
        sum(h in refs for h, refs in zip(hypotheses, references)),
        bleu.sys_len / bleu.ref_len, [t.log_prob for t in outputs],
        sources, hypotheses, references, decode_time)


def choose_length_penalty(model, data, beam_size, alphas, split="val"):
    """The length penalty of ``alphas`` whose beam search scores the
    highest BLEU on ``split`` (the validation split: choosing on the
    test split would tune to the sentences the result is reported on).
    Ties go to the first of ``alphas``.

    Returns:
        ``(alpha, {alpha: BeamEval})``.
    """
    alphas = list(alphas)
    if not alphas:
        raise ValueError("alphas is empty; pass the length penalties to "
                         "try, e.g. (0.0, 0.5, 1.0)")
    runs = {alpha: beam_evaluate(model, data, split, beam_size=beam_size,
                                 length_penalty=alpha) for alpha in alphas}
    best = max(alphas, key=lambda a: (runs[a].bleu, -alphas.index(a)))
    return best, runs
