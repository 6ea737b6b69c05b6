"""Where the repository is published: one URL and branch behind every badge and install cell.

The setting is ``[project.urls] Repository`` in ``pyproject.toml``, with the branch in
``[tool.pr1] branch``. The README's Colab and Binder badges, the Colab badge in each notebook's
first cell and the install cell of each notebook (``install_cell``: the third cell, which clones
that branch and installs ``pr1lib`` where it is missing, e.g. on Colab) are derived from them; a
fork runs ``make repo-url URL=https://github.com/OWNER/NAME [BRANCH=dev]`` (``set_repo_url``)
once to rewrite all of them, and tests/test_publish.py checks that they agree.

>>> owner_name("https://github.com/someone/pr1")
'someone/pr1'
"""

from __future__ import annotations

import re
from pathlib import Path

from pr1lib.store.paths import REPO_ROOT

URL_LINE = re.compile(r'^Repository = "(?P<url>[^"]+)"$', re.MULTILINE)
BRANCH_LINE = re.compile(r'^branch = "(?P<branch>[^"]+)"$', re.MULTILINE)  # under [tool.pr1]
# The forms a repository's owner/name takes in the files: install cells, pyproject and README
# text, Colab badges, Binder badges.
PREFIXES = ("https://github.com/", "colab.research.google.com/github/", "mybinder.org/v2/gh/")

INSTALL_CELL = '''\
REPO_URL, BRANCH = "{url}", "{branch}"  # a fork: `make repo-url URL=...`
import importlib.util
import os
import subprocess
import sys


class SetupStopped(Exception):  # shown as its one line, not as a traceback
    def _render_traceback_(self):
        return [f"Setup stopped: {{self}}"]


def quiet(*command):  # True when the command succeeded; git never waits for a password
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    return subprocess.run(command, capture_output=True, env=env).returncode == 0


if importlib.util.find_spec("pr1lib") is None:  # Colab, or not installed
    print(f"installing pr1lib from {{REPO_URL}} (a few minutes) ...")
    if not (os.path.isdir("pr1") or quiet("git", "clone", "-q", "--depth", "1",
                                          "--branch", BRANCH, REPO_URL, "pr1")):
        raise SetupStopped(f"could not clone {{REPO_URL}}: no network, or "
                           "no such repository or branch (a fork: set REPO_URL)")
    if not quiet(sys.executable, "-m", "pip", "install", "-q", "-e",
                 "pr1[colab]"):
        raise SetupStopped("pip could not install ./pr1 (to see why: "
                           "pip install -e 'pr1[colab]')")
    sys.path.insert(0, os.path.abspath("pr1"))'''


def repo_url(root: Path = REPO_ROOT) -> str:
    """The repository URL set in ``pyproject.toml``."""
    found = URL_LINE.search((Path(root) / "pyproject.toml").read_text(encoding="utf-8"))
    if found is None:
        raise ValueError("pyproject.toml has no [project.urls] Repository = \"...\" line")
    return found["url"]


def repo_branch(root: Path = REPO_ROOT) -> str:
    """The branch set in ``pyproject.toml`` (``[tool.pr1] branch``)."""
    found = BRANCH_LINE.search((Path(root) / "pyproject.toml").read_text(encoding="utf-8"))
    if found is None:
        raise ValueError("pyproject.toml has no [tool.pr1] branch = \"...\" line")
    return found["branch"]


def owner_name(url: str) -> str:
    """``OWNER/NAME`` of a GitHub URL (a ``ValueError`` for anything else)."""
    found = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?", url.strip())
    if found is None:
        raise ValueError(f"not a GitHub repository URL: {url!r} (https://github.com/OWNER/NAME)")
    return found[1]


def install_cell(url: str, branch: str | None = None) -> str:
    """The install cell every notebook carries, for ``url`` and ``branch`` (the setting's)."""
    return INSTALL_CELL.format(url=url, branch=branch or repo_branch())


def colab_badge(url: str, stem: str, branch: str | None = None) -> str:
    """The "Open in Colab" link for notebook ``stem`` (README and the notebook's first cell)."""
    return (
        f"https://colab.research.google.com/github/{owner_name(url)}/blob/"
        f"{branch or repo_branch()}/notebooks/{stem}.ipynb"
    )


def binder_badge(url: str, stem: str | None = None, branch: str | None = None) -> str:
    """The README's Binder link (JupyterLab on ``notebooks/``, or on one notebook)."""
    path = f"notebooks/{stem}.ipynb" if stem else "notebooks"
    where = f"{owner_name(url)}/{branch or repo_branch()}"
    return f"https://mybinder.org/v2/gh/{where}?urlpath=lab/tree/{path}"


def badge_line(url: str, stem: str, branch: str | None = None) -> str:
    """The Colab badge a notebook's first cell ends with."""
    image = "https://colab.research.google.com/assets/colab-badge.svg"
    return f"[![Open In Colab]({image})]({colab_badge(url, stem, branch)})"


def published_files(root: Path = REPO_ROOT) -> list[Path]:
    """The files that carry the URL: pyproject, README, every notebook source and twin."""
    root = Path(root)
    return [
        root / "pyproject.toml",
        root / "README.md",
        *sorted((root / "notebooks").glob("[0-9][0-9]_*.py")),
        *sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")),
    ]


def set_repo_url(url: str, root: Path = REPO_ROOT, branch: str | None = None) -> list[Path]:
    """Point every badge, install cell and ``pyproject.toml`` at ``url`` (and ``branch``: the
    setting's when ``None``); the files changed."""
    if branch is not None:
        check_branch(branch)
    root = Path(root)
    old, new = owner_name(repo_url(root)), owner_name(url)
    old_branch, branch = repo_branch(root), branch or repo_branch(root)
    updates = {}  # every file is read and rewritten in memory first: a failure writes nothing
    for path in published_files(root):
        text = path.read_text(encoding="utf-8")
        fresh = text
        for prefix in PREFIXES:
            fresh = fresh.replace(f"{prefix}{old}", f"{prefix}{new}")
        fresh = _with_branch(fresh, new, old_branch, branch)
        if path.suffix in (".py", ".ipynb"):
            fresh = _notebook_text(fresh, path, url, branch)
        if fresh != text:
            updates[path] = fresh
    for path, fresh in updates.items():
        path.write_text(fresh, encoding="utf-8")
    return list(updates)


BRANCH_NAME = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._/-]*")


def check_branch(branch: str) -> None:
    """Refuse a name git would not take for a branch (the badges and install cells carry it).

    >>> check_branch("main"), check_branch("feature/x-1")
    (None, None)
    >>> check_branch("a b")
    Traceback (most recent call last):
    ...
    ValueError: --branch 'a b' is not a git branch name (letters, digits, '.', '_', '-', '/'; no '..', no '.lock' or '/' at the end)
    """  # noqa: E501 - doctest output stays whole
    bad = (
        not BRANCH_NAME.fullmatch(branch)
        or ".." in branch
        or "//" in branch
        or branch.endswith((".lock", "/", "."))
    )
    if bad:
        raise ValueError(
            f"--branch {branch!r} is not a git branch name (letters, digits, '.', '_', '-', '/'; "
            "no '..', no '.lock' or '/' at the end)"
        )


def _with_branch(text: str, owner: str, old: str, new: str) -> str:
    text = text.replace(f"{owner}/blob/{old}/", f"{owner}/blob/{new}/")
    text = text.replace(f"gh/{owner}/{old}?", f"gh/{owner}/{new}?")
    return BRANCH_LINE.sub(f'branch = "{new}"', text)


INSTALL_SPAN = re.compile(
    r'^REPO_URL.*?sys\.path\.insert\(0, os\.path\.abspath\("pr1"\)\)', re.M | re.S
)


def _notebook_text(text: str, path: Path, url: str, branch: str) -> str:
    """A notebook source (``.py``) or twin with today's install cell and first-cell badge."""
    if path.suffix == ".ipynb":
        import nbformat

        nb = nbformat.reads(text, 4)
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.source.startswith("REPO_URL"):
                cell.source = install_cell(url, branch)
        nb.cells[0].source = _with_badge(nb.cells[0].source, badge_line(url, path.stem, branch))
        return nbformat.writes(nb) + "\n"
    text = INSTALL_SPAN.sub(lambda _: install_cell(url, branch), text, count=1)
    head, sep, rest = text.partition("\n# %%")  # the first cell, then the others
    first = "\n".join(
        line[2:] if line.startswith("# ") else line[1:] for line in head.splitlines()[1:]
    )
    cell = _with_badge(first, badge_line(url, path.stem, branch))
    lines = [f"# {line}" if line else "#" for line in cell.splitlines()]
    return "\n".join([head.splitlines()[0], *lines]) + "\n" + sep + rest  # a blank line, then


def _with_badge(markdown: str, badge: str) -> str:
    """A first cell's markdown ending with ``badge`` (an old badge line replaced)."""
    lines = [line for line in markdown.rstrip().splitlines() if "colab-badge.svg" not in line]
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join([*lines, "", badge])
