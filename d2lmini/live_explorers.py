"""The figure explorers of ``d2lmini.live``: their data, checked.

Each function returns a ``LiveHTML`` whose script computes and draws the
figure in the page (``d2lmini/js/explorers.js``) and redraws it when a
control moves:

- ``masked_softmax_explorer``: valid length and temperature sliders over
  the masked softmax weights;
- ``scaling_explorer``: a slider for d over the scores of random queries
  and keys (``sample_scores``) and each query's largest softmax weight;
- ``kernel_regression_explorer``: Nadaraya-Watson attention pooling, with
  the kernel's width and type and a marked query;
- ``positional_encoding_explorer``: the Transformer's sinusoidal
  positions P as a heatmap and as curves, with sliders for a position
  and a frequency.

Shape legend: L queries (sampled ones in the scaling explorer), S keys,
D features.
"""

import base64
import numbers

import numpy as np
import torch

from .live_page import NEEDS_JS, LiveHTML, _at_most, _count

__all__ = ["DIMS", "kernel_regression_explorer", "masked_softmax_explorer",
           "positional_encoding_explorer", "sample_scores",
           "scaling_explorer"]

DIMS = tuple(2 ** i for i in range(11))
# The positional-encoding explorer draws D * max_len cells at most.
PE_MAX_CELLS = 2 ** 15
# What the other explorers draw at most: the page draws a cell, a bar or
# a table row per number, and holds the data in the output.
MASKED_SOFTMAX_MAX = (32, 64)  # L queries, S keys
SCALING_MAX_SCORES = 2 ** 14  # L * S scores per size d
SCALING_MAX_DIM = 1024  # the largest d
SCALING_MAX_DIMS = 16  # sizes on the slider
KERNEL_MAX_POINTS = 1000  # training pairs, and queries


def masked_softmax_explorer(scores=None, valid_len=None, temperature=1.0,
                            num_queries=3, num_keys=8, seed=0):
    """Sliders for the valid length and a temperature, over a heatmap of
    ``masked_softmax(scores / temperature, valid_len)``.

    Args:
        scores: (L, S) scores; None draws ``num_queries x num_keys``
            standard normal scores times 2 from a generator seeded with
            ``seed``.
        valid_len: the initial valid length (0 to S); None means S // 2.
        temperature: the initial temperature (0.1 to 10; the slider moves
            its log10 in steps of 0.05).
        num_queries, num_keys: L and S when ``scores`` is None.
        seed: the seed of the random scores.

    Returns:
        A ``LiveHTML``; its ``data["scores"]`` are the scores it draws.
    """
    max_l, max_s = MASKED_SOFTMAX_MAX
    if scores is None:
        num_queries = _count("num_queries", num_queries)
        num_keys = _count("num_keys", num_keys)
        _at_most("num_queries (L)", num_queries, max_l, "draw fewer queries")
        _at_most("num_keys (S)", num_keys, max_s, "draw fewer keys")
        gen = torch.Generator().manual_seed(seed)
        scores = 2 * torch.randn(num_queries, num_keys, generator=gen)
    scores = torch.as_tensor(scores, dtype=torch.float32)
    if scores.dim() != 2 or 0 in scores.shape:
        raise ValueError("scores must be (L, S), one row per query and at "
                         f"least one key, got shape {tuple(scores.shape)}")
    _at_most("the queries of scores (L)", scores.shape[0], max_l,
             "pass fewer rows")
    _at_most("the keys of scores (S)", scores.shape[1], max_s,
             "pass fewer columns")
    if not torch.isfinite(scores).all():
        raise ValueError("scores must be finite numbers; mask keys with "
                         "the valid length instead of -inf")
    S = scores.shape[1]
    valid_len = S // 2 if valid_len is None else valid_len
    if not isinstance(valid_len, int) or not 0 <= valid_len <= S:
        raise ValueError(f"valid_len must be an int between 0 and S = {S}, "
                         f"got {valid_len!r}")
    if not 0.1 <= temperature <= 10:
        raise ValueError("temperature must be between 0.1 and 10, got "
                         f"{temperature}")
    return LiveHTML("masked-softmax", {
        "scores": scores.tolist(), "valid_len": valid_len,
        "temperature": float(temperature)}, NEEDS_JS)


def sample_scores(d, num_queries=256, num_keys=16, seed=0):
    """Dot products of random queries and keys with N(0, 1) entries.

    Args:
        d: the size of every query and key.
        num_queries, num_keys: L and S.
        seed: the seed of the generator (each d gets its own stream).

    Returns:
        (L, S) float64 scores q.k, whose variance is about d.
    """
    gen = torch.Generator().manual_seed(seed * 100_003 + d)
    q = torch.randn(num_queries, 1, d, generator=gen, dtype=torch.float64)
    k = torch.randn(num_queries, num_keys, d, generator=gen,
                    dtype=torch.float64)
    return (q * k).sum(-1)  # (L, S)


def _float32_b64(x):
    array = np.ascontiguousarray(np.asarray(x, dtype="<f4"))
    return base64.b64encode(array.tobytes()).decode("ascii")


def scaling_explorer(dims=DIMS, d=64, num_queries=256, num_keys=16, seed=0):
    """A slider for d over the distributions of scores and weights.

    For random queries and keys of size d (``sample_scores``, stored in
    the output as float32) the page draws the histograms of q.k and
    q.k / sqrt(d), and of the largest softmax weight of each query with
    and without the scaling, and tabulates their standard deviations,
    mean largest weights and shares above 0.9.

    Args:
        dims: the sizes the slider offers.
        d: the initial size; must be one of ``dims``.
        num_queries, num_keys: L queries, each scored against S keys.
        seed: the seed of the random queries and keys.

    Returns:
        A ``LiveHTML``.
    """
    dims = tuple(int(x) for x in dims)
    if not dims or min(dims) < 1:
        raise ValueError(f"dims must be positive sizes, got {dims}")
    if d not in dims:
        raise ValueError(f"d = {d} is not one of the slider's sizes {dims}")
    _at_most("the number of sizes on the slider (len(dims))", len(dims),
             SCALING_MAX_DIMS, "offer fewer sizes")
    _at_most("the largest size d", max(dims), SCALING_MAX_DIM,
             "offer smaller sizes")
    num_queries = _count("num_queries", num_queries)
    num_keys = _count("num_keys", num_keys, low=2)  # else no softmax
    _at_most("num_queries * num_keys (scores per size)",
             num_queries * num_keys, SCALING_MAX_SCORES,
             f"got {num_queries} * {num_keys}: use fewer queries or keys")
    scores = {str(n): _float32_b64(sample_scores(n, num_queries, num_keys,
                                                 seed)) for n in dims}
    return LiveHTML("scaling", {
        "dims": list(dims), "d": d, "num_queries": num_queries,
        "num_keys": num_keys, "scores": scores}, NEEDS_JS)


def kernel_regression_explorer(x_train, y_train, x_query, f_query, *,
                               width=0.5, kernel="gaussian", query=None):
    """Sliders for the kernel width and the marked query, and a kernel
    choice, over a Nadaraya-Watson fit (``d2lmini.pooling``).

    The page computes the prediction at every query from the training
    pairs, draws it with the true function and the weights of the marked
    query, and reports the mean squared error against ``f_query``.

    Args:
        x_train, y_train: (S,) training inputs (the keys) and targets
            (the values).
        x_query: (L,) query positions, increasing.
        f_query: (L,) the true function at the queries.
        width: the initial width (0.03 to 3; the slider moves its log10).
        kernel: the initial kernel, one of ``d2lmini.pooling.KERNELS``.
        query: the index of the initially marked query (default: middle).

    Returns:
        A ``LiveHTML``.
    """
    from d2lmini.pooling import KERNELS
    arrays = [torch.as_tensor(a, dtype=torch.float64).flatten()
              for a in (x_train, y_train, x_query, f_query)]
    if len(arrays[0]) != len(arrays[1]) or len(arrays[2]) != len(arrays[3]) \
            or not len(arrays[0]) or not len(arrays[2]):
        raise ValueError(
            "x_train and y_train, and x_query and f_query, must be pairs of "
            "equally long non-empty 1-D arrays; got lengths "
            f"{[len(a) for a in arrays]}")
    _at_most("the number of training pairs (S)", len(arrays[0]),
             KERNEL_MAX_POINTS, "pass fewer keys")
    _at_most("the number of queries (L)", len(arrays[2]),
             KERNEL_MAX_POINTS, "pass fewer queries")
    if not all(torch.isfinite(a).all() for a in arrays):
        raise ValueError("x_train, y_train, x_query and f_query must be "
                         "finite numbers")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if not 0.03 <= width <= 3:
        raise ValueError(f"width must be between 0.03 and 3, got {width}")
    L = len(arrays[2])
    query = L // 2 if query is None else query
    if not isinstance(query, int) or not 0 <= query < L:
        raise ValueError(f"query must be an index in [0, {L}), got {query!r}")
    x, y, xq, fq = ([round(float(v), 6) for v in a] for a in arrays)
    return LiveHTML("kernel-regression", {
        "x_train": x, "y_train": y, "x_query": xq, "f_query": fq,
        "width": float(width), "kernel": kernel, "kernels": list(KERNELS),
        "query": query}, NEEDS_JS)


def positional_encoding_explorer(num_hiddens=32, max_len=64, position=10,
                                 index=2):
    """Sliders for a position i and a frequency index j over the
    Transformer's sinusoidal positions (``d2lmini.transformer.
    PositionalEncoding``), which the page computes from D and max_len.

    The page draws P (max_len, D) as a heatmap with row i and columns
    2j, 2j + 1 marked, those two columns as curves over the positions,
    and a line giving the frequency 1 / 10000^(2j/D), the wavelength
    2 pi 10000^(2j/D) (in positions) and P[i, 2j], P[i, 2j + 1].

    Args:
        num_hiddens: D, even and at least 2.
        max_len: the number of positions drawn (the rows of P).
        position: the initially marked position i, in [0, max_len).
        index: the initial frequency index j, in [0, D // 2).

    Returns:
        A ``LiveHTML``.
    """
    args = {"num_hiddens": num_hiddens, "max_len": max_len,
            "position": position, "index": index}
    for name, value in args.items():
        if isinstance(value, bool) or not isinstance(value,
                                                     numbers.Integral):
            raise TypeError(f"{name} must be an int, got {value!r} "
                            f"({type(value).__name__})")
        args[name] = int(value)
    D, T = args["num_hiddens"], args["max_len"]
    if D < 2 or D % 2:
        raise ValueError(f"num_hiddens must be an even int >= 2 (its "
                         f"columns are sine and cosine pairs), got {D}; "
                         f"try {max(2, D + D % 2)}")
    if T < 1:
        raise ValueError(f"max_len must be at least 1 position, got {T}")
    if D * T > PE_MAX_CELLS:
        raise ValueError(
            f"the page draws a cell per entry of P: num_hiddens * max_len "
            f"= {D * T} is more than {PE_MAX_CELLS}; draw fewer positions "
            f"or dimensions")
    if not 0 <= args["position"] < T:
        raise ValueError(f"position must be in [0, max_len) = [0, {T}), "
                         f"got {args['position']}")
    if not 0 <= args["index"] < D // 2:
        raise ValueError(
            f"index (the frequency j of columns 2j and 2j + 1) must be "
            f"in [0, num_hiddens // 2) = [0, {D // 2}), got "
            f"{args['index']}")
    return LiveHTML("positional-encoding", args, NEEDS_JS)
