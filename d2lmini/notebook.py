"""Helpers for the first cell of a notebook, for showing source code, for
reading committed results and for placing a run among the seeds
measured by a benchmark.

The package is the one source of every layer: a notebook shows a layer
with ``show_source(DotProductAttention.forward)`` instead of a copy.
"""

import inspect
import json
import math
import numbers
import textwrap
from collections.abc import Iterable
from pathlib import Path

import torch
from IPython import get_ipython
from IPython.display import Markdown

from d2lmini import plot
from d2lmini.utils import machine, set_seed

__all__ = ["against_seeds", "interval_words", "listed", "machine",
           "read_result", "setup", "show_source"]

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def show_source(obj):
    """The source of a function, class or method as a Markdown code block.

    Args:
        obj: anything ``inspect.getsource`` accepts, e.g. ``masked_softmax``,
            ``DotProductAttention`` or ``MultiHeadAttention.split_heads``.

    Returns:
        ``IPython.display.Markdown`` of a fenced ``python`` block, dedented
        (a method starts at column 0); a notebook renders it highlighted.
    """
    if isinstance(obj, property):
        obj = obj.fget
    try:
        source = inspect.getsource(obj)
    except (TypeError, OSError) as err:
        raise TypeError(
            f"cannot show the source of {obj!r}: pass a function, class or "
            "method defined in a .py file") from err
    source = textwrap.dedent(source).rstrip("\n")
    fence = "```"
    while fence in source:  # a fence inside a docstring must not end ours
        fence += "`"
    return Markdown(f"{fence}python\n{source}\n{fence}")


# Sentences that depend on the run
# -----------------------------------
# A notebook is read in three places: the website, a reader's own Jupyter
# (JupyterLab, Notebook, VS Code, Colab) and CI.  Jupyter front ends render
# no MyST role, and VS Code and Colab show every cell's source whatever its
# tags.  So a Markdown cell holds only what is true of every run, and a
# number or a word of the run (higher, includes zero) is printed by the
# cell that computed it, worded by ``d2lmini.report``.  tests/test_notebooks
# .py checks that no notebook glues values into prose.


def setup(seed=0):
    """The first cell of every notebook: seed, print options, plot style.

    Seeds Python, NumPy and PyTorch, prints tensors with 4 decimals
    (outputs that nbval compares stay short and stable), applies
    ``plot.set_style()`` and, inside IPython, makes inline figures PNG.
    Under ``D2LMINI_SEED_OFFSET`` it says so: the trained models then
    differ from the ones the text was written from.

    Args:
        seed: the seed of every random generator.
    """
    from d2lmini.experiment import SEED_OFFSET_VARIABLE, seed_offset
    if seed_offset():
        print(f"{SEED_OFFSET_VARIABLE}={seed_offset()}: every model trains "
              f"from its seed + {seed_offset()}, as another machine would")
    set_seed(seed)
    torch.set_printoptions(precision=4, sci_mode=False)
    plot.set_style()
    shell = get_ipython()
    if shell is not None and hasattr(shell, "kernel"):
        from matplotlib_inline.backend_inline import set_matplotlib_formats
        set_matplotlib_formats("png")


def _results_dirs():
    """Where committed results may be: the repository's
    ``benchmarks/results`` (an editable install), then that folder in
    the working directory or a parent (the chapter's archive, where
    ``d2lmini`` is an installed wheel and the notebooks sit in
    ``chapters/``)."""
    yield RESULTS
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        yield folder / "benchmarks" / "results"


def read_result(name):
    """A committed benchmark result, ``benchmarks/results/<name>.json``.

    Raises ``FileNotFoundError`` saying which ``make`` target writes it.
    """
    for folder in _results_dirs():
        path = folder / f"{name}.json"
        if path.is_file():
            return json.loads(path.read_text())
    raise FileNotFoundError(
        f"{RESULTS / f'{name}.json'} is missing: it comes with the "
        f"repository (and with the chapter's archive, beside chapters/); "
        f"run `make benchmark-{name.replace('_', '-')}` to measure it "
        f"again")


def against_seeds(what, value, seed_values, fmt="+.2f"):
    """Say where this run's ``value`` lies among a benchmark's seeds.

    Training is not bit-reproducible across machines, so a notebook does
    not expect its run to equal a committed result: it places the run
    in the range the seeds spanned, and says so plainly when the run
    falls outside (a finding about this machine, not an error).

    Args:
        what: what the number is, e.g. ``"additive - none, equal steps"``.
        value: this run's number.
        seed_values: the same number for each seed of the benchmark.
        fmt: the format of the numbers in the sentence.

    Returns:
        ``(sentence, inside)``: the sentence to print, and whether the
        value lies within [min, max] of the seeds.
    """
    if isinstance(seed_values, (str, bytes)) or not isinstance(
            seed_values, Iterable):
        raise TypeError(f"seed_values must be a list of numbers, one per "
                        f"seed, got {seed_values!r}")
    seed_values = list(seed_values)
    for name, x in [("value", value)] + [("seed_values", v)
                                          for v in seed_values]:
        if isinstance(x, bool) or not isinstance(x, (numbers.Real,
                                                     torch.Tensor)):
            raise TypeError(f"{name} must hold numbers, got {x!r} "
                            f"({type(x).__name__})")
    values = [float(v) for v in seed_values]
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError(f"seed_values must be finite numbers, got "
                         f"{seed_values!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"value must be a finite number, got {value!r}")
    low, high = min(values), max(values)
    span = f"{low:{fmt}} to {high:{fmt}}"
    n = len(values)
    # Compare the numbers as the sentence prints them: 1.004 printed as
    # +1.00 does not lie outside a range printed as +0.50 to +1.00.
    if _as_printed(low, fmt) <= _as_printed(value, fmt) \
            <= _as_printed(high, fmt):
        return (f"{what}: this run's {value:{fmt}} lies within the {n} "
                f"seeds we measured ({span})."), True
    return (f"{what}: this run lies outside the {n} seeds we measured: "
            f"{value:{fmt}}, against {span}."), False


def _as_printed(x, fmt):
    """``x`` rounded as ``format(x, fmt)`` prints it (x itself when the
    printed text is not a plain number)."""
    text = format(x, fmt).replace(",", "")
    scale = 100.0 if text.endswith("%") else 1.0
    try:
        return float(text.rstrip("%")) / scale
    except ValueError:
        return x


def interval_words(low, high):
    """Where an interval lies with respect to zero, in words for prose:
    ``'lies above zero'``, ``'lies below zero'`` or ``'includes zero'``."""
    low, high = float(low), float(high)
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"expected finite low <= high, got [{low}, {high}]")
    if low > 0:
        return "lies above zero"
    return "lies below zero" if high < 0 else "includes zero"


def listed(items, last="and"):
    """Items joined for prose: ``['3', '4', '8']`` -> ``'3, 4 and 8'``;
    one item alone; ``''`` for none.  Items are turned into strings."""
    items = [str(item) for item in items]
    if len(items) < 2:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]
