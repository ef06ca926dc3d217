"""Re-execute the book's notebooks in place, with stable outputs.

Usage::

    python scripts/execute_notebooks.py [NOTEBOOK.ipynb ...]

Without arguments every notebook listed in ``_toc.yml`` is run, in reading
order. Each notebook runs top to bottom in a fresh kernel of this Python
environment, with the notebook's folder as working directory. The result is
written back so that a re-run changes as little as possible:

- no per-cell ``metadata.execution`` timestamps;
- the widget state is saved in the notebook metadata, so the static website
  can show the widgets without a kernel;
- cell ids are kept as they are, and the random widget model ids are
  replaced by ids derived from the notebook's name and the order in which
  the widgets were made, so an unchanged notebook re-executes to the same
  file;
- ``metadata.d2lmini.executed_source_sha256`` records the code that produced
  the outputs (``tests/test_notebooks.py`` fails when the code changed
  after the last run).

The notebook is only written when every cell ran without error.
"""

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from toc_notebooks import toc_notebooks  # noqa: E402

CELL_TIMEOUT = 600  # seconds; the training cells take minutes on a CPU
KERNEL = "python3"  # installed into .venv by `make venv`
METADATA_KEY = "d2lmini"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def code_sha256(nb):
    """Return the sha256 of the notebook's code, cell by cell.

    Only the source of code cells counts: editing prose does not make the
    outputs stale, editing code does.
    """
    digest = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            digest.update(cell.source.encode("utf-8"))
            digest.update(b"\0")  # "ab" + "c" differs from "a" + "bc"
    return digest.hexdigest()


def stable_widget_ids(nb, name):
    """Return ``nb`` with its widget model ids made reproducible.

    The kernel gives every widget a random id. The i-th widget made (the
    order of the saved state) gets the id ``sha256(f"{name}:{i}")[:32]``
    instead, everywhere it occurs: in the saved state, in the references
    between widgets and in the outputs that display them.
    """
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {})
    text = nbformat.writes(nb)
    for i, old in enumerate(state.get("state", {})):
        new = hashlib.sha256(f"{name}:{i}".encode()).hexdigest()[:32]
        text = text.replace(old, new)
    return nbformat.reads(text, as_version=4)


def execute(path, timeout=CELL_TIMEOUT, kernel_name=KERNEL):
    """Execute the notebook at ``path`` and write it back in place.

    Args:
        path: a ``.ipynb`` file.
        timeout: seconds allowed for each cell.
        kernel_name: the Jupyter kernel to run it in.

    Returns:
        The wall-clock seconds the execution took.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised; the file is
            left unchanged.
    """
    path = Path(path).resolve()
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel_name,
        record_timing=False,
        store_widget_state=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nb = stable_widget_ids(nb, path.name)
    nb.metadata[METADATA_KEY] = {"executed_source_sha256": code_sha256(nb)}
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "notebooks", nargs="*", type=Path,
        help="notebooks to run (default: every notebook in _toc.yml)")
    parser.add_argument(
        "--timeout", type=int, default=CELL_TIMEOUT,
        help=f"seconds allowed per cell (default {CELL_TIMEOUT})")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or [ROOT / nb for nb in toc_notebooks()]
    missing = [str(nb) for nb in notebooks if not Path(nb).is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    if not notebooks:
        print("No notebooks listed in _toc.yml; nothing to execute.")
        return 0
    total = 0.0
    for nb in notebooks:
        name = os.path.relpath(nb)
        print(f"{name}: running...", flush=True)
        try:
            seconds = execute(nb, timeout=args.timeout)
        except CellExecutionError as err:
            print(f"{name}: FAILED, left unchanged\n{err}", file=sys.stderr)
            return 1
        total += seconds
        print(f"{name}: {seconds:.1f} s", flush=True)
    print(f"{len(notebooks)} notebook(s) executed in {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
