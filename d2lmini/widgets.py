"""Interactive explorers for the notebooks (ipywidgets).

Each explorer is a ``VBox`` of sliders above an ``ipywidgets.Image`` that
holds the current figure as PNG bytes. The image is redrawn whenever a
slider moves (live in Jupyter). The PNG is part of the widget's state, so
a notebook executed with its widget state saved (``store_widget_state``)
shows the figure of the initial slider values on the static website too,
where no kernel runs. Inputs are seeded: the same arguments draw the same
figures.

Shape legend: L queries, S keys, N sampled queries.
"""

import ipywidgets as widgets
import torch

from d2lmini.attention import masked_softmax
from d2lmini.plot import figure_to_png, plot_score_scaling, show_heatmaps

__all__ = ["masked_softmax_explorer", "scaling_explorer"]

SLIDER_STYLE = {"description_width": "initial"}


def _slider_layout():
    """A slider as wide as the page allows, at most 360 pixels."""
    return widgets.Layout(width="min(100%, 360px)")


def _image():
    """An image that shrinks with the page (phones) but never grows."""
    return widgets.Image(format="png", layout=widgets.Layout(
        max_width="100%", height="auto", object_fit="contain"))


def masked_softmax_figure(scores, valid_len, temperature):
    """Heatmap of ``masked_softmax(scores / temperature, valid_len)``.

    Args:
        scores: (L, S) scores of L queries against S keys.
        valid_len: the number of valid keys (the same for every query).
        temperature: divides the scores; large values flatten the
            weights, small values sharpen them.

    Returns:
        The ``Figure``, one annotated heatmap on a fixed 0..1 scale.
    """
    L, S = scores.shape
    weights = masked_softmax(scores[None] / temperature,
                             torch.tensor([valid_len]))[0]  # (L, S)
    labels = [f"k{j}" if j < valid_len else "pad" for j in range(S)]
    return show_heatmaps(
        weights, xticklabels=labels, yticklabels=[f"q{i}" for i in range(L)],
        vmin=0, vmax=1, annotate=True, figsize=(0.62 * S + 1.6, 0.5 * L + 1.3),
        titles=[f"valid length {valid_len}, temperature {temperature:.2f}:"
                f" row sums {', '.join(f'{s:.0f}' for s in weights.sum(-1))}"])


def masked_softmax_explorer(scores=None, valid_len=None, temperature=1.0,
                            num_queries=3, num_keys=8, seed=0):
    """Sliders for the valid length and a temperature, over a heatmap.

    Args:
        scores: (L, S) scores; None draws ``num_queries x num_keys``
            standard normal scores times 2 from a generator seeded with
            ``seed``.
        valid_len: the initial valid length (0 to S); None means S // 2.
        temperature: the initial temperature (0.1 to 10).
        num_queries, num_keys: L and S when ``scores`` is None.
        seed: the seed of the random scores.

    Returns:
        An ``ipywidgets.VBox``: the sliders and the figure.
    """
    if scores is None:
        gen = torch.Generator().manual_seed(seed)
        scores = 2 * torch.randn(num_queries, num_keys, generator=gen)
    scores = torch.as_tensor(scores, dtype=torch.float32)
    if scores.dim() != 2:
        raise ValueError("scores must be (L, S), one row per query, got "
                         f"shape {tuple(scores.shape)}")
    S = scores.shape[1]
    valid_len = S // 2 if valid_len is None else valid_len
    if not 0 <= valid_len <= S:
        raise ValueError(f"valid_len must be between 0 and S = {S}, got "
                         f"{valid_len}")
    if not 0.1 <= temperature <= 10:
        raise ValueError("temperature must be between 0.1 and 10, got "
                         f"{temperature}")
    length = widgets.IntSlider(
        value=valid_len, min=0, max=S, description="valid length",
        style=SLIDER_STYLE, layout=_slider_layout(), continuous_update=False)
    temp = widgets.FloatLogSlider(
        value=temperature, base=10, min=-1, max=1, step=0.05,
        description="temperature τ", readout_format=".2f",
        style=SLIDER_STYLE, layout=_slider_layout(), continuous_update=False)
    image = _image()

    def draw(change=None):
        fig = masked_softmax_figure(scores, length.value, temp.value)
        image.value = figure_to_png(fig)

    length.observe(draw, names="value")
    temp.observe(draw, names="value")
    draw()
    # Side by side on a wide page, one above the other on a phone.
    sliders = widgets.HBox([length, temp],
                           layout=widgets.Layout(flex_flow="row wrap"))
    return widgets.VBox([sliders, image])


def sample_scores(d, num_queries=1000, num_keys=16, seed=0):
    """Dot products of random queries and keys with N(0, 1) entries.

    Args:
        d: the size of every query and key.
        num_queries, num_keys: N and S.
        seed: the seed of the generator (each d gets its own stream).

    Returns:
        (N, S) float64 scores q.k, whose variance is about d.
    """
    gen = torch.Generator().manual_seed(seed * 100_003 + d)
    q = torch.randn(num_queries, 1, d, generator=gen, dtype=torch.float64)
    k = torch.randn(num_queries, num_keys, d, generator=gen,
                    dtype=torch.float64)
    return (q * k).sum(-1)  # (N, S)


def scaling_explorer(dims=tuple(2 ** i for i in range(11)), d=64,
                     num_queries=1000, num_keys=16, seed=0):
    """A slider for d over the distributions of scores and weights.

    Shows, for random queries and keys of size d, the histograms of q.k
    and q.k / sqrt(d), and of the largest softmax weight of each query
    with and without the scaling (see ``plot.plot_score_scaling``).

    Args:
        dims: the sizes the slider offers.
        d: the initial size; must be one of ``dims``.
        num_queries, num_keys: N queries, each scored against S keys.
        seed: the seed of the random queries and keys.

    Returns:
        An ``ipywidgets.VBox``: the slider and the figure.
    """
    dims = tuple(int(x) for x in dims)
    if d not in dims:
        raise ValueError(f"d = {d} is not one of the slider's sizes {dims}")
    slider = widgets.SelectionSlider(
        options=dims, value=d, description="size d of q and k",
        style=SLIDER_STYLE, layout=_slider_layout(), continuous_update=False)
    image = _image()
    cache = {}  # d -> PNG bytes: moving back to a size is instant

    def draw(change=None):
        size = slider.value
        if size not in cache:
            scores = sample_scores(size, num_queries, num_keys, seed)
            cache[size] = figure_to_png(plot_score_scaling(scores, size))
        image.value = cache[size]

    slider.observe(draw, names="value")
    draw()
    return widgets.VBox([slider, image])
