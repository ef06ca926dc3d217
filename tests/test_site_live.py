"""The website's live explorers and translators, in headless Chromium.

Run with ``make browser`` after ``make book`` (a plain ``pytest`` skips
the tests of the built site, as it does tests/test_book_html.py, whose
server and browser they share; the small pages at the end need only
Debian's chromium, and are skipped without it outside CI).  Every page
is read with the network cut off (any request to another host fails the
test), and:

- every control of every explorer changes what is drawn, from the
  keyboard;
- for two settings of each explorer the numbers drawn equal d2lmini's
  (``masked_softmax``; the scaling statistics) to 1e-4;
- the translators name the checkpoint their notebook evaluated, load it
  only when opened, and translate 24 test-split sentences exactly as
  ``d2lmini.decoding.translate`` does, attention weights to 1e-4;
- their beam search equals ``d2lmini.beam.beam_translate`` on the same
  sentences (hypotheses, scores and attention to 1e-4), its controls
  work from the keyboard, and the beam's tree shows each node's
  attention row when hovered or focused;
- bad input gets a visible answer, and a model that fails to load says
  so;
- once loaded, a translator says whether it runs the weights its section
  evaluated (the notebook's sha256) with the section's held-out BLEU, or
  other weights of the same recipe with their own BLEU beside it (a copy
  of the site serving other weights, as a site built on another machine
  does);
- the Bahdanau and Transformer pages' training scrubbers draw the
  snapshots their notebooks recorded; the page's translator gives the
  last snapshot that the cached run recorded, and when the notebook ran
  on this machine's cache (one run on the page), the scrubber's last
  snapshot equals the translator on every probe sentence (weights to
  the byte the scrubber carries); screenshots of an early and the last
  snapshot go to ``_build/screenshots/``;
- the vision page's digit classifier loads its ViT (at most 1 MB) when
  it comes into view, runs the weights its notebook evaluated, and
  classifies every menu image and a drawn digit as ``d2lmini.vit``
  does; on small pages of their own, a digit drawn with the mouse, the
  keyboard or a finger becomes ``counts_from_bitmap`` of the drawing
  and gets d2lmini's probabilities and attention (1e-5), undo, clear,
  the menu and the block control work, a model that fails to load says
  so, and the redraw times are printed;
- the page's text writer (the pretraining section's) loads its language
  model when it comes into view and writes, for a typed beginning and
  Enter, the tokens ``d2lmini.generation.generate`` draws with the same
  settings and seed (greedy included); on small pages of their own with
  an untrained model of the section's sizes, its controls (temperature,
  top-k, top-p, seed) work from the keyboard, the next-token bars (1e-5)
  and each head's causal attention (1e-4) are d2lmini's numbers, unknown
  words and bad input get an answer, a model that fails to load says
  so, and the times from Enter to the first token are printed;
- in JupyterLab, an explorer, a training scrubber and a text writer run
  in the output of their cell and answer the keyboard;
- page weights stay within their budgets.

The numbers measured (page weights, load and translation times) are
printed in a summary, not asserted: a test never asserts a time.
"""

import base64
import contextlib
import copy
import functools
import hashlib
import json
import math
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from decimal import ROUND_HALF_UP, Decimal
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest
import torch
from test_book_html import HTML, PAGES, browser, server, site  # noqa: F401

from d2lmini.live import (
    export_model,
    live_js,
    lm_js,
    notebook_record,
    payloads,
    vision_js,
)

pytestmark = pytest.mark.book

# Uncompressed bytes each page loaded on the build of c304a63 (with the
# widget manager, before the explorers ran in the page), measured in this
# headless Chromium: no page without a model may be heavier.
BUDGET_BEFORE = {
    "chapters/index": 3.83e6,
    # A new page: no heavier than the lightest page with an explorer.
    "chapters/attention-pooling": 7.83e6,
    "chapters/attention-scoring-functions": 7.83e6,
    "chapters/bahdanau-attention": 8.10e6,
    "chapters/multihead-attention": 8.36e6,
    # New pages: no heavier than the heaviest page with an explorer.
    "chapters/self-attention-and-positional-encoding": 8.36e6,
    "chapters/transformer": 8.36e6,
    "chapters/vision-transformer": 8.36e6,  # before its model loads
    # A new page without an explorer: no heavier than the opener.
    "chapters/decoding": 3.83e6,
}


def weight_budget(doc):
    """A page's budget: its own above; a lab page with a training
    scrubber or a page with a text writer (before its model loads), the
    heaviest page with an explorer; any other lab or solutions page, the
    opener's (it has no explorer)."""
    if doc in BUDGET_BEFORE:
        return BUDGET_BEFORE[doc]
    heaviest = max(BUDGET_BEFORE.values())
    return heaviest if doc in TRAINING_PAGES or doc in writer_pages() \
        else BUDGET_BEFORE["chapters/index"]
BUDGET_WITH_MODEL = 25e6
TRANSLATOR_PAGES = {"chapters/bahdanau-attention": "additive",
                    "chapters/multihead-attention": "multihead",
                    "chapters/transformer": "transformer"}
# Pages with a digit classifier, whose ViT loads when it comes into
# view; the model is at most VIT_MAX_BYTES.
VISION_PAGES = ("chapters/vision-transformer",)
VIT_MAX_BYTES = 1e6
MEASURED = {}  # for the summary


class Page:
    """A page opened with the network cut off, recording what it loads
    and every script or console error."""

    def __init__(self, browser, server, doc, block=None):  # noqa: F811
        self.doc, self.block = doc, block
        self.context = browser.new_context(viewport={"width": 1280,
                                                     "height": 900})
        self.page = self.context.new_page()
        self.paths, self.external, self.errors = [], [], []
        self.page.route("**/*", self._route)
        self.page.on("requestfinished", lambda r: self.paths.append(
            unquote(urlsplit(r.url).path)))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text)
                     if m.type == "error" else None)
        port = server.server_address[1]
        self.page.goto(f"http://127.0.0.1:{port}/{doc}.html",
                       wait_until="networkidle")

    def _route(self, route):
        url = route.request.url
        if urlsplit(url).hostname != "127.0.0.1":
            self.external.append(url)
            return route.abort()
        if self.block and re.search(self.block, url):
            return route.abort()
        return route.continue_()

    def bytes_loaded(self):
        """Uncompressed size of every distinct file the page loaded."""
        files = {HTML / p.lstrip("/") for p in self.paths}
        return sum(f.stat().st_size for f in files if f.is_file())

    def close(self):
        self.context.close()
        assert not self.external, f"requests to other hosts: {self.external}"


@pytest.fixture
def open_page(browser, server):  # noqa: F811
    pages = []

    def opener(doc, block=None, via=None):
        """Open ``doc`` as served by ``via`` (default: the built site)."""
        pages.append(Page(browser, via or server, doc, block))
        return pages[-1]

    yield opener
    for p in pages:
        p.close()


def page_text(doc):
    return (HTML / f"{doc}.html").read_text(encoding="utf-8")


def explorer_data(page, kind):
    """The JSON data of the first explorer of a kind on the page."""
    roots = page.page.locator(f'[data-d2l-live="{kind}"]')
    assert roots.count() >= 1, f"{page.doc}: no {kind} explorer"
    html = (HTML / f"{page.doc}.html").read_text(encoding="utf-8")
    return roots.first, payloads(html, kind)[0]


def drawn(root, selector="svg rect[data-value]"):
    """The data-value of every cell drawn under root, as floats."""
    return [float(v) for v in root.locator(selector).evaluate_all(
        "els => els.map(e => e.dataset.value)")]


def heatmap_values(root, rows, cols):
    values = drawn(root.locator("svg.d2l-heatmap").first, "rect[data-row]")
    assert len(values) == rows * cols, (len(values), rows, cols)
    return np.array(values).reshape(rows, cols)


# ---- explorers ------------------------------------------------------------

@pytest.mark.parametrize("doc", PAGES)
def test_every_control_changes_the_drawing(doc, open_page):
    page = open_page(doc)
    roots = page.page.locator("[data-d2l-live]")
    changed = []
    for i in range(roots.count()):
        root = roots.nth(i)
        assert root.get_attribute("data-d2l-mounted") == "1", (
            f"{doc}: explorer {i} did not start: {page.errors}")
        if root.get_attribute("data-d2l-live") in (
                "translator", "digit-classifier", "text-writer"):
            # Their controls need the model, and one step of the writer's
            # top-p may keep the same tokens: see the tests below.
            continue
        for k in range(root.locator("input[type=range]").count()):
            control = root.locator("input[type=range]").nth(k)
            before = root.locator(".d2l-chart").inner_html()
            control.focus()
            at_max = control.evaluate("e => e.value === e.max")
            control.press("ArrowLeft" if at_max else "ArrowRight")
            after = root.locator(".d2l-chart").inner_html()
            assert after != before, (f"{doc}: moving control "
                                     f"{control.get_attribute('name')} "
                                     "changed nothing")
            changed.append(control.get_attribute("name"))
        for k in range(root.locator("select").count()):
            control = root.locator("select").nth(k)
            before = root.locator(".d2l-chart").inner_html()
            control.focus()
            control.press("ArrowDown")
            after = root.locator(".d2l-chart").inner_html()
            assert after != before, (f"{doc}: choosing another "
                                     f"{control.get_attribute('name')} "
                                     "changed nothing")
            changed.append(control.get_attribute("name"))
    assert not page.errors, f"{doc}: {page.errors}"
    MEASURED.setdefault("controls", {})[doc] = changed


def test_masked_softmax_explorer_draws_masked_softmax(open_page):
    from d2lmini.attention import masked_softmax

    page = open_page("chapters/attention-scoring-functions")
    root, data = explorer_data(page, "masked-softmax")
    scores = torch.tensor(data["scores"])
    L, S = scores.shape
    length = root.locator('input[name="valid-length"]')
    temperature = root.locator('input[name="log-temperature"]')

    def check(valid_len, log_tau):
        assert int(length.input_value()) == valid_len
        assert float(temperature.input_value()) == pytest.approx(log_tau)
        tau = 10 ** log_tau
        want = masked_softmax(scores[None].double() / tau,
                              torch.tensor([valid_len]))[0]
        got = heatmap_values(root, L, S)
        np.testing.assert_allclose(got, want.numpy(), atol=1e-4)
        labels = root.locator("svg.d2l-heatmap").get_attribute("aria-label")
        assert f"{valid_len} valid" in labels
        table = root.locator("details.d2l-numbers td").all_text_contents()
        assert len(table) == L * S  # the text alternative: every number

    check(data["valid_len"], np.log10(data["temperature"]))
    length.focus()
    length.press("Home")  # valid length 0: a row of zeros, not nan
    check(0, 0.0)
    length.press("End")
    temperature.focus()
    for _ in range(10):
        temperature.press("ArrowRight")
    check(S, 0.5)
    assert not page.errors, page.errors


def test_scaling_explorer_draws_the_statistics_of_its_scores(open_page):
    page = open_page("chapters/attention-scoring-functions")
    root, data = explorer_data(page, "scaling")
    N, S = data["num_queries"], data["num_keys"]
    slider = root.locator('input[name="size"]')

    def check(d):
        assert root.get_attribute("data-d") == str(d)
        raw = np.frombuffer(base64.b64decode(data["scores"][str(d)]),
                            dtype="<f4").astype(np.float64).reshape(N, S)
        scaled = raw / np.sqrt(d)
        top = lambda x: torch.softmax(torch.tensor(x), -1).max(-1).values \
            .numpy()  # noqa: E731
        want = {"std_raw": raw.std(), "std_scaled": scaled.std(),
                "mean_largest_raw": top(raw).mean(),
                "mean_largest_scaled": top(scaled).mean(),
                "saturated_raw": (top(raw) > 0.9).mean(),
                "saturated_scaled": (top(scaled) > 0.9).mean()}
        got = json.loads(root.get_attribute("data-numbers"))
        for name, value in want.items():
            assert got[name] == pytest.approx(value, abs=1e-4), name
        cells = root.locator("table.d2l-stats td").count()
        assert cells == 6

    check(data["d"])
    slider.focus()
    slider.press("ArrowRight")
    check(data["dims"][data["dims"].index(data["d"]) + 1])
    slider.press("Home")
    check(data["dims"][0])
    assert not page.errors, page.errors


def test_kernel_regression_explorer_draws_nadaraya_watson(open_page):
    from d2lmini.pooling import nadaraya_watson

    page = open_page("chapters/attention-pooling")
    root, data = explorer_data(page, "kernel-regression")
    keys, values, queries, truth = (
        torch.tensor(data[k], dtype=torch.float64)
        for k in ("x_train", "y_train", "x_query", "f_query"))
    width = root.locator('input[name="log-width"]')
    kernel = root.locator('select[name="kernel"]')
    query = root.locator('input[name="query"]')

    def check(name, log_width, q):
        pred, weights = nadaraya_watson(queries, keys, values, name,
                                        10 ** log_width)
        got = json.loads(root.get_attribute("data-numbers"))
        np.testing.assert_allclose(got["preds"], pred.numpy(), atol=1e-4)
        np.testing.assert_allclose(got["weights"], weights[q].numpy(),
                                   atol=1e-4)
        mse = float(((pred - truth) ** 2).mean())
        assert got["mse"] == pytest.approx(mse, abs=1e-4)
        assert f"{mse:.3f}" in root.locator("svg").get_attribute(
            "aria-label")
        stems = drawn(root, "svg line[data-key]")
        assert stems == pytest.approx(
            [w for w in weights[q].tolist() if w > 0], abs=1e-4)

    # The slider snaps log10(width) to its steps of 0.05.
    assert float(width.input_value()) == pytest.approx(
        round(np.log10(data["width"]) / 0.05) * 0.05)
    check(data["kernel"], float(width.input_value()), data["query"])
    kernel.select_option("boxcar")
    width.focus()
    width.press("Home")  # the narrowest width: empty windows predict 0
    query.focus()
    query.press("End")
    check("boxcar", -1.5, len(data["x_query"]) - 1)
    assert not page.errors, page.errors


def test_positional_encoding_explorer_draws_the_encoding(open_page):
    import math

    from d2lmini.transformer import PositionalEncoding

    page = open_page("chapters/self-attention-and-positional-encoding")
    root, data = explorer_data(page, "positional-encoding")
    D, T = data["num_hiddens"], data["max_len"]
    P = PositionalEncoding(D, max_len=T).P.double().numpy()
    np.testing.assert_allclose(heatmap_values(root, T, D), P, atol=1e-6)
    for name, key in (("position", "position"), ("frequency", "index")):
        control = root.locator(f"input[name={name}]")
        control.focus()
        control.press("ArrowRight")
        numbers = json.loads(root.get_attribute("data-numbers"))
        assert numbers[key] == data[key] + 1
    i, j = numbers["position"], numbers["index"]
    assert (numbers["sin"], numbers["cos"]) == pytest.approx(
        (P[i, 2 * j], P[i, 2 * j + 1]), abs=1e-6)
    assert numbers["wavelength"] == pytest.approx(
        2 * math.pi * 10000 ** (2 * j / D))
    text = root.locator("p.d2l-output").inner_text()
    assert f"P[{i}, {2 * j}] = {P[i, 2 * j]:.3f}" in text
    assert not page.errors, page.errors


# ---- translators --------------------------------------------------------

@pytest.fixture(scope="module")
def runs():
    """The Python models of the translator pages, from the cache."""
    from d2lmini.cache import fingerprint, train_or_load
    from d2lmini.experiment import Recipe

    found = {}
    for doc in TRANSLATOR_PAGES:
        html = (HTML / f"{doc}.html").read_text(encoding="utf-8")
        spec = payloads(html, "translator")[0]
        recipe = Recipe(**spec["recipe"])
        run = train_or_load(recipe, progress=False)
        assert fingerprint(recipe, run.data) == spec["fingerprint"], (
            f"{doc}: the page's checkpoint is not the model the cache "
            "holds now; run `make execute` and `make book`")
        found[doc] = (spec, recipe, run)
    return found


def open_translator(page):
    root = page.page.locator('[data-d2l-live="translator"]').first
    summary = root.locator("summary")
    summary.focus()
    summary.press("Enter")  # from the keyboard
    page.page.wait_for_function(
        """() => ['ready', 'error'].includes(document.querySelector(
             '[data-d2l-live="translator"]').dataset.state)""",
        timeout=60_000)
    return root


def served_manifest(spec):
    folder = HTML / "_static" / "models" / spec["checkpoint"]
    return json.loads((folder / "manifest.json").read_text())


@pytest.mark.parametrize("doc", TRANSLATOR_PAGES)
def test_translator_loads_the_evaluated_checkpoint_only_when_opened(
        doc, open_page, runs):
    spec, recipe, run = runs[doc]
    page = open_page(doc)
    root = page.page.locator('[data-d2l-live="translator"]').first
    about = root.locator(".d2l-checkpoint").inner_text()
    assert spec["checkpoint"] in about and recipe.key() in about
    assert not any("models/" in p for p in page.paths), (
        "the model loaded before the reader opened the box")
    before = page.bytes_loaded()
    assert before <= BUDGET_BEFORE[doc], (doc, before)
    root = open_translator(page)
    assert root.get_attribute("data-state") == "ready", page.errors
    after = page.bytes_loaded()
    assert after < BUDGET_WITH_MODEL, (doc, after)
    manifest = served_manifest(spec)
    assert manifest["fingerprint"] == spec["fingerprint"]
    # The served weights are the cached checkpoint's, byte for byte.
    weights = b"".join(v.detach().numpy().astype("<f4").tobytes()
                       for v in run.model.state_dict().values())
    assert hashlib.sha256(weights).hexdigest() == manifest["weights_sha256"]
    MEASURED.setdefault("weights", {})[doc] = (
        before, after, float(root.get_attribute("data-load-ms")))
    assert not page.errors, page.errors


@pytest.mark.parametrize("doc", TRANSLATOR_PAGES)
def test_translator_equals_d2lmini_on_test_sentences(doc, open_page, runs):
    from d2lmini.decoding import translate

    spec, recipe, run = runs[doc]
    sentences = [e for e, _ in run.data.test_pairs[:24]]
    ours = translate(run.model, run.data, sentences)
    page = open_page(doc)
    open_translator(page)
    theirs = page.page.evaluate(
        """(ss) => ss.map((s) => document.querySelector(
             '[data-d2l-live="translator"]').d2l.translate(s))""",
        sentences)
    worst = 0.0
    for s, a, b in zip(sentences, ours, theirs):
        assert b["srcTokens"] == a.src_tokens, s
        assert b["outTokens"] == a.out_tokens, s
        weights = a.attention if a.attention.dim() == 3 \
            else a.attention[None]
        diff = np.abs(np.array(b["attention"]) - weights.numpy()).max()
        worst = max(worst, float(diff))
    assert worst < 1e-4
    MEASURED.setdefault("parity", {})[doc] = (len(sentences), worst)
    assert not page.errors, page.errors


# Ten words and a full stop: the sentence the latency is measured on.
TEN_WORDS = "i think we should go home before it gets dark ."


def translated_after(page, root, act):
    """Do act() and wait for the translation it starts."""
    count = int(root.get_attribute("data-translations") or 0)
    act()
    page.page.wait_for_function(
        f"""() => Number(document.querySelector(
             '[data-d2l-live="translator"]').dataset.translations)
             > {count}""")


def type_sentence(page, root, text):
    box = root.locator("input[type=text]")
    box.fill(text)
    if text.strip():
        translated_after(page, root, lambda: box.press("Enter"))
    else:
        box.press("Enter")


@pytest.mark.parametrize("doc", TRANSLATOR_PAGES)
def test_translator_box_from_the_keyboard(doc, open_page, runs):
    from d2lmini.decoding import translate

    spec, recipe, run = runs[doc]
    page = open_page(doc)
    root = open_translator(page)
    ten = TEN_WORDS
    assert len(ten.split()) == 11  # ten words and a full stop
    times = []
    for _ in range(5):
        type_sentence(page, root, ten)
        times.append(float(root.get_attribute("data-last-ms")))
    ours = translate(run.model, run.data, [ten])[0]
    # The page says so when the model stopped without <eos>.
    stopped = "" if ours.out_tokens[-1:] == ["<eos>"] else (
        f" (stopped after {len(ours.tokens)} tokens without <eos>)")
    assert root.locator(".d2l-output").inner_text() == \
        "French: " + (ours.text or "(empty)") + stopped
    rows, cols = len(ours.out_tokens), len(ours.src_tokens)
    maps = ours.attention if ours.attention.dim() == 3 \
        else ours.attention[None]
    np.testing.assert_allclose(heatmap_values(root, rows, cols),
                               maps.mean(0).numpy(), atol=1e-4)
    label = root.locator("svg.d2l-heatmap").get_attribute("aria-label")
    assert ours.out_tokens[0] in label and root.locator(
        "details.d2l-numbers td").count() == rows * cols
    if spec["num_heads"] > 1:
        head = root.locator("select")
        head.focus()
        head.press("ArrowDown")  # mean -> head 1
        np.testing.assert_allclose(heatmap_values(root, rows, cols),
                                   maps[0].numpy(), atol=1e-4)
        assert "(head 1)" in root.locator("svg.d2l-heatmap text").first \
            .text_content()
    example = root.locator(".d2l-examples button").first
    example.focus()
    example.press("Enter")
    assert root.locator("input[type=text]").input_value() == \
        spec["examples"][0]
    MEASURED.setdefault("enter_to_heatmap_ms", {})[doc] = (
        statistics.median(times), min(times), max(times))
    assert not page.errors, page.errors


BEAM_SETTINGS = ((4, 1.0), (8, 2.0))


@pytest.mark.parametrize("doc", TRANSLATOR_PAGES)
def test_translator_beam_equals_d2lmini_on_test_sentences(doc, open_page,
                                                          runs):
    from d2lmini.beam import beam_translate

    spec, recipe, run = runs[doc]
    sentences = [e for e, _ in run.data.test_pairs[:24]]
    page = open_page(doc)
    open_translator(page)
    worst_score = worst_weight = 0.0
    for k, alpha in BEAM_SETTINGS:
        ours = beam_translate(run.model, run.data, sentences, beam_size=k,
                              length_penalty=alpha)
        theirs = page.page.evaluate(
            """([ss, k, alpha]) => ss.map((s) => {
                 const r = document.querySelector(
                   '[data-d2l-live="translator"]').d2l.beamTranslate(
                   s, k, alpha);
                 return {srcTokens: r.srcTokens, outTokens: r.outTokens,
                         score: r.score, logProb: r.logProb,
                         attention: r.attention, hypotheses: r.hypotheses};
               })""", [sentences, k, alpha])
        for s, a, b in zip(sentences, ours, theirs):
            where = f"{s!r}, beam {k}, alpha {alpha}"
            assert b["srcTokens"] == a.src_tokens, where
            assert b["outTokens"] == a.out_tokens, where
            assert [h["tokens"] for h in b["hypotheses"]] == \
                [h for h, _ in a.hypotheses], where
            scores = [h["score"] for h in b["hypotheses"]] + [
                b["score"], b["logProb"]]
            want = [h for _, h in a.hypotheses] + [a.score, a.log_prob]
            worst_score = max(worst_score, float(np.abs(
                np.array(scores) - np.array(want)).max()))
            weights = a.attention if a.attention.dim() == 3 \
                else a.attention[None]
            worst_weight = max(worst_weight, float(np.abs(
                np.array(b["attention"]) - weights.numpy()).max()))
    assert worst_score < 1e-4 and worst_weight < 1e-4, (worst_score,
                                                        worst_weight)
    MEASURED.setdefault("beam_parity", {})[doc] = (
        len(sentences), BEAM_SETTINGS, worst_score, worst_weight)
    assert not page.errors, page.errors


def press_until(page, root, control, key, value):
    """Press key on a range control until it reads value, each press
    waiting for the translation it starts."""
    control.focus()
    while float(control.input_value()) != value:
        translated_after(page, root, lambda: control.press(key))


@pytest.mark.parametrize("doc", TRANSLATOR_PAGES)
def test_translator_beam_controls_and_tree(doc, open_page, runs):
    from d2lmini.beam import beam_translate

    spec, recipe, run = runs[doc]
    page = open_page(doc)
    root = open_translator(page)
    ten = TEN_WORDS
    type_sentence(page, root, ten)
    assert root.locator(".d2l-beam-tree").count() == 0  # greedy: no beam
    # From the keyboard: the beam to 4, the length penalty to 1.
    press_until(page, root, root.locator("input[name=beam]"), "ArrowRight",
                4)
    press_until(page, root, root.locator("input[name=alpha]"),
                "ArrowRight", 1.0)
    times = []
    for _ in range(5):
        type_sentence(page, root, ten)
        times.append(float(root.get_attribute("data-last-ms")))
    ours = beam_translate(run.model, run.data, [ten], beam_size=4,
                          length_penalty=1.0)[0]
    said = root.locator(".d2l-output").inner_text()
    stopped = "" if ours.finished else (
        f" (stopped after {len(ours.tokens)} tokens without <eos>)")
    assert said.startswith(f"French: {ours.text or '(empty)'}{stopped} "
                           "(beam 4, α = 1.0: log P "), said
    log_p, score = map(float, re.findall(r"-?\d+\.\d{3}", said)[-2:])
    assert log_p == pytest.approx(ours.log_prob, abs=2e-3)
    assert score == pytest.approx(ours.score, abs=2e-3)
    rows, cols = len(ours.out_tokens), len(ours.src_tokens)
    maps = ours.attention if ours.attention.dim() == 3 \
        else ours.attention[None]
    np.testing.assert_allclose(
        heatmap_values(root.locator(".d2l-chart"), rows, cols),
        maps.mean(0).numpy(), atol=1e-4)
    # The finished hypotheses, best first.
    listed = root.locator(".d2l-hypotheses tbody th").all_inner_texts()
    assert [t.removesuffix(" (cut at the length limit)") for t in listed] \
        == [" ".join(h) or "(empty)" for h, _ in ours.hypotheses]
    # The tree: the best path has a node per output token; hovering one
    # (or tabbing to it) shows the attention row of its step.
    tree = root.locator("svg.d2l-beam-tree")
    assert tree.count() == 1
    path = tree.locator('g.d2l-beam-node[data-best="1"]')
    assert path.count() == rows
    assert path.evaluate_all("els => els.map(e => e.dataset.token)") == \
        ours.out_tokens
    row = root.locator(".d2l-beam-row")
    for how in ("hover", "focus"):
        if how == "focus":  # the mouse out of the way: it hovers too
            page.page.mouse.move(0, 0)
        for i in range(rows):
            getattr(path.nth(i), how)()
            assert row.get_attribute("data-step") == str(i + 1), how
            np.testing.assert_allclose(
                heatmap_values(row, 1, cols)[0], maps.mean(0)[i].numpy(),
                atol=1e-4, err_msg=how)
    nodes = tree.locator("g.d2l-beam-node").count()
    assert root.locator(".d2l-beam-table tbody tr").count() == nodes
    MEASURED.setdefault("beam4_enter_ms", {})[doc] = (
        statistics.median(times), min(times), max(times), nodes)
    assert not page.errors, page.errors


def test_translator_answers_bad_input_visibly(open_page, runs):
    doc = "chapters/bahdanau-attention"
    spec, recipe, run = runs[doc]
    T = run.data.num_steps
    page = open_page(doc)
    root = open_translator(page)
    status = root.locator(".d2l-status")
    notes = root.locator(".d2l-note")
    output = root.locator(".d2l-output")
    # Issue 27, point 13: characters trim() keeps and the tokenizer drops
    # answer as an empty box does, after a translation as before one.
    for empty in ("", "   \t ", "\x85", "\x1c\x1d\x1e\x1f"):
        type_sentence(page, root, "go .")
        assert root.locator("svg.d2l-heatmap").count() == 1
        type_sentence(page, root, empty)
        assert status.is_visible() and "Type an English sentence" in \
            status.inner_text(), repr(empty)
        assert root.locator("svg.d2l-heatmap").count() == 0, repr(empty)
        assert output.inner_text() == "", repr(empty)
    type_sentence(page, root, "?!")
    assert "only punctuation" in notes.inner_text()
    assert root.locator("svg.d2l-heatmap").count() == 1
    assert "Type an English" not in status.inner_text()
    type_sentence(page, root, "the zorglub is blue .")
    assert "read as <unk>: zorglub" in notes.inner_text()
    labels = root.locator("svg.d2l-heatmap text").all_text_contents()
    assert "<unk>" in labels
    words = ("one two three four five six seven eight nine ten eleven "
             "twelve thirteen fourteen fifteen").split()
    type_sentence(page, root, " ".join(words))
    assert f"only the first {T} of its {len(words)} words" in \
        notes.inner_text()
    cols = root.locator("svg.d2l-heatmap rect[data-row='0']").count()
    assert cols == T
    assert not page.errors, page.errors


def test_translator_says_when_the_model_fails_to_load(open_page):
    page = open_page("chapters/multihead-attention",
                     block=r"weights[^/]*\.bin$")
    root = open_translator(page)
    assert root.get_attribute("data-state") == "error"
    status = root.locator(".d2l-status")
    assert status.is_visible() and "could not be loaded" in \
        status.inner_text()
    assert status.get_attribute("role") == "alert"
    # Only the blocked request's own console message, no script error.
    assert all("Failed to load resource" in e or ".bin" in e
               for e in page.errors), page.errors


# ---- which weights the page says it runs ---------------------------------

# What LiveHTML puts after each explorer: the package's script
# (d2lmini.live.live_js()), inline.
INLINE_LIVE_JS = re.compile(r"<script>\n(/\* d2lmini live explorers.*?)"
                            r"</script>", re.S)


@pytest.mark.parametrize("doc", PAGES)
def test_pages_run_the_package_live_js(doc, site):  # noqa: F811
    """The page runs the script of its notebook's outputs: it must be
    d2lmini's current ``live_js()`` (the translator's words on its
    weights, say)."""
    text = page_text(doc)
    scripts = INLINE_LIVE_JS.findall(text)
    if "data-d2l-live=" in text:
        assert scripts, f"{doc}: its explorers come with no script"
    # The digit classifier and the text writer carry a second script.
    want = (live_js(), vision_js(), lm_js())
    stale = sum(s not in want for s in scripts)
    assert not stale, (
        f"{doc}: {stale} of its {len(scripts)} scripts are none of "
        "d2lmini.live.live_js(), vision_js() and lm_js(): run `make "
        "execute` and `make book`")


def weights_statement(page):
    """Open the page's translator; its root and its words on its
    weights (visible once the model loaded)."""
    root = open_translator(page)
    assert root.get_attribute("data-state") == "ready", page.errors
    note = root.locator(".d2l-weights")
    assert note.is_visible(), "the page does not say which weights it runs"
    return root, note.inner_text()


def check_statement(root, text, spec, manifest):
    """The page's words are those its payload (what the notebook
    evaluated) and the served manifest (what the build exported and
    scored) call for, numbers to 1 decimal as in the sections."""
    assert spec.get("weights_sha256"), (
        "the notebook's output names no weights: run `make execute`")
    assert manifest["notebook"] == notebook_record(spec)
    theirs = spec.get("bleu")
    if manifest["weights_sha256"] == spec["weights_sha256"]:
        assert root.get_attribute("data-weights") == "same"
        bleu = manifest["bleu"] if theirs is None else theirs
        assert text == ("These are the weights the section evaluated "
                        f"(held-out BLEU {bleu:.1f}).")
        return "same"
    assert root.get_attribute("data-weights") == "other"
    assert text.startswith("This site was built on a machine that trained "
                           "its own weights from the same code and seed")
    if theirs is None:  # an older notebook: the export's BLEU only
        assert f"they score BLEU {manifest['bleu']:.1f} on the section's " \
            "test sentences" in text, text
    else:
        assert text.endswith(
            f"they score BLEU {manifest['bleu']:.1f} on the same test "
            f"sentences; the run this section reports scored "
            f"{theirs:.1f}."), text
    return "other"


@pytest.mark.parametrize("doc", TRANSLATOR_PAGES)
def test_translator_says_which_weights_it_runs(doc, open_page, runs):
    """The built site: the weights this machine exported, whichever
    machine trained them (the same weights when the notebooks ran here)."""
    spec, recipe, run = runs[doc]
    page = open_page(doc)
    root, text = weights_statement(page)
    manifest = served_manifest(spec)
    assert manifest["bleu_split"] == "test"
    if spec.get("bleu_signature"):
        assert manifest["bleu_signature"] == spec["bleu_signature"]
    MEASURED.setdefault("weights_case", {})[doc] = check_statement(
        root, text, spec, manifest)
    assert not page.errors, page.errors


@contextlib.contextmanager
def serving(folder):
    """Serve ``folder`` on 127.0.0.1 at a free port, in a thread."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


OTHER_DOC = "chapters/bahdanau-attention"
TAMPERED_DOC = "chapters/multihead-attention"


@pytest.fixture(scope="module")
def other_site(tmp_path_factory, runs):
    """A copy of the site as a machine that trained other weights builds
    it: OTHER_DOC's checkpoint holds the cached model with seeded noise
    added to every weight, exported again (its own sha256 and held-out
    BLEU); TAMPERED_DOC's weights file has one bit flipped (the same
    size, another sha256 than its manifest's).  The rest of the site is
    linked, not copied.  Yields the server and the run of the other
    weights."""
    spec, recipe, run = runs[OTHER_DOC]
    html = tmp_path_factory.mktemp("other-site") / "html"
    shutil.copytree(HTML, html, copy_function=os.symlink)
    models = html / "_static" / "models"
    shutil.rmtree(models / spec["checkpoint"])
    model = copy.deepcopy(run.model)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * p.std() * torch.randn(p.shape, generator=gen))
    other = run._replace(model=model.eval())
    export_model(recipe, other, models, evaluated=spec)
    tampered = models / runs[TAMPERED_DOC][0]["checkpoint"]
    manifest = json.loads((tampered / "manifest.json").read_text())
    weights = tampered / manifest["weights"]
    flipped = bytearray(weights.read_bytes())
    flipped[100] ^= 0x40  # one bit: the same size, another sha256
    weights.unlink()  # a link into the real site: write a file instead
    weights.write_bytes(bytes(flipped))
    with serving(html) as httpd:
        yield httpd, html, other


def test_translator_says_when_it_runs_other_weights(open_page, other_site,
                                                    runs):
    from d2lmini.decoding import translate

    httpd, html, other = other_site
    spec, recipe, run = runs[OTHER_DOC]
    manifest = json.loads((html / "_static" / "models" / spec["checkpoint"]
                           / "manifest.json").read_text())
    assert manifest["weights_sha256"] != spec["weights_sha256"]
    page = open_page(OTHER_DOC, via=httpd)
    root, text = weights_statement(page)
    assert check_statement(root, text, spec, manifest) == "other"
    # It runs those weights: it translates as the noisy model does.
    sentences = [e for e, _ in run.data.test_pairs[:6]]
    theirs = page.page.evaluate(
        """(ss) => ss.map((s) => document.querySelector(
             '[data-d2l-live="translator"]').d2l.translate(s).outTokens)""",
        sentences)
    assert theirs == [t.out_tokens for t in translate(
        other.model, other.data, sentences)]
    assert not page.errors, page.errors
    MEASURED["other_weights"] = (manifest["bleu"], spec.get("bleu"), text)


def test_translator_refuses_weights_its_manifest_does_not_describe(
        open_page, other_site):
    httpd, _, _ = other_site
    page = open_page(TAMPERED_DOC, via=httpd)
    root = open_translator(page)
    assert root.get_attribute("data-state") == "error"
    status = root.locator(".d2l-status")
    assert "not the file its manifest describes" in status.inner_text()
    assert not root.locator(".d2l-weights").is_visible()
    assert not page.errors, page.errors


@pytest.mark.parametrize("doc", [d for d in PAGES
                                 if d not in TRANSLATOR_PAGES
                                 and d not in VISION_PAGES])
def test_pages_without_a_model_stay_within_their_weight(doc, open_page):
    if doc in writer_pages():
        pytest.skip(f"{doc} has a text writer, whose model loads when it "
                    "comes into view: test_writer_page_writes_like_d2lmini")
    page = open_page(doc)
    loaded = page.bytes_loaded()
    assert loaded <= weight_budget(doc), (doc, loaded)
    MEASURED.setdefault("weights", {})[doc] = (loaded, None, None)


# ---- the training scrubbers of the built site ----------------------------

# The lab pages with a training scrubber -> the section whose translator
# runs the model whose training the scrubber replays.
TRAINING_PAGES = {"chapters/lab-bahdanau-attention":
                  "chapters/bahdanau-attention",
                  "chapters/lab-transformer": "chapters/transformer"}
SHOTS = HTML.parent / "screenshots"


def scrub_to(page, root, k):
    """Move the slider to snapshot k as a reader's input does; the time
    from the input event to the drawing laid out, in ms."""
    return page.evaluate(
        """([root, k]) => {
             const slider = root.querySelector("input[name=snapshot]");
             const start = performance.now();
             slider.value = String(k);
             slider.dispatchEvent(new Event("input", {bubbles: true}));
             root.getBoundingClientRect();  // layout, as a frame would
             return performance.now() - start;
           }""", [root.element_handle(), k])


def shoot(root, path):
    """A screenshot of root alone: the theme's sticky header and skip
    link, which cover what is scrolled under them, are hidden for it,
    and the theme's smooth scrolling is turned off first (a capture in
    the middle of a smooth scroll is of the wrong part of the page)."""
    root.evaluate("""(el) => {
        document.documentElement.style.scrollBehavior = "auto";
        el.scrollIntoView({block: "start", behavior: "instant"});
    }""")
    root.screenshot(path=path, animations="disabled", style=(
        ".bd-header, .bd-header-article, .skip-link "
        "{visibility: hidden !important}"))


@pytest.mark.parametrize("doc", TRAINING_PAGES)
def test_training_scrubber_replays_the_cached_run(doc, open_page, runs):
    """The lab page's scrubber draws the snapshots its notebook recorded,
    and the section's translator runs the model whose training the cache
    recorded: it gives that recording's last snapshot.  When the
    notebook ran on this machine's cache, the two are one run, and the
    scrubber's last snapshot equals the translator on every probe.  (A
    clone whose machine trained its own models holds the committed
    notebook's run on the page and its own weights in the translator,
    which says so; then the two cannot agree.)"""
    from d2lmini.live import training_scrubber

    spec, recipe, run = runs[TRAINING_PAGES[doc]]
    snaps = run.snapshots
    assert snaps is not None, (
        f"{doc}: the cached model has no training snapshots; run `make "
        "execute` and `make book`")
    shown = payloads(page_text(doc), "training")
    assert len(shown) == 1, f"{doc}: {len(shown)} training scrubbers"
    page_snaps = payload_snapshots(shown[0])
    ours = training_scrubber(run).data
    same_run = all(shown[0][key] == ours[key]
                   for key in ("attention", "outputs", "bleu"))
    page = open_page(doc)
    root = page.page.locator('[data-d2l-live="training"]')
    assert root.get_attribute("data-d2l-mounted") == "1", page.errors
    p, K = shown[0]["probe"], len(page_snaps)
    check_scrubber_draws(root, page_snaps, 0, p)
    root.scroll_into_view_if_needed()
    first_ms = scrub_to(page.page, root, 1)  # the first scrub
    check_scrubber_draws(root, page_snaps, 1, p)
    early = min(K - 1, 6)
    scrub_to(page.page, root, early)
    SHOTS.mkdir(parents=True, exist_ok=True)
    name = doc.split("/")[-1]
    shoot(root, SHOTS / f"{name}-training-early.png")
    times = [scrub_to(page.page, root, k) for k in range(K)]
    check_scrubber_draws(root, page_snaps, K - 1, p)
    shoot(root, SHOTS / f"{name}-training-late.png")
    section = open_page(TRAINING_PAGES[doc])  # the section's translator
    open_translator(section)
    select = root.locator("select[name=probe]")
    worst_recorded = worst_drawn = 0.0
    for i, probe in enumerate(snaps.probes):
        theirs = section.page.evaluate(
            """(s) => document.querySelector(
                 '[data-d2l-live="translator"]').d2l.translate(s)""",
            probe.sentence)
        want = np.array(theirs["attention"])
        want = want if want.ndim == 3 else want[None]
        # The translator runs the cached model: its recording's end.
        assert theirs["outTokens"] == snaps.out_tokens[-1][i], probe
        worst_recorded = max(worst_recorded, float(np.abs(
            recorded(snaps, -1, i) - want).max()))
        if same_run:  # and so does the page's scrubber, to its bytes
            select.select_option(str(i))
            drawn = scrubber_maps(root)
            assert len(drawn) == len(want)
            worst_drawn = max(worst_drawn, max(
                float(np.abs(a - b).max()) for a, b in zip(drawn, want)))
    assert worst_recorded <= 1e-4, worst_recorded
    assert worst_drawn <= 1 / 510 + 1e-4, worst_drawn
    MEASURED.setdefault("training", {})[doc] = (
        len(base64.b64decode(shown[0]["attention"])),
        len(json.dumps(shown[0], separators=(",", ":"))),
        float(root.get_attribute("data-mount-ms")), first_ms,
        statistics.median(times), max(times), len(snaps.probes),
        worst_drawn if same_run else None)
    assert not page.errors, page.errors
    assert not section.errors, section.errors


def test_live_summary(capsys):
    """Print what the browser measured (not a check of time)."""
    with capsys.disabled():
        print("\nlive site:")
        for doc, (before, after, load) in sorted(
                MEASURED.get("weights", {}).items()):
            more = f", {after / 1e6:.2f} MB with the model loaded in " \
                f"{load:.0f} ms" if after else ""
            print(f"  {doc}: {before / 1e6:.2f} MB{more}")
        for doc, (n, worst) in MEASURED.get("parity", {}).items():
            print(f"  {doc}: {n} test sentences equal, max |weight "
                  f"difference| {worst:.1e}")
        for doc, (med, lo, hi) in MEASURED.get(
                "enter_to_heatmap_ms", {}).items():
            print(f"  {doc}: Enter to heatmap, 10 words: median "
                  f"{med:.0f} ms (min {lo:.0f}, max {hi:.0f})")
        for doc, (n, settings, score, weight) in MEASURED.get(
                "beam_parity", {}).items():
            print(f"  {doc}: beam search on {n} test sentences equals "
                  f"d2lmini's at (beam, alpha) = {settings}, max |score "
                  f"difference| {score:.1e}, |weight difference| "
                  f"{weight:.1e}")
        for doc, (med, lo, hi, nodes) in MEASURED.get(
                "beam4_enter_ms", {}).items():
            print(f"  {doc}: Enter to result, beam 4, alpha 1, 10 words: "
                  f"median {med:.0f} ms (min {lo:.0f}, max {hi:.0f}); "
                  f"{nodes} nodes in the tree")
        for doc, case in MEASURED.get("weights_case", {}).items():
            print(f"  {doc}: serves the {case} weights as the section")
        for doc, (raw, payload, mount, first, med, worst_ms, probes,
                  worst) in MEASURED.get("training", {}).items():
            print(f"  {doc}: training scrubber, {raw / 1e6:.3f} MB of "
                  f"attention (uint8) in a {payload / 1e6:.3f} MB "
                  f"payload; mounted in {mount:.0f} ms, first scrub "
                  f"{first:.1f} ms, every scrub median {med:.1f} ms (max "
                  f"{worst_ms:.1f}); " + (
                      "the page's run is not this machine's cached run, "
                      "so its last snapshot is not the translator's"
                      if worst is None else
                      f"last snapshot = the translator on {probes} "
                      f"probes, max |weight difference| {worst:.1e}"))
        if "other_weights" in MEASURED:
            mine, theirs, text = MEASURED["other_weights"]
            theirs = "(none)" if theirs is None else f"{theirs:.2f}"
            print(f"  other weights: BLEU {mine:.2f} beside the section's "
                  f"{theirs}; the page says: {text}")


# ---- the same explorers in JupyterLab -------------------------------------

def notebook(*lines):
    """A notebook of one code cell, without outputs."""
    return {
        "cells": [{"cell_type": "code", "execution_count": None,
                   "metadata": {}, "outputs": [], "source": list(lines)}],
        "metadata": {"kernelspec": {"display_name": "Python 3",
                                    "name": "python3",
                                    "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}


JUPYTER_NBS = {
    "live.ipynb": notebook(
        "from d2lmini.live import masked_softmax_explorer\n",
        "masked_softmax_explorer()"),
    # The toy run of the small scrubber pages below, trained in the kernel.
    "scrubber.ipynb": notebook(
        "import sys\n",
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n",
        "from test_site_live import toy_training_run\n",
        "from d2lmini.live import training_scrubber\n",
        'training_scrubber(toy_training_run("transformer"))'),
    # The small writer pages' model, made in the kernel; the test
    # exports it into the folder JupyterLab serves (/files/models/).
    "writer.ipynb": notebook(
        "import sys\n",
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n",
        "from test_site_live import WRITER_PROMPTS, writer_run\n",
        "from d2lmini.live import text_writer\n",
        'text_writer(writer_run(), WRITER_PROMPTS, base="/files/models/")'),
}


@pytest.fixture
def jupyterlab(tmp_path):
    """JupyterLab on 127.0.0.1 serving the notebooks of JUPYTER_NBS."""
    for name, nb in JUPYTER_NBS.items():
        (tmp_path / name).write_text(json.dumps(nb))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lab = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
         f"--port={port}", "--ServerApp.ip=127.0.0.1",
         "--IdentityProvider.token=", "--ServerApp.password=",
         f"--ServerApp.root_dir={tmp_path}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not start within 60 s")
        yield url
    finally:
        lab.terminate()
        lab.wait(timeout=30)


@contextlib.contextmanager
def lab_output(browser, url, name):  # noqa: F811
    """JupyterLab's page of notebook ``name`` after its cell has run
    (a trusted output, so its script runs); fails on any script
    error."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        # ?reset: not the workspace of an earlier test, with its tabs
        page.goto(f"{url}/lab/tree/{name}?reset", wait_until="networkidle")
        # A busy machine can start the kernel after the first Shift+Enter
        # reached JupyterLab; then the cell never runs: ask again.
        for attempt in range(3):
            page.locator(".jp-NotebookPanel:visible .jp-InputArea-editor"
                         ).first.click(timeout=60_000)
            page.keyboard.press("Shift+Enter")  # run it: a trusted output
            try:
                page.wait_for_selector("[data-d2l-mounted='1']",
                                       timeout=40_000)
                break
            except PlaywrightTimeoutError:
                if attempt == 2:
                    raise
        yield page
    finally:
        context.close()
    assert not errors, errors


def test_explorer_is_live_in_jupyterlab(jupyterlab, browser):  # noqa: F811
    with lab_output(browser, jupyterlab, "live.ipynb") as page:
        root = page.locator("[data-d2l-live]").first
        slider = root.locator('input[name="valid-length"]')
        before = root.locator(".d2l-chart").inner_html()
        slider.focus()
        slider.press("ArrowRight")  # JupyterLab must not take the key
        assert root.get_attribute("data-valid-length") == "5"
        assert root.locator(".d2l-chart").inner_html() != before
        box = slider.bounding_box()
        page.mouse.click(box["x"] + 2, box["y"] + box["height"] / 2)
        assert root.get_attribute("data-valid-length") == "0"


def test_training_scrubber_is_live_in_jupyterlab(jupyterlab,
                                                 browser):  # noqa: F811
    """The scrubber of a Transformer's toy run, trained in the kernel,
    scrubs from the keyboard and plays in JupyterLab, drawing the
    numbers this process records for the same run."""
    snaps = toy_training_run("transformer").snapshots
    K, heads = len(snaps), snaps.attention[0][0].shape[0]
    with lab_output(browser, jupyterlab, "scrubber.ipynb") as page:
        root = page.locator('[data-d2l-live="training"]').first
        p = int(root.get_attribute("data-probe"))
        assert root.locator("svg.d2l-heatmap").count() == heads
        check_scrubber_draws(root, snaps, 0, p)
        slider = root.locator("input[name=snapshot]")
        slider.focus()
        slider.press("ArrowRight")  # JupyterLab must not take the key
        check_scrubber_draws(root, snaps, 1, p)
        slider.press("End")
        check_scrubber_draws(root, snaps, K - 1, p)
        root.locator("button[name=play]").click()  # from the start
        assert root.get_attribute("data-playing") == "true"
        page.wait_for_function(
            """() => Number(document.querySelector(
                 '[data-d2l-live="training"]').dataset.snapshot) >= 2""")
        root.locator("button[name=play]").click()
        assert root.get_attribute("data-playing") == "false"
        check_scrubber_draws(root, snaps,
                             int(root.get_attribute("data-snapshot")), p)


ICONS_JS = """async () => {
  await document.fonts.ready;
  const icons = [...document.querySelectorAll('i.fa-solid, i.fas')];
  return {
    count: icons.length,
    font: document.fonts.check("900 16px 'Font Awesome 6 Free'"),
    drawn: icons.filter((i) => {
      const before = getComputedStyle(i, '::before');
      return before.content && before.content !== 'none'
        && before.fontFamily.includes('Font Awesome');
    }).length,
  };
}"""


def test_icons_are_drawn_by_the_web_font_without_its_script(open_page):
    """_ext/offline_site.py drops the theme's 1.5 MB fontawesome.js: the
    stylesheet's web font must still draw every icon."""
    page = open_page(PAGES[0])
    assert not any(p.endswith("fontawesome.js") for p in page.paths)
    icons = page.page.evaluate(ICONS_JS)
    assert icons["count"] > 0 and icons["font"], icons
    assert icons["drawn"] == icons["count"], icons


# ---- what the page loads (issue 17, points 7, 9, 10, 11) -----------------
# Small pages of their own, from the package's script: they need no
# built site (a browser of their own when there is none).

@pytest.fixture(scope="module")
def any_browser(request):
    # The built site's browser when its checks run (-m book); else one
    # of our own (the site's would skip without -m book).
    if "book" in (request.config.getoption("markexpr") or "") and (
            HTML / f"{PAGES[0]}.html").is_file():
        yield request.getfixturevalue("browser")
        return
    from playwright.sync_api import sync_playwright
    from test_book_html import CHROMIUM_FLAGS
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(chromium):
        message = ("no chromium on this machine: `make chromium` installs "
                   "Debian's (`make unit` and `make test` do it first)")
        if os.environ.get("CI"):  # CI must run these tests, not skip them
            pytest.fail(message)
        pytest.skip(message)
    playwright = sync_playwright().start()
    launched = playwright.chromium.launch(executable_path=chromium,
                                          args=CHROMIUM_FLAGS)
    yield launched
    launched.close()
    playwright.stop()


def small_page(any_browser, html=None, url=None, init_script=None):
    """A page of ``html`` (set as its content) or at ``url``, with the
    network cut off; returns (page, context, errors)."""
    context = any_browser.new_context()
    if init_script:
        context.add_init_script(init_script)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text)
            if m.type == "error" else None)
    page.route("**/*", lambda r: r.continue_() if urlsplit(
        r.request.url).hostname == "127.0.0.1" else r.abort())
    if url:
        page.goto(url, wait_until="networkidle")
    else:
        page.set_content(html, wait_until="load")
    return page, context, errors


def document(*outputs):
    body = "\n".join(o.html if hasattr(o, "html") else o for o in outputs)
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>t'
            f'</title></head><body>{body}<p id="after">the end</p>'
            "</body></html>")


def test_a_payload_cannot_end_the_page(any_browser):
    """Point 9: "<!--<script>" in an explorer's data, parsed by Chromium's
    HTML5 tokeniser: the explorer after it and the page's end are there."""
    from d2lmini.live import LiveHTML, masked_softmax_explorer

    hostile = LiveHTML("masked-softmax", {
        **masked_softmax_explorer().data, "text": "<!--<script>",
        "more": "</script><b>x</b>"}, "n")
    page, context, errors = small_page(any_browser, document(
        hostile, masked_softmax_explorer(seed=1)))
    try:
        assert page.locator("#after").count() == 1, "the page ended early"
        roots = page.locator("[data-d2l-live]")
        assert roots.count() == 2
        for i in range(2):
            assert roots.nth(i).get_attribute("data-d2l-mounted") == "1"
            assert roots.nth(i).locator("svg.d2l-heatmap").count() == 1
    finally:
        context.close()
    assert not errors, errors


def test_a_broken_explorer_does_not_stop_the_others(any_browser):
    """Point 11: bad JSON, an unknown kind and data that make the drawing
    throw each show an error in their own box; the others start."""
    from d2lmini.live import (
        LiveHTML,
        masked_softmax_explorer,
        positional_encoding_explorer,
    )

    bad_json = LiveHTML("masked-softmax", {"a": 1}, "n").html.replace(
        '{"a":1}', '{"a":')
    outputs = [bad_json, masked_softmax_explorer(),
               LiveHTML("no-such-kind", {}, "n"),
               LiveHTML("scaling", {"dims": None}, "n"),
               positional_encoding_explorer()]
    page, context, errors = small_page(any_browser, document(*outputs))
    try:
        roots = page.locator("[data-d2l-live]")
        states = [roots.nth(i).get_attribute("data-d2l-mounted")
                  for i in range(roots.count())]
        assert states == ["error", "1", "error", "error", "1"]
        said = [roots.nth(i).locator(".d2l-error").inner_text()
                for i in (0, 2, 3)]
        assert said[0].startswith("This explorer could not start: its "
                                  "data is not valid JSON")
        assert 'no explorer of kind "no-such-kind"' in said[1]
        assert said[2].startswith("This explorer could not start: ")
        for i in (0, 2, 3):
            error = roots.nth(i).locator(".d2l-error")
            assert error.is_visible()
            assert error.get_attribute("role") == "alert"
        assert roots.nth(1).locator("svg.d2l-heatmap").count() == 1
        assert roots.nth(4).locator("svg.d2l-heatmap").count() == 1
    finally:
        context.close()
    assert not errors, errors


def test_a_large_explorer_draws(any_browser):
    """Point 10: 4096 x 16 scores (more than the Python side now allows,
    written directly) draw without "Maximum call stack size exceeded"."""
    from d2lmini.live import LiveHTML, sample_scores
    from d2lmini.live_explorers import _float32_b64

    N, S, dims = 4096, 16, (1, 64)
    live = LiveHTML("scaling", {
        "dims": list(dims), "d": 64, "num_queries": N, "num_keys": S,
        "scores": {str(d): _float32_b64(sample_scores(d, N, S))
                   for d in dims}}, "n")
    page, context, errors = small_page(any_browser, document(live))
    try:
        root = page.locator("[data-d2l-live]")
        assert root.get_attribute("data-d2l-mounted") == "1", errors
        assert root.locator("svg.d2l-histogram").count() == 2
        numbers = json.loads(root.get_attribute("data-numbers"))
        assert numbers["std_raw"] == pytest.approx(8, rel=0.05)
    finally:
        context.close()
    assert not errors, errors


@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    """A page with a translator of a tiny model (tests/test_live.py's
    toy corpus), and its export, served on 127.0.0.1; plus the manifest's
    path."""
    from test_live import HELD_OUT, TOY_PAIRS, tiny_run, tiny_transformer

    from d2lmini.data import MTFraEng
    from d2lmini.live import translator

    data = MTFraEng(2, num_steps=6, num_train=8, num_val=0, num_test=1,
                    pairs=TOY_PAIRS + [HELD_OUT], min_freq=1)
    run, recipe = tiny_run(({}, data), "transformer"), tiny_transformer()
    folder = tmp_path_factory.mktemp("small-site")
    model = export_model(recipe, run, folder / "models")
    (folder / "index.html").write_text(document(
        translator(recipe, run, "go .", base="models/")), encoding="utf-8")
    with serving(folder) as httpd:
        yield httpd, model / "manifest.json"


def open_small_translator(any_browser, small_site, init_script=None):
    httpd, _ = small_site
    page, context, errors = small_page(
        any_browser, url=f"http://127.0.0.1:{httpd.server_address[1]}/",
        init_script=init_script)
    root = page.locator('[data-d2l-live="translator"]')
    root.locator("summary").click()
    page.wait_for_function(
        """() => ['ready', 'error'].includes(document.querySelector(
             '[data-d2l-live="translator"]').dataset.state)""",
        timeout=30_000)
    return page, context, errors, root


NO_SUBTLE = """Object.defineProperty(Crypto.prototype, "subtle",
                                     {get: () => undefined});"""


def test_translator_checks_its_model_everywhere(any_browser, small_site):
    """Point 7 and issue 27, point 2: the weights are checked against
    their sha256 with crypto.subtle (127.0.0.1 is a secure context) and
    without it (plain http from another host: sha256.js), so the page
    says "the weights the section evaluated" only of weights it checked;
    same-size edited weights fail either way.  An invalid manifest gets
    a visible message that says what is wrong."""
    _, manifest_path = small_site
    for init in (None, NO_SUBTLE):
        page, context, errors, root = open_small_translator(
            any_browser, small_site, init)
        try:
            assert root.get_attribute("data-state") == "ready", errors
            assert root.get_attribute("data-weights") == "same"
            assert root.locator(".d2l-weights").inner_text().startswith(
                "These are the weights the section evaluated")
        finally:
            context.close()
        assert not errors, errors
    manifest = json.loads(manifest_path.read_text())
    weights = manifest_path.parent / manifest["weights"]
    good_weights = weights.read_bytes()
    flipped = bytearray(good_weights)
    flipped[100] ^= 0x40
    weights.write_bytes(bytes(flipped))
    try:
        for init in (None, NO_SUBTLE):
            page, context, errors, root = open_small_translator(
                any_browser, small_site, init)
            assert root.get_attribute("data-state") == "error"
            assert "(another sha256)" in root.locator(
                ".d2l-status").inner_text()
            context.close()
    finally:
        weights.write_bytes(good_weights)
    good = manifest_path.read_text()
    manifest = json.loads(good)
    bias = "decoder.blks.0.cross_attention.W_q.bias"
    del manifest["tensors"][bias]
    manifest["num_heads"] = 4
    manifest_path.write_text(json.dumps(manifest))
    try:
        page, context, errors, root = open_small_translator(any_browser,
                                                            small_site)
        assert root.get_attribute("data-state") == "error"
        status = root.locator(".d2l-status")
        text = status.inner_text()
        assert status.is_visible() and "could not be loaded (the model's " \
            "files are not valid: " in text
        assert "num_heads 4, where the section's model has 2" in text
        assert f"tensor {bias} is missing" in text
        context.close()
    finally:
        manifest_path.write_text(good)


# ---- the training scrubber, on small pages ---------------------------------

SCRUBBER_PAIRS = [
    ("i like red wine .", "j'aime le vin rouge ."),
    ("i like white wine .", "j'aime le vin blanc ."),
    ("you like red wine .", "tu aimes le vin rouge ."),
    ("we see the red car .", "nous voyons la voiture rouge ."),
    ("i see the car .", "je vois la voiture ."),
    ("you see the dog .", "tu vois le chien ."),
    ("we like the dog .", "nous aimons le chien ."),
    ("i like the car .", "j'aime la voiture ."),
    ("go .", "va !"), ("i see .", "je vois ."),
    ("we like wine .", "nous aimons le vin ."),
    ("you see the white car .", "tu vois la voiture blanche .")]


@functools.lru_cache
def toy_training_run(attention):
    """A tiny model trained for 6 steps with a SnapshotRecorder, as the
    Run that train_or_load(snapshots=True) gives."""
    from d2lmini.cache import Run
    from d2lmini.data import MTFraEng
    from d2lmini.experiment import Recipe, build_model
    from d2lmini.snapshots import SnapshotRecorder
    from d2lmini.trainer import Trainer

    recipe = Recipe(batch_size=4, num_steps=8, min_freq=1, embed_size=8,
                    num_hiddens=8, num_layers=1, dropout=0.0, lr=0.02,
                    attention=attention, num_heads=2, ffn_num_hiddens=16,
                    max_steps=6)
    data = MTFraEng(4, num_steps=8, num_train=None, num_val=5, num_test=0,
                    pairs=SCRUBBER_PAIRS * 2, min_freq=1, seed=0)
    model = build_model(recipe, data)
    recorder = SnapshotRecorder(data)
    history = Trainer(max_steps=6, progress=False, seed=0,
                      callbacks=[recorder]).fit(model, data)
    return Run(model, data, history, True, "", recorder.snapshots)


def scrubber_maps(root):
    """The weights drawn in every heatmap of a scrubber, one (T, S)
    array per head."""
    charts = root.locator("svg.d2l-heatmap")
    maps = []
    for i in range(charts.count()):
        cells = charts.nth(i).locator("rect[data-row]").evaluate_all(
            "els => els.map(e => [+e.dataset.row, +e.dataset.col, "
            "+e.dataset.value])")
        T = max(r for r, _, _ in cells) + 1
        S = max(c for _, c, _ in cells) + 1
        a = np.zeros((T, S))
        for r, c, v in cells:
            a[r, c] = v
        maps.append(a)
    return maps


def recorded(snaps, k, p):
    w = snaps.attention[k][p]
    return w.numpy() if w.dim() == 3 else w.numpy()[None]


def js_fixed(x, digits):
    """``x.toFixed(digits)`` as JavaScript writes it: the exact binary
    value rounded, a tie away from zero."""
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits),
                                   rounding=ROUND_HALF_UP))


def payload_snapshots(data):
    """The ``TrainingSnapshots`` that a scrubber's payload carries: its
    steps, outputs and rounded scores, the attention as its bytes / 255
    (the page's numbers)."""
    from d2lmini.snapshots import Probe, TrainingSnapshots

    raw = torch.tensor(list(base64.b64decode(data["attention"])),
                       dtype=torch.float64) / 255
    h, at, attention = data["heads"], 0, []
    for outs in data["outputs"]:
        maps = []
        for out, probe in zip(outs, data["probes"]):
            shape = (h, len(out), len(probe["src"]))
            w = raw[at:at + math.prod(shape)].reshape(shape)
            maps.append(w if h > 1 else w[0])
            at += w.numel()
        attention.append(maps)
    assert at == len(raw), (at, len(raw))
    return TrainingSnapshots(
        data["last_step"],
        [Probe(pr["sentence"], None if pr["pair"] is None
               else tuple(pr["pair"])) for pr in data["probes"]],
        [pr["src"] for pr in data["probes"]], steps=data["steps"],
        out_tokens=data["outputs"], attention=attention,
        probe_bleu=data["bleu"], val_loss=data["val_loss"],
        val_bleu=data["val_bleu"])


def check_scrubber_draws(root, snaps, k, p):
    """The scrubber shows snapshot k of probe p as recorded: weights to
    the byte it carries (1/510), its output and sentence BLEU."""
    assert root.get_attribute("data-snapshot") == str(k)
    assert root.get_attribute("data-probe") == str(p)
    drawn = scrubber_maps(root)
    want = recorded(snaps, k, p)
    assert len(drawn) == len(want)
    worst = max(float(np.abs(a - b).max()) for a, b in zip(drawn, want))
    assert worst <= 1 / 510 + 1e-9, worst
    status = root.locator(".d2l-status").inner_text()
    words = " ".join(t for t in snaps.out_tokens[k][p] if t != "<eos>")
    assert f"“{words or '(nothing)'}”" in status
    bleu = js_fixed(round(snaps.probe_bleu[k][p], 2), 1)  # as the page
    assert f"sentence BLEU {bleu}" in status
    assert f"Step {snaps.steps[k]} of {snaps.last_step}" in status
    return worst


@pytest.mark.parametrize("attention", ["additive", "transformer"])
def test_training_scrubber_draws_the_recorded_numbers(any_browser,
                                                      attention):
    from d2lmini.live import training_scrubber

    run = toy_training_run(attention)
    snaps = run.snapshots
    out = training_scrubber(run)
    page, context, errors = small_page(any_browser, document(out))
    try:
        root = page.locator('[data-d2l-live="training"]')
        assert root.get_attribute("data-d2l-mounted") == "1", errors
        p = out.data["probe"]
        check_scrubber_draws(root, snaps, 0, p)
        slider = root.locator("input[name=snapshot]")
        slider.focus()
        slider.press("ArrowRight")  # from the keyboard
        check_scrubber_draws(root, snaps, 1, p)
        slider.press("End")
        K = len(snaps)
        check_scrubber_draws(root, snaps, K - 1, p)
        select = root.locator("select[name=probe]")
        other = (p + 1) % len(snaps.probes)
        select.select_option(str(other))
        check_scrubber_draws(root, snaps, K - 1, other)
        # the adjective and noun columns of a probe with a pair are marked
        with_pair = [i for i, pr in enumerate(snaps.probes) if pr.pair]
        assert with_pair, "the toy data has no adjective-noun probe"
        select.select_option(str(with_pair[0]))
        marks = root.locator("svg.d2l-heatmap").first.locator(
            "g.d2l-marks rect")
        assert marks.count() == 2
        # play from the first snapshot, then pause
        slider.press("Home")
        play = root.locator("button[name=play]")
        play.focus()
        play.press("Enter")
        assert root.get_attribute("data-playing") == "true"
        page.wait_for_function(
            """() => Number(document.querySelector(
                 '[data-d2l-live="training"]').dataset.snapshot) >= 2""")
        play.press("Space")
        assert root.get_attribute("data-playing") == "false"
        k = int(root.get_attribute("data-snapshot"))
        page.wait_for_timeout(600)  # paused: it stays
        assert root.get_attribute("data-snapshot") == str(k)
        check_scrubber_draws(root, snaps, k, with_pair[0])
        # a text alternative: the heatmaps are labelled, their numbers
        # are in tables, the curves say what they show
        heat = root.locator("svg.d2l-heatmap").first
        assert "one row per output token" in heat.get_attribute(
            "aria-label")
        assert root.locator("details.d2l-numbers table").count() == \
            len(recorded(snaps, k, with_pair[0]))
        labels = root.locator("svg.d2l-curves").evaluate_all(
            "els => els.map(e => e.getAttribute('aria-label'))")
        assert len(labels) == 3 and all(
            f"at step {snaps.steps[k]}" in text for text in labels)
        assert not errors, errors
    finally:
        context.close()


def test_training_scrubber_refuses_bad_data(any_browser):
    from d2lmini.live import training_scrubber

    out = training_scrubber(toy_training_run("additive"))
    bad = copy.deepcopy(out.data)
    bad["attention"] = base64.b64encode(
        base64.b64decode(bad["attention"])[:-1]).decode()
    from d2lmini.live import LiveHTML
    page, context, errors = small_page(any_browser, document(
        LiveHTML("training", bad, "needs JS")))
    try:
        root = page.locator('[data-d2l-live="training"]')
        assert root.get_attribute("data-d2l-mounted") == "error"
        assert "its attention holds" in root.get_attribute("data-d2l-error")
    finally:
        context.close()


# ---- the digit classifier (issue 40, point 5) -----------------------------
# A 32 x 32 grid to draw on; the vision section's ViT classifies the
# drawing in the page.  On the built site's vision page, and on small
# pages of their own with an untrained ViT of the section's sizes.

DIGITS = '[data-d2l-live="digit-classifier"]'
# Two frames: the redraw that an input asked for has run.
FRAMES = ("() => new Promise((done) => requestAnimationFrame(() => "
          "requestAnimationFrame(done)))")
READY = (f"() => ['ready', 'error'].includes(document.querySelector("
         f"'{DIGITS}').dataset.state)")
# What the page holds: its bitmap, counts and the model's answer.
STATE = """(el) => ({bitmap: el.d2l.bitmap(), counts: el.d2l.counts(),
  result: el.d2l.result && {probs: el.d2l.result.probs,
                            cls: el.d2l.result.cls,
                            prediction: el.d2l.result.prediction}})"""


def grid_point(root, r, c):
    """Where the centre of bitmap cell (r, c) is on the screen."""
    box = root.locator("canvas.d2l-digit-grid").bounding_box()
    return (box["x"] + (c + 0.5) * box["width"] / 32,
            box["y"] + (r + 0.5) * box["height"] / 32)


def draw_stroke(page, root, cells, steps=6):
    """A mouse stroke through the centres of ``cells``; returns once
    the page redrew."""
    page.mouse.move(*grid_point(root, *cells[0]))
    page.mouse.down()
    for cell in cells[1:]:
        page.mouse.move(*grid_point(root, *cell), steps=steps)
    page.mouse.up()
    page.evaluate(FRAMES)


def digit_state(page, root):
    page.evaluate(FRAMES)
    return root.evaluate(STATE)


def check_digit_drawn(root, run, state):
    """The page's counts are counts_from_bitmap of the bitmap it holds;
    its probabilities and <cls> attention equal d2lmini's for those
    counts (1e-5); the bars, the counts and the overlays it draws are
    those numbers.  Returns the largest difference to d2lmini."""
    from d2lmini.digits import counts_from_bitmap
    from d2lmini.vit import cls_attention, predict

    bitmap = np.array(state["bitmap"]).reshape(32, 32)
    counts = counts_from_bitmap(bitmap)
    assert state["counts"] == counts.tolist()
    X = run.data.normalize(counts)
    probs = predict(run.model, X)[0].numpy()
    cls = cls_attention(run.model, X)[:, 0].numpy()  # (L, h, P)
    got = state["result"]
    worst = max(float(np.abs(np.array(got["probs"]) - probs).max()),
                float(np.abs(np.array(got["cls"]) - cls).max()))
    assert worst < 1e-5, worst
    assert got["prediction"] == int(probs.argmax())
    assert drawn(root, "svg.d2l-digit-probs rect[data-class]") == \
        got["probs"]
    assert root.locator("svg.d2l-digit-probs rect.d2l-predicted") \
        .get_attribute("data-class") == str(got["prediction"])
    assert drawn(root, ".d2l-digit-counts svg.d2l-heatmap rect[data-row]"
                 ) == counts.flatten().tolist()
    block = int(root.locator("select[name=block]").input_value())
    overlays = root.locator("svg.d2l-digit-overlay")
    assert overlays.count() == cls.shape[1]
    for k in range(cls.shape[1]):
        assert drawn(overlays.nth(k), "rect[data-patch]") == \
            got["cls"][block][k]
    said = root.locator(".d2l-output").inner_text()
    assert f"The model reads a {got['prediction']}" in said
    return worst


@pytest.mark.parametrize("doc", VISION_PAGES)
def test_vision_page_classifies_like_d2lmini(doc, open_page, capsys):
    """The built vision page: its digit classifier names the checkpoint
    its notebook evaluated and loads it (at most VIT_MAX_BYTES) when it
    comes into view, says it runs those weights, and classifies every
    menu image and a drawn digit as d2lmini does; the redraw times are
    printed, and a screenshot lands in _build/screenshots/."""
    from d2lmini.vision import fingerprint, train_or_load
    from d2lmini.vit import VisionRecipe

    if doc not in PAGES:
        pytest.skip(f"{doc} is not in _toc.yml yet")
    found = payloads(page_text(doc), "digit-classifier")
    assert len(found) == 1, (f"{doc}: {len(found)} digit classifiers; run "
                             "`make execute` and `make book`")
    spec = found[0]
    run = train_or_load(VisionRecipe(**spec["recipe"]))
    assert fingerprint(run.recipe, run.data) == spec["fingerprint"], (
        f"{doc}: the page's checkpoint is not the model the cache holds "
        "now; run `make execute` and `make book`")
    folder = HTML / "_static" / "models" / spec["checkpoint"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["weights_bytes"] <= VIT_MAX_BYTES
    model_bytes = (folder / "manifest.json").stat().st_size + \
        (folder / manifest["weights"]).stat().st_size
    page = open_page(doc)
    before = page.bytes_loaded()
    root = page.page.locator(DIGITS)
    assert root.get_attribute("data-d2l-mounted") == "1", page.errors
    root.scroll_into_view_if_needed()
    page.page.wait_for_function(READY, timeout=60_000)
    assert root.get_attribute("data-state") == "ready", page.errors
    after = page.bytes_loaded()
    assert after <= weight_budget(doc) + model_bytes, (doc, after)
    assert root.get_attribute("data-weights") == "same"
    assert spec["checkpoint"] in root.locator(".d2l-checkpoint").inner_text()
    worst = 0.0
    for i in range(len(spec["examples"])):
        root.locator("select[name=example]").select_option(str(i))
        state = digit_state(page.page, root)
        assert state["counts"] == spec["examples"][i]["counts"]
        worst = max(worst, check_digit_drawn(root, run, state))
    root.locator("button[name=clear]").click()
    times = []
    for k in range(10):
        draw_stroke(page.page, root, [(6, 6 + k), (6, 24), (26, 12 + k)])
        times.append(float(root.get_attribute("data-last-ms")))
    worst = max(worst, check_digit_drawn(root, run, digit_state(
        page.page, root)))
    SHOTS.mkdir(parents=True, exist_ok=True)
    shoot(root, SHOTS / "vision-transformer-digit-classifier.png")
    MEASURED.setdefault("weights", {})[doc] = (
        before, after, float(root.get_attribute("data-load-ms")))
    with capsys.disabled():
        print(f"\n  {doc}: {len(spec['examples'])} menu images and a "
              f"drawn digit equal d2lmini's (max |difference| "
              f"{worst:.1e}); stroke to redraw median "
              f"{statistics.median(times):.1f} ms, max {max(times):.1f} "
              f"ms; model {manifest['weights_bytes'] / 1e6:.3f} MB")
    assert not page.errors, page.errors


@pytest.fixture(scope="module")
def vision_site(tmp_path_factory):
    """A page with a digit classifier of an untrained ViT of the
    section's sizes (patch 2, D 64, 4 heads, 2 blocks, F 128; seeded
    noise of 0.2 on every weight, which leaves float32 PyTorch within
    1e-6 of float64: as much to compute as the trained one, and no
    model cache needed), and its export, served on 127.0.0.1.
    Yields the server, the run and the payload."""
    from test_live_vision import payload, tiny_vit

    from d2lmini.digits import Digits
    from d2lmini.live import digit_classifier, export_vit

    run = tiny_vit(Digits(), 2, noise=0.2, num_hiddens=64,
                   mlp_num_hiddens=128, num_heads=4)
    live = digit_classifier(run, base="models/")
    folder = tmp_path_factory.mktemp("vision-site")
    export_vit(run, folder / "models", evaluated=payload(live))
    (folder / "index.html").write_text(document(live), encoding="utf-8")
    with serving(folder) as httpd:
        yield httpd, run, payload(live)


def open_digits(any_browser, httpd, **options):
    """The small page's digit classifier, once its model loaded (or
    failed to): (page, context, errors, root)."""
    context = any_browser.new_context(**options)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text)
            if m.type == "error" else None)
    page.route("**/*", lambda r: r.continue_() if urlsplit(
        r.request.url).hostname == "127.0.0.1" else r.abort())
    page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/",
              wait_until="networkidle")
    page.wait_for_function(READY, timeout=30_000)
    return page, context, errors, page.locator(DIGITS)


def test_digit_classifier_draws_with_the_mouse_like_d2lmini(any_browser,
                                                            vision_site):
    """It starts from the first menu image; a digit drawn with the mouse
    becomes counts_from_bitmap of the drawn bitmap and gets d2lmini's
    probabilities and attention; Undo takes back a whole stroke, Clear
    empties the grid (and is undone in turn)."""
    httpd, run, spec = vision_site
    page, context, errors, root = open_digits(any_browser, httpd)
    try:
        assert root.get_attribute("data-state") == "ready", errors
        assert root.get_attribute("data-weights") == "same"
        first = digit_state(page, root)
        assert first["counts"] == spec["examples"][0]["counts"]
        check_digit_drawn(root, run, first)
        root.locator("button[name=clear]").click()
        empty = digit_state(page, root)
        assert not any(empty["bitmap"])
        check_digit_drawn(root, run, empty)
        assert "The grid is empty" in root.locator(".d2l-output").inner_text()
        draw_stroke(page, root, [(5, 6), (5, 25), (27, 12)])  # a 7
        seven = digit_state(page, root)
        bits = np.array(seven["bitmap"]).reshape(32, 32)
        assert bits[5, 6] and bits[5, 25] and bits[27, 12] and not bits[
            20, 25]
        check_digit_drawn(root, run, seven)
        draw_stroke(page, root, [(16, 8), (16, 22)])  # its bar
        barred = digit_state(page, root)
        assert barred["bitmap"] != seven["bitmap"]
        check_digit_drawn(root, run, barred)
        undo = root.locator("button[name=undo]")
        undo.click()
        assert digit_state(page, root)["bitmap"] == seven["bitmap"]
        undo.click()
        assert digit_state(page, root)["bitmap"] == empty["bitmap"]
        undo.click()  # the Clear, undone
        assert digit_state(page, root)["bitmap"] == first["bitmap"]
        assert undo.is_disabled()  # nothing more to undo
        root.locator("button[name=clear]").click()
        assert not any(digit_state(page, root)["bitmap"])
        undo.click()
        assert digit_state(page, root)["bitmap"] == first["bitmap"]
    finally:
        context.close()
    assert not errors, errors


def test_digit_classifier_from_the_keyboard(any_browser, vision_site):
    """Arrow keys move the cursor, Space draws the pen (2 x 2 cells)
    under it, Shift with the arrows draws a line, E switches to the
    eraser, U undoes, Delete clears; the help text says so."""
    httpd, run, _ = vision_site
    page, context, errors, root = open_digits(any_browser, httpd)
    try:
        canvas = root.locator("canvas.d2l-digit-grid")
        assert canvas.get_attribute("tabindex") == "0"
        helps = canvas.get_attribute("aria-describedby")
        assert "arrow keys move the cursor" in root.locator(
            f"#{helps}").inner_text()
        canvas.focus()
        keys = page.keyboard
        keys.press("Delete")
        want = np.zeros((32, 32), int)
        assert digit_state(page, root)["bitmap"] == want.flatten().tolist()
        keys.press("Space")  # the cursor starts at row 14, column 14
        want[14:16, 14:16] = 1
        assert digit_state(page, root)["bitmap"] == want.flatten().tolist()
        keys.down("Shift")
        for _ in range(4):
            keys.press("ArrowRight")
        keys.up("Shift")
        want[14:16, 14:20] = 1
        line = digit_state(page, root)
        assert line["bitmap"] == want.flatten().tolist()
        for _ in range(3):
            keys.press("ArrowDown")
        keys.press("Enter")
        want[17:19, 18:20] = 1
        assert digit_state(page, root)["bitmap"] == want.flatten().tolist()
        keys.press("u")
        want[17:19, 18:20] = 0
        assert digit_state(page, root)["bitmap"] == line["bitmap"]
        for _ in range(3):
            keys.press("ArrowUp")
        keys.press("e")
        assert root.locator("input[name=erase]").is_checked()
        keys.press("Space")
        want[14:16, 18:20] = 0
        erased = digit_state(page, root)
        assert erased["bitmap"] == want.flatten().tolist()
        check_digit_drawn(root, run, erased)
        assert "cursor at row 15, column 19" in root.locator(
            ".d2l-digit-cursor").inner_text()
    finally:
        context.close()
    assert not errors, errors


def test_digit_classifier_menu_gives_d2lminis_probabilities(any_browser,
                                                             vision_site):
    """Every menu image (the first two test images of each class, as
    the page says) is drawn as a bitmap whose counts are the image's,
    exactly, and classified as d2lmini does; the block control shows
    that block's attention."""
    httpd, run, spec = vision_site
    page, context, errors, root = open_digits(any_browser, httpd)
    try:
        note = root.locator(".d2l-digit-menu-note").inner_text()
        assert "the first two test images of each class, in test order " \
            "(not chosen)" in note
        menu = root.locator("select[name=example]")
        assert menu.locator("option").count() == 1 + len(spec["examples"])
        for i, example in enumerate(spec["examples"]):
            menu.select_option(str(i))
            state = digit_state(page, root)
            assert state["counts"] == example["counts"]
            check_digit_drawn(root, run, state)
            assert f"Test image {example['index']} is labelled " \
                f"{example['label']}" in root.locator(
                    ".d2l-output").inner_text()
        assert root.get_attribute("data-example") == str(i)
        block = root.locator("select[name=block]")
        assert block.input_value() == "1"  # the last block first
        block.select_option("0")
        check_digit_drawn(root, run, digit_state(page, root))
    finally:
        context.close()
    assert not errors, errors


def test_digit_classifier_draws_with_a_finger(any_browser, vision_site):
    """A tap on a touch screen draws the pen under it (Pointer Events;
    the grid takes no touch gesture: touch-action none)."""
    httpd, run, _ = vision_site
    page, context, errors, root = open_digits(any_browser, httpd,
                                              has_touch=True)
    try:
        canvas = root.locator("canvas.d2l-digit-grid")
        assert canvas.evaluate("(c) => getComputedStyle(c).touchAction") \
            == "none"
        root.locator("button[name=clear]").click()
        page.touchscreen.tap(*grid_point(root, 10, 20))
        state = digit_state(page, root)
        bits = np.array(state["bitmap"]).reshape(32, 32)
        assert bits[10:12, 20:22].all() and bits.sum() == 4
        check_digit_drawn(root, run, state)
    finally:
        context.close()
    assert not errors, errors


def test_digit_classifier_says_when_the_model_fails_to_load(any_browser,
                                                            vision_site,
                                                            tmp_path):
    """No model folder: the page says so (role=alert) and what to do,
    and the grid and the counts still work."""
    from d2lmini.live import digit_classifier

    httpd, run, _ = vision_site
    (tmp_path / "index.html").write_text(document(digit_classifier(
        run, base="nowhere/")), encoding="utf-8")
    with serving(tmp_path) as bare:
        page, context, errors, root = open_digits(any_browser, bare)
        try:
            assert root.get_attribute("data-state") == "error"
            status = root.locator(".d2l-status")
            assert status.is_visible() and status.get_attribute(
                "role") == "alert"
            text = status.inner_text()
            assert "could not be loaded" in text and "make book" in text
            draw_stroke(page, root, [(4, 4), (20, 20)])
            state = digit_state(page, root)
            assert state["result"] is None
            assert drawn(root, ".d2l-digit-counts rect[data-row]") == \
                np.array(state["counts"]).flatten().tolist()
        finally:
            context.close()
    assert all("Failed to load resource" in e for e in errors), errors


def test_digit_classifier_redraw_times(any_browser, vision_site, capsys):
    """Print the time from a stroke's input event to the drawn result
    (the page's data-last-ms) over 20 strokes: median and max.  Not an
    assertion of time."""
    httpd, run, _ = vision_site
    page, context, errors, root = open_digits(any_browser, httpd)
    try:
        root.locator("button[name=clear]").click()
        times = []
        for k in range(20):
            draw_stroke(page, root, [(4 + k, 4), (4 + k, 12 + k % 8)])
            times.append(float(root.get_attribute("data-last-ms")))
        check_digit_drawn(root, run, digit_state(page, root))
    finally:
        context.close()
    assert not errors, errors
    with capsys.disabled():
        print(f"\n  digit classifier (ViT of the section's sizes): stroke "
              f"to redraw over {len(times)} strokes, median "
              f"{statistics.median(times):.1f} ms, max {max(times):.1f} "
              f"ms")


# ---- the text writer (issue 41, point 5) ------------------------------------
# A French beginning that the pretraining section's language model
# continues in the page.  On the built site's page with a text writer,
# and on small pages of their own with an untrained model of the
# section's sizes.

WRITER = '[data-d2l-live="text-writer"]'
WRITER_READY = (f"() => ['ready', 'error'].includes(document.querySelector("
                f"'{WRITER}').dataset.state)")
# The page's last continuation, once written: what it read, the
# settings it drew with, the ids.
WRITTEN = """(el) => {
  const r = el.d2l.last;
  return r && {ids: r.ids, read: r.read.ids, settings: r.settings,
               maxNew: r.maxNew, finished: r.finished};
}"""
WRITER_PROMPTS = ["je suis", "il est", "nous avons"]


@functools.lru_cache
def writer_pages():
    """The built site's pages with a text writer."""
    return tuple(d for d in PAGES if (HTML / f"{d}.html").is_file()
                 and 'data-d2l-live="text-writer"' in page_text(d))


@functools.lru_cache
def writer_run():
    """An LMRun of an untrained language model of the section's sizes
    (D 128, F 512, 4 heads, 2 blocks, max_len 32; seeded noise of 0.2
    on every weight) on a vocabulary of the section's size: the toy
    French sentences of tests/test_live_lm.py and 4,200 filler words
    (mot0, mot1, ...).  As much to compute as the trained model, and no
    corpus or model cache needed; the same in every process (a
    JupyterLab kernel makes it too)."""
    from test_live_lm import TOY_FRENCH, tiny_lm

    from d2lmini.data import MTFraEng

    filler = [" ".join(f"mot{10 * i + j}" for j in range(10)) + " ."
              for i in range(420)]
    pairs = [(f"sentence {i} .", f)
             for i, f in enumerate(TOY_FRENCH + filler)]
    data = MTFraEng(2, num_steps=12, num_train=len(pairs), num_val=0,
                    num_test=0, pairs=pairs, min_freq=1)
    return tiny_lm(data, noise=0.2, num_hiddens=128, ffn_num_hiddens=512,
                   num_heads=4, num_blks=2, max_len=32)


def python_continuation(run, spec, text, settings):
    """What d2lmini.generation.generate writes after ``text`` with the
    page's settings (its names) and its bound on the new tokens."""
    from d2lmini.generation import generate
    from d2lmini.lm import forbidden_ids

    vocab = run.data.tgt_vocab
    ids = [vocab.bos] + vocab[run.data.tokens(text)]
    n = min(spec["max_new_tokens"], run.model.max_len - len(ids) + 1)
    return generate(run.model, ids, n, vocab.eos, settings["temperature"],
                    settings["topK"], settings["topP"], settings["seed"],
                    forbidden_ids(vocab))


def written_after(page, root, act):
    """Do act() and wait until the page has written the continuation it
    starts (every token); return the page's WRITTEN."""
    count = int(root.get_attribute("data-writes") or 0)
    act()
    page.wait_for_function(
        f"""() => {{
          const el = document.querySelector('{WRITER}');
          return Number(el.dataset.writes) > {count}
            && el.dataset.writing === "false";
        }}""", timeout=30_000)
    return root.evaluate(WRITTEN)


def write_text(page, root, text):
    """Type text into the box and press Enter, as a reader does."""
    box = root.locator("input[name=beginning]")
    box.fill(text)
    return written_after(page, root, lambda: box.press("Enter"))


def check_written(root, run, spec, text, got):
    """The page's continuation of ``text`` is d2lmini's, token for token,
    and the box shows the beginning and those tokens."""
    vocab = run.data.tgt_vocab
    assert got["read"] == [vocab.bos] + vocab[run.data.tokens(text)]
    want = python_continuation(run, spec, text, got["settings"])
    assert got["ids"] == want, (text, got["settings"])
    words = [vocab.to_tokens(i) for i in want if i != vocab.eos]
    shown = root.locator(".d2l-output").inner_text()
    assert shown == " ".join(run.data.tokens(text) + words) + (
        " <eos>" if want[-1:] == [vocab.eos] else ""), shown
    return want


def python_step(run, got, k):
    """The logits (forbidden ids -inf, float64) of generated token k of
    the page's continuation ``got``, as d2lmini.generation.generate
    computes them."""
    from d2lmini.lm import forbidden_ids

    ids = got["read"] + got["ids"][:k]
    with torch.no_grad():
        logits = run.model(torch.tensor([ids]))[0, -1].double()
    logits[forbidden_ids(run.data.tgt_vocab)] = -math.inf
    return logits


def check_bars(root, run, got, k):
    """The bars are the next-token distribution of generated token k,
    as d2lmini computes it at the page's settings: the ten most probable
    tokens (and the drawn one), their probability at the temperature
    (1 when greedy) within 1e-5, and the kept ones those that
    next_token_distribution keeps."""
    from d2lmini.generation import next_token_distribution

    s = got["settings"]
    logits = python_step(run, got, k)
    t = s["temperature"] or 1.0
    probs = torch.softmax(logits / t, 0).numpy()
    kept, _ = next_token_distribution(logits, s["temperature"], s["topK"],
                                      s["topP"])
    bars = root.locator("svg.d2l-lm-bars rect.d2l-lm-bar").evaluate_all(
        """els => els.map(e => ({id: Number(e.dataset.id),
                                 value: Number(e.dataset.value),
                                 kept: e.dataset.kept === "true",
                                 drawn: e.dataset.drawn === "true"}))""")
    top = sorted(range(len(probs)), key=lambda i: (-probs[i], i))[:10]
    drawn = got["ids"][k]
    assert [b["id"] for b in bars] == top + ([] if drawn in top
                                             else [drawn])
    assert max(abs(b["value"] - probs[b["id"]]) for b in bars) < 1e-5
    assert [b["id"] for b in bars if b["kept"]] == [
        i for i in (b["id"] for b in bars) if i in set(kept.tolist())]
    assert [b["id"] for b in bars if b["drawn"]] == [drawn]
    return bars


def check_attention(root, run, got):
    """Each head's heatmap of the chosen block is d2lmini's causal
    self-attention over the tokens read: no cell above the diagonal, the
    weights within 1e-4 of float32 PyTorch (as the translators' are; at
    D = 128 they differ by about 1e-5)."""
    ids = (got["read"] + got["ids"])[:-1]  # the last one is not read
    with torch.no_grad():
        run.model(torch.tensor([ids]))
    block = int(root.locator("select[name=block]").input_value())
    weights = run.model.attention_weights[block][0].numpy()  # (h, T, T)
    maps = root.locator(".d2l-lm-maps svg.d2l-heatmap")
    assert maps.count() == weights.shape[0]
    T = len(ids)
    for k in range(weights.shape[0]):
        cells = maps.nth(k).locator("rect[data-row]").evaluate_all(
            """els => els.map(e => [Number(e.dataset.row),
                                    Number(e.dataset.col),
                                    Number(e.dataset.value)])""")
        assert len(cells) == T * (T + 1) // 2
        assert all(c <= r for r, c, _ in cells)
        worst = max(abs(v - weights[k, r, c]) for r, c, v in cells)
        assert worst < 1e-4, worst


@pytest.fixture(scope="module")
def writer_site(tmp_path_factory):
    """A page with a text writer of ``writer_run()`` and its export,
    served on 127.0.0.1.  Yields the server, the run and the payload."""
    from test_live_lm import payload

    from d2lmini.live import export_lm, text_writer

    run = writer_run()
    live = text_writer(run, WRITER_PROMPTS, base="models/")
    folder = tmp_path_factory.mktemp("writer-site")
    export_lm(run, folder / "models", evaluated=payload(live))
    (folder / "index.html").write_text(document(live), encoding="utf-8")
    with serving(folder) as httpd:
        yield httpd, run, payload(live), folder


def open_writer(any_browser, httpd):
    """The small page's text writer once its model loaded (or failed
    to) and its first continuation is written: (page, context, errors,
    root)."""
    context = any_browser.new_context(viewport={"width": 1280,
                                                "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text)
            if m.type == "error" else None)
    page.route("**/*", lambda r: r.continue_() if urlsplit(
        r.request.url).hostname == "127.0.0.1" else r.abort())
    page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/",
              wait_until="networkidle")
    page.wait_for_function(WRITER_READY, timeout=30_000)
    root = page.locator(WRITER)
    if root.get_attribute("data-state") == "ready":
        page.wait_for_function(f"""() => {{
          const el = document.querySelector('{WRITER}');
          return el.dataset.writes === "1" && el.dataset.writing === "false";
        }}""")
    return page, context, errors, root


@pytest.mark.slow  # chromium on the section's model size: `make unit`
def test_text_writer_writes_what_d2lmini_generates(any_browser,
                                                   writer_site):
    """The model loads, the page says it runs the section's weights and
    continues the first prompt; a beginning typed and Enter write
    d2lmini's generate, token for token, for several seeds (Next seed),
    top-k and top-p from the keyboard, temperatures 1.5 and 0; greedy
    writes the same whatever the seed."""
    httpd, run, spec, _ = writer_site
    page, context, errors, root = open_writer(any_browser, httpd)
    try:
        assert root.get_attribute("data-state") == "ready", errors
        assert root.get_attribute("data-weights") == "same"
        assert root.locator(".d2l-weights").inner_text() == (
            "These are the weights the section evaluated (validation "
            "perplexity 12.3).")
        assert spec["checkpoint"] in root.locator(
            ".d2l-checkpoint").inner_text()
        assert root.locator(".d2l-output").get_attribute(
            "aria-live") == "polite"
        first = root.evaluate(WRITTEN)
        assert first["settings"] == {"temperature": 0.8, "topK": None,
                                     "topP": 0.9, "seed": 0,
                                     "problem": None}
        check_written(root, run, spec, WRITER_PROMPTS[0], first)
        got = write_text(page, root, "Nous avons")
        check_written(root, run, spec, "Nous avons", got)
        texts = {tuple(got["ids"])}
        button = root.locator("button[name=next-seed]")
        for seed in (1, 2, 3):
            button.focus()
            got = written_after(page, root, lambda: button.press("Enter"))
            assert got["settings"]["seed"] == seed
            check_written(root, run, spec, "Nous avons", got)
            texts.add(tuple(got["ids"]))
        assert len(texts) > 1  # other seeds, other texts
        top_k = root.locator("input[name=top-k]")
        top_k.focus()
        for _ in range(4):
            top_k.press("ArrowRight")
        got = written_after(page, root, lambda: top_k.press("ArrowRight"))
        assert got["settings"]["topK"] == 5
        check_written(root, run, spec, "Nous avons", got)
        top_p = root.locator("input[name=top-p]")
        top_p.focus()
        got = written_after(page, root, lambda: top_p.press("End"))
        assert got["settings"]["topP"] is None  # 1: off
        check_written(root, run, spec, "Nous avons", got)
        temperature = root.locator("input[name=temperature]")
        got = written_after(page, root, lambda: temperature.fill("1.5"))
        assert got["settings"]["temperature"] == 1.5
        check_written(root, run, spec, "Nous avons", got)
        temperature.focus()
        got = written_after(page, root, lambda: temperature.press("Home"))
        assert got["settings"]["temperature"] == 0
        greedy = check_written(root, run, spec, "Nous avons", got)
        for _ in range(2):
            button.focus()
            got = written_after(page, root, lambda: button.press("Enter"))
            assert got["ids"] == greedy  # greedy: the seed does not count
        assert "0 (greedy)" in root.locator(
            "output[for$=temperature]").inner_text()
        example = root.locator("button[name=example]").nth(1)
        got = written_after(page, root, lambda: example.click())
        assert root.locator("input[name=beginning]").input_value() == \
            WRITER_PROMPTS[1]
        check_written(root, run, spec, WRITER_PROMPTS[1], got)
    finally:
        context.close()
    assert not errors, errors


@pytest.mark.slow  # chromium on the section's model size: `make unit`
def test_text_writer_draws_the_distribution_and_the_attention(
        any_browser, writer_site):
    """The bars are d2lmini's next-token distribution of the chosen
    generated token (the kept set under top-k and top-p marked); they
    redraw when the temperature, top-k or top-p moves; each head's map
    is d2lmini's causal self-attention of the chosen block, the cells
    above the diagonal empty."""
    httpd, run, _, _ = writer_site
    page, context, errors, root = open_writer(any_browser, httpd)
    try:
        got = write_text(page, root, "elle est très")
        check_bars(root, run, got, 0)
        check_attention(root, run, got)
        chart = root.locator(".d2l-lm-next .d2l-chart")
        for name, key in (("temperature", "ArrowLeft"),
                          ("top-p", "ArrowLeft"), ("top-k", "ArrowRight"),
                          ("top-k", "ArrowRight")):
            before = chart.inner_html()
            control = root.locator(f"input[name={name}]")
            control.focus()
            got = written_after(page, root,
                                functools.partial(control.press, key))
            assert chart.inner_html() != before, name
            bars = check_bars(root, run, got, 0)
        assert got["settings"]["topK"] == 2
        assert sum(b["kept"] for b in bars) <= 2
        step = root.locator("select[name=step]")
        assert step.locator("option").count() == len(got["ids"])
        step.select_option("2")
        check_bars(root, run, got, 2)
        block = root.locator("select[name=block]")
        assert block.input_value() == "1"  # the last block first
        block.select_option("0")
        check_attention(root, run, got)
        label = root.locator("svg.d2l-lm-bars").get_attribute("aria-label")
        assert "kept" in label and "drawn" in label
    finally:
        context.close()
    assert not errors, errors


@pytest.mark.slow  # chromium on the section's model size: `make unit`
def test_text_writer_answers_unknown_words_and_bad_input(any_browser,
                                                        writer_site):
    """An unknown word is read as <unk> and shown as unknown; an empty
    box writes from <bos>; a seed out of range and a beginning longer
    than the model reads get a visible answer."""
    httpd, run, spec, _ = writer_site
    page, context, errors, root = open_writer(any_browser, httpd)
    try:
        got = write_text(page, root, "Je suis zorglub")
        assert got["read"][-1] == run.data.tgt_vocab.unk
        check_written(root, run, spec, "Je suis zorglub", got)
        assert root.locator("mark.d2l-lm-unk").inner_text() == "zorglub"
        assert "read as <unk>: zorglub" in root.locator(
            ".d2l-lm-notes").inner_text()
        got = write_text(page, root, "  ")
        check_written(root, run, spec, "", got)
        assert "the model writes from <bos>" in root.locator(
            ".d2l-lm-notes").inner_text()
        seed = root.locator("input[name=seed]")
        seed.fill("-1")
        seed.press("Enter")
        status = root.locator(".d2l-status")
        assert "The seed is a whole number from 0 to 4294967295" in \
            status.inner_text()
        seed.fill("7")
        long = " ".join(["je"] * 40)
        box = root.locator("input[name=beginning]")
        box.fill(long)
        box.press("Enter")
        assert "the model reads at most 31" in status.inner_text()
        got = write_text(page, root, " ".join(["je"] * 25))
        assert got["maxNew"] == 32 - 26 + 1
        check_written(root, run, spec, " ".join(["je"] * 25), got)
    finally:
        context.close()
    assert not errors, errors


def test_text_writer_says_when_the_model_fails_to_load(any_browser,
                                                      writer_site,
                                                      tmp_path):
    from d2lmini.live import text_writer

    _, run, _, _ = writer_site
    (tmp_path / "index.html").write_text(document(text_writer(
        run, WRITER_PROMPTS, base="nowhere/")), encoding="utf-8")
    with serving(tmp_path) as bare:
        page, context, errors, root = open_writer(any_browser, bare)
        try:
            assert root.get_attribute("data-state") == "error"
            status = root.locator(".d2l-status")
            assert status.is_visible() and status.get_attribute(
                "role") == "alert"
            text = status.inner_text()
            assert "could not be loaded" in text and "make book" in text
        finally:
            context.close()
    assert all("Failed to load resource" in e for e in errors), errors


@pytest.mark.slow  # chromium on the section's model size: `make unit`
def test_text_writer_first_token_times(any_browser, writer_site, capsys):
    """Print the time from Enter to the first generated token shown
    (the page's data-first-token-ms) over 12 continuations, median and
    max, and the model's export size, which must fit the translators'
    budget for a page with its model.  Not an assertion of time."""
    httpd, run, spec, folder = writer_site
    manifest = json.loads((folder / "models" / spec["checkpoint"]
                           / "manifest.json").read_text())
    model_bytes = sum(p.stat().st_size for p in (
        folder / "models" / spec["checkpoint"]).iterdir())
    page_bytes = (folder / "index.html").stat().st_size
    assert page_bytes + model_bytes < BUDGET_WITH_MODEL
    page, context, errors, root = open_writer(any_browser, httpd)
    try:
        times = []
        for k in range(12):
            got = write_text(page, root, WRITER_PROMPTS[k % 3])
            times.append(float(root.get_attribute("data-first-token-ms")))
        check_written(root, run, spec, WRITER_PROMPTS[2], got)
        every = float(root.get_attribute("data-last-ms"))
    finally:
        context.close()
    assert not errors, errors
    with capsys.disabled():
        print(f"\n  text writer (a language model of the section's sizes, "
              f"{spec['vocab_size']} tokens): Enter to the first token "
              f"over {len(times)} continuations, median "
              f"{statistics.median(times):.1f} ms, max {max(times):.1f} "
              f"ms ({len(got['ids'])} tokens in {every:.0f} ms); model "
              f"{manifest['weights_bytes'] / 1e6:.2f} MB of weights, "
              f"{model_bytes / 1e6:.2f} MB with its manifest")


def test_writer_page_writes_like_d2lmini(open_page, capsys):
    """The built site's page with a text writer: it names the checkpoint
    its notebook evaluated and loads it when it comes into view (page
    and model within the translators' budget), says which weights it
    runs, writes d2lmini's generate for every prompt (at the page's
    settings and greedily); the times from Enter to the first token and
    the model's size are printed, a screenshot lands in
    _build/screenshots/."""
    from d2lmini.live import lm_weights_bytes
    from d2lmini.lm import LMRecipe, _fingerprint, train_or_load_lm

    docs = writer_pages()
    if not docs:
        pytest.skip("no page of the built site has a text writer yet")
    for doc in docs:
        found = payloads(page_text(doc), "text-writer")
        assert len(found) == 1, (f"{doc}: {len(found)} text writers")
        spec = found[0]
        run = train_or_load_lm(LMRecipe(**spec["recipe"]))
        assert _fingerprint(run.recipe.key(), run.data) == \
            spec["fingerprint"], (
                f"{doc}: the page's checkpoint is not the model the cache "
                "holds now; run `make execute` and `make book`")
        folder = HTML / "_static" / "models" / spec["checkpoint"]
        manifest = json.loads((folder / "manifest.json").read_text())
        model_bytes = (folder / "manifest.json").stat().st_size + \
            (folder / manifest["weights"]).stat().st_size
        page = open_page(doc)
        before = page.bytes_loaded()
        root = page.page.locator(WRITER)
        assert root.get_attribute("data-d2l-mounted") == "1", page.errors
        root.scroll_into_view_if_needed()
        page.page.wait_for_function(WRITER_READY, timeout=60_000)
        assert root.get_attribute("data-state") == "ready", page.errors
        after = page.bytes_loaded()
        assert after <= weight_budget(doc) + model_bytes, (doc, after)
        assert after < BUDGET_WITH_MODEL, (doc, after)
        case = root.get_attribute("data-weights")
        note = root.locator(".d2l-weights").inner_text()
        if manifest["weights_sha256"] == spec["weights_sha256"]:
            assert case == "same" and note == (
                "These are the weights the section evaluated (validation "
                f"perplexity {spec['val_ppl']:.1f}).")
        else:
            assert case == "other" and note.startswith(
                "This site was built on a machine that trained its own")
        # The page runs the weights this machine exported: those of the
        # cache, unless it trained again since.
        same_weights = hashlib.sha256(lm_weights_bytes(
            run.model)).hexdigest() == manifest["weights_sha256"]
        times = []
        for k in range(10):
            text = spec["prompts"][k % len(spec["prompts"])]
            got = write_text(page.page, root, text)
            times.append(float(root.get_attribute("data-first-token-ms")))
            if same_weights and k < len(spec["prompts"]):
                check_written(root, run, spec, text, got)
        temperature = root.locator("input[name=temperature]")
        temperature.focus()
        got = written_after(page.page, root, functools.partial(
            temperature.press, "Home"))
        if same_weights:
            check_written(root, run, spec, text, got)
            check_bars(root, run, got, 0)
            check_attention(root, run, got)
        SHOTS.mkdir(parents=True, exist_ok=True)
        shoot(root, SHOTS / f"{doc.split('/')[-1]}-text-writer.png")
        MEASURED.setdefault("weights", {})[doc] = (
            before, after, float(root.get_attribute("data-load-ms")))
        with capsys.disabled():
            print(f"\n  {doc}: the text writer serves the {case} weights; "
                  f"Enter to the first token over {len(times)} "
                  f"continuations, median {statistics.median(times):.1f} "
                  f"ms, max {max(times):.1f} ms; model "
                  f"{manifest['weights_bytes'] / 1e6:.2f} MB of weights "
                  f"({model_bytes / 1e6:.2f} MB with its manifest); page "
                  f"{after / 1e6:.2f} MB with it")
        assert not page.errors, page.errors


def test_text_writer_is_live_in_jupyterlab(jupyterlab, browser,  # noqa: F811
                                           tmp_path):
    """The text writer made in a kernel loads its model (exported where
    JupyterLab serves files), runs the weights the kernel's run names,
    and writes d2lmini's tokens for a beginning typed and Enter, and
    greedily from the temperature slider's Home key: JupyterLab takes
    none of these keys."""
    from test_live_lm import payload

    from d2lmini.live import export_lm, text_writer

    run = writer_run()
    spec = payload(text_writer(run, WRITER_PROMPTS,
                               base="/files/models/"))
    export_lm(run, tmp_path / "models", evaluated=spec)
    with lab_output(browser, jupyterlab, "writer.ipynb") as page:
        root = page.locator(WRITER).first
        root.scroll_into_view_if_needed()
        page.wait_for_function(WRITER_READY, timeout=60_000)
        assert root.get_attribute("data-state") == "ready"
        assert root.get_attribute("data-weights") == "same"
        page.wait_for_function(
            f"() => document.querySelector('{WRITER}').dataset.writes "
            "=== '1'")
        got = write_text(page, root, "Nous avons")
        check_written(root, run, spec, "Nous avons", got)
        temperature = root.locator("input[name=temperature]")
        temperature.focus()
        got = written_after(page, root, functools.partial(
            temperature.press, "Home"))
        assert got["settings"]["temperature"] == 0
        check_written(root, run, spec, "Nous avons", got)
