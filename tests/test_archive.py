"""The chapter's archive runs where a website reader unpacks it: into a
fresh virtual environment with its pinned requirements and its wheel,
then a core notebook executed from it (not from this checkout)."""

import json
import os
import posixpath
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import build_archive  # noqa: E402
from toc_notebooks import toc_notebooks  # noqa: E402

NOTEBOOK = "chapters/attention-pooling.ipynb"  # a core section, no corpus


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return build_archive.build(tmp_path_factory.mktemp("archive"))


def test_archive_holds_what_its_readme_names(archive):
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
        readme = zf.read("attention-chapter/README.md").decode()
        pins = zf.read("attention-chapter/requirements.txt").decode()
    top = {name.split("/")[0] for name in names}
    assert top == {"attention-chapter"}, f"one folder, not {top}"
    missing = [nb for nb in toc_notebooks(ROOT)
               if f"attention-chapter/{nb}" not in names]
    assert not missing, f"notebooks missing from the archive: {missing}"
    wheels = [n for n in names if n.endswith(".whl")]
    assert len(wheels) == 1 and Path(wheels[0]).name in readme
    assert "attention-chapter/benchmarks/results/seeds.json" in names
    assert "torch==2.13.0" in pins.splitlines()
    assert all("==" in line for line in pins.splitlines())
    assert "jupyter lab chapters/" in readme


def test_the_python_it_names_installs_every_pin(archive):
    """README, archive README and requires-python name one floor, and
    every pinned package's own Requires-Python admits it (f1e0c15 said
    3.10 while numpy 2.4.6 needs 3.11)."""
    from importlib.metadata import metadata

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    floor = build_archive.python_floor()
    with zipfile.ZipFile(archive) as zf:
        readme = zf.read("attention-chapter/README.md").decode()
        pins = zf.read("attention-chapter/requirements.txt").decode()
    assert f"Python {floor} or newer" in readme
    assert f"Python {floor}+" in (ROOT / "README.md").read_text()
    for line in pins.splitlines():
        name, version = line.split("==")
        meta = metadata(name)
        assert Version(meta["Version"]).public == version, name
        needs = SpecifierSet(meta.get("Requires-Python") or "")
        assert needs.contains(f"{floor}.0"), (name, str(needs), floor)
    # torch's CPU build, said and shown
    assert f"--index-url {build_archive.CPU_INDEX}" in readme
    assert "CUDA build" in readme


def test_every_relative_link_in_the_archive_resolves(archive):
    """Each notebook's and Markdown file's relative link (and image)
    names a file of the archive (f1e0c15 left out chapters/index.md,
    which the sections link)."""
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)|src=\"([^\"]+)\"")
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
        dead = []
        for name in sorted(names):
            if name.endswith(".ipynb"):
                cells = json.loads(zf.read(name))["cells"]
                texts = ["".join(c["source"]) for c in cells
                         if c["cell_type"] == "markdown"]
            elif name.endswith(".md"):
                texts = [zf.read(name).decode()]
            else:
                continue
            for text in texts:
                for target in (a or b for a, b in link.findall(text)):
                    if "://" in target or target.startswith("mailto:"):
                        continue
                    path = posixpath.normpath(posixpath.join(
                        posixpath.dirname(name), target))
                    if path not in names:
                        dead.append((name, target))
    assert not dead, dead
    assert "attention-chapter/chapters/index.md" in names


def test_the_wheel_has_the_package_s_one_version(archive):
    import d2lmini

    with zipfile.ZipFile(archive) as zf:
        wheel = next(n for n in zf.namelist() if n.endswith(".whl"))
    assert Path(wheel).name.startswith(f"d2lmini-{d2lmini.__version__}-")


@pytest.mark.slow  # a virtual environment and a pip install: minutes
def test_a_core_notebook_runs_from_the_archive(archive, tmp_path):
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(tmp_path)
    folder = tmp_path / "attention-chapter"
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    wheel = next(folder.glob("d2lmini-*.whl"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                    "-r", "requirements.txt", wheel.name],
                   cwd=folder, env=env, check=True)
    # The package comes from the wheel, and the notebooks find the
    # archive's committed results from their own folder.
    probe = subprocess.run(
        [str(python), "-c",
         "import d2lmini, d2lmini.notebook as n; print(d2lmini.__file__); "
         "print(n.read_result('seeds')['script'])"],
        cwd=folder / "chapters", env=env, check=True, capture_output=True,
        text=True).stdout.splitlines()
    assert Path(probe[0]).is_relative_to(env_dir), probe
    assert probe[1] == "benchmarks/seeds.py"
    # --output names a file beside the notebook, without its extension.
    out = folder / "chapters" / "executed.ipynb"
    subprocess.run([str(env_dir / "bin" / "jupyter"), "execute",
                    Path(NOTEBOOK).name, "--output=executed"],
                   cwd=folder / "chapters", env=env, check=True,
                   capture_output=True, timeout=600)
    cells = json.loads(out.read_text())["cells"]
    errors = [o for c in cells for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    ran = [c for c in cells if c["cell_type"] == "code"
           and c.get("execution_count")]
    assert ran and not errors
