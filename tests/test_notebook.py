"""Tests of d2lmini.notebook: source display and the first-cell setup."""

import inspect
import re

import matplotlib
import pytest
import torch
from IPython.display import Markdown

from d2lmini import plot
from d2lmini.attention import (
    DotProductAttention,
    masked_softmax,
)
from d2lmini.multihead import MultiHeadAttention
from d2lmini.notebook import (
    against_seeds,
    interval_words,
    listed,
    read_result,
    setup,
    show_source,
)

matplotlib.use("Agg")


def fenced_body(markdown):
    """The code inside a fenced block, and the fence itself."""
    text = markdown.data
    fence = text[:text.index("python")]
    assert text.endswith("\n" + fence)
    return text[len(fence) + len("python\n"):-len(fence) - 1], fence


def test_function_source_is_a_fenced_python_block():
    md = show_source(masked_softmax)
    assert isinstance(md, Markdown)
    body, fence = fenced_body(md)
    assert fence == "```"
    assert body == inspect.getsource(masked_softmax).rstrip("\n")
    assert body.startswith("def masked_softmax(X, valid_lens=None, *, "
                           "mask=None):")


def test_class_source():
    body, _ = fenced_body(show_source(DotProductAttention))
    assert body.startswith("class DotProductAttention(nn.Module):")
    assert "def forward(" in body and "def _fused(" in body


def test_method_source_is_dedented():
    body, _ = fenced_body(show_source(MultiHeadAttention.split_heads))
    assert body.startswith("def split_heads(self, X):")
    assert body.splitlines()[1].startswith("    ")  # one level, not two
    assert not body.splitlines()[1].startswith("        ")


class _Example:
    @property
    def size(self):
        """A property: its getter is shown."""
        return 3


def test_property_shows_its_getter():
    body, _ = fenced_body(show_source(_Example.size))
    assert body.startswith("@property\ndef size(self):")


def _with_fence_in_docstring():
    """Example::

        ```python
        x = 1
        ```
    """


def test_backticks_in_the_source_get_a_longer_fence():
    body, fence = fenced_body(show_source(_with_fence_in_docstring))
    assert fence == "````"
    assert "```python" in body


@pytest.mark.parametrize("obj", [len, 3, torch.tensor(1.0)])
def test_objects_without_python_source_raise_type_error(obj):
    with pytest.raises(TypeError, match="cannot show the source"):
        show_source(obj)


@pytest.fixture
def restore_global_state():
    """Undo setup()'s changes to print options and rcParams."""
    with matplotlib.rc_context():
        yield
    torch.set_printoptions(profile="default")


def test_setup_seeds_prints_four_decimals_and_styles(restore_global_state):
    setup(seed=3)
    first = torch.rand(3)
    torch.manual_seed(3)
    assert torch.equal(first, torch.rand(3))
    assert str(torch.tensor([1 / 3])) == "tensor([0.3333])"
    assert str(torch.tensor([1e-6])) == "tensor([0.0000])"  # no 1e-06
    for key, value in plot.STYLE.items():
        assert matplotlib.rcParams[key] == value


def test_setup_outside_ipython_needs_no_kernel(restore_global_state):
    setup()  # no IPython shell here: must not try the inline backend
    assert torch.rand(1).item() == pytest.approx(0.4963, abs=1e-4)


def test_against_seeds_places_a_run_inside_or_outside():
    text, inside = against_seeds("gain", 5.0, [4.8, 6.9, 5.8])
    assert inside and text == ("gain: this run's +5.00 lies within the 3 "
                               "seeds we measured (+4.80 to +6.90).")
    text, inside = against_seeds("gain", 3.9, [4.8, 6.9, 5.8], fmt=".1f")
    assert not inside and text == (
        "gain: this run lies outside the 3 seeds we measured: 3.9, "
        "against 4.8 to 6.9.")
    assert against_seeds("edge", 4.8, [4.8, 6.9])[1]


@pytest.mark.parametrize("value, seeds", [
    (float("nan"), [1.0]), (1.0, []), (1.0, [float("inf")])])
def test_against_seeds_refuses_what_it_cannot_place(value, seeds):
    with pytest.raises(ValueError, match="must be"):
        against_seeds("x", value, seeds)


def test_read_result_reads_committed_results_and_names_the_target():
    seeds = read_result("seeds")
    assert seeds["script"] == "benchmarks/seeds.py" and seeds["seeds"]
    with pytest.raises(FileNotFoundError, match="make benchmark-no-such"):
        read_result("no_such")


def test_interval_words_say_where_zero_is():
    assert interval_words(0.5, 2) == "lies above zero"
    assert interval_words(-2, -0.1) == "lies below zero"
    assert interval_words(-1, 1) == interval_words(0, 1) == "includes zero"
    with pytest.raises(ValueError, match="low <= high"):
        interval_words(2, 1)


def test_listed_joins_items_for_prose():
    assert listed(["3", "4", "8"]) == "3, 4 and 8"
    assert listed([3, 4], last="or") == "3 or 4"
    assert listed(iter(["one"])) == "one" and listed([]) == ""


def test_against_seeds_compares_the_numbers_it_prints():
    """Issue 27, point 12: 1.004 prints as +1.00, inside +0.50 to +1.00."""
    sentence, inside = against_seeds("gain", 1.004, [0.5, 1.0])
    assert inside and "lies within" in sentence, sentence
    sentence, inside = against_seeds("gain", 1.006, [0.5, 1.0])
    assert not inside and "+1.01, against +0.50 to +1.00" in sentence
    assert against_seeds("share", 0.5004, [0.1, 0.5], fmt=".1%")[1]


@pytest.mark.parametrize("value, seeds, words", [
    ("1.5", [1.0, 2.0], "value must hold numbers, got '1.5'"),
    (1.5, 2.0, "seed_values must be a list of numbers"),
    (1.5, "12", "seed_values must be a list of numbers"),
    (1.5, [1.0, "2"], "seed_values must hold numbers, got '2'"),
    (True, [1.0], "value must hold numbers, got True")])
def test_against_seeds_says_what_was_wrong(value, seeds, words):
    with pytest.raises(TypeError, match=re.escape(words)):
        against_seeds("gain", value, seeds)
