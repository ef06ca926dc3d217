"""Edge cases of greedy decoding and beam search (issue 39): exact ties,
NaN logits, empty sentences, ids outside the vocabulary, ``<pad>`` and
``<bos>``, and the host's waits for the device.

Most tests use ``TableModel``, a stub whose logits are read from a
table, so that ties are exact and every step is known in advance.
"""

import re

import pytest
import torch
from test_beam import peaky_model, sources
from test_decoding import TinyData
from test_seq2seq import BOS, EOS, PAD
from torch import nn

from d2lmini import beam
from d2lmini.beam import _best, beam_decode, beam_translate
from d2lmini.decoding import greedy_decode, translate
from d2lmini.seq2seq import DecoderState

A, B, C = 3, 4, 5  # the stub's words
V = 6  # <pad> <bos> <eos> A B C
LOW = -30.0  # the logit of a token the stub (almost) never wants


class TableModel(nn.Module):
    """A ``Seq2Seq`` stand-in: the logits of the next token are
    ``tables[s, previous token]`` (V,), s the first id of the sentence's
    source, so that each sentence of a batch can have its own table."""

    def __init__(self, tables):
        super().__init__()
        tables = torch.as_tensor(tables, dtype=torch.float32)
        if tables.dim() == 2:  # one table for every sentence
            tables = tables.expand(V, V, V)
        self.encoder = _SourceEncoder()
        self.decoder = _TableDecoder(tables)
        self.tgt_pad = PAD
        self.anchor = nn.Parameter(torch.zeros(1))  # where it runs


class _SourceEncoder(nn.Module):
    def forward(self, X, src_valid_len=None):
        first = X[:, :1].float()  # (B, 1)
        return X[..., None].float(), first[None]  # (B, S, 1), (1, B, 1)


class _TableDecoder(nn.Module):
    def __init__(self, tables):
        super().__init__()
        self.register_buffer("tables", tables)

    def init_state(self, enc_outputs, src_valid_len=None):
        hidden = enc_outputs[1]  # (1, B, 1): the source's first id
        return DecoderState(hidden[-1], hidden)

    def forward(self, X, state):
        source = state.hidden[0, :, 0].long()  # (B,)
        return self.tables[source, X[:, -1]][:, None], state  # (B, 1, V)


def table(rows):
    """A (V, V) table of LOW, with ``rows``: {previous token: {token:
    logit}}."""
    t = torch.full((V, V), LOW)
    for prev, logits in rows.items():
        for token, logit in logits.items():
            t[prev, token] = logit
    return t


def src_of(*firsts):
    """One source per first id: (first, <eos>), and their lengths."""
    src = torch.tensor([[first, EOS] for first in firsts])
    return src, torch.full((len(firsts),), 2)


# ---- ties: the lower index wins ------------------------------------------

def test_best_breaks_ties_by_the_lower_index():
    """``_best``: the n best, best first, equal values in the order of
    their index (the page's topCandidates), -inf included."""
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        M = int(torch.randint(1, 30, (1,), generator=gen))
        n = int(torch.randint(1, M + 1, (1,), generator=gen))
        cand = torch.randint(-3, 1, (4, M), generator=gen).float()
        cand[cand == -3] = -torch.inf
        values, index = _best(cand, n)
        for row, vals, idx in zip(cand.tolist(), values.tolist(),
                                  index.tolist()):
            want = sorted(range(M), key=lambda i: (-row[i], i))[:n]
            assert idx == want
            assert vals == [row[i] for i in want]


def test_greedy_takes_the_lowest_id_of_equal_logits():
    """A, B, C tie, then B and C, then every token after B (LOW): the
    lowest id of each tie is chosen, <eos> at the last (<pad> and <bos>,
    lower still, are forbidden)."""
    model = TableModel(table({BOS: {A: 0, B: 0, C: 0},
                              A: {C: 1, B: 1, EOS: 0}}))
    out = greedy_decode(model, *src_of(A), BOS, EOS, max_len=5)[0]
    assert (out.ids, out.finished) == ([A, B], True)


@pytest.mark.parametrize("seed", range(40))
def test_beam_of_one_is_greedy_with_exact_ties(seed):
    """Logits of a few integer values: ties at almost every step, and
    still beam 1 emits greedy's tokens (and stops where it stops)."""
    gen = torch.Generator().manual_seed(seed)
    tables = torch.randint(-2, 1, (V, V, V), generator=gen).float()
    model = TableModel(tables)
    src, lens = src_of(A, B, C, A)
    greedy = greedy_decode(model, src, lens, BOS, EOS, max_len=6)
    beam = beam_decode(model, src, lens, BOS, EOS, 6, beam_size=1)
    for g, b in zip(greedy, beam, strict=True):
        assert (b.ids, b.finished) == (g.ids, g.finished)


def test_beam_keeps_equal_candidates_by_hypothesis_then_token():
    """Step 1 ties A, B and C: the beam of 2 keeps A and B (the lower
    ids).  Step 2 ties every continuation of both: the first k go to
    hypothesis A's (the lower row) before B's, and among them the lower
    ids (the page's order, j * V + v)."""
    model = TableModel(table({BOS: {A: 0, B: 0, C: 0},
                              A: {A: 0, B: 0, C: 0},
                              B: {A: 0, B: 0, C: 0}}))
    out = beam_decode(model, *src_of(A), BOS, EOS, 2, beam_size=2)[0]
    assert [(h.ids, h.finished) for h in out.hypotheses] == [
        ([A, A], False), ([A, B], False)]
    assert out.hypotheses[0].score == out.hypotheses[1].score


def test_beam_finishes_the_eos_of_the_lower_hypothesis_on_a_tie():
    """At step 2 <eos>, A and B tie after both A and B: of the 2k = 4
    best, A's <eos> ranks first (finished) and B's <eos> fourth (not
    among the first k: dropped), so [B] never ends."""
    model = TableModel(table({BOS: {A: 0, B: 0, C: 0},
                              A: {EOS: 0, A: 0, B: 0},
                              B: {EOS: 0, A: 0, B: 0}}))
    out = beam_decode(model, *src_of(A), BOS, EOS, 2, beam_size=2)[0]
    assert [(h.ids, h.finished) for h in out.hypotheses] == [([A], True)]


# ---- NaN logits -----------------------------------------------------------

NAN_ROWS = torch.full((V,), torch.nan)


def nan_tables():
    """Sentence 0 (source A) ends at step 1, then reads NaN rows, which
    must not matter; sentence 1 (source B) reads A -> B, then NaN after
    B (step 2 for beam search's second hypothesis, step 3 greedily)."""
    done = table({BOS: {EOS: 0}})
    done[[EOS, A, B, C]] = NAN_ROWS
    late = table({BOS: {A: 0}, A: {B: 0}})
    late[B] = NAN_ROWS
    tables = torch.full((V, V, V), LOW)
    tables[A], tables[B] = done, late
    return TableModel(tables)


def test_greedy_refuses_nan_logits_naming_the_step_and_sentence():
    with pytest.raises(ValueError, match=r"NaN .*step 3 of sentence 1 .*"
                       r"check them.*retrain"):
        greedy_decode(nan_tables(), *src_of(A, B), BOS, EOS, max_len=5)


def test_beam_refuses_nan_logits_naming_the_step_and_sentence():
    with pytest.raises(ValueError, match=r"NaN .*step 2 of sentence 1 .*"
                       r"check them.*retrain"):
        beam_decode(nan_tables(), *src_of(A, B), BOS, EOS, 5, beam_size=2)


@pytest.mark.parametrize("kind", ["additive", "transformer"])
def test_a_model_with_nan_weights_is_refused_at_step_1(kind):
    model = peaky_model(kind, 12)
    with torch.no_grad():
        # A token that may be emitted (a NaN logit of <pad> or <bos>,
        # which are never emitted, changes nothing).
        model.decoder.dense.weight[A, 0] = torch.nan
    src, lens = sources(3, 5, 12)
    for decode in (lambda: greedy_decode(model, src, lens, BOS, EOS, 4),
                   lambda: beam_decode(model, src, lens, BOS, EOS, 4)):
        with pytest.raises(ValueError, match="NaN .*step 1 of sentence 0"):
            decode()


# ---- ids outside the vocabulary, forbid ----------------------------------

@pytest.mark.parametrize("decode", [greedy_decode, beam_decode])
def test_an_eos_outside_the_vocabulary_is_refused(decode):
    model = peaky_model("additive", 12)
    src, lens = sources(2, 5, 12)
    with pytest.raises(ValueError, match=r"eos=12 outside the decoder's "
                       r"output vocabulary \(ids 0 to 11\)"):
        decode(model, src, lens, BOS, 12, 4)
    with pytest.raises(ValueError, match="forbid id 40 outside"):
        decode(model, src, lens, BOS, EOS, 4, forbid=(PAD, 40))


@pytest.mark.parametrize("forbid, error, message", [
    ((PAD, EOS), ValueError, r"holds eos=2: decoding must be able"),
    ((PAD, -1), ValueError, r"forbid\[1\] must be an int >= 0"),
    ((PAD, 1.0), ValueError, r"forbid\[1\] must be an int >= 0"),
    (PAD, TypeError, "forbid must be a collection of token ids"),
    ("ab", TypeError, "forbid must be a collection of token ids"),
])
@pytest.mark.parametrize("decode", [greedy_decode, beam_decode])
def test_bad_forbid_is_refused(decode, forbid, error, message):
    model = peaky_model("additive", 12)
    src, lens = sources(2, 5, 12)
    with pytest.raises(error, match=message):
        decode(model, src, lens, BOS, EOS, 4, forbid=forbid)


def pad_bos_lovers():
    """Models that score <pad> and <bos> highest at every step."""
    stub = TableModel(table({prev: {PAD: 9, BOS: 9, A: 2, B: 1, EOS: 0}
                             for prev in range(V)}))
    real = peaky_model("transformer", 12)
    with torch.no_grad():
        real.decoder.dense.bias[[PAD, BOS]] += 50.0
    return [(stub, *src_of(A, B)), (real, *sources(4, 5, 12))]


@pytest.mark.parametrize("beam_size", [None, 1, 3])
def test_pad_and_bos_are_never_emitted(beam_size):
    for model, src, lens in pad_bos_lovers():
        if beam_size is None:
            outs = greedy_decode(model, src, lens, BOS, EOS, 6)
            hyps = [out.ids for out in outs]
            allowed = greedy_decode(model, src, lens, BOS, EOS, 6,
                                    forbid=())
        else:
            outs = beam_decode(model, src, lens, BOS, EOS, 6,
                               beam_size=beam_size)
            hyps = [h.ids for out in outs for h in out.hypotheses]
            allowed = beam_decode(model, src, lens, BOS, EOS, 6,
                                  beam_size=beam_size, forbid=())
        assert hyps and not {PAD, BOS} & {i for h in hyps for i in h}
        assert all(out.ids[0] in (PAD, BOS) for out in allowed)


def test_translate_never_emits_pad_or_bos(toy):
    models, data = toy
    model = models["additive"]
    vocab = data.tgt_vocab
    with torch.no_grad():
        model.decoder.dense.bias[[vocab.pad, vocab.bos]] += 50.0
    try:
        for t in translate(model, data, ["go .", "i lost ."]) + \
                beam_translate(model, data, ["go ."], beam_size=3):
            assert not {"<pad>", "<bos>"} & set(t.out_tokens)
    finally:
        with torch.no_grad():
            model.decoder.dense.bias[[vocab.pad, vocab.bos]] -= 50.0


# ---- empty sentences -----------------------------------------------------

BLANKS = ["", "   ", "\t\n", "\ufeff", "\u3000\u00a0"]


@pytest.mark.parametrize("blank", BLANKS)
def test_translate_refuses_a_sentence_without_tokens(toy, blank):
    """As the page refuses an "empty sentence": no tokens after the
    tokenizer's rule (d2lmini.tokenizer)."""
    models, data = toy
    for run in (translate, beam_translate):
        with pytest.raises(ValueError, match=(
                rf"sentences\[1\] is {re.escape(repr(blank))}, which has "
                r"no tokens after tokenising .*drop it")):
            run(models["additive"], data, ["go .", blank])


def test_translate_takes_a_sentence_of_punctuation(toy):
    """"." is a token (the page's rule too): translated, not refused."""
    models, data = toy
    assert translate(models["additive"], data, ["."])[0].src_tokens[-1] \
        == "<eos>"
    assert beam_translate(models["additive"], data, ["."], beam_size=2)


def test_the_refusal_needs_no_data_of_d2lmini():
    """A duck-typed ``data`` (TinyData) is checked the same way."""
    model = TableModel(table({BOS: {EOS: 0}}))
    with pytest.raises(ValueError, match=r"sentences\[0\] is ' '"):
        translate(model, TinyData(), [" ", "a"])
    assert translate(model, TinyData(), ["a"])[0].tokens == []


# ---- the host waits for the device once a step ----------------------------

SYNCS = ("tolist", "item", "nonzero", "cpu", "numpy", "__bool__",
         "__int__", "__float__", "__index__")


@pytest.mark.parametrize("decode, kind, eos_bias, alpha", [
    ("greedy", "additive", 1.0, None), ("greedy", "transformer", 6.0, None),
    ("beam", "additive", 1.0, 3.0), ("beam", "transformer", 4.0, 1.0)])
def test_one_host_transfer_per_step(decode, kind, eos_bias, alpha,
                                    monkeypatch):
    """Between two decoder calls, at most one of the tensor methods that
    wait for a GPU (tolist, item, nonzero, bool(), ...) runs: the other
    reads are made once the search is over.  (The settings make some
    hypotheses end at several steps, and the search last 8 steps.)"""
    model = peaky_model(kind, 12, eos_bias=eos_bias)
    src, lens = sources(6, 5, 12)
    # As on a GPU: no extra read for the CPU's cheap check of ties.
    monkeypatch.setattr(beam, "_reads_for_free", lambda device: False)
    events = []
    model.decoder.register_forward_hook(lambda *args: events.append("step"))
    for name in SYNCS:
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _real=real, **kwargs):
            events.append("sync")
            return _real(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, counted)
    if decode == "greedy":
        out = greedy_decode(model, src, lens, BOS, EOS, 8)
        ended = [len(o.ids) for o in out if o.finished]
    else:
        out = beam_decode(model, src, lens, BOS, EOS, 8, beam_size=3,
                          length_penalty=alpha)
        ended = [len(h.ids) for o in out for h in o.hypotheses
                 if h.finished]
    monkeypatch.undo()
    assert len(set(ended)) > 1 and events.count("step") == 8
    last = len(events) - events[::-1].index("step")
    between = "".join("s" if e == "step" else "." for e in events[:last])
    assert all(len(gap) <= 1 for gap in between.split("s")[1:]), between
