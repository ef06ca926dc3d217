"""Fixtures shared by several test modules."""

import socket

import pytest

from d2lmini import corpus, seq2seq
from d2lmini.attention_decoder import Seq2SeqAttentionDecoder
from d2lmini.data import MTFraEng
from d2lmini.experiment import SEED_OFFSET_VARIABLE
from d2lmini.multihead import MultiHeadAttention
from d2lmini.utils import set_seed


@pytest.fixture(autouse=True, scope="session")
def no_seed_offset():
    """Unit tests train with the recipes' own seeds, even when the shell
    sets D2LMINI_SEED_OFFSET for a perturbed notebook run: unset for the
    whole session, so that module-scoped fixtures, set up before any
    function-scoped one, do not see it either."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(SEED_OFFSET_VARIABLE, raising=False)
        yield


def _closed_url():
    """A loopback URL on a port that nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/fra-eng.zip"


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No corpus in the environment, an empty cache, no real URL."""
    monkeypatch.delenv(corpus.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    # read_pairs reads the constants of corpus at call time.
    monkeypatch.setattr(corpus, "DATA_URL", _closed_url())


PAIRS = [("go .", "va !"), ("i lost .", "j'ai perdu ."),
         ("he's calm .", "il est calme ."),
         ("i'm home .", "je suis chez moi .")]


@pytest.fixture(scope="module")
def toy():
    """A toy corpus and two tiny untrained models (additive, 2 heads)."""
    data = MTFraEng(2, num_steps=6, num_train=8, num_val=0,
                    pairs=PAIRS * 2, min_freq=1)

    def model(attention):
        set_seed(0)
        encoder = seq2seq.Seq2SeqEncoder(len(data.src_vocab), 4, 8, 1)
        decoder = Seq2SeqAttentionDecoder(
            len(data.tgt_vocab), 4, 8, 1, attention=attention)
        return seq2seq.Seq2Seq(encoder, decoder, data.tgt_vocab.pad)

    models = {"additive": model(None),
              "2-head": model(MultiHeadAttention(8, 2))}
    return models, data
