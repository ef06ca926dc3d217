"""Tests of d2lmini.widgets' translation explorer, without a kernel."""

import ipywidgets as widgets
import matplotlib
import pytest
import torch

from d2lmini.decoding import translate
from d2lmini.plot import figure_to_png, translation_figure
from d2lmini.widgets import translation_explorer

matplotlib.use("Agg")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
    ((None, ["go .", " "]), ValueError, "none without tokens"),
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


def test_translation_explorer_draws_a_transformer_per_head(toy):
    from d2lmini.seq2seq import Seq2Seq
    from d2lmini.transformer import TransformerDecoder, TransformerEncoder
    _, data = toy
    torch.manual_seed(0)
    model = Seq2Seq(TransformerEncoder(len(data.src_vocab), 8, 16, 2, 1),
                    TransformerDecoder(len(data.tgt_vocab), 8, 16, 2, 1),
                    data.tgt_vocab.pad)
    explorer = translation_explorer({"Transformer": model}, data, ["go ."],
                                    max_len=3)
    (head,) = find(explorer.children[-1], widgets.ToggleButtons)
    assert not head.disabled
    assert [v for _, v in head.options] == ["mean", 0, 1]
    with pytest.raises(TypeError, match="no attention to the source"):
        translation_explorer({"none": torch.nn.Linear(2, 2)}, data, ["go ."])
