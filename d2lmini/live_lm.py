"""The text writer of ``d2lmini.live``: type the beginning of a French
sentence, and the pretraining section's language model continues it in
the page; and the model's export.

``text_writer`` is the notebook's output (a ``LiveHTML``): it names the
checkpoint (``lm-french-<key>``), holds the recipe, the run's
fingerprint, the sha256 of its weights and that of the model's
description in the manifest (``lm_model_sha256``), a few French
beginnings and the sampling settings the page starts with.
``export_lm`` writes what the page loads (the site's build runs it:
``scripts/export_models.py``): a manifest with the vocabulary, and the
weights, with the validation perplexity of those weights.  The page
(``d2lmini/js/lm.js``) reads the typed text as the translators read
theirs (``MTFraEng.tokens``; an unknown word is ``<unk>``), runs the
model's forward pass, and draws each token with the Mulberry32,
temperature, top-k and top-p of ``d2lmini.generation``, ported step
for step: the same text, settings and seed give the tokens
``generation.generate`` gives.

Shape legend (``d2lmini.pretraining``'s): V vocabulary size, D
num_hiddens, F ffn_num_hiddens, h heads, N blocks.
"""

import dataclasses
import hashlib
import json
import math

import numpy as np
import torch

from .live_page import LiveHTML, _at_most, _count, lm_js
from .live_translator import MODELS_URL, write_export

__all__ = ["LM_MANIFEST_FORMAT", "LM_MODEL_FIELDS", "LM_NOTEBOOK_FIELDS",
           "export_lm", "lm_model_sha256", "lm_notebook_record",
           "lm_tensors", "lm_weights_bytes", "text_writer"]

# The format of a language model's manifest (LM_FORMAT in
# d2lmini/js/lm.js, which reads this one only).
LM_MANIFEST_FORMAT = 1
MAX_PROMPTS = 12
MAX_PROMPT_CHARS = 200
TOP_K_MAX = 50  # the page's top-k control: 0 (off) to 50

# The manifest's fields that say what the page computes: the sizes, the
# vocabulary, the ids it never draws, the weights and their layout
# (LM_MODEL_FIELDS in d2lmini/js/lm.js).  None is a float, so that the
# page's canonical JSON is Python's.  The recipe is there through the
# fingerprint's key; the perplexity and the notebook's record describe
# the export.
LM_MODEL_FIELDS = (
    "checkpoint", "fingerprint", "vocab_size", "num_hiddens",
    "ffn_num_hiddens", "num_heads", "num_blks", "max_len", "tie_weights",
    "vocab", "special", "forbidden", "tensors", "weights", "weights_bytes",
    "weights_sha256")


def lm_model_sha256(manifest):
    """sha256 of an LM manifest's ``LM_MODEL_FIELDS`` (a missing one as
    null), as JSON with sorted keys and no spaces, in UTF-8: what the
    page's ``lmModelSha256`` computes from the manifest it loads."""
    fields = {k: manifest.get(k) for k in LM_MODEL_FIELDS}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _checkpoint_name(recipe):
    """The checkpoint's name, the stem of the file that
    ``train_or_load_lm`` caches it in."""
    return f"lm-french-{recipe.key()}"


def _check_run(run):
    """The run's model, once ``run`` is an ``LMRun`` of a
    ``LanguageModel`` that its recipe and vocabulary describe; else a
    TypeError or ValueError that says why."""
    from .lm import LMRun
    from .pretraining import LanguageModel

    if not isinstance(run, LMRun):
        raise TypeError(f"run must be the LMRun that d2lmini.lm."
                        f"train_or_load_lm returns, got "
                        f"{type(run).__name__}")
    model, recipe = run.model, run.recipe
    if not isinstance(model, LanguageModel):
        raise TypeError(f"the page runs a LanguageModel, and this run's "
                        f"model is a {type(model).__name__}")
    sizes = _sizes(model)
    said = {k: getattr(recipe, k) for k in (
        "num_hiddens", "ffn_num_hiddens", "num_heads", "num_blks",
        "max_len")}
    said["vocab_size"] = len(run.data.tgt_vocab)
    found = {k: sizes[k] for k in said}
    if said != found:
        other = {k: (said[k], found[k]) for k in said if said[k] != found[k]}
        raise ValueError(f"the run's recipe and vocabulary do not describe "
                         f"its model (recipe, model): {other}; pass the "
                         "run that train_or_load_lm(recipe) returns")
    if getattr(model.blks[0].attention, "qk_norm", False):
        raise ValueError("the page runs dot-product attention, not "
                         "qk_norm")
    return model


def _sizes(model):
    """What the page needs to know of a LanguageModel's shape, read off
    the model (the manifest describes the weights)."""
    blk = model.blks[0]
    return {"vocab_size": model.vocab_size,
            "num_hiddens": model.num_hiddens,
            "ffn_num_hiddens": blk.ffn.dense1.out_features,
            "num_heads": blk.attention.num_heads,
            "num_blks": len(model.blks), "max_len": model.max_len,
            "tie_weights": model.tie_weights}


def lm_tensors(model):
    """The tensors the page loads: the state dict, in its order, less
    the output layer's weight when it is tied to the embedding (the same
    (V, D) matrix, stored once)."""
    state = model.state_dict()
    if model.tie_weights:
        if model.dense.weight is not model.embedding.weight:
            raise ValueError("tie_weights is True but the output layer has "
                             "a weight of its own")
        del state["dense.weight"]
    return state


def lm_weights_bytes(model):
    """Every tensor of ``lm_tensors(model)``, float32 little-endian, one
    after the other: the weights file that the page loads."""
    return b"".join(
        np.ascontiguousarray(v.detach().cpu().to(torch.float32).numpy(),
                             dtype="<f4").tobytes()
        for v in lm_tensors(model).values())


def _model_fields(run):
    """The ``LM_MODEL_FIELDS`` of the run's model, as its manifest gives
    them, and its weights (``lm_weights_bytes``)."""
    from .lm import _fingerprint, forbidden_ids

    model = _check_run(run)
    vocab = run.data.tgt_vocab
    tensors, offset = {}, 0
    for name, value in lm_tensors(model).items():  # the weights' order
        tensors[name] = {"shape": list(value.shape), "offset": offset}
        offset += value.numel()
    weights = lm_weights_bytes(model)
    sha = hashlib.sha256(weights).hexdigest()
    fields = {
        "checkpoint": _checkpoint_name(run.recipe),
        # What train_or_load_lm checked the cached weights against.
        "fingerprint": _fingerprint(run.recipe.key(), run.data),
        **_sizes(model), "vocab": list(vocab.idx_to_token),
        "special": {t: getattr(vocab, t) for t in ("pad", "bos", "eos",
                                                   "unk")},
        "forbidden": list(forbidden_ids(vocab)), "tensors": tensors,
        "weights": f"weights-{sha[:16]}.bin", "weights_bytes": len(weights),
        "weights_sha256": sha}
    assert tuple(fields) == LM_MODEL_FIELDS, tuple(fields)
    return fields, weights


def _val_ppl(run):
    """The validation perplexity of the run's weights, from its
    history."""
    ppl = run.history.get("val_ppl") or [None]
    return None if ppl[-1] is None else float(ppl[-1])


def _on_steps(name, value, low, high, step):
    """``value`` as a float in [low, high] on the page's slider steps."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not low <= value <= high \
            or abs(round(value / step) * step - value) > 1e-9:
        raise ValueError(f"{name} must be a number in [{low}, {high}] in "
                         f"steps of {step} (the page's control), got "
                         f"{value!r}")
    return float(value)


def _settings(temperature, top_k, top_p, seed):
    """The sampling settings the page starts with, checked against its
    controls: top-k None or 1..50, top-p None or in [0.05, 1)."""
    settings = {"temperature": _on_steps("temperature", temperature, 0, 2,
                                         0.05)}
    if top_k is not None:
        _at_most("top_k", _count("top_k", top_k), TOP_K_MAX,
                 "or None for no top-k")
    settings["top_k"] = top_k if top_k is None else int(top_k)
    settings["top_p"] = None if top_p is None else _on_steps(
        "top_p", top_p, 0.05, 0.95, 0.05)
    if isinstance(seed, bool) or not isinstance(seed, int) \
            or not 0 <= seed < 2 ** 32:
        raise ValueError(f"seed must be an int in [0, 2**32), got {seed!r}")
    settings["seed"] = seed
    return settings


def _check_prompts(run, prompts, max_new_tokens):
    """The prompts as a list, each a French beginning whose words the
    vocabulary knows and that leaves room for ``max_new_tokens``."""
    if isinstance(prompts, str) or not all(
            isinstance(p, str) and p.strip() for p in prompts):
        raise TypeError(f"prompts must be a list of French beginnings "
                        f"(non-blank strings), got {prompts!r}")
    prompts = list(prompts)
    _at_most("the number of prompts", len(prompts), MAX_PROMPTS,
             "offer fewer")
    vocab, room = run.data.tgt_vocab, run.model.max_len - max_new_tokens
    for prompt in prompts:
        _at_most(f"a prompt's length in characters ({prompt[:20]!r}...)",
                 len(prompt), MAX_PROMPT_CHARS, "offer a shorter one")
        tokens = run.data.tokens(prompt)
        unknown = [t for t in tokens if t not in vocab]
        if unknown:
            raise ValueError(f"prompt {prompt!r} has words the model's "
                             f"vocabulary lacks ({', '.join(unknown)}): "
                             "the page would read them as <unk>")
        if len(tokens) > room:
            raise ValueError(f"prompt {prompt!r} has {len(tokens)} tokens: "
                             f"with <bos> and {max_new_tokens} new ones "
                             f"they exceed max_len={run.model.max_len}")
    return prompts


def text_writer(run, prompts=(), *, max_new_tokens=15, temperature=0.8,
                top_k=None, top_p=0.9, seed=0, base=MODELS_URL):
    """A text box whose French beginning the section's language model
    continues in the page, one sampled token at a time.

    The page reads the typed text as the translators do (an unknown word
    is ``<unk>``, and the page says so), prepends ``<bos>`` and draws up
    to ``max_new_tokens`` tokens (fewer if the model's ``max_len`` would
    be exceeded), stopping at ``<eos>``, with
    ``d2lmini.generation.generate``'s rule: the same text, temperature,
    top-k, top-p and seed give the same tokens, and ``<pad>``, ``<bos>``
    and ``<unk>`` are never drawn (``d2lmini.lm.forbidden_ids``).
    Controls set the temperature (0: greedy), top-k (0: off), top-p (1:
    off) and the seed; a bar chart shows the next-token distribution of
    each generated token (the ten most probable tokens, those top-k and
    top-p keep marked), and a heatmap per head the causal self-attention
    over the tokens read, for a block chosen from a menu.  The model
    loads when the explorer first comes into view (or is used), from the
    folder that ``export_lm`` writes; the page checks it as the
    translators do and says whether it runs the weights this run
    evaluated.

    Args:
        run: the ``LMRun`` of ``d2lmini.lm.train_or_load_lm``.
        prompts: French beginnings offered as buttons (the first one is
            in the box), at most 12; every word must be in the
            vocabulary.
        max_new_tokens: the most tokens the page writes.
        temperature, top_k, top_p, seed: the settings the controls
            start at (top_k None or 1 to 50; top_p None or 0.05 to 0.95,
            temperature 0 to 2, both in steps of 0.05).
        base: the URL of the folder of exported models, from the page.

    Returns:
        A ``LiveHTML`` of kind ``"text-writer"``.
    """
    model = _check_run(run)
    max_new_tokens = _count("max_new_tokens", max_new_tokens)
    _at_most("max_new_tokens", max_new_tokens, model.max_len - 1,
             "the model reads at most max_len tokens, <bos> included")
    prompts = _check_prompts(run, prompts, max_new_tokens)
    settings = _settings(temperature, top_k, top_p, seed)
    if not isinstance(base, str):
        raise TypeError(f"base must be a URL (str), got {base!r}")
    fields, weights = _model_fields(run)
    return LiveHTML("text-writer", {
        "checkpoint": fields["checkpoint"],
        "recipe": dataclasses.asdict(run.recipe),
        "fingerprint": fields["fingerprint"],
        **{k: fields[k] for k in ("vocab_size", "num_hiddens", "num_heads",
                                  "num_blks", "max_len")},
        "weights_sha256": fields["weights_sha256"],
        "model_sha256": lm_model_sha256(fields),
        "weights_bytes": len(weights), "val_ppl": _val_ppl(run),
        "prompts": prompts, "max_new_tokens": max_new_tokens,
        "settings": settings, "base": base},
        "Type the beginning of a French sentence and see the language "
        "model continue it: this explorer runs the model in the page of "
        "the website.",
        extra_js=lm_js())


# What the manifest records of the run a notebook evaluated (from its
# text-writer payload), beside what the export states itself.
LM_NOTEBOOK_FIELDS = ("weights_sha256", "model_sha256", "val_ppl")


def lm_notebook_record(payload):
    """The ``LM_NOTEBOOK_FIELDS`` of a text-writer payload (None where
    one is missing): what the notebook evaluated."""
    return {k: payload.get(k) for k in LM_NOTEBOOK_FIELDS}


def export_lm(run, folder, *, evaluated=None):
    """Write the run's language model for the text writer: ``folder /
    <checkpoint> / manifest.json`` and ``weights-<sha256[:16]>.bin``.

    The weights file is ``lm_weights_bytes(run.model)``: every tensor of
    the state dict but a tied output layer's weight (the embedding's),
    float32 little-endian, one after the other; the manifest gives each
    one's shape and offset (in floats, by state-dict name, in that
    order), the sizes read off the model (``vocab_size``,
    ``num_hiddens``, ``ffn_num_hiddens``, ``num_heads``, ``num_blks``,
    ``max_len``, ``tie_weights``), the vocabulary's tokens in id order,
    the special ids (``pad``, ``bos``, ``eos``, ``unk``), the ids never
    drawn (``forbidden``: ``d2lmini.lm.forbidden_ids``), the recipe, the
    run's fingerprint, the weights' name, byte count and sha256, and
    ``val_ppl``, the validation perplexity of these weights (the run's
    last, from its history).  ``notebook`` records what the notebook
    evaluated (``lm_notebook_record(evaluated)``).

    As ``export_model`` does, the weights go to a new file named by
    their sha256, then the manifest replaces the old one in one rename
    (``write_export``); the weights the replaced manifest named are
    kept, older ones removed.

    Args:
        run: the ``LMRun`` of ``d2lmini.lm.train_or_load_lm``.
        folder: where the model's folder goes.
        evaluated: the payload of the notebook's text-writer output
            (``payloads(html, "text-writer")``), or None.

    Returns:
        The model's folder.
    """
    fields, weights = _model_fields(run)
    manifest = {
        "format": LM_MANIFEST_FORMAT, **fields,
        "recipe": dataclasses.asdict(run.recipe), "val_ppl": _val_ppl(run),
        "notebook": None if evaluated is None
        else lm_notebook_record(evaluated)}
    return write_export(folder, manifest, weights)
