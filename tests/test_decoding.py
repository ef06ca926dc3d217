"""Tests of d2lmini.decoding: greedy decoding and ``translate``.

Models are built with the helpers of ``test_seq2seq.py``.
"""

import pytest
import torch
from test_seq2seq import (
    BOS,
    EOS,
    PAD,
    CountingMask,
    V,
    make_model,
    per_step_copy,
)

from d2lmini.decoding import greedy_decode, translate

SYMBOLS = "abcdefg"  # ids 3..9


def copy_batch(gen, B=32, T=7):
    """Sources of 1-5 random symbols + <eos>; the target is the source."""
    lens = torch.randint(1, 6, (B,), generator=gen) + 1  # with <eos>
    steps = torch.arange(T)
    src = torch.randint(3, V, (B, T), generator=gen)
    src[steps == lens[:, None] - 1] = EOS
    src[steps >= lens[:, None]] = PAD
    tgt_input = torch.cat([torch.full((B, 1), BOS), src[:, :-1]], dim=1)
    return src, tgt_input, lens, src.clone()


@pytest.fixture(scope="module")
def copy_model():
    """A tiny Bahdanau model trained to copy its input (a few seconds)."""
    model = make_model("additive", vocab=V, embed=16, hidden=32, layers=1)
    model.lr = 0.01
    opt = model.configure_optimizers()
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(300):
        loss, _ = model.training_step(copy_batch(gen))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # The mean of the last steps: one batch's loss is noisy (0.003-0.1).
    model.final_loss = sum(losses[-20:]) / 20
    return model.eval()


def test_a_tiny_model_learns_to_copy(copy_model):
    # Bounds that hold on every machine and batch seed tried (the loss
    # 0.001 to 0.071, 43 to 50 of 50 copied; an untrained model's loss is
    # about log 10 = 2.3, and it copies none): float rounding differs
    # from one CPU to another, and so do 300 steps of training.
    assert copy_model.final_loss < 0.25
    src, _, lens, _ = copy_batch(torch.Generator().manual_seed(1), B=50)
    decoded = greedy_decode(copy_model, src, lens, BOS, EOS, max_len=10)
    copied = [d.finished and d.ids == src[i, :lens[i] - 1].tolist()
              for i, d in enumerate(decoded)]
    assert sum(copied) >= 38, f"{sum(copied)} of 50 copied"


def decode_one_by_one(model, src, src_valid_len, max_len):
    """A plain loop: one sentence, without its padding, one step a time."""
    model.eval()
    with torch.no_grad():
        src = src[None, :src_valid_len]
        valid = torch.tensor([src_valid_len])
        state = model.decoder.init_state(model.encoder(src, valid), valid)
        y, ids, rows = torch.tensor([[BOS]]), [], []
        for _ in range(max_len):
            logits, state = model.decoder(y, state)
            y = logits.argmax(dim=-1)
            rows.append(model.decoder.attention_weights[-1][0])
            if y.item() == EOS:
                break
            ids.append(y.item())
    return ids, torch.cat(rows, dim=-2)  # (steps, S) or (h, steps, S)


@pytest.mark.parametrize("kind", ["copy", "multihead"])
def test_batch_decoding_equals_a_step_by_step_loop(kind, copy_model):
    model = copy_model if kind == "copy" else make_model("multihead")
    src, _, lens, _ = copy_batch(torch.Generator().manual_seed(2), B=6)
    calls = []
    hook = model.decoder.register_forward_hook(
        lambda *args: calls.append(1))
    decoded = greedy_decode(model, src, lens, BOS, EOS, max_len=9)
    hook.remove()
    steps = max(len(d.ids) + d.finished for d in decoded)
    assert len(calls) == steps  # stopped once every sentence had <eos>
    if kind == "copy":
        assert steps < 9 and all(d.finished for d in decoded)
    for i, d in enumerate(decoded):
        ids, weights = decode_one_by_one(model, src[i], int(lens[i]), 9)
        assert d.ids == ids and EOS not in d.ids
        rows = len(d.ids) + d.finished
        expected_shape = (rows, lens[i]) if kind == "copy" else \
            (4, rows, lens[i])
        assert d.attention.shape == expected_shape
        torch.testing.assert_close(d.attention, weights)


def test_decoding_runs_in_eval_mode_without_grad_and_restores_modes():
    model = make_model("additive", dropout=0.5)
    model.train()
    model.encoder.eval()  # a mixed state must come back as it was
    before = [m.training for m in model.modules()]
    seen = []
    model.decoder.register_forward_hook(lambda m, *args: seen.append(
        (m.training, torch.is_grad_enabled())))
    src, _, lens, _ = copy_batch(torch.Generator().manual_seed(3), B=4)
    first = greedy_decode(model, src, lens, BOS, EOS, max_len=5)
    again = greedy_decode(model, src, lens, BOS, EOS, max_len=5)
    assert [m.training for m in model.modules()] == before
    assert set(seen) == {(False, False)}
    assert [d.ids for d in first] == [d.ids for d in again]  # no dropout
    assert not first[0].attention.requires_grad
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("kind", ["additive", "multihead"])
def test_the_mask_is_built_once_per_decode(kind, monkeypatch):
    """Not once per step; the decoded ids and attention equal those of
    the old path, which masks at every step."""
    model = make_model(kind)
    old = per_step_copy(model)
    src, _, lens, _ = copy_batch(torch.Generator().manual_seed(5), B=5)
    counter = CountingMask(monkeypatch)
    decoded = greedy_decode(model, src, lens, BOS, EOS, max_len=6)
    assert counter.calls == 1
    assert max(len(d.ids) + d.finished for d in decoded) > 1  # steps
    for d, d_old in zip(decoded, greedy_decode(old, src, lens, BOS, EOS,
                                               max_len=6), strict=True):
        assert d.ids == d_old.ids and d.finished == d_old.finished
        assert torch.equal(d.attention, d_old.attention)


@pytest.mark.parametrize("args, error, message", [
    (dict(max_len=0), ValueError, "max_len must be an int >= 1"),
    (dict(max_len=2.0), ValueError, "max_len must be an int >= 1"),
    (dict(eos=None), ValueError, "eos must be an int >= 0"),
    (dict(bos=None), ValueError, "bos must be an int >= 0"),
    (dict(eos=2.0), ValueError, "eos must be an int"),
    (dict(src_valid_len=[3, 4]), TypeError, "tensor of integer lengths"),
    (dict(src_valid_len=torch.tensor([3.0, 4.0])), TypeError,
     "tensor of integer lengths"),
    (dict(src_valid_len=torch.tensor([3, 4, 5])), ValueError,
     r"must have shape \(2,\)"),
    (dict(src=torch.zeros(0, 7, dtype=torch.long),
          src_valid_len=torch.zeros(0, dtype=torch.long)), ValueError,
     "no sentence"),
    (dict(src=torch.zeros(0, 7, dtype=torch.long), src_valid_len=None),
     ValueError, "no sentence"),
])
def test_greedy_decode_rejects_bad_arguments(args, error, message):
    model = make_model("additive")
    src, _, lens, _ = copy_batch(torch.Generator().manual_seed(6), B=2)
    kwargs = dict(src=src, src_valid_len=lens, bos=BOS, eos=EOS,
                  max_len=3) | args
    with pytest.raises(error, match=message):
        greedy_decode(model, **kwargs)


class TinyVocab:
    """Just what ``translate`` needs of d2lmini.data's Vocab."""

    idx_to_token = ["<pad>", "<bos>", "<eos>", *SYMBOLS]
    pad, bos, eos = PAD, BOS, EOS

    def __len__(self):
        return len(self.idx_to_token)

    def to_tokens(self, ids):
        return [self.idx_to_token[i] for i in ids]


class TinyData:
    num_steps = 7
    src_vocab = tgt_vocab = TinyVocab()

    def build(self, src_sentences, tgt_sentences=None):
        rows = [[3 + SYMBOLS.index(c) for c in s.split()] + [EOS]
                for s in src_sentences]
        lens = torch.tensor([len(r) for r in rows])
        src = torch.tensor([r + [PAD] * (self.num_steps - len(r))
                            for r in rows])
        return src, None, lens, None


def test_translate_returns_tokens_text_and_labelled_attention(copy_model):
    out = translate(copy_model, TinyData(), ["a b c", "g e", "d"])
    assert [t.text for t in out] == ["a b c", "g e", "d"]
    first = out[0]
    assert first.tokens == ["a", "b", "c"]
    assert first.src_tokens == ["a", "b", "c", "<eos>"]
    assert first.out_tokens == ["a", "b", "c", "<eos>"]
    assert first.attention.shape == (len(first.out_tokens),
                                     len(first.src_tokens))
    torch.testing.assert_close(first.attention.sum(-1), torch.ones(4))
    cut = translate(copy_model, TinyData(), ["a b c"], max_len=2)[0]
    assert cut.tokens == cut.out_tokens == ["a", "b"]  # no <eos> yet
    assert cut.attention.shape == (2, 4)
    with pytest.raises(TypeError, match="list of strings"):
        translate(copy_model, TinyData(), "a b")


def test_decoding_without_attention_or_valid_lengths():
    model = make_model("none")
    src, _, _, _ = copy_batch(torch.Generator().manual_seed(4), B=3)
    decoded = greedy_decode(model, src, None, BOS, EOS, max_len=4)
    assert len(decoded) == 3
    assert all(d.attention is None and len(d.ids) <= 4 for d in decoded)
    model = make_model("additive")
    decoded = greedy_decode(model, src, None, BOS, EOS, max_len=4)
    assert decoded[0].attention.shape[1] == src.shape[1]  # every key


@pytest.mark.parametrize("kind", ["copy", "multihead"])
def test_attend_masks_source_positions_out_of_the_attention(kind,
                                                            copy_model):
    model = copy_model if kind == "copy" else make_model("multihead")
    src, _, lens, _ = copy_batch(torch.Generator().manual_seed(3), B=5)
    everything = torch.ones_like(src, dtype=torch.bool)
    free = greedy_decode(model, src, lens, BOS, EOS, 9)
    same = greedy_decode(model, src, lens, BOS, EOS, 9, attend=everything)
    for a, b in zip(free, same):
        assert a.ids == b.ids
        torch.testing.assert_close(a.attention, b.attention)
    attend = everything.clone()
    attend[:, 0] = False  # nobody may look at the first token
    cut = greedy_decode(model, src, lens, BOS, EOS, 9, attend=attend)
    for d in cut:
        assert torch.all(d.attention[..., 0] == 0)
        torch.testing.assert_close(d.attention.sum(-1),
                                   torch.ones(d.attention.shape[:-1]))
    if kind == "copy":  # the copy model needs the first token
        assert any(a.ids != b.ids for a, b in zip(free, cut))


def test_attend_rejects_a_mask_of_the_wrong_shape_or_type(copy_model):
    src, _, lens, _ = copy_batch(torch.Generator().manual_seed(3), B=5)
    for bad in (torch.ones(5, 3, dtype=torch.bool),
                torch.ones_like(src)):
        with pytest.raises(ValueError, match="attend must be a bool"):
            greedy_decode(copy_model, src, lens, BOS, EOS, 9, attend=bad)


def make_concurrent_model(kind):
    """A model with dropout, in train mode, for the thread test."""
    if kind != "transformer":
        return make_model(kind, dropout=0.3).train()
    from d2lmini.seq2seq import Seq2Seq
    from d2lmini.transformer import TransformerDecoder, TransformerEncoder
    torch.manual_seed(0)
    return Seq2Seq(TransformerEncoder(V, 16, 24, 4, 2, dropout=0.3),
                   TransformerDecoder(V, 16, 24, 4, 2, dropout=0.3),
                   tgt_pad=PAD).train()


@pytest.mark.parametrize("kind", ["additive", "multihead", "transformer"])
def test_threads_decoding_one_model_equal_one_thread(kind):
    """Each call keeps its own attention weights and modes: threads that
    decode batches of different sizes at once get what one thread gets,
    and the model in train mode stays in train mode."""
    import threading
    model = make_concurrent_model(kind)
    model.encoder.eval()  # a mixed state must come back as it was
    before = [m.training for m in model.modules()]
    batches = [copy_batch(torch.Generator().manual_seed(i), B=B)
               for i, B in enumerate((1, 3, 5, 8))]
    expected = [greedy_decode(model, src, lens, BOS, EOS, max_len=7)
                for src, _, lens, _ in batches]
    assert [m.training for m in model.modules()] == before
    start, errors = threading.Barrier(len(batches)), []
    got = [[] for _ in batches]

    def work(i):
        src, _, lens, _ = batches[i]
        try:
            start.wait()
            for _ in range(5):
                got[i].append(greedy_decode(model, src, lens, BOS, EOS,
                                            max_len=7))
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,))
               for i in range(len(batches))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert [m.training for m in model.modules()] == before
    for runs, want in zip(got, expected, strict=True):
        for run in runs:
            for d, e in zip(run, want, strict=True):
                assert d.ids == e.ids and d.finished == e.finished
                torch.testing.assert_close(d.attention, e.attention)
