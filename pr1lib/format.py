"""The parallel-thinking format: tags, parser, two validators, answers and statistics.

A response is free text with zero or more blocks::

    text <Parallel><Path>a</Path><Path>b</Path></Parallel>
    <Summary>s</Summary> more text ... Final Answer: 42

Two validators share one tag regex:

* ``validate(text, strict=False)`` behaves like the official checker
  (reference/paper-spec.md §1.3): a stack machine over the tags that lets a few things
  through on purpose (a ``<Path>`` outside any block, an unclosed ``<Summary>``, well-formed
  nesting). It returns one message per error the official code would report, in the same order.
* ``validate(text, strict=True)`` is this project's grammar (DESIGN.md): flat blocks of at
  least two non-empty paths, only whitespace between the block's tags, and exactly one closed
  ``<Summary>`` right after each ``</Parallel>``.

Simplification relative to the paper: the official reward code decodes twice (with and without
special tokens); here the tags are plain added tokens, so one decoded string carries both the
tags and the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

PARALLEL, END_PARALLEL = "<Parallel>", "</Parallel>"
PATH, END_PATH = "<Path>", "</Path>"
SUMMARY, END_SUMMARY = "<Summary>", "</Summary>"
TAGS = (PARALLEL, END_PARALLEL, PATH, END_PATH, SUMMARY, END_SUMMARY)
TAG_RE = re.compile(r"</?(?:Parallel|Path|Summary)>")  # the official checker's tag pattern
FINAL_ANSWER_RE = re.compile(r"final answer\s*:", re.IGNORECASE)


# ----------------------------------------------------------------------------- structure
@dataclass(frozen=True)
class Segment:
    """A tagged span: ``text`` between the tags; ``start``/``end`` cover the tags too."""

    text: str
    start: int
    end: int


@dataclass
class Block:
    """One ``<Parallel>`` block: its paths and the summary that follows it (or ``None``)."""

    start: int
    end: int = -1  # just past ``</Parallel>``; -1 while (or if) it is never closed
    paths: list[Segment] = field(default_factory=list)
    summary: Segment | None = None


@dataclass
class Response:
    """A parsed response: free text (``str``) and ``Block``s in order, plus strict errors."""

    parts: list[str | Block] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def blocks(self) -> list[Block]:
        return [part for part in self.parts if isinstance(part, Block)]

    @property
    def valid(self) -> bool:
        return not self.errors


# ----------------------------------------------------------------------------- strict parser
_OPENED = {"block": PARALLEL, "path": PATH, "summary": SUMMARY}


@dataclass
class _Scanner:
    """The strict grammar as a five-state machine: text, block, path, after, summary."""

    text: str
    out: Response = field(default_factory=Response)
    state: str = "text"
    cursor: int = 0  # end of the last consumed tag
    opened: int = 0  # where the open path / summary tag starts
    buffer: list[str] = field(default_factory=list)  # free text not yet in ``out.parts`` (a list: linear)
    block: Block | None = None

    def error(self, pos: int, message: str) -> None:
        self.out.errors.append(f"char {pos}: {message}")

    def flush_text(self) -> None:
        text = "".join(self.buffer)
        if text:
            self.out.parts.append(text)
        self.buffer = []

    def gap(self, start: int, end: int) -> None:
        """Handle the untagged text in ``text[start:end]`` for the current state."""
        piece = self.text[start:end]
        if self.state == "text":
            self.buffer.append(piece)
        elif self.state == "block" and piece.strip():
            self.error(start, "only whitespace may sit between the tags of a block")
        elif self.state == "after" and piece.strip():
            self.error(start, f"expected {SUMMARY} right after {END_PARALLEL}")
            self.state = "text"
            self.buffer.append(piece)

    def tag(self, tag: str, start: int, end: int) -> None:
        """Apply one tag: a legal transition, or an error (the tag is then kept as text)."""
        step = _TRANSITIONS.get((self.state, tag))
        if step is not None:
            step(self, start, end)
            return
        if self.state == "after":  # the summary is missing; re-read the tag as free text
            self.error(start, f"expected {SUMMARY} right after {END_PARALLEL}, found {tag}")
            self.state = "text"
            self.tag(tag, start, end)
            return
        self.error(start, _misplaced(tag, self.state))
        if self.state == "text":
            self.buffer.append(tag)

    def finish(self) -> Response:
        self.gap(self.cursor, len(self.text))
        if self.state == "path":  # keep the truncated element in the structure
            self.block.paths.append(self._close_segment(len(self.text), len(self.text)))
        elif self.state == "summary":
            self.block.summary = self._close_segment(len(self.text), len(self.text))
        if self.state != "text":
            what = {"block": f"unclosed {PARALLEL}", "path": f"unclosed {PATH}",
                    "after": f"missing {SUMMARY} after the last {END_PARALLEL}",
                    "summary": f"unclosed {SUMMARY}"}[self.state]
            self.error(len(self.text), what + " (truncated response?)")
        self.flush_text()
        return self.out

    def _close_segment(self, start: int, end: int) -> Segment:
        inner_start = self.opened + len(_OPENED[self.state])
        return Segment(self.text[inner_start:start], self.opened, end)


def _misplaced(tag: str, state: str) -> str:
    if tag == PARALLEL:
        return f"nested {PARALLEL} (blocks may not nest)"
    if tag == PATH:
        return f"{PATH} outside a {PARALLEL} block" if state == "text" else f"nested {PATH}"
    if tag == SUMMARY:
        return f"{SUMMARY} that does not follow a {END_PARALLEL}"
    if state == "block" and tag == END_SUMMARY:
        return f"stray {tag} inside a block"
    return f"stray {tag} (nothing open to close)" if state == "text" else f"misplaced {tag}"


def _open_block(s: _Scanner, start: int, end: int) -> None:
    s.flush_text()
    s.block = Block(start=start)
    s.out.parts.append(s.block)
    s.state = "block"


def _open_segment(state: str):
    def step(s: _Scanner, start: int, end: int) -> None:
        s.opened, s.state = start, state
    return step


def _close_path(s: _Scanner, start: int, end: int) -> None:
    path = s._close_segment(start, end)
    if not path.text.strip():
        s.error(path.start, f"empty {PATH}")
    s.block.paths.append(path)
    s.state = "block"


def _close_block(s: _Scanner, start: int, end: int) -> None:
    s.block.end = end
    full = sum(1 for path in s.block.paths if path.text.strip())
    if full < 2:
        s.error(s.block.start, f"a block needs at least 2 non-empty paths, found {full}")
    s.state = "after"


def _close_summary(s: _Scanner, start: int, end: int) -> None:
    s.block.summary = s._close_segment(start, end)
    s.state = "text"


_TRANSITIONS = {
    ("text", PARALLEL): _open_block,
    ("block", PATH): _open_segment("path"),
    ("path", END_PATH): _close_path,
    ("block", END_PARALLEL): _close_block,
    ("after", SUMMARY): _open_segment("summary"),
    ("summary", END_SUMMARY): _close_summary,
}


def parse(text: str) -> Response:
    """Split ``text`` into free text and blocks (never raises; problems go to ``errors``).

    >>> r = parse("a <Parallel><Path>x</Path><Path>y</Path></Parallel> <Summary>s</Summary> b")
    >>> [p.text for p in r.blocks[0].paths], r.blocks[0].summary.text, r.valid
    (['x', 'y'], 's', True)
    """
    if not isinstance(text, str):
        return Response(errors=[f"expected a str, got {type(text).__name__}"])
    scanner = _Scanner(text)
    for match in TAG_RE.finditer(text):
        scanner.gap(scanner.cursor, match.start())
        scanner.tag(match.group(), match.start(), match.end())
        scanner.cursor = match.end()
    return scanner.finish()


def render(parts: Response | list[str | Block], summary_sep: str = "\n") -> str:
    """Structure -> text in the canonical layout (tags adjacent, ``summary_sep`` before Summary).

    >>> render(["Hi ", Block(0, paths=[Segment("a", 0, 0), Segment("b", 0, 0)],
    ...                      summary=Segment("ok", 0, 0)), " done"])
    'Hi <Parallel><Path>a</Path><Path>b</Path></Parallel>\\n<Summary>ok</Summary> done'
    """
    out = []
    for part in parts.parts if isinstance(parts, Response) else parts:
        if isinstance(part, str):
            out.append(part)
            continue
        out.append(PARALLEL + "".join(f"{PATH}{p.text}{END_PATH}" for p in part.paths))
        out.append(END_PARALLEL)
        if part.summary is not None:
            out.append(f"{summary_sep}{SUMMARY}{part.summary.text}{END_SUMMARY}")
    return "".join(out)


def linearize(text: str) -> str:
    """``text`` without parallel thinking: each block becomes its first path, its summary is dropped.
    A rule-teacher trace keeps the reference line first, so this gives back the plain solution.

    >>> linearize("a\\n<Parallel><Path>x=2</Path><Path>y</Path></Parallel>\\n<Summary>s</Summary>\\nFinal Answer: 2")
    'a\\nx=2\\nFinal Answer: 2'
    """
    response = parse(text)
    if not response.valid:
        raise ValueError(f"cannot linearize a malformed response: {response.errors[0]}")
    return "".join(part if isinstance(part, str) else part.paths[0].text for part in response.parts)


# ----------------------------------------------------------------------------- validators
def official_errors(text: str) -> list[str]:
    """The official checker's verdict, error for error (our wording; see §1.3 of the spec).

    >>> official_errors("<Path>outside</Path> ok")   # quirk: a lone path passes
    []
    >>> official_errors("<Parallel><Path>a</Path></Parallel><Summary>")
    ['tag #3: </Parallel> closes a block with only 1 path(s) (needs 2)']
    """
    tags = TAG_RE.findall(text)
    stack: list[str] = []
    path_counts: list[int] = []  # one counter per open <Parallel>, a stack of its own
    errors: list[str] = []
    summary_expected, summaries = False, 0
    for i, tag in enumerate(tags):
        if tag == PARALLEL:
            stack.append(tag)
            path_counts.append(0)
            summary_expected = False
        elif tag == PATH:
            stack.append(tag)
        elif tag in (END_PATH, END_PARALLEL):
            opener = PATH if tag == END_PATH else PARALLEL
            if not stack or stack[-1] != opener:
                errors.append(f"tag #{i}: {tag} but the innermost open tag is "
                              f"{stack[-1] if stack else 'nothing'}")
                continue
            stack.pop()
            if tag == END_PATH and path_counts:
                path_counts[-1] += 1  # counts for the newest open block, wherever the path is
            elif tag == END_PARALLEL:
                count = path_counts.pop()
                if count < 2:
                    errors.append(f"tag #{i}: {tag} closes a block with only {count} path(s) "
                                  "(needs 2)")
                summary_expected = True
        elif tag == SUMMARY:
            if not summary_expected:
                errors.append(f"tag #{i}: {SUMMARY} does not follow a {END_PARALLEL}")
            summary_expected = False
            summaries += 1
        # </Summary> is ignored by the official checker
    return errors + _official_end_checks(text, stack, summary_expected, summaries)


def _official_end_checks(text: str, stack: list[str], expected: bool, summaries: int) -> list[str]:
    errors = []
    if stack:
        errors.append(f"end: still open {stack}")
    if expected:
        errors.append(f"end: no {SUMMARY} after the last {END_PARALLEL}")
    closes = text.count(END_PARALLEL)
    if summaries != closes:
        errors.append(f"end: {summaries} {SUMMARY} tag(s) for {closes} {END_PARALLEL} tag(s)")
    return errors


def validate(text: str, strict: bool = True) -> list[str]:
    """Error messages for ``text`` (``[]`` when valid); ``strict=False`` = official checker.

    >>> validate("plain text, no tags")
    []
    >>> validate("<Path>x</Path>", strict=False), validate("<Path>x</Path>")
    ([], ['char 0: <Path> outside a <Parallel> block', 'char 7: stray </Path> (nothing open to close)'])
    """
    if not isinstance(text, str):
        return [f"expected a str, got {type(text).__name__}"]
    return parse(text).errors if strict else official_errors(text)


# ----------------------------------------------------------------------------- answers
def path_ranges(text: str) -> list[tuple[int, int]]:
    """Character ranges inside ``<Path>`` spans (an unclosed path runs to the end).

    >>> path_ranges("a<Path>b</Path>c<Path>d")
    [(1, 15), (16, 23)]
    """
    ranges, depth, start = [], 0, 0
    for match in TAG_RE.finditer(text):
        if match.group() == PATH:
            if depth == 0:
                start = match.start()
            depth += 1
        elif match.group() == END_PATH and depth > 0:
            depth -= 1
            if depth == 0:
                ranges.append((start, match.end()))
    if depth > 0:
        ranges.append((start, len(text)))
    return ranges


def extract_answer(text: str) -> str | None:
    """The value of the last ``Final Answer:`` outside every ``<Path>``; ``None`` if absent.
    As the official regex reads it, an empty rest of the line means the value is on the next line.

    >>> extract_answer("<Path>Final Answer: 3</Path> so Final Answer: 4\\n")
    '4'
    >>> extract_answer("<Path>Final Answer: 3</Path>") is None, extract_answer("Final Answer:\\n12")
    (True, '12')
    """
    if not isinstance(text, str):
        return None
    inside, k, found = path_ranges(text), 0, None
    for match in FINAL_ANSWER_RE.finditer(text):  # both in text order: one linear sweep
        while k < len(inside) and inside[k][1] <= match.start():
            k += 1
        if k == len(inside) or match.start() < inside[k][0]:
            found = match
    if found is None:
        return None
    line = _VALUE_RE.match(text, found.end()).group(1)
    return TAG_RE.split(line, maxsplit=1)[0].strip()


_VALUE_RE = re.compile(r"\s*([^\n]*)")  # like the official "\s*([^\n]+)": skips blank lines first


_NUMBER_RE = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|[-+]?\.\d+")
_UNIT_TAIL_RE = re.compile(r"\s*(?:%|[A-Za-z][A-Za-z .]*)?")  # "19 pets", "50%"
# Words that make a tail more than a unit: "12 or eleven" hedges, "12 thousand" is another number.
_NOT_UNITS = frozenset({"or", "and", "nor", "not", "but", "plus", "minus", "times", "over", "half",
                        "hundred", "thousand", "million", "billion", "dozen"})
_AS_NUMBER_MAX_DIGITS = 4000  # below Python's int-string limit (4300): Fraction would raise past it
_BRACES = re.compile(r"[{}]")


def _unbox(text: str) -> str:
    """``\\boxed{X}`` -> ``X`` when the whole text is one boxed group, else ``text`` as is."""
    if not (text.startswith("\\boxed{") and text.endswith("}")):
        return text
    depth = 0
    for brace in _BRACES.finditer(text, len("\\boxed{"), len(text) - 1):
        depth += 1 if brace.group() == "{" else -1
        if depth < 0:  # "\\boxed{1}, \\boxed{2}": the first group closes early
            return text
    return text[len("\\boxed{"):-1] if depth == 0 else text


def _clean(answer: str) -> str:
    text = _unbox(answer.strip().strip("*").strip())
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
    if set(text[match.end():].lower().split()) & _NOT_UNITS:
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


def answers_match(pred: str | None, gold: str) -> bool:
    """True when ``pred`` equals ``gold``: numbers by value, else text, else math-verify.
    A prediction with prose before a number (``The answer is 12 or 11``) is refused, not searched.

    >>> answers_match("025", "25"), answers_match("27.0", "27"), answers_match("$5", "5")
    (True, True, True)
    >>> answers_match("1,000", "1000"), answers_match("24", "25"), answers_match(None, "1")
    (True, False, False)
    >>> answers_match("\\\\frac{1}{2}", "0.5"), answers_match("The answer is 12 or 11", "12")
    (True, False)
    """
    if not isinstance(pred, str) or not isinstance(gold, str) or not pred.strip():
        return False
    a, b = number_key(pred), number_key(gold)
    if a is not None and b is not None:
        return a == b
    if re.sub(r"\s+", "", _clean(pred)) == re.sub(r"\s+", "", _clean(gold)):
        return True
    return _math_verify(_clean(pred), _clean(gold))


_WORD_RE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")  # a word, not a LaTeX command's name
_DIGIT_RE = re.compile(r"\d")
_MATH_WORDS = frozenset({"sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp", "sqrt", "pi", "lcm",
                         "gcd", "mod", "max", "min", "det", "arcsin", "arccos", "arctan"})


def _prose_before_number(text: str) -> bool:
    """A word (not a function name) with a digit after it: math-verify would pick a number out of
    ``The answer is 12 or 11``, so such a prediction is a hedge, not an answer."""
    digits = [m.start() for m in _DIGIT_RE.finditer(text)]
    return bool(digits) and any(word.group().lower() not in _MATH_WORDS and word.end() <= digits[-1]
                                for word in _WORD_RE.finditer(text))


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

        from math_verify import parse as mv_parse, verify

        logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout disabled" notes
        timer = _MATH_VERIFY_SECONDS if threading.current_thread() is threading.main_thread() else None
        gold_expr = mv_parse(f"${gold}$", parsing_timeout=timer)
        # first_match: one reading of the prediction, not any number found anywhere in it
        pred_expr = mv_parse(f"${pred}$", parsing_timeout=timer, extraction_mode="first_match")
        return bool(gold_expr and pred_expr and verify(gold_expr, pred_expr, timeout_seconds=timer))
    except Exception:  # noqa: BLE001 - a grader must never crash a training step
        return False


# ----------------------------------------------------------------------------- statistics
def parallel_stats(text: str) -> dict[str, Any]:
    """Counts and positions of the blocks in ``text`` (positions are char index / length).

    >>> s = parallel_stats("ab<Parallel><Path>x</Path><Path>y</Path></Parallel><Summary>s</Summary>")
    >>> s["blocks"], s["valid"], s["paths_per_block"], round(s["first_block_position"], 3)
    (1, True, [2], 0.028)
    """
    if not isinstance(text, str):
        text = ""
    response = parse(text)
    starts = [m.start() for m in TAG_RE.finditer(text) if m.group() == PARALLEL]
    paths = [len(block.paths) for block in response.blocks]
    return {
        "blocks": len(starts),  # every <Parallel> tag, valid or not (the official P count)
        "valid": response.valid,
        "valid_official": not official_errors(text),
        "paths_per_block": paths,
        "mean_paths": sum(paths) / len(paths) if paths else 0.0,
        "block_positions": [start / len(text) for start in starts],
        "first_block_position": starts[0] / len(text) if starts else None,
        "chars": len(text),
        "has_answer": extract_answer(text) is not None,
    }
