"""d2lmini: the helper package of the attention chapter.

Readers of d2l can write ``import d2lmini as d2l`` and then
``d2l.masked_softmax(...)`` or ``d2l.MTFraEng(...)``: the chapter's
public names are offered here and loaded lazily, on first use, so that
``d2l.masked_softmax`` imports the layers and nothing else (no plotting
or widget library).  ``from d2lmini import attention`` works as well.
The layers (``attention``) know nothing of data, training or plotting.
"""

import importlib

__version__ = "0.2.0"

# name -> the module that defines it
_NAMES = {
    "utils": ("set_seed", "check_shape"),
    "attention": ("masked_softmax", "valid_mask", "DotProductAttention",
                  "AdditiveAttention", "MultiHeadAttention"),
    "pooling": ("nadaraya_watson", "NWKernelRegression"),
    "transformer": ("PositionalEncoding", "PositionWiseFFN", "AddNorm",
                    "TransformerEncoderBlock", "TransformerDecoderBlock",
                    "TransformerEncoder", "TransformerDecoder"),
    "corpus": ("read_pairs", "preprocess", "tokenize"),
    "data": ("Vocab", "MTFraEng"),
    "seq2seq": ("Seq2SeqEncoder", "Seq2SeqDecoder", "Seq2Seq"),
    "attention_decoder": ("Seq2SeqAttentionDecoder",),
    "decoding": ("greedy_decode", "translate"),
    "splits": ("split_pairs",),
    "trainer": ("Trainer", "History"),
    "metrics": ("bleu", "corpus_bleu"),
    "experiment": ("Recipe", "BOOK_RECIPE", "CHAPTER_RECIPE",
                   "TRANSFORMER_RECIPE", "evaluate"),
    "cache": ("train_or_load", "save_checkpoint", "load_checkpoint"),
    "plot": ("show_heatmaps", "plot_loss_curves"),
}
_WHERE = {name: module for module, names in _NAMES.items()
          for name in names}
# Modules without top-level names, importable as d2lmini.<module> too.
_MODULES = (*_NAMES, "live", "notebook", "widgets")

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        module = importlib.import_module(f".{_WHERE[name]}", __name__)
        value = getattr(module, name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'd2lmini' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE) | set(_MODULES))
