"""Figures for the notebooks.

Every function returns a ``matplotlib.figure.Figure`` made *without*
pyplot: pyplot never holds a reference to it, so a notebook shows it once,
as the value of the cell (IPython's inline formatter draws any ``Figure``),
no figure is left open when a loop makes many of them, and no
``plt.close`` is needed. Outside a notebook, save it with
``fig.savefig(path)``.

The heatmaps of attention weights, ``show_heatmaps`` and
``translation_figure``, are in ``d2lmini.heatmaps``; they are offered
here too, with the training curves and the other figures.
"""

import io

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure

from .heatmaps import _as_array, show_heatmaps, translation_figure
from .utils import check_int

__all__ = ["figure_to_png", "moving_average", "plot_bleu_by_length",
           "plot_loss_curves", "plot_score_scaling", "plot_snapshots",
           "plot_training_measures", "set_style", "show_digits",
           "show_heatmaps", "translation_figure"]

STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def set_style():
    """Apply the book's matplotlib settings (small fonts, 100 dpi)."""
    mpl.rcParams.update(STYLE)


def figure_to_png(fig):
    """Return the figure as PNG bytes (used by the widgets)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def plot_score_scaling(scores, d, weights_unscaled=None,
                       weights_scaled=None, bins=40):
    """Scores and softmax weights with and without the 1/sqrt(d) scaling.

    Left: histograms of the raw dot products q.k and of q.k / sqrt(d).
    Right: histograms of the largest softmax weight of each query; near
    1 means the softmax has saturated (one key takes all the weight).

    Args:
        scores: (N, S) raw dot products of N queries with S keys each.
        d: the size of the queries and keys that made ``scores``.
        weights_unscaled, weights_scaled: (N, S) softmax weights; None
            computes them from ``scores``.
        bins: the number of histogram bins.

    Returns:
        The ``Figure``.
    """
    raw = _as_array(scores)
    if raw.ndim != 2:
        raise ValueError("scores must be (N, S): N queries times S keys, "
                         f"got shape {raw.shape}")
    if d < 1:
        raise ValueError(f"d must be a positive size, got {d}")
    scaled = raw / np.sqrt(d)
    w_raw = _softmax(raw) if weights_unscaled is None \
        else _as_array(weights_unscaled)
    w_scaled = _softmax(scaled) if weights_scaled is None \
        else _as_array(weights_scaled)
    fig = Figure(figsize=(8, 2.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    edges = np.histogram_bin_edges(np.concatenate([raw, scaled], None),
                                   bins=bins)
    left.hist(raw.ravel(), bins=edges, density=True, alpha=0.6,
              label=f"q·k (std {raw.std():.1f})")
    left.hist(scaled.ravel(), bins=edges, density=True, alpha=0.6,
              label=f"q·k/√d (std {scaled.std():.1f})")
    left.set(xlabel="score", ylabel="density",
             title=f"Scores of random q, k with d = {d}")
    left.legend(loc="upper left")
    unit = np.linspace(1 / raw.shape[1], 1, bins + 1)
    right.hist(w_raw.max(axis=1), bins=unit, alpha=0.6,
               label="softmax(q·k)")
    right.hist(w_scaled.max(axis=1), bins=unit, alpha=0.6,
               label="softmax(q·k/√d)")
    right.set(xlabel="largest weight of a query", ylabel="queries",
              title=f"Largest of {raw.shape[1]} weights (1 = saturated)")
    right.legend(loc="upper center")
    return fig


def _softmax(x):
    """Softmax over the last axis, in float64."""
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def moving_average(values, window):
    """Mean of each value and the ``window - 1`` before it (fewer at
    the start, so the curve begins at the first value): the solid
    curves of ``plot_loss_curves``."""
    sums = np.concatenate([[0.0], np.cumsum(values, dtype=float)])
    end = np.arange(1, len(values) + 1)
    start = np.maximum(end - window, 0)
    return (sums[end] - sums[start]) / (end - start)


def _named_runs(histories):
    """A History, or a dict of them, as a dict ``{label: history}``."""
    runs = {"": histories} if hasattr(histories, "steps") else histories
    if not isinstance(runs, dict) or not runs or not all(
            hasattr(h, "steps") and hasattr(h, "val_steps")
            for h in runs.values()):
        raise TypeError("histories must be a trainer History or a non-empty "
                        "dict {label: History}, got "
                        f"{type(histories).__name__}")
    for label, h in runs.items():
        if not h.steps:
            raise ValueError(f"history {label!r} has no training steps; "
                             "plot it after Trainer.fit")
    return runs


def plot_loss_curves(histories, smooth=50, figsize=(6.0, 3.2), title=None,
                     ylim=None):
    """Training and validation loss against the step, for one or more runs.

    The loss of single batches is noisy, so it is drawn faint with its
    moving average over ``smooth`` steps on top; the validation losses
    are dots joined by a dashed line in the run's colour.

    Args:
        histories: a ``d2lmini.trainer.History`` (its ``steps`` and
            ``val_steps``), or a dict ``{label: History}`` to compare runs.
        smooth: the window of the moving average, in steps (1: none).
        figsize: (width, height) in inches.
        title: the title of the axes.
        ylim: (bottom, top) of the loss axis, to zoom in on the end of
            training; None shows every loss.

    Returns:
        The ``Figure``.
    """
    runs = _named_runs(histories)
    check_int("smooth", smooth)  # steps
    fig = Figure(figsize=figsize, layout="constrained")
    ax = fig.subplots()
    for i, (label, h) in enumerate(runs.items()):
        color, name = f"C{i}", f"{label}: " if label else ""
        steps, losses = np.array(h.steps, dtype=float).T
        ax.plot(steps, losses, color=color, alpha=0.2, linewidth=0.6)
        mean = "" if smooth == 1 else f" (mean of {smooth} steps)"
        ax.plot(steps, moving_average(losses, smooth), color=color,
                label=f"{name}train{mean}")
        if h.val_steps:
            v_steps, v_losses = np.array(h.val_steps, dtype=float).T
            ax.plot(v_steps, v_losses, "o--", color=color, markersize=3,
                    label=f"{name}validation")
    ax.set(xlabel="training step", ylabel="cross-entropy per token",
           title=title)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.legend(loc="upper right")
    return fig


def _bucket_label(low, high, count):
    """'3', '3-4' or '9+' (inclusive token counts) and the bucket size."""
    if high == np.inf:
        span = f"{low:g}+"
    elif high - low == 1:
        span = f"{low:g}"
    else:
        span = f"{low:g}–{high - 1:g}"
    return f"{span}\n({count} sent.)"


def plot_bleu_by_length(results, figsize=None, title=None):
    """Corpus BLEU per bucket of source length, one bar per model.

    Args:
        results: a dict ``{model name: buckets}``, the buckets from
            ``d2lmini.metrics.bleu_by_length`` (each with ``low``,
            ``high``, ``count`` and ``score``); every model must have the
            same buckets, i.e. be scored on the same sentences.
        figsize: (width, height) in inches; None sizes it from the
            number of buckets.
        title: the title of the axes.

    Returns:
        The ``Figure``; each bar is labelled with its score, and an empty
        bucket (score NaN) has no bar.
    """
    if not isinstance(results, dict) or not results:
        raise TypeError("results must be a non-empty dict {model name: "
                        f"buckets}}, got {type(results).__name__}")
    keys = {name: [(b.low, b.high, b.count) for b in buckets]
            for name, buckets in results.items()}
    first, reference = next(iter(keys.items()))
    for name, key in keys.items():
        if key != reference:
            raise ValueError(
                f"{name!r} has buckets (low, high, count) {key} but "
                f"{first!r} has {reference}; score every model on the "
                "same sentences with the same bins")
    if not reference:
        raise ValueError(f"{first!r} has no buckets; give at least one")
    n, m = len(reference), len(results)
    if figsize is None:
        figsize = (min(1.0 + 0.45 * n * m + 0.3 * n, 8.0), 3.2)
    fig = Figure(figsize=figsize, layout="constrained")
    ax = fig.subplots()
    width, x = 0.8 / m, np.arange(n)
    for i, (name, buckets) in enumerate(results.items()):
        scores = np.array([b.score for b in buckets], dtype=float)
        bars = ax.bar(x + (i - (m - 1) / 2) * width,
                      np.nan_to_num(scores), width, label=name)
        ax.bar_label(bars, padding=1, fontsize=7, labels=[
            "" if np.isnan(s) else f"{s:.1f}" for s in scores])
    ax.set_xticks(x, [_bucket_label(*key) for key in reference])
    ax.set(xlabel="source length (tokens)", ylabel="corpus BLEU",
           title=title)
    ax.margins(y=0.3)  # head room for the legend above the bars
    ax.legend(loc="upper center", ncols=m)
    return fig


def plot_snapshots(snapshots, probe, picks, head=None, figsize=None):
    """One probe's attention at a few recorded steps of training, side by
    side (``d2lmini.snapshots``), on one colour scale from 0 to 1.

    Args:
        snapshots: a ``TrainingSnapshots``.
        probe: the index of the probe sentence.
        picks: indices of the snapshots to draw, in order.
        head: for multi-head attention, the head to draw (default: the
            mean over heads).
        figsize: (width, height) in inches; None sizes it.

    Returns:
        The ``Figure``.
    """
    picks = list(picks)
    if not picks or not all(isinstance(k, int) and 0 <= k < len(snapshots)
                            for k in picks):
        raise ValueError(f"picks must be snapshot indices in [0, "
                         f"{len(snapshots)}), got {picks!r}")
    src = snapshots.src_tokens[probe]
    if figsize is None:
        figsize = (min(max(0.4 * len(src), 2.0), 4.0) * len(picks) + 1.2,
                   3.4)
    fig = Figure(figsize=figsize, layout="constrained")
    axes = fig.subplots(1, len(picks), squeeze=False)[0]
    image = None
    for ax, k in zip(axes, picks):
        w = snapshots.attention[k][probe].float()
        if w.dim() == 3:
            w = w.mean(0) if head is None else w[head]
        image = ax.imshow(w.numpy(), cmap="Reds", vmin=0, vmax=1,
                          aspect="auto")
        out = snapshots.out_tokens[k][probe]
        # The model's tokens as written: two "$" are no math.
        ax.set_xticks(range(len(src)), src, rotation=60, ha="right",
                      parse_math=False)
        ax.set_yticks(range(len(out)), out, parse_math=False)
        ax.set_title(f"step {snapshots.steps[k]}")
        ax.set_xlabel("English (source)")
    axes[0].set_ylabel("French (output)")
    fig.colorbar(image, ax=list(axes), label="attention weight",
                 shrink=0.8)
    return fig


def plot_training_measures(snapshots, measures, marks=None,
                           figsize=(7.0, 2.8)):
    """Validation BLEU, and measures of attention in [0, 1], against the
    step.

    Args:
        snapshots: a ``TrainingSnapshots`` (its ``steps`` and
            ``val_bleu``).
        measures: ``{name: values}``, one value per snapshot (e.g.
            ``d2lmini.alignment.snapshot_measures(snapshots)``).
        marks: ``{label: step}`` drawn as dashed vertical lines on both
            axes (e.g. the half-rise steps; a None step is skipped).
        figsize: (width, height) in inches.

    Returns:
        The ``Figure``.
    """
    for name, values in measures.items():
        if len(values) != len(snapshots):
            raise ValueError(f"give one value per snapshot: "
                             f"{len(snapshots)} snapshots, {len(values)} "
                             f"values of {name!r}")
    fig = Figure(figsize=figsize, layout="constrained")
    left, right = fig.subplots(1, 2)
    left.plot(snapshots.steps, snapshots.val_bleu, "o-", markersize=3)
    left.set(xlabel="training step", ylabel="val BLEU",
             title="Validation BLEU")
    for i, (name, values) in enumerate(measures.items()):
        right.plot(snapshots.steps, values, "o-", markersize=3,
                   color=f"C{i + 1}", label=name)
    right.set(xlabel="training step", ylabel="share or measure",
              title="The probes' attention", ylim=(0, 1))
    for i, (label, step) in enumerate((marks or {}).items()):
        if step is None:
            continue
        for ax in (left, right):
            ax.axvline(step, color=f"C{i + 3}", linestyle="--",
                       linewidth=1, label=label if ax is right else None)
    right.legend(loc="lower right")
    return fig


def show_digits(images, titles=None, overlays=None, figsize=None,
                overlay_label="Attention weight", row_labels=None):
    """Small grey images in a grid, optionally with a heat overlay each.

    Args:
        images: (n, H, W) for one row, or (rows, cols, H, W).
        titles: one per image, in the same nesting (or None).
        overlays: None, or one (h, w) map per image whose cells cover
            H/h x W/w pixels each (attention over p x p patches of a ViT:
            h = H/p), drawn in red over the image on one colour scale
            from 0 to the largest value.
        figsize: (width, height) in inches; None sizes it from the grid.
        overlay_label: the label of the overlay's colorbar.
        row_labels: one label per row, written left of it (or None).

    Returns:
        The ``Figure``.
    """
    grid = _as_array(images)
    if grid.ndim == 3:
        grid = grid[None]
    if grid.ndim != 4:
        raise ValueError(f"images must be (n, H, W) or (rows, cols, H, W),"
                         f" got shape {tuple(_as_array(images).shape)}")
    rows, cols, H, W = grid.shape
    heat = None
    if overlays is not None:
        heat = _as_array(overlays)
        if heat.ndim == 3:
            heat = heat[None]
        if heat.shape[:2] != (rows, cols) or heat.ndim != 4 or \
                H % heat.shape[2] or W % heat.shape[3]:
            raise ValueError(f"overlays must be one (h, w) map per image, "
                             f"h dividing {H} and w dividing {W}; got "
                             f"{tuple(heat.shape)} for images "
                             f"{(rows, cols, H, W)}")
    if titles is not None:
        titles = np.asarray(titles, dtype=object).reshape(rows, cols)
    if row_labels is not None and len(row_labels) != rows:
        raise ValueError(f"row_labels needs {rows} labels, got "
                         f"{len(row_labels)}")
    fig = Figure(figsize=figsize or (1.3 * cols + 0.6 * (heat is not None),
                                     1.4 * rows))
    axes = np.asarray(fig.subplots(rows, cols, squeeze=False))
    vmax = float(heat.max()) if heat is not None else None
    shown = None
    for i in range(rows):
        for j in range(cols):
            ax = axes[i, j]
            ax.imshow(grid[i, j], cmap="Greys", vmin=0,
                      vmax=max(float(grid.max()), 1e-9))
            if heat is not None:
                up = np.kron(heat[i, j], np.ones((H // heat.shape[2],
                                                  W // heat.shape[3])))
                shown = ax.imshow(up, cmap="Reds", alpha=0.55, vmin=0,
                                  vmax=vmax)
            ax.set_xticks([])
            ax.set_yticks([])
            for spine in ax.spines.values():
                spine.set_visible(False)
            if titles is not None:
                ax.set_title(str(titles[i, j]))
            if row_labels is not None and j == 0:
                ax.set_ylabel(str(row_labels[i]))
    if shown is not None:
        fig.colorbar(shown, ax=axes.ravel().tolist(), shrink=0.8,
                     label=overlay_label)
    return fig
