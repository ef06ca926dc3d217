/* d2lmini live explorers: the chapter's interactive figures, computed in
 * the page with no kernel and no server (d2lmini/live.py puts this script
 * into each explorer's HTML output).
 *
 * - masked softmax: sliders for the valid length and a temperature over
 *   the weights heatmap;
 * - scaling: a slider for the size d of queries and keys over histograms
 *   of the scores and of each query's largest softmax weight;
 * - kernel regression: Nadaraya-Watson attention pooling with a width
 *   slider, a kernel choice and a marked query whose weights are drawn;
 * - positional encoding: the Transformer's sinusoidal positions P as a
 *   heatmap and as the curves of one sine/cosine pair, with sliders for a
 *   position and a frequency;
 * - translator: a trained d2lmini Seq2Seq (GRU encoder, GRU decoder with
 *   additive or multi-head attention; or a Transformer) run in the page
 *   from the weights that scripts/export_models.py exported, with
 *   greedy decoding or beam search (its width and length penalty are
 *   controls; the beam is drawn as a tree); once loaded, the box says
 *   whether those are the weights the section evaluated, and their
 *   held-out BLEU;
 * - training: a trained model's attention to probe sentences at the
 *   steps recorded while it trained (d2lmini.snapshots), scrubbed with
 *   a slider or played, beside its loss and BLEU curves.
 *
 * Every chart is an SVG with role="img", an aria-label that sums it up, a
 * <title> per cell and a table of the numbers it draws (in a <details>);
 * colours come from viridis, whose lightness rises steadily (readable in
 * greyscale and with colour-blindness), or for signed values from a
 * blue-white-orange map.  Runs in a browser and in Node
 * (the model functions only).
 *
 * The script is put together from the files of d2lmini/js/ by
 * d2lmini.live.live_js(), in this order, inside the one function below
 * (one scope: each part uses the names of the others; no build tool):
 * base.js (DOM helpers, numbers as text), charts.js (colour maps,
 * heatmaps, histograms, line charts), tokenizer.js (what the reader
 * types, as d2lmini.tokenizer reads the corpus), model.js (the models'
 * forward pass, greedy decoding), beam.js (beam search), sha256.js
 * (SHA-256 where the browser offers none), manifest.js (checking and
 * loading a model folder), explorers.js (the four figure explorers),
 * beamtree.js (the beam drawn as a tree), translator.js (the
 * translator box), scrubber.js (training, scrubbed), boot.js (the
 * style sheet, mounting every explorer).
 * This file, wrapper.js, holds the function and the names it exports.
 * The digit classifier (vit.js) comes in a script of its own,
 * vision-wrapper.js, which only its output carries, and so does the
 * text writer (lm.js, in lm-wrapper.js): they take the helpers they
 * share from d2lLive.parts.
 */
(function (root) {
  "use strict";
  if (root.d2lLive) return;  // one copy per page, however many explorers

  // @parts: d2lmini.live puts the files of JS_PARTS here, in order.

  root.d2lLive = {mountAll, preprocess, tokenize, TEXT_RULES, makeModel,
                  loadModel, translate, beamTranslate, lengthPenaltyOf,
                  readSource, maskedSoftmaxRow,
                  nadarayaWatson, positionalEncoding, viridis,
                  weightsStatement, manifestProblems, expectedTensors,
                  extent, MANIFEST_FORMAT, MODEL_FIELDS, modelSha256,
                  sha256Hex, addMount,
                  // What js/vit.js and js/lm.js, in scripts of their
                  // own, share.
                  parts: {el, svg, maxOf, shown, numbersTable, heatmap,
                          matvec, softmax, linear, headMemory, multiHead,
                          tensorsOf, embed, addNorm, ffn, positionalEncoding,
                          tokenize, rangeControl,
                          layerNorm, sha256Hex, MAX_SIZE, isSize, isObject,
                          show, weightsFileProblems, tensorProblems,
                          throwProblems, byCodePoint, canonicalJSON,
                          pickFields, fetchManifest, fetchWeights}};
  if (typeof module !== "undefined") module.exports = root.d2lLive;
})(typeof window !== "undefined" ? window : globalThis);
if (typeof document !== "undefined") window.d2lLive.mountAll();
