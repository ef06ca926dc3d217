"""The notebooks are committed with fresh, complete outputs.

The book is built with ``execute_notebooks: off``, so what a reader sees is
what was committed. These checks need no kernel (except the one test of
``scripts/execute_notebooks.py`` itself) and run in a plain ``pytest``.
They cover every notebook listed in ``_toc.yml`` and every ``.ipynb`` in
``chapters/``. Whether the committed outputs still match a re-execution is
checked by ``make nbval`` for the cells tagged ``nbval-check-output``; here
a hash of the code records which code produced the outputs.
"""

import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
FIX = "run `make execute` (scripts/execute_notebooks.py) and commit"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _load(name):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        path = ROOT / "scripts" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return module


execute_notebooks = _load("execute_notebooks")
toc_notebooks = _load("toc_notebooks")

TOC = toc_notebooks.toc_notebooks()
IN_CHAPTERS = sorted(p.relative_to(ROOT).as_posix()
                     for p in (ROOT / "chapters").glob("*.ipynb"))
NOTEBOOKS = TOC + [nb for nb in IN_CHAPTERS if nb not in TOC]


def executed_cells(nb):
    """The code cells that a top-to-bottom run executes."""
    skip = execute_notebooks.NotebookClient.skip_cells_with_tag.default_value
    return [cell for cell in nb.cells
            if cell.cell_type == "code" and cell.source.strip()
            and skip not in cell.metadata.get("tags", [])]


def test_every_notebook_in_chapters_is_in_the_toc():
    orphans = [nb for nb in IN_CHAPTERS if nb not in TOC]
    assert not orphans, (
        f"{orphans} are not in _toc.yml, so neither the book nor nbval "
        "sees them: add them to _toc.yml or delete them")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_has_fresh_outputs(name):
    nb = nbformat.read(ROOT / name, as_version=4)
    nbformat.validate(nb)
    cells = executed_cells(nb)
    assert cells, f"{name} has no code cell"
    counts = [cell.execution_count for cell in cells]
    assert None not in counts, (
        f"{name}: {counts.count(None)} of {len(counts)} code cells have no "
        f"outputs (never executed); {FIX}")
    assert counts == list(range(1, len(cells) + 1)), (
        f"{name}: execution counts {counts} are not 1, 2, 3, ...: the "
        f"outputs do not come from one top-to-bottom run; {FIX}")
    errors = [i for i, cell in enumerate(nb.cells)
              for out in cell.get("outputs", [])
              if out.output_type == "error"]
    assert not errors, f"{name}: cells {errors} hold an error; {FIX}"
    timed = [i for i, cell in enumerate(nb.cells)
             if "execution" in cell.metadata]
    assert not timed, f"{name}: cells {timed} carry timestamps; {FIX}"
    recorded = nb.metadata.get(execute_notebooks.METADATA_KEY, {})
    assert recorded.get("executed_source_sha256") == (
        execute_notebooks.code_sha256(nb)), (
        f"{name}: the code changed since the outputs were made (or they "
        f"were not made by scripts/execute_notebooks.py); {FIX}")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_widget_output_has_a_page_alternative(name):
    """The website shows no widget (no kernel, no widget manager): each
    widget output must carry text/html for the page, and the notebook no
    widget state."""
    nb = nbformat.read(ROOT / name, as_version=4)
    bare = [i for i, cell in enumerate(nb.cells)
            for out in cell.get("outputs", [])
            if WIDGET_VIEW in out.get("data", {})
            and "text/html" not in out.data]
    assert not bare, (
        f"{name}: cells {bare} show a widget with nothing for the website "
        "(wrap it with d2lmini.live.with_site_view); " + FIX)
    assert "widgets" not in nb.metadata, (
        f"{name}: saved widget state would load the widget manager; {FIX}")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_has_cells_that_nbval_compares(name):
    nb = nbformat.read(ROOT / name, as_version=4)
    checked = [cell for cell in executed_cells(nb)
               if "nbval-check-output" in cell.metadata.get("tags", [])
               and cell.outputs]
    assert checked, (
        f"{name}: no cell with outputs is tagged nbval-check-output, so "
        "`make nbval` cannot notice stale outputs; tag the deterministic, "
        "teaching-critical cells")


# Sentences of the run.  The rule (written in d2lmini/notebook.py): a
# Markdown cell holds only what is true of every run; a number or a word
# that comes from the run is printed by the cell that computed it (worded
# by d2lmini.report), never glued into prose: no MyST {glue} role (which
# JupyterLab, VS Code and Colab show raw) and no cell that writes prose or
# that the website removes (VS Code and Colab show its source anyway).
# And in a notebook that trains (a code cell calls train_or_load), no
# Markdown cell after the first training cell holds a decimal number
# (27.5, 0.658) or a percentage (7 %) outside a code span; math counts as
# prose.  Such numbers are results of training and evaluation, which the
# text must not leave behind on a re-execution.
GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`")
CODE_SPAN = re.compile(r"`[^`]*`")
# A cell that trains or loads a model: after it, numbers come from code.
TRAINS = re.compile(r"\btrain_or_load(_lm)?\(|\bfinetune_or_load\(")
RESULT_NUMBER = re.compile(r"(?<![\w.])\d+\.\d+|\b\d+ ?%")
# What a path of the machine that ran a notebook looks like in an output.
MACHINE_PATH = re.compile(
    r"/tmp/|/root/|/home/|/Users/|/private/var/|ipykernel_|[A-Z]:\\\\")


def _loose_numbers(text):
    return RESULT_NUMBER.findall(CODE_SPAN.sub("", text))


def _output_texts(cell):
    """Every text an output of the cell shows, whatever its kind."""
    for out in cell.get("outputs", []):
        if "text" in out:
            yield out.get("name", ""), out["text"]
        for mime, data in out.get("data", {}).items():
            if mime.startswith("text/"):
                yield mime, data if isinstance(data, str) else "".join(data)


def test_the_number_rule_sees_what_it_should():
    assert _loose_numbers("BLEU is 27.5, 7 % shorter, 0.65 bits") == [
        "27.5", "7 %", "0.65"]
    assert _loose_numbers("`x = 0.5`, 1,000 sentences, step 945") == []
    assert _loose_numbers("the interval $[+4.3, +7.5]$") == ["4.3", "7.5"]
    assert GLUE_ROLE.search("BLEU {glue:text}`bleu:.1f` and {glue}`x`")
    assert MACHINE_PATH.search("/tmp/ipykernel_7599/1867465734.py:1: ")
    assert not MACHINE_PATH.search("d2lmini/attention.py, chapters/img")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_markdown_cell_holds_a_glue_role(name):
    nb = nbformat.read(ROOT / name, as_version=4)
    raw = [i for i, cell in enumerate(nb.cells)
           if cell.cell_type == "markdown" and GLUE_ROLE.search(cell.source)]
    assert not raw, (
        f"{name}: markdown cells {raw} hold {{glue}} roles, which a plain "
        "Jupyter front end shows raw; print the value from the cell that "
        "computes it")


MACHINERY = re.compile(r"\bglue\(|\bprose\(|\bMarkdown\(")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_cell_writes_prose_or_hides_itself(name):
    nb = nbformat.read(ROOT / name, as_version=4)
    found = {i: cell.source.splitlines()[0][:60]
             for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and (MACHINERY.search(cell.source)
                  or {"remove-cell", "remove-input"}
                  & set(cell.metadata.get("tags", []))
                  or cell.metadata.get("jupyter", {}).get("source_hidden"))}
    assert not found, (
        f"{name}: cells {found} write prose or are hidden, which VS Code "
        "and Colab show anyway; print the run's numbers from the cell that "
        "computes them (d2lmini.report)")


def test_the_machinery_rule_sees_what_it_should():
    assert MACHINERY.search('prose(r"""{{x}}""")')
    assert MACHINERY.search("glue('x', 1)")
    assert not MACHINERY.search("d2l.notebook.show_source(f)")


# Outside a code span, the site reads "<unk>" as an HTML tag (the word
# vanishes) and two "$" as math; tokens belong in `backticks`.
MARKUP_IN_TOKENS = re.compile(r"<(?:unk|eos|bos|pad|cls|mask)>")


def _outside_code(text):
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return CODE_SPAN.sub("", text)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_special_tokens_in_markdown_are_in_code_spans(name):
    nb = nbformat.read(ROOT / name, as_version=4)
    found = {i: MARKUP_IN_TOKENS.findall(_outside_code(cell.source))
             for i, cell in enumerate(nb.cells)
             if cell.cell_type == "markdown"}
    found = {i: tokens for i, tokens in found.items() if tokens}
    assert not found, (
        f"{name}: markdown cells {found} name a special token outside "
        "`code`, which the site renders as an HTML tag: put it in "
        "backticks")


def test_the_token_rule_sees_what_it_should():
    assert MARKUP_IN_TOKENS.search(_outside_code("*qui est votre <unk> ?*"))
    assert not MARKUP_IN_TOKENS.search(_outside_code("the `<unk>` token"))
    assert not MARKUP_IN_TOKENS.search(_outside_code("```\n<eos>\n```"))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_result_numbers_in_markdown_cells_come_from_the_run(name):
    nb = nbformat.read(ROOT / name, as_version=4)
    trains = [i for i, cell in enumerate(nb.cells)
              if cell.cell_type == "code" and TRAINS.search(cell.source)]
    if not trains:
        return
    loose = {i: found for i, cell in enumerate(nb.cells)
             if i > trains[0] and cell.cell_type == "markdown"
             and (found := _loose_numbers(cell.source))}
    assert not loose, (
        f"{name}: markdown cells quote results that are not the run's "
        f"(cell: numbers) {loose}; print them from the cell that computes "
        "them (see d2lmini/notebook.py)")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_output_holds_a_path_or_a_warning(name):
    """What a notebook shows is what a reader should read: no path of the
    machine that executed it, and no warning (a fact the reader needs is
    printed in words by the cell, as train_or_load's reasons are)."""
    nb = nbformat.read(ROOT / name, as_version=4)
    found = {}
    for i, cell in enumerate(nb.cells):
        for kind, text in _output_texts(cell):
            if MACHINE_PATH.search(text) or str(ROOT) in text:
                found[i] = f"a path in {kind}: {text[:160]!r}"
            elif kind == "stderr" and "Warning" in text:
                found[i] = f"a warning: {text[:160]!r}"
    assert not found, f"{name}: {found}; {FIX} after fixing the cause"


@pytest.mark.slow  # nbconvert, 1 to 3 s a notebook: `make unit` runs it
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_plain_front_end_shows_sentences_not_roles(name):
    """What `jupyter nbconvert --to html` makes of the committed notebook,
    as a front end without MyST renders it: no {glue} role, no unfilled
    field."""
    from nbconvert import HTMLExporter
    body, _ = HTMLExporter().from_filename(str(ROOT / name))
    assert "{glue" not in body, f"{name}: a glue role in the HTML"
    shown, _ = HTMLExporter(exclude_input=True).from_filename(
        str(ROOT / name))
    field = re.search(r"\{\{\s*[A-Za-z_]\w*\s*(:[^{}]*)?\}\}", shown)
    assert not field, f"{name}: an unfilled field {field} in the outputs"


def test_code_hash_follows_code_not_prose():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Prose."),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("print(x)"),
    ])
    before = execute_notebooks.code_sha256(nb)
    nb.cells[0].source = "Other prose."
    assert execute_notebooks.code_sha256(nb) == before
    nb.cells[2].source = "print(x + 1)"
    assert execute_notebooks.code_sha256(nb) != before
    # Moving code across a cell boundary is a change too.
    nb.cells[1].source, nb.cells[2].source = "x = 1\nprint(x)", ""
    assert execute_notebooks.code_sha256(nb) != before


@pytest.mark.slow
def test_execute_writes_stable_outputs_without_widget_state(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import os\nprint(os.getcwd())"),
        nbformat.v4.new_code_cell("   "),
        nbformat.v4.new_code_cell(
            "import ipywidgets\nipywidgets.IntSlider(value=3)"),
        nbformat.v4.new_code_cell(
            "from d2lmini.live import with_site_view\n"
            "from d2lmini.live import masked_softmax_explorer as m\n"
            "with_site_view(ipywidgets.IntSlider(), m())"),
    ])
    first_id = nb.cells[0].id
    path = tmp_path / "demo.ipynb"
    nbformat.write(nb, path)
    execute_notebooks.execute(path, timeout=60)
    first_run = path.read_bytes()
    execute_notebooks.execute(path, timeout=60)
    assert path.read_bytes() == first_run, "a re-run changed the file"
    out = nbformat.read(path, as_version=4)
    assert out.cells[0].id == first_id
    assert out.cells[0].outputs[0].text.strip() == str(tmp_path)
    assert [c.execution_count for c in executed_cells(out)] == [1, 2, 3]
    assert all("execution" not in c.metadata for c in out.cells)
    assert "widgets" not in out.metadata
    assert out.cells[2].outputs == []  # a bare widget: dropped
    data = out.cells[3].outputs[0].data
    assert WIDGET_VIEW in data and 'data-d2l-live="masked-softmax"' in \
        data["text/html"]
    recorded = out.metadata[execute_notebooks.METADATA_KEY]
    assert recorded["executed_source_sha256"] == (
        execute_notebooks.code_sha256(out))


def test_notebook_cells_wait_longer_for_their_outputs():
    """The Makefile's notebook runs load the plugin that gives nbval's
    cells more than its fixed 5 seconds to send their outputs."""
    spec = importlib.util.spec_from_file_location(
        "nbval_output_timeout", ROOT / "tests" / "nbval_output_timeout.py")
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)

    class Cell:
        output_timeout = 5

    cell, other = Cell(), object()
    plugin.pytest_collection_modifyitems([cell, other])
    assert cell.output_timeout == plugin.OUTPUT_TIMEOUT > 5
    nbval = re.search(r"^NBVAL = (.*?[^\\])$",
                      (ROOT / "Makefile").read_text(), re.M | re.S)
    assert "-p tests.nbval_output_timeout" in nbval.group(1)
