/* d2lmini live explorers, the language-model part: the text writer (type
 * the beginning of a French sentence, and the pretraining section's
 * language model continues it in the page).
 * d2lmini.live.lm_js() puts d2lmini/js/lm.js into the function below;
 * only the text writer's output carries this script, after the page's
 * script (wrapper.js), whose helpers it takes from d2lLive.parts.  It
 * adds its explorer with d2lLive.addMount and offers its computing
 * functions as d2lLM (in a browser and in Node).
 */
(function (root) {
  "use strict";
  const live = root.d2lLive;
  if (!live || root.d2lLM) return;  // one copy per page
  const {el, svg, shown, numbersTable, heatmap, matvec, linear, multiHead,
         tensorsOf, embed, addNorm, ffn, positionalEncoding, tokenize,
         rangeControl, sha256Hex, MAX_SIZE, isSize, isObject, show,
         weightsFileProblems, tensorProblems, throwProblems, canonicalJSON,
         pickFields, fetchManifest, fetchWeights} = live.parts;

  // @parts: d2lmini.live puts the files of LM_PARTS here, in order.

  live.addMount("text-writer", mountTextWriter);
})(typeof window !== "undefined" ? window : globalThis);
if (typeof document !== "undefined") window.d2lLive.mountAll();
