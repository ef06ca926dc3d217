"""The training scrubber of ``d2lmini.live``: attention across training,
scrubbed in the page.

``training_scrubber(run)`` is a ``LiveHTML`` output of the snapshots that
``train_or_load(recipe, snapshots=True)`` recorded
(``d2lmini.snapshots``): a slider over the recorded steps, with play and
pause, that shows a probe sentence's attention at that step (per head
for a Transformer), its output and sentence BLEU, and the loss, val BLEU
and attention curves (``d2lmini.alignment``'s diagonal share and
concentration) with the step marked.  Nothing is
trained or computed in the page; ``d2lmini/js/scrubber.js`` draws it.

The attention weights travel as one byte each, ``q = round(255 w)``,
at half the size of float16 and a quarter of float32, and the page draws
``q / 255``: each weight moves by at most 1/510 (under 0.002), half a
step of a 256-level colour map.  A number printed from it is that of
``q / 255``: with two decimals it is within 0.005 + 1/510 of the
recorded weight, and it can differ by 0.01 from the weight's own
two-decimal rounding when the weight lies within 1/510 of a half-way
point (0.125 travels as 32 and prints as 0.13, where Python's
``f"{0.125:.2f}"`` is 0.12).  No ``q / 255`` lies within 9e-5 of such a
point, so Python's ``f"{q / 255:.2f}"`` and JavaScript's
``(q / 255).toFixed(2)`` agree on every byte; a third decimal shows the
rounding itself (0.5 travels as 128 and prints as 0.502).  NaN and
infinite weights are refused, not quantised.

Shape legend: K snapshots, P probes, h heads, T output rows, S source
positions.
"""

import base64
import math

import torch

from .alignment import snapshot_measures
from .live_page import LiveHTML
from .snapshots import TrainingSnapshots

__all__ = ["SCRUBBER_MAX_BYTES", "quantize", "training_scrubber"]

# The most bytes of attention one scrubber carries (before base64).
SCRUBBER_MAX_BYTES = 1_000_000
# Training losses are drawn as means over this many bins.
LOSS_POINTS = 100
NEEDS_JS = ("This scrubber runs in the page: on the website it is live; "
            "in Jupyter, run the cell (Jupyter runs scripts only in "
            "outputs it trusts).")


def quantize(weights):
    """Attention weights in [0, 1] as bytes ``round(255 w)`` (uint8);
    a ValueError for a NaN or infinite weight or one outside [0, 1]."""
    w = torch.as_tensor(weights, dtype=torch.float32)
    bad = ~torch.isfinite(w)
    if bad.any():
        raise ValueError(f"attention weights must be finite, got "
                         f"{float(w[bad][0])} ({int(bad.sum())} of "
                         f"{w.numel()} weights are NaN or infinite): the "
                         "model's attention overflowed, or the snapshot "
                         "is corrupt")
    if w.numel() and (w.min() < -1e-6 or w.max() > 1 + 1e-6):
        raise ValueError(f"attention weights must lie in [0, 1], got "
                         f"values from {float(w.min())} to "
                         f"{float(w.max())}")
    return torch.round(w.clamp(0, 1) * 255).to(torch.uint8)


def _loss_curve(history, points=LOSS_POINTS):
    """Training loss as means over ``points`` bins of steps: (steps,
    losses), each bin at its last step."""
    steps = history.steps
    if not steps:
        return [], []
    width = max(1, math.ceil(len(steps) / points))
    xs, ys = [], []
    for i in range(0, len(steps), width):
        chunk = steps[i:i + width]
        xs.append(chunk[-1][0])
        ys.append(round(sum(loss for _, loss in chunk) / len(chunk), 4))
    return xs, ys


def training_scrubber(run, probe=None, title=None):
    """The live scrubber of a run's training snapshots.

    Args:
        run: what ``train_or_load(recipe, snapshots=True)`` returned.
        probe: the index of the probe shown first (default: the first
            with an adjective-noun pair, else the first).
        title: a line above the scrubber (default: none).

    Returns:
        A ``LiveHTML`` of kind ``"training"``.
    """
    snaps = getattr(run, "snapshots", None)
    if not isinstance(snaps, TrainingSnapshots):
        raise TypeError("run has no training snapshots: pass the Run of "
                        "train_or_load(recipe, snapshots=True)")
    if not len(snaps):
        raise ValueError("the run recorded no snapshot")
    P = len(snaps.probes)
    if probe is None:
        probe = next((i for i, p in enumerate(snaps.probes)
                      if p.pair is not None), 0)
    if isinstance(probe, bool) or not isinstance(probe, int) or \
            not 0 <= probe < P:
        raise ValueError(f"probe must be an index in [0, {P}), got "
                         f"{probe!r}")
    first = snaps.attention[0][0]
    if first is None:
        raise ValueError("the run's decoder has no attention: the "
                         "scrubber draws attention weights")
    # (h, T, S) for multi-head attention, one head included; (T, S) else
    heads = first.shape[0] if first.dim() == 3 else 1
    chunks = []
    for k, maps in enumerate(snaps.attention):
        for p, w in enumerate(maps):
            T, S = len(snaps.out_tokens[k][p]), len(snaps.src_tokens[p])
            want = (heads, T, S) if first.dim() == 3 else (T, S)
            if tuple(w.shape) != want:
                raise ValueError(
                    f"snapshot {k}, probe {p}: attention "
                    f"{tuple(w.shape)} does not fit its {T} output and "
                    f"{S} source tokens")
            try:
                chunks.append(quantize(w).reshape(-1))
            except ValueError as err:
                raise ValueError(f"snapshot {k}, probe {p}: {err}") \
                    from None
    raw = torch.cat(chunks).numpy().tobytes()
    if len(raw) > SCRUBBER_MAX_BYTES:
        raise ValueError(
            f"the snapshots hold {len(raw):,} attention weights, more "
            f"than the page's budget of {SCRUBBER_MAX_BYTES:,}: record "
            "fewer steps or probes")
    refs = [run.data.references(p.sentence)[:3] for p in snaps.probes]
    xs, ys = _loss_curve(run.history)
    measures = snapshot_measures(snaps)
    return LiveHTML("training", {
        "title": title or "", "heads": heads, "steps": snaps.steps,
        "last_step": snaps.last_step,
        "probes": [{"sentence": p.sentence, "src": src,
                    "pair": None if p.pair is None else list(p.pair),
                    "references": r}
                   for p, src, r in zip(snaps.probes, snaps.src_tokens,
                                        refs)],
        "probe": probe, "outputs": snaps.out_tokens,
        "bleu": [[round(b, 2) for b in row] for row in snaps.probe_bleu],
        "train_curve": {"steps": xs, "loss": ys},
        "val_loss": [round(v, 4) for v in snaps.val_loss],
        "val_bleu": [round(v, 2) for v in snaps.val_bleu],
        "concentration": [round(v, 4) for v in measures["concentration"]],
        "diagonal": [round(v, 4) for v in measures["diagonal"]],
        "attention": base64.b64encode(raw).decode("ascii")}, NEEDS_JS)
