"""Live explorers that run in the page: in Jupyter and on the website.

Each explorer is an HTML output: a ``<div data-d2l-live=...>`` holding
its data as JSON, followed by ``live.js`` (this package's JavaScript),
which computes and draws the figure in the browser and redraws it when
a control moves.  No kernel and no server take part, so the same output
is live in JupyterLab (once the cell has run: Jupyter runs scripts only
in trusted outputs) and on the static website.

- ``masked_softmax_explorer``: valid length and temperature sliders over
  the masked softmax weights;
- ``scaling_explorer``: a slider for d over the scores of random queries
  and keys and each query's largest softmax weight;
- ``kernel_regression_explorer``: Nadaraya-Watson attention pooling, with
  the kernel's width and type and a marked query;
- ``positional_encoding_explorer``: the Transformer's sinusoidal
  positions P as a heatmap and as curves, with sliders for a position
  and a frequency;
- ``translator``: a text box that translates with a trained model in the
  page (GRU with additive or multi-head attention, or a Transformer),
  from weights that ``export_model`` writes (the website's build
  exports them: ``scripts/export_models.py``) with their held-out BLEU;
  the page says whether they are the weights the section evaluated.

Shape legend: L queries, S keys, N sampled queries, D features.
"""

import base64
import dataclasses
import hashlib
import html
import json
import numbers
import re
from pathlib import Path

import numpy as np
import torch

from d2lmini.attention import MultiHeadAttention
from d2lmini.decoding import attention_heads
from d2lmini.utils import atomic_write

__all__ = ["LiveHTML", "bleu_fields", "export_model",
           "kernel_regression_explorer", "masked_softmax_explorer",
           "notebook_record", "payloads",
           "positional_encoding_explorer", "sample_scores",
           "scaling_explorer", "translator", "weights_bytes",
           "with_site_view"]

LIVE_JS = Path(__file__).with_name("live.js")
# Where the website serves exported models, from a page in chapters/.
MODELS_URL = "../_static/models/"
# 2: the manifest records the held-out BLEU of its weights and what the
# notebook evaluated (``export_model``); 3: the weights file is named by
# its sha256 and the page checks every field (live.js reads this format
# only: its MANIFEST_FORMAT).
MANIFEST_FORMAT = 3
DIMS = tuple(2 ** i for i in range(11))
# The models the page runs, by Recipe.attention.
PAGE_ATTENTIONS = ("additive", "multihead", "transformer")
# The positional-encoding explorer draws D * max_len cells at most.
PE_MAX_CELLS = 2 ** 15
# What the other explorers draw at most: the page draws a cell, a bar or
# a table row per number, and holds the data in the output.
MASKED_SOFTMAX_MAX = (32, 64)  # L queries, S keys
SCALING_MAX_SCORES = 2 ** 14  # N * S scores per size d
SCALING_MAX_DIM = 1024  # the largest d
SCALING_MAX_DIMS = 16  # sizes on the slider
KERNEL_MAX_POINTS = 1000  # training pairs, and queries
TRANSLATOR_MAX_EXAMPLES = 12
TRANSLATOR_MAX_CHARS = 200  # of the example and of each example button


def _count(name, value, low=1):
    """``value`` as an int, at least ``low``; else a TypeError or
    ValueError that names it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r} "
                        f"({type(value).__name__})")
    if value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return int(value)


def _at_most(what, asked, limit, hint):
    if asked > limit:
        raise ValueError(f"{what} is at most {limit} (the page draws "
                         f"every one), got {asked}; {hint}")


def payloads(html_text, kind):
    """The data of every ``kind`` explorer in an HTML page or output
    (what ``LiveHTML`` wrote), in order."""
    pattern = (rf'data-d2l-live="{re.escape(kind)}">'
               r'<script type="application/json">(.*?)</script>')
    return [json.loads(m) for m in re.findall(pattern, html_text, re.S)]


class LiveHTML:
    """An HTML output (``_repr_html_``) holding one live explorer."""

    def __init__(self, kind, data, note):
        self.kind, self.data = kind, data
        payload = json.dumps(data, separators=(",", ":"))
        # No "<" in the script element: "</script" would end it, and
        # "<!--<script" would make the HTML tokeniser swallow live.js and
        # the rest of the page.  JSON reads \u003c as "<" (and so on).
        payload = (payload.replace("<", "\\u003c").replace(">", "\\u003e")
                   .replace("&", "\\u0026"))
        ident = "d2l-" + hashlib.sha256(
            f"{kind}:{payload}".encode()).hexdigest()[:12]
        self.html = (
            f'<div class="d2l-live" id="{ident}" data-d2l-live="{kind}">'
            f'<script type="application/json">{payload}</script>'
            f'<p class="d2l-needs-js">{html.escape(note)}</p></div>\n'
            f"<script>\n{LIVE_JS.read_text(encoding='utf-8')}</script>")

    def _repr_html_(self):
        return self.html

    def __repr__(self):
        return f"<live {self.kind} explorer: run in a browser>"


NEEDS_JS = ("This explorer runs in the page: on the website it is live; in "
            "Jupyter, run the cell (Jupyter runs scripts only in outputs "
            "it trusts).")


def masked_softmax_explorer(scores=None, valid_len=None, temperature=1.0,
                            num_queries=3, num_keys=8, seed=0):
    """Sliders for the valid length and a temperature, over a heatmap of
    ``masked_softmax(scores / temperature, valid_len)``.

    Args:
        scores: (L, S) scores; None draws ``num_queries x num_keys``
            standard normal scores times 2 from a generator seeded with
            ``seed``.
        valid_len: the initial valid length (0 to S); None means S // 2.
        temperature: the initial temperature (0.1 to 10; the slider moves
            its log10 in steps of 0.05).
        num_queries, num_keys: L and S when ``scores`` is None.
        seed: the seed of the random scores.

    Returns:
        A ``LiveHTML``; its ``data["scores"]`` are the scores it draws.
    """
    max_l, max_s = MASKED_SOFTMAX_MAX
    if scores is None:
        num_queries = _count("num_queries", num_queries)
        num_keys = _count("num_keys", num_keys)
        _at_most("num_queries (L)", num_queries, max_l, "draw fewer queries")
        _at_most("num_keys (S)", num_keys, max_s, "draw fewer keys")
        gen = torch.Generator().manual_seed(seed)
        scores = 2 * torch.randn(num_queries, num_keys, generator=gen)
    scores = torch.as_tensor(scores, dtype=torch.float32)
    if scores.dim() != 2 or 0 in scores.shape:
        raise ValueError("scores must be (L, S), one row per query and at "
                         f"least one key, got shape {tuple(scores.shape)}")
    _at_most("the queries of scores (L)", scores.shape[0], max_l,
             "pass fewer rows")
    _at_most("the keys of scores (S)", scores.shape[1], max_s,
             "pass fewer columns")
    if not torch.isfinite(scores).all():
        raise ValueError("scores must be finite numbers; mask keys with "
                         "the valid length instead of -inf")
    S = scores.shape[1]
    valid_len = S // 2 if valid_len is None else valid_len
    if not isinstance(valid_len, int) or not 0 <= valid_len <= S:
        raise ValueError(f"valid_len must be an int between 0 and S = {S}, "
                         f"got {valid_len!r}")
    if not 0.1 <= temperature <= 10:
        raise ValueError("temperature must be between 0.1 and 10, got "
                         f"{temperature}")
    return LiveHTML("masked-softmax", {
        "scores": scores.tolist(), "valid_len": valid_len,
        "temperature": float(temperature)}, NEEDS_JS)


def sample_scores(d, num_queries=256, num_keys=16, seed=0):
    """Dot products of random queries and keys with N(0, 1) entries.

    Args:
        d: the size of every query and key.
        num_queries, num_keys: N and S.
        seed: the seed of the generator (each d gets its own stream).

    Returns:
        (N, S) float64 scores q.k, whose variance is about d.
    """
    gen = torch.Generator().manual_seed(seed * 100_003 + d)
    q = torch.randn(num_queries, 1, d, generator=gen, dtype=torch.float64)
    k = torch.randn(num_queries, num_keys, d, generator=gen,
                    dtype=torch.float64)
    return (q * k).sum(-1)  # (N, S)


def _float32_b64(x):
    array = np.ascontiguousarray(np.asarray(x, dtype="<f4"))
    return base64.b64encode(array.tobytes()).decode("ascii")


def scaling_explorer(dims=DIMS, d=64, num_queries=256, num_keys=16, seed=0):
    """A slider for d over the distributions of scores and weights.

    For random queries and keys of size d (``sample_scores``, stored in
    the output as float32) the page draws the histograms of q.k and
    q.k / sqrt(d), and of the largest softmax weight of each query with
    and without the scaling, and tabulates their standard deviations,
    mean largest weights and shares above 0.9.

    Args:
        dims: the sizes the slider offers.
        d: the initial size; must be one of ``dims``.
        num_queries, num_keys: N queries, each scored against S keys.
        seed: the seed of the random queries and keys.

    Returns:
        A ``LiveHTML``.
    """
    dims = tuple(int(x) for x in dims)
    if not dims or min(dims) < 1:
        raise ValueError(f"dims must be positive sizes, got {dims}")
    if d not in dims:
        raise ValueError(f"d = {d} is not one of the slider's sizes {dims}")
    _at_most("the number of sizes on the slider (len(dims))", len(dims),
             SCALING_MAX_DIMS, "offer fewer sizes")
    _at_most("the largest size d", max(dims), SCALING_MAX_DIM,
             "offer smaller sizes")
    num_queries = _count("num_queries", num_queries)
    num_keys = _count("num_keys", num_keys, low=2)  # else no softmax
    _at_most("num_queries * num_keys (scores per size)",
             num_queries * num_keys, SCALING_MAX_SCORES,
             f"got {num_queries} * {num_keys}: use fewer queries or keys")
    scores = {str(n): _float32_b64(sample_scores(n, num_queries, num_keys,
                                                 seed)) for n in dims}
    return LiveHTML("scaling", {
        "dims": list(dims), "d": d, "num_queries": num_queries,
        "num_keys": num_keys, "scores": scores}, NEEDS_JS)


def kernel_regression_explorer(x_train, y_train, x_query, f_query, *,
                               width=0.5, kernel="gaussian", query=None):
    """Sliders for the kernel width and the marked query, and a kernel
    choice, over a Nadaraya-Watson fit (``d2lmini.pooling``).

    The page computes the prediction at every query from the training
    pairs, draws it with the true function and the weights of the marked
    query, and reports the mean squared error against ``f_query``.

    Args:
        x_train, y_train: (S,) training inputs (the keys) and targets
            (the values).
        x_query: (L,) query positions, increasing.
        f_query: (L,) the true function at the queries.
        width: the initial width (0.03 to 3; the slider moves its log10).
        kernel: the initial kernel, one of ``d2lmini.pooling.KERNELS``.
        query: the index of the initially marked query (default: middle).

    Returns:
        A ``LiveHTML``.
    """
    from d2lmini.pooling import KERNELS
    arrays = [torch.as_tensor(a, dtype=torch.float64).flatten()
              for a in (x_train, y_train, x_query, f_query)]
    if len(arrays[0]) != len(arrays[1]) or len(arrays[2]) != len(arrays[3]) \
            or not len(arrays[0]) or not len(arrays[2]):
        raise ValueError(
            "x_train and y_train, and x_query and f_query, must be pairs of "
            "equally long non-empty 1-D arrays; got lengths "
            f"{[len(a) for a in arrays]}")
    _at_most("the number of training pairs (S)", len(arrays[0]),
             KERNEL_MAX_POINTS, "pass fewer keys")
    _at_most("the number of queries (L)", len(arrays[2]),
             KERNEL_MAX_POINTS, "pass fewer queries")
    if not all(torch.isfinite(a).all() for a in arrays):
        raise ValueError("x_train, y_train, x_query and f_query must be "
                         "finite numbers")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if not 0.03 <= width <= 3:
        raise ValueError(f"width must be between 0.03 and 3, got {width}")
    L = len(arrays[2])
    query = L // 2 if query is None else query
    if not isinstance(query, int) or not 0 <= query < L:
        raise ValueError(f"query must be an index in [0, {L}), got {query!r}")
    x, y, xq, fq = ([round(float(v), 6) for v in a] for a in arrays)
    return LiveHTML("kernel-regression", {
        "x_train": x, "y_train": y, "x_query": xq, "f_query": fq,
        "width": float(width), "kernel": kernel, "kernels": list(KERNELS),
        "query": query}, NEEDS_JS)


def positional_encoding_explorer(num_hiddens=32, max_len=64, position=10,
                                 index=2):
    """Sliders for a position i and a frequency index j over the
    Transformer's sinusoidal positions (``d2lmini.transformer.
    PositionalEncoding``), which the page computes from D and max_len.

    The page draws P (max_len, D) as a heatmap with row i and columns
    2j, 2j + 1 marked, those two columns as curves over the positions,
    and a line giving the frequency 1 / 10000^(2j/D), the wavelength
    2 pi 10000^(2j/D) (in positions) and P[i, 2j], P[i, 2j + 1].

    Args:
        num_hiddens: D, even and at least 2.
        max_len: the number of positions drawn (the rows of P).
        position: the initially marked position i, in [0, max_len).
        index: the initial frequency index j, in [0, D // 2).

    Returns:
        A ``LiveHTML``.
    """
    args = {"num_hiddens": num_hiddens, "max_len": max_len,
            "position": position, "index": index}
    for name, value in args.items():
        if isinstance(value, bool) or not isinstance(value,
                                                     numbers.Integral):
            raise TypeError(f"{name} must be an int, got {value!r} "
                            f"({type(value).__name__})")
        args[name] = int(value)
    D, T = args["num_hiddens"], args["max_len"]
    if D < 2 or D % 2:
        raise ValueError(f"num_hiddens must be an even int >= 2 (its "
                         f"columns are sine and cosine pairs), got {D}; "
                         f"try {max(2, D + D % 2)}")
    if T < 1:
        raise ValueError(f"max_len must be at least 1 position, got {T}")
    if D * T > PE_MAX_CELLS:
        raise ValueError(
            f"the page draws a cell per entry of P: num_hiddens * max_len "
            f"= {D * T} is more than {PE_MAX_CELLS}; draw fewer positions "
            f"or dimensions")
    if not 0 <= args["position"] < T:
        raise ValueError(f"position must be in [0, max_len) = [0, {T}), "
                         f"got {args['position']}")
    if not 0 <= args["index"] < D // 2:
        raise ValueError(
            f"index (the frequency j of columns 2j and 2j + 1) must be "
            f"in [0, num_hiddens // 2) = [0, {D // 2}), got "
            f"{args['index']}")
    return LiveHTML("positional-encoding", args, NEEDS_JS)


# ---- the translator -----------------------------------------------------

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
    from d2lmini.cache import fingerprint
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
    num_heads = _page_heads(recipe, run.model)
    size = sum(p.numel() for p in run.model.state_dict().values()) * 4
    return LiveHTML("translator", {
        "checkpoint": _checkpoint_name(recipe),
        "recipe": dataclasses.asdict(recipe),
        "fingerprint": fingerprint(recipe, run.data),
        "num_heads": num_heads,
        "weights_sha256": hashlib.sha256(
            weights_bytes(run.model)).hexdigest(),
        **({} if result is None else bleu_fields(result)),
        "size_mb": round(size / 1e6, 1), "example": example,
        "examples": list(examples), "base": base},
        "Type a sentence and see the translation and attention: this box "
        "runs the model in the page of the website.")


# What the manifest records of the run a notebook evaluated (from its
# translator payload), beside what the export measured itself.
NOTEBOOK_FIELDS = ("weights_sha256", "bleu", "bleu_split", "bleu_signature")


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
    replaces the old one in one rename, then other weights files are
    removed.  A crash at any point leaves a manifest beside the weights
    it describes (the old pair or the new one), and a browser never
    serves an older file from its cache under the new name.

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
    from d2lmini.cache import fingerprint
    from d2lmini.experiment import evaluate
    model, data = run.model, run.data
    num_heads = _page_heads(recipe, model)
    if not data.test_pairs:
        raise ValueError("the page states the held-out BLEU of the weights "
                         "it runs: the run's data needs a test split "
                         "(num_test > 0)")
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
    result = evaluate(model, data)
    name = _checkpoint_name(recipe)
    special = lambda v: {t: v[f"<{t}>"] for t in  # noqa: E731
                         ("pad", "bos", "eos", "unk")}
    manifest = {
        "format": MANIFEST_FORMAT, "checkpoint": name,
        "recipe_key": recipe.key(), "fingerprint": fingerprint(recipe, data),
        "attention": kind, "num_heads": num_heads, **sizes,
        "num_steps": data.num_steps,
        "src_vocab": list(data.src_vocab.idx_to_token),
        "tgt_vocab": list(data.tgt_vocab.idx_to_token),
        "src_special": special(data.src_vocab),
        "tgt_special": special(data.tgt_vocab),
        "tensors": tensors, "weights": f"weights-{sha[:16]}.bin",
        "weights_bytes": len(weights), "weights_sha256": sha,
        **bleu_fields(result),
        "notebook": None if evaluated is None
        else notebook_record(evaluated)}
    out = Path(folder) / name
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / manifest["weights"]) as f:
        f.write(weights)
    with atomic_write(out / "manifest.json") as f:  # last: the switch
        f.write(json.dumps(manifest, indent=1).encode("utf-8"))
    for old in out.glob("weights*.bin"):
        if old.name != manifest["weights"]:
            old.unlink()
    return out


def with_site_view(widget, live):
    """One output for both places: ``widget`` (ipywidgets, live with a
    kernel) in Jupyter, ``live`` (a ``LiveHTML``) on the website, whose
    build prefers text/html over widget views (``_config.yml``)."""

    class Both:
        def _repr_mimebundle_(self, include=None, exclude=None):
            bundle = widget._repr_mimebundle_(include=include,
                                              exclude=exclude)
            return {**bundle, "text/html": live.html}

    return Both()
