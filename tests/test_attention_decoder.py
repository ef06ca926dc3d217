"""Tests of d2lmini.attention_decoder: shapes, keys projected and the mask
built once per sequence.  Models come from ``test_seq2seq.py``'s helpers
(its tests run every decoder kind through ``Seq2Seq``)."""

import pytest
import torch
from test_seq2seq import (
    CountingMask,
    D,
    V,
    make_batch,
    make_model,
    per_step_copy,
)

from d2lmini.attention_decoder import AttentionState


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


@pytest.mark.parametrize("kind", ["additive", "multihead"])
def test_keys_are_projected_once_per_sequence(kind):
    model = make_model(kind)
    calls = []
    model.decoder.attention.W_k.register_forward_hook(
        lambda *args: calls.append(1))
    src, tgt_input, src_valid_len, label = make_batch([7, 3, 5], [6, 2, 7])
    model(src, tgt_input, src_valid_len)  # 7 decoding steps
    assert len(calls) == 1
    model.training_step((src, tgt_input, src_valid_len, label))
    assert len(calls) == 2


@pytest.mark.parametrize("kind", ["additive", "multihead"])
def test_the_mask_is_built_once_per_sequence(kind, monkeypatch):
    """Not once per step; and the results equal masking at every step."""
    model = make_model(kind).eval()
    old = per_step_copy(model)
    batch = make_batch([7, 3, 5, 1], [6, 2, 7, 1])
    src, tgt_input, src_valid_len, label = batch
    counter = CountingMask(monkeypatch)
    logits = model(src, tgt_input, src_valid_len)  # 7 decoding steps
    weights = model.decoder.attention_weights
    assert counter.calls == 1
    loss, _ = model.training_step(batch)  # rows drop out: mask sliced
    assert counter.calls == 2
    assert torch.equal(logits, old(src, tgt_input, src_valid_len))
    for w, w_old in zip(weights, old.decoder.attention_weights,
                        strict=True):
        assert torch.equal(w, w_old)
    assert counter.calls == 2 + 7  # the old path: once per step
    torch.testing.assert_close(loss, old.training_step(batch)[0])
    state = model.decoder.init_state(model.encoder(src, src_valid_len),
                                     src_valid_len)
    assert isinstance(state, AttentionState)
    assert state.src_valid_len is src_valid_len
    assert state.memory.mask.shape[0] % 4 == 0  # (B or B * h, 1, S)


def books_decoder_logits(decoder, X, state):
    """The decoder's logits computed as the book writes it: at every step
    the attention's own forward on the previous top-layer state, then
    one step of the decoder's ``nn.GRU`` module on [context; embedding].
    """
    enc_outputs, hidden, src_valid_len, _ = state
    outputs = []
    for x in decoder.embedding(X).unbind(1):  # (B, E)
        query = hidden[-1].unsqueeze(1)  # (B, 1, D)
        context = decoder.attention(query, enc_outputs, enc_outputs,
                                    src_valid_len)  # (B, 1, D)
        out, hidden = decoder.rnn(
            torch.cat((context, x.unsqueeze(1)), dim=-1), hidden)
        outputs.append(out)
    return decoder.dense(torch.cat(outputs, dim=1)), hidden


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("kind", ["additive", "multihead"])
def test_the_decoder_equals_the_books_formulation_with_nn_gru(kind, layers):
    """Its own GRU steps (the embedding's input projection made for all
    steps at once) give nn.GRU's logits, final state and gradients."""
    model = make_model(kind, layers=layers)
    src, tgt_input, src_valid_len, _ = make_batch([7, 3, 5], [6, 2, 7])
    results = []
    for run in ("ours", "book's"):
        model.zero_grad()
        state = model.decoder.init_state(model.encoder(src, src_valid_len),
                                         src_valid_len)
        if run == "ours":
            logits, state = model.decoder(tgt_input, state)
            hidden = state.hidden
        else:
            logits, hidden = books_decoder_logits(model.decoder, tgt_input,
                                                  state)
        (logits.square().mean() + hidden.sum()).backward()
        results.append((logits, hidden, {
            n: p.grad.clone() for n, p in model.named_parameters()}))
    (ours, our_state, our_grads), (book, book_state, book_grads) = results
    torch.testing.assert_close(ours, book)
    torch.testing.assert_close(our_state, book_state)
    assert our_grads.keys() == book_grads.keys()
    for name, grad in our_grads.items():
        torch.testing.assert_close(grad, book_grads[name], msg=name)
