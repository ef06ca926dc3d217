"""Export the models that the website's translators run in the page.

Usage::

    python scripts/export_models.py [--dest assets/models]

Reads every notebook of ``_toc.yml``, finds the translator outputs
(``d2lmini.live.translator``), and for each one loads its recipe's model
with ``train_or_load`` (training it first when the checkpoint cache does
not have it: about 80 s each on 2 CPU cores) and writes it with
``d2lmini.live.export_model`` into ``dest/<checkpoint>/``; Sphinx serves
that folder as ``_static/models/``.  The export scores the weights it
writes on the test split (a few seconds a model) and records the sha256
and BLEU of the weights the notebook evaluated, from its output: the
page says whether it runs those weights or others that this machine
trained from the same code and seed.  A folder that already holds the
same checkpoint, fingerprint and notebook record, and weights of the
sha256 its manifest names, is kept.  The script deletes only its own
exports (``seq2seq-*`` folders of a manifest and weights files) that no
notebook runs any more, and refuses a ``--dest`` that holds anything
else.  It holds a lock (``--dest/.export.lock``) while it works: a second
export into the same folder waits for the first.  Two
translator outputs that name one checkpoint with different fingerprints
(or weights) fail: the site serves one model per checkpoint name.

Fails when the model it would export is not the one the notebook
evaluated (the code, data or torch changed since the notebook ran): run
``make execute`` first.  Needs the corpus, like the notebooks
(``D2LMINI_DATA_DIR``).
"""

import argparse
import contextlib
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from toc_notebooks import toc_notebooks  # noqa: E402


def translators(notebook):
    """The data of every translator output of a notebook."""
    from d2lmini.live import payloads

    nb = nbformat.read(notebook, as_version=4)
    found = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            text = output.get("data", {}).get("text/html", "")
            if isinstance(text, list):
                text = "".join(text)
            found += payloads(text, "translator")
    return found


def export(spec, dest):
    """Export one translator's model; return a line saying what it did."""
    from d2lmini.cache import checkpoint_path, fingerprint, train_or_load
    from d2lmini.experiment import CHAPTER_RECIPE, TRANSFORMER_RECIPE, Recipe
    from d2lmini.live import MANIFEST_FORMAT, export_model, notebook_record

    recipe = Recipe(**spec["recipe"])
    name = spec["checkpoint"]
    if checkpoint_path(recipe).stem != name:
        raise SystemExit(f"{name}: its recipe now makes "
                         f"{checkpoint_path(recipe).stem}; run make execute")
    manifest = dest / name / "manifest.json"
    if manifest.is_file():
        saved = json.loads(manifest.read_text())
        weights = dest / name / str(saved.get("weights"))
        have = (saved.get("format"), saved.get("fingerprint"),
                saved.get("notebook"))
        want = (MANIFEST_FORMAT, spec["fingerprint"], notebook_record(spec))
        # Up to date only if the weights are the bytes the manifest names:
        # a damaged file is exported again, not kept for ever.
        if weights.is_file() and have == want and hashlib.sha256(
                weights.read_bytes()).hexdigest() == saved.get(
                    "weights_sha256"):
            return f"{name}: up to date ({weights_line(saved)})"
    if not checkpoint_path(recipe).is_file():
        print(f"{name}: not in the checkpoint cache, training it now "
              "(about 80 s on 2 CPU cores)...", flush=True)
    start = time.perf_counter()
    # The Bahdanau and Transformer sections record their models'
    # training snapshots: a model trained here keeps them too.
    run = train_or_load(recipe, progress=False, snapshots=recipe in (
        CHAPTER_RECIPE, TRANSFORMER_RECIPE))
    current = fingerprint(recipe, run.data)
    if current != spec["fingerprint"]:
        saved = spec["fingerprint"]
        changed = [k for k in current if current[k] != saved.get(k)]
        raise SystemExit(
            f"{name}: the notebook evaluated a model trained with another "
            f"{' and '.join(changed)}; run `make execute` so that the page "
            "runs the model the section reports")
    folder = export_model(recipe, run, dest, evaluated=spec)
    saved = json.loads((folder / "manifest.json").read_text())
    how = "trained and exported" if run.trained else "exported"
    return (f"{name}: {how} in {time.perf_counter() - start:.0f} s "
            f"({saved['weights_bytes'] / 1e6:.1f} MB of weights; "
            f"{weights_line(saved)})")


def is_export(folder):
    """Whether ``folder`` is one this script wrote: a ``seq2seq-*`` folder
    whose ``manifest.json`` is an export's (format, weights, fingerprint)
    and which holds nothing but that manifest and weights files."""
    manifest = folder / "manifest.json"
    if not (folder.is_dir() and folder.name.startswith("seq2seq-")
            and manifest.is_file()):
        return False
    try:
        saved = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(saved, dict) or not {"format", "weights",
                                           "fingerprint"} <= saved.keys():
        return False
    # Beside them, the temporary files of an interrupted write
    # (d2lmini.utils.atomic_write: ".<name>.<random>.part").
    return all(p.name == "manifest.json" or p.is_file() and (
        p.name.startswith("weights-") and p.name.endswith(".bin")
        or p.name.startswith(".") and p.name.endswith(".part"))
        for p in folder.iterdir())


# The lock file export_lock keeps in --dest (check_dest accepts it).
LOCK = ".export.lock"


@contextlib.contextmanager
def export_lock(dest, wait=True):
    """Hold ``dest / LOCK`` exclusively (``fcntl.flock``; on Windows
    ``msvcrt.locking``) while the block runs: two exports into one folder
    would otherwise delete each other's weights.  A second holder waits
    (saying so once), or raises ``BlockingIOError`` if ``wait`` is
    False.  The lock goes with the process, even if it is killed."""
    with open(dest / LOCK, "a+b") as f:
        try:
            import fcntl
        except ImportError:  # Windows
            import msvcrt

            def take(block):
                f.seek(0)  # msvcrt locks bytes from the position
                mode = msvcrt.LK_LOCK if block else msvcrt.LK_NBLCK
                msvcrt.locking(f.fileno(), mode, 1)
        else:
            def take(block):
                flags = fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB)
                fcntl.flock(f.fileno(), flags)
        try:
            take(False)
        except OSError:
            if not wait:
                raise BlockingIOError(
                    f"another export holds {dest / LOCK}") from None
            print(f"waiting for another export into {dest} to finish "
                  f"(it holds {dest / LOCK})...", flush=True)
            take(True)
        yield  # closing the file releases the lock


def check_dest(dest):
    """Refuse a destination that holds anything but this script's exports
    (the default ``assets/models`` or a new or empty folder), before
    anything is written or deleted there."""
    if not dest.exists():
        return
    if not dest.is_dir():
        raise SystemExit(f"--dest {dest} is a file: give the models folder "
                         "(assets/models) or a new or empty folder")
    foreign = sorted(p.name for p in dest.iterdir()
                     if not (is_export(p) or p.name == LOCK and p.is_file()))
    if foreign:
        shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise SystemExit(
            f"--dest {dest} holds what this script did not write ({shown}); "
            "it deletes the exports no notebook runs any more, so it only "
            "writes to the models folder (assets/models) or to a new or "
            "empty folder: give one of those")


def weights_line(manifest):
    """What an export's manifest says of its weights, in words."""
    mine = f"held-out BLEU {manifest['bleu']:.1f}"
    notebook = manifest.get("notebook") or {}
    if notebook.get("weights_sha256") is None:
        return f"{mine}; the notebook's output does not name its weights"
    if notebook["weights_sha256"] == manifest["weights_sha256"]:
        return f"{mine}: the weights the notebook evaluated"
    theirs = "" if notebook.get("bleu") is None else \
        f", which scored {notebook['bleu']:.1f}"
    return (f"{mine}: other weights than the notebook's{theirs} (the "
            "page says so)")


def collect(found):
    """The translators to export, by checkpoint, from ``(notebook,
    translator payloads)`` pairs.  Two outputs may name one checkpoint
    only for one model: another fingerprint or other weights would leave
    one page running the other's model, so that fails."""
    specs, where = {}, {}
    for notebook, payloads in found:
        for spec in payloads:
            name = spec["checkpoint"]
            if name in specs:
                before = specs[name]
                other = [k for k in ("fingerprint", "weights_sha256")
                         if before.get(k) != spec.get(k)]
                if other:
                    raise SystemExit(
                        f"{name}: {where[name]} and {notebook} evaluated "
                        f"models with another {' and '.join(other)} under "
                        "this one checkpoint name (one recipe), and the "
                        "site serves one model per name: one of them ran "
                        "older code; run `make execute`")
                continue
            specs[name], where[name] = spec, notebook
    return specs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dest", type=Path,
                        default=ROOT / "assets" / "models")
    args = parser.parse_args(argv)
    check_dest(args.dest)
    specs = collect((nb, translators(ROOT / nb)) for nb in toc_notebooks())
    args.dest.mkdir(parents=True, exist_ok=True)
    with export_lock(args.dest):
        check_dest(args.dest)  # again: what was there before the lock
        for spec in specs.values():
            print(export(spec, args.dest), flush=True)
        # Models no notebook runs any more are not served; only this
        # script's own exports are ever deleted.
        for folder in args.dest.iterdir():
            if folder.name not in specs and is_export(folder):
                shutil.rmtree(folder)
    print(f"{len(specs)} model(s) for the website in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
