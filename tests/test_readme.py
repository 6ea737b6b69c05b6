"""The README stays true: its tree names every module, notebook and benchmark (and so does the
one-line-per-file tree of docs/architecture.md), its commands are Makefile targets, and every
number it or docs/results.md quotes matches its card."""

from __future__ import annotations

import json
import re

import pytest

from pr1lib.notebook.runner import list_notebooks
from pr1lib.store.cards import LINK, lookup, quoted_matches, readme_links
from pr1lib.store.paths import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
RESULTS_DOC = (REPO_ROOT / "docs" / "results.md").read_text(encoding="utf-8")
EVERY_FILE = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
QUOTING = {"README.md": README, "docs/results.md": RESULTS_DOC}  # the pages that quote numbers


def _tree() -> str:
    return README.split("## Repository", 1)[1].split("## ", 1)[0]


def _every_file() -> str:
    return EVERY_FILE.split("## Every file", 1)[1]


def test_the_readme_is_a_front_door():
    """Read in two minutes: at most 15 KB, the two commands and the picture on the first screen."""
    assert len(README.encode()) <= 15_000, f"README is {len(README.encode())} bytes"
    first_screen = README[: README.index("## What you will see")]
    assert "make tour" in first_screen and "make test" in first_screen
    picture = re.search(r"!\[[^\]]+\]\((docs/[\w.-]+\.png)\)", first_screen)
    assert picture and (REPO_ROOT / picture[1]).is_file()


def _wing_line(wing: str) -> str:
    """The README tree's line(s) for ``wing/``: its modules, without ``.py``."""
    found = re.search(rf"^  {wing}/ +(.*(?:\n {{16}}.*)*)", _tree(), re.M)
    assert found, f"README tree does not mention pr1lib/{wing}/"
    return found.group(1)


@pytest.mark.parametrize(
    "path",
    sorted(p for p in (REPO_ROOT / "pr1lib").rglob("*.py") if "__pycache__" not in p.parts),
    ids=lambda p: str(p.relative_to(REPO_ROOT / "pr1lib")),
)
def test_every_module_is_in_the_tree(path):
    """The README's tree names every wing and its modules; docs/architecture.md has a line each."""
    if path.parent.name == "pr1lib":  # the package's own __init__.py is the package
        assert path.name == "__init__.py" or path.name in _tree(), f"tree lacks {path.name}"
        return
    if path.name != "__init__.py":
        assert re.search(rf"\b{path.stem}\b", _wing_line(path.parent.name)), (
            f"README tree does not list {path.stem} under {path.parent.name}/"
        )
        assert path.name in _every_file(), f"docs/architecture.md has no line for {path}"
    assert f"{path.parent.name}/" in _tree(), f"README tree does not mention {path.parent}"


@pytest.mark.parametrize(
    "path", sorted((REPO_ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.name
)
def test_every_benchmark_is_in_the_tree(path):
    assert path.name in _tree() and path.name in _every_file()


def test_every_notebook_is_in_the_tree_and_the_table():
    for path in list_notebooks():
        assert path.stem in _tree()
        assert f"notebooks/{path.stem}.ipynb" in README, f"no Colab badge for {path.stem}"


def test_readme_commands_are_makefile_targets():
    targets = set(re.findall(r"^([a-z]+):", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE))
    for command in set(re.findall(r"`make (\w+)`", README)) | {"test", "tour"}:
        assert command in targets, (
            f"README mentions `make {command}`, the Makefile has no such target"
        )


# ------------------------------------------------------------------------ numbers and their cards
MEASURED = re.compile(r"\d+(?:\.\d+)? ?%|±")  # a percentage or a spread: what a run measured
CITES_ELSEWHERE = re.compile(r"paper|Table \d|arXiv|target|≥|≤")  # the paper's figures, goals


def _prose_without_card_links(text: str) -> list[str]:
    """A page's lines (outside code blocks) with the card links cut out."""
    lines, in_code = [], False
    for line in text.splitlines():
        in_code ^= line.strip().startswith("```")
        if not in_code:
            lines.append(LINK.sub("", line))
    return lines


@pytest.mark.parametrize("page", QUOTING)
def test_every_quoted_number_matches_its_card(page):
    links = readme_links(QUOTING[page])
    assert links, f"{page} quotes no measured number from a results/ card"
    for text, path, key in links:
        card = json.loads((REPO_ROOT / path).read_text())
        assert quoted_matches(text, lookup(card, key)), (
            f"{page} says {text!r}; {path}#{key} holds {lookup(card, key)!r}"
        )


@pytest.mark.parametrize("page", QUOTING)
def test_no_measured_number_goes_without_a_card(page):
    for line in _prose_without_card_links(QUOTING[page]):
        for clause in re.split(r"[;(]", line):
            if MEASURED.search(clause) and not CITES_ELSEWHERE.search(clause):
                pytest.fail(f"{page} quotes {clause.strip()!r} without a results/ card link")


def test_every_card_says_how_to_rerun_it():
    for path in sorted((REPO_ROOT / "results").glob("*.json")):
        card = json.loads(path.read_text())
        assert card["command"].startswith("python -m pr1lib ") and card["numbers"], path.name
        assert {"date", "git", "machine", "seeds", "config_hash"} <= set(card), path.name


def _resolves(dotted: str) -> bool:
    """``pr1lib.a.b.C`` names a module (the longest importable prefix) and attributes under it."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


DOCS = sorted((REPO_ROOT / "docs").glob("*.md")) + [REPO_ROOT / "README.md"]


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_library_name_the_docs_cite_exists(page):
    """A renamed function or module leaves no stale name in the docs (`pr1lib.x.y` in backticks)."""
    names = set(re.findall(r"`(pr1lib(?:\.[A-Za-z_]\w*)+)", page.read_text(encoding="utf-8")))
    stale = sorted(n for n in names if not _resolves(n))
    assert not stale, f"{page.name} cites names that do not exist: {stale}"


def test_notebook_minutes_come_from_the_tour_card():
    """The notebook table's "tiny (min)" column is the tour card's seconds per notebook / 60."""
    card = json.loads((REPO_ROOT / "results" / "tour-tiny.json").read_text(encoding="utf-8"))
    seconds = card["numbers"]["notebooks"]
    assert card["numbers"]["failed"] == 0 and set(seconds) == {p.stem for p in list_notebooks()}
    table = README.split("## Notebooks", 1)[1].split("\n\n", 2)[1]
    rows = re.findall(r"^\| \[(\d\d_[a-z_]+)\]\([^)]*\) \| [^|]* \| ([\d.]+) \|", table, re.M)
    assert len(rows) == len(seconds)
    for stem, minutes in rows:
        assert float(minutes) == round(seconds[stem] / 60, 1), stem
    assert "(results/tour-tiny.json)" in README
