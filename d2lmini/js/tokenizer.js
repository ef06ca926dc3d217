  /* ---- d2lmini/js/tokenizer.js: what the reader types, as tokens -----
   * d2lmini.tokenizer's preprocess and tokenize, by the same explicit
   * rule (preprocess's docstring gives it; tests/test_live.py checks
   * that both sides agree on every code point): not by the browser's
   * Unicode tables, whose version is not Python's. */

  // d2lmini.tokenizer's WHITESPACE, APOSTROPHES, DOUBLE_QUOTES and
  // FOLDED_BELOW.
  const TEXT_RULES = {
    whitespace: "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680" +
      "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" +
      "\u2028\u2029\u202f\u205f\u3000\ufeff",
    apostrophes: "\u2018\u2019\u201b\u02bc\uff07\xb4`",
    doubleQuotes: "\u201c\u201d\u201e\u201f\uff02",
    foldedBelow: 0x530,
  };

  /** A regular expression's class of the characters of chars. */
  const charClass = (chars, negate) => "[" + (negate ? "^" : "") +
    chars.replace(/[\\\]^-]/g, "\\$&") + "]";

  // What becomes "'", '"' or a space (tab and newline stay: the corpus's
  // fields and lines; the tokens are the same).
  const TO_ASCII = new Map([
    ...Array.from(TEXT_RULES.apostrophes, (c) => [c, "'"]),
    ...Array.from(TEXT_RULES.doubleQuotes, (c) => [c, "\""]),
    ...Array.from(TEXT_RULES.whitespace, (c) => [c, " "])
      .filter(([c]) => !"\t\n ".includes(c))]);
  const TO_ASCII_RE = new RegExp(charClass([...TO_ASCII.keys()].join("")), "g");
  const FOLDED_RUN = new RegExp("[\\0-\\u" +
    (TEXT_RULES.foldedBelow - 1).toString(16).padStart(4, "0") + "]+", "g");
  const TOKEN = new RegExp(charClass(TEXT_RULES.whitespace, true) + "+", "g");
  const PUNCT_NO_SPACE = /(?<=[^ ])([,.!?])/g;

  /** d2lmini.tokenizer.preprocess: a leading byte-order mark dropped;
   * typographic apostrophes and double quotes to ' and ", whitespace but
   * tab and newline to spaces; runs of code points below foldedBelow
   * lowercased (a capital sigma to σ wherever it stands), then composed
   * (NFC); a space before each ,.!? that has none. */
  function preprocess(text) {
    const start = text.startsWith("\ufeff") ? 1 : 0;
    return text.slice(start).replace(TO_ASCII_RE, (c) => TO_ASCII.get(c))
      .replace(FOLDED_RUN, (run) => run.replace(/\u03a3/g, "\u03c3")
        .toLowerCase().normalize("NFC"))
      .replace(PUNCT_NO_SPACE, " $1");
  }

  /** d2lmini.tokenizer.preprocess, then its tokenize: the tokens between
   * runs of whitespace. */
  function tokenize(sentence) {
    return preprocess(sentence).match(TOKEN) || [];
  }
