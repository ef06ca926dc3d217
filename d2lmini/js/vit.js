  /* ---- d2lmini/js/vit.js: the digit classifier -----------------------
   * The vision section's ViT (d2lmini.vit) in the page.  Computing (no
   * DOM; runs in Node as well, tests/test_live_vision.py): a 32 x 32
   * bitmap as 8 x 8 counts, exactly as the digits were made
   * (d2lmini.digits.counts_from_bitmap), and back (one bitmap per
   * image of counts); the forward pass with every block's attention;
   * loading and checking a model folder that d2lmini.live.export_vit
   * wrote, with manifest.js's helpers.  Drawing: the explorer, a grid
   * to draw on with a mouse, a finger or the keyboard, and the ten
   * probabilities and each head's <cls> attention, redrawn at every
   * stroke.  The computing functions are offered as window.d2lVision.
   * Shape legend (d2lmini.vit's): M patches, T = M + 1 tokens, D
   * features, h heads, N blocks. */

  // The ViT manifest format this script reads
  // (d2lmini.live.VIT_MANIFEST_FORMAT).
  const VIT_FORMAT = 1;
  const DIGIT_SIZE = 8, DIGIT_BLOCK = 4, DIGIT_BITMAP = 32;
  const DIGIT_LEVELS = DIGIT_BLOCK * DIGIT_BLOCK + 1;  // counts 0..16
  const DIGIT_CLASSES = 10;
  const VIT_POOLS = ["cls", "mean"];
  // What can change a vision checkpoint (d2lmini.vision.fingerprint).
  const VIT_FINGERPRINT = ["recipe", "code", "torch", "data", "device"];
  // The fields of a ViT manifest that say what the page computes
  // (d2lmini.live_vision.VIT_MODEL_FIELDS); mean and std are floats.
  const VIT_MODEL_FIELDS = [
    "checkpoint", "fingerprint", "image_size", "num_classes",
    "patch_size", "num_hiddens", "mlp_num_hiddens", "num_heads",
    "num_blks", "pool", "mean", "std", "tensors", "weights",
    "weights_bytes", "weights_sha256"];
  const VIT_FLOAT_FIELDS = ["mean", "std"];

  // ---- bitmaps and counts ---------------------------------------------
  /** A bitmap as 1024 numbers row by row, from 1024 numbers (an array
   * or a typed array) or 32 rows of 32; each must be 0 or 1. */
  function flatBitmap(bitmap) {
    const N = DIGIT_BITMAP;
    let flat = bitmap;
    if (Array.isArray(bitmap) && bitmap.length === N &&
        bitmap.every((row) => Array.isArray(row) && row.length === N)) {
      flat = bitmap.flat();
    }
    if (!flat || flat.length !== N * N) {
      throw new Error(`a bitmap is ${N} x ${N} (or ${N * N} numbers row ` +
                      `by row), got ${shown(bitmap).slice(0, 60)}`);
    }
    for (let i = 0; i < flat.length; i++) {
      const v = flat[i];
      if (v !== 0 && v !== 1 && v !== true && v !== false) {
        throw new Error(`a bitmap holds only 0 and 1, got ${shown(v)} ` +
                        `at row ${Math.floor(i / N)}, column ${i % N}`);
      }
    }
    return flat;
  }

  /** d2lmini.digits.counts_from_bitmap: a 32 x 32 bitmap -> 8 x 8
   * counts (rows of numbers), the set pixels of each 4 x 4 block: the
   * count at row i, column j sums bitmap rows 4i..4i+3, columns
   * 4j..4j+3. */
  function countsFromBitmap(bitmap) {
    const b = flatBitmap(bitmap), N = DIGIT_BITMAP, k = DIGIT_BLOCK;
    const counts = Array.from({length: DIGIT_SIZE}, () => new Array(DIGIT_SIZE).fill(0));
    for (let r = 0; r < N; r++) {
      for (let c = 0; c < N; c++) {
        if (b[r * N + c]) counts[Math.floor(r / k)][Math.floor(c / k)] += 1;
      }
    }
    return counts;
  }

  /** Throw unless counts are 8 rows of 8 whole numbers in 0..16. */
  function checkCounts(counts) {
    const n = DIGIT_SIZE, top = DIGIT_LEVELS - 1;
    if (!Array.isArray(counts) || counts.length !== n ||
        !counts.every((row) => Array.isArray(row) && row.length === n)) {
      throw new Error(`counts are ${n} rows of ${n} numbers, got ` +
                      `${shown(counts).slice(0, 60)}`);
    }
    for (const row of counts) {
      for (const v of row) {
        if (!Number.isInteger(v) || v < 0 || v > top) {
          throw new Error(`counts are whole numbers in 0..${top}, got ${shown(v)}`);
        }
      }
    }
  }

  // The order in which a 4 x 4 block's cells are set (a Bayer ordered
  // dither): a block of count c has the cells numbered below c set, so
  // that a grey level is spread over its block, not drawn as a bar.
  const DITHER = [[0, 8, 2, 10], [12, 4, 14, 6], [3, 11, 1, 9], [15, 7, 13, 5]];

  /** One bitmap (1024 numbers, row by row) whose counts are the given
   * 8 x 8 counts: each 4 x 4 block with `count` cells set, in the
   * DITHER order.  countsFromBitmap gives the counts back exactly; the
   * bitmap the digit was first drawn on cannot be known (many give the
   * same counts). */
  function bitmapFromCounts(counts) {
    checkCounts(counts);
    const N = DIGIT_BITMAP, k = DIGIT_BLOCK, out = new Uint8Array(N * N);
    for (let r = 0; r < N; r++) {
      for (let c = 0; c < N; c++) {
        const count = counts[Math.floor(r / k)][Math.floor(c / k)];
        out[r * N + c] = DITHER[r % k][c % k] < count ? 1 : 0;
      }
    }
    return out;
  }

  // ---- the ViT -----------------------------------------------------------
  /** erf(x) to double precision: 2/sqrt(pi) e^(-x^2) times the series
   * sum_n 2^n x^(2n+1) / (1 * 3 * ... * (2n+1)), whose terms are all
   * positive (nothing cancels); +-1 beyond |x| = 6, where erfc(x) is
   * below 3e-17. */
  function erf(x) {
    if (Number.isNaN(x)) return NaN;
    const a = Math.abs(x);
    if (a >= 6) return Math.sign(x);
    const a2 = a * a;
    let term = a, sum = a;
    for (let n = 1; term > 1e-17 * sum; n++) {
      term *= 2 * a2 / (2 * n + 1);
      sum += term;
    }
    return Math.sign(x) * Math.min(1, 2 / Math.sqrt(Math.PI) * Math.exp(-a2) * sum);
  }

  /** nn.GELU() (exact, not the tanh approximation): x Phi(x). */
  const gelu = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2));

  /** Every tensor of the ViT a manifest describes, by state-dict name
   * in the state dict's order, with the shape its sizes imply
   * (d2lmini.vit.ViT). */
  function vitExpectedTensors(m) {
    const D = m.num_hiddens, F = m.mlp_num_hiddens, p = m.patch_size;
    const T = (m.image_size / p) ** 2 + 1, out = {};
    const add = (name, shape) => { out[name] = shape; };
    const linear = (name, rows, cols) => {
      add(`${name}.weight`, [rows, cols]);
      add(`${name}.bias`, [rows]);
    };
    const norm = (name) => { add(`${name}.weight`, [D]); add(`${name}.bias`, [D]); };
    add("cls_token", [1, 1, D]);
    add("pos_embedding", [1, T, D]);
    add("patch_embedding.conv.weight", [D, 1, p, p]);
    add("patch_embedding.conv.bias", [D]);
    for (let l = 0; l < m.num_blks; l++) {
      const b = `blks.${l}`;
      norm(`${b}.ln1`);
      for (const w of ["W_q", "W_k", "W_v", "W_o"]) linear(`${b}.attention.${w}`, D, D);
      norm(`${b}.ln2`);
      linear(`${b}.mlp.dense1`, F, D);
      linear(`${b}.mlp.dense2`, D, F);
    }
    norm("head.0");
    linear("head.1", m.num_classes, D);
    return out;
  }

  /** What is wrong with a ViT's manifest (JSON) and, when given, its
   * weights (an ArrayBuffer): a list of sentences, empty when nothing
   * is.  Checks the format; the sizes (whole numbers, 8 x 8 images and
   * ten classes, the patch size divides the image, the heads divide
   * num_hiddens), the pooling, the normalisation (finite, std > 0), the
   * fingerprint (its recipe key names the checkpoint), the weights
   * file's name, byte count and sha256's form, every tensor with its
   * shape at its offset and no other; with the weights, their length
   * and that every number is finite (manifest.js's weightsFileProblems
   * and tensorProblems, as for the translators).  expected: what the
   * page's data says of its model ({checkpoint, fingerprint,
   * patch_size, num_heads, num_blks}, each optional). */
  function vitManifestProblems(manifest, buffer, expected) {
    const m = manifest, want = expected || {}, bad = [];
    if (!isObject(m)) return ["manifest.json is not a JSON object"];
    if (m.format !== VIT_FORMAT) {
      bad.push(`format ${show(m.format)}, where this page reads format ` +
               `${VIT_FORMAT} of a ViT (rebuild the site: make book)`);
      return bad;
    }
    if (want.checkpoint !== undefined && m.checkpoint !== want.checkpoint) {
      bad.push(`it holds checkpoint ${show(m.checkpoint)}, not ${want.checkpoint}`);
    }
    let sizesOk = true;
    for (const k of ["image_size", "num_classes", "patch_size", "num_hiddens",
                     "mlp_num_hiddens", "num_heads", "num_blks"]) {
      if (!isSize(m[k])) {
        bad.push(`${k} ${show(m[k])} is not a whole number in [1, ${MAX_SIZE}]`);
        sizesOk = false;
      } else if (want[k] !== undefined && m[k] !== want[k]) {
        bad.push(`${k} ${m[k]}, where the section's model has ${want[k]}`);
      }
    }
    if (sizesOk) {
      if (m.image_size !== DIGIT_SIZE || m.num_classes !== DIGIT_CLASSES) {
        bad.push(`a model of ${m.image_size} x ${m.image_size} images and ` +
                 `${m.num_classes} classes, where the page draws ` +
                 `${DIGIT_SIZE} x ${DIGIT_SIZE} digits of ${DIGIT_CLASSES} classes`);
        sizesOk = false;
      }
      if (m.image_size % m.patch_size) {
        bad.push(`patch_size ${m.patch_size} does not divide image_size ${m.image_size}`);
        sizesOk = false;
      }
      if (m.num_hiddens % m.num_heads) {
        bad.push(`num_heads ${m.num_heads} does not divide num_hiddens ${m.num_hiddens}`);
      }
    }
    if (!VIT_POOLS.includes(m.pool)) {
      bad.push(`pool ${show(m.pool)} is not one of ${VIT_POOLS.join(", ")}`);
    }
    for (const k of VIT_FLOAT_FIELDS) {
      if (typeof m[k] !== "number" || !Number.isFinite(m[k])) {
        bad.push(`${k} ${show(m[k])} is not a finite number`);
      }
    }
    if (typeof m.std === "number" && !(m.std > 0)) {
      bad.push(`std ${show(m.std)} is not positive`);
    }
    const f = m.fingerprint;
    if (!isObject(f) || !VIT_FINGERPRINT.every((k) => typeof f[k] === "string")) {
      bad.push(`fingerprint ${show(f)} does not give ${VIT_FINGERPRINT.join(", ")}`);
    } else {
      if (m.checkpoint !== `vision-vit-${f.recipe}`) {
        bad.push(`checkpoint ${show(m.checkpoint)} is not vision-vit-` +
                 `${f.recipe}, what its fingerprint names`);
      }
      const theirs = (want.fingerprint || {}).recipe;
      if (theirs !== undefined && f.recipe !== theirs) {
        bad.push(`recipe ${f.recipe}, where the section trained ${theirs}`);
      }
    }
    weightsFileProblems(m, bad);
    const bytes = m.weights_bytes;
    if (!isObject(m.tensors)) {
      bad.push("tensors is missing");
      return bad;
    }
    // The shapes need the sizes, the offsets a byte count.
    if (!sizesOk || !Number.isInteger(bytes) || bytes <= 0) return bad;
    return tensorProblems(m, vitExpectedTensors(m), buffer, bad);
  }

  /** A float as Python's repr writes it ("16.0", "1e-05"), for numbers
   * the manifest holds as floats; anything else as canonicalJSON. */
  function pythonFloat(x) {
    if (typeof x !== "number" || !Number.isFinite(x)) return canonicalJSON(x);
    if (Object.is(x, -0)) return "-0.0";
    const a = Math.abs(x);
    if (a !== 0 && (a < 1e-4 || a >= 1e16)) {
      return x.toExponential().replace(/e([+-])(\d)$/, "e$10$2");
    }
    const s = String(x);  // the shortest digits, as Python's
    return Number.isInteger(x) ? `${s}.0` : s;
  }

  /** sha256 of the manifest's VIT_MODEL_FIELDS (a missing one as null)
   * as canonical JSON with mean and std written as Python writes a
   * float, in UTF-8: d2lmini.live_vision.vit_model_sha256, which the
   * section's digit-classifier output records. */
  function vitModelSha256(manifest) {
    const fields = pickFields(manifest, VIT_MODEL_FIELDS);
    const text = `{${Object.keys(fields).sort(byCodePoint).map((k) => {
      const v = VIT_FLOAT_FIELDS.includes(k) ? pythonFloat(fields[k]) : canonicalJSON(fields[k]);
      return `${JSON.stringify(k)}:${v}`;
    }).join(",")}}`;
    return sha256Hex(new TextEncoder().encode(text));
  }

  /** A ViT from its checked manifest (JSON) and weights (an
   * ArrayBuffer): its tensors as model.js's tensorsOf reads them. */
  function makeVit(manifest, buffer) {
    return {manifest, t: tensorsOf(manifest, buffer)};
  }

  /** The ViT's forward pass on one image of 8 x 8 counts (0..16), as
   * d2lmini.vit.ViT in eval mode on Digits.normalize(counts).
   *
   * Returns {probs (10), logits (10), prediction (the most probable
   * class, the lower on a tie), cls ([N][h][M]: the <cls> query's
   * weights over the patches, d2lmini.vit.cls_attention), attention
   * ([N][h][T][T]: every block's weights)}. */
  function vitForward(model, counts) {
    checkCounts(counts);
    const m = model.manifest, t = model.t, p = m.patch_size, D = m.num_hiddens;
    const g = m.image_size / p, h = m.num_heads;  // g x g patches
    const x = counts.map((row) => row.map((c) => (c - m.mean) / m.std));
    // Patch embedding: a convolution with kernel and stride p, the
    // patches row by row; <cls> in front; the learned positions added.
    const W = t["patch_embedding.conv.weight"].data;
    const bias = t["patch_embedding.conv.bias"].data;
    const cls = t.cls_token.data, pos = t.pos_embedding.data;
    let X = [Float64Array.from({length: D}, (_, d) => cls[d] + pos[d])];
    for (let i = 0; i < g; i++) {
      for (let j = 0; j < g; j++) {
        const e = new Float64Array(D), k = X.length;
        for (let d = 0; d < D; d++) {
          let s = bias[d];
          for (let a = 0; a < p; a++) {
            for (let b = 0; b < p; b++) s += W[(d * p + a) * p + b] * x[i * p + a][j * p + b];
          }
          e[d] = s + pos[k * D + d];
        }
        X.push(e);
      }
    }
    // The blocks, pre-norm: X + attention(LN1(X)), then X + MLP(LN2(X)).
    const attention = [];
    for (let l = 0; l < m.num_blks; l++) {
      const b = `blks.${l}`, prefix = `${b}.attention`;
      const Z = X.map((v) => layerNorm(v, t[`${b}.ln1.weight`], t[`${b}.ln1.bias`]));
      const memory = headMemory(t, prefix, Z);
      const outs = Z.map((z) => multiHead(t, prefix, h, memory, z));  // [out, (h, T)]
      X = X.map((v, i) => v.map((a, k) => a + outs[i][0][k]));
      attention.push(Array.from({length: h}, (_, head) => outs.map((o) => o[1][head])));
      X = X.map((v) => {
        const y = layerNorm(v, t[`${b}.ln2.weight`], t[`${b}.ln2.bias`]);
        const hidden = linear(t, `${b}.mlp.dense1`, y).map(gelu);
        const out = linear(t, `${b}.mlp.dense2`, hidden);
        return v.map((a, k) => a + out[k]);
      });
    }
    let pooled = X[0];
    if (m.pool === "mean") {
      pooled = new Float64Array(D);
      for (const v of X.slice(1)) {
        for (let k = 0; k < D; k++) pooled[k] += v[k] / (X.length - 1);
      }
    }
    const logits = Array.from(linear(t, "head.1", layerNorm(
      pooled, t["head.0.weight"], t["head.0.bias"])));
    const probs = softmax(logits);
    let prediction = 0;
    probs.forEach((q, k) => { if (q > probs[prediction]) prediction = k; });
    const clsRows = attention.map((heads) => heads.map((w) => w[0].slice(1)));
    return {probs, logits, prediction, cls: clsRows, attention};
  }

  /** Load a ViT's folder: manifest.json and its weights, both checked
   * (vitManifestProblems), the weights' sha256 with them.  expected:
   * as for vitManifestProblems, and what the section's run recorded of
   * its model (weights_sha256, model_sha256): when the served weights
   * are the section's, the manifest must describe them as the
   * section's run did (vitModelSha256). */
  async function loadVit(base, checkpoint, onProgress, expected) {
    const folder = `${base}${checkpoint}/`;
    const manifest = await fetchManifest(folder);
    const want = {checkpoint, ...(expected || {})};
    throwProblems(vitManifestProblems(manifest, null, want));
    if (want.model_sha256 && manifest.weights_sha256 === want.weights_sha256 &&
        vitModelSha256(manifest) !== want.model_sha256) {
      throw new Error("manifest.json names the weights the section " +
                      "evaluated but does not describe them as the " +
                      "section's run did (its sizes, normalisation or " +
                      "tensor layout were changed): rebuild the site " +
                      "(make book)");
    }
    const buffer = await fetchWeights(folder, manifest, onProgress);
    throwProblems(vitManifestProblems(manifest, buffer, want));
    return makeVit(manifest, buffer);
  }

  const percent = (x) => (typeof x === "number" && Number.isFinite(x)
    ? `${(100 * x).toFixed(1)} %` : null);

  /** What the page says of the weights it runs, from the explorer's
   * data (what the notebook evaluated) and the served manifest, once
   * loadVit checked them: {case: "same" | "other", text}, or null when
   * the data names no weights or the manifest names the section's
   * weights but describes them otherwise (loadVit refuses that). */
  function vitWeightsStatement(data, manifest) {
    if (!data.weights_sha256 || !data.model_sha256 || !manifest.weights_sha256) return null;
    const theirs = percent(data.test_accuracy), mine = percent(manifest.test_accuracy);
    const n = manifest.test_images || data.test_images;
    if (data.weights_sha256 === manifest.weights_sha256) {
      if (data.model_sha256 !== vitModelSha256(manifest)) return null;
      return {case: "same", text: "These are the weights the section " +
              `evaluated${theirs ? ` (test accuracy ${theirs} on its ${n} test images)` : ""}.`};
    }
    const parts = (f) => JSON.stringify(VIT_FINGERPRINT.map((k) => (f || {})[k]));
    const sameCode = parts(data.fingerprint) === parts(manifest.fingerprint);
    let text = sameCode
      ? "This site was built on a machine that trained its own weights " +
        "from the same code and seed (float rounding differs from one " +
        "machine to another): "
      : "This site was built with other code, data or torch than the " +
        "section's run, which trained other weights: ";
    text += mine
      ? `they classify ${mine} of the ${n} test images` +
        `${theirs ? `; the run this section reports, ${theirs}` : ""}.`
      : "they are not the weights the section evaluated.";
    return {case: "other", text};
  }

  // ---- explorer: digit classifier -----------------------------------------
  const GRID_CELL = 10;  // CSS pixels of a bitmap cell on the grid
  const PEN_SIZES = [2, 1, 3];  // the first is the default
  const UNDO_MAX = 200;
  // Grey levels: black for 0, white for 1 (the ink of a count of 16).
  const ink = (t) => {
    const v = Math.round(255 * Math.min(Math.max(t, 0), 1));
    return `rgb(${v},${v},${v})`;
  };
  const NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six",
                        "seven", "eight", "nine", "ten"];
  const HEAT = "#E69F00";  // Okabe and Ito's orange, over the grey image

  /** Cells of a straight line from a to b ([row, col]), both ends in.
   * The cells must be whole numbers (a NaN would never meet b). */
  function lineCells(a, b) {
    if (![...a, ...b].every(Number.isInteger)) {
      throw new Error(`lineCells takes whole-number cells, got ${a} and ${b}`);
    }
    const cells = [];
    let [r, c] = a;
    const dr = Math.abs(b[0] - r), dc = Math.abs(b[1] - c);
    const sr = r < b[0] ? 1 : -1, sc = c < b[1] ? 1 : -1;
    let err = dc - dr;
    for (;;) {
      cells.push([r, c]);
      if (r === b[0] && c === b[1]) return cells;
      const e2 = 2 * err;
      if (e2 > -dr) { err -= dr; c += sc; }
      if (e2 < dc) { err += dc; r += sr; }
    }
  }

  /** The ten probabilities as horizontal bars, the predicted class
   * marked; each bar a <rect> with data-class and data-value. */
  function probabilityBars(parent, probs, prediction) {
    const W = 300, row = 20, L = 70, top = 24, H = top + row * probs.length + 6;
    const label = `Probabilities: most likely ${prediction} ` +
      `(${probs[prediction].toFixed(3)}); ` +
      probs.map((q, k) => `${k}: ${q.toFixed(3)}`).join(", ");
    const chart = svg("svg", {class: "d2l-digit-probs", role: "img", width: W, height: H,
                              viewBox: `0 0 ${W} ${H}`, "aria-label": label}, parent);
    svg("text", {x: 4, y: 16, "font-size": 13, "font-weight": "bold"}, chart,
        "Probability of each digit");
    probs.forEach((q, k) => {
      const y = top + k * row, best = k === prediction;
      svg("text", {x: L - 8, y: y + 14, "font-size": 12, "text-anchor": "end",
                   "font-weight": best ? "bold" : "normal"}, chart,
          best ? `▶ ${k}` : String(k));
      const bar = svg("rect", {x: L, y: y + 3, width: Math.max(q * (W - L - 50), 0.5),
                               height: row - 6, fill: best ? "#0072B2" : "#9a9a9a",
                               "data-class": k, "data-value": String(q),
                               class: best ? "d2l-predicted" : ""}, chart);
      svg("title", {}, bar,
          `digit ${k}: probability ${q.toFixed(4)}${best ? " (predicted)" : ""}`);
      svg("text", {x: L + Math.max(q * (W - L - 50), 0.5) + 4, y: y + 14, "font-size": 11},
          chart, q.toFixed(3));
    });
    return chart;
  }

  /** The 8 x 8 image (grey) with one head's weights over the patches
   * laid on it (orange, opaque in proportion to the weight, the
   * largest outlined); each patch a <rect> with data-patch and
   * data-value. */
  function attentionOverlay(parent, counts, weights, p, title) {
    const n = DIGIT_SIZE, cell = 16, g = n / p, top = 20, size = n * cell;
    const most = Math.max(maxOf(weights), 1e-12);
    let argmax = 0;
    weights.forEach((w, k) => { if (w > weights[argmax]) argmax = k; });
    const chart = svg("svg", {
      class: "d2l-digit-overlay", role: "img", width: size + 2, height: size + top + 2,
      viewBox: `0 0 ${size + 2} ${size + top + 2}`,
      "aria-label": `${title}: the <cls> token attends most to the patch at ` +
        `row ${Math.floor(argmax / g) + 1}, column ${argmax % g + 1} ` +
        `(weight ${weights[argmax].toFixed(3)})`}, parent);
    svg("text", {x: 1, y: 14, "font-size": 12, "font-weight": "bold"}, chart, title);
    counts.forEach((row, i) => row.forEach((v, j) => svg("rect", {
      x: 1 + j * cell, y: top + i * cell, width: cell, height: cell,
      fill: ink(v / (DIGIT_LEVELS - 1))}, chart)));
    weights.forEach((w, k) => {
      const r = Math.floor(k / g), c = k % g;
      const patch = svg("rect", {
        x: 1 + c * p * cell, y: top + r * p * cell, width: p * cell, height: p * cell,
        fill: HEAT, "fill-opacity": (0.85 * w / most).toFixed(3),
        stroke: k === argmax ? "#fff" : "none", "stroke-width": 2,
        "data-patch": k, "data-value": String(w)}, chart);
      svg("title", {}, patch, `patch row ${r + 1}, column ${c + 1}: weight ${w.toFixed(3)}`);
    });
    return chart;
  }

  function mountDigitClassifier(rootEl, data) {
    if (!Array.isArray(data.examples) || typeof data.checkpoint !== "string" ||
        typeof data.base !== "string") {
      throw new Error("its data lacks the checkpoint, the base URL or the examples");
    }
    data.examples.forEach((ex) => checkCounts(ex.counts));
    const id = rootEl.id || "d2l-digits", N = DIGIT_BITMAP;
    const L = data.num_blks, h = data.num_heads, p = data.patch_size;
    const about = el("p", {class: "d2l-checkpoint"}, rootEl);
    about.append("The explorer runs checkpoint ");
    el("code", {}, about, data.checkpoint);
    about.append(` (recipe key ${data.fingerprint.recipe}): the section's ` +
                 `Vision Transformer (patches of ${p} × ${p} pixels, ${h} ` +
                 `heads, ${L} blocks), in your browser, with no server.`);
    const weightsNote = el("p", {class: "d2l-weights", hidden: ""}, rootEl);
    const status = el("p", {class: "d2l-status", role: "status"}, rootEl,
                      "The model loads when this explorer comes into view.");
    const helpId = `${id}-help`;
    el("p", {class: "d2l-note", id: helpId}, rootEl,
       "Draw a digit on the 32 × 32 grid with the mouse or a finger. " +
       "Keyboard: focus the grid (Tab), then the arrow keys move the " +
       "cursor, Space or Enter draws the pen under it, Shift with the " +
       "arrow keys draws as the cursor moves, E switches between pen and " +
       "eraser, U undoes the last stroke and Delete clears the grid.");
    const form = el("div", {class: "d2l-controls"}, rootEl);
    const menuId = `${id}-example`;
    const menuWrap = el("div", {class: "d2l-control"}, form);
    el("label", {for: menuId}, menuWrap, "Start from");
    const menu = el("select", {id: menuId, name: "example"}, menuWrap);
    el("option", {value: ""}, menu, "your drawing");
    data.examples.forEach((ex, i) => el(
      "option", {value: i}, menu, `test image ${ex.index}: a ${ex.label}`));
    const clearButton = el("button", {type: "button", name: "clear"}, form, "Clear");
    const undoButton = el("button", {type: "button", name: "undo"}, form, "Undo");
    const penWrap = el("div", {class: "d2l-control"}, form);
    el("label", {for: `${id}-pen`}, penWrap, "pen");
    const penSelect = el("select", {id: `${id}-pen`, name: "pen"}, penWrap);
    PEN_SIZES.forEach((s) => el("option", {value: s}, penSelect,
                                s === 1 ? "1 cell" : `${s} × ${s} cells`));
    const eraseWrap = el("div", {class: "d2l-control"}, form);
    const erase = el("input", {id: `${id}-erase`, type: "checkbox", name: "erase"}, eraseWrap);
    el("label", {for: `${id}-erase`}, eraseWrap, "eraser (E)");
    let blockSelect = null;
    if (L > 1) {
      const blockWrap = el("div", {class: "d2l-control"}, form);
      el("label", {for: `${id}-block`}, blockWrap, "attention of block");
      blockSelect = el("select", {id: `${id}-block`, name: "block"}, blockWrap);
      for (let l = 0; l < L; l++) el("option", {value: l}, blockSelect, `${l + 1} of ${L}`);
      blockSelect.value = String(L - 1);
    }
    const row = el("div", {class: "d2l-row"}, rootEl);
    const gridWrap = el("div", {class: "d2l-digit-grid-wrap"}, row);
    const canvas = el("canvas", {
      class: "d2l-digit-grid", width: N * GRID_CELL, height: N * GRID_CELL,
      tabindex: 0, role: "application", "aria-roledescription": "drawing grid",
      "aria-label": "32 by 32 grid to draw a digit on", "aria-describedby": helpId},
    gridWrap);
    const cursorNote = el("p", {class: "d2l-note d2l-digit-cursor"}, gridWrap);
    const countsView = el("div", {class: "d2l-digit-counts"}, row);
    const probsView = el("div", {class: "d2l-digit-probs-view"}, row);
    const output = el("p", {class: "d2l-output", "aria-live": "polite"}, rootEl);
    const attentionView = el("div", {class: "d2l-digit-attention"}, rootEl);
    const k = data.examples_per_class;
    const which = k === 1 ? "test image" : `${NUMBER_WORDS[k] || k} test images`;
    el("p", {class: "d2l-note d2l-digit-menu-note"}, rootEl,
       `The menu offers the first ${which} of each class, in test order ` +
       "(not chosen). A test image holds only its 8 × 8 counts, which " +
       "many drawings give: the grid shows one of them, each 4 × 4 block " +
       "with as many cells set as its count, in a fixed dither order; the " +
       "model reads exactly the test image's counts.");

    let bitmap = new Uint8Array(N * N), undo = [], stroke = null, keyStroke = false;
    let cursor = [14, 14], model = null, loading = null, result = null;
    let example = null;  // the menu's image while the grid shows it unchanged
    let pending = null, scheduled = false;
    let keyboardUsed = null;  // the input the grid last had, once it had one
    const ctx = canvas.getContext("2d");
    const penSize = () => Number(penSelect.value);

    /** Redraw at the next frame; inputs before it share one redraw,
     * timed from the first of them. */
    function changed(start) {
      if (pending === null) pending = start === undefined ? performance.now() : start;
      if (!scheduled) {
        scheduled = true;
        requestAnimationFrame(redraw);
      }
    }

    function pushUndo() {
      undo.push(bitmap.slice());
      if (undo.length > UNDO_MAX) undo.shift();
    }

    function paint(cell) {
      const s = penSize(), o = -Math.floor((s - 1) / 2), v = erase.checked ? 0 : 1;
      for (let dr = 0; dr < s; dr++) {
        for (let dc = 0; dc < s; dc++) {
          const r = cell[0] + o + dr, c = cell[1] + o + dc;
          if (r >= 0 && r < N && c >= 0 && c < N) bitmap[r * N + c] = v;
        }
      }
    }

    function beginStroke() {
      if (!model) load();
      pushUndo();
      stroke = {last: null};
      example = null;
      menu.value = "";
    }

    function endStroke() {
      if (!stroke) return;
      stroke = null;
      keyStroke = false;
      const before = undo[undo.length - 1];
      if (before && before.every((v, i) => v === bitmap[i])) undo.pop();  // nothing drawn
      changed();
    }

    function strokeTo(cell) {
      if (cell === null) return;  // a grid laid out at no size
      for (const c of stroke.last ? lineCells(stroke.last, cell) : [cell]) paint(c);
      stroke.last = cell;
    }

    function setBitmap(bits, from) {
      pushUndo();
      bitmap = Uint8Array.from(flatBitmap(bits), Number);
      example = from === undefined ? null : from;
      menu.value = example === null ? "" : String(example);
      changed();
    }

    /** The [row, col] under a pointer event, or null where the grid
     * has no size on the screen (then no cell is under it). */
    function cellAt(event) {
      const box = canvas.getBoundingClientRect();
      if (!(box.width > 0 && box.height > 0)) return null;
      const clamp = (v) => Math.min(N - 1, Math.max(0, Math.floor(v)));
      const cell = [clamp((event.clientY - box.top) / box.height * N),
                    clamp((event.clientX - box.left) / box.width * N)];
      return cell.every(Number.isInteger) ? cell : null;
    }

    /** The keyboard's cursor is drawn while the grid has the focus
     * and was last used from the keyboard (or was focused by it). */
    function cursorShown() {
      if (document.activeElement !== canvas) return false;
      if (keyboardUsed !== null) return keyboardUsed;
      try {
        return canvas.matches(":focus-visible");
      } catch (err) {  // a browser without :focus-visible
        return true;
      }
    }

    function drawGrid() {
      const c = GRID_CELL;
      ctx.fillStyle = "#fff";
      ctx.fillRect(0, 0, N * c, N * c);
      ctx.fillStyle = "#000";
      for (let i = 0; i < N * N; i++) {
        if (bitmap[i]) ctx.fillRect((i % N) * c, Math.floor(i / N) * c, c, c);
      }
      // The 4 x 4 blocks that become the model's pixels.
      ctx.strokeStyle = "#bbb";
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (let k = 0; k <= N; k += DIGIT_BLOCK) {
        ctx.moveTo(k * c + 0.5, 0); ctx.lineTo(k * c + 0.5, N * c);
        ctx.moveTo(0, k * c + 0.5); ctx.lineTo(N * c, k * c + 0.5);
      }
      ctx.stroke();
      const showCursor = cursorShown();
      if (showCursor) {
        const s = penSize(), o = -Math.floor((s - 1) / 2);
        ctx.strokeStyle = erase.checked ? "#D55E00" : "#0072B2";
        ctx.lineWidth = 2;
        ctx.strokeRect((cursor[1] + o) * c + 1, (cursor[0] + o) * c + 1, s * c - 2, s * c - 2);
      }
      cursorNote.textContent = `${erase.checked ? "Eraser" : "Pen"}` +
        (showCursor
          ? `; cursor at row ${cursor[0] + 1}, column ${cursor[1] + 1}` : "") +
        `; ${bitmap.reduce((a, v) => a + v, 0)} cells set.`;
    }

    function drawAttention(counts) {
      attentionView.replaceChildren();
      if (!result) return;
      const l = blockSelect ? Number(blockSelect.value) : 0;
      const heads = result.cls[l];
      el("p", {class: "d2l-note"}, attentionView,
         `The <cls> token's attention over the ${heads[0].length} patches ` +
         `in block ${l + 1}, one map per head (orange: more weight; the ` +
         "most-attended patch outlined in white):");
      const maps = el("div", {class: "d2l-row"}, attentionView);
      heads.forEach((w, k) => attentionOverlay(maps, counts, w, p, `head ${k + 1}`));
      const g = DIGIT_SIZE / p;
      numbersTable(attentionView, `The <cls> token's attention in block ${l + 1}, ` +
                   "per head (rows) over the patches (columns: row, column)",
                   heads.map((_, k) => `head ${k + 1}`),
                   heads[0].map((_, j) => `${Math.floor(j / g) + 1},${j % g + 1}`),
                   heads, 3);
    }

    function redraw() {
      scheduled = false;
      drawGrid();
      const counts = countsFromBitmap(bitmap);
      countsView.replaceChildren();
      const labels = Array.from({length: DIGIT_SIZE}, (_, i) => String(i + 1));
      heatmap(countsView, {
        values: counts, rows: labels, cols: labels, domain: [0, DIGIT_LEVELS - 1],
        colour: ink, cell: 24, digits: 0, annotateDigits: 0,
        title: "The 8 × 8 counts the model reads",
        label: "The 8 × 8 counts of set cells per 4 × 4 block, row by row: " +
          counts.map((r) => r.join(" ")).join("; ")});
      probsView.replaceChildren();
      result = model ? vitForward(model, counts) : null;
      if (result) {
        probabilityBars(probsView, result.probs, result.prediction);
        const k = result.prediction, ex = example === null ? null : data.examples[example];
        const said = `The model reads a ${k} (probability ${result.probs[k].toFixed(2)}).` +
          (ex ? ` Test image ${ex.index} is labelled ${ex.label}.` : "") +
          (counts.every((r) => r.every((v) => v === 0)) ? " The grid is empty." : "");
        if (output.textContent !== said) output.textContent = said;
        rootEl.dataset.prediction = String(k);
      }
      drawAttention(counts);
      rootEl.getBoundingClientRect();  // layout, as the frame will
      if (pending !== null) {
        rootEl.dataset.lastMs = String(performance.now() - pending);
        pending = null;
      }
      rootEl.dataset.redraws = String(Number(rootEl.dataset.redraws || 0) + 1);
      rootEl.dataset.example = example === null ? "" : String(example);
      undoButton.disabled = !undo.length;
    }

    async function load() {
      if (loading) return loading;
      status.textContent = "Loading the model…";
      status.className = "d2l-status d2l-loading";
      rootEl.dataset.state = "loading";
      const start = performance.now();
      loading = loadVit(data.base, data.checkpoint, (f) => {
        status.textContent = `Loading the model… ${Math.round(100 * f)}%`;
      }, {fingerprint: data.fingerprint, patch_size: p, num_heads: h, num_blks: L,
          weights_sha256: data.weights_sha256, model_sha256: data.model_sha256}).then((m) => {
        model = m;
        const said = vitWeightsStatement(data, m.manifest);
        rootEl.dataset.weights = said ? said.case : "unknown";
        if (said) {
          weightsNote.textContent = said.text;
          weightsNote.className = `d2l-weights d2l-weights-${said.case}`;
          weightsNote.hidden = false;
        }
        status.textContent = "";
        status.className = "d2l-status";
        rootEl.dataset.state = "ready";
        rootEl.dataset.loadMs = String(performance.now() - start);
        changed();
      }, (err) => {
        status.textContent = `The model could not be loaded (${err.message}). ` +
          "You can still draw and see the counts; the other figures on this " +
          "page do not need it. To get it, build the website with `make " +
          "book`, which exports the model.";
        status.className = "d2l-status d2l-error";
        status.setAttribute("role", "alert");
        rootEl.dataset.state = "error";
      });
      return loading;
    }

    // ---- input: pointer (mouse, pen, touch), keyboard, controls --------
    canvas.addEventListener("pointerdown", (event) => {
      if (event.pointerType === "mouse" && event.button !== 0) return;
      event.preventDefault();
      keyboardUsed = false;
      canvas.focus({preventScroll: true});
      canvas.setPointerCapture(event.pointerId);
      beginStroke();
      strokeTo(cellAt(event));
      changed();
    });
    canvas.addEventListener("pointermove", (event) => {
      if (!stroke || keyStroke) return;
      const moves = event.getCoalescedEvents ? event.getCoalescedEvents() : [];
      for (const e of moves.length ? moves : [event]) strokeTo(cellAt(e));
      changed();
    });
    for (const type of ["pointerup", "pointercancel", "lostpointercapture"]) {
      canvas.addEventListener(type, () => { if (!keyStroke) endStroke(); });
    }
    const MOVES = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1]};
    canvas.addEventListener("keydown", (event) => {
      const key = event.key, move = MOVES[key];
      if (move) {
        if (event.shiftKey && !stroke) {
          beginStroke();
          keyStroke = true;
          strokeTo(cursor);
        }
        cursor = [Math.min(N - 1, Math.max(0, cursor[0] + move[0])),
                  Math.min(N - 1, Math.max(0, cursor[1] + move[1]))];
        if (keyStroke) strokeTo(cursor);
      } else if (key === " " || key === "Enter") {
        beginStroke();
        strokeTo(cursor);
        endStroke();
      } else if (key === "e" || key === "E") {
        erase.checked = !erase.checked;
      } else if (key === "u" || key === "U" ||
                 (key === "z" && (event.ctrlKey || event.metaKey))) {
        undoStroke();
      } else if (key === "Delete") {
        clear();
      } else {
        return;
      }
      keyboardUsed = true;
      event.preventDefault();
      changed();
    });
    canvas.addEventListener("keyup", (event) => {
      if (event.key === "Shift" && keyStroke) endStroke();
    });
    canvas.addEventListener("focus", () => { if (!model) load(); changed(); });
    canvas.addEventListener("blur", () => {
      if (keyStroke) endStroke();
      keyboardUsed = null;
      changed();
    });

    function undoStroke() {
      if (!undo.length) return;
      bitmap = undo.pop();
      example = null;
      menu.value = "";
      changed();
    }

    function clear() {
      if (bitmap.some((v) => v)) setBitmap(new Uint8Array(N * N));
    }

    clearButton.addEventListener("click", () => clear());
    undoButton.addEventListener("click", () => undoStroke());
    menu.addEventListener("change", () => {
      if (menu.value === "") return;
      const i = Number(menu.value);
      setBitmap(bitmapFromCounts(data.examples[i].counts), i);
      if (!model) load();
    });
    penSelect.addEventListener("change", () => changed());
    erase.addEventListener("change", () => changed());
    if (blockSelect) blockSelect.addEventListener("change", () => changed());

    // The model loads when the explorer first comes into view (or is
    // first used, where the browser cannot tell).
    if (typeof IntersectionObserver === "function") {
      const seen = new IntersectionObserver((entries) => {
        if (entries.some((e) => e.isIntersecting)) {
          seen.disconnect();
          load();
        }
      }, {rootMargin: "200px"});
      seen.observe(rootEl);
    }
    if (data.examples.length) {
      bitmap = bitmapFromCounts(data.examples[0].counts);
      example = 0;
      menu.value = "0";
    }
    changed();
    rootEl.d2l = {
      load, setBitmap: (bits) => setBitmap(bits), undo: undoStroke, clear,
      example: (i) => { menu.value = String(i); menu.dispatchEvent(new Event("change")); },
      bitmap: () => Array.from(bitmap), counts: () => countsFromBitmap(bitmap),
      forward: (counts) => vitForward(model, counts),
      get result() { return result; }, get model() { return model; }};
  }

  // What tests and other scripts may call (the computing part).
  root.d2lVision = {countsFromBitmap, bitmapFromCounts, erf, gelu, lineCells, vitForward,
                    makeVit, loadVit, vitManifestProblems, vitExpectedTensors,
                    vitModelSha256, pythonFloat, vitWeightsStatement,
                    VIT_FORMAT, VIT_MODEL_FIELDS, DITHER};
