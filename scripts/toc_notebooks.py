"""Print the notebooks listed in _toc.yml, in reading order, one a line."""

from pathlib import Path

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


if __name__ == "__main__":
    print("\n".join(toc_notebooks()))
