"""The parallel-thinking format: tags, parser, two validators, answers and statistics.

A response is free text with zero or more blocks::

    text <Parallel><Path>a</Path><Path>b</Path></Parallel>
    <Summary>s</Summary> more text ... Final Answer: 42

Two validators share one tag regex:

* ``validate(text, strict=False)`` behaves like the official checker
  (docs/recipe.md#1-tags-and-grammar): a stack machine over the tags that lets a few things
  through on purpose (a ``<Path>`` outside any block, an unclosed ``<Summary>``, well-formed
  nesting). It returns one message per error the official code would report, in the same order.
* ``validate(text, strict=True)`` is this project's grammar (docs/recipe.md#1-tags-and-grammar):
  flat blocks of at least two non-empty paths, only whitespace between the block's tags, and exactly
  one closed ``<Summary>`` right after each ``</Parallel>``.

Simplification relative to the paper: the official reward code decodes twice (with and without
special tokens); here the tags are plain added tokens, so one decoded string carries both the
tags and the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pr1lib.format import plans
from pr1lib.format.answers import answers_match, as_number, number_key  # noqa: F401 - public here (a documented contract)

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
    # free text not yet in ``out.parts`` (a list: linear)
    buffer: list[str] = field(default_factory=list)
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
            what = {
                "block": f"unclosed {PARALLEL}",
                "path": f"unclosed {PATH}",
                "after": f"missing {SUMMARY} after the last {END_PARALLEL}",
                "summary": f"unclosed {SUMMARY}",
            }[self.state]
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
    """``text`` without parallel thinking: each block becomes its first path, its summary is
    dropped. A rule-teacher trace keeps the reference line first, so this gives back the plain
    solution.

    >>> linearize(
    ...     "a\\n<Parallel><Path>x=2</Path><Path>y</Path></Parallel>\\n<Summary>s</Summary>\\nFinal Answer: 2"
    ... )
    'a\\nx=2\\nFinal Answer: 2'
    """  # noqa: E501 - doctest output / table rows stay whole
    response = parse(text)
    if not response.valid:
        raise ValueError(f"cannot linearize a malformed response: {response.errors[0]}")
    return "".join(part if isinstance(part, str) else part.paths[0].text for part in response.parts)


_BETWEEN_PARTS = re.compile(r"</Path>\s*<Path>|</Parallel>\s*<Summary>")  # each on its own line
_PATH_OPEN = re.compile(r"<Parallel>|<Path>")


def serialize(text: str) -> str:
    """``text`` with its tags taken out and nothing else changed: each block's paths one after
    another, one per line, then its summary: the same search written as one serial stream (the
    serial-search control of docs/tinyworld.md).

    >>> t = "a\\n<Parallel><Path>x=2</Path><Path>y=2</Path></Parallel>\\n<Summary>2</Summary>\\nb"
    >>> serialize(t)
    'a\\nx=2\\ny=2\\n2\\nb'
    """
    return TAG_RE.sub("", _BETWEEN_PARTS.sub("\n", text))


LETTERS = plans.LETTERS
# a path's header: (1), (2), ... | (B), (C), ... | the model's own plan, read by the engine |
# none: nothing forced, whatever path_headers says (paths told nothing: docs/planworld.md)
HEADER_STYLES = ("number", "letter", "plan", "none")


def path_header(index: int, style: str = "number") -> str:
    """The header path ``index`` (0-based) opens with: ``(1)``, ``(2)``, ... (``number_paths``);
    ``style="letter"``: ``(B)``, ``(C)``, ... (the (index+1)-th label either way: label 0, ``(0)``
    or ``(A)``, is left to what comes before the block).

    >>> path_header(0), path_header(2, "letter")
    ('(1)', '(D)')
    """
    if style not in HEADER_STYLES[:2]:  # a plan's headers are the model's (plans.plan_items)
        raise ValueError(f"header style must be one of {HEADER_STYLES[:2]}, got {style!r}")
    return f"({index + 1})" if style == "number" else f"({LETTERS[index + 1]})"


def number_paths(text: str) -> str:
    """``text`` with each path opening with its number (``(1) ``, ``(2) ``, ... counted within its
    block): paths that cannot see each other still know which part of a search is theirs. The
    forked engine writes the same header at the start of path i (``RolloutConfig.path_headers``).

    >>> number_paths("<Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s</Summary>")
    '<Parallel><Path>(1) a</Path><Path>(2) b</Path></Parallel><Summary>s</Summary>'
    """
    count = 0

    def numbered(match: re.Match) -> str:
        nonlocal count
        if match.group() == PARALLEL:
            count = 0
            return PARALLEL
        count += 1
        return f"{PATH}{path_header(count - 1)} "

    return _PATH_OPEN.sub(numbered, text)


# ----------------------------------------------------------------------------- validators
def official_errors(text: str) -> list[str]:
    """The official checker's verdict, error for error (our wording;
    docs/recipe.md#1-tags-and-grammar).

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
                errors.append(
                    f"tag #{i}: {tag} but the innermost open tag is "
                    f"{stack[-1] if stack else 'nothing'}"
                )
                continue
            stack.pop()
            if tag == END_PATH and path_counts:
                path_counts[-1] += 1  # counts for the newest open block, wherever the path is
            elif tag == END_PARALLEL:
                count = path_counts.pop()
                if count < 2:
                    errors.append(
                        f"tag #{i}: {tag} closes a block with only {count} path(s) (needs 2)"
                    )
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
    """  # noqa: E501 - doctest output / table rows stay whole
    if not isinstance(text, str):
        return [f"expected a str, got {type(text).__name__}"]
    if not strict:
        return official_errors(text) + plan_errors(text)
    response = parse(text)
    return response.errors + plan_errors(text, response)


_HEAD_RE = re.compile(r"^\s*\(([A-Z])\)")  # a path's label, its first words


def plan_errors(text: str, response: Response | None = None) -> list[str]:
    """Errors of the planned blocks in ``text``: a block whose last line before it is a plan
    (``pr1lib.format.plans``) must open exactly the plan's paths, path i's first words its i-th
    item's label. Blocks without a plan line before them are not checked here; a text without
    the plan word is not parsed at all (``response``: its parse, where the caller has one).

    >>> good = "Check (A), (C)\\n<Parallel><Path>(A) x</Path><Path>(C) y</Path></Parallel>"
    >>> plan_errors(good), plan_errors(good.replace("(C) y", "(B) y"))
    ([], ['block 1: the plan names (A), (C), its paths open with (A), (B)'])
    """
    if plans.PLAN_WORD not in text:
        return []
    errors = []
    for number, block in enumerate((response or parse(text)).blocks, start=1):
        items = plans.plan_items(plans.last_line(text[: block.start]))
        if items is None:
            continue
        heads = [(_HEAD_RE.match(path.text) or [None, "?"])[1] for path in block.paths]
        if heads != items:
            named = ", ".join(f"({x})" for x in items)
            opened = ", ".join(f"({x})" for x in heads)
            errors.append(f"block {number}: the plan names {named}, its paths open with {opened}")
    return errors


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


# ----------------------------------------------------------------------------- statistics
def parallel_stats(text: str) -> dict[str, Any]:
    """Counts and positions of the blocks in ``text`` (positions are char index / length).

    >>> s = parallel_stats(
    ...     "ab<Parallel><Path>x</Path><Path>y</Path></Parallel><Summary>s</Summary>"
    ... )
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
