  /* ---- d2lmini/js/lm.js: the text writer -----------------------------
   * The pretraining section's language model (d2lmini.pretraining.
   * LanguageModel) in the page.  Computing (no DOM; runs in Node as
   * well, tests/test_live_lm.py): d2lmini.generation's Mulberry32,
   * next_token_distribution, sample and generate, ported step for step
   * (the same float64 operations in the same order, so that the same
   * logits, settings and seed draw the same tokens); the model's
   * forward pass with every block's causal self-attention; the typed
   * text read as the translators read theirs (tokenizer.js); loading
   * and checking a model folder that d2lmini.live.export_lm wrote, with
   * manifest.js's helpers.  Drawing: the explorer, a text box whose
   * beginning the model continues, the sampling controls, the
   * next-token distribution as bars and each head's attention as a
   * heatmap.  The computing functions are offered as window.d2lLM.
   * Shape legend (d2lmini.pretraining's): V vocabulary, D features, F
   * ffn features, h heads, N blocks, T tokens read. */

  // The LM manifest format this script reads
  // (d2lmini.live.LM_MANIFEST_FORMAT).
  const LM_FORMAT = 1;
  // What can change a language model's checkpoint (d2lmini.lm's
  // fingerprint).
  const LM_FINGERPRINT = ["recipe", "code", "torch", "data", "device"];
  // The fields of an LM manifest that say what the page computes
  // (d2lmini.live_lm.LM_MODEL_FIELDS); none is a float.
  const LM_MODEL_FIELDS = [
    "checkpoint", "fingerprint", "vocab_size", "num_hiddens",
    "ffn_num_hiddens", "num_heads", "num_blks", "max_len", "tie_weights",
    "vocab", "special", "forbidden", "tensors", "weights", "weights_bytes",
    "weights_sha256"];
  const LM_SIZES = ["vocab_size", "num_hiddens", "ffn_num_hiddens",
                    "num_heads", "num_blks", "max_len"];
  const LM_SPECIALS = ["pad", "bos", "eos", "unk"];
  const TWO_32 = 4294967296;

  // ---- sampling: d2lmini.generation, step for step ----------------------
  /** d2lmini.generation.Mulberry32: 32 bits of state, one float in [0, 1)
   * per random(); seed a whole number in [0, 2^32). */
  function Mulberry32(seed) {
    if (!Number.isInteger(seed) || seed < 0 || seed >= TWO_32) {
      throw new Error(`seed must be a whole number in [0, 2**32), got ${shown(seed)}`);
    }
    let a = seed >>> 0;
    return {
      random() {
        a = (a + 0x6D2B79F5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / TWO_32;
      },
    };
  }

  const isNone = (x) => x === null || x === undefined;

  /** Throw unless the settings are d2lmini.generation's: temperature a
   * finite number >= 0, topK null or a whole number >= 1, topP null or
   * a number in (0, 1]. */
  function checkSettings(temperature, topK, topP) {
    if (typeof temperature !== "number" || !(temperature >= 0) ||
        temperature === Infinity) {
      throw new Error(`temperature must be a finite number >= 0, got ${shown(temperature)}`);
    }
    if (!isNone(topK) && !(Number.isInteger(topK) && topK >= 1)) {
      throw new Error(`topK must be null or a whole number >= 1, got ${shown(topK)}`);
    }
    if (!isNone(topP) && !(typeof topP === "number" && topP > 0 && topP <= 1)) {
      throw new Error(`topP must be null or a number in (0, 1], got ${shown(topP)}`);
    }
  }

  /** A float sum in the given order (d2lmini.generation._sum). */
  function sumOf(e, ids) {
    let total = 0;
    for (const i of ids) total += e[i];
    return total;
  }

  // d2lmini.generation.exp64, step for step: x = k ln 2 + r (ln 2 in
  // two parts), e^r by Horner's rule on 1/13!, ..., 1/0!, times 2^k
  // (powers of two by exact halving).  Math.exp may differ from
  // Python's math.exp by an ulp; this gives Python's exp64 bits.
  const LN2_HI = 0.6931471803691238, LN2_LO = 1.9082149292705877e-10;
  const INV_LN2 = 1.4426950408889634;
  const EXP_COEFFS = [1.6059043836821613e-10, 2.08767569878681e-09,
    2.505210838544172e-08, 2.755731922398589e-07, 2.7557319223985893e-06,
    2.48015873015873e-05, 0.0001984126984126984, 0.001388888888888889,
    0.008333333333333333, 0.041666666666666664, 0.16666666666666666,
    0.5, 1.0, 1.0];
  const POW2_NEG = [1];
  for (let i = 1; i <= 1077; i++) POW2_NEG.push(POW2_NEG[i - 1] / 2);

  /** e^x for x <= 0 (-Infinity gives 0), as d2lmini.generation.exp64. */
  function exp64(x) {
    if (!(x > -746)) return 0;
    const k = Math.floor(x * INV_LN2 + 0.5);
    const r = (x - k * LN2_HI) - k * LN2_LO;
    let y = EXP_COEFFS[0];
    for (let i = 1; i < EXP_COEFFS.length; i++) {
      y = y * r;
      y = y + EXP_COEFFS[i];
    }
    return y * POW2_NEG[-k];
  }

  /** d2lmini.generation.next_token_distribution: the candidates and
   * probabilities that sample draws from, in float64, step by step:
   * e_i = exp64((logit_i - max logit) / temperature); candidates sorted by
   * e descending, ties by lower id, those with e = 0 left out; topK
   * keeps the first k; topP the shortest prefix whose running sum of
   * e_i / (sum of the kept e) reaches p; probabilities e_i / (sum of the
   * kept e).  Temperature 0 is greedy: the highest logit (the lowest
   * such id) with probability 1.  logits: V numbers, -Infinity rules an
   * id out, no NaN or +Infinity.  Returns {ids, probs} (K each). */
  function nextTokenDistribution(logits, temperature, topK, topP) {
    checkSettings(temperature, topK, topP);
    const z = Array.from(logits || [], Number);
    if (!z.length) throw new Error("logits must be a non-empty list of numbers");
    const bad = [];
    z.forEach((v, i) => { if (Number.isNaN(v) || v === Infinity) bad.push(i); });
    if (bad.length) {
      throw new Error(`logits must not be NaN or +Infinity; ids ${bad.slice(0, 8).join(", ")} are`);
    }
    if (z.every((v) => v === -Infinity)) {
      throw new Error("every logit is -Infinity: no token may be drawn");
    }
    let top = -Infinity;
    for (const v of z) if (v > top) top = v;
    if (temperature === 0) return {ids: [z.indexOf(top)], probs: [1]};
    const e = z.map((v) => exp64((v - top) / temperature));
    let order = [];
    for (let i = 0; i < e.length; i++) if (e[i] > 0) order.push(i);
    order.sort((a, b) => (e[a] !== e[b] ? (e[a] > e[b] ? -1 : 1) : a - b));
    if (!isNone(topK)) order = order.slice(0, topK);
    if (!isNone(topP)) {
      const total = sumOf(e, order);
      let running = 0;
      for (let n = 0; n < order.length; n++) {
        running += e[order[n]] / total;
        if (running >= topP) {
          order = order.slice(0, n + 1);
          break;
        }
      }
    }
    const total = sumOf(e, order);
    return {ids: order, probs: order.map((i) => e[i] / total)};
  }

  /** d2lmini.generation.sample: u = rng.random(), then the first id at
   * which the running sum of probs (in the given order) exceeds u; the
   * last id if rounding leaves the sum at or below u. */
  function sample(ids, probs, rng) {
    if (!ids || !ids.length || !probs || ids.length !== probs.length ||
        !Array.from(probs).every((p) => p >= 0)) {
      throw new Error("ids and probs must be non-empty, of the same length, " +
                      `probs >= 0; got ${shown(Array.from(ids || []))} and ` +
                      `${shown(Array.from(probs || []).slice(0, 8))}`);
    }
    const u = rng.random();
    let running = 0;
    for (let k = 0; k < ids.length; k++) {
      running += probs[k];
      if (running > u) return ids[k];
    }
    return ids[ids.length - 1];
  }

  // ---- the model ----------------------------------------------------------
  /** Every tensor of the language model a manifest describes, by
   * state-dict name in the state dict's order, with the shape its sizes
   * imply (d2lmini.live_lm.lm_tensors: a tied output layer's weight is
   * the embedding, stored once). */
  function lmExpectedTensors(m) {
    const V = m.vocab_size, D = m.num_hiddens, F = m.ffn_num_hiddens, out = {};
    const linear = (name, rows, cols) => {
      out[`${name}.weight`] = [rows, cols];
      out[`${name}.bias`] = [rows];
    };
    const norm = (name) => { out[`${name}.ln.weight`] = [D]; out[`${name}.ln.bias`] = [D]; };
    out["embedding.weight"] = [V, D];
    for (let l = 0; l < m.num_blks; l++) {
      const b = `blks.${l}`;
      for (const w of ["W_q", "W_k", "W_v", "W_o"]) linear(`${b}.attention.${w}`, D, D);
      norm(`${b}.addnorm1`);
      linear(`${b}.ffn.dense1`, F, D);
      linear(`${b}.ffn.dense2`, D, F);
      norm(`${b}.addnorm2`);
    }
    if (m.tie_weights !== true) out["dense.weight"] = [V, D];
    out["dense.bias"] = [V];
    return out;
  }

  /** What is wrong with a language model's manifest (JSON) and, when
   * given, its weights (an ArrayBuffer): a list of sentences, empty when
   * nothing is.  Checks the format; the sizes (whole numbers, the heads
   * divide num_hiddens, which is even: the positions are sine/cosine
   * pairs); tie_weights; the vocabulary (vocab_size distinct tokens),
   * its special ids and the forbidden ones (ids, never <eos>: the page
   * stops there); the fingerprint (its recipe key names the
   * checkpoint); the weights file's name, byte count and sha256's form;
   * every tensor with its shape at its offset and no other; with the
   * weights, their length and that every number is finite (manifest.js's
   * weightsFileProblems and tensorProblems).  expected: what the page's
   * data says of its model ({checkpoint, fingerprint, num_hiddens,
   * num_heads, num_blks, vocab_size, max_len}, each optional). */
  function lmManifestProblems(manifest, buffer, expected) {
    const m = manifest, want = expected || {}, bad = [];
    if (!isObject(m)) return ["manifest.json is not a JSON object"];
    if (m.format !== LM_FORMAT) {
      bad.push(`format ${show(m.format)}, where this page reads format ` +
               `${LM_FORMAT} of a language model (rebuild the site: make book)`);
      return bad;
    }
    if (want.checkpoint !== undefined && m.checkpoint !== want.checkpoint) {
      bad.push(`it holds checkpoint ${show(m.checkpoint)}, not ${want.checkpoint}`);
    }
    let sizesOk = true;
    for (const k of LM_SIZES) {
      if (!isSize(m[k])) {
        bad.push(`${k} ${show(m[k])} is not a whole number in [1, ${MAX_SIZE}]`);
        sizesOk = false;
      } else if (want[k] !== undefined && m[k] !== want[k]) {
        bad.push(`${k} ${m[k]}, where the section's model has ${want[k]}`);
      }
    }
    if (sizesOk) {
      if (m.num_hiddens % m.num_heads) {
        bad.push(`num_heads ${m.num_heads} does not divide num_hiddens ${m.num_hiddens}`);
      }
      if (m.num_hiddens % 2) {
        bad.push(`num_hiddens ${m.num_hiddens} is odd: the positions are sine/cosine pairs`);
        sizesOk = false;
      }
    }
    if (typeof m.tie_weights !== "boolean") {
      bad.push(`tie_weights ${show(m.tie_weights)} is not true or false`);
      sizesOk = false;
    }
    const vocab = m.vocab;
    let vocabOk = Array.isArray(vocab) && vocab.length >= 1 &&
      vocab.every((tok) => typeof tok === "string");
    if (!vocabOk) {
      bad.push("vocab is not a list of tokens");
    } else if (new Set(vocab).size !== vocab.length) {
      bad.push("vocab holds a token twice");
      vocabOk = false;
    } else if (isSize(m.vocab_size) && vocab.length !== m.vocab_size) {
      bad.push(`vocab holds ${vocab.length} tokens, where vocab_size is ${m.vocab_size}`);
      vocabOk = false;
    }
    const special = m.special;
    if (!isObject(special)) {
      bad.push("special is missing");
    } else if (vocabOk) {
      for (const k of LM_SPECIALS) {
        if (!Number.isInteger(special[k]) || vocab[special[k]] !== `<${k}>`) {
          bad.push(`special.${k} ${show(special[k])} is not the id of <${k}> in vocab`);
        }
      }
    }
    const forbidden = m.forbidden;
    if (!Array.isArray(forbidden) || !vocabOk || !forbidden.every(
      (i) => Number.isInteger(i) && i >= 0 && i < vocab.length)) {
      bad.push(`forbidden ${show(forbidden)} is not a list of ids of vocab`);
    } else if (isObject(special) && forbidden.includes(special.eos)) {
      bad.push("forbidden holds <eos>, where the page stops writing");
    }
    const f = m.fingerprint;
    if (!isObject(f) || !LM_FINGERPRINT.every((k) => typeof f[k] === "string")) {
      bad.push(`fingerprint ${show(f)} does not give ${LM_FINGERPRINT.join(", ")}`);
    } else {
      if (m.checkpoint !== `lm-french-${f.recipe}`) {
        bad.push(`checkpoint ${show(m.checkpoint)} is not lm-french-` +
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
    return tensorProblems(m, lmExpectedTensors(m), buffer, bad);
  }

  /** sha256 of the manifest's LM_MODEL_FIELDS (a missing one as null) as
   * canonical JSON in UTF-8: d2lmini.live_lm.lm_model_sha256, which the
   * section's text-writer output records. */
  function lmModelSha256(manifest) {
    return sha256Hex(new TextEncoder().encode(canonicalJSON(
      pickFields(manifest, LM_MODEL_FIELDS))));
  }

  /** A language model from its checked manifest (JSON) and weights (an
   * ArrayBuffer): its tensors (tensorsOf), the positions P (max_len rows
   * of D, as d2lmini's PositionalEncoding), the output layer's weight
   * (the embedding's when tied) and the vocabulary's index. */
  function makeLm(manifest, buffer) {
    const t = tensorsOf(manifest, buffer);
    return {manifest, t, P: positionalEncoding(manifest.num_hiddens, manifest.max_len),
            out: manifest.tie_weights ? t["embedding.weight"] : t["dense.weight"],
            index: new Map(manifest.vocab.map((tok, i) => [tok, i]))};
  }

  /** A model's state before it reads a token: per block, the keys and
   * values of the tokens read (the causal mask: a token attends to
   * itself and those before it) and each token's attention weights
   * (h, t + 1); the ids read and the top block's output of the last. */
  function lmState(model) {
    const N = model.manifest.num_blks;
    return {position: 0, ids: [], top: null,
            past: Array.from({length: N}, () => ({keys: [], values: []})),
            attention: Array.from({length: N}, () => [])};
  }

  /** Read one more token: its embedding times sqrt(D) plus its position,
   * then each post-norm block (d2lmini's TransformerEncoderBlock):
   * AddNorm(x, self-attention over the tokens read), AddNorm(y, FFN(y)).
   * Every token is computed as d2lmini's forward pass computes it over
   * the whole sequence (earlier tokens do not change: the mask is
   * causal), so the keys and values of the earlier ones are kept. */
  function lmRead(model, state, id) {
    const m = model.manifest, t = model.t, D = m.num_hiddens, h = m.num_heads;
    if (state.position >= m.max_len) {
      throw new Error(`the model reads at most max_len=${m.max_len} tokens`);
    }
    if (!Number.isInteger(id) || id < 0 || id >= m.vocab_size) {
      throw new Error(`a token id is a whole number in [0, ${m.vocab_size}), got ${shown(id)}`);
    }
    const scale = Math.sqrt(D), P = model.P[state.position];
    let x = embed(t["embedding.weight"], id).map((v, k) => v * scale + P[k]);
    for (let l = 0; l < m.num_blks; l++) {
      const b = `blks.${l}`, past = state.past[l];
      past.keys.push(linear(t, `${b}.attention.W_k`, x));
      past.values.push(linear(t, `${b}.attention.W_v`, x));
      const [a, weights] = multiHead(t, `${b}.attention`, h, past, x);
      state.attention[l].push(weights);  // (h, position + 1)
      const y = addNorm(t, `${b}.addnorm1`, x, a);
      x = addNorm(t, `${b}.addnorm2`, y, ffn(t, `${b}.ffn`, y));
    }
    state.position += 1;
    state.ids.push(id);
    state.top = x;
  }

  /** The logits (V) of the next token after the tokens read. */
  function lmLogits(model, state) {
    if (!state.top) throw new Error("read a token first: the logits follow the last one");
    return matvec(model.out, state.top, model.t["dense.bias"]);
  }

  /** LanguageModel's forward pass on one sequence of ids: {logits (T
   * rows of V), attention ([N][h][T][T], zeros above the diagonal, as
   * d2lmini's attention_weights)}. */
  function lmForward(model, ids) {
    const state = lmState(model), logits = [];
    for (const id of ids) {
      lmRead(model, state, id);
      logits.push(lmLogits(model, state));
    }
    const T = ids.length, h = model.manifest.num_heads;
    const attention = state.attention.map((rows) => Array.from({length: h}, (_, k) =>
      rows.map((w) => Array.from({length: T}, (__, s) => (s < w[k].length ? w[k][s] : 0)))));
    return {logits, attention};
  }

  /** What the model reads of a typed beginning, as the translators read
   * a sentence (tokenizer.js, d2lmini's data.tokens): the words, the ids
   * (<bos> first; a word not in the vocabulary is <unk>), the tokens
   * the model reads and the unknown words. */
  function readBeginning(model, text) {
    if (typeof text !== "string") {
      throw new Error(`the beginning must be a string, not ${shown(text)}`);
    }
    const m = model.manifest, words = tokenize(text);
    const known = (w) => model.index.has(w);
    const ids = [m.special.bos, ...words.map((w) => (known(w) ? model.index.get(w) : m.special.unk))];
    return {words, ids, tokens: ids.map((i) => m.vocab[i]),
            unknown: [...new Set(words.filter((w) => !known(w)))]};
  }

  /** Throw unless ids are whole numbers in [0, V) (what names them). */
  function checkIds(ids, V, what) {
    const bad = ids.filter((i) => !Number.isInteger(i) || i < 0 || i >= V);
    if (bad.length) {
      throw new Error(`${what} must hold ids in [0, ${V}), got ${shown(bad.slice(0, 5))}`);
    }
  }

  /** d2lmini.generation.generate one token at a time: yields {token,
   * logits (V, forbidden ones -Infinity), dist (nextTokenDistribution),
   * state} per new token, from one Mulberry32(seed); stops after eosId
   * or maxNewTokens tokens.  The checks are generate's. */
  function* generateSteps(model, prefixIds, maxNewTokens, eosId, temperature = 1,
                          topK = null, topP = null, seed = 0, forbid = []) {
    const m = model.manifest, V = m.vocab_size;
    if (!Number.isInteger(maxNewTokens) || maxNewTokens < 0) {
      throw new Error(`maxNewTokens must be a whole number >= 0, got ${shown(maxNewTokens)}`);
    }
    const ids = Array.from(prefixIds || []);
    if (!ids.length) throw new Error("prefixIds must hold at least one id (<bos>)");
    checkIds([...ids, eosId, ...forbid], V, "prefixIds, eosId and forbid");
    if (ids.length + maxNewTokens - 1 > m.max_len) {
      throw new Error(`${ids.length} prefix ids + ${maxNewTokens} new ones exceed ` +
                      `the model's max_len=${m.max_len}`);
    }
    const rng = Mulberry32(seed);
    if (!maxNewTokens) return;
    const state = lmState(model);
    for (const id of ids.slice(0, -1)) lmRead(model, state, id);
    let next = ids[ids.length - 1];
    for (let n = 0; n < maxNewTokens; n++) {
      lmRead(model, state, next);
      const logits = Float64Array.from(lmLogits(model, state));
      for (const f of forbid) logits[f] = -Infinity;
      const dist = nextTokenDistribution(logits, temperature, topK, topP);
      const token = sample(dist.ids, dist.probs, rng);
      yield {token, logits, dist, state};
      if (token === eosId) return;
      next = token;
    }
  }

  /** d2lmini.generation.generate: the new ids (without the prefix),
   * ending with eosId if it was drawn. */
  function generate(model, prefixIds, maxNewTokens, eosId, temperature = 1,
                    topK = null, topP = null, seed = 0, forbid = []) {
    const out = [];
    for (const step of generateSteps(model, prefixIds, maxNewTokens, eosId,
                                     temperature, topK, topP, seed, forbid)) {
      out.push(step.token);
    }
    return out;
  }

  /** Load a language model's folder: manifest.json and its weights, both
   * checked (lmManifestProblems), the weights' sha256 with them.
   * expected: as for lmManifestProblems, and what the section's run
   * recorded of its model (weights_sha256, model_sha256): when the
   * served weights are the section's, the manifest must describe them
   * as the section's run did (lmModelSha256). */
  async function loadLm(base, checkpoint, onProgress, expected) {
    const folder = `${base}${checkpoint}/`;
    const manifest = await fetchManifest(folder);
    const want = {checkpoint, ...(expected || {})};
    throwProblems(lmManifestProblems(manifest, null, want));
    if (want.model_sha256 && manifest.weights_sha256 === want.weights_sha256 &&
        lmModelSha256(manifest) !== want.model_sha256) {
      throw new Error("manifest.json names the weights the section " +
                      "evaluated but does not describe them as the " +
                      "section's run did (its vocabulary, sizes or " +
                      "tensor layout were changed): rebuild the site " +
                      "(make book)");
    }
    const buffer = await fetchWeights(folder, manifest, onProgress);
    throwProblems(lmManifestProblems(manifest, buffer, want));
    return makeLm(manifest, buffer);
  }

  const pplText = (x) => (typeof x === "number" && Number.isFinite(x) ? x.toFixed(1) : null);

  /** What the page says of the weights it runs, from the explorer's
   * data (what the notebook evaluated) and the served manifest, once
   * loadLm checked them: {case: "same" | "other", text}, or null when
   * the data names no weights or the manifest names the section's
   * weights but describes them otherwise (loadLm refuses that). */
  function lmWeightsStatement(data, manifest) {
    if (!data.weights_sha256 || !data.model_sha256 || !manifest.weights_sha256) return null;
    const theirs = pplText(data.val_ppl), mine = pplText(manifest.val_ppl);
    if (data.weights_sha256 === manifest.weights_sha256) {
      if (data.model_sha256 !== lmModelSha256(manifest)) return null;
      return {case: "same", text: "These are the weights the section " +
              `evaluated${theirs ? ` (validation perplexity ${theirs})` : ""}.`};
    }
    const parts = (f) => JSON.stringify(LM_FINGERPRINT.map((k) => (f || {})[k]));
    const sameCode = parts(data.fingerprint) === parts(manifest.fingerprint);
    let text = sameCode
      ? "This site was built on a machine that trained its own weights " +
        "from the same code and seed (float rounding differs from one " +
        "machine to another): "
      : "This site was built with other code, data or torch than the " +
        "section's run, which trained other weights: ";
    text += mine
      ? `their validation perplexity is ${mine}` +
        `${theirs ? `; the run this section reports, ${theirs}` : ""}.`
      : "they are not the weights the section evaluated.";
    return {case: "other", text};
  }

  // ---- explorer: text writer ----------------------------------------------
  const LM_STYLE = `
.d2l-live .d2l-lm-new { font-weight: bold; }
.d2l-live mark.d2l-lm-unk { background: #fde3c4; color: inherit; }
.d2l-live .d2l-lm-eos { color: #555; font-size: 0.85em; }
.d2l-live input.d2l-lm-text { width: min(70vw, 24em); }
.d2l-live input.d2l-lm-seed { width: 8em; }
`;
  const KEPT = "#0072B2", CUT = "#c4c4c4";  // Okabe and Ito's blue; grey
  const TOP_SHOWN = 10;  // the bars: the ten most probable tokens
  const TOP_K_MAX = 50;

  function addLmStyle() {
    if (!document.getElementById("d2l-lm-style")) {
      el("style", {id: "d2l-lm-style"}, document.head, LM_STYLE);
    }
  }

  /** e_i / (sum of every e_i) at temperature t > 0, as
   * nextTokenDistribution computes e: each token's probability before
   * top-k and top-p keep some of them. */
  function probabilities(logits, t) {
    let top = -Infinity;
    for (const v of logits) if (v > top) top = v;
    const e = Array.from(logits, (v) => exp64((v - top) / t));
    const total = e.reduce((a, v) => a + v, 0);
    return e.map((v) => v / total);
  }

  /** A token as the charts write it: quoted, long ones cut. */
  const quoted = (tok) => `“${tok.length > 16 ? `${tok.slice(0, 15)}…` : tok}”`;

  /** The next-token distribution as horizontal bars: the ten most
   * probable tokens (and the drawn one if it is not among them), each
   * bar its probability at the temperature (1 when greedy), blue when
   * top-k and top-p keep it (its probability among the kept ones after
   * the arrow), grey when they cut it; the drawn token marked ▶.  Each
   * bar a <rect> with data-id, data-value, data-kept and data-drawn. */
  function nextTokenBars(parent, vocab, logits, settings, drawn, title) {
    const {temperature, topK, topP} = settings;
    const dist = nextTokenDistribution(logits, temperature, topK, topP);
    const kept = new Map(dist.ids.map((id, k) => [id, dist.probs[k]]));
    const probs = probabilities(logits, temperature === 0 ? 1 : temperature);
    const ranked = [];
    for (let i = 0; i < probs.length; i++) if (probs[i] > 0) ranked.push(i);
    ranked.sort((a, b) => (probs[a] !== probs[b] ? (probs[a] > probs[b] ? -1 : 1) : a - b));
    const rows = ranked.slice(0, TOP_SHOWN);
    if (drawn !== undefined && drawn !== null && !rows.includes(drawn)) rows.push(drawn);
    const W = 420, row = 20, L = 130, top = 26, H = top + row * rows.length + 8;
    const barW = (q) => Math.max(q * (W - L - 110), 0.5);
    const label = `${title}: ${kept.size} token${kept.size === 1 ? "" : "s"} kept; ` +
      rows.map((i) => `${vocab[i]} ${probs[i].toFixed(3)}` +
        `${kept.has(i) ? ` kept (${kept.get(i).toFixed(3)})` : " cut"}` +
        `${i === drawn ? " drawn" : ""}`).join(", ");
    const chart = svg("svg", {class: "d2l-lm-bars", role: "img", width: W, height: H,
                              viewBox: `0 0 ${W} ${H}`, "aria-label": label}, parent);
    svg("text", {x: 4, y: 16, "font-size": 13, "font-weight": "bold"}, chart, title);
    rows.forEach((i, k) => {
      const y = top + k * row, isDrawn = i === drawn, isKept = kept.has(i);
      svg("text", {x: L - 8, y: y + 14, "font-size": 12, "text-anchor": "end",
                   "font-weight": isDrawn ? "bold" : "normal"}, chart,
          `${isDrawn ? "▶ " : ""}${quoted(vocab[i])}`);
      const bar = svg("rect", {
        x: L, y: y + 3, width: barW(probs[i]), height: row - 6,
        fill: isKept ? KEPT : CUT, class: `d2l-lm-bar${isKept ? " d2l-kept" : ""}`,
        "data-id": i, "data-value": String(probs[i]), "data-kept": String(isKept),
        "data-sampled": String(isKept ? kept.get(i) : 0), "data-drawn": String(isDrawn)},
      chart);
      svg("title", {}, bar, `${vocab[i]}: probability ${probs[i].toFixed(4)}, ` +
          (isKept ? `kept (${kept.get(i).toFixed(4)} among the kept tokens)` : "cut") +
          (isDrawn ? "; drawn" : ""));
      svg("text", {x: L + barW(probs[i]) + 4, y: y + 14, "font-size": 11}, chart,
          probs[i].toFixed(3) + (isKept ? ` → ${kept.get(i).toFixed(3)}` : " cut"));
    });
    return {chart, kept, probs, rows};
  }

  function mountTextWriter(rootEl, data) {
    const s0 = data.settings;
    if (typeof data.checkpoint !== "string" || typeof data.base !== "string" ||
        !Array.isArray(data.prompts) || !data.prompts.every((p) => typeof p === "string") ||
        !isObject(s0) || !isObject(data.fingerprint) || !isSize(data.max_new_tokens) ||
        !isSize(data.num_blks) || !isSize(data.num_heads)) {
      throw new Error("its data lacks the checkpoint, the base URL, the prompts, " +
                      "the settings or the model's sizes");
    }
    checkSettings(s0.temperature, s0.top_k, s0.top_p);
    addLmStyle();
    const id = rootEl.id || "d2l-writer", L = data.num_blks, h = data.num_heads;
    const about = el("p", {class: "d2l-checkpoint"}, rootEl);
    about.append("The writer runs checkpoint ");
    el("code", {}, about, data.checkpoint);
    about.append(` (recipe key ${data.fingerprint.recipe}): the section's ` +
                 `decoder-only language model (${L} block${L === 1 ? "" : "s"}, ` +
                 `${h} heads, ${data.num_hiddens} features), in your browser, ` +
                 "with no server.");
    const weightsNote = el("p", {class: "d2l-weights", hidden: ""}, rootEl);
    const status = el("p", {class: "d2l-status", role: "status"}, rootEl,
                      "The model loads when this explorer comes into view.");
    const helpId = `${id}-help`;
    el("p", {class: "d2l-note", id: helpId}, rootEl,
       "Type the beginning of a French sentence and press Enter: the model " +
       `continues it, one token at a time, up to ${data.max_new_tokens} tokens ` +
       "or until it writes <eos> (the end of a sentence). Each token is drawn " +
       "from the model's next-token distribution as the controls set it; the " +
       "same text, settings and seed always give the same continuation.");
    const form = el("form", {class: "d2l-controls"}, rootEl);
    const inputId = `${id}-text`;
    el("label", {for: inputId}, form, "French beginning");
    const input = el("input", {
      id: inputId, type: "text", name: "beginning", class: "d2l-lm-text",
      value: data.prompts.length ? data.prompts[0] : "", autocomplete: "off",
      spellcheck: "false", "aria-describedby": helpId}, form);
    el("button", {type: "submit", name: "write"}, form, "Write");
    if (data.prompts.length) {
      const row = el("div", {class: "d2l-examples"}, form);
      el("span", {}, row, "Examples: ");
      for (const prompt of data.prompts) {
        const b = el("button", {type: "button", name: "example"}, row, prompt);
        b.addEventListener("click", () => { input.value = prompt; write(performance.now()); });
      }
    }
    const controls = el("div", {class: "d2l-controls"}, rootEl);
    const temp = rangeControl(controls, {
      idPrefix: id, name: "temperature", label: "temperature", min: 0, max: 2,
      step: 0.05, value: s0.temperature});
    const topK = rangeControl(controls, {
      idPrefix: id, name: "top-k", label: "top-k", min: 0, max: TOP_K_MAX, step: 1,
      value: isNone(s0.top_k) ? 0 : s0.top_k});
    const topP = rangeControl(controls, {
      idPrefix: id, name: "top-p", label: "top-p", min: 0.05, max: 1, step: 0.05,
      value: isNone(s0.top_p) ? 1 : s0.top_p});
    const seedWrap = el("div", {class: "d2l-control"}, controls);
    el("label", {for: `${id}-seed`}, seedWrap, "seed");
    const seedInput = el("input", {id: `${id}-seed`, type: "number", name: "seed", min: 0,
                                   max: TWO_32 - 1, step: 1, value: s0.seed,
                                   class: "d2l-lm-seed"}, seedWrap);
    const nextSeed = el("button", {type: "button", name: "next-seed"}, seedWrap, "Next seed");
    const output = el("p", {class: "d2l-output", "aria-live": "polite"}, rootEl);
    const notes = el("p", {class: "d2l-note d2l-lm-notes"}, rootEl);
    const row = el("div", {class: "d2l-row"}, rootEl);
    const nextView = el("div", {class: "d2l-lm-next"}, row);
    const stepWrap = el("div", {class: "d2l-control"}, nextView);
    el("label", {for: `${id}-step`}, stepWrap, "distribution of token");
    const stepSelect = el("select", {id: `${id}-step`, name: "step"}, stepWrap);
    const chart = el("div", {class: "d2l-chart"}, nextView);
    el("p", {class: "d2l-note"}, nextView,
       "Bars: each token's probability at the temperature (at temperature 0, " +
       "greedy, the model's own: temperature 1). Blue: the tokens that top-k " +
       "and top-p keep, among which the token is drawn with the probability " +
       "after the arrow; grey: cut. ▶ marks the token drawn.");
    const attentionView = el("div", {class: "d2l-lm-attention"}, rootEl);
    let blockSelect = null;
    const blockWrap = el("div", {class: "d2l-control"}, attentionView);
    if (L > 1) {
      el("label", {for: `${id}-block`}, blockWrap, "attention of block");
      blockSelect = el("select", {id: `${id}-block`, name: "block"}, blockWrap);
      for (let l = 0; l < L; l++) el("option", {value: l}, blockSelect, `${l + 1} of ${L}`);
      blockSelect.value = String(L - 1);
    }
    const maps = el("div", {class: "d2l-lm-maps"}, attentionView);

    let model = null, loading = null, last = null, writing = 0;

    /** The settings the controls are set to (top-k 0 and top-p 1 are
     * off: null, as d2lmini.generation's None), their outputs and
     * aria-valuetext updated; problem says what is wrong with the seed. */
    function settings() {
      const t = Number(temp.input.value), k = Number(topK.input.value);
      const p = Number(topP.input.value), seedText = seedInput.value.trim();
      const seed = seedText === "" ? NaN : Number(seedText);
      temp.out.textContent = t === 0 ? "0 (greedy)" : t.toFixed(2);
      topK.out.textContent = k === 0 ? "off" : String(k);
      topP.out.textContent = p === 1 ? "off" : p.toFixed(2);
      temp.input.setAttribute("aria-valuetext", t === 0
        ? "0: greedy, always the most probable token" : `temperature ${t.toFixed(2)}`);
      topK.input.setAttribute("aria-valuetext", k === 0 ? "off: every token" : `the ${k} most probable tokens`);
      topP.input.setAttribute("aria-valuetext", p === 1 ? "off: every token"
        : `the most probable tokens up to probability ${p.toFixed(2)}`);
      const ok = Number.isInteger(seed) && seed >= 0 && seed < TWO_32;
      return {temperature: t, topK: k === 0 ? null : k, topP: p === 1 ? null : p,
              seed: ok ? seed : null,
              problem: ok ? null : `The seed is a whole number from 0 to ${TWO_32 - 1}, ` +
                `not “${seedInput.value}”.`};
    }

    function showText(run) {
      output.replaceChildren();
      const unknown = new Set(run.read.unknown);
      run.read.words.forEach((w, i) => {
        if (i) output.append(" ");
        if (unknown.has(w)) {
          el("mark", {class: "d2l-lm-unk", title: "not in the model's vocabulary: read as <unk>"},
             output, w);
        } else {
          output.append(w);
        }
      });
      const vocab = model.manifest.vocab, eos = model.manifest.special.eos;
      const words = run.ids.filter((i) => i !== eos).map((i) => vocab[i]);
      if (words.length) {
        if (run.read.words.length) output.append(" ");
        el("span", {class: "d2l-lm-new"}, output, words.join(" "));
      }
      if (run.finished) el("span", {class: "d2l-lm-eos"}, output, " <eos>");
      const said = [];
      if (!run.read.words.length) said.push("You typed nothing: the model writes from <bos>, the start of a sentence");
      if (unknown.size) said.push(`not in the model's vocabulary, read as <unk>: ${[...unknown].join(", ")}`);
      if (run.done && !run.finished) {
        said.push(`stopped after ${run.ids.length} tokens without <eos>`);
      }
      notes.textContent = said.length ? `${said.join("; ")}.` : "";
    }

    /** The tokens read before generated token k is drawn: the beginning
     * and the tokens generated before it. */
    const contextOf = (run, k) => run.read.tokens.concat(
      run.ids.slice(0, k).map((i) => model.manifest.vocab[i]));

    function drawNext(run, k) {
      chart.replaceChildren();
      const context = contextOf(run, k).slice(1);  // without <bos>
      const shownCtx = context.length > 6 ? `… ${context.slice(-6).join(" ")}` : context.join(" ");
      const title = context.length ? `Next token after “${shownCtx}”` : "First token of a sentence";
      const drawn = run.ids[k];
      const bars = nextTokenBars(chart, model.manifest.vocab, run.steps[k], run.settings, drawn, title);
      numbersTable(chart, `${title}: probability, and among the kept tokens`,
                   bars.rows.map((i) => model.manifest.vocab[i]),
                   ["probability", "kept"], bars.rows.map((i) => [
                     bars.probs[i], bars.kept.has(i) ? bars.kept.get(i) : "cut"]), 4);
      rootEl.dataset.step = String(k);
    }

    function drawAttention(run) {
      maps.replaceChildren();
      const l = blockSelect ? Number(blockSelect.value) : 0;
      const tokens = run.state.ids.map((i) => model.manifest.vocab[i]);
      const T = tokens.length, rows = run.state.attention[l];  // [T][h][t + 1]
      const cell = T <= 10 ? 28 : T <= 20 ? 18 : 12;
      el("p", {class: "d2l-note"}, maps,
         `Block ${l + 1}'s self-attention over the ${T} tokens the model read, ` +
         "one map per head: each row is a token (the query), each column one it " +
         "may attend to; the causal mask leaves the cells above the diagonal " +
         "empty (a token never sees the tokens after it).");
      const wrap = el("div", {class: "d2l-row"}, maps);
      for (let k = 0; k < h; k++) {
        const values = rows.map((w) => Array.from({length: T}, (_, s) => (s < w[k].length ? w[k][s] : null)));
        const box = el("div", {class: "d2l-lm-head"}, wrap);
        heatmap(box, {values, rows: tokens, cols: tokens, title: `head ${k + 1}`, cell,
                      annotate: cell >= 24, xlabel: "keys", ylabel: "queries",
                      label: `Block ${l + 1}, head ${k + 1}: ` + tokens.map((q, i) => `${q} attends most to ` +
                        tokens[values[i].reduce((b, v, s) => (v !== null && v > values[i][b] ? s : b), 0)]).join("; ")});
        numbersTable(box, `Block ${l + 1}, head ${k + 1}: attention of each token (rows) ` +
                     "to the tokens before it (columns)", tokens, tokens,
                     values.map((r) => r.map((v) => (v === null ? "–" : v))), 3, `head ${k + 1}`);
      }
    }

    function finish(run, start) {
      run.done = true;
      showText(run);
      const k = Math.min(Number(stepSelect.value) || 0, run.ids.length - 1);
      stepSelect.replaceChildren();
      run.ids.forEach((i, j) => el("option", {value: j}, stepSelect,
                                   `${j + 1}: “${model.manifest.vocab[i]}”`));
      stepSelect.value = String(Math.max(k, 0));
      if (run.ids.length) drawNext(run, Math.max(k, 0));
      drawAttention(run);
      output.setAttribute("aria-busy", "false");
      rootEl.dataset.writing = "false";
      rootEl.dataset.ids = JSON.stringify(run.ids);
      rootEl.dataset.lastMs = String(performance.now() - start);
      rootEl.dataset.writes = String(Number(rootEl.dataset.writes || 0) + 1);
    }

    /** Write a continuation of the box's text with the controls'
     * settings, one token a task: the first one shown at once (its time
     * from start in data-first-token-ms), the others as they come; a
     * newer write stops this one. */
    function write(start) {
      if (!model) {
        load();
        return;
      }
      const s = settings();
      if (s.problem) {
        status.textContent = s.problem;
        status.className = "d2l-status d2l-hint";
        return;
      }
      const m = model.manifest, read = readBeginning(model, input.value);
      const n = Math.min(data.max_new_tokens, m.max_len - read.ids.length + 1);
      if (n < 1) {
        status.textContent = `Your beginning has ${read.words.length} tokens: the ` +
          `model reads at most ${m.max_len - 1} (and <bos>). Type a shorter one.`;
        status.className = "d2l-status d2l-hint";
        return;
      }
      status.textContent = "";
      status.className = "d2l-status";
      const mine = ++writing;
      const steps = generateSteps(model, read.ids, n, m.special.eos, s.temperature,
                                  s.topK, s.topP, s.seed, m.forbidden);
      const run = {read, settings: s, maxNew: n, ids: [], steps: [], state: null,
                   finished: false, done: false};
      last = run;
      rootEl.dataset.writing = "true";
      output.setAttribute("aria-busy", "true");
      showText(run);
      const next = () => {
        if (mine !== writing) return;  // a newer write took over
        const step = steps.next();
        if (step.done) {
          finish(run, start);
          return;
        }
        run.ids.push(step.value.token);
        run.steps.push(step.value.logits);
        run.state = step.value.state;
        run.finished = step.value.token === m.special.eos;
        showText(run);
        if (run.ids.length === 1) {
          drawNext(run, 0);
          requestAnimationFrame(() => {
            rootEl.dataset.firstTokenMs = String(performance.now() - start);
          });
        }
        setTimeout(next, 0);
      };
      next();
    }

    async function load() {
      if (loading) return loading;
      status.textContent = "Loading the model…";
      status.className = "d2l-status d2l-loading";
      rootEl.dataset.state = "loading";
      const begin = performance.now();
      loading = loadLm(data.base, data.checkpoint, (f) => {
        status.textContent = `Loading the model… ${Math.round(100 * f)}%`;
      }, {fingerprint: data.fingerprint, num_heads: h, num_blks: L,
          num_hiddens: data.num_hiddens, vocab_size: data.vocab_size,
          max_len: data.max_len, weights_sha256: data.weights_sha256,
          model_sha256: data.model_sha256}).then((m) => {
        model = m;
        const said = lmWeightsStatement(data, m.manifest);
        rootEl.dataset.weights = said ? said.case : "unknown";
        if (said) {
          weightsNote.textContent = said.text;
          weightsNote.className = `d2l-weights d2l-weights-${said.case}`;
          weightsNote.hidden = false;
        }
        status.textContent = "";
        status.className = "d2l-status";
        rootEl.dataset.state = "ready";
        rootEl.dataset.loadMs = String(performance.now() - begin);
        write(performance.now());
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

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      write(performance.now());
    });
    input.addEventListener("focus", () => { if (!model) load(); });
    for (const c of [temp, topK, topP]) {
      c.input.addEventListener("input", () => { settings(); if (model) write(performance.now()); });
    }
    seedInput.addEventListener("change", () => { if (model) write(performance.now()); });
    nextSeed.addEventListener("click", () => {
      const seed = settings().seed;
      seedInput.value = String(seed === null ? 0 : (seed + 1) % TWO_32);
      if (model) write(performance.now());
    });
    stepSelect.addEventListener("change", () => {
      if (last && last.done && last.ids.length) drawNext(last, Number(stepSelect.value));
    });
    if (blockSelect) {
      blockSelect.addEventListener("change", () => { if (last && last.done) drawAttention(last); });
    }
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
    settings();
    rootEl.d2l = {
      load,
      write: (text) => {
        if (text !== undefined) input.value = text;
        write(performance.now());
      },
      generate: (text, s) => {
        const m = model.manifest, read = readBeginning(model, text);
        return generate(model, read.ids, Math.min(data.max_new_tokens, m.max_len - read.ids.length + 1),
                        m.special.eos, s.temperature, s.topK, s.topP, s.seed, m.forbidden);
      },
      read: (text) => readBeginning(model, text),
      forward: (ids) => lmForward(model, ids),
      get last() { return last; }, get model() { return model; }};
  }

  // What tests and other scripts may call (the computing part).
  root.d2lLM = {Mulberry32, exp64, nextTokenDistribution, sample, generate, generateSteps,
                lmForward, lmState, lmRead, lmLogits, makeLm, loadLm, readBeginning,
                lmManifestProblems, lmExpectedTensors, lmModelSha256,
                lmWeightsStatement, probabilities, LM_FORMAT, LM_MODEL_FIELDS};
