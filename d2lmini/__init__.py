"""d2lmini: the helper package of the attention chapter.

Readers of d2l can write ``import d2lmini as d2l`` and then
``d2l.masked_softmax(...)`` or ``d2l.MTFraEng(...)``: the chapter's
public names are offered here and loaded lazily, on first use, so that
``d2l.masked_softmax`` imports the layers and nothing else (no plotting
or widget library).  ``from d2lmini import attention`` works as well.
The layers (``attention``) know nothing of data, training or plotting.

Each submodule is compiled from source bytes that are kept in
``SOURCES`` (module name -> bytes), so ``d2lmini.cache`` fingerprints
the code that runs in this process, even after its file was edited.
"""

import importlib
import importlib.machinery
import sys

__version__ = "0.2.0"

# name -> the module that defines it
_NAMES = {
    "utils": ("set_seed", "check_shape"),
    "attention": ("masked_softmax", "valid_mask", "DotProductAttention",
                  "AdditiveAttention"),
    "multihead": ("MultiHeadAttention",),
    "pooling": ("nadaraya_watson", "NWKernelRegression"),
    "transformer_blocks": ("PositionalEncoding", "PositionWiseFFN",
                           "AddNorm", "TransformerEncoderBlock",
                           "TransformerDecoderBlock"),
    "transformer": ("TransformerEncoder", "TransformerDecoder"),
    "corpus": ("read_pairs", "preprocess", "tokenize"),
    "data": ("Vocab", "MTFraEng"),
    "seq2seq": ("Seq2SeqEncoder", "Seq2SeqDecoder", "Seq2Seq"),
    "attention_decoder": ("Seq2SeqAttentionDecoder",),
    "decoding": ("greedy_decode", "translate"),
    "beam": ("beam_decode", "beam_translate"),
    "splits": ("split_pairs",),
    "trainer": ("Trainer", "History"),
    "metrics": ("bleu", "corpus_bleu"),
    "recipes": ("Recipe", "BOOK_RECIPE", "CHAPTER_RECIPE",
                "TRANSFORMER_RECIPE"),
    "experiment": ("evaluate",),
    "cache": ("train_or_load", "save_checkpoint", "load_checkpoint"),
    "snapshots": ("SnapshotRecorder",),
    "plot": ("plot_loss_curves",),
    "heatmaps": ("show_heatmaps",),
}
_WHERE = {name: module for module, names in _NAMES.items()
          for name in names}
# Modules without top-level names, importable as d2lmini.<module> too.
_MODULES = (*_NAMES, "alignment", "digits", "distributed", "generation",
            "live", "lm", "notebook", "pretraining", "report", "timing",
            "train", "vision", "vit", "widgets")

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


# "d2lmini.<module>" -> the source bytes that module was compiled from
SOURCES = {}


class _KeepSource(importlib.machinery.SourceFileLoader):
    """Compile a submodule from its source and keep the bytes compiled.

    (No bytecode cache is read: a ``.pyc`` says which file it came from,
    not which bytes.  Compiling the whole package takes about 40 ms.)
    """

    def get_code(self, fullname):
        source = self.get_data(self.path)
        SOURCES[fullname] = source
        return self.source_to_code(source, self.path)


class _Finder:
    """Load ``d2lmini.*`` submodules with ``_KeepSource``."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if not fullname.startswith(__name__ + "."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path,
                                                        target)
        if (spec is not None and type(spec.loader)
                is importlib.machinery.SourceFileLoader):
            spec.loader = _KeepSource(spec.loader.name, spec.loader.path)
        return spec


# Once per process (a reload replaces the finder, with this SOURCES).
sys.meta_path[:] = [f for f in sys.meta_path
                    if getattr(f, "__module__", None) != __name__]
sys.meta_path.insert(0, _Finder())
