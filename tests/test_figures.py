"""The chapter's drawn figures (chapters/img/*.svg): each has a text
alternative a screen reader reads, its own white background (so a dark
theme does not put its dark lines on a dark page), and a place in a
section, with alt text, as a Markdown image.

The browser test (``make browser``) looks at them on the built pages,
in the light and the dark theme."""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIGURES = sorted((ROOT / "chapters" / "img").glob("*.svg"))
SVG = "{http://www.w3.org/2000/svg}"
WHITE = {"#fff", "#ffffff", "white"}
# ![alt text](img/name.svg) in a notebook's Markdown; the alt may span
# lines.
IMAGE = re.compile(r"!\[([^\]]*)\]\((img/[^)\s]+)\)")


def markdown_images():
    """(notebook, alt text, path) of every Markdown image."""
    for nb in sorted((ROOT / "chapters").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                for alt, path in IMAGE.findall("".join(cell["source"])):
                    yield nb.name, " ".join(alt.split()), path


def test_there_are_figures():
    assert len(FIGURES) >= 6, [f.name for f in FIGURES]


@pytest.mark.parametrize("path", FIGURES, ids=lambda p: p.name)
def test_figure_has_a_text_alternative_and_a_white_background(path):
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    assert root.get("role") == "img", f"{path.name}: no role=\"img\""
    title, desc = root.find(f"{SVG}title"), root.find(f"{SVG}desc")
    assert title is not None and title.text.strip(), f"{path.name}: title"
    assert desc is not None and len(desc.text.split()) >= 10, (
        f"{path.name}: the <desc> should say what the figure shows")
    labels = (root.get("aria-labelledby") or "").split()
    assert labels == [title.get("id"), desc.get("id")], (
        f"{path.name}: aria-labelledby should name the title and the "
        f"desc, got {labels}")
    drawn = [e for e in root if e.tag not in (f"{SVG}title", f"{SVG}desc",
                                                f"{SVG}defs", f"{SVG}style")]
    first = drawn[0]
    assert first.tag == f"{SVG}rect" and first.get("width") == "100%" \
        and first.get("height") == "100%" \
        and first.get("fill", "").lower() in WHITE, (
            f"{path.name}: the first thing drawn should be a white "
            f"rectangle over the whole figure, got {first.tag} "
            f"{first.attrib}")


def test_every_figure_is_shown_with_alt_text_and_exists():
    images = list(markdown_images())
    shown = {path for _, _, path in images}
    missing = [f.name for f in FIGURES if f"img/{f.name}" not in shown]
    assert not missing, f"figures no section shows: {missing}"
    for nb, alt, path in images:
        assert (ROOT / "chapters" / path).is_file(), f"{nb}: {path}"
        assert len(alt.split()) >= 8, (
            f"{nb}: {path} needs alt text that says what it shows, got "
            f"{alt!r}")
