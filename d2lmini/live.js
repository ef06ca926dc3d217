/* d2lmini live explorers: the chapter's interactive figures, computed in
 * the page with no kernel and no server (d2lmini/live.py puts this file
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
 *   from the weights that scripts/export_models.py exported, greedy
 *   decoding included; once loaded, the box says whether those are the
 *   weights the section evaluated, and their held-out BLEU.
 *
 * Every chart is an SVG with role="img", an aria-label that sums it up, a
 * <title> per cell and a table of the numbers it draws (in a <details>);
 * colours come from viridis, whose lightness rises steadily (readable in
 * greyscale and with colour-blindness), or for signed values from a
 * blue-white-orange map.  Runs in a browser and in Node
 * (the model functions only).
 */
(function (root) {
  "use strict";
  if (root.d2lLive) return;  // one copy per page, however many explorers

  const SVG_NS = "http://www.w3.org/2000/svg";

  // ---- colours -------------------------------------------------------
  // matplotlib's viridis at 0, 0.1, ..., 1.
  const VIRIDIS = [
    [68, 1, 84], [72, 36, 117], [65, 68, 135], [53, 95, 141],
    [42, 120, 142], [33, 145, 140], [34, 168, 132], [68, 191, 112],
    [122, 209, 81], [189, 223, 38], [253, 231, 37]];

  function viridis(t) {
    const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
    const f = x - i;
    const c = VIRIDIS[i].map((a, k) => Math.round(a + f * (VIRIDIS[i + 1][k] - a)));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }

  // Dark text on the light end of the map, white on the dark end.
  const textColour = (t) => (t > 0.6 ? "#000" : "#fff");

  // A diverging map for signed values: blue (0), white (0.5), orange (1),
  // Okabe and Ito's blue and vermillion; light in the middle, dark at both ends.
  const DIVERGING = [[0, 114, 178], [255, 255, 255], [213, 94, 0]];

  function diverging(t) {
    const x = Math.min(Math.max(t, 0), 1) * 2, i = Math.min(Math.floor(x), 1), f = x - i;
    const c = DIVERGING[i].map((a, k) => Math.round(a + f * (DIVERGING[i + 1][k] - a)));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }

  // ---- small DOM helpers ---------------------------------------------
  function el(tag, attrs, parent, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  function svg(tag, attrs, parent, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  /** [smallest, largest] of the numbers of one or more arrays, by a
   * loop: spreading an array into Math.min passes each number as an
   * argument and throws "Maximum call stack size exceeded" for large
   * arrays.  [Infinity,
   * -Infinity] when they are empty. */
  function extent(...arrays) {
    let lo = Infinity, hi = -Infinity;
    for (const xs of arrays) {
      for (const x of xs) {
        if (x < lo) lo = x;
        if (x > hi) hi = x;
      }
    }
    return [lo, hi];
  }

  const maxOf = (...arrays) => extent(...arrays)[1];

  const fmt = (x, digits) => (Number.isFinite(x) ? x.toFixed(digits) : String(x));

  /** A <details> table of a matrix: the numbers a chart draws. */
  function numbersTable(parent, caption, rows, cols, values, digits) {
    const details = el("details", {class: "d2l-numbers"}, parent);
    el("summary", {}, details, "The numbers, as a table");
    const table = el("table", {}, details);
    el("caption", {}, table, caption);
    const head = el("tr", {}, el("thead", {}, table));
    el("th", {scope: "col"}, head, "");
    cols.forEach((c) => el("th", {scope: "col"}, head, c));
    const body = el("tbody", {}, table);
    values.forEach((row, i) => {
      const tr = el("tr", {}, body);
      el("th", {scope: "row"}, tr, rows[i]);
      row.forEach((v) => el("td", {}, tr, fmt(v, digits)));
    });
    return details;
  }

  /** An annotated heatmap on the colour scale 0..1.
   *
   * values: rows x cols numbers in [0, 1].  Each cell is a <rect> with
   * data-row, data-col and data-value (the full number) and a <title>.
   * Options for large or signed matrices: domain [lo, hi] (the values the
   * colour map's ends stand for; default [0, 1]), colour (a map of 0..1,
   * default viridis), labelEvery (label every n-th row and column) and
   * marks {rows, cols} (indices outlined: a chosen row or column), which
   * chart.mark(marks) moves without redrawing the cells.
   */
  function heatmap(parent, opts) {
    const {values, rows, cols, title, xlabel, ylabel} = opts;
    const cell = opts.cell || 34, every = opts.labelEvery || 1;
    const gap = cell >= 10 ? 1 : 0;  // small cells: no gaps (no stripes)
    const [lo, hi] = opts.domain || [0, 1], colour = opts.colour || viridis;
    const scale = (v) => (v - lo) / (hi - lo);
    const shown = (labels) => labels.filter((_, i) => i % every === 0);
    const left = 12 + 7 * Math.max(4, maxOf(shown(rows).map((r) => r.length)));
    const top = title ? 28 : 8;
    const bottom = 14 + 6.5 * Math.max(3, maxOf(shown(cols).map((c) => c.length)));
    const width = left + cell * cols.length + 70;
    const height = top + cell * rows.length + bottom;
    const summary = opts.label || title || "heatmap";
    const chart = svg("svg", {
      class: "d2l-heatmap", role: "img", width, height,
      viewBox: `0 0 ${width} ${height}`, "aria-label": summary}, parent);
    if (title) {
      svg("text", {x: left, y: 18, "font-size": 13, "font-weight": "bold"},
          chart, title);
    }
    values.forEach((row, i) => row.forEach((v, j) => {
      const x = left + j * cell, y = top + i * cell;
      const r = svg("rect", {
        x, y, width: cell - gap, height: cell - gap, fill: colour(scale(v)),
        "data-row": i, "data-col": j, "data-value": String(v)}, chart);
      svg("title", {}, r, `${rows[i]} → ${cols[j]}: ${fmt(v, 3)}`);
      if (opts.annotate !== false) {
        svg("text", {
          x: x + cell / 2, y: y + cell / 2 + 4, "text-anchor": "middle",
          "font-size": 10, fill: textColour(scale(v)), "aria-hidden": "true"},
        chart, fmt(v, 2));
      }
    }));
    rows.forEach((r, i) => {
      if (i % every) return;
      svg("text", {x: left - 6, y: top + i * cell + cell / 2 + 4, "text-anchor": "end",
                   "font-size": 12}, chart, r);
    });
    cols.forEach((c, j) => {
      if (j % every) return;
      const x = left + j * cell + cell / 2, y = top + rows.length * cell + 8;
      svg("text", {x, y, "text-anchor": "end", "font-size": 12,
                   transform: `rotate(-60 ${x} ${y})`}, chart, c);
    });
    if (ylabel) {
      svg("text", {x: 10, y: top + rows.length * cell / 2, "font-size": 11,
                   transform: `rotate(-90 10 ${top + rows.length * cell / 2})`,
                   "text-anchor": "middle"}, chart, ylabel);
    }
    if (xlabel) {
      svg("text", {x: left + cols.length * cell / 2, y: height - 2,
                   "font-size": 11, "text-anchor": "middle"}, chart, xlabel);
    }
    // Outlines of the marked rows and columns, over the cells.
    const outlines = svg("g", {class: "d2l-marks"}, chart);
    const outline = (x, y, width, height) => svg("rect", {
      x: x - 1, y: y - 1, width: width + 1, height: height + 1, fill: "none",
      stroke: "#000", "stroke-width": 2}, outlines);
    chart.mark = (marks) => {
      outlines.replaceChildren();
      (marks.rows || []).forEach((i) => outline(left, top + i * cell, cols.length * cell, cell));
      (marks.cols || []).forEach((j) => outline(left + j * cell, top, cell, rows.length * cell));
    };
    chart.mark(opts.marks || {});
    // The colour bar, lo at the bottom, hi at the top.
    const barX = left + cols.length * cell + 14, barH = rows.length * cell;
    for (let k = 0; k < 20; k++) {
      svg("rect", {x: barX, y: top + barH * (19 - k) / 20, width: 12,
                   height: barH / 20 + 0.5, fill: colour((k + 0.5) / 20)},
          chart);
    }
    svg("text", {x: barX + 16, y: top + 9, "font-size": 10}, chart, String(hi));
    svg("text", {x: barX + 16, y: top + barH, "font-size": 10}, chart, String(lo));
    return chart;
  }

  // Two colours that colour-blind readers tell apart (Okabe and Ito).
  const PAIR = ["#0072B2", "#E69F00"];

  /** Overlaid histograms of two samples on shared bin edges. */
  function histograms(parent, opts) {
    const {samples, labels, edges, title, xlabel, ylabel, density} = opts;
    const W = 360, H = 210, L = 48, B = 40, T = 26, R = 10;
    const counts = samples.map((xs) => {
      const c = new Array(edges.length - 1).fill(0);
      const lo = edges[0], hi = edges[edges.length - 1];
      const step = (hi - lo) / (edges.length - 1);
      for (const x of xs) {
        let k = Math.floor((x - lo) / step);
        if (k === c.length && x <= hi) k -= 1;  // the last bin is closed
        if (k >= 0 && k < c.length) c[k] += 1;
      }
      const width = step * xs.length;
      return density ? c.map((n) => n / width) : c;
    });
    const most = maxOf(...counts), top = most > 0 ? most : 1;
    const chart = svg("svg", {
      class: "d2l-histogram", role: "img", width: W, height: H,
      viewBox: `0 0 ${W} ${H}`, "aria-label": opts.label || title}, parent);
    svg("text", {x: L, y: 16, "font-size": 12, "font-weight": "bold"},
        chart, title);
    const sx = (x) => L + (x - edges[0]) / (edges[edges.length - 1] - edges[0])
      * (W - L - R);
    const sy = (y) => H - B - y / top * (H - B - T);
    counts.forEach((c, s) => c.forEach((n, k) => {
      if (!n) return;
      const r = svg("rect", {
        x: sx(edges[k]), y: sy(n), width: Math.max(sx(edges[k + 1]) - sx(edges[k]) - 0.5, 0.5),
        height: H - B - sy(n), fill: PAIR[s], "fill-opacity": 0.6,
        "data-sample": s, "data-bin": k, "data-value": String(n)}, chart);
      svg("title", {}, r, `${labels[s]}, ${fmt(edges[k], 2)} to ` +
          `${fmt(edges[k + 1], 2)}: ${fmt(n, density ? 3 : 0)}`);
    }));
    svg("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#444"}, chart);
    svg("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#444"}, chart);
    for (const x of [edges[0], (edges[0] + edges[edges.length - 1]) / 2,
                     edges[edges.length - 1]]) {
      svg("text", {x: sx(x), y: H - B + 14, "font-size": 10,
                   "text-anchor": "middle"}, chart, fmt(x, Math.abs(x) < 10 ? 2 : 0));
    }
    svg("text", {x: L - 4, y: T + 8, "font-size": 10, "text-anchor": "end"},
        chart, fmt(top, density ? 2 : 0));
    svg("text", {x: (L + W - R) / 2, y: H - 6, "font-size": 11,
                 "text-anchor": "middle"}, chart, xlabel);
    svg("text", {x: 12, y: (T + H - B) / 2, "font-size": 11, "text-anchor": "middle",
                 transform: `rotate(-90 12 ${(T + H - B) / 2})`}, chart, ylabel);
    labels.forEach((lab, s) => {
      svg("rect", {x: L + 8, y: T + 4 + 15 * s, width: 10, height: 10,
                   fill: PAIR[s], "fill-opacity": 0.6}, chart);
      svg("text", {x: L + 22, y: T + 13 + 15 * s, "font-size": 10}, chart, lab);
    });
    return chart;
  }

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

  /** Line charts over xs: lines [{ys, colour, dash, width}], a dashed
   * vertical marker at x = marker; optional points {xs, ys} (dots) and
   * stems (a weight per point, drawn below the chart). */
  function curves(parent, opts) {
    const {xs, lines, marker, title, label, xlabel} = opts;
    const points = opts.points || {xs: [], ys: []}, stems = opts.stems || [];
    const W = 560, H = 300, L = 44, R = 12, T = 26, B = 34;
    const stemH = stems.length ? 60 : 0;
    const all = [...lines.flatMap((l) => l.ys), ...points.ys];
    const [lo, hi] = extent(all), [x0, x1] = extent(xs, points.xs);
    const sx = (x) => L + (x - x0) / (x1 - x0 || 1) * (W - L - R);
    const top = H - B - (stems.length ? stemH + 10 : 0);
    const sy = (y) => top - (y - lo) / (hi - lo || 1) * (top - T);
    const chart = svg("svg", {class: "d2l-curves", role: "img", width: W, height: H,
                              viewBox: `0 0 ${W} ${H}`, "aria-label": label}, parent);
    svg("text", {x: L, y: 16, "font-size": 12, "font-weight": "bold"}, chart, title);
    svg("line", {x1: L, y1: top, x2: W - R, y2: top, stroke: "#999"}, chart);
    svg("line", {x1: L, y1: T, x2: L, y2: top, stroke: "#999"}, chart);
    [lo, hi].forEach((v) => svg("text", {x: L - 4, y: sy(v) + 4, "font-size": 10,
                                         "text-anchor": "end"}, chart, fmt(v, 1)));
    lines.forEach((line, k) => {
      const d = xs.map((x, i) => `${i ? "L" : "M"}${sx(x).toFixed(1)},${sy(line.ys[i]).toFixed(1)}`).join("");
      svg("path", {d, fill: "none", stroke: line.colour, "stroke-width": line.width || 2,
                   "stroke-dasharray": line.dash || "none", "data-line": k}, chart);
    });
    points.xs.forEach((x, i) => svg("circle", {cx: sx(x), cy: sy(points.ys[i]), r: 2.5,
                                               fill: PAIR[1], "fill-opacity": 0.8}, chart));
    if (marker !== undefined) {
      svg("line", {x1: sx(marker), x2: sx(marker), y1: T, y2: H - B, stroke: "#444",
                   "stroke-dasharray": "2 3"}, chart);
    }
    // The weights of the marked query on each key, as stems.
    const base = H - B, peak = Math.max(maxOf(stems), 1e-12);
    if (stems.length) {
      svg("line", {x1: L, y1: base, x2: W - R, y2: base, stroke: "#999"}, chart);
      svg("text", {x: L - 4, y: base - stemH + 4, "font-size": 10, "text-anchor": "end"},
          chart, fmt(peak, 2));
    }
    stems.forEach((w, j) => {
      if (w <= 0) return;
      const x = sx(points.xs[j]);
      const stem = svg("line", {x1: x, x2: x, y1: base, y2: base - w / peak * stemH,
                                stroke: PAIR[0], "stroke-width": 2, "data-key": j,
                                "data-value": String(w)}, chart);
      svg("title", {}, stem, `key x = ${fmt(points.xs[j], 2)}: weight ${fmt(w, 3)}`);
    });
    svg("text", {x: (L + W - R) / 2, y: H - 6, "font-size": 11, "text-anchor": "middle"},
        chart, xlabel);
    [x0, x1].forEach((x) => svg("text", {x: sx(x), y: base + 14, "font-size": 10,
                                         "text-anchor": "middle"}, chart, fmt(x, 0)));
    return chart;
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

  // ---- the translation model ----------------------------------------------
  const PUNCT_NO_SPACE = /(?<=[^ ])([,.!?])/g;

  /** d2lmini.corpus.preprocess, then tokenize (str.split()). */
  function tokenize(sentence) {
    const text = sentence.replace(/\u202f/g, " ").replace(/\xa0/g, " ")
      .toLowerCase().replace(PUNCT_NO_SPACE, " $1");
    return text.split(/\s+/).filter((t) => t.length > 0);
  }

  /** y = W x + b for W (rows, cols) stored row-major at W.data[off...]. */
  function matvec(W, x, b) {
    const [rows, cols] = W.shape, w = W.data, y = new Float64Array(rows);
    for (let i = 0; i < rows; i++) {
      let s = b ? b.data[i] : 0;
      const o = i * cols;
      for (let j = 0; j < cols; j++) s += w[o + j] * x[j];
      y[i] = s;
    }
    return y;
  }

  const sigmoid = (x) => 1 / (1 + Math.exp(-x));

  /** torch.gru_cell: gates in the order reset, update, new. */
  function gruCell(x, h, p) {
    const gi = matvec(p.w_ih, x, p.b_ih), gh = matvec(p.w_hh, h, p.b_hh);
    const D = h.length, out = new Float64Array(D);
    for (let i = 0; i < D; i++) {
      const r = sigmoid(gi[i] + gh[i]);
      const z = sigmoid(gi[D + i] + gh[D + i]);
      const n = Math.tanh(gi[2 * D + i] + r * gh[2 * D + i]);
      out[i] = (1 - z) * n + z * h[i];
    }
    return out;
  }

  function embed(E, id) {
    const cols = E.shape[1];
    return Float64Array.from(E.data.subarray(id * cols, (id + 1) * cols));
  }

  function softmax(xs) {
    const m = maxOf(xs), e = xs.map((x) => Math.exp(x - m));
    const s = e.reduce((a, b) => a + b, 0);
    return e.map((x) => x / s);
  }

  /** A model from its manifest (JSON) and weights (an ArrayBuffer). */
  function makeModel(manifest, buffer) {
    const floats = new Float32Array(buffer);
    const t = {};
    for (const [name, spec] of Object.entries(manifest.tensors)) {
      const size = spec.shape.reduce((a, b) => a * b, 1);
      if (spec.offset + size > floats.length) {
        throw new Error(`the weights file is too short for ${name}`);
      }
      t[name] = {shape: spec.shape.length === 1 ? [spec.shape[0], 1] : spec.shape,
                 data: floats.subarray(spec.offset, spec.offset + size)};
    }
    const srcIndex = new Map(manifest.src_vocab.map((tok, i) => [tok, i]));
    const model = {manifest, t, srcIndex};
    if (manifest.attention !== "transformer") {
      const gru = (prefix, layer) => ({
        w_ih: t[`${prefix}.weight_ih_l${layer}`], w_hh: t[`${prefix}.weight_hh_l${layer}`],
        b_ih: t[`${prefix}.bias_ih_l${layer}`], b_hh: t[`${prefix}.bias_hh_l${layer}`]});
      const layers = Array.from({length: manifest.num_layers}, (_, l) => l);
      model.encoder = layers.map((l) => gru("encoder.rnn", l));
      model.decoder = layers.map((l) => gru("decoder.rnn", l));
    }
    return model;
  }

  /** nn.Linear: the weight and bias named `${name}.weight`, `${name}.bias`. */
  const linear = (t, name, x) => matvec(t[`${name}.weight`], x, t[`${name}.bias`]);

  /** The keys and values of the multi-head attention `prefix` (its W_k
   * and W_v, projected once) over the inputs xs: what queries attend to. */
  function headMemory(t, prefix, xs) {
    return {keys: xs.map((x) => linear(t, `${prefix}.W_k`, x)),
            values: xs.map((x) => linear(t, `${prefix}.W_v`, x))};
  }

  /** d2lmini's MultiHeadAttention (`prefix`, h heads) of one query q over
   * a headMemory: [output (D), weights (h, S)]. */
  function multiHead(t, prefix, h, memory, q) {
    const Q = linear(t, `${prefix}.W_q`, q);
    const D = Q.length, d = D / h, merged = new Float64Array(D), weights = [];
    for (let head = 0; head < h; head++) {
      const o = head * d;  // this head's slice of the D features
      const w = softmax(memory.keys.map((k) => {
        let s = 0;
        for (let i = 0; i < d; i++) s += Q[o + i] * k[o + i];
        return s / Math.sqrt(d);
      }));
      w.forEach((a, j) => {
        for (let i = 0; i < d; i++) merged[o + i] += a * memory.values[j][o + i];
      });
      weights.push(w);
    }
    return [linear(t, `${prefix}.W_o`, merged), weights];
  }

  /** Attention of one query over the encoder outputs: [context, weights]
   * with weights (h, S), h = 1 for additive attention. */
  function attend(model, memory, q) {
    const m = model.manifest, t = model.t;
    if (m.attention === "additive") {
      const qp = matvec(t["decoder.attention.W_q.weight"], q);
      const wv = t["decoder.attention.w_v.weight"].data;
      const scores = memory.keys.map((k) => {
        let s = 0;
        for (let i = 0; i < qp.length; i++) s += wv[i] * Math.tanh(qp[i] + k[i]);
        return s;
      });
      const w = softmax(scores);
      const D = memory.values[0].length, context = new Float64Array(D);
      w.forEach((a, j) => { for (let i = 0; i < D; i++) context[i] += a * memory.values[j][i]; });
      return [context, [w]];
    }
    return multiHead(t, "decoder.attention", m.num_heads, memory, q);
  }

  /** The decoding steps of a GRU encoder-decoder with attention
   * (d2lmini.attention_decoder): runs the encoder over the source ids
   * and returns step(token) -> [logits, attention weights (h, S)]. */
  function rnnSteps(model, ids) {
    const m = model.manifest, t = model.t;
    // Encoder: every layer over the sentence (no padding: one sentence).
    let xs = ids.map((id) => embed(t["encoder.embedding.weight"], id));
    let hs = [];
    model.encoder.forEach((p) => {
      let h = new Float64Array(m.num_hiddens);
      xs = xs.map((x) => (h = gruCell(x, h, p)));
      hs.push(h);
    });
    // The top layer's outputs, projected once (not at every step).
    const memory = m.attention === "additive"
      ? {values: xs, keys: xs.map((o) => matvec(t["decoder.attention.W_k.weight"], o))}
      : headMemory(t, "decoder.attention", xs);
    return (token) => {
      const [context, weights] = attend(model, memory, hs[hs.length - 1]);
      const e = embed(t["decoder.embedding.weight"], token);
      let x = new Float64Array(context.length + e.length);
      x.set(context); x.set(e, context.length);
      hs = model.decoder.map((p, l) => (x = gruCell(x, hs[l], p)));
      return [linear(t, "decoder.dense", x), weights];
    };
  }

  /** d2lmini.transformer.PositionalEncoding's P (maxLen rows of D):
   * P[i][2j] = sin(i / 10000^(2j/D)), P[i][2j + 1] = cos(the same).
   * PositionalEncoding computes in float32: the angle is rounded the way
   * it rounds it (Math.fround), so that P matches it to about 1e-7
   * (a float64 angle differs by 2e-6 at 64 positions, 6e-5 at 1000). */
  function positionalEncoding(D, maxLen) {
    const f32 = Math.fround, P = [];
    for (let i = 0; i < maxLen; i++) {
      const row = new Float64Array(D);
      for (let j = 0; 2 * j < D; j++) {
        const angle = f32(i / f32(Math.pow(10000, f32(2 * j / D))));
        row[2 * j] = Math.sin(angle);
        row[2 * j + 1] = Math.cos(angle);
      }
      P.push(row);
    }
    return P;
  }

  /** nn.LayerNorm of one position's features (eps 1e-5). */
  function layerNorm(x, weight, bias) {
    const n = x.length, mean = x.reduce((a, v) => a + v, 0) / n;
    const variance = x.reduce((a, v) => a + (v - mean) ** 2, 0) / n;
    const scale = 1 / Math.sqrt(variance + 1e-5);
    return x.map((v, i) => (v - mean) * scale * weight.data[i] + bias.data[i]);
  }

  /** AddNorm `prefix`: LayerNorm(x + y). */
  const addNorm = (t, prefix, x, y) => layerNorm(
    x.map((v, i) => v + y[i]), t[`${prefix}.ln.weight`], t[`${prefix}.ln.bias`]);

  /** PositionWiseFFN `prefix`: dense2(relu(dense1(x))). */
  const ffn = (t, prefix, x) => linear(
    t, `${prefix}.dense2`, linear(t, `${prefix}.dense1`, x).map((v) => Math.max(v, 0)));

  /** The decoding steps of a Transformer (d2lmini.transformer, post-norm
   * blocks): runs the encoder over the source ids and returns
   * step(token) -> [logits, the last block's attention to the source
   * (h, S)].  Each decoder block keeps the keys and values of the steps
   * before (a cache): step i attends to steps 0..i, the causal mask. */
  function transformerSteps(model, ids, maxSteps) {
    const m = model.manifest, t = model.t, D = m.num_hiddens, h = m.num_heads;
    const P = positionalEncoding(D, Math.max(ids.length, maxSteps));
    const blocks = Array.from({length: m.num_layers}, (_, l) => l);
    // Embeddings times sqrt(D), plus the position's row of P.
    const input = (stack, id, i) => embed(t[`${stack}.embedding.weight`], id)
      .map((v, k) => v * Math.sqrt(D) + P[i][k]);
    // Encoder: self-attention over every source token (one sentence: no
    // padding), then the FFN, each followed by AddNorm.
    let xs = ids.map((id, i) => input("encoder", id, i));
    for (const l of blocks) {
      const p = `encoder.blks.${l}`, memory = headMemory(t, `${p}.attention`, xs);
      xs = xs.map((x) => {
        const y = addNorm(t, `${p}.addnorm1`, x, multiHead(t, `${p}.attention`, h, memory, x)[0]);
        return addNorm(t, `${p}.addnorm2`, y, ffn(t, `${p}.ffn`, y));
      });
    }
    const source = blocks.map((l) => headMemory(t, `decoder.blks.${l}.cross_attention`, xs));
    const past = blocks.map(() => ({keys: [], values: []}));
    let position = 0;
    return (token) => {
      let x = input("decoder", token, position++), weights = null;
      for (const l of blocks) {
        const p = `decoder.blks.${l}`, own = headMemory(t, `${p}.self_attention`, [x]);
        past[l].keys.push(own.keys[0]);
        past[l].values.push(own.values[0]);
        const [a] = multiHead(t, `${p}.self_attention`, h, past[l], x);
        const y = addNorm(t, `${p}.addnorm1`, x, a);
        const [c, w] = multiHead(t, `${p}.cross_attention`, h, source[l], y);
        const z = addNorm(t, `${p}.addnorm2`, y, c);
        x = addNorm(t, `${p}.addnorm3`, z, ffn(t, `${p}.ffn`, z));
        weights = w;
      }
      return [linear(t, "decoder.dense", x), weights];
    };
  }

  /** What the model reads: tokens, ids (with <eos>, cut at num_steps). */
  function readSource(model, sentence) {
    const m = model.manifest, tokens = tokenize(sentence);
    const unk = m.src_special.unk;
    const ids = tokens.map((tok) => (model.srcIndex.has(tok) ? model.srcIndex.get(tok) : unk));
    ids.push(m.src_special.eos);
    const read = ids.slice(0, m.num_steps);
    return {tokens, ids: read, srcTokens: read.map((i) => m.src_vocab[i])};
  }

  /** Greedy translation, like d2lmini.decoding.translate.
   *
   * Returns {tokens, outTokens, srcTokens, words, attention (h, steps,
   * S), finished}: attention has a row per output step, the step that
   * emitted <eos> included (a Transformer's: its last decoder block's
   * attention to the source).
   */
  function translate(model, sentence, maxLen) {
    const m = model.manifest;
    const src = readSource(model, sentence);
    if (src.tokens.length === 0) throw new Error("empty sentence");
    const maxSteps = maxLen || m.num_steps;
    const steps = m.attention === "transformer"
      ? transformerSteps(model, src.ids, maxSteps) : rnnSteps(model, src.ids);
    const eos = m.tgt_special.eos;
    let y = m.tgt_special.bos;
    const ids = [], maps = [];
    let finished = false;
    for (let step = 0; step < maxSteps; step++) {
      const [logits, weights] = steps(y);
      let best = 0;
      for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
      maps.push(weights);
      y = best;
      if (y === eos) { finished = true; break; }
      ids.push(y);
    }
    const h = maps[0].length;
    const attention = Array.from({length: h}, (_, k) => maps.map((w) => w[k]));
    const tokens = ids.map((i) => m.tgt_vocab[i]);
    return {srcTokens: src.srcTokens, words: src.tokens, tokens,
            outTokens: finished ? tokens.concat(["<eos>"]) : tokens,
            attention, finished};
  }

  async function fetchBytes(url, onProgress) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
    // Progress needs the length of what the body holds: unknown when the
    // server compresses the file (Content-Length is then the gzip size).
    const total = response.headers.get("Content-Encoding") ? 0
      : Number(response.headers.get("Content-Length")) || 0;
    if (!response.body || !total) return response.arrayBuffer();
    const reader = response.body.getReader(), bytes = new Uint8Array(total);
    let done = 0;
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      bytes.set(chunk.value, done);
      done += chunk.value.length;
      onProgress(done / total);
    }
    if (done !== total) throw new Error(`${url}: got ${done} of ${total} bytes`);
    return bytes.buffer;
  }

  // ---- what the page loads -------------------------------------------
  // The manifest format this live.js reads (d2lmini.live.MANIFEST_FORMAT).
  const MANIFEST_FORMAT = 3;
  const ATTENTIONS = ["additive", "multihead", "transformer"];
  const SPECIALS = ["pad", "bos", "eos", "unk"];
  // Sizes beyond these are no model of this chapter (and would make the
  // page allocate without end).
  const MAX_SIZE = 1 << 16;

  /** Every tensor of the model a manifest describes, by state-dict name,
   * with the shape its sizes imply (d2lmini.live.export_model writes the
   * state dict of d2lmini's models: GRU encoder-decoder with additive or
   * multi-head attention, or a Transformer). */
  function expectedTensors(m) {
    const D = m.num_hiddens, E = m.embed_size, L = m.num_layers;
    const V = m.src_vocab.length, W = m.tgt_vocab.length, out = {};
    const add = (name, shape) => { out[name] = shape; };
    const linear = (name, rows, cols, bias) => {
      add(`${name}.weight`, [rows, cols]);
      if (bias) add(`${name}.bias`, [rows]);
    };
    const heads = (prefix, bias) => ["W_q", "W_k", "W_v", "W_o"].forEach(
      (w) => linear(`${prefix}.${w}`, D, D, bias));
    const norm = (prefix) => ["weight", "bias"].forEach(
      (k) => add(`${prefix}.ln.${k}`, [D]));
    const gru = (prefix, first) => {
      for (let l = 0; l < L; l++) {
        add(`${prefix}.weight_ih_l${l}`, [3 * D, l ? D : first]);
        add(`${prefix}.weight_hh_l${l}`, [3 * D, D]);
        add(`${prefix}.bias_ih_l${l}`, [3 * D]);
        add(`${prefix}.bias_hh_l${l}`, [3 * D]);
      }
    };
    add("encoder.embedding.weight", [V, E]);
    if (m.attention === "transformer") {
      const F = m.ffn_num_hiddens;
      const ffn = (prefix) => {
        linear(`${prefix}.dense1`, F, D, true);
        linear(`${prefix}.dense2`, D, F, true);
      };
      for (let l = 0; l < L; l++) {
        const p = `encoder.blks.${l}`;
        heads(`${p}.attention`, true); norm(`${p}.addnorm1`);
        ffn(`${p}.ffn`); norm(`${p}.addnorm2`);
      }
      add("decoder.embedding.weight", [W, E]);
      for (let l = 0; l < L; l++) {
        const p = `decoder.blks.${l}`;
        heads(`${p}.self_attention`, true); norm(`${p}.addnorm1`);
        heads(`${p}.cross_attention`, true); norm(`${p}.addnorm2`);
        ffn(`${p}.ffn`); norm(`${p}.addnorm3`);
      }
    } else {
      gru("encoder.rnn", E);
      if (m.attention === "additive") {
        linear("decoder.attention.W_k", D, D);
        linear("decoder.attention.W_q", D, D);
        linear("decoder.attention.w_v", 1, D);
      } else {
        heads("decoder.attention", false);
      }
      add("decoder.embedding.weight", [W, E]);
      gru("decoder.rnn", D + E);
    }
    linear("decoder.dense", W, D, true);
    return out;
  }

  const isSize = (x) => Number.isInteger(x) && x >= 1 && x <= MAX_SIZE;
  const isObject = (x) => x !== null && typeof x === "object" && !Array.isArray(x);
  const show = (x) => (x === undefined ? "missing" : JSON.stringify(x));

  /** What is wrong with a model's manifest (JSON) and, when given, its
   * weights (an ArrayBuffer): a list of sentences, empty when nothing is.
   *
   * Checks the format, the attention, the sizes (whole numbers; the heads
   * divide num_hiddens, additive attention has one), the vocabularies
   * and their special tokens, the fingerprint (its recipe key is the
   * checkpoint's), the weights file's name (weights-<sha256[:16]>.bin),
   * byte count and sha256 (its form: the digest is loadModel's), that
   * every tensor the sizes imply is there with that shape and no other,
   * at offsets in range that do not overlap and cover the file; and with
   * the weights, that their length is the manifest's and every number is
   * finite.  expected: what the page's translator says of its model
   * ({checkpoint, attention, num_heads, fingerprint}, each optional).
   */
  function manifestProblems(manifest, buffer, expected) {
    const m = manifest, want = expected || {}, bad = [];
    if (!isObject(m)) return ["manifest.json is not a JSON object"];
    if (m.format !== MANIFEST_FORMAT) {
      bad.push(`format ${show(m.format)}, where this page reads format ` +
               `${MANIFEST_FORMAT} (rebuild the site: make book)`);
      return bad;
    }
    if (want.checkpoint !== undefined && m.checkpoint !== want.checkpoint) {
      bad.push(`it holds checkpoint ${show(m.checkpoint)}, not ` +
               `${want.checkpoint}`);
    }
    if (!ATTENTIONS.includes(m.attention)) {
      bad.push(`attention ${show(m.attention)} is not one of ${ATTENTIONS.join(", ")}`);
    } else if (want.attention !== undefined && m.attention !== want.attention) {
      bad.push(`attention ${show(m.attention)}, where the section's model has ` +
               `${show(want.attention)}`);
    }
    const sizes = ["num_layers", "num_hiddens", "embed_size", "num_heads", "num_steps"];
    if (m.attention === "transformer") sizes.push("ffn_num_hiddens");
    let sizesOk = true;
    for (const k of sizes) {
      if (!isSize(m[k])) {
        bad.push(`${k} ${show(m[k])} is not a whole number in [1, ${MAX_SIZE}]`);
        sizesOk = false;
      }
    }
    if (isSize(m.num_heads) && isSize(m.num_hiddens)) {
      if (m.attention === "additive" && m.num_heads !== 1) {
        bad.push(`num_heads ${m.num_heads}: additive attention has one head`);
      } else if (m.num_hiddens % m.num_heads) {
        bad.push(`num_heads ${m.num_heads} does not divide num_hiddens ${m.num_hiddens}`);
      }
      if (want.num_heads !== undefined && m.num_heads !== want.num_heads) {
        bad.push(`num_heads ${m.num_heads}, where the section's model has ` +
                 `${want.num_heads}`);
      }
    }
    if (m.attention === "transformer" && m.embed_size !== m.num_hiddens) {
      sizesOk = false;
      bad.push(`a Transformer's embed_size (${show(m.embed_size)}) is its ` +
               `num_hiddens (${show(m.num_hiddens)})`);
    }
    let vocabsOk = true;
    for (const side of ["src", "tgt"]) {
      const vocab = m[`${side}_vocab`], special = m[`${side}_special`];
      if (!Array.isArray(vocab) || !vocab.length || vocab.length > 1 << 20 ||
          !vocab.every((tok) => typeof tok === "string")) {
        bad.push(`${side}_vocab is not a list of tokens`);
        vocabsOk = false;
        continue;
      }
      if (!isObject(special)) {
        bad.push(`${side}_special is missing`);
        continue;
      }
      for (const k of SPECIALS) {
        if (vocab[special[k]] !== `<${k}>` || !Number.isInteger(special[k])) {
          bad.push(`${side}_special.${k} ${show(special[k])} is not the id ` +
                   `of <${k}> in ${side}_vocab`);
        }
      }
    }
    const f = m.fingerprint;
    if (!isObject(f) || !FINGERPRINT.every((k) => typeof f[k] === "string")) {
      bad.push(`fingerprint ${show(f)} does not give ${FINGERPRINT.join(", ")}`);
    } else {
      if (f.recipe !== m.recipe_key) {
        bad.push(`the fingerprint's recipe ${show(f.recipe)} is not the ` +
                 `recipe_key ${show(m.recipe_key)}`);
      }
      if (m.checkpoint !== `seq2seq-${m.attention}-${f.recipe}`) {
        bad.push(`checkpoint ${show(m.checkpoint)} is not seq2seq-` +
                 `${m.attention}-${f.recipe}, what its fingerprint names`);
      }
      const theirs = (want.fingerprint || {}).recipe;
      if (theirs !== undefined && f.recipe !== theirs) {
        bad.push(`recipe ${f.recipe}, where the section trained ${theirs}`);
      }
    }
    const sha = m.weights_sha256;
    if (typeof sha !== "string" || !/^[0-9a-f]{64}$/.test(sha)) {
      bad.push(`weights_sha256 ${show(sha)} is not a sha256 (64 hex digits)`);
    } else if (m.weights !== `weights-${sha.slice(0, 16)}.bin`) {
      bad.push(`weights ${show(m.weights)} is not weights-` +
               `${sha.slice(0, 16)}.bin, the name its sha256 gives`);
    }
    const bytes = m.weights_bytes;
    if (!Number.isInteger(bytes) || bytes <= 0 || bytes % 4) {
      bad.push(`weights_bytes ${show(bytes)} is not a whole number of float32s`);
    }
    if (!isObject(m.tensors)) {
      bad.push("tensors is missing");
      return bad;
    }
    // The shapes need the sizes, the offsets a byte count.
    if (!sizesOk || !vocabsOk || !ATTENTIONS.includes(m.attention) ||
        !Number.isInteger(bytes) || bytes <= 0) return bad;
    const expect = expectedTensors(m), floats = bytes / 4, spans = [];
    for (const [name, shape] of Object.entries(expect)) {
      const spec = m.tensors[name];
      if (!isObject(spec)) { bad.push(`tensor ${name} is missing`); continue; }
      if (!Array.isArray(spec.shape) || spec.shape.join() !== shape.join() ||
          spec.shape.length !== shape.length) {
        bad.push(`tensor ${name} has shape ${show(spec.shape)}, where the ` +
                 `manifest's sizes make it ${show(shape)}`);
        continue;
      }
      const size = shape.reduce((a, b) => a * b, 1), o = spec.offset;
      if (!Number.isInteger(o) || o < 0 || o + size > floats) {
        bad.push(`tensor ${name}: offset ${show(o)} is not in [0, ` +
                 `${floats - size}] (${size} floats in a file of ${floats})`);
        continue;
      }
      spans.push([o, o + size, name]);
    }
    for (const name of Object.keys(m.tensors)) {
      if (!(name in expect)) bad.push(`tensor ${name} is not part of the model`);
    }
    if (spans.length < Object.keys(expect).length) return bad;
    spans.sort((a, b) => a[0] - b[0]);
    let end = 0;
    for (const [start, stop, name] of spans) {
      if (start < end) bad.push(`tensor ${name} overlaps the tensor before it`);
      end = Math.max(end, stop);
    }
    const total = spans.reduce((a, [start, stop]) => a + stop - start, 0);
    if (total !== floats) {
      bad.push(`the tensors hold ${total} floats, the weights file ${floats}`);
    }
    if (buffer === undefined || buffer === null || bad.length) return bad;
    if (buffer.byteLength !== bytes) {
      bad.push(`${m.weights} has ${buffer.byteLength} bytes, where the ` +
               `manifest says ${bytes}`);
      return bad;
    }
    const values = new Float32Array(buffer);
    for (const [start, stop, name] of spans) {
      let count = 0;
      for (let i = start; i < stop; i++) if (!Number.isFinite(values[i])) count++;
      if (count) bad.push(`tensor ${name} holds ${count} numbers that are not finite (NaN or infinite)`);
    }
    return bad;
  }

  /** Throw an Error that says what is wrong, if anything is. */
  function checkManifest(manifest, buffer, expected) {
    const bad = manifestProblems(manifest, buffer, expected);
    if (bad.length) {
      const more = bad.length > 3 ? `; and ${bad.length - 3} more` : "";
      throw new Error(`the model's files are not valid: ` +
                      `${bad.slice(0, 3).join("; ")}${more}`);
    }
  }

  const hex = (bytes) => Array.from(new Uint8Array(bytes),
                                    (b) => b.toString(16).padStart(2, "0")).join("");

  /** Load a model folder: manifest.json and its weights file, both
   * checked (manifestProblems) and the weights' sha256 with it.
   *
   * Browsers compute sha256 (crypto.subtle) only in a secure context:
   * https, or a page from this computer (localhost, 127.0.0.1).  Served
   * over plain http from another host, the page cannot check that the
   * weights are the file the manifest describes: it still checks their
   * length, shapes and values, loads them, and the returned model's
   * `verified` is false (the translator says so in its box); otherwise
   * true.  expected: as for manifestProblems.
   */
  async function loadModel(base, checkpoint, onProgress, expected) {
    const folder = `${base}${checkpoint}/`;
    const response = await fetch(`${folder}manifest.json`);
    if (!response.ok) throw new Error(`${folder}manifest.json: HTTP ${response.status}`);
    let manifest;
    try {
      manifest = await response.json();
    } catch (err) {
      throw new Error(`${folder}manifest.json is not JSON (${err.message})`);
    }
    const want = {checkpoint, ...(expected || {})};
    checkManifest(manifest, null, want);
    const buffer = await fetchBytes(folder + manifest.weights, onProgress || (() => {}));
    if (buffer.byteLength !== manifest.weights_bytes) {
      throw new Error(`${manifest.weights}: ${buffer.byteLength} bytes, ` +
                      `expected ${manifest.weights_bytes}`);
    }
    // The page states which weights it runs from the manifest's sha256:
    // check that the file is the one it describes.
    const subtle = root.crypto && root.crypto.subtle;
    let verified = false;
    if (subtle) {
      if (hex(await subtle.digest("SHA-256", buffer)) !== manifest.weights_sha256) {
        throw new Error(`${manifest.weights} is not the file its manifest ` +
                        "describes (another sha256): reload the page");
      }
      verified = true;
    }
    checkManifest(manifest, buffer, want);
    const model = makeModel(manifest, buffer);
    model.verified = verified;
    return model;
  }

  const UNVERIFIED = "This browser could not check that these are the " +
    "weights the manifest describes: it computes sha256 only on pages " +
    "served over https or from this computer. Their size, shapes and " +
    "values were checked.";

  // What can change a checkpoint's weights (d2lmini.cache.fingerprint).
  const FINGERPRINT = ["recipe", "code", "torch", "data"];

  const bleuText = (x) => (typeof x === "number" && Number.isFinite(x)
    ? x.toFixed(1) : null);

  /** What the page says of the weights it runs, from the translator's
   * data (what the notebook evaluated: weights_sha256, bleu) and the
   * served manifest (weights_sha256, and the held-out bleu measured when
   * the site was built).
   *
   * Returns {case, text}: case "same" when the sha256s are equal,
   * "other" when the site's build trained its own weights; or null when
   * the notebook's output names no weights (an older notebook).  BLEU is
   * given to 1 decimal, as in the sections; a missing one is left out.
   */
  function weightsStatement(data, manifest) {
    if (!data.weights_sha256 || !manifest.weights_sha256) return null;
    const theirs = bleuText(data.bleu), mine = bleuText(manifest.bleu);
    if (data.weights_sha256 === manifest.weights_sha256) {
      const bleu = theirs || mine;
      return {case: "same", text: "These are the weights the section " +
              `evaluated${bleu ? ` (held-out BLEU ${bleu})` : ""}.`};
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
    // Where the browser cannot hash them (loadModel).
    const unverifiedNote = el("p", {class: "d2l-unverified", hidden: ""},
                              rootEl);
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
    let model = null, loading = null, last = null;

    function show(result) {
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
      if (!sentence.trim()) {
        status.textContent = "Type an English sentence first, for example " +
          `“${data.example}”, then press Enter.`;
        status.className = "d2l-status d2l-hint";
        output.textContent = ""; notes.textContent = ""; chart.replaceChildren();
        last = null;
        return;
      }
      last = translate(model, sentence);
      status.className = "d2l-status";
      status.textContent = "";
      output.replaceChildren();
      el("b", {}, output, "French: ");
      output.appendChild(document.createTextNode(last.tokens.join(" ") || "(empty)"));
      if (!last.finished) output.appendChild(document.createTextNode(
        ` (stopped after ${last.tokens.length} tokens without <eos>)`));
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
          fingerprint: data.fingerprint}).then((m) => {
        model = m;
        const said = weightsStatement(data, m.manifest);
        rootEl.dataset.weights = said ? said.case : "unknown";
        rootEl.dataset.verified = m.verified ? "yes" : "no";
        if (said) {
          weightsNote.textContent = said.text;
          weightsNote.className = `d2l-weights d2l-weights-${said.case}`;
          weightsNote.hidden = false;
        }
        if (!m.verified) {
          unverifiedNote.textContent = UNVERIFIED;
          unverifiedNote.hidden = false;
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
    rootEl.d2l = {load, translate: (s) => translate(model, s), get model() { return model; }};
  }

  // ---- mounting ----------------------------------------------------------
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
.d2l-live .d2l-weights-other, .d2l-live .d2l-unverified { border-left: 3px solid #E69F00;
  padding-left: 0.6em; }
.d2l-live .d2l-examples { width: 100%; display: flex; flex-wrap: wrap;
  gap: 0.3em; align-items: center; }
.d2l-live button { padding: 0.1em 0.6em; }
.d2l-live :focus-visible { outline: 3px solid #0072B2; outline-offset: 2px; }
`;

  function addStyle() {
    if (!document.getElementById("d2l-live-style")) {
      el("style", {id: "d2l-live-style"}, document.head, STYLE);
    }
  }

  const MOUNTS = {"masked-softmax": mountMaskedSoftmax, scaling: mountScaling,
                  "kernel-regression": mountKernelRegression,
                  "positional-encoding": mountPositionalEncoding,
                  translator: mountTranslator};

  function mountAll(doc) {
    addStyle();
    for (const node of (doc || document).querySelectorAll("[data-d2l-live]")) {
      if (node.dataset.d2lMounted) continue;
      node.dataset.d2lMounted = "1";
      // JupyterLab: keys typed in an explorer are not notebook shortcuts
      // (its notebook would cancel the arrow keys of the sliders).
      node.setAttribute("data-lm-suppress-shortcuts", "true");
      node.addEventListener("keydown", (event) => event.stopPropagation());
      // One broken explorer (bad data, a kind this live.js does not
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

  root.d2lLive = {mountAll, tokenize, makeModel, loadModel, translate,
                  readSource, maskedSoftmaxRow, nadarayaWatson, positionalEncoding,
                  viridis, weightsStatement, manifestProblems, expectedTensors,
                  extent, MANIFEST_FORMAT};
  if (typeof module !== "undefined") module.exports = root.d2lLive;
})(typeof window !== "undefined" ? window : globalThis);
if (typeof document !== "undefined") window.d2lLive.mountAll();
