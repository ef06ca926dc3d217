"""The page's decoders (d2lmini/js/model.js and beam.js, run in Node) at
their edges (issue 39): exact ties, <pad> and <bos>, a bad maxLen or
option, an empty sentence, logits that are not finite.

A model's logits are made the same at every step by setting its output
layer's weight to zero and its bias to chosen logits (numbers that
float32 holds exactly), in the page or in torch before the export.
"""

import json

import pytest
import torch
from test_live import (  # noqa: F401  (toy: test_live's fixture)
    run_node,
    tiny_attention_run,
    toy,
)

from d2lmini import seq2seq
from d2lmini.attention_decoder import Seq2SeqAttentionDecoder
from d2lmini.beam import beam_translate
from d2lmini.cache import Run
from d2lmini.data import MTFraEng
from d2lmini.decoding import translate
from d2lmini.experiment import CHAPTER_RECIPE
from d2lmini.live import export_model
from d2lmini.utils import set_seed

# Each case: "sentence" (JavaScript source), "maxLen" (JavaScript source;
# absent: translate gets none) or "beam" (beamTranslate's options, as
# JavaScript source), "logits" (the same logits at every step), "broken"
# ([token id, JavaScript source]: that logit's bias).
NODE_EDGES = r"""
const fs = require("fs");
const live = require(process.argv[2]);
const job = JSON.parse(fs.readFileSync(0, "utf8"));
const manifest = JSON.parse(fs.readFileSync(job.folder + "/manifest.json"));
const buf = fs.readFileSync(job.folder + "/" + manifest.weights);
// A fresh model for each case: its tensors view its own copy.
const fresh = () => live.makeModel(manifest, buf.buffer.slice(
  buf.byteOffset, buf.byteOffset + buf.length));
const value = (js) => (0, eval)(`(${js})`);
console.log(JSON.stringify(job.cases.map((c) => {
  const model = fresh(), bias = model.t["decoder.dense.bias"].data;
  if (c.logits) {
    model.t["decoder.dense.weight"].data.fill(0);
    bias.set(c.logits);
  }
  if (c.broken) bias[c.broken[0]] = value(c.broken[1]);
  try {
    const r = c.beam === undefined
      ? live.translate(model, value(c.sentence),
                       c.maxLen === undefined ? undefined : value(c.maxLen))
      : live.beamTranslate(model, value(c.sentence), value(c.beam));
    // JSON writes -Infinity as null.
    return {outTokens: r.outTokens, finished: r.finished,
            hypotheses: r.hypotheses || null,
            steps: r.steps ? r.steps.map((step) => step.map(
              (n) => ({token: n.token, logProb: n.logProb,
                       finished: n.finished}))) : null};
  } catch (err) {
    return {error: err.message};
  }
})));
"""

NO_TOKENS = "is empty or blank (no tokens to read): type an English sentence"


def logits_of(vocab, top, rest=-30.0):
    """Logits over ``vocab``'s tokens: ``top`` maps tokens to theirs,
    every other token gets ``rest``."""
    unknown = set(top) - set(vocab.idx_to_token)
    assert not unknown, unknown
    return [top.get(tok, rest) for tok in vocab.idx_to_token]


def run_cases(tmp_path, folder, cases):
    return run_node(tmp_path, NODE_EDGES, {"folder": str(folder),
                                           "cases": cases})


@pytest.fixture(scope="module")
def additive(toy, tmp_path_factory):  # noqa: F811
    """A tiny additive model of the toy corpus, exported; its target
    vocabulary."""
    run, recipe = tiny_attention_run(toy, "additive", 1)
    folder = export_model(recipe, run, tmp_path_factory.mktemp("model"))
    return folder, run.data.tgt_vocab


def test_live_js_greedy_breaks_ties_by_the_lower_id_never_pad_or_bos(
        additive, tmp_path):
    """Point 3 and the smaller point: greedy takes the lower id of equal
    logits, and never <pad> or <bos>, even when they score highest."""
    folder, vocab = additive
    # "." (id 4) and "!" (id 5) tie, below <pad> and <bos>.
    tied = logits_of(vocab, {"<pad>": 10, "<bos>": 10, ".": 3, "!": 3,
                             "<eos>": -5})
    assert vocab.token_to_idx["."] < vocab.token_to_idx["!"]
    cases = [
        {"sentence": '"go ."', "logits": tied},
        {"sentence": '"go ."', "logits": tied, "maxLen": "2"},
        # Two words tie (calme < va), <eos> below.
        {"sentence": '"go ."', "logits": logits_of(
            vocab, {"va": 2, "calme": 2, "<eos>": 0})},
        # <eos> ties with "." and has the lower id: it ends at once.
        {"sentence": '"go ."', "logits": logits_of(
            vocab, {"<eos>": 1, ".": 1})},
        # Beam 1 with no penalty is greedy, ties included.
        {"sentence": '"go ."', "logits": tied,
         "beam": "{beamSize: 1, lengthPenalty: 0}"},
    ]
    got = run_cases(tmp_path, folder, cases)
    num_steps = 6  # test_live's toy corpus
    assert got[0] == {"outTokens": ["."] * num_steps, "finished": False,
                      "hypotheses": None, "steps": None}
    assert got[1]["outTokens"] == [".", "."]
    assert got[2]["outTokens"] == ["calme"] * num_steps
    assert got[3]["outTokens"] == ["<eos>"] and got[3]["finished"]
    assert got[4]["outTokens"] == got[0]["outTokens"]


def test_live_js_beam_breaks_ties_by_hypothesis_then_token_id(
        additive, tmp_path):
    """Point 3: of equal candidates, the lower hypothesis goes first,
    then the lower token id; <pad> and <bos> are never in the beam."""
    folder, vocab = additive
    tied = logits_of(vocab, {"<pad>": 10, "<bos>": 10, ".": 3, "!": 3,
                             "<eos>": -5})
    got = run_cases(tmp_path, folder, [
        {"sentence": '"go ."', "logits": tied,
         "beam": "{beamSize: 2, lengthPenalty: 0, maxLen: 3}"},
        {"sentence": '"go ."', "logits": tied,
         "beam": "{beamSize: 8, lengthPenalty: 1}"}])
    # Step 1: "." then "!" (token ids 4, 5).  Step 2: the four
    # continuations tie; those of hypothesis "." come first: ". ." and
    # ". !", not ". ." and "! ." (token first).  Step 3 the same.  No
    # <eos> (rank 4 of 4 ties and more): both run to maxLen and tie.
    assert got[0]["outTokens"] == [".", ".", "."]
    assert [h["tokens"] for h in got[0]["hypotheses"]] == [
        [".", ".", "."], [".", ".", "!"]]
    assert [[n["token"] for n in step] for step in got[0]["steps"]] == [
        [".", "!"], [".", "!"], [".", "!"]]
    for result in got:
        tokens = {n["token"] for step in result["steps"] for n in step}
        tokens |= {t for h in result["hypotheses"] for t in h["tokens"]}
        assert not tokens & {"<pad>", "<bos>"}, tokens
        assert all(isinstance(n["logProb"], float)
                   for step in result["steps"] for n in step)


def test_live_js_beam_keeps_no_hypothesis_of_minus_infinity(tmp_path):
    """With <pad> and <bos> out, a vocabulary of 6 has 4 tokens to
    choose: after the first step a beam of 4 runs 3 hypotheses (one
    token is <eos>), not a 4th of log P -Infinity, which would end
    among the hypotheses."""
    data = MTFraEng(2, num_steps=3, num_train=2, num_val=0, num_test=1,
                    pairs=[("go .", "va !")] * 2 + [("run .", "va !")],
                    min_freq=1)
    vocab = data.tgt_vocab
    assert len(vocab) == 6, vocab.idx_to_token
    set_seed(0)
    model = seq2seq.Seq2Seq(
        seq2seq.Seq2SeqEncoder(len(data.src_vocab), 4, 8, 1),
        Seq2SeqAttentionDecoder(len(vocab), 4, 8, 1),
        vocab.pad).eval()
    folder = export_model(CHAPTER_RECIPE.replace(attention="additive"),
                          Run(model, data, None, False), tmp_path / "m")
    logits = logits_of(vocab, {"<pad>": 10, "<bos>": 10, "<unk>": 1,
                               "va": 1, "!": 1, "<eos>": 0})
    got = run_cases(tmp_path, folder, [
        {"sentence": '"go ."', "logits": logits,
         "beam": f"{{beamSize: {k}, lengthPenalty: 0}}"} for k in (4, 8)])
    for result in got:
        assert "error" not in result, result
        first = result["steps"][0]
        assert len([n for n in first if not n["finished"]]) == 3, first
        for step in result["steps"]:
            assert all(isinstance(n["logProb"], float) for n in step)
        assert all(isinstance(h["score"], float) and
                   not {"<pad>", "<bos>"} & set(h["tokens"])
                   for h in result["hypotheses"]), result["hypotheses"]


BAD_MAX_LEN = {"-1": "-1", '"3"': '"3"', "0": "0", "2.5": "2.5",
               "NaN": "NaN", "Infinity": "Infinity", "true": "true",
               "[3]": "[3]", "65537": "65537"}


def test_live_js_checks_max_len(additive, tmp_path):
    """Point 10: maxLen is undefined or null (the model's num_steps) or
    a whole number >= 1; anything else is an Error naming it, in
    translate and in beamTranslate."""
    folder, vocab = additive
    endless = logits_of(vocab, {".": 3, "<eos>": -5})
    cases = []
    for js in BAD_MAX_LEN:
        cases.append({"sentence": '"go ."', "maxLen": js})
        cases.append({"sentence": '"go ."', "beam": f"{{maxLen: {js}}}"})
    good = {"null": 6, "undefined": 6, "1": 1, "10": 10}
    for js in good:
        cases.append({"sentence": '"go ."', "maxLen": js, "logits": endless})
        cases.append({"sentence": '"go ."', "logits": endless,
                      "beam": f"{{beamSize: 2, maxLen: {js}}}"})
    got = run_cases(tmp_path, folder, cases)
    for i, shown in enumerate(BAD_MAX_LEN.values()):
        for result in got[2 * i: 2 * i + 2]:
            assert result["error"] == (
                "maxLen must be a whole number in [1, 65536] (the most "
                "tokens to emit), or undefined for the model's num_steps "
                f"(6); not {shown}"), result
    for i, length in enumerate(good.values()):
        for result in got[2 * (len(BAD_MAX_LEN) + i):][:2]:
            assert result["outTokens"] == ["."] * length, result


def test_live_js_refuses_an_empty_sentence_and_bad_options(additive,
                                                          tmp_path):
    """Point 11: a sentence with no tokens (empty or blank, by the
    tokenizer's whitespace) is refused with a clear message, by both
    decoders; so are a sentence that is not a string and options that
    are not beamTranslate's."""
    folder, _ = additive
    blanks = ["", "   ", "\t\n", "\x85\x1c\u3000"]
    cases = []
    for s in blanks:
        cases += [{"sentence": json.dumps(s)},
                  {"sentence": json.dumps(s), "beam": "{beamSize: 2}"}]
    cases += [{"sentence": "undefined"}, {"sentence": "3", "beam": "{}"},
              {"sentence": '"go ."', "beam": "4"},
              {"sentence": '"go ."', "beam": "[4]"},
              {"sentence": '"go ."', "beam": "{beam: 2, alpha: 1}"},
              {"sentence": '"  go .  "', "beam": "null"}]
    got = run_cases(tmp_path, folder, cases)
    for s, result in zip([s for s in blanks for _ in "gb"], got):
        assert result["error"].startswith("the sentence "), (s, result)
        assert result["error"].endswith(NO_TOKENS), (s, result)
    rest = got[2 * len(blanks):]
    assert rest[0]["error"] == "the sentence must be a string, not undefined"
    assert rest[1]["error"] == "the sentence must be a string, not 3"
    assert rest[2]["error"].startswith("the options must be an object")
    assert rest[2]["error"].endswith("not 4")
    assert rest[3]["error"].endswith("not [4]")
    assert rest[4]["error"] == ('no option "beam", "alpha": the options are '
                                "beamSize, lengthPenalty, maxLen")
    assert "outTokens" in rest[5]  # null options: the defaults


def test_live_js_refuses_logits_that_are_not_finite(additive, tmp_path):
    """A logit that is NaN or infinite (weights that overflow) is an
    Error naming the token and the step, not a token chosen from it."""
    folder, vocab = additive
    dot = vocab.token_to_idx["."]
    got = run_cases(tmp_path, folder, [
        {"sentence": '"go ."', "broken": [dot, "NaN"]},
        {"sentence": '"go ."', "broken": [dot, "Infinity"],
         "beam": "{beamSize: 3}"}])
    assert got[0]["error"].startswith(
        f"the model's logit of token {dot} at step 1 is NaN: its weights "
        "are broken")
    assert got[1]["error"].startswith(
        f"the model's logit of token {dot} at step 1 is Infinity")


def test_live_js_ties_and_pad_bos_as_d2lmini(toy, tmp_path):  # noqa: F811
    """The page and d2lmini decode a model of tied logits (and <pad>,
    <bos> highest) alike: greedy, and beam search at several widths."""
    run, recipe = tiny_attention_run(toy, "additive", 1)
    vocab = run.data.tgt_vocab
    tied = logits_of(vocab, {"<pad>": 10, "<bos>": 10, ".": 3, "!": 3,
                             "va": 3, "<eos>": 2})
    with torch.no_grad():
        run.model.decoder.dense.weight.zero_()
        run.model.decoder.dense.bias.copy_(torch.tensor(tied))
    folder = export_model(recipe, run, tmp_path / "m")
    settings = [(1, 0.0), (2, 0.0), (3, 1.0), (4, 0.0)]
    got = run_cases(tmp_path, folder, [{"sentence": '"go ."'}] + [
        {"sentence": '"go ."',
         "beam": f"{{beamSize: {k}, lengthPenalty: {alpha}}}"}
        for k, alpha in settings])
    assert got[0]["outTokens"] == \
        translate(run.model, run.data, ["go ."])[0].out_tokens
    for (k, alpha), theirs in zip(settings, got[1:]):
        ours = beam_translate(run.model, run.data, ["go ."], beam_size=k,
                              length_penalty=alpha)[0]
        assert theirs["outTokens"] == ours.out_tokens, (k, alpha)
        assert [h["tokens"] for h in theirs["hypotheses"]] == \
            [h for h, _ in ours.hypotheses], (k, alpha)
