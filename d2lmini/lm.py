"""Training the pretraining section's models once: the French language
model, and translators fine-tuned from it on a few pairs.

``train_or_load_lm(recipe)`` trains a ``LanguageModel`` on the French
side of the chapter's training split (``pretraining_text``: no sentence
of the validation or test split, nor any reference of their sources,
enters it) and loads it afterwards; ``finetune_or_load`` trains the
Transformer section's translator on ``n`` training pairs, from scratch
or with its decoder started from the language model
(``init_decoder_from_lm``).  Both cache their weights like
``d2lmini.cache`` does for the translators: each file holds a
fingerprint of the recipe, the code (this module and every d2lmini
module it imports), torch and the data, and a file whose fingerprint
differs is retrained.

Shape legend: B batch size, T time steps, D num_hiddens, V vocabulary.
"""

import copy
import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from . import corpus, experiment, metrics
from .cache import (
    _imported_modules,
    _source_that_ran,
    _stale,
    data_fingerprint,
    load_checkpoint,
    processes,
    save_once,
    training_device,
)
from .pretraining import LanguageModel, perplexity
from .recipes import TRANSFORMER_RECIPE, seed_offset
from .tokenizer import tokenize
from .trainer import Every, Trainer
from .utils import check_int, keep_random_state, set_seed

__all__ = ["FineTuneRun", "LMRecipe", "LMRun", "LM_SIZES",
           "SentenceBatches", "bleu_gain",
           "code_fingerprint", "few_pairs", "finetune_or_load",
           "forbidden_ids", "init_decoder_from_lm", "pretraining_text",
           "split_text", "train_or_load_lm", "translation_data"]

_ROOT = "lm"


@dataclasses.dataclass(frozen=True)
class LMRecipe:
    """A decoder-only language model and its training: the width, heads
    and blocks of the Transformer section's decoder (so that it can
    start one), AdamW with a linear warm-up and a cosine decay,
    gradients clipped at 1, validation perplexity every
    ``val_every`` steps."""

    num_hiddens: int = TRANSFORMER_RECIPE.num_hiddens
    ffn_num_hiddens: int = TRANSFORMER_RECIPE.ffn_num_hiddens
    num_heads: int = TRANSFORMER_RECIPE.num_heads
    num_blks: int = TRANSFORMER_RECIPE.num_layers
    dropout: float = 0.0
    batch_size: int = 128
    lr: float = 0.002
    weight_decay: float = 0.01
    warmup_steps: int = 100
    max_steps: int = 1200
    val_every: int = 300
    max_len: int = 32
    seed: int = 0

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.type is float:
                if isinstance(value, bool) or not isinstance(
                        value, (int, float)) or not math.isfinite(value):
                    raise ValueError(f"{field.name} must be a finite "
                                     f"number, got {value!r}")
                object.__setattr__(self, field.name, float(value) + 0.0)
            else:
                check_int(field.name, value,
                          0 if field.name in ("seed", "warmup_steps")
                          else 1)
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.num_hiddens % 2:
            raise ValueError(f"num_hiddens must be even (the sinusoidal "
                             f"positions pair its features), got "
                             f"{self.num_hiddens}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got "
                             f"{self.dropout}")
        if self.num_hiddens % self.num_heads:
            raise ValueError(f"num_heads={self.num_heads} must divide "
                             f"num_hiddens={self.num_hiddens}")

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def training_seed(self):
        """``seed`` plus ``D2LMINI_SEED_OFFSET`` (0 unless set)."""
        return self.seed + seed_offset()

    def key(self):
        """16 hex digits of sha256 over every field and the seed
        offset."""
        fields = {**dataclasses.asdict(self), "offset": seed_offset()}
        text = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def build(self, vocab_size):
        """A freshly initialized ``LanguageModel``, its weights drawn
        from ``training_seed()``."""
        set_seed(self.training_seed())
        return LanguageModel(vocab_size, self.num_hiddens,
                             self.ffn_num_hiddens, self.num_heads,
                             self.num_blks, self.dropout, self.max_len,
                             lr=self.lr, weight_decay=self.weight_decay)


# Named sizes for ``python -m d2lmini.train lm --size``: the section's
# model (the only one that can start the Transformer section's decoder)
# and two larger ones, for a GPU or a few of them.  On 2 CPU cores a
# step of "medium" takes about 20 times a step of "section".
LM_SIZES = {
    "section": LMRecipe(),
    "medium": LMRecipe(num_hiddens=256, ffn_num_hiddens=1024, num_heads=8,
                       num_blks=4, batch_size=256, lr=0.001,
                       warmup_steps=200, max_steps=4000, val_every=500),
    "large": LMRecipe(num_hiddens=512, ffn_num_hiddens=2048, num_heads=8,
                      num_blks=8, dropout=0.1, batch_size=512, lr=0.0006,
                      warmup_steps=400, max_steps=8000, val_every=1000),
}


def code_fingerprint():
    """sha256 of the source of this module and every d2lmini module it
    imports, transitively, as this process runs them."""
    package_dir = Path(__file__).parent
    digest = hashlib.sha256()
    for module in sorted(_imported_modules(_ROOT, package_dir,
                                           _source_that_ran)):
        digest.update(f"{module}.py".encode() + b"\0"
                      + _source_that_ran(module))
    return digest.hexdigest()


_DATA = []


def translation_data():
    """The Transformer section's ``MTFraEng`` (its split and
    vocabularies), built once per process."""
    if not _DATA:
        _DATA.append(experiment.build_data(TRANSFORMER_RECIPE))
    return _DATA[0]


def _ids(data, sentence):
    return data.tgt_vocab[tokenize(sentence)]


def split_text(data, split):
    """The unique French sentences of a split (in order), as id lists
    of ``data.tgt_vocab`` without ``<bos>``/``<eos>``."""
    if split not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test', got "
                         f"{split!r}")
    pairs = getattr(data, split + "_pairs")
    return [_ids(data, f) for f in dict.fromkeys(f for _, f in pairs)]


def pretraining_text(data):
    """The monolingual French text the language model learns from: the
    unique French sentences of the training split, less every sentence
    that is a French side of a validation or test pair or a reference
    of one of their sources.  Returns ``(id lists, number left out)``."""
    held_out = set()
    for split in ("val", "test"):
        for eng, fra in getattr(data, split + "_pairs"):
            held_out.add(fra)
            held_out.update(data.references(eng))
    french = list(dict.fromkeys(f for _, f in data.train_pairs))
    kept = [f for f in french if f not in held_out]
    return [_ids(data, f) for f in kept], len(french) - len(kept)


def forbidden_ids(vocab):
    """The ids that generation never draws: ``<pad>``, ``<bos>`` and
    ``<unk>`` (the page forbids the same)."""
    return [vocab.pad, vocab.bos, vocab.unk]


def _batch(sentences, bos, eos, pad):
    """(B, T) ids of ``bos s eos`` padded with ``pad``, and (B,) lens."""
    rows = [[bos, *s, eos] for s in sentences]
    lens = torch.tensor([len(r) for r in rows])
    X = torch.full((len(rows), int(lens.max())), pad, dtype=torch.long)
    for row, r in zip(X, rows):
        row[:len(r)] = torch.tensor(r)
    return X, lens


class SentenceBatches:
    """Training batches of whole sentences for ``d2lmini.Trainer``:
    each epoch a new permutation drawn from ``generator``, cut into
    batches ``(X, lens)`` of ``batch_size`` sentences (the last partial
    batch dropped), each ``bos s eos`` padded with ``pad``."""

    def __init__(self, sentences, batch_size, generator, bos, eos, pad):
        check_int("batch_size", batch_size)
        if batch_size > len(sentences):
            raise ValueError(f"batch_size {batch_size} is more than the "
                             f"{len(sentences)} sentences")
        self.sentences, self.batch_size = sentences, batch_size
        self.generator, self.ids = generator, (bos, eos, pad)

    def __len__(self):
        return len(self.sentences) // self.batch_size

    def __iter__(self):
        order = torch.randperm(len(self.sentences),
                               generator=self.generator)
        b = self.batch_size
        for i in range(len(self)):
            chosen = order[i * b:(i + 1) * b].tolist()
            yield _batch([self.sentences[j] for j in chosen], *self.ids)

    def train_dataloader(self):
        return self


def fit_lm(recipe, data, device="cpu", progress=False):
    """Train ``recipe``'s language model on ``pretraining_text(data)``
    with ``d2lmini.Trainer`` (AdamW, a linear warm-up then a cosine
    decay, gradients clipped at 1); under ``torchrun`` on every process
    of the job, each on its share of every batch.

    Sentences longer than ``recipe.max_len - 2`` tokens are cut to it,
    in training and in validation alike (none is, at the section's
    ``max_len``).  Returns ``(model in eval mode, history)``: history
    holds the steps
    of each validation, the mean training loss since the last one, the
    validation perplexity (unique French sentences of the val split),
    the training seconds (validation excluded) and the number of
    sentences trained on and left out.
    """
    vocab = data.tgt_vocab
    text, left_out = pretraining_text(data)
    val = split_text(data, "val")
    longest = recipe.max_len - 2  # <bos> and <eos> take two positions
    text = [s[:longest] for s in text]
    val = [s[:longest] for s in val]
    model = recipe.build(len(vocab))
    generator = torch.Generator().manual_seed(recipe.training_seed())
    batches = SentenceBatches(text, recipe.batch_size, generator,
                              vocab.bos, vocab.eos, vocab.pad)
    ppl = Every(recipe.val_every, lambda model, step: perplexity(
        model, val, vocab.bos, vocab.eos))
    trainer = Trainer(None, 1.0, device, max_steps=recipe.max_steps,
                      progress=progress, warmup_steps=recipe.warmup_steps,
                      schedule="cosine-after-warmup", callbacks=[ppl])
    hist = trainer.fit(model, batches)
    marks = [step for step, _ in ppl.records]
    history = {"steps": marks,
               "train_loss": hist.means_between(marks),
               "val_ppl": [value for _, value in ppl.records],
               "seconds": hist.train_time, "tokens": hist.num_tokens,
               "sentences": len(text), "left_out": left_out}
    return model.eval(), history


class LMRun(NamedTuple):
    """What ``train_or_load_lm`` returns; ``trained`` is False when the
    weights came from the cache, ``reason`` says why they did not."""

    model: LanguageModel
    data: object  # the MTFraEng whose vocabulary and split it used
    history: dict
    recipe: LMRecipe
    trained: bool
    reason: str = ""

    def summary(self):
        h = self.history
        what = (f"{h['steps'][-1]:,} steps in {h['seconds']:.0f} s on "
                f"{h['sentences']:,} French sentences, validation "
                f"perplexity {h['val_ppl'][-1]:.1f}")
        if not self.trained:
            return f"loaded from the cache: {what}"
        return f"trained now ({self.reason}): {what}"


def _models_dir(cache_dir):
    return corpus.cache_dir() / "models" if cache_dir is None \
        else Path(cache_dir)


def _cached(model, path, expected):
    """Load ``path`` into ``model`` if its fingerprint is ``expected``:
    ``(extra, "")``, else ``(None, why not)``."""
    if not path.exists():
        return None, "no cached model yet"

    def check(extra):
        why = _stale(extra.get("fingerprint"), expected)
        if why:
            raise ValueError(why)

    try:
        return load_checkpoint(model, path, check), ""
    except (ValueError, RuntimeError, KeyError, TypeError, EOFError,
            OSError) as err:
        # The file's name, not its folder (a path of this machine).
        why = (str(err) or type(err).__name__).replace(str(path),
                                                       path.name)
        return None, f"the cached file was not usable: {why}"


def _ddp():
    """A cache file name's suffix under ``torchrun``: ``-ddp<N>``, so
    that a model trained by N processes keeps one process's file."""
    return "" if processes() == 1 else f"-ddp{processes()}"


def _fingerprint(key, data, device=None):
    """What the cached model depends on; ``device`` is the kind that
    trains it (``'cpu'``, ``'cuda'``, ``'mps'``; None: what
    ``Trainer(device='auto')`` picks here), and ``processes`` the
    number of data-parallel processes."""
    return {"recipe": key, "code": code_fingerprint(),
            "torch": str(torch.__version__),
            "data": data_fingerprint(data),
            "device": device or training_device(),
            "processes": processes()}


def train_or_load_lm(recipe=None, cache_dir=None, data=None,
                     device="auto", progress=False):
    """The recipe's trained language model (default ``LMRecipe()``: the
    section's), from the cache when its fingerprint matches, else
    trained now on ``device`` (``'auto'``: a GPU if there is one, as
    ``Trainer`` picks; under ``torchrun``, on every process) and saved
    by one process.  ``data`` (default ``translation_data()``) gives
    the text and the vocabulary.  Returns an ``LMRun`` whose model is
    on the CPU, trained or loaded."""
    recipe = LMRecipe() if recipe is None else recipe
    if not isinstance(recipe, LMRecipe):
        raise TypeError(f"recipe must be an LMRecipe, got "
                        f"{type(recipe).__name__}")
    data = translation_data() if data is None else data
    device = Trainer._pick_device(device)
    path = _models_dir(cache_dir) / f"lm-french-{recipe.key()}{_ddp()}.pt"
    expected = _fingerprint(recipe.key(), data, device.type)
    with keep_random_state():
        model = recipe.build(len(data.tgt_vocab))
    extra, reason = _cached(model, path, expected)
    if extra is not None:
        return LMRun(model.eval(), data, extra["history"], recipe, False)
    with keep_random_state():
        model, history = fit_lm(recipe, data, device, progress)
    model = model.to("cpu")
    save_once(model, path, recipe=dataclasses.asdict(recipe),
              fingerprint=expected, history=history)
    return LMRun(model, data, history, recipe, True, reason)


def few_pairs(data, n, seed):
    """A copy of ``data`` whose training split is ``n`` of its training
    pairs drawn at random (seeded), with the same vocabularies, test
    split and references; it has no validation split (training on a
    few pairs runs many short epochs, and each would validate)."""
    check_int("n", n)
    check_int("seed", seed, 0)
    if n > len(data.train_pairs):
        raise ValueError(f"n={n} is more than the {len(data.train_pairs)} "
                         f"training pairs")
    generator = torch.Generator().manual_seed(seed)
    chosen = torch.randperm(len(data.train_pairs), generator=generator)[:n]
    subset = copy.copy(data)
    subset.train_pairs = [data.train_pairs[i] for i in chosen.tolist()]
    subset.val_pairs = []
    # MTFraEng keeps one tensor set per split: the training one is
    # rebuilt for the subset, the test one shared.
    subset._arrays = dict(data._arrays,
                          train=data._tensors(subset.train_pairs))
    subset._sources = None
    subset.generator = torch.Generator().manual_seed(seed)
    return subset


def init_decoder_from_lm(model, lm):
    """Start a Transformer translator's decoder from a language model of
    its width: the embedding, the output layer and, block by block, the
    self-attention, the FFN and their AddNorms (the LM's ``addnorm2``
    is the decoder block's ``addnorm3``).  Attention to the encoder has
    no counterpart in the LM and keeps its initialization.  Changes
    ``model`` in place and returns it."""
    decoder = model.decoder
    pairs = [(decoder.embedding, lm.embedding), (decoder.dense, lm.dense)]
    if decoder.num_heads != lm.num_heads:
        raise ValueError(f"the decoder has {decoder.num_heads} heads and "
                         f"the language model {lm.num_heads}: the same "
                         f"weights would compute another attention")
    if len(decoder.blks) != len(lm.blks):
        raise ValueError(f"the decoder has {len(decoder.blks)} blocks and "
                         f"the language model {len(lm.blks)}: give an LM "
                         f"of the decoder's size")
    for ours, theirs in zip(decoder.blks, lm.blks):
        pairs += [(ours.self_attention, theirs.attention),
                  (ours.addnorm1, theirs.addnorm1), (ours.ffn, theirs.ffn),
                  (ours.addnorm3, theirs.addnorm2)]
    def shapes(module):
        return {k: tuple(v.shape) for k, v in module.state_dict().items()}

    for ours, theirs in pairs:  # every check before the first copy
        if shapes(ours) != shapes(theirs):
            raise ValueError(
                f"{type(ours).__name__} shapes differ: decoder "
                f"{shapes(ours)}, language model {shapes(theirs)}: give "
                f"an LM of the decoder's sizes and vocabulary")
    with torch.no_grad():
        for ours, theirs in pairs:
            mine = ours.state_dict()
            for k, v in theirs.state_dict().items():
                mine[k].copy_(v)
    return model


class FineTuneRun(NamedTuple):
    """What ``finetune_or_load`` returns."""

    model: nn.Module
    data: object  # the few-pairs MTFraEng it trained on
    history: dict
    recipe: object  # the translator's Recipe
    pretrained: bool
    trained: bool
    reason: str = ""


def finetune_or_load(n, steps, seed=0, lm=None, cache_dir=None,
                     data=None):
    """The Transformer section's translator trained for ``steps`` steps
    on ``few_pairs(data, n, seed)`` (``data`` defaults to
    ``translation_data()``), from scratch or, with ``lm`` (an
    ``LMRun`` of the same data), with its decoder started from the
    language model; cached.  Returns a ``FineTuneRun``."""
    check_int("steps", steps)
    data = translation_data() if data is None else data
    if lm is not None and lm.data is not data:
        raise ValueError("the language model must come from "
                         "train_or_load_lm of the same data (its "
                         "vocabulary)")
    recipe = TRANSFORMER_RECIPE.replace(max_steps=steps, seed=seed)
    # The pairs and their order come from the training seed, which a
    # seed offset changes as it changes the weights (recipe.key() too).
    subset = few_pairs(data, n, recipe.training_seed())
    key = json.dumps([recipe.key(), n, None if lm is None else
                      lm.recipe.key()])
    key = hashlib.sha256(key.encode()).hexdigest()[:16]
    kind = "scratch" if lm is None else "pretrained"
    path = _models_dir(cache_dir) / f"finetune-{kind}-{key}{_ddp()}.pt"
    trainer = experiment._trainer(recipe, progress=False)
    expected = _fingerprint(key, data, trainer.device.type)
    with keep_random_state():
        model = experiment.build_model(recipe, subset)
    extra, reason = _cached(model, path, expected)
    if extra is not None:
        return FineTuneRun(model.eval(), subset, extra["history"], recipe,
                           lm is not None, False)
    with keep_random_state():
        model = experiment.build_model(recipe, subset)
        if lm is not None:
            init_decoder_from_lm(model, lm.model)
        history = trainer.fit(model, subset)
    model = model.to("cpu")  # as a load gives it
    record = {"seconds": history.train_time,
              "loss": [float(x) for _, x in history.steps][-1:]}
    save_once(model, path, fingerprint=expected, history=record)
    return FineTuneRun(model.eval(), subset, record, recipe,
                       lm is not None, True, reason)


def bleu_gain(pretrained, scratch, seed=0):
    """Both runs' multi-reference test BLEU and the paired bootstrap
    difference pretrained - scratch: ``(bleu_p, bleu_s, (diff, low,
    high))``, in BLEU points."""
    results = [experiment.evaluate(r.model, r.data, "test")
               for r in (pretrained, scratch)]
    diff = metrics.paired_bootstrap(results[0].hypotheses,
                                    results[1].hypotheses,
                                    results[0].references, seed=seed)
    return results[0].bleu, results[1].bleu, diff
