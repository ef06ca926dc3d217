"""The core sections read as a textbook in every front end.

The sections of the first part of ``_toc.yml`` keep d2l's proportions:
at most 2,500 words of body prose each (Markdown cells and Markdown
outputs before Summary/Exercises) and 1,860 on average, a Summary of at
most 150 words, at most 200 visible code lines; and since VS Code and
Colab show every cell's source, no cell that writes or feeds prose
(``glue(``, ``prose(``, ``Markdown(``) or that the website removes, no
bare value printed by accident, a first cell of at most 12 lines, and a
notebook of at most 300 KB without its images.
"""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HEAD = re.compile(r"^#{1,3}\s*(Summary|Exercises)\b", re.M | re.I)
MACHINERY = re.compile(r"\bglue\(|\bprose\(|\bMarkdown\(")
REMOVED = ("remove-cell", "remove-input")


def core_notebooks():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    first = toc["parts"][0]["chapters"]
    return [f"{entry['file']}.ipynb" for entry in first]


CORE = core_notebooks()


def words(text):
    return len(re.findall(r"[A-Za-zÀ-ÿ0-9][\w'’.-]*", text))


def measure(name):
    nb = json.loads((ROOT / name).read_text())
    found = {"body": 0, "summary": 0, "code": 0, "machinery": 0,
             "stray": 0, "first": None}
    part = "body"
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            for i, text in enumerate(HEAD.split(src)):
                if i % 2:
                    part = text.lower()
                elif part in ("body", "summary"):
                    found[part] += words(text)
            continue
        if cell["cell_type"] != "code" or not src.strip():
            continue
        lines = len(src.strip().splitlines())
        if found["first"] is None:
            found["first"] = lines
        found["code"] += lines
        tags = cell.get("metadata", {}).get("tags", [])
        machinery = bool(MACHINERY.search(src)) or any(
            t in tags for t in REMOVED)
        found["machinery"] += lines if machinery else 0
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "text/markdown" in data and part in ("body", "summary"):
                found[part] += words("".join(data["text/markdown"]))
            if (machinery and out.get("output_type") == "execute_result"
                    and set(data) <= {"text/plain"}):
                found["stray"] += 1
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            out.get("data", {}).pop("image/png", None)
            out.get("data", {}).pop("image/svg+xml", None)
    found["kb"] = len(json.dumps(nb)) / 1024
    return found


def test_the_core_is_the_first_part_of_the_toc():
    assert len(CORE) == 9 and all((ROOT / nb).is_file() for nb in CORE)


@pytest.mark.parametrize("name", CORE)
def test_a_core_section_keeps_a_textbook_budget(name):
    m = measure(name)
    assert m["body"] <= 2500, f"{name}: {m['body']} words of body prose"
    assert m["summary"] <= 150, f"{name}: a Summary of {m['summary']} words"
    assert m["code"] <= 200, f"{name}: {m['code']} visible code lines"
    assert m["machinery"] == 0, (
        f"{name}: {m['machinery']} lines of cells that write prose or that "
        "the website removes; print the run's numbers from the cell that "
        "computes them (d2lmini.report)")
    assert m["stray"] == 0, f"{name}: {m['stray']} stray outputs"
    assert (m["first"] or 0) <= 12, f"{name}: first cell {m['first']} lines"
    assert m["kb"] <= 300, f"{name}: {m['kb']:.0f} KB without images"


def test_the_core_sections_are_d2l_sized_on_average():
    bodies = {name: measure(name)["body"] for name in CORE}
    mean = sum(bodies.values()) / len(bodies)
    assert mean <= 1860, f"{mean:.0f} words per section: {bodies}"


@pytest.mark.parametrize("name", CORE)
def test_no_markdown_shows_a_myst_role_raw_in_jupyter(name):
    """A plain Jupyter renders no MyST role such as {cite:p}`...`."""
    nb = json.loads((ROOT / name).read_text())
    raw = [i for i, cell in enumerate(nb["cells"])
           if cell["cell_type"] == "markdown"
           and re.search(r"\{[a-z]+(:[a-z]+)?\}`", "".join(cell["source"]))]
    assert not raw, f"{name}: cells {raw} hold MyST roles"
