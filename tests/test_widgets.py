"""Tests of d2lmini.widgets, without a kernel (tiny figures)."""

import ipywidgets as widgets
import matplotlib
import pytest
import torch

from d2lmini import seq2seq
from d2lmini.attention import MultiHeadAttention, masked_softmax, set_seed
from d2lmini.data import MTFraEng
from d2lmini.plot import figure_to_png
from d2lmini.widgets import (
    masked_softmax_explorer,
    masked_softmax_figure,
    sample_scores,
    scaling_explorer,
    translation_explorer,
    translation_figure,
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


# The translation explorer, with tiny untrained models on a toy corpus.

PAIRS = [("go .", "va !"), ("i lost .", "j'ai perdu ."),
         ("he's calm .", "il est calme ."),
         ("i'm home .", "je suis chez moi .")]


@pytest.fixture(scope="module")
def toy():
    """A toy corpus and two tiny untrained models (additive, 2 heads)."""
    data = MTFraEng(2, num_steps=6, num_train=8, num_val=0,
                    pairs=PAIRS * 2, min_freq=1)

    def model(attention):
        set_seed(0)
        encoder = seq2seq.Seq2SeqEncoder(len(data.src_vocab), 4, 8, 1)
        decoder = seq2seq.Seq2SeqAttentionDecoder(
            len(data.tgt_vocab), 4, 8, 1, attention=attention)
        return seq2seq.Seq2Seq(encoder, decoder, data.tgt_vocab.pad)

    models = {"additive": model(None),
              "2-head": model(MultiHeadAttention(8, 2))}
    return models, data


def find(widget, kind):
    """Every widget of a kind in the tree under ``widget``, in order."""
    found, todo = [], [widget]
    while todo:
        w = todo.pop(0)
        found += [w] if isinstance(w, kind) else []
        todo.extend(getattr(w, "children", ()))
    return found


def drawn(fig):
    """The arrays of the visible heatmaps of a figure, in order."""
    return [torch.as_tensor(ax.images[0].get_array(), dtype=torch.float32)
            for ax in fig.axes if ax.images and ax.get_visible()]


def test_translation_figure_draws_heads_mean_and_grid(toy):
    models, data = toy
    t = seq2seq.translate(models["2-head"], data, ["i lost ."], 3)[0]
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
    t = seq2seq.Translation(["a", "<eos>"], ["b"], ["b", "<eos>"],
                            torch.softmax(torch.randn(8, 2, 2), -1))
    fig = translation_figure(t, head="all")
    assert len(drawn(fig)) == 9 and len(fig.axes) == 10  # + colorbar
    assert fig.axes[8].get_title() == "head 8"
    # "<eos>" is long: upright labels under every panel of the bottom row
    for ax in fig.axes[6:9]:
        assert {t.get_rotation() for t in ax.get_xticklabels()} == {90}


def test_translation_figure_single_map_and_bad_heads(toy):
    models, data = toy
    t = seq2seq.translate(models["additive"], data, ["go ."], 2)[0]
    (only,) = drawn(translation_figure(t, head="all"))
    torch.testing.assert_close(only, t.attention)
    for head in (1, -1, "first", True):
        with pytest.raises(ValueError, match="head must be"):
            translation_figure(t, head=head)
    t.attention = None
    with pytest.raises(ValueError, match="no attention weights"):
        translation_figure(t)


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
        t = seq2seq.translate(model, data, ["go ."], 3)[0]
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
    t = seq2seq.translate(models["2-head"], data, ["he's calm ."], 3)[0]
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
    text.value = "go go go go go go go ."
    assert "only the first 5 of 8 words are read" in message.value


@pytest.mark.parametrize("args, error, words", [
    (({}, ["go ."]), TypeError, "non-empty dict"),
    (({"m": torch.nn.Linear(1, 1)}, ["go ."]), TypeError, "no attention"),
    ((None, "go ."), TypeError, "non-empty list"),
    ((None, []), TypeError, "non-empty list"),
    ((None, ["go .", " "]), TypeError, "non-empty English"),
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
