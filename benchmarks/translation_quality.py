"""Held-out translation quality of the d2l book recipe and this chapter's.

Trains (a) ``BOOK_RECIPE``, d2l's Bahdanau setting, and (b)
``CHAPTER_RECIPE`` (additive attention, plus ``--attention multihead
none`` if asked), then translates held-out English sources greedily and
scores them with sacreBLEU against *all* their French translations in
the corpus.  Not a test: the numbers depend on the machine's speed only
through the printed times (training stops after a fixed number of
steps).  Run with ``make benchmark-quality`` (about 3 minutes per model
on 2 CPU cores) with ``D2LMINI_DATA_DIR`` pointing at ``fra-eng.zip``.
"""

import argparse
import dataclasses
import time

import torch

from d2lmini import cache, experiment
from d2lmini.experiment import BOOK_RECIPE, CHAPTER_RECIPE, evaluate

COLUMNS = ("recipe", "eval set", "n", "train s", "steps", "epochs",
           "val loss", "BLEU", "chrF", "BLEU 1-ref", "book BLEU")
EXPLAIN = """\
BLEU: sacreBLEU corpus BLEU (tokenize='none', <unk> kept in the output)
against all French translations of each English source in the corpus;
BLEU 1-ref: against the first translation only; chrF: multi-reference;
book BLEU: mean sentence bleu(k=2) of d2l against the first translation
(0-1, not comparable).  val loss: masked cross-entropy per target token
on the recipe's own val split (vocabularies differ, so compare with care).
The book's data has no test split: (a) is scored on its 128 val pairs
(unique sources; d2l's val pairs are the lines after its 512 training
pairs, and may share an English source with them) and on (b)'s held-out
test sources that are not in (a)'s training pairs, where many words are
<unk> to (a): its vocabulary comes from its 512 training pairs."""


def fit(name, recipe, use_cache):
    """Train (or load) one recipe and print what it cost."""
    print(f"\n== {name}: training ...", flush=True)
    if use_cache:
        run = cache.train_or_load(recipe, progress=False)
        model, data, history = run.model, run.data, run.history
        how = "trained" if run.trained else "loaded from the cache"
    else:
        model, data, history = experiment.train(recipe, progress=False)
        how = "trained"
    print(f"{how}: {data}\n{history.num_steps} steps, "
          f"{history.train_time:.1f} s of training, "
          f"{history.tokens_per_second:,.0f} target tokens/s", flush=True)
    return model, data, history


def row(name, result, history):
    return (name, result.split, len(result.sources),
            f"{history.train_time:.1f}", history.num_steps,
            f"{history.epochs:.2f}", f"{history.val_loss[-1]:.3f}",
            f"{result.bleu:.2f}", f"{result.chrf:.2f}",
            f"{result.bleu_single:.2f}", f"{result.book_bleu:.3f}")


def print_table(rows):
    widths = [max(len(str(r[i])) for r in (COLUMNS, *rows))
              for i in range(len(COLUMNS))]
    for r in (COLUMNS, *rows):
        print("  ".join(str(v).rjust(w) for v, w in zip(r, widths)))


def print_examples(result, data, count=6):
    print(f"\n{count} held-out examples of (b), the first of each source's "
          "references shown:")
    for src, hyp, refs in list(zip(result.sources, result.hypotheses,
                                   result.references))[:count]:
        print(f"  EN  {src}\n  ref {refs[0]}  ({len(refs)} refs)\n"
              f"  out {hyp}")


def book_on(book_data, sources):
    """(b)'s test sources that (a) did not train on, and (a)'s share of
    <unk> among their tokens."""
    unseen = [s for s in sources if "train" not in book_data.splits_of(s)]
    tokens = [t for s in unseen for t in s.split()]
    unk = sum(t not in book_data.src_vocab for t in tokens)
    return unseen, unk / max(len(tokens), 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attention", nargs="+", default=["additive"],
                        choices=experiment.ATTENTIONS,
                        help="attention kinds of the chapter recipe")
    parser.add_argument("--no-book", action="store_true",
                        help="skip the book recipe")
    parser.add_argument("--cache", action="store_true",
                        help="reuse (or fill) the checkpoint cache")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    start, rows = time.perf_counter(), []
    chapter = {}
    for kind in args.attention:
        recipe = CHAPTER_RECIPE.replace(attention=kind)
        name = f"(b) chapter, {kind}"
        model, data, history = fit(name, recipe, args.cache)
        result = evaluate(model, data, "test")
        val = evaluate(model, data, "val")
        print(f"val BLEU {val.bleu:.2f}; test: {result.details}; "
              f"decoding {result.decode_time:.1f} s")
        rows.append(row(name, result, history))
        chapter[kind] = result
        if len(chapter) == 1:
            print_examples(result, data)
    test_sources = next(iter(chapter.values())).sources if chapter else []
    if not args.no_book:
        model, data, history = fit("(a) book", BOOK_RECIPE, args.cache)
        result = evaluate(model, data, "val")
        rows.append(row("(a) book", result, history))
        unseen, unk = book_on(data, test_sources) if chapter else ([], 0)
        if unseen:
            result = evaluate(model, data, sources=unseen)
            print(f"(a) on (b)'s test sources: {len(unseen)} of "
                  f"{len(test_sources)} not in (a)'s training pairs; "
                  f"{unk:.0%} of their tokens are <unk> to (a)")
            rows.append(row("(a) book", result._replace(
                split="(b) test"), history))
    print("\nHeld-out translation quality (greedy decoding)\n")
    print_table(rows)
    print("\n" + EXPLAIN)
    print("\nCHAPTER_RECIPE (b), attention as in the rows:")
    for field in dataclasses.fields(CHAPTER_RECIPE):
        value = getattr(CHAPTER_RECIPE, field.name)
        book = getattr(BOOK_RECIPE, field.name)
        print(f"  {field.name:18} {value!s:8}  (book: {book})")
    print(f"\ntotal wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
