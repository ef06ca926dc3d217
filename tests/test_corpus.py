"""Tests of d2lmini.corpus: finding, downloading, reading the archive.

No test touches the internet: downloads come from a local HTTP server on
127.0.0.1 that serves small archives made here.
"""

import hashlib
import http.server
import io
import threading
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from d2lmini import corpus, data

TEXT = ("Go.\tVa !\n"
        "Hi.\tSalut\u202f!\tCC-BY 2.0 (France) Attribution: tatoeba.org\n"
        "Run!\tCours\xa0!\n"
        "Run!\tCourez !\n")


# Every test runs offline: see the `offline` fixture in conftest.py.
pytestmark = pytest.mark.usefixtures("offline")


def make_zip(text=TEXT, extra=(), method=zipfile.ZIP_DEFLATED):
    """Bytes of a zip holding fra-eng/fra.txt (+ extra members), its
    sha1 and the sha256 of the text."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name in extra:
            zf.writestr(name, "extra")
        zf.writestr(corpus.MEMBER, text.encode("utf-8"))
    raw = buf.getvalue()
    return (raw, hashlib.sha1(raw).hexdigest(),
            hashlib.sha256(text.encode("utf-8")).hexdigest())


def put_zip(directory, text=TEXT, **kwargs):
    directory.mkdir(parents=True, exist_ok=True)
    raw, sha1, sha256 = make_zip(text, **kwargs)
    (directory / corpus.ARCHIVE_NAME).write_bytes(raw)
    return directory / corpus.ARCHIVE_NAME, sha1, sha256


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
    assert corpus.preprocess(raw) == expected
    assert corpus.tokenize(expected) == expected.split()


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet="aB ,.!?\xa0\u202f'"))
def test_preprocess_is_idempotent(text):
    once = corpus.preprocess(text)
    assert corpus.preprocess(once) == once


def test_parse_pairs_columns_and_skips():
    text = TEXT + ("\n"  # blank lines are ignored, not counted
                   "only one column\n"
                   "a\tb\tc\td\n"  # four columns
                   "\tEmpty English.\n"
                   "Windows line.\tLigne Windows.\r\n")
    pairs, skipped = corpus.parse_pairs(text)
    assert pairs == [("go .", "va !"), ("hi .", "salut !"),
                     ("run !", "cours !"), ("run !", "courez !"),
                     ("windows line .", "ligne windows .")]
    assert skipped == 3


# Finding, downloading and extracting the archive -------------------------

def test_download_good_archive(server, tmp_path):
    raw, sha1, _ = make_zip()
    dest = tmp_path / "dest"
    path = corpus.download_archive(server("good.zip", raw), dest, sha1=sha1)
    assert path == dest / corpus.ARCHIVE_NAME
    assert path.read_bytes() == raw
    assert files_under(dest) == [corpus.ARCHIVE_NAME]


@pytest.mark.parametrize("case, error", [
    ("wrong checksum", corpus.ChecksumError),
    ("truncated body", corpus.DownloadError),
    ("http 404", corpus.DownloadError),
    ("member with ../", corpus.UnsafeArchiveError),
    ("not a zip", corpus.DownloadError),
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
        corpus.download_archive(url, dest, sha1=sha1)
    assert files_under(tmp_path) == []  # no partial file, no evil.txt


def test_download_refuses_plain_http_to_other_hosts(tmp_path):
    with pytest.raises(ValueError, match="https"):
        corpus.download_archive("http://example.com/fra-eng.zip", tmp_path)
    assert files_under(tmp_path) == []


def test_resolution_order(tmp_path, monkeypatch):
    root, _, _ = put_zip(tmp_path / "root")
    env, _, _ = put_zip(tmp_path / "env")
    cache, _, _ = put_zip(tmp_path / "xdg" / "d2lmini")
    assert corpus.cache_dir() == cache.parent
    monkeypatch.setenv(corpus.ENV_VAR, str(env.parent))
    assert corpus.locate_archive(root.parent) == root
    assert corpus.locate_archive(root) == root  # the zip's own path
    assert corpus.locate_archive(tmp_path / "nothing") == env
    assert corpus.locate_archive() == env
    monkeypatch.delenv(corpus.ENV_VAR)
    assert corpus.locate_archive() == cache


def test_cache_dir_default(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert corpus.cache_dir() == tmp_path / ".cache" / "d2lmini"


def test_offline_and_missing_says_how_to_provide(tmp_path):
    with pytest.raises(corpus.CorpusNotFoundError) as info:
        corpus.read_pairs(tmp_path / "empty")
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    for hint in ("root=", corpus.ENV_VAR, str(corpus.cache_dir()),
                 corpus.DATA_URL, "downloading it failed"):
        assert hint in message
    with pytest.raises(corpus.CorpusNotFoundError, match=corpus.ENV_VAR):
        corpus.locate_archive(download=False)
    assert files_under(tmp_path) == []


def test_missing_archive_is_downloaded_into_cache(server, tmp_path):
    raw, sha1, sha256 = make_zip()
    pairs, skipped = corpus.read_pairs(url=server("fra-eng.zip", raw),
                                     archive_sha1=sha1, fra_sha256=sha256)
    assert pairs[0] == ("go .", "va !") and skipped == 0
    assert files_under(tmp_path / "xdg") == ["d2lmini/fra-eng.zip"]


def test_local_archive_checked_through_fra_txt(tmp_path):
    _, _, sha256 = make_zip()
    stored, _, _ = put_zip(tmp_path / "a", method=zipfile.ZIP_STORED,
                           extra=["fra-eng/_about.txt"])  # a repack
    deflated, _, _ = put_zip(tmp_path / "b")
    for path in (stored, deflated):
        pairs, _ = corpus.read_pairs(path, fra_sha256=sha256,
                                   archive_sha1="0" * 40)
        assert len(pairs) == 4
    bad, sha1, _ = put_zip(tmp_path / "c", TEXT + "Hug me.\tSerre-moi.\n")
    with pytest.raises(corpus.ChecksumError, match="sha256"):
        corpus.read_pairs(bad, fra_sha256=sha256, archive_sha1="0" * 40)
    # d2l's own zip is accepted through its sha1.
    assert len(corpus.read_pairs(bad, fra_sha256=sha256,
                               archive_sha1=sha1)[0]) == 5


def test_local_archive_with_unsafe_member_is_refused(tmp_path):
    path, _, sha256 = put_zip(tmp_path / "a", extra=["../evil.txt"])
    with pytest.raises(corpus.UnsafeArchiveError, match="evil"):
        corpus.read_pairs(path, fra_sha256=sha256)


@pytest.mark.parametrize("member", ["../evil.txt", "/abs/evil.txt",
                                    "fra-eng/../../evil.txt", "C:/evil"])
def test_extract_refuses_members_outside_target(tmp_path, member):
    path, _, _ = put_zip(tmp_path / "zip", extra=[member])
    dest = tmp_path / "out" / "dest"
    with pytest.raises(corpus.UnsafeArchiveError):
        corpus.extract(path, dest)
    assert files_under(tmp_path) == ["zip/fra-eng.zip"]


def test_extract_good_archive(tmp_path):
    path, _, _ = put_zip(tmp_path / "zip")
    out = corpus.extract(path, tmp_path / "out")
    assert out == [tmp_path / "out" / corpus.MEMBER]
    assert out[0].read_text(encoding="utf-8") == TEXT


def test_corpus_is_read_once_per_process(tmp_path, monkeypatch):
    _, _, sha256 = make_zip()
    put_zip(tmp_path / "corpus")
    monkeypatch.setattr(corpus, "FRA_SHA256", sha256)
    opened = []

    class CountingZipFile(zipfile.ZipFile):
        def __init__(self, *args, **kwargs):
            opened.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(zipfile, "ZipFile", CountingZipFile)
    first = corpus.read_pairs(tmp_path / "corpus")
    assert corpus.read_pairs(tmp_path / "corpus") is first
    for _ in range(2):
        data.MTFraEng(2, num_train=2, num_val=1, root=tmp_path / "corpus")
    assert len(opened) == 1
