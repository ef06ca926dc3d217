"""Figures for the notebooks.

Every function returns a ``matplotlib.figure.Figure`` made *without*
pyplot: pyplot never holds a reference to it, so a notebook shows it once,
as the value of the cell (IPython's inline formatter draws any ``Figure``),
no figure is left open when a loop makes many of them, and no
``plt.close`` is needed. Outside a notebook, save it with
``fig.savefig(path)``.

Shape legend: L queries (rows of a heatmap), S keys (its columns); for
translations T output steps (rows), S source positions, h heads.
"""

import io
import math

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure

from .utils import check_int

__all__ = ["figure_to_png", "moving_average", "plot_bleu_by_length",
           "plot_loss_curves", "plot_score_scaling", "set_style",
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


def _as_array(matrices):
    """A tensor or array-like as a float NumPy array."""
    if hasattr(matrices, "detach"):  # a torch tensor, on any device
        matrices = matrices.detach().cpu().float().numpy()
    try:
        return np.asarray(matrices, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError("matrices must be a tensor or an array of numbers, "
                        f"got {type(matrices).__name__}") from err


def _grid(matrices):
    """(L, S), (n, L, S) or (rows, cols, L, S) -> (rows, cols, L, S)."""
    if matrices.ndim == 2:
        return matrices[None, None]
    if matrices.ndim == 3:  # one row of panels
        return matrices[None]
    if matrices.ndim == 4:
        return matrices
    raise ValueError("matrices must be (L, S), (n, L, S) or "
                     f"(rows, cols, L, S); got shape {matrices.shape}")


def _panel_titles(titles, rows, cols):
    """One title per column (d2l's convention) or a rows x cols grid."""
    if titles is None:
        return [[None] * cols for _ in range(rows)]
    titles = list(titles)
    if all(isinstance(t, str) for t in titles):
        if len(titles) != cols:
            raise ValueError(f"got {len(titles)} titles for {cols} columns "
                             "of panels; give one title per column")
        return [titles] * rows
    if len(titles) != rows or any(len(row) != cols for row in titles):
        raise ValueError(f"titles must be {cols} strings or a {rows} x "
                         f"{cols} nested list, got {titles!r}")
    return titles


def _check_labels(labels, size, axis):
    if labels is not None and len(labels) != size:
        raise ValueError(f"got {len(labels)} {axis}ticklabels for {size} "
                         f"{'columns' if axis == 'x' else 'rows'}; give "
                         "one label per position")


def show_heatmaps(matrices, xlabel="Keys", ylabel="Queries", titles=None,
                  figsize=None, cmap="Reds", xticklabels=None,
                  yticklabels=None, vmin=0, vmax=None, annotate=False,
                  colorbar_label="Attention weight"):
    """Draw attention weights as a grid of heatmaps with one colour scale.

    Every panel uses the same ``vmin`` and ``vmax``, so equal colours mean
    equal weights across panels, and one colorbar serves the figure.

    Args:
        matrices: (L, S), (n, L, S) for one row of n panels, or d2l's
            (rows, cols, L, S); a tensor or an array.
        xlabel, ylabel: axis labels (the bottom row and left column).
        titles: one title per column, or a rows x cols nested list.
        figsize: (width, height) in inches; None sizes it from L and S.
        cmap: a matplotlib colormap name.
        xticklabels, yticklabels: S and L labels (for translation:
            source tokens on x, output tokens on y); None numbers them.
        vmin, vmax: the colour scale; ``vmax=None`` takes the largest
            value of all panels.
        annotate: False, True (two decimals) or a format such as
            ``"{:.3f}"``: write each value in its cell (small maps only).
        colorbar_label: the label of the colorbar.

    Returns:
        The ``Figure``.
    """
    grid = _grid(_as_array(matrices))  # (rows, cols, L, S)
    rows, cols, L, S = grid.shape
    _check_labels(xticklabels, S, "x")
    _check_labels(yticklabels, L, "y")
    titles = _panel_titles(titles, rows, cols)
    if vmax is None:
        vmax = float(np.nanmax(grid)) if grid.size else 1.0
    if vmax <= vmin:  # e.g. all weights zero: keep a visible scale
        vmax = vmin + 1.0
    if figsize is None:
        width = min(max(0.42 * S, 2.0), 6.0) * cols + 1.2
        height = min(max(0.42 * L, 1.0), 6.0) * rows + 0.9
        figsize = (width, height)
    fig = Figure(figsize=figsize, layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
    fmt = "{:.2f}" if annotate is True else annotate
    for i in range(rows):
        for j in range(cols):
            ax = axes[i, j]
            image = ax.imshow(grid[i, j], cmap=cmap, vmin=vmin, vmax=vmax,
                              aspect="auto", interpolation="nearest")
            if fmt:
                _annotate(ax, grid[i, j], fmt, vmin, vmax)
            if i == rows - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel)
            if titles[i][j]:
                ax.set_title(titles[i][j])
    _set_ticks(axes[-1, 0], S, xticklabels, "x")
    _set_ticks(axes[-1, 0], L, yticklabels, "y")
    colorbar = fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.9,
                            fraction=0.05, pad=0.02)
    colorbar.set_label(colorbar_label)
    return fig


def _set_ticks(ax, size, labels, axis):
    """Tick every position (numbers, or the given token labels)."""
    step = 1 if labels is not None or size <= 12 else max(1, size // 10)
    ticks = np.arange(0, size, step)
    set_ticks = ax.set_xticks if axis == "x" else ax.set_yticks
    if labels is None:
        set_ticks(ticks)
        return
    labels = [str(t) for t in labels]
    # Long tokens on the x-axis would overlap: turn them upright.
    upright = axis == "x" and max(map(len, labels), default=0) > 3
    set_ticks(ticks, labels, rotation=90 if upright else 0)


def _annotate(ax, matrix, fmt, vmin, vmax):
    """Write each value in its cell, white on dark cells."""
    middle = vmin + (vmax - vmin) / 2
    for (r, c), value in np.ndenumerate(matrix):
        ax.text(c, r, fmt.format(value), ha="center", va="center",
                fontsize=7, color="white" if value > middle else "black")


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


def _head_grid(attention):
    """(h, T, S) -> (rows, cols, T, S): the mean, then every head.

    Unused panels at the end of the last row are NaN (drawn blank).
    """
    maps = np.concatenate([attention.mean(0, keepdims=True), attention])
    n, T, S = maps.shape  # n = h + 1
    cols = n if n <= 4 else math.ceil(math.sqrt(n))  # 8 heads: 3 x 3
    rows = math.ceil(n / cols)
    blank = np.full((rows * cols - n, T, S), np.nan)
    return np.concatenate([maps, blank]).reshape(rows, cols, T, S), n


def translation_figure(translation, head="mean", title=None):
    """Heatmap of a translation's attention weights.

    Source tokens label the columns, output tokens the rows; every panel
    uses the colour scale 0..1, so maps of different heads, models and
    sentences compare directly.

    Args:
        translation: a ``d2lmini.decoding.Translation`` with attention
            (T, S) for one map, or (h, T, S) for h heads (a tensor or
            an array).
        head: ``"mean"`` (the mean of the heads, or the only map), an
            int in [0, h) for one head, or ``"all"`` for the mean and
            every head in a grid.
        title: text that starts the title of the (first) panel.

    Returns:
        The ``Figure``.
    """
    attention = translation.attention
    if attention is None:
        raise ValueError("this translation has no attention weights (a "
                         "decoder without attention)")
    attention = np.asarray(attention, dtype=np.float64)
    if attention.ndim not in (2, 3):
        raise ValueError("attention must be (T, S) or (h, T, S), got "
                         f"shape {tuple(attention.shape)}")
    h = attention.shape[0] if attention.ndim == 3 else 1
    maps = attention if attention.ndim == 3 else attention[None]
    prefix = f"{title}: " if title else ""
    labels = {"xticklabels": translation.src_tokens,
              "yticklabels": translation.out_tokens,
              "xlabel": "Source tokens", "ylabel": "Output tokens",
              "vmin": 0, "vmax": 1}
    T, S = maps.shape[1:]
    # About a quarter inch per token, so that its label fits.
    width, height = min(max(0.3 * S, 1.8), 4.5), min(max(0.25 * T, 1), 4)
    if head == "all" and h > 1:
        grid, n = _head_grid(maps)  # (rows, cols, T, S)
        rows, cols = grid.shape[:2]
        labels["figsize"] = (cols * width + 1.4, rows * height + 1.3)
        names = ["mean of heads"] + [f"head {i + 1}" for i in range(h)]
        names[0] = prefix + names[0]
        names += [""] * (rows * cols - n)
        fig = show_heatmaps(grid, titles=[names[i:i + cols] for i in
                                          range(0, len(names), cols)],
                            **labels)
        for ax in fig.axes[n:rows * cols]:
            ax.set_visible(False)
        # show_heatmaps turns long labels upright in its first column
        # only; the other panels of the bottom row share those labels.
        if max(map(len, translation.src_tokens), default=0) > 3:
            for ax in fig.axes[(rows - 1) * cols:rows * cols]:
                ax.tick_params(axis="x", labelrotation=90)
        return fig
    if head in ("mean", "all"):
        weights = maps.mean(0)  # (T, S)
        name = f"mean of {h} heads" if h > 1 else "attention weights"
    elif isinstance(head, int) and not isinstance(head, bool) \
            and 0 <= head < h:
        weights, name = maps[head], f"head {head + 1} of {h}"
    else:
        raise ValueError(f"head must be 'mean', 'all' or an int in [0, "
                         f"{h}) for {h} head(s), got {head!r}")
    return show_heatmaps(weights, titles=[prefix + name],
                         figsize=(width + 1.6, height + 1.3), **labels)
