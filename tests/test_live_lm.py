"""Tests of d2lmini.live_lm (the text writer's data and the language
model's export) and of the page's language-model script
(d2lmini/js/lm.js) run in Node: its forward pass against
``d2lmini.pretraining.LanguageModel``, its Mulberry32, next-token
distribution and generation against ``d2lmini.generation`` (the same
ids), its checks of a model folder.

A small untrained language model on a toy French vocabulary, with
seeded noise on every weight, stands for the section's model: nothing
needs the corpus or the model cache.  The browser checks of the
explorer are in tests/test_site_live.py.
"""

import base64
import copy
import dataclasses
import hashlib
import json
import math
import shutil
import subprocess
import sys

import nbformat
import numpy as np
import pytest
import torch
from test_live import load_script

from d2lmini.data import MTFraEng
from d2lmini.generation import (
    Mulberry32,
    exp64,
    generate,
    next_token_distribution,
    sample,
)
from d2lmini.live import (
    LM_MANIFEST_FORMAT,
    LM_MODEL_FIELDS,
    MODELS_URL,
    LiveHTML,
    export_lm,
    live_js,
    lm_js,
    lm_model_sha256,
    lm_notebook_record,
    lm_tensors,
    lm_weights_bytes,
    payloads,
    text_writer,
    vision_js,
)
from d2lmini.lm import LMRecipe, LMRun, _fingerprint, forbidden_ids

# French sentences whose words make the toy vocabulary (the English
# side only makes MTFraEng whole).
TOY_FRENCH = [
    "je suis content .", "je suis chez moi .", "il est calme .",
    "nous avons faim .", "elle est très contente .", "tu es en retard !",
    "il a un chien .", "nous sommes ici .", "je vois la voiture rouge .",
    "elle aime le vin blanc .", "vous avez raison .", "ils sont partis ."]


@pytest.fixture(scope="module")
def data():
    pairs = [(f"sentence {i} .", f) for i, f in enumerate(TOY_FRENCH)]
    return MTFraEng(2, num_steps=8, num_train=len(pairs), num_val=0,
                    num_test=0, pairs=pairs, min_freq=1)


def tiny_lm(data, seed=0, noise=0.5, **sizes):
    """An LMRun of a small untrained LanguageModel (D = 16, F = 32, 2
    heads, 2 blocks, max_len 24, unless ``sizes`` say otherwise) on the
    toy vocabulary, every weight with seeded noise of standard
    deviation ``noise`` added."""
    recipe = LMRecipe(**{"num_hiddens": 16, "ffn_num_hiddens": 32,
                         "num_heads": 2, "num_blks": 2, "max_len": 24,
                         **sizes})
    model = recipe.build(len(data.tgt_vocab))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():  # the tied matrix once
            p.add_(noise * torch.randn(p.shape, generator=gen))
    history = {"steps": [1], "train_loss": [1.0], "val_ppl": [12.34],
               "seconds": 0.0, "sentences": len(TOY_FRENCH),
               "left_out": 0}
    return LMRun(model.eval(), data, history, recipe, False)


def payload(live):
    assert isinstance(live, LiveHTML) and live.kind == "text-writer"
    found = payloads(live.html, "text-writer")
    assert len(found) == 1
    return found[0]


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def prefix(run, text):
    """What the page reads of a typed beginning: <bos> and the ids of
    ``data.tokens(text)`` (an unknown word is <unk>)."""
    vocab = run.data.tgt_vocab
    return [vocab.bos] + vocab[run.data.tokens(text)]


# ---- the notebook's output and the export ---------------------------------

def test_text_writer_names_its_model_prompts_and_settings(data):
    run = tiny_lm(data)
    spec = payload(text_writer(run, ["je suis", "il est"]))
    recipe = run.recipe
    assert spec["checkpoint"] == f"lm-french-{recipe.key()}"
    assert spec["recipe"] == dataclasses.asdict(recipe)
    assert spec["fingerprint"] == _fingerprint(recipe.key(), data)
    assert spec["weights_sha256"] == sha256(lm_weights_bytes(run.model))
    # The tied output weight is the embedding, stored once.
    V, D = len(data.tgt_vocab), 16
    assert spec["weights_bytes"] == 4 * (sum(
        v.numel() for v in run.model.state_dict().values()) - V * D)
    assert (spec["vocab_size"], spec["num_hiddens"], spec["num_heads"],
            spec["num_blks"], spec["max_len"]) == (V, 16, 2, 2, 24)
    assert spec["val_ppl"] == 12.34
    assert spec["prompts"] == ["je suis", "il est"]
    assert spec["max_new_tokens"] == 15
    assert spec["settings"] == {"temperature": 0.8, "top_k": None,
                                "top_p": 0.9, "seed": 0}
    assert spec["base"] == MODELS_URL
    other = payload(text_writer(run, (), max_new_tokens=5, temperature=0,
                                top_k=10, top_p=None, seed=7,
                                base="models/"))
    assert other["prompts"] == [] and other["max_new_tokens"] == 5
    assert other["settings"] == {"temperature": 0.0, "top_k": 10,
                                 "top_p": None, "seed": 7}
    assert other["base"] == "models/"
    html = text_writer(run).html
    assert live_js() in html and lm_js() in html
    assert vision_js() not in html and lm_js() not in live_js()
    assert "runs the model in the page" in html


def test_text_writer_rejects_bad_arguments(data):
    run = tiny_lm(data)
    with pytest.raises(TypeError, match="must be the LMRun"):
        text_writer(run.model)
    with pytest.raises(TypeError, match="must be the LMRun"):
        text_writer(tuple(run))
    with pytest.raises(ValueError, match="do not describe its model"):
        text_writer(run._replace(recipe=run.recipe.replace(num_blks=3)))
    with pytest.raises(TypeError, match="prompts must be a list"):
        text_writer(run, "je suis")
    with pytest.raises(TypeError, match="prompts must be a list"):
        text_writer(run, ["je suis", " "])
    with pytest.raises(ValueError, match=r"lacks \(zorglub\)"):
        text_writer(run, ["je suis zorglub"])
    with pytest.raises(ValueError, match="exceed max_len=24"):
        text_writer(run, ["je suis " * 5], max_new_tokens=15)
    with pytest.raises(ValueError, match="at most 12"):
        text_writer(run, ["je suis"] * 13)
    for kwargs, error in (({"temperature": -0.05}, ValueError),
                          ({"temperature": 0.33}, ValueError),
                          ({"temperature": 2.05}, ValueError),
                          ({"temperature": True}, ValueError),
                          ({"top_k": 0}, ValueError),
                          ({"top_k": 51}, ValueError),
                          ({"top_k": 2.0}, TypeError),
                          ({"top_p": 1.0}, ValueError),
                          ({"top_p": 0.0}, ValueError),
                          ({"seed": -1}, ValueError),
                          ({"seed": 2 ** 32}, ValueError),
                          ({"max_new_tokens": 0}, ValueError),
                          ({"max_new_tokens": 24}, ValueError),
                          ({"base": None}, TypeError)):
        with pytest.raises(error):
            text_writer(run, **kwargs)


def test_export_lm_writes_what_the_notebook_names(data, tmp_path):
    run = tiny_lm(data)
    spec = payload(text_writer(run))
    folder = export_lm(run, tmp_path, evaluated=spec)
    assert folder == tmp_path / spec["checkpoint"]
    manifest = json.loads((folder / "manifest.json").read_text())
    vocab = data.tgt_vocab
    tensors = lm_tensors(run.model)
    assert "dense.weight" in run.model.state_dict()
    assert list(tensors) == [k for k in run.model.state_dict()
                             if k != "dense.weight"]
    weights = lm_weights_bytes(run.model)
    assert manifest["format"] == LM_MANIFEST_FORMAT
    assert manifest["checkpoint"] == spec["checkpoint"]
    assert manifest["fingerprint"] == spec["fingerprint"]
    assert manifest["recipe"] == spec["recipe"]
    assert {k: manifest[k] for k in (
        "vocab_size", "num_hiddens", "ffn_num_hiddens", "num_heads",
        "num_blks", "max_len", "tie_weights")} == {
        "vocab_size": len(vocab), "num_hiddens": 16, "ffn_num_hiddens": 32,
        "num_heads": 2, "num_blks": 2, "max_len": 24, "tie_weights": True}
    assert manifest["vocab"] == vocab.idx_to_token
    assert manifest["special"] == {"pad": vocab.pad, "bos": vocab.bos,
                                   "eos": vocab.eos, "unk": vocab.unk}
    assert manifest["forbidden"] == forbidden_ids(vocab)
    assert list(manifest["tensors"]) == list(tensors)
    offset = 0
    for name, value in tensors.items():
        assert manifest["tensors"][name] == {"shape": list(value.shape),
                                             "offset": offset}
        offset += value.numel()
    assert manifest["weights"] == f"weights-{sha256(weights)[:16]}.bin"
    assert (folder / manifest["weights"]).read_bytes() == weights
    assert manifest["weights_bytes"] == len(weights) == 4 * offset
    assert manifest["weights_sha256"] == sha256(weights)
    assert manifest["val_ppl"] == 12.34
    assert manifest["notebook"] == lm_notebook_record(spec) == {
        "weights_sha256": spec["weights_sha256"],
        "model_sha256": spec["model_sha256"], "val_ppl": 12.34}
    assert lm_model_sha256(manifest) == spec["model_sha256"]
    for k in LM_MODEL_FIELDS:
        assert lm_model_sha256({**manifest, k: "x"}) != spec[
            "model_sha256"], k
    assert lm_model_sha256({**manifest, "val_ppl": 1.0}) == \
        spec["model_sha256"]
    # Other weights replace the pair; the replaced manifest's weights
    # stay for a browser that cached it.
    other = tiny_lm(data, seed=1)
    export_lm(other, tmp_path)
    new = json.loads((folder / "manifest.json").read_text())
    assert new["notebook"] is None
    assert new["weights_sha256"] == sha256(lm_weights_bytes(other.model))
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["manifest.json", manifest["weights"], new["weights"]])


def test_export_lm_stores_an_untied_output_layer(data, tmp_path):
    from d2lmini.pretraining import LanguageModel

    run = tiny_lm(data)
    untied = LanguageModel(len(data.tgt_vocab), 16, 32, 2, 2, max_len=24,
                           tie_weights=False).eval()
    run = run._replace(model=untied)
    manifest = json.loads((export_lm(run, tmp_path) / "manifest.json")
                          .read_text())
    assert manifest["tie_weights"] is False
    assert list(manifest["tensors"]) == list(untied.state_dict())


# ---- the page's script in Node --------------------------------------------

def run_node(tmp_path, script, job):
    """Run a Node script with the path of the page's script and the text
    writer's (``live_js() + lm_js()`` in one file) as its argument and
    ``job`` (JSON) on its stdin; return what it printed, parsed."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (`make vendor` installs npm and "
                    "node)")
    path, js = tmp_path / "check.js", tmp_path / "lm.js"
    path.write_text(script)
    js.write_text(live_js() + "\n" + lm_js(), encoding="utf-8")
    done = subprocess.run([node, str(path), str(js)],
                          input=json.dumps(job), capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


NODE_HEAD = r"""
const fs = require("fs");
require(process.argv[2]);
const M = globalThis.d2lLM;
const job = JSON.parse(fs.readFileSync(0, "utf8"));
function readFolder(folder) {
  const manifest = JSON.parse(fs.readFileSync(folder + "/manifest.json"));
  const buf = fs.readFileSync(folder + "/" + manifest.weights);
  return [manifest, buf.buffer.slice(buf.byteOffset,
                                     buf.byteOffset + buf.length)];
}
const attempt = (f) => {
  try { return f(); } catch (err) { return {error: err.message}; }
};
// JSON has no -Infinity: null stands for it.
const logitsOf = (xs) => xs.map((x) => (x === null ? -Infinity : x));
"""

NODE_RNG = NODE_HEAD + r"""
console.log(JSON.stringify({
  draws: job.seeds.map((s) => {
    const rng = M.Mulberry32(s);
    return Array.from({length: job.n}, () => rng.random());
  }),
  bad: job.bad.map((s) => attempt(() => M.Mulberry32(s))),
}));
"""


def test_live_js_mulberry32_equals_python(tmp_path):
    seeds = [0, 1, 42, 123456789, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1]
    got = run_node(tmp_path, NODE_RNG, {"seeds": seeds, "n": 200,
                                        "bad": [-1, 2 ** 32, 1.5, "3"]})
    for seed, draws in zip(seeds, got["draws"]):
        rng = Mulberry32(seed)
        assert draws == [rng.random() for _ in range(200)], seed
    for bad in got["bad"]:
        assert "seed must be a whole number in [0, 2**32)" in bad["error"]


NODE_DIST = NODE_HEAD + r"""
console.log(JSON.stringify(job.cases.map(([logits, t, k, p]) => attempt(
  () => M.nextTokenDistribution(logitsOf(logits), t, k, p)))));
"""

SETTINGS = [(t, k, p) for t in (0, 0.7, 1, 1.5)
            for k, p in ((None, None), (5, None), (None, 0.9), (3, 0.5),
                         (1, None), (None, 1.0), (None, 0.05))]


def logit_vectors():
    """Random logits, with ties (one value several times), ruled-out
    ids (-inf), one large spread and near-underflow entries."""
    rng = np.random.default_rng(0)
    out = []
    for V in (1, 2, 7, 40, 300):
        z = rng.normal(0, 2, V)
        out.append(z.tolist())
        tied = z.copy()
        tied[::3] = tied[0]  # exact ties: lower id first
        out.append(tied.tolist())
        if V > 2:
            ruled = z.copy()
            ruled[1::2] = -np.inf
            out.append(ruled.tolist())
    out.append([0.0, -800.0, -700.0, 1e-9, -1e-9, 5.0, 5.0])
    out.append((rng.normal(0, 40, 50)).tolist())
    return out


def test_live_js_next_token_distribution_equals_python(tmp_path):
    """ids exactly and probabilities to 1e-12, at temperatures 0, 0.7, 1
    and 1.5 with top-k and top-p, on logits with ties and -inf."""
    cases = [[z, *s] for z in logit_vectors() for s in SETTINGS]
    js = [[[None if v == -math.inf else v for v in z], t, k, p]
          for z, t, k, p in cases]
    got = run_node(tmp_path, NODE_DIST, {"cases": js})
    worst = 0.0
    for (z, t, k, p), out in zip(cases, got):
        ids, probs = next_token_distribution(
            torch.tensor(z, dtype=torch.float64), t, k, p)
        assert out["ids"] == ids.tolist(), (z[:5], t, k, p)
        worst = max(worst, float(np.abs(np.array(out["probs"])
                                        - probs.numpy()).max()))
    assert worst < 1e-12


NODE_EXP = NODE_HEAD + r"""
console.log(JSON.stringify({
  exp: logitsOf(job.xs).map((x) => M.exp64(x)),
  draw: job.draw.map(([logits, t, k, p, seed]) => {
    const d = M.nextTokenDistribution(logitsOf(logits), t, k, p);
    return M.sample(d.ids, d.probs, M.Mulberry32(seed));
  }),
}));
"""


def test_live_js_exp64_gives_python_s_bits(tmp_path):
    """The page's exp64 equals d2lmini.generation.exp64 bit for bit, and
    both are within 2 ulp of math.exp; at the top-p boundary where
    Math.exp and math.exp differ by an ulp (logits [0, -0.2006...],
    top-p 0.55, seed 1) page and Python now draw the same token."""
    rng = np.random.default_rng(0)
    xs = np.concatenate([-rng.exponential(1.0, 4000),
                         -rng.uniform(0, 750, 4000),
                         -rng.uniform(0, 1e-6, 500),
                         -745.5 + rng.uniform(-1, 1, 500),
                         [0.0, -0.0, -1e-300, -745.13, -746.0, -800.0,
                          -0.20067069546215116]]).tolist()
    draw = [[[0.0, -0.20067069546215116], 1, None, 0.55, 1]]
    draw += [[z, 1, None, p, seed] for z in logit_vectors()[:8]
             for p in (0.3, 0.55, 0.9) for seed in (0, 1, 2)]
    js = [[[None if v == -math.inf else v for v in z], *rest]
          for z, *rest in draw]
    got = run_node(tmp_path, NODE_EXP, {"xs": xs + [None], "draw": js})
    ours = exp64(torch.tensor(xs + [-math.inf], dtype=torch.float64)).tolist()
    assert got["exp"] == ours
    for x, e in zip(xs, ours):
        assert abs(e - math.exp(x)) <= 2 * math.ulp(math.exp(x)), x
    for (z, t, k, p, seed), token in zip(draw, got["draw"]):
        assert token == sample(*next_token_distribution(
            torch.tensor(z, dtype=torch.float64), t, k, p),
            Mulberry32(seed)), (z[:3], p, seed)
    with pytest.raises(ValueError, match="numbers <= 0"):
        exp64(torch.tensor([0.5]))


def test_live_js_next_token_distribution_refuses_what_python_does(
        tmp_path):
    cases = [[[1.0, 2.0], -1, None, None], [[1.0], None, None, None],
             [[1.0], 1, 0, None], [[1.0], 1, 2.5, None],
             [[1.0], 1, None, 0], [[1.0], 1, None, 1.5],
             [[], 1, None, None], [[None, None], 1, None, None],
             [[1.0, "NaN"], 1, None, None]]
    script = NODE_DIST.replace("logitsOf(logits)",
                               "logitsOf(logits).map((x) => x === 'NaN' "
                               "? NaN : x)")
    got = run_node(tmp_path, script, {"cases": cases})
    words = ["temperature must be a finite number >= 0",
             "temperature must be a finite number >= 0",
             "topK must be null or a whole number >= 1",
             "topK must be null or a whole number >= 1",
             "topP must be null or a number in (0, 1]",
             "topP must be null or a number in (0, 1]",
             "logits must be a non-empty list", "every logit is -Infinity",
             "must not be NaN"]
    for w, out in zip(words, got):
        assert w in out["error"], (w, out)


NODE_FORWARD = NODE_HEAD + r"""
const [manifest, buffer] = readFolder(job.folder);
const problems = M.lmManifestProblems(manifest, buffer, {});
const model = M.makeLm(manifest, buffer);
const out = job.sequences.map((ids) => M.lmForward(model, ids));
console.log(JSON.stringify({problems,
  logits: out.map((r) => r.logits.map((row) => Array.from(row))),
  attention: out.map((r) => r.attention),
  read: job.texts.map((t) => M.readBeginning(model, t))}));
"""


@pytest.mark.parametrize("sizes", [{}, {"num_blks": 1, "num_heads": 4},
                                   {"num_hiddens": 8, "num_heads": 1}])
def test_live_js_runs_the_language_model_like_pytorch(data, tmp_path,
                                                      sizes):
    """The page's forward pass on the exported weights: the logits of
    every position and every block's attention weights equal
    LanguageModel's within 1e-5; typed text is read as data.tokens
    reads it, unknown words as <unk>."""
    run = tiny_lm(data, **sizes)
    folder = export_lm(run, tmp_path / "models")
    texts = ["Je suis content.", "", "il  EST  zorglub !", "Nous avons"]
    sequences = [prefix(run, t) for t in texts] + [
        prefix(run, "je suis") + [5, 9, 3, 12, 7, 7, 2]]
    sequences.append(list(range(24)))  # every position of max_len
    got = run_node(tmp_path, NODE_FORWARD, {
        "folder": str(folder), "sequences": sequences, "texts": texts})
    assert got["problems"] == []
    vocab = data.tgt_vocab
    for text, read in zip(texts, got["read"]):
        assert read["words"] == data.tokens(text)
        assert read["ids"] == prefix(run, text)
        assert read["tokens"] == vocab.to_tokens(prefix(run, text))
        assert read["unknown"] == [w for w in dict.fromkeys(
            data.tokens(text)) if w not in vocab]
    assert got["read"][2]["unknown"] == ["zorglub"]
    worst = 0.0
    with torch.no_grad():
        for ids, logits, attention in zip(sequences, got["logits"],
                                          got["attention"]):
            want = run.model(torch.tensor([ids]))[0].numpy()
            weights = torch.stack(run.model.attention_weights)[:, 0]
            worst = max(worst, float(np.abs(np.array(logits)
                                            - want).max()))
            worst = max(worst, float(np.abs(np.array(attention)
                                            - weights.numpy()).max()))
            assert np.array(attention).shape == tuple(weights.shape)
    assert worst < 1e-5
    # Not a vacuous check: the positions get other numbers.
    assert np.array(got["logits"][-1]).std(0).max() > 1e-2


NODE_GENERATE = NODE_HEAD + r"""
const [manifest, buffer] = readFolder(job.folder);
const model = M.makeLm(manifest, buffer);
const s = manifest.special;
console.log(JSON.stringify(job.cases.map(([ids, n, t, k, p, seed]) =>
  attempt(() => M.generate(model, ids, n, s.eos, t, k, p, seed,
                           manifest.forbidden)))));
"""


def test_live_js_generates_the_ids_d2lmini_generates(data, tmp_path):
    """generate in the page equals d2lmini.generation.generate exactly,
    for 6 seeds at greedy (temperature 0), temperatures 0.7, 1 and 1.5,
    with top-k and top-p, from several beginnings; greedy is the same
    for every seed; bad arguments get Python's refusals."""
    run = tiny_lm(data, noise=0.3)
    folder = export_lm(run, tmp_path / "models")
    vocab = data.tgt_vocab
    forbid = forbidden_ids(vocab)
    beginnings = [prefix(run, t) for t in ("", "je suis", "nous avons",
                                           "elle est très")]
    settings = [(0, None, None), (0.7, None, None), (1, None, None),
                (1.5, None, None), (1, 5, None), (1, None, 0.9),
                (0.7, 10, 0.8)]
    cases = [[ids, 15, t, k, p, seed] for ids in beginnings
             for t, k, p in settings for seed in (0, 1, 2, 3, 42,
                                                  2 ** 32 - 1)]
    cases.append([prefix(run, "je suis"), 0, 1, None, None, 0])
    cases.append([[vocab.bos] * 24, 1, 1, None, None, 0])  # max_len full
    got = run_node(tmp_path, NODE_GENERATE, {"folder": str(folder),
                                             "cases": cases})
    lengths, texts = [], set()
    for (ids, n, t, k, p, seed), out in zip(cases, got):
        want = generate(run.model, ids, n, vocab.eos, t, k, p, seed,
                        forbid)
        assert out == want, (ids, t, k, p, seed)
        assert not set(out) & set(forbid)
        lengths.append(len(out))
        texts.add(tuple(out))
    # Not vacuous: short and long continuations, many different ones,
    # <eos> drawn in some.
    assert min(lengths[:-2]) < 15 and max(lengths) == 15
    assert len(texts) > 50
    greedy = [o for c, o in zip(cases, got) if c[2] == 0]
    for b in range(len(beginnings)):  # one greedy text per beginning
        assert len({tuple(o) for o in greedy[6 * b:6 * b + 6]}) == 1
    bad = [[[vocab.bos], -1, 1, None, None, 0],
           [[], 5, 1, None, None, 0],
           [[vocab.bos, 999], 5, 1, None, None, 0],
           [[vocab.bos] * 20, 6, 1, None, None, 0],
           [[vocab.bos], 5, 1, None, None, -3],
           [[vocab.bos], 5, -1, None, None, 0]]
    errors = run_node(tmp_path, NODE_GENERATE, {"folder": str(folder),
                                                "cases": bad})
    words = ["maxNewTokens must be a whole number >= 0",
             "prefixIds must hold at least one id",
             "must hold ids in [0,", "exceed the model's max_len=24",
             "seed must be a whole number", "temperature must be"]
    for w, out in zip(words, errors):
        assert w in out["error"], (w, out)


NODE_SHA = NODE_HEAD + r"""
console.log(JSON.stringify({sha: job.manifests.map(M.lmModelSha256),
                            fields: M.LM_MODEL_FIELDS}));
"""


def test_live_js_model_sha256_equals_python(data, tmp_path):
    run = tiny_lm(data)
    manifest = json.loads((export_lm(run, tmp_path) / "manifest.json")
                          .read_text())
    edited = [{**manifest, "vocab": manifest["vocab"][:-1] + ["é\u2028"]},
              {k: v for k, v in manifest.items() if k != "forbidden"},
              {**manifest, "tie_weights": False}]
    got = run_node(tmp_path, NODE_SHA, {"manifests": [manifest, *edited]})
    assert got["sha"] == [lm_model_sha256(m) for m in [manifest, *edited]]
    assert len(set(got["sha"])) == len(got["sha"])
    assert tuple(got["fields"]) == LM_MODEL_FIELDS


def corrupted(manifest):
    """Edited copies of a valid LM manifest, each with the words the
    page's answer must contain."""
    tensors = manifest["tensors"]

    def edit(**changes):
        return {**copy.deepcopy(manifest), **changes}

    def tensor(name, drop=False, **changes):
        t = copy.deepcopy(tensors)
        if drop:
            del t[name]
        else:
            t[name] = {**t.get(name, {}), **changes}
        return edit(tensors=t)

    matrix = "blks.0.ffn.dense1.weight"
    fp, vocab, special = (manifest["fingerprint"], manifest["vocab"],
                          manifest["special"])
    yield edit(format=2), ("format 2, where this page reads format 1 of "
                           "a language model")
    yield tensor(matrix, shape=tensors[matrix]["shape"][::-1]), \
        f"tensor {matrix} has shape"
    yield tensor("constructor", shape=[1], offset=0), \
        "tensor constructor is not part of the model"
    yield tensor("__proto__", shape=[1], offset=0), \
        "tensor __proto__ is not part of the model"
    yield tensor("dense.bias", drop=True), "tensor dense.bias is missing"
    yield tensor("blks.0.attention.W_q.bias", offset=0), \
        "tensor blks.0.attention.W_q.bias: offset 0"
    yield edit(tie_weights=False), "tensor dense.weight is missing"
    yield edit(tie_weights="yes"), 'tie_weights "yes" is not true or false'
    yield edit(num_heads=3), "num_heads 3 does not divide num_hiddens 16"
    yield edit(num_blks=2.5), "num_blks 2.5 is not a whole number"
    yield edit(vocab_size=len(vocab) + 1), \
        f"vocab holds {len(vocab)} tokens, where vocab_size is"
    yield edit(vocab=vocab[:3] + [vocab[3]] * (len(vocab) - 3)), \
        "vocab holds a token twice"
    yield edit(vocab=[1] * len(vocab)), "vocab is not a list of tokens"
    yield edit(special={**special, "eos": special["bos"]}), \
        "special.eos"
    yield edit(special=None), "special is missing"
    yield edit(forbidden=[0, len(vocab)]), "is not a list of ids of vocab"
    yield edit(forbidden=[special["eos"]]), "forbidden holds <eos>"
    yield edit(fingerprint={**fp, "recipe": "0" * 16}), \
        "is not lm-french-0000000000000000"
    yield edit(fingerprint={k: v for k, v in fp.items()
                            if k != "device"}), "does not give"
    yield edit(weights_sha256="x"), "is not a sha256"
    yield edit(weights="w.bin"), "the name its sha256 gives"
    yield edit(weights_bytes=manifest["weights_bytes"] + 4), \
        "the tensors hold"


NODE_PROBLEMS = NODE_HEAD + r"""
const [, buffer] = readFolder(job.folder);
console.log(JSON.stringify(job.manifests.map(
  (m) => M.lmManifestProblems(m, buffer, job.expected))));
"""


def test_live_js_says_what_is_wrong_with_an_lm_manifest(data, tmp_path):
    run = tiny_lm(data)
    folder = export_lm(run, tmp_path / "models")
    manifest = json.loads((folder / "manifest.json").read_text())
    cases = list(corrupted(manifest))
    got = run_node(tmp_path, NODE_PROBLEMS, {
        "folder": str(folder), "expected": {},
        "manifests": [manifest] + [m for m, _ in cases]})
    assert got[0] == []
    for (_, words), problems in zip(cases, got[1:]):
        assert any(words in p for p in problems), (words, problems)
        for p in problems:
            assert "undefined" not in p and "[object" not in p, p
    spec = payload(text_writer(run))
    expected = {k: spec[k] for k in ("vocab_size", "num_hiddens",
                                     "max_len")}
    got = run_node(tmp_path, NODE_PROBLEMS, {
        "folder": str(folder), "manifests": [manifest],
        "expected": {**expected, "max_len": 32, "checkpoint": "lm-x"}})
    assert got[0] == ["it holds checkpoint \"" + manifest["checkpoint"]
                      + "\", not lm-x",
                      "max_len 24, where the section's model has 32"]


NODE_LOAD = NODE_HEAD + r"""
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
    for (const [name, b64] of Object.entries(step.write || {})) {
      fs.writeFileSync(job.folder + "/" + name, Buffer.from(b64, "base64"));
    }
    try {
      const m = await M.loadLm("models/", job.checkpoint, null,
                               step.expected);
      const s = m.manifest.special;
      out.push({ids: M.generate(m, job.ids, 10, s.eos, 1, null, null, 3,
                                m.manifest.forbidden),
                said: M.lmWeightsStatement(job.data, m.manifest)});
    } catch (err) {
      out.push({error: err.message});
    }
  }
  console.log(JSON.stringify(out));
})();
"""


def test_live_js_loads_only_the_lm_its_manifest_describes(data, tmp_path):
    """loadLm refuses, with an Error that says what is wrong: a weights
    file of another sha256 (one bit flipped), NaN weights whose sha256
    matches, an extra tensor named "constructor", a manifest that names
    the section's weights but describes them otherwise (another
    vocabulary); it loads the exported model, writes what d2lmini
    writes, and says whether it runs the section's weights."""
    run = tiny_lm(data)
    spec = payload(text_writer(run))
    folder = export_lm(run, tmp_path / "models", evaluated=spec)
    manifest = json.loads((folder / "manifest.json").read_text())
    good = (folder / manifest["weights"]).read_bytes()
    flipped = bytearray(good)
    flipped[100] ^= 0x40
    nan = np.full(len(good) // 4, np.nan, dtype="<f4").tobytes()
    nan_name = f"weights-{sha256(nan)[:16]}.bin"
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    js = lambda m: b64(json.dumps(m).encode())  # noqa: E731
    recorded = {k: spec[k] for k in ("weights_sha256", "model_sha256")}
    extra = copy.deepcopy(manifest)
    extra["tensors"]["constructor"] = {"shape": [1], "offset": 0}
    swapped = copy.deepcopy(manifest)
    swapped["vocab"][5], swapped["vocab"][6] = swapped["vocab"][6], \
        swapped["vocab"][5]
    steps = [
        {"expected": recorded},
        {"expected": {**recorded, "num_heads": 4}},
        {"write": {manifest["weights"]: b64(bytes(flipped))}},
        {"write": {manifest["weights"]: b64(good), nan_name: b64(nan),
                   "manifest.json": js({**manifest, "weights": nan_name,
                                        "weights_sha256": sha256(nan)})}},
        {"write": {"manifest.json": js(extra)}},
        {"write": {"manifest.json": js(swapped)}, "expected": recorded},
        {"write": {"manifest.json": js(manifest)}, "expected": recorded},
    ]
    ids = prefix(run, "je suis")
    got = run_node(tmp_path, NODE_LOAD, {
        "folder": str(folder), "checkpoint": manifest["checkpoint"],
        "steps": steps, "ids": ids, "data": spec})
    vocab = data.tgt_vocab
    assert got[0]["ids"] == generate(run.model, ids, 10, vocab.eos, 1,
                                     seed=3, forbid=forbidden_ids(vocab))
    assert got[0]["said"] == {"case": "same", "text": (
        "These are the weights the section evaluated (validation "
        "perplexity 12.3).")}
    valid = "the model's files are not valid: "
    assert got[1]["error"] == (
        f"{valid}num_heads 2, where the section's model has 4")
    assert "is not the file its manifest describes (another sha256)" in \
        got[2]["error"]
    assert got[3]["error"].startswith(valid)
    assert "numbers that are not finite" in got[3]["error"]
    assert "tensor constructor is not part of the model" in got[4]["error"]
    assert "names the weights the section evaluated but does not " \
        "describe them as the section's run did" in got[5]["error"]
    assert got[6] == got[0]


NODE_SAID = NODE_HEAD + r"""
console.log(JSON.stringify(job.map(([d, m]) => M.lmWeightsStatement(d, m))));
"""


def test_live_js_says_which_lm_weights_it_runs(data, tmp_path):
    run = tiny_lm(data)
    spec = payload(text_writer(run))
    manifest = json.loads((export_lm(run, tmp_path, evaluated=spec)
                           / "manifest.json").read_text())
    other = {**manifest, "weights_sha256": "1" * 64, "val_ppl": 20.04}
    code = {**other, "fingerprint": {**manifest["fingerprint"],
                                     "code": "x"}}
    got = run_node(tmp_path, NODE_SAID, [
        [spec, manifest], [{**spec, "val_ppl": 19.24}, other],
        [spec, code], [{**spec, "weights_sha256": None}, manifest],
        [spec, {**manifest, "max_len": 30}],
        [{**spec, "val_ppl": None}, {**other, "val_ppl": None}]])
    assert got[0] == {"case": "same", "text": (
        "These are the weights the section evaluated (validation "
        "perplexity 12.3).")}
    assert got[1]["case"] == "other"
    assert got[1]["text"] == (
        "This site was built on a machine that trained its own weights "
        "from the same code and seed (float rounding differs from one "
        "machine to another): their validation perplexity is 20.0; the "
        "run this section reports, 19.2.")
    assert got[2]["text"].startswith("This site was built with other code")
    assert got[3] is None and got[4] is None
    assert got[5]["text"].endswith("they are not the weights the section "
                                   "evaluated.")


# ---- scripts/export_models.py ---------------------------------------------

def notebook_with(*outputs):
    """A notebook of one code cell whose HTML outputs are ``outputs``."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("d2l.live.text_writer(run)")
    cell.outputs = [nbformat.v4.new_output(
        "display_data", data={"text/html": o.html}) for o in outputs]
    nb.cells.append(cell)
    return nb


def test_export_models_exports_the_text_writers_model(data, tmp_path,
                                                      monkeypatch):
    """The script finds a notebook's text-writer output, exports its
    language model into dest/lm-french-<key>/ (with the manifest's
    digest), keeps it while it is up to date, exports an edited manifest
    again, deletes an lm-* export no notebook runs, and fails when the
    cached model is not the one the notebook evaluated."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # it adds scripts/
    script = load_script("export_models")
    run = tiny_lm(data)
    live = text_writer(run)
    spec = payload(live)
    root = tmp_path / "book"
    root.mkdir()
    nbformat.write(notebook_with(live), root / "nb.ipynb")
    monkeypatch.setattr(script, "ROOT", root)
    monkeypatch.setattr(script, "toc_notebooks", lambda: ["nb.ipynb"])
    loads = []
    monkeypatch.setattr("d2lmini.lm.train_or_load_lm",
                        lambda r: loads.append(r) or run)
    dest = tmp_path / "models"
    old = export_lm(tiny_lm(data, num_blks=1), dest)  # not run now
    assert script.main(["--dest", str(dest)]) == 0
    assert loads == [run.recipe]
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        [script.LOCK, spec["checkpoint"]])
    assert not old.exists()
    folder = dest / spec["checkpoint"]
    raw = (folder / "manifest.json").read_bytes()
    manifest = json.loads(raw)
    assert (folder / script.DIGEST).read_text().split()[0] == sha256(raw)
    assert manifest["notebook"] == lm_notebook_record(spec)
    assert manifest["weights_sha256"] == spec["weights_sha256"]
    line = script.export_language_model(spec, dest)
    assert line.endswith("up to date (validation perplexity 12.3: the "
                         "weights the notebook evaluated)")
    assert len(loads) == 1
    (folder / "manifest.json").write_text(json.dumps(
        {**manifest, "max_len": 30}, indent=1))
    assert "up to date" not in script.export_language_model(spec, dest)
    assert len(loads) == 2
    assert (folder / "manifest.json").read_bytes() == raw
    stale = {**spec, "fingerprint": {**spec["fingerprint"], "code": "0"}}
    with pytest.raises(SystemExit, match=r"another code; run `make "
                       r"execute`"):
        script.export_language_model(stale, tmp_path / "elsewhere")
    moved = {**spec, "checkpoint": "lm-french-0000000000000000"}
    with pytest.raises(SystemExit, match="its recipe now makes"):
        script.export_language_model(moved, tmp_path / "elsewhere")
