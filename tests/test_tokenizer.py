"""Tests of d2lmini.tokenizer: the rule that reads the corpus and what a
reader types (the page's side of it, in Node: tests/test_live.py)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from d2lmini import corpus, tokenizer


def test_corpus_offers_the_rule():
    for name in tokenizer.__all__:
        assert getattr(corpus, name) is getattr(tokenizer, name)
        assert name in corpus.__all__


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
    assert tokenizer.preprocess(raw) == expected
    assert tokenizer.tokenize(expected) == expected.split()


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet="aB ,.!?\xa0\u202f'\u2019\u0301\ufeff\u03a3\u0130\t"))
def test_preprocess_is_idempotent(text):
    once = tokenizer.preprocess(text)
    assert tokenizer.preprocess(once) == once


@pytest.mark.parametrize("typed, expected", [
    # A phone keyboard's apostrophe, as the corpus writes it (point 12).
    ("I\u2019m home.", "i'm home ."),
    ("\u2018Tom\u2019s\u2019 car", "'tom's' car"),
    ("I\u02bcm here", "i'm here"),
    ("don\u00b4t", "don't"),
    ("\u201cHi\u201d", '"hi"'),  # the corpus's double quotes are "
    ("Cafe\u0301", "caf\xe9"),  # a combining accent, composed (NFC)
    ("CAFE\u0301!", "caf\xe9 !"),
    ("\ufeffGo.", "go ."),  # a byte-order mark from a pasted file
])
def test_preprocess_reads_typed_text_as_the_corpus_writes_it(typed,
                                                             expected):
    assert tokenizer.preprocess(typed) == expected


@pytest.mark.parametrize("text, tokens", [
    ("a\ufeffb", ["a", "b"]),  # JavaScript's \s holds U+FEFF
    ("a\x1cb\x1fc", ["a", "b", "c"]),  # str.split() splits at these
    ("a\x85b\u2028c\u3000d", ["a", "b", "c", "d"]),
    ("a\u200bb", ["a\u200bb"]),  # a zero-width space is no space
])
def test_tokenize_splits_at_the_one_whitespace_set(text, tokens):
    assert tokenizer.tokenize(text) == tokens
    assert tokenizer.tokenize(tokenizer.preprocess(text)) == tokens


def test_the_whitespace_set_is_what_python_or_javascript_split_at():
    """``WHITESPACE`` holds every character that str.split() or
    JavaScript's \\s splits at (ECMA-262: its WhiteSpace and
    LineTerminator, U+FEFF among them), and no other."""
    python = {c for c in map(chr, range(0x110000)) if c.isspace()}
    javascript = set("\t\n\v\f\r \xa0\u1680\u2028\u2029\u202f\u205f"
                     "\u3000\ufeff") | set(map(chr, range(0x2000, 0x200b)))
    assert set(tokenizer.WHITESPACE) == python | javascript
    assert len(tokenizer.WHITESPACE) == len(set(tokenizer.WHITESPACE))


@pytest.mark.parametrize("text, expected", [
    ("\xc9T\xc9 \u0391\u0392\u0393 \u0416",
     "\xe9t\xe9 \u03b1\u03b2\u03b3 \u0436"),
    # A capital sigma is σ wherever it stands: no final ς, which hangs
    # on what the Unicode version calls a cased letter (U+0295, say).
    ("\u039f\u0394\u039f\u03a3 \u0295\u03a3",
     "\u03bf\u03b4\u03bf\u03c3 \u0295\u03c3"),
    ("\u0130", "i\u0307"),  # I with a dot: i and the dot, as lower()
    # From U+0530 (Armenian) on, letters are kept as typed: the case
    # mappings there change with the Unicode version (U+1C89, say).
    ("\u0531\u10a0\u1c89\ua7cb", "\u0531\u10a0\u1c89\ua7cb"),
])
def test_preprocess_lowercases_below_u0530_only(text, expected):
    assert tokenizer.preprocess(text) == expected


@pytest.mark.parametrize("bad", [None, b"Go.", ["Go."], 3])
def test_preprocess_and_tokenize_refuse_what_is_no_text(bad):
    with pytest.raises(TypeError, match="must be a string"):
        tokenizer.preprocess(bad)
    with pytest.raises(TypeError, match="must be a string"):
        tokenizer.tokenize(bad)
