"""The page's beam search (d2lmini/js/beam.js), run in Node, against
``d2lmini.beam.beam_translate``: the same hypotheses, scores and
attention for every decoder the page runs.

The browser checks of the translator's beam controls and tree are in
tests/test_site_live.py.
"""

import numpy as np
import pytest
from test_live import (  # noqa: F401  (toy: test_live's fixture)
    NODE_MODEL,
    SENTENCES,
    run_node,
    tiny_attention_run,
    toy,
)

from d2lmini.beam import beam_translate
from d2lmini.live import export_model

NODE_BEAM = NODE_MODEL + r"""
const out = [];
for (const [k, alpha] of job.settings) {
  for (const s of job.sentences) {
    const r = live.beamTranslate(model, s,
                                 {beamSize: k, lengthPenalty: alpha});
    const nodes = r.steps.map((step) => step.map((n) => ({
      step: n.step, slot: n.slot, token: n.token, logProb: n.logProb,
      finished: n.finished, parentSlot: n.parent ? n.parent.slot : null})));
    let path = 0;
    for (let n = r.best; n; n = n.parent) path++;
    out.push({k, alpha, srcTokens: r.srcTokens, tokens: r.tokens,
              outTokens: r.outTokens, attention: r.attention,
              finished: r.finished, score: r.score, logProb: r.logProb,
              hypotheses: r.hypotheses, nodes, path});
  }
}
// Beam 1 with no penalty is greedy decoding.
const greedy = job.sentences.map((s) => live.translate(model, s));
const one = job.sentences.map((s) => live.beamTranslate(
  model, s, {beamSize: 1, lengthPenalty: 0}));
// Bad settings: the message of each.
const bad = [[0, 0], [2.5, 0], [2, -1], [2, NaN], [2, "1"]].map(
  ([k, alpha]) => {
    try {
      live.beamTranslate(model, "go .", {beamSize: k, lengthPenalty: alpha});
      return null;
    } catch (err) { return err.message; }
  });
console.log(JSON.stringify({out, greedy, one, bad}));
"""

SETTINGS = [(1, 0.0), (2, 0.0), (3, 1.0), (4, 0.6), (8, 2.0)]


@pytest.mark.parametrize("attention, num_layers", [
    ("additive", 1), ("multihead", 2), ("multihead-qk", 2),
    ("transformer", 1), ("transformer", 2)])
def test_live_js_beam_search_equals_d2lmini(toy, tmp_path,  # noqa: F811
                                            attention, num_layers):
    run, recipe = tiny_attention_run(toy, attention, num_layers)
    folder = export_model(recipe, run, tmp_path)
    got = run_node(tmp_path, NODE_BEAM, {
        "folder": str(folder), "sentences": SENTENCES,
        "settings": SETTINGS})
    theirs = iter(got["out"])
    for k, alpha in SETTINGS:
        ours = beam_translate(run.model, run.data, SENTENCES, beam_size=k,
                              length_penalty=alpha)
        for sentence, o in zip(SENTENCES, ours):
            t = next(theirs)
            where = f"{sentence!r}, beam {k}, alpha {alpha}"
            assert t["srcTokens"] == o.src_tokens, where
            assert t["outTokens"] == o.out_tokens, where
            assert t["finished"] == o.finished, where
            assert t["score"] == pytest.approx(o.score, abs=1e-4), where
            assert t["logProb"] == pytest.approx(o.log_prob, abs=1e-4), where
            assert [h["tokens"] for h in t["hypotheses"]] == \
                [h for h, _ in o.hypotheses], where
            np.testing.assert_allclose(
                [h["score"] for h in t["hypotheses"]],
                [s for _, s in o.hypotheses], atol=1e-4, err_msg=where)
            weights = o.attention if o.attention.dim() == 3 \
                else o.attention[None]
            np.testing.assert_allclose(np.array(t["attention"]),
                                       weights.numpy(), atol=1e-5,
                                       err_msg=where)
            # The tree: at most k running nodes and k finished ones per
            # step, each running one's parent among the step before's,
            # and the best path as long as the best output.
            for step in t["nodes"]:
                running = [n for n in step if not n["finished"]]
                assert len(running) <= k and len(step) - len(running) <= k
                assert all(n["parentSlot"] is not None
                           for n in step if n["step"] > 1)
            assert t["path"] == len(o.out_tokens), where
    if run.trained:  # a test that can fail: several outputs, <eos>
        wide = [t for t in got["out"] if t["k"] == 4]
        assert len({" ".join(t["tokens"]) for t in wide}) >= 3
        assert all(t["finished"] for t in wide)
    for g, one in zip(got["greedy"], got["one"]):
        assert one["outTokens"] == g["outTokens"]
        np.testing.assert_allclose(one["attention"], g["attention"])


def test_live_js_beam_search_says_what_is_wrong_with_its_settings(
        toy, tmp_path):  # noqa: F811
    run, recipe = tiny_attention_run(toy, "additive", 1)
    folder = export_model(recipe, run, tmp_path)
    bad = run_node(tmp_path, NODE_BEAM, {
        "folder": str(folder), "sentences": [], "settings": []})["bad"]
    assert bad[0] == "the beam size must be a whole number >= 1, not 0"
    assert bad[1] == "the beam size must be a whole number >= 1, not 2.5"
    assert bad[2] == "the length penalty must be a finite number >= 0, not -1"
    assert bad[3] == "the length penalty must be a finite number >= 0, not NaN"
    # The string "1" is named as a string, not as the number 1.
    assert bad[4] == \
        'the length penalty must be a finite number >= 0, not "1"'
