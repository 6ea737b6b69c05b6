"""One repository URL behind every badge and install cell; the install cell stops with one line.

Run: .venv/bin/python -m pytest tests/test_publish.py -q -p no:cacheprovider
"""

from __future__ import annotations

import os
import shutil

import nbclient
import nbformat
import pytest

from pr1lib.notebook.runner import list_notebooks, read
from pr1lib.store.paths import REPO_ROOT
from pr1lib.store.publish import (
    badge_line,
    binder_badge,
    colab_badge,
    install_cell,
    repo_branch,
    repo_url,
    set_repo_url,
)

URL = repo_url()
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _install_cells(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code" and "REPO_URL, BRANCH" in c.source]


@pytest.mark.parametrize("path", list_notebooks(), ids=lambda p: p.stem)
def test_every_notebook_installs_from_the_one_url(path):
    nb = read(path)
    assert _install_cells(nb) == [install_cell(URL)], "run `make repo-url URL=...`"
    assert nb.cells[0].source.rstrip().endswith(badge_line(URL, path.stem)), "no Colab badge"
    assert colab_badge(URL, path.stem) in README, f"README: no Colab badge for {path.stem}"
    assert binder_badge(URL, path.stem) in README, f"README: no Binder badge for {path.stem}"


def test_install_cell_runs_git_without_a_prompt():
    # a local Jupyter has a terminal behind it: git must fail at once, never ask for credentials
    cell = install_cell(URL)
    assert 'env = dict(os.environ, GIT_TERMINAL_PROMPT="0")' in cell
    assert "capture_output=True, env=env" in cell


def test_repo_url_rewrites_every_badge_and_install_cell(tmp_path):
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    shutil.copytree(REPO_ROOT / "notebooks", tmp_path / "notebooks")
    assert set_repo_url(URL, root=tmp_path) == []  # the committed files already agree
    fork = "https://github.com/someone-else/pr1-fork"
    changed = set_repo_url(fork, root=tmp_path, branch="dev")
    assert (repo_url(tmp_path), repo_branch(tmp_path)) == (fork, "dev")
    assert len(changed) == 2 + 2 * len(list_notebooks())
    old = URL.removeprefix("https://github.com/")
    for path in changed:
        assert old not in path.read_text(encoding="utf-8"), path.name
    stem = list_notebooks()[0].stem
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert colab_badge(fork, stem, "dev") in readme and binder_badge(fork, stem, "dev") in readme
    for suffix in (".ipynb", ".py"):
        nb = read(tmp_path / "notebooks" / f"{stem}{suffix}")
        assert _install_cells(nb) == [install_cell(fork, "dev")]
        assert nb.cells[0].source.rstrip().endswith(badge_line(fork, stem, "dev"))
    with pytest.raises(ValueError, match="not a GitHub repository URL"):
        set_repo_url("gitlab.com/x/y", root=tmp_path)


def _run_install_cell(tmp_path, setup: str):
    """The install cell in a kernel where ``pr1lib`` cannot be imported and git has no network."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import sys\nsys.modules['pr1lib'] = None  # not installed\n" + setup
            ),
            nbformat.v4.new_code_cell(install_cell(URL)),
            nbformat.v4.new_code_cell("print('the next cell ran')"),
        ]
    )
    env = {"GIT_ALLOW_PROTOCOL": "file"}  # https refused; the cell turns the prompt off
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = nbclient.NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        )
        with pytest.raises(nbclient.exceptions.CellExecutionError):
            client.execute()
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return nb


@pytest.mark.slow
def test_install_cell_without_network_says_one_line_and_stops(tmp_path):
    nb = _run_install_cell(tmp_path, "")
    error = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert len(error) == 1 and error[0].ename == "SetupStopped"
    assert len(error[0].traceback) == 1  # one line, no traceback
    assert error[0].traceback[0].startswith(f"Setup stopped: could not clone {URL}: no network")
    assert nb.cells[2].outputs == []  # Run All stops there


@pytest.mark.slow
def test_install_cell_with_a_broken_clone_names_pip(tmp_path):
    nb = _run_install_cell(tmp_path, "import os\nos.makedirs('pr1')  # cloned, but not a project")
    error = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert error[0].traceback == [
        "Setup stopped: pip could not install ./pr1 (to see why: pip install -e 'pr1[colab]')"
    ]
