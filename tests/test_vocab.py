"""Tests of d2lmini.vocab: the token <-> id maps."""

import pytest
import torch

from d2lmini import data
from d2lmini import vocab as vocab_


def test_data_offers_the_vocab():
    assert data.Vocab is vocab_.Vocab
    assert data.RESERVED_TOKENS is vocab_.RESERVED_TOKENS


def test_vocab_ids_are_reserved_then_by_frequency():
    vocab = vocab_.Vocab([["b", "a", "c"], ["a", "b"], "a", "d"], min_freq=2)
    assert vocab.idx_to_token == ["<pad>", "<bos>", "<eos>", "<unk>",
                                  "a", "b"]  # a: 3, b: 2; c, d: 1
    assert (vocab.pad, vocab.bos, vocab.eos, vocab.unk) == (0, 1, 2, 3)
    assert len(vocab) == 6 and "c" not in vocab
    assert vocab[["a", "c", "zzz"]] == [4, 3, 3]  # unknown -> <unk>
    assert vocab.to_tokens(torch.tensor([4, 5, 2])) == ["a", "b", "<eos>"]
    assert vocab_.Vocab(["x", "y"], min_freq=1)["y"] == 5  # ties: a-z


def test_vocab_is_deterministic_and_round_trips():
    sentences = [s.split() for s in ("the cat sat", "the dog sat",
                                     "a cat ran", "a dog ran")]
    one = vocab_.Vocab(sentences, min_freq=1)
    two = vocab_.Vocab(list(reversed(sentences)), min_freq=1)
    assert one.idx_to_token == two.idx_to_token
    for s in sentences:
        assert one.to_tokens(one[s]) == s


def test_vocab_extra_reserved_and_errors():
    vocab = vocab_.Vocab(["a"], 1, reserved_tokens=[*vocab_.RESERVED_TOKENS,
                                                   "<sep>"])
    assert vocab["<sep>"] == 4 and vocab["a"] == 5
    with pytest.raises(TypeError, match="text.split"):
        vocab_.Vocab("a b c")
    with pytest.raises(ValueError, match="<unk>"):
        vocab_.Vocab(["a"], reserved_tokens=["<pad>", "<bos>", "<eos>"])
    with pytest.raises(ValueError, match="min_freq"):
        vocab_.Vocab(["a"], min_freq=0)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        vocab.to_tokens(99)
    with pytest.raises(TypeError, match="list of tokens"):
        vocab[3]
