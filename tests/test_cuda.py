"""The trainer, the language model and decoding on a CUDA GPU.

Skipped where there is no CUDA device (every machine the chapter's CI
runs on); ``benchmarks/gpu.py`` runs them on a GPU machine.
"""

import warnings

import pytest
import torch

from d2lmini import seq2seq, transformer
from d2lmini.beam import beam_decode
from d2lmini.decoding import greedy_decode
from d2lmini.lm import SentenceBatches
from d2lmini.pretraining import LanguageModel
from d2lmini.trainer import Trainer
from d2lmini.utils import set_seed

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs CUDA")

SENTENCES = [[3 + (i * 7 + j) % 10 for j in range(1 + i % 9)]
             for i in range(64)]


def tiny_lm():
    set_seed(0)
    return LanguageModel(13, 16, 32, 2, 2, max_len=16, lr=0.01)


def batches():
    return SentenceBatches(SENTENCES, 16, torch.Generator().manual_seed(0),
                           bos=1, eos=2, pad=0)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_lm_trains_on_cuda_like_the_cpu(precision):
    cpu = Trainer(None, 1.0, "cpu", max_steps=8, progress=False)
    gpu = Trainer(None, 1.0, "cuda", max_steps=8, progress=False,
                  precision=precision)
    h_cpu, h_gpu = cpu.fit(tiny_lm(), batches()), gpu.fit(tiny_lm(),
                                                          batches())
    assert h_gpu.num_tokens == h_cpu.num_tokens
    rel = 1e-3 if precision == "fp32" else 5e-2
    assert [v for _, v in h_gpu.steps] == pytest.approx(
        [v for _, v in h_cpu.steps], rel=rel)


def test_the_lm_step_reads_nothing_back_from_the_gpu():
    model = tiny_lm()
    Trainer(None, 1.0, "cuda", max_steps=2, progress=False).fit(
        model, batches())  # warm up: allocations, kernels
    trainer = Trainer(None, 1.0, "cuda", max_steps=6, progress=False,
                      sync_every=10)
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer.fit(model, batches())
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    # The run's one read: its losses, once, after the last step (and
    # the model's input check of its ids, once per step).
    assert len(syncs) <= 1 + 6, [str(w.message) for w in syncs]


def test_greedy_and_beam_decode_on_cuda_as_on_the_cpu():
    set_seed(0)
    args = (16, 32, 2, 2, 0.0)
    model = seq2seq.Seq2Seq(transformer.TransformerEncoder(12, *args),
                            transformer.TransformerDecoder(12, *args), 0)
    model.eval()
    src = torch.randint(3, 12, (5, 7))
    lens = torch.tensor([7, 6, 5, 3, 1])
    out = {}
    for device in ("cpu", "cuda"):
        model.to(device)
        out[device] = (greedy_decode(model, src, lens, 1, 2, 8),
                       beam_decode(model, src, lens, 1, 2, 8, beam_size=3))
    for cpu, gpu in zip(*out.values()):  # greedy, then beam
        assert [d.ids for d in cpu] == [d.ids for d in gpu]
