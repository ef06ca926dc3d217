"""Tests of d2lmini.seq2seq: shapes, the padding-free loss, decoding."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch import nn

from d2lmini.attention import AdditiveAttention, MultiHeadAttention
from d2lmini.seq2seq import (
    Seq2Seq,
    Seq2SeqAttentionDecoder,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
    greedy_decode,
    translate,
)

PAD, BOS, EOS = 0, 1, 2
V, E, D, LAYERS = 10, 8, 16, 2  # d2l's shape-test sizes
KINDS = ["none", "additive", "multihead"]


class WrappedAttention(nn.Module):
    """An attention module of a type the decoder does not know."""

    def __init__(self, num_hiddens):
        super().__init__()
        self.inner = AdditiveAttention(num_hiddens, query_size=num_hiddens,
                                       key_size=num_hiddens)

    def precompute(self, keys, values):
        return self.inner.precompute(keys, values)

    def forward(self, queries, keys, values, valid_lens=None, *,
                memory=None):
        out = self.inner(queries, keys, values, valid_lens, memory=memory)
        self.attention_weights = self.inner.attention_weights
        return out


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

@pytest.mark.parametrize("kind", ["additive", "multihead"])
def test_attention_decoder_shapes_as_in_d2l(kind):
    model = make_model(kind)
    X = torch.zeros((4, 7), dtype=torch.long)  # batch 4, num_steps 7
    enc_outputs, enc_state = model.encoder(X)
    assert enc_outputs.shape == (4, 7, D) and enc_state.shape == (2, 4, D)
    state = model.decoder.init_state((enc_outputs, enc_state), None)
    output, state = model.decoder(X, state)
    assert output.shape == (4, 7, V)
    assert state[0].shape == (4, 7, D)
    assert state[1][0].shape == (4, D)
    weights = model.decoder.attention_weights
    assert len(weights) == 7
    expected = (4, 1, 7) if kind == "additive" else (4, 4, 1, 7)
    assert all(w.shape == expected for w in weights)


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


# Efficiency: keys projected once, padding skipped ---------------------------

@pytest.mark.parametrize("kind", ["additive", "multihead"])
def test_keys_are_projected_once_per_sequence(kind):
    model = make_model(kind)
    calls = []
    model.decoder.attention.W_k.register_forward_hook(
        lambda *args: calls.append(1))
    src, tgt_input, src_len, label = make_batch([7, 3, 5], [6, 2, 7])
    model(src, tgt_input, src_len)  # 7 decoding steps
    assert len(calls) == 1
    model.training_step((src, tgt_input, src_len, label))
    assert len(calls) == 2


def test_packed_encoder_ignores_padding():
    """With pack=True a sentence's encoding does not depend on how much
    padding its batch has; d2l's unpacked encoder runs over the pads."""
    src, _, src_len, _ = make_batch([3, 4], [1, 1], T=7)
    for pack, same in ((True, True), (False, False)):
        torch.manual_seed(0)
        encoder = Seq2SeqEncoder(V, E, D, LAYERS, pack=pack)
        outputs, state = encoder(src, src_len)
        short_out, short_state = encoder(src[:, :4], src_len)
        assert torch.allclose(state, short_state, atol=1e-6) is same
    assert not (outputs[0, 3:] == 0).all()  # unpacked: runs over pads
    torch.manual_seed(0)
    outputs, _ = Seq2SeqEncoder(V, E, D, LAYERS)(src, src_len)
    assert (outputs[0, 3:] == 0).all() and (outputs[1, 4:] == 0).all()


def test_bad_inputs_raise_helpful_errors():
    model = make_model("additive")
    src, tgt_input, src_len, _ = make_batch([3, 4], [2, 2])
    with pytest.raises(TypeError, match="integer token ids"):
        model.encoder(src.float(), src_len)
    with pytest.raises(ValueError, match=r"must lie in \[1, 7\]"):
        model.encoder(src, torch.tensor([0, 4]))
    state = model.decoder.init_state(model.encoder(src, src_len), src_len)
    with pytest.raises(ValueError, match="sorted in decreasing order"):
        model.decoder.forward_packed(tgt_input, state, torch.tensor([2, 3]))
    with pytest.raises(ValueError, match="needs num_hiddens=16 for all four"):
        Seq2SeqAttentionDecoder(V, E, D, 1,
                                attention=MultiHeadAttention(8, 2))
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, src_len, BOS, EOS, 0)


# Greedy decoding -----------------------------------------------------------

SYMBOLS = "abcdefg"  # ids 3..9


def copy_batch(gen, B=32, T=7):
    """Sources of 1-5 random symbols + <eos>; the target is the source."""
    lens = torch.randint(1, 6, (B,), generator=gen) + 1  # with <eos>
    steps = torch.arange(T)
    src = torch.randint(3, V, (B, T), generator=gen)
    src[steps == lens[:, None] - 1] = EOS
    src[steps >= lens[:, None]] = PAD
    tgt_input = torch.cat([torch.full((B, 1), BOS), src[:, :-1]], dim=1)
    return src, tgt_input, lens, src.clone()


@pytest.fixture(scope="module")
def copy_model():
    """A tiny Bahdanau model trained to copy its input (a few seconds)."""
    model = make_model("additive", vocab=V, embed=16, hidden=32, layers=1)
    model.lr = 0.01
    opt = model.configure_optimizers()
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        loss, _ = model.training_step(copy_batch(gen))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.final_loss = loss.item()
    return model.eval()


def test_a_tiny_model_learns_to_copy(copy_model):
    assert copy_model.final_loss < 0.1
    src, _, lens, _ = copy_batch(torch.Generator().manual_seed(1), B=50)
    decoded = greedy_decode(copy_model, src, lens, BOS, EOS, max_len=10)
    copied = [d.finished and d.ids == src[i, :lens[i] - 1].tolist()
              for i, d in enumerate(decoded)]
    assert sum(copied) >= 45, f"{sum(copied)} of 50 copied"


def decode_one_by_one(model, src, src_len, max_len):
    """A plain loop: one sentence, without its padding, one step a time."""
    model.eval()
    with torch.no_grad():
        src = src[None, :src_len]
        valid = torch.tensor([src_len])
        state = model.decoder.init_state(model.encoder(src, valid), valid)
        y, ids, rows = torch.tensor([[BOS]]), [], []
        for _ in range(max_len):
            logits, state = model.decoder(y, state)
            y = logits.argmax(dim=-1)
            rows.append(model.decoder.attention_weights[-1][0])
            if y.item() == EOS:
                break
            ids.append(y.item())
    return ids, torch.cat(rows, dim=-2)  # (steps, S) or (h, steps, S)


@pytest.mark.parametrize("kind", ["copy", "multihead"])
def test_batch_decoding_equals_a_step_by_step_loop(kind, copy_model):
    model = copy_model if kind == "copy" else make_model("multihead")
    src, _, lens, _ = copy_batch(torch.Generator().manual_seed(2), B=6)
    calls = []
    hook = model.decoder.register_forward_hook(
        lambda *args: calls.append(1))
    decoded = greedy_decode(model, src, lens, BOS, EOS, max_len=9)
    hook.remove()
    steps = max(len(d.ids) + d.finished for d in decoded)
    assert len(calls) == steps  # stopped once every sentence had <eos>
    if kind == "copy":
        assert steps < 9 and all(d.finished for d in decoded)
    for i, d in enumerate(decoded):
        ids, weights = decode_one_by_one(model, src[i], int(lens[i]), 9)
        assert d.ids == ids and EOS not in d.ids
        rows = len(d.ids) + d.finished
        expected_shape = (rows, lens[i]) if kind == "copy" else \
            (4, rows, lens[i])
        assert d.attention.shape == expected_shape
        torch.testing.assert_close(d.attention, weights)


def test_decoding_runs_in_eval_mode_without_grad_and_restores_modes():
    model = make_model("additive", dropout=0.5)
    model.train()
    model.encoder.eval()  # a mixed state must come back as it was
    before = [m.training for m in model.modules()]
    seen = []
    model.decoder.register_forward_hook(lambda m, *args: seen.append(
        (m.training, torch.is_grad_enabled())))
    src, _, lens, _ = copy_batch(torch.Generator().manual_seed(3), B=4)
    first = greedy_decode(model, src, lens, BOS, EOS, max_len=5)
    again = greedy_decode(model, src, lens, BOS, EOS, max_len=5)
    assert [m.training for m in model.modules()] == before
    assert set(seen) == {(False, False)}
    assert [d.ids for d in first] == [d.ids for d in again]  # no dropout
    assert not first[0].attention.requires_grad
    assert all(p.grad is None for p in model.parameters())


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


class TinyVocab:
    """Just what ``translate`` needs of d2lmini.data's Vocab."""

    idx_to_token = ["<pad>", "<bos>", "<eos>", *SYMBOLS]
    pad, bos, eos = PAD, BOS, EOS

    def __len__(self):
        return len(self.idx_to_token)

    def to_tokens(self, ids):
        return [self.idx_to_token[i] for i in ids]


class TinyData:
    num_steps = 7
    src_vocab = tgt_vocab = TinyVocab()

    def build(self, src_sentences, tgt_sentences=None):
        rows = [[3 + SYMBOLS.index(c) for c in s.split()] + [EOS]
                for s in src_sentences]
        lens = torch.tensor([len(r) for r in rows])
        src = torch.tensor([r + [PAD] * (self.num_steps - len(r))
                            for r in rows])
        return src, None, lens, None


def test_translate_returns_tokens_text_and_labelled_attention(copy_model):
    out = translate(copy_model, TinyData(), ["a b c", "g e", "d"])
    assert [t.text for t in out] == ["a b c", "g e", "d"]
    first = out[0]
    assert first.tokens == ["a", "b", "c"]
    assert first.src_tokens == ["a", "b", "c", "<eos>"]
    assert first.out_tokens == ["a", "b", "c", "<eos>"]
    assert first.attention.shape == (len(first.out_tokens),
                                     len(first.src_tokens))
    torch.testing.assert_close(first.attention.sum(-1), torch.ones(4))
    cut = translate(copy_model, TinyData(), ["a b c"], max_len=2)[0]
    assert cut.tokens == cut.out_tokens == ["a", "b"]  # no <eos> yet
    assert cut.attention.shape == (2, 4)
    with pytest.raises(TypeError, match="list of strings"):
        translate(copy_model, TinyData(), "a b")


def test_decoding_without_attention_or_valid_lengths():
    model = make_model("none")
    src, _, _, _ = copy_batch(torch.Generator().manual_seed(4), B=3)
    decoded = greedy_decode(model, src, None, BOS, EOS, max_len=4)
    assert len(decoded) == 3
    assert all(d.attention is None and len(d.ids) <= 4 for d in decoded)
    model = make_model("additive")
    decoded = greedy_decode(model, src, None, BOS, EOS, max_len=4)
    assert decoded[0].attention.shape[1] == src.shape[1]  # every key
