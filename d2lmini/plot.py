"""Figures for the notebooks.

Every function returns a ``matplotlib.figure.Figure`` made *without*
pyplot: pyplot never holds a reference to it, so a notebook shows it once,
as the value of the cell (IPython's inline formatter draws any ``Figure``),
no figure is left open when a loop makes many of them, and no
``plt.close`` is needed. Outside a notebook, save it with
``fig.savefig(path)``.

Shape legend: L queries (rows of a heatmap), S keys (its columns).
"""

import io

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure

__all__ = ["figure_to_png", "plot_score_scaling", "set_style",
           "show_heatmaps"]

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
