"""A Vision Transformer (Dosovitskiy et al., 2021) and the baselines it
is measured against, on the 8 x 8 digits of ``d2lmini.digits``.

The ViT in d2l's names: ``PatchEmbedding`` (a strided convolution, equal
to ``patchify`` followed by a linear layer), ``ViTMLP`` (GELU),
``ViTBlock`` (pre-norm: layer norm before attention and before the MLP,
each inside its residual connection; ``copy_from_pytorch`` gives it the
weights of ``nn.TransformerEncoderLayer(norm_first=True,
activation="gelu")``, so tests compare the two), and ``ViT``: a learned
``<cls>`` token in front of the patches, learned position embeddings,
the blocks, and a head on the ``<cls>`` output (or on the patches' mean,
``pool="mean"``).  The baselines are softmax regression, an MLP and a
small CNN.  ``VisionRecipe`` names a model and its training; ``fit``
trains one, ``accuracy`` and ``bootstrap`` score it.

What the attention reads: ``cls_attention`` (the ``<cls>`` query's
weights over the patches, per block and head) and ``attention_rollout``
(Abnar & Zuidema, 2020: the heads' mean plus the residual, multiplied
across blocks).

Shape legend for every comment and docstring in this module (the
chapter's, with the letters of images added):
    B  batch size       C  input channels (1)    H, W  image size (8)
    p  patch size       M  patches (H W / p^2)   T  tokens (M + 1)
    D  num_hiddens      F  mlp_num_hiddens       h  heads
    N  blocks           num_classes  classes (10)
"""

import dataclasses
import hashlib
import json
import math

import torch
import torch.nn.functional as F
from torch import nn

from .digits import IMAGE_SIZE, NUM_CLASSES
from .multihead import MultiHeadAttention
from .recipes import seed_offset
from .trainer import Every, Trainer
from .utils import check_int, set_seed

__all__ = ["CNN", "MLP", "MODELS", "PatchEmbedding", "SoftmaxRegression",
           "ViT", "ViTBlock", "ViTMLP", "VisionRecipe", "accuracy",
           "attention_rollout", "bootstrap", "cls_attention",
           "copy_from_pytorch", "fit", "patchify", "predict"]


def _check_images(X, C=1, size=None):
    if not torch.is_tensor(X) or X.dim() != 4 or X.shape[1] != C:
        shape = tuple(X.shape) if torch.is_tensor(X) else type(X).__name__
        raise ValueError(f"images must be (B, {C}, H, W), got {shape}")
    if size is not None and tuple(X.shape[2:]) != (size, size):
        raise ValueError(f"images must be {size} x {size}, got "
                         f"{tuple(X.shape[2:])}")


def patchify(X, patch_size):
    """(B, C, H, W) -> (B, M, C p p): each non-overlapping p x p patch as
    one vector, patches row by row (the order of ``PatchEmbedding``'s
    output), each vector channel first, then row, then column (the
    order of a convolution's weight, flattened)."""
    _check_images(X, X.shape[1] if torch.is_tensor(X) and X.dim() == 4
                  else 1)
    B, C, H, W = X.shape
    p = patch_size
    check_int("patch_size", p)
    if H % p or W % p:
        raise ValueError(f"patch_size {p} must divide the image size "
                         f"{H} x {W}")
    X = X.reshape(B, C, H // p, p, W // p, p)
    return X.permute(0, 2, 4, 1, 3, 5).reshape(B, (H // p) * (W // p), -1)


class PatchEmbedding(nn.Module):
    """Each p x p patch mapped linearly to D features: a convolution with
    kernel and stride p.  (B, C, H, W) -> (B, M, D)."""

    def __init__(self, img_size=IMAGE_SIZE, patch_size=2, num_hiddens=64,
                 in_channels=1):
        super().__init__()
        for name, value in (("img_size", img_size),
                            ("patch_size", patch_size),
                            ("num_hiddens", num_hiddens),
                            ("in_channels", in_channels)):
            check_int(name, value)
        if img_size % patch_size:
            sizes = [p for p in range(1, img_size + 1) if img_size % p == 0]
            raise ValueError(f"patch_size {patch_size} must divide "
                             f"img_size {img_size}; try one of {sizes}")
        self.img_size, self.patch_size = img_size, patch_size
        self.num_patches = (img_size // patch_size) ** 2
        self.conv = nn.Conv2d(in_channels, num_hiddens,
                              kernel_size=patch_size, stride=patch_size)

    def forward(self, X):
        _check_images(X, self.conv.in_channels, self.img_size)
        # (B, D, H/p, W/p) -> (B, D, M) -> (B, M, D)
        return self.conv(X).flatten(2).transpose(1, 2)

    def as_linear(self):
        """The same map as an ``nn.Linear`` on ``patchify``'s vectors."""
        D = self.conv.out_channels
        linear = nn.Linear(self.conv.weight[0].numel(), D)
        with torch.no_grad():
            linear.weight.copy_(self.conv.weight.reshape(D, -1))
            linear.bias.copy_(self.conv.bias)
        return linear


class ViTMLP(nn.Module):
    """Linear D -> F, GELU, dropout, linear F -> D, dropout."""

    def __init__(self, num_hiddens, mlp_num_hiddens, dropout=0.0):
        super().__init__()
        self.dense1 = nn.Linear(num_hiddens, mlp_num_hiddens)
        self.gelu = nn.GELU()
        self.dropout1 = nn.Dropout(dropout)
        self.dense2 = nn.Linear(mlp_num_hiddens, num_hiddens)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, X):
        return self.dropout2(self.dense2(self.dropout1(
            self.gelu(self.dense1(X)))))


class ViTBlock(nn.Module):
    """Pre-norm encoder block: X + attention(LN(X)), then Y + MLP(LN(Y)).
    (B, T, D) -> (B, T, D); ``attention.attention_weights`` keeps the
    last call's (B, h, T, T) weights."""

    def __init__(self, num_hiddens, mlp_num_hiddens, num_heads,
                 dropout=0.0):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.ln1 = nn.LayerNorm(num_hiddens)
        self.attention = MultiHeadAttention(num_hiddens, num_heads,
                                            dropout, bias=True)
        self.ln2 = nn.LayerNorm(num_hiddens)
        self.mlp = ViTMLP(num_hiddens, mlp_num_hiddens, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if not torch.is_tensor(X) or X.dim() != 3 or \
                X.shape[-1] != self.num_hiddens:
            shape = tuple(X.shape) if torch.is_tensor(X) else type(X)
            raise ValueError(f"X must be (B, T, {self.num_hiddens}), got "
                             f"{shape}")
        Z = self.ln1(X)
        X = X + self.dropout(self.attention(Z, Z, Z))
        return X + self.mlp(self.ln2(X))


def copy_from_pytorch(block, layer):
    """Give a ``ViTBlock`` the weights of ``layer``, an
    ``nn.TransformerEncoderLayer(norm_first=True, activation="gelu")``
    of the block's sizes and layer norm eps: then both compute the same
    function (in eval mode, or with dropout 0)."""
    if not isinstance(block, ViTBlock) or not isinstance(
            layer, nn.TransformerEncoderLayer):
        raise TypeError(f"copy an nn.TransformerEncoderLayer into a "
                        f"ViTBlock, got {type(layer).__name__} and "
                        f"{type(block).__name__}")
    gelu = layer.activation is F.gelu or (
        isinstance(layer.activation, nn.GELU)
        and layer.activation.approximate == "none")
    want = (block.num_hiddens, block.mlp.dense1.out_features,
            block.attention.num_heads, block.ln1.eps)
    got = (layer.linear1.in_features, layer.linear1.out_features,
           layer.self_attn.num_heads, layer.norm1.eps)
    if not layer.norm_first or not gelu or want != got or \
            layer.self_attn.in_proj_bias is None:
        raise ValueError(
            f"the layer must be pre-norm (norm_first=True) with exact "
            f"GELU, biases and (d_model, dim_feedforward, nhead, "
            f"layer_norm_eps) = {want}; got norm_first={layer.norm_first}"
            f", GELU {gelu}, {got}")
    attn = block.attention
    q, k, v = layer.self_attn.in_proj_weight.chunk(3)
    bq, bk, bv = layer.self_attn.in_proj_bias.chunk(3)
    with torch.no_grad():
        for mine, w, b in ((attn.W_q, q, bq), (attn.W_k, k, bk),
                           (attn.W_v, v, bv),
                           (attn.W_o, layer.self_attn.out_proj.weight,
                            layer.self_attn.out_proj.bias),
                           (block.mlp.dense1, layer.linear1.weight,
                            layer.linear1.bias),
                           (block.mlp.dense2, layer.linear2.weight,
                            layer.linear2.bias),
                           (block.ln1, layer.norm1.weight,
                            layer.norm1.bias),
                           (block.ln2, layer.norm2.weight,
                            layer.norm2.bias)):
            mine.weight.copy_(w)
            mine.bias.copy_(b)
    return block


class Classifier(nn.Module):
    """What every model here shares: cross-entropy ``loss``, a
    ``training_step`` and Adam (what ``d2lmini.timing.seconds_per_step``
    times).  Inputs (B, 1, 8, 8), logits (B, num_classes)."""

    def __init__(self, lr=1e-3, weight_decay=0.0):
        super().__init__()
        self.lr, self.weight_decay = lr, weight_decay

    def training_step(self, batch):
        X, y = batch
        return F.cross_entropy(self(X), y), len(y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr,
                                 weight_decay=self.weight_decay)


class ViT(Classifier):
    """Vision Transformer: patches -> <cls> + patches + positions ->
    N pre-norm blocks -> layer norm -> linear head on the <cls> output
    (``pool="cls"``) or on the mean of the patches (``"mean"``).
    (B, C, H, W) -> (B, num_classes) logits."""

    def __init__(self, img_size=IMAGE_SIZE, patch_size=2, num_hiddens=64,
                 mlp_num_hiddens=128, num_heads=4, num_blks=2,
                 emb_dropout=0.1, blk_dropout=0.1, num_classes=NUM_CLASSES,
                 in_channels=1, pool="cls", lr=1e-3, weight_decay=0.0):
        super().__init__(lr, weight_decay)
        if pool not in ("cls", "mean"):
            raise ValueError(f"pool is 'cls' or 'mean', got {pool!r}")
        check_int("num_blks", num_blks)
        self.pool = pool
        self.patch_embedding = PatchEmbedding(img_size, patch_size,
                                              num_hiddens, in_channels)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, num_hiddens))
        T = self.patch_embedding.num_patches + 1
        # Learned positions, small random numbers at first.
        self.pos_embedding = nn.Parameter(
            0.02 * torch.randn(1, T, num_hiddens))
        self.dropout = nn.Dropout(emb_dropout)
        self.blks = nn.Sequential(*(
            ViTBlock(num_hiddens, mlp_num_hiddens, num_heads, blk_dropout)
            for _ in range(num_blks)))
        self.head = nn.Sequential(nn.LayerNorm(num_hiddens),
                                  nn.Linear(num_hiddens, num_classes))

    def forward(self, X):
        X = self.patch_embedding(X)  # (B, M, D)
        cls = self.cls_token.expand(X.shape[0], -1, -1)  # (B, 1, D)
        X = self.dropout(torch.cat((cls, X), 1) + self.pos_embedding)
        X = self.blks(X)  # (B, T, D)
        return self.head(X[:, 0] if self.pool == "cls"
                         else X[:, 1:].mean(1))

    @property
    def attention_weights(self):
        """The last forward's weights, (N, B, h, T, T)."""
        return torch.stack([blk.attention.attention_weights
                            for blk in self.blks])


class SoftmaxRegression(Classifier):
    """One linear layer on the 64 pixels."""

    def __init__(self, num_classes=NUM_CLASSES, lr=1e-3, weight_decay=0.0):
        super().__init__(lr, weight_decay)
        self.net = nn.Sequential(nn.Flatten(),
                                 nn.Linear(IMAGE_SIZE ** 2, num_classes))

    def forward(self, X):
        return self.net(X)


class MLP(Classifier):
    """64 pixels -> 256 ReLU units (dropout) -> num_classes."""

    def __init__(self, num_hiddens=256, dropout=0.1,
                 num_classes=NUM_CLASSES, lr=1e-3, weight_decay=0.0):
        super().__init__(lr, weight_decay)
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(IMAGE_SIZE ** 2, num_hiddens),
            nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(num_hiddens, num_classes))

    def forward(self, X):
        return self.net(X)


class CNN(Classifier):
    """Two 3 x 3 convolutions (16 and 32 channels, ReLU), 2 x 2 max
    pooling, dropout, a linear layer: the locality and translation
    sharing that a ViT must learn from data."""

    def __init__(self, dropout=0.1, num_classes=NUM_CLASSES, lr=1e-3,
                 weight_decay=0.0):
        super().__init__(lr, weight_decay)
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(dropout),
            nn.Linear(32 * (IMAGE_SIZE // 2) ** 2, num_classes))

    def forward(self, X):
        return self.net(X)


MODELS = ("vit", "softmax", "mlp", "cnn")


@dataclasses.dataclass(frozen=True)
class VisionRecipe:
    """A model of this module and how it trains: AdamW with a cosine
    learning-rate decay over ``max_steps`` steps of ``batch_size``
    images, gradients clipped at norm 1.  The ViT fields are ignored by
    the baselines (``dropout`` is every model's)."""

    model: str = "vit"
    patch_size: int = 2
    num_hiddens: int = 64
    mlp_num_hiddens: int = 128
    num_heads: int = 4
    num_blks: int = 2
    dropout: float = 0.1
    pool: str = "cls"
    lr: float = 2e-3
    weight_decay: float = 0.01
    batch_size: int = 64
    max_steps: int = 1500
    seed: int = 0

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"model is one of {MODELS}, got "
                             f"{self.model!r}")
        for name in ("patch_size", "num_hiddens", "mlp_num_hiddens",
                     "num_heads", "num_blks", "batch_size", "max_steps"):
            check_int(name, getattr(self, name))
        check_int("seed", self.seed, minimum=0)
        for name in ("dropout", "lr", "weight_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value,
                                                         (int, float)):
                raise TypeError(f"{name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"{name} must be finite, got {value}")
            # Equal recipes, equal keys: 0 and 0.0 (and -0.0) alike.
            object.__setattr__(self, name, float(value) + 0.0)
        if self.pool not in ("cls", "mean"):
            raise ValueError(f"pool is 'cls' or 'mean', got {self.pool!r}")
        if IMAGE_SIZE % self.patch_size:
            raise ValueError(
                f"patch_size must divide the image size {IMAGE_SIZE}, got "
                f"{self.patch_size}; try 1, 2, 4 or 8")
        if self.num_hiddens % self.num_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must divide "
                             f"num_hiddens ({self.num_hiddens})")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout lies in [0, 1), got {self.dropout}")
        if self.lr <= 0 or self.weight_decay < 0:
            raise ValueError(f"lr must be positive and weight_decay at "
                             f"least 0, got {self.lr}, {self.weight_decay}")

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def training_seed(self):
        """``seed`` plus ``D2LMINI_SEED_OFFSET`` (0 unless set)."""
        return self.seed + seed_offset()

    def key(self):
        """A 16-hex-digit hash of every field and the seed offset."""
        fields = {**dataclasses.asdict(self), "offset": seed_offset()}
        text = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def build(self):
        """The untrained model, its weights drawn from
        ``training_seed()``."""
        set_seed(self.training_seed())
        opt = {"lr": self.lr, "weight_decay": self.weight_decay}
        if self.model == "vit":
            return ViT(patch_size=self.patch_size,
                       num_hiddens=self.num_hiddens,
                       mlp_num_hiddens=self.mlp_num_hiddens,
                       num_heads=self.num_heads, num_blks=self.num_blks,
                       emb_dropout=self.dropout, blk_dropout=self.dropout,
                       pool=self.pool, **opt)
        if self.model == "softmax":
            return SoftmaxRegression(**opt)
        if self.model == "mlp":
            return MLP(dropout=self.dropout, **opt)
        return CNN(dropout=self.dropout, **opt)


def fit(recipe, data, eval_every=100, device="cpu", progress=False):
    """Train ``recipe.build()`` on ``data`` (a ``d2lmini.digits.
    Digits``) with ``d2lmini.Trainer`` on ``device`` (under
    ``torchrun``, on every process, each on its share of every batch).
    Returns the model (on the CPU, in eval mode) and a history:
    ``steps``, the mean training ``loss`` and the validation
    ``val_acc`` every ``eval_every`` steps and at the last, and
    ``seconds`` of training (evaluation excluded)."""
    check_int("eval_every", eval_every)
    model = recipe.build()
    gen = torch.Generator().manual_seed(recipe.training_seed())
    acc = Every(eval_every, lambda model, step: accuracy(model, *data.val))
    trainer = Trainer(None, 1.0, device, max_steps=recipe.max_steps,
                      progress=progress, schedule="cosine",
                      callbacks=[acc])
    hist = trainer.fit(model, data.loader(recipe.batch_size, gen))
    marks = [step for step, _ in acc.records]
    history = {"steps": marks, "loss": hist.means_between(marks),
               "val_acc": [value for _, value in acc.records],
               "seconds": hist.train_time}
    return model.to("cpu").eval(), history


@torch.no_grad()
def predict(model, X):
    """Class probabilities (B, num_classes) on X's device, computed on
    the model's, in eval mode (the model's mode is restored)."""
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        return torch.softmax(model(X.to(device)), dim=-1).to(X.device)
    finally:
        model.train(was_training)


def accuracy(model, X, y):
    """The share of ``X`` whose most probable class is ``y``: labels
    (B,), one per image."""
    if not torch.is_tensor(y) or y.dim() != 1 or len(y) != len(X):
        shape = tuple(y.shape) if torch.is_tensor(y) else type(y).__name__
        raise ValueError(f"labels y must be ({len(X)},), one class per "
                         f"image, got {shape}; flatten them with "
                         f"y.reshape(-1)")
    return (predict(model, X).argmax(-1) == y).float().mean().item()


def bootstrap(correct, other=None, num_samples=2000, seed=0, level=95):
    """Accuracy (or, with ``other``, the difference of two models'
    accuracies on the same images) and its bootstrap percentile
    interval: ``(value, low, high)``, resampling the test images.

    ``correct`` and ``other`` are (N,) bools, one per test image."""
    a = torch.as_tensor(correct).to(torch.float64)
    b = None if other is None else torch.as_tensor(other).to(torch.float64)
    if a.dim() != 1 or not len(a) or (b is not None
                                      and b.shape != a.shape):
        raise ValueError(f"correct (and other) must be (N,) of the same "
                         f"N >= 1, got {tuple(a.shape)} and "
                         f"{None if b is None else tuple(b.shape)}")
    check_int("num_samples", num_samples)
    if isinstance(level, bool) or not isinstance(level, (int, float)) \
            or not 0 < level < 100:
        raise ValueError(f"level is a percentage between 0 and 100, got "
                         f"{level!r}")
    d = a if b is None else a - b
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(d), (num_samples, len(d)), generator=gen)
    means = d[idx].mean(1)
    tail = (100 - level) / 200
    low, high = torch.quantile(means, torch.tensor([tail, 1 - tail],
                                                   dtype=torch.float64))
    return d.mean().item(), low.item(), high.item()


def cls_attention(model, X):
    """The ``<cls>`` query's attention over the patches: (N, B, h, M),
    for a ``ViT`` in eval mode on images X."""
    predict(model, X)
    return model.attention_weights[:, :, :, 0, 1:]


def attention_rollout(weights):
    """Attention rollout: per block, the heads' mean plus the identity
    (the residual path), rows renormalised, multiplied from the first
    block to the last.  (N, B, h, T, T) -> (B, T, T); row 0, columns
    1.. is how much each patch reaches the ``<cls>`` output."""
    if weights.dim() != 5 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"weights must be (N, B, h, T, T), got "
                         f"{tuple(weights.shape)}")
    T = weights.shape[-1]
    eye = torch.eye(T, dtype=weights.dtype, device=weights.device)
    rollout = eye.expand(weights.shape[1], T, T)
    for A in weights.mean(2):  # (B, T, T) per block
        A = A + eye
        A = A / A.sum(-1, keepdim=True)
        rollout = A @ rollout
    return rollout
