"""Live explorers that run in the page: in Jupyter and on the website.

Each explorer is an HTML output: a ``<div data-d2l-live=...>`` holding
its data as JSON, followed by this package's JavaScript (``live_js()``,
put together from ``d2lmini/js/``), which computes and draws the figure
in the browser and redraws it when a control moves.  No kernel and no
server take part, so the same output is live in JupyterLab (once the
cell has run: Jupyter runs scripts only in trusted outputs) and on the
static website.

- ``masked_softmax_explorer``: valid length and temperature sliders over
  the masked softmax weights;
- ``scaling_explorer``: a slider for d over the scores of random queries
  and keys and each query's largest softmax weight;
- ``kernel_regression_explorer``: Nadaraya-Watson attention pooling, with
  the kernel's width and type and a marked query;
- ``positional_encoding_explorer``: the Transformer's sinusoidal
  positions P as a heatmap and as curves, with sliders for a position
  and a frequency;
- ``translator``: a text box that translates with a trained model in the
  page (GRU with additive or multi-head attention, or a Transformer),
  from weights that ``export_model`` writes (the website's build
  exports them: ``scripts/export_models.py``) with their held-out BLEU;
  the page says whether they are the weights the section evaluated;
- ``training_scrubber``: the attention of probe sentences at the steps
  recorded while a model trained (``d2lmini.snapshots``), scrubbed with
  a slider or played, beside the loss and BLEU curves;
- ``digit_classifier``: a 32 x 32 grid to draw a digit on (mouse, touch
  or keyboard), which the vision section's ViT classifies in the page:
  the ten probabilities and each head's ``<cls>`` attention over the
  patches, redrawn at every stroke, from weights that ``export_vit``
  writes (the website's build exports them);
- ``text_writer``: a text box whose French beginning the pretraining
  section's language model continues in the page, token by token, with
  controls for the temperature, top-k, top-p and the seed (the tokens
  ``d2lmini.generation.generate`` draws), the next-token distribution
  as bars and each head's causal self-attention, from weights that
  ``export_lm`` writes (the website's build exports them).

The code lives in six modules, whose names this one offers:
``d2lmini.live_page`` (the script, ``LiveHTML``, ``payloads``,
``with_site_view``), ``d2lmini.live_explorers`` (the four figure
explorers), ``d2lmini.live_translator`` (the translator and the
model's export), ``d2lmini.live_training`` (the training scrubber),
``d2lmini.live_vision`` (the digit classifier and its ViT's export) and
``d2lmini.live_lm`` (the text writer and its language model's
export).
Shape legend: L queries (sampled ones in the scaling explorer), S keys,
D features.
"""

from .live_explorers import (
    DIMS,
    kernel_regression_explorer,
    masked_softmax_explorer,
    positional_encoding_explorer,
    sample_scores,
    scaling_explorer,
)
from .live_lm import (
    LM_MANIFEST_FORMAT,
    LM_MODEL_FIELDS,
    LM_NOTEBOOK_FIELDS,
    export_lm,
    lm_model_sha256,
    lm_notebook_record,
    lm_tensors,
    lm_weights_bytes,
    text_writer,
)
from .live_page import (
    JS_DIR,
    JS_PARTS,
    LM_PARTS,
    VISION_PARTS,
    LiveHTML,
    live_js,
    lm_js,
    payloads,
    vision_js,
    with_site_view,
)
from .live_training import SCRUBBER_MAX_BYTES, training_scrubber
from .live_translator import (
    MANIFEST_FORMAT,
    MODEL_FIELDS,
    MODELS_URL,
    NOTEBOOK_FIELDS,
    PAGE_ATTENTIONS,
    bleu_fields,
    export_model,
    model_sha256,
    notebook_record,
    translator,
    weights_bytes,
)
from .live_vision import (
    VIT_MANIFEST_FORMAT,
    VIT_MODEL_FIELDS,
    VIT_NOTEBOOK_FIELDS,
    digit_classifier,
    export_vit,
    vit_model_sha256,
    vit_notebook_record,
)

__all__ = ["DIMS", "JS_DIR", "JS_PARTS", "LM_MANIFEST_FORMAT",
           "LM_MODEL_FIELDS", "LM_NOTEBOOK_FIELDS", "LM_PARTS",
           "MANIFEST_FORMAT", "MODEL_FIELDS", "MODELS_URL",
           "NOTEBOOK_FIELDS", "PAGE_ATTENTIONS", "LiveHTML",
           "SCRUBBER_MAX_BYTES", "VISION_PARTS", "VIT_MANIFEST_FORMAT",
           "VIT_MODEL_FIELDS",
           "VIT_NOTEBOOK_FIELDS", "bleu_fields", "digit_classifier",
           "export_lm", "export_model", "export_vit",
           "kernel_regression_explorer", "live_js", "lm_js",
           "lm_model_sha256", "lm_notebook_record", "lm_tensors",
           "lm_weights_bytes", "masked_softmax_explorer", "model_sha256",
           "notebook_record", "payloads",
           "positional_encoding_explorer", "sample_scores",
           "scaling_explorer", "text_writer", "training_scrubber",
           "translator", "vision_js", "vit_model_sha256",
           "vit_notebook_record", "weights_bytes", "with_site_view"]
