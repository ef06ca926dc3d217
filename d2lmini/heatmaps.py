"""Heatmaps of attention weights, and of a translation's attention.

Like every figure of ``d2lmini.plot`` (which offers these functions
too), each returns a ``matplotlib.figure.Figure`` made without pyplot.

Shape legend: L queries (rows of a heatmap), S keys (its columns); for
translations T output steps (rows), S source positions, h heads.
"""

import math

import numpy as np
from matplotlib.figure import Figure

__all__ = ["show_heatmaps", "translation_figure"]


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
            if titles[i][j]:  # as written: "$" is no math here
                ax.set_title(titles[i][j], parse_math=False)
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
    # A model's tokens are shown as written: two "$" are no math.
    set_ticks(ticks, labels, rotation=90 if upright else 0,
              parse_math=False)


def _annotate(ax, matrix, fmt, vmin, vmax):
    """Write each value in its cell, white on dark cells."""
    middle = vmin + (vmax - vmin) / 2
    for (r, c), value in np.ndenumerate(matrix):
        ax.text(c, r, fmt.format(value), ha="center", va="center",
                fontsize=7, color="white" if value > middle else "black")


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
