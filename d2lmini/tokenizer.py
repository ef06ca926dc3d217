"""From text to tokens: the one rule by which d2lmini reads the corpus
and what a reader types, in Python and in the page.

``preprocess`` is d2l's preprocessing of the corpus, made explicit so
that ``d2lmini/js/tokenizer.js`` follows the same rule, with the same
sets of characters, whatever the Unicode versions of Python and of the
browser; ``tokenize`` splits its output into tokens.  ``d2lmini.corpus``
(which reads ``fra.txt`` with them) offers both names too.
"""

import re
import unicodedata

__all__ = ["APOSTROPHES", "DOUBLE_QUOTES", "FOLDED_BELOW", "WHITESPACE",
           "preprocess", "tokenize"]

# The sets of the rule, which d2lmini/js/tokenizer.js has too (its
# TEXT_RULES; tests/test_live.py checks that both sides agree on every
# code point).
# Every character that Python's str.split() or JavaScript's \s splits at:
# tab to carriage return, the file, group, record and unit separators,
# the space, next line (U+0085), the no-break spaces, the spaces of
# U+1680, U+2000-U+200A, U+205F and U+3000, the line and paragraph
# separators, and U+FEFF (the byte-order mark, a space to \s).
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
              + "".join(map(chr, range(0x2000, 0x200b)))
              + "\u2028\u2029\u202f\u205f\u3000\ufeff")
# What keyboards type for the corpus's apostrophe ' (a phone's ’, say)
# and for its double quote ".
APOSTROPHES = "\u2018\u2019\u201b\u02bc\uff07\xb4`"
DOUBLE_QUOTES = "\u201c\u201d\u201e\u201f\uff02"
# Code points below this one are lowercased and composed (NFC); from it
# on (Armenian, U+0530) characters are kept as they are.
FOLDED_BELOW = 0x530

_TO_ASCII = {**dict.fromkeys(APOSTROPHES, "'"),
             **dict.fromkeys(DOUBLE_QUOTES, '"'),
             **{c: " " for c in WHITESPACE if c not in "\t\n "}}
_TO_ASCII_RE = re.compile(f"[{re.escape(''.join(_TO_ASCII))}]")
_FOLDED_RUN = re.compile(f"[\\x00-\\u{FOLDED_BELOW - 1:04x}]+")
_TOKEN = re.compile(f"[^{re.escape(WHITESPACE)}]+")
_PUNCT_NO_SPACE = re.compile(r"(?<=[^ ])([,.!?])")


def _fold(run):
    """Step 3 of ``preprocess`` for one run: lowercased (a capital sigma
    to σ, never to the final ς), then composed."""
    lower = run.group().replace("\u03a3", "\u03c3").lower()
    return unicodedata.normalize("NFC", lower)


def _check_text(name, text):
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a string, got "
                        f"{type(text).__name__} {text!r:.40}")


def preprocess(text):
    """d2l's preprocessing (non-breaking spaces to spaces, lower case, a
    space before each ``,.!?`` that has none), by one explicit rule that
    the page's tokenizer (``d2lmini/js/tokenizer.js``) follows too, so
    that a sentence typed in the page reads as the corpus does:

    1. a leading byte-order mark (U+FEFF) is dropped;
    2. each of ``APOSTROPHES`` (a phone's ’, ‘ ʼ ´ ...) becomes ``'``
       and each of ``DOUBLE_QUOTES`` (“ ” „ ...) ``"``, as the corpus
       writes them; each of ``WHITESPACE`` but tab and newline becomes
       a space;
    3. each run of code points below ``FOLDED_BELOW`` (U+0530: Latin,
       IPA, Greek, Coptic and Cyrillic) is lowercased, a capital sigma
       to σ wherever it stands, then composed (NFC: ``e`` and a
       combining acute become ``é``); the characters from U+0530 on
       are kept as they are;
    4. a space goes before each ``,.!?`` that has none.

    ``tokenize`` then splits at runs of ``WHITESPACE``.  The sets are
    explicit because the Unicode tables of Python and of browsers
    differ by version (Python 3.11 has Unicode 14, Node 20 Unicode 17,
    which lowercases 55 later letters, from U+1C89 on, that 14 does not
    know).  Below U+0530 every code point but nine unassigned Greek ones
    was in Unicode 7.0 (2014), and their lower case and NFC are the same
    in both; not every other property is (ʕ, U+0295, is a cased letter
    in 14 and not in 17, which would change whether ``str.lower()``
    writes a final ς beside it: hence σ).  Every character of the
    corpus is below U+0530 or has no case and no decomposition
    (– — … ‽ ₂ € ‘ ’ and U+200B), so only its ‘ ’ change (to ').

    >>> preprocess("Va\\u202f! I\\u2019m caf\\u0065\\u0301.")
    "va ! i'm café ."
    """
    _check_text("text", text)
    if text.startswith("\ufeff"):
        text = text[1:]
    text = _TO_ASCII_RE.sub(lambda m: _TO_ASCII[m.group()], text)
    text = _FOLDED_RUN.sub(_fold, text)
    return _PUNCT_NO_SPACE.sub(r" \1", text)


def tokenize(sentence):
    """Split a preprocessed sentence at runs of ``WHITESPACE`` (no
    ``<eos>``)."""
    if not isinstance(sentence, str):
        _check_text("sentence", sentence)
    if sentence.isascii():  # str.split()'s ASCII whitespace is ours
        return sentence.split()
    return _TOKEN.findall(sentence)
