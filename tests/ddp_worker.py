"""A training job for ``tests/test_distributed.py``: run under
``torchrun`` (N processes) or as a plain script (one process).

    python tests/ddp_worker.py MODEL OUT [--steps K] [--naive]
        [--fail-rank R] [--save PATH]

MODEL is ``lm`` (a tiny ``LanguageModel`` on made-up sentences of
unequal lengths), ``lm-one-row`` (the same, each epoch ending with a
batch of one sentence) or ``transformer`` (a tiny Transformer translator on a
made-up corpus, through ``MTFraEng``'s bucketed batches).  Both draw
the same global batches from seed 0 in every process; dropout is 0, so
N processes must end where one does.  Rank 0 writes OUT: the final
parameters and the step losses.

``--naive`` makes every process report one token (so each process's
mean counts the same, whatever its number of tokens: the per-process
mean that the trainer must not compute).  ``--fail-rank R`` makes
process R raise at step 2.  ``--save PATH`` ends with
``d2lmini.cache.save_once`` to PATH and records in OUT which processes
wrote it.
"""

import argparse
import os
import random

import torch

from d2lmini import cache, distributed, seq2seq, transformer
from d2lmini.data import MTFraEng
from d2lmini.lm import SentenceBatches
from d2lmini.pretraining import LanguageModel
from d2lmini.trainer import Trainer
from d2lmini.utils import set_seed

WORDS = ["le", "chat", "dort", "sur", "un", "tapis", "rouge", "et", "il",
         "rêve", "de", "poissons", "bleus", "."]


def lm_job():
    rng = random.Random(0)
    # 1 to 12 words: shares of a batch hold unequal numbers of tokens.
    sentences = [[rng.randrange(3, 3 + len(WORDS))
                  for _ in range(rng.randint(1, 12))] for _ in range(96)]
    set_seed(0)
    model = LanguageModel(3 + len(WORDS), 16, 32, 2, 2, dropout=0.0,
                          max_len=16, lr=0.01)
    data = SentenceBatches(sentences, 16, torch.Generator().manual_seed(0),
                           bos=1, eos=2, pad=0)
    return model, data, {"schedule": "cosine-after-warmup",
                         "warmup_steps": 2}


class WithOneRowLast:
    """The language model's batches, then a batch of one sentence: a
    share of two processes is then empty (the trainer runs that process
    on the batch's first row with weight zero)."""

    def __init__(self, batches):
        self.batches = batches

    def __len__(self):
        return len(self.batches) + 1

    def __iter__(self):
        last = None
        for X, lens in self.batches:
            last = (X[:1], lens[:1])
            yield X, lens
        yield last

    def train_dataloader(self):
        return self


def lm_one_row_job():
    model, data, options = lm_job()
    return model, WithOneRowLast(data), options


def transformer_job():
    rng = random.Random(0)
    pairs = []
    for i in range(80):
        n = rng.randint(1, 7)
        eng = " ".join(rng.choice(["a", "b", "c", "d", "e"])
                       for _ in range(n)) + f" w{i % 9} ."
        fra = " ".join(rng.choice(["x", "y", "z"])
                       for _ in range(rng.randint(1, 8))) + " ."
        pairs.append((eng, fra))
    data = MTFraEng(12, 12, None, 0, pairs=pairs, min_freq=1, seed=0,
                    bucket=True)
    set_seed(0)
    args = (32, 64, 4, 2, 0.0)
    model = seq2seq.Seq2Seq(
        transformer.TransformerEncoder(len(data.src_vocab), *args),
        transformer.TransformerDecoder(len(data.tgt_vocab), *args),
        data.tgt_vocab.pad, lr=0.005)
    return model, data, {"warmup_steps": 2}


class Naive:
    """Every process reports one token: per-process means, averaged."""

    def __init__(self, model):
        step = model.training_step
        model.training_step = lambda batch: (step(batch)[0], 1)


class FailAt:
    def __init__(self, model, step):
        inner, calls = model.training_step, [0]

        def training_step(batch):
            calls[0] += 1
            if calls[0] == step:
                raise RuntimeError(f"planned failure of process "
                                   f"{distributed.world()[0]} at step "
                                   f"{step}")
            return inner(batch)
        model.training_step = training_step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=["lm", "lm-one-row",
                                          "transformer"])
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--naive", action="store_true")
    parser.add_argument("--fail-rank", type=int, default=None)
    parser.add_argument("--save", default=None)
    args = parser.parse_args()
    distributed.init("cpu")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    model, data, options = {"lm": lm_job, "lm-one-row": lm_one_row_job,
                             "transformer": transformer_job}[args.model]()
    if args.naive:
        Naive(model)
    if args.fail_rank == distributed.world()[0]:
        FailAt(model, 2)
    trainer = Trainer(None, 1.0, "cpu", max_steps=args.steps,
                      progress=False, **options)
    history = trainer.fit(model, data)
    wrote = None
    if args.save:
        wrote = cache.save_once(model, args.save, note="test")
        flags = torch.tensor([float(wrote)] * 1)
        gathered = [torch.zeros(1) for _ in range(distributed.world()[1])]
        if distributed.world()[1] > 1:
            torch.distributed.all_gather(gathered, flags)
        else:
            gathered = [flags]
        wrote = [bool(g.item()) for g in gathered]
    if distributed.is_main():
        torch.save({"params": {k: v.detach().clone()
                               for k, v in model.state_dict().items()},
                    "losses": [loss for _, loss in history.steps],
                    "tokens": history.num_tokens, "wrote": wrote,
                    "world": distributed.world()[1]}, args.out)
    distributed.barrier()
    if distributed.world()[1] > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
