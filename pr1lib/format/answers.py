"""Is a predicted final answer the gold one? Numbers by value, then text, then math-verify.

``pr1lib.format.grammar`` re-exports ``answers_match`` (its public home, a documented contract);
graders and rewards call it through there. Every function takes any string and runs in time linear
in its length: numbers are compared as digit strings (no ``int()``, so no int-string limit), and
math-verify only sees short, tame predictions that are one answer rather than a hedge.
"""

from __future__ import annotations

import re
from fractions import Fraction

_NUMBER_RE = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|[-+]?\.\d+")
_UNIT_TAIL_RE = re.compile(r"\s*(?:%|[A-Za-z][A-Za-z .]*)?")  # "19 pets", "50%"
# Words that make a tail more than a unit: "12 or eleven" hedges, "12 thousand" is another number.
_NOT_UNITS = frozenset(
    {
        "or",
        "and",
        "nor",
        "not",
        "but",
        "plus",
        "minus",
        "times",
        "over",
        "half",
        "hundred",
        "thousand",
        "million",
        "billion",
        "dozen",
    }
)
_AS_NUMBER_MAX_DIGITS = 4000  # below Python's int-string limit (4300): Fraction would raise past it
_BRACES = re.compile(r"[{}]")
# \left( ... \right) sizes a bracket and changes nothing: dropped before comparing, so the
# verdict on "(3, \frac{\pi}{2})" is the project's own, whatever math-verify's version says
_SIZED = re.compile(r"\\(?:left|right)(?![A-Za-z])")


def _unbox(text: str) -> str:
    """``\\boxed{X}`` -> ``X`` when the whole text is one boxed group, else ``text`` as is."""
    if not (text.startswith("\\boxed{") and text.endswith("}")):
        return text
    depth = 0
    for brace in _BRACES.finditer(text, len("\\boxed{"), len(text) - 1):
        depth += 1 if brace.group() == "{" else -1
        if depth < 0:  # "\\boxed{1}, \\boxed{2}": the first group closes early
            return text
    return text[len("\\boxed{") : -1] if depth == 0 else text


def _clean(answer: str) -> str:
    text = _unbox(_SIZED.sub("", answer).strip().strip("*").strip())
    text = re.sub(r"^\\?\$|\$$", "", text.replace("\\$", "$")).strip()
    return text[:-1].rstrip() if text.endswith(".") else text


def number_key(answer: str) -> tuple[str, str, str] | None:
    """A plain numeric answer as (sign, integer digits, fraction digits) without padding, else
    ``None``. Equal keys mean equal values, for numbers of any length (no int conversion).

    >>> number_key("$1,000.50"), number_key("-025"), number_key("0.0"), number_key("12 or eleven")
    (('', '1000', '5'), ('-', '25', ''), ('', '', ''), None)
    """
    text = _clean(answer) if isinstance(answer, str) else ""
    match = _NUMBER_RE.match(text)
    if match is None or not _UNIT_TAIL_RE.fullmatch(text, match.end()):
        return None
    if set(text[match.end() :].lower().split()) & _NOT_UNITS:
        return None
    number = match.group().replace(",", "")
    whole, _, frac = number.lstrip("+-").partition(".")
    whole, frac = whole.lstrip("0"), frac.rstrip("0")
    return ("-" if number.startswith("-") and (whole or frac) else "", whole, frac)


def as_number(answer: str) -> Fraction | None:
    """A plain numeric answer as an exact ``Fraction``, else ``None`` (also past 4,000 digits).

    >>> as_number("$1,000.") == 1000, as_number("025"), as_number("19 pets"), as_number("x+1")
    (True, Fraction(25, 1), Fraction(19, 1), None)
    """
    key = number_key(answer)
    if key is None or len(key[1]) + len(key[2]) > _AS_NUMBER_MAX_DIGITS:
        return None
    sign, whole, frac = key
    return Fraction(f"{sign}{whole or 0}.{frac or 0}")


_NON_FINITE = frozenset({"nan", "inf", "infinity"})  # what float() reads as no finite number


def non_finite(value: object) -> bool:
    """Whether ``value`` is a number that is no finite value (NaN, inf), or text that reads as
    one: such a gold answer is a damaged row, and no prediction matches it.

    >>> non_finite(float("nan")), non_finite("-Infinity"), non_finite("\\infty"), non_finite(3)
    (True, True, False, False)
    """
    if isinstance(value, str):
        return value.strip().lower().lstrip("+-") in _NON_FINITE
    try:
        return value != value or abs(value) == float("inf")  # NaN is not itself
    except TypeError:
        return False


def _number_text(value: int | float) -> str | None:
    """A finite number as text (``None`` past Python's int-string limit: no one wrote it)."""
    try:
        return str(value)
    except ValueError:
        return None


def answers_match(pred: str | None, gold: str) -> bool:
    """True when ``pred`` equals ``gold``: numbers by value, else text, else math-verify.
    A prediction with prose before a number (``The answer is 12 or 11``) is refused, not searched.

    >>> answers_match("025", "25"), answers_match("27.0", "27"), answers_match("$5", "5")
    (True, True, True)
    >>> answers_match("1,000", "1000"), answers_match("24", "25"), answers_match(None, "1")
    (True, False, False)
    >>> answers_match("\\\\frac{1}{2}", "0.5"), answers_match("The answer is 12 or 11", "12")
    (True, False)
    >>> answers_match("(3, \\\\frac{\\\\pi}{2})", "\\\\left( 3, \\\\frac{\\\\pi}{2} \\\\right)")
    True
    >>> answers_match("nan", "nan"), answers_match("inf", "inf")  # no finite gold: never right
    (False, False)
    >>> answers_match("3", 3), answers_match("2.5", 2.5)  # a number as gold: by value
    (True, True)
    """
    if isinstance(gold, (int, float)) and not isinstance(gold, bool) and not non_finite(gold):
        gold = _number_text(gold)  # a numeric gold (a data set's column) compares by value
    if not isinstance(pred, str) or not isinstance(gold, str) or not pred.strip():
        return False
    if non_finite(gold):
        return False
    a, b = number_key(pred), number_key(gold)
    if a is not None and b is not None:
        return a == b
    if re.sub(r"\s+", "", _clean(pred)) == re.sub(r"\s+", "", _clean(gold)):
        return True
    return _math_verify(_clean(pred), _clean(gold))


_WORD_RE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")  # a word, not a LaTeX command's name
_DIGIT_RE = re.compile(r"\d")
_MATH_WORDS = frozenset(
    {
        "sin",
        "cos",
        "tan",
        "cot",
        "sec",
        "csc",
        "log",
        "ln",
        "exp",
        "sqrt",
        "pi",
        "lcm",
        "gcd",
        "mod",
        "max",
        "min",
        "det",
        "arcsin",
        "arccos",
        "arctan",
    }
)


def _prose_before_number(text: str) -> bool:
    """A word (not a function name) with a digit after it: math-verify would pick a number out of
    ``The answer is 12 or 11``, so such a prediction is a hedge, not an answer."""
    digits = [m.start() for m in _DIGIT_RE.finditer(text)]
    return bool(digits) and any(
        word.group().lower() not in _MATH_WORDS and word.end() <= digits[-1]
        for word in _WORD_RE.finditer(text)
    )


_MATH_VERIFY_MAX_CHARS = 200  # sympy gets slow on long inputs
_MATH_VERIFY_SECONDS = 1  # per parse and per verify, where a timer is possible
_EXPLOSIVE_RE = re.compile(r"\^\s*\{[^{}]*\^|\^[^\s^]{0,4}\^|\^\s*\{?\s*\d{4,}|!")  # towers, n!


def _math_verify(pred: str, gold: str) -> bool:
    """math-verify's equivalence on short, tame inputs; any failure counts as a mismatch.

    math-verify's timers use ``signal.alarm``, which only works in the main thread; elsewhere
    they are off, so inputs that can make sympy compute for minutes (power towers such as
    ``10^{10^{10}}``, factorials) are refused up front, in every thread.
    """
    if max(len(pred), len(gold)) > _MATH_VERIFY_MAX_CHARS or _EXPLOSIVE_RE.search(pred + gold):
        return False
    if pred.count("\\boxed") > 1 or _prose_before_number(pred):  # candidates or prose: a hedge
        return False
    try:
        import logging
        import threading

        from math_verify import parse as mv_parse
        from math_verify import verify

        logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout disabled" notes
        timer = (
            _MATH_VERIFY_SECONDS if threading.current_thread() is threading.main_thread() else None
        )
        gold_expr = mv_parse(f"${gold}$", parsing_timeout=timer)
        # first_match: one reading of the prediction, not any number found anywhere in it
        pred_expr = mv_parse(f"${pred}$", parsing_timeout=timer, extraction_mode="first_match")
        return bool(gold_expr and pred_expr and verify(gold_expr, pred_expr, timeout_seconds=timer))
    except Exception:  # a grader must never crash a training step
        return False
