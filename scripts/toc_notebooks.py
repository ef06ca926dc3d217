"""Print the notebooks listed in _toc.yml, in reading order, one a line.

With ``--trains``, only those whose code trains a model (calls
``train_or_load``, ``train_or_load_lm`` or ``finetune_or_load``): the
ones whose outputs another machine changes.
"""

import re
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent


def toc_files(node):
    """Yield every ``file:`` entry of a Jupyter Book 1 table of contents."""
    if isinstance(node, dict):
        if "file" in node:
            yield node["file"]
        for value in node.values():
            yield from toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from toc_files(item)


def toc_notebooks(root=ROOT):
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc.get("root")] + list(toc_files(toc.get("chapters", [])))
    files += list(toc_files(toc.get("parts", [])))
    return [f"{f}.ipynb" for f in files
            if f and (root / f"{f}.ipynb").is_file()]


# The calls that train a model or load it from the cache.
TRAINS = re.compile(r"\btrain_or_load(_lm)?\(|\bfinetune_or_load\(")


def trains(path):
    """Whether a notebook's code calls ``train_or_load`` (or the
    pretraining section's ``train_or_load_lm``/``finetune_or_load``)."""
    nb = nbformat.read(path, as_version=4)
    return any(cell.cell_type == "code" and TRAINS.search(cell.source)
               for cell in nb.cells)


if __name__ == "__main__":
    names = toc_notebooks()
    if sys.argv[1:] == ["--trains"]:
        names = [n for n in names if trains(ROOT / n)]
    elif sys.argv[1:]:
        sys.exit(f"usage: {sys.argv[0]} [--trains]")
    print("\n".join(names))
