"""Every notebook: its .ipynb twin matches the jupytext source, its first cell links the
glossary and the recipe, and it executes in the smoke profile without error, every "You should
see" check in its smoke range. The notebooks run once (a module fixture) through the same code as
``make tour``, so the same run also checks the tour report: a section per notebook, with its
checks."""

from __future__ import annotations

import html
import os
from collections import Counter

import pytest

from pr1lib.notebook.expect import EXPECT_ENV, Seen
from pr1lib.notebook.runner import cell_sources, list_notebooks, read
from pr1lib.notebook.tour import (
    CHAIN,
    build_report,
    lane_workers,
    lanes,
    report_outputs,
    run_notebooks,
)
from pr1lib.notebook.twins import KERNELSPEC, figures_by_cell, stale_twins, twin_problems

# pr1lib.config.runtime.quiet_known_noise
NOISE = ("kernels-community", "is_gradient_checkpointing", "multivariate normal")

NOTEBOOKS = list_notebooks()
IDS = [p.stem for p in NOTEBOOKS]


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/NN_slug.py sources are missing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_ipynb_twin_matches_source(path):
    twin = path.with_suffix(".ipynb")
    assert twin.exists(), f"{twin.name} missing: run `make sync`"
    assert cell_sources(read(twin)) == cell_sources(read(path)), (
        f"{twin.name} drifted: run `make sync`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_committed_twin_shows_a_learner_nothing_broken(path):
    """What GitHub and Colab show before anyone runs a cell (``twins.twin_problems``): no figure
    without data, no machine path, no unexplained stderr, no run moved aside, no missing run."""
    import nbformat

    problems = twin_problems(nbformat.read(path.with_suffix(".ipynb"), 4))
    assert not problems, f"{path.stem}: {problems[:3]}: rerun `make outputs` in a fresh clone"


def _echoes_a_check(source: str) -> bool:
    """A cell that ends with a bare ``should_see(...)`` call and no ``;``: IPython shows its
    True / False under the check's own line."""
    import ast

    try:
        body = ast.parse(source).body
    except SyntaxError:  # a cell with IPython magics: not a check cell
        return False
    last = body[-1] if body else None
    bare = isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
    named = bare and getattr(last.value.func, "id", "") == "should_see"
    return named and not source.rstrip().endswith(";")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_cell_echoes_the_true_of_a_check(path):
    cells = [c.source for c in read(path).cells if c.cell_type == "code"]
    echo = [i for i, source in enumerate(cells) if _echoes_a_check(source)]
    assert not echo, f"{path.stem}: code cells {echo} end with should_see(...): end it with ';'"


def test_every_twin_is_one_run_of_its_current_code():
    """Each committed twin recorded the code it ran (``twins.code_hash``, written by ``make
    outputs``); a code change not followed by ``make outputs``, or a cell that never ran, is a
    stale twin whose outputs a learner would take for the code's."""
    stale = stale_twins()
    assert not stale, "stale twins (run `make outputs`):\n" + "\n".join(stale)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_ipynb_twin_opens_with_its_kernel(path):
    twin = read(path.with_suffix(".ipynb"))
    assert twin.metadata.get("kernelspec") == KERNELSPEC, f"{path.stem}: run `make sync`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_has_parameters_and_closing_sections(path):
    nb = read(path)
    tags = [t for c in nb.cells for t in c.get("metadata", {}).get("tags", [])]
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert tags.count("parameters") == 1
    assert "## Summary" in markdown and "## Exercises" in markdown


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_first_cell_links_the_glossary_and_the_recipe(path):
    first = next(c for c in read(path).cells if c.cell_type == "markdown")
    assert "](../docs/glossary.md" in first.source and "](../docs/recipe.md" in first.source


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
@pytest.mark.parametrize("name", IDS)
def test_smoke_checks_are_in_range(smoke_runs, name):
    run = next(r for r in smoke_runs if r.path.stem == name)
    bad = [
        Seen(*(c[k] for k in ("name", "value", "low", "high", "profile"))).line()
        for c in run.checks
        if c["ok"] is not True
    ]
    assert not bad, "outside the smoke range, or no smoke range set:\n" + "\n".join(bad)


@pytest.mark.notebook
@pytest.mark.slow
def test_tour_report_has_every_section(smoke_runs):
    page = build_report(smoke_runs, "smoke")
    for run in smoke_runs:
        assert f"<h2>{run.path.stem} — " in page
        tagged = [c for c in run.nb.cells if "report" in c.get("metadata", {}).get("tags", [])]
        if tagged:
            assert report_outputs(run.nb, "x"), f"{run.path.stem}: its report cells showed nothing"
        if "should_see(" in run.path.read_text(encoding="utf-8"):
            assert run.checks, f"{run.path.stem}: its should_see checks were not collected"
        for check in run.checks:
            line = Seen(*(check[k] for k in ("name", "value", "low", "high", "profile"))).line()
            assert html.escape(line) in page, line


def test_lanes_keep_the_training_chain_in_order_and_lose_no_notebook():
    chain, rest = lanes(NOTEBOOKS)
    assert [p.name[:2] for p in chain] == list(CHAIN)  # 05-07 load what 04 trained
    assert sorted(chain + rest) == sorted(NOTEBOOKS) and not set(chain) & set(rest)


def test_lanes_run_at_once_only_where_the_cores_hold_both_lanes_threads():
    # two 2-thread kernels on 2 cores wait on each other: the tour's notebook 00 took 147 s
    # instead of 17 s that way, so on 2 cores the tiny lanes run one after the other
    assert lane_workers("tiny", 2, cores=2) == 1
    assert lane_workers("tiny", 2, cores=4) == 2
    assert lane_workers("smoke", 2, cores=2) == 2  # one thread per kernel
    assert lane_workers("colab", 2, cores=1) == 1


@pytest.mark.notebook
@pytest.mark.slow
def test_runs_come_back_in_notebook_order_and_leave_the_environment_alone(smoke_runs):
    # the lanes run at once, so a kernel's settings go to that kernel, not to os.environ
    assert [r.path for r in smoke_runs] == NOTEBOOKS
    assert EXPECT_ENV not in os.environ  # each kernel had its own record file


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_runs_are_saved_under_the_notebooks_own_name(path):
    # later notebooks and pr1lib.config.recipe.STAGE_RUNS find a notebook's runs by its file name
    import re

    for folder in re.findall(r'runs_dir\(\) / f?"([^"{/]+)', path.read_text()):
        assert folder.startswith(path.stem[:3]), f"{path.name} saves runs to {folder!r}"


def test_stage_runs_name_notebooks_that_exist():
    from pr1lib.config.recipe import STAGE_RUNS

    for _, patterns in STAGE_RUNS.values():
        for pattern in patterns:
            if pattern[:2].isdigit():
                assert pattern.split("-")[0] in IDS, (
                    f"STAGE_RUNS names a missing notebook: {pattern}"
                )


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("name", IDS)
def test_no_cell_repeats_a_figure_and_no_known_noise(smoke_runs, name):
    run = next(r for r in smoke_runs if r.path.stem == name)
    for index, titles in enumerate(figures_by_cell(run.nb)):
        repeated = {t: n for t, n in Counter(titles).items() if n > 1}
        assert not repeated, f"{name}, code cell {index}: figures shown more than once {repeated}"
    text = str([c.get("outputs", []) for c in run.nb.cells])
    assert not [n for n in NOISE if n in text], f"{name}: known noise in its outputs"


def test_outputs_refuse_runs_left_by_an_earlier_run(tmp_path, monkeypatch):
    """Twins come from one clean run: a runs folder holding a notebook's run is refused first."""
    from pr1lib.notebook.twins import make_outputs

    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path))
    (tmp_path / "04_sft_lora-tiny").mkdir()
    with pytest.raises(ValueError, match="one clean run"):
        make_outputs("smoke")


@pytest.mark.notebook
@pytest.mark.slow
def test_tour_command_prints_seconds_per_notebook_for_its_card(tmp_path, capsys, monkeypatch):
    import json

    from pr1lib.cli.main import main

    monkeypatch.setenv("PR1_RUNS_DIR", str(tmp_path))
    out = tmp_path / "tour"
    assert main(["tour", "--profile", "smoke", "--only", "01", "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert list(result["notebooks"]) == ["01_parallel_format"]
    assert 0 < result["notebooks"]["01_parallel_format"] <= result["seconds"]
    assert result["failed"] == 0
    assert result["report"] == "$PR1_RUNS_DIR/tour/report.html"  # no machine path in a card
