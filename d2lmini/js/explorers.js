  /* ---- d2lmini/js/explorers.js: the figure explorers -----------------
   * Masked softmax, scaling, kernel regression (attention pooling) and
   * positional encoding: each computes its numbers in the page, draws
   * them with charts.js and redraws when a control moves. */

  // ---- numbers -------------------------------------------------------
  /** d2lmini's masked_softmax of one row: weights of the first validLen
   * entries, zeros after them (and a row of zeros when validLen is 0). */
  function maskedSoftmaxRow(row, validLen) {
    const out = new Array(row.length).fill(0);
    if (validLen <= 0) return out;
    let max = -Infinity;
    for (let j = 0; j < validLen; j++) max = Math.max(max, row[j]);
    let sum = 0;
    for (let j = 0; j < validLen; j++) { out[j] = Math.exp(row[j] - max); sum += out[j]; }
    for (let j = 0; j < validLen; j++) out[j] /= sum;
    return out;
  }

  function std(xs) {  // population standard deviation, like numpy's
    const m = xs.reduce((a, b) => a + b, 0) / xs.length;
    return Math.sqrt(xs.reduce((a, x) => a + (x - m) * (x - m), 0) / xs.length);
  }

  function decodeFloat32(b64) {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    return new Float32Array(bytes.buffer);
  }

  // ---- explorer: masked softmax ---------------------------------------
  function rangeControl(parent, opts) {
    const id = `${opts.idPrefix}-${opts.name}`;
    const wrap = el("div", {class: "d2l-control"}, parent);
    el("label", {for: id}, wrap, opts.label);
    const input = el("input", {
      id, type: "range", min: opts.min, max: opts.max, step: opts.step,
      value: opts.value, name: opts.name}, wrap);
    const out = el("output", {for: id, "aria-live": "polite"}, wrap);
    return {input, out};
  }

  function mountMaskedSoftmax(rootEl, data) {
    const scores = data.scores, L = scores.length, S = scores[0].length;
    const controls = el("div", {class: "d2l-controls"}, rootEl);
    const len = rangeControl(controls, {
      idPrefix: rootEl.id, name: "valid-length", label: "valid length",
      min: 0, max: S, step: 1, value: data.valid_len});
    const temp = rangeControl(controls, {
      idPrefix: rootEl.id, name: "log-temperature",
      label: "temperature τ (log scale)", min: -1, max: 1, step: 0.05,
      value: Math.log10(data.temperature)});
    const chart = el("div", {class: "d2l-chart"}, rootEl);

    function draw() {
      const validLen = Number(len.input.value);
      const tau = Math.pow(10, Number(temp.input.value));
      len.out.textContent = String(validLen);
      temp.out.textContent = tau.toFixed(2);
      len.input.setAttribute("aria-valuetext", `${validLen} of ${S} keys`);
      temp.input.setAttribute("aria-valuetext", `τ = ${tau.toFixed(2)}`);
      const weights = scores.map((row) => maskedSoftmaxRow(row.map((s) => s / tau), validLen));
      const sums = weights.map((w) => w.reduce((a, b) => a + b, 0));
      const cols = Array.from({length: S}, (_, j) => (j < validLen ? `k${j}` : "pad"));
      const rows = Array.from({length: L}, (_, i) => `q${i}`);
      const title = `valid length ${validLen}, temperature ${tau.toFixed(2)}: ` +
        `row sums ${sums.map((s) => s.toFixed(0)).join(", ")}`;
      chart.replaceChildren();
      heatmap(chart, {
        values: weights, rows, cols, title,
        label: `Masked softmax weights of ${L} queries over ${S} keys, ` +
          `${validLen} valid, temperature ${tau.toFixed(2)}: ` +
          weights.map((w, i) => `q${i}: ${w.map((v) => v.toFixed(2)).join(" ")}`).join("; ")});
      numbersTable(chart, title, rows, cols, weights, 3);
      rootEl.dataset.validLength = String(validLen);
      rootEl.dataset.temperature = String(tau);
    }
    len.input.addEventListener("input", draw);
    temp.input.addEventListener("input", draw);
    draw();
  }

  // ---- explorer: scaling ------------------------------------------------
  function mountScaling(rootEl, data) {
    const dims = data.dims, N = data.num_queries, S = data.num_keys;
    const controls = el("div", {class: "d2l-controls"}, rootEl);
    const slider = rangeControl(controls, {
      idPrefix: rootEl.id, name: "size", label: "size d of q and k",
      min: 0, max: dims.length - 1, step: 1, value: dims.indexOf(data.d)});
    const chart = el("div", {class: "d2l-chart d2l-row"}, rootEl);
    const cache = {};

    function stats(d) {
      if (cache[d]) return cache[d];
      const raw = Array.from(decodeFloat32(data.scores[String(d)]));
      const scaled = raw.map((x) => x / Math.sqrt(d));
      const largest = (xs) => {
        const out = [];
        for (let i = 0; i < N; i++) {
          const w = maskedSoftmaxRow(xs.slice(i * S, (i + 1) * S), S);
          out.push(maxOf(w));
        }
        return out;
      };
      const wRaw = largest(raw), wScaled = largest(scaled);
      const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
      const share = (xs) => xs.filter((x) => x > 0.9).length / xs.length;
      cache[d] = {
        raw, scaled, wRaw, wScaled,
        numbers: {
          std_raw: std(raw), std_scaled: std(scaled),
          mean_largest_raw: mean(wRaw), mean_largest_scaled: mean(wScaled),
          saturated_raw: share(wRaw), saturated_scaled: share(wScaled)}};
      return cache[d];
    }

    function draw() {
      const d = dims[Number(slider.input.value)];
      slider.out.textContent = `d = ${d}`;
      slider.input.setAttribute("aria-valuetext", `d = ${d}`);
      const s = stats(d), n = s.numbers;
      const [lo, hi] = extent(s.raw, s.scaled);
      const edges = Array.from({length: 41}, (_, k) => lo + (hi - lo) * k / 40);
      const unit = Array.from({length: 41}, (_, k) => 1 / S + (1 - 1 / S) * k / 40);
      chart.replaceChildren();
      histograms(chart, {
        samples: [s.raw, s.scaled], edges, density: true,
        labels: [`q·k (std ${n.std_raw.toFixed(1)})`,
                 `q·k/√d (std ${n.std_scaled.toFixed(1)})`],
        title: `Scores of random q, k with d = ${d}`, xlabel: "score",
        ylabel: "density",
        label: `Histogram of ${N * S} scores for d = ${d}: q·k has standard ` +
          `deviation ${n.std_raw.toFixed(2)}, q·k/√d has ${n.std_scaled.toFixed(2)}`});
      histograms(chart, {
        samples: [s.wRaw, s.wScaled], edges: unit, density: false,
        labels: ["softmax(q·k)", "softmax(q·k/√d)"],
        title: `Largest of ${S} weights (1 = saturated)`,
        xlabel: "largest weight of a query", ylabel: "queries",
        label: `Histogram of each of ${N} queries' largest weight for d = ${d}: ` +
          `mean ${n.mean_largest_raw.toFixed(2)} unscaled, ` +
          `${n.mean_largest_scaled.toFixed(2)} scaled`});
      const table = el("table", {class: "d2l-stats"}, chart);
      el("caption", {}, table, `d = ${d}, ${N} queries × ${S} keys`);
      const head = el("tr", {}, table);
      ["", "q·k", "q·k/√d"].forEach((h) => el("th", {scope: "col"}, head, h));
      [["standard deviation of the scores", "std_raw", "std_scaled", 2],
       ["mean largest weight", "mean_largest_raw", "mean_largest_scaled", 3],
       ["share of queries with a weight above 0.9", "saturated_raw",
        "saturated_scaled", 3]].forEach(([name, a, b, digits]) => {
        const tr = el("tr", {}, table);
        el("th", {scope: "row"}, tr, name);
        el("td", {"data-stat": a}, tr, fmt(n[a], digits));
        el("td", {"data-stat": b}, tr, fmt(n[b], digits));
      });
      rootEl.dataset.d = String(d);
      rootEl.dataset.numbers = JSON.stringify(n);
    }
    slider.input.addEventListener("input", draw);
    draw();
  }

  // ---- explorer: kernel regression (attention pooling) -------------------
  /** d2lmini.pooling.kernel_scores for one query: [scores, mask]. */
  function kernelScores(kernel, x, keys, width) {
    const scores = [], mask = [];
    for (const k of keys) {
      const u = (x - k) / width;
      if (kernel === "gaussian") { scores.push(-u * u / 2); mask.push(true); }
      else if (kernel === "constant") { scores.push(0); mask.push(true); }
      else if (kernel === "boxcar") { scores.push(0); mask.push(Math.abs(u) <= 1); }
      else {  // epanechnikov
        const inside = Math.abs(u) < 1;
        scores.push(inside ? Math.log1p(-u * u) : 0); mask.push(inside);
      }
    }
    return [scores, mask];
  }

  /** masked_softmax of one row with a boolean mask (zeros if none). */
  function maskedSoftmaxMask(scores, mask) {
    const out = new Array(scores.length).fill(0);
    let max = -Infinity;
    scores.forEach((s, j) => { if (mask[j]) max = Math.max(max, s); });
    if (max === -Infinity) return out;
    let sum = 0;
    scores.forEach((s, j) => { if (mask[j]) { out[j] = Math.exp(s - max); sum += out[j]; } });
    return out.map((w) => w / sum);
  }

  function nadarayaWatson(kernel, queries, keys, values, width) {
    const weights = queries.map((x) => maskedSoftmaxMask(...kernelScores(kernel, x, keys, width)));
    const preds = weights.map((w) => w.reduce((a, wi, j) => a + wi * values[j], 0));
    return [preds, weights];
  }

  function mountKernelRegression(rootEl, data) {
    const {x_train: keys, y_train: values, x_query: xs, f_query: truth} = data;
    const controls = el("div", {class: "d2l-controls"}, rootEl);
    const width = rangeControl(controls, {
      idPrefix: rootEl.id, name: "log-width", label: "kernel width σ (log scale)",
      min: -1.5, max: 0.5, step: 0.05, value: Math.log10(data.width)});
    const kindWrap = el("div", {class: "d2l-control"}, controls);
    const kindId = `${rootEl.id}-kernel`;
    el("label", {for: kindId}, kindWrap, "kernel");
    const kind = el("select", {id: kindId, name: "kernel"}, kindWrap);
    data.kernels.forEach((k) => el("option", {value: k}, kind, k));
    kind.value = data.kernel;
    const query = rangeControl(controls, {
      idPrefix: rootEl.id, name: "query", label: "marked query x",
      min: 0, max: xs.length - 1, step: 1, value: data.query});
    const chart = el("div", {class: "d2l-chart"}, rootEl);

    function draw() {
      const w = Math.pow(10, Number(width.input.value)), k = kind.value;
      const q = Number(query.input.value);
      width.out.textContent = w.toFixed(3);
      width.input.setAttribute("aria-valuetext", `σ = ${w.toFixed(3)}`);
      query.out.textContent = xs[q].toFixed(2);
      query.input.setAttribute("aria-valuetext", `x = ${xs[q].toFixed(2)}`);
      const [preds, weights] = nadarayaWatson(k, xs, keys, values, w);
      const mse = preds.reduce((a, p, i) => a + (p - truth[i]) ** 2, 0) / preds.length;
      chart.replaceChildren();
      const title = `${k} kernel, σ = ${w.toFixed(3)}: mean squared error ` +
        `${mse.toFixed(3)} against the true function`;
      curves(chart, {
        xs, title, marker: xs[q], stems: weights[q],
        lines: [{ys: truth, colour: "#777", dash: "5 4", width: 1.5},
                {ys: preds, colour: PAIR[0]}],
        points: {xs: keys, ys: values},
        xlabel: "x (keys are the training inputs; the stems are the weights of the " +
          "marked query)",
        label: `${title}. The marked query x = ${xs[q].toFixed(2)} predicts ` +
          `${preds[q].toFixed(3)} from ${weights[q].filter((a) => a > 0).length} ` +
          `keys; its largest weight is ${maxOf(weights[q]).toFixed(3)}.`});
      el("p", {class: "d2l-legend"}, chart,
         "Dashed grey: the true function; blue: the prediction; orange dots: " +
         "the training pairs (keys x_i, values y_i).");
      const rows = xs.map((x) => fmt(x, 2));
      numbersTable(chart, `Prediction and true value at each query (${title})`,
                   rows, ["prediction", "true f(x)"], preds.map((p, i) => [p, truth[i]]), 3);
      rootEl.dataset.numbers = JSON.stringify({mse, preds, weights: weights[q]});
    }
    width.input.addEventListener("input", draw);
    kind.addEventListener("change", draw);
    query.input.addEventListener("input", draw);
    draw();
  }

  // ---- explorer: positional encoding ---------------------------------------
  function mountPositionalEncoding(rootEl, data) {
    const D = data.num_hiddens, T = data.max_len;
    const P = positionalEncoding(D, T).map((row) => Array.from(row));
    const controls = el("div", {class: "d2l-controls"}, rootEl);
    const position = rangeControl(controls, {
      idPrefix: rootEl.id, name: "position", label: "position i",
      min: 0, max: T - 1, step: 1, value: data.position});
    const index = rangeControl(controls, {
      idPrefix: rootEl.id, name: "frequency", label: "frequency j (columns 2j, 2j+1)",
      min: 0, max: D / 2 - 1, step: 1, value: data.index});
    const chart = el("div", {class: "d2l-chart"}, rootEl);
    const figures = el("div", {class: "d2l-row"}, chart);
    const line = el("p", {class: "d2l-output"}, chart);
    const rows = Array.from({length: T}, (_, i) => String(i));
    const cols = Array.from({length: D}, (_, k) => String(k));
    // P does not move: its heatmap and table are made once, the sliders
    // move the heatmap's outlines and redraw the curves.
    const cell = Math.max(3, Math.min(12, Math.floor(480 / Math.max(T, D))));
    const map = heatmap(figures, {
      values: P, rows, cols, cell, annotate: false, domain: [-1, 1], colour: diverging,
      labelEvery: Math.ceil(12 / cell), title: `P: ${T} positions × ${D} dimensions`,
      xlabel: "dimension", ylabel: "position"});
    const plot = el("div", {}, figures);
    numbersTable(chart, `The positional encoding P: ${T} positions × ${D} dimensions`,
                 rows, cols, P, 3);
    const sig = (x) => String(Number(x.toPrecision(4)));

    function draw() {
      const i = Number(position.input.value), j = Number(index.input.value);
      const exponent = 2 * j / D, frequency = Math.pow(10000, -exponent);
      const wavelength = 2 * Math.PI / frequency;
      const [sin, cos] = [P[i][2 * j], P[i][2 * j + 1]];
      position.out.textContent = String(i);
      position.input.setAttribute("aria-valuetext", `position ${i} of ${T}`);
      index.out.textContent = String(j);
      index.input.setAttribute("aria-valuetext",
                               `j = ${j}: columns ${2 * j} and ${2 * j + 1}`);
      map.mark({rows: [i], cols: [2 * j, 2 * j + 1]});
      map.setAttribute("aria-label", `Heatmap of the positional encoding P, ${T} ` +
        `positions by ${D} dimensions, from -1 (blue) to 1 (orange); row ${i} and ` +
        `columns ${2 * j} and ${2 * j + 1} are outlined. Each column pair is a sine and ` +
        "a cosine whose wavelength grows with the dimension.");
      const xs = rows.map(Number), title = `Columns ${2 * j} (sin) and ${2 * j + 1} (cos)`;
      plot.replaceChildren();
      curves(plot, {
        xs, marker: i, title, xlabel: "position",
        lines: [{ys: P.map((row) => row[2 * j]), colour: PAIR[0]},
                {ys: P.map((row) => row[2 * j + 1]), colour: PAIR[1], dash: "5 3"}],
        label: `${title} of P over positions 0 to ${T - 1}: a wavelength of ` +
          `${sig(wavelength)} positions; at the marked position ${i} they are ` +
          `${sin.toFixed(3)} and ${cos.toFixed(3)}.`});
      line.textContent = `j = ${j}: frequency 1/10000^(${2 * j}/${D}) = ${sig(frequency)}, ` +
        `wavelength 2π·10000^(${2 * j}/${D}) = ${sig(wavelength)} positions; ` +
        `P[${i}, ${2 * j}] = ${sin.toFixed(3)}, P[${i}, ${2 * j + 1}] = ${cos.toFixed(3)}. ` +
        "Blue solid: the sine; orange dashed: the cosine.";
      rootEl.dataset.numbers = JSON.stringify({position: i, index: j, frequency,
                                               wavelength, sin, cos});
    }
    position.input.addEventListener("input", draw);
    index.input.addEventListener("input", draw);
    draw();
  }
