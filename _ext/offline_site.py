"""This book's Sphinx extension: no sphinx-thebe scripts in the pages.

Jupyter Book 1 always loads sphinx-thebe, which writes its configuration
script into every page twice (``const THEBE_JS_URL`` declared twice: a
script error in every browser) and names a CDN. The chapter has no live
code cells (``launch_buttons: thebe: false``), so both of its scripts are
left out of every page.
"""


def _is_thebe(script):
    """Whether a page script (a Sphinx ``_JavaScript``) is sphinx-thebe's."""
    filename = str(getattr(script, "filename", script) or "")
    body = getattr(script, "attributes", {}).get("body", "")
    return filename.endswith("sphinx-thebe.js") or "THEBE_JS_URL" in body


def drop_thebe(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if scripts:
        context["script_files"] = [s for s in scripts if not _is_thebe(s)]


def setup(app):
    app.connect("html-page-context", drop_thebe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
