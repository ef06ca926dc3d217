"""Tests of d2lmini.plot (matplotlib Agg backend, tiny figures)."""

import math

import matplotlib
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from d2lmini.decoding import Translation, translate
from d2lmini.metrics import LengthBucket
from d2lmini.plot import (
    STYLE,
    figure_to_png,
    plot_bleu_by_length,
    plot_loss_curves,
    plot_score_scaling,
    set_style,
    show_heatmaps,
    translation_figure,
)

matplotlib.use("Agg")  # d2lmini.plot never imports pyplot; tests stay headless

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def panels(fig):
    """The heatmap axes of a figure (those holding an image), in order."""
    return [ax for ax in fig.axes if ax.images and ax.get_label() !=
            "<colorbar>"]


def colorbars(fig):
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


@pytest.mark.parametrize("shape, grid", [
    ((3, 5), (1, 1)), ((4, 3, 5), (1, 4)), ((2, 3, 3, 5), (2, 3))])
def test_layouts_give_one_panel_per_matrix_and_one_colorbar(shape, grid):
    fig = show_heatmaps(torch.rand(shape))
    assert isinstance(fig, Figure)
    assert len(panels(fig)) == grid[0] * grid[1]
    assert len(colorbars(fig)) == 1
    for ax in panels(fig):
        assert ax.images[0].get_array().shape == shape[-2:]


def test_all_panels_share_one_colour_scale():
    matrices = torch.zeros(2, 2, 3, 4)
    matrices[1, 0, 2, 3] = 0.7  # the largest value is in one panel only
    fig = show_heatmaps(matrices)
    limits = [ax.images[0].get_clim() for ax in panels(fig)]
    assert limits == [(0.0, pytest.approx(0.7))] * 4
    fixed = show_heatmaps(matrices, vmin=0, vmax=1)
    assert {ax.images[0].get_clim() for ax in panels(fixed)} == {(0, 1)}


def test_all_zero_weights_still_get_a_scale():
    fig = show_heatmaps(torch.zeros(2, 3))
    assert panels(fig)[0].images[0].get_clim() == (0, 1.0)


def test_values_are_drawn_unchanged_and_input_is_not_modified():
    weights = torch.rand(1, 2, 3, 4, requires_grad=True)
    before = weights.detach().clone()
    fig = show_heatmaps(weights)
    for j, ax in enumerate(panels(fig)):
        np.testing.assert_allclose(ax.images[0].get_array(),
                                   before[0, j].numpy(), rtol=1e-6)
    assert torch.equal(weights.detach(), before)


def test_numpy_and_nested_lists_are_accepted():
    fig = show_heatmaps([[0.25, 0.75], [1.0, 0.0]])
    np.testing.assert_array_equal(panels(fig)[0].images[0].get_array(),
                                  [[0.25, 0.75], [1.0, 0.0]])


def test_axis_labels_on_outer_panels_and_token_tick_labels():
    src, out = ["i", "lost", "."], ["j'ai", "perdu"]
    fig = show_heatmaps(torch.rand(2, 2, 2, 3), xlabel="Source",
                        ylabel="Output", xticklabels=src, yticklabels=out)
    axes = np.array(panels(fig)).reshape(2, 2)
    assert [ax.get_xlabel() for ax in axes.ravel()] == \
        ["", "", "Source", "Source"]
    assert [ax.get_ylabel() for ax in axes.ravel()] == \
        ["Output", "", "Output", ""]
    bottom_left = axes[1, 0]
    assert [t.get_text() for t in bottom_left.get_xticklabels()] == src
    assert [t.get_text() for t in bottom_left.get_yticklabels()] == out
    # Long source tokens stand upright so that they do not overlap.
    assert bottom_left.get_xticklabels()[1].get_rotation() == 90


def test_titles_per_column_or_per_panel():
    fig = show_heatmaps(torch.rand(2, 2, 2, 2), titles=["a", "b"])
    assert [ax.get_title() for ax in panels(fig)] == ["a", "b", "a", "b"]
    fig = show_heatmaps(torch.rand(2, 2, 2, 2),
                        titles=[["a", "b"], ["c", "d"]])
    assert [ax.get_title() for ax in panels(fig)] == ["a", "b", "c", "d"]


def test_annotate_writes_every_value():
    fig = show_heatmaps(torch.tensor([[0.125, 0.875]]), annotate="{:.3f}")
    texts = [t.get_text() for t in panels(fig)[0].texts]
    assert texts == ["0.125", "0.875"]
    fig = show_heatmaps(torch.tensor([[0.125, 0.875]]), annotate=True)
    assert [t.get_text() for t in panels(fig)[0].texts] == ["0.12", "0.88"]


def test_colorbar_is_labelled():
    fig = show_heatmaps(torch.rand(2, 2), colorbar_label="weight")
    assert colorbars(fig)[0].get_ylabel() == "weight"


@pytest.mark.parametrize("kwargs, words", [
    ({"matrices": torch.rand(5)}, "got shape (5,)"),
    ({"matrices": torch.rand(1, 1, 1, 2, 2)}, "(rows, cols, L, S)"),
    ({"matrices": torch.rand(2, 3), "xticklabels": ["a"]},
     "1 xticklabels for 3 columns"),
    ({"matrices": torch.rand(2, 3), "yticklabels": ["a"]},
     "1 yticklabels for 2 rows"),
    ({"matrices": torch.rand(2, 2, 3), "titles": ["a"]},
     "1 titles for 2 columns"),
    ({"matrices": torch.rand(2, 2, 2, 3), "titles": [["a", "b"]]},
     "2 x 2 nested list"),
])
def test_bad_arguments_raise_value_error_naming_the_problem(kwargs, words):
    with pytest.raises(ValueError) as info:
        show_heatmaps(**kwargs)
    assert words in str(info.value)


def test_non_numbers_raise_type_error():
    with pytest.raises(TypeError, match="tensor or an array"):
        show_heatmaps([["a", "b"]])


def test_figures_are_not_kept_by_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    show_heatmaps(torch.rand(2, 2))
    plot_score_scaling(torch.randn(4, 3), d=4)
    assert plt.get_fignums() == before


def test_figure_to_png_is_a_deterministic_png():
    fig = show_heatmaps(torch.eye(3))
    first, second = figure_to_png(fig), figure_to_png(fig)
    assert first.startswith(PNG_MAGIC)
    assert first == second


def test_score_scaling_histograms_and_legends():
    gen = torch.Generator().manual_seed(0)
    scores = 8 * torch.randn(50, 6, generator=gen)
    fig = plot_score_scaling(scores, d=64, bins=10)
    left, right = fig.axes
    legend = [t.get_text() for t in left.get_legend().get_texts()]
    assert legend[0].startswith("q·k (std ") and "√d" in legend[1]
    assert "d = 64" in left.get_title()
    # Each histogram counts every score (left) or every query (right).
    heights = [sum(p.get_height() for p in c) for c in right.containers]
    assert heights == [50, 50]
    assert len(left.containers) == 2


def test_score_scaling_uses_given_weights():
    scores = torch.zeros(4, 2)
    one_hot = torch.tensor([[1.0, 0.0]] * 4)
    fig = plot_score_scaling(scores, d=4, weights_unscaled=one_hot,
                             weights_scaled=one_hot)
    right = fig.axes[1]
    # All four largest weights are 1: they land in the last bin.
    assert [c[-1].get_height() for c in right.containers] == [4, 4]


@pytest.mark.parametrize("scores, d, words", [
    (torch.randn(5), 4, "(N, S)"), (torch.randn(2, 3), 0, "d must be")])
def test_score_scaling_bad_arguments(scores, d, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")
                       .replace(")", r"\)")):
        plot_score_scaling(scores, d)


def test_set_style_updates_rc_params():
    with matplotlib.rc_context({"font.size": 20}):
        set_style()
        assert matplotlib.rcParams["font.size"] == STYLE["font.size"]
    assert matplotlib.rcParams["font.size"] != 20


# Loss curves and BLEU by length (the translation sections).

def _history(losses, val):
    from d2lmini.trainer import History

    return History(steps=list(enumerate(losses, start=1)), val_steps=val,
                   num_steps=len(losses))


def _lines(ax):
    return {line.get_label(): line for line in ax.get_lines()}


def test_loss_curves_draw_raw_smoothed_and_validation_losses():
    h = _history([4.0, 2.0, 3.0, 1.0], val=[(2, 2.5), (4, 1.5)])
    fig = plot_loss_curves(h, smooth=2)
    ax = fig.axes[0]
    lines = _lines(ax)
    train = lines["train (mean of 2 steps)"]
    np.testing.assert_allclose(train.get_xdata(), [1, 2, 3, 4])
    # The first point has no predecessor: a window of one value.
    np.testing.assert_allclose(train.get_ydata(), [4.0, 3.0, 2.5, 2.0])
    val = lines["validation"]
    np.testing.assert_allclose(val.get_xdata(), [2, 4])
    np.testing.assert_allclose(val.get_ydata(), [2.5, 1.5])
    raw = [line for line in ax.get_lines() if line.get_label()[0] == "_"]
    assert len(raw) == 1
    np.testing.assert_allclose(raw[0].get_ydata(), [4.0, 2.0, 3.0, 1.0])
    assert ax.get_xlabel() == "training step"
    assert ax.get_ylabel() == "cross-entropy per token"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == \
        ["train (mean of 2 steps)", "validation"]


def test_loss_curves_compare_runs_in_their_own_colours():
    runs = {"additive": _history([3.0, 2.0], [(2, 2.2)]),
            "none": _history([3.5, 2.5, 2.0], [])}
    fig = plot_loss_curves(runs, smooth=1, title="t")
    ax = fig.axes[0]
    lines = _lines(ax)
    assert set(lines) >= {"additive: train", "additive: validation",
                          "none: train"}
    assert "none: validation" not in lines  # that run never validated
    assert lines["additive: train"].get_color() == \
        lines["additive: validation"].get_color()
    assert lines["additive: train"].get_color() != \
        lines["none: train"].get_color()
    np.testing.assert_allclose(lines["none: train"].get_ydata(),
                               [3.5, 2.5, 2.0])
    assert ax.get_title() == "t"


def test_loss_curves_zoom_on_the_loss_axis():
    h = _history([8.0, 3.0, 2.0], [(3, 2.5)])
    assert plot_loss_curves(h).axes[0].get_ylim()[1] > 8.0
    zoomed = plot_loss_curves(h, ylim=(1.5, 3.5)).axes[0]
    assert zoomed.get_ylim() == (1.5, 3.5)


def test_loss_curves_leave_the_history_alone():
    h = _history([2.0, 1.0, 0.5], [(3, 0.7)])
    before = (list(h.steps), list(h.val_steps))
    plot_loss_curves(h, smooth=2)
    assert (h.steps, h.val_steps) == before


@pytest.mark.parametrize("histories, kwargs, error, words", [
    ("not a history", {}, TypeError, "History"),
    ({}, {}, TypeError, "non-empty dict"),
    ({"a": _history([], [])}, {}, ValueError, "'a' has no training"),
    (_history([1.0], []), {"smooth": 0}, ValueError, "smooth must"),
])
def test_loss_curves_bad_arguments(histories, kwargs, error, words):
    with pytest.raises(error, match=words):
        plot_loss_curves(histories, **kwargs)


def _buckets(scores, bins=(2, 4, 6, math.inf), counts=(5, 3, 0)):
    return [LengthBucket(lo, hi, n, s) for lo, hi, n, s in
            zip(bins, bins[1:], counts, scores)]


def test_bleu_by_length_draws_one_labelled_bar_per_model_and_bucket():
    results = {"additive": _buckets([20.0, 12.5, math.nan]),
               "none": _buckets([22.0, 10.0, math.nan])}
    fig = plot_bleu_by_length(results, title="held-out")
    ax = fig.axes[0]
    first, second = ax.containers
    assert [b.get_height() for b in first] == [20.0, 12.5, 0.0]
    assert [b.get_height() for b in second] == [22.0, 10.0, 0.0]
    # The bars of a bucket sit side by side, the first model on the left.
    assert first[0].get_x() < second[0].get_x() < first[1].get_x()
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["20.0", "12.5", "", "22.0", "10.0", ""]
    assert [t.get_text() for t in ax.get_xticklabels()] == \
        ["2–3\n(5 sent.)", "4–5\n(3 sent.)", "6+\n(0 sent.)"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == \
        ["additive", "none"]
    assert ax.get_ylabel() == "corpus BLEU" and ax.get_title() == "held-out"


def test_bleu_by_length_single_token_buckets():
    fig = plot_bleu_by_length({"m": _buckets([1.0, 2.0], bins=(3, 4, 5),
                                             counts=(1, 2))})
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == \
        ["3\n(1 sent.)", "4\n(2 sent.)"]


@pytest.mark.parametrize("results, error, words", [
    ({}, TypeError, "non-empty dict"),
    ([1, 2], TypeError, "non-empty dict"),
    ({"a": []}, ValueError, "no buckets"),
    ({"a": _buckets([1.0, 2.0, 3.0]),
      "b": _buckets([1.0, 2.0, 3.0], counts=(5, 3, 1))},
     ValueError, "same sentences"),
])
def test_bleu_by_length_bad_arguments(results, error, words):
    with pytest.raises(error, match=words):
        plot_bleu_by_length(results)


def test_new_figures_are_not_kept_by_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    plot_loss_curves(_history([1.0, 0.5], []))
    plot_bleu_by_length({"m": _buckets([1.0, 2.0, 3.0])})
    assert plt.get_fignums() == before


# translation_figure, with the untrained toy models of conftest.py

def drawn(fig):
    """The arrays of the visible heatmaps of a figure, in order."""
    return [torch.as_tensor(ax.images[0].get_array(), dtype=torch.float32)
            for ax in fig.axes if ax.images and ax.get_visible()]


def test_translation_figure_draws_heads_mean_and_grid(toy):
    models, data = toy
    t = translate(models["2-head"], data, ["i lost ."], 3)[0]
    h, T, S = t.attention.shape
    assert (h, T, S) == (2, len(t.out_tokens), 4)  # "i lost . <eos>"
    (one,) = drawn(translation_figure(t, head=1))
    torch.testing.assert_close(one, t.attention[1])
    fig = translation_figure(t, title="toy")
    (mean,) = drawn(fig)
    torch.testing.assert_close(mean, t.attention.mean(0))
    ax = fig.axes[0]
    assert ax.get_title() == "toy: mean of 2 heads"
    assert ax.images[0].get_clim() == (0, 1)
    assert [x.get_text() for x in ax.get_xticklabels()] == t.src_tokens
    assert [y.get_text() for y in ax.get_yticklabels()] == t.out_tokens
    grid = translation_figure(t, head="all")
    panels = drawn(grid)
    assert len(panels) == 3  # the mean, head 1, head 2
    for got, want in zip(panels, [t.attention.mean(0), *t.attention]):
        torch.testing.assert_close(got, want)
    assert [ax.get_title() for ax in grid.axes[:3]] == [
        "mean of heads", "head 1", "head 2"]


def test_translation_figure_grid_of_eight_heads_is_three_by_three():
    t = Translation(["a", "<eos>"], ["b"], ["b", "<eos>"],
                            torch.softmax(torch.randn(8, 2, 2), -1))
    fig = translation_figure(t, head="all")
    assert len(drawn(fig)) == 9 and len(fig.axes) == 10  # + colorbar
    assert fig.axes[8].get_title() == "head 8"
    # "<eos>" is long: upright labels under every panel of the bottom row
    for ax in fig.axes[6:9]:
        assert {t.get_rotation() for t in ax.get_xticklabels()} == {90}


def test_translation_figure_single_map_and_bad_heads(toy):
    models, data = toy
    t = translate(models["additive"], data, ["go ."], 2)[0]
    (only,) = drawn(translation_figure(t, head="all"))
    torch.testing.assert_close(only, t.attention)
    for head in (1, -1, "first", True):
        with pytest.raises(ValueError, match="head must be"):
            translation_figure(t, head=head)
    t.attention = None
    with pytest.raises(ValueError, match="no attention weights"):
        translation_figure(t)


# A model may emit any token: these must be drawn as written, and the
# last would be a mathtext syntax error if it were read as math.
ODD_TOKENS = ["<unk>", "$5$", "a_b", "*", "`x`", "{", "$\\frac{$"]


def _drawn_as_written(labels):
    for label in labels:
        text, is_math = label._preprocess_math(label.get_text())
        assert not is_math and text in ODD_TOKENS


def test_model_tokens_in_heatmap_labels_are_drawn_as_written():
    n = len(ODD_TOKENS)
    fig = show_heatmaps(torch.rand(n, n), xticklabels=ODD_TOKENS,
                        yticklabels=ODD_TOKENS, titles=["$\\frac{$"])
    assert figure_to_png(fig).startswith(PNG_MAGIC)  # draws, no error
    ax = panels(fig)[0]
    _drawn_as_written(ax.get_xticklabels() + ax.get_yticklabels()
                      + [ax.title])


def test_model_tokens_in_snapshot_panels_are_drawn_as_written():
    from d2lmini.plot import plot_snapshots
    from d2lmini.snapshots import Probe, TrainingSnapshots
    n = len(ODD_TOKENS)
    snaps = TrainingSnapshots(
        5, [Probe("odd")], [ODD_TOKENS], steps=[0, 5],
        out_tokens=[[ODD_TOKENS[:2]], [ODD_TOKENS]],
        attention=[[torch.rand(2, n)], [torch.rand(n, n)]],
        probe_bleu=[[0.0], [1.0]], train_loss=[None, 1.0],
        val_loss=[2.0, 1.0], val_bleu=[0.0, 1.0])
    fig = plot_snapshots(snaps, 0, [0, 1])
    assert figure_to_png(fig).startswith(PNG_MAGIC)
    for ax in panels(fig):
        _drawn_as_written(ax.get_xticklabels() + ax.get_yticklabels())
