"""Greedy decoding: translate a batch, or a list of sentences, one token
at a time with a trained ``Seq2Seq`` of ``d2lmini.seq2seq``.

Shape legend for every comment and docstring in this module:
    B  batch size       S  source steps (the keys)   h  attention heads

``src_valid_len`` (B,) is the number of valid source tokens (``<eos>``
included), as in ``d2lmini.seq2seq``.
"""

import contextlib
import functools
import inspect
import math
import threading
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .seq2seq import _check_ids, _check_lens
from .tokenizer import preprocess, tokenize
from .utils import check_int

__all__ = ["Decoded", "Translation", "attention_heads", "greedy_decode",
           "translate"]


def attention_heads(model):
    """How many heads the attention that ``greedy_decode`` reports has
    (1 for additive attention), or None for a decoder without one.

    A Transformer reports its last decoder block's attention to the
    source; the RNN decoders their one attention layer.
    """
    decoder = getattr(model, "decoder", None)
    if hasattr(decoder, "cross_attention_weights"):
        return decoder.num_heads
    attention = getattr(decoder, "attention", None)
    if not isinstance(attention, torch.nn.Module):
        return None
    return getattr(attention, "num_heads", 1)


def _step_weights(decoder):
    """The attention to the source of the step just decoded: (B, 1, S),
    or (B, h, 1, S) for several heads; None without attention."""
    if hasattr(decoder, "cross_attention_weights"):
        return decoder.cross_attention_weights
    if hasattr(decoder, "attention_weights"):
        return decoder.attention_weights[-1]
    return None


def _stepper(decoder):
    """``step(Y, state) -> (logits, state, weights)``: one decoding step
    and its attention to the source, (B, 1, S) or (B, h, 1, S), or None.

    d2lmini's decoders with attention return the weights of the call
    (``return_attention=True``), so that calls in other threads cannot
    change them; a decoder of another kind is read after the call.
    """
    forward = inspect.signature(decoder.forward).parameters
    if "return_attention" in forward:
        return functools.partial(decoder, return_attention=True)

    def step(Y, state):
        logits, state = decoder(Y, state)
        return logits, state, _step_weights(decoder)
    return step


# module -> [decoding calls running, its mode before the first of them]
_EVAL_CALLS = {}
_EVAL_LOCK = threading.Lock()


@contextlib.contextmanager
def _eval_mode(model):
    """Run the block with every submodule of ``model`` in eval mode, then
    give each its own train/eval mode back.

    Calls that overlap (threads decoding one model, or two models that
    share a module) share the switch: the first one saves a module's
    mode, the last one restores it, so that no call runs with a mode
    that another has restored, and a model in train mode ends in train
    mode.
    """
    modules = list(model.modules())
    with _EVAL_LOCK:
        for m in modules:
            _EVAL_CALLS.setdefault(m, [0, m.training])[0] += 1
            m.training = False
    try:
        yield
    finally:
        with _EVAL_LOCK:
            for m in modules:
                entry = _EVAL_CALLS[m]
                entry[0] -= 1
                if entry[0] == 0:
                    del _EVAL_CALLS[m]
                    m.training = entry[1]


def _check_decode_args(src, src_valid_len, bos, eos, max_len):
    """Raise unless greedy_decode's arguments describe a real batch."""
    _check_ids(src, "src")
    if len(src) == 0:
        raise ValueError(f"src holds no sentence (shape {tuple(src.shape)})"
                         ": give a batch of at least one")
    if src_valid_len is not None:
        _check_lens(src_valid_len, src, "src_valid_len")
    check_int("bos", bos, 0)
    check_int("eos", eos, 0)
    check_int("max_len", max_len)


def _forbidden(model, bos, eos, forbid):
    """The sorted token ids that decoding never emits: ``forbid``, or by
    default ``bos`` and the model's target ``<pad>`` (``model.tgt_pad``,
    when it has one).  Raise unless they are ints >= 0 without ``eos``."""
    if forbid is None:
        pad = getattr(model, "tgt_pad", None)
        forbid = (bos,) if pad is None else (pad, bos)
    if isinstance(forbid, (str, bytes)) or not hasattr(forbid, "__iter__"):
        raise TypeError(f"forbid must be a collection of token ids, e.g. "
                        f"(pad, bos), or () to allow every token; got "
                        f"{forbid!r}")
    forbid = list(forbid)
    for i, token in enumerate(forbid):
        check_int(f"forbid[{i}]", token, 0)
    if eos in forbid:
        raise ValueError(f"forbid {tuple(forbid)!r} holds eos={eos}: "
                         "decoding must be able to emit <eos>; forbid "
                         "<pad> and <bos> only")
    return tuple(sorted(set(forbid)))


def _check_vocab(vocab_size, eos, forbid):
    """Raise unless ``eos`` and the ``forbid`` ids are ids of the
    decoder's output vocabulary (the last axis of its logits)."""
    bad = [f"eos={eos}"] * (eos >= vocab_size) + [
        f"forbid id {token}" for token in forbid if token >= vocab_size]
    if bad:
        raise ValueError(
            f"{', '.join(bad)} outside the decoder's output vocabulary "
            f"(ids 0 to {vocab_size - 1}): pass the ids of the target "
            "vocabulary the model was trained with (data.tgt_vocab.eos, "
            ".pad, .bos)")


def _nan_error(step, sentence):
    """The error for a model whose logits hold NaN (or +inf)."""
    return ValueError(
        f"the model produced NaN (or +inf) logits at decoding step {step} "
        f"of sentence {sentence} of the batch, so no token can be chosen: "
        "its weights (or the source ids) are broken; check them, e.g. "
        "all(p.isfinite().all() for p in model.parameters()), and "
        "retrain it if they hold NaN or inf (a lower learning rate, "
        "gradient clipping)")


def _check_sentences(sentences):
    """``sentences`` as a list; raise unless it is a list (not a string)
    whose strings each have a token after tokenising (the page's rule,
    ``d2lmini.tokenizer``: it refuses an "empty sentence" too)."""
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of strings, not a "
                        "string; wrap it: [sentence]")
    sentences = list(sentences)
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str) and not tokenize(preprocess(sentence)):
            raise ValueError(
                f"sentences[{i}] is {sentence!r}, which has no tokens "
                "after tokenising (it is empty or blank), so there is "
                "nothing to translate; drop it or give it words, e.g. "
                "'go .'")
    return sentences


class Decoded(NamedTuple):
    """Greedy output of one sentence.

    ids: the output ids, cut before the first ``<eos>`` (excluded).
    attention: (steps, S_valid), or (h, steps, S_valid) for multi-head
        (for a Transformer: its last decoder block's attention to the
        source); one row per decoding step, including the step that emitted
        ``<eos>``, so ``steps = len(ids) + finished``; the columns are
        the source's valid positions; on the CPU.  None without
        attention.
    finished: whether ``<eos>`` was emitted within ``max_len`` steps.
    """

    ids: list
    attention: torch.Tensor
    finished: bool


def _restrict_attention(state, attend):
    """The decoder state with its attention limited to ``attend`` (B, S),
    True = may attend, on top of the padding mask."""
    memory = getattr(state, "memory", None)
    if memory is None or not hasattr(memory, "mask"):
        raise TypeError("attend= needs an RNN decoder with attention (its "
                        "state has no attention memory); the Transformer "
                        "and the decoder without attention do not take it")
    keys = memory.keys  # (B or B * h, S, ...)
    B, S = attend.shape
    if keys.shape[1] != S or keys.shape[0] % B:
        raise ValueError(f"attend {tuple(attend.shape)} does not fit the "
                         f"attention keys {tuple(keys.shape[:2])}")
    mask = memory.mask
    if mask is None:
        mask = torch.ones(keys.shape[0], 1, S, dtype=torch.bool,
                          device=keys.device)
    # Heads are folded into the batch head-inner, as split_mask does.
    extra = attend.to(mask.device).repeat_interleave(
        keys.shape[0] // B, 0)[:, None, :]
    return state._replace(memory=memory._replace(mask=mask & extra))


def greedy_decode(model, src, src_valid_len, bos, eos, max_len, *,
                  attend=None, forbid=None):
    """Translate a batch greedily, stopping each sentence at ``<eos>``.

    Each step emits the token of the highest logit, the ``forbid`` ids
    (``<pad>`` and ``<bos>``) excluded: their logits are set to -inf
    first.  Of equal logits the lowest id wins (``max`` returns the
    first maximum).  Beam search and the page's decoders follow both
    rules too.  A NaN (or infinite) logit of a token that may be
    emitted, in a sentence still decoding, raises a ValueError naming
    the step and the sentence.

    Runs in eval mode under ``torch.no_grad()`` and then restores every
    submodule's train/eval mode.  Stops early once every sentence has
    emitted ``<eos>``.  Threads may decode with one model at once: each
    call keeps its own attention weights, and the modes come back when
    the last call ends.

    The attention's keys and padding mask are built once, in the
    decoder's ``init_state``, not at every step; a Transformer decoder
    keeps its earlier steps in a key/value cache and runs the new token
    only (``d2lmini.transformer.TransformerDecoderBlock``).

    Args:
        model: a ``Seq2Seq``.
        src: (B, S) source ids, B >= 1.
        src_valid_len: (B,) integer tensor of valid source lengths, or
            None (every source position is valid).
        bos, eos: int ids of ``<bos>`` and ``<eos>`` in the target vocab
            (``eos`` must be below the decoder's output size V).
        max_len: the most steps to decode (an int >= 1).
        attend: optional (B, S) bool tensor, True where the decoder may
            attend: masks source positions out of the attention (the
            encoder still reads them), e.g. to test what a heatmap's
            peak is worth.
        forbid: the token ids never emitted; default ``bos`` and
            ``model.tgt_pad`` (the target ``<pad>``); ``()`` allows
            every token.  Must not hold ``eos``.

    Returns:
        A list of B ``Decoded``.
    """
    _check_decode_args(src, src_valid_len, bos, eos, max_len)
    forbid = _forbidden(model, bos, eos, forbid)
    if attend is not None and (not torch.is_tensor(attend)
                               or attend.dtype != torch.bool
                               or attend.shape != src.shape):
        raise ValueError(
            f"attend must be a bool tensor of the shape of src "
            f"{tuple(src.shape)}, got "
            f"{getattr(attend, 'dtype', type(attend).__name__)} "
            f"{tuple(getattr(attend, 'shape', ()))}")
    device = next(model.parameters()).device
    src = src.to(device)
    if src_valid_len is not None:
        src_valid_len = src_valid_len.to(device)
    with _eval_mode(model), torch.no_grad():
        state = model.decoder.init_state(
            model.encoder(src, src_valid_len), src_valid_len)
        if attend is not None:
            state = _restrict_attention(state, attend.to(device))
        Y = torch.full((len(src), 1), bos, device=device)  # (B, 1)
        done = torch.zeros(len(src), dtype=torch.bool, device=device)
        outputs, weights = [], []
        decode_step = _stepper(model.decoder)
        banned = torch.tensor(forbid, dtype=torch.long, device=device)
        for t in range(1, max_len + 1):
            logits, state, step = decode_step(Y, state)  # (B, 1, V)
            if t == 1:
                _check_vocab(logits.shape[-1], eos, forbid)
            # max: the first of equal maxima, the lowest id; a NaN
            # logit is the max, as +inf is: no token can be chosen.
            best, Y = logits.index_fill(-1, banned, -math.inf).max(
                dim=-1)  # (B, 1)
            nan = ~best[:, 0].isfinite() & ~done  # (B,)
            outputs.append(Y[:, 0])
            if step is not None:
                # (B, 1, S) or (B, h, 1, S) -> (B, S) or (B, h, S)
                weights.append(step.squeeze(-2))
            done |= Y[:, 0] == eos
            # The step's one wait for the device: all done?  NaN?
            stop, bad = torch.stack((done.all(), nan.any())).tolist()
            if bad:
                raise _nan_error(t, int(nan.nonzero()[0, 0]))
            if stop:
                break
    ids = torch.stack(outputs, dim=1).tolist()  # (B, steps)
    if weights:  # (B, steps, S) or (B, h, steps, S)
        weights = torch.stack(weights, dim=-2).cpu()
    S = src.shape[1] if src_valid_len is None else src_valid_len.tolist()
    results = []
    for i, row in enumerate(ids):
        finished = eos in row
        n = row.index(eos) if finished else len(row)
        attention = None
        if len(weights):
            s = S if isinstance(S, int) else S[i]
            attention = weights[i, ..., :n + finished, :s]
        results.append(Decoded(row[:n], attention, finished))
    return results


@dataclass
class Translation:
    """One sentence translated by ``translate``.

    ``src_tokens`` are the source tokens the model saw (with ``<eos>``);
    ``tokens`` the output without ``<eos>``; ``out_tokens`` labels the
    rows of ``attention`` (``tokens`` plus ``<eos>`` when emitted), and
    ``src_tokens`` its columns.
    """

    src_tokens: list
    tokens: list
    out_tokens: list
    attention: torch.Tensor

    @property
    def text(self):
        return " ".join(self.tokens)


def translate(model, data, sentences, max_len=None):
    """Translate sentences with greedy decoding (never emitting the
    target vocabulary's ``<pad>`` or ``<bos>``).

    Args:
        model: a trained ``Seq2Seq``.
        data: has ``build(sentences)`` returning ``(src, _, src_valid_len,
            _)``, ``src_vocab``, ``tgt_vocab`` (with ``pad``, ``bos``
            and ``eos`` ids) and ``num_steps`` (the ``MTFraEng`` of
            ``d2lmini.data``).
        sentences: a list of source strings, each with at least one
            token after tokenising (a ValueError names an empty or
            blank one, as the page refuses an "empty sentence").
        max_len: the most output steps; default ``data.num_steps``.

    Returns:
        A list of ``Translation``.
    """
    src, _, src_valid_len, _ = data.build(_check_sentences(sentences))
    vocab = data.tgt_vocab
    max_len = data.num_steps if max_len is None else max_len
    decoded = greedy_decode(model, src, src_valid_len, vocab.bos,
                            vocab.eos, max_len,
                            forbid=(vocab.pad, vocab.bos))
    results = []
    for row, n, out in zip(src.tolist(), src_valid_len.tolist(), decoded):
        out_ids = out.ids + [vocab.eos] * out.finished
        out_tokens = vocab.to_tokens(out_ids)
        results.append(Translation(data.src_vocab.to_tokens(row[:n]),
                                   out_tokens[:len(out.ids)], out_tokens,
                                   out.attention))
    return results
