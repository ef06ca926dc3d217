"""Tests of d2lmini.live: the explorers' data, the model export, and
the page's script (``live_js()``, from d2lmini/js/) run in Node: its
model against d2lmini's own translations.

The browser checks of the same explorers on the built website are in
tests/test_site_live.py.
"""

import base64
import contextlib
import copy
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import pytest
import torch

from d2lmini import corpus, seq2seq
from d2lmini.attention_decoder import Seq2SeqAttentionDecoder
from d2lmini.cache import Run, fingerprint
from d2lmini.data import MTFraEng
from d2lmini.decoding import translate
from d2lmini.experiment import CHAPTER_RECIPE, build_model, evaluate
from d2lmini.live import (
    JS_DIR,
    JS_PARTS,
    LM_PARTS,
    MODEL_FIELDS,
    NOTEBOOK_FIELDS,
    VISION_PARTS,
    LiveHTML,
    export_model,
    kernel_regression_explorer,
    live_js,
    lm_js,
    masked_softmax_explorer,
    model_sha256,
    notebook_record,
    payloads,
    positional_encoding_explorer,
    sample_scores,
    scaling_explorer,
    translator,
    vision_js,
    weights_bytes,
    with_site_view,
)
from d2lmini.multihead import MultiHeadAttention
from d2lmini.trainer import Trainer
from d2lmini.transformer import PositionalEncoding
from d2lmini.utils import set_seed

ROOT = Path(__file__).resolve().parent.parent
# conftest.py's toy pairs, and one English source held out as the test
# split (export_model scores the weights it writes on it).
TOY_PAIRS = [("go .", "va !"), ("i lost .", "j'ai perdu ."),
             ("he's calm .", "il est calme ."),
             ("i'm home .", "je suis chez moi .")] * 2
HELD_OUT = ("i'm calm .", "je suis calme .")


@pytest.fixture(scope="module")
def toy():
    """conftest.py's toy corpus (the same train split and vocabularies),
    with ``HELD_OUT`` as its test split; no models."""
    data = MTFraEng(2, num_steps=6, num_train=8, num_val=0, num_test=1,
                    pairs=TOY_PAIRS + [HELD_OUT], min_freq=1)
    assert data.test_pairs == [HELD_OUT], data.test_pairs
    return {}, data


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
    assert live_js() in html  # the page needs nothing else
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
    """A Run of a tiny model on the toy corpus: a GRU encoder-decoder
    with ``attention`` (a module; None is additive), untrained, or a
    Transformer: ``"transformer"`` (untrained) or ``"trained
    transformer"``."""
    _, data = toy
    set_seed(0)
    if attention == "transformer":
        model = build_model(tiny_transformer(num_layers), data).eval()
        return Run(model, data, None, False)
    if attention == "trained transformer":
        # Untrained, it says one token again and again; trained on the
        # toy pairs (a second or so), it translates them and stops.
        # Fresh data: training draws from the data's generator.
        data = MTFraEng(2, num_steps=6, num_train=8, num_val=0,
                        num_test=1, pairs=data.train_pairs + [HELD_OUT],
                        min_freq=1)
        model = build_model(tiny_transformer(num_layers), data)
        Trainer(max_epochs=100, max_steps=200, progress=False,
                seed=0).fit(model, data)
        return Run(model.eval(), data, None, True)
    encoder = seq2seq.Seq2SeqEncoder(len(data.src_vocab), 4, 8, num_layers)
    decoder = Seq2SeqAttentionDecoder(len(data.tgt_vocab), 4, 8, num_layers,
                                      attention=attention)
    model = seq2seq.Seq2Seq(encoder, decoder, data.tgt_vocab.pad).eval()
    return Run(model, data, None, False)


def tiny_transformer(num_layers=1):
    """The recipe of a tiny Transformer: D = 8, 2 heads, FFN of 16."""
    return CHAPTER_RECIPE.replace(
        attention="transformer", embed_size=8, num_hiddens=8, num_heads=2,
        ffn_num_hiddens=16, num_layers=num_layers, lr=0.01)


def plain_run(toy):
    """A Run of a tiny GRU encoder-decoder without attention."""
    _, data = toy
    set_seed(0)
    model = seq2seq.Seq2Seq(
        seq2seq.Seq2SeqEncoder(len(data.src_vocab), 4, 8, 1),
        seq2seq.Seq2SeqDecoder(len(data.tgt_vocab), 4, 8, 1),
        data.tgt_vocab.pad).eval()
    return Run(model, data, None, False)


def test_export_model_writes_every_tensor_and_the_vocabularies(
        toy, tmp_path):
    run = tiny_run(toy, None)
    recipe = CHAPTER_RECIPE
    folder = export_model(recipe, run, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    weights = np.fromfile(folder / manifest["weights"], dtype="<f4")
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
    none = CHAPTER_RECIPE.replace(attention="none")
    for make in (export_model, translator):
        args = (tmp_path,) if make is export_model else ("go .",)
        with pytest.raises(ValueError, match=re.escape(
                "only attention decoders run in the page (it draws their "
                "attention weights), not attention='none': use one of")):
            make(none, plain_run(toy), *args)
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_export_model_refuses_a_model_its_recipe_does_not_describe(
        toy, tmp_path):
    run = tiny_run(toy, None)  # a GRU with additive attention
    with pytest.raises(ValueError, match="the recipe says attention="
                       "'transformer' but the run's model has 'additive'"):
        export_model(tiny_transformer(), run, tmp_path)
    with pytest.raises(ValueError, match="has 'transformer' attention"):
        translator(CHAPTER_RECIPE, tiny_run(toy, "transformer"), "go .")


def test_export_model_describes_a_transformer(toy, tmp_path):
    run = tiny_run(toy, "transformer", num_layers=2)
    recipe = tiny_transformer(2)
    manifest = json.loads(
        (export_model(recipe, run, tmp_path) / "manifest.json").read_text())
    assert manifest["checkpoint"] == f"seq2seq-transformer-{recipe.key()}"
    assert {k: manifest[k] for k in (
        "format", "attention", "num_heads", "num_layers", "num_hiddens",
        "embed_size", "ffn_num_hiddens", "qk_norm")} == {
        "format": 4, "attention": "transformer", "num_heads": 2,
        "qk_norm": False,
        "num_layers": 2, "num_hiddens": 8, "embed_size": 8,
        "ffn_num_hiddens": 16}
    assert set(manifest["tensors"]) == set(run.model.state_dict())
    assert manifest["tensors"]["decoder.blks.1.ffn.dense1.weight"][
        "shape"] == [16, 8]
    data = payload(translator(recipe, run, "go ."))
    assert data["num_heads"] == 2
    assert data["checkpoint"] == manifest["checkpoint"]


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
    with pytest.raises(TypeError, match="no attention decoder"):
        translator(CHAPTER_RECIPE, plain_run(toy), "go .")


# ---- which weights the page runs -----------------------------------------

def sha256(data):
    return hashlib.sha256(data).hexdigest()


def test_translator_payload_names_the_weights_and_bleu_it_evaluated(toy):
    run = tiny_run(toy, None)
    result = evaluate(run.model, run.data)
    data = payload(translator(CHAPTER_RECIPE, run, "go .", result=result))
    # The bytes the page loads: one float32 after another, by state dict.
    raw = weights_bytes(run.model)
    assert len(raw) == 4 * sum(v.numel()
                               for v in run.model.state_dict().values())
    assert data["weights_sha256"] == sha256(raw)
    assert (data["bleu"], data["bleu_split"]) == (result.bleu, "test")
    assert data["bleu_signature"] == result.signature.split(";")[0]
    assert data["bleu_signature"].startswith("BLEU nrefs:")
    assert "chrF" not in data["bleu_signature"]
    # Without result (an older notebook): the weights, no BLEU.
    older = payload(translator(CHAPTER_RECIPE, run, "go ."))
    assert older["weights_sha256"] == data["weights_sha256"]
    assert not {"bleu", "bleu_split", "bleu_signature"} & set(older)
    assert notebook_record(older) == {
        "weights_sha256": data["weights_sha256"],
        "model_sha256": data["model_sha256"], "bleu": None,
        "bleu_split": None, "bleu_signature": None}
    with pytest.raises(ValueError, match="EvalResult of the test split.*"
                       "got split 'train'"):
        translator(CHAPTER_RECIPE, run, "go .",
                   result=evaluate(run.model, run.data, "train"))


def perturbed(run, scale=0.5, seed=1):
    """The run with other weights of the same architecture: what another
    machine's training of the same recipe gives (here: seeded noise)."""
    model = copy.deepcopy(run.model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))
    return run._replace(model=model.eval())


def test_export_model_records_its_bleu_and_the_notebook_weights(
        toy, tmp_path):
    run = tiny_run(toy, "trained transformer")
    recipe = tiny_transformer()
    result = evaluate(run.model, run.data)
    assert result.bleu > 0, result.details  # a score worth comparing
    spec = payload(translator(recipe, run, "go .", result=result))
    folder = export_model(recipe, run, tmp_path, evaluated=spec)
    manifest = json.loads((folder / "manifest.json").read_text())
    raw = (folder / manifest["weights"]).read_bytes()
    assert raw == weights_bytes(run.model)
    assert manifest["weights_sha256"] == sha256(raw) == \
        spec["weights_sha256"]
    # Measured at export, on the same test sentences, same signature.
    assert manifest["bleu"] == pytest.approx(result.bleu, abs=1e-9)
    assert manifest["bleu_split"] == "test"
    assert manifest["bleu_signature"] == spec["bleu_signature"]
    assert manifest["notebook"] == {k: spec[k] for k in NOTEBOOK_FIELDS}
    assert manifest["notebook"]["bleu"] == result.bleu

    # The same checkpoint with other weights (another machine's build):
    # the manifest says so, with those weights' own BLEU.
    other = perturbed(run)
    theirs = evaluate(other.model, other.data)
    manifest = json.loads((export_model(recipe, other, tmp_path,
                                        evaluated=spec) / "manifest.json")
                          .read_text())
    assert manifest["weights_sha256"] == sha256(weights_bytes(other.model))
    assert manifest["weights_sha256"] != spec["weights_sha256"]
    assert manifest["bleu"] == pytest.approx(theirs.bleu, abs=1e-9)
    assert manifest["bleu"] != result.bleu
    assert manifest["notebook"]["weights_sha256"] == spec["weights_sha256"]
    assert manifest["notebook"]["bleu"] == result.bleu


def test_export_model_without_a_notebook_or_a_test_split(toy, tmp_path):
    run = tiny_run(toy, None)
    manifest = json.loads((export_model(CHAPTER_RECIPE, run, tmp_path) /
                           "manifest.json").read_text())
    assert manifest["notebook"] is None
    assert manifest["bleu"] == evaluate(run.model, run.data).bleu
    no_test = MTFraEng(2, num_steps=6, num_train=8, num_val=0,
                       pairs=TOY_PAIRS, min_freq=1)
    with pytest.raises(ValueError, match="needs a test split"):
        export_model(CHAPTER_RECIPE, run._replace(data=no_test),
                     tmp_path / "none")
    assert not (tmp_path / "none").exists()  # nothing half-written


def load_script(name):
    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_export_models_keeps_only_an_up_to_date_export(
        toy, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # it adds scripts/
    script = load_script("export_models")
    run = tiny_run(toy, "trained transformer")
    recipe = tiny_transformer()
    result = evaluate(run.model, run.data)
    spec = payload(translator(recipe, run, "go .", result=result))
    loads = []
    monkeypatch.setattr(
        "d2lmini.cache.train_or_load",
        lambda r, progress, snapshots: loads.append(r) or run)
    line = script.export(spec, tmp_path)
    assert f"held-out BLEU {result.bleu:.1f}: the weights the notebook " \
        "evaluated" in line
    assert loads == [recipe]
    assert script.export(spec, tmp_path).endswith(
        f"up to date (held-out BLEU {result.bleu:.1f}: the weights the "
        "notebook evaluated)")
    assert len(loads) == 1  # neither loaded nor scored again
    # The notebook ran again elsewhere: other weights, another BLEU.
    elsewhere = {**spec, "weights_sha256": "0" * 64, "bleu": 12.34}
    line = script.export(elsewhere, tmp_path)
    assert len(loads) == 2
    assert f"held-out BLEU {result.bleu:.1f}: other weights than the " \
        "notebook's, which scored 12.3 (the page says so)" in line
    path = tmp_path / spec["checkpoint"] / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["notebook"] == notebook_record(elsewhere)
    # An export by an older d2lmini (no BLEU) is made again.
    path.write_text(json.dumps({**manifest, "format": 1}))
    assert "up to date" not in script.export(elsewhere, tmp_path)
    assert len(loads) == 3
    # Damaged weights of the right size are exported again (issue 27,
    # point 15), not kept as "up to date".
    folder = tmp_path / spec["checkpoint"]
    manifest = json.loads(path.read_text())
    weights = folder / manifest["weights"]
    damaged = bytearray(weights.read_bytes())
    damaged[0] ^= 1
    weights.write_bytes(bytes(damaged))
    assert "up to date" not in script.export(elsewhere, tmp_path)
    assert len(loads) == 4
    assert script.export(elsewhere, tmp_path).endswith(
        "(the page says so))")  # whole again: up to date
    # An older notebook's output, without weights or BLEU.
    older = {k: v for k, v in spec.items() if k not in NOTEBOOK_FIELDS}
    assert "the notebook's output does not name its weights" in \
        script.export(older, tmp_path)


def test_with_site_view_gives_jupyter_the_widget_and_the_page_html():
    live = masked_softmax_explorer()
    bundle = with_site_view(widgets.IntSlider(), live)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"] == live.html


# A Node script's first lines: the page's script, the job on stdin and
# the model of the exported folder job.folder.
NODE_MODEL = r"""
const fs = require("fs");
const live = require(process.argv[2]);
const job = JSON.parse(fs.readFileSync(0, "utf8"));
const manifest = JSON.parse(fs.readFileSync(job.folder + "/manifest.json"));
const buf = fs.readFileSync(job.folder + "/" + manifest.weights);
const model = live.makeModel(manifest, buf.buffer.slice(
  buf.byteOffset, buf.byteOffset + buf.length));
"""

NODE_CHECK = NODE_MODEL + r"""
const out = job.sentences.map((s) => live.translate(model, s));
console.log(JSON.stringify(out));
"""

SENTENCES = ["go .", "i'm home .", "Hi!", "zorglub frobs .", "?!",
             "I lost .\u202fHe won", "go go go go go go go go ."]


def run_node(tmp_path, script, job):
    """Run a Node script with the path of the page's script (``live_js()``
    in a file) as its argument and ``job`` (JSON) on its stdin; return
    what it printed, parsed as JSON."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (`make vendor` installs npm and "
                    "node)")
    path, live = tmp_path / "check.js", tmp_path / "live.js"
    path.write_text(script)
    # The page's script, then the vision part (which registers itself:
    # require() still gives d2lLive, globalThis.d2lVision the other).
    live.write_text(live_js() + "\n" + vision_js(), encoding="utf-8")
    done = subprocess.run([node, str(path), str(live)],
                          input=json.dumps(job), capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


NODE_WEIGHTS = r"""
const fs = require("fs");
const live = require(process.argv[2]);
const cases = JSON.parse(fs.readFileSync(0, "utf8"));
console.log(JSON.stringify(cases.map(([data, manifest]) =>
  live.weightsStatement(data, manifest))));
"""

SAME = ("These are the weights the section evaluated (held-out BLEU "
        "{}).")
OTHER = ("This site was built on a machine that trained its own weights "
         "from the same code and seed (float rounding differs from one "
         "machine to another): ")


def test_live_js_says_which_weights_it_runs(tmp_path):
    sig = "BLEU nrefs:var|case:mixed|eff:no|tok:none|smooth:exp"
    fp = {"recipe": "r", "code": "c", "torch": "t", "data": "d"}
    mine = {"weights_sha256": "bb", "bleu": 26.27, "bleu_split": "test",
            "bleu_signature": sig, "fingerprint": fp, "num_steps": 9}
    theirs = {**mine, "weights_sha256": "aa", "bleu": 27.51}
    notebook = {"weights_sha256": "aa", "model_sha256": model_sha256(theirs),
                "bleu": 27.51, "bleu_split": "test", "bleu_signature": sig,
                "fingerprint": fp}
    no_bleu = {k: v for k, v in notebook.items() if k != "bleu"}
    cases = {
        "same": (notebook, theirs),
        # The export's BLEU (not covered by model_sha256) is not quoted.
        "same, no notebook bleu": (no_bleu, {**theirs, "bleu": 27.46}),
        "other": (notebook, mine),
        "other, no notebook bleu": (no_bleu, mine),
        "other, older manifest": (notebook, {"weights_sha256": "bb"}),
        "other, neither": (no_bleu, {"weights_sha256": "bb"}),
        "other code": (notebook, {**mine, "fingerprint": {**fp, "code": "x"}}),
        "other sacrebleu": (notebook, {**mine,
                                       "bleu_signature": sig + "|v:9"}),
        "no weights named": ({"bleu": 27.51}, mine),
        "no model sha256": ({k: v for k, v in notebook.items()
                             if k != "model_sha256"}, theirs),
        "older manifest, no sha": (notebook, {"bleu": 26.27}),
        # The section's weights, described otherwise (loadModel refuses).
        "same weights, edited": (notebook, {**theirs, "num_steps": 10}),
    }
    got = dict(zip(cases, run_node(tmp_path, NODE_WEIGHTS,
                                   list(cases.values()))))
    assert got["same"] == {"case": "same", "text": SAME.format("27.5")}
    assert got["same, no notebook bleu"]["text"] == (
        "These are the weights the section evaluated.")
    assert got["other"] == {"case": "other", "text": OTHER + (
        "they score BLEU 26.3 on the same test sentences; the run this "
        "section reports scored 27.5.")}
    assert got["other, no notebook bleu"]["text"] == OTHER + (
        "they score BLEU 26.3 on the section's test sentences, which may "
        "differ from the BLEU the section reports.")
    assert got["other, older manifest"]["text"] == OTHER + (
        "they are not the weights the section evaluated (which scored "
        "held-out BLEU 27.5).")
    assert got["other, neither"]["text"] == OTHER + (
        "they are not the weights the section evaluated.")
    assert got["other code"]["text"].startswith(
        "This site was built with other code, data or torch than the "
        "section's run, which trained other weights: they score BLEU 26.3")
    assert got["other sacrebleu"]["text"].endswith(
        f"different sacreBLEU settings: {sig}|v:9 here, {sig} in the "
        "section.")
    assert got["no weights named"] is None
    assert got["no model sha256"] is None
    assert got["older manifest, no sha"] is None
    assert got["same weights, edited"] is None
    for name, said in got.items():
        if said:
            assert not re.search(r"undefined|NaN|null", said["text"]), name


def tiny_attention_run(toy, attention, num_layers):
    """``tiny_run`` and its recipe for ``attention``: ``"additive"``,
    ``"multihead"``, ``"multihead-qk"`` (2 heads with query-key
    normalisation, their scales set apart) or ``"transformer"``."""
    if attention == "transformer":
        return (tiny_run(toy, "trained transformer", num_layers),
                tiny_transformer(num_layers))
    qk = attention == "multihead-qk"
    att = None if attention == "additive" else \
        MultiHeadAttention(8, 2, qk_norm=qk)
    if qk:  # unequal heads: the page must read each head's own scale
        with torch.no_grad():
            att.qk_scale.copy_(torch.tensor([3.0, -1.5]))
    return (tiny_run(toy, att, num_layers),
            CHAPTER_RECIPE.replace(attention=attention.removesuffix("-qk"),
                                   num_heads=2, num_layers=num_layers,
                                   qk_norm=qk))


@pytest.mark.parametrize("attention, num_layers", [
    ("additive", 1), ("additive", 2), ("multihead", 1), ("multihead", 2),
    ("multihead-qk", 2), ("transformer", 1), ("transformer", 2)])
def test_live_js_translates_like_d2lmini(toy, tmp_path, attention,
                                         num_layers):
    run, recipe = tiny_attention_run(toy, attention, num_layers)
    folder = export_model(recipe, run, tmp_path)
    got = run_node(tmp_path, NODE_CHECK,
                   {"folder": str(folder), "sentences": SENTENCES})
    translations = translate(run.model, run.data, SENTENCES)
    if run.trained:  # a test that can fail: several translations, <eos>
        assert len({t.text for t in translations}) >= 3
        assert all(t.out_tokens[-1] == "<eos>" for t in translations)
    for sentence, ours, theirs in zip(SENTENCES, translations, got):
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


# ---- positional encoding ---------------------------------------------------

def test_positional_encoding_explorer_carries_its_sizes():
    live = positional_encoding_explorer(16, max_len=20, position=3,
                                        index=7)
    assert payload(live) == {"num_hiddens": 16, "max_len": 20,
                             "position": 3, "index": 7}
    assert 'data-d2l-live="positional-encoding"' in live._repr_html_()
    assert payload(positional_encoding_explorer())["num_hiddens"] == 32


@pytest.mark.parametrize("kwargs, error, words", [
    ({"num_hiddens": 7}, ValueError, "even int >= 2"),
    ({"num_hiddens": 0}, ValueError, "even int >= 2"),
    ({"num_hiddens": 32.0}, TypeError, "num_hiddens must be an int"),
    ({"max_len": True}, TypeError, "max_len must be an int, got True"),
    ({"max_len": 0}, ValueError, "at least 1 position"),
    ({"max_len": 2000, "num_hiddens": 512}, ValueError, "fewer positions"),
    ({"position": 64}, ValueError, "[0, max_len) = [0, 64), got 64"),
    ({"position": -1}, ValueError, "[0, max_len) = [0, 64), got -1"),
    ({"index": 16}, ValueError, "[0, num_hiddens // 2) = [0, 16), got 16"),
    ({"index": "2"}, TypeError, "index must be an int, got '2'"),
])
def test_positional_encoding_explorer_rejects_bad_arguments(kwargs, error,
                                                            words):
    with pytest.raises(error, match=re.escape(words)):
        positional_encoding_explorer(**kwargs)


NODE_PE = r"""
const fs = require("fs");
const live = require(process.argv[2]);
const job = JSON.parse(fs.readFileSync(0, "utf8"));
const out = job.map(([D, T]) => live.positionalEncoding(D, T).map(
  (row) => Array.from(row)));
console.log(JSON.stringify(out));
"""


def test_live_js_positional_encoding_equals_d2lmini(tmp_path):
    sizes = [(32, 64), (2, 5), (8, 1), (128, 200), (512, 64)]
    got = run_node(tmp_path, NODE_PE, sizes)
    for (D, T), P in zip(sizes, got):
        want = PositionalEncoding(D, max_len=T).P.double().numpy()
        np.testing.assert_allclose(np.array(P), want, rtol=0, atol=1e-6,
                                   err_msg=f"D = {D}, max_len = {T}")


# ---- what the page loads (issue 17, points 7-11) ---------------------------

NODE_PROBLEMS = r"""
const fs = require("fs");
const live = require(process.argv[2]);
const job = JSON.parse(fs.readFileSync(0, "utf8"));
const buf = fs.readFileSync(job.weights);
const base = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
const out = {};
for (const [name, c] of Object.entries(job.cases)) {
  let buffer = c.buffer === "none" ? null : base.slice(0);
  if (c.buffer === "nan") new Float32Array(buffer).fill(NaN);
  if (c.buffer === "short") buffer = buffer.slice(0, buffer.byteLength - 4);
  if (c.buffer === "one inf") new Float32Array(buffer)[c.at] = Infinity;
  out[name] = live.manifestProblems(c.manifest, buffer, c.expected);
}
console.log(JSON.stringify(out));
"""


def corrupted_manifests(manifest, heads):
    """Edited copies of a valid manifest, each with the words that the
    page's answer must contain."""
    tensors = manifest["tensors"]
    names = list(tensors)
    matrix = next(n for n in names if len(tensors[n]["shape"]) == 2
                  and tensors[n]["shape"][0] != tensors[n]["shape"][1])
    bias = next(n for n in names if n.endswith(".bias"))

    def edit(**changes):
        return {**copy.deepcopy(manifest), **changes}

    def tensor(name, **changes):
        t = copy.deepcopy(tensors)
        if changes.get("drop"):
            del t[name]
        else:
            t[name] = {**t[name], **changes}
        return edit(tensors=t)

    fp = manifest["fingerprint"]
    yield "format", edit(format=3), "format 3, where this page reads " \
        "format 4"
    yield "no format", edit(format=None), "format null"
    yield "fingerprint", edit(fingerprint={**fp, "recipe": "0" * 16}), \
        "the fingerprint's recipe"
    yield "fingerprint lacks code", edit(fingerprint={
        k: v for k, v in fp.items() if k != "code"}), "does not give"
    yield "attention", edit(attention="dot"), "attention \"dot\" is not"
    yield "transposed", tensor(matrix, shape=tensors[matrix]["shape"][::-1]), \
        f"tensor {matrix} has shape"
    yield "flattened", tensor(matrix, shape=[int(np.prod(
        tensors[matrix]["shape"]))]), f"tensor {matrix} has shape"
    yield "negative offset", tensor(matrix, offset=-3), \
        f"tensor {matrix}: offset -3 is not in [0, "
    yield "offset past the end", tensor(
        matrix, offset=manifest["weights_bytes"] // 4), "is not in [0, "
    yield "fractional offset", tensor(matrix, offset=1.5), "offset 1.5"
    neighbour = next(n for n in names if n != matrix)
    yield "overlap", tensor(matrix, offset=tensors[neighbour]["offset"]), \
        "where the order of the state dict puts it at"
    # Two tensors of one shape (W_q and W_k, say) that trade places:
    # every check of each tensor alone holds (issue 27, point 3).
    first, second = next((a, b) for i, a in enumerate(names)
                         for b in names[i + 1:]
                         if tensors[a]["shape"] == tensors[b]["shape"])
    swapped = {**tensors,
               first: {**tensors[first], "offset": tensors[second]["offset"]},
               second: {**tensors[second], "offset": tensors[first]["offset"]}}
    yield "swapped offsets", edit(tensors=swapped), \
        f"tensor {first}: offset {tensors[second]['offset']}, where the " \
        "order of the state dict puts it at"
    yield "deleted bias", tensor(bias, drop=True), \
        f"tensor {bias} is missing"
    yield "extra tensor", edit(tensors={**tensors, "decoder.extra": {
        "shape": [1], "offset": 0}}), "decoder.extra is not part of"
    # Names that a plain object inherits: `name in expected` passed them
    # (issue 39, point 15).  JSON.parse makes "__proto__" an own name.
    for name in ("constructor", "toString", "__proto__", "hasOwnProperty"):
        yield f"extra tensor {name}", edit(tensors={**tensors, name: {
            "shape": [1], "offset": 0}}), f"tensor {name} is not part of"
    yield "more layers", edit(num_layers=manifest["num_layers"] + 1), \
        "is missing"
    yield "no tensors", edit(tensors=None), "tensors is missing"
    yield "sizes", edit(num_hiddens=0), "num_hiddens 0 is not a whole"
    yield "vocabulary", edit(tgt_vocab=None), "tgt_vocab is not a list"
    yield "special", edit(src_special={**manifest["src_special"],
                                       "unk": 0}), "src_special.unk 0"
    yield "sha256", edit(weights_sha256="x" * 64), "is not a sha256"
    yield "weights name", edit(weights="../weights.bin"), \
        "the name its sha256 gives"
    yield "byte count", edit(weights_bytes=manifest["weights_bytes"] - 3), \
        "not a whole number of float32s"
    if manifest["attention"] != "additive":
        yield "heads do not divide", edit(num_heads=3), \
            "num_heads 3 does not divide num_hiddens 8"
        yield "other heads", edit(num_heads=4), \
            f"num_heads 4, where the section's model has {heads}"
    else:
        yield "additive heads", edit(num_heads=2), "has one head"
    yield "qk_norm not a bool", edit(qk_norm=None), \
        "qk_norm null is not true or false"
    if manifest["qk_norm"]:  # its scale tensor is then not expected
        yield "qk_norm off", edit(qk_norm=False), \
            "tensor decoder.attention.qk_scale is not part of the model"
    else:
        yield "qk_norm on", edit(qk_norm=True), \
            "multi-head attention, not of attention" \
            if manifest["attention"] != "multihead" else \
            "tensor decoder.attention.qk_scale is missing"
    yield "checkpoint", edit(checkpoint="seq2seq-additive-x"), \
        "it holds checkpoint \"seq2seq-additive-x\", not " \
        f"{manifest['checkpoint']}"


@pytest.mark.parametrize("attention", ["additive", "multihead",
                                       "multihead-qk", "transformer"])
def test_live_js_says_what_is_wrong_with_a_manifest(toy, tmp_path,
                                                    attention):
    """Point 7: every edit of a valid manifest, and NaN, infinite or
    missing weights, get a sentence naming what is wrong."""
    if attention == "transformer":
        run, recipe = tiny_run(toy, "transformer", 2), tiny_transformer(2)
    else:
        run, recipe = tiny_attention_run(toy, attention, 2)
    folder = export_model(recipe, run, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["qk_norm"] is (attention == "multihead-qk")
    heads = manifest["num_heads"]
    expected = {"checkpoint": manifest["checkpoint"],
                "attention": recipe.attention, "num_heads": heads,
                "fingerprint": manifest["fingerprint"]}
    cases = {"valid": {"manifest": manifest, "expected": expected},
             "valid, no weights yet": {"manifest": manifest,
                                       "buffer": "none"},
             "all NaN": {"manifest": manifest, "buffer": "nan"},
             "one infinity": {"manifest": manifest, "buffer": "one inf",
                              "at": manifest["weights_bytes"] // 4 - 1},
             "short file": {"manifest": manifest, "buffer": "short"},
             "other checkpoint": {"manifest": manifest, "expected": {
                 **expected, "checkpoint": "seq2seq-x"}},
             "other recipe": {"manifest": manifest, "expected": {
                 **expected, "fingerprint": {"recipe": "y"}}},
             "other attention": {"manifest": manifest, "expected": {
                 **expected, "attention": "none"}}}
    words = {"all NaN": "numbers that are not finite",
             "one infinity": "decoder.dense.bias holds 1 numbers that are "
             "not finite",
             "short file": f"has {manifest['weights_bytes'] - 4} bytes",
             "other checkpoint": "not seq2seq-x",
             "other recipe": "where the section trained y",
             "other attention": "where the section's model has \"none\""}
    for name, edited, said in corrupted_manifests(manifest, heads):
        cases[name] = {"manifest": edited, "expected": expected}
        words[name] = said
    got = run_node(tmp_path, NODE_PROBLEMS, {
        "weights": str(folder / manifest["weights"]), "cases": cases})
    assert got.pop("valid") == [] and got.pop("valid, no weights yet") == []
    for name, problems in got.items():
        assert problems, f"{name}: the page would load it"
        assert any(words[name] in p for p in problems), (name, problems)
        for p in problems:
            assert not re.search(r"undefined|NaN,|\[object", p), (name, p)


NODE_LOAD = r"""
const fs = require("fs");
const live = require(process.argv[2]);
const job = JSON.parse(fs.readFileSync(0, "utf8"));
// The model's folder as a server would serve it (fetch in Node 18+).
globalThis.fetch = async (url) => {
  const path = job.folder + "/" + url.split("/").pop();
  if (!fs.existsSync(path)) return new Response("", {status: 404});
  const body = fs.readFileSync(path);
  return new Response(body, {headers: {"Content-Length": body.length}});
};
(async () => {
  const out = [];
  for (const step of job.steps) {
    if (step.write) fs.writeFileSync(job.folder + "/" + step.write,
                                     Buffer.from(step.bytes, "base64"));
    if (step.noCrypto) Object.defineProperty(globalThis, "crypto",
                                             {value: undefined});
    try {
      const m = await live.loadModel("models/", job.checkpoint, null,
                                     step.expected);
      out.push({tokens: live.translate(m, "go .").outTokens});
    } catch (err) {
      out.push({error: err.message});
    }
  }
  console.log(JSON.stringify(out));
})();
"""


def test_live_js_loads_only_the_weights_its_manifest_describes(toy,
                                                               tmp_path):
    """Point 7: same-size corrupted bytes fail on their sha256; NaN
    weights with a matching sha256 fail on their values.  Issue 27,
    points 2 and 3: without crypto.subtle (plain http from another host)
    the page checks the sha256 all the same; a manifest that names the
    section's weights but describes them otherwise (a vocabulary token,
    num_steps) fails on the model_sha256 the notebook recorded."""
    run = tiny_run(toy, MultiHeadAttention(8, 2))
    recipe = CHAPTER_RECIPE.replace(attention="multihead", num_heads=2)
    folder = export_model(recipe, run, tmp_path / "models")
    manifest = json.loads((folder / "manifest.json").read_text())
    section = payload(translator(recipe, run, "go ."))
    recorded = {k: section[k] for k in ("weights_sha256", "model_sha256")}
    assert section["model_sha256"] == model_sha256(manifest)
    good = (folder / manifest["weights"]).read_bytes()
    flipped = bytearray(good)
    flipped[100] ^= 0x40  # same size, one bit
    nan = np.full(len(good) // 4, np.nan, dtype="<f4").tobytes()
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    as_json = lambda m: b64(json.dumps(m).encode())  # noqa: E731
    nan_manifest = {**manifest, "weights_sha256": sha256(nan),
                    "weights": f"weights-{sha256(nan)[:16]}.bin"}
    vocab = list(manifest["tgt_vocab"])
    vocab[-1] = vocab[-1] + "x"
    steps = [
        {"expected": recorded},
        {"expected": {"num_heads": 4}},
        {"write": manifest["weights"], "bytes": b64(bytes(flipped))},
        {"write": manifest["weights"], "bytes": b64(good)},
        {"write": nan_manifest["weights"], "bytes": b64(nan)},
        {"write": "manifest.json", "bytes": as_json(nan_manifest)},
        {"write": "manifest.json", "bytes": as_json(
            {**manifest, "tgt_vocab": vocab}), "expected": recorded},
        {"write": "manifest.json", "bytes": as_json(
            {**manifest, "num_steps": manifest["num_steps"] + 1}),
         "expected": recorded},
        # Without the recorded sha256s (other weights): it loads.
        {"write": "manifest.json", "bytes": as_json(
            {**manifest, "tgt_vocab": vocab})},
        {"write": "manifest.json", "bytes": as_json(manifest),
         "noCrypto": True, "expected": recorded},
        {"write": manifest["weights"], "bytes": b64(bytes(flipped))},
    ]
    got = run_node(tmp_path, NODE_LOAD, {
        "folder": str(folder), "checkpoint": manifest["checkpoint"],
        "steps": steps})
    want = translate(run.model, run.data, ["go ."])[0].out_tokens
    assert got[0] == {"tokens": want}
    assert "num_heads 2, where the section's model has 4" in got[1]["error"]
    assert "not the file its manifest describes (another sha256)" in \
        got[2]["error"]
    assert got[3] == got[0]
    assert got[5]["error"].startswith("the model's files are not valid: ")
    assert "numbers that are not finite" in got[5]["error"]
    for edited in got[6:8]:
        assert "names the weights the section evaluated but does not " \
            "describe them as the section's run did" in edited["error"]
    assert "tokens" in got[8]
    assert got[9] == {"tokens": want}  # sha256.js checked them
    assert "not the file its manifest describes (another sha256)" in \
        got[10]["error"]


NODE_SHA = r"""
const fs = require("fs");
const live = require(process.argv[2]);
const job = JSON.parse(fs.readFileSync(0, "utf8"));
console.log(JSON.stringify({
  bytes: job.bytes.map((b) => live.sha256Hex(Buffer.from(b, "base64"))),
  manifests: job.manifests.map(live.modelSha256),
  fields: live.MODEL_FIELDS}));
"""


def test_live_js_sha256_and_model_sha256_equal_python(toy, tmp_path):
    """sha256.js against hashlib at every length around the block
    boundaries and on a few megabytes; the page's modelSha256 against
    model_sha256 on a real manifest and on one whose tokens and keys
    hold what JSON escapes (quotes, control characters, U+2028, beyond
    U+FFFF and keys the two sorts of UTF-16 and code points order
    apart)."""
    rng = np.random.default_rng(0)
    blobs = [rng.bytes(n) for n in range(0, 260)] + [rng.bytes(3_000_001)]
    run, recipe = tiny_attention_run(toy, "transformer", 1)
    manifest = json.loads((export_model(recipe, run, tmp_path)
                           / "manifest.json").read_text())
    odd = ["\"q\"", "back\\slash", "\x00\x1f\x7f\x85", "\u2028\u2029",
           "\U0001f600", "\ufb01", "caf\u00e9", "\t\n\r\b\f"]
    tricky = {**manifest, "tgt_vocab": manifest["tgt_vocab"] + odd,
              "fingerprint": {**manifest["fingerprint"],
                              "\U0001f600": "a", "\uff5e": "b", "z": "c"}}
    missing = {k: v for k, v in manifest.items() if k != "num_steps"}
    got = run_node(tmp_path, NODE_SHA, {
        "bytes": [base64.b64encode(b).decode() for b in blobs],
        "manifests": [manifest, tricky, missing]})
    assert got["bytes"] == [sha256(b) for b in blobs]
    assert got["manifests"] == [model_sha256(m)
                                for m in (manifest, tricky, missing)]
    assert len(set(got["manifests"])) == 3
    assert tuple(got["fields"]) == MODEL_FIELDS


def test_live_js_reads_the_manifest_format_live_py_writes():
    from d2lmini.live import MANIFEST_FORMAT
    found = re.findall(r"const MANIFEST_FORMAT = (\d+);",
                       live_js())
    assert found == [str(MANIFEST_FORMAT)]


def test_export_model_replaces_weights_and_manifest_as_one(
        toy, tmp_path, monkeypatch):
    """Point 8: a crash while writing the manifest leaves the old pair,
    whose manifest describes the weights beside it; a finished export
    leaves the new pair only."""
    import d2lmini.live_translator as live

    run = tiny_run(toy, None)
    recipe = CHAPTER_RECIPE
    folder = export_model(recipe, run, tmp_path)
    old = json.loads((folder / "manifest.json").read_text())

    def pair_holds():
        manifest = json.loads((folder / "manifest.json").read_text())
        weights = (folder / manifest["weights"]).read_bytes()
        assert sha256(weights) == manifest["weights_sha256"]
        return manifest

    real = live.atomic_write

    @contextlib.contextmanager
    def crash_on_manifest(path, *args, **kwargs):
        if Path(path).name == "manifest.json":
            raise KeyboardInterrupt("killed")
        with real(path, *args, **kwargs) as f:
            yield f

    other = perturbed(run)
    monkeypatch.setattr(live, "atomic_write", crash_on_manifest)
    with pytest.raises(KeyboardInterrupt):
        export_model(recipe, other, tmp_path)
    assert pair_holds() == old
    monkeypatch.setattr(live, "atomic_write", real)
    new = export_model(recipe, other, tmp_path)
    manifest = pair_holds()
    assert manifest["weights_sha256"] == sha256(weights_bytes(other.model))
    assert manifest["weights"] == \
        f"weights-{manifest['weights_sha256'][:16]}.bin"
    # The replaced manifest's weights stay (a browser that cached that
    # manifest still finds them; issue 27, point 10); older ones go.
    assert sorted(p.name for p in new.iterdir()) == sorted(
        ["manifest.json", manifest["weights"], old["weights"]])
    third = export_model(recipe, perturbed(run, seed=2), tmp_path)
    latest = pair_holds()
    assert sorted(p.name for p in third.iterdir()) == sorted(
        ["manifest.json", latest["weights"], manifest["weights"]])


def _fake_export(folder, weights=b"\0" * 8):
    """A folder as export_model writes it: a manifest and its weights."""
    folder.mkdir(parents=True)
    name = f"weights-{hashlib.sha256(weights).hexdigest()[:16]}.bin"
    (folder / name).write_bytes(weights)
    (folder / "manifest.json").write_text(json.dumps({
        "format": 4, "weights": name, "fingerprint": {},
        "weights_sha256": hashlib.sha256(weights).hexdigest()}))


def test_export_models_deletes_nothing_it_did_not_write(
        tmp_path, monkeypatch):
    """Issue 27, point 1: a --dest with other things in it (a .git, a
    photo) is refused before anything is written or deleted; the exports
    no notebook runs any more are deleted, and only they."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    script = load_script("export_models")
    monkeypatch.setattr(script, "toc_notebooks", lambda: [])
    dest = tmp_path / "site"
    (dest / ".git").mkdir(parents=True)
    (dest / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (dest / "photos").mkdir()
    (dest / "photos" / "a.jpg").write_bytes(b"\xff\xd8")
    _fake_export(dest / "seq2seq-additive-0123")
    with pytest.raises(SystemExit, match=r"holds what this script did not "
                       r"write \(\.git, photos\)"):
        script.main(["--dest", str(dest)])
    assert sorted(p.name for p in dest.iterdir()) == [
        ".git", "photos", "seq2seq-additive-0123"]
    assert (dest / ".git" / "HEAD").is_file()
    # A folder of old exports only (one with a crashed write's leftover):
    # those no notebook runs are deleted.
    models = tmp_path / "models"
    _fake_export(models / "seq2seq-additive-0123")
    (models / "seq2seq-additive-0123" / ".manifest.json.x1.part").touch()
    _fake_export(models / "seq2seq-none-4567")
    assert script.main(["--dest", str(models)]) == 0
    assert [p.name for p in models.iterdir()] == [script.LOCK]
    assert script.main(["--dest", str(models)]) == 0  # its lock is its own
    assert script.main(["--dest", str(tmp_path / "new")]) == 0  # a new one
    for looks_like in ({"weights": "w"},  # not a manifest of an export
                       None):
        odd = tmp_path / "odd"
        shutil.rmtree(odd, ignore_errors=True)
        _fake_export(odd / "seq2seq-x")
        if looks_like is None:
            (odd / "seq2seq-x" / "notes.txt").write_text("mine")
        else:
            (odd / "seq2seq-x" / "manifest.json").write_text(
                json.dumps(looks_like))
        with pytest.raises(SystemExit, match="did not write"):
            script.main(["--dest", str(odd)])
        assert (odd / "seq2seq-x" / "manifest.json").is_file()


def test_export_models_waits_for_another_export_into_its_folder(
        tmp_path, monkeypatch, capsys):
    """Issue 27, point 10: while one export holds the folder's lock, a
    second one waits (and says so) instead of deleting the weights the
    first is writing; it goes on once the first is done."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    script = load_script("export_models")
    monkeypatch.setattr(script, "toc_notebooks", lambda: [])
    dest = tmp_path / "models"
    dest.mkdir()
    done = threading.Event()
    second = threading.Thread(target=lambda: done.set() if script.main(
        ["--dest", str(dest)]) == 0 else None)
    with script.export_lock(dest):
        with pytest.raises(BlockingIOError, match="another export holds"):
            with script.export_lock(dest, wait=False):
                pass
        second.start()
        # Blocked on the lock for as long as it is held (0.5 s here).
        assert not done.wait(0.5)
    second.join(timeout=60)
    assert done.is_set()
    assert "waiting for another export into" in capsys.readouterr().out


def test_export_models_refuses_one_checkpoint_with_two_models(
        tmp_path, monkeypatch):
    """Point 8: two notebooks whose translators name one checkpoint with
    other fingerprints (or weights) fail; the same model twice is one."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    script = load_script("export_models")
    fp = {"recipe": "r", "code": "c", "torch": "t", "data": "d"}
    spec = {"checkpoint": "seq2seq-additive-r", "fingerprint": fp,
            "weights_sha256": "a" * 64}
    found = {"a.ipynb": [spec], "b.ipynb": [dict(spec)]}
    exported = []
    monkeypatch.setattr(script, "toc_notebooks", lambda: list(found))
    monkeypatch.setattr(script, "translators",
                        lambda path: found[Path(path).name])
    monkeypatch.setattr(script, "export",
                        lambda s, dest: exported.append(s) or "ok")
    assert script.main(["--dest", str(tmp_path)]) == 0
    assert exported == [spec]
    for other in ({"fingerprint": {**fp, "code": "x"}},
                  {"weights_sha256": "b" * 64}):
        found["b.ipynb"] = [{**spec, **other}]
        with pytest.raises(SystemExit, match=r"seq2seq-additive-r: a\.ipynb"
                           r" and b\.ipynb evaluated models with another "
                           + next(iter(other))):
            script.main(["--dest", str(tmp_path)])
    assert len(exported) == 1


def test_live_html_payload_holds_no_angle_bracket():
    """Point 9: no "<" between the JSON script's tags, whatever the data
    (test_site_live.py parses such a page in Chromium)."""
    hostile = {"text": "<!--<script>", "end": "</script><p>", "amp": "&"}
    live = LiveHTML("masked-softmax", hostile, "note")
    body = re.search(r'<script type="application/json">(.*?)</script>',
                     live.html, re.S).group(1)
    assert "<" not in body and ">" not in body and "&" not in body
    assert json.loads(body) == hostile
    assert payloads(live.html, "masked-softmax") == [hostile]


@pytest.mark.parametrize("make, words", [
    (lambda: masked_softmax_explorer(num_queries=33),
     "num_queries (L) is at most 32 (the page draws every one), got 33"),
    (lambda: masked_softmax_explorer(num_keys=65),
     "num_keys (S) is at most 64 (the page draws every one), got 65"),
    (lambda: masked_softmax_explorer(torch.zeros(40, 8)),
     "the queries of scores (L) is at most 32"),
    (lambda: scaling_explorer(num_queries=4096, num_keys=16),
     "num_queries * num_keys (scores per size) is at most 16384 (the page "
     "draws every one), got 65536"),
    (lambda: scaling_explorer(dims=(1, 2048), d=1),
     "the largest size d is at most 1024"),
    (lambda: scaling_explorer(dims=tuple(range(1, 18)), d=1),
     "len(dims)) is at most 16"),
    (lambda: kernel_regression_explorer(*[torch.zeros(1001)] * 2,
                                        torch.zeros(5), torch.zeros(5)),
     "training pairs (S) is at most 1000 (the page draws every one), "
     "got 1001"),
    (lambda: kernel_regression_explorer(*[torch.zeros(5)] * 2,
                                        *[torch.zeros(2000)] * 2),
     "queries (L) is at most 1000"),
    (lambda: positional_encoding_explorer(512, max_len=2000),
     "= 1024000 is more than 32768"),
])
def test_explorer_sizes_are_bounded(make, words):
    """Point 10: the limit and what was asked, in a ValueError."""
    with pytest.raises(ValueError, match=re.escape(words)):
        make()


def test_translator_size_is_bounded(toy):
    run = tiny_run(toy, None)
    with pytest.raises(ValueError, match=re.escape(
            "the number of examples is at most 12 (the page draws every "
            "one), got 13")):
        translator(CHAPTER_RECIPE, run, "go .", ["go ."] * 13)
    with pytest.raises(ValueError, match="is at most 200 .*got 201"):
        translator(CHAPTER_RECIPE, run, "a" * 201)


def test_live_js_spreads_no_array_into_math_min_or_max():
    """Point 10: Math.min(...xs) throws "Maximum call stack size
    exceeded" for large arrays (test_site_live.py draws one)."""
    js = live_js()
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", js, flags=re.S)
    spread = []
    for m in re.finditer(r"Math\.(min|max)\(", code):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        if "..." in code[m.end():i]:
            spread.append(code[m.start():i])
    assert not spread, spread


# ---- the page's script: the files of d2lmini/js/ in one function ---------

NODE_NAMES = r"""
const live = require(process.argv[2]);
console.log(JSON.stringify(Object.keys(live).sort()));
"""


def test_live_js_is_the_parts_of_d2lmini_js_in_one_function(tmp_path):
    """The page gets one script: wrapper.js with every part inside, in
    JS_PARTS order; every file of d2lmini/js/ is one of them, each part
    parses on its own, and the script exports what the page and the
    tests use."""
    names = sorted(p.name for p in JS_DIR.iterdir())
    assert names == sorted([*JS_PARTS, "wrapper.js", *VISION_PARTS,
                            "vision-wrapper.js", *LM_PARTS,
                            "lm-wrapper.js"])
    js = live_js()
    assert js.startswith("/* d2lmini live explorers")
    found = [js.index((JS_DIR / name).read_text()) for name in JS_PARTS]
    assert found == sorted(found), "the parts are not in JS_PARTS order"
    assert js.count("(function (root) {") == 1 and "@parts" not in js
    node = shutil.which("node") or pytest.skip("node is not installed")
    for name in (*JS_PARTS, *VISION_PARTS, *LM_PARTS):
        subprocess.run([node, "--check", str(JS_DIR / name)], check=True)
    for extra, names in ((vision_js(), VISION_PARTS), (lm_js(), LM_PARTS)):
        # Its own script, after the page's.
        assert extra.count("(function (root) {") == 1
        assert "@parts" not in extra
        assert all((JS_DIR / name).read_text() in extra for name in names)
        assert not any((JS_DIR / name).read_text() in js
                       for name in names)
    assert run_node(tmp_path, NODE_NAMES, None) == sorted([
        "MANIFEST_FORMAT", "TEXT_RULES", "addMount", "beamTranslate",
        "expectedTensors", "extent", "lengthPenaltyOf", "parts",
        "MODEL_FIELDS", "loadModel", "makeModel", "manifestProblems",
        "maskedSoftmaxRow", "modelSha256", "mountAll", "nadarayaWatson",
        "positionalEncoding", "preprocess", "readSource", "sha256Hex",
        "tokenize", "translate", "viridis", "weightsStatement"])


def test_live_js_refuses_a_wrapper_without_its_parts_line(tmp_path,
                                                         monkeypatch):
    import d2lmini.live_page as page

    for name in JS_PARTS:
        (tmp_path / name).write_text("")
    (tmp_path / "wrapper.js").write_text("(function () {})();\n")
    monkeypatch.setattr(page, "JS_DIR", tmp_path)
    with pytest.raises(RuntimeError, match="must hold the line"):
        page.live_js()


def test_the_package_ships_every_file_of_the_script():
    """pyproject.toml's package data covers d2lmini/js/ (a wheel without
    one of its files would make a page without explorers)."""
    import fnmatch
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setup = config["tool"]["setuptools"]
    assert "d2lmini.js" in setup["packages"]
    globs = setup["package-data"]["d2lmini.js"]
    for path in JS_DIR.iterdir():
        assert any(fnmatch.fnmatch(path.name, g) for g in globs), path.name



# ---- what the reader types: one rule in Python and in the page -----------

NODE_TEXT = r"""
const fs = require("fs");
const live = require(process.argv[2]);
const job = JSON.parse(fs.readFileSync(0, "utf8"));
console.log(JSON.stringify({
  rules: live.TEXT_RULES,
  out: job.map((s) => [live.preprocess(s), live.tokenize(s)])}));
"""

# Point 12: what keyboards type, with what the corpus has.
TYPED = ["I\u2019m home.", "I'm home.", "\u2018Tom\u2019s\u2019 car",
         "I\u02bcm here", "don\u00b4t", "don`t", "\u201cHi\u201d, Tom.",
         "Cafe\u0301!", "CAFE\u0301!", "Caf\xe9!", "\ufeffGo.",
         "\ufeff\ufeffGo.", "a\ufeffb", "Va\u202f! I won.",
         "\u039f\u0394\u039f\u03a3 \u03a3\u0391\u03a3", "\u0130stanbul",
         "x\u0301\u0316y", "E\u0316\u0301", "\u0531\u1c89\ua7cb",
         "C\u2019est \xe0 Tom.", "a\tb\nc\x85d\u2028e", ""]


def test_live_js_reads_typed_text_as_d2lmini_corpus(tmp_path):
    """The page's tokenizer is d2lmini.corpus's rule, with its sets: a
    phone's apostrophe, a combining accent and a byte-order mark read
    as the corpus writes them (point 12)."""
    got = run_node(tmp_path, NODE_TEXT, TYPED)
    assert got["rules"] == {
        "whitespace": corpus.WHITESPACE, "apostrophes": corpus.APOSTROPHES,
        "doubleQuotes": corpus.DOUBLE_QUOTES,
        "foldedBelow": corpus.FOLDED_BELOW}
    want = [[corpus.preprocess(s), corpus.tokenize(corpus.preprocess(s))]
            for s in TYPED]
    assert got["out"] == want
    assert want[0][1] == want[1][1] == ["i'm", "home", "."]
    assert want[7][1] == want[9][1] == ["caf\xe9", "!"]
    assert want[10][1] == ["go", "."]


NODE_SWEEP = r"""
const fs = require("fs");
const live = require(process.argv[2]);
const [head, tail] = JSON.parse(fs.readFileSync(0, "utf8"));
const lines = [];
for (let cp = 0; cp <= 0x10ffff; cp++) {
  if (cp >= 0xd800 && cp <= 0xdfff) continue;
  const sentence = head + String.fromCodePoint(cp) + tail;
  lines.push(live.tokenize(sentence).join(" "));
}
process.stdout.write(lines.join("\n"));
"""

# Each code point c goes between these two: after a capital and a sigma
# (c's lower case, and whether the sigma's depends on c) and between two
# combining acutes (what NFC does with c: decompose it, or move it before
# or after an acute if it is a combining mark that goes there).
SWEEP = ("A\u03a3\u0301", "\u0301y")
POINTS = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def sweep_tokens():
    """Python's tokens of each sentence of the sweep, joined by a space
    (tokens hold no whitespace), as the Node sweep prints them.

    The sentences are preprocessed as one text, a line each (what
    parse_pairs does with fra.txt): each ends in y and starts with A,
    a newline is a space to tokenize and takes part in no case mapping,
    composition or ``,.!?``, so each line is preprocessed as it would be
    alone (which the test checks for a sample); U+000A's own sentence
    is done alone."""
    head, tail = SWEEP
    text = "\n".join(head + chr(cp) + tail for cp in POINTS if cp != 0xA)
    lines = [" ".join(corpus.tokenize(line))
             for line in corpus.preprocess(text).split("\n")]
    alone = " ".join(corpus.tokenize(corpus.preprocess(head + "\n" + tail)))
    lines.insert(POINTS.index(0xA), alone)
    return lines


@pytest.mark.slow
def test_live_js_tokenizes_every_code_point_as_python(tmp_path):
    """Point 13: Python and the page split, lowercase and compose every
    code point alike (all but the surrogates), whatever their Unicode
    versions: each follows the rule of d2lmini.corpus.preprocess with
    its explicit sets, not its own tables."""
    node = shutil.which("node") or pytest.skip("node is not installed")
    script, live = tmp_path / "sweep.js", tmp_path / "live.js"
    script.write_text(NODE_SWEEP)
    live.write_text(live_js(), encoding="utf-8")
    with subprocess.Popen([node, str(script), str(live)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          encoding="utf-8") as done:
        done.stdin.write(json.dumps(SWEEP))
        done.stdin.close()
        ours = sweep_tokens()  # while Node computes its own
        theirs, errors = done.stdout.read().split("\n"), done.stderr.read()
    assert done.returncode == 0, errors
    head, tail = SWEEP
    for i in range(0, len(POINTS), 9973):
        sentence = head + chr(POINTS[i]) + tail
        alone = " ".join(corpus.tokenize(corpus.preprocess(sentence)))
        assert ours[i] == alone, hex(POINTS[i])
    assert len(theirs) == len(ours) == len(POINTS) == 1_112_064
    differ = [f"U+{cp:04X}: {a!r} in Python, {b!r} in the page"
              for cp, a, b in zip(POINTS, ours, theirs) if a != b]
    assert not differ, f"{len(differ)} code points differ: {differ[:5]}"
