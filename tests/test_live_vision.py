"""Tests of d2lmini.live_vision (the digit classifier's data and the
ViT's export) and of the page's vision script (d2lmini/js/vit.js) run in
Node: its bitmaps and counts against ``d2lmini.digits``, its forward
pass against ``d2lmini.vit``, its checks of a model folder.

Small untrained ViTs, with seeded noise on every weight, stand for the
section's model: nothing needs the model cache.  The browser checks of
the explorer are in tests/test_site_live.py.
"""

import base64
import copy
import dataclasses
import hashlib
import json
import math
import sys

import nbformat
import numpy as np
import pytest
import torch
from test_live import load_script, run_node

from d2lmini.digits import Digits, counts_from_bitmap
from d2lmini.live import (
    MODELS_URL,
    VIT_MANIFEST_FORMAT,
    VIT_MODEL_FIELDS,
    LiveHTML,
    digit_classifier,
    export_vit,
    live_js,
    payloads,
    vision_js,
    vit_model_sha256,
    vit_notebook_record,
    weights_bytes,
)
from d2lmini.vision import VisionRun, checkpoint_path, fingerprint
from d2lmini.vit import VisionRecipe, accuracy, cls_attention, predict


@pytest.fixture(scope="module")
def data():
    return Digits()


def tiny_vit(data, patch_size=2, pool="cls", seed=0, noise=0.5, **sizes):
    """A VisionRun of a small untrained ViT (D = 16, 2 heads, 2 blocks,
    F = 32, unless ``sizes`` say otherwise) whose every weight has
    seeded noise of standard deviation ``noise`` added: no weight is
    left at its initial 0 or 1."""
    recipe = VisionRecipe(patch_size=patch_size, pool=pool,
                          **{"num_hiddens": 16, "mlp_num_hiddens": 32,
                             "num_heads": 2, "num_blks": 2, **sizes})
    model = recipe.build()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(noise * torch.randn(p.shape, generator=gen))
    history = {"steps": [1], "loss": [0.0], "val_acc": [0.0],
               "seconds": 0.0}
    return VisionRun(model.eval(), data, history, recipe, False)


def payload(live):
    assert isinstance(live, LiveHTML) and live.kind == "digit-classifier"
    found = payloads(live.html, "digit-classifier")
    assert len(found) == 1
    return found[0]


def sha256(b):
    return hashlib.sha256(b).hexdigest()


# ---- the notebook's output and the export ---------------------------------

def test_digit_classifier_names_its_model_and_the_first_test_images(data):
    run = tiny_vit(data)
    spec = payload(digit_classifier(run))
    recipe = run.recipe
    assert spec["checkpoint"] == checkpoint_path(recipe).stem == \
        f"vision-vit-{recipe.key()}"
    assert spec["recipe"] == dataclasses.asdict(recipe)
    assert spec["fingerprint"] == fingerprint(recipe, data)
    assert spec["weights_sha256"] == sha256(weights_bytes(run.model))
    assert spec["weights_bytes"] == 4 * sum(
        v.numel() for v in run.model.state_dict().values())
    assert (spec["patch_size"], spec["num_heads"], spec["num_blks"]) == \
        (2, 2, 2)
    assert spec["test_accuracy"] == accuracy(run.model, *data.test)
    assert spec["test_images"] == len(data.test[1]) == 360
    assert spec["base"] == MODELS_URL and spec["examples_per_class"] == 2
    # The first two test images of each class, in test order.
    counts, labels = data.counts["test"]
    want = [i for i in range(len(labels))
            if (labels[:i] == labels[i]).sum() < 2]
    assert [e["index"] for e in spec["examples"]] == want
    assert len(want) == 20
    for e in spec["examples"]:
        assert e["label"] == labels[e["index"]].item()
        assert e["counts"] == counts[e["index"]].tolist()
    one = payload(digit_classifier(run, 1, base="models/"))
    assert [e["index"] for e in one["examples"]] == \
        [i for i in want if (labels[:i] == labels[i]).sum() == 0]
    assert one["base"] == "models/"
    html = digit_classifier(run).html
    assert live_js() in html and vision_js() in html
    assert "runs the model in the page" in html


def test_digit_classifier_rejects_bad_arguments(data):
    run = tiny_vit(data)
    with pytest.raises(TypeError, match="must be the VisionRun"):
        digit_classifier(run.model)
    with pytest.raises(TypeError, match="must be the VisionRun"):
        digit_classifier(tuple(run))
    cnn = VisionRecipe(model="cnn")
    with pytest.raises(TypeError, match="runs a ViT.*CNN"):
        digit_classifier(run._replace(model=cnn.build(), recipe=cnn))
    with pytest.raises(ValueError, match="does not describe its model"):
        digit_classifier(run._replace(recipe=run.recipe.replace(
            patch_size=4)))
    with pytest.raises(ValueError, match="does not describe its model"):
        digit_classifier(run._replace(recipe=run.recipe.replace(
            model="mlp")))
    for bad, error in ((0, ValueError), (-1, ValueError), (11, ValueError),
                       (2.0, TypeError), (True, TypeError),
                       ("2", TypeError)):
        with pytest.raises(error, match="examples_per_class"):
            digit_classifier(run, bad)
    with pytest.raises(TypeError, match="base must be a URL"):
        digit_classifier(run, base=None)


def test_export_vit_writes_what_the_notebook_names(data, tmp_path):
    run = tiny_vit(data, patch_size=4, pool="mean")
    spec = payload(digit_classifier(run))
    folder = export_vit(run, tmp_path, evaluated=spec)
    assert folder == tmp_path / spec["checkpoint"]
    manifest = json.loads((folder / "manifest.json").read_text())
    state = run.model.state_dict()
    weights = weights_bytes(run.model)
    assert manifest["format"] == VIT_MANIFEST_FORMAT
    assert manifest["checkpoint"] == spec["checkpoint"]
    assert manifest["fingerprint"] == spec["fingerprint"]
    assert manifest["recipe"] == spec["recipe"]
    assert {k: manifest[k] for k in (
        "image_size", "num_classes", "patch_size", "num_hiddens",
        "mlp_num_hiddens", "num_heads", "num_blks", "pool")} == {
        "image_size": 8, "num_classes": 10, "patch_size": 4,
        "num_hiddens": 16, "mlp_num_hiddens": 32, "num_heads": 2,
        "num_blks": 2, "pool": "mean"}
    assert (manifest["mean"], manifest["std"]) == (data.mean, data.std)
    assert list(manifest["tensors"]) == list(state)  # state-dict order
    offset = 0
    for name, value in state.items():
        assert manifest["tensors"][name] == {"shape": list(value.shape),
                                             "offset": offset}
        offset += value.numel()
    assert manifest["weights"] == f"weights-{sha256(weights)[:16]}.bin"
    assert (folder / manifest["weights"]).read_bytes() == weights
    assert manifest["weights_bytes"] == len(weights) == 4 * offset
    assert manifest["weights_sha256"] == sha256(weights)
    assert manifest["test_accuracy"] == spec["test_accuracy"]
    assert manifest["test_images"] == 360
    assert manifest["notebook"] == vit_notebook_record(spec) == {
        "weights_sha256": spec["weights_sha256"],
        "model_sha256": spec["model_sha256"],
        "test_accuracy": spec["test_accuracy"]}
    assert vit_model_sha256(manifest) == spec["model_sha256"]
    # The fields a model_sha256 covers change it; the rest does not.
    for k in VIT_MODEL_FIELDS:
        assert vit_model_sha256({**manifest, k: "x"}) != spec[
            "model_sha256"], k
    assert vit_model_sha256({**manifest, "test_accuracy": 0}) == \
        spec["model_sha256"]
    # Other weights replace the pair; the replaced manifest's weights
    # stay for a browser that cached it.
    other = tiny_vit(data, patch_size=4, pool="mean", seed=1)
    export_vit(other, tmp_path)
    new = json.loads((folder / "manifest.json").read_text())
    assert new["notebook"] is None
    assert new["weights_sha256"] == sha256(weights_bytes(other.model))
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["manifest.json", manifest["weights"], new["weights"]])


# ---- the page's script in Node --------------------------------------------

NODE_HEAD = r"""
const fs = require("fs");
require(process.argv[2]);
const V = globalThis.d2lVision;
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
"""

NODE_BITMAPS = NODE_HEAD + r"""
console.log(JSON.stringify({
  flat: job.bitmaps.map((b) => V.countsFromBitmap(b.flat())),
  nested: job.bitmaps.map((b) => V.countsFromBitmap(b)),
  back: job.counts.map((c) => Array.from(V.bitmapFromCounts(c))),
  bad: job.bad.map((b) => attempt(() => V.countsFromBitmap(b))),
  badCounts: job.badCounts.map((c) => attempt(() => V.bitmapFromCounts(c))),
}));
"""


def test_live_js_counts_a_bitmap_as_the_digits_were_made(data, tmp_path):
    """countsFromBitmap equals counts_from_bitmap on random bitmaps of
    every density; bitmapFromCounts gives back the counts of every test
    image (and random counts), by the page's and by d2lmini's
    counting; bad bitmaps and counts get an Error that says why."""
    rng = np.random.default_rng(0)
    bitmaps = [(rng.random((32, 32)) < q).astype(int)
               for q in (0, 0.05, 0.3, 0.5, 0.9, 1)]
    counts = data.counts["test"][0].tolist() + rng.integers(
        0, 17, (20, 8, 8)).tolist() + [[[16] * 8] * 8, [[0] * 8] * 8]
    bad = [[[0] * 32] * 31, [0] * 1023, [[2] + [0] * 31] + [[0] * 32] * 31,
           None]
    bad_counts = [[[17] * 8] * 8, [[0.5] * 8] * 8, [[0] * 8] * 7,
                  [[-1] * 8] * 8]
    got = run_node(tmp_path, NODE_BITMAPS, {
        "bitmaps": [b.tolist() for b in bitmaps], "counts": counts,
        "bad": bad, "badCounts": bad_counts})
    want = [counts_from_bitmap(b).tolist() for b in bitmaps]
    assert got["flat"] == want and got["nested"] == want
    back = np.array(got["back"]).reshape(-1, 32, 32)
    assert set(np.unique(back)) <= {0, 1}
    assert counts_from_bitmap(back).tolist() == counts
    assert "a bitmap is 32 x 32" in got["bad"][0]["error"]
    assert "a bitmap is 32 x 32" in got["bad"][1]["error"]
    assert "only 0 and 1, got 2 at row 0, column 0" in got["bad"][2][
        "error"]
    assert "a bitmap is 32 x 32" in got["bad"][3]["error"]
    assert "whole numbers in 0..16, got 17" in got["badCounts"][0]["error"]
    assert "got 0.5" in got["badCounts"][1]["error"]
    assert "8 rows of 8" in got["badCounts"][2]["error"]
    assert "got -1" in got["badCounts"][3]["error"]


NODE_LINE = NODE_HEAD + r"""
console.log(JSON.stringify(job.map(([a, b]) => attempt(
  () => V.lineCells(a.map((v) => (v === null ? NaN : v)), b)))));
"""


def test_live_js_line_cells_refuses_a_cell_that_is_not_whole(tmp_path):
    """A stroke's line joins whole cells; a NaN cell (a pointer on a
    grid laid out at zero size gave one) is refused at once instead of
    looping until the tab runs out of memory."""
    got = run_node(tmp_path, NODE_LINE, [[[0, 0], [2, 3]], [[5, 5], [5, 5]],
                                         [[None, None], [3, 3]],
                                         [[1.5, 0], [3, 3]]])
    assert got[0] == [[0, 0], [1, 1], [1, 2], [2, 3]]
    assert got[1] == [[5, 5]]
    for bad in got[2:]:
        assert "whole-number cells" in bad["error"]


NODE_ERF = NODE_HEAD + r"""
console.log(JSON.stringify({erf: job.xs.map(V.erf),
                            gelu: job.xs.map(V.gelu)}));
"""


def test_live_js_erf_and_gelu_equal_python(tmp_path):
    """The page's exact GELU: erf to about 1e-15 of math.erf, GELU to
    torch's exact GELU in float64."""
    xs = np.concatenate([np.linspace(-9, 9, 3601), [0.0, 1e-300, -1e-10,
                                                    5.999, 6.0, 6.001]])
    got = run_node(tmp_path, NODE_ERF, {"xs": xs.tolist()})
    erf = np.array([math.erf(x) for x in xs])
    assert np.abs(np.array(got["erf"]) - erf).max() < 1e-14
    gelu = torch.nn.functional.gelu(torch.tensor(xs, dtype=torch.float64))
    assert np.abs(np.array(got["gelu"]) - gelu.numpy()).max() < 1e-13


NODE_FORWARD = NODE_HEAD + r"""
const [manifest, buffer] = readFolder(job.folder);
const problems = V.vitManifestProblems(manifest, buffer, {});
const model = V.makeVit(manifest, buffer);
const out = job.counts.map((c) => V.vitForward(model, c));
console.log(JSON.stringify({problems, probs: out.map((r) => r.probs),
                            cls: out.map((r) => r.cls),
                            prediction: out.map((r) => r.prediction)}));
"""


@pytest.mark.parametrize("patch_size, pool", [(2, "cls"), (4, "cls"),
                                              (4, "mean"), (1, "cls")])
def test_live_js_classifies_like_d2lmini(data, tmp_path, patch_size, pool):
    """The page's forward pass on the exported weights: probabilities
    and the <cls> attention of every block and head equal
    d2lmini.vit.predict and cls_attention within 1e-5 on test images
    (the menu's, then others)."""
    run = tiny_vit(data, patch_size, pool)
    spec = payload(digit_classifier(run))
    folder = export_vit(run, tmp_path / "models")
    counts = [e["counts"] for e in spec["examples"]] + \
        data.counts["test"][0][100:120].tolist()
    got = run_node(tmp_path, NODE_FORWARD, {"folder": str(folder),
                                            "counts": counts})
    assert got["problems"] == []
    X = data.normalize(torch.tensor(counts))
    probs = predict(run.model, X).numpy()
    cls = cls_attention(run.model, X).permute(1, 0, 2, 3).numpy()
    assert np.array(got["cls"]).shape == cls.shape == (
        len(counts), 2, 2, (8 // patch_size) ** 2)
    assert np.abs(np.array(got["probs"]) - probs).max() < 1e-5
    assert np.abs(np.array(got["cls"]) - cls).max() < 1e-5
    assert got["prediction"] == probs.argmax(-1).tolist()
    # Not a vacuous check: the images get other numbers.
    assert probs.std(0).max() > 1e-3 and cls.std(0).max() > 1e-3


NODE_SHA = NODE_HEAD + r"""
console.log(JSON.stringify({
  sha: job.manifests.map(V.vitModelSha256),
  floats: job.floats.map(V.pythonFloat),
  fields: V.VIT_MODEL_FIELDS}));
"""


def test_live_js_model_sha256_equals_python(data, tmp_path):
    """vitModelSha256 equals vit_model_sha256, with mean and std written
    as Python writes a float (16.0, 1e-05, 1e+16 ...), on the export's
    manifest and on edited ones; pythonFloat equals repr on floats of
    every magnitude."""
    run = tiny_vit(data)
    manifest = json.loads((export_vit(run, tmp_path) / "manifest.json")
                          .read_text())
    odd = [16.0, 1e-05, 1e16, 9999999999999998.0, 0.0001, 0.1, 1.5e-300,
           123456789.125, -2.5e-7, 1e22, 5e-324, -0.0, 0.0, 3.0e15]
    rng = np.random.default_rng(1)
    floats = odd + (rng.standard_normal(300) * 10.0 ** rng.integers(
        -12, 25, 300)).tolist()
    edited = [{**manifest, "mean": x, "std": -x} for x in odd] + [
        {k: v for k, v in manifest.items() if k != "std"},
        {**manifest, "pool": "mean"}]
    got = run_node(tmp_path, NODE_SHA, {"manifests": [manifest, *edited],
                                        "floats": floats})
    assert got["floats"] == [repr(x) for x in floats]
    assert got["sha"] == [vit_model_sha256(m) for m in [manifest, *edited]]
    assert len(set(got["sha"])) == len(got["sha"])
    assert tuple(got["fields"]) == VIT_MODEL_FIELDS


def corrupted(manifest):
    """Edited copies of a valid ViT manifest, each with the words the
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

    matrix = "blks.0.mlp.dense1.weight"
    fp = manifest["fingerprint"]
    yield edit(format=2), "format 2, where this page reads format 1 of a ViT"
    yield tensor(matrix, shape=tensors[matrix]["shape"][::-1]), \
        f"tensor {matrix} has shape"
    yield tensor("constructor", shape=[1], offset=0), \
        "tensor constructor is not part of the model"
    yield tensor("__proto__", shape=[1], offset=0), \
        "tensor __proto__ is not part of the model"
    yield tensor("head.1.bias", drop=True), "tensor head.1.bias is missing"
    yield tensor("cls_token", offset=16), "tensor cls_token: offset 16"
    yield edit(num_heads=3), "num_heads 3 does not divide num_hiddens 16"
    yield edit(patch_size=3), "patch_size 3 does not divide image_size 8"
    yield edit(image_size=16), "where the page draws 8 x 8 digits"
    yield edit(num_classes=2.5), "num_classes 2.5 is not a whole number"
    yield edit(pool="max"), 'pool "max" is not one of cls, mean'
    yield edit(std=0.0), "std 0 is not positive"
    yield edit(mean="4.9"), 'mean "4.9" is not a finite number'
    yield edit(fingerprint={**fp, "recipe": "0" * 16}), \
        "is not vision-vit-0000000000000000"
    yield edit(fingerprint={k: v for k, v in fp.items()
                            if k != "device"}), "does not give"
    yield edit(weights_sha256="x"), "is not a sha256"
    yield edit(weights="w.bin"), "the name its sha256 gives"
    yield edit(weights_bytes=manifest["weights_bytes"] + 4), \
        "the tensors hold"


NODE_PROBLEMS = NODE_HEAD + r"""
const [, buffer] = readFolder(job.folder);
console.log(JSON.stringify(job.manifests.map(
  (m) => V.vitManifestProblems(m, buffer, {}))));
"""


def test_live_js_says_what_is_wrong_with_a_vit_manifest(data, tmp_path):
    run = tiny_vit(data)
    folder = export_vit(run, tmp_path / "models")
    manifest = json.loads((folder / "manifest.json").read_text())
    cases = list(corrupted(manifest))
    got = run_node(tmp_path, NODE_PROBLEMS, {
        "folder": str(folder), "manifests": [manifest] + [
            m for m, _ in cases]})
    assert got[0] == []
    for (_, words), problems in zip(cases, got[1:]):
        assert any(words in p for p in problems), (words, problems)
        for p in problems:
            assert "undefined" not in p and "[object" not in p, p


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
      const m = await V.loadVit("models/", job.checkpoint, null,
                                step.expected);
      out.push({probs: V.vitForward(m, job.counts).probs,
                said: V.vitWeightsStatement(job.data, m.manifest)});
    } catch (err) {
      out.push({error: err.message});
    }
  }
  console.log(JSON.stringify(out));
})();
"""


def test_live_js_loads_only_the_vit_its_manifest_describes(data, tmp_path):
    """loadVit refuses, with an Error that says what is wrong: a
    weights file of another sha256 (one bit flipped), NaN weights whose
    sha256 matches, an extra tensor named "constructor", a tensor of
    the wrong shape, a manifest that names the section's weights but
    describes them otherwise (another std); it loads the exported
    model, and says whether it runs the section's weights."""
    run = tiny_vit(data)
    spec = payload(digit_classifier(run))
    folder = export_vit(run, tmp_path / "models")
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
    shape = copy.deepcopy(manifest)
    shape["tensors"]["head.1.weight"]["shape"] = [16, 10]
    steps = [
        {"expected": recorded},
        {"expected": {**recorded, "num_heads": 4}},
        {"write": {manifest["weights"]: b64(bytes(flipped))}},
        {"write": {manifest["weights"]: b64(good), nan_name: b64(nan),
                   "manifest.json": js({**manifest, "weights": nan_name,
                                        "weights_sha256": sha256(nan)})}},
        {"write": {"manifest.json": js(extra)}},
        {"write": {"manifest.json": js(shape)}},
        {"write": {"manifest.json": js({**manifest, "std": manifest[
            "std"] * (1 + 1e-6)})}, "expected": recorded},
        {"write": {"manifest.json": js(manifest)}, "expected": recorded},
    ]
    counts = spec["examples"][3]["counts"]
    got = run_node(tmp_path, NODE_LOAD, {
        "folder": str(folder), "checkpoint": manifest["checkpoint"],
        "steps": steps, "counts": counts, "data": spec})
    want = predict(run.model, data.normalize(torch.tensor(counts)))[0]
    assert np.abs(np.array(got[0]["probs"]) - want.numpy()).max() < 1e-5
    assert got[0]["said"]["case"] == "same"
    assert got[0]["said"]["text"].startswith(
        "These are the weights the section evaluated (test accuracy ")
    valid = "the model's files are not valid: "
    assert got[1]["error"] == (
        f"{valid}num_heads 2, where the section's model has 4")
    assert "is not the file its manifest describes (another sha256)" in \
        got[2]["error"]
    assert got[3]["error"].startswith(valid)
    assert "numbers that are not finite" in got[3]["error"]
    assert got[4]["error"].startswith(valid)
    assert "tensor constructor is not part of the model" in got[4]["error"]
    assert "tensor head.1.weight has shape [16,10], where the manifest's " \
        "sizes make it [10,16]" in got[5]["error"]
    assert "names the weights the section evaluated but does not " \
        "describe them as the section's run did" in got[6]["error"]
    assert got[7] == got[0]


NODE_SAID = NODE_HEAD + r"""
console.log(JSON.stringify(job.map(([d, m]) => V.vitWeightsStatement(d, m))));
"""


def test_live_js_says_which_vit_weights_it_runs(data, tmp_path):
    run = tiny_vit(data)
    spec = payload(digit_classifier(run))
    manifest = json.loads((export_vit(run, tmp_path, evaluated=spec)
                           / "manifest.json").read_text())
    other = {**manifest, "weights_sha256": "1" * 64, "test_accuracy": 0.5}
    code = {**other, "fingerprint": {**manifest["fingerprint"],
                                     "code": "x"}}
    got = run_node(tmp_path, NODE_SAID, [
        [spec, manifest], [{**spec, "test_accuracy": 0.25}, other],
        [spec, code], [{**spec, "weights_sha256": None}, manifest],
        [spec, {**manifest, "std": 1.0}]])
    acc = f"{100 * spec['test_accuracy']:.1f} %"
    assert got[0] == {"case": "same", "text": (
        f"These are the weights the section evaluated (test accuracy "
        f"{acc} on its 360 test images).")}
    assert got[1]["case"] == "other"
    assert got[1]["text"].startswith("This site was built on a machine "
                                     "that trained its own weights")
    assert got[1]["text"].endswith("they classify 50.0 % of the 360 test "
                                   "images; the run this section "
                                   "reports, 25.0 %.")
    assert got[2]["text"].startswith("This site was built with other code")
    assert got[3] is None and got[4] is None


# ---- scripts/export_models.py ---------------------------------------------

def notebook_with(*outputs):
    """A notebook of one code cell whose HTML outputs are ``outputs``."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("d2l.live.digit_classifier(run)")
    cell.outputs = [nbformat.v4.new_output(
        "display_data", data={"text/html": o.html}) for o in outputs]
    nb.cells.append(cell)
    return nb


def test_export_models_exports_the_digit_classifiers_vit(data, tmp_path,
                                                         monkeypatch):
    """The script finds a notebook's digit-classifier output, exports
    its ViT into dest/vision-vit-<key>/ (with the manifest's digest),
    keeps it while it is up to date, exports an edited manifest again,
    deletes a vision-* export no notebook runs, and fails when the
    cached model is not the one the notebook evaluated."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # it adds scripts/
    script = load_script("export_models")
    run = tiny_vit(data)
    live = digit_classifier(run)
    spec = payload(live)
    root = tmp_path / "book"
    root.mkdir()
    nbformat.write(notebook_with(live), root / "nb.ipynb")
    monkeypatch.setattr(script, "ROOT", root)
    monkeypatch.setattr(script, "toc_notebooks", lambda: ["nb.ipynb"])
    loads = []
    monkeypatch.setattr("d2lmini.vision.train_or_load",
                        lambda r: loads.append(r) or run)
    dest = tmp_path / "models"
    old = export_vit(tiny_vit(data, patch_size=4), dest)  # not run now
    assert script.main(["--dest", str(dest)]) == 0
    assert loads == [run.recipe]
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        [script.LOCK, spec["checkpoint"]])
    assert not old.exists()
    folder = dest / spec["checkpoint"]
    raw = (folder / "manifest.json").read_bytes()
    manifest = json.loads(raw)
    assert (folder / script.DIGEST).read_text().split()[0] == sha256(raw)
    assert manifest["notebook"] == vit_notebook_record(spec)
    assert manifest["weights_sha256"] == spec["weights_sha256"]
    line = script.export_vision(spec, dest)
    assert line.endswith("up to date (test accuracy "
                         f"{100 * spec['test_accuracy']:.1f} % on 360 "
                         "images: the weights the notebook evaluated)")
    assert len(loads) == 1
    (folder / "manifest.json").write_text(json.dumps(
        {**manifest, "std": 1.0}, indent=1))
    assert "up to date" not in script.export_vision(spec, dest)
    assert len(loads) == 2
    assert (folder / "manifest.json").read_bytes() == raw
    stale = {**spec, "fingerprint": {**spec["fingerprint"], "code": "0"}}
    with pytest.raises(SystemExit, match=r"another code; run `make "
                       r"execute`"):
        script.export_vision(stale, tmp_path / "elsewhere")
