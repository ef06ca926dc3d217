"""Tests of d2lmini.transformer against PyTorch's own layers."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from d2lmini.attention import masked_softmax
from d2lmini.transformer import (
    AddNorm,
    PositionalEncoding,
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
    causal_lens,
)

D, FFN, H = 16, 24, 4


def copy_attention(ours, theirs):
    """d2lmini's MultiHeadAttention gets nn.MultiheadAttention's weights."""
    Wq, Wk, Wv = theirs.in_proj_weight.detach().chunk(3)
    bq, bk, bv = theirs.in_proj_bias.detach().chunk(3)
    with torch.no_grad():
        for lin, w, b in ((ours.W_q, Wq, bq), (ours.W_k, Wk, bk),
                          (ours.W_v, Wv, bv)):
            lin.weight.copy_(w)
            lin.bias.copy_(b)
        ours.W_o.weight.copy_(theirs.out_proj.weight)
        ours.W_o.bias.copy_(theirs.out_proj.bias)


def copy_linear(ours, theirs):
    with torch.no_grad():
        ours.weight.copy_(theirs.weight)
        ours.bias.copy_(theirs.bias)


def copy_ffn_and_norms(ours, theirs, norms):
    """The FFN and the ``(AddNorm, nn.LayerNorm)`` pairs of a block."""
    copy_linear(ours.ffn.dense1, theirs.linear1)
    copy_linear(ours.ffn.dense2, theirs.linear2)
    for mine, pt in norms:
        copy_linear(mine.ln, pt)


def padded_batch(gen, B=3, T=6):
    X = torch.randn(B, T, D, generator=gen, requires_grad=True)
    lens = torch.tensor([6, 4, 1])[:B]
    return X, lens, torch.arange(T)[None] >= lens[:, None]  # True = pad


def test_encoder_block_equals_pytorch_forward_and_gradients():
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(D, H, FFN, dropout=0.0,
                                        batch_first=True, norm_first=False)
    ours = TransformerEncoderBlock(D, FFN, H)
    copy_attention(ours.attention, theirs.self_attn)
    copy_ffn_and_norms(ours, theirs, ((ours.addnorm1, theirs.norm1),
                                      (ours.addnorm2, theirs.norm2)))
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
    ours = TransformerDecoderBlock(D, FFN, H)
    copy_attention(ours.self_attention, theirs.self_attn)
    copy_attention(ours.cross_attention, theirs.multihead_attn)
    copy_ffn_and_norms(ours, theirs, ((ours.addnorm1, theirs.norm1),
                                      (ours.addnorm2, theirs.norm2),
                                      (ours.addnorm3, theirs.norm3)))
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
    assert state[2][0].shape == (2, 5, D)  # each block cached 5 steps


def test_layer_norm_ignores_the_batch_but_batch_norm_does_not():
    X = torch.randn(2, 4, D)
    padded = torch.cat([X, torch.zeros(2, 3, D)], dim=1)  # 3 pad steps
    ln = AddNorm(D)
    torch.testing.assert_close(ln(padded, padded)[:, :4], ln(X, X))
    bn = nn.BatchNorm1d(D).train()
    a = bn((2 * X).transpose(1, 2)).transpose(1, 2)
    b = bn((2 * padded).transpose(1, 2)).transpose(1, 2)[:, :4]
    assert not torch.allclose(a, b)  # the pads changed the statistics


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
                 cache=torch.zeros(3, 2, D)), "cache holds 3"),
    (lambda: TransformerEncoder(5, D, FFN, H, 1),
     lambda m: m(torch.zeros(2, 3, D)), "token ids"),
])
def test_bad_input_is_refused_with_a_clear_message(make, call, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        call(make())
