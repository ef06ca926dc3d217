"""Tests of d2lmini.digits: the 8 x 8 digits, their split and batches."""

import sys

import numpy as np
import pytest
import sklearn.datasets
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from d2lmini import digits
from d2lmini.digits import (
    BITMAP_SIZE,
    BLOCK,
    IMAGE_SIZE,
    Digits,
    counts_from_bitmap,
    load_digits,
    stratified_split,
)


@pytest.fixture(scope="module")
def data():
    return Digits()


# load_digits -------------------------------------------------------------

def test_load_digits_gives_counts_and_labels_in_sklearn_order():
    images, labels = load_digits()
    assert images.shape == (1797, 8, 8) and images.dtype == torch.int64
    assert labels.shape == (1797,) and labels.dtype == torch.int64
    assert (images.min().item(), images.max().item()) == (0, 16)
    assert labels.unique().tolist() == list(range(10))
    X, y = sklearn.datasets.load_digits(return_X_y=True)
    assert torch.equal(images.reshape(1797, 64),
                       torch.from_numpy(X.astype(np.int64)))
    assert labels.tolist() == y.tolist()


def test_a_missing_scikit_learn_is_named(monkeypatch):
    # A None entry makes `from sklearn.datasets import ...` fail.
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ModuleNotFoundError,
                       match="pip install scikit-learn") as info:
        load_digits()
    assert isinstance(info.value.__cause__, ImportError)


def _sklearn_returning(monkeypatch, X, y):
    monkeypatch.setattr(sklearn.datasets, "load_digits",
                        lambda return_X_y: (X, y))


@pytest.mark.parametrize("change", ["fewer images", "fewer pixels",
                                    "labels 2-D"])
def test_data_of_another_shape_is_refused(monkeypatch, change):
    X, y = sklearn.datasets.load_digits(return_X_y=True)
    X, y = {"fewer images": (X[:100], y[:100]),
            "fewer pixels": (X[:, :63], y),
            "labels 2-D": (X, y[:, None])}[change]
    _sklearn_returning(monkeypatch, X, y)
    with pytest.raises(RuntimeError, match=r"shape .*not \(1797, 64\)"):
        load_digits()


@pytest.mark.parametrize("change", ["halves", "17", "negative", "nan",
                                    "a class missing"])
def test_data_that_are_not_counts_are_refused(monkeypatch, change):
    X, y = sklearn.datasets.load_digits(return_X_y=True)
    X, y = X.copy(), y.copy()
    if change == "halves":
        X[0, 0] = 0.5
    elif change == "17":
        X[0, 0] = 17
    elif change == "negative":
        X[0, 0] = -1
    elif change == "nan":
        X[0, 0] = np.nan
    else:
        y[y == 9] = 8
    _sklearn_returning(monkeypatch, X, y)
    with pytest.raises(RuntimeError, match="not counts 0..16"):
        load_digits()


# counts_from_bitmap ------------------------------------------------------

def naive_counts(bitmap):
    """Count the set pixels of each 4 x 4 block, one block at a time."""
    counts = torch.zeros(IMAGE_SIZE, IMAGE_SIZE, dtype=torch.int64)
    for i in range(IMAGE_SIZE):
        for j in range(IMAGE_SIZE):
            for r in range(BLOCK * i, BLOCK * (i + 1)):
                for c in range(BLOCK * j, BLOCK * (j + 1)):
                    counts[i, j] += int(bitmap[r][c])
    return counts


@pytest.mark.parametrize("kind", ["bool", "int", "float", "numpy bool",
                                  "numpy uint8", "list"])
def test_counts_equal_a_loop_over_blocks(kind):
    gen = torch.Generator().manual_seed(0)
    for density in (0.1, 0.5, 0.9):
        bits = torch.rand(32, 32, generator=gen) < density
        bitmap = {"bool": bits, "int": bits.long(), "float": bits.float(),
                  "numpy bool": bits.numpy(),
                  "numpy uint8": bits.numpy().astype(np.uint8),
                  "list": bits.tolist()}[kind]
        counts = counts_from_bitmap(bitmap)
        assert counts.dtype == torch.int64 and counts.shape == (8, 8)
        assert torch.equal(counts, naive_counts(bits))


def test_a_block_with_k_set_pixels_counts_k():
    gen = torch.Generator().manual_seed(1)
    k = torch.randint(0, 17, (8, 8), generator=gen)
    k[0, 0], k[0, 1] = 0, 16  # both ends of the scale
    bitmap = torch.zeros(32, 32, dtype=torch.bool)
    for i in range(8):
        for j in range(8):
            where = torch.randperm(16, generator=gen)[:k[i, j]]
            block = torch.zeros(16, dtype=torch.bool)
            block[where] = True
            bitmap[4 * i:4 * i + 4, 4 * j:4 * j + 4] = block.reshape(4, 4)
    assert torch.equal(counts_from_bitmap(bitmap), k)


def test_a_batch_of_bitmaps_counts_each():
    gen = torch.Generator().manual_seed(2)
    bitmaps = torch.rand(2, 3, 32, 32, generator=gen) < 0.4
    counts = counts_from_bitmap(bitmaps)
    assert counts.shape == (2, 3, 8, 8)
    for a in range(2):
        for b in range(3):
            assert torch.equal(counts[a, b], naive_counts(bitmaps[a, b]))
    assert counts_from_bitmap(torch.zeros(0, 32, 32)).shape == (0, 8, 8)


@pytest.mark.parametrize("shape", [(32,), (31, 32), (32, 31), (8, 8),
                                   (32, 32, 3), (64, 64)])
def test_a_bitmap_of_another_shape_is_refused(shape):
    with pytest.raises(ValueError, match=r"\(\.\.\., 32, 32\)") as info:
        counts_from_bitmap(torch.zeros(shape))
    assert f"got {shape}" in str(info.value)


@pytest.mark.parametrize("value", [2, -1, 0.5, float("nan"), 255])
def test_values_other_than_0_and_1_are_refused(value):
    bitmap = torch.zeros(BITMAP_SIZE, BITMAP_SIZE)
    bitmap[3, 5] = value
    with pytest.raises(ValueError, match="only 0 and 1"):
        counts_from_bitmap(bitmap)


def test_a_complex_bitmap_is_refused():
    with pytest.raises(ValueError, match="only 0 and 1"):
        counts_from_bitmap(torch.zeros(32, 32, dtype=torch.complex64))


def test_a_flipped_numpy_bitmap_is_counted():
    bitmap = np.zeros((32, 32), dtype=bool)
    bitmap[:4, :4] = True  # the top-left block, full
    counts = counts_from_bitmap(np.flipud(bitmap))  # now bottom-left
    assert counts[7, 0] == 16 and counts.sum() == 16


# stratified_split --------------------------------------------------------

def test_split_partitions_the_digits_and_keeps_class_shares():
    _, labels = load_digits()
    N = len(labels)
    train, val, test = stratified_split(labels, 180, 360)
    assert (len(train), len(val), len(test)) == (1257, 180, 360)
    everything = torch.cat([train, val, test])
    assert sorted(everything.tolist()) == list(range(N))  # disjoint, all
    for part in (train, val, test):
        assert torch.equal(part, part.sort().values)
    for part in (train, val, test):
        for c in range(10):
            exact = (labels == c).sum().item() * len(part) / N
            assert abs((labels[part] == c).sum().item() - exact) < 1


def test_split_is_fixed_by_its_seed():
    _, labels = load_digits()
    a = stratified_split(labels, 180, 360)
    b = stratified_split(labels, 180, 360)
    c = stratified_split(labels, 180, 360, seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[1], c[1])


@st.composite
def labels_and_sizes(draw):
    counts = draw(st.lists(st.integers(1, 12), min_size=1, max_size=5))
    labels = torch.tensor([c for c, n in enumerate(counts)
                           for _ in range(n)])
    labels = labels[torch.randperm(len(labels),
                                   generator=torch.Generator()
                                   .manual_seed(draw(st.integers(0, 99))))]
    N = len(labels)
    if N < 3:
        labels = torch.cat([labels, labels.new_zeros(3)])
        N += 3
    num_val = draw(st.integers(1, N - 2))
    num_test = draw(st.integers(1, N - 1 - num_val))
    return labels, num_val, num_test


@settings(max_examples=60, deadline=None)
@given(labels_and_sizes())
def test_split_always_partitions_and_fills_val(case):
    labels, num_val, num_test = case
    N = len(labels)
    train, val, test = stratified_split(labels, num_val, num_test)
    assert sorted(torch.cat([train, val, test]).tolist()) == list(range(N))
    assert len(val) == num_val
    for c in labels.unique():
        exact = (labels == c).sum().item() * num_val / N
        assert abs((labels[val] == c).sum().item() - exact) < 1


def test_split_fills_test_when_a_class_is_small():
    labels = torch.tensor([0, 1, 2, 2, 2, 2])
    train, val, test = stratified_split(labels, 3, 2)
    assert (len(train), len(val), len(test)) == (1, 3, 2)


@pytest.mark.parametrize("num_val, num_test", [(900, 897), (1797, 1),
                                               (1000, 1000)])
def test_split_must_leave_training_images(num_val, num_test):
    _, labels = load_digits()
    with pytest.raises(ValueError, match="leaves no training image of "
                       "1797"):
        stratified_split(labels, num_val, num_test)


@pytest.mark.parametrize("num_val, num_test", [(0, 10), (10, True),
                                               (1.5, 10)])
def test_split_sizes_are_counts(num_val, num_test):
    with pytest.raises(ValueError, match="must be an int"):
        stratified_split(torch.arange(100) % 10, num_val, num_test)


# Digits ------------------------------------------------------------------

def test_digits_sizes_and_types(data):
    for name, n in (("train", 1257), ("val", 180), ("test", 360)):
        X, y = getattr(data, name)
        counts, labels = data.counts[name]
        assert X.shape == (n, 1, 8, 8) and X.dtype == torch.float32
        assert y.shape == (n,) and y.dtype == torch.int64
        assert counts.shape == (n, 8, 8) and torch.equal(labels, y)
        torch.testing.assert_close(X, data.normalize(counts))
    assert "train 1257, val 180, test 360" in repr(data)


def test_normalisation_uses_the_training_pixels_only(data):
    train = data.counts["train"][0].double()
    assert data.mean == pytest.approx(train.mean().item(), rel=1e-6)
    assert data.std == pytest.approx(train.std().item(), rel=1e-6)
    everything = torch.cat([data.counts[n][0] for n in
                            ("train", "val", "test")]).double()
    # Were the held-out images used, the numbers would differ this much.
    assert abs(everything.mean().item() - data.mean) > 1e-3
    assert abs(everything.std().item() - data.std) > 1e-3
    X = data.train[0].double()
    assert abs(X.mean().item()) < 1e-5 and abs(X.std().item() - 1) < 1e-5
    expected = (data.counts["test"][0].double() - data.mean) / data.std
    torch.testing.assert_close(data.test[0][:, 0].double(), expected)


def test_held_out_images_do_not_change_the_normalisation(monkeypatch,
                                                         data):
    images, labels = load_digits()
    train, _, _ = stratified_split(labels, 180, 360)
    held_out = torch.ones(len(labels), dtype=torch.bool)
    held_out[train] = False
    images[held_out] = 16  # every validation and test pixel black
    monkeypatch.setattr(digits, "load_digits", lambda: (images, labels))
    changed = Digits()
    assert torch.equal(changed.counts["test"][0], torch.full((360, 8, 8),
                                                             16))
    assert (changed.mean, changed.std) == (data.mean, data.std)


def test_normalize_takes_one_image_or_a_batch(data):
    counts = data.counts["val"][0][:3]
    assert data.normalize(counts[0]).shape == (1, 1, 8, 8)
    torch.testing.assert_close(data.normalize(counts[0].numpy())[0],
                               data.normalize(counts)[0])


@pytest.mark.parametrize("counts", [
    torch.full((8, 8), 17), torch.full((8, 8), -1),
    torch.full((8, 8), float("nan")), torch.full((8, 8), float("inf")),
    torch.zeros(64), torch.zeros(1, 1, 8, 8), torch.zeros(8, 9),
    torch.zeros(8, 8, dtype=torch.complex64)])
def test_normalize_refuses_what_is_not_counts(data, counts):
    with pytest.raises(ValueError, match="counts"):
        data.normalize(counts)


def test_normalize_does_not_change_its_input(data):
    for counts in (torch.full((2, 8, 8), 4.0), torch.full((8, 8), 4),
                   np.full((8, 8), 4.0, dtype=np.float32)):
        before = counts.copy() if isinstance(counts, np.ndarray) \
            else counts.clone()
        X = data.normalize(counts)
        assert (X != 4).all()
        assert (np.array_equal(counts, before)
                if isinstance(counts, np.ndarray)
                else torch.equal(counts, before))


def test_batches_walk_through_fresh_permutations(data):
    X, y = data.train
    per_epoch = 1257 // 100  # 12 full batches, the rest dropped
    batches = list(data.batches(30, 100, torch.Generator().manual_seed(3)))
    assert len(batches) == 30
    assert all(Xb.shape == (100, 1, 8, 8) and yb.shape == (100,)
               for Xb, yb in batches)
    gen = torch.Generator().manual_seed(3)
    orders = [torch.randperm(1257, generator=gen) for _ in range(3)]
    assert not torch.equal(orders[0], orders[1])
    for step, (Xb, yb) in enumerate(batches):
        order = orders[step // per_epoch]
        i = step % per_epoch
        idx = order[i * 100:(i + 1) * 100]
        assert torch.equal(Xb, X[idx]) and torch.equal(yb, y[idx])


def test_batches_are_fixed_by_the_generator(data):
    def draw(seed):
        gen = torch.Generator().manual_seed(seed)
        return torch.cat([yb for _, yb in data.batches(15, 64, gen)])

    assert torch.equal(draw(4), draw(4))
    assert not torch.equal(draw(4), draw(5))


def test_batch_size_may_not_exceed_the_training_images(data):
    gen = torch.Generator().manual_seed(0)
    assert len(list(data.batches(2, 1257, gen))) == 2
    with pytest.raises(ValueError, match="1258 is more than the 1257"):
        next(data.batches(1, 1258, gen))
    with pytest.raises(ValueError, match="num_steps must be"):
        next(data.batches(0, 8, gen))
