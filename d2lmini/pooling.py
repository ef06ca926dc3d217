"""Attention pooling by similarity: Nadaraya-Watson kernel regression.

The prediction at a query x is a weighted average of the training
targets y_i, with weights that a kernel of the distance x - x_i makes:

    f(x) = sum_i alpha(x, x_i) y_i,
    alpha(x, x_i) = k((x - x_i) / width) / sum_j k((x - x_j) / width).

This is attention with the query x, the keys x_i and the values y_i: the
score of a key is log k((x - x_i) / width), and the weights are the
masked softmax of the scores, keys with k = 0 masked out (a query with no
key inside its window gets zero weights and predicts 0).

Shape legend: L queries, S keys (training points), v value size.
"""

import math

import torch
from torch import nn

from .attention import masked_softmax

__all__ = ["KERNELS", "NWKernelRegression", "kernel_scores",
           "nadaraya_watson"]

KERNELS = ("gaussian", "boxcar", "constant", "epanechnikov")


def kernel_scores(distances, kernel="gaussian", width=1.0):
    """Scores log k(d / width) and the mask of keys with k > 0.

    Args:
        distances: (..., L, S) differences x - x_i of queries and keys.
        kernel: one of ``KERNELS``: ``gaussian`` exp(-u^2 / 2),
            ``boxcar`` 1 for |u| <= 1, ``constant`` 1 (plain average),
            ``epanechnikov`` 1 - u^2 for |u| <= 1.
        width: the kernel's width (a positive number); the Gaussian's
            standard deviation.

    Returns:
        ``(scores, mask)``: scores (..., L, S), 0 where masked; mask a
        bool tensor of the same shape, True where k > 0.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if isinstance(width, bool) or not isinstance(width, (int, float)) \
            or not math.isfinite(width) or width <= 0:
        raise ValueError(f"width must be a positive number, got {width!r}")
    u = torch.as_tensor(distances) / width
    if kernel == "gaussian":
        return -u ** 2 / 2, torch.ones_like(u, dtype=torch.bool)
    if kernel == "constant":
        return torch.zeros_like(u), torch.ones_like(u, dtype=torch.bool)
    inside = u.abs() <= 1
    if kernel == "boxcar":
        return torch.zeros_like(u), inside
    # Epanechnikov: log(1 - u^2), finite inside the window.
    inside = u.abs() < 1
    return torch.log1p(-(u * inside) ** 2), inside


def _check_pooling(queries, keys, values):
    if queries.dim() != 1 or keys.dim() != 1:
        raise ValueError(
            f"queries (L,) and keys (S,) must be 1-D positions, got shapes "
            f"{tuple(queries.shape)} and {tuple(keys.shape)}")
    if values.shape[:1] != keys.shape:
        raise ValueError(
            f"values must have one row per key: {len(keys)} keys but "
            f"values of shape {tuple(values.shape)}")


def nadaraya_watson(queries, keys, values, kernel="gaussian", width=1.0,
                    mask=None):
    """Predict at each query the kernel-weighted average of the values.

    Args:
        queries: (L,) query positions x.
        keys: (S,) training positions x_i.
        values: (S,) or (S, v) training targets y_i.
        kernel, width: see ``kernel_scores``.
        mask: optional (L, S) bool, True where a query may use a key
            (e.g. ``~torch.eye(S, dtype=bool)`` leaves each training
            point out of its own prediction).

    Returns:
        ``(predictions, weights)``: (L,) or (L, v), and the (L, S)
        attention weights (rows sum to 1, or to 0 for a query that no
        key reaches).
    """
    queries, keys = torch.as_tensor(queries), torch.as_tensor(keys)
    values = torch.as_tensor(values)
    _check_pooling(queries, keys, values)
    scores, inside = kernel_scores(queries[:, None] - keys[None, :],
                                   kernel, width)  # (L, S)
    if mask is not None:
        if mask.shape != scores.shape or mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor of shape "
                             f"{tuple(scores.shape)}, got "
                             f"{mask.dtype} {tuple(mask.shape)}")
        inside = inside & mask
    weights = masked_softmax(scores[None], mask=inside[None])[0]
    return weights @ values.to(weights.dtype), weights


class NWKernelRegression(nn.Module):
    """Gaussian Nadaraya-Watson regression with a learned width.

    The score of a key is -((x - x_i) * w)^2 / 2, so w = 1 / width; it
    starts at ``1 / width``.  ``forward(queries, keys, values, mask)``
    returns the predictions and keeps the weights in
    ``attention_weights``.
    """

    def __init__(self, width=1.0):
        super().__init__()
        if isinstance(width, bool) or not isinstance(width, (int, float)) \
                or not math.isfinite(width) or width <= 0:
            raise ValueError(f"width must be a positive number, got "
                             f"{width!r}")
        self.w = nn.Parameter(torch.tensor(1.0 / width))
        self.attention_weights = None

    @property
    def width(self):
        return 1.0 / abs(float(self.w.detach()))

    def forward(self, queries, keys, values, mask=None):
        _check_pooling(queries, keys, values)
        scores = -((queries[:, None] - keys[None, :]) * self.w) ** 2 / 2
        if mask is not None and mask.shape != scores.shape:
            raise ValueError(f"mask must have shape {tuple(scores.shape)}"
                             f", got {tuple(mask.shape)}")
        self.attention_weights = masked_softmax(
            scores[None], mask=None if mask is None else mask[None])[0]
        return self.attention_weights @ values
