"""Snapshots of a translation model while it trains: what it attends
to, what it says and how it scores, at fixed steps.

``SnapshotRecorder`` is a ``d2lmini.trainer.Trainer`` callback.  At the
steps of ``snapshot_steps`` (about 40, denser early, a rule of the step
count only, so every machine records the same steps) it greedily
translates a fixed set of probe sentences of the val split
(``choose_probes``: spread over lengths, with a few whose adjective
French puts after its noun), keeping each one's output, sentence BLEU
and attention to the source, and it measures the mean training loss
since the last snapshot, the val loss and the val split's BLEU.
Recording changes nothing that is trained: the model is evaluated in
eval mode without gradients and put back in train mode, and the
trainer restores the global random generators after each callback (a
``DataLoader`` draws a number from them each time it is iterated, and
the same generators draw the dropout masks).

``d2lmini.cache.train_or_load(recipe, snapshots=True)`` records them
while it trains and keeps them in the model's own cache file.
"""

from dataclasses import dataclass, field
from typing import NamedTuple

from . import decoding, metrics
from .experiment import evaluate
from .utils import check_int

__all__ = ["NUM_PROBES", "NUM_SNAPSHOTS", "POSTNOMINAL", "Probe",
           "SnapshotRecorder", "TrainingSnapshots", "choose_probes",
           "snapshot_steps"]

NUM_SNAPSHOTS = 40
NUM_PROBES = 16
NUM_REORDER_PROBES = 4
# English adjectives that French puts after the noun they qualify
# (colours, nationalities, "favourite"): "red wine" -> "vin rouge".
POSTNOMINAL = frozenset(
    "red blue green black white yellow brown gray grey pink purple "
    "orange french english american japanese german chinese italian "
    "spanish canadian russian favorite favourite".split())
# Words that can follow such an adjective without being its noun
# ("we speak french at home").
_NOT_NOUNS = frozenset(
    "at and or to in on with is are was were for of by from as than but "
    "the a an too enough now here there today again very".split())


def snapshot_steps(last_step, num=NUM_SNAPSHOTS):
    """The steps to record, ``round(last_step * (i / (num - 1)) ** 2)``
    for ``i = 0 .. num - 1`` without repeats: 0 (before the first
    update), ``last_step``, and denser early, where attention changes
    fastest.  For 1000 steps: 0, 1, 3, 6, 11, 16, 24, ..., 949, 1000."""
    check_int("last_step", last_step, 1)
    check_int("num", num, 2)
    return sorted({round(last_step * (i / (num - 1)) ** 2)
                   for i in range(num)})


class Probe(NamedTuple):
    """A probe sentence; ``pair`` is ``(adjective, noun)``, the positions
    in its tokens of an adjective that French puts after its noun, or
    None."""

    sentence: str
    pair: tuple | None = None


def _adjective_noun(tokens):
    """The first ``(i, i + 1)`` whose token i is in ``POSTNOMINAL`` and
    i + 1 a word that may be its noun, or None."""
    for i, (word, nxt) in enumerate(zip(tokens, tokens[1:])):
        if word in POSTNOMINAL and nxt.isalpha() and nxt not in _NOT_NOUNS:
            return (i, i + 1)
    return None


def choose_probes(data, num=NUM_PROBES, num_reorder=NUM_REORDER_PROBES,
                  split="val"):
    """A fixed set of probe sentences of ``data``'s ``split``, chosen by
    a rule of the data alone (not by how a model translates them).

    Among the split's unique sources whose words are all in the source
    vocabulary (a heatmap over ``<unk>`` says little), the first
    ``num_reorder`` in split order with an adjective of ``POSTNOMINAL``
    before a noun (both among the first ``data.num_steps`` tokens, the
    attention's columns), then sentences at evenly spaced ranks of the rest
    sorted by length (shortest to longest), ``num`` in all.  Falls back
    to every source when none has only known words.

    Returns:
        A list of ``Probe``, sorted by length (ties in split order).
    """
    check_int("num", num, 1)
    check_int("num_reorder", num_reorder, 0)
    if split not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test', got "
                         f"{split!r}")
    sources = list(dict.fromkeys(e for e, _ in getattr(data,
                                                       split + "_pairs")))
    if not sources:
        raise ValueError(f"the {split} split is empty: probes need "
                         f"num_{split} > 0")
    tokens = {s: data.tokens(s) for s in sources}
    known = [s for s in sources
             if all(t in data.src_vocab for t in tokens[s])] or sources
    # The attention has a column for each of the first num_steps tokens
    # only (with <eos>): a pair beyond them cannot be read from it.
    width = getattr(data, "num_steps", None)
    reorder = {}
    for s in known:
        pair = _adjective_noun(tokens[s][:width])
        if pair is not None and len(reorder) < min(num_reorder, num):
            reorder[s] = pair
    rest = sorted((s for s in known if s not in reorder),
                  key=lambda s: len(tokens[s]))
    k = min(num - len(reorder), len(rest))
    if k == 1:
        picks = [rest[len(rest) // 2]]
    else:
        picks = [rest[round(i * (len(rest) - 1) / (k - 1))]
                 for i in range(k)]
    chosen = [*reorder, *dict.fromkeys(picks)]
    order = {s: i for i, s in enumerate(sources)}
    chosen.sort(key=lambda s: (len(tokens[s]), order[s]))
    return [Probe(s, reorder.get(s)) for s in chosen]


@dataclass
class TrainingSnapshots:
    """What a ``SnapshotRecorder`` recorded; lists of the snapshots are
    indexed ``[snapshot]`` or ``[snapshot][probe]``.

    ``src_tokens[p]`` are probe p's source tokens with ``<eos>`` (the
    columns of its attention); ``out_tokens[k][p]`` its greedy output at
    snapshot k (with ``<eos>`` when emitted: the rows);
    ``attention[k][p]`` the attention to the source, (rows, S), or
    (h, rows, S) for a Transformer's last block; ``probe_bleu[k][p]``
    the output's sentence BLEU (0-100) against all references;
    ``train_loss[k]`` the mean batch loss of the steps since the last
    snapshot (None at step 0); ``val_loss[k]`` and ``val_bleu[k]`` the
    val split's loss and corpus BLEU; ``last_step`` the step training
    was set to stop at.
    """

    last_step: int
    probes: list
    src_tokens: list
    steps: list = field(default_factory=list)
    out_tokens: list = field(default_factory=list)
    attention: list = field(default_factory=list)
    probe_bleu: list = field(default_factory=list)
    train_loss: list = field(default_factory=list)
    val_loss: list = field(default_factory=list)
    val_bleu: list = field(default_factory=list)

    def __len__(self):
        return len(self.steps)

    def to_record(self):
        """Plain data (lists, numbers, strings, tensors) for a
        checkpoint's metadata."""
        record = {name: getattr(self, name) for name in (
            "last_step", "src_tokens", "steps", "out_tokens", "attention",
            "probe_bleu", "train_loss", "val_loss", "val_bleu")}
        record["probes"] = [[p.sentence, None if p.pair is None
                             else list(p.pair)] for p in self.probes]
        return record

    @classmethod
    def from_record(cls, record):
        """The inverse of ``to_record``."""
        record = dict(record)
        record["probes"] = [Probe(s, None if pair is None else tuple(pair))
                            for s, pair in record["probes"]]
        return cls(**record)


class SnapshotRecorder:
    """A ``Trainer`` callback that records ``TrainingSnapshots`` of a
    ``Seq2Seq`` trained on ``data`` (an ``MTFraEng`` with a val split).

    Args:
        data: the data the model trains on.
        probes: ``Probe``s or sentences; default ``choose_probes(data)``.
        steps: the steps to record; default ``snapshot_steps`` of the
            step training stops at (then it must be known: ``max_steps``,
            or ``max_epochs`` with a loader that has a length).

    After ``fit``, ``recorder.snapshots`` holds what was recorded.
    """

    def __init__(self, data, probes=None, steps=None):
        if data.val_dataloader() is None:
            raise ValueError("snapshots score the val split, which is "
                             "empty: pass num_val > 0")
        probes = choose_probes(data) if probes is None else probes
        self.probes = [p if isinstance(p, Probe) else Probe(p)
                       for p in probes]
        if not self.probes:
            raise ValueError("give at least one probe sentence")
        self.data, self.steps = data, steps
        self.snapshots = None

    def on_fit_start(self, trainer, model, last_step):
        if self.steps is None:
            if last_step is None:
                raise ValueError(
                    "snapshots are taken at steps that depend on the last "
                    "step, and this run has none (a time limit only): set "
                    "max_steps, or pass steps= to SnapshotRecorder")
            steps = snapshot_steps(last_step)
        else:
            steps = sorted({check_int("step", s, 0) for s in self.steps})
        self._todo, self._last = set(steps), 0
        src = [decoding.translate(model, self.data, [p.sentence],
                                  max_len=1)[0].src_tokens
               for p in self.probes]
        self.snapshots = TrainingSnapshots(
            last_step if last_step is not None else max(steps),
            self.probes, src)
        if 0 in self._todo:
            self._record(trainer, model, 0)

    def on_step_end(self, trainer, model, step):
        if step in self._todo:
            self._record(trainer, model, step)

    def _record(self, trainer, model, step):
        snap, data = self.snapshots, self.data
        out = decoding.translate(model, data,
                                 [p.sentence for p in self.probes])
        snap.steps.append(step)
        snap.out_tokens.append([t.out_tokens for t in out])
        snap.attention.append([None if t.attention is None
                               else t.attention.float().cpu() for t in out])
        snap.probe_bleu.append([
            metrics.sentence_bleu(t.text, data.references(p.sentence))
            for t, p in zip(out, self.probes)])
        losses = [loss for s, loss in trainer.history.steps
                  if self._last < s <= step]
        snap.train_loss.append(sum(losses) / len(losses) if losses
                               else None)
        snap.val_loss.append(trainer.validate(model, data.val_dataloader(),
                                              step))
        snap.val_bleu.append(evaluate(model, data, "val").bleu)
        self._last = step
