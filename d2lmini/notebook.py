"""Helpers for the first cell of a notebook, for showing source code, and
for placing a run among the seeds measured by a benchmark.

The package is the one source of every layer: a notebook shows a layer
with ``show_source(DotProductAttention.forward)`` instead of a copy.
"""

import datetime
import inspect
import json
import math
import platform
import shlex
import sys
import textwrap
from pathlib import Path

import torch
from IPython import get_ipython
from IPython.display import Markdown

from d2lmini import plot
from d2lmini.utils import set_seed

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


def _cpu_model():
    """The CPU's model name, from /proc/cpuinfo where there is one."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(command=None):
    """What a benchmark result must record of the run that made it: the
    command, the date, the CPU, the thread count and the torch build.

    Args:
        command: the command line; defaults to this process's.
    """
    if command is None:
        command = " ".join(["python"] + [shlex.quote(a) for a in sys.argv])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return {"command": command,
            "date": datetime.date.today().isoformat(),
            "cpu": f"{_cpu_model()} ({platform.machine()})",
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "device": device}


def read_result(name):
    """A committed benchmark result, ``benchmarks/results/<name>.json``.

    Raises ``FileNotFoundError`` saying which ``make`` target writes it.
    """
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: it comes with the repository; run `make "
            f"benchmark-{name.replace('_', '-')}` to measure it again")
    return json.loads(path.read_text())


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
    values = [float(v) for v in seed_values]
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError(f"seed_values must be finite numbers, got "
                         f"{seed_values!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"value must be a finite number, got {value!r}")
    low, high = min(values), max(values)
    span = f"{low:{fmt}} to {high:{fmt}}"
    n = len(values)
    if low <= value <= high:
        return (f"{what}: this run's {value:{fmt}} lies within the {n} "
                f"seeds we measured ({span})."), True
    return (f"{what}: this run lies outside the {n} seeds we measured: "
            f"{value:{fmt}}, against {span}."), False


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
