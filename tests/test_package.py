"""Tests of d2lmini/__init__.py: the d2l-style top-level names."""

import subprocess
import sys

import pytest

import d2lmini


@pytest.mark.parametrize("name", sorted(d2lmini._WHERE))
def test_every_top_level_name_is_its_modules_own(name):
    module = d2lmini.__getattr__(d2lmini._WHERE[name])
    assert getattr(d2lmini, name) is getattr(module, name)
    assert name in module.__all__


def test_d2l_style_use():
    import torch

    import d2lmini as d2l
    weights = d2l.masked_softmax(torch.zeros(1, 2, 3), torch.tensor([2]))
    assert weights[0, 0].tolist() == [0.5, 0.5, 0.0]
    assert "MTFraEng" in dir(d2l) and "attention" in dir(d2l)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'mtfraeng'"):
        d2lmini.mtfraeng  # noqa: B018


@pytest.mark.slow
def test_the_layers_import_no_plotting_library():
    code = ("import sys, d2lmini as d2l; d2l.masked_softmax; "
            "d2l.MultiHeadAttention; d2l.MTFraEng; d2l.Trainer; "
            "print(sorted(m for m in ('matplotlib', 'ipywidgets', "
            "'IPython') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"
