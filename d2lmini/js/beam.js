  /* ---- d2lmini/js/beam.js: beam search --------------------------------
   * d2lmini.beam.beam_decode for one sentence, on the decoders of
   * model.js, and what the beam kept at each step (the page draws it as
   * a tree: beamtree.js).  No DOM: this part runs in Node as well
   * (tests/test_live.py checks it against the package). */

  /** GNMT's length penalty lp(n) = ((5 + n) / 6) ** alpha. */
  const lengthPenaltyOf = (n, alpha) => Math.pow((5 + n) / 6, alpha);

  const BEAM_MAX = 8;  // the page's widest beam (the section's too)
  const ALPHA_MAX = 4;  // the page's largest length penalty

  /** log_softmax of the logits. */
  function logSoftmax(logits) {
    const m = maxOf(logits);
    let s = 0;
    for (let i = 0; i < logits.length; i++) s += Math.exp(logits[i] - m);
    const log = m + Math.log(s);
    return logits.map((x) => x - log);
  }

  /** The n best of the candidates value(j, v) = base[j] + logp[j][v], as
   * [{value, parent: j, token: v}], best first; among equal values the
   * lower flat index j * V + v comes first (the lower hypothesis, then
   * the lower token id: d2lmini.beam's rule).  A candidate of value
   * -Infinity (<pad>, <bos>: choosable) is none: fewer than n may come
   * back. */
  function topCandidates(base, logps, n) {
    const best = [];  // sorted, best first, at most n
    logps.forEach((logp, parent) => {
      for (let token = 0; token < logp.length; token++) {
        const value = base[parent] + logp[token];
        if (value === -Infinity) continue;
        if (best.length === n && !(value > best[n - 1].value)) continue;
        let i = best.length === n ? n - 1 : best.length;
        while (i > 0 && best[i - 1].value < value) i--;
        best.splice(i, 0, {value, parent, token});
        if (best.length > n) best.pop();
      }
    });
    return best;
  }

  // What beamTranslate's options may hold.
  const BEAM_OPTIONS = ["beamSize", "lengthPenalty", "maxLen"];

  /** Why beam search cannot run with these settings, or null. */
  function beamProblem(beamSize, lengthPenalty) {
    if (!Number.isInteger(beamSize) || beamSize < 1) {
      return `the beam size must be a whole number >= 1, not ${shown(beamSize)}`;
    }
    if (typeof lengthPenalty !== "number" || !Number.isFinite(lengthPenalty) ||
        lengthPenalty < 0) {
      return "the length penalty must be a finite number >= 0, not " +
        shown(lengthPenalty);
    }
    return null;
  }

  /** Beam search, like d2lmini.beam.beam_translate of one sentence: the
   * k most likely hypotheses go on at each step, of their 2k best
   * continuations those ending in <eos> among the first k are finished,
   * and the search stops when no running hypothesis can beat the best
   * finished one (its score only falls; dividing by lp(maxLen) is the
   * most it can gain), or at maxLen.  beamSize 1 with lengthPenalty 0
   * is greedy decoding.  Among candidates of equal log P the one of the
   * lower hypothesis, then of the lower token id, goes first
   * (topCandidates); <pad> and <bos> are never chosen (choosable).
   *
   * opts: {beamSize (a whole number >= 1, default 4), lengthPenalty
   * (GNMT's alpha, a finite number >= 0, default 0), maxLen (as
   * translate's: undefined for the model's num_steps)}; a bad value, an
   * unknown option or an empty or blank sentence throws an Error that
   * names it.
   *
   * Returns what translate() returns for the best hypothesis, with its
   * score (log P / lp(steps)) and logProb, `hypotheses` (the finished
   * ones, best first: {tokens, logProb, score, finished}) and `steps`:
   * for each step, the nodes the beam kept ({step, slot, parent node,
   * token, logProb, score, finished, attention (h, S): the row of the
   * step that chose the token}), the running ones first.  `best` is the
   * best hypothesis's last node.
   */
  function beamTranslate(model, sentence, opts) {
    if (opts !== undefined && opts !== null && !isObject(opts)) {
      throw new Error("the options must be an object such as {beamSize: 4, " +
                      `lengthPenalty: 0.6}, not ${shown(opts)}`);
    }
    const o = opts || {}, k = o.beamSize === undefined ? 4 : o.beamSize;
    const unknown = Object.keys(o).filter((key) => !BEAM_OPTIONS.includes(key));
    if (unknown.length) {
      throw new Error(`no option ${unknown.map(shown).join(", ")}: the ` +
                      `options are ${BEAM_OPTIONS.join(", ")}`);
    }
    const alpha = o.lengthPenalty === undefined ? 0 : o.lengthPenalty;
    const problem = beamProblem(k, alpha);
    if (problem) throw new Error(problem);
    const m = model.manifest, maxSteps = maxStepsOf(model, o.maxLen);
    const src = readSource(model, sentence);
    const decoder = decoderOf(model, src.ids, maxSteps);
    const eos = m.tgt_special.eos, lp = (n) => lengthPenaltyOf(n, alpha);
    // A running hypothesis: its ids, log P, decoder state, attention
    // rows so far and its node of the tree.
    let beam = [{ids: [], logProb: 0, state: decoder.state, maps: [], node: null}];
    const found = [], steps = [];
    let bestFound = -Infinity, done = false;
    for (let t = 1; t <= maxSteps && !done; t++) {
      const outs = beam.map((hyp) => decoder.step(
        hyp.ids.length ? hyp.ids[hyp.ids.length - 1] : m.tgt_special.bos, hyp.state));
      const top = topCandidates(beam.map((hyp) => hyp.logProb),
                                outs.map(([logits]) => logSoftmax(choosable(model, logits, t))),
                                2 * k);
      const running = [], nodes = [], ended = [];
      top.forEach((c, rank) => {
        const hyp = beam[c.parent], weights = outs[c.parent][1];
        const node = {step: t, parent: hyp.node, token: m.tgt_vocab[c.token],
                      logProb: c.value, attention: weights};
        if (c.token === eos) {
          if (rank >= k) return;  // <eos> only among the first k
          Object.assign(node, {score: c.value / lp(t), finished: true});
          found.push({ids: hyp.ids, logProb: c.value, score: node.score,
                      finished: true, maps: hyp.maps.concat([weights]), node});
          bestFound = Math.max(bestFound, node.score);
          ended.push(node);
        } else if (running.length < k) {
          Object.assign(node, {finished: false});
          running.push({ids: hyp.ids.concat([c.token]), logProb: c.value,
                        state: outs[c.parent][2], maps: hyp.maps.concat([weights]),
                        node});
          nodes.push(node);
        }
      });
      nodes.push(...ended);
      nodes.forEach((node, slot) => { node.slot = slot; });
      steps.push(nodes);
      beam = running;
      const bestRunning = beam.length
        ? maxOf(beam.map((hyp) => hyp.logProb)) / lp(maxSteps) : -Infinity;
      done = (found.length > 0 && bestFound >= bestRunning) ||
        bestRunning === -Infinity;
    }
    if (!done) {  // cut at maxSteps: the running ones compete as they are
      for (const hyp of beam) {
        hyp.node.score = hyp.logProb / lp(maxSteps);
        found.push({ids: hyp.ids, logProb: hyp.logProb, score: hyp.node.score,
                    finished: false, maps: hyp.maps, node: hyp.node});
      }
    }
    found.sort((a, b) => b.score - a.score);  // stable, as Python's sorted
    const kept = found.slice(0, k), best = kept[0];
    const h = best.maps[0].length;
    const tokens = best.ids.map((i) => m.tgt_vocab[i]);
    return {srcTokens: src.srcTokens, words: src.tokens, tokens,
            outTokens: best.finished ? tokens.concat(["<eos>"]) : tokens,
            attention: Array.from({length: h}, (_, q) => best.maps.map((w) => w[q])),
            finished: best.finished, score: best.score, logProb: best.logProb,
            hypotheses: kept.map((f) => ({
              tokens: f.ids.map((i) => m.tgt_vocab[i]), logProb: f.logProb,
              score: f.score, finished: f.finished})),
            steps, best: best.node, beamSize: k, lengthPenalty: alpha};
  }
