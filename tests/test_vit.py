"""Tests of d2lmini.vit: the ViT against PyTorch's own layers, what its
attention reads, the recipes, training and the bootstrap."""

import dataclasses
import math
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from d2lmini.digits import Digits
from d2lmini.experiment import SEED_OFFSET_VARIABLE
from d2lmini.vit import (
    CNN,
    MLP,
    PatchEmbedding,
    SoftmaxRegression,
    VisionRecipe,
    ViT,
    ViTBlock,
    accuracy,
    attention_rollout,
    bootstrap,
    cls_attention,
    copy_from_pytorch,
    fit,
    patchify,
    predict,
)

# A ViT small enough to train in a fraction of a second: 4 patches of
# 4 x 4 pixels, one block.
SMALL = VisionRecipe(patch_size=4, num_hiddens=32, mlp_num_hiddens=64,
                     num_heads=2, num_blks=1, dropout=0.0, lr=1e-2,
                     max_steps=30)


@pytest.fixture(scope="module")
def data():
    return Digits()


def images(B=3, C=1, size=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(B, C, size, size, generator=gen)


# Patches -----------------------------------------------------------------

@pytest.mark.parametrize("C", [1, 3])
@pytest.mark.parametrize("p", [1, 2, 4, 8])
def test_patchify_then_linear_equals_the_convolution(p, C):
    torch.manual_seed(p)
    embed = PatchEmbedding(8, p, 16, in_channels=C)
    X = images(2, C)
    expected = embed(X)  # (B, P, D)
    assert expected.shape == (2, (8 // p) ** 2, 16)
    got = embed.as_linear()(patchify(X, p))
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)


def test_patches_run_row_by_row_channel_first():
    X = torch.arange(2 * 64.0).reshape(1, 2, 8, 8)
    patches = patchify(X, 4)  # (1, 4, 2 * 16)
    assert patches.shape == (1, 4, 32)
    # Patch 1 is the top right one; channel 0's 16 pixels come first.
    top_right = [8 * r + c for r in range(4) for c in range(4, 8)]
    assert patches[0, 1].tolist() == top_right + [64 + i for i in top_right]
    bottom_left = [8 * r + c for r in range(4, 8) for c in range(4)]
    assert patches[0, 2, :16].tolist() == bottom_left


def test_a_patch_size_must_divide_the_image():
    with pytest.raises(ValueError, match=r"must divide img_size 8; try one "
                       r"of \[1, 2, 4, 8\]"):
        PatchEmbedding(8, 3)
    with pytest.raises(ValueError, match="must divide"):
        PatchEmbedding(8, 16)
    with pytest.raises(ValueError, match="must divide the image size"):
        patchify(images(), 3)
    with pytest.raises(ValueError, match="patch_size must be"):
        PatchEmbedding(8, 0)


def test_patchify_refuses_patch_size_0():
    with pytest.raises(ValueError, match="patch_size"):
        patchify(images(), 0)


@pytest.mark.parametrize("X, words", [
    (torch.zeros(2, 1, 16, 16), r"must be 8 x 8, got \(16, 16\)"),
    (torch.zeros(2, 1, 8, 4), r"must be 8 x 8, got \(8, 4\)"),
    (torch.zeros(2, 3, 8, 8), r"\(B, 1, H, W\), got \(2, 3, 8, 8\)"),
    (torch.zeros(1, 8, 8), r"\(B, 1, H, W\), got \(1, 8, 8\)"),
    ([[0.0]], "got list")])
def test_patch_embedding_refuses_other_images(X, words):
    with pytest.raises(ValueError, match=words):
        PatchEmbedding(8, 2)(X)


# ViTBlock against nn.TransformerEncoderLayer -----------------------------

def _pairs(ours, theirs):
    """(our parameter, PyTorch's matching slice) for every parameter."""
    attn, sa = ours.attention, theirs.self_attn
    W = sa.in_proj_weight.grad.chunk(3)
    b = sa.in_proj_bias.grad.chunk(3)
    pairs = [(attn.W_q.weight, W[0]), (attn.W_k.weight, W[1]),
             (attn.W_v.weight, W[2]), (attn.W_q.bias, b[0]),
             (attn.W_k.bias, b[1]), (attn.W_v.bias, b[2])]
    for mine, their in ((attn.W_o, sa.out_proj),
                        (ours.mlp.dense1, theirs.linear1),
                        (ours.mlp.dense2, theirs.linear2),
                        (ours.ln1, theirs.norm1), (ours.ln2, theirs.norm2)):
        pairs += [(mine.weight, their.weight.grad),
                  (mine.bias, their.bias.grad)]
    return pairs


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 16),
       st.integers(1, 3), st.integers(1, 7), st.integers(0, 2**16))
def test_vit_block_equals_pytorch_forward_and_gradients(h, d, F, B, T,
                                                        seed):
    D = h * d
    torch.manual_seed(seed)
    theirs = nn.TransformerEncoderLayer(
        D, h, F, dropout=0.0, activation="gelu", norm_first=True,
        batch_first=True).double()
    ours = copy_from_pytorch(ViTBlock(D, F, h).double(), theirs)
    # Move the layer norms off their initial ones and zeros.
    with torch.no_grad():
        for norm in (theirs.norm1, theirs.norm2):
            norm.weight.normal_()
            norm.bias.normal_()
    copy_from_pytorch(ours, theirs)
    X = torch.randn(B, T, D, dtype=torch.float64, requires_grad=True)
    X2 = X.detach().clone().requires_grad_()
    a, b = ours(X), theirs(X2)
    torch.testing.assert_close(a, b)
    # A loss that weighs every output differently.
    weights = torch.randn(B, T, D, dtype=torch.float64)
    (a * weights).sum().backward()
    (b * weights).sum().backward()
    torch.testing.assert_close(X.grad, X2.grad)
    pairs = _pairs(ours, theirs)
    assert len(pairs) == len(list(ours.parameters())) == 16
    for mine, their in pairs:
        torch.testing.assert_close(mine.grad, their)


def test_a_gelu_module_is_accepted_too():
    theirs = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                        activation=nn.GELU(),
                                        norm_first=True, batch_first=True)
    ours = copy_from_pytorch(ViTBlock(8, 16, 2), theirs)
    X = images(2, 1, 8).reshape(2, 8, 8)
    torch.testing.assert_close(ours(X), theirs(X))


@pytest.mark.parametrize("change, words", [
    ({"norm_first": False}, "norm_first=False"),
    ({"activation": "relu"}, "GELU False"),
    ({"activation": nn.GELU(approximate="tanh")}, "GELU False"),
    ({"activation": torch.tanh}, "GELU False"),
    ({"d_model": 12}, r"\(8, 16, 2, 1e-05\); .*\(12, 16, 2, 1e-05\)"),
    ({"dim_feedforward": 32}, r"\(8, 32, 2, 1e-05\)"),
    ({"nhead": 4}, r"\(8, 16, 4, 1e-05\)"),
    ({"layer_norm_eps": 1e-6}, r"\(8, 16, 2, 1e-06\)"),
    ({"bias": False}, "biases")])
def test_copy_refuses_another_kind_of_layer(change, words):
    sizes = {"d_model": 8, "nhead": 2, "dim_feedforward": 16,
             "dropout": 0.0, "activation": "gelu", "norm_first": True,
             "batch_first": True, **change}
    layer = nn.TransformerEncoderLayer(**sizes)
    block = ViTBlock(8, 16, 2)
    before = [p.clone() for p in block.parameters()]
    with pytest.raises(ValueError, match=words):
        copy_from_pytorch(block, layer)
    assert all(torch.equal(p, q) for p, q in zip(before,
                                                 block.parameters()))


def test_copy_refuses_other_types():
    layer = nn.TransformerEncoderLayer(8, 2, 16, norm_first=True,
                                       activation="gelu")
    block = ViTBlock(8, 16, 2)
    with pytest.raises(TypeError, match="got ViTBlock and "
                       "TransformerEncoderLayer"):
        copy_from_pytorch(layer, block)
    with pytest.raises(TypeError, match="got Linear and ViTBlock"):
        copy_from_pytorch(block, nn.Linear(8, 8))


def test_vit_block_refuses_other_shapes():
    block = ViTBlock(8, 16, 2)
    for X in (torch.zeros(2, 5, 6), torch.zeros(5, 8)):
        with pytest.raises(ValueError, match=r"\(B, T, 8\)"):
            block(X)


# The ViT -----------------------------------------------------------------

@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_vit_logits_and_what_the_head_reads(pool):
    torch.manual_seed(0)
    model = ViT(patch_size=2, num_hiddens=16, mlp_num_hiddens=32,
                num_heads=2, num_blks=2, pool=pool).eval()
    seen = {}
    model.blks.register_forward_hook(
        lambda m, args, out: seen.update(blocks=out))
    model.head.register_forward_hook(
        lambda m, args, out: seen.update(head_in=args[0]))
    X = images(5)
    logits = model(X)
    assert logits.shape == (5, 10)
    tokens = seen["blocks"]  # (B, T, D)
    assert tokens.shape == (5, 17, 16)
    expected = tokens[:, 0] if pool == "cls" else tokens[:, 1:].mean(1)
    torch.testing.assert_close(seen["head_in"], expected)
    torch.testing.assert_close(logits, model.head(expected))


def test_the_two_poolings_differ_only_in_the_head_input():
    torch.manual_seed(0)
    cls = ViT(patch_size=4, num_hiddens=16, num_heads=2, pool="cls").eval()
    mean = ViT(patch_size=4, num_hiddens=16, num_heads=2,
               pool="mean").eval()
    mean.load_state_dict(cls.state_dict())
    X = images(3)
    assert not torch.allclose(cls(X), mean(X))
    # The mean ignores the <cls> output: a head that saw it differs.
    with torch.no_grad():
        mean.head[1].weight.zero_()
        mean.head[1].bias.copy_(torch.arange(10.0))
    torch.testing.assert_close(mean(X), torch.arange(10.0).expand(3, 10))


def test_vit_refuses_bad_settings():
    with pytest.raises(ValueError, match="pool is 'cls' or 'mean'"):
        ViT(pool="max")
    with pytest.raises(ValueError, match="num_blks must be"):
        ViT(num_blks=0)
    with pytest.raises(ValueError, match="num_heads"):
        ViT(num_hiddens=10, num_heads=4)


def test_an_image_alone_gives_what_it_gives_in_a_batch():
    torch.manual_seed(1)
    model = ViT(num_hiddens=16, mlp_num_hiddens=32, num_heads=2).eval()
    X = images(6)
    with torch.no_grad():
        together = model(X)
        alone = torch.cat([model(X[i:i + 1]) for i in range(6)])
    torch.testing.assert_close(alone, together)


def test_attention_weights_and_cls_attention():
    torch.manual_seed(2)
    model = ViT(patch_size=4, num_hiddens=16, num_heads=2, num_blks=3)
    X = images(2)
    model.eval()
    model(X)
    weights = model.attention_weights
    assert weights.shape == (3, 2, 2, 5, 5)  # (L, B, h, T, T)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 2, 5))
    model.train()
    cls = cls_attention(model, X)
    assert model.training  # predict restores the mode
    assert cls.shape == (3, 2, 2, 4)  # (L, B, h, P)
    torch.testing.assert_close(cls, weights[:, :, :, 0, 1:])
    # What the <cls> query gives the patches, it takes from itself.
    torch.testing.assert_close(cls.sum(-1) + weights[..., 0, 0],
                               torch.ones(3, 2, 2))


def _stochastic(shape, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=gen).softmax(-1)


def test_rollout_rows_sum_to_one():
    rollout = attention_rollout(_stochastic((3, 2, 4, 6, 6), 0))
    assert rollout.shape == (2, 6, 6) and (rollout >= 0).all()
    torch.testing.assert_close(rollout.sum(-1), torch.ones(2, 6))


def test_rollout_of_uniform_attention_is_half_identity_half_uniform():
    T = 5
    weights = torch.full((1, 2, 3, T, T), 1 / T)
    expected = (torch.eye(T) + torch.full((T, T), 1 / T)) / 2
    torch.testing.assert_close(attention_rollout(weights),
                               expected.expand(2, T, T))


def test_rollout_by_hand():
    to_first = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    to_second = torch.tensor([[0.0, 1.0], [0.0, 1.0]])
    # Two heads, one per direction: their mean is uniform.
    heads = torch.stack([to_first, to_second])[None, None]
    torch.testing.assert_close(attention_rollout(heads)[0],
                               torch.tensor([[0.75, 0.25], [0.25, 0.75]]))
    # Block 1 reads token 0, block 2 token 1: A1 = [[1, 0], [.5, .5]],
    # A2 = [[.5, .5], [0, 1]], and the rollout is A2 @ A1.
    blocks = torch.stack([to_first, to_second])[:, None, None]
    torch.testing.assert_close(attention_rollout(blocks)[0],
                               torch.tensor([[0.75, 0.25], [0.5, 0.5]]))


@pytest.mark.parametrize("shape", [(2, 3, 5, 5), (1, 2, 3, 5, 4),
                                   (1, 1, 2, 3, 5, 5)])
def test_rollout_refuses_other_shapes(shape):
    with pytest.raises(ValueError, match=r"weights must be \(\w, B, h, T, "
                       r"T\), got " + re.escape(str(shape))):
        attention_rollout(torch.ones(shape))


# Recipes -----------------------------------------------------------------

@pytest.mark.parametrize("change, error, words", [
    ({"model": "resnet"}, ValueError, "model is one of"),
    ({"patch_size": True}, ValueError, "patch_size must be an int"),
    ({"num_heads": 2.0}, ValueError, "num_heads must be an int"),
    ({"max_steps": 0}, ValueError, "max_steps must be an int"),
    ({"seed": -1}, ValueError, "seed must be an int >= 0"),
    ({"dropout": True}, TypeError, "dropout must be a number"),
    ({"lr": float("nan")}, ValueError, "lr must be finite"),
    ({"weight_decay": float("inf")}, ValueError, "must be finite"),
    ({"lr": "0.1"}, TypeError, "lr must be a number"),
    ({"pool": "max"}, ValueError, "pool is 'cls' or 'mean'"),
    ({"patch_size": 3}, ValueError, "patch_size must divide"),
    ({"num_heads": 5}, ValueError, r"num_heads \(5\) must divide"),
    ({"dropout": 1.0}, ValueError, r"dropout lies in \[0, 1\)"),
    ({"dropout": -0.1}, ValueError, r"dropout lies in \[0, 1\)"),
    ({"lr": 0}, ValueError, "lr must be positive"),
    ({"weight_decay": -1e-3}, ValueError, "weight_decay at least 0")])
def test_recipe_refuses_bad_fields(change, error, words):
    with pytest.raises(error, match=words):
        VisionRecipe(**change)


OTHER_VALUES = {"model": "cnn", "patch_size": 4, "num_hiddens": 32,
                "mlp_num_hiddens": 64, "num_heads": 2, "num_blks": 3,
                "dropout": 0.2, "pool": "mean", "lr": 1e-3,
                "weight_decay": 0.1, "batch_size": 32, "max_steps": 10,
                "seed": 1}


def test_the_key_changes_with_every_field(monkeypatch):
    recipe = VisionRecipe()
    names = [f.name for f in dataclasses.fields(VisionRecipe)]
    assert sorted(names) == sorted(OTHER_VALUES)
    keys = {recipe.key()} | {recipe.replace(**{n: OTHER_VALUES[n]}).key()
                             for n in names}
    assert len(keys) == len(names) + 1
    assert all(len(k) == 16 and int(k, 16) >= 0 for k in keys)
    assert VisionRecipe().key() == recipe.key()
    monkeypatch.setenv(SEED_OFFSET_VARIABLE, "1")
    assert recipe.key() not in keys and recipe.training_seed() == 1
    monkeypatch.setenv(SEED_OFFSET_VARIABLE, "0")
    assert recipe.key() == VisionRecipe().key()


@pytest.mark.parametrize("change", [{"dropout": 0}, {"lr": 1},
                                    {"weight_decay": -0.0}])
def test_equal_recipes_have_one_key(change):
    floats = {name: float(value) + 0.0 for name, value in change.items()}
    a, b = VisionRecipe(**change), VisionRecipe(**floats)
    assert a == b
    assert a.key() == b.key()


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("model, kind", [("vit", ViT),
                                         ("softmax", SoftmaxRegression),
                                         ("mlp", MLP), ("cnn", CNN)])
def test_build_draws_the_weights_from_the_seed(monkeypatch, model, kind):
    recipe = VisionRecipe(model=model, num_hiddens=16, mlp_num_hiddens=32)
    first = recipe.build()
    assert type(first) is kind and first.lr == recipe.lr
    torch.rand(3)  # what ran before does not matter
    assert _same(_state(first), _state(recipe.build()))
    other = _state(recipe.replace(seed=1).build())
    assert not _same(_state(first), other)
    monkeypatch.setenv(SEED_OFFSET_VARIABLE, "1")  # seed 0 + 1
    assert _same(_state(recipe.build()), other)


def test_build_passes_the_vit_fields():
    model = VisionRecipe(patch_size=4, num_hiddens=16, mlp_num_hiddens=24,
                         num_heads=2, num_blks=3, pool="mean",
                         dropout=0.25).build()
    assert model.patch_embedding.num_patches == 4
    assert model.pos_embedding.shape == (1, 5, 16)
    assert len(model.blks) == 3 and model.pool == "mean"
    assert model.blks[0].mlp.dense1.out_features == 24
    assert model.blks[0].attention.num_heads == 2
    assert model.dropout.p == 0.25 and model.blks[0].dropout.p == 0.25


# Training and scoring ----------------------------------------------------

def test_fit_trains_a_small_vit(data):
    model, history = fit(SMALL, data, eval_every=10)
    assert not model.training
    assert history["steps"] == [10, 20, 30]
    assert len(history["loss"]) == len(history["val_acc"]) == 3
    assert history["seconds"] > 0
    assert history["loss"][-1] < history["loss"][0]
    # Chance is 10 %; every seed from 0 to 19 reached 75 % or more.
    assert history["val_acc"][-1] > 0.5
    assert accuracy(model, *data.val) == history["val_acc"][-1]


def test_fit_is_fixed_by_the_seed_and_scores_the_last_step(data):
    recipe = SMALL.replace(max_steps=7)
    a, history = fit(recipe, data, eval_every=3)
    b, again = fit(recipe, data, eval_every=3)
    assert history["steps"] == [3, 6, 7]
    assert history["loss"] == again["loss"]
    assert _same(_state(a), _state(b))
    with pytest.raises(ValueError, match="eval_every must be"):
        fit(recipe, data, eval_every=0)


def test_predict_gives_probabilities_and_keeps_the_mode():
    model = SoftmaxRegression().train()
    P = predict(model, images(4))
    assert P.shape == (4, 10) and model.training
    torch.testing.assert_close(P.sum(-1), torch.ones(4))


def test_accuracy_of_a_model_that_always_says_3():
    model = SoftmaxRegression()
    with torch.no_grad():
        model.net[1].weight.zero_()
        model.net[1].bias.copy_(torch.eye(10)[3])
    y = torch.tensor([3, 1, 3, 3, 0, 9, 3, 2])
    assert accuracy(model, images(8), y) == 0.5


def test_accuracy_refuses_labels_of_another_shape():
    """Labels (B, 1) broadcast against (B,) predictions: f1e0c15 gave
    0.117 for a model right on every image; now they are refused."""
    model = SoftmaxRegression()
    with torch.no_grad():
        model.net[1].weight.zero_()
        model.net[1].bias.copy_(torch.eye(10)[3])
    y = torch.full((8,), 3)
    assert accuracy(model, images(8), y) == 1.0
    for bad in (y[:, None], y[:7], y.tolist()):
        with pytest.raises(ValueError, match=r"labels y must be \(8,\)"):
            accuracy(model, images(8), bad)


def test_bootstrap_of_one_model():
    gen = torch.Generator().manual_seed(0)
    correct = torch.rand(400, generator=gen) < 0.5
    value, low, high = bootstrap(correct)
    assert value == correct.double().mean().item()
    assert low < value < high
    # The standard error is 0.025: a 95 % interval is about 0.1 wide.
    assert 0.08 < high - low < 0.12
    assert bootstrap(correct.tolist()) == (value, low, high)
    assert bootstrap(correct, seed=1) != (value, low, high)
    narrow = bootstrap(correct, level=50)
    assert low < narrow[1] < narrow[2] < high


def test_bootstrap_corner_cases():
    ones = torch.ones(50, dtype=torch.bool)
    assert bootstrap(ones) == (1.0, 1.0, 1.0)
    gen = torch.Generator().manual_seed(1)
    a = torch.rand(60, generator=gen) < 0.7
    assert bootstrap(a, a) == (0.0, 0.0, 0.0)
    b = torch.rand(60, generator=gen) < 0.4
    value, low, high = bootstrap(a, b)
    assert value == pytest.approx(a.double().mean() - b.double().mean())
    assert low <= value <= high


@pytest.mark.parametrize("correct, other", [
    (torch.ones(5), torch.ones(4)), (torch.ones(0), None),
    (torch.ones(2, 3), None), (torch.tensor(1.0), None),
    (torch.ones(5), torch.ones(5, 1))])
def test_bootstrap_refuses_other_shapes(correct, other):
    with pytest.raises(ValueError, match=r"\(N,\) of the same N >= 1"):
        bootstrap(correct, other)


def test_bootstrap_refuses_no_samples():
    with pytest.raises(ValueError, match="num_samples must be"):
        bootstrap([True, False], num_samples=0)


def test_the_sections_recipe_builds_and_runs():
    model = VisionRecipe().build().eval()
    logits = model(images(2))
    assert logits.shape == (2, 10) and torch.isfinite(logits).all()
    assert math.isclose(predict(model, images(2)).sum().item(), 2,
                        rel_tol=1e-6)
