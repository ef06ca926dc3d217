  /* ---- d2lmini/js/charts.js: the charts ------------------------------
   * Colour maps, the table of a chart's numbers, heatmaps, histograms
   * and line charts: SVGs with role="img", an aria-label that sums each
   * up and a <title> per cell.  They know no explorer. */

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

  /** A <details> table of a matrix: the numbers a chart draws; whose
   * (optional) names them where a chart has several ("head 2"). */
  function numbersTable(parent, caption, rows, cols, values, digits, whose) {
    const details = el("details", {class: "d2l-numbers"}, parent);
    el("summary", {}, details,
       whose ? `The numbers of ${whose}, as a table` : "The numbers, as a table");
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
   * data-row, data-col and data-value (the full number) and a <title>
   * with the value to opts.digits decimals (default 3).
   * Options for large or signed matrices: domain [lo, hi] (the values the
   * colour map's ends stand for; default [0, 1]), colour (a map of 0..1,
   * default viridis), labelEvery (label every n-th row and column) and
   * marks {rows, cols} (indices outlined: a chosen row or column), which
   * chart.mark(marks) moves without redrawing the cells; annotateDigits
   * (default 2) the decimals written in each cell.  A value null leaves
   * its cell empty (a key that a causal mask hides from the query).
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
      if (v === null) return;
      const x = left + j * cell, y = top + i * cell;
      const r = svg("rect", {
        x, y, width: cell - gap, height: cell - gap, fill: colour(scale(v)),
        "data-row": i, "data-col": j, "data-value": String(v)}, chart);
      svg("title", {}, r, `${rows[i]} → ${cols[j]}: ${fmt(v, opts.digits ?? 3)}`);
      if (opts.annotate !== false) {
        svg("text", {
          x: x + cell / 2, y: y + cell / 2 + 4, "text-anchor": "middle",
          "font-size": 10, fill: textColour(scale(v)), "aria-hidden": "true"},
        chart, fmt(v, opts.annotateDigits ?? 2));
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

  /** Line charts over xs: lines [{ys, colour, dash, width, xs, name}]
   * (a line's own xs, if it has them, else the chart's; a name puts it in
   * the legend), a dashed vertical marker at x = marker; optional points
   * {xs, ys} (dots) and stems (a weight per point, drawn below the
   * chart); opts.width and opts.height size it (default 560 x 300);
   * opts.legend "bottom" puts the legend in the lower right corner (for
   * curves that end high), else it is in the upper right. */
  function curves(parent, opts) {
    const {xs, lines, marker, title, label, xlabel} = opts;
    const points = opts.points || {xs: [], ys: []}, stems = opts.stems || [];
    const W = opts.width || 560, H = opts.height || 300, L = 44, R = 12, T = 26, B = 34;
    const stemH = stems.length ? 60 : 0;
    const all = [...lines.flatMap((l) => l.ys), ...points.ys];
    const [lo, hi] = extent(all);
    const [x0, x1] = extent(xs, points.xs, ...lines.map((l) => l.xs || []));
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
      const lx = line.xs || xs;
      const d = lx.map((x, i) => `${i ? "L" : "M"}${sx(x).toFixed(1)},${sy(line.ys[i]).toFixed(1)}`).join("");
      svg("path", {d, fill: "none", stroke: line.colour, "stroke-width": line.width || 2,
                   "stroke-dasharray": line.dash || "none", "data-line": k}, chart);
    });
    const named = lines.filter((line) => line.name);
    named.forEach((line, k) => {
      const y = opts.legend === "bottom" ? top - 8 - 13 * (named.length - 1 - k)
        : T + 6 + 13 * k;
      svg("line", {x1: W - R - 110, x2: W - R - 92, y1: y, y2: y, stroke: line.colour,
                   "stroke-width": 2, "stroke-dasharray": line.dash || "none"}, chart);
      svg("text", {x: W - R - 88, y: y + 4, "font-size": 10}, chart, line.name);
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
