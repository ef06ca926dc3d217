"""Pack the chapter as one archive that a reader of the website can run.

The archive (a zip, linked from the opener) holds:
  chapters/            every notebook of _toc.yml, with its outputs, the
                       figures they show (chapters/img/) and the opener
                       (index.md), whose legend they link
  benchmarks/results/  the committed results the notebooks quote
  d2lmini-*.whl        the package, built from this checkout
  requirements.txt     the pinned versions a reader installs
  README.md            three commands: venv, pip install, jupyter lab

usage: build_archive.py [--dest FOLDER]   (default: assets/archive/, which
the book serves as _static/archive/; git-ignored)
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from toc_notebooks import toc_notebooks  # noqa: E402

NAME = "attention-chapter"
# What a reader needs to run the notebooks, pinned as requirements.txt
# pins them for the project (the book and test tools left out).
READER_PACKAGES = ("torch", "numpy", "matplotlib", "ipywidgets",
                   "ipykernel", "tqdm", "sacrebleu", "scikit-learn",
                   "jupyterlab")

README = """\
# Attention Mechanisms: the chapter's notebooks

The notebooks of the chapter (`chapters/`), the lab and the solutions,
with the outputs the website shows, and `d2lmini`, the package they
import, as a wheel.  Python {python} or newer (the pinned numpy,
matplotlib and scikit-learn need it); no GPU needed.

```bash
python3 -m venv .venv
.venv/bin/pip install torch=={torch} --index-url {cpu_index}
.venv/bin/pip install -r requirements.txt {wheel}
.venv/bin/jupyter lab chapters/
```

The first `pip install` takes torch's CPU build; without it, pip's
default torch on Linux is the CUDA build, several GB, which runs the
notebooks as well (on a GPU if there is one).

(On Windows: `.venv\\Scripts\\pip` and `.venv\\Scripts\\jupyter`.)
Open `chapters/attention-pooling.ipynb` and run all cells.  The
sections that train download the English-French corpus (Tatoeba, via
manythings.org, CC-BY 2.0) on first use into a per-user cache, or read
it from the folder in `D2LMINI_DATA_DIR`; a trained model is cached too,
so a second run loads it in seconds.  `benchmarks/results/` holds the
measurements that the notebooks quote (read, not re-run).
"""


# Where PyTorch publishes its CPU-only wheels.
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def python_floor():
    """The oldest Python the package states (``requires-python``)."""
    import tomllib

    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "project"]["requires-python"]
    if not spec.startswith(">="):
        sys.exit(f"requires-python should be '>=X.Y', got {spec!r}")
    return spec[2:]


def reader_requirements():
    """The lines of requirements.txt that pin READER_PACKAGES."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name = line.split("==")[0].strip().lower()
            pins[name] = line
    missing = [p for p in READER_PACKAGES if p not in pins]
    if missing:
        sys.exit(f"requirements.txt pins no version of {missing}")
    return "\n".join(pins[p] for p in READER_PACKAGES) + "\n"


def build_wheel(folder):
    """Build d2lmini's wheel into ``folder``; return its path.  It is
    built from a copy of the package's files, so that setuptools leaves
    no build/ folder in the checkout."""
    source = Path(folder) / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "d2lmini", source / "d2lmini",
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet",
                    "--no-deps", "--no-build-isolation", "-w", str(folder),
                    str(source)], check=True)
    wheels = sorted(Path(folder).glob("d2lmini-*.whl"))
    if len(wheels) != 1:
        sys.exit(f"expected one d2lmini wheel in {folder}, got {wheels}")
    return wheels[0]


def build(dest):
    """Write ``dest/attention-chapter.zip``; return its path."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(tmp)
        files = {f"{NAME}/{nb}": ROOT / nb for nb in toc_notebooks(ROOT)}
        for folder in ("chapters/img", "benchmarks/results"):
            for path in sorted((ROOT / folder).iterdir()):
                if path.is_file():
                    files[f"{NAME}/{folder}/{path.name}"] = path
        files[f"{NAME}/{wheel.name}"] = wheel
        partial = dest / f".{NAME}.zip.partial"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for arcname, path in sorted(files.items()):
                zf.write(path, arcname)
            # The opener too (the sections link its legend), its link to
            # the archive pointed at the archive's README instead.
            zf.writestr(f"{NAME}/chapters/index.md", (
                ROOT / "chapters" / "index.md").read_text().replace(
                    f"../assets/archive/{NAME}.zip", "../README.md"))
            zf.writestr(f"{NAME}/requirements.txt", reader_requirements())
            torch_pin = next(line for line in reader_requirements()
                             .splitlines() if line.startswith("torch=="))
            zf.writestr(f"{NAME}/README.md", README.format(
                wheel=wheel.name, python=python_floor(),
                torch=torch_pin.split("==")[1], cpu_index=CPU_INDEX))
        target = dest / f"{NAME}.zip"
        shutil.move(partial, target)  # a reader never gets half a file
    return target


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", default=str(ROOT / "assets" / "archive"))
    path = build(parser.parse_args().dest)
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
          f": {path.stat().st_size / 1e6:.1f} MB")
