"""This book's Sphinx extension: lighter pages that work offline.

- Jupyter Book 1 always loads sphinx-thebe, which writes its configuration
  script into every page twice (``const THEBE_JS_URL`` declared twice: a
  script error in every browser) and names a CDN. The chapter has no live
  code cells (``launch_buttons: thebe: false``), so both of its scripts
  are left out of every page.
- The theme draws its icons twice: with Font Awesome's web font (in its
  stylesheet) and with ``fontawesome.js`` (1.5 MB), which replaces each
  icon by an SVG. The web font alone draws them, so the script is taken
  out of every page once the site is written.
"""

import re
from pathlib import Path

FONTAWESOME_JS = re.compile(
    r'<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*">'
    r"</script>\n?")


def _is_thebe(script):
    """Whether a page script (a Sphinx ``_JavaScript``) is sphinx-thebe's."""
    filename = str(getattr(script, "filename", script) or "")
    body = getattr(script, "attributes", {}).get("body", "")
    return filename.endswith("sphinx-thebe.js") or "THEBE_JS_URL" in body


def drop_thebe(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if scripts:
        context["script_files"] = [s for s in scripts if not _is_thebe(s)]


def drop_fontawesome_js(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        lighter = FONTAWESOME_JS.sub("", text)
        if lighter != text:
            page.write_text(lighter, encoding="utf-8")


def setup(app):
    app.connect("html-page-context", drop_thebe, priority=900)
    app.connect("build-finished", drop_fontawesome_js)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
