/* d2lmini live explorers, the vision part: the digit classifier (draw a
 * digit, and the vision section's ViT classifies it in the page).
 * d2lmini.live.vision_js() puts d2lmini/js/vit.js into the function
 * below; only the digit classifier's output carries this script, after
 * the page's script (wrapper.js), whose helpers it takes from
 * d2lLive.parts.  It adds its explorer with d2lLive.addMount and offers
 * its computing functions as d2lVision (in a browser and in Node).
 */
(function (root) {
  "use strict";
  const live = root.d2lLive;
  if (!live || root.d2lVision) return;  // one copy per page
  const {el, svg, maxOf, shown, numbersTable, heatmap, matvec, softmax,
         linear, headMemory, multiHead, tensorsOf, layerNorm, sha256Hex, MAX_SIZE,
         isSize, isObject, show, weightsFileProblems, tensorProblems,
         throwProblems, byCodePoint, canonicalJSON, pickFields,
         fetchManifest, fetchWeights} = live.parts;

  // @parts: d2lmini.live puts the files of VISION_PARTS here, in order.

  live.addMount("digit-classifier", mountDigitClassifier);
})(typeof window !== "undefined" ? window : globalThis);
if (typeof document !== "undefined") window.d2lLive.mountAll();
