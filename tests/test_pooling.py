"""Tests of d2lmini.pooling: Nadaraya-Watson attention pooling."""

import math

import pytest
import torch

from d2lmini.pooling import (
    KERNELS,
    NWKernelRegression,
    kernel_scores,
    nadaraya_watson,
)


def reference(queries, keys, values, kernel, width):
    """The textbook formula, one query at a time, in float64."""
    k = {"gaussian": lambda u: math.exp(-u * u / 2),
         "boxcar": lambda u: float(abs(u) <= 1),
         "constant": lambda u: 1.0,
         "epanechnikov": lambda u: max(1 - u * u, 0.0)}[kernel]
    out = []
    for x in queries.tolist():
        w = [k((x - xi) / width) for xi in keys.tolist()]
        total = sum(w)
        out.append(sum(a * y for a, y in zip(w, values.tolist())) / total
                   if total else 0.0)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("width", [0.1, 0.5, 2.0])
def test_nadaraya_watson_equals_the_formula(kernel, width):
    gen = torch.Generator().manual_seed(0)
    keys = torch.rand(20, generator=gen, dtype=torch.float64) * 5
    values = torch.randn(20, generator=gen, dtype=torch.float64)
    queries = torch.linspace(-1, 6, 31, dtype=torch.float64)
    pred, weights = nadaraya_watson(queries, keys, values, kernel, width)
    torch.testing.assert_close(pred, reference(queries, keys, values,
                                               kernel, width))
    sums = weights.sum(-1)
    assert torch.all(((sums - 1).abs() < 1e-12) | (sums == 0))
    assert not torch.isnan(weights).any()


def test_a_query_out_of_every_window_predicts_zero_not_nan():
    keys, values = torch.tensor([0.0, 1.0]), torch.tensor([3.0, 5.0])
    pred, weights = nadaraya_watson(torch.tensor([10.0]), keys, values,
                                    "boxcar", 0.5)
    assert pred.tolist() == [0.0] and weights.tolist() == [[0.0, 0.0]]


def test_scores_are_finite_and_the_mask_marks_the_window():
    u = torch.tensor([-2.0, -1.0, 0.0, 0.5, 1.0])
    scores, mask = kernel_scores(u, "epanechnikov", 1.0)
    assert mask.tolist() == [False, False, True, True, False]
    assert torch.isfinite(scores).all()
    assert kernel_scores(u, "boxcar", 1.0)[1].tolist() == [
        False, True, True, True, True]


@pytest.mark.parametrize("kwargs, error, words", [
    ({"kernel": "cosine"}, ValueError, "kernel must be one of"),
    ({"width": 0}, ValueError, "width must be a positive number"),
    ({"width": float("nan")}, ValueError, "width must be a positive"),
    ({"width": True}, ValueError, "width must be a positive"),
])
def test_bad_kernel_arguments(kwargs, error, words):
    with pytest.raises(error, match=words):
        nadaraya_watson(torch.zeros(2), torch.zeros(3), torch.zeros(3),
                        **kwargs)


def test_bad_shapes_and_masks():
    with pytest.raises(ValueError, match="1-D positions"):
        nadaraya_watson(torch.zeros(2, 1), torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="one row per key"):
        nadaraya_watson(torch.zeros(2), torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        nadaraya_watson(torch.zeros(2), torch.zeros(3), torch.zeros(3),
                        mask=torch.ones(3, 2, dtype=torch.bool))


def test_leave_one_out_mask_keeps_each_point_out_of_its_own_fit():
    keys = torch.tensor([0.0, 1.0, 2.0])
    values = torch.tensor([1.0, 2.0, 3.0])
    pred, weights = nadaraya_watson(keys, keys, values, width=1e-3,
                                    mask=~torch.eye(3, dtype=torch.bool))
    assert torch.all(weights.diagonal() == 0)
    # A tiny width picks the nearest other point.
    assert pred.tolist() == pytest.approx([2.0, 2.0, 2.0])


def test_nw_module_equals_the_gaussian_and_learns_its_width():
    gen = torch.Generator().manual_seed(0)
    keys = torch.rand(50, generator=gen) * 5
    values = torch.sin(keys) * 2 + 0.1 * torch.randn(50, generator=gen)
    net = NWKernelRegression(width=2.0)
    with torch.no_grad():
        pred = net(keys, keys, values)
    expected, _ = nadaraya_watson(keys, keys, values, "gaussian", 2.0)
    torch.testing.assert_close(pred, expected)
    loo = ~torch.eye(50, dtype=torch.bool)
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    losses = []
    for _ in range(50):
        loss = ((net(keys, keys, values, loo) - values) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0] and net.width < 2.0
    with pytest.raises(ValueError, match="positive number"):
        NWKernelRegression(width=-1)
