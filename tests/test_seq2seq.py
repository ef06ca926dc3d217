"""Tests of d2lmini.seq2seq: shapes, the padding-free loss, the mask.

``make_model``, ``make_batch``, ``CountingMask`` and ``WrappedAttention``
are shared with ``test_attention_decoder.py`` and ``test_decoding.py``,
which import them from here.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch import nn

from d2lmini import attention as attention_module
from d2lmini.attention import AdditiveAttention
from d2lmini.attention_decoder import Seq2SeqAttentionDecoder
from d2lmini.multihead import MultiHeadAttention
from d2lmini.seq2seq import Seq2Seq, Seq2SeqDecoder, Seq2SeqEncoder

PAD, BOS, EOS = 0, 1, 2
V, E, D, LAYERS = 10, 8, 16, 2  # d2l's shape-test sizes
KINDS = ["none", "additive", "multihead"]


class WrappedAttention(nn.Module):
    """An attention module of a type the decoder does not know."""

    def __init__(self, num_hiddens):
        super().__init__()
        self.inner = AdditiveAttention(num_hiddens, query_size=num_hiddens,
                                       key_size=num_hiddens)

    def precompute(self, keys, values, valid_lens=None):
        return self.inner.precompute(keys, values, valid_lens)

    def forward(self, queries, keys, values, *, memory=None):
        out = self.inner(queries, keys, values, memory=memory)
        self.attention_weights = self.inner.attention_weights
        return out


class PerStepAttention(nn.Module):
    """The old path: the memory keeps valid_lens, and every step builds
    the mask from them anew."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def precompute(self, keys, values, valid_lens=None):
        return keys, values, valid_lens

    def forward(self, queries, keys, values, *, memory=None):
        keys, values, valid_lens = memory
        out = self.inner(queries, keys, values, valid_lens)
        self.attention_weights = self.inner.attention_weights
        return out


def per_step_copy(model):
    """The same model, its decoder masking at every step (old path)."""
    old = copy.deepcopy(model)
    old.decoder.attention = PerStepAttention(old.decoder.attention)
    return old


def make_model(kind, dropout=0.0, seed=0, vocab=V, embed=E, hidden=D,
               layers=LAYERS):
    torch.manual_seed(seed)
    encoder = Seq2SeqEncoder(vocab, embed, hidden, layers, dropout)
    if kind == "none":
        decoder = Seq2SeqDecoder(vocab, embed, hidden, layers, dropout)
    else:
        attention = {"additive": None,
                     "multihead": MultiHeadAttention(hidden, 4, dropout),
                     "wrapped": WrappedAttention(hidden)}[kind]
        decoder = Seq2SeqAttentionDecoder(vocab, embed, hidden, layers,
                                          dropout, attention=attention)
    return Seq2Seq(encoder, decoder, tgt_pad=PAD)


def make_batch(src_lens, tgt_lens, T=7, seed=0):
    """A batch (src, tgt_input, src_valid_len, label) of random ids."""
    gen = torch.Generator().manual_seed(seed)
    src_lens, tgt_lens = torch.tensor(src_lens), torch.tensor(tgt_lens)
    steps = torch.arange(T)
    src = torch.randint(3, V, (len(src_lens), T), generator=gen)
    src[steps == src_lens[:, None] - 1] = EOS
    src[steps >= src_lens[:, None]] = PAD
    label = torch.randint(3, V, (len(tgt_lens), T), generator=gen)
    label[steps >= tgt_lens[:, None]] = PAD
    tgt_input = torch.cat([torch.full((len(tgt_lens), 1), BOS),
                           label[:, :-1]], dim=1)
    return src, tgt_input, src_lens, label


# Shapes ---------------------------------------------------------------------

def test_plain_decoder_shapes_as_in_d2l():
    model = make_model("none")
    X = torch.zeros((4, 7), dtype=torch.long)
    state = model.decoder.init_state(model.encoder(X))
    output, state = model.decoder(X, state)
    assert output.shape == (4, 7, V) and state[1].shape == (2, 4, D)


@pytest.mark.parametrize("kind", KINDS)
def test_parameters_exist_before_the_first_call(kind):
    model = make_model(kind)
    params = list(model.parameters())
    assert not any(isinstance(p, nn.parameter.UninitializedParameter)
                   for p in params)
    assert model.decoder.dense.in_features == D
    assert sum(p.numel() for p in params) > 0 and "GRU" in repr(model)


# The loss ignores padding ---------------------------------------------------

def test_loss_ignores_logits_at_padding_and_equals_masked_ce():
    model = make_model("none")
    _, _, _, label = make_batch([7, 7, 7], [2, 7, 4])
    logits = torch.randn(3, 7, V)
    loss = model.loss(logits, label)
    changed = logits.clone()
    changed[label == PAD] = torch.randn(int((label == PAD).sum()), V) * 50
    torch.testing.assert_close(model.loss(changed, label), loss)
    per_position = F.cross_entropy(logits.reshape(-1, V), label.reshape(-1),
                                   reduction="none").reshape(3, 7)
    mask = (label != PAD).float()
    torch.testing.assert_close(loss, (per_position * mask).sum() / mask.sum())


def test_loss_rejects_all_padding_and_bad_shapes():
    model = make_model("none")
    with pytest.raises(ValueError, match="every label is <pad>"):
        model.loss(torch.randn(2, 3, V), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="do not match"):
        model.loss(torch.randn(2, 3, V), torch.ones(2, 4, dtype=torch.long))


RAGGED = [(7, 5), (2, 0), (4, 7), (3, 1), (5, 3)]  # rows drop out


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(KINDS + ["wrapped"]),
       st.lists(st.tuples(st.integers(1, 7), st.integers(0, 7)),
                min_size=1, max_size=5),
       st.integers(0, 100))
@example("none", RAGGED, 0)
@example("additive", RAGGED, 0)
@example("multihead", RAGGED, 0)
def test_training_step_equals_the_loss_of_forward(kind, lens, seed):
    """The packed path (sorted rows, non-pad positions only) computes the
    same loss, and the same gradients, as the plain forward."""
    src_lens, tgt_lens = zip(*lens)
    if sum(tgt_lens) == 0:
        tgt_lens = (1,) + tgt_lens[1:]
    batch = make_batch(src_lens, tgt_lens, seed=seed)
    model = make_model(kind, seed=seed)
    loss, num_tokens = model.training_step(batch)
    assert num_tokens == int((batch[3] != PAD).sum())
    grads = torch.autograd.grad(loss, list(model.parameters()),
                                allow_unused=True)
    reference = model.loss(model(*batch[:3]), batch[3])
    ref_grads = torch.autograd.grad(reference, list(model.parameters()),
                                    allow_unused=True)
    torch.testing.assert_close(loss, reference)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(
            torch.zeros(()) if g is None else g,
            torch.zeros(()) if r is None else r, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("pack", [True, False])
def test_training_step_trims_padding_columns_only_when_packed(pack):
    """Source columns past the longest source are dropped only when the
    encoder skips padding; an unpacked encoder still runs over them."""
    model = make_model("additive")
    model.encoder.pack = pack
    batch = make_batch([2, 3], [4, 2])  # T = 7: four all-pad columns
    loss, _ = model.training_step(batch)
    torch.testing.assert_close(loss, model.loss(model(*batch[:3]),
                                                batch[3]))


def test_training_step_with_a_pad_inside_a_label_uses_the_plain_path():
    model = make_model("additive")
    batch = make_batch([3, 5], [4, 6])
    batch[3][0, 1] = PAD  # not a right-padded label
    loss, num_tokens = model.training_step(batch)
    assert num_tokens == 9
    torch.testing.assert_close(loss, model.loss(model(*batch[:3]), batch[3]))


def test_validation_step_builds_no_graph():
    model = make_model("additive")
    loss, _ = model.validation_step(make_batch([3, 5], [4, 6]))
    assert not loss.requires_grad
    opt = model.configure_optimizers()
    assert isinstance(opt, torch.optim.Adam)
    assert opt.param_groups[0]["lr"] == model.lr == 0.005


# Padding skipped (keys projected once: test_attention_decoder.py) ---------

class CountingMask:
    """Counts the calls of d2lmini.attention.valid_mask."""

    def __init__(self, monkeypatch):
        self.calls, self.inner = 0, attention_module.valid_mask
        monkeypatch.setattr(attention_module, "valid_mask", self)

    def __call__(self, valid_lens, num_keys):
        self.calls += 1
        return self.inner(valid_lens, num_keys)


def test_packed_encoder_ignores_padding():
    """With pack=True a sentence's encoding does not depend on how much
    padding its batch has; d2l's unpacked encoder runs over the pads."""
    src, _, src_valid_len, _ = make_batch([3, 4], [1, 1], T=7)
    for pack, same in ((True, True), (False, False)):
        torch.manual_seed(0)
        encoder = Seq2SeqEncoder(V, E, D, LAYERS, pack=pack)
        outputs, state = encoder(src, src_valid_len)
        short_out, short_state = encoder(src[:, :4], src_valid_len)
        assert torch.allclose(state, short_state, atol=1e-6) is same
    assert not (outputs[0, 3:] == 0).all()  # unpacked: runs over pads
    torch.manual_seed(0)
    outputs, _ = Seq2SeqEncoder(V, E, D, LAYERS)(src, src_valid_len)
    assert (outputs[0, 3:] == 0).all() and (outputs[1, 4:] == 0).all()


def test_bad_inputs_raise_helpful_errors():
    model = make_model("additive")
    src, tgt_input, src_valid_len, _ = make_batch([3, 4], [2, 2])
    with pytest.raises(TypeError, match="integer token ids"):
        model.encoder(src.float(), src_valid_len)
    with pytest.raises(ValueError, match=r"must lie in \[1, 7\]"):
        model.encoder(src, torch.tensor([0, 4]))
    state = model.decoder.init_state(model.encoder(src, src_valid_len),
                                     src_valid_len)
    with pytest.raises(ValueError, match="sorted in decreasing order"):
        model.decoder.forward_packed(tgt_input, state, torch.tensor([2, 3]))
    with pytest.raises(ValueError, match="needs num_hiddens=16 for all four"):
        Seq2SeqAttentionDecoder(V, E, D, 1,
                                attention=MultiHeadAttention(8, 2))


# Step by step -------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_teacher_forcing_equals_feeding_one_step_at_a_time(kind):
    model = make_model(kind).eval()
    src, tgt_input, lens, _ = make_batch([7, 2, 4], [5, 7, 3])
    with torch.no_grad():
        state = model.decoder.init_state(model.encoder(src, lens), lens)
        logits, final = model.decoder(tgt_input, state)
        weights = list(getattr(model.decoder, "attention_weights", []))
        steps = []
        for t in range(tgt_input.shape[1]):
            step_logits, state = model.decoder(tgt_input[:, t:t + 1], state)
            steps.append(step_logits)
            if weights:
                torch.testing.assert_close(
                    model.decoder.attention_weights[0], weights[t])
    torch.testing.assert_close(torch.cat(steps, dim=1), logits)
    torch.testing.assert_close(state[1], final[1])
