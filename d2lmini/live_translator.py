"""The translator of ``d2lmini.live``: a text box that runs a trained
model in the page, and the model's export for it.

``translator`` is the notebook's output (a ``LiveHTML``): it names the
checkpoint and holds the recipe, the run's fingerprint, the sha256 of
its weights and that of the model's description in the manifest
(``model_sha256``).  ``export_model`` writes what the page loads (the site's
build runs it: ``scripts/export_models.py``): a manifest and the weights,
with their held-out BLEU; the page runs them with
``d2lmini/js/model.js`` (loaded and checked by ``d2lmini/js/manifest.js``)
and says whether they are the weights the section evaluated
(``d2lmini/js/translator.js``).
"""

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from .decoding import attention_heads
from .live_page import LiveHTML, _at_most
from .multihead import MultiHeadAttention
from .utils import atomic_write

__all__ = ["MANIFEST_FORMAT", "MODELS_URL", "MODEL_FIELDS",
           "NOTEBOOK_FIELDS", "PAGE_ATTENTIONS", "bleu_fields",
           "export_model", "model_sha256", "notebook_record", "translator",
           "weights_bytes", "write_export"]

# Where the website serves exported models, from a page in chapters/.
MODELS_URL = "../_static/models/"
# 2: the manifest records the held-out BLEU of its weights and what the
# notebook evaluated (``export_model``); 3: the weights file is named by
# its sha256 and the page checks every field; 4: qk_norm, with the
# heads' scales when it is true (the page's script reads this format
# only: MANIFEST_FORMAT in d2lmini/js/manifest.js).
MANIFEST_FORMAT = 4
# The models the page runs, by Recipe.attention.
PAGE_ATTENTIONS = ("additive", "multihead", "transformer")
TRANSLATOR_MAX_EXAMPLES = 12
TRANSLATOR_MAX_CHARS = 200  # of the example and of each example button


def _checkpoint_name(recipe):
    from d2lmini.cache import checkpoint_path
    return checkpoint_path(recipe, ".").stem


def _model_attention(model):
    """The ``Recipe.attention`` of a model the page can run, or None."""
    decoder = model.decoder
    if hasattr(decoder, "cross_attention_weights"):
        return "transformer"
    attention = getattr(decoder, "attention", None)
    if attention is None:
        return None
    return "multihead" if isinstance(attention, MultiHeadAttention) \
        else "additive"


def _page_heads(recipe, model):
    """The number of heads of the attention the page draws; raises
    unless the page can run ``model`` as the ``recipe`` describes it."""
    kind = recipe.attention
    if kind not in PAGE_ATTENTIONS:
        raise ValueError(f"only attention decoders run in the page (it "
                         f"draws their attention weights), not "
                         f"attention={kind!r}: use one of {PAGE_ATTENTIONS}")
    heads = attention_heads(model)
    if heads is None:
        raise TypeError("the model has no attention decoder: the "
                        "translator draws attention weights")
    found = _model_attention(model)
    if found != kind:
        raise ValueError(f"the recipe says attention={kind!r} but the "
                         f"run's model has {found!r} attention: pass the "
                         "run that train_or_load(recipe) returns")
    return heads


def weights_bytes(model):
    """Every tensor of ``model.state_dict()``, float32 little-endian, one
    after the other: the ``weights.bin`` that the page loads."""
    return b"".join(
        np.ascontiguousarray(v.detach().cpu().to(torch.float32).numpy(),
                             dtype="<f4").tobytes()
        for v in model.state_dict().values())


# The manifest's fields that say what the page computes (the model, its
# vocabularies, its weights; MODEL_FIELDS in d2lmini/js/manifest.js).
# The notebook's translator output records their model_sha256, so that
# the page can tell a manifest that describes the section's weights
# otherwise than the run did (an edited vocabulary, size or layout).
MODEL_FIELDS = (
    "checkpoint", "recipe_key", "fingerprint", "attention", "num_heads",
    "qk_norm", "num_layers", "num_hiddens", "embed_size",
    "ffn_num_hiddens", "num_steps", "src_vocab", "tgt_vocab",
    "src_special", "tgt_special", "tensors", "weights", "weights_bytes",
    "weights_sha256")


def model_sha256(manifest):
    """sha256 of a manifest's ``MODEL_FIELDS`` (a missing one as null),
    as JSON with sorted keys and no spaces, in UTF-8 (what the page's
    ``modelSha256`` computes from the manifest it loads)."""
    fields = {k: manifest.get(k) for k in MODEL_FIELDS}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _model_fields(recipe, run):
    """The ``MODEL_FIELDS`` of the recipe's model, as its manifest gives
    them, and its weights (``weights_bytes``)."""
    from d2lmini.cache import fingerprint
    model, data = run.model, run.data
    num_heads = _page_heads(recipe, model)
    kind = recipe.attention
    encoder = model.encoder
    if kind == "transformer":
        sizes = {"num_layers": len(encoder.blks),
                 "num_hiddens": encoder.num_hiddens,
                 "embed_size": encoder.embedding.embedding_dim,
                 "ffn_num_hiddens": encoder.blks[0].ffn.dense1.out_features}
    else:
        sizes = {"num_layers": encoder.rnn.num_layers,
                 "num_hiddens": encoder.rnn.hidden_size,
                 "embed_size": encoder.embedding.embedding_dim}
    tensors, offset = {}, 0
    for name, value in model.state_dict().items():  # weights_bytes' order
        tensors[name] = {"shape": list(value.shape), "offset": offset}
        offset += value.numel()
    weights = weights_bytes(model)
    sha = hashlib.sha256(weights).hexdigest()
    special = lambda v: {t: v[f"<{t}>"] for t in  # noqa: E731
                         ("pad", "bos", "eos", "unk")}
    fields = {
        "checkpoint": _checkpoint_name(recipe),
        "recipe_key": recipe.key(), "fingerprint": fingerprint(recipe, data),
        "attention": kind, "num_heads": num_heads,
        "qk_norm": getattr(model.decoder.attention, "qk_norm", False)
        if kind == "multihead" else False, **sizes,
        "num_steps": data.num_steps,
        "src_vocab": list(data.src_vocab.idx_to_token),
        "tgt_vocab": list(data.tgt_vocab.idx_to_token),
        "src_special": special(data.src_vocab),
        "tgt_special": special(data.tgt_vocab),
        "tensors": tensors, "weights": f"weights-{sha[:16]}.bin",
        "weights_bytes": len(weights), "weights_sha256": sha}
    assert set(fields) <= set(MODEL_FIELDS), set(fields) - set(MODEL_FIELDS)
    return fields, weights


def bleu_fields(result):
    """What the page states of an ``EvalResult``: ``bleu`` (corpus BLEU,
    0-100), ``bleu_split`` and ``bleu_signature`` (sacreBLEU's, of that
    BLEU only)."""
    return {"bleu": result.bleu, "bleu_split": result.split,
            "bleu_signature": result.signature.split(";")[0]}


def translator(recipe, run, example, examples=(), *, result=None,
               base=MODELS_URL):
    """A text box that translates in the page with the recipe's model.

    The output names the checkpoint (``seq2seq-<attention>-<key>``) and
    holds the recipe and the fingerprint of the run, so that the site's
    build exports exactly this model (``scripts/export_models.py``) and
    the page can check it loaded the one the notebook evaluated.  The
    weights load only when the reader opens the box.  A Transformer's
    heatmap is its last decoder block's attention to the source, what
    ``d2lmini.decoding.greedy_decode`` reports.

    Args:
        recipe: the ``Recipe`` that ``train_or_load`` trained; its
            ``attention`` is one of ``PAGE_ATTENTIONS``.
        run: its ``Run`` (model and data).
        example: the sentence the box starts with.
        examples: sentences offered as buttons (e.g. those the section
            discusses).
        result: the ``EvalResult`` of this run on the test split, which
            the section reports: the page states its BLEU next to the
            BLEU of the weights it actually runs.
        base: the URL of the folder of exported models, from the page.

    Returns:
        A ``LiveHTML``.
    """
    if not isinstance(example, str) or not example.strip():
        raise ValueError(f"example must be an English sentence, got "
                         f"{example!r}")
    if isinstance(examples, str) or not all(
            isinstance(s, str) and s.strip() for s in examples):
        raise TypeError(f"examples must be a list of sentences, got "
                        f"{examples!r}")
    examples = list(examples)
    _at_most("the number of examples", len(examples),
             TRANSLATOR_MAX_EXAMPLES, "offer fewer")
    for sentence in [example, *examples]:
        _at_most(f"a sentence's length in characters ({sentence[:20]!r}"
                 "...)", len(sentence), TRANSLATOR_MAX_CHARS,
                 "offer a shorter one")
    if result is not None and getattr(result, "split", None) != "test":
        raise ValueError(
            "result must be the EvalResult of the test split (the page "
            "compares it with the held-out BLEU of the weights it runs), "
            f"got split {getattr(result, 'split', None)!r}")
    fields, weights = _model_fields(recipe, run)
    return LiveHTML("translator", {
        "checkpoint": fields["checkpoint"],
        "recipe": dataclasses.asdict(recipe),
        "fingerprint": fields["fingerprint"],
        "num_heads": fields["num_heads"],
        "weights_sha256": fields["weights_sha256"],
        "model_sha256": model_sha256(fields),
        **({} if result is None else bleu_fields(result)),
        "size_mb": round(len(weights) / 1e6, 1), "example": example,
        "examples": list(examples), "base": base},
        "Type a sentence and see the translation and attention: this box "
        "runs the model in the page of the website.")


# What the manifest records of the run a notebook evaluated (from its
# translator payload), beside what the export measured itself.
NOTEBOOK_FIELDS = ("weights_sha256", "model_sha256", "bleu", "bleu_split",
                   "bleu_signature")


def notebook_record(payload):
    """The ``NOTEBOOK_FIELDS`` of a translator payload (None where an
    older notebook's payload lacks one): what the notebook evaluated."""
    return {k: payload.get(k) for k in NOTEBOOK_FIELDS}


def export_model(recipe, run, folder, *, evaluated=None):
    """Write the recipe's model for the translator: ``folder /
    <checkpoint> / manifest.json`` and ``weights-<sha256[:16]>.bin``.

    The weights file is ``weights_bytes(run.model)``: every tensor of the
    state dict, float32 little-endian, one after the other; the manifest
    gives each one's offset (in floats) and shape (by state-dict name),
    the vocabularies, the special ids, the sizes, the recipe key, the
    run's fingerprint and the sha256 of the weights.  ``num_layers`` is
    the GRU layers, or a Transformer's blocks in the encoder and in the
    decoder; a Transformer's manifest also gives ``ffn_num_hiddens``
    (its positions are not stored: the page computes them).

    The export scores the weights it writes: ``bleu``, ``bleu_split``
    and ``bleu_signature`` are ``d2lmini.experiment.evaluate(run.model,
    run.data)`` on the held-out test split (sacreBLEU's signature, as in
    the translator's payload).  ``notebook`` records what the notebook
    evaluated (``notebook_record(evaluated)``), so that the page can say
    whether it runs those weights or others trained from the same
    recipe on the machine that built the site.

    The pair is replaced as one: the weights go to a new file named by
    their sha256 (the manifest's ``weights``), then the manifest
    replaces the old one in one rename.  A crash at any point leaves a
    manifest beside the weights it describes (the old pair or the new
    one), and a browser never serves an older file from its cache under
    the new name.  The weights the replaced manifest named are kept (a
    reader whose browser cached that manifest still finds them); older
    weights files are removed.  Two exports into one folder at once are
    the caller's to prevent (``scripts/export_models.py`` takes a lock).

    Args:
        recipe: the ``Recipe`` of the run; its ``attention`` is one of
            ``PAGE_ATTENTIONS``.
        run: its ``Run`` (model and data; the data needs a test split).
        folder: where the model's folder goes.
        evaluated: the payload of the notebook's translator output
            (``payloads(html, "translator")``), or None.

    Returns:
        The model's folder.
    """
    from d2lmini.experiment import evaluate
    fields, weights = _model_fields(recipe, run)
    if not run.data.test_pairs:
        raise ValueError("the page states the held-out BLEU of the weights "
                         "it runs: the run's data needs a test split "
                         "(num_test > 0)")
    manifest = {
        "format": MANIFEST_FORMAT, **fields,
        **bleu_fields(evaluate(run.model, run.data)),
        "notebook": None if evaluated is None
        else notebook_record(evaluated)}
    return write_export(folder, manifest, weights)


def write_export(folder, manifest, weights):
    """Write ``weights`` (bytes) and ``manifest`` into ``folder /
    manifest['checkpoint']``: the weights to a new file named by the
    manifest, then the manifest in one rename (the switch); the weights
    the replaced manifest named are kept, older weights files removed.
    Returns the model's folder."""
    out = Path(folder) / manifest["checkpoint"]
    out.mkdir(parents=True, exist_ok=True)
    keep = {manifest["weights"], _weights_named(out / "manifest.json")}
    with atomic_write(out / manifest["weights"]) as f:
        f.write(weights)
    with atomic_write(out / "manifest.json") as f:  # last: the switch
        f.write(json.dumps(manifest, indent=1).encode("utf-8"))
    for old in out.glob("weights*.bin"):
        if old.name not in keep:
            old.unlink()
    return out


def _weights_named(manifest):
    """The weights file a manifest names, or None (no manifest, or not
    one this module wrote)."""
    try:
        name = json.loads(Path(manifest).read_text(encoding="utf-8"))[
            "weights"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) else None
