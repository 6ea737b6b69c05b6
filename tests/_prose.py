"""The project's prose, read for ``tests/test_prose.py``: the pages (README, docs, tests/README
and every notebook's markdown cells), their sentences and tables, the result cards a sentence or
a table's caption names, the numbers they quote, and the files, anchors and sections they cite.

The convention these helpers read (tests/README.md states it for writers):

- a number linked into a card, ``[66.7 %](results/tinyworld-controls.json#rows.3.accuracy)``,
  equals the value at that key;
- a measured number (a percentage, points or an interval) in a sentence that names a card
  (`` `results/NAME.json` ``, a glob such as `` `results/tinyworld-dose*.json` ``, or a seed
  shorthand `` `-s1.json` `` after a full name) equals one of that card's values to the digits
  it quotes; a table is checked against the cards its caption (the paragraph above it) names;
- clauses about the paper or a target (``CITES_ELSEWHERE``) are not card numbers.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from pr1lib.notebook.runner import list_notebooks, read
from pr1lib.store.cards import LINK
from pr1lib.store.paths import REPO_ROOT

MINUS = str.maketrans({"−": "-", "–": "-"})  # the prose's minus and dash, as ASCII
NUM = r"[+-]?\d+(?:\.\d+)?"
# a run of numbers ("36.0 / 51.75 / 52.25", "38-45", "3 and 5") ending in a unit of measure
MEASURED = re.compile(
    rf"(?<![\w.@/])((?:{NUM}\s*(?:/|,|-|to|and|or)\s*)*{NUM})\s*(%|pts\b|points?\b)"
)
INTERVAL = re.compile(rf"\[\s*({NUM})\s*,\s*({NUM})\s*\]")  # "[+20.9, +32.1]" after a number
CITES_ELSEWHERE = re.compile(r"paper|Table \d|Figure \d|arXiv|target|≥|≤|[Pp]aper's")
NOT_MEASURED = re.compile(r"^\s*(?:interval|bootstrap|confidence|CI\b|-percent)")
# a card named in backticks, or linked without a key: `results/NAME.json`, (../results/NAME.json)
CARD_NAME = re.compile(r"[`(](?:\.\./)?results/([a-z0-9._*-]+?)(?:\.json)?[`)]")
SEED_SHORTHAND = re.compile(r"`(-s\d+)(?:\.json)?`")
REPO_PATH = re.compile(
    r"`((?:pr1lib|docs|results|notebooks|benchmarks|tests|tools|solutions|data|binder|"
    r"accelerate)/[A-Za-z0-9_.*/-]*)`(?! in [a-z])"  # "in verl": another repository's path
)
DOC_ANCHOR = re.compile(r"(?<![\w/.])(docs/[\w.-]+\.md)#([\w.-]+)")  # cited in plain text
MD_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Page:
    """One page of prose: its name, the folder its relative links start from, its markdown."""

    name: str
    folder: Path
    text: str


def markdown_pages() -> list[Page]:
    """The README, every doc and tests/README.md."""
    paths = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    paths.append(REPO_ROOT / "tests" / "README.md")
    return [Page(str(p.relative_to(REPO_ROOT)), p.parent, p.read_text("utf-8")) for p in paths]


@functools.cache
def notebook_pages() -> tuple[Page, ...]:
    """Every notebook's markdown cells (from its ``.py`` source), one page per notebook."""
    pages = []
    for path in list_notebooks():
        cells = [c.source for c in read(path).cells if c.cell_type == "markdown"]
        pages.append(Page(f"notebooks/{path.name}", path.parent, "\n\n".join(cells)))
    return tuple(pages)


def all_pages() -> list[Page]:
    return markdown_pages() + list(notebook_pages())


# ------------------------------------------------------------------------ blocks and sentences
def blocks(text: str) -> list[tuple[str, str]]:
    """``(kind, text)`` per block outside code fences: ``table``, ``heading`` or ``prose`` (a
    paragraph or one list item)."""
    out, lines, in_code = [], [], False

    def flush():
        if lines:
            body = "\n".join(lines)
            out.append(("table" if body.lstrip().startswith("|") else "prose", body))
            lines.clear()

    for line in text.splitlines():
        if line.strip().startswith("```"):
            flush()
            in_code = not in_code
        elif in_code:
            continue
        elif not line.strip() or re.match(r"\s*(?:[-*]|\d+\.)\s", line):
            flush()
            if line.strip():
                lines.append(line)
        elif line.startswith("#"):
            flush()
            out.append(("heading", line))
        elif lines and (line.lstrip().startswith("|")) != lines[0].lstrip().startswith("|"):
            flush()
            lines.append(line)
        else:
            lines.append(line)
    flush()
    return out


def sentences(paragraph: str) -> list[str]:
    """A paragraph cut after each full stop that ends a sentence."""
    flat = " ".join(paragraph.split())
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*(`\[])", flat) if s]


# ------------------------------------------------------------------------ cards and their values
def cited_cards(text: str) -> list[str]:
    """The card names a text cites in backticks, in order; globs expanded, seed shorthands
    (`` `-s1` `` after `` `results/tinyworld-ablation.json` ``) read against the last full name.
    A name that matches no card is returned as is, so the caller can report it."""
    names: list[str] = []
    last: list[str] = []  # the names of the last full name or glob, for a shorthand after it
    for found in re.finditer(f"{CARD_NAME.pattern}|{SEED_SHORTHAND.pattern}", text):
        if found.group(1):
            stem = found.group(1)
            hits = sorted(p.stem for p in (REPO_ROOT / "results").glob(f"{stem}.json"))
            last = hits if "*" in stem else [stem]
            names += last
        else:
            names += [re.sub(r"-s\d+$", "", name) + found.group(2) for name in last]
    return names


@functools.cache
def card_values(name: str) -> tuple[float, ...]:
    """Every number a card's ``numbers`` hold (nested dicts and lists), booleans left out."""
    card = json.loads((REPO_ROOT / "results" / f"{name}.json").read_text())
    values: list[float] = []

    def walk(value):
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            values.append(float(value))

    walk(card["numbers"])
    return tuple(values)


def shows(quoted: str, value: float, percent: bool) -> bool:
    """Whether ``quoted`` (``"36.0"``, ``"+26.4"``, ``"-0.6"``) shows ``value`` to its digits,
    read as a share (times 100) or as it is when ``percent``; a signed quote needs the sign."""
    shown = float(quoted)
    digits = len(quoted.split(".")[1]) if "." in quoted else 0
    for candidate in (value * 100, value) if percent else (value,):
        if quoted[0] in "+-" and shown and candidate and (shown > 0) != (candidate > 0):
            continue
        if abs(abs(candidate) - abs(shown)) <= 0.5 * 10**-digits + 1e-9:
            return True
    return False


def measured_numbers(text: str) -> list[str]:
    """The quoted numbers of a text that a run measured: every number of a run that ends in
    ``%`` or points (not "95 % interval"), and both ends of an interval ``[a, b]``; clauses
    about the paper or a target left out. Card links (their own test) and code are cut out first."""
    text = re.sub(r"`[^`]*`", "", LINK.sub("", text)).translate(MINUS)  # no links, no code
    found = []
    for clause in re.split(r"[;(]|\bthe paper\b", text):
        if CITES_ELSEWHERE.search(clause):
            continue
        for run in MEASURED.finditer(clause):
            if run.group(2) == "%" and NOT_MEASURED.match(clause[run.end() :]):
                continue
            found += re.findall(NUM, re.sub(r"(?<=\d)\s*-\s*(?=\d)", " ", run.group(1)))
        for interval in INTERVAL.finditer(clause):
            found += list(interval.groups())
    return found


def unmatched(numbers: list[str], cards: list[str]) -> list[str]:
    """The numbers no value of any of ``cards`` shows."""
    values = [v for name in cards for v in card_values(name)]
    return [q for q in numbers if not any(shows(q, v, True) for v in values)]


def table_numbers(table: str) -> list[str]:
    """A table's measured numbers: every decimal number and every whole percentage of its body
    rows (the header and the separator row left out)."""
    rows = table.translate(MINUS).splitlines()[2:]
    found = []
    for row in rows:
        for cell in row.strip().strip("|").split("|"):
            if CITES_ELSEWHERE.search(cell):
                continue
            found += re.findall(rf"(?<![\w.]){NUM}\.\d+|(?<![\w.]){NUM}(?=\s*%)", cell)
    return [n for n in found if n]


# ------------------------------------------------------------------------ files and anchors
def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.

    >>> slug("## 5.1 Hyper-parameters"), slug("### Parallel, or just more search?")
    ('51-hyper-parameters', 'parallel-or-just-more-search')
    """
    text = heading.lstrip("#").strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors of a markdown file: its headings' slugs (``-1``, ``-2`` on repeats) and
    every ``<a id="...">``."""
    text = path.read_text("utf-8")
    seen: dict[str, int] = {}
    out = set(re.findall(r'<a id="([^"]+)"', text))
    for kind, line in blocks(text):
        if kind == "heading":
            base = slug(line)
            out.add(base if base not in seen else f"{base}-{seen[base]}")
            seen[base] = seen.get(base, 0) + 1
    return frozenset(out)


def headings(page: Page) -> list[str]:
    """A page's headings, without their ``#`` marks."""
    return [line.lstrip("#").strip() for kind, line in blocks(page.text) if kind == "heading"]


def section_numbers(page: Page) -> set[str]:
    """The section numbers a page's headings carry ("6", "6.1")."""
    return {m[1] for h in headings(page) if (m := re.match(r"(\d+(?:\.\d+)*)\.?\s", h))}
