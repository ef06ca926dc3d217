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
import threading
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .seq2seq import _check_ids, _check_lens
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
                  attend=None):
    """Translate a batch greedily, stopping each sentence at ``<eos>``.

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
        bos, eos: int ids of ``<bos>`` and ``<eos>`` in the target vocab.
        max_len: the most steps to decode (an int >= 1).
        attend: optional (B, S) bool tensor, True where the decoder may
            attend: masks source positions out of the attention (the
            encoder still reads them), e.g. to test what a heatmap's
            peak is worth.

    Returns:
        A list of B ``Decoded``.
    """
    _check_decode_args(src, src_valid_len, bos, eos, max_len)
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
        for _ in range(max_len):
            logits, state, step = decode_step(Y, state)  # (B, 1, V)
            Y = logits.argmax(dim=-1)  # (B, 1)
            outputs.append(Y[:, 0])
            if step is not None:
                # (B, 1, S) or (B, h, 1, S) -> (B, S) or (B, h, S)
                weights.append(step.squeeze(-2))
            done |= Y[:, 0] == eos
            if done.all():
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
    """Translate sentences with greedy decoding.

    Args:
        model: a trained ``Seq2Seq``.
        data: has ``build(sentences)`` returning ``(src, _, src_valid_len,
            _)``, ``src_vocab``, ``tgt_vocab`` and ``num_steps`` (the
            ``MTFraEng`` of ``d2lmini.data``).
        sentences: a list of source strings.
        max_len: the most output steps; default ``data.num_steps``.

    Returns:
        A list of ``Translation``.
    """
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of strings, not a "
                        "string; wrap it: [sentence]")
    src, _, src_valid_len, _ = data.build(list(sentences))
    vocab = data.tgt_vocab
    max_len = data.num_steps if max_len is None else max_len
    decoded = greedy_decode(model, src, src_valid_len, vocab.bos,
                            vocab.eos, max_len)
    results = []
    for row, n, out in zip(src.tolist(), src_valid_len.tolist(), decoded):
        out_ids = out.ids + [vocab.eos] * out.finished
        out_tokens = vocab.to_tokens(out_ids)
        results.append(Translation(data.src_vocab.to_tokens(row[:n]),
                                   out_tokens[:len(out.ids)], out_tokens,
                                   out.attention))
    return results
