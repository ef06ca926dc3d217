"""The translation explorer for Jupyter (ipywidgets, live with a kernel).

``translation_explorer`` is a ``Tab``: one pre-rendered page per example
sentence and a live page with a text box, a model and a head choice, all
computed by the kernel.  The website has no kernel: there the notebooks
show ``d2lmini.live.translator`` instead, which runs the same weights in
the page (``d2lmini.live.with_site_view`` joins the two in one output).
The other explorers live in ``d2lmini.live``: they compute in the page,
in Jupyter and on the website alike.

Shape legend: T output steps, S source positions, h heads.
"""

import html

import ipywidgets as widgets

from d2lmini.decoding import attention_heads, translate
from d2lmini.plot import figure_to_png, translation_figure
from d2lmini.utils import check_int

__all__ = ["translation_explorer"]

SLIDER_STYLE = {"description_width": "initial"}


def _slider_layout():
    """A slider as wide as the page allows, at most 360 pixels."""
    return widgets.Layout(width="min(100%, 360px)")


# The translation explorer: output steps are the rows of a map (T),
# source positions its columns (S).

TRANSLATION_HINT = ("Type an English sentence and press Enter (the "
                    "kernel translates it).")


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
        if attention_heads(model) is None:
            raise TypeError(f"models[{name!r}] has no attention to the "
                            "source (an RNN decoder with attention, or a "
                            "Transformer): the explorer draws attention "
                            "weights")
    return dict(models)


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
            vocabularies and ``tokens``, which says whether a sentence
            has anything to translate; ``references`` and ``splits_of``
            if present).
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
    if not examples or not all(data.tokens(s) for s in examples):
        raise ValueError("examples must hold at least one sentence, and "
                         "none without tokens (translate refuses those); "
                         f"got {examples!r}")
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
            h = attention_heads(models[model.value])
            head.options, head.disabled = _head_options(h), h == 1
            head.value = "mean"
        finally:
            busy.pop()

    def draw(change=None):
        if busy:
            return
        sentence = text.value.strip()
        if not data.tokens(sentence):  # nothing to translate (yet)
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
