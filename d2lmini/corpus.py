"""The English-French corpus: finding, downloading and reading it.

The corpus is the Tatoeba English-French pairs packaged by
manythings.org/anki (CC-BY 2.0; credit www.manythings.org/anki and
tatoeba.org), as the archive ``fra-eng.zip`` that d2l downloads.
``locate_archive`` looks for it in, in this order: the ``root``
argument, the directory named by ``$D2LMINI_DATA_DIR``, the per-user
cache ``$XDG_CACHE_HOME/d2lmini`` (or ``~/.cache/d2lmini``); it
downloads it into the cache only when it is in none of them, verified
and written atomically.  ``read_pairs`` checks the archive and returns
its ``(english, french)`` pairs, preprocessed by ``d2lmini.tokenizer``'s
rule (``preprocess`` and ``tokenize``, whose names this module offers
too), which the page follows for what a reader types.  This module knows
no vocabulary, tensor or model: ``d2lmini.data`` builds batches on it.
Every redirect hop is checked before it is requested, and a download
or ``fra.txt`` larger than ``MAX_DOWNLOAD_BYTES`` or ``MAX_TEXT_BYTES``
is refused before it fills the disk or the memory.
"""

import functools
import hashlib
import http.client
import os
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

from .tokenizer import (
    APOSTROPHES,
    DOUBLE_QUOTES,
    FOLDED_BELOW,
    WHITESPACE,
    preprocess,
    tokenize,
)
from .utils import atomic_write

__all__ = [
    "ARCHIVE_NAME", "ARCHIVE_SHA1", "DATA_URL", "ENV_VAR", "FRA_SHA256",
    "MAX_DOWNLOAD_BYTES", "MAX_TEXT_BYTES", "MEMBER", "ChecksumError",
    "CorpusNotFoundError", "DownloadError", "UnsafeArchiveError",
    "APOSTROPHES", "DOUBLE_QUOTES", "FOLDED_BELOW", "WHITESPACE",
    "cache_dir", "download_archive", "locate_archive", "parse_pairs",
    "preprocess", "read_pairs", "tokenize",
]


# d2l's copy of the archive, fetched over https from the same host.
DATA_URL = "https://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
ARCHIVE_NAME = "fra-eng.zip"
ARCHIVE_SHA1 = "94646ad1522d915e7b0f9296181140edcf86a4f5"  # that zip
MEMBER = "fra-eng/fra.txt"
# Taken over the text, so that any faithful repack of the zip is accepted.
FRA_SHA256 = ("0bb85dbaa1c896844649094d7eaf2e34"
              "bee34e84fe362b26ce7e8f2e12aae104")
ENV_VAR = "D2LMINI_DATA_DIR"
# Caps, about 4-5 times the real sizes (the zip has 3,412,837 bytes, its
# fra.txt 11,669,748): anything larger is refused, not read.
MAX_DOWNLOAD_BYTES = 16 << 20  # 16 MiB
MAX_TEXT_BYTES = 48 << 20  # 48 MiB
_CHUNK = 1 << 20
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class DownloadError(OSError):
    """The download failed: no network, an HTTP error, a cut-off body."""


class ChecksumError(ValueError):
    """A file's checksum is not the expected one."""


class UnsafeArchiveError(ValueError):
    """An archive member would land outside the target directory."""


class CorpusNotFoundError(FileNotFoundError):
    """The corpus is nowhere on disk and could not be downloaded."""


def cache_dir():
    """The per-user cache: ``$XDG_CACHE_HOME/d2lmini`` or
    ``~/.cache/d2lmini``."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "d2lmini"


def _check_url(url):
    """Allow https anywhere and plain http only on this machine."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http"
                                   and parts.hostname in _LOOPBACK):
        return
    raise ValueError(f"refusing to download {url!r}: use an https:// URL "
                     "(plain http is allowed only for 127.0.0.1)")


def _file_sha1(path):
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """Check each redirect with ``_check_url`` before following it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        try:
            _check_url(newurl)
        except ValueError as e:
            fp.close()
            raise DownloadError(f"{e}; {req.full_url} redirects there and "
                                "nothing was requested from it") from None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _too_big(what, size, cap_name, cap):
    return (f"{what} has {size} bytes, more than {cap_name}={cap}: "
            "refusing to read it; check that it is the corpus, or set a "
            f"larger d2lmini.corpus.{cap_name}")


def _fetch(url, out, timeout):
    """Stream ``url`` into the open file ``out``; return its sha1.  A
    Content-Length over ``MAX_DOWNLOAD_BYTES`` is refused before the
    body is read, a longer body as soon as it passes the cap."""
    cap, digest, size = MAX_DOWNLOAD_BYTES, hashlib.sha1(), 0
    opener = urllib.request.build_opener(_CheckedRedirects)
    try:
        with opener.open(url, timeout=timeout) as response:
            expected = response.length  # Content-Length, or None
            if expected is not None and expected > cap:
                raise DownloadError(_too_big(url, expected,
                                             "MAX_DOWNLOAD_BYTES", cap))
            while chunk := response.read(min(_CHUNK, cap + 1 - size)):
                size += len(chunk)
                if size > cap:
                    raise DownloadError(_too_big(url, f"over {cap}",
                                                 "MAX_DOWNLOAD_BYTES", cap))
                digest.update(chunk)
                out.write(chunk)
    except DownloadError:
        raise
    except urllib.error.HTTPError as e:
        raise DownloadError(f"{url} answered HTTP {e.code} {e.reason}") from e
    except (OSError, http.client.HTTPException) as e:
        raise DownloadError(f"could not download {url}: {e!r}") from e
    if expected is not None and size != expected:
        raise DownloadError(f"download of {url} was cut off: got {size} "
                            f"of {expected} bytes")
    return digest.hexdigest()


def _check_names(names, archive):
    """Raise ``UnsafeArchiveError`` for names that could escape a dir."""
    for name in names:
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if (not parts or parts[0] == "/" or ".." in parts
                or ":" in parts[0]):
            raise UnsafeArchiveError(
                f"{archive} holds the member {name!r}, which would land "
                "outside the target directory; refusing to use it")


def download_archive(url=None, dest_dir=None, *, sha1=None, timeout=60.0):
    """Download the corpus archive into ``dest_dir``, atomically.

    The body goes to a hidden temporary file next to the target; only
    once its sha1 matches, it is a zip holding ``MEMBER`` and no member
    escapes its directory is it renamed to ``dest_dir/fra-eng.zip``.  On
    any failure the temporary file is removed.

    Args:
        url: https URL (plain http only for 127.0.0.1); ``DATA_URL``
            when None.
        dest_dir: target directory; ``cache_dir()`` when None.
        sha1: expected sha1 of the zip; ``ARCHIVE_SHA1`` when None.
        timeout: seconds to wait for the server.

    Returns:
        The ``Path`` of the archive.
    """
    url = DATA_URL if url is None else url
    sha1 = ARCHIVE_SHA1 if sha1 is None else sha1
    _check_url(url)
    dest_dir = Path(cache_dir() if dest_dir is None else dest_dir)
    target = dest_dir / ARCHIVE_NAME
    with atomic_write(target) as out:
        got = _fetch(url, out, timeout)
        if got != sha1:
            raise ChecksumError(f"{url} has sha1 {got}, expected {sha1}")
        out.flush()
        try:
            with zipfile.ZipFile(out.name) as zf:
                names = zf.namelist()
        except zipfile.BadZipFile as e:
            raise DownloadError(f"{url} is not a zip archive") from e
        _check_names(names, url)
        if MEMBER not in names:
            raise DownloadError(f"{url} holds no {MEMBER}")
    return target


def _not_found(places, url, cause=None):
    where = "\n".join(f"  - {name}: {path}" for name, path in places)
    failed = "" if cause is None else \
        f"\nand downloading it failed: {cause}"
    return CorpusNotFoundError(
        f"{ARCHIVE_NAME} (the Tatoeba English-French pairs) is not in:\n"
        f"{where}{failed}\nTo provide it, download {url} on a machine "
        "with internet access (any zip holding the same "
        f"{MEMBER} will do) and pass root=DIR, or set {ENV_VAR}=DIR, "
        f"or copy it into {cache_dir()}.")


def locate_archive(root=None, *, download=True, url=None,
                   archive_sha1=None):
    """Find ``fra-eng.zip``, downloading it into the cache if need be.

    Args:
        root: a directory holding the archive, or the archive's path.
        download: when False, a missing archive is an error at once.
        url, archive_sha1: passed to ``download_archive``.

    Returns:
        The ``Path`` of the archive (not yet verified).
    """
    env = os.environ.get(ENV_VAR)
    places = [("root argument", root), (f"${ENV_VAR}", env),
              ("per-user cache", cache_dir())]
    for _, place in places:
        if place in (None, ""):
            continue
        path = Path(place)
        if path.suffix == ".zip" and path.is_file():
            return path
        if (path / ARCHIVE_NAME).is_file():
            return path / ARCHIVE_NAME
    places = [(name, "(not set)" if place in (None, "") else place)
              for name, place in places]
    url = DATA_URL if url is None else url
    if not download:
        raise _not_found(places, url)
    try:
        return download_archive(url, sha1=archive_sha1)
    except (OSError, ValueError) as e:
        raise _not_found(places, url, e) from e


def parse_pairs(text):
    """Preprocess a whole ``fra.txt`` and split it into pairs.

    Accepts lines of 2 columns (English, French) and of 3 (with an
    attribution column, dropped).  Blank lines are ignored; any other
    line, or one with an empty side, is skipped and counted.

    Returns:
        ``(pairs, num_skipped)``: a list of ``(english, french)``
        preprocessed strings with single spaces, and an int.
    """
    pairs, skipped = [], 0
    for line in preprocess(text).split("\n"):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) in (2, 3):
            # preprocess left no whitespace but spaces in a field
            eng, fra = (" ".join(filter(None, f.split(" ")))
                        for f in fields[:2])
            if eng and fra:
                pairs.append((eng, fra))
                continue
        skipped += 1
    return pairs, skipped


def _read_member(zf, path):
    """``MEMBER``'s bytes and sha256; its declared size is checked before
    reading, and reading stops when more bytes come than declared."""
    cap = zf.getinfo(MEMBER).file_size
    if cap > MAX_TEXT_BYTES:
        raise ValueError(_too_big(f"{MEMBER} in {path}", cap,
                                  "MAX_TEXT_BYTES", MAX_TEXT_BYTES))
    digest, raw = hashlib.sha256(), bytearray()
    with zf.open(MEMBER) as f:
        while chunk := f.read(min(_CHUNK, cap + 1 - len(raw))):
            if len(raw) + len(chunk) > cap:
                raise ChecksumError(f"{MEMBER} in {path} holds more than "
                                    f"the {cap} bytes its header declares")
            digest.update(chunk)
            raw += chunk
    return raw, digest.hexdigest()


@functools.lru_cache(maxsize=4)
def _read_archive(path, size, mtime_ns, archive_sha1, fra_sha256):
    """Verify and parse one archive; cached, so read once per process."""
    try:
        with zipfile.ZipFile(path) as zf:
            _check_names(zf.namelist(), path)
            if MEMBER not in zf.namelist():
                raise ValueError(f"{path} holds no {MEMBER}; is it the "
                                 "fra-eng.zip of d2l / manythings.org?")
            raw, got = _read_member(zf, path)
    except zipfile.BadZipFile as e:
        raise ChecksumError(f"{path} is damaged or no zip archive ({e}); "
                            f"replace it with {ARCHIVE_NAME} from "
                            f"{DATA_URL}") from e
    if got != fra_sha256 and _file_sha1(path) != archive_sha1:
        raise ChecksumError(
            f"{MEMBER} in {path} has sha256 {got}, expected {fra_sha256}:"
            " the file is damaged or another version; replace it with "
            f"{ARCHIVE_NAME} from {DATA_URL}")
    pairs, skipped = parse_pairs(raw.decode("utf-8"))
    return tuple(pairs), skipped


def read_pairs(root=None, *, download=True, url=None, archive_sha1=None,
               fra_sha256=None):
    """All sentence pairs of the corpus, preprocessed, in file order.

    The archive is found by ``locate_archive`` and accepted when its
    ``fra.txt`` has the sha256 ``fra_sha256`` or the zip itself has the
    sha1 ``archive_sha1`` (d2l's copy).  The result is cached per
    archive path, size and modification time: a process reads the
    corpus once.

    Returns:
        ``(pairs, num_skipped)``: a tuple of ``(english, french)``
        tuples and the number of malformed lines skipped.
    """
    path = locate_archive(root, download=download, url=url,
                          archive_sha1=archive_sha1).resolve()
    stat = path.stat()
    return _read_archive(
        str(path), stat.st_size, stat.st_mtime_ns,
        ARCHIVE_SHA1 if archive_sha1 is None else archive_sha1,
        FRA_SHA256 if fra_sha256 is None else fra_sha256)
