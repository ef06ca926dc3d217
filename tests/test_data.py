"""Tests of d2lmini.data: corpus files, preprocessing, Vocab, MTFraEng.

No test touches the internet: downloads come from a local HTTP server on
127.0.0.1 that serves small archives made here.  One test reads the real
corpus when ``D2LMINI_DATA_DIR`` points at it.
"""

import hashlib
import http.server
import io
import os
import socket
import threading
import zipfile
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from d2lmini import data

REAL_DIR = os.environ.get(data.ENV_VAR)  # read before any test clears it
TEXT = ("Go.\tVa !\n"
        "Hi.\tSalut\u202f!\tCC-BY 2.0 (France) Attribution: tatoeba.org\n"
        "Run!\tCours\xa0!\n"
        "Run!\tCourez !\n")


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No corpus in the environment, an empty cache, no real URL."""
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(data, "DATA_URL", _closed_url())


def _closed_url():
    with socket.socket() as s:  # a port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/fra-eng.zip"


def make_zip(text=TEXT, extra=(), method=zipfile.ZIP_DEFLATED):
    """Bytes of a zip holding fra-eng/fra.txt (+ extra members), its
    sha1 and the sha256 of the text."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name in extra:
            zf.writestr(name, "extra")
        zf.writestr(data.MEMBER, text.encode("utf-8"))
    raw = buf.getvalue()
    return (raw, hashlib.sha1(raw).hexdigest(),
            hashlib.sha256(text.encode("utf-8")).hexdigest())


def put_zip(directory, text=TEXT, **kwargs):
    directory.mkdir(parents=True, exist_ok=True)
    raw, sha1, sha256 = make_zip(text, **kwargs)
    (directory / data.ARCHIVE_NAME).write_bytes(raw)
    return directory / data.ARCHIVE_NAME, sha1, sha256


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path not in self.server.routes:
            self.send_error(404)
            return
        body, declared = self.server.routes[self.path]
        self.send_response(200)
        self.send_header("Content-Length", str(declared))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A local HTTP server; ``serve(name, body)`` returns the URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.routes = {}
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,),
                              daemon=True)
    thread.start()

    def serve(name, body, declared=None):
        httpd.routes["/" + name] = (body, len(body) if declared is None
                                    else declared)
        return f"http://127.0.0.1:{httpd.server_address[1]}/{name}"

    yield serve
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def files_under(path):
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*")
                  if p.is_file())


# Preprocessing ------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ("Go.", "go ."),
    ("Cours\u202f!", "cours !"),  # narrow no-break space
    ("Salut\xa0!", "salut !"),  # no-break space
    ("Hello, Tom! Ready? Yes.", "hello , tom ! ready ? yes ."),
    ("Wait...", "wait . . ."),
    ("already spaced !", "already spaced !"),
    ("!Start", "!start"),  # nothing before it: no space added
    ("J'ai PEUR", "j'ai peur"),  # apostrophes stay inside tokens
])
def test_preprocess(raw, expected):
    assert data.preprocess(raw) == expected
    assert data.tokenize(expected) == expected.split()


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet="aB ,.!?\xa0\u202f'"))
def test_preprocess_is_idempotent(text):
    once = data.preprocess(text)
    assert data.preprocess(once) == once


def test_parse_pairs_columns_and_skips():
    text = TEXT + ("\n"  # blank lines are ignored, not counted
                   "only one column\n"
                   "a\tb\tc\td\n"  # four columns
                   "\tEmpty English.\n"
                   "Windows line.\tLigne Windows.\r\n")
    pairs, skipped = data.parse_pairs(text)
    assert pairs == [("go .", "va !"), ("hi .", "salut !"),
                     ("run !", "cours !"), ("run !", "courez !"),
                     ("windows line .", "ligne windows .")]
    assert skipped == 3


# Vocab --------------------------------------------------------------------

def test_vocab_ids_are_reserved_then_by_frequency():
    vocab = data.Vocab([["b", "a", "c"], ["a", "b"], "a", "d"], min_freq=2)
    assert vocab.idx_to_token == ["<pad>", "<bos>", "<eos>", "<unk>",
                                  "a", "b"]  # a: 3, b: 2; c, d: 1
    assert (vocab.pad, vocab.bos, vocab.eos, vocab.unk) == (0, 1, 2, 3)
    assert len(vocab) == 6 and "c" not in vocab
    assert vocab[["a", "c", "zzz"]] == [4, 3, 3]  # unknown -> <unk>
    assert vocab.to_tokens(torch.tensor([4, 5, 2])) == ["a", "b", "<eos>"]
    assert data.Vocab(["x", "y"], min_freq=1)["y"] == 5  # ties: a-z


def test_vocab_is_deterministic_and_round_trips():
    sentences = [s.split() for s in ("the cat sat", "the dog sat",
                                     "a cat ran", "a dog ran")]
    one = data.Vocab(sentences, min_freq=1)
    two = data.Vocab(list(reversed(sentences)), min_freq=1)
    assert one.idx_to_token == two.idx_to_token
    for s in sentences:
        assert one.to_tokens(one[s]) == s


def test_vocab_extra_reserved_and_errors():
    vocab = data.Vocab(["a"], 1, reserved_tokens=[*data.RESERVED_TOKENS,
                                                   "<sep>"])
    assert vocab["<sep>"] == 4 and vocab["a"] == 5
    with pytest.raises(TypeError, match="text.split"):
        data.Vocab("a b c")
    with pytest.raises(ValueError, match="<unk>"):
        data.Vocab(["a"], reserved_tokens=["<pad>", "<bos>", "<eos>"])
    with pytest.raises(ValueError, match="min_freq"):
        data.Vocab(["a"], min_freq=0)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        vocab.to_tokens(99)
    with pytest.raises(TypeError, match="list of tokens"):
        vocab[3]


# Finding, downloading and extracting the archive -------------------------

def test_download_good_archive(server, tmp_path):
    raw, sha1, _ = make_zip()
    dest = tmp_path / "dest"
    path = data.download_archive(server("good.zip", raw), dest, sha1=sha1)
    assert path == dest / data.ARCHIVE_NAME
    assert path.read_bytes() == raw
    assert files_under(dest) == [data.ARCHIVE_NAME]


@pytest.mark.parametrize("case, error", [
    ("wrong checksum", data.ChecksumError),
    ("truncated body", data.DownloadError),
    ("http 404", data.DownloadError),
    ("member with ../", data.UnsafeArchiveError),
    ("not a zip", data.DownloadError),
])
def test_download_failures_leave_nothing(server, tmp_path, case, error):
    raw, sha1, _ = make_zip(extra=["../evil.txt"]
                            if case == "member with ../" else ())
    if case == "wrong checksum":
        url, sha1 = server("a.zip", raw), "0" * 40
    elif case == "truncated body":
        url = server("a.zip", raw[:len(raw) // 2], declared=len(raw))
    elif case == "http 404":
        url = server("a.zip", raw).replace("a.zip", "missing.zip")
    elif case == "not a zip":
        raw = b"<html>Not here</html>"
        url, sha1 = server("a.zip", raw), hashlib.sha1(raw).hexdigest()
    else:
        url = server("a.zip", raw)
    dest = tmp_path / "dest"
    with pytest.raises(error):
        data.download_archive(url, dest, sha1=sha1)
    assert files_under(tmp_path) == []  # no partial file, no evil.txt


def test_download_refuses_plain_http_to_other_hosts(tmp_path):
    with pytest.raises(ValueError, match="https"):
        data.download_archive("http://example.com/fra-eng.zip", tmp_path)
    assert files_under(tmp_path) == []


def test_resolution_order(tmp_path, monkeypatch):
    root, _, _ = put_zip(tmp_path / "root")
    env, _, _ = put_zip(tmp_path / "env")
    cache, _, _ = put_zip(tmp_path / "xdg" / "d2lmini")
    assert data.cache_dir() == cache.parent
    monkeypatch.setenv(data.ENV_VAR, str(env.parent))
    assert data.locate_archive(root.parent) == root
    assert data.locate_archive(root) == root  # the zip's own path
    assert data.locate_archive(tmp_path / "nothing") == env
    assert data.locate_archive() == env
    monkeypatch.delenv(data.ENV_VAR)
    assert data.locate_archive() == cache


def test_cache_dir_default(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert data.cache_dir() == tmp_path / ".cache" / "d2lmini"


def test_offline_and_missing_says_how_to_provide(tmp_path):
    with pytest.raises(data.CorpusNotFoundError) as info:
        data.read_pairs(tmp_path / "empty")
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    for hint in ("root=", data.ENV_VAR, str(data.cache_dir()),
                 data.DATA_URL, "downloading it failed"):
        assert hint in message
    with pytest.raises(data.CorpusNotFoundError, match=data.ENV_VAR):
        data.locate_archive(download=False)
    assert files_under(tmp_path) == []


def test_missing_archive_is_downloaded_into_cache(server, tmp_path):
    raw, sha1, sha256 = make_zip()
    pairs, skipped = data.read_pairs(url=server("fra-eng.zip", raw),
                                     archive_sha1=sha1, fra_sha256=sha256)
    assert pairs[0] == ("go .", "va !") and skipped == 0
    assert files_under(tmp_path / "xdg") == ["d2lmini/fra-eng.zip"]


def test_local_archive_checked_through_fra_txt(tmp_path):
    _, _, sha256 = make_zip()
    stored, _, _ = put_zip(tmp_path / "a", method=zipfile.ZIP_STORED,
                           extra=["fra-eng/_about.txt"])  # a repack
    deflated, _, _ = put_zip(tmp_path / "b")
    for path in (stored, deflated):
        pairs, _ = data.read_pairs(path, fra_sha256=sha256,
                                   archive_sha1="0" * 40)
        assert len(pairs) == 4
    bad, sha1, _ = put_zip(tmp_path / "c", TEXT + "Hug me.\tSerre-moi.\n")
    with pytest.raises(data.ChecksumError, match="sha256"):
        data.read_pairs(bad, fra_sha256=sha256, archive_sha1="0" * 40)
    # d2l's own zip is accepted through its sha1.
    assert len(data.read_pairs(bad, fra_sha256=sha256,
                               archive_sha1=sha1)[0]) == 5


def test_local_archive_with_unsafe_member_is_refused(tmp_path):
    path, _, sha256 = put_zip(tmp_path / "a", extra=["../evil.txt"])
    with pytest.raises(data.UnsafeArchiveError, match="evil"):
        data.read_pairs(path, fra_sha256=sha256)


@pytest.mark.parametrize("member", ["../evil.txt", "/abs/evil.txt",
                                    "fra-eng/../../evil.txt", "C:/evil"])
def test_extract_refuses_members_outside_target(tmp_path, member):
    path, _, _ = put_zip(tmp_path / "zip", extra=[member])
    dest = tmp_path / "out" / "dest"
    with pytest.raises(data.UnsafeArchiveError):
        data.extract(path, dest)
    assert files_under(tmp_path) == ["zip/fra-eng.zip"]


def test_extract_good_archive(tmp_path):
    path, _, _ = put_zip(tmp_path / "zip")
    out = data.extract(path, tmp_path / "out")
    assert out == [tmp_path / "out" / data.MEMBER]
    assert out[0].read_text(encoding="utf-8") == TEXT


def test_corpus_is_read_once_per_process(tmp_path, monkeypatch):
    _, _, sha256 = make_zip()
    put_zip(tmp_path / "corpus")
    monkeypatch.setattr(data, "FRA_SHA256", sha256)
    opened = []

    class CountingZipFile(zipfile.ZipFile):
        def __init__(self, *args, **kwargs):
            opened.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(zipfile, "ZipFile", CountingZipFile)
    first = data.read_pairs(tmp_path / "corpus")
    assert data.read_pairs(tmp_path / "corpus") is first
    for _ in range(2):
        data.MTFraEng(2, num_train=2, num_val=1, root=tmp_path / "corpus")
    assert len(opened) == 1


# MTFraEng on a small synthetic corpus --------------------------------------

def synthetic_pairs(num_sources=40):
    """Raw pairs: source i has 1 + i % 3 translations, 1 to 5 words."""
    pairs = []
    for i in range(num_sources):
        eng = " ".join(["Tom"] * (i % 5)) + f" Word{i}."
        pairs += [(eng, f"Mot{i} v{k}!") for k in range(1 + i % 3)]
    return pairs


def sources(pairs):
    return {eng for eng, _ in pairs}


def test_batches_look_like_d2l():
    pairs = synthetic_pairs()
    d = data.MTFraEng(4, num_steps=5, num_train=8, num_val=4, pairs=pairs)
    clean = [(data.preprocess(e).strip(), data.preprocess(f))
             for e, f in pairs]
    assert d.train_pairs == clean[:8] and d.val_pairs == clean[8:12]
    src, tgt_in, src_len, label = next(iter(d.val_dataloader()))
    for x, shape in ((src, (4, 5)), (tgt_in, (4, 5)), (src_len, (4,)),
                     (label, (4, 5))):
        assert x.shape == shape and x.dtype == torch.long
    v, w = d.src_vocab, d.tgt_vocab
    for row, n, (eng, _) in zip(src, src_len, d.val_pairs):
        tokens = eng.split()
        assert n == min(len(tokens) + 1, 5)  # counts <eos>, cut at T
        assert row.tolist() == (v[tokens] + [v.eos] + [v.pad] * 5)[:5]
    assert (tgt_in[:, 0] == w.bos).all()
    assert torch.equal(tgt_in[:, 1:], label[:, :-1])  # shifted by one
    assert label[0].tolist() == w[d.val_pairs[0][1].split()] + [w.eos, 0]
    assert (src_len == 5).any() and not (src == v.eos).all(1).all()


def test_train_loader_is_seeded_and_covers_the_split():
    def epoch(seed):
        d = data.MTFraEng(3, num_train=10, num_val=2, seed=seed,
                          pairs=synthetic_pairs())
        return torch.cat([b[0] for b in d.train_dataloader()])
    a, b = epoch(0), epoch(0)
    assert torch.equal(a, b) and a.shape[0] == 10
    d = data.MTFraEng(3, num_train=10, num_val=2, pairs=synthetic_pairs())
    everything = d._arrays["train"][0]
    assert sorted(map(tuple, a.tolist())) == \
        sorted(map(tuple, everything.tolist()))


def test_shuffled_split_shares_no_english_source():
    pairs = synthetic_pairs(60)
    d = data.MTFraEng(4, num_train=30, num_val=12, num_test=10,
                      shuffle=True, seed=3, pairs=pairs)
    train, val, test = map(sources, (d.train_pairs, d.val_pairs,
                                     d.test_pairs))
    assert len(d.train_pairs) == 30 and len(d.val_pairs) == 12
    assert len(d.test_pairs) == len(test) == 10  # each source once
    assert not (train & val or train & test or val & test)
    again = data.MTFraEng(4, num_train=30, num_val=12, num_test=10,
                          shuffle=True, seed=3, pairs=pairs)
    assert again.train_pairs == d.train_pairs
    other = data.MTFraEng(4, num_train=30, num_val=12, num_test=10,
                          shuffle=True, seed=4, pairs=pairs)
    assert other.train_pairs != d.train_pairs


def test_book_split_is_by_position_but_test_is_disjoint():
    pairs = synthetic_pairs()  # source 1 has pairs 1-2, source 2 3-5
    d = data.MTFraEng(2, num_train=2, num_val=2, num_test=3, pairs=pairs)
    assert sources(d.train_pairs) & sources(d.val_pairs)  # as d2l
    assert not sources(d.test_pairs) & sources(d.train_pairs
                                               + d.val_pairs)
    fair = data.MTFraEng(2, num_train=2, num_val=2, split_by_source=True,
                         pairs=pairs)
    assert not sources(fair.train_pairs) & sources(fair.val_pairs)
    # num_train=None: test, then val, come from the end of the corpus.
    clean = [(data.preprocess(e).strip(), data.preprocess(f))
             for e, f in pairs]  # ..., 36 (1 pair), 37 (2), 38 (3), 39 (1)
    rest = data.MTFraEng(2, num_train=None, num_val=3, num_test=2,
                         pairs=pairs)
    assert rest.test_pairs == [clean[-4], clean[-1]]  # sources 38, 39
    assert rest.val_pairs == clean[-7:-4] and rest.train_pairs == clean[:-7]


def test_all_remaining_pairs_and_length_limits():
    pairs = synthetic_pairs(60)
    d = data.MTFraEng(4, num_train=None, num_val=10, num_test=5,
                      max_src_len=3, shuffle=True, pairs=pairs)
    kept = [(data.preprocess(e).strip(), data.preprocess(f))
            for e, f in pairs if len(data.preprocess(e).split()) <= 3]
    used = d.train_pairs + d.val_pairs + d.test_pairs
    assert all(len(e.split()) <= 3 for e, _ in used)
    held_out = sources(d.val_pairs) | sources(d.test_pairs)
    assert len(d.val_pairs) == 10 and len(d.test_pairs) == 5
    # Train is everything else (the val group cut at 10 loses its rest).
    assert sorted(d.train_pairs) == sorted(p for p in kept
                                           if p[0] not in held_out)
    with pytest.raises(ValueError, match="not enough data"):
        data.MTFraEng(4, num_train=500, pairs=pairs)


def test_vocab_comes_from_train_only():
    pairs = synthetic_pairs() + [("Tom Word0.", "Mot0 v0!")] * 2
    d = data.MTFraEng(2, num_train=6, num_val=4, num_test=2, min_freq=1,
                      shuffle=True, pairs=pairs)
    train_words = {t for e, _ in d.train_pairs for t in e.split()}
    assert set(d.src_vocab.idx_to_token) == \
        train_words | set(data.RESERVED_TOKENS)
    unseen = (sources(d.val_pairs) | sources(d.test_pairs)).pop().split()
    assert d.src_vocab.unk in d.src_vocab[unseen]


def test_build_references_and_describe():
    d = data.MTFraEng(2, num_steps=6, num_train=12, num_val=2,
                      pairs=synthetic_pairs())
    src, tgt_in, src_len, label = d.build(["Tom Tom Word2.", "nope"])
    w = d.tgt_vocab
    assert src.shape == tgt_in.shape == label.shape == (2, 6)
    assert src_len.tolist() == [5, 2]
    assert (tgt_in[:, 0] == w.bos).all() and (tgt_in[:, 1:] == 0).all()
    assert (label == w.pad).all()
    _, tgt_in, _, label = d.build(["Tom Word1."], ["Mot1 v1!"])
    assert d.tgt_vocab.to_tokens(label[0, :4]) == ["mot1", "v1", "!",
                                                   "<eos>"]
    with pytest.raises(TypeError, match="list of strings"):
        d.build("Tom Word1.")
    with pytest.raises(ValueError, match="as many"):
        d.build(["a ."], ["b .", "c ."])
    assert d.references("Tom Tom Word2.") == ["mot2 v0 !", "mot2 v1 !",
                                              "mot2 v2 !"]
    with pytest.raises(ValueError, match="no reference"):
        d.references("Unknown.")
    assert d.splits_of("tom word1 .") == ("train",)
    rows = d.describe("Tom Zebra!")
    assert [r[0] for r in rows] == ["tom", "zebra", "!", "<eos>",
                                    "<pad>", "<pad>"]
    assert rows[1][1:] == (d.src_vocab.unk, "<unk>")


def test_bucketed_batches_are_trimmed_and_cover_the_split():
    d = data.MTFraEng(4, num_steps=8, num_train=40, num_val=4,
                      bucket=True, pairs=synthetic_pairs())
    seen = []
    for src, tgt_in, src_len, label in d.train_dataloader():
        assert src.shape[1] == src_len.max() <= 8
        assert tgt_in.shape == label.shape
        assert (label[:, -1] != d.tgt_vocab.pad).any()  # no pad column
        seen += [tuple(r[:n].tolist()) for r, n in zip(src, src_len)]
    full = d._arrays["train"]
    assert sorted(seen) == sorted(tuple(r[:n].tolist())
                                  for r, n in zip(full[0], full[2]))


def test_bad_arguments_and_empty_splits():
    with pytest.raises(ValueError, match="batch_size"):
        data.MTFraEng(0, pairs=synthetic_pairs())
    with pytest.raises(TypeError, match="pairs"):
        data.MTFraEng(2, pairs=[("only one",)])
    d = data.MTFraEng(2, num_train=4, num_val=0, pairs=synthetic_pairs())
    with pytest.raises(ValueError, match="num_test"):
        d.test_dataloader()
    with pytest.raises(ValueError, match="num_val"):
        d.val_dataloader()


# The real corpus, when available -------------------------------------------

@pytest.mark.skipif(
    not REAL_DIR or not (Path(REAL_DIR) / data.ARCHIVE_NAME).is_file(),
    reason=f"{data.ENV_VAR} does not point at fra-eng.zip")
def test_real_corpus_book_setting():
    with zipfile.ZipFile(Path(REAL_DIR) / data.ARCHIVE_NAME) as zf:
        text = zf.read(data.MEMBER)
    assert hashlib.sha256(text).hexdigest() == data.FRA_SHA256
    d = data.MTFraEng(128, root=REAL_DIR)
    assert (len(d.train_pairs), len(d.val_pairs)) == (512, 128)
    assert d.train_pairs[0] == ("go .", "va !") and d.num_skipped == 0
    assert d.splits_of("dogs bark .") == ("train", "val")
