"""Tests of d2lmini.live: the explorers' data, the model export, and
live.js's model run in Node against d2lmini's own translations.

The browser checks of the same explorers on the built website are in
tests/test_site_live.py.
"""

import base64
import json
import re
import shutil
import subprocess

import ipywidgets as widgets
import numpy as np
import pytest
import torch

from d2lmini import seq2seq
from d2lmini.attention import MultiHeadAttention
from d2lmini.attention_decoder import Seq2SeqAttentionDecoder
from d2lmini.cache import Run, fingerprint
from d2lmini.decoding import translate
from d2lmini.experiment import CHAPTER_RECIPE
from d2lmini.live import (
    LIVE_JS,
    LiveHTML,
    export_model,
    kernel_regression_explorer,
    masked_softmax_explorer,
    payloads,
    sample_scores,
    scaling_explorer,
    translator,
    with_site_view,
)
from d2lmini.utils import set_seed


def payload(live):
    """The JSON data an explorer's HTML carries."""
    assert isinstance(live, LiveHTML)
    found = payloads(live._repr_html_(), live.kind)
    assert len(found) == 1
    return found[0]


def test_masked_softmax_explorer_carries_its_seeded_scores():
    live = masked_softmax_explorer(valid_len=4, temperature=1.0, seed=3)
    data = payload(live)
    gen = torch.Generator().manual_seed(3)
    expected = 2 * torch.randn(3, 8, generator=gen)
    assert torch.equal(torch.tensor(data["scores"]), expected)
    assert data["valid_len"] == 4 and data["temperature"] == 1.0
    html = live._repr_html_()
    assert 'data-d2l-live="masked-softmax"' in html
    assert LIVE_JS.read_text() in html  # the page needs nothing else
    # The same arguments make the same output (stable notebooks).
    assert masked_softmax_explorer(valid_len=4, seed=3)._repr_html_() == html


@pytest.mark.parametrize("kwargs, words", [
    ({"scores": torch.zeros(2, 3, 4)}, "must be (L, S)"),
    ({"scores": torch.zeros(2, 0)}, "must be (L, S)"),
    ({"scores": torch.tensor([[0.0, float("inf")]])}, "finite"),
    ({"valid_len": 9}, "between 0 and S = 8"),
    ({"valid_len": -1}, "between 0 and S = 8"),
    ({"valid_len": 2.5}, "an int"),
    ({"temperature": 0.01}, "between 0.1 and 10"),
])
def test_masked_softmax_explorer_rejects_bad_arguments(kwargs, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        masked_softmax_explorer(**kwargs)


def test_sample_scores_shape_dtype_seed_and_variance():
    a = sample_scores(64, num_queries=2000, num_keys=16, seed=1)
    assert a.shape == (2000, 16) and a.dtype == torch.float64
    assert torch.equal(a, sample_scores(64, 2000, 16, seed=1))
    assert not torch.equal(a, sample_scores(64, 2000, 16, seed=2))
    assert 0.9 * 64 < a.var() < 1.1 * 64


def test_scaling_explorer_carries_float32_scores_for_every_size():
    live = scaling_explorer(dims=(1, 4, 16), d=4, num_queries=8,
                            num_keys=5)
    data = payload(live)
    assert data["dims"] == [1, 4, 16] and data["d"] == 4
    for d in (1, 4, 16):
        raw = base64.b64decode(data["scores"][str(d)])
        got = np.frombuffer(raw, dtype="<f4").reshape(8, 5)
        want = sample_scores(d, 8, 5).numpy().astype(np.float32)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kwargs, words", [
    ({"d": 3}, "not one of the slider's sizes"),
    ({"dims": (), "d": 1}, "positive sizes"),
    ({"dims": (0, 1), "d": 1}, "positive sizes"),
])
def test_scaling_explorer_rejects_bad_arguments(kwargs, words):
    with pytest.raises(ValueError, match=words):
        scaling_explorer(**kwargs)


# ---- the translator ------------------------------------------------------

def tiny_run(toy, attention, num_layers=1):
    """A Run of a tiny untrained model on the toy corpus."""
    _, data = toy
    set_seed(0)
    encoder = seq2seq.Seq2SeqEncoder(len(data.src_vocab), 4, 8, num_layers)
    decoder = Seq2SeqAttentionDecoder(len(data.tgt_vocab), 4, 8, num_layers,
                                      attention=attention)
    model = seq2seq.Seq2Seq(encoder, decoder, data.tgt_vocab.pad).eval()
    return Run(model, data, None, False)


def test_export_model_writes_every_tensor_and_the_vocabularies(
        toy, tmp_path):
    run = tiny_run(toy, None)
    recipe = CHAPTER_RECIPE
    folder = export_model(recipe, run, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    weights = np.fromfile(folder / "weights.bin", dtype="<f4")
    assert manifest["checkpoint"] == folder.name == \
        f"seq2seq-additive-{recipe.key()}"
    assert manifest["fingerprint"] == fingerprint(recipe, run.data)
    assert manifest["weights_bytes"] == weights.nbytes
    state = run.model.state_dict()
    assert set(manifest["tensors"]) == set(state)
    for name, value in state.items():
        spec = manifest["tensors"][name]
        got = weights[spec["offset"]:spec["offset"] + value.numel()]
        np.testing.assert_array_equal(got.reshape(spec["shape"]),
                                      value.numpy())
    assert manifest["src_vocab"] == run.data.src_vocab.idx_to_token
    assert manifest["tgt_special"]["eos"] == run.data.tgt_vocab.eos
    assert manifest["num_steps"] == run.data.num_steps


def test_export_model_refuses_a_decoder_without_attention(toy, tmp_path):
    run = tiny_run(toy, None)
    with pytest.raises(ValueError, match="only attention decoders"):
        export_model(CHAPTER_RECIPE.replace(attention="none"), run, tmp_path)


def test_translator_names_its_checkpoint_and_fingerprint(toy):
    run = tiny_run(toy, MultiHeadAttention(8, 2))
    recipe = CHAPTER_RECIPE.replace(attention="multihead", num_heads=2)
    data = payload(translator(recipe, run, "go .", ["go .", "hi ."]))
    assert data["checkpoint"] == f"seq2seq-multihead-{recipe.key()}"
    assert data["fingerprint"] == fingerprint(recipe, run.data)
    assert data["num_heads"] == 2 and data["examples"] == ["go .", "hi ."]
    assert data["recipe"]["num_heads"] == 2


def test_translator_rejects_bad_arguments(toy):
    run = tiny_run(toy, None)
    with pytest.raises(ValueError, match="English sentence"):
        translator(CHAPTER_RECIPE, run, "   ")
    with pytest.raises(TypeError, match="list of sentences"):
        translator(CHAPTER_RECIPE, run, "go .", "go .")
    plain = Run(seq2seq.Seq2Seq(
        run.model.encoder, seq2seq.Seq2SeqDecoder(5, 4, 8, 1), 0), run.data,
        None, False)
    with pytest.raises(TypeError, match="no attention decoder"):
        translator(CHAPTER_RECIPE, plain, "go .")


def test_with_site_view_gives_jupyter_the_widget_and_the_page_html():
    live = masked_softmax_explorer()
    bundle = with_site_view(widgets.IntSlider(), live)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"] == live.html


NODE_CHECK = r"""
const fs = require("fs");
const live = require(process.argv[2]);
const job = JSON.parse(fs.readFileSync(0, "utf8"));
const manifest = JSON.parse(fs.readFileSync(job.folder + "/manifest.json"));
const buf = fs.readFileSync(job.folder + "/weights.bin");
const model = live.makeModel(manifest, buf.buffer.slice(
  buf.byteOffset, buf.byteOffset + buf.length));
const out = job.sentences.map((s) => live.translate(model, s));
console.log(JSON.stringify(out));
"""

SENTENCES = ["go .", "i'm home .", "Hi!", "zorglub frobs .", "?!",
             "I lost .\u202fHe won", "go go go go go go go go ."]


@pytest.mark.parametrize("attention, num_layers", [
    ("additive", 1), ("additive", 2), ("multihead", 1), ("multihead", 2)])
def test_live_js_translates_like_d2lmini(toy, tmp_path, attention,
                                         num_layers):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (`make vendor` installs npm and "
                    "node)")
    att = None if attention == "additive" else MultiHeadAttention(8, 2)
    run = tiny_run(toy, att, num_layers)
    recipe = CHAPTER_RECIPE.replace(attention=attention, num_heads=2,
                                    num_layers=num_layers)
    folder = export_model(recipe, run, tmp_path)
    script = tmp_path / "check.js"
    script.write_text(NODE_CHECK)
    job = json.dumps({"folder": str(folder), "sentences": SENTENCES})
    done = subprocess.run([node, str(script), str(LIVE_JS)], input=job,
                          capture_output=True, text=True, check=True)
    got = json.loads(done.stdout)
    for sentence, ours, theirs in zip(
            SENTENCES, translate(run.model, run.data, SENTENCES), got):
        assert theirs["srcTokens"] == ours.src_tokens, sentence
        assert theirs["outTokens"] == ours.out_tokens, sentence
        weights = ours.attention if ours.attention.dim() == 3 \
            else ours.attention[None]
        np.testing.assert_allclose(np.array(theirs["attention"]),
                                   weights.numpy(), atol=1e-5)


def test_kernel_regression_explorer_carries_its_data():
    x = torch.linspace(0, 5, 7)
    live = kernel_regression_explorer(x, x ** 2, x, x ** 2, width=0.5,
                                      kernel="boxcar", query=2)
    data = payload(live)
    assert data["x_train"] == pytest.approx(x.tolist())
    assert data["kernel"] == "boxcar" and data["query"] == 2
    assert data["kernels"] == ["gaussian", "boxcar", "constant",
                               "epanechnikov"]


@pytest.mark.parametrize("kwargs, words", [
    ({"y_train": torch.zeros(3)}, "equally long"),
    ({"kernel": "cosine"}, "kernel must be one of"),
    ({"width": 5.0}, "between 0.03 and 3"),
    ({"query": 7}, "an index in"),
])
def test_kernel_regression_explorer_rejects_bad_arguments(kwargs, words):
    x = torch.linspace(0, 5, 7)
    args = {"x_train": x, "y_train": x, "x_query": x, "f_query": x,
            **kwargs}
    with pytest.raises(ValueError, match=words):
        kernel_regression_explorer(args.pop("x_train"), args.pop("y_train"),
                                   args.pop("x_query"), args.pop("f_query"),
                                   **args)
