"""Tests of d2lmini.corpus: finding, downloading, reading the archive.

No test touches the internet: downloads come from a local HTTP server on
127.0.0.1 that serves small archives made here.
"""

import contextlib
import hashlib
import http.server
import io
import socket
import threading
import zipfile

import pytest

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
        self.server.requests.append(self.path)
        if self.path not in self.server.routes:
            self.send_error(404)
            return
        status, headers, body = self.server.routes[self.path]
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(ConnectionError):  # a client hung up
            self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A local HTTP server; ``serve(name, body)`` returns the URL.

    ``declared`` is the Content-Length (None: the body's, "omit": none);
    ``status`` and keyword headers make e.g. a redirect:
    ``serve("a", status=302, Location=url)``.  ``serve.requests`` lists
    the paths asked for.
    """
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.routes, httpd.requests = {}, []
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,),
                              daemon=True)
    thread.start()

    def serve(name, body=b"", declared=None, status=200, **headers):
        if declared != "omit":
            headers["Content-Length"] = str(len(body) if declared is None
                                            else declared)
        httpd.routes["/" + name] = (status, headers, body)
        return f"http://127.0.0.1:{httpd.server_address[1]}/{name}"

    serve.requests = httpd.requests
    yield serve
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def files_under(path):
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*")
                  if p.is_file())


# Parsing fra.txt --------------------------------------------------------

def test_parse_pairs_reads_typographic_apostrophes_as_ascii():
    pairs, _ = corpus.parse_pairs("I\u2019m home.\tJe suis chez moi.\n"
                                  "Tom\u2019s.\tC\u2019est \xe0 Tom.\n")
    assert pairs == [("i'm home .", "je suis chez moi ."),
                     ("tom's .", "c'est \xe0 tom .")]


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


# Finding and downloading the archive --------------------------------------

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
    ("over the size cap", corpus.DownloadError),
])
def test_download_failures_leave_nothing(server, tmp_path, monkeypatch,
                                         case, error):
    raw, sha1, _ = make_zip(extra=["../evil.txt"]
                            if case == "member with ../" else ())
    if case == "over the size cap":
        monkeypatch.setattr(corpus, "MAX_DOWNLOAD_BYTES", len(raw) - 1)
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


@pytest.mark.parametrize("declared", [None, "omit"])
def test_download_stops_at_the_size_cap(server, monkeypatch, declared):
    monkeypatch.setattr(corpus, "MAX_DOWNLOAD_BYTES", 1000)
    url = server("big.zip", b"x" * 200_000, declared)
    out = io.BytesIO()
    with pytest.raises(corpus.DownloadError, match="MAX_DOWNLOAD_BYTES"):
        corpus._fetch(url, out, timeout=10)
    if declared is None:  # refused on its Content-Length, body unread
        assert out.getvalue() == b""
    else:  # no Content-Length: read up to the cap only
        assert len(out.getvalue()) <= 1000


@pytest.fixture
def connections(monkeypatch):
    """Hosts that urllib connects to; only 127.0.0.1 gets through."""
    hosts, connect = [], socket.create_connection

    def create_connection(address, *args, **kwargs):
        hosts.append(address[0])
        if address[0] != "127.0.0.1":
            raise ConnectionRefusedError(f"test: no network ({address})")
        return connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", create_connection)
    return hosts


def test_every_redirect_is_checked_before_it_is_followed(
        server, connections, tmp_path):
    bad = "http://example.invalid/fra-eng.zip"
    url = server("first", status=302, Location=server(
        "second", status=301, Location=bad))
    with pytest.raises(corpus.DownloadError, match="refusing.*invalid"):
        corpus.download_archive(url, tmp_path)
    assert server.requests == ["/first", "/second"]
    assert connections == ["127.0.0.1"] * 2  # never example.invalid
    assert files_under(tmp_path) == []


def test_allowed_redirect_is_followed(server, connections, tmp_path):
    raw, sha1, _ = make_zip()
    url = server("old.zip", status=302, Location=server("new.zip", raw))
    assert corpus.download_archive(url, tmp_path, sha1=sha1).read_bytes() \
        == raw
    assert server.requests == ["/old.zip", "/new.zip"]


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


def test_fra_txt_over_the_size_cap_is_refused_unread(tmp_path,
                                                     monkeypatch):
    text = TEXT * 5000  # 550 KB that deflate to a few KB
    path, _, sha256 = put_zip(tmp_path / "big", text)
    assert path.stat().st_size < 20_000
    monkeypatch.setattr(corpus, "MAX_TEXT_BYTES", 100_000)
    opened, zip_open = [], zipfile.ZipFile.open

    def spy(self, name, *args, **kwargs):
        opened.append(name)
        return zip_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    size = len(text.encode())
    with pytest.raises(ValueError, match=f"{size} bytes.*MAX_TEXT_BYTES"):
        corpus.read_pairs(path, fra_sha256=sha256)
    assert opened == []  # nothing of fra.txt was read


def with_declared_size(raw, size):
    """The one-member zip ``raw`` with its declared size set to ``size``
    in both the local and the central header."""
    raw = bytearray(raw)
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = raw.index(signature) + offset
        raw[at:at + 4] = size.to_bytes(4, "little")
    return bytes(raw)


def test_fra_txt_longer_than_its_header_says_is_refused(tmp_path):
    raw, _, sha256 = make_zip(TEXT * 100)
    path = tmp_path / corpus.ARCHIVE_NAME
    path.write_bytes(with_declared_size(raw, 100))
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo(corpus.MEMBER).file_size == 100
    with pytest.raises(corpus.ChecksumError, match="damaged"):
        corpus.read_pairs(path, fra_sha256=sha256)


def test_reading_stops_once_more_bytes_come_than_declared():
    class Stream(io.BytesIO):
        def read(self, n=-1):
            chunk = super().read(n)
            self.total = getattr(self, "total", 0) + len(chunk)
            return chunk

    stream = Stream(b"x" * 100_000)

    class TrustingZip:  # a zip reader that would not stop at the size
        def getinfo(self, name):
            info = zipfile.ZipInfo(name)
            info.file_size = 10
            return info

        def open(self, name):
            return stream

    with pytest.raises(corpus.ChecksumError, match="more than the 10"):
        corpus._read_member(TrustingZip(), "fake.zip")
    assert stream.total <= 11


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
