"""Tests of d2lmini.widgets, without a kernel (tiny figures)."""

import ipywidgets as widgets
import matplotlib
import pytest
import torch

from d2lmini.attention import masked_softmax
from d2lmini.decoding import translate
from d2lmini.plot import figure_to_png, translation_figure
from d2lmini.widgets import (
    masked_softmax_explorer,
    masked_softmax_figure,
    sample_scores,
    scaling_explorer,
    translation_explorer,
)

matplotlib.use("Agg")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def controls(explorer):
    """The sliders of an explorer and its image, wherever they sit."""
    found, todo = [], [explorer]
    while todo:
        w = todo.pop(0)
        found.append(w)
        todo.extend(getattr(w, "children", ()))
    kinds = (widgets.IntSlider, widgets.FloatLogSlider,
             widgets.SelectionSlider)
    sliders = [w for w in found if isinstance(w, kinds)]
    images = [w for w in found if isinstance(w, widgets.Image)]
    assert len(images) == 1
    return sliders, images[0]


def test_masked_softmax_figure_draws_the_masked_weights():
    scores = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0]])
    fig = masked_softmax_figure(scores, valid_len=2, temperature=2.0)
    drawn = fig.axes[0].images[0].get_array()
    expected = masked_softmax(scores[None] / 2.0, torch.tensor([2]))[0]
    torch.testing.assert_close(torch.as_tensor(drawn, dtype=torch.float32),
                               expected)
    assert fig.axes[0].images[0].get_clim() == (0, 1)  # fixed scale
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["k0", "k1", "pad"]
    assert "valid length 2" in fig.axes[0].get_title()


def test_masked_softmax_explorer_redraws_when_a_slider_moves():
    explorer = masked_softmax_explorer(num_queries=2, num_keys=3, seed=1)
    assert isinstance(explorer, widgets.VBox)
    (length, temperature), image = controls(explorer)
    assert (length.value, length.min, length.max) == (1, 0, 3)
    assert temperature.value == 1.0
    first = bytes(image.value)
    assert first.startswith(PNG_MAGIC)
    length.value = 0
    assert bytes(image.value) != first
    changed = bytes(image.value)
    temperature.value = 5.0
    assert bytes(image.value) != changed


def test_masked_softmax_explorer_is_deterministic():
    a = masked_softmax_explorer(num_queries=2, num_keys=3, seed=4)
    b = masked_softmax_explorer(num_queries=2, num_keys=3, seed=4)
    assert bytes(controls(a)[1].value) == bytes(controls(b)[1].value)


def test_masked_softmax_explorer_takes_given_scores():
    explorer = masked_softmax_explorer(scores=[[0.0, 1.0]], valid_len=2,
                                       temperature=0.5)
    (length, temperature), _ = controls(explorer)
    assert (length.value, length.max, temperature.value) == (2, 2, 0.5)


@pytest.mark.parametrize("kwargs, words", [
    ({"scores": torch.zeros(2, 2, 2)}, "scores must be (L, S)"),
    ({"num_keys": 3, "valid_len": 4}, "between 0 and S = 3, got 4"),
    ({"valid_len": -1}, "got -1"),
    ({"temperature": 0.0}, "between 0.1 and 10"),
])
def test_masked_softmax_explorer_rejects_bad_arguments(kwargs, words):
    with pytest.raises(ValueError) as info:
        masked_softmax_explorer(**kwargs)
    assert words in str(info.value)


def test_sample_scores_shape_dtype_seed_and_variance():
    scores = sample_scores(64, num_queries=200, num_keys=8, seed=0)
    assert scores.shape == (200, 8) and scores.dtype == torch.float64
    assert torch.equal(scores, sample_scores(64, 200, 8, seed=0))
    assert not torch.equal(scores, sample_scores(64, 200, 8, seed=1))
    # The variance of a dot product of N(0, 1) vectors of size d is d.
    assert 0.85 * 64 < scores.var().item() < 1.15 * 64
    assert sample_scores(1, 200, 8).var().item() < 2


def test_scaling_explorer_redraws_and_caches():
    explorer = scaling_explorer(dims=(1, 16), d=16, num_queries=20,
                                num_keys=4)
    (slider,), image = controls(explorer)
    assert slider.options == (1, 16) and slider.value == 16
    at_16 = bytes(image.value)
    assert at_16.startswith(PNG_MAGIC)
    slider.value = 1
    assert bytes(image.value) != at_16
    slider.value = 16
    assert bytes(image.value) == at_16


def test_scaling_explorer_rejects_a_size_not_on_the_slider():
    with pytest.raises(ValueError, match="d = 3 is not one of"):
        scaling_explorer(dims=(1, 2, 4), d=3)


# The translation explorer, with tiny untrained models on a toy corpus
# (the ``toy`` fixture of conftest.py).

def find(widget, kind):
    """Every widget of a kind in the tree under ``widget``, in order."""
    found, todo = [], [widget]
    while todo:
        w = todo.pop(0)
        found += [w] if isinstance(w, kind) else []
        todo.extend(getattr(w, "children", ()))
    return found


def test_translation_explorer_pages_hold_every_model(toy):
    models, data = toy
    explorer = translation_explorer(models, data, ["go .", "i'm home ."],
                                    max_len=3)
    assert isinstance(explorer, widgets.Tab)
    assert explorer.titles == ("go .", "i'm home .", "✎ your sentence")
    assert explorer.selected_index == 0  # the website opens on an example
    first = explorer.children[0]
    images = find(first, widgets.Image)
    assert len(images) == 2  # one per model
    assert all(bytes(i.value).startswith(PNG_MAGIC) for i in images)
    text = " ".join(h.value for h in find(first, widgets.HTML))
    for name, model in models.items():
        t = translate(model, data, ["go ."], 3)[0]
        assert f"<b>{name}</b>: {t.text}" in text.replace("&lt;", "<")\
            .replace("&gt;", ">").replace("&#x27;", "'")
    assert "in the corpus (train); reference: va !" in text


def test_translation_explorer_live_page_redraws(toy):
    models, data = toy
    explorer = translation_explorer(models, data, ["go ."], max_len=3)
    live = explorer.children[-1]
    (text,) = find(live, widgets.Text)
    (model,) = find(live, widgets.Dropdown)
    (head,) = find(live, widgets.ToggleButtons)
    (image,) = find(live, widgets.Image)
    assert (text.value, model.value) == ("go .", "additive")
    assert head.disabled and head.options == (("mean", "mean"),)
    before = bytes(image.value)
    model.value = "2-head"
    assert not head.disabled
    assert head.options == (("mean", "mean"), ("1", 0), ("2", 1))
    assert head.value == "mean" and bytes(image.value) != before
    mean = bytes(image.value)
    head.value = 1
    assert bytes(image.value) != mean
    text.value = "he's calm ."
    t = translate(models["2-head"], data, ["he's calm ."], 3)[0]
    assert bytes(image.value) == figure_to_png(translation_figure(t, 1))
    model.value = "additive"
    assert head.disabled and head.value == "mean"


def test_translation_explorer_explains_empty_unknown_and_long_input(toy):
    models, data = toy
    explorer = translation_explorer(models, data, ["go ."], max_len=3)
    live = explorer.children[-1]
    (text,) = find(live, widgets.Text)
    (image,) = find(live, widgets.Image)
    message = find(live, widgets.HTML)[-1]
    text.value = "   "
    assert "Type an English sentence" in message.value
    assert image.value == b"" and image.layout.display == "none"
    text.value = "i lost zorg ."
    assert "read as &lt;unk&gt;: <i>zorg</i>" in message.value
    assert bytes(image.value).startswith(PNG_MAGIC)
    assert image.layout.display is None
    # num_steps is 6: the model reads 6 steps, <eos> included
    text.value = "go go go go go go go ."
    assert "only the first 6 of 8 words are read, without &lt;eos&gt;" \
        in message.value
    assert "<eos>" not in [t for t, _, _ in data.describe(text.value)]
    text.value = "go go go go go ."
    assert "its 6 words fill every step: &lt;eos&gt; is cut" \
        in message.value
    text.value = "go go go go ."
    assert "words" not in message.value


@pytest.mark.parametrize("args, error, words", [
    (({}, ["go ."]), TypeError, "non-empty dict"),
    (({"m": torch.nn.Linear(1, 1)}, ["go ."]), TypeError, "no attention"),
    ((None, "go ."), TypeError, "list of English sentences"),
    ((None, ["go .", 3]), TypeError, "list of English sentences"),
    ((None, []), ValueError, "at least one sentence"),
    ((None, ["go .", " "]), ValueError, "no empty one"),
])
def test_translation_explorer_rejects_bad_arguments(toy, args, error,
                                                    words):
    models, data = toy
    chosen, examples = args
    with pytest.raises(error, match=words):
        translation_explorer(models if chosen is None else chosen, data,
                             examples)


def test_translation_explorer_rejects_a_bad_max_len(toy):
    models, data = toy
    with pytest.raises(ValueError, match="max_len must be an int >= 1"):
        translation_explorer(models, data, ["go ."], max_len=0)
