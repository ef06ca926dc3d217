"""What a notebook prints about its own run: tables, one-line verdicts
and exercise checks.

A Markdown cell says what holds for every run; the numbers of *this*
run, and the words that depend on them ("higher", "includes zero"),
are printed by the cell that measured them, worded here and tested, so
that no template or value-gluing cell shows in any front end.  Nothing
here is imported by the training code.
"""

import math
import numbers

__all__ = ["check", "higher_or_lower", "share", "table", "verdict"]


def _number(name, x):
    """``x`` as a finite float, or a ``TypeError``/``ValueError``."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        try:  # a 0-d tensor or NumPy scalar
            x = x.item()
        except (AttributeError, ValueError):
            raise TypeError(f"{name} must be a number, got {x!r} "
                            f"({type(x).__name__})") from None
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise TypeError(f"{name} must be a number, got {x!r}")
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be a finite number, got {x}")
    return x


def verdict(label, value, low, high, unit="BLEU", fmt="+.1f", level=95):
    """One line for a difference and its interval, with where the
    interval lies against zero, e.g.
    ``'attention - none: +3.1 BLEU [95 % CI +1.2, +5.0], above zero'``.

    Args:
        label: what was subtracted from what, e.g. ``'attention - none'``.
        value: the measured difference.
        low, high: the interval's ends (``low <= value <= high`` is not
            required: a bootstrap percentile interval need not hold it).
        unit: the unit printed after the value ('' for none).
        fmt: the format of the three numbers.
        level: the interval's confidence level in percent.
    """
    value = _number("value", value)
    low, high = _number("low", low), _number("high", high)
    if low > high:
        raise ValueError(f"the interval must have low <= high, got "
                         f"[{low}, {high}]")
    if low > 0:
        where = "above zero"
    elif high < 0:
        where = "below zero"
    else:
        where = "includes zero"
    unit = f" {unit}" if unit else ""
    return (f"{label}: {value:{fmt}}{unit} [{level} % CI {low:{fmt}}, "
            f"{high:{fmt}}], {where}")


def higher_or_lower(name_a, a, name_b, b, fmt=".1f"):
    """``'additive 26.1 is higher than none 21.0'``, or ``lower``, or
    ``'the same as'`` when the two print alike in ``fmt``."""
    a, b = _number(name_a, a), _number(name_b, b)
    pa, pb = format(a, fmt), format(b, fmt)
    if pa == pb:
        word = "the same as"
    else:
        word = "higher than" if a > b else "lower than"
    return f"{name_a} {pa} is {word} {name_b} {pb}"


def share(count, total, what):
    """``'12 of 1,000 sentences (1.2 %)'``, with ``what`` the plural."""
    if isinstance(count, bool) or isinstance(total, bool) or not (
            isinstance(count, numbers.Integral)
            and isinstance(total, numbers.Integral)):
        raise TypeError(f"count and total must be integers, got "
                        f"{count!r} and {total!r}")
    if total <= 0 or not 0 <= count <= total:
        raise ValueError(f"expected 0 <= count <= total and total > 0, "
                         f"got count={count}, total={total}")
    return f"{count:,} of {total:,} {what} ({100 * count / total:.1f} %)"


def table(rows, header):
    """Rows of cells as aligned text columns under ``header``; numbers
    are right-aligned, everything else left-aligned.

    Args:
        rows: a list of sequences, each as long as ``header``; floats
            should be formatted by the caller (strings are printed as
            they are).
        header: the column names.
    """
    header = [str(h) for h in header]
    rows = [list(r) for r in rows]
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(f"row {i} has {len(row)} cells, the header "
                             f"{len(header)}: {row!r}")
    cells = [header] + [[str(c) for c in r] for r in rows]
    right = [all(isinstance(r[j], numbers.Number) or _numeric(str(r[j]))
                 for r in rows) and bool(rows)
             for j in range(len(header))]
    widths = [max(len(r[j]) for r in cells) for j in range(len(header))]
    lines = []
    for r in cells:
        lines.append("  ".join(c.rjust(w) if right[j] else c.ljust(w)
                               for j, (c, w) in enumerate(zip(r, widths)))
                     .rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _numeric(text):
    text = text.replace(",", "").replace("%", "").strip()
    try:
        float(text)
    except ValueError:
        return False
    return True


def check(ok, what):
    """An exercise check's line: ``'pass: <what>'`` or ``'not yet:
    <what>'`` (it never prints the expected answer).  ``ok`` is a bool
    or a callable returning one; an exception it raises reads as not
    yet, with the exception's message."""
    if callable(ok):
        try:
            ok = ok()
        except Exception as error:  # the reader's code, not ours
            return f"not yet: {what} ({type(error).__name__}: {error})"
    if not isinstance(ok, bool):
        try:
            ok = bool(ok)
        except Exception:
            raise TypeError(f"ok must be a bool or a callable returning "
                            f"one, got {ok!r}") from None
    return f"{'pass' if ok else 'not yet'}: {what}"
