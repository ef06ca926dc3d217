"""The English-French corpus: finding it, reading it, batching it.

Shape legend for every comment and docstring in this module:
    B  batch size          T  time steps (``num_steps``)

The corpus is the Tatoeba English-French pairs packaged by
manythings.org/anki (CC-BY 2.0; credit www.manythings.org/anki and
tatoeba.org), as the archive ``fra-eng.zip`` that d2l downloads.
``locate_archive`` looks for it in, in this order: the ``root``
argument, the directory named by ``$D2LMINI_DATA_DIR``, the per-user
cache ``$XDG_CACHE_HOME/d2lmini`` (or ``~/.cache/d2lmini``); it
downloads it into the cache only when it is in none of them.  The data
pipeline knows no model.
"""

import contextlib
import functools
import hashlib
import http.client
import os
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections import Counter
from pathlib import Path, PurePosixPath

import torch
from torch.utils import data as tud

__all__ = [
    "ARCHIVE_NAME", "ARCHIVE_SHA1", "DATA_URL", "ENV_VAR", "FRA_SHA256",
    "MEMBER", "RESERVED_TOKENS", "BucketBatchSampler", "ChecksumError",
    "CorpusNotFoundError", "DownloadError", "MTFraEng",
    "UnsafeArchiveError", "Vocab", "cache_dir", "download_archive",
    "extract", "locate_archive", "parse_pairs", "preprocess",
    "read_pairs", "tokenize",
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
RESERVED_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
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


def _fetch(url, out, timeout):
    """Stream ``url`` into the open file ``out``; return its sha1."""
    digest, size = hashlib.sha1(), 0
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            _check_url(response.geturl())  # a redirect must stay https
            expected = response.headers.get("Content-Length")
            for chunk in iter(lambda: response.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
    except urllib.error.HTTPError as e:
        raise DownloadError(f"{url} answered HTTP {e.code} {e.reason}") from e
    except (OSError, http.client.HTTPException) as e:
        raise DownloadError(f"could not download {url}: {e!r}") from e
    if expected is not None and size != int(expected):
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
    dest_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest_dir, prefix=f".{ARCHIVE_NAME}.",
                               suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            got = _fetch(url, out, timeout)
        if got != sha1:
            raise ChecksumError(f"{url} has sha1 {got}, expected {sha1}")
        try:
            with zipfile.ZipFile(tmp) as zf:
                names = zf.namelist()
        except zipfile.BadZipFile as e:
            raise DownloadError(f"{url} is not a zip archive") from e
        _check_names(names, url)
        if MEMBER not in names:
            raise DownloadError(f"{url} holds no {MEMBER}")
        target = dest_dir / ARCHIVE_NAME
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


def extract(archive, dest):
    """Extract every member of ``archive`` into ``dest``.

    Every name is checked before anything is written: an absolute path,
    a ``..`` component or a name resolving outside ``dest`` raises
    ``UnsafeArchiveError``.  Returns the list of extracted paths.
    """
    dest = Path(dest)
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
        _check_names(names, archive)
        root = dest.resolve()
        for name in names:
            if not (root / name).resolve().is_relative_to(root):
                raise UnsafeArchiveError(
                    f"{archive} member {name!r} resolves outside {dest}")
        dest.mkdir(parents=True, exist_ok=True)
        zf.extractall(dest)
    return [dest / name for name in names]


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


_PUNCT_NO_SPACE = re.compile(r"(?<=[^ ])([,.!?])")


def preprocess(text):
    """d2l's preprocessing: non-breaking spaces to spaces, lower case,
    and a space before each ``,.!?`` that has none.

    >>> preprocess("Va\\u202f! I won.")
    'va ! i won .'
    """
    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    return _PUNCT_NO_SPACE.sub(r" \1", text)


def tokenize(sentence):
    """Split a preprocessed sentence at whitespace (no ``<eos>``)."""
    return sentence.split()


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
            eng, fra = (" ".join(f.split()) for f in fields[:2])
            if eng and fra:
                pairs.append((eng, fra))
                continue
        skipped += 1
    return pairs, skipped


@functools.lru_cache(maxsize=4)
def _read_archive(path, size, mtime_ns, archive_sha1, fra_sha256):
    """Verify and parse one archive; cached, so read once per process."""
    with zipfile.ZipFile(path) as zf:
        _check_names(zf.namelist(), path)
        if MEMBER not in zf.namelist():
            raise ValueError(f"{path} holds no {MEMBER}; is it the "
                             "fra-eng.zip of d2l / manythings.org?")
        raw = zf.read(MEMBER)
    got = hashlib.sha256(raw).hexdigest()
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


class Vocab:
    """Token <-> id maps with reserved tokens first.

    Ids are deterministic: the reserved tokens in the given order, then
    the counted tokens by descending frequency, ties alphabetically.

    Args:
        tokens: an iterable of tokens, of token lists (sentences), or a
            mix of both.
        min_freq: tokens seen fewer times map to ``<unk>``.
        reserved_tokens: must contain ``<pad> <bos> <eos> <unk>``; more
            may follow.
    """

    def __init__(self, tokens=(), min_freq=2,
                 reserved_tokens=RESERVED_TOKENS):
        if isinstance(tokens, str):
            raise TypeError("tokens must be a list of tokens or of token "
                            "lists, not one string; pass text.split()")
        if isinstance(min_freq, bool) or not isinstance(min_freq, int) \
                or min_freq < 1:
            raise ValueError(f"min_freq must be an int >= 1, got "
                             f"{min_freq!r}")
        reserved = list(reserved_tokens)
        missing = [t for t in RESERVED_TOKENS if t not in reserved]
        if missing or len(set(reserved)) != len(reserved):
            raise ValueError(f"reserved_tokens {reserved} must hold each "
                             f"of {list(RESERVED_TOKENS)} exactly once")
        counter = Counter()
        for item in tokens:
            counter.update([item] if isinstance(item, str) else item)
        bad = [t for t in counter if not isinstance(t, str)]
        if bad:
            raise TypeError(f"tokens must be strings, got {bad[:3]!r}")
        self.token_freqs = sorted(
            ((t, n) for t, n in counter.items() if t not in reserved),
            key=lambda tn: (-tn[1], tn[0]))
        self.idx_to_token = reserved + [
            t for t, n in self.token_freqs if n >= min_freq]
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}
        self.min_freq = min_freq

    def __len__(self):
        return len(self.idx_to_token)

    def __contains__(self, token):
        return token in self.token_to_idx

    def __getitem__(self, tokens):
        """Id of a token (``<unk>``'s if unknown), or a list of ids."""
        if isinstance(tokens, str):
            return self.token_to_idx.get(tokens, self.unk)
        if isinstance(tokens, (list, tuple)):
            return [self[t] for t in tokens]
        raise TypeError(f"look up a token or a list of tokens, got "
                        f"{type(tokens).__name__}")

    def to_tokens(self, indices):
        """Token of an id, or the tokens of a list or tensor of ids."""
        if torch.is_tensor(indices):
            indices = indices.tolist()
        if isinstance(indices, (list, tuple)):
            return [self.to_tokens(i) for i in indices]
        if isinstance(indices, bool) or not isinstance(indices, int) \
                or not 0 <= indices < len(self):
            raise ValueError(f"id {indices!r} is not in the vocabulary "
                             f"(ids are ints in [0, {len(self)}))")
        return self.idx_to_token[indices]

    pad = property(lambda self: self.token_to_idx["<pad>"])
    bos = property(lambda self: self.token_to_idx["<bos>"])
    eos = property(lambda self: self.token_to_idx["<eos>"])
    unk = property(lambda self: self.token_to_idx["<unk>"])

    def __repr__(self):
        head = ", ".join(self.idx_to_token[:8])
        return f"Vocab(size={len(self)}, min_freq={self.min_freq}: {head}"\
               f"{', ...' if len(self) > 8 else ''})"


class BucketBatchSampler(tud.Sampler):
    """Batches of examples of similar length, in a seeded random order.

    Each epoch shuffles the examples, cuts them into pools of
    ``pool_batches`` batches, sorts every pool by ``keys`` and cuts it
    into batches, then shuffles the order of all batches.

    Args:
        keys: (N,) sort key of every example, e.g. its length.
        batch_size: examples per batch (the last one may be smaller).
        generator: the ``torch.Generator`` that draws both shuffles.
        pool_batches: batches per sorted pool.
    """

    def __init__(self, keys, batch_size, generator, pool_batches=50):
        self.keys = torch.as_tensor(keys)
        self.batch_size, self.pool_batches = batch_size, pool_batches
        self.generator = generator

    def __len__(self):
        return -(-len(self.keys) // self.batch_size)

    def __iter__(self):
        perm = torch.randperm(len(self.keys), generator=self.generator)
        pool, batches = self.batch_size * self.pool_batches, []
        for start in range(0, len(perm), pool):
            idx = perm[start:start + pool]
            idx = idx[torch.argsort(self.keys[idx], stable=True)]
            batches.extend(idx.split(self.batch_size))
        order = torch.randperm(len(batches), generator=self.generator)
        for b in order.tolist():
            yield batches[b].tolist()


class _Batches(tud.Dataset):
    """A split's tensors, indexed by a list of ids -> one whole batch."""

    def __init__(self, arrays, trim):
        self.arrays, self.trim = arrays, trim

    def __len__(self):
        return len(self.arrays[0])

    def __getitem__(self, ids):
        ids = torch.as_tensor(ids, dtype=torch.long)
        src, tgt_in, src_len, label, tgt_len = (a[ids] for a in self.arrays)
        if self.trim and len(ids):
            # Cut the columns that are padding in every row of the batch.
            src = src[:, :int(src_len.max())]  # (B, T_src)
            t = int(tgt_len.max())
            tgt_in, label = tgt_in[:, :t], label[:, :t]  # (B, T_tgt)
        return src, tgt_in, src_len, label


def _check_count(name, value, minimum, none_ok=False):
    if value is None and none_ok:
        return
    if isinstance(value, bool) or not isinstance(value, int) \
            or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}"
                         f"{' or None' if none_ok else ''}, got {value!r}")


def _clean(sentence):
    """Preprocess one sentence and collapse its whitespace."""
    return " ".join(preprocess(sentence).split())


def _sentences(sentences, name):
    if isinstance(sentences, str) or not all(
            isinstance(s, str) for s in sentences):
        raise TypeError(f"{name} must be a list of strings, e.g. "
                        "['go .'], not one string or other objects")
    return [_clean(s) for s in sentences]


def _split(pairs, num_train, num_val, num_test, by_source, generator):
    """Cut ``pairs`` into train, val and test lists of pairs.

    ``generator`` (or None: corpus order) shuffles the pairs, or the
    English sources when ``by_source``.  Test takes ``num_test``
    sources, each once, none of them in train or val.  With
    ``num_train=None`` test and val come from the end, train is the rest.
    """
    groups = None  # English source -> its French sentences, in order
    if by_source or generator is not None or num_train is None:
        groups = {}
        for eng, fra in pairs:
            groups.setdefault(eng, []).append(fra)
    if by_source:
        units = list(groups.items())
    else:  # one pair at a time, lazily: the book's split reads 640
        units = ((eng, (fra,)) for eng, fra in pairs)
    if generator is not None:
        units = list(units)
        units = [units[i] for i in
                 torch.randperm(len(units), generator=generator).tolist()]
    if num_train is None:
        units = reversed(list(units))
    need = (f"; the selection has {len(pairs)} pairs, asked for "
            f"num_train={num_train}, num_val={num_val}, "
            f"num_test={num_test} (ask for fewer, or loosen the length "
            "limits)")
    it, seen, test_src, splits = iter(units), set(), set(), {}
    quotas = (("test", num_test), ("val", num_val)) if num_train is None \
        else (("train", num_train), ("val", num_val), ("test", num_test))
    for name, n in quotas:
        out = []
        while len(out) < n:
            eng, fras = next(it, (None, None))
            if eng is None:
                raise ValueError(f"not enough data for the {name} split"
                                 + need)
            if eng in test_src:
                continue
            if name == "test":  # each source once, unseen in train/val
                if eng not in seen:  # with its first translation
                    out.append((eng, fras[0] if groups is None
                                else groups[eng][0]))
                    test_src.add(eng)
                continue
            # The last group may be cut; by source, its rest is dropped.
            out += [(eng, fra) for fra in fras[:n - len(out)]]
            seen.add(eng)
        splits[name] = out
    if num_train is None:  # undo the reversal
        splits["val"].reverse()
        splits["test"].reverse()
        splits["train"] = [(eng, fra) for eng, fras in list(it)[::-1]
                           if eng not in test_src for fra in fras]
        if not splits["train"]:
            raise ValueError("no pairs are left for training" + need)
    return splits["train"], splits["val"], splits["test"]


class MTFraEng:
    """English->French pairs as padded id tensors, batched as in d2l.

    The defaults reproduce the d2l book's setting: the corpus's first
    512 pairs (its shortest) for training and the next 128 for
    validation, split by position (d2l loads one pair more by an
    off-by-one).  There train and val may share an English source (the
    book's split shares "dogs bark ."); ``split_by_source`` avoids it.
    The test split never shares a source with train or val, and holds
    each source once: ``references`` gives all its translations.
    Vocabularies come from the training split only.

    Args:
        batch_size: B.
        num_steps: T; each sequence, with ``<eos>``, is cut or padded to T.
        num_train: training pairs; None takes all pairs not in val/test.
        num_val: validation pairs.
        num_test: test English sources (0: no test split).
        max_src_len, max_tgt_len: keep only pairs with at most this many
            tokens (without ``<eos>``) on that side.
        shuffle: draw the splits at random (seeded), not in corpus order.
        split_by_source: split by unique English source so that no
            split shares one; defaults to ``shuffle``.
        seed: seeds the split and the order of the training batches.
        min_freq: vocabulary threshold, counted on the training split.
        bucket: batch training examples of similar length and cut every
            batch to its longest source and target (T_src, T_tgt <= T).
        root: where to look for ``fra-eng.zip`` first (``read_pairs``).
        pairs: raw ``(english, french)`` pairs to use instead of the
            corpus (preprocessed here).

    Shape:
        A batch is ``(src, tgt_input, src_valid_len, label)``, int64:
        src (B, T) source ids + ``<eos>`` + ``<pad>``; tgt_input (B, T)
        ``<bos>`` + target ids; src_valid_len (B,) counts ``<eos>``;
        label (B, T) tgt_input shifted left by one.

    Attributes:
        train_pairs, val_pairs, test_pairs: lists of preprocessed
            ``(english, french)`` pairs (test: one per source).
        src_vocab, tgt_vocab: ``Vocab`` of the training split.
        num_skipped: malformed corpus lines skipped when reading.
    """

    def __init__(self, batch_size, num_steps=9, num_train=512, num_val=128,
                 *, num_test=0, max_src_len=None, max_tgt_len=None,
                 shuffle=False, split_by_source=None, seed=0, min_freq=2,
                 bucket=False, root=None, pairs=None):
        for name, value, low, none_ok in (
                ("batch_size", batch_size, 1, False),
                ("num_steps", num_steps, 1, False),
                ("num_train", num_train, 1, True),
                ("num_val", num_val, 0, False),
                ("num_test", num_test, 0, False),
                ("max_src_len", max_src_len, 1, True),
                ("max_tgt_len", max_tgt_len, 1, True),
                ("seed", seed, 0, False)):
            _check_count(name, value, low, none_ok)
        self.batch_size, self.num_steps = batch_size, num_steps
        self.bucket = bool(bucket)
        if pairs is None:
            self._corpus, self.num_skipped = read_pairs(root)
        else:
            if isinstance(pairs, str) or not all(
                    len(p) == 2 and all(isinstance(s, str) for s in p)
                    for p in pairs):
                raise TypeError("pairs must be a list of (english, "
                                "french) string pairs")
            self._corpus = tuple((_clean(e), _clean(f)) for e, f in pairs)
            self.num_skipped = 0
        selected = [
            (e, f) for e, f in self._corpus
            if (max_src_len is None or len(e.split()) <= max_src_len)
            and (max_tgt_len is None or len(f.split()) <= max_tgt_len)
        ] if max_src_len or max_tgt_len else self._corpus
        self._generator = torch.Generator().manual_seed(seed)
        by_source = shuffle if split_by_source is None else split_by_source
        self.train_pairs, self.val_pairs, self.test_pairs = _split(
            selected, num_train, num_val, num_test, bool(by_source),
            self._generator if shuffle else None)
        self.src_vocab = Vocab([tokenize(e) for e, _ in self.train_pairs],
                               min_freq)
        self.tgt_vocab = Vocab([tokenize(f) for _, f in self.train_pairs],
                               min_freq)
        # Tensors are made once per split, not once per batch.
        self._arrays = {name: self._tensors(getattr(self, name + "_pairs"))
                        for name in ("train", "val", "test")}
        self._refs = self._sources = None  # made on first use

    def _encode(self, sentences, vocab, bos=False):
        """(N, T [+1 with bos]) ids of sentences + <eos>, and (N,) lens."""
        T, rows, lens = self.num_steps, [], []
        for s in sentences:
            ids = (vocab[tokenize(s)] + [vocab.eos])[:T]
            lens.append(len(ids))
            rows.append([vocab.bos] * bos + ids + [vocab.pad] * (T - len(ids)))
        return (torch.tensor(rows, dtype=torch.long).reshape(-1, T + bos),
                torch.tensor(lens, dtype=torch.long))

    def _tensors(self, pairs):
        src, src_len = self._encode([e for e, _ in pairs], self.src_vocab)
        tgt, tgt_len = self._encode([f for _, f in pairs], self.tgt_vocab,
                                    bos=True)  # (N, T + 1)
        return src, tgt[:, :-1], src_len, tgt[:, 1:], tgt_len

    def build(self, src_sentences, tgt_sentences=None):
        """A batch from raw sentences, with the training vocabularies.

        Without ``tgt_sentences`` (inference) tgt_input is ``<bos>``
        then ``<pad>`` and label is all ``<pad>``.

        Returns:
            ``(src, tgt_input, src_valid_len, label)`` as for a batch.
        """
        src_sentences = _sentences(src_sentences, "src_sentences")
        src, src_len = self._encode(src_sentences, self.src_vocab)
        if tgt_sentences is None:
            tgt = torch.full((len(src_sentences), self.num_steps + 1),
                             self.tgt_vocab.pad, dtype=torch.long)
            tgt[:, 0] = self.tgt_vocab.bos
        else:
            tgt_sentences = _sentences(tgt_sentences, "tgt_sentences")
            if len(tgt_sentences) != len(src_sentences):
                raise ValueError(
                    f"got {len(src_sentences)} source and "
                    f"{len(tgt_sentences)} target sentences; pass as many")
            tgt, _ = self._encode(tgt_sentences, self.tgt_vocab, bos=True)
        return src, tgt[:, :-1], src_len, tgt[:, 1:]

    def _loader(self, name, train=False):
        arrays = self._arrays[name]
        if len(arrays[0]) == 0:
            raise ValueError(f"the {name} split is empty: pass "
                             f"num_{name} > 0 to MTFraEng")
        batches = _Batches(arrays, trim=self.bucket)
        if train and self.bucket:
            src_len, tgt_len = arrays[2], arrays[4]
            sampler = BucketBatchSampler(
                tgt_len * (self.num_steps + 1) + src_len,
                self.batch_size, self._generator)
        else:
            order = tud.RandomSampler(batches, generator=self._generator) \
                if train else tud.SequentialSampler(batches)
            sampler = tud.BatchSampler(order, self.batch_size, False)
        return tud.DataLoader(batches, sampler=sampler, batch_size=None)

    def train_dataloader(self):
        """Training batches in a seeded random order (each epoch anew)."""
        return self._loader("train", train=True)

    def val_dataloader(self):
        """Validation batches in order."""
        return self._loader("val")

    def test_dataloader(self):
        """Test batches in order (one row per test source)."""
        return self._loader("test")

    def references(self, src_sentence):
        """All French translations of an English source in the corpus
        (preprocessed, in corpus order, ignoring the length limits)."""
        if self._refs is None:
            self._refs = {}
            for eng, fra in self._corpus:
                refs = self._refs.setdefault(eng, [])
                if fra not in refs:
                    refs.append(fra)
        src = _clean(src_sentence)
        if src not in self._refs:
            raise ValueError(f"{src!r} is not an English sentence of the "
                             "corpus, so it has no reference translation")
        return list(self._refs[src])

    def splits_of(self, src_sentence):
        """Names of the splits that hold this English source, e.g.
        ``('train',)``; empty if none does."""
        if self._sources is None:
            self._sources = {name: {e for e, _ in getattr(self, name +
                                                          "_pairs")}
                             for name in ("train", "val", "test")}
        src = _clean(src_sentence)
        return tuple(name for name, srcs in self._sources.items()
                     if src in srcs)

    def describe(self, sentence, side="src"):
        """What the model sees: one ``(token, id, token_of_id)`` row per
        time step; unknown tokens show as ``<unk>`` in the last column.
        ``side`` is "src" (English) or "tgt" (French, as the label)."""
        if side not in ("src", "tgt"):
            raise ValueError(f"side must be 'src' or 'tgt', got {side!r}")
        vocab = self.src_vocab if side == "src" else self.tgt_vocab
        T = self.num_steps
        tokens = (tokenize(_clean(sentence)) + ["<eos>"])[:T]
        tokens += ["<pad>"] * (T - len(tokens))
        return [(t, i, vocab.to_tokens(i))
                for t, i in zip(tokens, vocab[tokens])]

    def __repr__(self):
        return (f"MTFraEng(train={len(self.train_pairs)} pairs, "
                f"val={len(self.val_pairs)} pairs, "
                f"test={len(self.test_pairs)} sources, "
                f"src_vocab={len(self.src_vocab)}, "
                f"tgt_vocab={len(self.tgt_vocab)}, "
                f"num_steps={self.num_steps})")
