"""Plans: the line a model writes before a block to say which shares its paths will take.

In a planned block the model, not the engine, decides how wide the block is and which path takes
which share: its last line before ``<Parallel>`` is a plan, ``Check (A)-(D)`` (a span of letters)
or ``Check (B), (E)`` (a list), and the block that follows opens one path per item, in order, each
path's first words the item's own label. The forked engine reads the plan from the model's own
tokens and forces each path's label after ``<Path>`` (``RolloutConfig.header_style="plan"``), as
an outline does in Multiverse or a spawn line in APR (the paper's format, section 2, plus the
outline of docs/planworld.md). The validators add ``grammar.plan_errors`` to a text's errors: a
block after a plan line that does not follow it is malformed like any other malformed block.

>>> plan_line(["A", "B", "C", "D"]), plan_line(["B", "E"])
('Check (A)-(D)', 'Check (B), (E)')
>>> plan_items("Check (A)-(D)"), plan_items("Check (B), (E)"), plan_items("Check (C)")
(['A', 'B', 'C', 'D'], ['B', 'E'], None)
"""

from __future__ import annotations

import re
import string

LETTERS = string.ascii_uppercase  # the labels (grammar.LETTERS: the same)
PLAN_WORD = "Check"  # a plan line opens with it
_SPAN_RE = re.compile(rf"^{PLAN_WORD} \(([A-Z])\)-\(([A-Z])\)$")
_LIST_RE = re.compile(rf"^{PLAN_WORD} \(([A-Z])\)((?:, \([A-Z]\))+)$")
_LABEL_RE = re.compile(r"\(([A-Z])\)")
_PLANNED_RE = re.compile(r"^([^\n]*)\n(?=<Parallel>)", re.MULTILINE)  # a line before a block


def plan_line(items: list[str], span: bool = True) -> str:
    """The plan line for ``items`` (letters): a span when they are three or more letters in a
    row (and ``span``), else a list.

    >>> plan_line(["C", "D", "E"]), plan_line(["A", "B"]), plan_line(["C", "D", "E"], span=False)
    ('Check (C)-(E)', 'Check (A), (B)', 'Check (C), (D), (E)')
    """
    first = LETTERS.index(items[0])
    contiguous = list(items) == list(LETTERS[first : first + len(items)])
    if span and len(items) >= 3 and contiguous:
        return f"{PLAN_WORD} ({items[0]})-({items[-1]})"
    return f"{PLAN_WORD} " + ", ".join(f"({item})" for item in items)


def plan_items(line: str) -> list[str] | None:
    """The letters a plan line names, in order; ``None`` for a line that is not a plan of two or
    more distinct items (a span that runs backwards, a repeated letter, one item).

    >>> plan_items("Check (D)-(B)"), plan_items("Check (B), (B)"), plan_items("(A) 4+9=13")
    (None, None, None)
    """
    line = line.strip()
    if span := _SPAN_RE.match(line):
        lo, hi = LETTERS.index(span[1]), LETTERS.index(span[2])
        return list(LETTERS[lo : hi + 1]) if hi > lo else None
    if _LIST_RE.match(line):
        items = _LABEL_RE.findall(line)
        return items if len(set(items)) == len(items) else None
    return None


def drop_plans(text: str) -> str:
    """``text`` without the plan lines that open its blocks (a plan line right before
    ``<Parallel>``): the same paths, each still opening with its label, but nothing before the
    block says which paths there will be (the plan-removed control of docs/planworld.md).

    >>> drop_plans("Check (A), (B)\\n<Parallel><Path>(A) x</Path><Path>(B) y</Path></Parallel>")
    '<Parallel><Path>(A) x</Path><Path>(B) y</Path></Parallel>'
    >>> drop_plans("Check (A)\\n<Parallel>")  # one item is no plan: kept
    'Check (A)\\n<Parallel>'
    """
    return _PLANNED_RE.sub(lambda m: "" if plan_items(m[1]) else m[0], text)


def last_line(text: str) -> str:
    """The last non-empty line of ``text`` (where a plan stands before ``<Parallel>``).

    >>> last_line("(A) 4+9=13 vs 14 ✗\\nCheck (B)-(D)\\n")
    'Check (B)-(D)'
    """
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
