"""Re-execute the book's notebooks in place, with stable outputs.

Usage::

    python scripts/execute_notebooks.py [NOTEBOOK.ipynb ...]

Without arguments every notebook listed in ``_toc.yml`` is run, in reading
order. Each notebook runs top to bottom in a fresh kernel of this Python
environment, with the notebook's folder as working directory. The result is
written back so that a re-run changes as little as possible:

- no per-cell ``metadata.execution`` timestamps;
- no widget state is saved: widgets are live only with a kernel, and the
  website shows each widget output's text/html alternative instead
  (``d2lmini.live``); outputs that are nothing but a widget (progress
  bars) are dropped, since they have nothing to show without a kernel;
- cell ids are kept as they are, and the random widget model ids are
  replaced by ids derived from the notebook's name and the order of the
  outputs, so an unchanged notebook re-executes to the same file;
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
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


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


def is_widget_only(output):
    """Whether an output is a widget view with no alternative to show
    without a kernel (a progress bar: its text is only a repr)."""
    data = output.get("data", {})
    return WIDGET_VIEW in data and not set(data) - {WIDGET_VIEW,
                                                    "text/plain"}


def tidy_widget_outputs(nb, name):
    """Return ``nb`` without widget-only outputs and with reproducible
    widget model ids.

    The kernel gives every widget a random id. The view of the i-th
    widget output gets the id ``sha256(f"{name}:{i}")[:32]`` instead.
    """
    nb.metadata.pop("widgets", None)
    i = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = [o for o in cell.outputs if not is_widget_only(o)]
        for output in cell.outputs:
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view:
                view["model_id"] = hashlib.sha256(
                    f"{name}:{i}".encode()).hexdigest()[:32]
                i += 1
    return nb


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
        store_widget_state=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nb = tidy_widget_outputs(nb, path.name)
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
