"""What every live explorer's output is made of (``d2lmini.live``).

The page's script is put together from the files of ``d2lmini/js/``
(``live_js``); ``LiveHTML`` is the HTML output of one explorer: its data
as JSON in a ``<div data-d2l-live=...>``, followed by that script;
``payloads`` reads the data back from a page.  ``with_site_view`` joins
an ipywidgets explorer (Jupyter, with a kernel) and a ``LiveHTML`` (the
website) in one output.
"""

import hashlib
import html
import json
import numbers
import re
from pathlib import Path

__all__ = ["JS_DIR", "JS_PARTS", "LM_PARTS", "LiveHTML", "VISION_PARTS",
           "live_js", "lm_js", "payloads", "vision_js", "with_site_view"]

JS_DIR = Path(__file__).with_name("js")
# The parts of the page's script, in the order live_js puts them into
# js/wrapper.js (each file says what it holds).
JS_PARTS = ("base.js", "charts.js", "tokenizer.js", "model.js",
            "beam.js", "sha256.js", "manifest.js", "explorers.js",
            "beamtree.js", "translator.js", "scrubber.js", "boot.js")
_PARTS_LINE = ("  // @parts: d2lmini.live puts the files of JS_PARTS here, "
               "in order.\n")
# The digit classifier's part, in js/vision-wrapper.js: only its output
# carries it (after the page's script), so that the other explorers'
# outputs, one copy of the script each, stay small.
VISION_PARTS = ("vit.js",)
_VISION_LINE = ("  // @parts: d2lmini.live puts the files of VISION_PARTS "
                "here, in order.\n")
# The text writer's part, in js/lm-wrapper.js, carried only by its
# output, as the digit classifier's is.
LM_PARTS = ("lm.js",)
_LM_LINE = ("  // @parts: d2lmini.live puts the files of LM_PARTS here, "
            "in order.\n")

NEEDS_JS = ("This explorer runs in the page: on the website it is live; in "
            "Jupyter, run the cell (Jupyter runs scripts only in outputs "
            "it trusts).")


def _assemble(wrapper_name, line, names):
    wrapper = (JS_DIR / wrapper_name).read_text(encoding="utf-8")
    if wrapper.count(line) != 1:
        raise RuntimeError(f"{JS_DIR / wrapper_name} must hold the line "
                           f"{line!r} once: the parts go there")
    parts = "\n".join((JS_DIR / name).read_text(encoding="utf-8")
                      for name in names)
    return wrapper.replace(line, parts)


def live_js():
    """The page's script, one piece of JavaScript: ``js/wrapper.js``
    with the files of ``JS_PARTS``, in that order, in its function (one
    scope: every part uses the names of the others).  Each explorer's
    output carries it inline: no other file, no build tool."""
    return _assemble("wrapper.js", _PARTS_LINE, JS_PARTS)


def vision_js():
    """The digit classifier's script: ``js/vision-wrapper.js`` with the
    files of ``VISION_PARTS``.  It runs after ``live_js()`` (its output
    carries both), takes the helpers it shares from ``d2lLive.parts``
    and adds its explorer to the page's with ``d2lLive.addMount``."""
    return _assemble("vision-wrapper.js", _VISION_LINE, VISION_PARTS)


def lm_js():
    """The text writer's script: ``js/lm-wrapper.js`` with the files of
    ``LM_PARTS``.  Like ``vision_js()``, it runs after ``live_js()``
    (only the text writer's output carries it), takes the helpers it
    shares from ``d2lLive.parts`` and adds its explorer with
    ``d2lLive.addMount``."""
    return _assemble("lm-wrapper.js", _LM_LINE, LM_PARTS)


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
    """An HTML output (``_repr_html_``) holding one live explorer: its
    data, the page's script and ``extra_js`` (a part that only this
    explorer needs, such as ``vision_js()`` or ``lm_js()``), if any."""

    def __init__(self, kind, data, note, extra_js=""):
        self.kind, self.data = kind, data
        payload = json.dumps(data, separators=(",", ":"))
        # No "<" in the script element: "</script" would end it, and
        # "<!--<script" would make the HTML tokeniser swallow the script
        # and the rest of the page.  JSON reads \u003c as "<" (and so on).
        payload = (payload.replace("<", "\\u003c").replace(">", "\\u003e")
                   .replace("&", "\\u0026"))
        ident = "d2l-" + hashlib.sha256(
            f"{kind}:{payload}".encode()).hexdigest()[:12]
        self.html = (
            f'<div class="d2l-live" id="{ident}" data-d2l-live="{kind}">'
            f'<script type="application/json">{payload}</script>'
            f'<p class="d2l-needs-js">{html.escape(note)}</p></div>\n'
            f"<script>\n{live_js()}</script>"
            + (f"\n<script>\n{extra_js}</script>" if extra_js else ""))

    def _repr_html_(self):
        return self.html

    def __repr__(self):
        return f"<live {self.kind} explorer: run in a browser>"


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
