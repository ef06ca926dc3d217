"""Export the models that the website's translators, digit classifier
and text writer run in the page.

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
trained from the same code and seed.  A folder is kept only if its
manifest is the one the script would write now: the bytes it wrote
there (their sha256 is in ``manifest.json.sha256`` beside it) of the
current format, checkpoint, fingerprint and notebook record, and the
weights are the bytes of the sha256 it names; an edited or damaged
manifest, or damaged weights, are exported again.  The script deletes
only its own exports (``seq2seq-*`` folders of a manifest and weights
files) that no notebook runs any more, and refuses a ``--dest`` that
holds anything else, a symbolic link among its exports, or a
``seq2seq-*`` folder whose damaged manifest it cannot prove its own
(none of the weights there is named by its own sha256).  It holds a lock
(``--dest/.export.lock``) while it works: a second export into the same
folder waits for the first.  Two
translator outputs that name one checkpoint with different fingerprints
(or weights) fail: the site serves one model per checkpoint name.

The digit-classifier outputs (``d2lmini.live.digit_classifier``) are
exported the same way: the vision section's ViT, loaded with
``d2lmini.vision.train_or_load`` (about 20 s to train when the cache
does not have it) and written with ``d2lmini.live.export_vit`` (which
scores it on the digits' test split, and records the test accuracy and
sha256 of the weights the notebook evaluated) into
``dest/vision-vit-<key>/``.  So are the text-writer outputs
(``d2lmini.live.text_writer``): the pretraining section's language
model, loaded with ``d2lmini.lm.train_or_load_lm`` (2 to 3 minutes to
train on 2 CPU cores when the cache does not have it) and written with
``d2lmini.live.export_lm`` (which records its validation perplexity,
and the sha256 and perplexity of the weights the notebook evaluated)
into ``dest/lm-french-<key>/``.  What is said above of the
``seq2seq-*`` folders holds for these ``vision-*`` and ``lm-*``
folders too.

Fails when the model it would export is not the one the notebook
evaluated (the code, data or torch changed since the notebook ran): run
``make execute`` first.  Needs the corpus, like the notebooks
(``D2LMINI_DATA_DIR``).
"""

import argparse
import contextlib
import hashlib
import json
import os
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
    return _outputs(notebook, "translator")


def classifiers(notebook):
    """The data of every digit-classifier output of a notebook."""
    return _outputs(notebook, "digit-classifier")


def writers(notebook):
    """The data of every text-writer output of a notebook."""
    return _outputs(notebook, "text-writer")


def _outputs(notebook, kind):
    """The data of every ``kind`` explorer in a notebook's outputs."""
    from d2lmini.live import payloads

    nb = nbformat.read(notebook, as_version=4)
    found = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            text = output.get("data", {}).get("text/html", "")
            if isinstance(text, list):
                text = "".join(text)
            found += payloads(text, kind)
    return found


# The folders this script writes in --dest, by the checkpoint's prefix.
PREFIXES = ("seq2seq-", "vision-", "lm-")


def export(spec, dest):
    """Export one translator's model into ``dest/<checkpoint>/``, unless
    the export there is ``up_to_date``, with the sha256 of the manifest
    written (``DIGEST``); return a line saying what it did."""
    from d2lmini.cache import (
        checkpoint_path,
        code_fingerprint,
        fingerprint,
        train_or_load,
    )
    from d2lmini.experiment import CHAPTER_RECIPE, TRANSFORMER_RECIPE, Recipe
    from d2lmini.live import export_model

    recipe = Recipe(**spec["recipe"])
    name = spec["checkpoint"]
    if checkpoint_path(recipe).stem != name:
        raise SystemExit(f"{name}: its recipe now makes "
                         f"{checkpoint_path(recipe).stem}; run make execute")
    saved = up_to_date(dest / name, spec)
    if saved is not None:
        return f"{name}: up to date ({weights_line(saved)})"
    _same_fingerprint(name, {"recipe": recipe.key(), **_known_before_training(
        code_fingerprint())}, spec["fingerprint"], partial=True)
    if not checkpoint_path(recipe).is_file():
        print(f"{name}: not in the checkpoint cache, training it now "
              "(about 80 s on 2 CPU cores)...", flush=True)
    start = time.perf_counter()
    # The Bahdanau and Transformer sections record their models'
    # training snapshots: a model trained here keeps them too.
    run = train_or_load(recipe, progress=False, snapshots=recipe in (
        CHAPTER_RECIPE, TRANSFORMER_RECIPE))
    current = fingerprint(recipe, run.data)
    _same_fingerprint(name, current, spec["fingerprint"])
    folder = export_model(recipe, run, dest, evaluated=spec)
    saved = record_digest(folder)
    how = "trained and exported" if run.trained else "exported"
    return (f"{name}: {how} in {time.perf_counter() - start:.0f} s "
            f"({saved['weights_bytes'] / 1e6:.1f} MB of weights; "
            f"{weights_line(saved)})")


def record_digest(folder):
    """Write ``DIGEST`` beside the manifest that an export just wrote in
    ``folder``, and return that manifest (a dict).  What up_to_date
    compares the manifest with; written after it, so a crash in between
    leaves an export that is done again."""
    from d2lmini.utils import atomic_write

    raw = (folder / "manifest.json").read_bytes()
    with atomic_write(folder / DIGEST) as f:
        f.write(f"{hashlib.sha256(raw).hexdigest()}  manifest.json\n"
                .encode("ascii"))
    return json.loads(raw)


def _known_before_training(code):
    """The fingerprint's fields that need no trained model and no data:
    compared first, so that a stale notebook stops the export before
    minutes of training (``code``: the fingerprint of the code)."""
    import torch

    from d2lmini.cache import processes, training_device

    return {"code": code, "torch": str(torch.__version__),
            "device": training_device(), "processes": processes()}


def _same_fingerprint(name, current, saved, partial=False):
    """Stop unless the cached model's fingerprint is the one the
    notebook recorded, naming the fields that differ (``partial``: only
    the fields of ``current``)."""
    changed = [k for k in current if current[k] != saved.get(k)]
    if not partial:
        changed += [k for k in saved if k not in current]
    if changed:
        raise SystemExit(
            f"{name}: the notebook evaluated a model trained with another "
            f"{' and '.join(changed)}; run `make execute` so that the page "
            "runs the model the section reports")


def _exported(name, run, start, saved, what):
    """The line that says a model was (trained and) exported."""
    how = "trained and exported" if run.trained else "exported"
    return (f"{name}: {how} in {time.perf_counter() - start:.0f} s "
            f"({saved['weights_bytes'] / 1e6:.2f} MB of weights; {what})")


def export_vision(spec, dest):
    """Export one digit classifier's ViT into ``dest/<checkpoint>/``, as
    ``export`` does a translator's model; return a line saying what it
    did."""
    from d2lmini.live import (
        VIT_MANIFEST_FORMAT,
        export_vit,
        vit_notebook_record,
    )
    from d2lmini.vision import (
        checkpoint_path,
        code_fingerprint,
        fingerprint,
        train_or_load,
    )
    from d2lmini.vit import VisionRecipe

    recipe = VisionRecipe(**spec["recipe"])
    name = spec["checkpoint"]
    if checkpoint_path(recipe).stem != name:
        raise SystemExit(f"{name}: its recipe now makes "
                         f"{checkpoint_path(recipe).stem}; run make execute")
    saved = up_to_date(dest / name, spec, VIT_MANIFEST_FORMAT,
                       vit_notebook_record(spec))
    if saved is not None:
        return f"{name}: up to date ({accuracy_line(saved)})"
    known = _known_before_training(code_fingerprint())
    _same_fingerprint(name, {"recipe": recipe.key(), **known,
                             "device": "cpu"}, spec["fingerprint"],
                      partial=True)
    if not checkpoint_path(recipe).is_file():
        print(f"{name}: not in the checkpoint cache, training it now "
              "(about 20 s on 2 CPU cores)...", flush=True)
    start = time.perf_counter()
    run = train_or_load(recipe)
    current = fingerprint(recipe, run.data)
    _same_fingerprint(name, current, spec["fingerprint"])
    saved = record_digest(export_vit(run, dest, evaluated=spec))
    return _exported(name, run, start, saved, accuracy_line(saved))


def export_language_model(spec, dest):
    """Export one text writer's language model into
    ``dest/<checkpoint>/``, as ``export`` does a translator's model;
    return a line saying what it did."""
    from d2lmini import lm
    from d2lmini.live import (
        LM_MANIFEST_FORMAT,
        export_lm,
        lm_notebook_record,
    )

    recipe = lm.LMRecipe(**spec["recipe"])
    name = spec["checkpoint"]
    made = f"lm-french-{recipe.key()}"  # train_or_load_lm's file name
    if made != name:
        raise SystemExit(f"{name}: its recipe now makes {made}; run make "
                         "execute")
    saved = up_to_date(dest / name, spec, LM_MANIFEST_FORMAT,
                       lm_notebook_record(spec))
    if saved is not None:
        return f"{name}: up to date ({perplexity_line(saved)})"
    _same_fingerprint(name, {"recipe": recipe.key(), **_known_before_training(
        lm.code_fingerprint())}, spec["fingerprint"], partial=True)
    if not (lm._models_dir(None) / f"{name}.pt").is_file():
        print(f"{name}: not in the checkpoint cache, training it now "
              "(2 to 3 minutes on 2 CPU cores)...", flush=True)
    start = time.perf_counter()
    run = lm.train_or_load_lm(recipe)
    current = lm._fingerprint(recipe.key(), run.data)
    _same_fingerprint(name, current, spec["fingerprint"])
    saved = record_digest(export_lm(run, dest, evaluated=spec))
    return _exported(name, run, start, saved, perplexity_line(saved))


def perplexity_line(manifest):
    """What a language model export's manifest says of its weights, in
    words."""
    theirs = (manifest.get("notebook") or {}).get("val_ppl")
    return _against_notebook(
        f"validation perplexity {manifest['val_ppl']:.1f}", manifest,
        None if theirs is None else f"{theirs:.1f}")


def accuracy_line(manifest):
    """What a ViT export's manifest says of its weights, in words."""
    mine = (f"test accuracy {100 * manifest['test_accuracy']:.1f} % on "
            f"{manifest['test_images']} images")
    theirs = (manifest.get("notebook") or {}).get("test_accuracy")
    return _against_notebook(
        mine, manifest, None if theirs is None else f"{100 * theirs:.1f} %")


def _against_notebook(mine, manifest, theirs):
    """``mine`` (the export's score, in words) and whether its weights
    are those the notebook evaluated, which scored ``theirs`` (text, or
    None when the notebook's output does not say)."""
    notebook = manifest.get("notebook") or {}
    if notebook.get("weights_sha256") is None:
        return f"{mine}; the notebook's output does not name its weights"
    if notebook["weights_sha256"] == manifest["weights_sha256"]:
        return f"{mine}: the weights the notebook evaluated"
    scored = "" if theirs is None else f", which scored {theirs}"
    return (f"{mine}: other weights than the notebook's{scored} (the "
            "page says so)")


# Beside an export's manifest.json, the sha256 of the bytes the script
# wrote there, as ``sha256sum`` writes it (``sha256sum -c`` checks it).
DIGEST = "manifest.json.sha256"


def up_to_date(folder, spec, manifest_format=None, notebook=None):
    """The manifest of the export in ``folder`` (a dict) if it is the one
    the script would write now for the translator payload ``spec``, else
    None (no export there, or one to do again).  For a digit classifier's
    export, give its format (``VIT_MANIFEST_FORMAT``) and notebook record
    (``vit_notebook_record(spec)``); the defaults are a translator's.

    Its bytes must be those the script wrote (the sha256 in ``DIGEST``):
    a manifest edited since (a vocabulary, a size, the tensors' layout,
    the BLEU) or damaged is exported again.  They must also be of the
    current ``MANIFEST_FORMAT``, checkpoint, fingerprint and notebook
    record, and the weights file must hold the bytes of the sha256 the
    manifest names.  The rest follows from these: the fingerprint names
    the recipe, data, training code and torch that made the weights, and
    a change of what ``export_model`` writes changes the format."""
    from d2lmini.live import MANIFEST_FORMAT, notebook_record

    try:
        raw = (folder / "manifest.json").read_bytes()
        recorded = (folder / DIGEST).read_text(encoding="ascii").split()
        if recorded[:1] != [hashlib.sha256(raw).hexdigest()]:
            return None
        saved = json.loads(raw)
        have = tuple(saved.get(k) for k in (
            "format", "checkpoint", "fingerprint", "notebook"))
        want = (MANIFEST_FORMAT if manifest_format is None
                else manifest_format, folder.name, spec["fingerprint"],
                notebook_record(spec) if notebook is None else notebook)
        weights = (folder / saved["weights"]).read_bytes()
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if have != want or hashlib.sha256(weights).hexdigest() != saved.get(
            "weights_sha256"):
        return None
    return saved


def _is_weights(path):
    """Whether ``path`` is named like the weights files of an export."""
    return path.name.startswith("weights-") and path.name.endswith(".bin")


def _export_files_only(folder):
    """Whether ``folder`` is a ``seq2seq-*``, ``vision-*`` or ``lm-*``
    folder (not a link) that holds a manifest.json and nothing but the
    files an export holds, each a plain file (not a link): the
    manifest, its ``DIGEST``, weights files and, beside them, the
    temporary files of an interrupted write
    (d2lmini.utils.atomic_write: ".<name>.<random>.part")."""
    if not (folder.is_dir() and not folder.is_symlink()
            and folder.name.startswith(PREFIXES)
            and (folder / "manifest.json").is_file()):
        return False
    return all(p.is_file() and not p.is_symlink() and (
        p.name in ("manifest.json", DIGEST) or _is_weights(p)
        or p.name.startswith(".") and p.name.endswith(".part"))
        for p in folder.iterdir())


def _damaged(manifest):
    """Why ``manifest`` is not JSON (a damaged file: cut short, zeroed
    by a crash), or None if it is JSON."""
    try:
        json.loads(manifest.read_bytes())
    except (OSError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    return None


def _named_by_sha256(folder):
    """Whether a weights file in ``folder`` is named by the sha256 of its
    bytes, as ``export_model`` names them (``weights-<sha256[:16]>.bin``):
    no other program names a file so by chance."""
    return any(p.name == "weights-" + hashlib.sha256(
        p.read_bytes()).hexdigest()[:16] + ".bin"
        for p in folder.iterdir() if _is_weights(p))


def is_export(folder):
    """Whether ``folder`` is one this script wrote: a ``seq2seq-*``,
    ``vision-*`` or ``lm-*`` folder (not a link) that holds nothing but
    a manifest and weights files (``_export_files_only``), whose
    ``manifest.json``
    is an export's (format, weights, fingerprint), or is damaged (not
    JSON) beside weights named by their own sha256
    (``_named_by_sha256``): the script exports such a folder again, or
    deletes it if no notebook runs it.
    A manifest that is JSON but not an export's is another program's."""
    if not _export_files_only(folder):
        return False
    try:
        saved = json.loads((folder / "manifest.json").read_bytes())
    except (OSError, ValueError):  # damaged
        return _named_by_sha256(folder)
    return isinstance(saved, dict) and {"format", "weights",
                                        "fingerprint"} <= saved.keys()


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
    anything is written or deleted there.  A symbolic link in it, or in
    an export's folder, is refused by name (the script would write or
    delete where it points), and so is an export's folder whose
    damaged manifest ``is_export`` cannot prove the script's own: its
    files are kept for whoever knows what they are."""
    if not dest.exists():
        return
    if not dest.is_dir():
        raise SystemExit(f"--dest {dest} is a file: give the models folder "
                         "(assets/models) or a new or empty folder")
    foreign = []
    for p in sorted(dest.iterdir()):
        inside = sorted(p.iterdir()) if p.name.startswith(PREFIXES) and \
            p.is_dir() and not p.is_symlink() else []
        link = next((q for q in [p, *inside] if q.is_symlink()), None)
        if link is not None:
            raise SystemExit(
                f"{link} is a symbolic link (to {os.readlink(link)}): this "
                "script writes and deletes only files it made in --dest, "
                "not what a link points to; remove the link (not what it "
                "points to), or give another --dest")
        if is_export(p) or p.name == LOCK and p.is_file():
            continue
        why = _export_files_only(p) and _damaged(p / "manifest.json")
        if why:
            raise SystemExit(
                f"{p / 'manifest.json'} is damaged ({why}) and no weights "
                "file beside it is named by its own sha256, as this "
                "script names them: it cannot tell that folder from one "
                "it did not write, so it neither exports it again nor "
                f"deletes it; delete {p} if it is an export (the script "
                "writes it again), or move it out of --dest")
        foreign.append(p.name)
    if foreign:
        shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise SystemExit(
            f"--dest {dest} holds what this script did not write ({shown}); "
            "it deletes the exports no notebook runs any more, so it only "
            "writes to the models folder (assets/models) or to a new or "
            "empty folder: give one of those")


def weights_line(manifest):
    """What an export's manifest says of its weights, in words."""
    theirs = (manifest.get("notebook") or {}).get("bleu")
    return _against_notebook(f"held-out BLEU {manifest['bleu']:.1f}",
                             manifest,
                             None if theirs is None else f"{theirs:.1f}")


def collect(found):
    """The translators (or digit classifiers) to export, by checkpoint,
    from ``(notebook, payloads)`` pairs.  Two outputs may name one checkpoint
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
    notebooks = toc_notebooks()
    specs = collect((nb, translators(ROOT / nb)) for nb in notebooks)
    # toc_notebooks lists the notebooks that exist (the tests give it
    # names alone, with translators of their own).
    specs.update(collect((nb, classifiers(ROOT / nb)) for nb in notebooks
                         if (ROOT / nb).is_file()))
    specs.update(collect((nb, writers(ROOT / nb)) for nb in notebooks
                         if (ROOT / nb).is_file()))
    args.dest.mkdir(parents=True, exist_ok=True)
    with export_lock(args.dest):
        check_dest(args.dest)  # again: what was there before the lock
        for name, spec in specs.items():
            how = export_vision if name.startswith("vision-") else \
                export_language_model if name.startswith("lm-") else export
            print(how(spec, args.dest), flush=True)
        # Models no notebook runs any more are not served; only this
        # script's own exports are ever deleted.
        for folder in args.dest.iterdir():
            if folder.name not in specs and is_export(folder):
                shutil.rmtree(folder)
    print(f"{len(specs)} model(s) for the website in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
