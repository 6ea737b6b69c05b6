"""The exercise solutions: ``solutions/NN_slug.py`` holds one ``exercise_N(profile="smoke")`` per
exercise of notebook ``NN_slug`` and a ``check_exercise_N(found)`` that asserts what the answer
must show. Each solution runs here in the smoke profile (runs go to a temporary folder) and its
check runs on what it returned. The notebook's Exercises cell gives one hint per exercise and
links the file. Adding a notebook's solutions is one file here, plus the hints in the notebook."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import pytest

from pr1lib.notebook.runner import NOTEBOOK_DIR, read
from pr1lib.store.paths import REPO_ROOT

SOLUTIONS = sorted((REPO_ROOT / "solutions").glob("[0-9][0-9]_*.py"))
HINT = "<details><summary>Hint</summary>"


def load(path: Path):
    """A solution module, imported from its file (its name starts with a digit)."""
    spec = importlib.util.spec_from_file_location(f"solution_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def numbers(module) -> list[int]:
    return sorted(
        int(m.group(1)) for name in vars(module) if (m := re.fullmatch(r"exercise_(\d+)", name))
    )


def exercises_cell(path: Path) -> str:
    """The notebook's markdown from ``## Exercises`` on."""
    markdown = "\n".join(c.source for c in read(path).cells if c.cell_type == "markdown")
    return markdown.split("## Exercises", 1)[1]


CASES = [(path, n) for path in SOLUTIONS for n in numbers(load(path))]


def test_there_are_solutions():
    assert SOLUTIONS and CASES


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_each_exercise_has_a_solution_a_check_and_a_hint(path):
    notebook = NOTEBOOK_DIR / path.name
    assert notebook.exists(), f"{path.name} solves no notebook"
    cell = exercises_cell(notebook)
    asked = [int(n) for n in re.findall(r"^(\d+)\. ", cell, re.MULTILINE)]
    module = load(path)
    assert numbers(module) == asked, f"{path.name}: solutions {numbers(module)}, exercises {asked}"
    for n in asked:
        fn = getattr(module, f"exercise_{n}")
        assert inspect.signature(fn).parameters["profile"].default == "smoke"
        assert len(inspect.getdoc(fn) or "") > 200, f"exercise_{n} must answer in words"
        assert callable(getattr(module, f"check_exercise_{n}", None)), f"no check_exercise_{n}"
    assert cell.count(HINT) == len(asked), f"{notebook.name}: one hint per exercise"
    assert f"](../solutions/{path.name})" in cell, f"{notebook.name} does not link {path.name}"


@pytest.mark.parametrize("path, n", CASES, ids=[f"{p.stem}-{n}" for p, n in CASES])
def test_solution_finds_the_answer(path, n, tmp_path, monkeypatch):
    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path))  # nothing lands in the real runs/
    module = load(path)
    found = getattr(module, f"exercise_{n}")(profile="smoke")
    getattr(module, f"check_exercise_{n}")(found)
