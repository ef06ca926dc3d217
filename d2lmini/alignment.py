"""When does attention form?  Measures of ``d2lmini.snapshots``.

``concentration(weights)`` is how far attention rows are from uniform:
``1 - H(row) / log(S)`` averaged over the rows, where ``H`` is the
entropy of a row over its ``S`` source positions.  It is 0 for a
uniform row (the attention of an untrained model: every key scores
about the same) and 1 for a row that puts all its weight on one
position, and it needs no guess of which position is right, so it counts
a reordered pair as aligned as a monotone one.  ``diagonal_share``
complements it: the share of rows whose largest weight lies within one
position of the proportional diagonal (a monotone reading of the
source), which tells concentrating on the words in order from
concentrating on, say, the final ``<eos>``.

``half_rise(steps, values)`` is the first step from which a curve
stays at least half the way from its first value to its last: the step
at which the change "happens", by a rule that a passing spike or the
noise of one snapshot does not move.  ``reorder_steps`` follows a
probe's adjective-noun pair: at which snapshots the output row that
attends most to the noun comes before the one that attends most to the
adjective (French's "vin rouge" for "red wine").
``formation(snapshots)`` puts these together for a run.

Shape legend: T output rows, S source positions, h heads.
"""

import math

import torch

__all__ = ["concentration", "diagonal_share", "formation", "half_rise",
           "pair_rows", "reorder_steps", "settled_from",
           "snapshot_measures"]


def _rows(weights):
    """``weights`` (T, S) or (h, T, S) as a float (N, S) of rows, on the
    device of ``weights`` (as is every tensor the measures build)."""
    if not torch.is_tensor(weights) or weights.dim() not in (2, 3):
        shape = tuple(getattr(weights, "shape", ()))
        raise ValueError(f"weights must be a (T, S) or (h, T, S) tensor "
                         f"of attention rows, got {type(weights).__name__} "
                         f"{shape}")
    rows = weights.float().reshape(-1, weights.shape[-1])
    if len(rows) == 0 or rows.shape[1] == 0:
        raise ValueError(f"weights {tuple(weights.shape)} hold no row")
    if (rows < 0).any() or not torch.allclose(
            rows.sum(-1), rows.new_ones(len(rows)), atol=1e-3):
        raise ValueError("attention rows must be non-negative and sum to "
                         "1 (softmax weights)")
    return rows


def concentration(weights):
    """``1 - entropy / log(S)``, the mean over rows (per head too): 0 when
    every row is uniform, 1 when each puts all its weight on one source
    position.  A single source position (S = 1) counts as 1."""
    rows = _rows(weights)
    S = rows.shape[1]
    if S == 1:
        return 1.0
    p = rows.clamp_min(0)
    entropy = -(p * torch.log(p.clamp_min(1e-12))).sum(-1)
    return float((1 - entropy / math.log(S)).mean())


def diagonal_share(weights):
    """The share of rows (of every head) whose largest weight is at most
    one position from ``round(i (S - 1) / (T - 1))``, the position that
    a reading of the source in order would be at for output row i."""
    rows = _rows(weights)
    T, S = weights.shape[-2], weights.shape[-1]
    i = torch.arange(T, device=rows.device).repeat(len(rows) // T)
    diagonal = torch.round(i * (S - 1) / max(T - 1, 1))
    return float(((rows.argmax(-1) - diagonal).abs() <= 1).float().mean())


def half_rise(steps, values):
    """The first step from which ``values`` stays at least half the way
    from its first value to its last (rising or falling) up to the last
    snapshot, or None when the two are equal (nothing changed).  A
    passing spike (attention that is sharp for a few steps and then
    spreads again) does not count: the curve must stay."""
    steps, values = list(steps), [float(v) for v in values]
    if len(steps) != len(values) or not steps:
        raise ValueError(f"give one value per step, got {len(steps)} "
                         f"steps and {len(values)} values")
    first, last = values[0], values[-1]
    if last == first:
        return None
    half = first + (last - first) / 2
    return settled_from(steps, [(v - half) * (last - first) >= 0
                                for v in values])


def _head_mean(weights):
    return weights.float().mean(0) if weights.dim() == 3 else \
        weights.float()


def pair_rows(snapshots, probe, k=-1):
    """For probe ``probe`` (an index, whose ``pair`` is set) at snapshot
    ``k``: ``(row_noun, row_adjective)``, the output rows that attend
    most to the noun and to the adjective (heads averaged)."""
    pair = snapshots.probes[probe].pair
    if pair is None:
        sentence = snapshots.probes[probe].sentence
        raise ValueError(f"probe {probe} ({sentence!r}) has no "
                         "adjective-noun pair")
    adjective, noun = pair
    w = _head_mean(snapshots.attention[k][probe])
    return int(w[:, noun].argmax()), int(w[:, adjective].argmax())


def reorder_steps(snapshots, probe):
    """For probe ``probe`` (an index, whose ``pair`` is set), one bool
    per snapshot: whether the output row attending most to the noun
    comes before the row attending most to the adjective (heads
    averaged), i.e. the attention follows French's noun-adjective
    order."""
    found = []
    for k in range(len(snapshots.attention)):
        row_noun, row_adjective = pair_rows(snapshots, probe, k)
        found.append(row_noun < row_adjective)
    return found


def settled_from(steps, flags):
    """The first step from which ``flags`` stays True to the last
    snapshot, or None if the last is False."""
    start = None
    for step, flag in zip(steps, flags):
        if flag and start is None:
            start = step
        elif not flag:
            start = None
    return start


def snapshot_measures(snapshots, head=None):
    """``{"concentration": [...], "diagonal": [...]}``, one mean over the
    probes per snapshot; ``head`` picks one head of a multi-head
    attention (default: every head)."""
    out = {"concentration": [], "diagonal": []}
    for maps in snapshots.attention:
        picked = [m if head is None or m.dim() == 2 else m[head]
                  for m in maps]
        out["concentration"].append(
            sum(concentration(m) for m in picked) / len(picked))
        out["diagonal"].append(
            sum(diagonal_share(m) for m in picked) / len(picked))
    return out


def formation(snapshots, head=None):
    """When a run's attention formed, against its val BLEU and loss.

    Returns a dict: ``steps``; ``diagonal`` and ``concentration`` (one
    mean over the probes per snapshot, of head ``head`` or every head);
    the ``half_rise`` step of each of them and of ``val_bleu`` and
    ``val_loss`` (keys ending in ``_step``); and ``peak``, the snapshot
    before the diagonal share's half-rise where the concentration is
    highest, as ``(index, concentration, token, share)``: the source
    token that most rows put their largest weight on there, and the
    share of rows that do.  ``peak`` is None when the diagonal share
    does not end above its first value (flat, falling, or back down by
    the end): no alignment formed, and ``diagonal_step`` is then the
    half-way step of its fall (None when it ends where it began).
    """
    steps = list(snapshots.steps)
    found = {"steps": steps, **snapshot_measures(snapshots, head)}
    for name in ("diagonal", "concentration"):
        found[f"{name}_step"] = half_rise(steps, found[name])
    for name in ("val_bleu", "val_loss"):
        found[f"{name}_step"] = half_rise(steps, getattr(snapshots, name))
    found["peak"] = None
    if found["diagonal"][-1] > found["diagonal"][0]:
        before = range(steps.index(found["diagonal_step"]) + 1)
        k = max(before, key=lambda i: found["concentration"][i])
        counts = {}
        for p, maps in enumerate(snapshots.attention[k]):
            w = maps if head is None or maps.dim() == 2 else maps[head]
            w = _head_mean(w) if w.dim() == 3 else w
            for j in w.argmax(-1).tolist():
                token = snapshots.src_tokens[p][j]
                counts[token] = counts.get(token, 0) + 1
        token = max(counts, key=counts.get)
        found["peak"] = (k, found["concentration"][k], token,
                         counts[token] / sum(counts.values()))
    return found
