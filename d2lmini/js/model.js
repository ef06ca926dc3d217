  /* ---- d2lmini/js/model.js: the translation model --------------------
   * The forward pass of d2lmini's GRU encoder-decoder (additive or
   * multi-head attention) and of its Transformer on the tokens of
   * tokenizer.js, and greedy decoding (beam.js searches with the same
   * decoders).  No DOM: this part runs in Node
   * as well (tests/test_live.py). */

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

  /** The tensors a manifest (JSON) names, read from the weights (an
   * ArrayBuffer): {shape, data} by name (a vector's shape as a column,
   * [n, 1], for matvec) in an object with no prototype, so a tensor
   * named "__proto__" or "constructor" is a name like any other (the
   * manifest checks refuse such names before a model is made). */
  function tensorsOf(manifest, buffer) {
    const floats = new Float32Array(buffer);
    const t = Object.create(null);
    for (const [name, spec] of Object.entries(manifest.tensors)) {
      const size = spec.shape.reduce((a, b) => a * b, 1);
      if (spec.offset + size > floats.length) {
        throw new Error(`the weights file is too short for ${name}`);
      }
      t[name] = {shape: spec.shape.length === 1 ? [spec.shape[0], 1] : spec.shape,
                 data: floats.subarray(spec.offset, spec.offset + size)};
    }
    return t;
  }

  /** A model from its manifest (JSON) and weights (an ArrayBuffer),
   * its tensors read by tensorsOf. */
  function makeModel(manifest, buffer) {
    const t = tensorsOf(manifest, buffer);
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

  /** The decoder of a GRU encoder-decoder with attention
   * (d2lmini.attention_decoder): runs the encoder over the source ids
   * and returns {state, step}: step(token, state) -> [logits, attention
   * weights (h, S), the next state].  A state (the layers' hidden
   * states) is never modified, so a search can go on from any of them
   * (beam.js hands each hypothesis its parent's). */
  function rnnDecoder(model, ids) {
    const m = model.manifest, t = model.t;
    // Encoder: every layer over the sentence (no padding: one sentence).
    let xs = ids.map((id) => embed(t["encoder.embedding.weight"], id));
    const hs = [];
    model.encoder.forEach((p) => {
      let h = new Float64Array(m.num_hiddens);
      xs = xs.map((x) => (h = gruCell(x, h, p)));
      hs.push(h);
    });
    // The top layer's outputs, projected once (not at every step).
    const memory = m.attention === "additive"
      ? {values: xs, keys: xs.map((o) => matvec(t["decoder.attention.W_k.weight"], o))}
      : headMemory(t, "decoder.attention", xs);
    const step = (token, state) => {
      const [context, weights] = attend(model, memory, state[state.length - 1]);
      const e = embed(t["decoder.embedding.weight"], token);
      let x = new Float64Array(context.length + e.length);
      x.set(context); x.set(e, context.length);
      const next = model.decoder.map((p, l) => (x = gruCell(x, state[l], p)));
      return [linear(t, "decoder.dense", x), weights, next];
    };
    return {state: hs, step};
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

  /** The decoder of a Transformer (d2lmini.transformer, post-norm
   * blocks): runs the encoder over the source ids and returns {state,
   * step}: step(token, state) -> [logits, the last block's attention to
   * the source (h, S), the next state].  A state holds each decoder
   * block's keys and values of the steps before (a cache: step i
   * attends to steps 0..i, the causal mask); a step makes a new state
   * and leaves the old one as it was, as rnnDecoder does. */
  function transformerDecoder(model, ids, maxSteps) {
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
    const step = (token, state) => {
      let x = input("decoder", token, state.position), weights = null;
      const past = [];
      for (const l of blocks) {
        const p = `decoder.blks.${l}`, own = headMemory(t, `${p}.self_attention`, [x]);
        past.push({keys: state.past[l].keys.concat(own.keys),
                   values: state.past[l].values.concat(own.values)});
        const [a] = multiHead(t, `${p}.self_attention`, h, past[l], x);
        const y = addNorm(t, `${p}.addnorm1`, x, a);
        const [c, w] = multiHead(t, `${p}.cross_attention`, h, source[l], y);
        const z = addNorm(t, `${p}.addnorm2`, y, c);
        x = addNorm(t, `${p}.addnorm3`, z, ffn(t, `${p}.ffn`, z));
        weights = w;
      }
      return [linear(t, "decoder.dense", x), weights,
              {position: state.position + 1, past}];
    };
    const past = blocks.map(() => ({keys: [], values: []}));
    return {state: {position: 0, past}, step};
  }

  /** The decoder of either kind of model, for the source ids. */
  const decoderOf = (model, ids, maxSteps) => (
    model.manifest.attention === "transformer"
      ? transformerDecoder(model, ids, maxSteps) : rnnDecoder(model, ids));

  /** What the model reads: tokens, ids (with <eos>, cut at num_steps).
   * Throws an Error for a sentence that is not a string, or that has no
   * tokens (empty or blank: d2lmini.decoding refuses it too). */
  function readSource(model, sentence) {
    if (typeof sentence !== "string") {
      throw new Error(`the sentence must be a string, not ${shown(sentence)}`);
    }
    const m = model.manifest, tokens = tokenize(sentence);
    if (tokens.length === 0) {
      throw new Error(`the sentence ${shown(sentence)} is empty or blank ` +
                      "(no tokens to read): type an English sentence");
    }
    const unk = m.src_special.unk;
    const ids = tokens.map((tok) => (model.srcIndex.has(tok) ? model.srcIndex.get(tok) : unk));
    ids.push(m.src_special.eos);
    const read = ids.slice(0, m.num_steps);
    return {tokens, ids: read, srcTokens: read.map((i) => m.src_vocab[i])};
  }

  /** The most tokens a decoder emits: maxLen, a whole number in [1,
   * MAX_SIZE], or the model's num_steps when maxLen is undefined or
   * null (as d2lmini.decoding's max_len=None); throws an Error that
   * names any other value (0, -1, "3", 2.5, NaN...). */
  function maxStepsOf(model, maxLen) {
    const n = model.manifest.num_steps;
    if (maxLen === undefined || maxLen === null) return n;
    if (!Number.isInteger(maxLen) || maxLen < 1 || maxLen > MAX_SIZE) {
      throw new Error(`maxLen must be a whole number in [1, ${MAX_SIZE}] ` +
                      "(the most tokens to emit), or undefined for the " +
                      `model's num_steps (${n}); not ${shown(maxLen)}`);
    }
    return maxLen;
  }

  /** The logits of one decoder step as the search chooses from them: a
   * copy, with those of <pad> and <bos> set to -Infinity (the decoders
   * never emit them, as d2lmini.decoding's).  Throws an Error when the
   * model gave a token that may be emitted a logit that is not finite
   * (NaN or infinite) at step t (1 for the first token). */
  function choosable(model, logits, t) {
    const s = model.manifest.tgt_special;
    for (let i = 0; i < logits.length; i++) {
      // <pad> and <bos> are never chosen: their logits do not matter
      // (as in d2lmini.decoding).
      if (i !== s.pad && i !== s.bos && !Number.isFinite(logits[i])) {
        throw new Error(`the model's logit of token ${i} at step ${t} is ` +
                        `${logits[i]}: its weights are broken (train ` +
                        "or export the model again)");
      }
    }
    const out = Float64Array.from(logits);
    out[s.pad] = -Infinity;
    out[s.bos] = -Infinity;
    return out;
  }

  /** Greedy translation, like d2lmini.decoding.translate: at each step
   * the token of the largest logit, the lower id on a tie (never <pad>
   * or <bos>: choosable), until <eos> or maxLen tokens (maxStepsOf:
   * undefined for the model's num_steps).  Throws an Error for an empty
   * or blank sentence (readSource) and for a bad maxLen.
   *
   * Returns {tokens, outTokens, srcTokens, words, attention (h, steps,
   * S), finished}: attention has a row per output step, the step that
   * emitted <eos> included (a Transformer's: its last decoder block's
   * attention to the source).
   */
  function translate(model, sentence, maxLen) {
    const m = model.manifest, maxSteps = maxStepsOf(model, maxLen);
    const src = readSource(model, sentence);
    const decoder = decoderOf(model, src.ids, maxSteps);
    const eos = m.tgt_special.eos;
    let y = m.tgt_special.bos, state = decoder.state;
    const ids = [], maps = [];
    let finished = false;
    for (let step = 0; step < maxSteps; step++) {
      const [raw, weights, next] = decoder.step(y, state);
      const logits = choosable(model, raw, step + 1);
      state = next;
      let best = 0;  // strictly larger: the lower id wins a tie
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
