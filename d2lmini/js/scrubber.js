  /* ---- d2lmini/js/scrubber.js: attention across training -------------
   * The snapshots that d2lmini.snapshots recorded while a model trained
   * (d2lmini.live.training_scrubber): a slider over the recorded steps,
   * with play and pause, the chosen probe sentence's attention at that
   * step (one heatmap per head), its output and sentence BLEU, and the
   * loss, val BLEU and attention curves with the step marked.
   * Nothing is computed but the drawing: the weights come as bytes,
   * round(255 w). */

  const PLAY_MS = 450;  // a snapshot per tick while playing

  /** The weights of every snapshot and probe: maps[k][p][head] is a
   * rows x cols array, decoded once from the bytes. */
  function snapshotMaps(data) {
    const bytes = Uint8Array.from(atob(data.attention), (c) => c.charCodeAt(0));
    const h = data.heads;
    let at = 0;
    const maps = data.outputs.map((outs) => outs.map((out, p) => {
      const T = out.length, S = data.probes[p].src.length;
      return Array.from({length: h}, () => Array.from({length: T}, () => {
        const row = Array.from(bytes.subarray(at, at + S), (q) => q / 255);
        at += S;
        return row;
      }));
    }));
    if (at !== bytes.length) {
      throw new Error(`its attention holds ${bytes.length} weights, not the ` +
                      `${at} its outputs and sources need`);
    }
    return maps;
  }

  function mountTraining(rootEl, data) {
    const mountStart = performance.now();
    const K = data.steps.length, P = data.probes.length, h = data.heads;
    if (!K || !P) throw new Error("it holds no snapshot or no probe");
    const maps = snapshotMaps(data);
    if (data.title) el("p", {class: "d2l-title"}, rootEl, data.title);
    const controls = el("div", {class: "d2l-controls"}, rootEl);
    const step = rangeControl(controls, {
      idPrefix: rootEl.id, name: "snapshot", label: "training step",
      min: 0, max: K - 1, step: 1, value: 0});
    const play = el("button", {type: "button", "aria-pressed": "false",
                               name: "play"}, controls, "▶ Play");
    const pick = el("div", {class: "d2l-control"}, controls);
    el("label", {for: `${rootEl.id}-probe`}, pick, "sentence");
    const probe = el("select", {id: `${rootEl.id}-probe`, name: "probe"}, pick);
    data.probes.forEach((pr, p) => {
      const mark = pr.pair ? " (adjective after its noun in French)" : "";
      el("option", {value: p}, probe, pr.sentence + mark);
    });
    probe.value = String(data.probe);
    const said = el("p", {class: "d2l-status", "aria-live": "polite"}, rootEl);
    const chart = el("div", {class: "d2l-chart"}, rootEl);
    let timer = null;

    function curvesAt(k, parent) {
      const s = data.steps[k], row = el("div", {class: "d2l-row"}, parent);
      const tc = data.train_curve, size = {width: 330, height: 200};
      curves(row, {
        ...size, xs: tc.steps, marker: s, title: "Loss", xlabel: "step",
        lines: [{ys: tc.loss, colour: PAIR[0], name: "train"},
                {xs: data.steps, ys: data.val_loss, colour: PAIR[1], name: "val"}],
        points: {xs: [s], ys: [data.val_loss[k]]},
        label: `Training loss from ${fmt(tc.loss[0], 2)} to ` +
          `${fmt(tc.loss[tc.loss.length - 1], 2)} and val loss from ` +
          `${fmt(data.val_loss[0], 2)} to ${fmt(data.val_loss[K - 1], 2)} over ` +
          `${data.last_step} steps; at step ${s} the val loss is ${fmt(data.val_loss[k], 2)}`});
      curves(row, {
        ...size, xs: data.steps, marker: s, title: "Val BLEU", xlabel: "step",
        lines: [{ys: data.val_bleu, colour: PAIR[0]}],
        points: {xs: [s], ys: [data.val_bleu[k]]},
        label: `Val BLEU from ${fmt(data.val_bleu[0], 1)} to ` +
          `${fmt(data.val_bleu[K - 1], 1)}; at step ${s} it is ${fmt(data.val_bleu[k], 1)}`});
      curves(row, {
        ...size, xs: data.steps, marker: s, xlabel: "step", legend: "bottom",
        title: "The probes' attention (0 to 1)",
        lines: [{ys: data.diagonal, colour: PAIR[0], name: "on the diagonal"},
                {ys: data.concentration, colour: PAIR[1], dash: "4 3",
                 name: "concentration"}],
        points: {xs: [s], ys: [data.diagonal[k]]},
        label: `Share of the probes' output rows whose largest weight is on the ` +
          `diagonal, from ${fmt(data.diagonal[0], 2)} to ${fmt(data.diagonal[K - 1], 2)}, ` +
          `and their concentration, from ${fmt(data.concentration[0], 2)} to ` +
          `${fmt(data.concentration[K - 1], 2)}; at step ${s} they are ` +
          `${fmt(data.diagonal[k], 2)} and ${fmt(data.concentration[k], 2)}`});
    }

    function draw() {
      const start = performance.now();
      const k = Number(step.input.value), p = Number(probe.value);
      const s = data.steps[k], pr = data.probes[p], out = data.outputs[k][p];
      const words = out.filter((t) => t !== "<eos>").join(" ") || "(nothing)";
      const text = `Step ${s} of ${data.last_step} (snapshot ${k + 1} of ${K}): ` +
        `“${words}”, sentence BLEU ${fmt(data.bleu[k][p], 1)}; val BLEU ` +
        `${fmt(data.val_bleu[k], 1)}, val loss ${fmt(data.val_loss[k], 2)}`;
      step.out.textContent = `${s} of ${data.last_step}`;
      step.input.setAttribute("aria-valuetext", `step ${s} of ${data.last_step}`);
      said.textContent = text;
      chart.replaceChildren();
      el("p", {class: "d2l-references"}, chart,
         `References: ${pr.references.map((r) => `“${r}”`).join(", ")}`);
      const row = el("div", {class: "d2l-row"}, chart);
      const marks = pr.pair ? {cols: pr.pair} : {};
      maps[k][p].forEach((values, head) => {
        const who = h > 1 ? `head ${head + 1}` : "attention";
        heatmap(row, {
          values, rows: out, cols: pr.src, marks, cell: h > 1 ? 26 : 30,
          annotate: h === 1, digits: 2, title: `${who}, step ${s}`,
          label: `${who} of “${pr.sentence}” at step ${s}, one row per output token: ` +
            values.map((w, i) => `${out[i]}: ${w.map((v) => v.toFixed(2)).join(" ")}`)
              .join("; ")});
      });
      maps[k][p].forEach((values, head) => numbersTable(
        chart, `${h > 1 ? `Head ${head + 1}` : "Attention"} at step ${s}`,
        // Two decimals: the bytes carry a weight to within 1/510, and a
        // third decimal would show that rounding (0.5 as 0.502).
        out, pr.src, values, 2, h > 1 ? `head ${head + 1}` : undefined));
      curvesAt(k, chart);
      rootEl.dataset.snapshot = String(k);
      rootEl.dataset.step = String(s);
      rootEl.dataset.probe = String(p);
      rootEl.dataset.drawMs = String(performance.now() - start);
      rootEl.dataset.draws = String(Number(rootEl.dataset.draws || 0) + 1);
    }

    function stop() {
      if (timer !== null) clearInterval(timer);
      timer = null;
      play.textContent = "▶ Play";
      play.setAttribute("aria-pressed", "false");
      rootEl.dataset.playing = "false";
    }

    function tick() {
      const k = Number(step.input.value);
      if (k >= K - 1) { stop(); return; }
      step.input.value = String(k + 1);
      draw();
    }

    play.addEventListener("click", () => {
      if (timer !== null) { stop(); return; }
      if (Number(step.input.value) >= K - 1) step.input.value = "0";
      play.textContent = "⏸ Pause";
      play.setAttribute("aria-pressed", "true");
      rootEl.dataset.playing = "true";
      draw();
      timer = setInterval(tick, PLAY_MS);
    });
    step.input.addEventListener("input", () => { stop(); draw(); });
    probe.addEventListener("change", draw);
    rootEl.d2l = {maps, draw, stop};
    draw();
    rootEl.dataset.mountMs = String(performance.now() - mountStart);
  }
