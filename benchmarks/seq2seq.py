"""Training speed of d2lmini's attention decoders against d2l 1.0.3.

Trains the book's Bahdanau setting (embedding and hidden size 256, two
GRU layers, dropout 0.2, batch 128, ``num_steps`` 9, Adam lr 0.005,
global-norm clipping at 1, 30 epochs) with d2lmini and with the d2l
package from PyPI, once with additive attention and once with 8-head
attention, on the same 512 training pairs, in the same run,
interleaved, and prints the speed-up of d2lmini.  Not a test: numbers
depend on the machine.  Run ``make benchmark-seq2seq`` (it installs
d2l with ``pip install --no-deps --target _build/bench-deps``).

What is measured: training time only (forward, backward, clipping and
the optimizer step of each batch; data loading, validation and
evaluation excluded) after a warm-up run, the median of ``--repeats``
runs.  Throughput counts the non-pad label tokens of the batches, the
same count on both sides.  d2l's loss also covers the padding, so
sequences per second are printed too.  d2l's animated loss plot is
switched off with its own switch (``board.display = False``), as is
d2lmini's progress bar (``progress=False``): both only draw.

d2l's wheel has no Bahdanau decoder class: ``book_decoder`` writes the
one of the book's PyTorch tab from d2l's own ``AdditiveAttention`` or
``MultiHeadAttention``.  d2l reads the local archive (``fra-eng.zip``
in ``$D2LMINI_DATA_DIR``) instead of downloading it: only its
``download`` is replaced; its ``extract`` and ``MTFraEng`` run as
published, in a temporary directory.
"""

import argparse
import hashlib
import importlib
import importlib.machinery
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from d2lmini import decoding, experiment
from d2lmini.corpus import FRA_SHA256, MEMBER, locate_archive, tokenize
from d2lmini.experiment import BOOK_RECIPE
from d2lmini.metrics import bleu
from d2lmini.tokenizer import APOSTROPHES
from d2lmini.trainer import Trainer

DEPS = Path(__file__).resolve().parents[1] / "_build" / "bench-deps"
HEADS = 8
# d2l's side is built from the same numbers as d2lmini's BOOK_RECIPE.
_R = BOOK_RECIPE
EMBED, HIDDEN, LAYERS, DROPOUT = (_R.embed_size, _R.num_hiddens,
                                  _R.num_layers, _R.dropout)
BATCH, NUM_STEPS, LR, CLIP = (_R.batch_size, _R.num_steps, _R.lr,
                              _R.gradient_clip_val)
DECODERS = ("Bahdanau", "multi-head")


class _StandIn(types.ModuleType):
    """An importable name whose every other attribute is an error."""

    def __init__(self, name):
        super().__init__(name)
        # torch._dynamo looks up the spec of pandas and others by name.
        self.__spec__ = importlib.machinery.ModuleSpec(name, None)

    def __getattr__(self, name):
        raise AttributeError(
            f"{self.__name__}.{name}: {self.__name__} is a stand-in of "
            "benchmarks/seq2seq.py (d2l needs it only for image and table "
            "data sets, which this benchmark does not load)")


def _refuse(*args, **kwargs):
    raise RuntimeError("scipy is a stand-in in benchmarks/seq2seq.py")


def import_d2l(path):
    """Import ``d2l.torch`` from ``path``, with stand-ins where needed.

    ``d2l/torch.py`` imports torchvision, pandas and scipy at the top
    but uses them only for image and table data sets.  PyPI's
    torchvision does not load with this project's torch, and pandas and
    scipy are not dependencies, so each one that fails to import is
    replaced by a module that raises on use.

    Returns:
        The module ``d2l.torch`` and the names that are stand-ins.
    """
    sys.path.insert(0, str(path))
    extras = {"torchvision": {"transforms": "torchvision.transforms"},
              "pandas": {}, "scipy": {"spatial": "scipy.spatial"}}
    stand_ins = []
    for name, submodules in extras.items():
        try:
            importlib.import_module(name)
            continue
        except Exception:  # a broken install counts as missing too
            stand_ins.append(name)
        for key in [k for k in sys.modules if k.split(".")[0] == name]:
            del sys.modules[key]
        sys.modules[name] = module = _StandIn(name)
        for attr, full in submodules.items():
            sys.modules[full] = sub = _StandIn(full)
            setattr(module, attr, sub)
    if "scipy" in stand_ins:
        sys.modules["scipy.spatial"].distance_matrix = _refuse
    try:
        from d2l import torch as d2l
    except ImportError as err:
        sys.exit(f"cannot import d2l ({err}); run `make benchmark-seq2seq` "
                 "or `.venv/bin/pip install --no-deps --target "
                 f"{path} d2l==1.0.3`")
    return d2l, stand_ins


def book_decoder(d2l):
    """The book's ``Seq2SeqAttentionDecoder`` (PyTorch tab) on ``d2l``.

    Copied from bahdanau-attention.md (comments dropped).  Added: the
    ``attention`` argument, for the multi-head variant
    ``d2l.MultiHeadAttention(num_hiddens, 8, dropout)``, and
    ``_weights``, since that class keeps its weights one level down.
    """

    class Seq2SeqAttentionDecoder(d2l.AttentionDecoder):
        def __init__(self, vocab_size, embed_size, num_hiddens, num_layers,
                     dropout=0, attention=None):
            super().__init__()
            self.attention = d2l.AdditiveAttention(num_hiddens, dropout) \
                if attention is None else attention
            self.embedding = nn.Embedding(vocab_size, embed_size)
            self.rnn = nn.GRU(
                embed_size + num_hiddens, num_hiddens, num_layers,
                dropout=dropout)
            self.dense = nn.LazyLinear(vocab_size)
            self.apply(d2l.init_seq2seq)

        def init_state(self, enc_outputs, enc_valid_lens):
            outputs, hidden_state = enc_outputs
            return (outputs.permute(1, 0, 2), hidden_state, enc_valid_lens)

        def forward(self, X, state):
            enc_outputs, hidden_state, enc_valid_lens = state
            X = self.embedding(X).permute(1, 0, 2)
            outputs, self._attention_weights = [], []
            for x in X:
                query = torch.unsqueeze(hidden_state[-1], dim=1)
                context = self.attention(
                    query, enc_outputs, enc_outputs, enc_valid_lens)
                x = torch.cat((context, torch.unsqueeze(x, dim=1)), dim=-1)
                out, hidden_state = self.rnn(x.permute(1, 0, 2),
                                             hidden_state)
                outputs.append(out)
                self._attention_weights.append(self._weights())
            outputs = self.dense(torch.cat(outputs, dim=0))
            return outputs.permute(1, 0, 2), [enc_outputs, hidden_state,
                                              enc_valid_lens]

        def _weights(self):
            if isinstance(self.attention, d2l.MultiHeadAttention):
                return self.attention.attention.attention_weights
            return self.attention.attention_weights

        @property
        def attention_weights(self):
            return self._attention_weights

    return Seq2SeqAttentionDecoder


def timed_trainer(d2l):
    """d2l's ``Trainer``, run as published, with a clock per step.

    The clock starts after a training batch is fetched (in
    ``prepare_batch``) and stops after the optimizer step (a step hook),
    as d2lmini's ``Trainer`` measures ``train_time``.
    """

    class TimedTrainer(d2l.Trainer):
        def fit(self, model, data):
            self.train_time, self.num_tokens, self.num_seqs = 0.0, 0, 0
            self._hooked = None
            super().fit(model, data)

        def fit_epoch(self):
            if self._hooked is not self.optim:
                self.optim.register_step_post_hook(self._stop_clock)
                self._hooked = self.optim
            super().fit_epoch()

        def prepare_batch(self, batch):
            batch = super().prepare_batch(batch)
            if self.model.training:
                label = batch[-1]
                self.num_tokens += int((label != self.model.tgt_pad).sum())
                self.num_seqs += len(label)
                self._start = time.perf_counter()
            return batch

        def _stop_clock(self, optimizer, args, kwargs):
            self.train_time += time.perf_counter() - self._start

    return TimedTrainer


def d2l_data(d2l, archive, workdir):
    """d2l's ``MTFraEng(batch_size=128)`` read from the local archive."""

    class LocalMTFraEng(d2l.MTFraEng):
        def _download(self):
            self.root = str(workdir)  # d2l's default is '../data'
            return super()._download()

    link = Path(workdir) / "fra-eng.zip"
    link.symlink_to(Path(archive).resolve())

    def download(url, folder="../data", sha1_hash=None):
        if not url.endswith("/fra-eng.zip"):
            raise RuntimeError(f"the benchmark serves only fra-eng.zip, "
                               f"not {url}")
        return str(link)  # d2l.extract unpacks it next to the link

    published, d2l.download = d2l.download, download
    try:
        data = LocalMTFraEng(batch_size=BATCH, num_steps=NUM_STEPS)
    finally:
        d2l.download = published
    text = (Path(workdir) / MEMBER).read_bytes()
    if hashlib.sha256(text).hexdigest() != FRA_SHA256:
        raise ValueError(f"{MEMBER} extracted by d2l is not the corpus "
                         "d2lmini expects (SHA-256 mismatch)")
    head = "\n".join(text.decode("utf-8").split("\n", 700)[:700])
    return data, data._tokenize(data._preprocess(head), 640)


class Run(NamedTuple):
    """One training run: the model, its time and counts, its own loss."""

    model: nn.Module
    data: object
    seconds: float
    tokens: int
    seqs: int
    loss: float


def train_d2l(d2l, data, decoder, epochs, seed):
    """Train the book's model with d2l's classes; returns a ``Run``."""
    torch.manual_seed(seed)
    encoder = d2l.Seq2SeqEncoder(len(data.src_vocab), EMBED, HIDDEN,
                                 LAYERS, DROPOUT)
    attention = None if decoder == "Bahdanau" else \
        d2l.MultiHeadAttention(HIDDEN, HEADS, DROPOUT)
    dec = book_decoder(d2l)(len(data.tgt_vocab), EMBED, HIDDEN, LAYERS,
                            DROPOUT, attention=attention)
    model = d2l.Seq2Seq(encoder, dec, tgt_pad=data.tgt_vocab["<pad>"],
                        lr=LR)
    model.board.display = False  # record the loss points, draw nothing
    trainer = timed_trainer(d2l)(max_epochs=epochs, gradient_clip_val=CLIP)
    trainer.fit(model, data)
    # The board averages every half epoch: the last two points.
    last = model.board.data["train_loss"][-model.plot_train_per_epoch:]
    return Run(model, data, trainer.train_time, trainer.num_tokens,
               trainer.num_seqs, statistics.mean(p.y for p in last))


def train_mini(decoder, epochs, seed):
    """Train d2lmini's model on its own ``MTFraEng``; returns a ``Run``."""
    recipe = BOOK_RECIPE.replace(
        attention="additive" if decoder == "Bahdanau" else "multihead",
        num_heads=HEADS, max_epochs=epochs, seed=seed)
    data = experiment.build_data(recipe)
    model = experiment.build_model(recipe, data)  # seeded with `seed`
    trainer = Trainer(max_epochs=epochs, gradient_clip_val=CLIP,
                      device="cpu", progress=False, seed=seed)
    hist = trainer.fit(model, data)
    seqs = round(len(data.train_pairs) * hist.epochs)
    return Run(model, data, hist.train_time, hist.num_tokens, seqs,
               hist.train_loss[-1])


def masked_ce(model, batch, pad):
    """Eval-mode cross-entropy over the non-pad labels of ``batch``."""
    src, tgt_input, src_valid_len, label = batch
    model.eval()
    with torch.no_grad():
        logits = model(src, tgt_input, src_valid_len)  # (B, T, V)
    mask = label != pad  # (B, T)
    return F.cross_entropy(logits[mask], label[mask]).item()


def evaluate(impl, run, train_pairs, val_pairs):
    """Masked train CE and mean val ``bleu(k=2)``, decoding 9 steps."""
    data, model = run.data, run.model
    engs, fras = zip(*train_pairs)
    vals, refs = zip(*val_pairs)
    if impl == "d2l":
        pad, eos = data.tgt_vocab["<pad>"], "<eos>"
        ce = masked_ce(model, data.build(engs, fras), pad)
        with torch.no_grad():
            ids, _ = model.predict_step(data.build(vals, refs), "cpu",
                                        data.num_steps)
        hyps = []
        for row in ids.tolist():
            tokens = data.tgt_vocab.to_tokens(row)
            hyps.append(tokens[:tokens.index(eos)] if eos in tokens
                        else tokens)
        hyps = [" ".join(tokens) for tokens in hyps]
    else:
        ce = masked_ce(model, data.build(engs, fras), data.tgt_vocab.pad)
        hyps = [t.text for t in decoding.translate(model, data,
                                                   list(vals))]
    return ce, statistics.mean(bleu(h, r, k=2) for h, r in zip(hyps, refs))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2,
                        help="timed runs of each model (median reported)")
    parser.add_argument("--quick", action="store_true",
                        help="2 epochs, 1 run: check that the script runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int,
                        help="torch threads (default: torch's own)")
    parser.add_argument("--d2l-path", default=str(DEPS),
                        help="folder holding the d2l 1.0.3 package")
    args = parser.parse_args()
    epochs, repeats = (2, 1) if args.quick else (args.epochs, args.repeats)
    if args.threads:
        torch.set_num_threads(args.threads)
    d2l, stand_ins = import_d2l(args.d2l_path)
    mini = experiment.build_data(BOOK_RECIPE)
    with tempfile.TemporaryDirectory() as workdir:
        book, book_pairs = d2l_data(d2l, locate_archive(), workdir)
    n, unlike = len(mini.train_pairs), 0
    # d2lmini reads a typographic apostrophe (J’ai) as the ASCII one.
    ascii_quote = str.maketrans(dict.fromkeys(APOSTROPHES, "'"))
    for side, theirs in enumerate(book_pairs):
        ours = [tokenize(pair[side]) + ["<eos>"] for pair in mini.train_pairs]
        theirs = [[t.translate(ascii_quote) for t in s] for s in theirs[:n]]
        # d2l splits on ' ' only: a thin space (U+2009) stays in a token.
        if [[t.strip() for t in s] for s in theirs] != ours:
            raise RuntimeError("d2l's and d2lmini's training pairs differ")
        unlike += sum(a != b for a, b in zip(theirs, ours))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"d2l {sys.modules['d2l'].__version__} (stand-ins: "
          f"{', '.join(stand_ins) or 'none'}); {len(mini.train_pairs)} "
          f"training pairs, vocab src/tgt d2l {len(book.src_vocab)}/"
          f"{len(book.tgt_vocab)}, d2lmini {len(mini.src_vocab)}/"
          f"{len(mini.tgt_vocab)} ({unlike} pairs keep a U+2009 in a d2l "
          f"token); {epochs} epochs, median of {repeats} interleaved runs "
          "after a 1-epoch warm-up")
    jobs = [(impl, dec) for dec in DECODERS for impl in ("d2l", "d2lmini")]

    def train(impl, dec, n):
        return train_d2l(d2l, book, dec, n, args.seed) if impl == "d2l" \
            else train_mini(dec, n, args.seed)

    for impl, dec in jobs:  # warm-up, not timed
        train(impl, dec, 1)
    runs = {job: [] for job in jobs}
    for _ in range(repeats):
        for job in jobs:
            runs[job].append(train(*job, epochs))
    report(runs, book, mini)


def report(runs, book, mini):
    """Print the table and the notes needed to read it."""
    print(f"{'implementation':14} {'decoder':10} {'train s':>8} "
          f"{'tok/s':>8} {'seq/s':>7} {'own loss':>8} {'train CE':>8} "
          f"{'val BLEU':>8} {'speed-up':>8}")
    for impl, dec in runs:
        seconds = statistics.median(r.seconds for r in runs[impl, dec])
        base = statistics.median(r.seconds for r in runs["d2l", dec])
        last = runs[impl, dec][-1]
        ce, score = evaluate(impl, last, mini.train_pairs, mini.val_pairs)
        print(f"{impl:14} {dec:10} {seconds:8.2f} "
              f"{last.tokens / seconds:8.0f} "
              f"{last.seqs / seconds:7.0f} {last.loss:8.4f} "
              f"{ce:8.4f} {score:8.3f} {base / seconds:7.2f}x")
    print("train s of every run: " + "; ".join(
        f"{impl} {dec} " + ", ".join(f"{r.seconds:.2f}" for r in rs)
        for (impl, dec), rs in runs.items()))
    tokens = {impl: rs[-1].tokens for (impl, _), rs in runs.items()}
    print(f"target tokens per run: d2l {tokens['d2l']}, d2lmini "
          f"{tokens['d2lmini']}.  own loss: the last epoch's, d2l's over "
          "every label position (pads too), d2lmini's over non-pad labels;"
          " train CE: eval-mode cross-entropy over the non-pad labels of "
          f"the {len(mini.train_pairs)} training pairs.")
    refs = [tokenize(f) for _, f in mini.val_pairs]
    count = sum(map(len, refs))
    oov = {name: sum(t not in known for r in refs for t in r) / count
           for name, known in (("d2l", book.tgt_vocab.token_to_idx),
                               ("d2lmini", mini.tgt_vocab))}
    print(f"val BLEU: mean bleu(k=2) over the {len(refs)} val pairs, "
          f"greedy, {NUM_STEPS} steps.  Val reference tokens outside the "
          f"target vocab: d2l {oov['d2l']:.1%}, d2lmini "
          f"{oov['d2lmini']:.1%} (d2l builds its vocab on train + val, "
          "d2lmini on train only), which caps d2lmini's BLEU lower.")


if __name__ == "__main__":
    main()
