"""Translation metrics: the book's sentence BLEU and corpus sacreBLEU.

Every function scores strings whose tokens are separated by single spaces,
the form the data pipeline and the greedy decoder produce (``"je suis ."``).

Two BLEUs live here and their numbers are not comparable:

* ``bleu`` is the small sentence-level variant of Dive into Deep Learning
  (precisions weighted by 0.5**n, no smoothing), kept for continuity with
  the book's showcase sentences.
* ``corpus_bleu`` is standard corpus BLEU computed by sacreBLEU against
  *all* references of each source, the number to report.
"""

import collections
import math

import sacrebleu
import torch

from .utils import check_int

__all__ = ["LengthBucket", "bleu", "bleu_by_length", "bleu_of_stats",
           "corpus_bleu", "corpus_chrf", "paired_bootstrap",
           "sentence_bleu", "sentence_stats"]

LengthBucket = collections.namedtuple(
    "LengthBucket", ["low", "high", "count", "score"])
LengthBucket.__doc__ = (
    "Corpus BLEU of the sources with ``low <= length < high`` tokens; "
    "``score`` is NaN when ``count`` is 0.")


def bleu(pred_seq, label_seq, k):
    """Sentence BLEU exactly as in Dive into Deep Learning (d2l 1.0.3).

    The score is ``exp(min(0, 1 - len_label / len_pred))`` times the
    product of the clipped n-gram precisions ``p_n ** (0.5 ** n)`` for
    ``n = 1 .. min(k, len_pred)``. This is the book's own variant: it has
    no smoothing and other weights than standard BLEU, so its values are
    *not* comparable to sacreBLEU (use ``corpus_bleu`` for those).

    Args:
        pred_seq: predicted sentence, tokens separated by single spaces.
        label_seq: reference sentence in the same form.
        k: the longest n-gram to match, at least 1.

    Returns:
        A float in [0, 1]. An empty prediction scores 0 (as in d2l, where
        ``''.split(' ')`` is one empty token that matches nothing).
    """
    for name, seq in (("pred_seq", pred_seq), ("label_seq", label_seq)):
        if not isinstance(seq, str):
            raise TypeError(
                f"{name} must be a string of space-separated tokens, got "
                f"{type(seq).__name__}; join tokens with ' '.join(tokens)")
    check_int("k", k)
    # split(' ') rather than split(): the book's exact tokenization
    pred_tokens, label_tokens = pred_seq.split(" "), label_seq.split(" ")
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    score = math.exp(min(0, 1 - len_label / len_pred))  # brevity penalty
    for n in range(1, min(k, len_pred) + 1):
        num_matches, label_subs = 0, collections.defaultdict(int)
        for i in range(len_label - n + 1):
            label_subs[" ".join(label_tokens[i: i + n])] += 1
        for i in range(len_pred - n + 1):
            gram = " ".join(pred_tokens[i: i + n])
            # each reference n-gram can be matched only once (clipping)
            if label_subs[gram] > 0:
                num_matches += 1
                label_subs[gram] -= 1
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


def _ref_streams(hypotheses, references):
    """Check the inputs and transpose references into sacreBLEU streams.

    ``references[i]`` lists the references of hypothesis ``i``; sacreBLEU
    wants stream ``j`` to hold the ``j``-th reference of every hypothesis,
    with ``None`` where a hypothesis has fewer references.
    """
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError(
            "hypotheses and references must be lists, not single strings; "
            "pass [hyp] and [[ref1, ref2, ...]]")
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(
            f"got {len(hypotheses)} hypotheses but {len(references)} "
            "reference lists; give one list of references per hypothesis")
    if not hypotheses:
        raise ValueError("hypotheses is empty; there is nothing to score")
    for i, hyp in enumerate(hypotheses):
        if not isinstance(hyp, str):
            raise TypeError(
                f"hypotheses[{i}] is a {type(hyp).__name__}, not a string; "
                "join tokens with ' '.join(tokens)")
    for i, refs in enumerate(references):
        if isinstance(refs, str):
            raise TypeError(
                f"references[{i}] is a string, not a list of strings; wrap "
                "single references: [[ref] for ref in refs]")
        if len(refs) == 0:
            raise ValueError(
                f"hypothesis {i} has no reference; every hypothesis needs "
                "at least one reference string")
        for ref in refs:
            if not isinstance(ref, str):
                raise TypeError(
                    f"references[{i}] contains a {type(ref).__name__}; "
                    "references must be strings")
    num_streams = max(len(refs) for refs in references)
    return hypotheses, [
        [refs[j] if j < len(refs) else None for refs in references]
        for j in range(num_streams)]


def corpus_bleu(hypotheses, references, tokenize="none"):
    """Corpus BLEU by sacreBLEU against a varying number of references.

    Args:
        hypotheses: list of N predicted sentences (strings).
        references: list of N lists; ``references[i]`` holds one or more
            reference strings for ``hypotheses[i]``.
        tokenize: sacreBLEU tokenizer. The default ``'none'`` splits on
            spaces only, right for text that is already tokenized (note that
            ``'13a'`` splits ``<unk>`` into three tokens).

    Returns:
        sacreBLEU's ``BLEUScore``: ``score`` (0-100), ``precisions``,
        ``bp``, ``sys_len``, ``ref_len``; ``str()`` gives the usual line;
        ``signature``, sacreBLEU's signature of the settings (e.g.
        ``nrefs:var|case:mixed|eff:no|tok:none|smooth:exp|version:...``),
        to print next to the score.
    """
    hyps, streams = _ref_streams(hypotheses, references)
    # force=True only silences the "tokenized period" warning, which is
    # expected for pre-tokenized text; it does not change the score
    metric = sacrebleu.metrics.BLEU(tokenize=tokenize,
                                    force=tokenize == "none")
    score = metric.corpus_score(hyps, streams)
    score.signature = str(metric.get_signature())
    return score


def corpus_chrf(hypotheses, references):
    """Corpus chrF by sacreBLEU, with the same inputs as ``corpus_bleu``.

    Returns:
        sacreBLEU's ``CHRFScore``; ``score`` is in 0-100, ``signature``
        as for ``corpus_bleu``.
    """
    hyps, streams = _ref_streams(hypotheses, references)
    metric = sacrebleu.metrics.CHRF()
    score = metric.corpus_score(hyps, streams)
    score.signature = str(metric.get_signature())
    return score


def bleu_by_length(src_sentences, hypotheses, references, bins,
                   tokenize="none"):
    """Corpus BLEU per bucket of source length (in space-split tokens).

    Args:
        src_sentences: list of N source sentences.
        hypotheses, references: as for ``corpus_bleu``.
        bins: increasing bucket edges ``[b0, b1, ..., bm]``; bucket ``i``
            holds sources with ``b_i <= length < b_(i+1)``. End with
            ``math.inf`` to keep every long sentence.
        tokenize: sacreBLEU tokenizer, as for ``corpus_bleu``.

    Returns:
        A list of m ``LengthBucket(low, high, count, score)``; ``score`` is
        the corpus BLEU (0-100) of the bucket, NaN for an empty bucket.
    """
    bins, references = list(bins), list(references)
    src_sentences = list(src_sentences)
    if len(bins) < 2 or any(lo >= hi for lo, hi in zip(bins, bins[1:])):
        raise ValueError(
            f"bins must be at least two strictly increasing edges, got {bins}")
    if len(src_sentences) != len(hypotheses):
        raise ValueError(
            f"got {len(src_sentences)} source sentences but "
            f"{len(hypotheses)} hypotheses; they must match one to one")
    hyps, _ = _ref_streams(hypotheses, references)  # checks the inputs
    groups = [[] for _ in bins[1:]]
    for i, src in enumerate(src_sentences):
        length = len(src.split())
        for g, (lo, hi) in enumerate(zip(bins, bins[1:])):
            if lo <= length < hi:
                groups[g].append(i)
                break
        else:
            raise ValueError(
                f"source {i} has {length} tokens, outside bins {bins}; "
                "widen the bins (for example end them with math.inf)")
    buckets = []
    for (lo, hi), idx in zip(zip(bins, bins[1:]), groups):
        score = math.nan
        if idx:
            score = corpus_bleu([hyps[i] for i in idx],
                                [references[i] for i in idx],
                                tokenize=tokenize).score
        buckets.append(LengthBucket(lo, hi, len(idx), score))
    return buckets


def sentence_bleu(hypothesis, references):
    """sacreBLEU's sentence BLEU (0-100, tokenize='none', exponential
    smoothing, n-grams up to the hypothesis's length) of one
    hypothesis against all its references."""
    _ref_streams([hypothesis], [references])  # checks the inputs
    metric = sacrebleu.metrics.BLEU(tokenize="none", effective_order=True)
    return metric.sentence_score(hypothesis, list(references)).score


def sentence_stats(hypotheses, references):
    """Each sentence's BLEU sufficient statistics (tokenize='none').

    Corpus BLEU adds these up over the sentences: the matches and totals
    of 1- to 4-grams, the output length and the reference length.

    Returns:
        An (N, 10) integer tensor, one row per hypothesis.
    """
    _ref_streams(hypotheses, references)  # checks the inputs
    metric, rows = sacrebleu.metrics.BLEU(tokenize="none", force=True), []
    for hyp, refs in zip(hypotheses, references):
        s = metric.corpus_score([hyp], [[ref] for ref in refs])
        rows.append(s.counts + s.totals + [s.sys_len, s.ref_len])
    return torch.tensor(rows, dtype=torch.long)


def bleu_of_stats(stats):
    """Corpus BLEU (0-100) from summed ``sentence_stats`` (10 numbers)."""
    c = [int(x) for x in stats]
    return sacrebleu.metrics.BLEU.compute_bleu(
        c[:4], c[4:8], c[8], c[9], "exp").score


def paired_bootstrap(hyps_a, hyps_b, references, num_draws=1000, seed=0):
    """Corpus BLEU(a) - BLEU(b) and its 95 % paired bootstrap interval.

    The test set is redrawn ``num_draws`` times with replacement, the
    same redraws for both systems (Koehn, 2004); the interval holds the
    middle 95 % of the differences.

    Returns:
        ``(difference, low, high)`` in BLEU points.
    """
    check_int("num_draws", num_draws)
    if len(hyps_a) != len(hyps_b):
        raise ValueError(f"the two systems have {len(hyps_a)} and "
                         f"{len(hyps_b)} outputs; pass one per source each")
    a = sentence_stats(hyps_a, references)
    b = sentence_stats(hyps_b, references)
    generator = torch.Generator().manual_seed(seed)
    N, diffs = len(a), []
    for _ in range(num_draws):
        i = torch.randint(N, (N,), generator=generator)
        diffs.append(bleu_of_stats(a[i].sum(0)) - bleu_of_stats(b[i].sum(0)))
    low, high = torch.tensor(diffs, dtype=torch.float64).quantile(
        torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return (bleu_of_stats(a.sum(0)) - bleu_of_stats(b.sum(0)), low, high)
