"""Interactive explorers for the notebooks (ipywidgets).

Each explorer is a ``VBox`` of sliders above an ``ipywidgets.Image`` that
holds the current figure as PNG bytes. The image is redrawn whenever a
slider moves (live in Jupyter). The PNG is part of the widget's state, so
a notebook executed with its widget state saved (``store_widget_state``)
shows the figure of the initial slider values on the static website too,
where no kernel runs. Inputs are seeded: the same arguments draw the same
figures.

``translation_explorer`` is a ``Tab`` instead: one pre-rendered page per
example sentence (tab switching needs no kernel, so the website shows all
of them) and a live page with a text box, a model and a head choice.

Shape legend: L queries, S keys, N sampled queries; for translations
T output steps, S source positions, h heads.
"""

import html

import ipywidgets as widgets
import torch

from d2lmini.attention import masked_softmax
from d2lmini.decoding import translate
from d2lmini.plot import (
    figure_to_png,
    plot_score_scaling,
    show_heatmaps,
    translation_figure,
)
from d2lmini.utils import check_int

__all__ = ["masked_softmax_explorer", "scaling_explorer",
           "translation_explorer"]

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


# The translation explorer: output steps are the rows of a map (T),
# source positions its columns (S).

TRANSLATION_HINT = ("Type an English sentence and press Enter (this needs "
                    "a running Jupyter kernel; on the website the other "
                    "tabs hold saved examples).")


def _translation_image():
    """An image at its own size (not stretched to the page's width), that
    still shrinks on a narrow page."""
    return widgets.Image(format="png", layout=widgets.Layout(
        max_width="100%", height="auto", object_fit="contain",
        align_self="flex-start"))


def _check_models(models):
    """A non-empty dict of name -> Seq2Seq with attention."""
    if not isinstance(models, dict) or not models:
        raise TypeError("models must be a non-empty dict of name -> "
                        f"trained Seq2Seq, got {type(models).__name__}")
    for name, model in models.items():
        attention = getattr(getattr(model, "decoder", None),
                            "attention", None)
        if not isinstance(attention, torch.nn.Module):
            raise TypeError(f"models[{name!r}] has no attention decoder "
                            "(decoder.attention): the explorer draws "
                            "attention weights")
    return dict(models)


def _num_heads(model):
    return getattr(model.decoder.attention, "num_heads", 1)


def _source_note(data, sentence):
    """Unknown and cut-off words of a sentence, as HTML (or "")."""
    tokens, T = data.tokens(sentence), data.num_steps
    notes = []
    read = tokens[:T]  # the model reads T steps: tokens, then <eos>
    unknown = [t for t in dict.fromkeys(read) if t not in data.src_vocab]
    if unknown:
        notes.append("not in the vocabulary, read as &lt;unk&gt;: "
                     + ", ".join(f"<i>{html.escape(t)}</i>"
                                 for t in unknown))
    if len(tokens) > T:
        notes.append(f"only the first {T} of {len(tokens)} words are "
                     "read, without &lt;eos&gt;")
    elif len(tokens) == T:
        notes.append(f"its {T} words fill every step: &lt;eos&gt; is cut")
    return f"<br><small>{'; '.join(notes)}</small>" if notes else ""


def _corpus_note(data, sentence):
    """Where the sentence is in the corpus, and its references."""
    try:
        refs = data.references(sentence)
        splits = data.splits_of(sentence)
    except (AttributeError, ValueError):
        return "not in the corpus"
    where = ", ".join(splits) if splits else "no split"
    shown = " | ".join(html.escape(r) for r in refs[:3])
    more = f" (+{len(refs) - 3} more)" if len(refs) > 3 else ""
    return f"in the corpus ({where}); reference: {shown}{more}"


def _translation_line(name, translation):
    text = html.escape(translation.text) or "(empty)"
    return f"<b>{html.escape(name)}</b>: {text}"


def translation_explorer(models, data, examples, max_len=None):
    """Translate English sentences and show where each model attends.

    A ``Tab`` with one page per example sentence, rendered when the
    explorer is made (their images are saved with the widget state, so
    the static website shows them and switches tabs without a kernel),
    and a last page, "your sentence", that translates whatever is typed
    (live in Jupyter) with the chosen model and head.  A multi-head
    model's example images show the mean of its heads and every head.

    Args:
        models: a dict of name -> trained ``Seq2Seq`` whose decoder has
            attention (e.g. additive and multi-head).
        data: the ``MTFraEng`` the models were trained on (its
            vocabularies; ``references`` and ``splits_of`` if present).
        examples: English sentences for the saved pages (at least one);
            the first also fills the live page.
        max_len: the most output steps; default ``data.num_steps``.

    Returns:
        An ``ipywidgets.Tab``.
    """
    models = _check_models(models)
    if isinstance(examples, str) or not all(
            isinstance(s, str) for s in examples):
        raise TypeError("examples must be a list of English sentences, "
                        f"e.g. ['go .'], got {examples!r}")
    if not examples or not all(s.strip() for s in examples):
        raise ValueError("examples must hold at least one sentence, and "
                         f"no empty one; got {examples!r}")
    check_int("max_len", max_len, none_ok=True)
    cache = {}  # (model name, sentence) -> Translation

    def result(name, sentence):
        if (name, sentence) not in cache:
            cache[name, sentence] = translate(models[name], data,
                                              [sentence], max_len)[0]
        return cache[name, sentence]

    pages = [_example_page(models, data, s, result) for s in examples]
    titles = [s if len(s) <= 24 else s[:23] + "…" for s in examples]
    return widgets.Tab(
        children=pages + [_live_page(models, data, examples[0], result)],
        titles=titles + ["✎ your sentence"])


def _example_page(models, data, sentence, result):
    """Every model's translation and attention for one sentence."""
    items = [widgets.HTML(f"<b>{html.escape(sentence)}</b>: "
                          + _corpus_note(data, sentence)
                          + _source_note(data, sentence))]
    for name in models:
        t = result(name, sentence)
        image = _translation_image()
        image.value = figure_to_png(translation_figure(t, "all", name))
        items += [widgets.HTML(_translation_line(name, t)), image]
    return widgets.VBox(items)


def _head_options(h):
    return [("mean", "mean")] + [(str(i + 1), i) for i in range(h)] \
        if h > 1 else [("mean", "mean")]


def _live_page(models, data, sentence, result):
    """Text box, model and head choices over a message and a heatmap."""
    text = widgets.Text(value=sentence, description="English",
                        placeholder="type a sentence, press Enter",
                        continuous_update=False, style=SLIDER_STYLE,
                        layout=_slider_layout())
    model = widgets.Dropdown(options=list(models), description="model",
                             style=SLIDER_STYLE, layout=_slider_layout())
    head = widgets.ToggleButtons(description="head", style={
        "description_width": "initial", "button_width": "auto"})
    message, image = widgets.HTML(), _translation_image()
    busy = []  # set while the head options change: draw once, not twice

    def set_heads():
        busy.append(True)
        try:
            h = _num_heads(models[model.value])
            head.options, head.disabled = _head_options(h), h == 1
            head.value = "mean"
        finally:
            busy.pop()

    def draw(change=None):
        if busy:
            return
        sentence = text.value.strip()
        if not sentence:
            message.value, image.value = TRANSLATION_HINT, b""
            image.layout.display = "none"
            return
        t = result(model.value, sentence)
        message.value = (_translation_line(model.value, t)
                         + _source_note(data, sentence))
        image.value = figure_to_png(translation_figure(t, head.value))
        image.layout.display = None

    def new_model(change):
        set_heads()
        draw()

    set_heads()
    text.observe(draw, names="value")
    model.observe(new_model, names="value")
    head.observe(draw, names="value")
    draw()
    controls = widgets.HBox([text, model],
                            layout=widgets.Layout(flex_flow="row wrap"))
    return widgets.VBox([widgets.HTML(TRANSLATION_HINT), controls, head,
                         message, image])
