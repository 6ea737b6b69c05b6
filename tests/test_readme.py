"""The README stays true: its tree names every module, notebook and benchmark, and its commands
are Makefile targets."""

from __future__ import annotations

import re

import pytest

from pr1lib.notebook import list_notebooks
from pr1lib.paths import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _tree() -> str:
    return README.split("## Repository", 1)[1].split("## ", 1)[0]


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "pr1lib").glob("*.py")), ids=lambda p: p.name)
def test_every_module_is_in_the_tree(path):
    assert path.name in _tree(), f"README tree does not mention pr1lib/{path.name}"


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.name)
def test_every_benchmark_is_in_the_tree(path):
    assert path.name in _tree()


def test_every_notebook_is_in_the_tree_and_the_table():
    for path in list_notebooks():
        assert path.stem in _tree()
        assert f"notebooks/{path.stem}.ipynb" in README, f"no Colab badge for {path.stem}"


def test_readme_commands_are_makefile_targets():
    targets = set(re.findall(r"^([a-z]+):", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE))
    for command in set(re.findall(r"`make (\w+)`", README)) | {"test", "tour"}:
        assert command in targets, f"README mentions `make {command}`, the Makefile has no such target"
