"""Tests of d2lmini.attention, checked against PyTorch's own layers."""


import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from d2lmini import attention as attention_module
from d2lmini.attention import (
    AdditiveAttention,
    AttentionMemory,
    DotProductAttention,
    masked_softmax,
    valid_mask,
)
from d2lmini.multihead import MultiHeadAttention
from d2lmini.utils import check_shape, set_seed

FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2,
       torch.float32: 1e-6, torch.float64: 1e-12}
fast = settings(max_examples=40, deadline=None)


@st.composite
def scores_and_lens(draw):
    """Random scores (B, L, S) with 1-D and 2-D valid lengths."""
    B = draw(st.integers(1, 4))
    L = draw(st.integers(1, 4))
    S = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(B, L, S, generator=gen) * draw(st.sampled_from([1, 30]))
    lens = torch.randint(0, S + 2, (B,), generator=gen)
    return X, lens


# masked_softmax: properties ------------------------------------------------

@fast
@given(scores_and_lens(), st.sampled_from(FLOAT_DTYPES))
def test_rows_sum_to_one_or_zero_and_masked_are_exact_zeros(data, dtype):
    X, lens = data
    X = X.to(dtype)
    W = masked_softmax(X, lens)
    assert W.dtype == dtype and W.shape == X.shape
    assert torch.isfinite(W).all()
    S = X.shape[-1]
    positions = torch.arange(S)
    masked = positions[None, None, :] >= lens[:, None, None]
    assert (W[masked.expand_as(W)] == 0).all()
    sums = W.double().sum(-1)  # (B, L)
    expected = (lens > 0).double()[:, None].expand_as(sums)
    torch.testing.assert_close(sums, expected, atol=TOL[dtype] * S,
                               rtol=0)


@fast
@given(scores_and_lens())
def test_one_d_and_two_d_valid_lens_agree(data):
    X, lens = data
    lens_2d = lens[:, None].expand(X.shape[0], X.shape[1])
    torch.testing.assert_close(masked_softmax(X, lens),
                               masked_softmax(X, lens_2d), rtol=0, atol=0)


@fast
@given(scores_and_lens())
def test_input_is_not_mutated(data):
    X, lens = data
    X_before, lens_before = X.clone(), lens.clone()
    masked_softmax(X, lens)
    masked_softmax(X.transpose(1, 2), None)
    assert torch.equal(X, X_before) and torch.equal(lens, lens_before)


@fast
@given(scores_and_lens())
def test_matches_softmax_of_the_valid_prefix(data):
    X, lens = data
    W = masked_softmax(X, lens)
    for b, n in enumerate(lens.tolist()):
        n = min(n, X.shape[-1])
        if n:
            torch.testing.assert_close(W[b, :, :n],
                                       torch.softmax(X[b, :, :n], -1))


def test_book_examples():
    """d2l's two examples: every row normalizes over its own length."""
    set_seed(0)
    X = torch.rand(2, 2, 4)
    W = masked_softmax(X, torch.tensor([2, 3]))
    assert (W[0, :, 2:] == 0).all() and (W[1, :, 3:] == 0).all()
    W = masked_softmax(X, torch.tensor([[1, 3], [2, 4]]))
    assert torch.equal(W[0, 0], torch.tensor([1.0, 0, 0, 0]))
    assert (W[1, 0, 2:] == 0).all() and (W[1, 1] > 0).all()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_zero_valid_length_gives_zero_row_in_every_dtype(dtype):
    X = torch.tensor([[[60000.0, -60000.0, 3.0]]]).to(dtype)
    W = masked_softmax(X, torch.tensor([0]))
    assert torch.equal(W, torch.zeros_like(W))
    W = masked_softmax(X, torch.tensor([2]))
    assert torch.isfinite(W).all() and W[0, 0, 2] == 0


def test_float_valid_lens_and_lengths_above_s():
    X = torch.randn(2, 3, 4)
    torch.testing.assert_close(masked_softmax(X, torch.tensor([2.0, 9.0])),
                               masked_softmax(X, torch.tensor([2, 4])))


def test_no_mask_is_plain_softmax():
    X = torch.randn(3, 5)
    torch.testing.assert_close(masked_softmax(X, None), X.softmax(-1))


def test_gradcheck_float64():
    X = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    for lens in (torch.tensor([0, 3]), torch.tensor([[1, 2, 5], [0, 4, 3]])):
        assert torch.autograd.gradcheck(
            lambda x, lens=lens: masked_softmax(x, lens), (X,))


def test_gradient_is_zero_at_masked_positions_and_finite():
    X = torch.randn(2, 1, 4, requires_grad=True)
    W = masked_softmax(X, torch.tensor([0, 2]))
    (W * torch.randn_like(W)).sum().backward()
    assert torch.isfinite(X.grad).all()
    assert (X.grad[0] == 0).all() and (X.grad[1, :, 2:] == 0).all()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_a_valid_score_at_the_fill_value_is_still_normalised(dtype):
    """Masking goes by position: a valid score at the dtype's minimum
    gets all the weight, whatever the masked scores are."""
    low = torch.finfo(dtype).min
    X = torch.tensor([[[low, 0.0, 0.0], [0.0, 0.0, 0.0]]], dtype=dtype)
    expected = torch.tensor([[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]],
                            dtype=dtype)
    lens = torch.tensor([[1, 2]])
    torch.testing.assert_close(masked_softmax(X, lens), expected)
    torch.testing.assert_close(masked_softmax(X, mask=valid_mask(lens, 3)),
                               expected)
    torch.testing.assert_close(
        masked_softmax(X[:, :1], torch.tensor([1])), expected[:, :1])


def test_masking_makes_no_inf_or_nan_even_in_the_backward_pass():
    """A row with no valid key, or only valid scores of -inf: anomaly
    detection (which raises on a nan in any backward step) stays quiet,
    and the gradient is finite."""
    X = torch.tensor([[[0.5, -1.0, 2.0], [-math.inf, -math.inf, 1.0]]],
                     requires_grad=True)
    with torch.autograd.detect_anomaly(check_nan=True):
        weights = masked_softmax(X, torch.tensor([[0, 2]]))
        (weights * torch.arange(3.0)).sum().backward()
    assert torch.isfinite(weights).all() and torch.isfinite(X.grad).all(), (
        weights, X.grad)
    assert weights[0, 0].eq(0).all() and X.grad[0, 0].eq(0).all(), (
        weights, X.grad)
    torch.testing.assert_close(weights[0, 1], torch.tensor([0.5, 0.5, 0.0]))


def test_a_nan_score_stays_in_its_own_row():
    """A nan among a row's valid scores spoils that row's valid keys
    only: its masked keys keep weight 0, whatever the other rows of the
    batch are (the masked softmax runs the same steps for every row)."""
    X = torch.tensor([[[math.nan, 0.0, 1.0]], [[0.0, 1.0, 2.0]]])
    for lens in (torch.tensor([2, 2]), torch.tensor([2, 0]),
                 torch.tensor([2, 3])):
        W = masked_softmax(X, lens)
        assert W[0, 0, :2].isnan().all() and W[0, 0, 2] == 0, (lens, W)
        alone = masked_softmax(X[1:], lens[1:])
        assert torch.equal(W[1:], alone), (lens, W)


def test_masked_softmax_reads_no_value_on_the_host(monkeypatch):
    """No branch on the scores' values: converting a tensor to a Python
    bool (what an ``if`` on a tensor does, a device-to-host sync on a
    GPU) is never called once the mask is built."""
    X = torch.randn(2, 3, 4)
    mask = valid_mask(torch.tensor([0, 3]), 4)
    calls = []
    original = torch.Tensor.__bool__

    def spy(self):
        calls.append(tuple(self.shape))
        return original(self)

    monkeypatch.setattr(torch.Tensor, "__bool__", spy)
    masked_softmax(X, mask=mask)
    assert calls == [], f"masked_softmax read values on the host: {calls}"


@pytest.mark.slow
def test_attention_compiles_as_one_graph():
    """``torch.compile(..., fullgraph=True)`` traces the masked softmax,
    ``DotProductAttention`` and ``MultiHeadAttention`` with lengths
    without a graph break, and gives the eager numbers."""
    torch._dynamo.reset()
    set_seed(0)
    X = torch.randn(2, 3, 4)
    lens = torch.tensor([0, 3])
    compiled = torch.compile(masked_softmax, fullgraph=True,
                             backend="eager")
    torch.testing.assert_close(compiled(X, lens), masked_softmax(X, lens))
    mask = valid_mask(lens, 4)
    torch.testing.assert_close(compiled(X, mask=mask),
                               masked_softmax(X, mask=mask))
    q, kv = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    for layer in (DotProductAttention(), MultiHeadAttention(8, 2)):
        layer.eval()
        fn = torch.compile(layer, fullgraph=True, backend="eager")
        torch.testing.assert_close(fn(q, kv, kv, lens), layer(q, kv, kv, lens))


# masked_softmax: bad input --------------------------------------------------

@pytest.mark.parametrize("X, lens, message", [
    (torch.randn(4), torch.tensor([1]), "at least 2 dimensions"),
    (torch.randn(2, 3, 4), torch.tensor([1, -1]), "must be >= 0"),
    (torch.randn(2, 3, 4), torch.tensor([1, 2, 3]), "does not match"),
    (torch.randn(2, 3, 4), torch.ones(2, 2), "does not match"),
    (torch.randn(2, 3, 4), torch.ones(3, 3), "does not match"),
    (torch.randn(2, 4), torch.ones(2, 4), r"shape \(B,\) or \(B, L\)"),
    (torch.randn(2, 3, 4), torch.ones(2, 3, 1), r"shape \(B,\) or"),
    (torch.randn(2, 3, 4), torch.tensor([1.5, 2.0]), "whole numbers"),
    (torch.randn(2, 3, 4), torch.tensor([1.0, float("nan")]), "finite"),
])
def test_bad_input_raises_value_error(X, lens, message):
    with pytest.raises(ValueError, match=message):
        masked_softmax(X, lens)


def test_bad_types_raise_type_error():
    with pytest.raises(TypeError, match="floating-point"):
        masked_softmax(torch.ones(2, 3, dtype=torch.long), None)
    with pytest.raises(TypeError, match="integers or floats"):
        masked_softmax(torch.randn(2, 3), torch.tensor([True, False]))


@fast
@given(scores_and_lens(), st.sampled_from(FLOAT_DTYPES))
def test_a_ready_mask_equals_valid_lens(data, dtype):
    X, lens = data
    X = X.to(dtype)
    expected = masked_softmax(X, lens)
    mask = valid_mask(lens, X.shape[-1])  # (B, 1, S)
    assert torch.equal(masked_softmax(X, mask=mask), expected)
    heads = X[:, None].expand(-1, 3, -1, -1)  # (B, h, L, S)
    assert torch.equal(masked_softmax(heads, mask=mask),
                       expected[:, None].expand_as(heads))


def test_mask_errors():
    X = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="not both"):
        masked_softmax(X, torch.tensor([1, 2]),
                       mask=valid_mask(torch.tensor([1, 2]), 4))
    with pytest.raises(TypeError, match="boolean tensor"):
        masked_softmax(X, mask=torch.ones(2, 1, 4))
    for shape in [(2, 4), (3, 1, 4), (2, 2, 4), (2, 1, 5)]:
        with pytest.raises(ValueError, match=r"expected \(B, 1 or L, S\)"):
            masked_softmax(X, mask=torch.ones(shape, dtype=torch.bool))


def test_valid_mask_rejects_0_d_and_3_d_lengths():
    with pytest.raises(ValueError, match=r"\(B,\) or \(B, L\), got \(\)"):
        valid_mask(torch.tensor(2), 4)
    with pytest.raises(ValueError, match=r"\(B,\) or \(B, L\)"):
        valid_mask(torch.ones(2, 3, 4), 4)
    assert valid_mask([2, 0], 3).tolist() == [[[True, True, False]],
                                              [[False, False, False]]]


# DotProductAttention -------------------------------------------------------

def sdpa_reference(q, k, v, lens):
    mask = valid_mask(lens, k.shape[1])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("lens", [None, torch.tensor([2, 5]),
                                  torch.tensor([[1, 2, 3], [5, 4, 1]])])
@pytest.mark.parametrize("need_weights", [True, False])
def test_dot_product_equals_pytorch_sdpa(lens, need_weights):
    set_seed(1)
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 6)
    attention = DotProductAttention(dropout=0.5).eval()
    out = attention(q, k, v, lens, need_weights=need_weights)
    ref = (F.scaled_dot_product_attention(q, k, v) if lens is None
           else sdpa_reference(q, k, v, lens))
    torch.testing.assert_close(out, ref)
    if need_weights:
        check_shape(attention.attention_weights, (2, 3, 5))
    else:
        assert attention.attention_weights is None


@pytest.mark.parametrize("d, S", [(4, 9), (16, 5)],
                         ids=["queries scaled (d < S)", "scores scaled"])
def test_both_places_of_the_sqrt_d_give_pytorchs_attention_and_grads(d, S):
    """The 1/sqrt(d) goes on the queries when they are the smaller tensor,
    on the scores otherwise: outputs and gradients equal PyTorch's."""
    set_seed(2)
    q = torch.randn(2, 3, d, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, S, d, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, S, 3, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([2, S])
    out, weights = DotProductAttention()(q, k, v, lens, return_weights=True)
    ref = sdpa_reference(q, k, v, lens)
    torch.testing.assert_close(out, ref)
    grads = torch.autograd.grad((out * out).sum(), (q, k, v))
    refs = torch.autograd.grad((ref * ref).sum(), (q, k, v))
    for name, g, r in zip("qkv", grads, refs):
        torch.testing.assert_close(g, r, msg=name)
    scores = q @ k.transpose(1, 2) / d ** 0.5
    torch.testing.assert_close(weights, masked_softmax(scores, lens))


def test_fused_and_weights_paths_agree_with_empty_rows_and_gradients():
    q = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    k, v = torch.randn(2, 6, 4, dtype=torch.float64), torch.randn(2, 6, 3)
    v = v.double()
    lens = torch.tensor([[0, 2, 6], [3, 0, 1]])
    attention = DotProductAttention()
    slow = attention(q, k, v, lens)
    g_slow, = torch.autograd.grad(slow.sum(), q)
    fast_out = attention(q, k, v, lens, need_weights=False)
    g_fast, = torch.autograd.grad(fast_out.sum(), q)
    torch.testing.assert_close(slow, fast_out)
    torch.testing.assert_close(g_slow, g_fast)
    assert (slow[0, 0] == 0).all() and (slow[1, 1] == 0).all()


@pytest.mark.parametrize("need_weights", [True, False])
def test_dot_product_takes_a_ready_mask(need_weights):
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 3)
    lens = torch.tensor([[0, 2, 5], [3, 1, 4]])
    attention = DotProductAttention()
    expected = attention(q, k, v, lens, need_weights=need_weights)
    out = attention(q, k, v, need_weights=need_weights,
                    mask=valid_mask(lens, 5))
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="not both"):
        attention(q, k, v, lens, need_weights=need_weights,
                  mask=valid_mask(lens, 5))


def test_dot_product_scales_by_sqrt_d():
    q = torch.ones(1, 1, 4)
    k = torch.tensor([[[1.0, 1, 1, 1], [0, 0, 0, 0]]])
    attention = DotProductAttention()
    attention(q, k, torch.randn(1, 2, 2))
    scores = torch.tensor([4.0, 0.0]) / 2  # q.k / sqrt(4)
    torch.testing.assert_close(attention.attention_weights[0, 0],
                               scores.softmax(-1))


def test_dot_product_shape_errors():
    attention = DotProductAttention()
    with pytest.raises(ValueError, match="same feature size"):
        attention(torch.randn(2, 3, 4), torch.randn(2, 5, 3),
                  torch.randn(2, 5, 3))
    with pytest.raises(ValueError, match="same length S"):
        attention(torch.randn(2, 3, 4), torch.randn(2, 5, 4),
                  torch.randn(2, 6, 3))
    with pytest.raises(ValueError, match="same batch size"):
        attention(torch.randn(2, 3, 4), torch.randn(3, 5, 4),
                  torch.randn(3, 5, 4))
    with pytest.raises(ValueError, match="does not match"):
        attention(torch.randn(2, 3, 4), torch.randn(2, 5, 4),
                  torch.randn(2, 5, 4), torch.tensor([1, 2, 3]),
                  need_weights=False)


# AdditiveAttention ---------------------------------------------------------

def test_additive_book_example():
    """d2l's example: equal keys give uniform weights over valid keys."""
    queries = torch.normal(0, 1, (2, 1, 20))
    keys = torch.ones((2, 10, 2))
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4)
    values = values.repeat(2, 1, 1)
    attention = AdditiveAttention(num_hiddens=8, dropout=0.1).eval()
    out = attention(queries, keys, values, torch.tensor([2, 6]))
    check_shape(out, (2, 1, 4))
    torch.testing.assert_close(attention.attention_weights[0, 0, :2],
                               torch.full((2,), 0.5))
    torch.testing.assert_close(out[1, 0], values[1, :6].mean(0))


def test_additive_matches_a_loop_over_query_key_pairs():
    set_seed(2)
    attention = AdditiveAttention(5, query_size=3, key_size=4)
    q, k, v = torch.randn(2, 3, 3), torch.randn(2, 4, 4), torch.randn(2, 4, 2)
    lens = torch.tensor([3, 1])
    out = attention(q, k, v, lens)
    for b in range(2):
        for i in range(3):
            n = lens[b]
            scores = torch.stack([
                attention.w_v(torch.tanh(attention.W_q(q[b, i])
                                         + attention.W_k(k[b, j])))[0]
                for j in range(n)])
            expected = scores.softmax(0) @ v[b, :n]
            torch.testing.assert_close(out[b, i], expected)


def test_additive_memory_reuses_the_key_projection():
    attention = AdditiveAttention(6, query_size=4, key_size=5)
    calls = []
    attention.W_k.register_forward_hook(lambda *args: calls.append(1))
    k, v = torch.randn(2, 7, 5), torch.randn(2, 7, 3)
    memory = attention.precompute(k, v, torch.tensor([7, 3]))
    steps = [attention(torch.randn(2, 1, 4), None, None, memory=memory)
             for _ in range(5)]
    assert len(calls) == 1 and all(s.shape == (2, 1, 3) for s in steps)
    q = torch.randn(2, 1, 4)
    torch.testing.assert_close(attention(q, k, v), attention(
        q, None, None, memory=attention.precompute(k, v)))


def test_additive_infers_sizes_like_d2l():
    attention = AdditiveAttention(8, 0.0)
    out = attention(torch.randn(2, 1, 20), torch.randn(2, 10, 2),
                    torch.randn(2, 10, 4))
    check_shape(out, (2, 1, 4))
    assert attention.W_q.weight.shape == (8, 20)


# MultiHeadAttention --------------------------------------------------------

def torch_mha_like(mha):
    """An nn.MultiheadAttention holding the same weights as ``mha``."""
    D = mha.W_o.in_features
    ref = nn.MultiheadAttention(D, mha.num_heads, bias=False,
                                batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat(
            [mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))
        ref.out_proj.weight.copy_(mha.W_o.weight)
    return ref.eval()


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_equals_torch_multihead_attention(need_weights):
    set_seed(3)
    mha = MultiHeadAttention(16, 4, dropout=0.3).eval()
    ref = torch_mha_like(mha)
    q, kv = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    lens = torch.tensor([7, 2, 4])
    out = mha(q, kv, kv, lens, need_weights=need_weights)
    # key_padding_mask: True means *ignore*, the opposite of valid_mask.
    expected, weights = ref(q, kv, kv, key_padding_mask=~valid_mask(
        lens, 7)[:, 0], average_attn_weights=False)
    torch.testing.assert_close(out, expected)
    if need_weights:
        torch.testing.assert_close(mha.attention_weights, weights)


def test_multihead_gradients_equal_torch():
    set_seed(4)
    mha = MultiHeadAttention(8, 2)
    ref = torch_mha_like(mha).train()
    q, kv = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    lens = torch.tensor([4, 2])
    mha(q, kv, kv, lens).pow(2).sum().backward()
    out, _ = ref(q, kv, kv, key_padding_mask=~valid_mask(lens, 4)[:, 0])
    out.pow(2).sum().backward()
    W_qkv = torch.cat([mha.W_q.weight.grad, mha.W_k.weight.grad,
                       mha.W_v.weight.grad])
    torch.testing.assert_close(W_qkv, ref.in_proj_weight.grad)
    torch.testing.assert_close(mha.W_o.weight.grad,
                               ref.out_proj.weight.grad)


@fast
@given(st.integers(1, 3), st.integers(1, 5), st.sampled_from([1, 2, 3, 6]))
def test_merge_heads_inverts_split_heads(B, T, h):
    mha = MultiHeadAttention(12 if 12 % h == 0 else 6 * h, h)
    X = torch.randn(B, T, mha.W_o.in_features)
    assert torch.equal(mha.merge_heads(mha.split_heads(X)), X)
    split = mha.split_heads(X)
    d = X.shape[-1] // h
    # Head i of example b holds features [i d, (i + 1) d) of that example.
    assert torch.equal(split[h - 1], X[0, :, (h - 1) * d:h * d])


def test_multihead_matches_a_per_head_loop_with_several_queries():
    """Catches a merge that mixes query positions (the Julia port's bug)."""
    set_seed(5)
    mha = MultiHeadAttention(12, 3, bias=True).eval()
    q, kv = torch.randn(2, 4, 12), torch.randn(2, 5, 12)
    lens = torch.tensor([[5, 1, 3, 2], [4, 4, 0, 5]])
    out = mha(q, kv, kv, lens)
    d = 4
    heads = []
    for i in range(3):
        rows = slice(i * d, (i + 1) * d)

        def project(layer, X, rows=rows):
            return X @ layer.weight[rows].T + layer.bias[rows]

        Q, K, V = (project(mha.W_q, q), project(mha.W_k, kv),
                   project(mha.W_v, kv))
        W = masked_softmax(Q @ K.transpose(1, 2) / d ** 0.5, lens)
        heads.append(W @ V)
    expected = mha.W_o(torch.cat(heads, dim=-1))
    torch.testing.assert_close(out, expected)


def test_multihead_book_shape_check():
    mha = MultiHeadAttention(100, 5, 0.5).eval()
    X, Y = torch.ones(2, 4, 100), torch.ones(2, 6, 100)
    out = mha(X, Y, Y, torch.tensor([3, 2]))
    check_shape(out, (2, 4, 100))
    check_shape(mha.attention_weights, (2, 5, 4, 6))


def test_multihead_memory_equals_direct_call():
    mha = MultiHeadAttention(8, 2).eval()
    kv, q = torch.randn(2, 6, 8), torch.randn(2, 1, 8)
    memory = mha.precompute(kv, kv, torch.tensor([6, 2]))
    torch.testing.assert_close(mha(q, None, None, memory=memory),
                               mha(q, kv, kv, torch.tensor([6, 2])))


def qk_norm_layer():
    """4 heads of size 3 with query-key normalisation, scales set apart."""
    set_seed(7)
    mha = MultiHeadAttention(12, 4, dropout=0.3, bias=True,
                             qk_norm=True).eval()
    with torch.no_grad():
        mha.qk_scale.copy_(torch.tensor([5.0, 0.5, -2.0, 12.0]))
    return mha


@pytest.mark.parametrize("need_weights", [True, False])
def test_qk_norm_equals_torch_attention_of_unit_queries_and_keys(
        need_weights):
    """Each head scores g_h * cos(q, k): PyTorch's own attention of the
    unit queries (times g_h) and unit keys, scale 1, gives the same."""
    mha = qk_norm_layer()
    q, kv = torch.randn(2, 5, 12) * 30, torch.randn(2, 6, 12)
    lens = torch.tensor([6, 2])
    out = mha(q, kv, kv, lens, need_weights=need_weights)

    def heads(X):  # (B, T, 12) -> (B, 4, T, 3)
        return X.reshape(*X.shape[:2], 4, 3).transpose(1, 2)

    Q = F.normalize(heads(mha.W_q(q)), dim=-1) \
        * mha.qk_scale.view(1, 4, 1, 1)
    K = F.normalize(heads(mha.W_k(kv)), dim=-1)
    mask = valid_mask(lens, 6)[:, None]  # (B, 1, 1, S), True: attend
    expected = F.scaled_dot_product_attention(Q, K, heads(mha.W_v(kv)),
                                              attn_mask=mask, scale=1.0)
    expected = mha.W_o(expected.transpose(1, 2).reshape(2, 5, 12))
    torch.testing.assert_close(out, expected)
    if need_weights:
        scores = (Q @ K.transpose(-1, -2)).masked_fill(~mask, -math.inf)
        torch.testing.assert_close(mha.attention_weights,
                                   scores.softmax(-1))


def test_qk_norm_bounds_every_score_by_its_heads_scale():
    """However large the projections, a head's weights are those of
    scores in [-|g_h|, |g_h|]: their ratio is at most e^(2 |g_h|)."""
    mha = qk_norm_layer()
    with torch.no_grad():  # projections 1,000 times larger
        for W in (mha.W_q, mha.W_k):
            W.weight.mul_(1000)
    q, kv = torch.randn(3, 4, 12), torch.randn(3, 7, 12)
    mha(q, kv, kv)
    w = mha.attention_weights  # (B, h, L, S)
    ratio = (w.amax(-1) / w.amin(-1)).log()
    bound = 2 * mha.qk_scale.detach().abs().view(1, 4, 1)
    assert (ratio <= bound * (1 + 1e-5)).all()
    assert torch.isfinite(w).all()


def test_qk_norm_memory_gradients_and_zero_vectors():
    mha = qk_norm_layer().train()
    kv, q = torch.randn(2, 6, 12), torch.randn(2, 1, 12)
    lens = torch.tensor([6, 3])
    memory = mha.precompute(kv, kv, lens)
    mha.eval()
    torch.testing.assert_close(mha(q, None, None, memory=memory),
                               mha(q, kv, kv, lens))
    mha(q, kv, kv, lens).pow(2).sum().backward()
    assert mha.qk_scale.grad is not None
    assert (mha.qk_scale.grad != 0).all()
    # A zero query or key has cosine 0 with everything (no 0 / 0).
    zero = torch.zeros(1, 2, 12)
    assert torch.isfinite(mha(zero, zero, zero)).all()


def test_qk_norm_is_off_by_default_and_checked():
    plain = MultiHeadAttention(8, 2)
    assert plain.qk_norm is False and not hasattr(plain, "qk_scale")
    assert "qk_scale" not in plain.state_dict()
    normed = MultiHeadAttention(8, 2, qk_norm=True)
    assert normed.qk_scale.shape == (2,)
    assert "qk_norm=True" in repr(normed)
    with pytest.raises(TypeError, match="qk_norm must be True or False"):
        MultiHeadAttention(8, 2, qk_norm=1)


def make_layer(kind):
    set_seed(6)
    if kind == "additive":
        return AdditiveAttention(8, query_size=8, key_size=8).eval()
    return MultiHeadAttention(8, 2).eval()


@pytest.mark.parametrize("kind", ["additive", "multihead"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("lens", [torch.tensor([6, 0, 3]),
                                  torch.tensor([[6], [0], [2]])])
def test_memory_mask_equals_valid_lens_at_every_step(kind, dtype, lens):
    """The mask built once by precompute gives, step after step, what
    passing valid_lens at each step gave; length 0 gives zero rows."""
    layer = make_layer(kind).to(dtype)
    kv = torch.randn(3, 6, 8).to(dtype)
    kv_before, lens_before = kv.clone(), lens.clone()
    memory = layer.precompute(kv, kv, lens)
    assert isinstance(memory, AttentionMemory)
    assert memory.mask.dtype == torch.bool
    for _ in range(3):
        q = torch.randn(3, 1, 8).to(dtype)
        step = layer(q, None, None, memory=memory)
        weights = layer.attention_weights
        assert torch.equal(step, layer(q, kv, kv, lens))
        assert torch.equal(weights, layer.attention_weights)
        assert (weights[1] == 0).all() and torch.isfinite(step).all()
    assert torch.equal(kv, kv_before) and torch.equal(lens, lens_before)


@pytest.mark.parametrize("kind", ["additive", "multihead"])
def test_memory_builds_the_mask_once(kind, monkeypatch):
    calls = []

    def counting(valid_lens, num_keys):
        calls.append(1)
        return valid_mask(valid_lens, num_keys)

    monkeypatch.setattr(attention_module, "valid_mask", counting)
    layer = make_layer(kind)
    kv = torch.randn(2, 5, 8)
    memory = layer.precompute(kv, kv, torch.tensor([5, 2]))
    for _ in range(4):
        layer(torch.randn(2, 1, 8), None, None, memory=memory)
    assert len(calls) == 1


@pytest.mark.parametrize("kind", ["additive", "multihead"])
def test_memory_calls_are_checked(kind):
    layer = make_layer(kind)
    kv = torch.randn(2, 5, 8)
    memory = layer.precompute(kv, kv, torch.tensor([5, 2]))
    with pytest.raises(ValueError, match="give them to precompute"):
        layer(torch.randn(2, 1, 8), None, None, torch.tensor([5, 2]),
              memory=memory)
    with pytest.raises(ValueError, match=r"queries must be 3-D"):
        layer(torch.randn(2, 8), None, None, memory=memory)
    with pytest.raises(ValueError, match="does not match"):
        layer.precompute(kv, kv, torch.tensor([5, 2, 1]))


def test_multihead_errors():
    with pytest.raises(ValueError, match="must be a positive divisor"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="num_heads must be an int"):
        MultiHeadAttention(8, 2.0)
    with pytest.raises(ValueError, match="num_hiddens must be an int"):
        MultiHeadAttention(8.0, 2)
    with pytest.raises(ValueError, match="num_heads must be an int >= 1"):
        MultiHeadAttention(8, 0)
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="same length S"):
        mha(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match="batch size"):
        mha(torch.randn(2, 3, 8), torch.randn(3, 4, 8), torch.randn(3, 4, 8))
    with pytest.raises(ValueError, match="does not match"):
        mha(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8),
            torch.ones(2, 4))


@pytest.mark.parametrize("kind", ["dot", "additive", "multihead"])
def test_return_weights_gives_the_calls_own_weights(kind):
    layer = {"dot": DotProductAttention(),
             "additive": make_layer("additive"),
             "multihead": make_layer("multihead")}[kind]
    q, kv, lens = torch.randn(2, 3, 8), torch.randn(2, 5, 8), \
        torch.tensor([5, 2])
    out, weights = layer(q, kv, kv, lens, return_weights=True)
    assert weights is layer.attention_weights
    torch.testing.assert_close(out, layer(q, kv, kv, lens))
    assert (weights[1, ..., 2:] == 0).all()
    if kind != "additive":  # the fused kernel keeps no weights
        fused, none = layer(q, kv, kv, lens, False, return_weights=True)
        assert none is None
        torch.testing.assert_close(fused, out)


def test_threads_calling_one_multihead_layer_get_their_own_weights():
    """The layer's attention_weights is shared; what a call returns is
    its own, also while other threads call the layer with other
    batch sizes."""
    import threading
    mha = make_layer("multihead")
    inputs = [torch.randn(B, 4, 8) for B in (1, 2, 3, 5)]
    expected = [mha(X, X, X, return_weights=True) for X in inputs]
    start, errors = threading.Barrier(len(inputs)), []

    def work(X, want):
        try:
            start.wait()
            for _ in range(200):
                got = mha(X, X, X, return_weights=True)
                for a, b in zip(got, want, strict=True):
                    torch.testing.assert_close(a, b)
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=work, args=pair)
               for pair in zip(inputs, expected)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_self_attention_is_permutation_equivariant():
    mha = MultiHeadAttention(8, 2).eval()
    X = torch.randn(1, 5, 8)
    perm = torch.randperm(5)
    torch.testing.assert_close(mha(X, X, X)[:, perm],
                               mha(X[:, perm], X[:, perm], X[:, perm]))


# Helpers (of d2lmini.utils; to move to a tests/test_utils.py) ------------
