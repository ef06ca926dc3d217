  /* ---- d2lmini/js/model.js: the translation model --------------------
   * The forward pass of d2lmini's GRU encoder-decoder (additive or
   * multi-head attention) and of its Transformer on the tokens of
   * tokenizer.js, greedy decoding, and loading a model folder: its
   * manifest checked field by field, its weights by length, shape, value
   * and sha256.  No DOM: this part runs in Node as well
   * (tests/test_live.py). */

  // ---- the translation model ----------------------------------------------
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
   * a headMemory: [output (D), weights (h, S)].  With query-key
   * normalisation (qk_norm=True: the tensor `${prefix}.qk_scale`, g) a
   * head scores g_head * cos(q, k) instead of q . k / sqrt(d). */
  function multiHead(t, prefix, h, memory, q) {
    const Q = linear(t, `${prefix}.W_q`, q), scale = t[`${prefix}.qk_scale`];
    const D = Q.length, d = D / h, merged = new Float64Array(D), weights = [];
    for (let head = 0; head < h; head++) {
      const o = head * d;  // this head's slice of the D features
      // The slice's length, at least 1e-12 (as F.normalize divides).
      const norm = (x) => {
        let s = 0;
        for (let i = 0; i < d; i++) s += x[o + i] * x[o + i];
        return Math.max(Math.sqrt(s), 1e-12);
      };
      const qNorm = scale ? norm(Q) : 0;
      const w = softmax(memory.keys.map((k) => {
        let s = 0;
        for (let i = 0; i < d; i++) s += Q[o + i] * k[o + i];
        return scale ? scale.data[head] * s / (qNorm * norm(k)) : s / Math.sqrt(d);
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
  // The manifest format this script reads (d2lmini.live.MANIFEST_FORMAT).
  const MANIFEST_FORMAT = 4;
  const ATTENTIONS = ["additive", "multihead", "transformer"];
  const SPECIALS = ["pad", "bos", "eos", "unk"];
  // Sizes beyond these are no model of this chapter (and would make the
  // page allocate without end).
  const MAX_SIZE = 1 << 16;

  // What can change a checkpoint's weights (d2lmini.cache.fingerprint).
  const FINGERPRINT = ["recipe", "code", "torch", "data"];


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
        if (m.qk_norm === true) add("decoder.attention.qk_scale", [m.num_heads]);
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
    if (typeof m.qk_norm !== "boolean") {
      bad.push(`qk_norm ${show(m.qk_norm)} is not true or false`);
    } else if (m.qk_norm && m.attention !== "multihead") {
      bad.push(`qk_norm is an option of multi-head attention, not of ` +
               `attention ${show(m.attention)}`);
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
