"""Build, train and evaluate a translation recipe.

``build_data`` and ``build_model`` turn a ``Recipe`` (``d2lmini.recipes``,
whose names are importable from here too) into its data and model,
``train`` trains it, and ``evaluate`` scores a model on held-out English
sources against *all* their French translations in the corpus
(sacreBLEU corpus BLEU and chrF) and, for continuity with the book, the
mean sentence ``bleu`` against one reference.  This module sits on top
of ``recipes``, ``data``, ``seq2seq``, ``transformer``, ``decoding``,
``trainer`` and ``metrics``.

``d2lmini.cache.train_or_load`` trains a recipe once and then loads it.
"""

import time
import warnings
from typing import NamedTuple

from . import attention_decoder, decoding, metrics, seq2seq, transformer
from .data import MTFraEng
from .multihead import MultiHeadAttention
from .recipes import (  # noqa: F401  (importable from here, as before)
    ATTENTIONS,
    BOOK_RECIPE,
    CHAPTER_RECIPE,
    MAX_SEED_OFFSET,
    SEED_OFFSET_VARIABLE,
    TRANSFORMER_RECIPE,
    Recipe,
    seed_offset,
)
from .trainer import Trainer
from .utils import set_seed

__all__ = ["BOOK_RECIPE", "CHAPTER_RECIPE", "ATTENTIONS", "EvalResult",
           "Recipe", "SEED_OFFSET_VARIABLE", "TRANSFORMER_RECIPE",
           "build_data", "build_model", "evaluate", "seed_offset", "train"]


def build_data(recipe):
    """The ``MTFraEng`` of a recipe (the corpus is read once a process).

    The split comes from ``recipe.seed``; the batch order from
    ``recipe.training_seed()``, which differs only under a seed offset.
    """
    r = recipe
    data = MTFraEng(r.batch_size, r.num_steps, r.num_train, r.num_val,
                    num_test=r.num_test, max_src_len=r.max_src_len,
                    max_tgt_len=r.max_tgt_len, shuffle=r.shuffle,
                    seed=r.seed, min_freq=r.min_freq, bucket=r.bucket)
    if r.training_seed() != r.seed:
        data.generator.manual_seed(r.training_seed())
    return data


def _trainer(recipe, progress, callbacks=(), **options):
    """The recipe's ``Trainer``; ``options`` are more of its arguments
    (``device``, ``precision``, ``sync_every``)."""
    r = recipe
    return Trainer(r.max_epochs, r.gradient_clip_val,
                   max_steps=r.max_steps, max_time=r.max_time,
                   val_every_n_steps=r.val_every_n_steps,
                   progress=progress, seed=r.training_seed(),
                   warmup_steps=r.warmup_steps, schedule=r.schedule,
                   callbacks=callbacks, **options)


def build_model(recipe, data):
    """A freshly initialized ``Seq2Seq`` for ``data``'s vocabularies
    (seeded with ``recipe.training_seed()``)."""
    r = recipe
    set_seed(r.training_seed())
    if r.attention == "transformer":
        args = (r.num_hiddens, r.ffn_num_hiddens, r.num_heads,
                r.num_layers, r.dropout)
        encoder = transformer.TransformerEncoder(len(data.src_vocab), *args)
        decoder = transformer.TransformerDecoder(len(data.tgt_vocab), *args)
        return seq2seq.Seq2Seq(encoder, decoder, data.tgt_vocab.pad,
                               lr=r.lr)
    args = (r.embed_size, r.num_hiddens, r.num_layers, r.dropout)
    with warnings.catch_warnings():
        # nn.GRU warns that one layer has no dropout between layers;
        # the attention still uses the dropout.
        warnings.filterwarnings("ignore", "dropout option", UserWarning)
        encoder = seq2seq.Seq2SeqEncoder(len(data.src_vocab), *args)
        if r.attention == "none":
            decoder = seq2seq.Seq2SeqDecoder(len(data.tgt_vocab), *args)
        else:
            attention = None if r.attention == "additive" else \
                MultiHeadAttention(r.num_hiddens, r.num_heads, r.dropout,
                                   qk_norm=r.qk_norm)
            decoder = attention_decoder.Seq2SeqAttentionDecoder(
                len(data.tgt_vocab), *args, attention=attention)
    return seq2seq.Seq2Seq(encoder, decoder, data.tgt_vocab.pad, lr=r.lr)


def train(recipe, data=None, progress=True, callbacks=()):
    """Build and train the recipe's model.

    ``data`` defaults to ``build_data(recipe)``; ``callbacks`` are
    given to the ``Trainer`` (e.g. a ``d2lmini.snapshots`` recorder).
    Training draws its batch order from the data's generator, so a
    ``data`` that trained another model before gives other numbers
    than a fresh one.

    Returns:
        ``(model, data, history)``; the model is in eval mode.
    """
    data = build_data(recipe) if data is None else data
    model = build_model(recipe, data)
    history = _trainer(recipe, progress, callbacks).fit(model, data)
    return model, data, history


class EvalResult(NamedTuple):
    """What ``evaluate`` measured; BLEU and chrF are in 0-100.

    ``bleu`` is sacreBLEU corpus BLEU (tokenize='none') against all the
    corpus's translations of each source, ``bleu_single`` against the
    first one only; ``book_bleu`` is the mean of the book's sentence
    ``bleu(k=2)`` against the first reference, in 0-1.
    """

    split: str
    bleu: float
    bleu_single: float
    chrf: float
    book_bleu: float
    exact: int  # hypotheses equal to one of their references
    sources: list
    hypotheses: list
    references: list
    decode_time: float  # seconds of greedy decoding
    details: str  # sacreBLEU's line for the multi-reference BLEU
    signature: str  # sacreBLEU's signatures of that BLEU and of the chrF


def _sources(data, split):
    if split not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test', got "
                         f"{split!r}")
    pairs = getattr(data, split + "_pairs")
    if not pairs:
        raise ValueError(f"the {split} split is empty; pass "
                         f"num_{split} > 0 to the recipe or MTFraEng")
    return list(dict.fromkeys(e for e, _ in pairs))  # unique, in order


def evaluate(model, data, split="test", *, sources=None, batch_size=250):
    """Greedy-translate the unique English sources of a split and score.

    Args:
        model: a trained ``Seq2Seq``.
        data: the ``MTFraEng`` the model was trained on.
        split: ``'test'`` (held out), ``'val'`` or ``'train'``.
        sources: English sentences of the corpus to use instead of a
            split (e.g. another recipe's test sources).
        batch_size: sentences decoded at once.

    Returns:
        An ``EvalResult``; outputs keep ``<unk>``.
    """
    if sources is None:
        sources = _sources(data, split)
    else:
        sources, split = list(sources), "sources"
    references = [data.references(s) for s in sources]
    hypotheses, start = [], time.perf_counter()
    for i in range(0, len(sources), batch_size):
        hypotheses += [t.text for t in decoding.translate(
            model, data, sources[i:i + batch_size])]
    decode_time = time.perf_counter() - start
    score = metrics.corpus_bleu(hypotheses, references)
    single = [refs[:1] for refs in references]
    book = [metrics.bleu(h, refs[0], k=2) if h else 0.0
            for h, refs in zip(hypotheses, references)]
    chrf = metrics.corpus_chrf(hypotheses, references)
    return EvalResult(
        split, score.score,
        metrics.corpus_bleu(hypotheses, single).score, chrf.score,
        sum(book) / len(book),
        sum(h in refs for h, refs in zip(hypotheses, references)),
        sources, hypotheses, references, decode_time, str(score),
        f"BLEU {score.signature}; chrF2 {chrf.signature}")
