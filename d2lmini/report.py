"""What a notebook prints about its own run: tables, one-line verdicts
and exercise checks.

A Markdown cell says what holds for every run; the numbers of *this*
run, and the words that depend on them ("higher", "includes zero"),
are printed by the cell that measured them, worded here and tested, so
that no template or value-gluing cell shows in any front end.  Nothing
here is imported by the training code.
"""

import decimal
import math
import numbers
import statistics

__all__ = ["check", "higher_or_lower", "share", "table", "verdict"]


def _number(name, x):
    """``x`` as a finite float, or a ``TypeError``/``ValueError``."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        try:  # a 0-d tensor or NumPy scalar
            x = x.item()
        except (AttributeError, ValueError, RuntimeError):
            raise TypeError(f"{name} must be a number, got {x!r} "
                            f"({type(x).__name__}); a tensor or array "
                            "must hold one element: reduce it first "
                            "(.mean(), [i])") from None
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise TypeError(f"{name} must be a number, got {x!r}")
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be a finite number, got {x}")
    return x


def _against_zero(low, high):
    """Where [low, high] lies: 'above zero', 'below zero' or
    'includes zero'."""
    if low > 0:
        return "above zero"
    return "below zero" if high < 0 else "includes zero"


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
    where = _against_zero(low, high)
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
    return f"{count:,} of {total:,} {what} ({_percent(count, total)} %)"


def _percent(count, total):
    """100 count / total to one decimal, never rounded to 0.0 or 100.0
    unless it is exactly that: 9,999 of 10,000 is '> 99.9', 1 of 10,000
    '< 0.1'."""
    text = f"{100 * count / total:.1f}"
    if text == "100.0" and count < total:
        return "> 99.9"
    if text == "0.0" and count > 0:
        return "< 0.1"
    return text


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
    rows = [[_cell(c, i) for c in r] for i, r in enumerate(rows)]
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


def _cell(value, row):
    """A table cell: a one-element tensor or array as its number; one
    with more elements is refused (it would print as ``tensor([...])``)."""
    if hasattr(value, "shape") and hasattr(value, "item"):
        try:
            return value.item()
        except (ValueError, RuntimeError):
            raise TypeError(
                f"row {row} has a cell of shape {tuple(value.shape)}: a "
                "cell holds one value; reduce it first (.mean(), [i]) or "
                "format it as a string") from None
    return value


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


# --- attention-pooling ---
def bound(value, side, digits=3):
    """A bound worded so that its rounding keeps it true:
    ``bound(0.5836, "at least")`` is ``'at least 0.583'`` (rounded
    down), ``bound(0.1741, "at most")`` is ``'at most 0.175'`` (rounded
    up); printing ``0.584`` as a lower bound of ``0.5836`` would be
    false.  The value is rounded from its shortest decimal form, as
    Python prints it (``0.29`` stays ``0.29``).

    Args:
        value: the number the bound is about (a real number or a 0-d
            tensor).
        side: ``'at least'`` (rounds towards minus infinity) or
            ``'at most'`` (rounds towards plus infinity).
        digits: the decimals printed, an integer from 0 to 15.
    """
    value = _number("value", value)
    if side not in ("at least", "at most"):
        raise ValueError(f"side must be 'at least' or 'at most', got "
                         f"{side!r}")
    if isinstance(digits, bool) or not isinstance(digits, numbers.Integral):
        raise TypeError(f"digits must be an integer, got {digits!r}")
    if not 0 <= digits <= 15:
        raise ValueError(f"digits must be from 0 to 15, got {digits}")
    step = decimal.Decimal(1).scaleb(-int(digits))
    rounding = (decimal.ROUND_FLOOR if side == "at least"
                else decimal.ROUND_CEILING)
    rounded = decimal.Decimal(repr(value)).quantize(step, rounding=rounding)
    if rounded == 0:
        rounded = abs(rounded)  # no "-0.000"
    return f"{side} {rounded}"


__all__ += ["bound"]


# --- transformer ---
def spread_over_seeds(label, intervals, unit="BLEU", fmt="+.1f"):
    """One line for a difference measured with several seeds: its range
    and where the seeds' intervals lie against zero, e.g.
    ``'Transformer - additive, 3 seeds: +8.1 to +9.2 BLEU, every 95 %
    interval above zero'``.

    Args:
        label: what was subtracted from what.
        intervals: one ``(value, low, high)`` per seed, e.g. the
            ``comparisons[label]`` entries of ``seeds.json``.
        unit: the unit printed after the range ('' for none).
        fmt: the format of the two numbers.
    """
    if isinstance(intervals, (str, bytes)):
        raise TypeError(f"intervals must be (value, low, high) triples, "
                        f"got {intervals!r}")
    try:
        triples = [tuple(t) for t in intervals]
    except TypeError:
        raise TypeError(f"intervals must be (value, low, high) triples, "
                        f"got {intervals!r}") from None
    if not triples:
        raise ValueError("intervals is empty: give one triple per seed")
    checked = []
    for i, t in enumerate(triples):
        if len(t) != 3:
            raise ValueError(f"interval {i} is not (value, low, high): "
                             f"{t!r}")
        value, low, high = (_number(f"intervals[{i}]", x) for x in t)
        if low > high:
            raise ValueError(f"interval {i} has low > high: {t!r}")
        checked.append((value, low, high))
    values = [v for v, _, _ in checked]
    n = len(checked)
    sides = [_against_zero(low, high) for _, low, high in checked]
    above, below = sides.count("above zero"), sides.count("below zero")
    if above == n or below == n:
        where = f"{'its' if n == 1 else 'every'} 95 % interval {sides[0]}"
    else:
        where = (f"intervals: {above} above zero, {below} below zero, "
                 f"{n - above - below} including zero")
    unit = f" {unit}" if unit else ""
    seeds = "1 seed" if n == 1 else f"{n} seeds"
    return (f"{label}, {seeds}: {min(values):{fmt}} to "
            f"{max(values):{fmt}}{unit}, {where}")


__all__ += ["spread_over_seeds"]


# --- self-attention-and-positional-encoding ---
def timing_verdict(name_a, times_a, name_b, times_b, unit="ms", scale=1e3,
                   fmt=".1f"):
    """Two layers' repeated timings compared in one line, with the order
    decided by the spread of the repeats, not by one timing, e.g.
    ``'attention 31.9 ms [30.1, 33.0] against RNN 35.2 ms [34.0, 36.1]
    (median [min, max] of 7 timings each): faster, every timing below'``.

    The verdict is ``'faster, every timing below'`` when the slowest
    timing of ``a`` is below the fastest of ``b``, ``'slower, every
    timing above'`` in the mirror case, and ``'no clear order, the
    ranges overlap'`` otherwise.  When both lists are equally long they
    are taken as paired repeats (measured in turn) and the line ends
    with how many pairs ``a`` won, e.g. ``'; faster in 5 of 7 pairs'``.

    Args:
        name_a, name_b: the two layers' names.
        times_a, times_b: at least two timings each, in seconds.
        unit: the unit printed; ``scale`` turns seconds into it.
        scale: the factor from seconds to ``unit`` (a positive number).
        fmt: the format of the printed times.
    """
    scale = _number("scale", scale)
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    runs = []
    for name, times in ((name_a, times_a), (name_b, times_b)):
        if isinstance(times, (str, bytes)) or not hasattr(times,
                                                          "__iter__"):
            raise TypeError(f"the timings of {name} must be a list of "
                            f"numbers, got {times!r}")
        values = [_number(f"a timing of {name}", t) for t in times]
        if len(values) < 2:
            raise ValueError(f"{name} needs at least two timings to show "
                             f"their spread, got {len(values)}")
        if min(values) < 0:
            raise ValueError(f"a timing of {name} is negative: "
                             f"{min(values)}")
        runs.append([scale * t for t in values])
    a, b = runs
    if max(a) < min(b):
        word = "faster, every timing below"
    elif min(a) > max(b):
        word = "slower, every timing above"
    else:
        word = "no clear order, the ranges overlap"

    def summary(name, values):
        return (f"{name} {statistics.median(values):{fmt}} {unit} "
                f"[{min(values):{fmt}}, {max(values):{fmt}}]")

    each = (f"{len(a)} timings each" if len(a) == len(b)
            else f"{len(a)} and {len(b)} timings")
    line = (f"{summary(name_a, a)} against {summary(name_b, b)} "
            f"(median [min, max] of {each}): {word}")
    if len(a) == len(b):
        wins = sum(x < y for x, y in zip(a, b))
        line += f"; faster in {wins} of {len(a)} pairs"
    return line


__all__ += ["timing_verdict"]


# --- bahdanau-attention ---

def diagonal_chance(T, S):
    """The diagonal share (``d2lmini.alignment.diagonal_share``) that a
    (T, S) map scores on average when each row's largest weight falls
    on one of the S valid source positions at random, all equally
    likely: the mean over rows i of the share of positions at most one
    from ``round(i (S - 1) / (T - 1))``.  The chance level beside which
    a measured diagonal share is read."""
    for name, x in (("T", T), ("S", S)):
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {x!r}")
        if x < 1:
            raise ValueError(f"{name} must be at least 1, got {x}")
    total = 0
    for i in range(T):
        d = round(i * (S - 1) / max(T - 1, 1))  # half to even, as torch
        total += min(d + 1, S - 1) - max(d - 1, 0) + 1
    return total / (T * S)


__all__ += ["diagonal_chance"]
