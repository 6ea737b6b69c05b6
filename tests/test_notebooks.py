"""Every notebook: its .ipynb twin matches the jupytext source, and it executes in the smoke
profile without error. The notebooks run once (a module fixture) through the same code as
``make tour``, so the same run also checks the tour report has a section per notebook."""

from __future__ import annotations

import pytest

from pr1lib.notebook import cell_sources, list_notebooks, read
from pr1lib.tour import build_report, report_outputs, run_notebooks

NOTEBOOKS = list_notebooks()
IDS = [p.stem for p in NOTEBOOKS]


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/NN_slug.py sources are missing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_ipynb_twin_matches_source(path):
    twin = path.with_suffix(".ipynb")
    assert twin.exists(), f"{twin.name} missing: run `make sync`"
    assert cell_sources(read(twin)) == cell_sources(read(path)), f"{twin.name} drifted: run `make sync`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_has_parameters_and_closing_sections(path):
    nb = read(path)
    tags = [t for c in nb.cells for t in c.get("metadata", {}).get("tags", [])]
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert tags.count("parameters") == 1
    assert "## Summary" in markdown and "## Exercises" in markdown


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory):
    return run_notebooks("smoke", tmp_path_factory.mktemp("tour"))


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("name", IDS)
def test_notebook_executes_in_smoke(smoke_runs, name):
    run = next(r for r in smoke_runs if r.path.stem == name)
    assert run.error is None, run.error


@pytest.mark.notebook
@pytest.mark.slow
def test_tour_report_has_every_section(smoke_runs):
    page = build_report(smoke_runs, "smoke")
    for run in smoke_runs:
        assert f"<h2>{run.path.stem} — " in page
        tagged = [c for c in run.nb.cells if "report" in c.get("metadata", {}).get("tags", [])]
        if tagged:
            assert report_outputs(run.nb, "x"), f"{run.path.stem}: its report cells showed nothing"
