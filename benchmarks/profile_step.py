"""Where a training step's time goes, part by part: d2lmini's and d2l's.

Usage::

    python benchmarks/profile_step.py [--steps 20] [--repeats 3]
        [--kinds KIND ...] [--ops N] [--out FILE]

Times training steps (forward, backward, gradient clipping, Adam step)
of the chapter's additive, 8-head (query-key normalised, as the chapter
trains it) and Transformer models on the chapter's batches, and of the
book's Bahdanau setting (``BOOK_RECIPE``, additive and 8 heads) with
d2lmini and with d2l 1.0.3 (``make benchmark-profile`` installs it in
``_build/bench-deps``, as ``make benchmark-seq2seq`` does; without it
the d2l kinds are skipped, and said so).   Each step is split into parts
by a clock around the modules that do the work: embedding, encoder GRU,
attention (with its key projection), decoder GRU cell, the
Transformer's position-wise networks and add & norm, output layer,
loss, the rest of the forward pass (``forward, other``: packing,
concatenation, Python), backward, clipping and the optimizer.  A part's
time excludes the parts called inside it, so the parts add up to the
step.  The kinds take turns, ``--repeats`` rounds of ``--steps`` steps
after 3 warm-up steps; the table gives milliseconds per step and each
part's share.

The encoder GRU is the encoder's forward less its embedding (packing
included); the decoder GRU cell is one step of every layer (d2l's
``nn.GRU`` call on one step, d2lmini's ``torch.gru_cell`` per layer).
The clock's own cost is a few microseconds a call (the decoder calls
it about 3 times a target step); d2l's step leaves out its loss board
(``self.plot``), which only records points.  ``--ops N`` adds, for each
kind, PyTorch's profiler table of the N operators with the most time of
their own.

The floor: a step cannot be faster than its matrix products run at the
best rate this machine's BLAS reaches.  For each kind, one more round of
``--steps`` steps runs under PyTorch's profiler, which counts the
floating-point operations of every ``mm``, ``addmm``, ``bmm`` and
``baddbmm`` and times them; the best rate is the fastest of a few large
products (``peak_gflops``) measured in the same process.  The table gives
per step the products' GFLOP, the profiled step's time, the products'
time in it, their share and rate, and the floor (GFLOP over the best
rate); for d2l's kinds, the speed-up over d2l that d2lmini's floor would
allow.  Writes ``benchmarks/results/profile.json``.
"""

import argparse
import contextlib
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F

from d2lmini.corpus import locate_archive
from d2lmini.experiment import (
    BOOK_RECIPE,
    CHAPTER_RECIPE,
    TRANSFORMER_RECIPE,
    build_data,
    build_model,
)
from d2lmini.multihead import MultiHeadAttention
from d2lmini.notebook import machine
from d2lmini.transformer import AddNorm, PositionalEncoding, PositionWiseFFN

sys.path.insert(0, str(Path(__file__).resolve().parent))
import seq2seq as bench  # noqa: E402  (benchmarks/seq2seq.py)

RESULTS = Path(__file__).resolve().parent / "results" / "profile.json"
WARMUP = 3
HEADS = 8
MINI = {
    "chapter additive": CHAPTER_RECIPE,
    "chapter 8 heads": CHAPTER_RECIPE.replace(
        attention="multihead", num_heads=HEADS, qk_norm=True),
    "chapter transformer": TRANSFORMER_RECIPE,
    "book additive": BOOK_RECIPE,
    "book 8 heads": BOOK_RECIPE.replace(attention="multihead",
                                        num_heads=HEADS),
}
D2L = {"book additive, d2l": "Bahdanau", "book 8 heads, d2l": "multi-head"}
PARTS = ("embedding", "encoder GRU", "attention", "decoder GRU cell",
         "position-wise FFN", "add & norm", "output layer", "loss",
         "forward, other", "backward", "clipping", "optimizer")


class Clock:
    """Wall-clock seconds per part; a part excludes the parts inside it."""

    def __init__(self):
        self.seconds = defaultdict(float)
        self._stack, self._since = [], 0.0

    @contextlib.contextmanager
    def part(self, name):
        now = time.perf_counter()
        if self._stack:  # the enclosing part pauses
            self.seconds[self._stack[-1]] += now - self._since
        self._stack.append(name)
        self._since = now
        try:
            yield
        finally:
            now = time.perf_counter()
            self.seconds[self._stack.pop()] += now - self._since
            self._since = now  # the enclosing part resumes


class Meter:
    """Puts timers on a model's parts once; they feed ``self.clock``,
    which each round of steps replaces with a fresh ``Clock``."""

    def __init__(self):
        self.clock = Clock()

    def part(self, name):
        return self.clock.part(name)

    def wrap(self, obj, attr, name):
        """Time every call of ``obj.attr`` (an instance attribute
        shadows the method; a module's ``forward`` is what it calls)."""
        inner = getattr(obj, attr)

        def timed(*args, **kwargs):
            with self.clock.part(name):
                return inner(*args, **kwargs)

        setattr(obj, attr, timed)

    @contextlib.contextmanager
    def timed_loss(self):
        """``F.cross_entropy`` timed as the part ``loss`` (both
        packages call it through ``torch.nn.functional``)."""
        inner = F.cross_entropy
        self.wrap(F, "cross_entropy", "loss")
        try:
            yield
        finally:
            F.cross_entropy = inner


def _is_attention(module):
    return isinstance(module, MultiHeadAttention) or type(
        module).__name__ in ("AdditiveAttention", "MultiHeadAttention")


def instrument(model, meter):
    """Put the meter's timers on the parts of a d2lmini or d2l model."""
    kinds = ((torch.nn.Embedding, "embedding"),
             (PositionalEncoding, "embedding"),
             (PositionWiseFFN, "position-wise FFN"), (AddNorm, "add & norm"))
    inner = set()  # the attention inside a multi-head layer is its part
    for module in model.modules():
        if _is_attention(module):
            inner.update(id(m) for m in module.modules() if m is not module)
    for module in model.modules():
        for cls, name in kinds:
            if isinstance(module, cls):
                meter.wrap(module, "forward", name)
        if _is_attention(module) and id(module) not in inner:
            meter.wrap(module, "forward", "attention")
            if hasattr(module, "precompute"):  # the keys' projection
                meter.wrap(module, "precompute", "attention")
    enc, dec = model.encoder, model.decoder
    if hasattr(enc, "rnn"):  # all of the encoder but its embedding
        meter.wrap(enc, "forward", "encoder GRU")
    if hasattr(dec, "_step"):  # d2lmini: torch.gru_cell per layer
        meter.wrap(dec, "_step", "decoder GRU cell")
    elif hasattr(dec, "rnn"):  # d2l: nn.GRU called once per step
        meter.wrap(dec.rnn, "forward", "decoder GRU cell")
    meter.wrap(dec.dense, "forward", "output layer")


def mini_kind(recipe):
    """A d2lmini model, its batches, its optimizer and its step."""
    data = build_data(recipe)
    model = build_model(recipe, data)

    def step(batch, optimizer, meter):
        with meter.part("forward, other"):
            loss, _ = model.training_step(batch)
        with meter.part("backward"):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with meter.part("clipping"):
            torch.nn.utils.clip_grad_norm_(model.parameters(),
                                           recipe.gradient_clip_val)
        with meter.part("optimizer"):
            optimizer.step()

    return model, data.train_dataloader(), model.configure_optimizers(), step


def d2l_kind(d2l, book, decoder):
    """d2l's model of the book's setting (as ``benchmarks/seq2seq.py``
    builds it), its batches, its optimizer and its step (as
    ``d2l.Trainer.fit_epoch`` runs it, less the loss board)."""
    torch.manual_seed(0)
    encoder = d2l.Seq2SeqEncoder(len(book.src_vocab), bench.EMBED,
                                 bench.HIDDEN, bench.LAYERS, bench.DROPOUT)
    attention = None if decoder == "Bahdanau" else \
        d2l.MultiHeadAttention(bench.HIDDEN, HEADS, bench.DROPOUT)
    dec = bench.book_decoder(d2l)(len(book.tgt_vocab), bench.EMBED,
                                  bench.HIDDEN, bench.LAYERS, bench.DROPOUT,
                                  attention=attention)
    model = d2l.Seq2Seq(encoder, dec, tgt_pad=book.tgt_vocab["<pad>"],
                        lr=bench.LR)
    batches = book.get_dataloader(train=True)
    with torch.no_grad():  # LazyLinear takes its size from a first call
        model(*next(iter(batches))[:-1])

    def step(batch, optimizer, meter):
        with meter.part("forward, other"):
            loss = model.loss(model(*batch[:-1]), batch[-1])
        with meter.part("backward"):
            optimizer.zero_grad()
            loss.backward()
        with meter.part("clipping"):
            d2l.Trainer.clip_gradients(None, bench.CLIP, model)
        with meter.part("optimizer"):
            optimizer.step()

    return model, batches, model.configure_optimizers(), step


def run(kind, n, meter, profiler=None):
    """``n`` training steps of ``kind`` after the warm-up ones; returns
    the clock of the timed steps (profiled too, if a profiler is given)."""
    model, loader, optimizer, step = kind
    model.train()
    batches = list(itertools.islice(itertools.cycle(loader), WARMUP + n))
    meter.clock = Clock()
    for batch in batches[:WARMUP]:
        step(batch, optimizer, meter)
    meter.clock = Clock()
    with profiler or contextlib.nullcontext():
        for batch in batches[WARMUP:]:
            step(batch, optimizer, meter)
    return meter.clock


MATMULS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def peak_gflops(rounds=5):
    """The best rate of a few large float32 products, GFLOP/s."""
    best = 0.0
    for m, k, n in ((1024, 1024, 1024), (1152, 256, 4096),
                    (4096, 256, 1152)):
        a, b = torch.randn(m, k), torch.randn(k, n)
        a @ b  # warm-up
        for _ in range(rounds):
            start = time.perf_counter()
            a @ b
            best = max(best, 2 * m * k * n / (time.perf_counter() - start))
    return best / 1e9


def matmul_work(kind, steps, meter):
    """GFLOP and milliseconds of the matrix products of one step, and
    the milliseconds of the whole step, all under the profiler (whose
    bookkeeping slows a step of many small operators the most)."""
    profiler = torch.profiler.profile(with_flops=True)
    clock = run(kind, steps, meter, profiler)
    step_ms = sum(clock.seconds.values()) * 1000 / steps
    events = [e for e in profiler.key_averages() if e.key in MATMULS]
    gflop = sum(e.flops for e in events) / 1e9 / steps
    ms = sum(e.self_cpu_time_total for e in events) / 1000 / steps
    return gflop, ms, step_ms


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kinds", nargs="+",
                        choices=list(MINI) + list(D2L))
    parser.add_argument("--ops", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--d2l-path", default=str(bench.DEPS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    names = args.kinds or list(MINI) + list(D2L)
    kinds = {name: mini_kind(MINI[name]) for name in names if name in MINI}
    wanted = [name for name in names if name in D2L]
    if wanted and not (Path(args.d2l_path) / "d2l").is_dir():
        print(f"d2l is not in {args.d2l_path}: its kinds are skipped "
              "(`make benchmark-profile` installs it)")
    elif wanted:
        d2l, _ = bench.import_d2l(args.d2l_path)
        with tempfile.TemporaryDirectory() as workdir:
            book, _ = bench.d2l_data(d2l, locate_archive(), workdir)
        for name in wanted:
            kinds[name] = d2l_kind(d2l, book, D2L[name])
    meter = Meter()
    for kind in kinds.values():
        instrument(kind[0], meter)
    clocks = {name: [] for name in kinds}
    with meter.timed_loss():
        for _ in range(args.repeats):
            for name, kind in kinds.items():
                clocks[name].append(run(kind, args.steps, meter).seconds)
        result = report(clocks, args.steps)
        peak = peak_gflops()
        work = {name: matmul_work(kind, args.steps, meter)
                for name, kind in kinds.items()}
        floors = report_floor(result, work, peak)
        for name, kind in kinds.items() if args.ops else ():
            profiler = torch.profiler.profile()
            run(kind, args.steps, meter, profiler)
            print(f"\n{name}: the {args.ops} operators with the most "
                  f"time of their own, {args.steps} steps")
            print(profiler.key_averages().table(
                sort_by="self_cpu_time_total", row_limit=args.ops))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "script": "benchmarks/profile_step.py", **machine(),
        "steps": args.steps, "repeats": args.repeats,
        "ms_per_step": result, "peak_gflops": round(peak, 1),
        "matmuls_per_step": floors}, indent=1) + "\n")
    print(f"written to {args.out}")


def report(clocks, steps):
    """Print each kind's parts, ms per step and share; return them."""
    result = {}
    for name, rounds in clocks.items():
        parts = {p: statistics.median(r.get(p, 0.0) for r in rounds)
                 * 1000 / steps for p in PARTS}
        total = statistics.median(sum(r.values()) for r in rounds) \
            * 1000 / steps
        result[name] = {"total": round(total, 2),
                        **{p: round(ms, 2) for p, ms in parts.items()
                           if ms > 0}}
        print(f"\n{name}: {total:.1f} ms a step (median of "
              f"{len(rounds)} rounds of {steps} steps)")
        for p, ms in parts.items():
            if ms > 0:
                print(f"  {p:20} {ms:8.2f} ms {ms / total:6.1%}")
    return result


def report_floor(result, work, peak):
    """Print each kind's matrix products and floor; return them."""
    print(f"\nMatrix products per step; best rate of this machine "
          f"{peak:.0f} GFLOP/s (large float32 products, 2 threads):")
    print("(profiled: one more round under PyTorch's profiler, whose "
          "bookkeeping slows\nevery operator; mm: the products' own time "
          "in it, and their share)")
    print(f"{'kind':20} {'step ms':>8} {'GFLOP':>6} {'profiled':>8} "
          f"{'mm ms':>6} {'share':>6} {'GFLOP/s':>7} {'floor ms':>8}")
    floors = {}
    for name, (gflop, ms, profiled) in work.items():
        step = result[name]["total"]
        floors[name] = {"gflop": round(gflop, 3), "ms": round(ms, 2),
                        "profiled_step_ms": round(profiled, 2),
                        "floor_ms": round(1000 * gflop / peak, 2)}
        print(f"{name:20} {step:8.1f} {gflop:6.2f} {profiled:8.1f} "
              f"{ms:6.1f} {ms / profiled:6.1%} "
              f"{1000 * gflop / ms if ms else 0:7.0f} "
              f"{1000 * gflop / peak:8.1f}")
    for name in D2L:
        mine = name.removesuffix(", d2l")
        if name in floors and mine in floors:
            ratio = result[name]["total"] / floors[mine]["floor_ms"]
            floors[name]["d2lmini_floor_speedup"] = round(ratio, 2)
            print(f"{mine}: d2l's step over d2lmini's floor = "
                  f"{result[name]['total']:.1f} / "
                  f"{floors[mine]['floor_ms']:.1f} = {ratio:.2f} x, the "
                  "most a faster d2lmini could reach")
    return floors


if __name__ == "__main__":
    main()
