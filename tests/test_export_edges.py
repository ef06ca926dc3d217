"""Edge cases of scripts/export_models.py (issue 39, points 12-14): an
edited manifest is exported again, a symbolic link in ``--dest`` is
refused before anything is written, and a damaged manifest is redone
where the folder is provably the script's own, else refused by name.

Tiny untrained Transformers on test_live's toy corpus stand for the
chapter's models: nothing trains on the real corpus.
"""

import json
import os
import sys

import pytest
from test_live import (  # noqa: F401  (toy: test_live's fixture)
    load_script,
    payload,
    tiny_run,
    tiny_transformer,
    toy,
)

from d2lmini.experiment import evaluate
from d2lmini.live import translator


@pytest.fixture
def export(toy, monkeypatch):  # noqa: F811  (toy: the fixture)
    """The script, the translator payload of a tiny Transformer, and the
    recipes that the (patched) ``train_or_load`` was asked for: a
    notebook (``nb.ipynb``) of the patched table of contents runs it."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # it adds scripts/
    script = load_script("export_models")
    run = tiny_run(toy, "transformer")
    spec = payload(translator(tiny_transformer(), run, "go .",
                              result=evaluate(run.model, run.data)))
    loads = []
    monkeypatch.setattr(
        "d2lmini.cache.train_or_load",
        lambda r, progress, snapshots: loads.append(r) or run)
    monkeypatch.setattr(script, "toc_notebooks", lambda: ["nb.ipynb"])
    monkeypatch.setattr(script, "translators", lambda path: [spec])
    return script, spec, loads


def edit_vocab(m):
    m["tgt_vocab"][-1], m["tgt_vocab"][-2] = m["tgt_vocab"][-2:]


def edit_size(m):
    m["ffn_num_hiddens"] += 1


def edit_layout(m):
    first, second = list(m["tensors"])[:2]
    m["tensors"][first]["offset"], m["tensors"][second]["offset"] = (
        m["tensors"][second]["offset"], m["tensors"][first]["offset"])


def edit_bleu(m):
    m["bleu"] += 10


def edit_whitespace(m):
    return json.dumps(m)  # the same fields, other bytes


@pytest.mark.parametrize("edit", [edit_vocab, edit_size, edit_layout,
                                  edit_bleu, edit_whitespace])
def test_export_models_redoes_an_edited_manifest(export, tmp_path, edit):
    """Point 12: a manifest edited since the export (a vocabulary, a
    size, the tensors' layout, the BLEU, even only its bytes) is not "up
    to date" though its format, fingerprint, notebook record and weights
    are: it is written again, as the script writes it."""
    script, spec, loads = export
    assert script.main(["--dest", str(tmp_path)]) == 0
    path = tmp_path / spec["checkpoint"] / "manifest.json"
    written = path.read_bytes()
    assert "up to date" in script.export(spec, tmp_path)
    assert len(loads) == 1
    manifest = json.loads(written)
    text = edit(manifest) or json.dumps(manifest, indent=1)
    assert text.encode() != written
    path.write_text(text)
    line = script.export(spec, tmp_path)
    assert "up to date" not in line and line.startswith(
        f"{spec['checkpoint']}: exported")
    assert len(loads) == 2
    assert path.read_bytes() == written
    assert "up to date" in script.export(spec, tmp_path)
    assert len(loads) == 2


def test_export_models_redoes_an_export_without_its_digest(export,
                                                           tmp_path):
    """An export of the script before point 12 (no record of the
    manifest it wrote) is written again, once."""
    script, spec, loads = export
    script.export(spec, tmp_path)
    (tmp_path / spec["checkpoint"] / script.DIGEST).unlink()
    assert "up to date" not in script.export(spec, tmp_path)
    assert "up to date" in script.export(spec, tmp_path)
    assert len(loads) == 2


def test_export_models_refuses_a_symbolic_link_in_dest(export, tmp_path):
    """Point 13: a link named like an export (to an export elsewhere),
    or a link inside an export's folder, is refused before anything is
    written or deleted, naming it and saying what to do; what it
    points to is untouched."""
    script, spec, loads = export
    elsewhere = tmp_path / "elsewhere"
    assert script.main(["--dest", str(elsewhere)]) == 0
    before = {p.name: p.read_bytes()
              for p in (elsewhere / spec["checkpoint"]).iterdir()}
    dest = tmp_path / "models"
    dest.mkdir()
    for name in (spec["checkpoint"], "seq2seq-gone-0123"):  # run / not
        link = dest / name
        link.symlink_to(elsewhere / spec["checkpoint"],
                        target_is_directory=True)
        with pytest.raises(SystemExit, match=rf"{link} is a symbolic "
                           r"link \(to .*\).* remove the link"):
            script.main(["--dest", str(dest)])
        assert link.is_symlink()
        assert {p.name: p.read_bytes() for p in link.iterdir()} == before
        link.unlink()
    assert len(loads) == 1
    # A link inside a folder that is otherwise an export.
    assert script.main(["--dest", str(dest)]) == 0
    folder = dest / spec["checkpoint"]
    weights = folder / json.loads(
        (folder / "manifest.json").read_text())["weights"]
    weights.unlink()
    weights.symlink_to(elsewhere / spec["checkpoint"] / weights.name)
    with pytest.raises(SystemExit, match=rf"{weights} is a symbolic link"):
        script.main(["--dest", str(dest)])
    assert weights.is_symlink()
    # The lock file too: the script would open what it points to.
    weights.unlink()
    (dest / script.LOCK).unlink()
    (dest / script.LOCK).symlink_to(elsewhere / script.LOCK)
    with pytest.raises(SystemExit, match=r"\.export\.lock is a symbolic"):
        script.main(["--dest", str(dest)])


def damage(path):
    """Zeros over a file, as a crash can leave a file in some file
    systems."""
    path.write_bytes(b"\0" * path.stat().st_size)


def test_export_models_redoes_a_damaged_manifest_of_its_own(export,
                                                           tmp_path):
    """Point 14: a manifest that is not JSON any more, in a folder that
    holds only an export's files and weights named by their own sha256
    (as the script names them), is exported again; such a folder that no
    notebook runs is deleted like the script's other old exports."""
    script, spec, loads = export
    assert script.main(["--dest", str(tmp_path)]) == 0
    path = tmp_path / spec["checkpoint"] / "manifest.json"
    written = path.read_bytes()
    old = tmp_path / "seq2seq-gone-0123"
    old.mkdir()
    for p in path.parent.iterdir():
        (old / p.name).write_bytes(p.read_bytes())
    for manifest in (path, old / "manifest.json"):
        damage(manifest)
    assert script.main(["--dest", str(tmp_path)]) == 0
    assert len(loads) == 2
    assert path.read_bytes() == written
    assert not old.exists()
    assert "up to date" in script.export(spec, tmp_path)


def test_export_models_names_a_damaged_manifest_it_cannot_redo(export,
                                                             tmp_path):
    """Point 14: a damaged manifest beside no weights named by their own
    sha256 (they are damaged too) cannot be told from another program's
    folder: the script refuses it, naming the damaged file and what to
    do, and changes nothing."""
    script, spec, loads = export
    assert script.main(["--dest", str(tmp_path)]) == 0
    folder = tmp_path / spec["checkpoint"]
    for p in folder.iterdir():
        damage(p)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(SystemExit) as caught:
        script.main(["--dest", str(tmp_path)])
    message = str(caught.value)
    assert f"{folder / 'manifest.json'} is damaged" in message
    assert f"delete {folder}" in message
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert len(loads) == 1
    # Once the folder is deleted, as the message says, it is exported.
    for p in folder.iterdir():
        os.unlink(p)
    folder.rmdir()
    assert script.main(["--dest", str(tmp_path)]) == 0
    assert len(loads) == 2


@pytest.mark.parametrize("field", ["code", "torch", "processes"])
def test_export_models_refuses_a_stale_notebook_before_training(
        export, tmp_path, field):
    """The notebook's model was trained by other code (or torch, or
    number of processes): the export stops before asking for the model,
    not after training it for minutes."""
    script, spec, loads = export
    stale = {**spec, "fingerprint": {**spec["fingerprint"],
                                     field: "something else"}}
    with pytest.raises(SystemExit, match=f"another {field}; run"):
        script.export(stale, tmp_path)
    assert loads == []
