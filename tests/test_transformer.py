"""Tests of d2lmini.transformer against PyTorch's own layers."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from d2lmini.attention import AttentionMemory, masked_softmax
from d2lmini.transformer import (
    AddNorm,
    PositionalEncoding,
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
    causal_lens,
    copy_from_pytorch,
)

D, FFN, H = 16, 24, 4


def padded_batch(gen, B=3, T=6):
    X = torch.randn(B, T, D, generator=gen, requires_grad=True)
    lens = torch.tensor([6, 4, 1])[:B]
    return X, lens, torch.arange(T)[None] >= lens[:, None]  # True = pad


def test_encoder_block_equals_pytorch_forward_and_gradients():
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(D, H, FFN, dropout=0.0,
                                        batch_first=True, norm_first=False)
    ours = copy_from_pytorch(TransformerEncoderBlock(D, FFN, H), theirs)
    X, lens, pad = padded_batch(gen)
    X2 = X.detach().clone().requires_grad_()
    a = ours(X, lens)
    b = theirs(X2, src_key_padding_mask=pad)
    torch.testing.assert_close(a, b)
    a.square().sum().backward()
    b.square().sum().backward()
    torch.testing.assert_close(X.grad, X2.grad)
    torch.testing.assert_close(ours.ffn.dense1.weight.grad,
                               theirs.linear1.weight.grad)
    torch.testing.assert_close(ours.attention.W_q.weight.grad,
                               theirs.self_attn.in_proj_weight.grad[:D])


def test_decoder_block_equals_pytorch_forward_and_gradients():
    gen = torch.Generator().manual_seed(1)
    torch.manual_seed(1)
    theirs = nn.TransformerDecoderLayer(D, H, FFN, dropout=0.0,
                                        batch_first=True, norm_first=False)
    ours = copy_from_pytorch(TransformerDecoderBlock(D, FFN, H), theirs)
    X = torch.randn(3, 5, D, generator=gen, requires_grad=True)
    memory, src_lens, pad = padded_batch(gen)
    memory = memory.detach()
    X2 = X.detach().clone().requires_grad_()
    a, _ = ours(X, memory, src_lens)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    b = theirs(X2, memory, tgt_mask=causal, memory_key_padding_mask=pad)
    torch.testing.assert_close(a, b)
    a.square().sum().backward()
    b.square().sum().backward()
    torch.testing.assert_close(X.grad, X2.grad)
    torch.testing.assert_close(ours.cross_attention.W_o.weight.grad,
                               theirs.multihead_attn.out_proj.weight.grad)


def test_causal_valid_lens_equal_sdpa_is_causal():
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 7, 8, generator=gen) for _ in range(3))
    weights = masked_softmax(q @ k.transpose(1, 2) / math.sqrt(8),
                             causal_lens(2, 7))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(weights @ v, expected)


def test_positional_encoding_values_and_relative_positions():
    pe = PositionalEncoding(8, max_len=60)
    P = pe.P  # (60, 8)
    j = torch.arange(4)
    i = 7
    torch.testing.assert_close(P[i, 0::2], torch.sin(i / 10000 ** (2 * j / 8)))
    torch.testing.assert_close(P[i, 1::2], torch.cos(i / 10000 ** (2 * j / 8)))
    # P[i + delta] is the same linear map of P[i] for every i.
    for delta in (1, 5):
        A, B = P[:60 - delta].double(), P[delta:].double()
        M = torch.linalg.lstsq(A, B).solution  # (8, 8)
        torch.testing.assert_close(A @ M, B, atol=1e-5, rtol=0)


def test_key_value_cache_equals_recomputing_the_prefix():
    torch.manual_seed(3)
    enc = TransformerEncoder(11, D, FFN, H, 2).eval()
    dec = TransformerDecoder(13, D, FFN, H, 2).eval()
    src = torch.randint(0, 11, (2, 6))
    src_lens = torch.tensor([6, 3])
    tgt = torch.randint(0, 13, (2, 5))
    with torch.no_grad():
        memory = enc(src, src_lens)
        full, _ = dec(tgt, dec.init_state(memory, src_lens))  # (2, 5, V)
        state, steps = dec.init_state(memory, src_lens), []
        for t in range(5):
            logits, state = dec(tgt[:, t:t + 1], state)
            steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, 1), full)
    # Each block cached the keys of 5 steps, per head.
    assert state.caches[0].keys.shape == (2 * H, 5, D // H)


def test_packed_features_are_the_features_of_the_valid_steps():
    torch.manual_seed(4)
    enc = TransformerEncoder(11, D, FFN, H, 2).eval()
    dec = TransformerDecoder(13, D, FFN, H, 2).eval()
    src, src_lens = torch.randint(0, 11, (3, 6)), torch.tensor([6, 4, 2])
    tgt, lengths = torch.randint(0, 13, (3, 7)), torch.tensor([5, 5, 2])
    with torch.no_grad():
        state = dec.init_state(enc(src, src_lens), src_lens)
        full, _ = dec._features(tgt, state)  # (3, 7, D)
        packed = dec.forward_packed(tgt, state, lengths)  # (12, D)
    expected = torch.cat([full[:n, t] for t, n in
                          enumerate([3, 3, 2, 2, 2])])  # time-major
    torch.testing.assert_close(packed, expected)
    with pytest.raises(ValueError, match="sorted in decreasing order"):
        dec.forward_packed(tgt, state, torch.tensor([2, 5, 5]))


def test_greedy_decode_with_the_cache_equals_recomputing():
    from d2lmini.decoding import greedy_decode
    from d2lmini.seq2seq import Seq2Seq
    torch.manual_seed(5)
    enc = TransformerEncoder(11, D, FFN, H, 2)
    dec = TransformerDecoder(13, D, FFN, H, 2)
    model = Seq2Seq(enc, dec, tgt_pad=0).train()
    src, src_lens = torch.randint(3, 11, (4, 6)), torch.tensor([6, 5, 3, 1])
    out = greedy_decode(model, src, src_lens, bos=1, eos=2, max_len=8,
                        forbid=())
    assert model.training  # the mode is restored
    model.eval()
    with torch.no_grad():
        memory = enc(src, src_lens)
        Y = torch.ones(4, 1, dtype=torch.long)
        for _ in range(8):  # the whole prefix again at every step
            logits, _ = dec(Y, dec.init_state(memory, src_lens))
            Y = torch.cat([Y, logits[:, -1:].argmax(-1)], 1)
        weights = dec.cross_attention_weights  # (4, h, 8, 6)
    for i, d in enumerate(out):
        row = Y[i, 1:].tolist()
        n = row.index(2) if 2 in row else len(row)
        assert d.ids == row[:n] and d.finished == (2 in row)
        steps = n + d.finished
        torch.testing.assert_close(
            d.attention, weights[i, :, :steps, :int(src_lens[i])])


def test_layer_norm_ignores_the_batch_but_batch_norm_does_not():
    X = torch.randn(2, 4, D)
    padded = torch.cat([X, torch.zeros(2, 3, D)], dim=1)  # 3 pad steps
    ln = AddNorm(D)
    torch.testing.assert_close(ln(padded, padded)[:, :4], ln(X, X))
    bn = nn.BatchNorm1d(D).train()
    a = bn((2 * X).transpose(1, 2)).transpose(1, 2)
    b = bn((2 * padded).transpose(1, 2)).transpose(1, 2)[:, :4]
    assert not torch.allclose(a, b)  # the pads changed the statistics


def test_copy_from_pytorch_refuses_what_it_cannot_copy():
    enc = nn.TransformerEncoderLayer(D, H, FFN, batch_first=True)
    with pytest.raises(TypeError, match="TransformerDecoderBlock"):
        copy_from_pytorch(TransformerDecoderBlock(D, FFN, H), enc)
    for layer, words in (
            (nn.TransformerEncoderLayer(D, H, FFN, norm_first=True),
             "norm_first=True"),
            (nn.TransformerEncoderLayer(D, H, FFN, activation="gelu"),
             "ReLU False"),
            (nn.TransformerEncoderLayer(D, H, 2 * FFN), "(16, 48, 4)")):
        with pytest.raises(ValueError, match=re.escape(words)):
            copy_from_pytorch(TransformerEncoderBlock(D, FFN, H), layer)


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_copy_from_pytorch_copies_a_layer_without_biases(kind):
    """bias=False: our biases become zeros, the function stays the same."""
    torch.manual_seed(4)
    X, lens, padding = padded_batch(torch.Generator().manual_seed(4))
    if kind == "encoder":
        theirs = nn.TransformerEncoderLayer(D, H, FFN, dropout=0.0,
                                            batch_first=True, bias=False)
        ours = copy_from_pytorch(TransformerEncoderBlock(D, FFN, H), theirs)
        a, b = ours(X, lens), theirs(X, src_key_padding_mask=padding)
        a, b = a[~padding], b[~padding]
    else:
        theirs = nn.TransformerDecoderLayer(D, H, FFN, dropout=0.0,
                                            batch_first=True, bias=False)
        ours = copy_from_pytorch(TransformerDecoderBlock(D, FFN, H), theirs)
        Y = torch.randn(3, 5, D)
        causal = nn.Transformer.generate_square_subsequent_mask(5)
        a = ours(Y, X, lens)[0]
        b = theirs(Y, X, tgt_mask=causal, memory_key_padding_mask=padding)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    biases = [p for name, p in ours.named_parameters()
              if name.endswith("bias")]
    assert biases and all((p == 0).all() for p in biases)


def test_copy_from_pytorch_refuses_another_layer_norm_eps():
    theirs = nn.TransformerEncoderLayer(D, H, FFN, layer_norm_eps=1e-3)
    with pytest.raises(ValueError, match=re.escape("layer_norm_eps 0.001")):
        copy_from_pytorch(TransformerEncoderBlock(D, FFN, H), theirs)


@pytest.mark.parametrize("lens, words", [
    (torch.tensor([3, 5]), "at most S = 4"),
    (torch.tensor([[1, 2, 3, 4], [1, 2, 3, 9]]), "[9]"),
    (torch.tensor([3, -1]), ">= 0"),
    (torch.tensor([3, 2, 1]), "does not match"),
])
def test_the_encoder_refuses_valid_lens_that_do_not_fit_the_source(lens,
                                                                   words):
    encoder = TransformerEncoder(7, D, FFN, H, 1)
    decoder = TransformerDecoder(7, D, FFN, H, 1)
    with pytest.raises(ValueError, match=re.escape(words)):
        encoder(torch.ones(2, 4, dtype=torch.long), lens)
    with pytest.raises(ValueError, match=re.escape(words)):
        decoder.init_state(torch.zeros(2, 4, D), lens)
    torch.testing.assert_close(  # S itself is the whole source
        encoder(torch.ones(2, 4, dtype=torch.long), torch.tensor([4, 2])),
        encoder(torch.ones(2, 4, dtype=torch.long), torch.tensor([4.0, 2])))


@pytest.mark.parametrize("make, call, words", [
    (lambda: TransformerEncoderBlock(D, FFN, 3), None, "divisor"),
    (lambda: PositionalEncoding(7), None, "even"),
    (lambda: PositionalEncoding(D, max_len=4),
     lambda m: m(torch.zeros(1, 5, D)), "max_len=5"),
    (lambda: TransformerEncoderBlock(D, FFN, H),
     lambda m: m(torch.zeros(2, 3, D + 1)), "(B, T, 16)"),
    (lambda: TransformerEncoderBlock(D, FFN, H),
     lambda m: m(torch.zeros(2, 3, D), torch.tensor([1, 2, 3])), "shape"),
    (lambda: TransformerDecoderBlock(D, FFN, H),
     lambda m: m(torch.zeros(2, 1, D), torch.zeros(2, 4, D),
                 cache=torch.zeros(3, 2, D)), "got (3, 2, 16)"),
    (lambda: TransformerDecoderBlock(D, FFN, H),
     lambda m: m(torch.zeros(2, 1, D), torch.zeros(2, 4, D),
                 cache=AttentionMemory(torch.zeros(4, 3, D // H),
                                       torch.zeros(4, 3, D // H), None)),
     "2 sequences x 4 heads"),
    (lambda: TransformerEncoder(5, D, FFN, H, 1),
     lambda m: m(torch.zeros(2, 3, D)), "token ids"),
])
def test_bad_input_is_refused_with_a_clear_message(make, call, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        call(make())
