  /* ---- d2lmini/js/boot.js: mounting the explorers --------------------
   * The page's style sheet, and every [data-d2l-live] output started
   * with its data; one that fails says so in its own box. */

  const STYLE = `
.d2l-live { margin: 0.5em 0 1em; }
.d2l-live .d2l-controls { display: flex; flex-wrap: wrap; gap: 0.4em 1.5em;
  align-items: center; margin-bottom: 0.4em; }
.d2l-live .d2l-control { display: flex; gap: 0.5em; align-items: center; }
.d2l-live .d2l-control input[type=range] { width: min(60vw, 220px); }
.d2l-live output { font-variant-numeric: tabular-nums; min-width: 4em; }
.d2l-live .d2l-row { display: flex; flex-wrap: wrap; gap: 1em; }
.d2l-live svg { max-width: 100%; height: auto; overflow: visible; }
.d2l-live svg text:not([fill]) { fill: currentColor; }
.d2l-live table { font-size: 0.85em; border-collapse: collapse; }
.d2l-live th, .d2l-live td { padding: 0.1em 0.5em; text-align: right; }
.d2l-live details.d2l-numbers { width: 100%; }
.d2l-live summary { cursor: pointer; }
.d2l-live .d2l-status.d2l-hint { color: #7a4b00; }
.d2l-live .d2l-status.d2l-error { color: #b00020; font-weight: bold; }
.d2l-live .d2l-weights-other { border-left: 3px solid #E69F00;
  padding-left: 0.6em; }
.d2l-live .d2l-examples { width: 100%; display: flex; flex-wrap: wrap;
  gap: 0.3em; align-items: center; }
.d2l-live button { padding: 0.1em 0.6em; }
.d2l-live :focus-visible { outline: 3px solid #0072B2; outline-offset: 2px; }
.d2l-live .d2l-beam-scroll { overflow-x: auto; max-width: 100%; }
.d2l-live .d2l-beam-scroll svg { max-width: none; }
.d2l-live .d2l-beam-node { cursor: pointer; }
.d2l-live .d2l-beam-node:focus { outline: none; }
.d2l-live .d2l-beam-node:focus rect, .d2l-live .d2l-beam-node:hover rect {
  stroke: #000; stroke-width: 3; }
.d2l-live .d2l-hypotheses caption, .d2l-live .d2l-beam-table caption {
  text-align: left; }
.d2l-live canvas.d2l-digit-grid { width: 320px; max-width: 100%;
  height: auto; touch-action: none; user-select: none; cursor: crosshair;
  border: 1px solid #888; display: block; }
.d2l-live .d2l-digit-grid-wrap { max-width: 100%; }
.d2l-live .d2l-digit-cursor { font-size: 0.85em; margin: 0.2em 0; }
`;

  function addStyle() {
    if (!document.getElementById("d2l-live-style")) {
      el("style", {id: "d2l-live-style"}, document.head, STYLE);
    }
  }

  const MOUNTS = {"masked-softmax": mountMaskedSoftmax, scaling: mountScaling,
                  "kernel-regression": mountKernelRegression,
                  "positional-encoding": mountPositionalEncoding,
                  translator: mountTranslator, training: mountTraining};
  // Explorers whose part comes in a script of their own, after this one
  // (d2lmini.live_page.vision_js, lm_js): mountAll leaves them to it.
  const LATER = ["digit-classifier", "text-writer"];

  function addMount(kind, mount) {
    MOUNTS[kind] = mount;
  }

  function mountAll(doc) {
    addStyle();
    for (const node of (doc || document).querySelectorAll("[data-d2l-live]")) {
      if (node.dataset.d2lMounted) continue;
      const kind = node.dataset.d2lLive;
      if (LATER.includes(kind) &&
          !Object.prototype.hasOwnProperty.call(MOUNTS, kind)) continue;
      node.dataset.d2lMounted = "1";
      // JupyterLab: keys typed in an explorer are not notebook shortcuts
      // (its notebook would cancel the arrow keys of the sliders).
      node.setAttribute("data-lm-suppress-shortcuts", "true");
      node.addEventListener("keydown", (event) => event.stopPropagation());
      // One broken explorer (bad data, a kind this script does not
      // draw, an error while drawing) says so in its own box; the
      // others on the page still start.
      try {
        mountOne(node);
      } catch (err) {
        node.replaceChildren();
        node.dataset.d2lMounted = "error";
        node.dataset.d2lError = err.message;
        el("p", {class: "d2l-status d2l-error", role: "alert"}, node,
           `This explorer could not start: ${err.message}.`);
      }
    }
  }

  function mountOne(node) {
    const kind = node.dataset.d2lLive;
    const mount = Object.prototype.hasOwnProperty.call(MOUNTS, kind)
      ? MOUNTS[kind] : null;
    if (!mount) {
      throw new Error(`this page's live.js draws no explorer of kind ` +
                      `"${kind}" (only ${Object.keys(MOUNTS).join(", ")})`);
    }
    const script = node.querySelector('script[type="application/json"]');
    if (!script) throw new Error("its output holds no data");
    let data;
    try {
      data = JSON.parse(script.textContent);
    } catch (err) {
      throw new Error(`its data is not valid JSON (${err.message})`);
    }
    if (data === null || typeof data !== "object" || Array.isArray(data)) {
      throw new Error("its data is not a JSON object");
    }
    node.replaceChildren();  // drops the "needs JavaScript" note
    mount(node, data);
  }
