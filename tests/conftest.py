"""Fixtures shared by the corpus and data tests."""

import socket

import pytest

from d2lmini import corpus


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
    # Patch corpus: read_pairs reads its constants, not data's copies.
    monkeypatch.setattr(corpus, "DATA_URL", _closed_url())
