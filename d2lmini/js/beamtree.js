  /* ---- d2lmini/js/beamtree.js: the beam as a tree ---------------------
   * What beamTranslate kept at each step, drawn as a tree: a column per
   * step, a node per hypothesis (its token, its log P and, once it
   * ended, its score), an edge to the hypothesis it extends; the best
   * hypothesis's path in blue.  Hovering or focusing a node shows the
   * attention row of the step that chose its token. */

  /** The tokens from the first step to `node`, as text. */
  function beamPrefix(node) {
    const tokens = [];
    for (let n = node; n; n = n.parent) tokens.unshift(n.token);
    return tokens.join(" ");
  }

  const shorten = (text, n) => (text.length > n ? `${text.slice(0, n - 1)}…` : text);

  /** One node's words: its hypothesis and numbers. */
  function nodeWords(node, best) {
    const state = node === best ? "the best hypothesis"
      : node.finished ? "finished" : node.score === undefined ? "running"
        : "cut at the length limit";
    const score = node.score === undefined ? "" : `, score ${fmt(node.score, 3)}`;
    return `step ${node.step}: ${beamPrefix(node)} (log P ${fmt(node.logProb, 3)}` +
      `${score}; ${state})`;
  }

  /** Draw result.steps (beamTranslate's) into parent; onNode(node) is
   * called when the reader hovers or focuses a node.  Returns the
   * svg. */
  function beamTree(parent, result, onNode) {
    const colW = 96, rowH = 32, nodeW = 88, nodeH = 26, left = 4, top = 26;
    const rows = maxOf(result.steps.map((nodes) => nodes.length));
    const width = left + colW * result.steps.length, height = top + rowH * rows;
    const onPath = new Set();
    for (let n = result.best; n; n = n.parent) onPath.add(n);
    const chart = svg("svg", {
      class: "d2l-beam-tree", role: "group", width, height,
      viewBox: `0 0 ${width} ${height}`,
      "aria-label": `The beam at each of ${result.steps.length} steps (beam ` +
        `${result.beamSize}, length penalty ${result.lengthPenalty}): ` +
        `${result.steps.flat().length} hypotheses; the best is ` +
        `${beamPrefix(result.best)}`}, parent);
    svg("text", {x: left, y: 16, "font-size": 13, "font-weight": "bold"}, chart,
        "The hypotheses the beam kept at each step (log P; score once ended)");
    const at = (node) => [left + (node.step - 1) * colW, top + node.slot * rowH];
    for (const node of result.steps.flat()) {
      if (!node.parent) continue;
      const [x1, y1] = at(node.parent), [x2, y2] = at(node);
      const a = x1 + nodeW, b = y1 + nodeH / 2, c = y2 + nodeH / 2, mid = (a + x2) / 2;
      svg("path", {d: `M ${a} ${b} C ${mid} ${b} ${mid} ${c} ${x2} ${c}`,
                   fill: "none", stroke: onPath.has(node) ? "#0072B2" : "#aaa",
                   "stroke-width": onPath.has(node) ? 2.5 : 1}, chart);
    }
    for (const node of result.steps.flat()) {
      const [x, y] = at(node), path = onPath.has(node);
      const g = svg("g", {
        class: "d2l-beam-node", tabindex: 0, "data-step": node.step,
        "data-slot": node.slot, "data-token": node.token,
        "data-log-prob": String(node.logProb), "data-best": path ? "1" : "0",
        "aria-label": nodeWords(node, result.best)}, chart);
      const box = {x, y, width: nodeW, height: nodeH, rx: 4,
                   fill: node.finished ? "#FDEBD3" : "#fff",
                   stroke: path ? "#0072B2" : "#888", "stroke-width": path ? 2 : 1};
      if (node.finished) box["stroke-dasharray"] = "4 2";
      svg("rect", box, g);
      svg("text", {x: x + 4, y: y + 11, "font-size": 11}, g, shorten(node.token, 13));
      const numbers = fmt(node.logProb, 2) +
        (node.score === undefined ? "" : ` → ${fmt(node.score, 2)}`);
      svg("text", {x: x + 4, y: y + 22, "font-size": 9.5}, g, numbers);
      svg("title", {}, g, nodeWords(node, result.best));
      const show = () => onNode(node);
      g.addEventListener("mouseenter", show);
      g.addEventListener("focus", show);
    }
    return chart;
  }

  /** The beam's nodes as a table (the tree's text alternative). */
  function beamTable(parent, result) {
    const details = el("details", {class: "d2l-numbers"}, parent);
    el("summary", {}, details, "The beam, as a table");
    const table = el("table", {class: "d2l-beam-table"}, details);
    el("caption", {}, table, "Every hypothesis the beam kept, step by step");
    const head = el("tr", {}, el("thead", {}, table));
    for (const c of ["step", "hypothesis", "log P", "score", ""]) {
      el("th", {scope: "col"}, head, c);
    }
    const body = el("tbody", {}, table);
    for (const node of result.steps.flat()) {
      const tr = el("tr", {}, body);
      el("td", {}, tr, String(node.step));
      el("th", {scope: "row", style: "text-align: left"}, tr, beamPrefix(node));
      el("td", {}, tr, fmt(node.logProb, 3));
      el("td", {}, tr, node.score === undefined ? "" : fmt(node.score, 3));
      el("td", {style: "text-align: left"}, tr, node === result.best ? "best"
        : node.finished ? "finished" : node.score === undefined ? "" : "cut");
    }
    return details;
  }

  /** The hypotheses the search returned (those that ended with <eos>,
   * and those cut at the length limit), best first, as a table. */
  function hypothesesTable(parent, result) {
    const table = el("table", {class: "d2l-hypotheses"}, parent);
    el("caption", {}, table, `The ${result.hypotheses.length} hypotheses ` +
       "the search returned, best first (score = log P / lp(length))");
    const head = el("tr", {}, el("thead", {}, table));
    for (const c of ["", "French", "log P", "score"]) el("th", {scope: "col"}, head, c);
    const body = el("tbody", {}, table);
    result.hypotheses.forEach((hyp, i) => {
      const tr = el("tr", {}, body);
      el("td", {}, tr, String(i + 1));
      el("th", {scope: "row", style: "text-align: left"}, tr,
         (hyp.tokens.join(" ") || "(empty)") +
         (hyp.finished ? "" : " (cut at the length limit)"));
      el("td", {}, tr, fmt(hyp.logProb, 3));
      el("td", {}, tr, fmt(hyp.score, 3));
    });
    return table;
  }
