"""Tests of d2lmini.utils: seeding, argument checks, atomic writes."""

import os
import random

import numpy as np
import pytest
import torch

from d2lmini.utils import (
    atomic_write,
    check_int,
    check_shape,
    keep_random_state,
    set_seed,
)


def test_check_shape():
    check_shape(torch.ones(2, 3), (2, 3))
    with pytest.raises(ValueError, match=r"expected shape \(2, 4\)"):
        check_shape(torch.ones(2, 3), (2, 4))


def test_set_seed_seeds_every_global_generator():
    draws = []
    for _ in range(2):
        set_seed(7)
        draws.append((torch.rand(3).tolist(), np.random.rand(),
                      random.random()))
    assert draws[0] == draws[1]
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        set_seed(-1)


@pytest.mark.parametrize("value", [0, 1.0, True, "3", None])
def test_check_int_refuses_what_is_not_a_count(value):
    with pytest.raises(ValueError, match=r"n must be an int >= 1, got"):
        check_int("n", value)


def test_check_int_accepts_counts_and_none_when_asked():
    assert check_int("n", 3) == 3
    assert check_int("n", 0, 0) == 0
    assert check_int("n", None, none_ok=True) is None
    with pytest.raises(ValueError, match="or None"):
        check_int("n", -1, 0, none_ok=True)


def test_atomic_write_renames_only_a_complete_file(tmp_path):
    path = tmp_path / "sub" / "out.bin"
    with atomic_write(path) as f:
        f.write(b"abc")
        assert not path.exists()  # not yet visible under its name
    assert path.read_bytes() == b"abc"
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    with pytest.raises(RuntimeError, match="interrupted"):
        with atomic_write(path) as f:
            f.write(b"half")
            raise RuntimeError("interrupted")
    assert path.read_bytes() == b"abc"  # the old file is untouched
    assert os.listdir(path.parent) == ["out.bin"]  # no temporary left


def test_keep_random_state_puts_every_global_generator_back():
    set_seed(3)
    expected = (torch.rand(2).tolist(), random.random(), np.random.rand())
    set_seed(3)
    with keep_random_state("cpu"):
        set_seed(9)  # seeding inside is undone too
        torch.rand(5), random.random(), np.random.rand(4)
    assert (torch.rand(2).tolist(), random.random(),
            np.random.rand()) == expected
