"""The digit classifier of ``d2lmini.live``: draw a digit, and the
vision section's ViT classifies it in the page; and the model's export.

``digit_classifier`` is the notebook's output (a ``LiveHTML``): it
names the checkpoint (``vision-vit-<key>``), holds the recipe, the
run's fingerprint, the sha256 of its weights and that of the model's
description in the manifest (``vit_model_sha256``), and a menu of test
images (the first few of each class, in test order).  ``export_vit``
writes what the page loads (the site's build runs it:
``scripts/export_models.py``): a manifest and the weights, with the
test accuracy of those weights.  The page (``d2lmini/js/vit.js``)
turns a drawn 32 x 32 bitmap into the 8 x 8 counts as the data were
made (``d2lmini.digits.counts_from_bitmap``), runs the ViT's forward
pass, and draws the ten probabilities and the ``<cls>`` attention of
every head over the patches.

Shape legend (``d2lmini.vit``'s): M patches, T = M + 1 tokens, D
num_hiddens, F mlp_num_hiddens, h heads, N blocks, 10 classes.
"""

import dataclasses
import hashlib
import json

from .digits import IMAGE_SIZE, NUM_CLASSES
from .live_page import LiveHTML, _at_most, _count, vision_js
from .live_translator import MODELS_URL, weights_bytes, write_export

__all__ = ["VIT_MANIFEST_FORMAT", "VIT_MODEL_FIELDS",
           "VIT_NOTEBOOK_FIELDS", "digit_classifier", "export_vit",
           "vit_model_sha256", "vit_notebook_record"]

# The format of a ViT's manifest (VIT_FORMAT in d2lmini/js/vit.js, which
# reads this one only).  The translators' manifests have their own
# (MANIFEST_FORMAT).
VIT_MANIFEST_FORMAT = 1
MAX_EXAMPLES_PER_CLASS = 10  # the menu lists every one

# The manifest's fields that say what the page computes: the sizes, the
# normalisation, the weights and their layout (VIT_MODEL_FIELDS in
# d2lmini/js/vit.js).  The recipe is there through the fingerprint's
# key; the test accuracy and the notebook's record describe the export.
VIT_MODEL_FIELDS = (
    "checkpoint", "fingerprint", "image_size", "num_classes",
    "patch_size", "num_hiddens", "mlp_num_hiddens", "num_heads",
    "num_blks", "pool", "mean", "std", "tensors", "weights",
    "weights_bytes", "weights_sha256")


def vit_model_sha256(manifest):
    """sha256 of a ViT manifest's ``VIT_MODEL_FIELDS`` (a missing one as
    null), as JSON with sorted keys and no spaces, in UTF-8: what the
    page's ``vitModelSha256`` computes from the manifest it loads (which
    writes ``mean`` and ``std`` as Python writes a float)."""
    fields = {k: manifest.get(k) for k in VIT_MODEL_FIELDS}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _checkpoint_name(recipe):
    from .vision import checkpoint_path
    return checkpoint_path(recipe, ".").stem


def _check_run(run):
    """The run's ViT, once ``run`` is a ``VisionRun`` of a ViT that its
    recipe describes; else a TypeError or ValueError that says why."""
    from .vision import VisionRun
    from .vit import ViT

    if not isinstance(run, VisionRun):
        raise TypeError(f"run must be the VisionRun that d2lmini.vision."
                        f"train_or_load returns, got {type(run).__name__}")
    model, recipe = run.model, run.recipe
    if not isinstance(model, ViT):
        raise TypeError(f"the page runs a ViT, and this run's model is a "
                        f"{type(model).__name__}: pass the run of a "
                        "VisionRecipe(model='vit')")
    sizes = _sizes(model)
    said = {k: getattr(recipe, k) for k in (
        "patch_size", "num_hiddens", "mlp_num_hiddens", "num_heads",
        "num_blks", "pool")}
    said["model"] = recipe.model
    found = {**{k: sizes[k] for k in said if k in sizes}, "model": "vit"}
    if said != found:
        other = {k: (said[k], found[k]) for k in said if said[k] != found[k]}
        raise ValueError(f"the run's recipe does not describe its model "
                         f"(recipe, model): {other}; pass the run that "
                         "train_or_load(recipe) returns")
    if sizes["image_size"] != IMAGE_SIZE or \
            sizes["num_classes"] != NUM_CLASSES or \
            model.patch_embedding.conv.in_channels != 1:
        raise ValueError(f"the page runs a ViT of {IMAGE_SIZE} x "
                         f"{IMAGE_SIZE} one-channel images and "
                         f"{NUM_CLASSES} classes, got {sizes}")
    return model


def _sizes(model):
    """What the page needs to know of a ViT's shape, read off the model
    (not its recipe: the manifest describes the weights)."""
    blk = model.blks[0]
    return {"image_size": model.patch_embedding.img_size,
            "num_classes": model.head[1].out_features,
            "patch_size": model.patch_embedding.patch_size,
            "num_hiddens": model.cls_token.shape[-1],
            "mlp_num_hiddens": blk.mlp.dense1.out_features,
            "num_heads": blk.attention.num_heads,
            "num_blks": len(model.blks), "pool": model.pool}


def _model_fields(run):
    """The ``VIT_MODEL_FIELDS`` of the run's ViT, as its manifest gives
    them, and its weights (``weights_bytes``)."""
    from .vision import fingerprint

    model = _check_run(run)
    tensors, offset = {}, 0
    for name, value in model.state_dict().items():  # weights_bytes' order
        tensors[name] = {"shape": list(value.shape), "offset": offset}
        offset += value.numel()
    weights = weights_bytes(model)
    sha = hashlib.sha256(weights).hexdigest()
    fields = {
        "checkpoint": _checkpoint_name(run.recipe),
        "fingerprint": fingerprint(run.recipe, run.data), **_sizes(model),
        "mean": float(run.data.mean), "std": float(run.data.std),
        "tensors": tensors, "weights": f"weights-{sha[:16]}.bin",
        "weights_bytes": len(weights), "weights_sha256": sha}
    assert tuple(fields) == VIT_MODEL_FIELDS, tuple(fields)
    return fields, weights


def _test_accuracy(run):
    from .vit import accuracy
    X, y = run.data.test
    return accuracy(run.model, X, y), len(y)


def _examples(run, per_class):
    """The first ``per_class`` test images of each class, in test order:
    ``{"index", "label", "counts"}`` with the index in the test split."""
    counts, labels = run.data.counts["test"]
    taken, out = {}, []
    for i, label in enumerate(labels.tolist()):
        if taken.get(label, 0) < per_class:
            taken[label] = taken.get(label, 0) + 1
            out.append({"index": i, "label": label,
                        "counts": counts[i].tolist()})
    return out


def digit_classifier(run, examples_per_class=2, *, base=MODELS_URL):
    """A 32 x 32 grid to draw a digit on, which the section's ViT
    classifies in the page, redrawn at every stroke.

    The page turns the drawing into 8 x 8 counts as the digits were made
    (``d2lmini.digits.counts_from_bitmap``), normalises them with the
    training pixels' mean and standard deviation, and runs the ViT: the
    ten probabilities, and the ``<cls>`` query's attention of each head
    over the patches (per block) laid over the image.  A menu offers the
    first ``examples_per_class`` test images of each class (in test
    order, not chosen); an image of counts is drawn as one bitmap that
    gives them back exactly (each 4 x 4 block with ``count`` cells set,
    in a fixed dither order).  The model loads when the explorer first
    scrolls into view (or is first used), from the folder that
    ``export_vit`` writes (the website's build:
    ``scripts/export_models.py``); the page checks it as the translators
    do and says whether it runs the weights this run evaluated.

    Args:
        run: the ``VisionRun`` of a ViT (``d2lmini.vision.
            train_or_load``).
        examples_per_class: test images of each class in the menu (1 to
            10).
        base: the URL of the folder of exported models, from the page.

    Returns:
        A ``LiveHTML`` of kind ``"digit-classifier"``.
    """
    _check_run(run)
    per_class = _count("examples_per_class", examples_per_class)
    _at_most("examples_per_class", per_class, MAX_EXAMPLES_PER_CLASS,
             "offer fewer")
    if not isinstance(base, str):
        raise TypeError(f"base must be a URL (str), got {base!r}")
    fields, weights = _model_fields(run)
    acc, n = _test_accuracy(run)
    return LiveHTML("digit-classifier", {
        "checkpoint": fields["checkpoint"],
        "recipe": dataclasses.asdict(run.recipe),
        "fingerprint": fields["fingerprint"],
        "patch_size": fields["patch_size"],
        "num_heads": fields["num_heads"], "num_blks": fields["num_blks"],
        "weights_sha256": fields["weights_sha256"],
        "model_sha256": vit_model_sha256(fields),
        "weights_bytes": len(weights),
        "test_accuracy": acc, "test_images": n,
        "examples_per_class": per_class,
        "examples": _examples(run, per_class), "base": base},
        "Draw a digit and see the Vision Transformer classify it: this "
        "explorer runs the model in the page of the website.",
        extra_js=vision_js())


# What the manifest records of the run a notebook evaluated (from its
# digit-classifier payload), beside what the export measured itself.
VIT_NOTEBOOK_FIELDS = ("weights_sha256", "model_sha256", "test_accuracy")


def vit_notebook_record(payload):
    """The ``VIT_NOTEBOOK_FIELDS`` of a digit-classifier payload (None
    where one is missing): what the notebook evaluated."""
    return {k: payload.get(k) for k in VIT_NOTEBOOK_FIELDS}


def export_vit(run, folder, *, evaluated=None):
    """Write the run's ViT for the digit classifier: ``folder /
    <checkpoint> / manifest.json`` and ``weights-<sha256[:16]>.bin``.

    The weights file is ``weights_bytes(run.model)``: every tensor of
    the state dict, float32 little-endian, one after the other; the
    manifest gives each one's shape and offset (in floats, by state-dict
    name, in that order), the sizes read off the model (``image_size``,
    ``num_classes``, ``patch_size``, ``num_hiddens``,
    ``mlp_num_hiddens``, ``num_heads``, ``num_blks``, ``pool``), the
    normalisation (``mean``, ``std`` of the training pixels), the
    recipe, the run's fingerprint, the weights' name, byte count and
    sha256, and ``test_accuracy`` of these weights on the
    ``test_images`` of the test split.  ``notebook`` records what the
    notebook evaluated (``vit_notebook_record(evaluated)``).

    As ``export_model`` does, the weights go to a new file named by
    their sha256, then the manifest replaces the old one in one rename;
    the weights the replaced manifest named are kept, older ones
    removed.

    Args:
        run: the ``VisionRun`` of a ViT.
        folder: where the model's folder goes.
        evaluated: the payload of the notebook's digit-classifier output
            (``payloads(html, "digit-classifier")``), or None.

    Returns:
        The model's folder.
    """
    fields, weights = _model_fields(run)
    acc, n = _test_accuracy(run)
    manifest = {
        "format": VIT_MANIFEST_FORMAT, **fields,
        "recipe": dataclasses.asdict(run.recipe),
        "test_accuracy": acc, "test_images": n,
        "notebook": None if evaluated is None
        else vit_notebook_record(evaluated)}
    return write_export(folder, manifest, weights)
