"""Helpers for the first cell of a notebook and for showing source code.

The package is the one source of every layer: a notebook shows a layer
with ``show_source(DotProductAttention.forward)`` instead of a copy.
"""

import inspect
import textwrap

import torch
from IPython import get_ipython
from IPython.display import Markdown

from d2lmini import plot
from d2lmini.utils import set_seed

__all__ = ["setup", "show_source"]


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
