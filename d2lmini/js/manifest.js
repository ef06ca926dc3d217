  /* ---- d2lmini/js/manifest.js: loading a model folder ----------------
   * A model folder (d2lmini.live.export_model) holds manifest.json and
   * its weights: the manifest is checked field by field, the weights by
   * length, shape, value and sha256, and the manifest's description of
   * the model by the sha256 the section's notebook recorded.  The
   * generic steps (fetchManifest, fetchWeights, weightsFileProblems,
   * tensorProblems, throwProblems, pickFields) serve vit.js's model
   * folders too.  No DOM: this part runs in Node as well
   * (tests/test_live.py). */

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


  /** Every tensor of the model a manifest describes, by state-dict name
   * in the state dict's order, with the shape its sizes imply (d2lmini.live.export_model writes the
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
        // A module's own parameters come before its submodules' in
        // the state dict: the scales, then W_q ... W_o.
        if (m.qk_norm === true) add("decoder.attention.qk_scale", [m.num_heads]);
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

  /** The manifest's weights file (weights, weights_sha256,
   * weights_bytes) as an export names it: problems pushed onto bad. */
  function weightsFileProblems(m, bad) {
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
    return bad;
  }

  /** The manifest's tensors (an object, and weights_bytes a positive
   * whole number: the caller checked) against expect, every tensor the
   * model has by state-dict name in that order with its shape: each
   * one there with that shape and offset, no other, filling the file;
   * and with the weights (an ArrayBuffer, or null), their length and
   * that every number is finite.  Problems are pushed onto bad (the
   * weights are read only when bad is empty); returns bad. */
  function tensorProblems(m, expect, buffer, bad) {
    // An export writes the tensors one after the other, in the order
    // of the state dict (expect's order): each offset is the one that
    // order gives, so that no two tensors can trade places.
    const bytes = m.weights_bytes, floats = bytes / 4, spans = [];
    let next = 0;
    for (const [name, shape] of Object.entries(expect)) {
      const size = shape.reduce((a, b) => a * b, 1), at = next;
      next += size;
      const spec = m.tensors[name];
      if (!isObject(spec)) { bad.push(`tensor ${name} is missing`); continue; }
      if (!Array.isArray(spec.shape) || spec.shape.join() !== shape.join() ||
          spec.shape.length !== shape.length) {
        bad.push(`tensor ${name} has shape ${show(spec.shape)}, where the ` +
                 `manifest's sizes make it ${show(shape)}`);
        continue;
      }
      const o = spec.offset;
      if (!Number.isInteger(o) || o < 0 || o + size > floats) {
        bad.push(`tensor ${name}: offset ${show(o)} is not in [0, ` +
                 `${floats - size}] (${size} floats in a file of ${floats})`);
      } else if (o !== at) {
        bad.push(`tensor ${name}: offset ${o}, where the order of the ` +
                 `state dict puts it at ${at}`);
      } else {
        spans.push([o, o + size, name]);
      }
    }
    // Own names only: `name in expect` would pass "constructor",
    // "toString" or "__proto__" (expect's prototype has them).
    for (const name of Object.keys(m.tensors)) {
      if (!Object.prototype.hasOwnProperty.call(expect, name)) {
        bad.push(`tensor ${name} is not part of the model`);
      }
    }
    if (next !== floats) {
      bad.push(`the tensors hold ${next} floats, the weights file ${floats}`);
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

  /** What is wrong with a model's manifest (JSON) and, when given, its
   * weights (an ArrayBuffer): a list of sentences, empty when nothing is.
   *
   * Checks the format, the attention, the sizes (whole numbers; the heads
   * divide num_hiddens, additive attention has one), the vocabularies
   * and their special tokens, the fingerprint (its recipe key is the
   * checkpoint's), the weights file's name (weights-<sha256[:16]>.bin),
   * byte count and sha256 (its form: the digest is loadModel's), that
   * every tensor the sizes imply is there with that shape and no other,
   * at the offset the state dict's order gives it; and with
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
    weightsFileProblems(m, bad);
    const bytes = m.weights_bytes;
    if (!isObject(m.tensors)) {
      bad.push("tensors is missing");
      return bad;
    }
    // The shapes need the sizes, the offsets a byte count.
    if (!sizesOk || !vocabsOk || !ATTENTIONS.includes(m.attention) ||
        !Number.isInteger(bytes) || bytes <= 0) return bad;
    return tensorProblems(m, expectedTensors(m), buffer, bad);
  }

  /** Throw an Error that says what is wrong, if anything is. */
  function checkManifest(manifest, buffer, expected) {
    throwProblems(manifestProblems(manifest, buffer, expected));
  }

  /** Throw an Error that names the first three problems, if any. */
  function throwProblems(bad) {
    if (bad.length) {
      const more = bad.length > 3 ? `; and ${bad.length - 3} more` : "";
      throw new Error(`the model's files are not valid: ` +
                      `${bad.slice(0, 3).join("; ")}${more}`);
    }
  }

  const hex = (bytes) => Array.from(new Uint8Array(bytes),
                                    (b) => b.toString(16).padStart(2, "0")).join("");

  /** sha256 of bytes: the browser's (crypto.subtle, fast) where it has
   * one, sha256.js's otherwise (a page served over plain http from
   * another host): the page checks its files everywhere. */
  async function digest(bytes) {
    const subtle = root.crypto && root.crypto.subtle;
    return subtle ? hex(await subtle.digest("SHA-256", bytes))
      : sha256Hex(bytes);
  }

  // The fields of a manifest that say what the page computes: the
  // model, its vocabularies and its weights
  // (d2lmini.live_translator.MODEL_FIELDS).  The rest (the format, the
  // export's BLEU, its record of the notebook) describes the export.
  const MODEL_FIELDS = [
    "checkpoint", "recipe_key", "fingerprint", "attention", "num_heads",
    "qk_norm", "num_layers", "num_hiddens", "embed_size",
    "ffn_num_hiddens", "num_steps", "src_vocab", "tgt_vocab",
    "src_special", "tgt_special", "tensors", "weights", "weights_bytes",
    "weights_sha256"];

  /** Python's sort of str keys: by code point (JavaScript's default
   * sort compares UTF-16 units, which orders U+E000-U+FFFF after the
   * characters beyond U+FFFF). */
  function byCodePoint(a, b) {
    const x = Array.from(a), y = Array.from(b);
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      const d = x[i].codePointAt(0) - y[i].codePointAt(0);
      if (d) return d;
    }
    return x.length - y.length;
  }

  /** JSON with sorted keys and no spaces: Python's json.dumps(x,
   * sort_keys=True, separators=(",", ":"), ensure_ascii=False) for
   * strings, whole numbers, booleans, null, lists and objects. */
  function canonicalJSON(x) {
    if (Array.isArray(x)) return `[${x.map(canonicalJSON).join(",")}]`;
    if (x !== null && typeof x === "object") {
      return `{${Object.keys(x).sort(byCodePoint).map(
        (k) => `${JSON.stringify(k)}:${canonicalJSON(x[k])}`).join(",")}}`;
    }
    return x === undefined ? "null" : JSON.stringify(x);
  }

  /** sha256 of the manifest's MODEL_FIELDS (a missing one as null), as
   * canonical JSON in UTF-8: d2lmini.live_translator.model_sha256, which
   * the section's translator output records. */
  function modelSha256(manifest) {
    return sha256Hex(new TextEncoder().encode(canonicalJSON(
      pickFields(manifest, MODEL_FIELDS))));
  }

  /** The fields of a manifest by name, a missing one as null. */
  function pickFields(manifest, names) {
    const fields = {};
    for (const k of names) fields[k] = manifest[k] === undefined ? null : manifest[k];
    return fields;
  }

  /** A model folder's manifest.json, parsed (not checked yet). */
  async function fetchManifest(folder) {
    const response = await fetch(`${folder}manifest.json`);
    if (!response.ok) throw new Error(`${folder}manifest.json: HTTP ${response.status}`);
    try {
      return await response.json();
    } catch (err) {
      throw new Error(`${folder}manifest.json is not JSON (${err.message})`);
    }
  }

  /** The weights file a checked manifest names, as an ArrayBuffer of
   * the length and sha256 the manifest gives. */
  async function fetchWeights(folder, manifest, onProgress) {
    const buffer = await fetchBytes(folder + manifest.weights, onProgress || (() => {}));
    if (buffer.byteLength !== manifest.weights_bytes) {
      throw new Error(`${manifest.weights}: ${buffer.byteLength} bytes, ` +
                      `expected ${manifest.weights_bytes}`);
    }
    // The page states which weights it runs from the manifest's sha256:
    // check that the file is the one it describes.
    if (await digest(buffer) !== manifest.weights_sha256) {
      throw new Error(`${manifest.weights} is not the file its manifest ` +
                      "describes (another sha256): reload the page");
    }
    return buffer;
  }

  /** Load a model folder: manifest.json and its weights file, both
   * checked (manifestProblems), the weights' sha256 with them.
   *
   * expected: as for manifestProblems, and what the section's run
   * recorded of its model: weights_sha256 and model_sha256.  When the
   * served weights are the section's (the same sha256), the manifest
   * must describe them as the section's run did (modelSha256 equal to
   * model_sha256): vocabularies, sizes and layout included.
   */
  async function loadModel(base, checkpoint, onProgress, expected) {
    const folder = `${base}${checkpoint}/`;
    const manifest = await fetchManifest(folder);
    const want = {checkpoint, ...(expected || {})};
    checkManifest(manifest, null, want);
    if (want.model_sha256 && manifest.weights_sha256 === want.weights_sha256 &&
        modelSha256(manifest) !== want.model_sha256) {
      throw new Error("manifest.json names the weights the section " +
                      "evaluated but does not describe them as the " +
                      "section's run did (its vocabularies, sizes or " +
                      "tensor layout were changed): rebuild the site " +
                      "(make book)");
    }
    const buffer = await fetchWeights(folder, manifest, onProgress);
    checkManifest(manifest, buffer, want);
    return makeModel(manifest, buffer);
  }
