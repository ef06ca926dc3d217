"""The vision section's data: handwritten digits of 8 x 8 pixels.

scikit-learn ships them inside its wheel (``sklearn.datasets.
load_digits``), so nothing is downloaded: 1,797 images of the digits 0
to 9, the test part of UCI's "optdigits", written by 13 people.  The
data do not say who wrote which digit, so no split can keep writers
apart: a test image is a new image, not a new hand.  Each was a
32 x 32 black-and-white bitmap; NIST's preprocessing counted the set
pixels in each 4 x 4 block, which gives 8 x 8 pixels of 17 grey levels
(0 to 16).  ``counts_from_bitmap`` does exactly that, so a digit drawn
on a 32 x 32 grid becomes an input like the others.

``Digits`` splits the images once, by a fixed seed and stratified by
class, into 1,257 training, 180 validation and 360 test images, and
normalises them with the mean and standard deviation of the training
pixels alone.

Shape legend: N images, B batch, H = W = 8 pixels (32 for a bitmap).
"""

import numpy as np
import torch

from .utils import check_int

__all__ = ["BITMAP_SIZE", "BLOCK", "Digits", "IMAGE_SIZE", "LEVELS",
           "counts_from_bitmap", "load_digits", "stratified_split"]

IMAGE_SIZE = 8  # pixels per side of an image
BLOCK = 4  # a pixel counts the set pixels of a BLOCK x BLOCK block
BITMAP_SIZE = IMAGE_SIZE * BLOCK  # 32: the bitmap the digits were drawn on
LEVELS = BLOCK * BLOCK + 1  # 17 grey levels, 0..16
NUM_IMAGES = 1797
NUM_CLASSES = 10
SPLIT_SEED = 0  # the split never changes with a model's seed
NUM_VAL, NUM_TEST = 180, 360


def load_digits():
    """All 1,797 images as counts ``(N, 8, 8)`` int64 in 0..16 and their
    labels ``(N,)`` int64 in 0..9, in scikit-learn's order."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as error:
        raise ModuleNotFoundError(
            "the digits ship with scikit-learn, which is not installed: "
            "run `pip install scikit-learn` (requirements.txt pins its "
            "version)") from error
    X, y = sklearn_digits(return_X_y=True)
    if X.shape != (NUM_IMAGES, IMAGE_SIZE * IMAGE_SIZE) or \
            y.shape != (NUM_IMAGES,):
        raise RuntimeError(
            f"scikit-learn's digits have shape {X.shape} and labels "
            f"{y.shape}, not ({NUM_IMAGES}, 64) and ({NUM_IMAGES},): "
            "install the version that requirements.txt pins")
    if not (np.all(X == np.round(X)) and X.min() >= 0
            and X.max() <= LEVELS - 1 and set(np.unique(y)) ==
            set(range(NUM_CLASSES))):
        raise RuntimeError(
            "scikit-learn's digits are not counts 0..16 with labels "
            "0..9: install the version that requirements.txt pins")
    images = torch.from_numpy(X.astype(np.int64)).reshape(
        NUM_IMAGES, IMAGE_SIZE, IMAGE_SIZE)
    return images, torch.from_numpy(y.astype(np.int64))


def counts_from_bitmap(bitmap):
    """A ``(..., 32, 32)`` bitmap of 0s and 1s (bool or numbers) as the
    digits were made: ``(..., 8, 8)`` int64 counts of set pixels per
    4 x 4 block, 0..16."""
    if not torch.is_tensor(bitmap):  # a copy when strides are negative
        bitmap = torch.as_tensor(np.ascontiguousarray(bitmap))
    if bitmap.dim() < 2 or tuple(bitmap.shape[-2:]) != (BITMAP_SIZE,
                                                         BITMAP_SIZE):
        raise ValueError(f"a bitmap is (..., {BITMAP_SIZE}, "
                         f"{BITMAP_SIZE}), got {tuple(bitmap.shape)}")
    if bitmap.is_complex() or not bool(((bitmap == 0) | (bitmap == 1))
                                       .all()):
        raise ValueError("a bitmap holds only 0 and 1 (or False and "
                         "True): threshold a grey image first")
    b = bitmap.to(torch.int64)
    blocks = b.reshape(*b.shape[:-2], IMAGE_SIZE, BLOCK, IMAGE_SIZE, BLOCK)
    return blocks.sum(dim=(-3, -1))


def stratified_split(labels, num_val, num_test, seed=SPLIT_SEED):
    """Indices ``(train, val, test)`` that keep each class's share: every
    class gives round(its count * n / N) images to val and test (the
    remainder, up to n, from the classes with the largest fractions);
    the rest train.  Each part is sorted."""
    labels = torch.as_tensor(labels)
    N = labels.numel()
    check_int("num_val", num_val)
    check_int("num_test", num_test)
    if num_val + num_test >= N:
        raise ValueError(f"num_val + num_test = {num_val + num_test} "
                         f"leaves no training image of {N}")
    gen = torch.Generator().manual_seed(seed)
    classes = sorted(set(labels.tolist()))
    members = {c: (labels == c).nonzero().flatten() for c in classes}
    members = {c: m[torch.randperm(len(m), generator=gen)]
               for c, m in members.items()}
    parts = []
    taken = {c: 0 for c in classes}
    for n in (num_val, num_test):
        exact = {c: len(members[c]) * n / N for c in classes}
        left = {c: len(members[c]) - taken[c] for c in classes}
        share = {c: min(int(exact[c]), left[c]) for c in classes}
        # The rest, one image each, to the classes with the largest
        # fractions that still have images (round and round if needed).
        by_fraction = sorted(classes, key=lambda c: (-(exact[c] % 1), c))
        while sum(share.values()) < n:
            for c in by_fraction:
                if sum(share.values()) < n and share[c] < left[c]:
                    share[c] += 1
        part = torch.cat([members[c][taken[c]:taken[c] + share[c]]
                          for c in classes])
        for c in classes:
            taken[c] += share[c]
        parts.append(part)
    train = torch.cat([members[c][taken[c]:] for c in classes])
    return tuple(p.sort().values for p in (train, *parts))


class _Epochs:
    def __init__(self, X, y, batch_size, generator):
        check_int("batch_size", batch_size)
        if batch_size > len(y):
            raise ValueError(f"batch_size {batch_size} is more than the "
                             f"{len(y)} training images")
        self.X, self.y, self.batch_size = X, y, batch_size
        self.generator = generator

    def __len__(self):
        return len(self.y) // self.batch_size

    def __iter__(self):
        order = torch.randperm(len(self.y), generator=self.generator)
        b = self.batch_size
        for i in range(len(self)):
            j = order[i * b:(i + 1) * b]
            yield self.X[j], self.y[j]

    def train_dataloader(self):
        return self


class Digits:
    """The digits, split and normalised; batches for training.

    ``train``, ``val`` and ``test`` are ``(X, y)``: ``X`` (N, 1, 8, 8)
    float32, normalised as ``(counts - mean) / std`` with the training
    pixels' ``mean`` and ``std``; ``y`` (N,) int64.  ``counts`` holds the
    raw ``(X, y)`` counts of each split by name.  ``batches(num_steps,
    batch_size, generator)`` yields training batches, reshuffled each
    epoch by ``generator``.
    """

    def __init__(self):
        images, labels = load_digits()
        idx = stratified_split(labels, NUM_VAL, NUM_TEST)
        self.counts = {name: (images[i], labels[i])
                       for name, i in zip(("train", "val", "test"), idx)}
        train = self.counts["train"][0].to(torch.float32)
        self.mean = train.mean().item()
        self.std = train.std().item()
        self.train, self.val, self.test = (
            (self.normalize(self.counts[name][0]), self.counts[name][1])
            for name in ("train", "val", "test"))

    def normalize(self, counts):
        """``(..., 8, 8)`` counts 0..16 -> ``(B, 1, 8, 8)`` model inputs
        (one image gives B = 1)."""
        counts = torch.as_tensor(counts)
        if counts.dim() not in (2, 3) or tuple(counts.shape[-2:]) != (
                IMAGE_SIZE, IMAGE_SIZE):
            raise ValueError(f"counts are (8, 8) or (B, 8, 8), got "
                             f"{tuple(counts.shape)}")
        if counts.is_complex() or counts.is_floating_point() and not bool(
                torch.isfinite(counts).all()):
            raise ValueError("counts must be finite real numbers")
        if bool((counts < 0).any() | (counts > LEVELS - 1).any()):
            raise ValueError(f"counts lie in 0..{LEVELS - 1}, got values "
                             f"from {counts.min().item()} to "
                             f"{counts.max().item()}")
        X = (counts.to(torch.float32) - self.mean) / self.std
        return X.reshape(-1, 1, IMAGE_SIZE, IMAGE_SIZE)

    def batches(self, num_steps, batch_size, generator):
        """``num_steps`` training batches ``(X, y)`` of ``batch_size``,
        each epoch a new permutation drawn from ``generator`` (the last
        partial batch of an epoch is dropped)."""
        check_int("num_steps", num_steps)
        loader = self.loader(batch_size, generator)
        step = 0
        while step < num_steps:
            for batch in loader:
                yield batch
                step += 1
                if step == num_steps:
                    return

    def loader(self, batch_size, generator):
        """The training batches as ``d2lmini.Trainer`` reads them: an
        epoch per iteration (``len`` batches of ``batch_size``, a new
        permutation from ``generator`` each time, the last partial
        batch dropped); its ``train_dataloader()`` is itself."""
        return _Epochs(*self.train, batch_size, generator)

    def __repr__(self):
        sizes = ", ".join(f"{name} {len(self.counts[name][1])}"
                          for name in ("train", "val", "test"))
        return (f"Digits({sizes}; 8 x 8 counts 0..16, normalised with "
                f"mean {self.mean:.3f}, std {self.std:.3f})")
