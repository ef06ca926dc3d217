  /* ---- d2lmini/js/translator.js: the translator box ------------------
   * A text box that runs the model of model.js on what the reader types,
   * greedily or with the beam search of beam.js (its width and length
   * penalty are controls), draws its attention and the beam's tree
   * (beamtree.js), and says which weights it runs. */

  const bleuText = (x) => (typeof x === "number" && Number.isFinite(x)
    ? x.toFixed(1) : null);

  /** What the page says of the weights it runs, from the translator's
   * data (what the notebook evaluated: weights_sha256, model_sha256,
   * bleu) and the served manifest (weights_sha256, and the held-out
   * bleu measured when the site was built), once loadModel checked the
   * weights against the manifest.
   *
   * Returns {case, text}: case "same" when the manifest describes the
   * model the notebook recorded (modelSha256, which covers the weights'
   * sha256), "other" when the site's build trained its own weights; or
   * null when the notebook's output names no weights (an older
   * notebook) or the manifest names the section's weights but describes
   * them otherwise (which loadModel refuses).  BLEU is given to 1 decimal, as in the sections; a
   * missing one is left out.
   */
  function weightsStatement(data, manifest) {
    if (!data.weights_sha256 || !data.model_sha256 ||
        !manifest.weights_sha256) return null;
    const theirs = bleuText(data.bleu), mine = bleuText(manifest.bleu);
    if (data.weights_sha256 === manifest.weights_sha256) {
      // The section's weights described otherwise: loadModel refuses it.
      if (data.model_sha256 !== modelSha256(manifest)) return null;
      // The BLEU the section measured, from the page itself (the
      // manifest's own is not part of what the sha256 covers).
      return {case: "same", text: "These are the weights the section " +
              `evaluated${theirs ? ` (held-out BLEU ${theirs})` : ""}.`};
    }
    // scripts/export_models.py exports only what the notebook's code,
    // data and torch train; another export of the checkpoint may not.
    const parts = (f) => JSON.stringify(FINGERPRINT.map((k) => (f || {})[k]));
    const sameCode = !data.fingerprint || !manifest.fingerprint ||
      parts(data.fingerprint) === parts(manifest.fingerprint);
    let text = sameCode
      ? "This site was built on a machine that trained its own weights " +
        "from the same code and seed (float rounding differs from one " +
        "machine to another): "
      : "This site was built with other code, data or torch than the " +
        "section's run, which trained other weights: ";
    if (mine && theirs) {
      text += `they score BLEU ${mine} on the same test sentences; the ` +
        `run this section reports scored ${theirs}.`;
    } else if (mine) {
      text += `they score BLEU ${mine} on the section's test sentences, ` +
        "which may differ from the BLEU the section reports.";
    } else {
      text += "they are not the weights the section evaluated" +
        `${theirs ? ` (which scored held-out BLEU ${theirs})` : ""}.`;
    }
    const a = manifest.bleu_signature, b = data.bleu_signature;
    if (mine && theirs && a && b && a !== b) {
      text += ` The two scores come from different sacreBLEU settings: ` +
        `${a} here, ${b} in the section.`;
    }
    return {case: "other", text};
  }

  // ---- explorer: translator ---------------------------------------------
  const WORD = /[\p{L}\p{N}]/u;

  /** What a reader should know of the words the model read. */
  function sourceNotes(model, words) {
    const m = model.manifest, T = m.num_steps, notes = [];
    const read = words.slice(0, T);
    const unknown = [...new Set(read.filter((tok) => !model.srcIndex.has(tok)))];
    if (!words.some((tok) => WORD.test(tok))) {
      notes.push("it has no words, only punctuation; the model reads it anyway");
    }
    if (unknown.length) {
      notes.push(`not in the model's vocabulary, read as <unk>: ${unknown.join(", ")}`);
    }
    if (words.length > T) {
      notes.push(`only the first ${T} of its ${words.length} words are ` +
                 "read, without <eos>: the model reads at most " +
                 `${T} tokens`);
    } else if (words.length === T) {
      notes.push(`its ${T} words fill every step: <eos> is cut`);
    }
    return notes;
  }

  function mountTranslator(rootEl, data) {
    const about = el("p", {class: "d2l-checkpoint"}, rootEl);
    about.append("The box runs checkpoint ");
    el("code", {}, about, data.checkpoint);
    about.append(` (recipe key ${data.fingerprint.recipe}): the model ` +
                 "this section trains and evaluates, in your browser, " +
                 "with no server.");
    // Which weights it runs, once they loaded (weightsStatement).
    const weightsNote = el("p", {class: "d2l-weights", hidden: ""}, rootEl);
    const details = el("details", {class: "d2l-translator-box"}, rootEl);
    el("summary", {}, details,
       `Translate your own sentence in this page (loads the model: ` +
       `${data.size_mb.toFixed(1)} MB)`);
    const status = el("p", {class: "d2l-status", role: "status"}, details);
    const form = el("form", {class: "d2l-controls", hidden: ""}, details);
    const inputId = `${rootEl.id}-sentence`;
    el("label", {for: inputId}, form, "English");
    const input = el("input", {id: inputId, type: "text", value: data.example,
                               size: 36, autocomplete: "off", spellcheck: "false"}, form);
    el("button", {type: "submit"}, form, "Translate");
    // Beam search: its width and GNMT's length penalty (1 and 0: greedy
    // decoding, what the section evaluated).
    const beamControl = rangeControl(form, {
      idPrefix: rootEl.id, name: "beam", label: "beam", min: 1, max: BEAM_MAX,
      step: 1, value: 1});
    const alphaControl = rangeControl(form, {
      idPrefix: rootEl.id, name: "alpha", label: "length penalty α", min: 0,
      max: ALPHA_MAX, step: 0.5, value: 0});
    let headSelect = null;
    if (data.num_heads > 1) {
      const headId = `${rootEl.id}-head`;
      el("label", {for: headId}, form, "head");
      headSelect = el("select", {id: headId}, form);
      el("option", {value: "mean"}, headSelect, `mean of ${data.num_heads} heads`);
      for (let k = 0; k < data.num_heads; k++) el("option", {value: k}, headSelect, `head ${k + 1}`);
    }
    if ((data.examples || []).length) {
      const row = el("div", {class: "d2l-examples"}, form);
      el("span", {}, row, "Examples: ");
      for (const sentence of data.examples) {
        const b = el("button", {type: "button"}, row, sentence);
        b.addEventListener("click", () => { input.value = sentence; run(); });
      }
    }
    const output = el("p", {class: "d2l-output", "aria-live": "polite"}, details);
    const notes = el("p", {class: "d2l-note"}, details);
    const chart = el("div", {class: "d2l-chart"}, details);
    const beamView = el("div", {class: "d2l-beam"}, details);
    let model = null, loading = null, last = null;

    /** The beam width and length penalty the controls are set to. */
    function search() {
      const k = Number(beamControl.input.value);
      const alpha = Number(alphaControl.input.value);
      beamControl.out.textContent = String(k);
      alphaControl.out.textContent = alpha.toFixed(1);
      beamControl.input.setAttribute("aria-valuetext", k === 1
        ? "1 (greedy search when α is 0)" : `${k} hypotheses`);
      alphaControl.input.setAttribute("aria-valuetext", `α = ${alpha.toFixed(1)}`);
      return {k, alpha, greedy: k === 1 && alpha === 0};
    }

    /** One attention row (h, S) as the head control shows it. */
    function headRow(weights) {
      const head = headSelect ? headSelect.value : "mean", h = weights.length;
      return head === "mean" || h === 1
        ? weights[0].map((_, j) => weights.reduce((a, w) => a + w[j], 0) / h)
        : weights[Number(head)];
    }

    function showBeam(result) {
      beamView.replaceChildren();
      if (!result.steps) return;
      const which = result.srcTokens;
      const row = el("div", {class: "d2l-beam-row"});
      const showNode = (node) => {
        row.replaceChildren();
        const title = `Attention of step ${node.step}, which chose ` +
          `“${node.token}” (${beamPrefix(node)})`;
        const values = [headRow(node.attention)];
        heatmap(row, {values, rows: [node.token], cols: which, title, cell: 30,
                      xlabel: "source tokens",
                      label: `${title}: ` + values[0].map((v, j) =>
                        `${which[j]} ${v.toFixed(2)}`).join(", ")});
        row.dataset.step = String(node.step);
        row.dataset.slot = String(node.slot);
      };
      hypothesesTable(beamView, result);
      el("p", {class: "d2l-note"}, beamView, "Hover over or tab to a node " +
         "to see the attention row of the step that chose its token.");
      const scroll = el("div", {class: "d2l-beam-scroll"}, beamView);
      beamTree(scroll, result, showNode);
      beamView.appendChild(row);
      showNode(result.best);
      beamTable(beamView, result);
    }

    function show(result) {
      showBeam(result);
      const head = headSelect ? headSelect.value : "mean";
      const maps = result.attention, h = maps.length;
      const values = head === "mean" || h === 1
        ? maps[0].map((row, i) => row.map((_, j) => maps.reduce((a, mp) => a + mp[i][j], 0) / h))
        : maps[Number(head)];
      const which = h === 1 ? "" : head === "mean" ? ` (mean of ${h} heads)` : ` (head ${Number(head) + 1})`;
      chart.replaceChildren();
      const title = data.recipe.attention === "transformer"
        ? `The last decoder block's attention to the source, per output token${which}`
        : `Attention of each output token${which}`;
      heatmap(chart, {
        values, rows: result.outTokens, cols: result.srcTokens, title,
        xlabel: "source tokens", ylabel: "output tokens", cell: 30,
        label: `${title}: ` + values.map((row, i) => `${result.outTokens[i]}: ` +
          row.map((v, j) => `${result.srcTokens[j]} ${v.toFixed(2)}`).join(", ")).join("; ")});
      numbersTable(chart, title, result.outTokens, result.srcTokens, values, 3);
    }

    function run() {
      const start = performance.now();
      const sentence = input.value;
      // What the model would read: trim() keeps characters that the
      // tokenizer drops (U+0085, U+001C-U+001F).
      if (!tokenize(sentence).length) {
        status.textContent = "Type an English sentence first, for example " +
          `“${data.example}”, then press Enter.`;
        status.className = "d2l-status d2l-hint";
        output.textContent = ""; notes.textContent = ""; chart.replaceChildren();
        beamView.replaceChildren();
        last = null;
        return;
      }
      const how = search();
      try {
        last = how.greedy ? translate(model, sentence) : beamTranslate(
          model, sentence, {beamSize: how.k, lengthPenalty: how.alpha});
      } catch (err) {
        status.textContent = `This sentence could not be translated ` +
          `(${err.message}).`;
        status.className = "d2l-status d2l-error";
        output.textContent = ""; notes.textContent = ""; chart.replaceChildren();
        beamView.replaceChildren();
        last = null;
        return;
      }
      status.className = "d2l-status";
      status.textContent = "";
      output.replaceChildren();
      el("b", {}, output, "French: ");
      output.appendChild(document.createTextNode(last.tokens.join(" ") || "(empty)"));
      if (!last.finished) output.appendChild(document.createTextNode(
        ` (stopped after ${last.tokens.length} tokens without <eos>)`));
      if (!how.greedy) output.appendChild(document.createTextNode(
        ` (beam ${how.k}, α = ${how.alpha.toFixed(1)}: log P ` +
        `${fmt(last.logProb, 3)}, score ${fmt(last.score, 3)})`));
      const found = sourceNotes(model, last.words);
      notes.textContent = found.length ? `Your sentence: ${found.join("; ")}.` : "";
      show(last);
      requestAnimationFrame(() => {
        rootEl.dataset.lastMs = String(performance.now() - start);
        rootEl.dataset.translations = String(Number(rootEl.dataset.translations || 0) + 1);
      });
    }

    async function load() {
      if (loading) return loading;
      status.textContent = "Loading the model…";
      status.className = "d2l-status d2l-loading";
      rootEl.dataset.state = "loading";
      const start = performance.now();
      loading = loadModel(data.base, data.checkpoint, (f) => {
        status.textContent = `Loading the model… ${Math.round(100 * f)}%`;
      }, {attention: data.recipe.attention, num_heads: data.num_heads,
          fingerprint: data.fingerprint, weights_sha256: data.weights_sha256,
          model_sha256: data.model_sha256}).then((m) => {
        model = m;
        const said = weightsStatement(data, m.manifest);
        rootEl.dataset.weights = said ? said.case : "unknown";
        if (said) {
          weightsNote.textContent = said.text;
          weightsNote.className = `d2l-weights d2l-weights-${said.case}`;
          weightsNote.hidden = false;
        }
        form.hidden = false;
        rootEl.dataset.state = "ready";
        rootEl.dataset.loadMs = String(performance.now() - start);
        run();
        input.focus();
      }, (err) => {
        status.textContent = `The model could not be loaded (${err.message}). ` +
          "The other figures on this page do not need it; to get it, build " +
          "the website with `make book`, which exports the model.";
        status.className = "d2l-status d2l-error";
        status.setAttribute("role", "alert");
        rootEl.dataset.state = "error";
      });
      return loading;
    }

    details.addEventListener("toggle", () => { if (details.open) load(); });
    form.addEventListener("submit", (event) => { event.preventDefault(); run(); });
    if (headSelect) headSelect.addEventListener("change", () => { if (last) show(last); });
    for (const c of [beamControl, alphaControl]) {
      c.input.addEventListener("input", () => { search(); if (last) run(); });
    }
    search();
    rootEl.d2l = {load, translate: (s) => translate(model, s),
                  beamTranslate: (s, k, alpha) => beamTranslate(
                    model, s, {beamSize: k, lengthPenalty: alpha}),
                  get model() { return model; }};
  }
