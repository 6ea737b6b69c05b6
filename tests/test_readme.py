"""The README stays true: its tree names every module, notebook and benchmark, and its commands
are Makefile targets."""

from __future__ import annotations

import json
import re

import pytest

from pr1lib.notebook import list_notebooks
from pr1lib.paths import REPO_ROOT
from pr1lib.results import LINK, lookup, quoted_matches, readme_links

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _tree() -> str:
    return README.split("## Repository", 1)[1].split("## ", 1)[0]


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "pr1lib").rglob("*.py")), ids=lambda p: p.name)
def test_every_module_is_in_the_tree(path):
    if path.name == "__init__.py" and path.parent.name != "pr1lib":
        assert f"{path.parent.name}/" in _tree(), f"README tree does not mention {path.parent}"
        return
    assert path.name in _tree(), f"README tree does not mention pr1lib/{path.name}"


@pytest.mark.parametrize(
    "path", sorted((REPO_ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.name
)
def test_every_benchmark_is_in_the_tree(path):
    assert path.name in _tree()


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


def _prose_without_card_links() -> list[str]:
    """README lines (outside code blocks) with the card links cut out."""
    lines, in_code = [], False
    for line in README.splitlines():
        in_code ^= line.strip().startswith("```")
        if not in_code:
            lines.append(LINK.sub("", line))
    return lines


def test_every_quoted_number_matches_its_card():
    links = readme_links(README)
    assert links, "the README quotes no measured number from a results/ card"
    for text, path, key in links:
        card = json.loads((REPO_ROOT / path).read_text())
        assert quoted_matches(text, lookup(card, key)), (
            f"README says {text!r}; {path}#{key} holds {lookup(card, key)!r}"
        )


def test_no_measured_number_goes_without_a_card():
    for line in _prose_without_card_links():
        for clause in re.split(r"[;(]", line):
            if MEASURED.search(clause) and not CITES_ELSEWHERE.search(clause):
                pytest.fail(f"README quotes {clause.strip()!r} without a results/ card link")


def test_every_card_says_how_to_rerun_it():
    for path in sorted((REPO_ROOT / "results").glob("*.json")):
        card = json.loads(path.read_text())
        assert card["command"].startswith("python -m pr1lib ") and card["numbers"], path.name
        assert {"date", "git", "machine", "seeds", "config_hash"} <= set(card), path.name
