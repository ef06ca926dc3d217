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
not recomputed).  ``<pad>`` and ``<bos>`` are never chosen: their
logits are set to -inf before the log-softmax, as in greedy decoding
and the page.  Of the 2k best continuations, those that end in
``<eos>`` among the first k are finished and the first k others go
on; of equal scores the lower hypothesis, then the lower token id,
comes first (the lower index in the (k, V) matrix of candidates, as
the page's ``topCandidates``).  A sentence stops when no running
hypothesis can still beat its best finished one (log-probabilities
only fall; the penalty is bounded by lp(max_len)), or at
``max_len``.  With ``beam_size=1`` and ``length_penalty=0`` this is
greedy decoding, token for token (ties too); with a beam as large as
the number of outputs, the exact most likely output.  A step waits
for the device once (for the scores that decide what ends and when
to stop); the ids of the hypotheses that ended are fetched at the
end.

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
import torch.nn.functional as F

from . import metrics
from .attention import AttentionMemory
from .attention_decoder import AttentionState
from .decoding import (
    Translation,
    _check_decode_args,
    _check_sentences,
    _check_vocab,
    _eval_mode,
    _forbidden,
    _nan_error,
    _stepper,
)
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


def _reads_for_free(device):
    """Whether reading a tensor's value on the host costs no wait: on
    the CPU; a GPU would have to finish its queued work first."""
    return device.type == "cpu"


def _best(cand, n):
    """The n best of each row of ``cand`` (B, M), best first, as
    ``(values, indices)`` (B, n); of equal values the lower index first,
    as the page's ``topCandidates`` keeps them (``topk`` alone leaves
    unspecified both their order and which of them it keeps).

    ``topk``'s indices are right but for the values equal to the n-th
    best, which fill its last places: those take the lowest indices
    holding that value.  A stable sort then puts equal values in index
    order.  (A stable sort of whole rows would give the same, in about
    40 times topk's time on a CPU; this takes 3 to 5 times, and on a
    CPU only when the n + 1 best hold a tie.)
    """
    M = cand.shape[-1]
    if _reads_for_free(cand.device) and n < M:
        # Without ties among the n + 1 best, topk's answer is the only
        # one (a check that would make a GPU wait, and costs a CPU
        # nothing; ties are rare with trained logits).
        values, index = cand.topk(n + 1, dim=-1)  # (B, n + 1)
        if not bool((values[:, 1:] == values[:, :-1]).any()):
            return values[:, :n], index[:, :n]
    values, index = cand.topk(n, dim=-1)  # (B, n)
    nth = values[:, -1:]  # (B, 1)
    last = values == nth  # the last `ties` places
    ties = last.sum(-1, keepdim=True)
    # The first n indices holding nth, lowest first: keys M - i > 0
    # (exact in float32, the faster, below 2 ** 24).
    rank = torch.arange(M, 0, -1, device=cand.device,
                        dtype=torch.float32 if M < 2 ** 24 else torch.long)
    lowest = torch.where(cand == nth, rank, 0).topk(n, dim=-1).indices
    place = (torch.arange(n, device=cand.device) - (n - ties)).clamp(min=0)
    index = torch.where(last, lowest.gather(1, place), index)
    index = index.sort(dim=-1).values  # then stably by value:
    values, order = cand.gather(1, index).sort(dim=-1, descending=True,
                                               stable=True)
    return values, index.gather(1, order)


def _fetch_ended(ended_at, max_len):
    """The ids (lists) and attention ((t, [h,] S) or None) of the
    hypotheses that ended, in the order they ended; ``ended_at`` holds,
    for each step where some did, the step's ``(tokens (N, t - 1),
    parents (B, 2k), attention (N, t, [h,] S) or None, slots)``, slots
    the flat indices in parents of those that ended.  The ids come from
    the device in one transfer."""
    ids, maps = [], []
    for tokens, parents, attention, slots in ended_at:
        rows = parents.flatten()[torch.tensor(slots, device=parents.device)]
        # -1 after the ids: a row of every step fits max_len columns.
        ids.append(F.pad(tokens.index_select(0, rows),
                         (0, max_len - tokens.shape[1]), value=-1))
        maps += [None] * len(slots) if attention is None else list(
            attention.index_select(0, rows))
    ids = torch.cat(ids).tolist() if ids else []
    return [row[:row.index(-1)] for row in ids], maps


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

    # (score, log_prob, ids, finished, attention); during the search
    # (score, log_prob, m) for the m-th that ended (see _fetch_ended).
    found: list = field(default_factory=list)
    best: float = -math.inf  # the best score found
    done: bool = False

    def add(self, score, *rest):
        self.found.append((score, *rest))
        self.best = max(self.best, score)


def beam_decode(model, src, src_valid_len, bos, eos, max_len, *,
                beam_size=4, length_penalty=0.0, forbid=None):
    """Translate a batch with beam search (see the module's docstring).

    Runs in eval mode under ``torch.no_grad()`` and restores every
    submodule's mode, like ``greedy_decode``.  A sentence's result does
    not depend on the other sentences of the batch.  NaN (or +inf)
    logits in a sentence still searching raise a ValueError naming the
    step and the sentence.

    Args:
        model: a ``Seq2Seq`` of d2lmini (GRU decoder with or without
            attention, or Transformer).
        src, src_valid_len, bos, eos, max_len, forbid: as for
            ``greedy_decode`` (``forbid``, the ids never emitted: by
            default ``bos`` and ``model.tgt_pad``).
        beam_size: k, the hypotheses kept per sentence (an int >= 1).
        length_penalty: GNMT's alpha >= 0.

    Returns:
        A list of B ``BeamDecoded``.  A hypothesis's ``log_prob`` sums
        the log-probabilities of the softmax over the tokens allowed.
    """
    _check_decode_args(src, src_valid_len, bos, eos, max_len)
    _check_beam_args(beam_size, length_penalty)
    forbid = _forbidden(model, bos, eos, forbid)
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
        banned = torch.tensor(forbid, dtype=torch.long, device=device)
        ended_at, n_ended = [], 0  # see _fetch_ended
        for t in range(1, max_len + 1):
            logits, state, weights = step(Y, state)  # (N, 1, V)
            V = logits.shape[-1]
            if t == 1:
                _check_vocab(V, eos, forbid)
            # (N, V), over the tokens that may be emitted
            logp = torch.log_softmax(logits[:, 0].float().index_fill(
                -1, banned, -math.inf), dim=-1)
            cand = (scores.reshape(N, 1) + logp).reshape(B, k * V)
            top, where = _best(cand, min(2 * k, k * V))  # (B, 2k)
            # (B,): a NaN or +inf logit (or none left to choose) makes a
            # row of log_softmax NaN, and topk ranks NaN first.
            nan = top[:, 0].isnan()
            parent, token = where // V, where % V
            parents = base + parent  # (B, 2k): their rows
            if weights is not None:  # (N, [h,] 1, S) -> (N, 1, [h,] S)
                w = weights.squeeze(-2).unsqueeze(1).float()
                attention = w if attention is None else \
                    torch.cat([attention, w], 1)
            is_eos = (token == eos) & torch.isfinite(top)
            ranks = torch.arange(top.shape[1], device=device)
            # Finished: <eos> among the first k continuations.
            ended = is_eos & (ranks < k)
            ended_tokens, ended_attention = tokens, attention
            # Running: the first k continuations that are not <eos>.
            keep = (~is_eos).float().cumsum(-1) <= k
            keep &= ~is_eos
            pick = torch.sort(keep.float(), dim=-1, descending=True,
                              stable=True).indices[:, :k]  # (B, k)
            scores = torch.where(keep.gather(1, pick), top.gather(1, pick),
                                 -math.inf)
            rows = parents.gather(1, pick).reshape(N)
            tokens = torch.cat([tokens.index_select(0, rows),
                                token.gather(1, pick).reshape(N, 1)], 1)
            if attention is not None:
                attention = attention.index_select(0, rows)
            # A sentence is over when none of its running hypotheses can
            # beat its best finished one: a score only falls, and
            # dividing it by lp(max_len) is the most it can gain.
            best_running = scores.max(-1).values / lp(max_len)  # (B,)
            # The step's one wait for the device: the scores of the
            # hypotheses that end (NaN for the others), each sentence's
            # best running score and whether its logits are NaN.
            host = torch.cat([torch.where(ended, top, math.nan).flatten(),
                              best_running, nan.float()]).tolist()
            n = top.shape[1]
            ended_l, best_running, nan_l = (host[:B * n], host[B * n:-B],
                                            host[-B:])
            broken = [b for b, s in enumerate(sentences)
                      if nan_l[b] and not s.done]
            if broken:
                raise _nan_error(t, broken[0])
            slots = [b * n + j for b, s in enumerate(sentences)
                     if not s.done  # its search is over: keep it so
                     for j in range(k) if not math.isnan(ended_l[b * n + j])]
            for slot in slots:  # their ids and attention: _fetch_ended
                raw = ended_l[slot]
                sentences[slot // n].add(raw / lp(t), raw, n_ended)
                n_ended += 1
            if slots:
                ended_at.append((ended_tokens, parents, ended_attention,
                                 slots))
            for b, s in enumerate(sentences):
                if s.found and not s.done:
                    s.done = s.best >= best_running[b]
                if best_running[b] == -math.inf:
                    s.done = True
            if all(s.done for s in sentences) or t == max_len:
                break
            state = reorder_state(state, rows)
            Y = tokens[:, -1:]
        ids, maps = _fetch_ended(ended_at, max_len)
        for s in sentences:
            s.found = [(score, raw, ids[m], True, maps[m])
                       for score, raw, m in s.found]
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
    """Translate sentences with beam search (``beam_decode``), never
    emitting the target vocabulary's ``<pad>`` or ``<bos>``.

    Args:
        model, data, sentences, max_len: as for ``d2lmini.translate``
            (an empty or blank sentence is refused).
        beam_size: k >= 1; 1 (with ``length_penalty=0``) is greedy.
        length_penalty: GNMT's alpha >= 0.

    Returns:
        A list of ``BeamTranslation``.
    """
    sentences = _check_sentences(sentences)
    _check_beam_args(beam_size, length_penalty)
    src, _, src_valid_len, _ = data.build(sentences)
    vocab = data.tgt_vocab
    max_len = data.num_steps if max_len is None else max_len
    decoded = beam_decode(model, src, src_valid_len, vocab.bos, vocab.eos,
                          max_len, beam_size=beam_size,
                          length_penalty=length_penalty,
                          forbid=(vocab.pad, vocab.bos))
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
